//! A pool kept as disk images in a directory: `disk0.img`, `disk1.img`, … (members first, then
//! hot spares), plus `raidcore-sim.json`, a small description the simulator needs before it can
//! read a superblock (block size, device model). Everything else — which image fills which
//! member slot, which are spares, member states, LUNs — is read from the superblocks, so the
//! images alone are the pool.
//!
//! Each image is opened as a [`FileDisk`] and wrapped into the simulator's standard member
//! ([`SimMember`]: fault injection inside, a device model on a virtual clock outside), so the
//! same pool value serves command-line management, workloads in virtual time and the NBD export.
//!
//! Images are found by name (`disk<number>.img`); the slot an image fills is found by its disk
//! GUID in the newest superblock generation. An image the pool moved on without (a failed
//! member) is reported as stale and left alone; [`DirPool::replace`] renames it to
//! `disk<number>.img.failed-g<generation>` before a blank image takes its name.
//!
//! [`DirPool::create_in_memory`] builds the same pool on memory disks instead, with no
//! directory (for benchmarks that compare against RAM-backed servers).

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use raidcore::format::{Role, Superblock};
use raidcore::pool::{
    ImportOptions, ImportReport, IoError, LunError, OpenError, Pool, PoolConfig, Status,
    read_superblock,
};
use raidcore::raid::{DiskState, Level};
use raidcore_hal::{BlockSize, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::clock::{IoTracker, SimClock};
use crate::disk::{FileDisk, FileDiskOptions, MemDisk, NullDisk, SimDisk, SimError};
use crate::fault::{FaultConfig, MemberHandles, SimMember, sim_member};
use crate::model::ModelKind;

/// Most member + spare disks of a simulator pool.
pub const MAX_DISKS: usize = 16;
/// Most LUNs of a simulator pool.
pub const MAX_LUNS: usize = 16;
/// Map cache pages of a simulator pool (4032 arena bytes each).
pub const MAP_PAGES: usize = 256;
/// Open extents (write streams) of a simulator pool.
pub const OPEN_EXTENTS: usize = 16;

/// The pool type the simulator uses: [`SimMember`] disks, a `Vec<u8>` arena.
pub type SimPool = Pool<SimMember, Vec<u8>, MAX_DISKS, MAX_LUNS, MAP_PAGES, OPEN_EXTENTS>;

/// Name of the description file in a pool directory.
pub const META_FILE: &str = "raidcore-sim.json";

/// File name of image number `n`.
#[must_use]
pub fn image_name(n: usize) -> String {
    format!("disk{n}.img")
}

/// Why a pool directory could not be created, opened or changed.
#[derive(Debug)]
pub enum DirError {
    /// A file-system operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        err: io::Error,
    },
    /// A simulated disk refused (creating or opening an image).
    Disk {
        /// The image.
        path: PathBuf,
        /// The cause.
        err: SimError,
    },
    /// The pool could not be imported.
    Open(OpenError),
    /// The pool could not be created (its layout on these disks).
    Create(OpenError),
    /// A data-path or management call of the pool failed.
    Pool(IoError),
    /// A LUN could not be created.
    Lun(LunError),
    /// The request does not make sense; the text says why. Nothing was changed.
    Invalid(String),
    /// Another process has the pool (its directory or an image) open; the text names which.
    /// Nothing was changed.
    InUse(String),
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirError::Io { what, err } => write!(f, "{what}: {err}"),
            DirError::Disk { path, err } => write!(f, "{}: {err}", path.display()),
            DirError::Open(e) => write!(f, "opening the pool: {e}"),
            DirError::Create(e) => write!(f, "creating the pool: {e}"),
            DirError::Pool(e) => write!(f, "pool: {e}"),
            DirError::Lun(e) => write!(f, "creating a LUN: {e}"),
            DirError::Invalid(s) | DirError::InUse(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for DirError {}

impl From<IoError> for DirError {
    fn from(e: IoError) -> Self {
        DirError::Pool(e)
    }
}

impl From<OpenError> for DirError {
    fn from(e: OpenError) -> Self {
        DirError::Open(e)
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> DirError {
    let what = what.into();
    move |err| DirError::Io { what, err }
}

/// What `raidcore-sim.json` records: what is needed to open the images before their
/// superblocks can be read, and the device model they are timed with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirMeta {
    /// Block size of every image, in bytes (512 or 4096).
    pub block_bytes: usize,
    /// Device model name (see [`ModelKind`]).
    pub model: String,
    /// Images created with the pool (members + spares); informational.
    pub images: usize,
}

impl DirMeta {
    fn block_size(&self) -> Result<BlockSize, DirError> {
        match self.block_bytes {
            512 => Ok(BlockSize::B512),
            4096 => Ok(BlockSize::B4096),
            b => Err(DirError::Invalid(format!(
                "{META_FILE}: block size {b} is neither 512 nor 4096"
            ))),
        }
    }

    fn model_kind(&self) -> Result<ModelKind, DirError> {
        parse_model(&self.model).map_err(DirError::Invalid)
    }
}

/// Parses a device model name: the names of [`ModelKind`] and the short forms `memory`
/// (no latency), `ssd`, `nvme`, `sd`.
pub fn parse_model(s: &str) -> Result<ModelKind, String> {
    match s.to_ascii_lowercase().as_str() {
        "memory" | "mem" | "instant" | "none" => Ok(ModelKind::Instant),
        "hdd" | "hdd10k" => Ok(ModelKind::Hdd10k),
        "ssd" | "sata-ssd" => Ok(ModelKind::SataSsd),
        "nvme" | "nvme-ssd" => Ok(ModelKind::NvmeSsd),
        "sd" | "sd-card" => Ok(ModelKind::SdCard),
        _ => Err(format!(
            "unknown device model {s:?} (expected memory, hdd10k, ssd, nvme or sd)"
        )),
    }
}

/// The command-line name of a model (`memory`, `hdd10k`, `ssd`, `nvme`, `sd`).
#[must_use]
pub const fn model_name(m: ModelKind) -> &'static str {
    match m {
        ModelKind::Instant => "memory",
        ModelKind::Hdd10k => "hdd10k",
        ModelKind::SataSsd => "ssd",
        ModelKind::NvmeSsd => "nvme",
        ModelKind::SdCard => "sd",
    }
}

/// Parses a RAID level name (`raid0`, `raid1`, `raid10`, `raid5`, `raid6`; the `raid` prefix is
/// optional).
pub fn parse_level(s: &str) -> Result<Level, String> {
    let t = s.to_ascii_lowercase();
    let t = t.strip_prefix("raid").unwrap_or(&t);
    match t {
        "0" => Ok(Level::Raid0),
        "1" => Ok(Level::Raid1),
        "10" => Ok(Level::Raid10),
        "5" => Ok(Level::Raid5),
        "6" => Ok(Level::Raid6),
        _ => Err(format!(
            "unknown RAID level {s:?} (expected raid0, raid1, raid10, raid5 or raid6)"
        )),
    }
}

/// Parses a size in bytes with an optional binary suffix: `4096`, `64K`, `256M`, `1G`, `2T`
/// (also `KiB`, `MiB`, … and lower case). Errors on overflow, zero is allowed.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits);
    if num.is_empty() {
        return Err(format!(
            "bad size {s:?}: expected a number with an optional K/M/G/T suffix"
        ));
    }
    let n: u64 = num.parse().map_err(|e| format!("bad size {s:?}: {e}"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("bad size suffix in {s:?} (use K, M, G or T)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// Formats bytes with a binary unit (`256 MiB`, `1.5 GiB`).
#[must_use]
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else if (v - v.round()).abs() < 0.005 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// How to build the simulated hardware under a pool directory's images.
#[derive(Debug, Clone, Copy)]
pub struct HwOptions {
    /// Device model; `None`: the one recorded in the directory.
    pub model: Option<ModelKind>,
    /// Seed of the members' fault generators (member `i` gets `seed + i`).
    pub seed: u64,
    /// `flush` of an image calls `fdatasync(2)` (see [`FileDiskOptions::sync_on_flush`]). Off for
    /// simulations whose images are thrown away.
    pub sync_on_flush: bool,
    /// Fault-injection behaviour of every member. The default here has no volatile cache: the
    /// simulated drives have their write cache off, like [`crate::model::Hdd10k`].
    pub faults: FaultConfig,
}

impl Default for HwOptions {
    fn default() -> Self {
        HwOptions {
            model: None,
            seed: 0,
            sync_on_flush: true,
            faults: FaultConfig {
                volatile_cache: false,
                ..FaultConfig::default()
            },
        }
    }
}

/// How [`DirPool::create`] lays out a new pool.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Member disks.
    pub disks: usize,
    /// Hot spares (numbered after the members).
    pub spares: usize,
    /// Size of every image, in bytes (a multiple of the block size).
    pub disk_bytes: u64,
    /// Block size of the images.
    pub block_size: BlockSize,
    /// Pool settings (level, strip size, extent size, …).
    pub config: PoolConfig,
    /// LUNs to create, named `lun0`, `lun1`, …
    pub luns: usize,
    /// Size of each LUN, in bytes (a multiple of 4 KiB).
    pub lun_bytes: u64,
    /// Pool UUID.
    pub uuid: [u8; 16],
    /// Replace images that exist already (otherwise creation refuses and changes nothing).
    pub overwrite: bool,
}

/// Where each image stands, as [`DirPool`] found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageInfo {
    /// Image number (`disk<number>.img`).
    pub number: usize,
    /// File name.
    pub file: String,
    /// `member`, `spare`, or `stale` (left out: the pool moved on without it, it holds no
    /// superblock of this pool, or its size makes it unusable).
    pub role: String,
    /// Member slot it fills, for members.
    pub slot: Option<usize>,
    /// Why it was left out, for stale images.
    pub note: Option<String>,
}

/// A pool open on the images of a directory, with the simulated hardware under it.
#[derive(Debug)]
pub struct DirPool {
    /// The directory (empty for a pool on memory disks, see [`DirPool::create_in_memory`]).
    pub dir: PathBuf,
    /// The pool.
    pub pool: SimPool,
    /// Virtual clock of the members' device models.
    pub clock: SimClock,
    /// Completion tracker shared by the members.
    pub tracker: IoTracker,
    /// Handles by image number (`None` for images not opened).
    pub handles: Vec<Option<MemberHandles>>,
    /// The images and their roles when the pool was opened (or created).
    pub images: Vec<ImageInfo>,
    /// What import found (default for a created pool).
    pub import: ImportReport,
    /// The description file's contents.
    pub meta: DirMeta,
    /// The model the members are timed with.
    pub model: ModelKind,
    /// The directory's lock ([`LOCK_FILE`]), held while this value lives (`None` in memory).
    lock: Option<DirLock>,
}

fn read_meta(dir: &Path) -> Result<DirMeta, DirError> {
    let p = dir.join(META_FILE);
    let text = fs::read_to_string(&p).map_err(io_err(format!(
        "reading {} (is {} a pool directory made by `raidcore-sim create`?)",
        p.display(),
        dir.display()
    )))?;
    serde_json::from_str(&text)
        .map_err(|e| DirError::Invalid(format!("{}: not a valid description: {e}", p.display())))
}

fn write_meta(dir: &Path, meta: &DirMeta) -> Result<(), DirError> {
    let p = dir.join(META_FILE);
    let mut text = serde_json::to_string_pretty(meta)
        .map_err(|e| DirError::Invalid(format!("encoding {META_FILE}: {e}")))?;
    text.push('\n');
    fs::write(&p, text).map_err(io_err(format!("writing {}", p.display())))
}

/// Image numbers present in `dir` (files named exactly `disk<number>.img`), ascending.
pub fn list_images(dir: &Path) -> Result<Vec<usize>, DirError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(format!("listing {}", dir.display())))? {
        let entry = entry.map_err(io_err(format!("listing {}", dir.display())))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(num) = name
            .strip_prefix("disk")
            .and_then(|r| r.strip_suffix(".img"))
            && !num.is_empty()
            && num.bytes().all(|b| b.is_ascii_digit())
            && let Ok(n) = num.parse::<usize>()
            && image_name(n) == name
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Builds the simulated member over `disk`.
fn member(
    disk: impl Into<SimDisk>,
    model: ModelKind,
    number: usize,
    hw: &HwOptions,
    clock: &SimClock,
    tracker: &IoTracker,
) -> (SimMember, MemberHandles) {
    sim_member(
        disk,
        model.build(),
        hw.seed.wrapping_add(number as u64),
        hw.faults,
        clock,
        tracker,
    )
}

/// Name of the lock file in a pool directory. A [`DirPool`] holds its exclusive advisory lock
/// (`flock(2)`) while it lives, so two processes never have one pool open, and `create` never
/// replaces a pool a server is exporting. The file itself is empty and stays.
pub const LOCK_FILE: &str = ".raidcore-sim.lock";

/// Subdirectory of a pool directory where `create --force` keeps the old pool until the new one
/// is made (and from where it puts it back if making the new one fails).
pub const REPLACED_DIR: &str = ".replaced-pool";

/// What a lock refusal says.
fn in_use_message(what: &Path) -> String {
    format!(
        "{} is locked: another raidcore-sim process (a server, or a command still running) has \
         this pool open; stop it first",
        what.display()
    )
}

/// The held lock of a pool directory; released when dropped.
#[derive(Debug)]
struct DirLock(fs::File);

impl Drop for DirLock {
    /// Unlocks explicitly (see [`FileDisk`]'s `Drop`): a child forked by another thread holds
    /// a copy of the descriptor until it execs, and closing ours would leave the lock held.
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Takes the exclusive lock of the pool directory `dir` ([`LOCK_FILE`], made if missing).
fn lock_dir(dir: &Path) -> Result<DirLock, DirError> {
    let p = dir.join(LOCK_FILE);
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&p)
        .map_err(io_err(format!("opening the lock file {}", p.display())))?;
    lock_opened(dir, f)
}

/// Locks `f`, the lock file of `dir` as opened earlier, if it is still the file the path names.
/// A failed `create` unlinks the lock file of the directory it made (holding the lock); a
/// process that opened the file before that and locks it after would hold a lock on a file no
/// one else can find, so it refuses instead.
fn lock_opened(dir: &Path, f: fs::File) -> Result<DirLock, DirError> {
    use std::os::unix::fs::MetadataExt;
    let p = dir.join(LOCK_FILE);
    match f.try_lock() {
        Ok(()) => {
            let same = match (f.metadata(), fs::metadata(&p)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if same {
                Ok(DirLock(f))
            } else {
                Err(DirError::InUse(format!(
                    "{} changed while this command locked it (another raidcore-sim process \
                     created or removed a pool there); try again",
                    dir.display()
                )))
            }
        }
        Err(fs::TryLockError::WouldBlock) => Err(DirError::InUse(in_use_message(dir))),
        Err(fs::TryLockError::Error(err)) => Err(DirError::Io {
            what: format!("locking {}", p.display()),
            err,
        }),
    }
}

/// `e`, a failure to read the description of `dir`, explained where possible: the pool is in
/// use (a `create --force` in progress has moved the description aside; checked only when
/// `probe_lock`, as the caller must not hold the lock itself), or an interrupted
/// `create --force` left the old pool in [`REPLACED_DIR`].
fn missing_meta(dir: &Path, e: DirError, probe_lock: bool) -> DirError {
    if probe_lock
        && dir.join(LOCK_FILE).exists()
        && let Err(in_use @ DirError::InUse(_)) = lock_dir(dir)
    {
        return in_use;
    }
    let aside = dir.join(REPLACED_DIR);
    if aside.exists() {
        return DirError::Invalid(format!(
            "{e}; {} holds a pool an interrupted `create --force` moved aside: move its files \
             back into {} to keep it",
            aside.display(),
            dir.display()
        ));
    }
    e
}

/// An image's refusal, as [`DirError::InUse`] when it is a lock.
fn in_use_or_disk(path: PathBuf, err: SimError) -> DirError {
    if FileDisk::is_in_use(&err) {
        DirError::InUse(in_use_message(&path))
    } else {
        DirError::Disk { path, err }
    }
}

/// Moves the files `names` back from `aside` into `dir` and removes `aside`; true if all of
/// them went back.
fn put_back(dir: &Path, aside: &Path, names: &[String]) -> bool {
    let mut all = true;
    for name in names {
        all &= fs::rename(aside.join(name), dir.join(name)).is_ok();
    }
    if all {
        let _ = fs::remove_dir(aside);
    }
    all
}

/// `e`, with where the old pool is if it could not be put back.
fn with_restore_note(e: DirError, restored: bool, aside: &Path) -> DirError {
    if restored {
        e
    } else {
        DirError::Invalid(format!(
            "{e}; the old pool could not be put back and is in {}",
            aside.display()
        ))
    }
}

impl DirPool {
    /// Creates a new pool in `dir` (created if missing): the images, the pool, the LUNs.
    ///
    /// The directory's lock ([`LOCK_FILE`]) is taken first and held by the returned value, so
    /// a concurrent `create`, or a server with the old pool open, is refused before anything
    /// is touched. With `opts.overwrite`, the old pool's images and description are moved into
    /// [`REPLACED_DIR`] while the new pool is made, put back if that fails, and deleted only
    /// once it has succeeded: a failed `create --force` leaves the old pool as it was.
    ///
    /// Errors: [`DirError::Invalid`] for a bad layout, existing images without
    /// `opts.overwrite`, or a [`REPLACED_DIR`] left by an interrupted `create --force`
    /// (nothing is written then); [`DirError::InUse`] if another process holds the directory
    /// or an image; pool creation errors as [`DirError::Create`].
    pub fn create(
        dir: &Path,
        opts: &CreateOptions,
        model: ModelKind,
        hw: &HwOptions,
    ) -> Result<DirPool, DirError> {
        Self::check_layout(Some(dir), opts, hw)?;
        // The directories this call makes, innermost first, so a failure removes them again.
        let made_dirs: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && a.symlink_metadata().is_err())
            .map(Path::to_path_buf)
            .collect();
        let remove_made_dirs = || {
            for d in &made_dirs {
                let _ = fs::remove_dir(d);
            }
        };
        fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let mut lock = match lock_dir(dir) {
            Ok(l) => Some(l),
            Err(e) => {
                remove_made_dirs();
                return Err(e);
            }
        };
        let made = Self::create_locked(dir, opts, model, hw, &mut lock);
        if made.is_err() && !made_dirs.is_empty() {
            // Leave no directory behind either. The lock file goes first, while the lock is
            // still held: a process that opened it meanwhile finds it unlinked once it has
            // the lock, and refuses (`lock_opened`).
            let _ = fs::remove_file(dir.join(LOCK_FILE));
            remove_made_dirs();
        }
        drop(lock);
        made
    }

    /// [`DirPool::create`] once the directory's lock is held.
    fn create_locked(
        dir: &Path,
        opts: &CreateOptions,
        model: ModelKind,
        hw: &HwOptions,
        lock: &mut Option<DirLock>,
    ) -> Result<DirPool, DirError> {
        let aside = dir.join(REPLACED_DIR);
        // An empty one holds nothing (removing it fails for anything else).
        if aside.symlink_metadata().is_ok() && fs::remove_dir(&aside).is_err() {
            return Err(DirError::Invalid(format!(
                "{} holds a pool an interrupted `create --force` moved aside: move its files \
                 back into {} to keep that pool, or delete it, then try again",
                aside.display(),
                dir.display()
            )));
        }
        let old = list_images(dir)?;
        let old_meta = dir.join(META_FILE).exists();
        if !opts.overwrite && (!old.is_empty() || old_meta) {
            return Err(DirError::Invalid(format!(
                "{} already holds a pool (disk images or {META_FILE}); pass --force to replace it",
                dir.display()
            )));
        }
        // A process that opened an image on its own (not through a `DirPool`) holds no
        // directory lock: refuse before moving anything.
        for &n in &old {
            let path = dir.join(image_name(n));
            FileDisk::ensure_not_in_use(&path).map_err(|err| in_use_or_disk(path, err))?;
        }
        let mut names: Vec<String> = old.iter().map(|&n| image_name(n)).collect();
        if old_meta {
            names.push(META_FILE.to_string());
        }
        if !names.is_empty() {
            fs::create_dir(&aside).map_err(io_err(format!("creating {}", aside.display())))?;
            for (i, name) in names.iter().enumerate() {
                if let Err(err) = fs::rename(dir.join(name), aside.join(name)) {
                    let restored = put_back(dir, &aside, names.get(..i).unwrap_or_default());
                    return Err(with_restore_note(
                        DirError::Io {
                            what: format!("moving {} aside", dir.join(name).display()),
                            err,
                        },
                        restored,
                        &aside,
                    ));
                }
            }
        }
        // The lock stays held here until the old pool is back, should the build fail.
        match Self::build(Some(dir), opts, model, hw) {
            Ok(mut p) => {
                p.lock = lock.take();
                // The new pool stands; the old one goes. (Should this fail, the next `create`
                // names the leftover directory.)
                if !names.is_empty() {
                    let _ = fs::remove_dir_all(&aside);
                }
                Ok(p)
            }
            Err(e) => {
                // Nothing half made stays behind: every image and the description in `dir`
                // now are this call's (the old ones were moved aside, the lock kept others
                // out).
                for n in 0..opts.disks + opts.spares {
                    let _ = fs::remove_file(dir.join(image_name(n)));
                }
                let _ = fs::remove_file(dir.join(META_FILE));
                let restored = put_back(dir, &aside, &names);
                Err(with_restore_note(e, restored, &aside))
            }
        }
    }

    /// Creates a new pool like [`DirPool::create`], but on sparse memory disks ([`MemDisk`])
    /// instead of image files: nothing touches the file system, and everything is lost when the
    /// value is dropped. [`DirPool::dir`] is empty and [`DirPool::replace`] refuses (there is no
    /// directory to put a new image in); everything else works as on images.
    ///
    /// Errors: as [`DirPool::create`] ([`DirError::Invalid`] for a bad layout, pool creation
    /// errors as [`DirError::Create`]).
    pub fn create_in_memory(
        opts: &CreateOptions,
        model: ModelKind,
        hw: &HwOptions,
    ) -> Result<DirPool, DirError> {
        Self::check_layout(None, opts, hw)?;
        Self::build(None, opts, model, hw)
    }

    /// True for a pool made by [`DirPool::create_in_memory`].
    #[must_use]
    pub fn in_memory(&self) -> bool {
        self.dir.as_os_str().is_empty()
    }

    /// Refuses a layout the pool would refuse, before any image is made (`dir` only names the
    /// images in errors).
    fn check_layout(
        dir: Option<&Path>,
        opts: &CreateOptions,
        hw: &HwOptions,
    ) -> Result<(), DirError> {
        let image_path =
            |n: usize| dir.map_or_else(|| PathBuf::from(image_name(n)), |d| d.join(image_name(n)));
        let bs = opts.block_size.bytes() as u64;
        let total = opts.disks + opts.spares;
        if opts.disks == 0 || total > MAX_DISKS {
            return Err(DirError::Invalid(format!(
                "{} members + {} spares: the simulator takes 1 to {MAX_DISKS} disks in all",
                opts.disks, opts.spares
            )));
        }
        if opts.disk_bytes == 0 || !opts.disk_bytes.is_multiple_of(bs) {
            return Err(DirError::Invalid(format!(
                "disk size {} is not a positive multiple of the {bs}-byte block",
                opts.disk_bytes
            )));
        }
        if opts.luns > MAX_LUNS {
            return Err(DirError::Invalid(format!(
                "{} LUNs: the simulator takes at most {MAX_LUNS}",
                opts.luns
            )));
        }
        if opts.luns > 0 && (opts.lun_bytes == 0 || !opts.lun_bytes.is_multiple_of(4096)) {
            return Err(DirError::Invalid(format!(
                "LUN size {} is not a positive multiple of 4 KiB",
                opts.lun_bytes
            )));
        }
        // A dry run on data-less disks finds what the pool would refuse (geometry, sizes,
        // LUNs) before any file is touched.
        {
            let clock = SimClock::new();
            let tracker = IoTracker::new();
            let mut null = (0..total).map(|n| {
                let d = NullDisk::new(opts.block_size, opts.disk_bytes / bs).map_err(|err| {
                    DirError::Disk {
                        path: image_path(n),
                        err,
                    }
                })?;
                Ok(member(d, ModelKind::Instant, n, hw, &clock, &tracker).0)
            });
            let members = null
                .by_ref()
                .take(opts.disks)
                .collect::<Result<Vec<_>, DirError>>()?;
            let spares = null.collect::<Result<Vec<_>, DirError>>()?;
            let mem = vec![0u8; SimPool::memory_bytes(&opts.config, opts.disks)];
            let mut pool = SimPool::create(members, spares, opts.config, opts.uuid, mem)
                .map_err(DirError::Create)?;
            for i in 0..opts.luns {
                pool.create_lun(&format!("lun{i}"), opts.lun_bytes / 4096)
                    .map_err(DirError::Lun)?;
            }
        }
        Ok(())
    }

    /// Makes the images (files in `dir`, or memory disks without a directory), the pool and
    /// its LUNs, and writes the description file (into `dir`, whose lock the caller holds, and
    /// which holds none of the images yet).
    fn build(
        dir: Option<&Path>,
        opts: &CreateOptions,
        model: ModelKind,
        hw: &HwOptions,
    ) -> Result<DirPool, DirError> {
        let bs = opts.block_size.bytes() as u64;
        let total = opts.disks + opts.spares;
        let clock = SimClock::new();
        let tracker = IoTracker::new();
        let mut members = Vec::new();
        let mut spares = Vec::new();
        let mut handles = Vec::new();
        let mut images = Vec::new();
        for n in 0..total {
            let disk: SimDisk = match dir {
                Some(dir) => {
                    let path = dir.join(image_name(n));
                    FileDisk::create_with(
                        &path,
                        opts.block_size,
                        opts.disk_bytes / bs,
                        FileDiskOptions {
                            overwrite: false,
                            sync_on_flush: hw.sync_on_flush,
                        },
                    )
                    .map_err(|err| in_use_or_disk(path, err))?
                    .into()
                }
                None => MemDisk::new(opts.block_size, opts.disk_bytes / bs)
                    .map_err(|err| DirError::Disk {
                        path: PathBuf::from(image_name(n)),
                        err,
                    })?
                    .into(),
            };
            let (m, h) = member(disk, model, n, hw, &clock, &tracker);
            handles.push(Some(h));
            let is_member = n < opts.disks;
            images.push(ImageInfo {
                number: n,
                file: image_name(n),
                role: if is_member { "member" } else { "spare" }.to_string(),
                slot: is_member.then_some(n),
                note: None,
            });
            if is_member {
                members.push(m);
            } else {
                spares.push(m);
            }
        }
        let mem = vec![0u8; SimPool::memory_bytes(&opts.config, opts.disks)];
        let mut pool = SimPool::create(members, spares, opts.config, opts.uuid, mem)
            .map_err(DirError::Create)?;
        for i in 0..opts.luns {
            pool.create_lun(&format!("lun{i}"), opts.lun_bytes / 4096)
                .map_err(DirError::Lun)?;
        }
        let meta = DirMeta {
            block_bytes: opts.block_size.bytes(),
            model: model_name(model).to_string(),
            images: total,
        };
        if let Some(dir) = dir {
            write_meta(dir, &meta)?;
        }
        Ok(DirPool {
            dir: dir.map(Path::to_path_buf).unwrap_or_default(),
            pool,
            clock,
            tracker,
            handles,
            images,
            import: ImportReport::default(),
            meta,
            model,
            lock: None,
        })
    }

    /// Opens the pool in `dir`: reads every image's superblock, imports the pool from the
    /// images that belong to it (stale and foreign images are left out and listed), with
    /// run-time policy from `config`.
    pub fn open(dir: &Path, config: PoolConfig, hw: &HwOptions) -> Result<DirPool, DirError> {
        // The description shows `dir` is a pool directory before a lock file is made in it;
        // it is read again under the lock, which a `create` holds while it writes it.
        if let Err(e) = read_meta(dir) {
            return Err(missing_meta(dir, e, true));
        }
        let lock = lock_dir(dir)?;
        let meta = read_meta(dir).map_err(|e| missing_meta(dir, e, false))?;
        let bs = meta.block_size()?;
        let model = match hw.model {
            Some(m) => m,
            None => meta.model_kind()?,
        };
        let numbers = list_images(dir)?;
        if numbers.is_empty() {
            return Err(DirError::Invalid(format!(
                "{} holds no disk images (disk0.img, …)",
                dir.display()
            )));
        }
        // Superblocks first, on the bare files: which images belong where.
        let mut found: Vec<(usize, FileDisk, Option<Superblock>)> = Vec::new();
        // Images whose length is no whole number of blocks (truncated): left out like a
        // missing member, so redundancy serves the pool; anything else (a lock, permissions)
        // stops the open.
        let mut unusable = Vec::new();
        for &n in &numbers {
            let path = dir.join(image_name(n));
            let opened = FileDisk::open_with(
                &path,
                bs,
                FileDiskOptions {
                    overwrite: false,
                    sync_on_flush: hw.sync_on_flush,
                },
            );
            let mut disk = match opened {
                Ok(d) => d,
                Err(err) if err.kind() == ErrorKind::Misaligned => {
                    unusable.push(ImageInfo {
                        number: n,
                        file: image_name(n),
                        role: "stale".into(),
                        slot: None,
                        note: Some("unusable: its length is no whole number of blocks".into()),
                    });
                    continue;
                }
                Err(err) => return Err(in_use_or_disk(path, err)),
            };
            let sb = read_superblock(&mut disk).ok();
            found.push((n, disk, sb));
        }
        let mut images = classify(&found);
        images.extend(unusable);
        images.sort_by_key(|i| i.number);
        let newest = found
            .iter()
            .filter_map(|(_, _, sb)| sb.as_ref())
            .max_by_key(|sb| sb.generation)
            .ok_or_else(|| {
                DirError::Invalid(format!(
                    "no image in {} holds a raidcore superblock",
                    dir.display()
                ))
            })?;
        let cfg = config.with_superblock(newest);
        let disks = newest.geometry.disks();
        let clock = SimClock::new();
        let tracker = IoTracker::new();
        let max_n = numbers.iter().copied().max().unwrap_or(0);
        let mut handles: Vec<Option<MemberHandles>> = vec![None; max_n + 1];
        let mut sims = Vec::new();
        let mut order = Vec::new();
        for (n, disk, _) in found {
            let (m, h) = member(disk, model, n, hw, &clock, &tracker);
            handles[n] = Some(h);
            sims.push(m);
            order.push(n);
        }
        let mem = vec![0u8; SimPool::memory_bytes(&cfg, disks)];
        let (pool, import) = SimPool::import(
            sims,
            ImportOptions {
                config: cfg,
                skip_refused: true,
            },
            mem,
        )
        .map_err(|e| match e {
            // Name the images left out, and why: each may be a member the import counted as
            // missing.
            OpenError::TooManyMissing { .. } if images.iter().any(|i| i.note.is_some()) => {
                let left_out: Vec<String> = images
                    .iter()
                    .filter_map(|i| Some(format!("{} ({})", i.file, i.note.as_deref()?)))
                    .collect();
                DirError::Invalid(format!(
                    "opening the pool: {e}; left out: {}",
                    left_out.join(", ")
                ))
            }
            e => DirError::Open(e),
        })?;
        // Images the import left out for their size are not the members `classify` took them
        // for.
        for (idx, e) in &import.refused {
            if let OpenError::WrongSize { .. } = e
                && let Some(&n) = order.get(usize::from(*idx))
                && let Some(i) = images.iter_mut().find(|i| i.number == n)
            {
                i.role = "stale".into();
                i.slot = None;
                i.note =
                    Some("unusable: smaller than the pool's members, or another block size".into());
            }
        }
        Ok(DirPool {
            dir: dir.to_path_buf(),
            pool,
            clock,
            tracker,
            handles,
            images,
            import,
            meta,
            model,
            lock: Some(lock),
        })
    }

    /// The image number filling member slot `slot` when the pool was opened, if any.
    #[must_use]
    pub fn image_of_slot(&self, slot: usize) -> Option<usize> {
        self.images
            .iter()
            .find(|i| i.role == "member" && i.slot == Some(slot))
            .map(|i| i.number)
    }

    /// Fails member `slot` by hand; a hot spare takes over if there is one (its rebuild starts
    /// but is not run: see [`DirPool::run_maintenance`]).
    ///
    /// Errors: [`DirError::Invalid`] for a slot out of range or failed already, and, unless
    /// `force`, when the slot is in sync and failing it would leave more members out of sync
    /// (failed, or still rebuilding) than the level tolerates: data would become unreadable,
    /// and no command brings a failed member back.
    pub fn fail(&mut self, slot: usize, force: bool) -> Result<(), DirError> {
        let disks = self.pool.array().geometry().disks();
        if slot >= disks {
            return Err(DirError::Invalid(format!(
                "disk {slot}: the pool has member slots 0 to {}",
                disks - 1
            )));
        }
        let st = self.pool.status();
        if st
            .disks
            .get(slot)
            .is_some_and(|d| d.state == DiskState::Failed)
        {
            return Err(DirError::Invalid(format!("disk {slot} is failed already")));
        }
        let geo = *self.pool.array().geometry();
        let out = st
            .disks
            .iter()
            .filter(|d| d.state != DiskState::Online)
            .count();
        let online = st
            .disks
            .get(slot)
            .is_some_and(|d| d.state == DiskState::Online);
        if !force && online && out + 1 > geo.tolerance() {
            return Err(DirError::Invalid(format!(
                "failing disk {slot} would leave {} members out of sync (failed or rebuilding), \
                 more than {} tolerates ({}): data would become unreadable; pass --force to \
                 fail it anyway",
                out + 1,
                geo.level().name(),
                geo.tolerance()
            )));
        }
        let spares_before = usize::from(st.spares);
        self.pool.fail_disk(slot)?;
        self.note_failed(slot, spares_before);
        Ok(())
    }

    /// Updates [`DirPool::images`] after member `slot` failed: its image is stale now, and if a
    /// spare took the slot (the spare count fell), that spare fills it. The pool takes spares
    /// from the end of its list, which follows image order, so the highest-numbered spare.
    pub fn note_failed(&mut self, slot: usize, spares_before: usize) {
        for i in &mut self.images {
            if i.role == "member" && i.slot == Some(slot) {
                i.role = "stale".into();
                i.slot = None;
                i.note = Some(format!("failed member of slot {slot}"));
            }
        }
        if usize::from(self.pool.status().spares) < spares_before
            && let Some(i) = self.images.iter_mut().rev().find(|i| i.role == "spare")
        {
            i.role = "member".into();
            i.slot = Some(slot);
        }
    }

    /// Puts a blank image into failed member slot `slot` and starts rebuilding onto it. The
    /// image that filled the slot (if any) is renamed `disk<n>.img.failed-g<generation>` and the
    /// new image takes its name; a slot without an image gets the next free number.
    pub fn replace(&mut self, slot: usize, hw: &HwOptions) -> Result<usize, DirError> {
        let disks = self.pool.array().geometry().disks();
        if slot >= disks {
            return Err(DirError::Invalid(format!(
                "disk {slot}: the pool has member slots 0 to {}",
                disks - 1
            )));
        }
        if self.in_memory() {
            return Err(DirError::Invalid(
                "a pool on memory disks has no directory to put a new image in".into(),
            ));
        }
        let st = self.pool.status();
        let state = st.disks.get(slot).map(|d| d.state);
        if state != Some(DiskState::Failed) {
            return Err(DirError::Invalid(format!(
                "disk {slot} is {} (only a failed member can be replaced; `fail` it first)",
                state.map_or("missing", disk_state_name)
            )));
        }
        let bs = self.meta.block_size()?;
        // The new image has the size of the others.
        let size = self
            .images
            .iter()
            .filter(|i| i.role != "stale")
            .find_map(|i| fs::metadata(self.dir.join(&i.file)).ok().map(|m| m.len()))
            .ok_or_else(|| DirError::Invalid("cannot size the new image".into()))?;
        let failed_image = self
            .images
            .iter()
            .find(|i| i.note.as_deref() == Some(&format!("failed member of slot {slot}")))
            .map(|i| i.number);
        let number = match failed_image {
            Some(n) if self.dir.join(image_name(n)).exists() => {
                let old = self.dir.join(image_name(n));
                let gen_ = self.pool.status().root_gen;
                let to = self.dir.join(format!("{}.failed-g{gen_}", image_name(n)));
                fs::rename(&old, &to).map_err(io_err(format!(
                    "renaming {} to {}",
                    old.display(),
                    to.display()
                )))?;
                n
            }
            _ => list_images(&self.dir)?.last().map_or(0, |n| n + 1),
        };
        let path = self.dir.join(image_name(number));
        let disk = FileDisk::create_with(
            &path,
            bs,
            size / bs.bytes() as u64,
            FileDiskOptions {
                overwrite: false,
                sync_on_flush: hw.sync_on_flush,
            },
        )
        .map_err(|err| DirError::Disk {
            path: path.clone(),
            err,
        })?;
        let (m, h) = member(disk, self.model, number, hw, &self.clock, &self.tracker);
        if self.handles.len() <= number {
            self.handles.resize(number + 1, None);
        }
        self.handles[number] = Some(h);
        self.pool.replace_disk(slot, m)?;
        self.images.retain(|i| i.number != number);
        self.images.push(ImageInfo {
            number,
            file: image_name(number),
            role: "member".into(),
            slot: Some(slot),
            note: None,
        });
        self.images.sort_by_key(|i| i.number);
        Ok(number)
    }

    /// If a member slot is failed while a hot spare waits and no rebuild runs, has the pool
    /// take the spare (by failing the slot again, which runs the pool's failure handling).
    /// Returns whether it did.
    ///
    /// A workaround: the pool takes spares only from its write paths, so a member that dies
    /// under reads alone stays failed with the spare idle (tests/tests/repro_read_failure_spare.rs).
    pub fn take_spare_for_failed(&mut self) -> Result<bool, DirError> {
        let st = self.pool.status();
        if st.spares == 0 || st.rebuild.is_some() {
            return Ok(false);
        }
        let Some(slot) = st.disks.iter().find(|d| d.state == DiskState::Failed) else {
            return Ok(false);
        };
        let slot = usize::from(slot.slot);
        self.pool.fail_disk(slot)?;
        self.note_failed(slot, usize::from(st.spares));
        Ok(true)
    }

    /// Runs [`Pool::maintenance`] until no rebuild or scrub is left, calling `progress(done,
    /// total)` (in stripes of the current job) after each step.
    pub fn run_maintenance(&mut self, mut progress: impl FnMut(u64, u64)) -> Result<(), DirError> {
        loop {
            let rep = self.pool.maintenance()?;
            let st = self.pool.status();
            if let Some((_, done, total)) = st.rebuild {
                progress(done, total);
            } else if let Some((next, total)) = st.scrub {
                progress(u64::from(next), u64::from(total));
            }
            if rep.idle {
                return Ok(());
            }
        }
    }

    /// Flushes, checkpoints and closes the pool (the images hold everything).
    pub fn close(self) -> Result<(), DirError> {
        self.pool.shutdown()?;
        Ok(())
    }

    /// What `status` prints, from the pool's [`Status`] and LUN table.
    pub fn status(&mut self) -> DirStatus {
        let st: Status = self.pool.status();
        let stats = self.pool.stats();
        let geo = *self.pool.array().geometry();
        let disks = st
            .disks
            .iter()
            .map(|d| {
                let slot = usize::from(d.slot);
                DiskReport {
                    index: slot,
                    state: disk_state_name(d.state).to_string(),
                    present: d.present,
                    image: d
                        .present
                        .then(|| self.image_of_slot(slot))
                        .flatten()
                        .map(image_name),
                    errors: ErrorCounts {
                        read: d.errors.read,
                        write: d.errors.write,
                        medium: d.errors.medium,
                        transient: d.errors.transient,
                        checksum: d.errors.checksum,
                        repaired: d.errors.repaired,
                    },
                }
            })
            .collect();
        let luns = self
            .pool
            .luns()
            .map(|l| LunReport {
                id: l.id,
                name: l.name.as_str().to_string(),
                size_bytes: l.blocks * 4096,
                logical_bytes: l.logical_bytes,
                physical_bytes: l.physical_bytes,
                stored_bytes: l.stored_bytes,
                parity_bytes: l.parity_bytes,
            })
            .collect();
        DirStatus {
            dir: self.dir.display().to_string(),
            health: st.health.name().to_string(),
            level: geo.level().name().to_string(),
            strip_bytes: geo.strip_bytes() as u64,
            model: self.meta.model.clone(),
            disks,
            spares: usize::from(st.spares),
            images: self.images.clone(),
            rebuild: st.rebuild.map(|(slot, done, total)| Progress {
                disk: Some(usize::from(slot)),
                done,
                total,
            }),
            scrub: st.scrub.map(|(next, total)| Progress {
                disk: None,
                done: u64::from(next),
                total: u64::from(total),
            }),
            scrub_repaired_blocks: st.scrub_repaired,
            scrub_unrepairable_blocks: st.scrub_unrepairable,
            bad_ranges: st.bad_ranges,
            luns,
            usable_bytes: self.pool.usable_bytes(),
            live_bytes: stats.live_bytes,
            compression_ratio: stats.compression_ratio(),
            root_gen: st.root_gen,
        }
    }
}

/// Lower-case name of a member state.
#[must_use]
pub const fn disk_state_name(s: DiskState) -> &'static str {
    match s {
        DiskState::Online => "online",
        DiskState::Failed => "failed",
        DiskState::Rebuilding => "rebuilding",
    }
}

/// Sorts the images of a directory into members (by slot, from the newest superblock
/// generation), spares and stale images, the way import will.
fn classify(found: &[(usize, FileDisk, Option<Superblock>)]) -> Vec<ImageInfo> {
    // The pool most images carry, its newest configuration.
    let mut best: Option<([u8; 16], usize)> = None;
    for (_, _, sb) in found {
        if let Some(sb) = sb {
            let n = found
                .iter()
                .filter(|(_, _, o)| o.as_ref().is_some_and(|o| o.pool_uuid == sb.pool_uuid))
                .count();
            if best.is_none_or(|(_, m)| n > m) {
                best = Some((sb.pool_uuid, n));
            }
        }
    }
    let newest = best.and_then(|(uuid, _)| {
        found
            .iter()
            .filter_map(|(_, _, sb)| sb.as_ref())
            .filter(|sb| sb.pool_uuid == uuid)
            .max_by_key(|sb| sb.generation)
    });
    found
        .iter()
        .map(|(n, _, sb)| {
            let mut info = ImageInfo {
                number: *n,
                file: image_name(*n),
                role: "stale".into(),
                slot: None,
                note: None,
            };
            match (sb, newest) {
                (None, _) => info.note = Some("no raidcore superblock".into()),
                (Some(_), None) => {}
                (Some(sb), Some(new)) if sb.pool_uuid != new.pool_uuid => {
                    info.note = Some("belongs to another pool".into());
                }
                (Some(sb), Some(new)) => {
                    if let Some(slot) = new.members.iter().position(|m| m.guid == sb.disk_guid) {
                        if new.members[slot].state == DiskState::Failed {
                            info.note = Some(format!("failed member of slot {slot}"));
                        } else {
                            info.role = "member".into();
                            info.slot = Some(slot);
                        }
                    } else if new.spares.contains(&sb.disk_guid) {
                        info.role = "spare".into();
                    } else {
                        let was = match sb.role {
                            Role::Member(s) => format!("former member of slot {s}"),
                            Role::Spare => "former spare".into(),
                        };
                        info.note = Some(format!("{was} (generation {})", sb.generation));
                    }
                }
            }
            info
        })
        .collect()
}

/// Error counters of one member, as `status` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ErrorCounts {
    /// Failed reads.
    pub read: u32,
    /// Failed writes.
    pub write: u32,
    /// Latent sector errors.
    pub medium: u32,
    /// Retryable errors.
    pub transient: u32,
    /// Checksum mismatches.
    pub checksum: u32,
    /// Blocks repaired.
    pub repaired: u32,
}

/// One member slot in [`DirStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiskReport {
    /// Member slot.
    pub index: usize,
    /// `online`, `failed` or `rebuilding`.
    pub state: String,
    /// A disk is in the slot.
    pub present: bool,
    /// The image file in the slot, if known.
    pub image: Option<String>,
    /// Error counters since the pool was opened.
    pub errors: ErrorCounts,
}

/// One LUN in [`DirStatus`]; sizes in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LunReport {
    /// LUN number.
    pub id: u16,
    /// Export name.
    pub name: String,
    /// Size.
    pub size_bytes: u64,
    /// Bytes mapped (written and not trimmed).
    pub logical_bytes: u64,
    /// Bytes its live extents take in the log (after compression, headers included).
    pub physical_bytes: u64,
    /// Stored payload bytes (after compression).
    pub stored_bytes: u64,
    /// Parity written for its physical bytes.
    pub parity_bytes: u64,
}

/// Progress of a rebuild (in stripes) or scrub (in segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// The member slot being rebuilt.
    pub disk: Option<usize>,
    /// Done so far.
    pub done: u64,
    /// In all.
    pub total: u64,
}

/// What `raidcore-sim status` reports (like `zpool status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirStatus {
    /// The directory.
    pub dir: String,
    /// `online`, `degraded` or `faulted`.
    pub health: String,
    /// RAID level.
    pub level: String,
    /// Strip size in bytes.
    pub strip_bytes: u64,
    /// Device model of the images.
    pub model: String,
    /// Member slots.
    pub disks: Vec<DiskReport>,
    /// Hot spares waiting.
    pub spares: usize,
    /// Every image in the directory and its role.
    pub images: Vec<ImageInfo>,
    /// Rebuild in progress.
    pub rebuild: Option<Progress>,
    /// Scrub in progress.
    pub scrub: Option<Progress>,
    /// Blocks the last scrub repaired.
    pub scrub_repaired_blocks: u64,
    /// Blocks the last scrub could not repair.
    pub scrub_unrepairable_blocks: u64,
    /// LBA ranges known lost.
    pub bad_ranges: usize,
    /// LUNs.
    pub luns: Vec<LunReport>,
    /// Capacity clients can fill, in bytes.
    pub usable_bytes: u64,
    /// Live bytes in the log.
    pub live_bytes: u64,
    /// LZ4 ratio over every extent written (raw / stored).
    pub compression_ratio: f64,
    /// Generation of the last checkpoint.
    pub root_gen: u64,
}

impl DirStatus {
    /// The human-readable form, like `zpool status`.
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "  pool: {}", self.dir);
        let _ = writeln!(s, " state: {}", self.health.to_uppercase());
        let _ = writeln!(
            s,
            "layout: {} strip {}, {} disks, model {}",
            self.level,
            format_bytes(self.strip_bytes),
            self.disks.len(),
            self.model
        );
        if let Some(r) = self.rebuild.filter(|r| r.total == 0) {
            let _ = writeln!(
                s,
                "  scan: rebuild of disk {} starting (resumes whenever the pool is used)",
                r.disk.unwrap_or(0)
            );
        } else if let Some(r) = self.rebuild {
            let _ = writeln!(
                s,
                "  scan: rebuilding disk {} — {} of {} stripes ({:.1} %)",
                r.disk.unwrap_or(0),
                r.done,
                r.total,
                pct(r.done, r.total)
            );
        } else if let Some(r) = self.scrub {
            let _ = writeln!(
                s,
                "  scan: scrub in progress — segment {} of {} ({:.1} %)",
                r.done,
                r.total,
                pct(r.done, r.total)
            );
        } else {
            let _ = writeln!(
                s,
                "  scan: last scrub repaired {} blocks, {} unrepairable",
                self.scrub_repaired_blocks, self.scrub_unrepairable_blocks
            );
        }
        let _ = writeln!(s, "config:");
        let _ = writeln!(
            s,
            "  {:<6} {:<12} {:<11} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5}",
            "DISK", "IMAGE", "STATE", "READ", "WRITE", "MEDIUM", "TRANS", "CKSUM", "REPR"
        );
        for d in &self.disks {
            let _ = writeln!(
                s,
                "  {:<6} {:<12} {:<11} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5}",
                d.index,
                d.image.as_deref().unwrap_or("-"),
                d.state.to_uppercase(),
                d.errors.read,
                d.errors.write,
                d.errors.medium,
                d.errors.transient,
                d.errors.checksum,
                d.errors.repaired
            );
        }
        let spares: Vec<&str> = self
            .images
            .iter()
            .filter(|i| i.role == "spare")
            .map(|i| i.file.as_str())
            .collect();
        let _ = writeln!(
            s,
            "spares: {} {}",
            self.spares,
            if spares.is_empty() {
                String::new()
            } else {
                format!("({})", spares.join(", "))
            }
        );
        for i in self.images.iter().filter(|i| i.role == "stale") {
            let _ = writeln!(
                s,
                "  left out: {} ({})",
                i.file,
                i.note.as_deref().unwrap_or("stale")
            );
        }
        if self.bad_ranges > 0 {
            let _ = writeln!(s, "errors: {} LBA ranges lost", self.bad_ranges);
        } else {
            let _ = writeln!(s, "errors: no known data errors");
        }
        let _ = writeln!(
            s,
            "space: {} usable, {} live, compression {:.2}x",
            format_bytes(self.usable_bytes),
            format_bytes(self.live_bytes),
            self.compression_ratio
        );
        let _ = writeln!(
            s,
            "  {:<4} {:<24} {:>11} {:>11} {:>11}",
            "LUN", "NAME", "SIZE", "LOGICAL", "PHYSICAL"
        );
        for l in &self.luns {
            let _ = writeln!(
                s,
                "  {:<4} {:<24} {:>11} {:>11} {:>11}",
                l.id,
                l.name,
                format_bytes(l.size_bytes),
                format_bytes(l.logical_bytes),
                format_bytes(l.physical_bytes)
            );
        }
        s
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        100.0
    } else {
        a as f64 * 100.0 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock file unlinked between a process's open and its lock (a failed `create` removing
    /// the directory it made, while a newer lock file took its place) is refused: locking it
    /// would give two processes "the" lock.
    #[test]
    fn a_lock_on_an_unlinked_lock_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let first = lock_dir(dir).unwrap();
        let early = fs::File::open(dir.join(LOCK_FILE)).unwrap();
        fs::remove_file(dir.join(LOCK_FILE)).unwrap();
        drop(first);
        let newer = lock_dir(dir).unwrap();
        let refused = lock_opened(dir, early).unwrap_err();
        assert!(matches!(refused, DirError::InUse(_)), "{refused}");
        assert!(refused.to_string().contains("changed"), "{refused}");
        drop(newer);
        // The file the path names can be locked again.
        lock_dir(dir).unwrap();
    }

    #[test]
    fn a_pool_in_memory_serves_io_and_refuses_replace() {
        let opts = CreateOptions {
            disks: 6,
            spares: 1,
            disk_bytes: 64 << 20,
            block_size: BlockSize::B512,
            config: PoolConfig::default(),
            luns: 2,
            lun_bytes: 1 << 20,
            uuid: [7; 16],
            overwrite: false,
        };
        let hw = HwOptions {
            model: Some(ModelKind::Instant),
            sync_on_flush: false,
            ..HwOptions::default()
        };
        let mut dp = DirPool::create_in_memory(&opts, ModelKind::Instant, &hw).unwrap();
        assert!(dp.in_memory());
        assert_eq!(dp.pool.luns().count(), 2);
        let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        dp.pool.write(1, 3, &data, true).unwrap();
        let mut back = vec![0u8; 8192];
        dp.pool.read(1, 3, &mut back).unwrap();
        assert_eq!(back, data);
        dp.fail(0, false).unwrap();
        dp.pool.read(1, 3, &mut back).unwrap();
        assert_eq!(back, data);
        assert!(matches!(dp.replace(0, &hw), Err(DirError::Invalid(_))));
        dp.close().unwrap();
    }
}
