//! The volume layer: LUNs, write coalescing, compression and the read path.
//!
//! Write coalescing: each open extent (a "stream") buffers consecutive 4 KiB blocks of one LUN.
//! A write that continues a stream's run is appended to it; a write inside a buffered run
//! replaces those blocks in memory; anything else starts a stream (evicting the least recently
//! used one when all `S` are busy). An extent is closed — compressed, checksummed and appended
//! to the log — when it reaches the maximum extent size, when its stream has been idle longer
//! than the configured time, on flush, under buffer pressure, and before a TRIM of its blocks.
//! Random writes become one-block extents, packed into the same full stripes.
//!
//! Compression: LZ4 (`lz4_flex` block format) per extent, kept only when it saves at least
//! 12.5 % of the payload and at least one 512-byte sector of the item.

pub(crate) mod map;

use raidcore_hal::BlockDevice;

use crate::error::{IoError, bug};
use crate::format::{
    FLAG_CLEANER, FLAG_COMPRESSED, HEADER_BYTES, ITEM_ALIGN, ItemHeader, ItemKind, LUN_BLOCK,
    MapEntry, SECTOR, round_up,
};
use crate::log::Expect;
use crate::pool::state::{Bufs, State, Stream};

/// Who is appending an extent (for accounting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    Client,
    Cleaner,
}

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    fn stream_buf<'a>(b: &'a mut Bufs, slot: u16) -> Result<&'a mut [u8], IoError> {
        let sb = b.stream_bytes;
        b.streams
            .get_mut(slot as usize * sb..(slot as usize + 1) * sb)
            .ok_or(bug!(IoError))
    }

    /// Buffers one 4 KiB block of client data for `lun`/`lba`.
    pub(crate) fn buffer_block(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        lba: u64,
        data: &[u8],
    ) -> Result<(), IoError> {
        let t = self.touch();
        let now = self.now;
        // Inside a buffered run: replace in memory.
        if let Some(i) = self.streams.iter().position(|s| {
            s.lun == lun && s.blocks > 0 && lba >= s.start && lba < s.start + u64::from(s.blocks)
        }) {
            let s = *self.streams.get(i).ok_or(bug!(IoError))?;
            let off = (lba - s.start) as usize * LUN_BLOCK;
            Self::stream_buf(b, s.slot)?
                .get_mut(off..off + LUN_BLOCK)
                .ok_or(bug!(IoError))?
                .copy_from_slice(data);
            if let Some(s) = self.streams.get_mut(i) {
                s.last_touch = t;
                s.last_time = now;
            }
            return Ok(());
        }
        // Continues a run: append.
        let max = u32::from(self.cfg.max_extent_blocks);
        let i =
            match self.streams.iter().position(|s| {
                s.lun == lun && s.start + u64::from(s.blocks) == lba && s.blocks < max
            }) {
                Some(i) => i,
                None => self.new_stream(b, lun, lba)?,
            };
        let s = *self.streams.get(i).ok_or(bug!(IoError))?;
        let off = s.blocks as usize * LUN_BLOCK;
        Self::stream_buf(b, s.slot)?
            .get_mut(off..off + LUN_BLOCK)
            .ok_or(bug!(IoError))?
            .copy_from_slice(data);
        let full = {
            let s = self.streams.get_mut(i).ok_or(bug!(IoError))?;
            s.blocks += 1;
            s.last_touch = t;
            s.last_time = now;
            s.blocks >= max
        };
        if full {
            self.close_stream(b, i)?;
        }
        Ok(())
    }

    /// Starts a stream at `lba`: takes a free slot, else the least recently used one (closing
    /// its extent first).
    fn new_stream(&mut self, b: &mut Bufs, lun: u16, lba: u64) -> Result<usize, IoError> {
        let idx = if self.streams.len() < S {
            let slot = self.streams.len() as u16;
            let fresh = Stream {
                lun,
                start: lba,
                blocks: 0,
                slot,
                last_touch: 0,
                last_time: 0,
            };
            self.streams.push(fresh).map_err(|_| bug!(IoError))?;
            self.streams.len() - 1
        } else {
            // Prefer an empty (remembered) stream, then the least recently used.
            let i = self
                .streams
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| (s.blocks > 0, s.last_touch))
                .map(|(i, _)| i)
                .ok_or(bug!(IoError))?;
            self.close_stream(b, i)?;
            i
        };
        let s = self.streams.get_mut(idx).ok_or(bug!(IoError))?;
        s.lun = lun;
        s.start = lba;
        s.blocks = 0;
        Ok(idx)
    }

    /// Closes stream `i`'s extent (appends it to the log); the stream stays, empty, remembering
    /// where its run continues.
    pub(crate) fn close_stream(&mut self, b: &mut Bufs, i: usize) -> Result<(), IoError> {
        let s = *self.streams.get(i).ok_or(bug!(IoError))?;
        if s.blocks == 0 {
            return Ok(());
        }
        let len = s.blocks as usize * LUN_BLOCK;
        let sb = b.stream_bytes;
        let data = b
            .streams
            .get(s.slot as usize * sb..s.slot as usize * sb + len)
            .ok_or(bug!(IoError))?;
        // `emit` needs the other buffers; the stream buffer is not among them.
        let (lb, sut, comp, pages, item, raw) = (
            &mut b.log,
            &mut *b.sut,
            &mut *b.comp,
            &mut *b.pages,
            &mut *b.item,
            &mut *b.raw,
        );
        let mut parts = Bufs {
            log: crate::pool::state::LogBufs {
                stripe: lb.stripe,
                scratch: lb.scratch,
            },
            streams: &mut [],
            stream_bytes: 0,
            raw_slot: 0,
            comp,
            item,
            raw,
            pages,
            meta: &mut [],
            sut,
        };
        self.emit(&mut parts, s.lun, s.start, data, Writer::Client)?;
        if let Some(st) = self.streams.get_mut(i) {
            st.start += u64::from(st.blocks);
            st.blocks = 0;
        }
        Ok(())
    }

    /// Closes every open extent (flush).
    pub(crate) fn close_all_streams(&mut self, b: &mut Bufs) -> Result<(), IoError> {
        for i in 0..self.streams.len() {
            self.close_stream(b, i)?;
        }
        Ok(())
    }

    /// Closes the extents idle for longer than the configured time.
    pub(crate) fn close_idle_streams(&mut self, b: &mut Bufs) -> Result<(), IoError> {
        let idle = self.cfg.idle_close;
        for i in 0..self.streams.len() {
            let s = *self.streams.get(i).ok_or(bug!(IoError))?;
            if s.blocks > 0 && self.now.saturating_sub(s.last_time) > idle {
                self.close_stream(b, i)?;
            }
        }
        Ok(())
    }

    /// Closes the extents holding any block of `lun` in `lba..lba + blocks`.
    pub(crate) fn close_streams_in(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        lba: u64,
        blocks: u64,
    ) -> Result<(), IoError> {
        for i in 0..self.streams.len() {
            let s = *self.streams.get(i).ok_or(bug!(IoError))?;
            if s.lun == lun
                && s.blocks > 0
                && s.start < lba + blocks
                && lba < s.start + u64::from(s.blocks)
            {
                self.close_stream(b, i)?;
            }
        }
        Ok(())
    }

    /// Compresses (when it pays), checksums and appends an extent of `data` (whole 4 KiB
    /// blocks of `lun` from `lba`), then points the map at it.
    pub(crate) fn emit(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        lba: u64,
        data: &[u8],
        who: Writer,
    ) -> Result<(), IoError> {
        let blocks = data.len() / LUN_BLOCK;
        let raw_item = round_up(HEADER_BYTES + data.len(), ITEM_ALIGN);
        let mut compressed = None;
        if self.conf.layout.compression
            && let Ok(n) = lz4_flex::block::compress_into_with_table(data, b.comp, &mut self.table)
        {
            let item = round_up(HEADER_BYTES + n, ITEM_ALIGN);
            // Keep only if it saves >= 12.5 % of the payload and at least one 512-byte sector.
            if n * 8 <= data.len() * 7 && item + SECTOR <= raw_item {
                compressed = Some(n);
            }
        }
        let flags = if compressed.is_some() {
            FLAG_COMPRESSED
        } else {
            0
        } | if who == Writer::Cleaner {
            FLAG_CLEANER
        } else {
            0
        };
        let hdr = ItemHeader {
            kind: ItemKind::Extent,
            flags,
            lun,
            lba,
            blocks: blocks as u32,
            stored_len: 0,
            raw_len: data.len() as u32,
            payload_crc: 0,
            seq: 0,
            pool: 0,
            addr: 0,
        };
        // An item that does not fit the segment's end would leave padding there: split the
        // extent so its first part fills the segment exactly.
        let item = compressed.map_or(raw_item, |n| round_up(HEADER_BYTES + n, ITEM_ALIGN)) as u64;
        let room = self.segment_room();
        if item > room && blocks > 1 && room >= (HEADER_BYTES + LUN_BLOCK) as u64 {
            let k = (((room as usize) - HEADER_BYTES) / LUN_BLOCK).min(blocks - 1);
            let (first, rest) = data.split_at(k * LUN_BLOCK);
            self.emit(b, lun, lba, first, who)?;
            return self.emit(b, lun, lba + k as u64, rest, who);
        }
        let payload: &[u8] = match compressed {
            Some(n) => b.comp.get(..n).ok_or(bug!(IoError))?,
            None => data,
        };
        let stored_len = payload.len() as u32;
        let ptr = self.append(&mut b.log, b.sut, hdr, payload, true)?;
        match who {
            Writer::Client => {
                self.counters.extent_raw_bytes += data.len() as u64;
                self.counters.extent_stored_bytes += u64::from(stored_len);
                self.counters.extent_log_bytes += u64::from(ptr.len);
            }
            Writer::Cleaner => self.counters.cleaner_log_bytes += u64::from(ptr.len),
        }
        self.forget_decoded(ptr.addr);
        for i in 0..blocks {
            let e = MapEntry {
                unit: ptr.addr / ITEM_ALIGN as u64,
                stored_len,
                index: i as u8,
                blocks: blocks as u8,
                compressed: compressed.is_some(),
                crc: ptr.crc,
                valid: true,
            };
            self.map_set(b, lun, lba + i as u64, e)?;
        }
        Ok(())
    }

    /// Drops a decoded copy of the item at `addr` (its space is being reused).
    pub(crate) fn forget_decoded(&mut self, addr: u64) {
        for c in &mut self.raw_cache {
            if c.is_some_and(|(a, _)| a == addr) {
                *c = None;
            }
        }
    }

    /// Loads the extent `e` points at, decompressed, into a slot of `b.raw`; returns the slot's
    /// byte offset. `lba` is an LBA it must cover. The last few decoded extents are kept, so
    /// interleaved readers of several extents decode each once.
    pub(crate) fn load_extent(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        lba: u64,
        e: MapEntry,
    ) -> Result<usize, IoError> {
        let t = self.touch();
        if let Some(i) = self
            .raw_cache
            .iter()
            .position(|c| c.is_some_and(|(a, _)| a == e.addr()))
        {
            if let Some(Some(c)) = self.raw_cache.get_mut(i) {
                c.1 = t;
            }
            return Ok(i * b.raw_slot);
        }
        let slots = (b.raw.len() / b.raw_slot.max(1)).clamp(1, crate::pool::state::RAW_SLOTS);
        let slot = if self.raw_cache.len() < slots {
            let _ = self.raw_cache.push(None);
            self.raw_cache.len() - 1
        } else {
            self.raw_cache
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.map_or(0, |(_, lru)| lru))
                .map_or(0, |(i, _)| i)
        };
        if let Some(c) = self.raw_cache.get_mut(slot) {
            *c = None;
        }
        let (h, off) = self.load_item(b, e.ptr(), Expect::extent(lun, lba))?;
        let payload = b
            .item
            .get(off..off + h.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let raw_len = h.raw_len as usize;
        if raw_len != h.blocks as usize * LUN_BLOCK
            || raw_len > b.raw_slot
            || h.blocks != u32::from(e.blocks)
        {
            return Err(IoError::Corrupt(crate::format::FormatError::Bounds));
        }
        let at = slot * b.raw_slot;
        let out = b.raw.get_mut(at..at + raw_len).ok_or(bug!(IoError))?;
        if h.flags & FLAG_COMPRESSED != 0 {
            match lz4_flex::block::decompress_into(payload, out) {
                Ok(n) if n == raw_len => {}
                _ => return Err(IoError::Corrupt(crate::format::FormatError::Bounds)),
            }
        } else if payload.len() == raw_len {
            out.copy_from_slice(payload);
        } else {
            return Err(IoError::Corrupt(crate::format::FormatError::Bounds));
        }
        if let Some(c) = self.raw_cache.get_mut(slot) {
            *c = Some((e.addr(), t));
        }
        Ok(at)
    }

    /// Reads one block of `lun` into `out` (4 KiB): from an open extent, else through the map
    /// (zeros if unmapped). LBAs on the unrecoverable list fail.
    pub(crate) fn read_block(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        lba: u64,
        out: &mut [u8],
    ) -> Result<(), IoError> {
        if let Some(s) = self
            .streams
            .iter()
            .find(|s| {
                s.lun == lun
                    && s.blocks > 0
                    && lba >= s.start
                    && lba < s.start + u64::from(s.blocks)
            })
            .copied()
        {
            let off = (lba - s.start) as usize * LUN_BLOCK;
            out.copy_from_slice(
                Self::stream_buf(b, s.slot)?
                    .get(off..off + LUN_BLOCK)
                    .ok_or(bug!(IoError))?,
            );
            return Ok(());
        }
        if self.bad.iter().any(|r| {
            r.lun == lun && lba >= r.lba && lba < r.lba.saturating_add(u64::from(r.blocks))
        }) {
            return Err(IoError::Unrecoverable { lun, lba });
        }
        let e = self.map_get(b, lun, lba)?;
        if !e.valid {
            out.fill(0);
            return Ok(());
        }
        let base = match self.load_extent(b, lun, lba, e) {
            Ok(at) => at,
            Err(IoError::Corrupt(_) | IoError::Device(_)) => {
                return Err(IoError::Unrecoverable { lun, lba });
            }
            Err(x) => return Err(x),
        };
        let off = base + e.index as usize * LUN_BLOCK;
        out.copy_from_slice(b.raw.get(off..off + LUN_BLOCK).ok_or(bug!(IoError))?);
        Ok(())
    }
}
