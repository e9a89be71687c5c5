//! Opening a pool directory: [`PoolDir::open`] takes the lock, reads the description, reads
//! every image's superblock, and imports the pool from the images that belong to it (stale,
//! foreign and unusable images are left out and listed).

use std::path::Path;

use raidcore::pool::{ImportOptions, ImportReport, OpenError, PoolConfig, Status};

use super::classify::{classify, newest_config, no_pool, scan, scan_with};
use super::images::{failed_image_of_slot, is_failed_member_note};
use super::layout::{DirMeta, LOCK_FILE, REPLACED_DIR, list_images, read_meta};
use super::lock::lock_dir;
use super::logdev::open_log_device;
use super::{DirError, HostPool, ImageInfo, ImageRole, Members, PoolDir};
use crate::disk::FileDisk;

impl<M: Members> PoolDir<M> {
    /// Opens the pool in `dir`, with run-time policy from `config`; `members` makes each image
    /// that is opened a member.
    ///
    /// Errors: [`DirError::InUse`] if another process has the pool open; [`DirError::Io`] or
    /// [`DirError::Invalid`] if `dir` holds no pool (the message says why, naming an
    /// interrupted `create --force`); [`DirError::Open`] (or [`DirError::Invalid`], naming
    /// the images left out) if the pool cannot be imported. Nothing is written then.
    pub fn open(
        dir: &Path,
        config: PoolConfig,
        members: impl Into<M>,
    ) -> Result<PoolDir<M>, DirError> {
        Self::open_with(dir, config, members, false, false)
    }

    /// [`PoolDir::open`]; with `force`, a forced import ([`ImportOptions::force`], as `mdadm
    /// --assemble --force`): when more members are missing than the level tolerates, failed
    /// members whose images are here and whose slots never went to another disk are taken
    /// back (the report's `forced` names them); with `rewind` ([`ImportOptions::rewind`], as
    /// `zpool import -F`), a log unreadable before the last flush's end is cut there
    /// (`log_cut_at`) instead of refused, and members taken back alone are served as they
    /// left (`rewound`): the writes after that are lost.
    ///
    /// Errors: as [`PoolDir::open`].
    pub fn open_with(
        dir: &Path,
        config: PoolConfig,
        members: impl Into<M>,
        force: bool,
        rewind: bool,
    ) -> Result<PoolDir<M>, DirError> {
        let mut members = members.into();
        // The description shows `dir` is a pool directory before a lock file is made in it;
        // it is read again under the lock, which a `create` holds while it writes it.
        if let Err(e) = read_meta(dir) {
            return Err(missing_meta(dir, e, true));
        }
        // A read-only open writes nothing, not even a lock file: the images' shared locks keep
        // writers out.
        let lock = if members.read_only() {
            None
        } else {
            Some(lock_dir(dir)?)
        };
        let meta = read_meta(dir).map_err(|e| missing_meta(dir, e, false))?;
        let bs = meta.block_size()?;
        members.described(&meta)?;
        let numbers = list_images(dir)?;
        if numbers.is_empty() {
            return Err(DirError::Invalid(format!(
                "{} holds no disk images (disk0.img, …)",
                dir.display()
            )));
        }
        // Superblocks first, on the bare files: which images belong where.
        let (mut found, unusable) = if members.read_only() {
            scan_with(dir, &numbers, bs, |p| FileDisk::open_read_only(p, bs))?
        } else {
            scan(dir, &numbers, bs, members.sync_on_flush())?
        };
        let mut images = classify(&found);
        images.extend(unusable);
        images.sort_by_key(|i| i.number);
        let Some((cfg, disks)) = newest_config(&found, config) else {
            return Err(no_pool(dir, &mut found));
        };
        let order: Vec<usize> = found.iter().map(|f| f.number).collect();
        let guids: Vec<Option<u64>> = found
            .iter()
            .map(|f| f.sb.as_ref().map(|sb| sb.disk_guid))
            .collect();
        let mut disks_in_order: Vec<M::Disk> = found
            .into_iter()
            .map(|f| members.member(f.number, f.disk))
            .collect();
        disks_in_order.extend(open_log_device(&meta, &mut members)?);
        let mem = vec![0u8; HostPool::<M::Disk>::memory_bytes(&cfg, disks)];
        let opts = ImportOptions {
            config: cfg,
            skip_refused: true,
            force,
            rewind,
        };
        let (pool, import) = HostPool::import(disks_in_order, opts, mem).map_err(|e| match e {
            OpenError::MissingLogDevice { .. } => missing_log_device(e, dir, &meta),
            e => import_error(e, &images, force, members.read_only()),
        })?;
        leave_out_wrong_sizes(&mut images, &import, &order);
        take_back_images(&mut images, &pool.status(), &import, &order, &guids);
        let (records, watch) = Self::start_records(dir, &pool);
        Ok(PoolDir {
            dir: dir.to_path_buf(),
            pool,
            members,
            images,
            import,
            meta,
            records,
            watch,
            lock,
        })
    }
}

/// The import's refusal `e` for a missing log device, naming the file the description names.
fn missing_log_device(e: OpenError, dir: &Path, meta: &DirMeta) -> DirError {
    let Some(path) = &meta.log_device else {
        return DirError::Open(e);
    };
    DirError::Invalid(format!(
        "opening the pool: its log device {} is missing, or is not the one the pool names \
         (another pool's, an older or a shortened copy), and it may hold the last flushes: \
         bring it back, or \
         `raidcore import --dir {} --force` to go on without it (the flushes only it held are \
         lost; the pool records it failed)",
        path.display(),
        dir.display()
    ))
}

/// `e`, a failure to read the description of `dir`, explained where possible: the pool is in
/// use (a `create --force` in progress has moved the description aside; checked only when
/// `probe_lock`, as the caller must not hold the lock itself), or an interrupted
/// `create --force` left the old pool in [`REPLACED_DIR`].
pub(crate) fn missing_meta(dir: &Path, e: DirError, probe_lock: bool) -> DirError {
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

/// An import failure; for too many missing members, it names the images left out and why
/// (each may be a member the import counted as missing), and, unless the import was already
/// `forced`, names the forced import when a failed member's image is among them: for a
/// `read_only` open, the one that writes nothing (`serve --read-only --force`).
pub(crate) fn import_error(
    e: OpenError,
    images: &[ImageInfo],
    forced: bool,
    read_only: bool,
) -> DirError {
    match e {
        OpenError::TooManyMissing { .. } if images.iter().any(|i| i.note.is_some()) => {
            let left_out: Vec<String> = images
                .iter()
                .filter_map(|i| Some(format!("{} ({})", i.file, i.note.as_deref()?)))
                .collect();
            let failed = images
                .iter()
                .any(|i| i.note.as_deref().is_some_and(is_failed_member_note));
            let hint = match (failed && !forced, read_only) {
                (false, _) => "",
                (true, false) => {
                    "; `raidcore import --force` takes failed members back (what they missed \
                     reads as errors, never as other data; `--read-only` shows the result first)"
                }
                (true, true) => {
                    "; `raidcore serve --read-only --force` takes failed members back in memory \
                     (what they missed reads as errors, never as other data)"
                }
            };
            DirError::Invalid(format!(
                "opening the pool: {e}; left out: {}{hint}",
                left_out.join(", ")
            ))
        }
        e => DirError::Open(e),
    }
}

/// The images of the failed members a forced import took back fill their slots again
/// (`order` and `guids`: each image's number and label's disk GUID, as given to the import).
/// Only the image `classify` left out as that slot's failed member is taken, and only if its
/// label names the disk the pool took back: an older copy with the same GUID keeps its note.
/// `st` is the status of the pool (or the peek) the import made.
pub(crate) fn take_back_images(
    images: &mut [ImageInfo],
    st: &Status,
    import: &ImportReport,
    order: &[usize],
    guids: &[Option<u64>],
) {
    for &slot in &import.forced {
        let slot = usize::from(slot);
        let Some(guid) = st
            .disks
            .iter()
            .find(|d| usize::from(d.slot) == slot)
            .map(|d| d.guid)
        else {
            continue;
        };
        let Some(n) = failed_image_of_slot(images, slot) else {
            continue;
        };
        let label = order
            .iter()
            .position(|&o| o == n)
            .and_then(|at| guids.get(at));
        if label != Some(&Some(guid)) {
            continue;
        }
        if let Some(i) = images.iter_mut().find(|i| i.number == n) {
            *i = ImageInfo::new(i.number, ImageRole::Member, Some(slot)).with_guid(guid);
        }
    }
}

/// Images the import left out for their size are not the members `classify` took them for.
/// `order` is the image number of each disk in the order given to the import.
pub(crate) fn leave_out_wrong_sizes(
    images: &mut [ImageInfo],
    import: &ImportReport,
    order: &[usize],
) {
    for (idx, e) in &import.refused {
        if let OpenError::WrongSize { .. } = e
            && let Some(&n) = order.get(usize::from(*idx))
            && let Some(i) = images.iter_mut().find(|i| i.number == n)
        {
            i.leave_out("unusable: smaller than the pool's members, or another block size");
        }
    }
}
