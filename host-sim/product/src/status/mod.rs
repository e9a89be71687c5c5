//! What `status` reports about a pool directory ([`DirStatus`], like `zpool status`), built
//! from the pool's own [`Status`] and LUN table; one definition for both commands (`raidcore`
//! and `raidcore-sim`), printed as text ([`text`]) or JSON ([`json`]).

pub mod json;
pub mod text;

use std::path::Path;

use raidcore::pool::Status;
use raidcore::raid::{DiskErrors, DiskState};
use raidcore_hal::BlockDevice;
use serde::Serialize;

use crate::dir::{DirMeta, HostPool, ImageInfo, image_name, image_of_slot};

/// Error counters of one member, as `status` reports them: the fields of the core's
/// [`DiskErrors`], kept here so that the JSON names scripts read are fixed by this interface and
/// not by the core's own encoding.
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

impl From<DiskErrors> for ErrorCounts {
    fn from(e: DiskErrors) -> Self {
        ErrorCounts {
            read: e.read,
            write: e.write,
            medium: e.medium,
            transient: e.transient,
            checksum: e.checksum,
            repaired: e.repaired,
        }
    }
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

/// What `status` reports (like `zpool status`).
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
    /// Device model of the images (timing for the simulator; see [`DirMeta::model`]).
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

/// Lower-case name of a member state.
#[must_use]
pub const fn disk_state_name(s: DiskState) -> &'static str {
    match s {
        DiskState::Online => "online",
        DiskState::Failed => "failed",
        DiskState::Rebuilding => "rebuilding",
    }
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
        let st: Status = pool.status();
        let stats = pool.stats();
        let geo = *pool.array().geometry();
        DirStatus {
            dir: dir.display().to_string(),
            health: st.health.name().to_string(),
            level: geo.level().name().to_string(),
            strip_bytes: geo.strip_bytes() as u64,
            model: meta.model.clone(),
            disks: disk_reports(&st, images),
            spares: usize::from(st.spares),
            images: images.to_vec(),
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
            luns: lun_reports(pool),
            usable_bytes: pool.usable_bytes(),
            live_bytes: stats.live_bytes,
            compression_ratio: stats.compression_ratio(),
            root_gen: st.root_gen,
        }
    }
}

fn disk_reports(st: &Status, images: &[ImageInfo]) -> Vec<DiskReport> {
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
                errors: d.errors.into(),
            }
        })
        .collect()
}

fn lun_reports<D: BlockDevice>(pool: &HostPool<D>) -> Vec<LunReport> {
    pool.luns()
        .map(|l| LunReport {
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
