//! A disk that is a file on the debug host, reached through ARM semihosting (`SYS_OPEN`,
//! `SYS_SEEK`, `SYS_READ`, `SYS_WRITE`, `SYS_FLEN`, `SYS_CLOSE`): how raidcore runs on an
//! emulated Cortex-M (QEMU `-semihosting`) or on a board under a debug probe with real disk
//! images.
//!
//! The disk logic ([`SemihostingDisk`]) is generic over the [`Semihost`] calls so it builds and
//! is tested anywhere; [`ArmSemihost`] (Cortex-M targets only) makes the real calls through
//! `cortex-m-semihosting`. Semihosting passes file positions as one 32-bit word on these
//! targets, so an image is at most 4 GiB - 1 bytes. Every call halts the core until the host
//! answers: fine for tests, far too slow for production I/O.
//!
//! Without a debugger or QEMU attached, a semihosting call is a breakpoint that nobody services:
//! the core locks up or takes a HardFault. Only call it where a host is present.

use core::ffi::CStr;

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io};

/// A file handle returned by the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Handle(pub usize);

/// How to open a host file (the semihosting `fopen` modes used here, all binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpenMode {
    /// `"r+b"`: read and write an existing file.
    ReadWrite,
    /// `"w+b"`: create or truncate, read and write.
    Create,
}

/// The host reported that a semihosting call failed (a negative result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HostFailed;

/// The semihosting calls a [`SemihostingDisk`] needs, in their host-protocol meaning. Each
/// returns `Err(HostFailed)` where the host reported failure.
pub trait Semihost {
    /// `SYS_OPEN`.
    fn open(&mut self, path: &CStr, mode: OpenMode) -> Result<Handle, HostFailed>;
    /// `SYS_SEEK` to absolute byte position `pos`.
    fn seek(&mut self, h: Handle, pos: u32) -> Result<(), HostFailed>;
    /// `SYS_READ`: returns how many bytes were **not** read (0 = all of `buf`).
    fn read(&mut self, h: Handle, buf: &mut [u8]) -> usize;
    /// `SYS_WRITE`: returns how many bytes were **not** written (0 = all of `buf`).
    fn write(&mut self, h: Handle, buf: &[u8]) -> usize;
    /// `SYS_FLEN`: the file's length in bytes.
    fn flen(&mut self, h: Handle) -> Result<u32, HostFailed>;
    /// `SYS_CLOSE`.
    fn close(&mut self, h: Handle);
}

/// Which host call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HostOp {
    /// `SYS_OPEN` failed (no such file, no permission).
    Open,
    /// `SYS_SEEK` failed.
    Seek,
    /// `SYS_READ` returned fewer bytes than asked (the image is shorter than it was).
    Read,
    /// `SYS_WRITE` wrote fewer bytes than asked (host disk full, I/O error).
    Write,
    /// `SYS_FLEN` failed, or the length is not a whole number of blocks.
    Length,
}

/// An error of [`SemihostingDisk`]: its kind and the host call that failed (`None` for a
/// request refused before any call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SemihostingError {
    kind: ErrorKind,
    op: Option<HostOp>,
}

impl SemihostingError {
    /// The host call that failed.
    pub fn op(&self) -> Option<HostOp> {
        self.op
    }
}

impl raidcore_hal::Error for SemihostingError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl core::fmt::Display for SemihostingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "semihosting disk: {} ({:?})", self.kind, self.op)
    }
}

fn host(kind: ErrorKind, op: HostOp) -> SemihostingError {
    SemihostingError { kind, op: Some(op) }
}

/// A host file as a raidcore [`BlockDevice`]. Block `lba` is bytes `lba * block_size ..` of the
/// file. `flush` is a no-op: semihosting has no fsync, the data is as durable as the host makes
/// its page cache.
#[derive(Debug)]
pub struct SemihostingDisk<S: Semihost> {
    host: S,
    handle: Handle,
    block_size: BlockSize,
    blocks: u64,
}

impl<S: Semihost> SemihostingDisk<S> {
    /// Opens an existing image file; its length must be a non-zero whole number of blocks.
    pub fn open(mut host: S, path: &CStr, block_size: BlockSize) -> Result<Self, SemihostingError> {
        let handle = host
            .open(path, OpenMode::ReadWrite)
            .map_err(|HostFailed| host_err(HostOp::Open))?;
        let len = match host.flen(handle) {
            Ok(len) if len > 0 && (len as usize).is_multiple_of(block_size.bytes()) => len,
            _ => {
                host.close(handle);
                return Err(host_err(HostOp::Length));
            }
        };
        let blocks = u64::from(len) / block_size.bytes() as u64;
        Ok(SemihostingDisk {
            host,
            handle,
            block_size,
            blocks,
        })
    }

    /// Creates (or truncates) an image file of `blocks` blocks, all zero (the file is extended by
    /// writing its last byte, so it may be sparse on the host).
    pub fn create(
        mut host: S,
        path: &CStr,
        block_size: BlockSize,
        blocks: u64,
    ) -> Result<Self, SemihostingError> {
        let len = blocks
            .checked_mul(block_size.bytes() as u64)
            .and_then(|l| u32::try_from(l).ok())
            .filter(|&l| l > 0)
            .ok_or(SemihostingError {
                kind: ErrorKind::OutOfRange,
                op: None,
            })?;
        let handle = host
            .open(path, OpenMode::Create)
            .map_err(|HostFailed| host_err(HostOp::Open))?;
        let mut disk = SemihostingDisk {
            host,
            handle,
            block_size,
            blocks,
        };
        disk.host
            .seek(handle, len - 1)
            .map_err(|HostFailed| host_err(HostOp::Seek))?;
        if disk.host.write(handle, &[0]) != 0 {
            return Err(host_err(HostOp::Write));
        }
        Ok(disk)
    }

    /// Closes the file and gives the host interface back.
    pub fn close(mut self) -> S {
        self.host.close(self.handle);
        self.host
    }

    fn seek_to(&mut self, lba: u64) -> Result<(), SemihostingError> {
        let pos =
            u32::try_from(lba * self.block_size.bytes() as u64).map_err(|_| SemihostingError {
                kind: ErrorKind::OutOfRange,
                op: None,
            })?;
        self.host
            .seek(self.handle, pos)
            .map_err(|HostFailed| host_err(HostOp::Seek))
    }
}

fn host_err(op: HostOp) -> SemihostingError {
    host(ErrorKind::Other, op)
}

impl<S: Semihost> ErrorType for SemihostingDisk<S> {
    type Error = SemihostingError;
}

impl<S: Semihost> BlockDevice for SemihostingDisk<S> {
    fn block_size(&self) -> BlockSize {
        self.block_size
    }

    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SemihostingError> {
        check_io(self.block_size, self.blocks, lba, buf.len())
            .map_err(|kind| SemihostingError { kind, op: None })?;
        self.seek_to(lba)?;
        let missing = self.host.read(self.handle, buf);
        if missing != 0 {
            // The image shrank under us: the blocks past its end cannot be read.
            let got = buf.len().saturating_sub(missing) / self.block_size.bytes();
            return Err(host(
                ErrorKind::Medium {
                    lba: lba + got as u64,
                },
                HostOp::Read,
            ));
        }
        Ok(())
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), SemihostingError> {
        check_io(self.block_size, self.blocks, lba, buf.len())
            .map_err(|kind| SemihostingError { kind, op: None })?;
        self.seek_to(lba)?;
        if self.host.write(self.handle, buf) != 0 {
            return Err(host_err(HostOp::Write));
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SemihostingError> {
        Ok(())
    }
}

/// The real semihosting calls, through `cortex-m-semihosting` (Cortex-M targets only).
#[cfg(all(target_arch = "arm", target_os = "none"))]
#[derive(Debug, Clone, Copy, Default)]
pub struct ArmSemihost;

#[cfg(all(target_arch = "arm", target_os = "none"))]
mod arm {
    use super::{ArmSemihost, CStr, Handle, HostFailed, OpenMode, Semihost};
    use cortex_m_semihosting::{nr, syscall};

    /// A semihosting result word read as signed: negative means failure.
    fn ok(r: usize) -> Result<usize, HostFailed> {
        if r.cast_signed() < 0 {
            Err(HostFailed)
        } else {
            Ok(r)
        }
    }

    impl Semihost for ArmSemihost {
        fn open(&mut self, path: &CStr, mode: OpenMode) -> Result<Handle, HostFailed> {
            let mode = match mode {
                OpenMode::ReadWrite => nr::open::RW_BINARY,
                OpenMode::Create => nr::open::RW_TRUNC_BINARY,
            };
            let bytes = path.to_bytes();
            // SAFETY: SYS_OPEN reads `len` bytes of a NUL-terminated path that lives for the call.
            let r = unsafe { syscall(nr::OPEN, &[bytes.as_ptr() as usize, mode, bytes.len()]) };
            ok(r).map(Handle)
        }

        fn seek(&mut self, h: Handle, pos: u32) -> Result<(), HostFailed> {
            // SAFETY: SYS_SEEK takes two words and touches no memory of ours.
            let r = unsafe { syscall(nr::SEEK, &[h.0, pos as usize]) };
            ok(r).map(|_| ())
        }

        fn read(&mut self, h: Handle, buf: &mut [u8]) -> usize {
            // SAFETY: the host writes at most `buf.len()` bytes into `buf`, which is borrowed
            // mutably for the call.
            unsafe { syscall(nr::READ, &[h.0, buf.as_mut_ptr() as usize, buf.len()]) }
        }

        fn write(&mut self, h: Handle, buf: &[u8]) -> usize {
            // SAFETY: the host reads `buf.len()` bytes of `buf`, borrowed for the call.
            unsafe { syscall(nr::WRITE, &[h.0, buf.as_ptr() as usize, buf.len()]) }
        }

        fn flen(&mut self, h: Handle) -> Result<u32, HostFailed> {
            // SAFETY: SYS_FLEN takes one word and touches no memory of ours.
            let r = unsafe { syscall(nr::FLEN, &[h.0]) };
            ok(r).map(|l| l as u32)
        }

        fn close(&mut self, h: Handle) {
            // SAFETY: SYS_CLOSE takes one word and touches no memory of ours.
            let _ = unsafe { syscall(nr::CLOSE, &[h.0]) };
        }
    }
}
