//! The cleaner (garbage collection): when free segments run low, the used segment with the
//! fewest live bytes is emptied — its live extents re-appended (without decompressing more than
//! needed), its live map pages marked dirty, its tables superseded by a checkpoint — and freed
//! once two later checkpoints are durable. Liveness is decided by the map itself: an extent
//! block is live when the map still points at that item, a page when its parent does.
//!
//! Besides its window of `reserved_segments`, the log keeps `reserved_segments + cleaner_reserve`
//! free segments (to renew the window at the next checkpoint, and for the cleaner) beyond what
//! clients may fill ([`Pool::usable_bytes`](crate::pool::Pool::usable_bytes)), so the cleaner's own writes never fail for lack of space; a write that would need them
//! gets [`IoError::NoSpace`] instead, before anything is buffered.

use raidcore_hal::BlockDevice;

use crate::error::{IoError, bug};
use crate::format::{FANOUT, ItemHeader, ItemKind, LUN_BLOCK, MapEntry, SegEntry, SegState};
use crate::log::SeqRule;
use crate::pool::state::{Bufs, PageKey, State};
use crate::volume::Writer;
use crate::volume::map::span;

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    fn free_threshold(&self) -> u32 {
        u32::from(self.cfg.reserved_segments) + self.cfg.cleaner_reserve
    }

    /// Makes sure a client write of `blocks` blocks can be taken without eating into the
    /// cleaner's reserve (see the module docs).
    pub(crate) fn make_room(&mut self, b: &mut Bufs, blocks: u64) -> Result<(), IoError> {
        let _ = blocks;
        let mut stuck = 0;
        // Cleaning a segment does not always gain one: on a nearly full pool the relocated
        // bytes, the checkpoints and their padding can take as much as the victims free, and
        // the cleaner would move the same data from segment to segment forever. It stops after
        // `segments()` victims in a row that did not raise the count of reclaimed segments
        // past its best; the best can rise at most `segments()` times, so the work is bounded.
        let mut best = self.reclaimed_segments(b);
        let mut idle = 0u32;
        while !self.free_segments_above(b, self.free_threshold()) {
            let pending = !self.cleaned.is_empty()
                || (0..self.segments()).any(|s| matches!(b.seg(s).state, SegState::Pending(_)));
            if pending && stuck < 3 && self.reclaimed_segments(b) > self.free_threshold() {
                // Enough segments are emptied already and become free after two more
                // checkpoints: cheaper than cleaning more (each victim leaves one pending).
                self.checkpoint(b)?;
                stuck += 1;
                continue;
            }
            if idle < self.segments() && self.clean_one(b)? {
                stuck = 0;
                let now = self.reclaimed_segments(b);
                if now > best {
                    best = now;
                    idle = 0;
                } else {
                    idle += 1;
                }
                continue;
            }
            if pending && stuck < 3 {
                // Emptied segments become free after two more checkpoints.
                self.checkpoint(b)?;
                stuck += 1;
                continue;
            }
            // Nothing to clean: below the reserve only the cleaner may write.
            if self.free_segments(b) <= self.cfg.cleaner_reserve {
                return Err(IoError::NoSpace);
            }
            return Ok(());
        }
        Ok(())
    }

    /// Segments outside the log's window that are free, pending (free after two more
    /// checkpoints) or emptied by the cleaner awaiting the checkpoint that makes them pending.
    fn reclaimed_segments(&self, b: &Bufs) -> u32 {
        let n = (0..self.segments())
            .filter(|s| !self.log.reserved.contains(s) && !self.cleaned.contains(s))
            .filter(|&s| matches!(b.seg(s).state, SegState::Free | SegState::Pending(_)))
            .count();
        (n + self.cleaned.len()) as u32
    }

    /// Cleans the used segment with the fewest live bytes. Returns false when no segment would
    /// gain anything.
    pub(crate) fn clean_one(&mut self, b: &mut Bufs) -> Result<bool, IoError> {
        let seg_bytes = self.segment_bytes();
        let mut victim: Option<(u32, u32)> = None;
        for s in 0..self.segments() {
            let e = b.seg(s);
            if e.state != SegState::Used
                || self.log.reserved.contains(&s)
                || self.clean_skip.contains(&s)
                || self.cleaned.contains(&s)
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
        let Some((seg, live)) = victim else {
            return Ok(false);
        };
        if live == 0 {
            b.set_seg(
                seg,
                SegEntry {
                    live: 0,
                    state: SegState::Pending(self.root_gen as u32),
                    first_seq: 0,
                },
            );
            return Ok(true);
        }
        self.relocate_segment(b, seg)?;
        if b.seg(seg).live == 0 {
            b.set_seg(
                seg,
                SegEntry {
                    live: 0,
                    state: SegState::Pending(self.root_gen as u32),
                    first_seq: 0,
                },
            );
        } else if self.cleaned.push(seg).is_err() {
            // Live map pages were marked dirty and tables are superseded: a checkpoint moves
            // them for the whole batch (one checkpoint per victim would cost more than it frees).
            self.checkpoint(b)?;
            let _ = self.cleaned.push(seg);
        }
        Ok(true)
    }

    /// After a checkpoint: batch victims it emptied became pending with it; any still holding
    /// live bytes could not be moved (damaged beyond repair) and are left alone.
    pub(crate) fn settle_cleaned(&mut self, b: &Bufs) {
        for &seg in &self.cleaned {
            if b.seg(seg).live > 0 && !self.clean_skip.contains(&seg) {
                let _ = self.clean_skip.push(seg);
            }
        }
        self.cleaned.clear();
    }

    /// Re-appends everything live in segment `seg`.
    fn relocate_segment(&mut self, b: &mut Bufs, seg: u32) -> Result<(), IoError> {
        let start = self.seg_start(seg);
        let end = start + self.segment_bytes();
        let mut cursor = start;
        let mut rule = SeqRule::walk(b, seg);
        while cursor < end {
            // Keep the log's own reserve: a checkpoint renews the reserved segments.
            let half = (usize::from(self.cfg.reserved_segments) / 2).max(1);
            if self.log.res_idx >= half || self.window_closing(b) {
                self.checkpoint(b)?;
            }
            let Some((h, _, _)) = self.find_header(b, cursor, (end - cursor) as usize, rule) else {
                break;
            };
            rule = rule.after(h.seq);
            match h.kind {
                ItemKind::Extent => self.relocate_extent(b, &h)?,
                ItemKind::MapPage => {
                    let level = h.blocks as u8;
                    if self
                        .page_ptr(b, h.lun, level, h.lba)?
                        .is_some_and(|p| p.addr == cursor)
                    {
                        let slot = self.load_page(
                            b,
                            PageKey {
                                lun: h.lun,
                                level,
                                index: h.lba,
                            },
                        )?;
                        if let Some(Some(m)) = self.cache.get_mut(slot) {
                            m.dirty = true;
                        }
                    }
                }
                _ => {}
            }
            cursor += h.item_bytes() as u64;
        }
        Ok(())
    }

    fn relocate_extent(&mut self, b: &mut Bufs, h: &ItemHeader) -> Result<(), IoError> {
        let Some(l) = self.luns.get(h.lun as usize) else {
            return Ok(());
        };
        if l.rec.blocks == 0 || h.lba + u64::from(h.blocks) > l.rec.blocks {
            return Ok(());
        }
        // Which blocks does the map still point here?
        let mut live = [false; 32];
        let mut any = None;
        for i in 0..h.blocks.min(32) {
            let e = self.map_get(b, h.lun, h.lba + u64::from(i))?;
            if e.valid && e.addr() == h.addr {
                if let Some(x) = live.get_mut(i as usize) {
                    *x = true;
                }
                any = Some(e);
            }
        }
        let Some(e) = any else { return Ok(()) };
        let Ok(base) = self.load_extent(b, h.lun, h.lba + u64::from(e.index), e) else {
            // Damaged beyond repair: leave it (reads report it); the segment stays.
            return Ok(());
        };
        let mut i = 0usize;
        let n = h.blocks.min(32) as usize;
        while i < n {
            if !live.get(i).copied().unwrap_or(false) {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < n && live.get(j).copied().unwrap_or(false) {
                j += 1;
            }
            let data = b
                .raw
                .get(base + i * LUN_BLOCK..base + j * LUN_BLOCK)
                .ok_or(bug!(IoError))?;
            let mut parts = Bufs {
                log: crate::pool::state::LogBufs {
                    stripe: b.log.stripe,
                    scratch: b.log.scratch,
                },
                streams: &mut [],
                stream_bytes: 0,
                raw_slot: 0,
                comp: b.comp,
                item: b.item,
                raw: &mut [],
                pages: b.pages,
                meta: &mut [],
                sut: b.sut,
            };
            self.emit(&mut parts, h.lun, h.lba + i as u64, data, Writer::Cleaner)?;
            i = j;
        }
        Ok(())
    }

    /// The current on-disk pointer of map page `(lun, level, index)`, if the page exists.
    fn page_ptr(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        level: u8,
        index: u64,
    ) -> Result<Option<crate::format::BlockPtr>, IoError> {
        let Some(l) = self.luns.get(lun as usize) else {
            return Ok(None);
        };
        if l.rec.blocks == 0 {
            return Ok(None);
        }
        let top = l.rec.depth.saturating_sub(1);
        if level > top || index >= l.rec.blocks.div_ceil(span(level + 1)).max(1) {
            return Ok(None);
        }
        if let Some(Some(m)) = self
            .cache
            .iter()
            .find(|m| m.is_some_and(|m| m.key == PageKey { lun, level, index }))
        {
            return Ok(Some(m.ptr));
        }
        if level == top {
            let r = self.luns.get(lun as usize).map(|l| l.rec.map_root);
            return Ok(r.filter(|p| !p.is_none()));
        }
        if !self.page_may_exist(b, lun, level + 1, index / FANOUT as u64)? {
            return Ok(None);
        }
        let ps = self.load_page(
            b,
            PageKey {
                lun,
                level: level + 1,
                index: index / FANOUT as u64,
            },
        )?;
        let at = (index % FANOUT as u64) as usize * crate::format::ENTRY_BYTES;
        let e = MapEntry::decode(
            b.pages
                .get(ps * crate::format::PAGE_PAYLOAD..(ps + 1) * crate::format::PAGE_PAYLOAD)
                .ok_or(bug!(IoError))?,
            at,
        );
        Ok(Some(e.ptr()).filter(|p| !p.is_none()))
    }
}
