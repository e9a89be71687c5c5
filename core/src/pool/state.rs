//! The pool's state and its memory: everything the log, the volume layer and the health code
//! share. Buffers live in one caller-provided arena, carved up by [`MemLayout`]; bookkeeping
//! lives in fixed-capacity `heapless` collections sized by the pool's const generics.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use crate::format::{
    self, BadRange, BlockPtr, Counters, FANOUT, HEADER_BYTES, LUN_BLOCK, LunRecord, PAGE_PAYLOAD,
    PoolLayout, SECTOR, SEG_ENTRY_BYTES, SLOT_BYTES, SegEntry, SegState,
};
use crate::raid::{Array, Geometry};

use super::PoolConfig;

/// Decoded extents kept for reads (at most; fewer with fewer streams).
pub(crate) const RAW_SLOTS: usize = 8;

/// How the arena is cut into buffers; all offsets and lengths in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemLayout {
    pub stripe: usize,
    pub scratch: usize,
    pub streams: usize,
    pub stream_bytes: usize,
    pub comp: usize,
    pub item: usize,
    pub raw: usize,
    pub raw_slot: usize,
    pub pages: usize,
    pub meta: usize,
    pub sut: usize,
}

impl MemLayout {
    /// Buffer sizes for a configuration: `stripe_data` bytes of data per stripe, `disks` members,
    /// `block` member block bytes, `streams` open extents, `pages` cached map pages, `segments`
    /// segment table entries (the configured maximum, not the disk size).
    pub fn new(
        cfg: &PoolConfig,
        stripe_data: usize,
        disks: usize,
        streams: usize,
        pages: usize,
    ) -> Self {
        let max_extent = cfg.max_extent_blocks as usize * LUN_BLOCK;
        let max_item = max_item_bytes(cfg);
        let segs = cfg.max_segments as usize;
        // The table item can be larger than an extent; reads of it go through `item` too.
        let sut = format::round_up(segs * SEG_ENTRY_BYTES, SECTOR);
        MemLayout {
            stripe: stripe_data,
            // Reconstruction works in chunks of scratch / disks; 16 KiB per member is plenty.
            scratch: disks * 16 * 1024,
            streams,
            stream_bytes: max_extent,
            comp: lz4_flex::block::get_maximum_output_size(max_extent),
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
            + self.streams * self.stream_bytes
            + self.comp
            + self.item
            + self.raw
            + self.pages
            + self.meta
            + self.sut
    }

    /// Cuts `mem` into the buffers. `mem` must be at least [`MemLayout::total`] bytes.
    pub fn split<'a>(&self, mem: &'a mut [u8]) -> Option<Bufs<'a>> {
        let (stripe, rest) = mem.split_at_mut_checked(self.stripe)?;
        let (scratch, rest) = rest.split_at_mut_checked(self.scratch)?;
        let (streams, rest) = rest.split_at_mut_checked(self.streams * self.stream_bytes)?;
        let (comp, rest) = rest.split_at_mut_checked(self.comp)?;
        let (item, rest) = rest.split_at_mut_checked(self.item)?;
        let (raw, rest) = rest.split_at_mut_checked(self.raw)?;
        let (pages, rest) = rest.split_at_mut_checked(self.pages)?;
        let (meta, rest) = rest.split_at_mut_checked(self.meta)?;
        let (sut, _) = rest.split_at_mut_checked(self.sut)?;
        Some(Bufs {
            log: LogBufs { stripe, scratch },
            streams,
            stream_bytes: self.stream_bytes,
            raw_slot: self.raw_slot,
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
        SECTOR,
    )
}

/// The stripe buffer and the array scratch, which the log needs together.
pub(crate) struct LogBufs<'a> {
    /// The open stripe's data (`stripe_data_bytes`).
    pub stripe: &'a mut [u8],
    /// Array scratch for reconstruction and parity.
    pub scratch: &'a mut [u8],
}

/// The arena, cut into named buffers.
pub(crate) struct Bufs<'a> {
    pub log: LogBufs<'a>,
    /// Open extent buffers, `stream_bytes` each.
    pub streams: &'a mut [u8],
    pub stream_bytes: usize,
    /// Bytes of one decoded-extent slot in `raw`.
    pub raw_slot: usize,
    /// LZ4 output.
    pub comp: &'a mut [u8],
    /// Items read back from the log (and intent-log records).
    pub item: &'a mut [u8],
    /// Decompressed extents.
    pub raw: &'a mut [u8],
    /// Cached map pages, `PAGE_PAYLOAD` each.
    pub pages: &'a mut [u8],
    /// Label slots being encoded or read (superblocks, roots, tables).
    pub meta: &'a mut [u8],
    /// The segment usage table, `SEG_ENTRY_BYTES` per segment.
    pub sut: &'a mut [u8],
}

impl Bufs<'_> {
    pub fn seg(&self, i: u32) -> SegEntry {
        SegEntry::decode(self.sut, i as usize * SEG_ENTRY_BYTES)
    }
    pub fn set_seg(&mut self, i: u32, e: SegEntry) {
        e.encode(self.sut, i as usize * SEG_ENTRY_BYTES);
    }
}

/// Adds `bytes` to (or with `add == false` removes them from) a segment's live count.
pub(crate) fn seg_account(sut: &mut [u8], seg: u32, bytes: u32, add: bool) {
    let at = seg as usize * SEG_ENTRY_BYTES;
    let mut e = SegEntry::decode(sut, at);
    e.live = if add {
        e.live.saturating_add(bytes)
    } else {
        e.live.saturating_sub(bytes)
    };
    e.encode(sut, at);
}

/// The key of a map page: LUN, tree level (0 = leaves) and index within the level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageKey {
    pub lun: u16,
    pub level: u8,
    pub index: u64,
}

/// Bookkeeping of one cache slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageMeta {
    pub key: PageKey,
    /// Where the page is on disk (none if never written).
    pub ptr: BlockPtr,
    pub dirty: bool,
    /// Cached children: a page with children cannot be evicted (every cached page's ancestors
    /// stay cached, so a written child can always update its parent).
    pub children: u16,
    pub lru: u64,
}

/// An open extent: a run of consecutive blocks of one LUN being coalesced in slot `slot`'s buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stream {
    pub lun: u16,
    /// First LBA of the buffered run.
    pub start: u64,
    /// Blocks buffered (0: the stream is remembered but empty).
    pub blocks: u32,
    /// Buffer slot.
    pub slot: u16,
    pub last_touch: u64,
    /// Virtual time of the last write (for idle closing).
    pub last_time: u64,
}

/// A LUN in memory.
#[derive(Debug, Clone)]
pub(crate) struct Lun {
    pub rec: LunRecord,
}

impl Lun {
    /// Height of the map tree for a LUN of `blocks` blocks.
    pub fn depth_for(blocks: u64) -> u8 {
        let mut d = 1u8;
        let mut cover = FANOUT as u64;
        while cover < blocks {
            cover = cover.saturating_mul(FANOUT as u64);
            d += 1;
        }
        d
    }
}

/// Where the log is.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogState {
    /// Log address of the open stripe's first byte.
    pub stripe_addr: u64,
    /// Sequence number the open stripe gets when written.
    pub stripe_seq: u64,
    /// Bytes of the open stripe filled.
    pub fill: usize,
    /// Sequence number of the next item.
    pub next_item_seq: u64,
    /// Bytes of the open stripe already copied to the intent log.
    pub zil_done: usize,
    /// Intent-log records written for the open stripe.
    pub zil_records: u32,
    /// Stripes written since the last member flush.
    pub unflushed_stripes: u32,
    /// Segments the log may use until the next checkpoint; `reserved[res_idx]` is current.
    pub reserved: Vec<u32, 16>,
    pub res_idx: usize,
    /// Map pages written since the last checkpoint.
    pub pages_since_checkpoint: u64,
    /// True while replaying the log at import (appends must not happen before the end is known).
    pub replaying: bool,
}

impl LogState {
    /// Log address where the next item goes.
    pub const fn head(&self) -> u64 {
        self.stripe_addr + self.fill as u64
    }
}

/// Intent-log ring state of one member.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ZilRing {
    /// Next slot to write (0-based within the ring).
    pub head: u32,
    /// Slots holding records still needed (ending at `head`).
    pub used: u32,
}

/// A hot spare.
#[derive(Debug)]
pub(crate) struct Spare<D> {
    pub disk: D,
    pub guid: u64,
}

/// Membership as the superblocks record it.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub pool_uuid: [u8; 16],
    pub pool_tag: u64,
    pub generation: u64,
    pub geometry: Geometry,
    pub layout: PoolLayout,
    pub member_guids: Vec<u64, 32>,
    pub next_guid: u64,
}

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
}

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

/// Everything but the arena.
pub(crate) struct State<D, const N: usize, const L: usize, const P: usize, const S: usize> {
    pub array: Array<D, N>,
    pub spares: Vec<Spare<D>, N>,
    pub cfg: PoolConfig,
    pub mem: MemLayout,
    pub conf: Config,
    pub log: LogState,
    pub zil: [ZilRing; 32],
    pub zil_record_seq: u64,
    pub zil_rr: usize,
    /// Sequence number of the next flush mark.
    pub mark_seq: u64,
    /// `(stripe_seq, durable bytes)` the last flush mark written recorded (none written since
    /// this pool was opened: `None`).
    pub marked: Option<(u64, u32)>,
    /// During import: the newest flush mark found ([`State::zil_scan`]).
    pub durable_mark: Option<format::FlushMark>,
    pub root_gen: u64,
    pub luns: Vec<Lun, L>,
    /// Durable pointers of the tables the last checkpoint wrote (dead once the next is written).
    pub table_ptrs: [BlockPtr; 3],
    pub cache: Vec<Option<PageMeta>, P>,
    pub streams: Vec<Stream, S>,
    pub counters: Counters,
    pub bad: Vec<BadRange, { format::BAD_LIST_MAX }>,
    /// Virtual time given by the caller (nanoseconds or any unit, monotonic).
    pub now: u64,
    pub tick: u64,
    /// Decoded extents in `Bufs::raw`: (log address, last use) per slot.
    pub raw_cache: Vec<Option<(u64, u64)>, RAW_SLOTS>,
    pub rebuild: Option<Rebuild>,
    pub scrub: Option<Scrub>,
    pub table: lz4_flex::block::CompressTable,
    /// Segments the log entered whose table entries must become `Used` (applied when the
    /// table is at hand), each with the sequence number of its first item (0: keep the one
    /// recorded).
    pub mark_used: heapless::Deque<(u32, u64), 4>,
    /// Verified intent-log records of the stripe open at the last crash (import only).
    pub zil_refs: Vec<crate::log::zil::ZilRef, { crate::log::zil::ZIL_REFS }>,
    /// Membership states as the superblocks record them.
    pub recorded_states: Vec<crate::raid::DiskState, 32>,
    pub faulted: bool,
    /// Set during import when an item needed reconstruction or intent-log patches to check.
    pub recovery_healed: bool,
    /// Client bytes written since the pool was opened (for write amplification).
    pub session_client_bytes: u64,
    /// Segments the cleaner could not empty (damaged beyond repair).
    pub clean_skip: Vec<u32, 8>,
    /// Segments the cleaner emptied of extents whose last live bytes (map pages, tables) the
    /// next checkpoint moves; one checkpoint serves the whole batch.
    pub cleaned: Vec<u32, 4>,
    /// Repaired and unrepairable blocks of the last finished scrub.
    pub last_scrub: (u64, u64),
}

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    pub fn geo(&self) -> &Geometry {
        self.array.geometry()
    }
    pub fn sdb(&self) -> usize {
        self.array.geometry().stripe_data_bytes()
    }
    pub fn segment_bytes(&self) -> u64 {
        u64::from(self.conf.layout.segment_stripes) * self.sdb() as u64
    }
    pub fn segments(&self) -> u32 {
        self.conf.layout.segments
    }
    pub fn seg_of(&self, addr: u64) -> u32 {
        (addr / self.segment_bytes()) as u32
    }
    pub fn seg_start(&self, seg: u32) -> u64 {
        u64::from(seg) * self.segment_bytes()
    }
    pub fn touch(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
    /// Free segments (reusable, not reserved).
    pub fn free_segments(&self, b: &Bufs) -> u32 {
        (0..self.segments())
            .filter(|&s| self.is_free_segment(b, s))
            .count() as u32
    }

    /// Whether more than `n` segments are free; stops counting there (it runs on every write,
    /// and a pool with room finds `n + 1` free segments long before the end of the table).
    pub fn free_segments_above(&self, b: &Bufs, n: u32) -> bool {
        (0..self.segments())
            .filter(|&s| self.is_free_segment(b, s))
            .take(n as usize + 1)
            .count()
            > n as usize
    }

    fn is_free_segment(&self, b: &Bufs, s: u32) -> bool {
        b.seg(s).state == SegState::Free && !self.log.reserved.contains(&s)
    }
}
