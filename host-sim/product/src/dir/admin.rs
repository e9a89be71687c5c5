//! Changing a pool's membership by hand: fail a member, replace a failed one with a blank
//! image, let a waiting hot spare take a failed slot, and run the rebuild or scrub that
//! follows. This is the one place the host calls the pool's membership API (`fail_disk`,
//! `replace_disk`), so changes to that API have one home here.

use std::fs;

use raidcore::raid::DiskState;
use raidcore_hal::BlockDevice;

use super::error::io_err;
use super::lock::in_use_or_disk;
use super::{
    DirError, HostPool, ImageInfo, ImageRole, Members, PoolDir, failed_image_of_slot,
    failed_member_note, image_name, list_images,
};
use crate::disk::{FileDisk, FileDiskOptions};
use crate::status::disk_state_name;

/// If a member slot is failed while a hot spare waits and no rebuild runs, has the pool take
/// the spare (by failing the slot again, which runs the pool's failure handling). Returns the
/// slot and the spares waiting before, if it did.
///
/// A workaround: the pool takes spares only from its write paths, so a member that dies under
/// reads alone stays failed with the spare idle (tests/tests/repro_read_failure_spare.rs).
pub fn take_spare_for_failed<D: BlockDevice>(
    pool: &mut HostPool<D>,
) -> Result<Option<(usize, usize)>, DirError> {
    let st = pool.status();
    if st.spares == 0 || st.rebuild.is_some() {
        return Ok(None);
    }
    let Some(slot) = st.disks.iter().find(|d| d.state == DiskState::Failed) else {
        return Ok(None);
    };
    let slot = usize::from(slot.slot);
    pool.fail_disk(slot)?;
    Ok(Some((slot, usize::from(st.spares))))
}

/// Runs [`raidcore::pool::Pool::maintenance`] until no rebuild or scrub is left, calling
/// `progress(done, total)` (in stripes of a rebuild, segments of a scrub) after each step.
pub fn run_maintenance<D: BlockDevice>(
    pool: &mut HostPool<D>,
    mut progress: impl FnMut(u64, u64),
) -> Result<(), DirError> {
    loop {
        let rep = pool.maintenance()?;
        let st = pool.status();
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

impl<M: Members> PoolDir<M> {
    /// Refuses a member slot the pool does not have.
    fn check_slot(&self, slot: usize) -> Result<(), DirError> {
        let disks = self.pool.array().geometry().disks();
        if slot >= disks {
            return Err(DirError::Invalid(format!(
                "disk {slot}: the pool has member slots 0 to {}",
                disks - 1
            )));
        }
        Ok(())
    }

    /// Fails member `slot` by hand; a hot spare takes over if there is one (its rebuild starts
    /// but is not run: see [`PoolDir::run_maintenance`]).
    ///
    /// Errors: [`DirError::Invalid`] for a slot out of range or failed already, and, unless
    /// `force`, when the slot is in sync and failing it would leave more members out of sync
    /// (failed, or still rebuilding) than the level tolerates: data would become unreadable,
    /// and no command brings a failed member back.
    pub fn fail(&mut self, slot: usize, force: bool) -> Result<(), DirError> {
        self.check_slot(slot)?;
        let st = self.pool.status();
        let state = st.disks.get(slot).map(|d| d.state);
        if state == Some(DiskState::Failed) {
            return Err(DirError::Invalid(format!("disk {slot} is failed already")));
        }
        let geo = *self.pool.array().geometry();
        let out = st
            .disks
            .iter()
            .filter(|d| d.state != DiskState::Online)
            .count();
        let faults = state == Some(DiskState::Online) && out + 1 > geo.tolerance();
        if !force && faults {
            return Err(DirError::Invalid(format!(
                "failing disk {slot} would leave {} members out of sync (failed or rebuilding), \
                 more than {} tolerates ({}): data would become unreadable; pass --force to \
                 fail it anyway",
                out + 1,
                geo.level().name(),
                geo.tolerance()
            )));
        }
        let failed = self.pool.fail_disk(slot);
        if faults {
            // A faulted pool writes nothing that could narrow a later import, this failure's
            // record included.
            return Err(DirError::Faulted(format!(
                "disk {slot} failed by force: the pool is FAULTED and serves no I/O; a faulted \
                 pool writes nothing to its disks, so neither is this recorded: once the pool \
                 is opened again (by the next command, or when its server restarts) disk {slot} \
                 is a member as before"
            )));
        }
        failed?;
        self.note_failed(slot);
        Ok(())
    }

    /// Updates [`PoolDir::images`] after member `slot` failed: its image is stale now, and a
    /// spare that took the slot fills it ([`PoolDir::reconcile_spares`]).
    pub fn note_failed(&mut self, slot: usize) {
        self.leave_out_slot(slot);
        self.reconcile_spares();
    }

    /// The image filling member slot `slot`, if any, is a failed member now.
    fn leave_out_slot(&mut self, slot: usize) {
        for i in &mut self.images {
            if i.role == ImageRole::Member && i.slot == Some(slot) {
                i.leave_out(failed_member_note(slot));
            }
        }
    }

    /// Puts a blank image into failed member slot `slot` and starts rebuilding onto it (the
    /// rebuild is not run: see [`PoolDir::run_maintenance`]); returns the new image's number.
    /// Without `with`, the image that filled the slot (if any) is renamed
    /// `disk<n>.img.failed-g<generation>` and the new image takes its name (a slot without an
    /// image gets the next free number). With `with` (`disk<n>.img`), that image is used
    /// (made if missing; an existing one must hold no raidcore superblock) and the failed
    /// image stays where it is.
    ///
    /// Errors: [`DirError::Invalid`] for a slot out of range or not failed, or a `with` that
    /// is no image name or names an image that is not blank.
    pub fn replace(&mut self, slot: usize, with: Option<&str>) -> Result<usize, DirError> {
        self.check_slot(slot)?;
        let state = self.pool.status().disks.get(slot).map(|d| d.state);
        if state != Some(DiskState::Failed) {
            return Err(DirError::Invalid(format!(
                "disk {slot} is {} (only a failed member can be replaced; `fail` it first)",
                state.map_or("missing", disk_state_name)
            )));
        }
        let (number, disk) = match with {
            Some(name) => {
                let n = self.image_number(name)?;
                (n, self.blank_image(n)?)
            }
            None => self.new_image_for(slot)?,
        };
        let m = self.members.member(number, disk);
        self.pool.replace_disk(slot, m)?;
        let guid = self.pool.status().disks.get(slot).map_or(0, |d| d.guid);
        self.images.retain(|i| i.number != number);
        self.images
            .push(ImageInfo::new(number, ImageRole::Member, Some(slot)).with_guid(guid));
        self.images.sort_by_key(|i| i.number);
        Ok(number)
    }

    /// Brings failed member `slot` back with the disk that left it: the image noted as the
    /// slot's failed member, which is the file the pool still holds there (failed by hand, or
    /// its errors have stopped) unless that was moved away, or is opened again (it came back,
    /// or the pool was opened without it); the pool checks its label either way.
    /// Only the stripes written since it left are rebuilt, by the maintenance that follows.
    /// Returns the image's number, if known.
    ///
    /// Errors: [`DirError::Invalid`] for a slot out of range or not failed, or with no image to
    /// bring back; the pool's refusal ([`DirError::Admin`]: the image is not that member's, or
    /// the pool is faulted).
    pub fn online(&mut self, slot: usize) -> Result<Option<usize>, DirError> {
        self.check_slot(slot)?;
        let st = self.pool.status();
        let d = st.disks.get(slot);
        if let Some(d) = d.filter(|d| d.state != DiskState::Failed) {
            return Err(DirError::Invalid(format!(
                "disk {slot} is {} (only a failed member is brought back online)",
                disk_state_name(d.state)
            )));
        }
        let image = failed_image_of_slot(&self.images, slot);
        let present = d.is_some_and(|d| d.present);
        // The pool holds the file it had open, which may have been moved away since: the image
        // under the slot's name is that file only if it cannot be locked again.
        let fresh = match image.filter(|_| present) {
            Some(n) => match self.open_image(n) {
                Err(DirError::InUse(_)) => None,
                other => Some((n, other?)),
            },
            None => None,
        };
        if let Some((n, disk)) = fresh {
            let m = self.members.member(n, disk);
            self.pool.online_disk(slot, m)?;
        } else if present {
            self.pool.online(slot)?;
        } else {
            let number = image.ok_or_else(|| {
                DirError::Invalid(format!(
                    "disk {slot}: no image of this member is in the directory (`replace` puts a \
                     blank one in)"
                ))
            })?;
            let disk = self.open_image(number)?;
            let m = self.members.member(number, disk);
            self.pool.online_disk(slot, m)?;
        }
        let guid = self.pool.status().disks.get(slot).map_or(0, |d| d.guid);
        if let Some(n) = image {
            self.images.retain(|i| i.number != n);
            self.images
                .push(ImageInfo::new(n, ImageRole::Member, Some(slot)).with_guid(guid));
            self.images.sort_by_key(|i| i.number);
        }
        Ok(image)
    }

    /// Image `number` opened read-write for the pool.
    fn open_image(&self, number: usize) -> Result<FileDisk, DirError> {
        let path = self.dir.join(image_name(number));
        let opts = FileDiskOptions {
            overwrite: false,
            sync_on_flush: self.members.sync_on_flush(),
            preallocate: false,
        };
        FileDisk::open_with(&path, self.meta.block_size()?, opts)
            .map_err(|err| in_use_or_disk(path, err))
    }

    /// Adds a hot spare on a new blank image: `image` (`disk<n>.img`, made if missing, blank
    /// if it exists) or the next free number. Returns the image's number.
    ///
    /// Errors: [`DirError::Invalid`] for a bad name or an image that is not blank; the pool's
    /// refusal ([`DirError::Admin`]: no room, wrong size).
    pub fn add_spare(&mut self, image: Option<&str>) -> Result<usize, DirError> {
        let number = match image {
            Some(name) => self.image_number(name)?,
            None => list_images(&self.dir)?.last().map_or(0, |n| n + 1),
        };
        let disk = self.blank_image(number)?;
        let m = self.members.member(number, disk);
        let before = self.known_guids();
        self.pool.add_spare(m)?;
        // The new spare's GUID is the one not known before (a failed slot may have taken it).
        let guid = self.known_guids().into_iter().find(|g| !before.contains(g));
        self.images.retain(|i| i.number != number);
        let info = ImageInfo::new(number, ImageRole::Spare, None);
        self.images.push(match guid {
            Some(g) => info.with_guid(g),
            None => info,
        });
        self.images.sort_by_key(|i| i.number);
        // A failed slot waiting for a spare took it at once.
        self.reconcile_spares();
        Ok(number)
    }

    /// The GUIDs of the disks in the pool: members by slot, then the spares waiting.
    fn known_guids(&self) -> Vec<u64> {
        let st = self.pool.status();
        let members = st.disks.iter().map(|d| d.guid);
        members.chain(self.pool.spare_guids()).collect()
    }

    /// The number of the image file named `name` (`disk<n>.img`), which must not be one the
    /// pool uses.
    fn image_number(&self, name: &str) -> Result<usize, DirError> {
        let n = name
            .strip_prefix("disk")
            .and_then(|r| r.strip_suffix(".img"))
            .and_then(|d| d.parse::<usize>().ok())
            .filter(|&n| image_name(n) == name)
            .ok_or_else(|| {
                DirError::Invalid(format!(
                    "{name:?}: images are named disk<number>.img in the pool directory (so \
                     that the pool finds them when it is opened)"
                ))
            })?;
        if self
            .images
            .iter()
            .any(|i| i.number == n && i.role != ImageRole::Stale)
        {
            return Err(DirError::Invalid(format!("{name} is in use by the pool")));
        }
        Ok(n)
    }

    /// Image `number` as a blank disk for the pool: made the size of the members if missing;
    /// an existing file is used only if it holds no raidcore superblock.
    fn blank_image(&self, number: usize) -> Result<FileDisk, DirError> {
        let path = self.dir.join(image_name(number));
        if !path.exists() {
            return self.create_image(number);
        }
        let mut disk = self.open_image(number)?;
        if raidcore::pool::read_label(&mut disk).is_ok() {
            return Err(DirError::Invalid(format!(
                "{} holds a raidcore superblock (a member of this or another pool): use a blank \
                 image, or remove it first",
                path.display()
            )));
        }
        Ok(disk)
    }

    /// The members' image size in bytes.
    fn member_image_bytes(&self) -> Result<u64, DirError> {
        self.images
            .iter()
            .filter(|i| i.role != ImageRole::Stale)
            .find_map(|i| fs::metadata(self.dir.join(&i.file)).ok().map(|m| m.len()))
            .ok_or_else(|| DirError::Invalid("cannot size the new image".into()))
    }

    /// A new blank image number `number`, the size of the members.
    fn create_image(&self, number: usize) -> Result<FileDisk, DirError> {
        let bs = self.meta.block_size()?;
        let size = self.member_image_bytes()?;
        let path = self.dir.join(image_name(number));
        let opts = FileDiskOptions {
            overwrite: false,
            sync_on_flush: self.members.sync_on_flush(),
            preallocate: self.meta.preallocated,
        };
        FileDisk::create_with(&path, bs, size / bs.bytes() as u64, opts)
            .map_err(|err| DirError::Disk { path, err })
    }

    /// When the pool took hot spares (by itself under client I/O, or for a member failed by
    /// hand), the images listed as spares whose GUIDs it no longer lists fill the slots that
    /// carry those GUIDs now, and the images that filled those slots are stale. A spare taken
    /// and failed since (in no slot now) is stale too.
    pub fn reconcile_spares(&mut self) {
        let st = self.pool.status();
        let waiting: Vec<u64> = self.pool.spare_guids().collect();
        let taken: Vec<(usize, u64)> = self
            .images
            .iter()
            .filter(|i| i.role == ImageRole::Spare)
            .filter_map(|i| i.guid.map(|g| (i.number, g)))
            .filter(|(_, g)| !waiting.contains(g))
            .collect();
        for (number, guid) in taken {
            let slot = st.disks.iter().position(|d| d.guid == guid);
            if let Some(slot) = slot {
                self.leave_out_slot(slot);
            }
            if let Some(i) = self.images.iter_mut().find(|i| i.number == number) {
                match slot {
                    Some(slot) => {
                        i.role = ImageRole::Member;
                        i.slot = Some(slot);
                    }
                    None => i.leave_out("hot spare taken by the pool and failed since"),
                }
            }
        }
    }

    /// Removes the hot spare on image `image` (`disk<n>.img`) from the pool: the pool writes
    /// its configuration without it and zeroes the image's superblocks, so the image stays in
    /// the directory, blank (`spare add --image` takes it again). Returns its number.
    ///
    /// Errors: [`DirError::Invalid`] for an image that is no hot spare of the pool (saying what
    /// it is); the pool's refusal ([`DirError::Admin`]).
    pub fn remove_spare(&mut self, image: &str) -> Result<usize, DirError> {
        let info = self.images.iter().find(|i| i.file == image);
        let (number, guid) = match info {
            Some(i) if i.role == ImageRole::Spare && i.guid.is_some() => {
                (i.number, i.guid.unwrap_or_default())
            }
            Some(i) => {
                let what = match (i.role, i.slot, &i.note) {
                    (ImageRole::Member, Some(slot), _) => format!("the member of slot {slot}"),
                    (_, _, Some(note)) => format!("left out ({note})"),
                    _ => "not a hot spare".to_string(),
                };
                if i.role == ImageRole::Spare {
                    // Not reached: every spare image gets its GUID when the pool takes it.
                    return Err(DirError::Invalid(format!(
                        "{image}: which of the pool's spares it holds is not known here"
                    )));
                }
                return Err(DirError::Invalid(format!(
                    "{image} is no hot spare of this pool: it is {what}"
                )));
            }
            None => {
                return Err(DirError::Invalid(format!(
                    "{image}: the pool directory has no such image"
                )));
            }
        };
        drop(self.pool.remove_spare(guid)?);
        if let Some(i) = self.images.iter_mut().find(|i| i.number == number) {
            i.leave_out("removed hot spare (blank)");
        }
        Ok(number)
    }

    /// A blank image the size of the others for slot `slot`: under the name of the image that
    /// failed there (renamed aside first), or the next free number.
    fn new_image_for(&self, slot: usize) -> Result<(usize, FileDisk), DirError> {
        let failed = failed_image_of_slot(&self.images, slot);
        let number = match failed {
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
        Ok((number, self.create_image(number)?))
    }

    /// Has a waiting hot spare take a failed slot ([`take_spare_for_failed`]) and notes it in
    /// [`PoolDir::images`]; returns whether it did.
    pub fn take_spare_for_failed(&mut self) -> Result<bool, DirError> {
        match take_spare_for_failed(&mut self.pool)? {
            Some((slot, _)) => {
                self.note_failed(slot);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Runs the pool's maintenance until no rebuild or scrub is left ([`run_maintenance`]).
    pub fn run_maintenance(&mut self, progress: impl FnMut(u64, u64)) -> Result<(), DirError> {
        run_maintenance(&mut self.pool, progress)
    }
}
