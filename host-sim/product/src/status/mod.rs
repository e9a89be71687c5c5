//! What `status` reports about a pool directory ([`DirStatus`], like `zpool status`), built
//! from the pool's own [`Status`] and LUN table; one definition for both commands (`raidcore`
//! and `raidcore-sim`), printed as text ([`text`]) or JSON ([`json`]).

pub mod explain;
pub mod json;
pub mod text;

use std::path::Path;

use raidcore::pool::{LogDeviceState, Stats, Status};
use raidcore::raid::{DiskState, Geometry};
use raidcore_hal::BlockDevice;
use serde::{Deserialize, Serialize};

pub use crate::dir::records::{ErrorCounts, ScanRecord};
use crate::dir::{DirMeta, HostPool, ImageInfo, image_name, image_of_slot};

/// One member slot in [`DirStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskReport {
    /// Member slot.
    pub index: usize,
    /// `online`, `failed` or `rebuilding`.
    pub state: String,
    /// A disk is in the slot.
    pub present: bool,
    /// The image file in the slot, if known.
    pub image: Option<String>,
    /// Error counters since records began or the last `clear` (units: see
    /// [`crate::dir::records`]).
    pub errors: ErrorCounts,
}

/// One LUN in [`DirStatus`]; sizes in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// The pool's dedicated intent-log device in [`DirStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogDeviceReport {
    /// Its file, as the description names it (none when the description names none).
    pub path: Option<String>,
    /// Its device model for the simulator (the members' when absent).
    pub model: Option<String>,
    /// `online` (flushes go to it), `failed` (the intent log is on the members again: nothing
    /// was lost) or `missing` (the pool does not open without it, unless forced).
    pub state: String,
}

impl LogDeviceReport {
    /// The report of the pool's log device `st`, described by `meta`.
    #[must_use]
    pub fn of(st: &raidcore::pool::LogDeviceStatus, meta: &DirMeta) -> Self {
        let state = match st.state {
            LogDeviceState::Online => "online",
            LogDeviceState::Failed => "failed",
            LogDeviceState::Missing => "missing",
        };
        LogDeviceReport {
            path: meta.log_device.as_ref().map(|p| p.display().to_string()),
            model: meta.log_model.clone(),
            state: state.into(),
        }
    }
}

/// Background work as a server runs it: its rate policy, how fast the rebuild or scrub goes,
/// when it should end, and the write-back cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Background {
    /// The rate policy (`share:25` or `rate:50M`, see `serve --background`).
    pub policy: String,
    /// Member bytes the rebuild or scrub read per second, over the last few seconds.
    pub rate_bytes_per_s: f64,
    /// Seconds until the rebuild or scrub ends at that rate.
    pub eta_s: Option<f64>,
    /// Buffered writes are written out this long after the last write, in milliseconds.
    pub destage_delay_ms: u64,
    /// Writes acknowledged but not yet written out (the next destage or flush does).
    pub unflushed: bool,
}

/// Progress of a rebuild (in stripes) or scrub (in segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The member slot being rebuilt.
    pub disk: Option<usize>,
    /// Done so far.
    pub done: u64,
    /// In all.
    pub total: u64,
}

/// What `status` reports (like `zpool status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirStatus {
    /// The directory.
    pub dir: String,
    /// `online`, `degraded` or `faulted`.
    pub health: String,
    /// RAID level.
    pub level: String,
    /// Strip size in bytes.
    pub strip_bytes: u64,
    /// Device model of the images (timing for the simulator; see [`DirMeta::model`]).
    pub model: String,
    /// Member slots.
    pub disks: Vec<DiskReport>,
    /// How many members may be out of sync (failed, missing or being rebuilt), in the worst
    /// placement, with every block still served.
    #[serde(default)]
    pub tolerance: usize,
    /// Hot spares waiting.
    pub spares: usize,
    /// The dedicated intent-log device, if the pool has one.
    #[serde(default)]
    pub log_device: Option<LogDeviceReport>,
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
    /// Bytes of every log segment (what the pool can hold, metadata and reserves included).
    #[serde(default)]
    pub capacity_bytes: u64,
    /// Dead bytes the cleaner can reclaim.
    #[serde(default)]
    pub dead_bytes: u64,
    /// The last scrub that finished (none on a pool never scrubbed).
    #[serde(default)]
    pub last_scrub: Option<ScanRecord>,
    /// The last rebuild that finished.
    #[serde(default)]
    pub last_rebuild: Option<ScanRecord>,
    /// The scrub in progress is paused.
    #[serde(default)]
    pub scrub_paused: bool,
    /// What this status shows: `live` (an open pool, or a server's), or `last checkpoint`
    /// (a stopped pool, read without writing: the state its last checkpoint recorded).
    #[serde(default)]
    pub view: String,
    /// The pool is served read-only (`serve --read-only`): nothing is written, and no
    /// rebuild, scrub or resume runs.
    #[serde(default)]
    pub read_only: bool,
    /// A server's background work, when a server answered.
    #[serde(default)]
    pub background: Option<Background>,
    /// What is wrong, in words (`status:` of the text form), if anything.
    #[serde(default)]
    pub problem: Option<String>,
    /// What to do about it (`action:`).
    #[serde(default)]
    pub action: Option<String>,
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

/// What [`DirStatus::from_parts`] is made of: the pool's (or a peek's) own reports.
#[derive(Debug)]
pub struct Parts<'a> {
    /// The pool's status.
    pub st: Status,
    /// Its counters.
    pub stats: Stats,
    /// Its geometry.
    pub geo: Geometry,
    /// Its LUNs.
    pub luns: Vec<LunReport>,
    /// Capacity clients can fill.
    pub usable_bytes: u64,
    /// The directory.
    pub dir: &'a Path,
    /// Its description.
    pub meta: &'a DirMeta,
    /// Its images.
    pub images: &'a [ImageInfo],
}

impl DirStatus {
    /// The status of `pool`, open from the images `images` of the directory `dir` described
    /// by `meta`. (`&mut`: the pool's statistics walk its LUN table.)
    pub fn of<D: BlockDevice>(
        pool: &mut HostPool<D>,
        dir: &Path,
        meta: &DirMeta,
        images: &[ImageInfo],
    ) -> DirStatus {
        DirStatus::from_parts(Parts {
            st: pool.status(),
            stats: pool.stats(),
            geo: *pool.array().geometry(),
            luns: lun_reports(pool),
            usable_bytes: pool.usable_bytes(),
            dir,
            meta,
            images,
        })
    }

    /// The status from the pool's own reports (`view` "live"; the caller changes it for a
    /// look at a stopped pool).
    #[must_use]
    pub fn from_parts(p: Parts<'_>) -> DirStatus {
        let (st, stats, geo) = (p.st, p.stats, p.geo);
        let bb = geo.block_bytes() as u64;
        DirStatus {
            dir: p.dir.display().to_string(),
            health: st.health.name().to_string(),
            level: geo.level().name().to_string(),
            strip_bytes: geo.strip_bytes() as u64,
            model: p.meta.model.clone(),
            disks: disk_reports(&st, p.images, bb),
            tolerance: geo.tolerance(),
            spares: usize::from(st.spares),
            log_device: st
                .log_device
                .as_ref()
                .map(|d| LogDeviceReport::of(d, p.meta)),
            images: p.images.to_vec(),
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
            luns: p.luns,
            usable_bytes: p.usable_bytes,
            live_bytes: stats.live_bytes,
            compression_ratio: stats.compression_ratio(),
            root_gen: st.root_gen,
            capacity_bytes: u64::from(stats.segments) * stats.segment_bytes,
            dead_bytes: stats.dead_bytes,
            last_scrub: None,
            last_rebuild: None,
            scrub_paused: false,
            view: "live".into(),
            read_only: false,
            background: None,
            problem: None,
            action: None,
        }
    }
}

fn disk_reports(st: &Status, images: &[ImageInfo], block_bytes: u64) -> Vec<DiskReport> {
    st.disks
        .iter()
        .map(|d| {
            let slot = usize::from(d.slot);
            DiskReport {
                index: slot,
                state: disk_state_name(d.state).to_string(),
                present: d.present,
                image: d
                    .present
                    .then(|| image_of_slot(images, slot))
                    .flatten()
                    .map(image_name),
                errors: ErrorCounts::of(d.errors, block_bytes),
            }
        })
        .collect()
}

/// Every LUN of `pool` as `status` reports it.
#[must_use]
pub fn lun_reports<D: BlockDevice>(pool: &HostPool<D>) -> Vec<LunReport> {
    luns_of(pool.luns())
}

/// LUNs as `status` reports them.
pub fn luns_of(luns: impl Iterator<Item = raidcore::pool::LunInfo>) -> Vec<LunReport> {
    luns.map(|l| LunReport {
        id: l.id,
        name: l.name.as_str().to_string(),
        size_bytes: l.blocks * 4096,
        logical_bytes: l.logical_bytes,
        physical_bytes: l.physical_bytes,
        stored_bytes: l.stored_bytes,
        parity_bytes: l.parity_bytes,
    })
    .collect()
}
