//! The cleaner (garbage collection): when free segments run low, the used segment with the
//! fewest live bytes is emptied — its live extents re-appended (without decompressing more than
//! needed), its live map pages marked dirty, its tables superseded by a checkpoint — and freed
//! once two later checkpoints are durable. Liveness is decided by the map itself: an extent
//! block is live when the map still points at that item, a page when its parent does.
//!
//! Besides its window of `reserved_segments`, the log keeps `reserved_segments +
//! cleaner_reserve` free segments (to renew the window at the next checkpoint, and for the
//! cleaner) beyond what clients may fill ([`Pool::usable_bytes`]), so the cleaner's own writes
//! never fail for lack of space; a write that would need them gets [`IoError::NoSpace`] instead,
//! before anything is buffered (past the cleaner's budget, a write may take one segment of that
//! margin: see [`MOVE_PER_BYTE`]). Asking whether there is room, and how many bytes are live,
//! costs the same on any pool size (the segment table keeps both counts); choosing a victim
//! walks the table.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::Pool;
use crate::error::{IoError, bug};
use crate::format::{
    FormatError, ItemHeader, ItemKind, LUN_BLOCK, MapEntry, SegEntry, SegState, crc32c,
};
use crate::log::SeqRule;
use crate::volume::Writer;
use crate::volume::map::PageKey;

/// Segments the cleaner is working on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cleaner {
    /// Segments it could not empty (damaged beyond repair).
    skip: Vec<u32, 8>,
    /// Segments it emptied of extents whose last live bytes (map pages, tables) the next
    /// checkpoint moves; one checkpoint serves the whole batch.
    cleaned: Vec<u32, 4>,
    /// Live bytes when cleaning last failed to make room: client writes that need room get
    /// [`IoError::NoSpace`] at once until fewer bytes are live (a TRIM, a LUN deleted).
    full_at: Option<u64>,
    /// Bytes moved that client writes have not yet paid for ([`MOVE_PER_BYTE`]).
    debt: u64,
}

/// What [`Pool::clean_one`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clean {
    /// A victim was emptied (or is, once the next checkpoint moves its map pages).
    Moved,
    /// No segment would gain anything.
    Nothing,
    /// The victim would move more than client writes have paid for.
    OverBudget,
}

/// Victims in a row that gain no segment before the cleaner gives up (the client write then
/// gets [`IoError::NoSpace`] once only the cleaner's reserve is free).
const IDLE_VICTIMS: u32 = 16;
/// Live bytes the cleaner may move for each byte client writes bring, plus
/// [`DEBT_SEGMENTS`]: past it, a write may go ahead without cleaning while `threshold`
/// segments outside the log's window are free (one fewer than a write otherwise leaves), and
/// below that the cleaner goes over budget (filling a pool with ditto metadata, the
/// checkpoints each victim cost ate what it freed near the end, and without a bound the
/// cleaner moved gigabytes to take megabytes). Over budget, refusing the write would not make
/// cleaning cheaper later: random overwrites keep the live bytes where they are.
const MOVE_PER_BYTE: u64 = 16;
/// Segments of moves the cleaner may owe client writes.
const DEBT_SEGMENTS: u64 = 4;
/// Segments the cleaner reclaims beyond the threshold once it cleans (it stops at more than
/// this many), before it writes the checkpoints that free them: a victim becomes free only two
/// checkpoints after it is emptied, and reclaiming one segment at a time cost two checkpoints
/// per victim (with ditto copies on a small pool, more than a victim frees).
const LOOKAHEAD: u32 = 3;

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    const fn free_threshold(&self) -> u32 {
        self.cfg.reserved_segments as u32 + self.cfg.cleaner_reserve
    }

    /// Makes sure a piece of `piece` bytes of a client write can be taken without eating into
    /// the cleaner's reserve (see the module docs). `first`: this is the write's first piece:
    /// when room must be made and the live bytes have reached [`Pool::usable_bytes`], or have
    /// not dropped since cleaning last failed, the write is refused before anything of it is
    /// taken. Later pieces only clean. Each piece taken pays for [`MOVE_PER_BYTE`] bytes of
    /// the cleaner's moves.
    pub(crate) fn make_room(&mut self, piece: u64, first: bool) -> Result<(), IoError> {
        let threshold = self.free_threshold();
        let room = self.io()?.free_above(threshold);
        if !room {
            let live = self.live_bytes()?;
            if first {
                let full = self.cleaner.full_at.is_some_and(|f| live >= f);
                if full || live >= self.usable_bytes() {
                    return Err(IoError::NoSpace);
                }
            }
            if self.cleaner.full_at.take().is_some() {
                // Space was freed since cleaning last failed: a fresh budget.
                self.cleaner.debt = 0;
            }
        }
        let paid = piece.saturating_mul(MOVE_PER_BYTE);
        self.cleaner.debt = self.cleaner.debt.saturating_sub(paid);
        if room {
            return Ok(());
        }
        let res = self.clean_for_room(threshold);
        if res == Err(IoError::NoSpace) {
            self.cleaner.full_at = Some(self.live_bytes()?);
        }
        res
    }

    /// [`Pool::make_room`]'s cleaning: victims and checkpoints until more than `threshold`
    /// segments are free.
    fn clean_for_room(&mut self, threshold: u32) -> Result<(), IoError> {
        let mut stuck = 0;
        // Cleaning a segment does not always gain one: on a nearly full pool the relocated
        // bytes, the checkpoints and their padding can take as much as the victims free, and
        // the cleaner would move the same data from segment to segment forever. It gives up
        // after `IDLE_VICTIMS` victims in a row that did not raise the count of reclaimed
        // segments past its best (at 90 % live, the most a victim may hold, ten victims gain
        // one segment), and the pool stays full until its live bytes drop. Past its budget
        // ([`MOVE_PER_BYTE`]) it lets the write take one segment of the threshold's margin.
        let mut best = self.reclaimed_segments()?;
        let mut idle = 0u32;
        let mut over_budget = false;
        while !self.io()?.free_above(threshold) {
            let pending = !self.cleaner.cleaned.is_empty() || self.any_pending()?;
            let enough = threshold.saturating_add(LOOKAHEAD);
            if pending && stuck < 3 && self.reclaimed_segments()? > enough {
                // Enough segments (more than [`LOOKAHEAD`] beyond the threshold) are emptied
                // already and become free after two more checkpoints, which serve them all.
                self.write_checkpoint()?;
                stuck += 1;
                continue;
            }
            if idle < IDLE_VICTIMS {
                match self.clean_one(over_budget)? {
                    Clean::Moved => {
                        stuck = 0;
                        let now = self.reclaimed_segments()?;
                        if now > best {
                            best = now;
                            idle = 0;
                        } else {
                            idle += 1;
                        }
                        continue;
                    }
                    // Throttled: the write may take one segment of the margin (the window's
                    // renewal and the cleaner's reserve stay whole: writes that ate into them
                    // filled the log on small pools).
                    Clean::OverBudget if self.io()?.free_above(threshold.saturating_sub(1)) => {
                        return Ok(());
                    }
                    // Refusing the write would not make cleaning any cheaper later.
                    Clean::OverBudget => {
                        over_budget = true;
                        continue;
                    }
                    Clean::Nothing => {}
                }
            }
            if pending && stuck < 3 {
                // Emptied segments become free after two more checkpoints.
                self.write_checkpoint()?;
                stuck += 1;
                continue;
            }
            // Nothing to clean: below the reserve only the cleaner may write.
            if self.io()?.segs().free() <= self.cfg.cleaner_reserve {
                return Err(IoError::NoSpace);
            }
            return Ok(());
        }
        Ok(())
    }

    /// Live bytes in the log (extents, map pages and tables the newest pointers name), from
    /// the segment table's running sum.
    fn live_bytes(&mut self) -> Result<u64, IoError> {
        Ok(self.io()?.segs().live())
    }

    /// Whether any segment waits for checkpoints to become free.
    fn any_pending(&mut self) -> Result<bool, IoError> {
        let mut io = self.io()?;
        let t = io.segs();
        Ok((0..t.segments()).any(|s| matches!(t.get(s).state, SegState::Pending(_))))
    }

    /// Segments outside the log's window that are free, pending (free after two more
    /// checkpoints) or emptied by the cleaner awaiting the checkpoint that makes them pending.
    fn reclaimed_segments(&mut self) -> Result<u32, IoError> {
        let cleaned = self.cleaner.cleaned.clone();
        let mut io = self.io()?;
        let log = &*io.log;
        let window: Vec<u32, 16> = log.window().0.iter().copied().collect();
        let t = io.segs();
        let n = (0..t.segments())
            .filter(|s| !window.contains(s) && !cleaned.contains(s))
            .filter(|&s| matches!(t.get(s).state, SegState::Free | SegState::Pending(_)))
            .count();
        Ok((n + cleaned.len()) as u32)
    }

    /// Cleans the used segment with the fewest live bytes, within the budget client writes
    /// paid ([`MOVE_PER_BYTE`]) unless `over_budget`.
    fn clean_one(&mut self, over_budget: bool) -> Result<Clean, IoError> {
        let Some((seg, live)) = self.victim()? else {
            return Ok(Clean::Nothing);
        };
        let debt = self.cleaner.debt.saturating_add(u64::from(live));
        let cap = DEBT_SEGMENTS * self.log.segment_bytes();
        if debt > cap && !over_budget {
            return Ok(Clean::OverBudget);
        }
        // Over budget, the moves clients did not pay for are forgiven.
        self.cleaner.debt = debt.min(cap);
        let root_gen = self.ckpt.root_gen as u32;
        let pending = SegEntry {
            live: 0,
            state: SegState::Pending(root_gen),
            first_seq: 0,
        };
        if live == 0 {
            self.io()?.segs().set(seg, pending);
            return Ok(Clean::Moved);
        }
        self.relocate_segment(seg)?;
        let after = self.io()?.segs().get(seg);
        if after.state != SegState::Used {
            // A checkpoint during the walk retired it already (it held nothing live then).
            return Ok(Clean::Moved);
        }
        if after.live == 0 {
            let pending = SegEntry {
                state: SegState::Pending(self.ckpt.root_gen as u32),
                ..pending
            };
            self.io()?.segs().set(seg, pending);
        } else if self.cleaner.cleaned.push(seg).is_err() {
            // Live map pages were marked dirty and tables are superseded: a checkpoint moves
            // them for the whole batch (one checkpoint per victim would cost more than it frees).
            self.write_checkpoint()?;
            let _ = self.cleaner.cleaned.push(seg);
        }
        Ok(Clean::Moved)
    }

    /// The used segment outside the window with the fewest live bytes, if cleaning it frees at
    /// least a tenth of a segment.
    fn victim(&mut self) -> Result<Option<(u32, u32)>, IoError> {
        let seg_bytes = self.log.segment_bytes();
        let skip = self.cleaner.skip.clone();
        let cleaned = self.cleaner.cleaned.clone();
        let mut io = self.io()?;
        let window: Vec<u32, 16> = io.log.window().0.iter().copied().collect();
        let t = io.segs();
        let mut victim: Option<(u32, u32)> = None;
        for s in 0..t.segments() {
            let e = t.get(s);
            if e.state != SegState::Used
                || window.contains(&s)
                || skip.contains(&s)
                || cleaned.contains(&s)
            {
                continue;
            }
            // Worth it only if it frees at least a tenth of a segment.
            if u64::from(e.live) * 10 > seg_bytes * 9 {
                continue;
            }
            if victim.is_none_or(|(_, l)| e.live < l) {
                victim = Some((s, e.live));
            }
        }
        Ok(victim)
    }

    /// After a checkpoint: batch victims it emptied became pending with it; any still holding
    /// live bytes could not be moved (damaged beyond repair) and are left alone.
    pub(crate) fn settle_cleaned(&mut self) -> Result<(), IoError> {
        let cleaned = core::mem::take(&mut self.cleaner.cleaned);
        for &seg in &cleaned {
            if self.io()?.segs().get(seg).live > 0 && !self.cleaner.skip.contains(&seg) {
                let _ = self.cleaner.skip.push(seg);
            }
        }
        Ok(())
    }

    /// Re-appends everything live in segment `seg`. When the map cache is full, a first pass
    /// moves only the extents whose leaf map page is cached, so that a victim's extents
    /// scattered over a map larger than the cache do not each evict (write) a dirty page.
    fn relocate_segment(&mut self, seg: u32) -> Result<(), IoError> {
        if self.map.is_full() {
            self.relocate_pass(seg, true)?;
        }
        self.relocate_pass(seg, false)
    }

    /// One walk of segment `seg`: relocates its live extents (with `cached_only`, those whose
    /// leaf map pages are cached) and, in a full pass, marks its live map pages dirty.
    fn relocate_pass(&mut self, seg: u32, cached_only: bool) -> Result<(), IoError> {
        let start = self.log.seg_start(seg);
        let end = start + self.log.segment_bytes();
        let mut cursor = start;
        let mut rule = SeqRule::walk(self.io()?.segs().get(seg));
        while cursor < end {
            // Keep the log's own reserve: a checkpoint renews the reserved segments.
            let half = (usize::from(self.cfg.reserved_segments) / 2).max(1);
            if self.log.window().1 >= half || self.io()?.window_closing() {
                self.write_checkpoint()?;
            }
            let Some((h, _, _)) = self
                .io()?
                .find_header(cursor, (end - cursor) as usize, rule)
            else {
                break;
            };
            rule = rule.after(h.seq);
            match h.kind {
                ItemKind::Extent if !cached_only || self.leaves_cached(&h) => {
                    self.relocate_extent(&h)?;
                }
                ItemKind::MapPage if !cached_only => {
                    self.dirty_live_page(&h)?;
                }
                _ => {}
            }
            cursor += h.item_bytes() as u64;
        }
        Ok(())
    }

    /// Whether the leaf map pages of the extent `h`'s blocks are all cached.
    fn leaves_cached(&self, h: &ItemHeader) -> bool {
        let last = h.lba.saturating_add(u64::from(h.blocks.max(1)) - 1);
        self.map.is_cached(PageKey::leaf(h.lun, h.lba))
            && self.map.is_cached(PageKey::leaf(h.lun, last))
    }

    /// The map page item `h` (either copy of a page): if its page's pointer still names it, the
    /// page is loaded (through the other copy if this one is lost) and marked dirty, so the
    /// next checkpoint writes both copies anew elsewhere. Returns whether it was live (a page
    /// of a LUN that is gone, or past its tree, is dead).
    pub(crate) fn dirty_live_page(&mut self, h: &ItemHeader) -> Result<bool, IoError> {
        let key = PageKey {
            lun: h.lun,
            level: h.blocks as u8,
            index: h.lba,
        };
        let mut vol = self.vol()?;
        let live = vol
            .page_ptr(key.lun, key.level, key.index)?
            .is_some_and(|p| p.copies().any(|c| c.addr == h.addr));
        if live {
            vol.dirty_page(key)?;
        }
        Ok(live)
    }

    /// Re-appends the blocks of the extent `h` the map still points at.
    fn relocate_extent(&mut self, h: &ItemHeader) -> Result<(), IoError> {
        let Some(l) = self.luns.slot(h.lun) else {
            return Ok(());
        };
        if l.blocks == 0 || h.lba + u64::from(h.blocks) > l.blocks {
            return Ok(());
        }
        let mut vol = self.vol()?;
        // Which blocks does the map still point here?
        let mut live = [false; 32];
        let mut entries = [MapEntry::NONE; 32];
        let mut any = None;
        for i in 0..h.blocks.min(32) {
            let e = vol.map_get(h.lun, h.lba + u64::from(i))?;
            if e.valid && e.addr() == h.addr {
                if let (Some(x), Some(y)) = (live.get_mut(i as usize), entries.get_mut(i as usize))
                {
                    (*x, *y) = (true, e);
                }
                any = Some(e);
            }
        }
        let Some(e) = any else { return Ok(()) };
        let loaded = vol.load_extent(h.lun, h.lba + u64::from(e.index), e);
        // Every block moved must be the one its entry names (an entry holding its block's CRC
        // checks that block; the load checked only one of them).
        let Ok(base) = loaded.and_then(|base| {
            let ok = (0..32).all(|i| {
                let e = entries.get(i).copied().unwrap_or(MapEntry::NONE);
                let at = base + i * LUN_BLOCK;
                !e.block_crc
                    || vol
                        .raw
                        .get(at..at + LUN_BLOCK)
                        .is_some_and(|b| crc32c(b) == e.crc)
            });
            if ok {
                Ok(base)
            } else {
                Err(IoError::Corrupt(FormatError::Crc))
            }
        }) else {
            // Damaged beyond repair: leave it (reads report it); the segment stays.
            return Ok(());
        };
        let n = h.blocks.min(32) as usize;
        let mut i = 0usize;
        while i < n {
            if !live.get(i).copied().unwrap_or(false) {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < n && live.get(j).copied().unwrap_or(false) {
                j += 1;
            }
            // The run goes through the decoded-extent slot, which the emit must not touch:
            // lend it out of the volume meanwhile.
            let raw = core::mem::take(&mut vol.raw);
            let res = match raw.get(base + i * LUN_BLOCK..base + j * LUN_BLOCK) {
                Some(data) => vol.emit(h.lun, h.lba + i as u64, data, Writer::Cleaner),
                None => Err(bug!(IoError)),
            };
            vol.raw = raw;
            res?;
            i = j;
        }
        Ok(())
    }
}
