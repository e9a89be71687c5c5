//! Write coalescing: each open extent (a stream) buffers consecutive 4 KiB blocks of one LUN in
//! its own slot of the streams arena slice. A write that continues a stream's run is appended to
//! it; a write inside a buffered run replaces those blocks in memory; anything else starts a
//! stream (taking the least recently used one when all `S` are busy, after its extent is closed).
//! This type only keeps the runs; closing an extent (compressing it and appending it to the
//! log) is the volume's, and the pool decides when.

use heapless::Vec;

use crate::error::{IoError, bug};
use crate::format::LUN_BLOCK;

/// An open extent: a run of consecutive blocks of one LUN being coalesced in slot `slot`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stream {
    pub lun: u16,
    /// First LBA of the buffered run.
    pub start: u64,
    /// Blocks buffered (0: the stream is remembered but empty).
    pub blocks: u32,
    /// Buffer slot.
    pub slot: u16,
    last_touch: u64,
    /// Time of the last write (for idle closing).
    last_time: u64,
}

/// Where a new run goes ([`Streams::new_stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewStream {
    /// Stream `i` is ready for the run.
    Ready(usize),
    /// Every stream is busy: close stream `i`'s extent, then [`Streams::restart`] it.
    Evict(usize),
}

/// Up to `S` open extents of at most `max_blocks` blocks each.
#[derive(Debug, Clone)]
pub(crate) struct Streams<const S: usize> {
    open: Vec<Stream, S>,
    tick: u64,
    max_blocks: u32,
    /// Bytes of one slot of the arena slice.
    slot_bytes: usize,
}

impl<const S: usize> Streams<S> {
    /// Streams of at most `max_blocks` blocks, each with a `slot_bytes` slot in the arena.
    pub fn new(max_blocks: u32, slot_bytes: usize) -> Self {
        Streams {
            open: Vec::new(),
            tick: 0,
            max_blocks,
            slot_bytes,
        }
    }

    fn touch(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Streams known (open or remembered).
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Stream `i`.
    pub fn get(&self, i: usize) -> Option<Stream> {
        self.open.get(i).copied()
    }

    /// The stream whose buffered run holds `lun`'s block `lba`.
    pub fn holding(&self, lun: u16, lba: u64) -> Option<usize> {
        self.open.iter().position(|s| {
            s.lun == lun && s.blocks > 0 && lba >= s.start && lba < s.start + u64::from(s.blocks)
        })
    }

    /// The stream whose run `lba` continues (with room left).
    pub fn continuing(&self, lun: u16, lba: u64) -> Option<usize> {
        self.open.iter().position(|s| {
            s.lun == lun && s.start + u64::from(s.blocks) == lba && s.blocks < self.max_blocks
        })
    }

    /// A stream for a run starting at `lba`: a fresh one while fewer than `S` exist, else the
    /// least recently used (an empty, remembered one first), whose extent the caller closes.
    pub fn new_stream(&mut self, lun: u16, lba: u64) -> Result<NewStream, IoError> {
        if self.open.len() < S {
            let slot = self.open.len() as u16;
            let fresh = Stream {
                lun,
                start: lba,
                blocks: 0,
                slot,
                last_touch: 0,
                last_time: 0,
            };
            self.open.push(fresh).map_err(|_| bug!(IoError))?;
            return Ok(NewStream::Ready(self.open.len() - 1));
        }
        self.open
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| (s.blocks > 0, s.last_touch))
            .map(|(i, _)| NewStream::Evict(i))
            .ok_or(bug!(IoError))
    }

    /// Stream `i` (its extent closed) starts a run at `lun`'s `lba`.
    pub fn restart(&mut self, i: usize, lun: u16, lba: u64) -> Result<(), IoError> {
        let s = self.open.get_mut(i).ok_or(bug!(IoError))?;
        s.lun = lun;
        s.start = lba;
        s.blocks = 0;
        Ok(())
    }

    /// Stream `i`'s slot in `bufs`.
    pub fn buf<'b>(&self, bufs: &'b mut [u8], i: usize) -> Result<&'b mut [u8], IoError> {
        let s = self.open.get(i).ok_or(bug!(IoError))?;
        let at = s.slot as usize * self.slot_bytes;
        bufs.get_mut(at..at + self.slot_bytes).ok_or(bug!(IoError))
    }

    /// Replaces `lba` (inside stream `i`'s run) with `data` at time `now`.
    pub fn replace(
        &mut self,
        bufs: &mut [u8],
        i: usize,
        lba: u64,
        data: &[u8],
        now: u64,
    ) -> Result<(), IoError> {
        let t = self.touch();
        let s = self.get(i).ok_or(bug!(IoError))?;
        let off = (lba - s.start) as usize * LUN_BLOCK;
        self.buf(bufs, i)?
            .get_mut(off..off + LUN_BLOCK)
            .ok_or(bug!(IoError))?
            .copy_from_slice(data);
        let s = self.open.get_mut(i).ok_or(bug!(IoError))?;
        s.last_touch = t;
        s.last_time = now;
        Ok(())
    }

    /// Appends `data` to stream `i`'s run at time `now`; returns whether the run is now full
    /// (the caller closes its extent).
    pub fn append(
        &mut self,
        bufs: &mut [u8],
        i: usize,
        data: &[u8],
        now: u64,
    ) -> Result<bool, IoError> {
        let t = self.touch();
        let s = self.get(i).ok_or(bug!(IoError))?;
        let off = s.blocks as usize * LUN_BLOCK;
        self.buf(bufs, i)?
            .get_mut(off..off + LUN_BLOCK)
            .ok_or(bug!(IoError))?
            .copy_from_slice(data);
        let max = self.max_blocks;
        let s = self.open.get_mut(i).ok_or(bug!(IoError))?;
        s.blocks += 1;
        s.last_touch = t;
        s.last_time = now;
        Ok(s.blocks >= max)
    }

    /// Stream `i`'s extent was closed: the stream stays, empty, remembering where its run
    /// continues.
    pub fn closed(&mut self, i: usize) {
        if let Some(s) = self.open.get_mut(i) {
            s.start += u64::from(s.blocks);
            s.blocks = 0;
        }
    }

    /// Whether stream `i` holds blocks and was last written more than `idle` before `now`.
    pub fn idle(&self, i: usize, now: u64, idle: u64) -> bool {
        self.open
            .get(i)
            .is_some_and(|s| s.blocks > 0 && now.saturating_sub(s.last_time) > idle)
    }

    /// Whether stream `i` holds any block of `lun` in `lba..lba + blocks`.
    pub fn overlaps(&self, i: usize, lun: u16, lba: u64, blocks: u64) -> bool {
        self.open.get(i).is_some_and(|s| {
            s.lun == lun
                && s.blocks > 0
                && s.start < lba + blocks
                && lba < s.start + u64::from(s.blocks)
        })
    }

    /// Drops the buffered blocks of `lun` unwritten (the LUN is being deleted).
    pub fn drop_lun(&mut self, lun: u16) {
        for s in self.open.iter_mut().filter(|s| s.lun == lun) {
            s.blocks = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    fn block(tag: u8) -> [u8; LUN_BLOCK] {
        [tag; LUN_BLOCK]
    }

    #[test]
    fn sequential_blocks_coalesce_until_the_extent_is_full() {
        let mut st: Streams<2> = Streams::new(4, 4 * LUN_BLOCK);
        let mut bufs = vec![0u8; 2 * 4 * LUN_BLOCK];
        let NewStream::Ready(i) = st.new_stream(0, 10).unwrap() else {
            panic!("a fresh stream");
        };
        let mut full = false;
        for k in 0..4u64 {
            assert_eq!(st.continuing(0, 10 + k), Some(i));
            full = st.append(&mut bufs, i, &block(k as u8), k).unwrap();
        }
        assert!(full);
        assert_eq!(st.holding(0, 12), Some(i));
        assert_eq!(st.holding(0, 14), None);
        // Full: the run is not continued.
        assert_eq!(st.continuing(0, 14), None);
        st.replace(&mut bufs, i, 11, &block(9), 5).unwrap();
        assert_eq!(st.buf(&mut bufs, i).unwrap()[LUN_BLOCK], 9);
        st.closed(i);
        assert_eq!(st.get(i).unwrap().start, 14);
        assert_eq!(st.holding(0, 12), None);
        assert_eq!(st.continuing(0, 14), Some(i));
    }

    #[test]
    fn the_least_recently_used_stream_is_taken_empty_ones_first() {
        let mut st: Streams<2> = Streams::new(8, 8 * LUN_BLOCK);
        let mut bufs = vec![0u8; 2 * 8 * LUN_BLOCK];
        let NewStream::Ready(a) = st.new_stream(0, 0).unwrap() else {
            panic!()
        };
        st.append(&mut bufs, a, &block(1), 0).unwrap();
        let NewStream::Ready(b) = st.new_stream(1, 100).unwrap() else {
            panic!()
        };
        st.append(&mut bufs, b, &block(2), 1).unwrap();
        // Both busy: the older (a) is evicted.
        assert_eq!(st.new_stream(2, 0).unwrap(), NewStream::Evict(a));
        st.append(&mut bufs, a, &block(3), 2).unwrap();
        // Now b is older; but an empty stream goes first.
        st.closed(a);
        assert_eq!(st.new_stream(2, 0).unwrap(), NewStream::Evict(a));
        assert!(st.idle(b, 100, 50));
        assert!(!st.idle(b, 10, 50));
        assert!(st.overlaps(b, 1, 99, 2));
        st.drop_lun(1);
        assert!(!st.overlaps(b, 1, 99, 2));
    }
}

#[cfg(test)]
mod model_tests;
