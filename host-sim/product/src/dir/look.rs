//! `status` of a stopped pool, read-only ([`look`]): nothing is written — no checkpoint, no
//! spare taken, no member ejected, no lock file made — so it works on a read-only mount and
//! leaves every image byte-identical. The images are opened `O_RDONLY` under shared locks, the
//! superblocks read for which image is what, and the core's read-only peek
//! ([`raidcore::pool::Pool::peek`]) reads the newest intact checkpoint: what is shown is the
//! pool as its last checkpoint recorded it (writes since are not replayed). When even that
//! cannot be read, the status comes from the superblocks alone and says why.

use std::fs;
use std::path::Path;

use raidcore::pool::{DiskLabel, ImportOptions, PoolConfig};
use raidcore::raid::DiskState;

use super::classify::{classify, newest_config, newest_of_main_pool, no_pool, scan_with};
use super::layout::{LOCK_FILE, list_images, read_meta};
use super::lock::in_use_message;
use super::open::{import_error, leave_out_wrong_sizes, missing_meta, take_back_images};
use super::records::{ErrorCounts, Records};
use super::{DirError, DirMeta, HostPool, ImageInfo, image_name, image_of_slot};
use crate::disk::FileDisk;
use crate::status::{DirStatus, DiskReport, Parts, Progress, disk_state_name, luns_of};

/// What a look at a stopped pool found: its status, and, when the checkpoint could not be
/// read, why (the status then comes from the superblocks alone).
#[derive(Debug)]
pub struct Look {
    /// The status (`view`: "last checkpoint", or "superblocks" when `error` is set).
    pub status: DirStatus,
    /// Why the pool could not be opened even read-only.
    pub error: Option<DirError>,
    /// Slots a forced look took failed members back into (see [`look_with`]).
    pub forced: Vec<usize>,
    /// Slots whose images are more than one checkpoint behind the pool's (an older copy put
    /// back): import will resync them (`ImportReport::behind`).
    pub behind: Vec<usize>,
    /// Generation of the checkpoint the look read (0 when it could not open the pool).
    pub root_gen: u64,
}

/// Holds a shared lock on the pool's lock file (if it has one) while the look lasts, so that a
/// command that has the pool open is not read mid-change.
fn shared_lock(dir: &Path) -> Result<Option<fs::File>, DirError> {
    let p = dir.join(LOCK_FILE);
    let Ok(f) = fs::File::open(&p) else {
        return Ok(None);
    };
    match f.try_lock_shared() {
        Ok(()) => Ok(Some(f)),
        Err(fs::TryLockError::WouldBlock) => Err(DirError::InUse(in_use_message(dir))),
        Err(fs::TryLockError::Error(err)) => Err(DirError::Io {
            what: format!("locking {}", p.display()),
            err,
        }),
    }
}

/// The status of the stopped pool in `dir`, read without writing anything (see the module
/// docs).
///
/// Errors: `dir` holds no pool, a command has it open ([`DirError::InUse`]), or no image
/// holds a superblock. A pool whose checkpoint cannot be read is not an error here: see
/// [`Look::error`].
pub fn look(dir: &Path) -> Result<Look, DirError> {
    look_with(dir, false)
}

/// [`look`]; with `force`, the members are assembled as a forced import would
/// ([`raidcore::pool::ImportOptions::force`]: failed members taken back while more are
/// missing than the level tolerates), still writing nothing.
///
/// Errors: as [`look`].
pub fn look_with(dir: &Path, force: bool) -> Result<Look, DirError> {
    let meta = read_meta(dir).map_err(|e| missing_meta(dir, e, true))?;
    let lock = shared_lock(dir)?;
    let bs = meta.block_size()?;
    let numbers = list_images(dir)?;
    let (mut found, unusable) = scan_with(dir, &numbers, bs, |p| FileDisk::open_read_only(p, bs))?;
    let mut images = classify(&found);
    images.extend(unusable);
    images.sort_by_key(|i| i.number);
    let newest = newest_of_main_pool(&found).cloned();
    let Some((cfg, disks)) = newest_config(&found, PoolConfig::default()) else {
        return Err(no_pool(dir, &mut found));
    };
    let (records, warning) = Records::load(dir);
    if let Some(w) = warning {
        log::warn!("{w}");
    }
    let order: Vec<usize> = found.iter().map(|f| f.number).collect();
    let guids: Vec<Option<u64>> = found
        .iter()
        .map(|f| f.sb.as_ref().map(|sb| sb.disk_guid))
        .collect();
    let mut files: Vec<FileDisk> = found.into_iter().map(|f| f.disk).collect();
    // Read-only, only so that the look shows it present.
    let log_file = meta.log_device.as_ref().zip(meta.block_size().ok());
    files.extend(log_file.and_then(|(p, bs)| FileDisk::open_read_only(p, bs).ok()));
    let mem = vec![0u8; HostPool::<FileDisk>::memory_bytes(&cfg, disks)];
    let opts = ImportOptions {
        config: cfg,
        skip_refused: true,
        force,
        // A look replays no log, so it has nothing to cut.
        rewind: false,
    };
    let look = match HostPool::<FileDisk>::peek(files, opts, mem) {
        Ok((mut peek, report)) => {
            leave_out_wrong_sizes(&mut images, &report, &order);
            let pool_st = peek.status();
            take_back_images(&mut images, &pool_st, &report, &order, &guids);
            let mut st = DirStatus::from_parts(Parts {
                st: pool_st,
                stats: peek.stats(),
                geo: peek.geometry(),
                luns: luns_of(peek.luns()),
                usable_bytes: peek.usable_bytes(),
                dir,
                meta: &meta,
                images: &images,
            });
            st.rebuild = peek.rebuild_cursor().map(|(d, next, total)| Progress {
                disk: Some(usize::from(d)),
                done: next,
                total,
            });
            drop(peek.into_parts());
            Look {
                status: finish(st, &records),
                error: None,
                forced: report.forced.iter().map(|&s| usize::from(s)).collect(),
                behind: report.behind.iter().map(|&s| usize::from(s)).collect(),
                root_gen: report.root_gen,
            }
        }
        Err(e) => {
            let error = import_error(e, &images, force, false);
            let st = label_status(dir, &meta, &images, newest.as_ref(), &error);
            Look {
                status: finish(st, &records),
                error: Some(error),
                forced: Vec::new(),
                behind: Vec::new(),
                root_gen: 0,
            }
        }
    };
    drop(lock);
    Ok(look)
}

/// The persistent counters and scan records, the view, and the `status:`/`action:` lines.
fn finish(mut st: DirStatus, records: &Records) -> DirStatus {
    for d in &mut st.disks {
        d.errors = records.saved(d.index, d.image.as_deref());
    }
    st.last_scrub.clone_from(&records.last_scrub);
    st.last_rebuild.clone_from(&records.last_rebuild);
    st.scrub_paused = records.scrub_paused && st.scrub.is_some();
    if st.view == "live" {
        st.view = "last checkpoint".into();
    }
    let problem = st.problem.take();
    st.explain();
    if let Some(p) = problem {
        st.problem = Some(p);
    }
    st
}

/// What the superblocks alone say, for a pool whose checkpoint cannot be read (`error`).
fn label_status(
    dir: &Path,
    meta: &DirMeta,
    images: &[ImageInfo],
    newest: Option<&DiskLabel>,
    error: &DirError,
) -> DirStatus {
    let mut disks = Vec::new();
    if let Some(l) = newest {
        for (slot, m) in l.members.iter().enumerate() {
            let image = image_of_slot(images, slot).map(image_name);
            let state = if image.is_none() || m.state == DiskState::Failed {
                DiskState::Failed
            } else {
                m.state
            };
            disks.push(DiskReport {
                index: slot,
                state: disk_state_name(state).to_string(),
                present: image.is_some(),
                image,
                errors: ErrorCounts::default(),
            });
        }
    }
    let geo = newest.map(|l| l.geometry);
    DirStatus {
        dir: dir.display().to_string(),
        health: "faulted".into(),
        level: geo.map_or("?".into(), |g| g.level().name().to_string()),
        strip_bytes: geo.map_or(0, |g| g.strip_bytes() as u64),
        model: meta.model.clone(),
        disks,
        tolerance: geo.map_or(0, |g| g.tolerance()),
        spares: newest.map_or(0, |l| l.spares.len()),
        log_device: None,
        images: images.to_vec(),
        rebuild: None,
        scrub: None,
        scrub_repaired_blocks: 0,
        scrub_unrepairable_blocks: 0,
        bad_ranges: 0,
        luns: Vec::new(),
        usable_bytes: 0,
        live_bytes: 0,
        compression_ratio: 1.0,
        root_gen: 0,
        capacity_bytes: 0,
        dead_bytes: 0,
        last_scrub: None,
        last_rebuild: None,
        scrub_paused: false,
        view: "superblocks".into(),
        read_only: false,
        background: None,
        problem: Some(format!("The pool cannot be opened: {error}.")),
        action: None,
    }
}
