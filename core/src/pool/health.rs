//! Disk faults at pool level: failing members, hot spares, rebuild (resilver) of live data only,
//! scrub with repair, and the status an operator reads (like `zpool status`).
//!
//! Rebuild walks the stripes of used segments only (the segment usage table knows which hold
//! data), a bounded number per [`crate::pool::Pool::maintenance`] call, so the caller decides how
//! much device time it takes from clients. Its cursor is saved in every checkpoint root, so a
//! restart resumes it. Client reads treat the rebuilding member as missing above the cursor;
//! every stripe the log writes goes to it as well.

use heapless::Vec;
use raidcore_hal::{BlockDevice, ErrorKind};

use super::Pool;
use super::state::{Bufs, Rebuild, Scrub, Spare, State};
use crate::error::IoError;
use crate::event::Event;
use crate::format::{self, BadRange, ItemKind, SLOT_BYTES, SegState, Superblock};
use crate::log::{Expect, SeqRule};
use crate::raid::{ArrayError, Column, DiskErrors, DiskSet, DiskState, Level};

/// What an item walk over a segment ([`State::scrub_items`]) found.
#[derive(Debug, Clone, Copy)]
struct Walk {
    /// Member blocks rewritten by the items' repairs.
    repaired: u64,
    /// Blocks of extents and map pages that no reconstruction made check.
    lost: u64,
    /// The log address the walk reached: items past it were not checked (a header that no
    /// reconstruction makes valid stops the walk).
    reached: u64,
    /// An item overlapping the range the caller watched did not check.
    lost_in_range: bool,
    /// An item overlapping the watched range checked only after a repair.
    healed_in_range: bool,
}

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
}

impl Health {
    /// Lower-case name (`online`, `degraded`, `faulted`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Health::Online => "online",
            Health::Degraded => "degraded",
            Health::Faulted => "faulted",
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
    /// Blocks the last (or current) scrub repaired and could not repair.
    pub scrub_repaired: u64,
    /// Blocks found unrepairable by the last (or current) scrub.
    pub scrub_unrepairable: u64,
    /// LBA ranges known lost (they read as errors until rewritten).
    pub bad_ranges: usize,
    /// Generation of the last checkpoint.
    pub root_gen: u64,
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

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    pub(crate) fn health(&self) -> Health {
        // Members out of sync, not members failed: a hot spare that took a failed member's
        // slot holds none of its data until rebuilt.
        let out = self.array.not_in_sync().len();
        if self.faulted || out > self.geo().tolerance() {
            Health::Faulted
        } else if out > 0 {
            Health::Degraded
        } else {
            Health::Online
        }
    }

    /// Members failed since the configuration was last written: take hot spares, start
    /// rebuilds, record the new membership (generation + 1) on every disk.
    pub(crate) fn on_members_failed(&mut self) -> Result<(), IoError> {
        let before = self.health();
        // More members out of sync than the level tolerates: the data is gone, and a spare
        // taken now would only make the failed slot look present (RAID-0 used to "rebuild"
        // onto a blank spare and keep serving; campaign seed 9112).
        if before == Health::Faulted {
            self.faulted = true;
        }
        for slot in 0..self.geo().disks() {
            let now_failed = self
                .array
                .member(slot)
                .is_some_and(|m| m.state() == DiskState::Failed);
            if !now_failed {
                continue;
            }
            if self.rebuild.is_some_and(|r| r.disk as usize == slot) {
                self.rebuild = None;
            }
            if self.faulted {
                continue;
            }
            let Some(spare) = self.spares.pop() else {
                continue;
            };
            let Spare { disk, guid } = spare;
            if self.array.replace(slot, disk).is_ok() {
                if let Some(g) = self.conf.member_guids.get_mut(slot) {
                    *g = guid;
                }
                self.array
                    .events_mut()
                    .push(Event::SpareTaken { disk: slot as u8 });
                if self.rebuild.is_none() {
                    self.start_rebuild_at(slot as u8, 0);
                }
            }
        }
        // A second rebuild target waits for the first (it stays `Rebuilding` with cursor 0).
        if self.rebuild.is_none()
            && !self.faulted
            && let Some(d) = (0..self.geo().disks()).find(|&d| {
                self.array
                    .member(d)
                    .is_some_and(|m| m.state() == DiskState::Rebuilding)
            })
        {
            let below = self
                .array
                .member(d)
                .map_or(0, crate::raid::Member::rebuilt_below);
            self.start_rebuild_at(d as u8, below);
        }
        let after = self.health();
        if after != before {
            self.array.events_mut().push(Event::HealthChanged {
                health: after as u8,
            });
        }
        self.write_config()
    }

    pub(crate) fn start_rebuild_at(&mut self, disk: u8, stripe: u64) {
        let _ = self.array.set_rebuilt_below(disk as usize, stripe);
        self.rebuild = Some(Rebuild {
            disk,
            next_stripe: stripe,
            stripes_done: 0,
            unrecoverable: 0,
            stripes_total: 0,
            last_permille: 0,
            walked: None,
        });
        self.array.events_mut().push(Event::RebuildStarted { disk });
    }

    /// Whether stripe `s` holds data that must be rebuilt or scrubbed: its segment is in use and
    /// (in the segment the log is filling) it was written.
    fn stripe_in_use(&self, b: &Bufs, s: u64) -> bool {
        let seg_stripes = u64::from(self.conf.layout.segment_stripes);
        let seg = (s / seg_stripes) as u32;
        if seg >= self.segments() {
            return false;
        }
        let state = b.seg(seg).state;
        if state == SegState::Free {
            return false;
        }
        // The segment the log is filling: only stripes below the open one were written. (Other
        // reserved segments are free or filled; their addresses need not be in log order.)
        if self.log.reserved.get(self.log.res_idx) == Some(&seg) {
            return s * (self.sdb() as u64) < self.log.stripe_addr;
        }
        true
    }

    /// Rebuilds up to `budget` stripes; finishes the rebuild when the cursor reaches the end.
    pub(crate) fn rebuild_step(&mut self, b: &mut Bufs, budget: u32) -> Result<u64, IoError> {
        let Some(mut r) = self.rebuild else {
            return Ok(0);
        };
        let stripes = self.geo().stripes();
        if r.stripes_total == 0 {
            r.stripes_total = (r.next_stripe..stripes)
                .filter(|&s| self.stripe_in_use(b, s))
                .count() as u64;
        }
        let mut done = 0u64;
        while r.next_stripe < stripes && done < u64::from(budget) {
            let s = r.next_stripe;
            if self.stripe_in_use(b, s) {
                let before = self.array.stats().repair_bytes_written;
                let disk = r.disk as usize;
                let mut res = self.array.rebuild_stripe_checked(s, disk, b.log.scratch);
                let seg = self.seg_of(s * self.sdb() as u64);
                if matches!(res, Ok(false)) && r.walked != Some(seg) {
                    // The redundancy left disagrees with the reconstruction: a surviving
                    // column is silently stale (a lost or misdirected write), and copying it
                    // into the new member would leave two wrong columns where redundancy
                    // allowed one (campaign seed 695). The segment's items, checked by their
                    // CRCs, find and heal the stale column; then the stripe is rebuilt again.
                    self.scrub_items(b, seg, None)?;
                    r.walked = Some(seg);
                    res = self.array.rebuild_stripe_checked(s, disk, b.log.scratch);
                }
                if matches!(res, Ok(false)) {
                    // Still inconsistent (damage outside any live item): rebuild as it lies.
                    res = self
                        .array
                        .rebuild_stripe(s, disk, b.log.scratch)
                        .map(|()| true);
                }
                match res {
                    Ok(_) => {}
                    Err(ArrayError::Unrecoverable { .. }) => {
                        r.unrecoverable += 1;
                        self.record_lost_stripe(b, s)?;
                    }
                    Err(e) => {
                        self.rebuild = Some(r);
                        self.after_membership_change()?;
                        return Err(IoError::Device(e));
                    }
                }
                self.counters.repair_bytes += self.array.stats().repair_bytes_written - before;
                r.stripes_done += 1;
                done += 1;
            }
            r.next_stripe += 1;
            // Deliberate bug for the fault campaign's self-test: skip the stripe after this one.
            #[cfg(feature = "mutate")]
            if crate::mutate::active(crate::mutate::Mutation::RebuildSkip) && r.stripes_done == 1 {
                r.next_stripe += 1;
            }
            let _ = self.array.set_rebuilt_below(r.disk as usize, r.next_stripe);
            let permille = (r.stripes_done * 1000)
                .checked_div(r.stripes_total)
                .map_or(1000, |p| p.min(1000) as u16);
            if permille / 100 != r.last_permille / 100 {
                self.array.events_mut().push(Event::RebuildProgress {
                    disk: r.disk,
                    permille,
                });
                r.last_permille = permille;
            }
            // A second failure mid-rebuild is recorded (and may take a spare) without stopping.
            if self.array.failed() != self.recorded_failed() {
                self.rebuild = Some(r);
                self.on_members_failed()?;
                // Go on only with the same rebuild: when the target itself failed and a spare
                // took its slot, a new rebuild starts at stripe 0, and carrying on from this
                // cursor would call the new disk rebuilt below stripes it never received
                // (campaign seed 153).
                match self.rebuild {
                    Some(x) if x.disk == r.disk && x.next_stripe == r.next_stripe => {}
                    _ => return Ok(done),
                }
            }
        }
        if r.next_stripe >= stripes {
            // The rebuilt strips must be durable before a superblock names the member online:
            // one reached a medium ahead of the last strips, still in the member's write cache
            // at a power cut, and import trusted the member (campaign seed 6007).
            let durable = self.array.flush();
            if !durable.contains(r.disk as usize) {
                self.rebuild = Some(r);
                self.after_membership_change()?;
                return Ok(done);
            }
            self.rebuild = None;
            let _ = self.array.set_online(r.disk as usize);
            self.array.events_mut().push(Event::RebuildDone {
                disk: r.disk,
                stripes: r.stripes_done,
                unrecoverable: r.unrecoverable,
            });
            let health = self.health() as u8;
            self.array
                .events_mut()
                .push(Event::HealthChanged { health });
            self.write_config()?;
            // The next rebuild target, if a second disk was replaced meanwhile.
            if let Some(d) = (0..self.geo().disks()).find(|&d| {
                self.array
                    .member(d)
                    .is_some_and(|m| m.state() == DiskState::Rebuilding)
            }) {
                self.start_rebuild_at(d as u8, 0);
            }
            self.checkpoint(b)?;
        } else {
            self.rebuild = Some(r);
        }
        Ok(done)
    }

    /// A stripe whose data could not be rebuilt: every live block of an extent overlapping it
    /// goes on the unrecoverable list (it reads as an error until rewritten).
    fn record_lost_stripe(&mut self, b: &mut Bufs, stripe: u64) -> Result<(), IoError> {
        let sdb = self.sdb() as u64;
        let lo = stripe * sdb;
        let hi = lo + sdb;
        let seg = self.seg_of(lo);
        let mut cursor = self.seg_start(seg);
        let end = cursor + self.segment_bytes();
        let mut rule = SeqRule::walk(b, seg);
        while cursor < end && cursor < hi {
            let Some((h, _, _)) = self.find_header(b, cursor, (end - cursor) as usize, rule) else {
                break;
            };
            rule = rule.after(h.seq);
            let item_end = cursor + h.item_bytes() as u64;
            if h.kind == ItemKind::Extent && item_end > lo {
                let mut first = None;
                let mut count = 0u32;
                for i in 0..h.blocks {
                    let e = self.map_get(b, h.lun, h.lba + u64::from(i))?;
                    if e.valid && e.addr() == cursor {
                        first.get_or_insert(h.lba + u64::from(i));
                        count = (h.lba + u64::from(i) + 1 - first.unwrap_or(0)) as u32;
                    }
                }
                if let Some(lba) = first
                    && !self.bad.iter().any(|r| r.lun == h.lun && r.lba == lba)
                {
                    let _ = self.bad.push(BadRange {
                        lun: h.lun,
                        lba,
                        blocks: count,
                    });
                }
            }
            cursor = item_end;
        }
        self.array
            .events_mut()
            .push(Event::Unrecoverable { stripe });
        Ok(())
    }

    /// Scrubs up to `budget` stripes: checks parity (or mirror copies) of every used stripe and
    /// the checksum of every item in each used segment, repairing from redundancy.
    pub(crate) fn scrub_step(&mut self, b: &mut Bufs, budget: u32) -> Result<u64, IoError> {
        let Some(mut sc) = self.scrub else {
            return Ok(0);
        };
        let seg_stripes = u64::from(self.conf.layout.segment_stripes);
        let mut done = 0u64;
        while sc.next_segment < self.segments() && done < u64::from(budget) {
            let seg = sc.next_segment;
            if b.seg(seg).state != SegState::Free {
                let first = u64::from(seg) * seg_stripes;
                let mut walked = None;
                for s in first..first + seg_stripes {
                    if !self.stripe_in_use(b, s) {
                        continue;
                    }
                    let (rep, unrep) = self.scrub_stripe(b, s, &mut walked, true)?;
                    sc.repaired += rep;
                    sc.unrepairable += unrep;
                    sc.stripes += 1;
                    done += 1;
                }
                let walk = self.scrub_items(b, seg, None)?;
                sc.repaired += walk.repaired;
                sc.unrepairable += walk.lost;
            }
            sc.next_segment += 1;
        }
        if sc.next_segment >= self.segments() {
            // Labels too: a superblock copy that fails its checks or is older (a crash during a
            // configuration write) is rewritten: with the other copy rotting as well, the
            // member could no longer be identified at import. Not counted as repaired data.
            if !self.superblocks_intact() {
                self.write_config()?;
            }
            self.scrub = None;
            self.last_scrub = (sc.repaired, sc.unrepairable);
            self.array.events_mut().push(Event::ScrubDone {
                stripes: sc.stripes,
                repaired: sc.repaired,
                unrepairable: sc.unrepairable,
            });
            self.checkpoint(b)?;
        } else {
            // The pass checkpoints its own progress (at its first step, then every quarter of
            // the segments): a scrub of an idle pool otherwise reached no root, so a power cut
            // forgot it, and lost its repairs, still in the members' write caches. The
            // checkpoint flushes before its root names the cursor, so every repair behind a
            // saved cursor is durable.
            let every = (self.segments() / 4).max(1);
            let due = sc
                .saved
                .is_none_or(|s| sc.next_segment >= s.saturating_add(every));
            self.scrub = Some(sc);
            if due {
                self.checkpoint(b)?;
            }
        }
        Ok(done)
    }

    /// Whether both superblock copies of every member not failed, and of every spare, read
    /// back, decode, and carry the current generation.
    fn superblocks_intact(&mut self) -> bool {
        let per = (SLOT_BYTES / self.geo().block_bytes()) as u64;
        let generation = self.conf.generation;
        let mut slot = [0u8; SLOT_BYTES];
        let current =
            |slot: &[u8]| Superblock::decode(slot).is_ok_and(|sb| sb.generation == generation);
        for copy in 0..2u32 {
            let lba = u64::from(format::superblock_slot(copy)) * per;
            for d in 0..self.geo().disks() {
                if self.array.writable(d)
                    && (self.array.disk_read(d, lba, &mut slot).is_err() || !current(&slot))
                {
                    return false;
                }
            }
            for sp in &mut self.spares {
                if sp.disk.read(lba, &mut slot).is_err() || !current(&slot) {
                    return false;
                }
            }
        }
        true
    }

    /// Verifies one stripe; repairs a member the check names, or parity when the data checks.
    /// `walked`: where an item walk of the stripe's segment reached, once one was made for an
    /// unreadable member (one walk per segment heals every item in it). `blame`: count a
    /// checksum error against the members rewritten (not after a torn write, where no disk did
    /// anything wrong). Returns blocks repaired and blocks left unrepairable.
    pub(crate) fn scrub_stripe(
        &mut self,
        b: &mut Bufs,
        s: u64,
        walked: &mut Option<u64>,
        blame: bool,
    ) -> Result<(u64, u64), IoError> {
        let mut rep = self
            .array
            .verify_stripe(s, b.log.scratch)
            .map_err(IoError::Device)?;
        let blocks = (self.geo().strip_bytes() / self.geo().block_bytes()) as u64;
        let strip = self.geo().strip_bytes();
        // Members in sync whose strip could not be read (a latent sector error): the check
        // skipped their column (and, on parity levels, the parity), and the item walk reads
        // only data columns that hold items, so a bad block in a parity or padding column used
        // to stay until a rebuild met it with one redundancy fewer. Rewrite the strip from the
        // other members, but only from checked data: first the item walk (checksums heal the
        // data columns), then, on mirrors, only when the readable copies agree.
        let mut fixed = 0;
        if !self.unreadable_in_sync(s, rep.unreadable).is_empty() {
            let stripe_end = (s + 1) * self.sdb() as u64;
            let seg = self.seg_of(s * self.sdb() as u64);
            let reached = if let Some(r) = *walked {
                r
            } else {
                let r = self.scrub_items(b, seg, None)?.reached;
                *walked = Some(r);
                r
            };
            rep = self
                .array
                .verify_stripe(s, b.log.scratch)
                .map_err(IoError::Device)?;
            let unreadable = self.unreadable_in_sync(s, rep.unreadable);
            if !unreadable.is_empty() {
                let mirror = matches!(self.geo().level(), Level::Raid1 | Level::Raid10);
                if reached < stripe_end || (mirror && !rep.consistent()) {
                    return Ok((0, blocks));
                }
                let before = self.array.stats().repair_bytes_written;
                let res = self.array.repair(s, 0, strip, unreadable, b.log.scratch);
                self.counters.repair_bytes += self.array.stats().repair_bytes_written - before;
                if res.is_err() {
                    return Ok((0, blocks));
                }
                fixed = blocks * unreadable.len() as u64;
                rep = self
                    .array
                    .verify_stripe(s, b.log.scratch)
                    .map_err(IoError::Device)?;
            }
        }
        let (rep_blocks, lost) = self.check_stripe(b, s, &rep, blame)?;
        Ok((fixed + rep_blocks, lost))
    }

    /// The members of `set` that hold current data for stripe `s` (online, or rebuilt past
    /// it), so their unreadable strip is a latent sector error to repair, not a strip still
    /// waiting for the rebuild.
    fn unreadable_in_sync(&self, s: u64, set: DiskSet) -> DiskSet {
        set.iter()
            .filter(|&d| self.array.readable(d, s))
            .fold(DiskSet::EMPTY, DiskSet::with)
    }

    /// The rest of [`Self::scrub_stripe`]: what `rep` says of stripe `s` once every member in
    /// sync was readable.
    fn check_stripe(
        &mut self,
        b: &mut Bufs,
        s: u64,
        rep: &crate::raid::VerifyReport,
        blame: bool,
    ) -> Result<(u64, u64), IoError> {
        if rep.consistent() {
            return Ok((0, 0));
        }
        let blocks = (self.geo().strip_bytes() / self.geo().block_bytes()) as u64;
        let strip = self.geo().strip_bytes();
        // Let the data's checksums decide first: reading every item of the stripe heals data
        // columns whose content fails its CRC.
        let stripe_lo = s * self.sdb() as u64;
        let stripe_end = stripe_lo + self.sdb() as u64;
        let seg = self.seg_of(stripe_lo);
        let mut walk = self.scrub_items(b, seg, Some((stripe_lo, stripe_end)))?;
        if walk.healed_in_range {
            // A heal write can be lost too (on the very member that held the bad column): read
            // the items again, and call the data checked only if they now check as they lie.
            // Parity rewritten from data whose repair never landed lost it for good (campaign
            // seed 2540).
            walk = self.scrub_items(b, seg, Some((stripe_lo, stripe_end)))?;
        }
        let again = self
            .array
            .verify_stripe(s, b.log.scratch)
            .map_err(IoError::Device)?;
        if again.consistent() {
            return Ok((blocks, 0));
        }
        // Every item of the stripe was read and checked: the data as reads take it (data
        // columns; on mirrors each strip's first readable copy) is right, so only the
        // redundancy may be rewritten.
        let checked = walk.reached >= stripe_end && !walk.lost_in_range && !walk.healed_in_range;
        let geo = *self.geo();
        let mut redundancy = DiskSet::EMPTY;
        if matches!(geo.level(), Level::Raid1 | Level::Raid10) {
            // Copies that disagree with no majority (a torn mirror write, two-way
            // mirrors): reads take each strip's first readable copy, and the item walk
            // has just checked (or healed) every live item through it, so it is the one
            // to keep; every other copy is rewritten from it.
            for strip in 0..geo.data_strips() {
                let mut first = true;
                for copy in 0..geo.copies() {
                    let Some(d) = geo.disk_of(s, Column::Mirror { data: strip, copy }) else {
                        continue;
                    };
                    if self.array.readable(d, s) && !core::mem::take(&mut first) {
                        redundancy = redundancy.with(d);
                    }
                }
            }
        } else {
            // With a member missing (RAID-6), reads rebuild its column from P (a data
            // column) or from the data (P or Q), so the data they check agrees with P
            // whenever P is there: Q is the one to rewrite, and rewriting both would
            // leave three columns to reconstruct.
            let readable = |c| geo.disk_of(s, c).filter(|&d| self.array.readable(d, s));
            let degraded = (0..geo.disks()).any(|d| !self.array.readable(d, s));
            let q = readable(Column::Q);
            if let Some(d) = q {
                redundancy = redundancy.with(d);
            }
            if let Some(d) = readable(Column::P)
                && !(degraded && q.is_some())
            {
                redundancy = redundancy.with(d);
            }
        }
        let fix = if again.suspects.is_empty() {
            if !checked {
                // Items of this stripe went unchecked: the data may be what is wrong, and
                // parity rewritten from it would make the damage permanent.
                return Ok((0, blocks));
            }
            // Data checks out: the parity (or a mirror copy) is what is wrong.
            redundancy
        } else if checked && again.suspects.iter().any(|d| !redundancy.contains(d)) {
            // The comparison names a column whose data the walk has just checked: the
            // others are what is wrong. After a crash a stripe write may have reached one
            // copy of a mirror and not the other two (the majority is then the stale one),
            // or the data columns and not P and Q (the syndrome then points at a data column
            // by chance). Repairing the named column from them destroyed checked data
            // (campaign seed 6011).
            redundancy
        } else {
            again.suspects
        };
        if fix.is_empty() {
            return Ok((0, blocks));
        }
        for d in fix.iter().filter(|_| blame) {
            self.array.note_checksum_error(d);
        }
        let before = self.array.stats().repair_bytes_written;
        let res = self.array.repair(s, 0, strip, fix, b.log.scratch);
        self.counters.repair_bytes += self.array.stats().repair_bytes_written - before;
        match res {
            Ok(()) => Ok((blocks, 0)),
            Err(_) => Ok((0, blocks)),
        }
    }

    /// Reads every live item of a segment, which checks its CRC and heals it from redundancy.
    /// Returns blocks repaired, blocks lost, and the log address the walk reached (items past
    /// it were not checked: a header that no reconstruction makes valid stops the walk).
    /// `watch`: a log address range; the result says whether an item overlapping it was lost.
    #[allow(clippy::unnecessary_wraps)] // callers treat it like the other steps
    fn scrub_items(
        &mut self,
        b: &mut Bufs,
        seg: u32,
        watch: Option<(u64, u64)>,
    ) -> Result<Walk, IoError> {
        let start = self.seg_start(seg);
        let mut end = start + self.segment_bytes();
        if self.log.reserved.get(self.log.res_idx) == Some(&seg) {
            // Up to the head: an item that starts in the last written stripe may end in the
            // open one (read from memory), and stopping before it would leave that stripe's
            // check unfinished.
            end = end.min(self.log.head());
        }
        let mut cursor = start;
        let before = self.array.stats().repair_bytes_written;
        let mut lost = 0u64;
        let mut lost_in_range = false;
        let mut healed_in_range = false;
        let mut rule = SeqRule::walk(b, seg);
        while cursor < end {
            // A damaged header: reconstruct it without each member in turn (the item read then
            // finds and heals the bad column).
            let Some((h, off, rebuilt)) =
                self.find_header(b, cursor, (end - cursor) as usize, rule)
            else {
                break;
            };
            rule = rule.after(h.seq);
            if h.kind == ItemKind::Pad && !rebuilt.is_empty() {
                // No item read follows for a pad: heal its header here, or the next copy kept
                // over the others (a mirror's first) could carry the damage to every member
                // and end every later walk at this pad (campaign seed 6523).
                let hdr = format::BlockPtr {
                    addr: cursor,
                    len: format::HEADER_BYTES as u32,
                    crc: 0,
                };
                self.heal(b, hdr, off, rebuilt);
                healed_in_range |= watch.is_some_and(|(lo, hi)| {
                    cursor < hi && cursor + format::HEADER_BYTES as u64 > lo
                });
            }
            if h.kind != ItemKind::Pad {
                let ptr = crate::format::BlockPtr {
                    addr: cursor,
                    len: h.item_bytes() as u32,
                    crc: h.payload_crc,
                };
                let expect = Expect {
                    kind: h.kind,
                    lun: None,
                    lba: None,
                    level: None,
                    seq: Some(h.seq),
                };
                let item_end = cursor + h.item_bytes() as u64;
                let watched = watch.is_some_and(|(lo, hi)| cursor < hi && item_end > lo);
                let repairs = self.array.stats().repair_bytes_written;
                if self.load_item(b, ptr, expect).is_err() {
                    if matches!(h.kind, ItemKind::Extent | ItemKind::MapPage) {
                        lost += u64::from(h.blocks.max(1));
                    }
                    lost_in_range |= watched;
                } else if self.array.stats().repair_bytes_written != repairs {
                    healed_in_range |= watched;
                }
            }
            cursor += h.item_bytes() as u64;
        }
        let repaired =
            (self.array.stats().repair_bytes_written - before) / self.geo().block_bytes() as u64;
        Ok(Walk {
            repaired,
            lost,
            reached: cursor,
            lost_in_range,
            healed_in_range,
        })
    }
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Health, member states and counters, rebuild and scrub progress.
    pub fn status(&self) -> Status {
        let mut disks = Vec::new();
        for (i, m) in self.st.array.members().iter().enumerate() {
            let _ = disks.push(DiskStatus {
                slot: i as u8,
                state: m.state(),
                present: m.is_present(),
                errors: m.errors(),
            });
        }
        Status {
            health: self.st.health(),
            disks,
            spares: self.st.spares.len() as u8,
            rebuild: self
                .st
                .rebuild
                .map(|r| (r.disk, r.stripes_done, r.stripes_total)),
            scrub: self.st.scrub.map(|s| (s.next_segment, self.st.segments())),
            scrub_repaired: self.st.scrub.map_or(self.st.last_scrub.0, |s| s.repaired),
            scrub_unrepairable: self
                .st
                .scrub
                .map_or(self.st.last_scrub.1, |s| s.unrepairable),
            bad_ranges: self.st.bad.len(),
            root_gen: self.st.root_gen,
        }
    }

    /// Background work, bounded: rebuilds and scrubs up to `config.stripes_per_step` stripes
    /// (rebuild first), and cleans a segment when free space runs low. Call it between client
    /// requests as often as the device-time share for background work allows.
    pub fn maintenance(&mut self) -> Result<MaintenanceReport, IoError> {
        if self.st.faulted {
            return Err(IoError::Faulted);
        }
        let r = self.maintenance_settling();
        self.settled(r)
    }

    fn maintenance_settling(&mut self) -> Result<MaintenanceReport, IoError> {
        let budget = self.st.cfg.stripes_per_step;
        let (st, mut b) = self.bufs()?;
        st.after_membership_change()?;
        let mut rep = MaintenanceReport {
            rebuilt_stripes: st.rebuild_step(&mut b, budget)?,
            ..MaintenanceReport::default()
        };
        let left = budget.saturating_sub(rep.rebuilt_stripes as u32);
        if left > 0 {
            rep.scrubbed_stripes = st.scrub_step(&mut b, left)?;
        }
        rep.idle = st.rebuild.is_none() && st.scrub.is_none();
        Ok(rep)
    }

    /// Starts a scrub pass (or restarts one in progress from the beginning).
    pub fn start_scrub(&mut self) {
        self.st.scrub = Some(Scrub {
            next_segment: 0,
            stripes: 0,
            repaired: 0,
            unrepairable: 0,
            saved: None,
        });
    }

    /// Fails member `slot` by hand (as if it died): a hot spare takes over if there is one.
    pub fn fail_disk(&mut self, slot: usize) -> Result<(), IoError> {
        self.st
            .array
            .fail(slot, ErrorKind::DeviceFailed)
            .map_err(IoError::Device)?;
        self.st.on_members_failed()
    }

    /// Puts a blank disk into failed member slot `slot` and starts rebuilding onto it.
    pub fn replace_disk(&mut self, slot: usize, disk: D) -> Result<(), IoError> {
        let m = self
            .st
            .array
            .member(slot)
            .ok_or(IoError::Device(ArrayError::OutOfRange))?;
        if m.state() != DiskState::Failed {
            return Err(IoError::Device(ArrayError::OutOfRange));
        }
        self.st.array.replace(slot, disk).map_err(IoError::Device)?;
        let guid = self.st.new_guid();
        if let Some(g) = self.st.conf.member_guids.get_mut(slot) {
            *g = guid;
        }
        if self.st.rebuild.is_none() {
            self.st.start_rebuild_at(slot as u8, 0);
        }
        self.st.write_config()
    }

    /// Adds a hot spare (a blank disk at least as large as the members).
    pub fn add_spare(&mut self, disk: D) -> Result<(), IoError> {
        let geo = *self.st.geo();
        if disk.block_size().bytes() != geo.block_bytes()
            || disk.block_count() < geo.stripe_lba(geo.stripes())
        {
            return Err(IoError::Device(ArrayError::DiskMismatch));
        }
        let guid = self.st.new_guid();
        self.st
            .spares
            .push(Spare { disk, guid })
            .map_err(|_| IoError::Device(ArrayError::OutOfRange))?;
        self.st.write_config()?;
        // A failed member waiting for a spare takes it now.
        if !self.st.array.failed().is_empty() {
            self.st.on_members_failed()?;
        }
        Ok(())
    }

    /// LBA ranges known lost (they read as errors until rewritten).
    pub fn bad_ranges(&self) -> &[BadRange] {
        &self.st.bad
    }
}

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    pub(crate) fn new_guid(&mut self) -> u64 {
        self.conf.next_guid += 1;
        super::disk_guid(self.conf.pool_tag, self.conf.next_guid)
    }
}
