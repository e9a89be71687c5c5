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

use std::fs;
use std::path::{Path, PathBuf};

use crate::clock::{IoTracker, SimClock};
use crate::disk::{FileDisk, FileDiskOptions, MemDisk, NullDisk, SimDisk};
use crate::fault::{FaultConfig, MemberHandles, SimMember, sim_member};
use crate::model::ModelKind;
use raidcore::format::{Role, Superblock};
use raidcore::pool::{ImportOptions, ImportReport, OpenError, PoolConfig, read_superblock};
use raidcore::raid::{DiskState, Level};
use raidcore_hal::{BlockSize, ErrorKind};
use raidcore_host::dir::error::io_err;
use raidcore_host::dir::layout::{read_meta, write_meta};
use raidcore_host::dir::lock::{DirLock, in_use_or_disk, lock_dir};
pub use raidcore_host::dir::{
    DirError, DirMeta, HostPool, ImageInfo, ImageRole, LOCK_FILE, MAX_DISKS, MAX_LUNS, META_FILE,
    REPLACED_DIR, image_name, list_images,
};
use raidcore_host::status::{DirStatus, disk_state_name};

/// The pool type the simulator uses: [`SimMember`] disks, a `Vec<u8>` arena.
pub type SimPool = HostPool<SimMember>;

/// The device model `meta` records.
fn model_kind(meta: &DirMeta) -> Result<ModelKind, DirError> {
    parse_model(&meta.model).map_err(DirError::Invalid)
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
                role: if is_member {
                    ImageRole::Member
                } else {
                    ImageRole::Spare
                },
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
            None => model_kind(&meta)?,
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
                        role: ImageRole::Stale,
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
                i.role = ImageRole::Stale;
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
            .find(|i| i.role == ImageRole::Member && i.slot == Some(slot))
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
            if i.role == ImageRole::Member && i.slot == Some(slot) {
                i.role = ImageRole::Stale;
                i.slot = None;
                i.note = Some(format!("failed member of slot {slot}"));
            }
        }
        if usize::from(self.pool.status().spares) < spares_before
            && let Some(i) = self
                .images
                .iter_mut()
                .rev()
                .find(|i| i.role == ImageRole::Spare)
        {
            i.role = ImageRole::Member;
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
            .filter(|i| i.role != ImageRole::Stale)
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
            role: ImageRole::Member,
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
        DirStatus::of(&mut self.pool, &self.dir, &self.meta, &self.images)
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
                role: ImageRole::Stale,
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
                            info.role = ImageRole::Member;
                            info.slot = Some(slot);
                        }
                    } else if new.spares.contains(&sb.disk_guid) {
                        info.role = ImageRole::Spare;
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

#[cfg(test)]
mod tests {
    use super::*;

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
