//! What an operator reads (like `zpool status`) and does by hand: health, member states and
//! counters, rebuild and scrub progress; background work; failing, replacing and adding disks.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::membership::Spare;
use super::scrub::Scrub;
use super::{AdminError, Pool, rebuild};
use crate::error::IoError;
use crate::format::BadRange;
use crate::raid::{DiskErrors, DiskState};

/// Pool health, as `zpool status` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Health {
    /// Every member in sync.
    Online,
    /// Some members failed, missing or rebuilding, within the level's tolerance.
    Degraded,
    /// More members out of sync than the level tolerates: no I/O is served.
    Faulted,
    /// Suspended by a condition of the host (storage full or read-only): no I/O is served and
    /// nothing written until [`Pool::resume`].
    Suspended,
}

impl Health {
    /// Lower-case name (`online`, `degraded`, `faulted`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Health::Online => "online",
            Health::Degraded => "degraded",
            Health::Faulted => "faulted",
            Health::Suspended => "suspended",
        }
    }
}

/// One member slot in [`Status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskStatus {
    /// Slot.
    pub slot: u8,
    /// State.
    pub state: DiskState,
    /// A disk is in the slot.
    pub present: bool,
    /// GUID of the disk the configuration puts in the slot (a spare that took the slot, or a
    /// replacement, has its own).
    pub guid: u64,
    /// Error counters.
    pub errors: DiskErrors,
}

/// What [`Pool::status`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Overall health.
    pub health: Health,
    /// Member slots.
    pub disks: Vec<DiskStatus, 32>,
    /// Hot spares waiting.
    pub spares: u8,
    /// Rebuild in progress: member slot, stripes done, stripes to do.
    pub rebuild: Option<(u8, u64, u64)>,
    /// Scrub in progress: next segment, segments in all.
    pub scrub: Option<(u32, u32)>,
    /// Member blocks the last (or current) scrub rewrote: latent sector errors, checksum
    /// heals and parity it repaired (a block a write could not place is not counted).
    pub scrub_repaired: u64,
    /// Blocks found unrepairable by the last (or current) scrub.
    pub scrub_unrepairable: u64,
    /// LBA ranges known lost (they read as errors until rewritten).
    pub bad_ranges: usize,
    /// Generation of the last checkpoint.
    pub root_gen: u64,
    /// The dedicated intent-log device, if the pool has one.
    pub log_device: Option<super::LogDeviceStatus>,
}

/// What one [`Pool::maintenance`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MaintenanceReport {
    /// Stripes rebuilt.
    pub rebuilt_stripes: u64,
    /// Stripes scrubbed.
    pub scrubbed_stripes: u64,
    /// Segments cleaned.
    pub cleaned_segments: u32,
    /// Nothing is left to do (no rebuild or scrub in progress).
    pub idle: bool,
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Health from the members in sync: a hot spare that took a failed member's slot holds
    /// none of its data until rebuilt. A stripe write that reached too few members faults the
    /// pool for good.
    pub(crate) fn health(&self) -> Health {
        let out = self.array.not_in_sync().len();
        if self.write_lost || out > self.array.geometry().tolerance() {
            Health::Faulted
        } else if self.suspended.is_some() {
            Health::Suspended
        } else if out > 0 {
            Health::Degraded
        } else {
            Health::Online
        }
    }

    /// Health, member states and counters, rebuild and scrub progress.
    pub fn status(&self) -> Status {
        let mut disks = Vec::new();
        for (i, m) in self.array.members().iter().enumerate() {
            let _ = disks.push(DiskStatus {
                slot: i as u8,
                state: m.state(),
                present: m.is_present(),
                guid: self.members.conf.member_guids.get(i).copied().unwrap_or(0),
                errors: m.errors(),
            });
        }
        Status {
            health: self.health(),
            disks,
            spares: self.members.spares.len() as u8,
            rebuild: self
                .rebuild
                .map(|r| (r.disk, r.stripes_done, r.stripes_total)),
            scrub: self.scrub.map(|s| (s.next_segment, self.log.segments())),
            scrub_repaired: self.scrub.map_or(self.last_scrub.0, |s| s.repaired),
            scrub_unrepairable: self.scrub.map_or(self.last_scrub.1, |s| s.unrepairable),
            bad_ranges: self.luns.bad().len(),
            root_gen: self.ckpt.root_gen,
            log_device: self.log_device_status(),
        }
    }

    /// Background work, bounded: rebuilds and scrubs up to `config.stripes_per_step` stripes
    /// (rebuild first). The cleaner does not run here: client writes make the room they need
    /// ([`Pool::write`]). Call it between client requests as often as the device-time share
    /// for background work allows.
    pub fn maintenance(&mut self) -> Result<MaintenanceReport, IoError> {
        self.serving()?;
        let r = self.maintenance_step();
        self.settled(r)
    }

    /// When the next [`Pool::maintenance`] call is due under
    /// [`super::PoolConfig::background`], in the unit of [`Pool::set_time`] (a time already
    /// passed: call it now); `None` when no rebuild or scrub is in progress. Without a policy
    /// every call is due at once.
    #[must_use]
    pub fn maintenance_due(&self) -> Option<u64> {
        if self.rebuild.is_none() && self.scrub.is_none() {
            return None;
        }
        Some(self.cfg.background.map_or(self.now, |p| self.pace.due(&p)))
    }

    fn maintenance_step(&mut self) -> Result<MaintenanceReport, IoError> {
        let at = self.now;
        let base = self.cfg.stripes_per_step;
        let budget = self
            .cfg
            .background
            .map_or(base, |p| self.pace.budget(&p, at, base));
        self.after_membership_change()?;
        let mut rep = MaintenanceReport {
            rebuilt_stripes: self.rebuild_step(budget)?,
            ..MaintenanceReport::default()
        };
        let left = budget.saturating_sub(rep.rebuilt_stripes as u32);
        if left > 0 {
            rep.scrubbed_stripes = self.scrub_step(left)?;
        }
        rep.idle = self.rebuild.is_none() && self.scrub.is_none();
        let strip = self.array.geometry().strip_bytes() as u64;
        let stripes = rep.rebuilt_stripes + rep.scrubbed_stripes;
        // Work done: the next rebuild or scrub starts at the base step, not as late as this one.
        let covered = if rep.idle {
            0
        } else {
            stripes.saturating_mul(strip)
        };
        self.pace.stepped(at, covered);
        Ok(rep)
    }

    /// Starts a scrub pass (or restarts one in progress from the beginning).
    pub fn start_scrub(&mut self) {
        self.scrub = Some(Scrub::start());
    }

    /// Stops the scrub in progress (its repairs so far stay); returns whether one was running.
    /// The next checkpoint's root no longer names it, so a restart does not resume it.
    pub fn cancel_scrub(&mut self) -> bool {
        self.scrub.take().is_some()
    }

    /// Fails member `slot` by hand (as if it died): a hot spare takes over if there is one.
    pub fn fail_disk(&mut self, slot: usize) -> Result<(), AdminError> {
        self.array
            .fail_by_operator(slot)
            .map_err(|_| AdminError::NoSuchSlot { slot })?;
        Ok(self.on_members_failed()?)
    }

    /// Puts a blank disk into failed member slot `slot` and starts rebuilding onto it.
    pub fn replace_disk(&mut self, slot: usize, disk: D) -> Result<(), AdminError> {
        self.check_failed_slot(slot)?;
        self.members.label_departing(&mut self.array, slot);
        self.array
            .replace(slot, disk)
            .map_err(|_| AdminError::DiskMismatch)?;
        let guid = self.members.new_guid();
        if let Some(g) = self.members.conf.member_guids.get_mut(slot) {
            *g = guid;
        }
        // A rebuild still aimed at this slot (its disk failed before the pool noticed) was
        // for the disk just taken out: the new one starts from its first stripe.
        if self.rebuild.is_none_or(|r| usize::from(r.disk) == slot) {
            self.start_rebuild_at(slot as u8, 0);
        }
        Ok(self.write_config()?)
    }

    /// Brings back the disk that left failed member slot `slot` (pulled, or failed by hand,
    /// and now returned as it was): `disk` must carry this pool's label naming it the disk of
    /// that slot. It rejoins as rebuilding, and only the stripes the log may have written
    /// since the newest checkpoint root on it are rebuilt (a write-intent record kept by the
    /// log itself); the rest is taken as it is, and the item checksums still check every
    /// read. If another rebuild is running, this member waits for it and is then rebuilt
    /// whole. [`Pool::online`] does the same with the disk the slot still holds.
    ///
    /// Errors: [`AdminError::Faulted`] (import the pool again instead: it assembles the best
    /// set of members); [`AdminError::NoSuchSlot`]; [`AdminError::NotFailed`];
    /// [`AdminError::NotThisMember`] when the disk's label is unreadable, of another pool, or
    /// of another disk (the slot was refilled since); [`AdminError::DiskMismatch`];
    /// [`AdminError::Io`] if the configuration could not be written.
    pub fn online_disk(&mut self, slot: usize, mut disk: D) -> Result<(), AdminError> {
        let in_sync = self.check_rejoin(slot, Some(&mut disk))?;
        self.array
            .replace(slot, disk)
            .map_err(|_| AdminError::DiskMismatch)?;
        self.resync(slot, in_sync)
    }

    /// [`Pool::online_disk`] with the disk failed member slot `slot` still holds (a member
    /// failed by hand, or one whose device errors have stopped).
    ///
    /// Errors: as [`Pool::online_disk`]; [`AdminError::NotThisMember`] also when the slot
    /// holds no disk.
    pub fn online(&mut self, slot: usize) -> Result<(), AdminError> {
        let in_sync = self.check_rejoin(slot, None)?;
        self.array
            .rejoin(slot)
            .map_err(|_| AdminError::NoSuchSlot { slot })?;
        self.resync(slot, in_sync)
    }

    /// Whether `slot` may take back `disk` (or, with none, the disk it holds); if so, whether
    /// the disk was in sync when it left: the pool saw it fail while recorded online, or its
    /// own label still names it online (not rebuilding).
    fn check_rejoin(&mut self, slot: usize, disk: Option<&mut D>) -> Result<bool, AdminError> {
        self.check_failed_slot(slot)?;
        let (uuid, guid) = (
            self.members.conf.pool_uuid,
            self.members.conf.member_guids.get(slot),
        );
        let disk = match disk {
            Some(d) => Some(d),
            None => self.array.disk_mut(slot),
        };
        let sb = disk
            .and_then(|d| super::read_superblock(d).ok())
            .filter(|sb| {
                sb.pool_uuid == uuid
                    && Some(&sb.disk_guid) == guid
                    && sb.role == crate::format::Role::Member(slot as u8)
            });
        let sb = sb.ok_or(AdminError::NotThisMember { slot })?;
        // A label naming it online: the disk failed before it could learn so.
        let state = sb.members.get(slot).map(|m| m.state);
        Ok(state == Some(DiskState::Online) || self.members.left_in_sync(slot))
    }

    /// Refuses a faulted pool, and a slot that does not exist or is not failed (what
    /// [`Pool::replace_disk`] and [`Pool::online`] need).
    fn check_failed_slot(&self, slot: usize) -> Result<(), AdminError> {
        if self.health() == Health::Faulted {
            return Err(AdminError::Faulted);
        }
        let m = self
            .array
            .member(slot)
            .ok_or(AdminError::NoSuchSlot { slot })?;
        if m.state() != DiskState::Failed {
            return Err(AdminError::NotFailed { slot });
        }
        Ok(())
    }

    /// Starts the resync of member `slot`, which rejoined as rebuilding, and records it: a
    /// disk that was in sync when it left is rebuilt for what it missed, another whole.
    fn resync(&mut self, slot: usize, in_sync: bool) -> Result<(), AdminError> {
        let since = if in_sync {
            self.newest_root_on(slot).map(|r| rebuild::Since::of(&r))
        } else {
            None
        };
        if self.rebuild.is_none_or(|r| usize::from(r.disk) == slot) {
            self.start_rebuild_at(slot as u8, 0);
            if let Some(r) = self.rebuild.as_mut() {
                r.since = since;
            }
        }
        Ok(self.write_config()?)
    }

    /// Adds a hot spare (a blank disk at least as large as the members).
    pub fn add_spare(&mut self, disk: D) -> Result<(), AdminError> {
        if self.health() == Health::Faulted {
            return Err(AdminError::Faulted);
        }
        let geo = *self.array.geometry();
        if disk.block_size().bytes() != geo.block_bytes()
            || disk.block_count() < geo.stripe_lba(geo.stripes())
        {
            return Err(AdminError::DiskMismatch);
        }
        if self.members.spares.is_full() {
            return Err(AdminError::TooManyDisks);
        }
        let guid = self.members.new_guid();
        self.members
            .spares
            .push(Spare { disk, guid })
            .map_err(|_| AdminError::TooManyDisks)?;
        self.write_config()?;
        // A failed member waiting for a spare takes it now.
        if !self.array.failed().is_empty() {
            self.on_members_failed()?;
        }
        Ok(())
    }

    /// The GUIDs of the hot spares waiting, in the order they were added (the last one is
    /// taken first, and [`Pool::add_spare`] appends).
    pub fn spare_guids(&self) -> impl Iterator<Item = u64> + '_ {
        self.members.spares.iter().map(|s| s.guid)
    }

    /// Removes the hot spare with GUID `guid` ([`Pool::spare_guids`]) and returns its disk:
    /// the configuration is written without it to the members and the other spares, then both
    /// of its superblock copies are zeroed so that it is a blank disk again (best effort: a
    /// spare that refuses the write keeps a label of an older generation, which import sets
    /// aside as a former spare).
    ///
    /// Errors: [`AdminError::Faulted`]; [`AdminError::NoSuchSpare`]; [`AdminError::Io`] if the
    /// configuration could not be written (the spare stays in the pool).
    pub fn remove_spare(&mut self, guid: u64) -> Result<D, AdminError> {
        if self.health() == Health::Faulted {
            return Err(AdminError::Faulted);
        }
        let at = self
            .members
            .spares
            .iter()
            .position(|s| s.guid == guid)
            .ok_or(AdminError::NoSuchSpare { guid })?;
        let spare = self.members.spares.remove(at);
        if let Err(e) = self.write_config() {
            // Room is certain: the spare was just taken out.
            let _ = self.members.spares.insert(at, spare);
            return Err(AdminError::Io(e));
        }
        let mut disk = spare.disk;
        super::membership::erase_labels(&mut disk, self.array.geometry().block_bytes());
        Ok(disk)
    }

    /// LBA ranges known lost (they read as errors until rewritten).
    pub fn bad_ranges(&self) -> &[BadRange] {
        self.luns.bad()
    }
}
