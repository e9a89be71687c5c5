//! The arena: one caller-provided buffer, cut into the slices each component works in. Its size
//! depends on the configuration (stripe width, extent size, streams, cache pages, segments),
//! never on disk capacity.

use crate::format::{self, HEADER_BYTES, LUN_BLOCK, PAGE_PAYLOAD, SLOT_BYTES};
use crate::log::segments::SegmentTable;
use crate::volume::extent::RAW_SLOTS;

use super::PoolConfig;

/// How the arena is cut; all lengths in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemLayout {
    stripe: usize,
    scratch: usize,
    streams: usize,
    /// One open extent's slot.
    pub stream_bytes: usize,
    comp: usize,
    item: usize,
    raw: usize,
    /// One decoded extent's slot.
    pub raw_slot: usize,
    pages: usize,
    meta: usize,
    sut: usize,
}

/// The arena, cut into named slices.
#[derive(Debug)]
pub(crate) struct Arena<'a> {
    /// The log's open stripe (`stripe_data_bytes`).
    pub stripe: &'a mut [u8],
    /// Array scratch for reconstruction and parity.
    pub scratch: &'a mut [u8],
    /// Open extents, `stream_bytes` each.
    pub streams: &'a mut [u8],
    /// LZ4 output.
    pub comp: &'a mut [u8],
    /// Items read back from the log (and intent-log records).
    pub item: &'a mut [u8],
    /// Decoded extents.
    pub raw: &'a mut [u8],
    /// Cached map pages, `PAGE_PAYLOAD` each.
    pub pages: &'a mut [u8],
    /// Label slots and tables being encoded (roots, the LUN table, the bad list).
    pub meta: &'a mut [u8],
    /// The segment usage table.
    pub sut: &'a mut [u8],
}

impl MemLayout {
    /// Slice sizes for a configuration: `stripe_data` bytes of data per stripe, `disks`
    /// members, `streams` open extents, `pages` cached map pages; the segment table for the
    /// configured maximum of segments (not the disk size).
    pub fn new(
        cfg: &PoolConfig,
        stripe_data: usize,
        disks: usize,
        streams: usize,
        pages: usize,
    ) -> Self {
        let max_extent = cfg.max_extent_blocks as usize * LUN_BLOCK;
        let max_item = max_item_bytes(cfg);
        let sut = SegmentTable::encoded_len(cfg.max_segments);
        MemLayout {
            stripe: stripe_data,
            // Reconstruction works in chunks of scratch / disks; 16 KiB per member is plenty.
            scratch: disks * 16 * 1024,
            streams: streams * max_extent,
            stream_bytes: max_extent,
            comp: lz4_flex::block::get_maximum_output_size(max_extent),
            // The table item can be larger than an extent; reads of it go through `item` too.
            item: max_item.max(HEADER_BYTES + sut) + 2 * 4096,
            raw: RAW_SLOTS.min(streams).max(1) * max_extent.max(PAGE_PAYLOAD),
            raw_slot: max_extent.max(PAGE_PAYLOAD),
            pages: pages * PAGE_PAYLOAD,
            meta: 4 * SLOT_BYTES,
            sut,
        }
    }

    /// Total arena bytes.
    pub const fn total(&self) -> usize {
        self.stripe
            + self.scratch
            + self.streams
            + self.comp
            + self.item
            + self.raw
            + self.pages
            + self.meta
            + self.sut
    }

    /// Cuts `mem` into the slices; `None` when it is shorter than [`MemLayout::total`].
    pub fn split<'a>(&self, mem: &'a mut [u8]) -> Option<Arena<'a>> {
        let (stripe, rest) = mem.split_at_mut_checked(self.stripe)?;
        let (scratch, rest) = rest.split_at_mut_checked(self.scratch)?;
        let (streams, rest) = rest.split_at_mut_checked(self.streams)?;
        let (comp, rest) = rest.split_at_mut_checked(self.comp)?;
        let (item, rest) = rest.split_at_mut_checked(self.item)?;
        let (raw, rest) = rest.split_at_mut_checked(self.raw)?;
        let (pages, rest) = rest.split_at_mut_checked(self.pages)?;
        let (meta, rest) = rest.split_at_mut_checked(self.meta)?;
        let (sut, _) = rest.split_at_mut_checked(self.sut)?;
        Some(Arena {
            stripe,
            scratch,
            streams,
            comp,
            item,
            raw,
            pages,
            meta,
            sut,
        })
    }
}

/// Largest log item, in bytes: a raw extent of the maximum size with its header, rounded.
pub(crate) const fn max_item_bytes(cfg: &PoolConfig) -> usize {
    format::round_up(
        HEADER_BYTES + cfg.max_extent_blocks as usize * LUN_BLOCK,
        format::SECTOR,
    )
}
