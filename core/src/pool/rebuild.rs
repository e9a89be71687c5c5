//! Rebuild (resilver) of live data only onto a member being rebuilt (a hot spare or a
//! replacement): it walks the stripes of used segments (the segment usage table knows which
//! hold data), a bounded number per [`Pool::maintenance`] call, so the caller decides how much
//! device time it takes from clients. Its cursor is saved in every checkpoint root, so a restart
//! resumes it. Client reads treat the rebuilding member as missing above the cursor; every
//! stripe the log writes goes to it as well.

use raidcore_hal::BlockDevice;

use super::Pool;
use crate::error::IoError;
use crate::event::Event;
use crate::format::{ItemKind, Root, SegState};
use crate::log::{Log, SeqRule};
use crate::raid::{ArrayError, Column, DiskSet, DiskState, Geometry, LostRows};

/// A rebuild in progress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rebuild {
    pub disk: u8,
    pub next_stripe: u64,
    pub stripes_done: u64,
    pub unrecoverable: u64,
    /// Stripes the rebuild has to visit (live segments only), for progress reports.
    pub stripes_total: u64,
    pub last_permille: u16,
    /// The segment whose items the rebuild last walked because a stripe's remaining parity
    /// disagreed with its reconstruction (one walk per segment; in memory only).
    pub walked: Option<u32>,
    /// For a member that came back ([`Pool::online_disk`]): what it holds already, so only
    /// the stripes written since are rebuilt (in memory only: a restart rebuilds the rest).
    pub since: Option<Since>,
}

/// What a member that came back still holds: everything the log wrote before the newest
/// checkpoint root on it, outside that root's window of segments. The log writes only into
/// the segments of its window between two checkpoints, and every segment it enters later
/// records a first item sequence number at least `next_seq`; so a stripe of any other
/// segment is as it was when the member left (a write-intent record, as md's bitmap).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Since {
    /// The root's next item sequence number.
    pub next_seq: u64,
    /// The root's window (the segments the log could write after it).
    pub window: [u32; 16],
    pub window_len: u8,
}

impl Since {
    /// What a member holds whose newest root is `root`.
    pub fn of(root: &Root) -> Since {
        let mut window = [u32::MAX; 16];
        for (w, &s) in window.iter_mut().zip(root.reserved.iter()) {
            *w = s;
        }
        Since {
            next_seq: root.log.next_item_seq,
            window,
            window_len: root.reserved.len().min(16) as u8,
        }
    }

    /// Whether the member holds stripe `s` as it is (its segment untouched since the root).
    fn holds(&self, log: &Log, sut: &[u8], s: u64) -> bool {
        let seg = (s / u64::from(log.segment_stripes())) as u32;
        if seg >= log.segments() {
            return false;
        }
        let window = self
            .window
            .get(..usize::from(self.window_len))
            .unwrap_or(&[]);
        let e = crate::format::SegEntry::decode(sut, seg as usize * crate::format::SEG_ENTRY_BYTES);
        e.first_seq < self.next_seq && !window.contains(&seg)
    }
}

/// Whether a rebuild onto a member holding `since` must rebuild stripe `s`: it holds data
/// ([`stripe_in_use`]) the member does not hold already.
fn needs_rebuild(log: &Log, sut: &[u8], since: Option<Since>, s: u64) -> bool {
    stripe_in_use(log, sut, s) && !since.is_some_and(|x| x.holds(log, sut, s))
}

/// Whether stripe `s` holds data that must be rebuilt or scrubbed: its segment is in use and
/// (in the segment the log is filling) it was written. `sut`: the segment usage table.
pub(crate) fn stripe_in_use(log: &Log, sut: &[u8], s: u64) -> bool {
    let seg_stripes = u64::from(log.segment_stripes());
    let seg = (s / seg_stripes) as u32;
    if seg >= log.segments() {
        return false;
    }
    let e = crate::format::SegEntry::decode(sut, seg as usize * crate::format::SEG_ENTRY_BYTES);
    if e.state == SegState::Free {
        return false;
    }
    // The segment the log is filling: only stripes below the open one were written. (Other
    // reserved segments are free or filled; their addresses need not be in log order.)
    if log.current_segment() == Some(seg) {
        return s * (log.sdb() as u64) < log.open_stripe_addr();
    }
    true
}

/// The log address ranges `lost` names in the stripe starting at log address `base`: each lost
/// range of rows in each of its lost data strips.
fn lost_spans<'a>(
    geo: &'a Geometry,
    base: u64,
    lost: &'a LostRows,
) -> impl Iterator<Item = (u64, u64)> + 'a {
    let (strip, bb) = (geo.strip_bytes() as u64, geo.block_bytes() as u64);
    lost.ranges().iter().flat_map(move |r| {
        (0..geo.data_strips())
            .filter(move |i| r.strips >> i & 1 == 1)
            .map(move |i| {
                let lo = base + i as u64 * strip + u64::from(r.row) * bb;
                (lo, lo + u64::from(r.rows) * bb)
            })
    })
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
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
            since: None,
        });
        self.array.events_mut().push(Event::RebuildStarted { disk });
    }

    /// Whether stripe `s` holds data to rebuild or scrub ([`stripe_in_use`]).
    pub(crate) fn stripe_in_use(&mut self, s: u64) -> Result<bool, IoError> {
        let (log, sut) = self.log_and_sut()?;
        Ok(stripe_in_use(log, sut, s))
    }

    /// Whether rebuild `r` has to rebuild stripe `s` ([`needs_rebuild`]).
    fn needs_rebuild(&mut self, r: &Rebuild, s: u64) -> Result<bool, IoError> {
        let (log, sut) = self.log_and_sut()?;
        Ok(needs_rebuild(log, sut, r.since, s))
    }

    /// Rebuilds up to `budget` stripes; finishes the rebuild when the cursor reaches the end.
    pub(crate) fn rebuild_step(&mut self, budget: u32) -> Result<u64, IoError> {
        let Some(mut r) = self.rebuild else {
            return Ok(0);
        };
        let stripes = self.array.geometry().stripes();
        if r.stripes_total == 0 {
            let (log, sut) = self.log_and_sut()?;
            r.stripes_total = (r.next_stripe..stripes)
                .filter(|&s| needs_rebuild(log, sut, r.since, s))
                .count() as u64;
        }
        let mut done = 0u64;
        while r.next_stripe < stripes && done < u64::from(budget) {
            let s = r.next_stripe;
            if self.needs_rebuild(&r, s)? {
                if let Err(e) = self.rebuild_stripe(&mut r, s)? {
                    self.rebuild = Some(r);
                    self.after_membership_change()?;
                    return Err(IoError::Device(e));
                }
                r.stripes_done += 1;
                done += 1;
            }
            r.next_stripe += 1;
            // Deliberate bug for the fault campaign's self-test: skip the stripe after this one.
            #[cfg(feature = "_mutate")]
            if crate::mutate::active(crate::mutate::Mutation::RebuildSkip) && r.stripes_done == 1 {
                r.next_stripe += 1;
            }
            let _ = self.array.set_rebuilt_below(r.disk as usize, r.next_stripe);
            self.note_progress(&mut r);
            // A second failure mid-rebuild is recorded (and may take a spare) without stopping.
            if self.array.failed() != self.members.recorded_failed() {
                self.rebuild = Some(r);
                self.on_members_failed()?;
                // Go on only with the same rebuild: when the target itself failed and a spare
                // took its slot, a new rebuild starts at stripe 0, and carrying on from this
                // cursor would call the new disk rebuilt below stripes it never received.
                match self.rebuild {
                    Some(x) if x.disk == r.disk && x.next_stripe == r.next_stripe => {}
                    _ => return Ok(done),
                }
            }
        }
        if r.next_stripe >= stripes {
            self.finish_rebuild(r)?;
        } else {
            self.rebuild = Some(r);
        }
        Ok(done)
    }

    /// Rebuilds stripe `s` onto `r`'s member; a stripe no redundancy rebuilds is recorded as
    /// lost. The inner error is the array's (the rebuild pauses on it).
    fn rebuild_stripe(
        &mut self,
        r: &mut Rebuild,
        s: u64,
    ) -> Result<Result<(), ArrayError>, IoError> {
        let before = self.array.stats().repair_bytes_written;
        let disk = r.disk as usize;
        let mut res = self.rebuild_checked(s, disk)?;
        let seg = self.log.seg_of(s * self.log.sdb() as u64);
        let mut wrong = DiskSet::EMPTY;
        if matches!(res, Ok(false)) && r.walked != Some(seg) {
            // The redundancy left disagrees with the reconstruction: a surviving column is
            // silently stale (a lost or misdirected write), and copying it into the new member
            // would leave two wrong columns where redundancy allowed one.
            r.walked = Some(seg);
            (wrong, res) = self.heal_then_rebuild(s, disk)?;
        }
        if matches!(res, Ok(false)) {
            res = self.rebuild_around(s, disk, wrong)?.map(|()| true);
        }
        if !self.array.writable(disk) {
            // The target itself failed (a write error on it): the membership check after this
            // stripe ends or restarts the rebuild; this is no error of the rebuild's.
            return Ok(Ok(()));
        }
        if let Err(ArrayError::Unrecoverable { .. }) = res {
            // Every row that can be rebuilt still reaches the member; only the rest is lost.
            let io = self.io()?;
            let lost = io.array.rebuild_stripe_rows(s, disk, io.scratch);
            match lost {
                Ok(lost) if lost.is_empty() => {}
                Ok(lost) => {
                    r.unrecoverable += 1;
                    self.record_lost_rows(s, &lost)?;
                }
                Err(e) => return Ok(Err(e)),
            }
        } else if let Err(e) = res {
            return Ok(Err(e));
        }
        self.counters.repair_bytes += self.array.stats().repair_bytes_written - before;
        Ok(Ok(()))
    }

    /// The item walk of stripe `s`'s segment, whose CRCs find and heal a stale data column,
    /// then the checked rebuild of `s` onto `disk` again. Both once more when the walk wrote
    /// heals and the stripe still disagrees: a heal write can be lost as silently as the write
    /// it heals, and rebuilding from the stale column then would leave two wrong columns.
    /// Returns the members the walks left out to make items in `s` check, and the result of
    /// the last rebuild.
    fn heal_then_rebuild(
        &mut self,
        s: u64,
        disk: usize,
    ) -> Result<(DiskSet, Result<bool, ArrayError>), IoError> {
        let sdb = self.log.sdb() as u64;
        let (seg, range) = (self.log.seg_of(s * sdb), Some((s * sdb, (s + 1) * sdb)));
        let mut wrong = DiskSet::EMPTY;
        let mut walks = 0;
        loop {
            let walk = self.scrub_items(seg, range)?;
            walks += 1;
            wrong = DiskSet(wrong.0 | walk.rebuilt_in_range.0);
            let res = self.rebuild_checked(s, disk)?;
            if walks == 2 || walk.repaired == 0 || !matches!(res, Ok(false)) {
                return Ok((wrong, res));
            }
        }
    }

    /// Rebuilds stripe `s` onto `disk` when its redundancy still disagrees after the item walk.
    /// When the items checked only with parity columns `wrong` left out (a heal cannot rewrite
    /// parity, and the walk could not say more), those are rebuilt with the member, from the
    /// others: copying the member's column from a rotten parity would leave two wrong columns.
    /// Otherwise (damage outside any live item) the stripe is rebuilt as it lies.
    fn rebuild_around(
        &mut self,
        s: u64,
        disk: usize,
        wrong: DiskSet,
    ) -> Result<Result<(), ArrayError>, IoError> {
        let geo = *self.array.geometry();
        let parity_only = wrong.iter().all(|d| {
            geo.column_of(s, d)
                .is_some_and(|c| matches!(c, Column::P | Column::Q))
        });
        let io = self.io()?;
        if !wrong.is_empty() && parity_only && wrong.with(disk).len() <= geo.tolerance() {
            let strip = geo.strip_bytes();
            let res = io.array.repair(s, 0, strip, wrong.with(disk), io.scratch);
            if res.is_ok() {
                return Ok(res);
            }
        }
        Ok(io.array.rebuild_stripe(s, disk, io.scratch))
    }

    /// The array's checked rebuild of stripe `s` onto `disk`.
    fn rebuild_checked(
        &mut self,
        s: u64,
        disk: usize,
    ) -> Result<Result<bool, ArrayError>, IoError> {
        let io = self.io()?;
        Ok(io.array.rebuild_stripe_checked(s, disk, io.scratch))
    }

    /// A progress event every tenth of the rebuild.
    fn note_progress(&mut self, r: &mut Rebuild) {
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
    }

    /// The cursor reached the end: the member is online once its strips are durable.
    fn finish_rebuild(&mut self, r: Rebuild) -> Result<(), IoError> {
        // The rebuilt strips must be durable before a superblock names the member online: one
        // reached a medium ahead of the last strips, still in the member's write cache at a
        // power cut, and import trusted the member.
        let durable = self.array.flush();
        if !durable.contains(r.disk as usize) {
            self.rebuild = Some(r);
            return self.after_membership_change();
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
        // A member that was away may hold rows of extents listed lost meanwhile.
        self.recheck_lost()?;
        // The next rebuild target, if a second disk was replaced meanwhile.
        if let Some(d) = self.rebuilding_member() {
            self.start_rebuild_at(d as u8, 0);
        }
        self.write_checkpoint()
    }

    /// Rows of stripe `stripe` that could not be rebuilt: every live block of an extent
    /// overlapping the lost rows of the lost data strips goes on the unrecoverable list (it
    /// reads as an error until rewritten). Map pages still in memory whose copy lay there are
    /// written anew by a checkpoint at once (the copy the root names is gone, and an import
    /// would find the map unreadable).
    fn record_lost_rows(&mut self, stripe: u64, lost: &LostRows) -> Result<(), IoError> {
        let geo = *self.array.geometry();
        let base = stripe * self.log.sdb() as u64;
        let spans = || lost_spans(&geo, base, lost);
        let mut pages = 0;
        for (lo, hi) in spans() {
            pages += self.vol()?.rewrite_pages_in(lo, hi);
        }
        let hi = spans().map(|(_, hi)| hi).max().unwrap_or(base);
        pages +=
            self.record_lost_extents(base, hi, |a, b| spans().any(|(lo, hi)| a < hi && b > lo))?;
        self.array
            .events_mut()
            .push(Event::Unrecoverable { stripe });
        if pages > 0 {
            self.write_checkpoint()?;
        }
        Ok(())
    }

    /// Walks the segment of log address `lo` up to `hi` once: every extent item that
    /// `overlaps(start, end)` says lies in lost bytes has its live blocks recorded as lost, and
    /// every live map page copy there has its page marked dirty (read through its other copy,
    /// written anew by the next checkpoint). Returns the pages marked.
    fn record_lost_extents(
        &mut self,
        lo: u64,
        hi: u64,
        overlaps: impl Fn(u64, u64) -> bool,
    ) -> Result<usize, IoError> {
        let mut pages = 0;
        let seg = self.log.seg_of(lo);
        let mut cursor = self.log.seg_start(seg);
        let end = cursor + self.log.segment_bytes();
        let mut rule = SeqRule::walk(self.io()?.segs().get(seg));
        while cursor < end && cursor < hi {
            let Some((h, _, _)) = self
                .io()?
                .find_header(cursor, (end - cursor) as usize, rule)
            else {
                break;
            };
            rule = rule.after(h.seq);
            let item_end = cursor + h.item_bytes() as u64;
            if h.kind == ItemKind::Extent && overlaps(cursor, item_end) {
                self.record_lost_extent(cursor, h.lun, h.lba, h.blocks)?;
            }
            if h.kind == ItemKind::MapPage && overlaps(cursor, item_end) {
                match self.dirty_live_page(&h) {
                    Ok(true) => pages += 1,
                    // Both copies gone: the reads of its blocks report that.
                    Ok(false) | Err(IoError::Corrupt(_) | IoError::Device(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            cursor = item_end;
        }
        Ok(pages)
    }

    /// After import: which member slots the root's rebuild cursor covers.
    pub(crate) fn restore_rebuild(&mut self, root: &Root) {
        // The cursor belongs to the disk it was written for: a spare that took the slot since
        // (the membership is newer than the root) has rebuilt nothing yet.
        if let Some(rc) = root.rebuild
            && self
                .array
                .member(rc.disk as usize)
                .is_some_and(|m| m.state() == DiskState::Rebuilding)
            && self.members.conf.member_guids.get(usize::from(rc.disk)) == Some(&rc.guid)
        {
            let _ = self
                .array
                .set_rebuilt_below(rc.disk as usize, rc.next_stripe);
            self.start_rebuild_at(rc.disk, rc.next_stripe);
        }
        // A member recorded as rebuilding after the root was written (a spare taken, a disk
        // replaced, and power lost before the next checkpoint) has no cursor: start over.
        if self.rebuild.is_none()
            && let Some(d) = self.rebuilding_member()
        {
            self.start_rebuild_at(d as u8, 0);
        }
        if let Some(sc) = root.scrub {
            self.scrub = Some(super::scrub::Scrub {
                next_segment: sc.next_segment,
                stripes: 0,
                repaired: sc.repaired,
                unrepairable: sc.unrepairable,
                saved: Some(sc.next_segment),
            });
        }
    }
}
