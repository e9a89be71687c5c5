//! The volume layer: LUNs ([`luns`]), write coalescing ([`streams`]), extents and their
//! compression ([`extent`]), the forward map ([`map`]) and the read path.
//!
//! An extent is closed — compressed, checksummed and appended to the log — when it reaches the
//! maximum extent size, when its stream has been idle longer than the configured time, on
//! flush, under buffer pressure, and before a TRIM of its blocks. Random writes become
//! one-block extents, packed into the same full stripes.
//!
//! [`Volume`] is what one operation of the volume layer works with: the log below it (a
//! [`LogIo`]), the LUN table, the map cache, the decoded-extent cache and the encoder, each with
//! its arena slice. Streams stay outside: the pool hands an extent's bytes to [`Volume::emit`].

pub(crate) mod extent;
pub(crate) mod luns;
pub(crate) mod map;
#[cfg(any(test, all(feature = "_test", feature = "std")))]
pub mod map_fuzz;
pub(crate) mod streams;

use raidcore_hal::BlockDevice;

use crate::checksum::crc32c_concat_4k;
use crate::error::{IoError, bug};
use crate::format::{
    BlockPtr, FLAG_CLEANER, FLAG_COMPRESSED, HEADER_BYTES, ITEM_ALIGN, ItemHeader, ItemKind,
    LUN_BLOCK, MAX_EXTENT_BYTES, MapEntry, PAGE_PAYLOAD, crc32c, round_up,
};
use crate::log::{Expect, LogIo};
use extent::{Encoder, ExtentCache};
use luns::LunTable;
use map::{MapCache, PageKey, PageStore};

/// Who is appending an extent (for accounting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    Client,
    Cleaner,
}

/// The volume layer's part of one operation (see the module docs).
#[derive(Debug)]
pub(crate) struct Volume<'a, D, const N: usize, const L: usize, const P: usize> {
    pub io: LogIo<'a, D, N>,
    pub luns: &'a mut LunTable<L>,
    pub map: &'a mut MapCache<P>,
    /// Cached map pages, [`PAGE_PAYLOAD`] bytes each.
    pub pages: &'a mut [u8],
    pub extents: &'a mut ExtentCache,
    /// Decoded extents.
    pub raw: &'a mut [u8],
    pub enc: &'a mut Encoder,
    /// LZ4 output.
    pub comp: &'a mut [u8],
}

/// Map pages kept in the log, rooted in the LUN table.
struct LogPages<'x, 'a, D, const N: usize, const L: usize> {
    io: &'x mut LogIo<'a, D, N>,
    luns: &'x mut LunTable<L>,
}

impl<D: BlockDevice, const N: usize, const L: usize> PageStore for LogPages<'_, '_, D, N, L> {
    fn read_page(&mut self, key: PageKey, ptr: BlockPtr, out: &mut [u8]) -> Result<bool, IoError> {
        let (h, off, lost) = self
            .io
            .load_item_copies(ptr, Expect::page(key.lun, key.level, key.index))?;
        if h.stored_len as usize != PAGE_PAYLOAD {
            return Err(IoError::Corrupt(crate::format::FormatError::Bounds));
        }
        let src = self
            .io
            .item
            .get(off..off + PAGE_PAYLOAD)
            .ok_or(bug!(IoError))?;
        out.copy_from_slice(src);
        Ok(lost)
    }

    fn write_page(&mut self, hdr: ItemHeader, payload: &[u8]) -> Result<BlockPtr, IoError> {
        let ptr = if self.io.log.ditto {
            self.io.append_ditto(hdr, payload, true)?
        } else {
            self.io.append(hdr, payload, true)?
        };
        let copies = 1 + u64::from(ptr.ditto.is_some());
        self.io.counters.metadata_log_bytes += copies * u64::from(ptr.len);
        Ok(ptr)
    }

    fn pairs_cost_a_stripe(&self) -> bool {
        if !self.io.log.ditto {
            return false;
        }
        let geo = self.io.array.geometry();
        crate::log::ditto_gap_max(geo, HEADER_BYTES + PAGE_PAYLOAD) >= geo.stripe_data_bytes()
    }

    fn write_page_first(&mut self, hdr: ItemHeader, payload: &[u8]) -> Result<BlockPtr, IoError> {
        let ptr = self.io.append_first(hdr, payload, true)?;
        self.io.counters.metadata_log_bytes += u64::from(ptr.len);
        Ok(ptr)
    }

    fn write_page_copy(
        &mut self,
        first: BlockPtr,
        hdr: ItemHeader,
        payload: &[u8],
    ) -> Result<(), IoError> {
        self.io.counters.metadata_log_bytes += u64::from(first.len);
        self.io.append_copy_at(first, hdr, payload)
    }

    fn release(&mut self, ptr: BlockPtr) {
        for c in ptr.copies() {
            let seg = self.io.log.seg_of(c.addr);
            self.io.segs().account(seg, c.len, false);
        }
    }

    fn entry_changed(&mut self, lun: u16, old: MapEntry, new: MapEntry) -> Result<(), IoError> {
        self.account(lun, old, false)?;
        self.account(lun, new, true)
    }

    fn root(&self, lun: u16) -> Result<BlockPtr, IoError> {
        Ok(self.luns.slot(lun).ok_or(IoError::NoSuchLun)?.map_root)
    }

    fn set_root(&mut self, lun: u16, ptr: BlockPtr) -> Result<(), IoError> {
        self.luns.slot_mut(lun).ok_or(IoError::NoSuchLun)?.map_root = ptr;
        Ok(())
    }

    fn top(&self, lun: u16) -> Result<u8, IoError> {
        self.luns.top_level(lun)
    }

    fn set_top(&mut self, lun: u16, top: u8) -> Result<(), IoError> {
        self.luns.slot_mut(lun).ok_or(IoError::NoSuchLun)?.depth = top + 1;
        Ok(())
    }

    fn size(&self, lun: u16) -> Option<(u64, u8)> {
        let r = self.luns.slot(lun).filter(|r| r.blocks > 0)?;
        Some((r.blocks, r.depth.saturating_sub(1)))
    }
}

impl<D: BlockDevice, const N: usize, const L: usize> LogPages<'_, '_, D, N, L> {
    /// Adds (or removes) one mapped block's share of its item to the space counters. The
    /// segment's live bytes of a new item were added when it was appended, so only removal
    /// touches them.
    fn account(&mut self, lun: u16, e: MapEntry, add: bool) -> Result<(), IoError> {
        if !e.valid {
            return Ok(());
        }
        let log_share = e.share(e.item_bytes() as u32);
        let stored_share = e.share(e.stored_len);
        if !add {
            let seg = self.io.log.seg_of(e.addr());
            self.io.segs().account(seg, log_share, false);
        }
        let c = &mut self.luns.slot_mut(lun).ok_or(IoError::NoSuchLun)?.counters;
        if add {
            c.mapped_blocks += 1;
            c.log_bytes += u64::from(log_share);
            c.stored_bytes += u64::from(stored_share);
        } else {
            c.mapped_blocks = c.mapped_blocks.saturating_sub(1);
            c.log_bytes = c.log_bytes.saturating_sub(u64::from(log_share));
            c.stored_bytes = c.stored_bytes.saturating_sub(u64::from(stored_share));
        }
        Ok(())
    }
}

/// The CRC-32C of each 4 KiB block of `data` into `crcs` (for the map entries of an
/// uncompressed extent), and returns that of the whole, combined from them
/// ([`crc32c_concat_4k`]) so the data is read once. A `data` longer than `crcs` can hold or not
/// of whole blocks is a bug.
fn block_crcs_of(data: &[u8], crcs: &mut [u32]) -> Result<u32, IoError> {
    if data.len() > crcs.len() * LUN_BLOCK || !data.len().is_multiple_of(LUN_BLOCK) {
        return Err(bug!(IoError));
    }
    // The CRC of no bytes is 0, and appending a block to it gives the block's own.
    let mut whole = 0;
    for (c, block) in crcs.iter_mut().zip(data.chunks_exact(LUN_BLOCK)) {
        *c = crc32c(block);
        whole = crc32c_concat_4k(whole, *c);
    }
    Ok(whole)
}

impl<'a, D: BlockDevice, const N: usize, const L: usize, const P: usize> Volume<'a, D, N, L, P> {
    /// The map cache, its page store and its slice, for one call.
    fn parts(&mut self) -> (&mut MapCache<P>, LogPages<'_, 'a, D, N, L>, &mut [u8]) {
        (
            &mut *self.map,
            LogPages {
                io: &mut self.io,
                luns: &mut *self.luns,
            },
            &mut *self.pages,
        )
    }

    /// The map entry of `lun`'s block `lba`.
    pub fn map_get(&mut self, lun: u16, lba: u64) -> Result<MapEntry, IoError> {
        let (map, mut st, pages) = self.parts();
        map.map_get(&mut st, pages, lun, lba)
    }

    /// Sets the map entry of `lun`'s block `lba` (with its space accounting); returns the old.
    pub fn map_set(&mut self, lun: u16, lba: u64, e: MapEntry) -> Result<MapEntry, IoError> {
        let (map, mut st, pages) = self.parts();
        map.map_set(&mut st, pages, lun, lba, e)
    }

    /// Unmaps `lun`'s blocks `lba..lba + blocks`.
    pub fn unmap_range(&mut self, lun: u16, lba: u64, blocks: u64) -> Result<(), IoError> {
        let (map, mut st, pages) = self.parts();
        map.unmap_range(&mut st, pages, lun, lba, blocks)
    }

    /// Releases everything `lun` maps and its map pages (LUN deletion).
    pub fn release_lun_map(&mut self, lun: u16) -> Result<(), IoError> {
        let blocks = self.luns.slot(lun).ok_or(IoError::NoSuchLun)?.blocks;
        let (map, mut st, pages) = self.parts();
        map.release_lun_map(&mut st, pages, lun, blocks)
    }

    /// Map pages of `lun` that cannot be read ([`MapCache::lost_pages`]).
    pub fn lost_map_pages(&mut self, lun: u16) -> Result<u64, IoError> {
        let (map, mut st, pages) = self.parts();
        map.lost_pages(&mut st, pages, lun)
    }

    /// Gives `lun`'s map the shape of `blocks` blocks under top level `top`
    /// ([`MapCache::resize`]; the blocks past the new end are unmapped already).
    pub fn resize_map(&mut self, lun: u16, blocks: u64, top: u8) -> Result<(), IoError> {
        let (map, mut st, pages) = self.parts();
        map.resize(&mut st, pages, lun, blocks, top)
    }

    /// See [`MapCache::recopy_all`].
    pub fn recopy(&mut self) -> Result<(), IoError> {
        let (map, mut st, pages) = self.parts();
        map.recopy_all(&mut st, pages)
    }

    /// See [`MapCache::write_firsts`].
    pub fn write_page_firsts(
        &mut self,
        order: &mut heapless::Vec<usize, P>,
    ) -> Result<(), IoError> {
        let (map, mut st, pages) = self.parts();
        map.write_firsts(&mut st, pages, order)
    }

    /// See [`MapCache::note_uncopied`].
    pub fn note_uncopied(&mut self, slots: &[usize]) {
        self.map.note_uncopied(slots);
    }

    /// See [`MapCache::write_copies`].
    pub fn write_page_copies(&mut self, order: &[usize]) -> Result<(), IoError> {
        let (map, mut st, pages) = self.parts();
        map.write_copies(&mut st, pages, order)
    }

    /// The on-disk pointer of map page `(lun, level, index)`, if it exists.
    pub fn page_ptr(
        &mut self,
        lun: u16,
        level: u8,
        index: u64,
    ) -> Result<Option<BlockPtr>, IoError> {
        let (map, mut st, pages) = self.parts();
        map.page_ptr(&mut st, pages, lun, level, index)
    }

    /// Cached map pages with an on-disk copy in log addresses `lo..hi` are marked dirty, so
    /// that the next checkpoint writes them anew from memory (their copy there is lost).
    /// Returns how many.
    pub fn rewrite_pages_in(&mut self, lo: u64, hi: u64) -> usize {
        self.map.dirty_copies_in(lo, hi)
    }

    /// Loads page `key` into the cache and marks it dirty (the cleaner moves it).
    pub fn dirty_page(&mut self, key: PageKey) -> Result<(), IoError> {
        let (map, mut st, pages) = self.parts();
        let slot = map.load_page(&mut st, pages, key)?;
        map.mark_dirty(slot);
        Ok(())
    }

    /// Compresses (when it pays), checksums and appends `data` (whole 4 KiB blocks of `lun`
    /// from `lba`) as extents, then points the map at them. With compression on, the data is
    /// compressed in units of the encoder's unit; each unit that pays is an extent of its own,
    /// and each run of units that do not stays one raw extent.
    pub fn emit(&mut self, lun: u16, lba: u64, data: &[u8], who: Writer) -> Result<(), IoError> {
        let unit = self.enc.unit();
        if !self.enc.compressing() {
            return self.append_extent(lun, lba, data, None, who);
        }
        // Bytes of `data` from `raw` up to the unit at hand did not compress.
        let mut raw = 0;
        let mut at = 0;
        while at < data.len() {
            let end = (at + unit).min(data.len());
            let piece = data.get(at..end).ok_or(bug!(IoError))?;
            if let Some(n) = self.enc.compress(piece, self.comp) {
                if raw < at {
                    // The run goes first, in LBA order (a raw append leaves `comp` alone).
                    let run = data.get(raw..at).ok_or(bug!(IoError))?;
                    self.append_extent(lun, lba + (raw / LUN_BLOCK) as u64, run, None, who)?;
                }
                let l = lba + (at / LUN_BLOCK) as u64;
                self.append_extent(lun, l, piece, Some(n), who)?;
                raw = end;
            }
            at = end;
        }
        match data.get(raw..) {
            Some(run) if !run.is_empty() => {
                let l = lba + (raw / LUN_BLOCK) as u64;
                self.append_extent(lun, l, run, None, who)
            }
            _ => Ok(()),
        }
    }

    /// Appends one extent of `data`, stored as the first `compressed` bytes of `comp` when
    /// given (else raw), and points the map at it. An item that does not fit the segment's end
    /// is split so its first part fills the segment exactly (each part encoded again).
    fn append_extent(
        &mut self,
        lun: u16,
        lba: u64,
        data: &[u8],
        compressed: Option<usize>,
        who: Writer,
    ) -> Result<(), IoError> {
        let blocks = data.len() / LUN_BLOCK;
        let raw_item = round_up(HEADER_BYTES + data.len(), ITEM_ALIGN);
        let flags = if compressed.is_some() {
            FLAG_COMPRESSED
        } else {
            0
        } | if who == Writer::Cleaner {
            FLAG_CLEANER
        } else {
            0
        };
        // An item that does not fit the segment's end would leave padding there: split the
        // extent so its first part fills the segment exactly.
        let item = compressed.map_or(raw_item, |n| round_up(HEADER_BYTES + n, ITEM_ALIGN)) as u64;
        let room = self.io.log.segment_room();
        if item > room && blocks > 1 && room >= (HEADER_BYTES + LUN_BLOCK) as u64 {
            let k = (((room as usize) - HEADER_BYTES) / LUN_BLOCK).min(blocks - 1);
            let (first, rest) = data.split_at(k * LUN_BLOCK);
            self.emit_whole(lun, lba, first, compressed.is_some(), who)?;
            return self.emit_whole(lun, lba + k as u64, rest, compressed.is_some(), who);
        }
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
        let payload: &[u8] = match compressed {
            Some(n) => self.comp.get(..n).ok_or(bug!(IoError))?,
            None => data,
        };
        let stored_len = payload.len() as u32;
        let mut block_crcs = [0u32; MAX_EXTENT_BYTES / LUN_BLOCK];
        let ptr = if compressed.is_none() {
            let whole = block_crcs_of(data, &mut block_crcs)?;
            self.io.append_with_crc(hdr, payload, whole, true)?
        } else {
            self.io.append(hdr, payload, true)?
        };
        let c = &mut *self.io.counters;
        match who {
            Writer::Client => {
                c.extent_raw_bytes += data.len() as u64;
                c.extent_stored_bytes += u64::from(stored_len);
                c.extent_log_bytes += u64::from(ptr.len);
            }
            Writer::Cleaner => c.cleaner_log_bytes += u64::from(ptr.len),
        }
        self.extents.sync(self.io.log.epoch());
        self.extents.forget(ptr.addr);
        let raw = compressed.is_none();
        for (i, &block_crc) in block_crcs.iter().take(blocks).enumerate() {
            let e = MapEntry {
                unit: ptr.addr / ITEM_ALIGN as u64,
                stored_len,
                index: i as u8,
                blocks: blocks as u8,
                compressed: !raw,
                crc: if raw { block_crc } else { ptr.crc },
                block_crc: raw,
                ditto: None,
                valid: true,
            };
            self.map_set(lun, lba + i as u64, e)?;
        }
        Ok(())
    }

    /// One part of an extent split at a segment's end: compressed again if the whole was
    /// (kept compressed only where that still pays), else raw.
    fn emit_whole(
        &mut self,
        lun: u16,
        lba: u64,
        data: &[u8],
        compress: bool,
        who: Writer,
    ) -> Result<(), IoError> {
        let n = if compress {
            self.enc.compress(data, self.comp)
        } else {
            None
        };
        self.append_extent(lun, lba, data, n, who)
    }

    /// Loads the extent `e` points at, decompressed, into a slot of `raw`; returns the slot's
    /// byte offset. `lba` is an LBA it must cover (the block `e` maps: an entry holding its
    /// block's CRC is checked against that block too, which tells the current item from an
    /// older one at the same address).
    pub fn load_extent(&mut self, lun: u16, lba: u64, e: MapEntry) -> Result<usize, IoError> {
        self.extents.sync(self.io.log.epoch());
        let t = self.extents.touch();
        if let Some(i) = self.extents.lookup(e.addr(), t) {
            return Ok(self.extents.range(i)?.start);
        }
        let slot_bytes = self.extents.slot_bytes();
        let slot = self.extents.claim(self.raw.len() / slot_bytes.max(1));
        let (h, off) = self.io.load_item(e.ptr(), Expect::entry(lun, lba, &e))?;
        let raw_len = h.raw_len as usize;
        if raw_len != h.blocks as usize * LUN_BLOCK
            || raw_len > slot_bytes
            || h.blocks != u32::from(e.blocks)
        {
            return Err(IoError::Corrupt(crate::format::FormatError::Bounds));
        }
        let payload = self
            .io
            .item
            .get(off..off + h.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let at = self.extents.range(slot)?.start;
        let out = self.raw.get_mut(at..at + raw_len).ok_or(bug!(IoError))?;
        extent::decode(&h, payload, out)?;
        self.extents.fill(slot, e.addr(), t);
        Ok(at)
    }

    /// Reads `lun`'s blocks from `lba` into `out` (whole 4 KiB blocks, at least one), as far
    /// as they lie in order in the extent that holds `lba` (or just `lba` when it is unmapped:
    /// zeros); returns how many blocks it filled. Every block served is checked against the
    /// CRC its map entry holds. A block of an uncompressed extent is read alone (with the
    /// rest of the run), not its whole extent, unless the run starts the extent, as a
    /// sequential reader's does: then the extent is decoded into the cache for the reads that
    /// follow. Compressed extents decode only whole.
    ///
    /// # Errors
    /// [`IoError::Unrecoverable`] for `lba` when it is on the lost list or no copy or
    /// reconstruction of it checks; others as the map and the log return them.
    pub fn read_run(&mut self, lun: u16, lba: u64, out: &mut [u8]) -> Result<usize, IoError> {
        let lost = IoError::Unrecoverable { lun, lba };
        if self.luns.is_bad(lun, lba) {
            return Err(lost);
        }
        let e = self.map_get(lun, lba)?;
        if !e.valid {
            out.get_mut(..LUN_BLOCK).ok_or(bug!(IoError))?.fill(0);
            return Ok(1);
        }
        let mut crcs: heapless::Vec<u32, 32> = heapless::Vec::new();
        self.run_crcs(lun, lba, e, out.len() / LUN_BLOCK, &mut crcs)?;
        let per_block = e.block_crc && !e.compressed;
        let cached = self.extents.holds(e.addr(), self.io.log.epoch());
        if cached || !per_block || e.index == 0 {
            match self.load_extent(lun, lba, e) {
                Ok(base) => {
                    let from = base + usize::from(e.index) * LUN_BLOCK;
                    let n = self.serve(from, &crcs, per_block, out)?;
                    if n > 0 {
                        return Ok(n);
                    }
                }
                Err(IoError::Corrupt(_) | IoError::Device(_)) if per_block => {}
                Err(IoError::Corrupt(_) | IoError::Device(_)) => return Err(lost),
                Err(x) => return Err(x),
            }
        }
        // The run's blocks alone; where they do not all check, the first block alone.
        let (n, at) = match self.io.load_blocks(e.addr(), e.index, &crcs) {
            Ok(at) => (crcs.len(), at),
            Err(IoError::Corrupt(_) | IoError::Device(_)) if crcs.len() > 1 => {
                match self
                    .io
                    .load_blocks(e.addr(), e.index, crcs.get(..1).unwrap_or(&[]))
                {
                    Ok(at) => (1, at),
                    Err(IoError::Corrupt(_) | IoError::Device(_)) => return Err(lost),
                    Err(x) => return Err(x),
                }
            }
            Err(IoError::Corrupt(_) | IoError::Device(_)) => return Err(lost),
            Err(x) => return Err(x),
        };
        let src = self
            .io
            .item
            .get(at..at + n * LUN_BLOCK)
            .ok_or(bug!(IoError))?;
        out.get_mut(..n * LUN_BLOCK)
            .ok_or(bug!(IoError))?
            .copy_from_slice(src);
        Ok(n)
    }

    /// The CRCs of the run of `lun`'s blocks from `lba` (mapped by `e`) that lie in order in
    /// the same extent, at most `max` blocks and none on the lost list, into `crcs`.
    fn run_crcs(
        &mut self,
        lun: u16,
        lba: u64,
        e: MapEntry,
        max: usize,
        crcs: &mut heapless::Vec<u32, 32>,
    ) -> Result<(), IoError> {
        crcs.push(e.crc).map_err(|_| bug!(IoError))?;
        let left = usize::from(e.blocks).saturating_sub(usize::from(e.index));
        for k in 1..max.min(left).min(32) {
            let b = lba + k as u64;
            if self.luns.is_bad(lun, b) {
                break;
            }
            let x = self.map_get(lun, b)?;
            if !x.valid
                || x.addr() != e.addr()
                || usize::from(x.index) != usize::from(e.index) + k
                || x.block_crc != e.block_crc
            {
                break;
            }
            crcs.push(x.crc).map_err(|_| bug!(IoError))?;
        }
        Ok(())
    }

    /// Copies the run's blocks from the decoded extent at `raw[from..]` into `out`, checking
    /// each against its block CRC (`per_block`), up to the first that does not check (a
    /// decoded copy of an older item at the same address); returns the blocks copied.
    fn serve(
        &mut self,
        from: usize,
        crcs: &[u32],
        per_block: bool,
        out: &mut [u8],
    ) -> Result<usize, IoError> {
        for (k, &crc) in crcs.iter().enumerate() {
            let at = from + k * LUN_BLOCK;
            let src = self.raw.get(at..at + LUN_BLOCK).ok_or(bug!(IoError))?;
            if per_block && crc32c(src) != crc {
                return Ok(k);
            }
            let dst = out.get_mut(k * LUN_BLOCK..(k + 1) * LUN_BLOCK);
            dst.ok_or(bug!(IoError))?.copy_from_slice(src);
        }
        Ok(crcs.len())
    }

    /// Whether `lun`'s block `lba`, mapped by `e`, reads back checking from the members (a
    /// copy or reconstruction matches the CRC its entry holds; a bad copy met is healed). An
    /// entry holding its block's CRC is read alone; any other needs its whole item.
    pub fn block_checks(&mut self, lun: u16, lba: u64, e: MapEntry) -> Result<bool, IoError> {
        let r = if e.block_crc && !e.compressed {
            self.io.load_blocks(e.addr(), e.index, &[e.crc]).map(|_| ())
        } else {
            self.load_extent(lun, lba, e).map(|_| ())
        };
        match r {
            Ok(()) => Ok(true),
            Err(IoError::Corrupt(_) | IoError::Device(_)) => Ok(false),
            Err(x) => Err(x),
        }
    }
}
