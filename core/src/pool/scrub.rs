//! Scrub with repair: every used stripe's parity (or mirror copies) checked against its data,
//! and every live item of every used segment read (which checks its CRC and heals it from
//! redundancy), a bounded number of stripes per [`Pool::maintenance`] call. The cursor is saved
//! in checkpoint roots. Import's write-hole resync checks the stripes of the log's tail the same
//! way.

use raidcore_hal::BlockDevice;

use super::Pool;
use crate::error::IoError;
use crate::event::Event;
use crate::format::{self, BlockPtr, ItemHeader, ItemKind, SegState};
use crate::log::{Expect, LogIo, SeqRule};
use crate::raid::{Array, ArrayError, Column, DiskSet, Level, VerifyReport};

/// A scrub in progress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scrub {
    pub next_segment: u32,
    pub stripes: u64,
    pub repaired: u64,
    pub unrepairable: u64,
    /// The cursor the newest root holds (`None`: no root knows of this pass yet).
    pub saved: Option<u32>,
}

impl Scrub {
    /// A pass from the first segment.
    pub const fn start() -> Self {
        Scrub {
            next_segment: 0,
            stripes: 0,
            repaired: 0,
            unrepairable: 0,
            saved: None,
        }
    }
}

/// What an item walk over a segment ([`Pool::scrub_items`]) found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walk {
    /// Member blocks rewritten by the items' repairs.
    pub repaired: u64,
    /// Blocks of extents and map pages that no reconstruction made check.
    pub lost: u64,
    /// The log address the walk reached: items past it were not checked.
    pub reached: u64,
    /// Where the first span the walk stepped over starts (an item whose header no
    /// reconstruction makes valid: its length is unknown, and the walk went on at the next
    /// header a read finds); the items in such spans were not checked.
    pub skipped_from: Option<u64>,
    /// An item overlapping the range the caller watched did not check, or the walk stepped
    /// over a span overlapping it.
    pub lost_in_range: bool,
    /// An item overlapping the watched range checked only after a repair.
    pub healed_in_range: bool,
    /// The members the reads that made watched items check left out (the columns that were
    /// wrong there, as far as the items tell).
    pub rebuilt_in_range: DiskSet,
}

impl Walk {
    /// The log address up to which every item was checked.
    pub fn checked_to(&self) -> u64 {
        self.skipped_from
            .map_or(self.reached, |g| g.min(self.reached))
    }
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Scrubs up to `budget` stripes: checks parity (or mirror copies) of every used stripe and
    /// the checksum of every item in each used segment, repairing from redundancy.
    pub(crate) fn scrub_step(&mut self, budget: u32) -> Result<u64, IoError> {
        let Some(mut sc) = self.scrub else {
            return Ok(0);
        };
        let seg_stripes = u64::from(self.log.segment_stripes());
        let segments = self.log.segments();
        let mut done = 0u64;
        while sc.next_segment < segments && done < u64::from(budget) {
            let seg = sc.next_segment;
            if self.io()?.segs().get(seg).state != SegState::Free {
                let first = u64::from(seg) * seg_stripes;
                let mut walked = None;
                for s in first..first + seg_stripes {
                    if !self.stripe_in_use(s)? {
                        continue;
                    }
                    let (rep, unrep) = self.scrub_stripe(s, &mut walked, true)?;
                    sc.repaired += rep;
                    sc.unrepairable += unrep;
                    sc.stripes += 1;
                    done += 1;
                }
                let walk = self.scrub_items(seg, None)?;
                sc.repaired += walk.repaired;
                sc.unrepairable += walk.lost;
            }
            sc.next_segment += 1;
        }
        if sc.next_segment >= segments {
            self.finish_scrub(sc)?;
        } else {
            // The pass checkpoints its own progress (at its first step, then every quarter of
            // the segments): a scrub of an idle pool otherwise reached no root, so a power cut
            // forgot it, and lost its repairs, still in the members' write caches. The
            // checkpoint flushes before its root names the cursor, so every repair behind a
            // saved cursor is durable.
            let every = (segments / 4).max(1);
            let due = sc
                .saved
                .is_none_or(|s| sc.next_segment >= s.saturating_add(every));
            self.scrub = Some(sc);
            if due {
                self.write_checkpoint()?;
            }
        }
        Ok(done)
    }

    /// The pass reached the end: labels too, then the result is recorded.
    fn finish_scrub(&mut self, sc: Scrub) -> Result<(), IoError> {
        // A superblock copy that fails its checks or is older (a crash during a configuration
        // write) is rewritten: with the other copy rotting as well, the member could no longer
        // be identified at import. Not counted as repaired data.
        if !self.members.superblocks_intact(&mut self.array) {
            self.write_config()?;
        }
        self.scrub = None;
        self.last_scrub = (sc.repaired, sc.unrepairable);
        self.array.events_mut().push(Event::ScrubDone {
            stripes: sc.stripes,
            repaired: sc.repaired,
            unrepairable: sc.unrepairable,
        });
        self.write_checkpoint()
    }

    /// Verifies one stripe; repairs a member the check names, or parity when the data checks.
    /// `walked`: where an item walk of the stripe's segment reached, once one was made for an
    /// unreadable member (one walk per segment heals every item in it). `blame`: count a
    /// checksum error against the members rewritten (not after a torn write, where no disk did
    /// anything wrong). Returns blocks repaired and blocks left unrepairable.
    pub(crate) fn scrub_stripe(
        &mut self,
        s: u64,
        walked: &mut Option<u64>,
        blame: bool,
    ) -> Result<(u64, u64), IoError> {
        let mut rep = self.verify(s)?;
        let geo = *self.array.geometry();
        let blocks = (geo.strip_bytes() / geo.block_bytes()) as u64;
        // Members in sync whose strip could not be read (a latent sector error): the check
        // skipped their column (and, on parity levels, the parity), and the item walk reads
        // only data columns that hold items, so a bad block in a parity or padding column used
        // to stay until a rebuild met it with one redundancy fewer. Rewrite the strip from the
        // other members, but only from checked data: first the item walk (checksums heal the
        // data columns), then, on mirrors, only when the readable copies agree (where they
        // disagree, the check below keeps the copy the walk checked and rewrites the rest).
        let mut fixed = 0;
        if !self.unreadable_in_sync(s, rep.unreadable).is_empty() {
            let sdb = self.log.sdb() as u64;
            let stripe_end = (s + 1) * sdb;
            let seg = self.log.seg_of(s * sdb);
            let reached = if let Some(r) = *walked {
                r
            } else {
                let r = self.scrub_items(seg, None)?.checked_to();
                *walked = Some(r);
                r
            };
            rep = self.verify(s)?;
            let unreadable = self.unreadable_in_sync(s, rep.unreadable);
            if !unreadable.is_empty() && reached < stripe_end {
                return Ok((0, blocks));
            }
            // Mirror copies that disagree (a torn write): the item walk's check below keeps
            // the copy reads take and rewrites every other one, the unreadable ones too.
            let mirror = matches!(geo.level(), Level::Raid1 | Level::Raid10);
            let torn_mirror = mirror && !rep.consistent();
            if !unreadable.is_empty() && !torn_mirror {
                let res = self
                    .counted(|a, scratch| a.repair_unreadable(s, unreadable, scratch).map(|_| ()));
                match res {
                    // Blocks a sticky sector would not take stay holes, and are not counted.
                    Ok(written) => fixed = written,
                    Err(_) => return Ok((0, blocks)),
                }
                rep = self.verify(s)?;
            }
        }
        let mut still = None;
        let (mut rep_blocks, mut lost) = self.check_stripe(s, &rep, blame, &mut still)?;
        // A repair reads around a latent sector error from the next copy or column, which can
        // leave the stripe still inconsistent where that source differs: check it once more
        // rather than call it done.
        if let Some(again) = still {
            let (more, left) = self.check_stripe(s, &again, blame, &mut None)?;
            rep_blocks += more;
            lost = left;
        }
        Ok((fixed + rep_blocks, lost))
    }

    /// The array's check of stripe `s`.
    fn verify(&mut self, s: u64) -> Result<VerifyReport, IoError> {
        let io = self.io()?;
        io.array
            .verify_stripe(s, io.scratch)
            .map_err(IoError::Device)
    }

    /// Rewrites the strips of `members` in stripe `s` from the others; returns the member
    /// blocks written.
    fn repair(&mut self, s: u64, members: DiskSet) -> Result<u64, IoError> {
        let strip = self.array.geometry().strip_bytes();
        self.counted(|a, scratch| a.repair(s, 0, strip, members, scratch))
    }

    /// Runs `repair` (an array repair, given the scratch buffer), counting the bytes it wrote
    /// in the pool's counters; returns the member blocks written.
    fn counted(
        &mut self,
        repair: impl FnOnce(&mut Array<D, N>, &mut [u8]) -> Result<(), ArrayError>,
    ) -> Result<u64, IoError> {
        let before = self.array.stats().repair_bytes_written;
        let io = self.io()?;
        let res = repair(io.array, io.scratch);
        let written = self.array.stats().repair_bytes_written - before;
        self.counters.repair_bytes += written;
        res.map_err(IoError::Device)?;
        Ok(written / self.array.geometry().block_bytes() as u64)
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
    /// sync was readable. `still`: set to the check after a rewrite that wrote blocks and left
    /// the stripe inconsistent.
    fn check_stripe(
        &mut self,
        s: u64,
        rep: &VerifyReport,
        blame: bool,
        still: &mut Option<VerifyReport>,
    ) -> Result<(u64, u64), IoError> {
        if rep.consistent() {
            return Ok((0, 0));
        }
        let geo = *self.array.geometry();
        let blocks = (geo.strip_bytes() / geo.block_bytes()) as u64;
        // Let the data's checksums decide first: reading every item of the stripe heals data
        // columns whose content fails its CRC.
        let sdb = self.log.sdb() as u64;
        let stripe_lo = s * sdb;
        let stripe_end = stripe_lo + sdb;
        let seg = self.log.seg_of(stripe_lo);
        let mut walk = self.scrub_items(seg, Some((stripe_lo, stripe_end)))?;
        if walk.healed_in_range || walk.repaired > 0 {
            // A heal write can be lost too (on the very member that held the bad column), or
            // land elsewhere (a misdirected heal of an item outside the stripe hits one in
            // it): read the items again, and call the data checked only if they now check as
            // they lie. Parity rewritten from data whose repair never landed, or from data a
            // stray heal overwrote, lost it for good.
            walk = self.scrub_items(seg, Some((stripe_lo, stripe_end)))?;
        }
        let mut again = self.verify(s)?;
        if again.consistent() {
            let left = self.repair_left(s, &again, &walk);
            return Ok((blocks + left, 0));
        }
        let mirror = matches!(geo.level(), Level::Raid1 | Level::Raid10);
        if mirror && !self.unreadable_in_sync(s, again.unreadable).is_empty() {
            let (synced, now) = self.sync_copies(s)?;
            if now.consistent() {
                return Ok((synced, 0));
            }
            again = now;
        }
        if again.unreadable != rep.unreadable {
            // A member dropped out (or came back) under the walk: the two checks compared
            // different columns, and the rules below would pick the redundancy to rewrite by
            // reads the walk did not make (a member failed under the walk left Q rewritten from
            // a column rebuilt from a rotten P). The rebuild, or the next pass, decides.
            return Ok((0, blocks));
        }
        // Every item of the stripe was read and checked: the data as reads take it (data
        // columns; on mirrors each strip's first readable copy) is right, so only the
        // redundancy may be rewritten.
        let checked = walk.reached >= stripe_end && !walk.lost_in_range && !walk.healed_in_range;
        let redundancy = self.redundancy_to_rewrite(s);
        let fix = if again.suspects.is_empty() {
            if !checked {
                // Items of this stripe went unchecked: the data may be what is wrong, and
                // parity rewritten from it would make the damage permanent.
                return Ok((0, blocks));
            }
            // Data checks out: the parity (or a mirror copy) is what is wrong.
            redundancy
        } else if walk.lost_in_range {
            // An item of this stripe is lost: some row is past what the redundancy rebuilds
            // (after a restart, a row a rebuild could not write reads as whatever the new
            // member held), and a syndrome there names a column by chance. Rewriting it from
            // the others destroyed a block whose own copy checked.
            return Ok((0, blocks));
        } else if checked && again.suspects.iter().any(|d| !redundancy.contains(d)) {
            if self.items_check_without(s, again.suspects)? {
                // The named column is silently wrong only where no live item lies (a lost or
                // misdirected write there): rewrite it alone. Rewriting P and Q instead, a
                // power cut that tore the two writes left rows where each agreed with another
                // version of that column, and once a member failed no set of members left out
                // read the live rows of those stripes back.
                again.suspects
            } else {
                // The comparison names a column whose data the walk has just checked: the
                // others are what is wrong. After a crash a stripe write may have reached one
                // copy of a mirror and not the other two (the majority is then the stale
                // one), or the data columns and not P and Q (the syndrome then points at a
                // data column by chance). Repairing the named column from them destroyed
                // checked data.
                redundancy
            }
        } else {
            again.suspects
        };
        if fix.is_empty() {
            return Ok((0, blocks));
        }
        for d in fix.iter().filter(|_| blame) {
            self.array.note_checksum_error(d);
        }
        self.rewrite(s, fix, &walk, still)
    }

    /// Rewrites the strips of `fix` in stripe `s` from the other members, then (the repair
    /// reads around a latent sector error of the copy it reads from, and does not rewrite it)
    /// the blocks still unreadable if the stripe now checks. Returns blocks repaired and
    /// blocks left unrepairable, as [`Self::scrub_stripe`]; `still` as
    /// [`Self::check_stripe`].
    fn rewrite(
        &mut self,
        s: u64,
        fix: DiskSet,
        walk: &Walk,
        still: &mut Option<VerifyReport>,
    ) -> Result<(u64, u64), IoError> {
        let geo = self.array.geometry();
        let blocks = (geo.strip_bytes() / geo.block_bytes()) as u64;
        let Ok(written) = self.repair(s, fix) else {
            return Ok((0, blocks));
        };
        let after = self.verify(s)?;
        if after.consistent() {
            return Ok((written + self.repair_left(s, &after, walk), 0));
        }
        if written > 0 {
            *still = Some(after);
        }
        Ok((written, 0))
    }

    /// Mirror stripe `s`, whose copies disagree and one of which has a latent sector error:
    /// reads took an item that spans the bad block from another copy and the rest from the
    /// first, so no one copy holds what the walk checked. A walk writes each item's checked
    /// bytes to every copy that differs; then, if the stripe checks, the blocks still
    /// unreadable are rewritten. Returns the blocks written and the check after.
    fn sync_copies(&mut self, s: u64) -> Result<(u64, VerifyReport), IoError> {
        let sdb = self.log.sdb() as u64;
        let seg = self.log.seg_of(s * sdb);
        let walk = self.check_items(seg, Some((s * sdb, (s + 1) * sdb)), true)?;
        let now = self.verify(s)?;
        let left = if now.consistent() {
            self.repair_left(s, &now, &walk)
        } else {
            0
        };
        Ok((walk.repaired + left, now))
    }

    /// Stripe `s` checks (`again`) once `walk` read its items: the blocks that members in
    /// sync still cannot read (latent sector errors the check skipped) are rewritten from the
    /// rest, if the walk checked every item of the stripe. Returns the blocks written.
    fn repair_left(&mut self, s: u64, again: &VerifyReport, walk: &Walk) -> u64 {
        let unreadable = self.unreadable_in_sync(s, again.unreadable);
        let stripe_end = (s + 1) * self.log.sdb() as u64;
        if unreadable.is_empty() || walk.reached < stripe_end || walk.lost_in_range {
            return 0;
        }
        let res =
            self.counted(|a, scratch| a.repair_unreadable(s, unreadable, scratch).map(|_| ()));
        res.unwrap_or(0)
    }

    /// The members of stripe `s` whose strips are redundancy given the data reads use: on
    /// mirrors every readable copy but each strip's first, on parity levels Q, and P unless a
    /// member is missing and Q is there.
    fn redundancy_to_rewrite(&self, s: u64) -> DiskSet {
        let geo = *self.array.geometry();
        let mut redundancy = DiskSet::EMPTY;
        if matches!(geo.level(), Level::Raid1 | Level::Raid10) {
            // Copies that disagree with no majority (a torn mirror write, two-way mirrors):
            // reads take each strip's first readable copy, and the item walk has just checked
            // (or healed) every live item through it, so it is the one to keep; every other
            // copy is rewritten from it.
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
            return redundancy;
        }
        // With a member missing (RAID-6), reads rebuild its column from P (a data column) or
        // from the data (P or Q), so the data they check agrees with P whenever P is there: Q
        // is the one to rewrite, and rewriting both would leave three columns to reconstruct.
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
        redundancy
    }

    /// The items of the segment holding log address `addr`, in log order (up to the head in
    /// the segment the log writes into): each item's log address, length in bytes (header,
    /// payload and rounding) and kind, handed to `f`. Only headers are read (reconstructed
    /// where a member does not check), nothing is healed or written; the walk stops at the
    /// first header that no reconstruction makes check. For tools and tests that reason
    /// about placement, such as the fault campaign's exact-loss oracle.
    ///
    /// Returns the log address the walk reached: the end of the last item found.
    ///
    /// # Errors
    /// A pool that is not serving (suspended, faulted), or an address past the log's end.
    pub fn walk_items(
        &mut self,
        addr: u64,
        mut f: impl FnMut(u64, u32, ItemKind),
    ) -> Result<u64, IoError> {
        self.serving()?;
        let seg = self.log.seg_of(addr);
        if seg >= self.log.segments() {
            return Err(IoError::OutOfRange);
        }
        self.each_header(seg, |_, at, h| {
            f(at, h.item_bytes() as u32, h.kind);
            true
        })
    }

    /// Hands `f` the log address and header of each item of segment `seg` in log order, up
    /// to the head in the segment the log writes into (headers reconstructed where a member
    /// does not check), until `f` returns `false` or no reconstruction makes a header check.
    /// Returns the log address reached: the end of the last item `f` accepted.
    fn each_header(
        &mut self,
        seg: u32,
        mut f: impl FnMut(&mut LogIo<'_, D, N>, u64, &ItemHeader) -> bool,
    ) -> Result<u64, IoError> {
        let start = self.log.seg_start(seg);
        let mut end = start + self.log.segment_bytes();
        if self.log.current_segment() == Some(seg) {
            end = end.min(self.log.head());
        }
        let mut rule = SeqRule::walk(self.io()?.segs().get(seg));
        let mut at = start;
        while at < end {
            let mut io = self.io()?;
            let Some((h, _, _)) = io.find_header(at, (end - at) as usize, rule) else {
                break;
            };
            rule = rule.after(h.seq);
            if !f(&mut io, at, &h) {
                break;
            }
            at += h.item_bytes() as u64;
        }
        Ok(at)
    }

    /// Whether every item in stripe `s` checks when read without the members of `without`
    /// ([`LogIo::item_checks_without`]): their columns then matter to no live item as they
    /// lie, so rewriting them from the others loses nothing. Read only.
    fn items_check_without(&mut self, s: u64, without: DiskSet) -> Result<bool, IoError> {
        let sdb = self.log.sdb() as u64;
        let (lo, hi) = (s * sdb, (s + 1) * sdb);
        let (mut all, mut covered) = (true, 0);
        self.each_header(self.log.seg_of(lo), |io, at, h| {
            covered = at + h.item_bytes() as u64;
            if covered > lo && h.kind != ItemKind::Pad {
                let ptr = BlockPtr {
                    addr: at,
                    len: h.item_bytes() as u32,
                    crc: h.payload_crc,
                    ditto: None,
                };
                all &= io.item_checks_without(ptr, Expect::header(h), without);
            }
            all && covered < hi
        })?;
        Ok(all && covered >= hi)
    }

    /// Reads every live item of a segment, which checks its CRC and heals it from redundancy.
    /// Returns blocks repaired, blocks lost, and how far the items were checked (see
    /// [`Walk`]: a header that no reconstruction makes valid is stepped over to the next one
    /// a read finds).
    /// `watch`: a log address range; the result says whether an item overlapping it was lost.
    pub(crate) fn scrub_items(
        &mut self,
        seg: u32,
        watch: Option<(u64, u64)>,
    ) -> Result<Walk, IoError> {
        self.check_items(seg, watch, false)
    }

    /// [`Self::scrub_items`]; with `sync`, every watched item that checks is also written to
    /// each copy of the mirror stripe `watch` starts in where that copy differs
    /// ([`LogIo::sync_copies`](crate::log::LogIo::sync_copies)).
    fn check_items(
        &mut self,
        seg: u32,
        watch: Option<(u64, u64)>,
        sync: bool,
    ) -> Result<Walk, IoError> {
        let start = self.log.seg_start(seg);
        let mut end = start + self.log.segment_bytes();
        if self.log.current_segment() == Some(seg) {
            // Up to the head: an item that starts in the last written stripe may end in the
            // open one (read from memory), and stopping before it would leave that stripe's
            // check unfinished.
            end = end.min(self.log.head());
        }
        let before = self.array.stats().repair_bytes_written;
        let mut walk = Walk {
            repaired: 0,
            lost: 0,
            reached: start,
            skipped_from: None,
            lost_in_range: false,
            healed_in_range: false,
            rebuilt_in_range: DiskSet::EMPTY,
        };
        let mut rule = SeqRule::walk(self.io()?.segs().get(seg));
        while walk.reached < end {
            let cursor = walk.reached;
            let mut io = self.io()?;
            let overlaps = |a: u64, b: u64| watch.is_some_and(|(lo, hi)| a < hi && b > lo);
            // A damaged header: reconstruct it without each member in turn (the item read then
            // finds and heals the bad column).
            let Some((h, off, rebuilt)) = io.find_header(cursor, (end - cursor) as usize, rule)
            else {
                // Its length is unknown: go on at the next header, so one lost item does not
                // leave the rest of the segment unchecked (and unhealed).
                let Some(next) = io.next_header(cursor, end, rule) else {
                    break;
                };
                walk.skipped_from.get_or_insert(cursor);
                walk.lost_in_range |= overlaps(cursor, next);
                walk.reached = next;
                continue;
            };
            rule = rule.after(h.seq);
            if h.kind == ItemKind::Pad && !rebuilt.is_empty() {
                // No item read follows for a pad: heal its header here, or the next copy kept
                // over the others (a mirror's first) could carry the damage to every member
                // and end every later walk at this pad.
                let hdr = BlockPtr {
                    addr: cursor,
                    len: format::HEADER_BYTES as u32,
                    crc: 0,
                    ditto: None,
                };
                io.heal(hdr, off, rebuilt);
                walk.healed_in_range |= overlaps(cursor, cursor + format::HEADER_BYTES as u64);
            }
            if h.kind != ItemKind::Pad {
                let ptr = BlockPtr {
                    addr: cursor,
                    len: h.item_bytes() as u32,
                    crc: h.payload_crc,
                    ditto: None,
                };
                let watched = overlaps(cursor, cursor + h.item_bytes() as u64);
                match io.load_item_rebuilt(ptr, Expect::header(&h)) {
                    Err(_) => {
                        walk.lost_in_range |= watched;
                        // No copy or reconstruction checks whole: what the map still points at
                        // here and does not check alone is lost, and listed.
                        walk.lost += match h.kind {
                            ItemKind::Extent => {
                                self.record_lost_extent(cursor, h.lun, h.lba, h.blocks)?
                            }
                            // A live page is read through its other copy and written anew by
                            // the next checkpoint; lost only if that copy is gone too.
                            ItemKind::MapPage => match self.dirty_live_page(&h) {
                                Ok(_) => 0,
                                Err(IoError::Corrupt(_) | IoError::Device(_)) => 1,
                                Err(e) => return Err(e),
                            },
                            _ => 0,
                        };
                    }
                    Ok((_, off, rebuilt)) if watched => {
                        if let (true, Some((lo, _)), Some(at)) =
                            (sync, watch, off.checked_sub(format::HEADER_BYTES))
                        {
                            io.sync_copies(ptr, at, lo / io.log.sdb() as u64);
                        }
                        // Checked only through reconstruction: the stripe does not check as it
                        // lies, even where the heal wrote nothing (a parity member was the bad
                        // one, and the data holder is missing).
                        if !rebuilt.is_empty() {
                            walk.healed_in_range = true;
                            walk.rebuilt_in_range = DiskSet(walk.rebuilt_in_range.0 | rebuilt.0);
                        }
                    }
                    Ok(_) => {}
                }
            }
            walk.reached = cursor + h.item_bytes() as u64;
        }
        let bb = self.array.geometry().block_bytes() as u64;
        walk.repaired = (self.array.stats().repair_bytes_written - before) / bb;
        Ok(walk)
    }
}
