//! New pools: [`PoolDir::create`] makes the images, the pool, its LUNs and the description
//! file, under the directory's lock. With `--force` (`CreateOptions::overwrite`) the old pool
//! is moved into [`REPLACED_DIR`] first, put back if the new one fails, and deleted only once
//! the new one stands. A layout the pool would refuse is found on data-less disks
//! ([`check_layout`]) before any file is touched.

use std::fs;
use std::path::{Path, PathBuf};

use raidcore::pool::{ImportReport, PoolConfig};
use raidcore_hal::{BlockDevice, BlockSize};

use super::error::io_err;
use super::layout::{DirMeta, LOCK_FILE, META_FILE, REPLACED_DIR, image_name, list_images};
use super::lock::{in_use_or_disk, lock_dir};
use super::{DirError, HostPool, ImageInfo, ImageRole, MAX_DISKS, MAX_LUNS, Members, PoolDir};
use crate::disk::{FileDisk, FileDiskOptions, NullDisk};

/// How [`PoolDir::create`] lays out a new pool.
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
    /// Sparse images (allocated as the pool writes) instead of images allocated whole, which
    /// meet a full host file system at creation rather than under the pool's writes.
    pub sparse: bool,
}

/// Segments for a new pool of `disks` disks of `disk_bytes`: the core's default, or more on
/// large disks so a segment stays at most 1 GiB (segments above 4 GiB are refused, and the
/// cleaner moves a whole segment's live data at a time). Each costs a few bytes of the host's
/// arena and of every checkpoint.
#[must_use]
pub fn max_segments_for(disks: usize, disk_bytes: u64) -> u32 {
    let raw = (disks as u64).saturating_mul(disk_bytes);
    let by_size = u32::try_from(raw.div_ceil(1 << 30)).unwrap_or(u32::MAX);
    PoolConfig::default().max_segments.max(by_size)
}

/// Creates the pool `opts` describes on `members` (slot order) and `spares`, and its LUNs
/// `lun0`, `lun1`, …
///
/// Errors: [`DirError::Create`] for a layout the pool refuses, [`DirError::Lun`] for LUNs it
/// cannot hold.
pub fn create_pool<D: BlockDevice>(
    members: Vec<D>,
    spares: Vec<D>,
    opts: &CreateOptions,
) -> Result<HostPool<D>, DirError> {
    let mem = vec![0u8; HostPool::<D>::memory_bytes(&opts.config, opts.disks)];
    let mut pool =
        HostPool::create(members, spares, opts.config, opts.uuid, mem).map_err(DirError::Create)?;
    for i in 0..opts.luns {
        pool.create_lun(&format!("lun{i}"), opts.lun_bytes / 4096)
            .map_err(DirError::Lun)?;
    }
    Ok(pool)
}

/// Refuses a layout the pool would refuse, before any image is made: counts and sizes here,
/// then a dry run of [`create_pool`] on data-less disks ([`NullDisk`]) for geometry, sizes and
/// LUNs. `dir` only names the images in errors.
///
/// Errors: [`DirError::Invalid`], [`DirError::Disk`], or what [`create_pool`] returns.
pub fn check_layout(dir: Option<&Path>, opts: &CreateOptions) -> Result<(), DirError> {
    let bs = opts.block_size.bytes() as u64;
    let total = opts.disks + opts.spares;
    if opts.disks == 0 || total > MAX_DISKS {
        return Err(DirError::Invalid(format!(
            "{} members + {} spares: a pool takes 1 to {MAX_DISKS} disks in all",
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
            "{} LUNs: a pool takes at most {MAX_LUNS}",
            opts.luns
        )));
    }
    if opts.luns > 0 && (opts.lun_bytes == 0 || !opts.lun_bytes.is_multiple_of(4096)) {
        return Err(DirError::Invalid(format!(
            "LUN size {} is not a positive multiple of 4 KiB",
            opts.lun_bytes
        )));
    }
    let null = |n: usize| {
        NullDisk::new(opts.block_size, opts.disk_bytes / bs).map_err(|err| DirError::Disk {
            path: dir.map_or_else(|| PathBuf::from(image_name(n)), |d| d.join(image_name(n))),
            err,
        })
    };
    let members = (0..opts.disks).map(null).collect::<Result<Vec<_>, _>>()?;
    let spares = (opts.disks..total)
        .map(null)
        .collect::<Result<Vec<_>, _>>()?;
    create_pool(members, spares, opts).map(drop)
}

/// What [`build`] made: everything of a [`PoolDir`] but the lock.
struct Built<M: Members> {
    pool: HostPool<M::Disk>,
    members: M,
    images: Vec<ImageInfo>,
    meta: DirMeta,
}

impl<M: Members> PoolDir<M> {
    /// Creates a new pool in `dir` (created if missing): the images, the pool, the LUNs, the
    /// description; `members` makes each new image a member.
    ///
    /// The directory's lock ([`LOCK_FILE`]) is taken first and held by the returned value, so
    /// a concurrent `create`, or a server with the old pool open, is refused before anything
    /// is touched. With `opts.overwrite`, the old pool's images and description are moved into
    /// [`REPLACED_DIR`] while the new pool is made, put back if that fails, and deleted only
    /// once it has succeeded: a failed `create --force` leaves the old pool as it was, and a
    /// failed `create` leaves no directory it made.
    ///
    /// Errors: [`DirError::Invalid`] for a bad layout, existing images without
    /// `opts.overwrite`, or a [`REPLACED_DIR`] left by an interrupted `create --force`
    /// (nothing is written then); [`DirError::InUse`] if another process holds the directory
    /// or an image; pool creation errors as [`DirError::Create`].
    pub fn create(
        dir: &Path,
        opts: &CreateOptions,
        members: impl Into<M>,
    ) -> Result<PoolDir<M>, DirError> {
        check_layout(Some(dir), opts)?;
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
        let lock = lock_dir(dir).inspect_err(|_| remove_made_dirs())?;
        match create_locked(dir, opts, members.into()) {
            Ok(b) => {
                // A new pool starts new records.
                let _ = fs::remove_file(dir.join(super::records::RECORDS_FILE));
                let _ = fs::remove_file(dir.join(super::records::EVENTS_FILE));
                let (records, watch) = PoolDir::<M>::start_records(dir, &b.pool);
                let mut dp = PoolDir {
                    dir: dir.to_path_buf(),
                    pool: b.pool,
                    members: b.members,
                    images: b.images,
                    import: ImportReport::default(),
                    meta: b.meta,
                    records,
                    watch,
                    lock: Some(lock),
                };
                dp.note_event(
                    super::records::Severity::Info,
                    format!("pool created: {} disks, {} spares", opts.disks, opts.spares),
                );
                Ok(dp)
            }
            Err(e) => {
                if !made_dirs.is_empty() {
                    // Leave no directory behind either. The lock file goes first, while the
                    // lock is still held: a process that opened it meanwhile finds it unlinked
                    // once it has the lock, and refuses.
                    let _ = fs::remove_file(dir.join(LOCK_FILE));
                    remove_made_dirs();
                }
                drop(lock);
                Err(e)
            }
        }
    }
}

/// [`PoolDir::create`] once the directory's lock is held (the caller keeps holding it until
/// the old pool is back, should this fail).
fn create_locked<M: Members>(
    dir: &Path,
    opts: &CreateOptions,
    members: M,
) -> Result<Built<M>, DirError> {
    let aside = dir.join(REPLACED_DIR);
    let names = move_old_pool_aside(dir, &aside, opts.overwrite)?;
    match build(dir, opts, members) {
        Ok(b) => {
            // The new pool stands; the old one goes. (Should this fail, the next `create`
            // names the leftover directory.)
            if !names.is_empty() {
                let _ = fs::remove_dir_all(&aside);
            }
            Ok(b)
        }
        Err(e) => {
            // Nothing half made stays behind: every image and the description in `dir` now
            // are this call's (the old ones were moved aside, the lock kept others out).
            for n in 0..opts.disks + opts.spares {
                let _ = fs::remove_file(dir.join(image_name(n)));
            }
            let _ = fs::remove_file(dir.join(META_FILE));
            let restored = put_back(dir, &aside, &names);
            Err(with_restore_note(e, restored, &aside))
        }
    }
}

/// Moves the pool in `dir` (its images and description) into `aside`, returning the names
/// moved (none for an empty directory). Refuses, changing nothing, a pool without `overwrite`,
/// an image another process holds, and an `aside` left by an interrupted `create --force`.
fn move_old_pool_aside(dir: &Path, aside: &Path, overwrite: bool) -> Result<Vec<String>, DirError> {
    // An empty one holds nothing (removing it fails for anything else).
    if aside.symlink_metadata().is_ok() && fs::remove_dir(aside).is_err() {
        return Err(DirError::Invalid(format!(
            "{} holds a pool an interrupted `create --force` moved aside: move its files back \
             into {} to keep that pool, or delete it, then try again",
            aside.display(),
            dir.display()
        )));
    }
    let old = list_images(dir)?;
    let old_meta = dir.join(META_FILE).exists();
    if !overwrite && (!old.is_empty() || old_meta) {
        return Err(DirError::Invalid(format!(
            "{} already holds a pool (disk images or {META_FILE}); pass --force to replace it",
            dir.display()
        )));
    }
    // A process that opened an image on its own (not through a `PoolDir`) holds no directory
    // lock: refuse before moving anything.
    for &n in &old {
        let path = dir.join(image_name(n));
        FileDisk::ensure_not_in_use(&path).map_err(|err| in_use_or_disk(path, err))?;
    }
    let mut names: Vec<String> = old.iter().map(|&n| image_name(n)).collect();
    if old_meta {
        names.push(META_FILE.to_string());
    }
    if names.is_empty() {
        return Ok(names);
    }
    fs::create_dir(aside).map_err(io_err(format!("creating {}", aside.display())))?;
    for (i, name) in names.iter().enumerate() {
        if let Err(err) = fs::rename(dir.join(name), aside.join(name)) {
            let restored = put_back(dir, aside, names.get(..i).unwrap_or_default());
            let e = DirError::Io {
                what: format!("moving {} aside", dir.join(name).display()),
                err,
            };
            return Err(with_restore_note(e, restored, aside));
        }
    }
    Ok(names)
}

/// Makes the images in `dir` (whose lock the caller holds, and which holds none of the images
/// yet), the pool and its LUNs, and writes the description file.
fn build<M: Members>(
    dir: &Path,
    opts: &CreateOptions,
    mut members: M,
) -> Result<Built<M>, DirError> {
    let bs = opts.block_size.bytes() as u64;
    let disk_opts = FileDiskOptions {
        overwrite: false,
        sync_on_flush: members.sync_on_flush(),
        preallocate: !opts.sparse,
    };
    let (mut ms, mut sp, mut images) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..opts.disks + opts.spares {
        let path = dir.join(image_name(n));
        let disk = FileDisk::create_with(&path, opts.block_size, opts.disk_bytes / bs, disk_opts)
            .map_err(|err| in_use_or_disk(path, err))?;
        let m = members.member(n, disk);
        if n < opts.disks {
            images.push(ImageInfo::new(n, ImageRole::Member, Some(n)));
            ms.push(m);
        } else {
            images.push(ImageInfo::new(n, ImageRole::Spare, None));
            sp.push(m);
        }
    }
    let pool = create_pool(ms, sp, opts)?;
    learn_guids(&mut images, &pool);
    let meta = DirMeta {
        block_bytes: opts.block_size.bytes(),
        model: members.model_name().to_string(),
        images: opts.disks + opts.spares,
        preallocated: !opts.sparse,
        log_device: None,
        log_model: None,
    };
    super::layout::write_meta(dir, &meta)?;
    Ok(Built {
        pool,
        members,
        images,
        meta,
    })
}

/// Gives the images of a new pool the GUIDs the pool gave their disks: members by slot,
/// spares in the order they were given.
fn learn_guids<D: BlockDevice>(images: &mut [ImageInfo], pool: &HostPool<D>) {
    let st = pool.status();
    let mut spare_guids = pool.spare_guids();
    for i in images {
        i.guid = match (i.role, i.slot) {
            (ImageRole::Member, Some(slot)) => st.disks.get(slot).map(|d| d.guid),
            (ImageRole::Spare, _) => spare_guids.next(),
            _ => None,
        };
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
