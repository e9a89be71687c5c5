//! The segment usage table: per segment of the log, its live bytes, its state (free, used, or
//! pending: emptied, free once two more checkpoints are durable) and the sequence number its
//! current use began with. It lives in its own arena slice ([`format::SEG_ENTRY_BYTES`] per
//! segment, the encoding the checkpoint writes), and the count of free entries and the sum of
//! live bytes are kept up to date beside it, so asking for free space or live bytes costs the
//! same on any pool size.

use crate::format::{self, SEG_ENTRY_BYTES, SegEntry, SegState};

/// The counts the table keeps beside its arena slice (owned by the log; the slice is lent per
/// operation).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SegmentCounts {
    /// Entries in state [`SegState::Free`].
    pub free: u32,
    /// Live bytes of every entry.
    pub live: u64,
}

/// A view of the table: the arena slice and its counts.
#[derive(Debug)]
pub(crate) struct SegmentTable<'a> {
    entries: &'a mut [u8],
    segments: u32,
    counts: &'a mut SegmentCounts,
}

impl<'a> SegmentTable<'a> {
    /// The table of `segments` segments held in `entries` (at least `segments *
    /// SEG_ENTRY_BYTES` bytes), with the counts kept for it.
    pub fn new(entries: &'a mut [u8], segments: u32, counts: &'a mut SegmentCounts) -> Self {
        SegmentTable {
            entries,
            segments,
            counts,
        }
    }

    /// Segments in the table.
    pub const fn segments(&self) -> u32 {
        self.segments
    }

    /// Segment `i`'s entry (a free entry past the end).
    pub fn get(&self, i: u32) -> SegEntry {
        SegEntry::decode(self.entries, i as usize * SEG_ENTRY_BYTES)
    }

    /// Sets segment `i`'s entry.
    pub fn set(&mut self, i: u32, e: SegEntry) {
        if i >= self.segments {
            return;
        }
        let old = self.get(i);
        let was_free = old.state == SegState::Free;
        let is_free = e.state == SegState::Free;
        e.encode(self.entries, i as usize * SEG_ENTRY_BYTES);
        self.counts.live = (self.counts.live.saturating_sub(u64::from(old.live)))
            .saturating_add(u64::from(e.live));
        match (was_free, is_free) {
            (true, false) => self.counts.free = self.counts.free.saturating_sub(1),
            (false, true) => self.counts.free += 1,
            _ => {}
        }
    }

    /// Adds `bytes` to (or with `add == false` removes them from) segment `seg`'s live bytes.
    pub fn account(&mut self, seg: u32, bytes: u32, add: bool) {
        let mut e = self.get(seg);
        e.live = if add {
            e.live.saturating_add(bytes)
        } else {
            e.live.saturating_sub(bytes)
        };
        self.set(seg, e);
    }

    /// Entries in state [`SegState::Free`] (reserved ones included).
    pub const fn free(&self) -> u32 {
        self.counts.free
    }

    /// Live bytes of every segment (extents, map pages and tables the newest pointers name).
    pub const fn live(&self) -> u64 {
        self.counts.live
    }

    /// Every segment free (a new pool).
    pub fn clear(&mut self) {
        self.entries.fill(0);
        for s in 0..self.segments {
            SegEntry::FREE.encode(self.entries, s as usize * SEG_ENTRY_BYTES);
        }
        self.counts.free = self.segments;
        self.counts.live = 0;
    }

    /// Replaces the table with `bytes` (a table read back from the log), and counts it.
    pub fn load(&mut self, bytes: &[u8]) -> Option<()> {
        self.entries.get_mut(..bytes.len())?.copy_from_slice(bytes);
        self.counts.free = (0..self.segments)
            .filter(|&s| self.get(s).state == SegState::Free)
            .count() as u32;
        self.counts.live = (0..self.segments)
            .map(|s| u64::from(self.get(s).live))
            .sum();
        Some(())
    }

    /// Bytes the encoded table takes.
    pub const fn encoded_len(segments: u32) -> usize {
        format::round_up(segments as usize * SEG_ENTRY_BYTES, format::SECTOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_count_and_live_bytes_follow_every_change() {
        let mut mem = [0u8; 8 * SEG_ENTRY_BYTES];
        let mut counts = SegmentCounts::default();
        let mut t = SegmentTable::new(&mut mem, 8, &mut counts);
        t.clear();
        assert_eq!(t.free(), 8);
        let used = SegEntry {
            live: 0,
            state: SegState::Used,
            first_seq: 9,
        };
        t.set(3, used);
        t.set(3, used);
        assert_eq!(t.free(), 7);
        t.account(3, 100, true);
        t.account(3, 40, false);
        assert_eq!(t.get(3).live, 60);
        assert_eq!(t.live(), 60);
        assert_eq!(t.get(3).first_seq, 9);
        t.set(
            5,
            SegEntry {
                state: SegState::Pending(4),
                ..used
            },
        );
        assert_eq!(t.free(), 6);
        t.account(5, 7, true);
        assert_eq!(t.live(), 67);
        t.set(5, SegEntry::FREE);
        t.set(3, SegEntry::FREE);
        assert_eq!(t.free(), 8);
        assert_eq!(t.live(), 0);
        // Out of range: ignored, reads as free.
        t.set(8, used);
        assert_eq!(t.free(), 8);
        t.set(1, SegEntry { live: 300, ..used });
        let copy: std::vec::Vec<u8> = mem.to_vec();
        let mut t = SegmentTable::new(&mut mem, 8, &mut counts);
        t.set(0, used);
        t.set(1, SegEntry::FREE);
        assert_eq!((t.free(), t.live()), (7, 0));
        t.load(&copy).unwrap();
        assert_eq!((t.free(), t.live()), (7, 300));
    }
}

#[cfg(test)]
mod model_tests;
