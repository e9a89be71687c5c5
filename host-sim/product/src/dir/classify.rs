//! Which image is what: every image's superblock is read on the bare file ([`scan`]), then the
//! images are sorted into members (by slot, from the newest superblock generation), spares and
//! stale images ([`classify`]) the way import will. This is the one place the host reads
//! disk labels ([`DiskLabel`]).

use std::path::Path;

use raidcore::pool::{DiskLabel, OpenError, PoolConfig, Role, read_label};
use raidcore::raid::DiskState;
use raidcore_hal::{BlockSize, ErrorKind};

use super::lock::in_use_or_disk;
use super::{DirError, ImageInfo, ImageRole, failed_member_note, image_name};
use crate::disk::{FileDisk, FileDiskOptions};

/// An image opened (and locked) with what its superblock says, if it holds one.
#[derive(Debug)]
pub struct Found {
    /// Image number.
    pub number: usize,
    /// The open image.
    pub disk: FileDisk,
    /// Its label (the newest valid superblock copy).
    pub sb: Option<DiskLabel>,
}

/// Opens the images `numbers` of `dir` with block size `bs` and reads their superblocks.
/// Images whose length is no whole number of blocks (truncated) come back as stale
/// [`ImageInfo`]s: they are left out like a missing member, so redundancy serves the pool.
///
/// Errors: anything else an image refuses (a lock: [`DirError::InUse`]; permissions) stops the
/// open ([`DirError::Disk`]).
pub fn scan(
    dir: &Path,
    numbers: &[usize],
    bs: BlockSize,
    sync_on_flush: bool,
) -> Result<(Vec<Found>, Vec<ImageInfo>), DirError> {
    let opts = FileDiskOptions {
        overwrite: false,
        sync_on_flush,
        preallocate: false,
    };
    scan_with(dir, numbers, bs, |p| FileDisk::open_with(p, bs, opts))
}

/// [`scan`] with the images opened by `open` (read-only ones for a look that writes nothing).
/// A missing image (removed since the listing) is left out and named.
pub fn scan_with(
    dir: &Path,
    numbers: &[usize],
    bs: BlockSize,
    open: impl Fn(&Path) -> Result<FileDisk, crate::disk::DiskError>,
) -> Result<(Vec<Found>, Vec<ImageInfo>), DirError> {
    let mut found = Vec::new();
    let mut unusable = Vec::new();
    for &n in numbers {
        let path = dir.join(image_name(n));
        let mut disk = match open(&path) {
            Ok(d) => d,
            Err(err) if err.kind() == ErrorKind::Misaligned => {
                let note = match std::fs::metadata(&path).map(|m| m.len()) {
                    Ok(0) => "unusable: the file is empty (0 bytes)".to_string(),
                    Ok(len) => format!(
                        "unusable: its length is no whole number of {}-byte blocks ({len} bytes)",
                        bs.bytes()
                    ),
                    Err(_) => "unusable: its length is no whole number of blocks".to_string(),
                };
                unusable.push(ImageInfo::stale(n, note));
                continue;
            }
            Err(err) => return Err(in_use_or_disk(path, err)),
        };
        let sb = read_label(&mut disk).ok();
        found.push(Found {
            number: n,
            disk,
            sb,
        });
    }
    Ok((found, unusable))
}

/// Why no image of `found` (in `dir`) gave a pool: none holds a raidcore superblock, or they
/// hold one of a format version this build does not read (named, so an operator knows it is
/// the build, not the data).
pub fn no_pool(dir: &Path, found: &mut [Found]) -> DirError {
    let version = found
        .iter_mut()
        .find_map(|f| match read_label(&mut f.disk) {
            Err(OpenError::UnknownVersion { version, .. }) => Some(version),
            _ => None,
        });
    DirError::Invalid(match version {
        Some(v) => format!(
            "the images in {} were written by raidcore format version {v}, which this build \
             does not read",
            dir.display()
        ),
        None => format!("no image in {} holds a raidcore superblock", dir.display()),
    })
}

/// The pool configuration to import with (`config`'s run-time policy, the fixed settings of
/// the newest superblock) and the number of member slots; `None` if no image holds a
/// superblock.
#[must_use]
pub fn newest_config(found: &[Found], config: PoolConfig) -> Option<(PoolConfig, usize)> {
    let newest = found
        .iter()
        .filter_map(|f| f.sb.as_ref())
        .max_by_key(|sb| sb.generation)?;
    Some((config.with_label(newest), newest.geometry.disks()))
}

/// Sorts the images into members (by slot, from the newest superblock generation of the pool
/// most images carry), spares and stale images, the way import will.
#[must_use]
pub fn classify(found: &[Found]) -> Vec<ImageInfo> {
    let newest = newest_of_main_pool(found);
    let mut infos: Vec<ImageInfo> = found
        .iter()
        .map(|f| {
            let mut info = ImageInfo::new(f.number, ImageRole::Stale, None);
            match (&f.sb, newest) {
                (None, _) => info.note = Some("no raidcore superblock".into()),
                (Some(_), None) => {}
                (Some(sb), Some(new)) if sb.pool_uuid != new.pool_uuid => {
                    info.note = Some("belongs to another pool".into());
                }
                (Some(sb), Some(new)) => place(&mut info, sb, new),
            }
            info
        })
        .collect();
    leave_out_copies(found, &mut infos);
    infos
}

/// Images that carry the same disk identity as another (a copy of an image): an older label
/// is stale; as new a label as another's leaves both out, as the import does.
fn leave_out_copies(found: &[Found], infos: &mut [ImageInfo]) {
    let key = |f: &Found| {
        f.sb.as_ref()
            .map(|sb| (sb.pool_uuid, sb.disk_guid, sb.generation))
    };
    for (i, f) in found.iter().enumerate() {
        let Some((uuid, guid, generation)) = key(f) else {
            continue;
        };
        let twins: Vec<(usize, u64)> = found
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter_map(|(_, o)| key(o).map(|(u, g, n)| (o.number, u, g, n)))
            .filter(|&(_, u, g, _)| u == uuid && g == guid)
            .map(|(n, _, _, g)| (n, g))
            .collect();
        let Some(&(_, newest)) = twins.iter().max_by_key(|t| t.1) else {
            continue;
        };
        if newest < generation {
            continue;
        }
        let names: Vec<String> = twins.iter().map(|t| image_name(t.0)).collect();
        let note = if newest > generation {
            format!(
                "an older copy of {} (generation {generation})",
                names.join(", ")
            )
        } else {
            format!(
                "the same disk as {} (a copy?): neither is used until all but one are removed",
                names.join(", ")
            )
        };
        if let Some(info) = infos.get_mut(i) {
            info.leave_out(note);
        }
    }
}

/// The newest superblock of the pool most images carry.
pub(crate) fn newest_of_main_pool(found: &[Found]) -> Option<&DiskLabel> {
    let mut best: Option<([u8; 16], usize)> = None;
    for sb in found.iter().filter_map(|f| f.sb.as_ref()) {
        let n = found
            .iter()
            .filter(|o| o.sb.as_ref().is_some_and(|o| o.pool_uuid == sb.pool_uuid))
            .count();
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((sb.pool_uuid, n));
        }
    }
    let (uuid, _) = best?;
    found
        .iter()
        .filter_map(|f| f.sb.as_ref())
        .filter(|sb| sb.pool_uuid == uuid)
        .max_by_key(|sb| sb.generation)
}

/// Places an image of the pool (superblock `sb`) by the pool's newest superblock `new`.
fn place(info: &mut ImageInfo, sb: &DiskLabel, new: &DiskLabel) {
    if let Some(slot) = new.members.iter().position(|m| m.guid == sb.disk_guid) {
        if new.members[slot].state == DiskState::Failed {
            info.note = Some(failed_member_note(slot));
        } else {
            info.role = ImageRole::Member;
            info.slot = Some(slot);
            info.guid = Some(sb.disk_guid);
        }
    } else if new.spares.contains(&sb.disk_guid) {
        info.role = ImageRole::Spare;
        info.guid = Some(sb.disk_guid);
    } else {
        let was = match sb.role {
            Role::Member(s) => format!("former member of slot {s}"),
            Role::Spare => "former spare".into(),
            Role::Log => "former log device".into(),
        };
        info.note = Some(format!("{was} (generation {})", sb.generation));
    }
}
