//! A disk-image file.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io, check_range};

use super::{DiskError, byte_offset};

/// How a [`FileDisk`] is created or opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileDiskOptions {
    /// [`FileDisk::create_with`] replaces an existing file instead of refusing. Default `false`.
    pub overwrite: bool,
    /// `flush` calls `fdatasync(2)` so that flushed writes survive a crash of this machine.
    /// Default `true`. Setting it to `false` makes `flush` a no-op: much faster for tests and
    /// benchmarks whose images are thrown away, and the images are still correct as long as the
    /// operating system does not crash (the page cache holds every write).
    pub sync_on_flush: bool,
    /// [`FileDisk::create_with`] allocates the whole image on the host file system
    /// (`posix_fallocate(3)`), so a full file system is met at creation rather than under
    /// the pool's writes. Default `false` (sparse).
    pub preallocate: bool,
}

impl Default for FileDiskOptions {
    fn default() -> Self {
        Self {
            overwrite: false,
            sync_on_flush: true,
            preallocate: false,
        }
    }
}

/// A disk stored in a regular file (a raw disk image, usable by `qemu-img`, `nbdkit` and
/// friends): block `lba` is at byte `lba * block_size`. Images are created sparse (`set_len`), so
/// a 300 GB image costs the disk space of what is written. I/O is positional (`pread`/`pwrite`),
/// so there is no seek state.
///
/// Errors of the operating system keep the `io::Error` inside [`DiskError`]; their kind is
/// [`ErrorKind::Timeout`] for a timed-out call, [`ErrorKind::DeviceFailed`] when the file has
/// shrunk under the disk (unexpected end of file), [`ErrorKind::NoSpace`] when the file system
/// holding it is full (ENOSPC, EDQUOT) and [`ErrorKind::ReadOnly`] when it went read-only
/// (EROFS) — conditions of the host, for which the pool suspends instead of failing the
/// member — and [`ErrorKind::Other`] otherwise.
#[derive(Debug)]
pub struct FileDisk {
    file: File,
    path: PathBuf,
    block_size: BlockSize,
    block_count: u64,
    sync_on_flush: bool,
}

fn io_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::UnexpectedEof => ErrorKind::DeviceFailed,
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => ErrorKind::NoSpace,
        io::ErrorKind::ReadOnlyFilesystem => ErrorKind::ReadOnly,
        _ => match e.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT) => ErrorKind::NoSpace,
            Some(libc::EROFS) => ErrorKind::ReadOnly,
            _ => ErrorKind::Other,
        },
    }
}

fn io_err(context: &'static str, e: io::Error) -> DiskError {
    DiskError::io(io_kind(&e), context, e)
}

/// Allocates the first `len` bytes of `file` on its file system.
///
/// Errors: [`ErrorKind::NoSpace`] when the file system has not that much room.
fn preallocate(file: &File, len: u64) -> Result<(), DiskError> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| {
        DiskError::with_context(ErrorKind::OutOfRange, "disk image size (too large)")
    })?;
    // SAFETY: a valid open descriptor; posix_fallocate reads nothing from memory.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    match rc {
        0 => Ok(()),
        e => Err(io_err(
            "allocating disk image (pass --sparse to make sparse images instead)",
            io::Error::from_raw_os_error(e),
        )),
    }
}

/// The blocks of the open image `file`.
///
/// Errors: [`ErrorKind::Misaligned`] if its length is not a non-zero multiple of the block
/// size; I/O errors as for [`FileDisk`].
fn whole_blocks(file: &File, block_size: BlockSize) -> Result<u64, DiskError> {
    let len = file
        .metadata()
        .map_err(|e| io_err("reading disk image size", e))?
        .len();
    let bs = block_size.bytes() as u64;
    if len == 0 || !len.is_multiple_of(bs) {
        return Err(DiskError::with_context(
            ErrorKind::Misaligned,
            "disk image length is not a whole, non-zero number of blocks",
        ));
    }
    Ok(len / bs)
}

/// What a lock refusal says: another process holds the image.
const IN_USE: &str = "disk image is locked: another process has this pool open (stop that server \
                      or command first)";

/// Takes the exclusive advisory lock of an open image (`flock(2)`), held until it is released
/// (a [`FileDisk`] releases it when dropped). Two processes with the same pool open would each write the members from their own
/// in-memory state (log head, map, superblock generation) and destroy each other's data.
fn lock(file: &File) -> Result<(), DiskError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(DiskError::with_context(ErrorKind::Other, IN_USE)),
        Err(TryLockError::Error(e)) => Err(io_err("locking disk image", e)),
    }
}

impl Drop for FileDisk {
    /// Releases the lock explicitly: closing only drops this descriptor, and a child another
    /// thread has just forked (and not yet exec'd) holds a copy of it, which would keep the
    /// image locked for a moment after this value is gone.
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

impl FileDisk {
    /// Whether `err` is the refusal of an image another process holds (its lock).
    #[must_use]
    pub fn is_in_use(err: &DiskError) -> bool {
        err.kind() == ErrorKind::Other && err.context() == IN_USE && err.io_error().is_none()
    }

    /// Checks that no process holds the image at `path` open as a [`FileDisk`] (its lock), so
    /// that it may be removed or replaced. A missing file is not in use.
    ///
    /// # Errors
    /// The image is locked ([`ErrorKind::Other`], "in use"), or could not be opened.
    pub fn ensure_not_in_use(path: impl AsRef<Path>) -> Result<(), DiskError> {
        match File::open(path.as_ref()) {
            Ok(f) => {
                lock(&f)?;
                // Released at once, not at close (see `Drop`): the probe must not itself keep
                // the image locked.
                let _ = f.unlock();
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("opening disk image", e)),
        }
    }

    /// Creates a new all-zero (sparse) image of `block_count` blocks at `path`, with default
    /// [`FileDiskOptions`]: refuses to replace an existing file.
    pub fn create(
        path: impl AsRef<Path>,
        block_size: BlockSize,
        block_count: u64,
    ) -> Result<Self, DiskError> {
        Self::create_with(path, block_size, block_count, FileDiskOptions::default())
    }

    /// Creates a new all-zero image of `block_count` blocks at `path`: sparse, or allocated
    /// whole with `opts.preallocate`.
    ///
    /// Errors: [`ErrorKind::OutOfRange`] if `block_count` is 0 or the size overflows; an
    /// [`ErrorKind::Other`] wrapping `io::ErrorKind::AlreadyExists` if the file exists and
    /// `opts.overwrite` is false (the file is left untouched); [`ErrorKind::Other`] ("in use")
    /// if another process holds the file's lock (it is left untouched); other I/O errors as
    /// for the type. The image stays locked (`flock(2)`, exclusive) while this value lives.
    pub fn create_with(
        path: impl AsRef<Path>,
        block_size: BlockSize,
        block_count: u64,
        opts: FileDiskOptions,
    ) -> Result<Self, DiskError> {
        let path = path.as_ref();
        let len = block_count
            .checked_mul(block_size.bytes() as u64)
            .filter(|&l| l > 0 && i64::try_from(l).is_ok())
            .ok_or(DiskError::with_context(
                ErrorKind::OutOfRange,
                "disk image size (zero blocks or too large)",
            ))?;
        let mut oo = OpenOptions::new();
        oo.read(true).write(true);
        if opts.overwrite {
            // Not `truncate`: an image another process holds must be refused, not emptied.
            oo.create(true).truncate(false);
        } else {
            oo.create_new(true);
        }
        let file = oo
            .open(path)
            .map_err(|e| io_err("creating disk image", e))?;
        lock(&file)?;
        if opts.overwrite {
            file.set_len(0)
                .map_err(|e| io_err("emptying disk image", e))?;
        }
        file.set_len(len)
            .map_err(|e| io_err("sizing disk image", e))?;
        if opts.preallocate {
            preallocate(&file, len)?;
        }
        Ok(Self {
            file,
            path: path.to_path_buf(),
            block_size,
            block_count,
            sync_on_flush: opts.sync_on_flush,
        })
    }

    /// Opens an existing image with default [`FileDiskOptions`]; the block count is the file
    /// length divided by the block size.
    pub fn open(path: impl AsRef<Path>, block_size: BlockSize) -> Result<Self, DiskError> {
        Self::open_with(path, block_size, FileDiskOptions::default())
    }

    /// Opens an existing image (`opts.overwrite` is ignored).
    ///
    /// Errors: [`ErrorKind::Misaligned`] if the file length is not a non-zero multiple of the
    /// block size (nothing is changed); [`ErrorKind::Other`] ("in use") if another process
    /// holds the image's lock; I/O errors as for the type (a missing file is
    /// [`ErrorKind::Other`] wrapping `io::ErrorKind::NotFound`). The image stays locked
    /// (`flock(2)`, exclusive) while this value lives, so a second opener is refused.
    pub fn open_with(
        path: impl AsRef<Path>,
        block_size: BlockSize,
        opts: FileDiskOptions,
    ) -> Result<Self, DiskError> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_err("opening disk image", e))?;
        lock(&file)?;
        let block_count = whole_blocks(&file, block_size)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            block_size,
            block_count,
            sync_on_flush: opts.sync_on_flush,
        })
    }

    /// Opens an existing image for reading only (`O_RDONLY`, works on a read-only mount),
    /// under a shared lock: other readers may hold it too, a process that has the image open
    /// to write is refused, and none can open it to write meanwhile. Writes fail (the file is
    /// not writable); `flush` does nothing.
    ///
    /// Errors: as [`FileDisk::open_with`].
    pub fn open_read_only(
        path: impl AsRef<Path>,
        block_size: BlockSize,
    ) -> Result<Self, DiskError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| io_err("opening disk image", e))?;
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(DiskError::with_context(ErrorKind::Other, IN_USE));
            }
            Err(TryLockError::Error(e)) => return Err(io_err("locking disk image", e)),
        }
        let block_count = whole_blocks(&file, block_size)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            block_size,
            block_count,
            sync_on_flush: false,
        })
    }

    /// The image's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `flush` calls `fdatasync(2)`.
    #[must_use]
    pub fn sync_on_flush(&self) -> bool {
        self.sync_on_flush
    }

    /// Capacity in bytes.
    #[must_use]
    pub fn capacity_bytes(&self) -> u64 {
        byte_offset(self.block_size, self.block_count)
    }
}

impl ErrorType for FileDisk {
    type Error = DiskError;
}

impl BlockDevice for FileDisk {
    fn block_size(&self) -> BlockSize {
        self.block_size
    }

    fn block_count(&self) -> u64 {
        self.block_count
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), DiskError> {
        check_io(self.block_size, self.block_count, lba, buf.len())?;
        self.file
            .read_exact_at(buf, byte_offset(self.block_size, lba))
            .map_err(|e| io_err("reading disk image", e))
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), DiskError> {
        check_io(self.block_size, self.block_count, lba, buf.len())?;
        self.file
            .write_all_at(buf, byte_offset(self.block_size, lba))
            .map_err(|e| io_err("writing disk image", e))
    }

    fn flush(&mut self) -> Result<(), DiskError> {
        if self.sync_on_flush {
            self.file
                .sync_data()
                .map_err(|e| io_err("syncing disk image", e))?;
        }
        Ok(())
    }

    /// Checks the range and keeps the data (allowed: trim is advisory). Punching holes would need
    /// `fallocate(2)`, which std does not offer.
    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), DiskError> {
        check_range(self.block_count, lba, blocks)?;
        Ok(())
    }
}
