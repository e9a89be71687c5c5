//! Extents: how a run of client blocks is stored (LZ4 block format per extent via `lz4_flex`,
//! kept only where it saves at least 12.5 % of the payload and at least one 512-byte sector of
//! the item) and decoded again, and a small cache of decoded extents, so interleaved readers of
//! several extents decode each once.

use heapless::Vec;

use crate::error::{IoError, bug};
use crate::format::{
    FLAG_COMPRESSED, FormatError, HEADER_BYTES, ITEM_ALIGN, ItemHeader, LUN_BLOCK, SECTOR, round_up,
};

/// Bytes of each [`PROBE_STRIDE`] of a unit in the sample LZ4 tries first (see
/// [`Encoder::compress`]).
pub(crate) const PROBE_PIECE: usize = 64;
/// See [`PROBE_PIECE`].
pub(crate) const PROBE_STRIDE: usize = 512;

/// Decoded extents kept for reads (at most; fewer with fewer streams).
pub(crate) const RAW_SLOTS: usize = 8;

/// The extent encoder. LZ4's hash table is not kept here but made on the stack by each call
/// (`lz4_flex::block::compress_into`: 8 KiB for inputs under 64 KiB, 16 KiB above): a kept
/// table is cleared before each use anyway, so it saved no work, and it made the pool value
/// 16 KiB larger, which every move of the pool (import returns it through three results)
/// paid in stack.
#[derive(Debug)]
pub(crate) struct Encoder {
    compression: bool,
    /// The last unit compressed (the next is tried whole, without a sample first).
    last_kept: bool,
    /// Bytes of the unit extents are compressed in (the pool's `compress_unit_blocks`).
    unit: usize,
}

impl Encoder {
    /// An encoder for extents of at most `max_extent_bytes`, compressed in units of
    /// `unit_bytes` (a multiple of 4 KiB); `compression` off stores every extent raw.
    pub fn new(compression: bool, max_extent_bytes: usize, unit_bytes: usize) -> Self {
        Encoder {
            compression,
            last_kept: false,
            unit: unit_bytes.clamp(LUN_BLOCK, max_extent_bytes.max(LUN_BLOCK)),
        }
    }

    /// Bytes of the unit an extent is compressed in (the whole extent when it is smaller).
    pub const fn unit(&self) -> usize {
        self.unit
    }

    /// Whether extents are compressed at all.
    pub const fn compressing(&self) -> bool {
        self.compression
    }

    /// Compresses `data` into `out` when that pays; returns the compressed length.
    ///
    /// Early abort: after a unit that was stored raw, LZ4 first compresses a sample of the
    /// next, [`PROBE_PIECE`] bytes of every [`PROBE_STRIDE`] gathered into `out` (an eighth of
    /// it, spread so that a block half full of zeros or text still shows), and the unit is
    /// stored raw without trying it whole when the sample saves nothing (encrypted, already
    /// compressed or random data). LZ4 on such a unit cost as much as the rest of the write;
    /// the sample costs an eighth of that. After a unit that compressed there is no sample, so
    /// compressible data pays nothing for it (the figures are in docs/figures.md).
    pub fn compress(&mut self, data: &[u8], out: &mut [u8]) -> Option<usize> {
        if !self.compression {
            return None;
        }
        let kept = self.compress_unit(data, out);
        self.last_kept = kept.is_some();
        kept
    }

    /// [`Encoder::compress`] without the bookkeeping.
    fn compress_unit(&mut self, data: &[u8], out: &mut [u8]) -> Option<usize> {
        let sample = data.len() / PROBE_STRIDE * PROBE_PIECE;
        if sample > 0 && !self.last_kept {
            let (probe, rest) = out.split_at_mut_checked(sample)?;
            for (k, dst) in probe.chunks_exact_mut(PROBE_PIECE).enumerate() {
                let at = k * PROBE_STRIDE;
                dst.copy_from_slice(data.get(at..at + PROBE_PIECE)?);
            }
            if lz4(probe, rest)? >= sample {
                return None;
            }
        }
        let n = lz4(data, out)?;
        let raw_item = round_up(HEADER_BYTES + data.len(), ITEM_ALIGN);
        let item = round_up(HEADER_BYTES + n, ITEM_ALIGN);
        // Keep only if it saves >= 12.5 % of the payload and at least one 512-byte sector.
        (n * 8 <= data.len() * 7 && item + SECTOR <= raw_item).then_some(n)
    }
}

/// LZ4 block compression of `input` into `out`; `None` when `out` is too small. One copy of
/// `lz4_flex`'s inlined body for both of [`Encoder::compress`]'s calls (flash on Cortex-M).
#[inline(never)]
fn lz4(input: &[u8], out: &mut [u8]) -> Option<usize> {
    lz4_flex::block::compress_into(input, out).ok()
}

/// Decodes the extent `h` whose checked payload is `payload` into `out` (its raw length),
/// refusing headers whose lengths disagree.
pub(crate) fn decode(h: &ItemHeader, payload: &[u8], out: &mut [u8]) -> Result<(), IoError> {
    let raw_len = h.raw_len as usize;
    if raw_len != h.blocks as usize * LUN_BLOCK || out.len() != raw_len {
        return Err(IoError::Corrupt(FormatError::Bounds));
    }
    if h.flags & FLAG_COMPRESSED != 0 {
        match lz4_flex::block::decompress_into(payload, out) {
            Ok(n) if n == raw_len => Ok(()),
            _ => Err(IoError::Corrupt(FormatError::Bounds)),
        }
    } else if payload.len() == raw_len {
        out.copy_from_slice(payload);
        Ok(())
    } else {
        Err(IoError::Corrupt(FormatError::Bounds))
    }
}

/// Which decoded extents the `raw` arena slice holds: (log address, last use) per slot. An
/// entry made before the log last entered a segment may describe an item whose space was
/// reused; the cache forgets everything then.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExtentCache {
    slots: Vec<Option<(u64, u64)>, RAW_SLOTS>,
    tick: u64,
    /// The log's segment epoch the entries belong to.
    epoch: u64,
    /// Bytes of one slot.
    slot_bytes: usize,
}

impl ExtentCache {
    /// A cache of slots of `slot_bytes` each.
    pub fn new(slot_bytes: usize) -> Self {
        ExtentCache {
            slot_bytes,
            ..ExtentCache::default()
        }
    }

    /// Bytes of one slot.
    pub const fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Forgets everything if the log entered a segment since the entries were made.
    pub fn sync(&mut self, epoch: u64) {
        if epoch != self.epoch {
            self.slots.clear();
            self.epoch = epoch;
        }
    }

    /// Whether a slot holds the extent at `addr` (after [`Self::sync`] with `epoch`).
    pub fn holds(&mut self, addr: u64, epoch: u64) -> bool {
        self.sync(epoch);
        self.slots.iter().any(|c| c.is_some_and(|(a, _)| a == addr))
    }

    /// Starts a lookup: the use time it stamps.
    pub fn touch(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The slot holding the extent at `addr`, stamped with `t`.
    pub fn lookup(&mut self, addr: u64, t: u64) -> Option<usize> {
        let i = self
            .slots
            .iter()
            .position(|c| c.is_some_and(|(a, _)| a == addr))?;
        if let Some(Some(c)) = self.slots.get_mut(i) {
            c.1 = t;
        }
        Some(i)
    }

    /// A slot to decode into (a new one while fewer than `total` exist, else the least recently
    /// used), emptied until [`Self::fill`].
    pub fn claim(&mut self, total: usize) -> usize {
        let slot = if self.slots.len() < total.clamp(1, RAW_SLOTS) {
            let _ = self.slots.push(None);
            self.slots.len() - 1
        } else {
            self.slots
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.map_or(0, |(_, lru)| lru))
                .map_or(0, |(i, _)| i)
        };
        if let Some(c) = self.slots.get_mut(slot) {
            *c = None;
        }
        slot
    }

    /// Slot `slot` now holds the extent at `addr`, used at `t`.
    pub fn fill(&mut self, slot: usize, addr: u64, t: u64) {
        if let Some(c) = self.slots.get_mut(slot) {
            *c = Some((addr, t));
        }
    }

    /// Drops a decoded copy of the item at `addr` (its space is being reused).
    pub fn forget(&mut self, addr: u64) {
        for c in &mut self.slots {
            if c.is_some_and(|(a, _)| a == addr) {
                *c = None;
            }
        }
    }

    /// Slot `slot`'s bytes in `raw`.
    pub fn range(&self, slot: usize) -> Result<core::ops::Range<usize>, IoError> {
        let at = slot.checked_mul(self.slot_bytes).ok_or(bug!(IoError))?;
        Ok(at..at + self.slot_bytes)
    }
}
