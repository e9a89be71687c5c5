//! The log: items (extents, map pages, tables) appended into the open stripe, which goes to the
//! RAID layer only as a whole stripe, so no stripe is ever read-modify-written and no live stripe
//! is rewritten in place (no write hole). Stripes group into segments; the log uses only the
//! segments the last checkpoint reserved (its window), in order, so recovery knows where to look.
//!
//! [`Log`] owns where the log is (the open stripe, the head, the window) and the intent log;
//! the arena slices it works in (the open stripe, the array scratch, the item buffer, the
//! segment usage table) are lent to it per operation in a [`LogIo`], with the array and the
//! persistent counters. The log never decides membership: a member failing under its I/O
//! shows in the array's states, and the pool records it after the operation.
//!
//! Reading an item ([`read`]) checks everything its pointer and header promise; on a mismatch
//! it tries the reconstruction of each member (each pair on RAID-6) until the checks pass, then
//! rewrites the bad member's bytes (self-healing). Data that no combination explains is an
//! error, never returned.

mod mixed;
pub(crate) mod read;
pub(crate) mod replay;
pub(crate) mod segments;
pub(crate) mod slog;
pub(crate) mod zil;

use heapless::{Deque, Vec};
use raidcore_hal::BlockDevice;

use crate::error::{IoError, bug};
use crate::format::{
    BlockPtr, Counters, HEADER_BYTES, ITEM_ALIGN, ItemHeader, ItemKind, LogCursor, PoolLayout,
    SegEntry, SegState,
};
use crate::raid::{Array, Geometry};
pub(crate) use read::{Expect, SeqRule};
use segments::{SegmentCounts, SegmentTable};
use zil::{IntentLog, ZilRef};

/// Where the log is, and its intent log.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    /// The pool's tag, in every item header.
    tag: u64,
    layout: PoolLayout,
    /// Data bytes of one stripe.
    sdb: usize,
    /// Log address of the open stripe's first byte.
    stripe_addr: u64,
    /// Sequence number the open stripe gets when written.
    stripe_seq: u64,
    /// Bytes of the open stripe filled.
    fill: usize,
    /// Sequence number of the next item.
    next_item_seq: u64,
    /// Bytes of the open stripe already copied to the intent log.
    zil_done: usize,
    /// Intent-log records written for the open stripe.
    zil_records: u32,
    /// Stripes written since the last member flush.
    unflushed_stripes: u32,
    /// Segments the log may use until the next checkpoint; `reserved[res_idx]` is current.
    reserved: Vec<u32, 16>,
    res_idx: usize,
    /// Segments the log entered whose table entries must become `Used` (applied when the
    /// table is at hand), each with the sequence number of its first item (0: keep the one
    /// recorded).
    mark_used: Deque<(u32, u64), 4>,
    /// Segments entered so far: decoded copies of items from before an entry may be stale.
    epoch: u64,
    /// Free entries of the segment usage table.
    seg_counts: SegmentCounts,
    /// A stripe write reached too few members since the pool last looked.
    write_failed: bool,
    /// The intent-log rings and flush marks.
    pub(crate) zil: IntentLog,
    /// A checkpoint's metadata region ([`LogIo::begin_region`]): where its first copies start,
    /// and how far after each its ditto copy lies.
    region: Option<(u64, u64)>,
    /// Metadata gets ditto copies (the pool's `metadata_copies` is 2).
    pub(crate) ditto: bool,
}

/// How item reads behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Normal operation: bytes of the open stripe come from memory, and a read that checked
    /// only through reconstruction heals the bad member.
    Live,
    /// Import's first roll-forward pass, which finds the log's end: the stripe buffer is being
    /// assembled (nothing comes from memory), nothing is healed (import rewrites whole stripes
    /// instead) and no loss is reported (an unreadable item there is most often the torn tail);
    /// `healed` records that a read needed reconstruction or intent-log patches.
    FindEnd {
        /// Set when a read needed reconstruction or intent-log patches.
        healed: bool,
    },
}

/// What the log works with during one operation: the array, its own state, its arena slices,
/// the persistent counters it adds to, and (during import) the intent-log records that patch
/// the stripe open at the crash.
#[derive(Debug)]
pub(crate) struct LogIo<'a, D, const N: usize> {
    pub array: &'a mut Array<D, N>,
    pub log: &'a mut Log,
    /// The open stripe's data (`stripe_data_bytes`).
    pub stripe: &'a mut [u8],
    /// Array scratch for reconstruction and parity.
    pub scratch: &'a mut [u8],
    /// Items read back from the log, and intent-log records.
    pub item: &'a mut [u8],
    /// The segment usage table.
    pub sut: &'a mut [u8],
    pub counters: &'a mut Counters,
    /// Import only: verified intent-log records, oldest first.
    pub patches: &'a [ZilRef],
    pub pass: Pass,
    /// Set only while a mixed read ([`LogIo::read_mixed`]) attempts a plan.
    pub plan: Option<mixed::Plan>,
    /// The pool's dedicated intent-log device, if it has one.
    pub slog: Option<&'a mut slog::LogDevice<D>>,
}

impl Log {
    /// A log for a pool with tag `tag` and `layout`, whose stripes hold `sdb` data bytes,
    /// starting at address 0 in the segments of `reserved`.
    pub fn new(tag: u64, layout: PoolLayout, sdb: usize, reserved: &[u32]) -> Self {
        let mut r = Vec::new();
        for &s in reserved.iter().take(16) {
            let _ = r.push(s);
        }
        Log {
            tag,
            layout,
            sdb,
            stripe_addr: 0,
            stripe_seq: 0,
            fill: 0,
            next_item_seq: 0,
            zil_done: 0,
            zil_records: 0,
            unflushed_stripes: 0,
            reserved: r,
            res_idx: 0,
            mark_used: Deque::new(),
            epoch: 0,
            seg_counts: SegmentCounts::default(),
            write_failed: false,
            zil: IntentLog::default(),
            region: None,
            ditto: false,
        }
    }

    /// Data bytes of one stripe.
    pub const fn sdb(&self) -> usize {
        self.sdb
    }
    /// Bytes of one segment.
    pub const fn segment_bytes(&self) -> u64 {
        self.layout.segment_stripes as u64 * self.sdb as u64
    }
    /// Segments of the data area.
    pub const fn segments(&self) -> u32 {
        self.layout.segments
    }
    /// The segment usage table as a log item: its payload bytes (an entry per segment) and
    /// the item's bytes (header and rounding).
    pub const fn segment_table_item(&self) -> (usize, usize) {
        let len = self.layout.segments as usize * crate::format::SEG_ENTRY_BYTES;
        (len, crate::format::round_up(HEADER_BYTES + len, ITEM_ALIGN))
    }
    /// Stripes of one segment.
    pub const fn segment_stripes(&self) -> u32 {
        self.layout.segment_stripes
    }
    /// Intent-log slots of each member.
    pub const fn zil_slots(&self) -> u32 {
        self.layout.zil_slots
    }
    /// The segment holding log address `addr`.
    pub const fn seg_of(&self, addr: u64) -> u32 {
        (addr / self.segment_bytes()) as u32
    }
    /// Log address of segment `seg`'s first byte.
    pub const fn seg_start(&self, seg: u32) -> u64 {
        seg as u64 * self.segment_bytes()
    }
    /// Log address where the next item goes.
    pub const fn head(&self) -> u64 {
        self.stripe_addr + self.fill as u64
    }
    /// Log address of the open stripe's first byte.
    pub const fn open_stripe_addr(&self) -> u64 {
        self.stripe_addr
    }
    /// The log bytes the stripe buffer holds instead of the members: the open stripe, while
    /// it lies in the current segment. A log whose segment filled with no next one reserved,
    /// or reopened by import at a segment's end, has no open stripe until it enters the next
    /// segment, and the address past the end may be another segment's, on the members.
    pub fn open_span(&self) -> core::ops::Range<u64> {
        match self.current_segment() {
            Some(cur) if self.stripe_addr < self.seg_start(cur) + self.segment_bytes() => {
                self.stripe_addr..self.stripe_addr + self.sdb as u64
            }
            _ => 0..0,
        }
    }
    /// Bytes of the open stripe filled.
    pub const fn fill(&self) -> usize {
        self.fill
    }
    /// Where the log continues (for a checkpoint root).
    pub const fn cursor(&self) -> LogCursor {
        LogCursor {
            head: self.head(),
            next_item_seq: self.next_item_seq,
            next_stripe_seq: self.stripe_seq,
        }
    }
    /// Segments entered since the log was opened (decoded items from before may be stale).
    pub const fn epoch(&self) -> u64 {
        self.epoch
    }
    /// The segment the log writes into.
    pub fn current_segment(&self) -> Option<u32> {
        self.reserved.get(self.res_idx).copied()
    }
    /// The window, and how many of its segments the log has moved past.
    pub fn window(&self) -> (&[u32], usize) {
        (&self.reserved, self.res_idx)
    }
    /// A checkpoint reserved a new window, starting with the current segment.
    pub fn set_window(&mut self, reserved: Vec<u32, 16>) {
        self.reserved = reserved;
        self.res_idx = 0;
    }
    /// Whether stripes were written since the members were last flushed.
    pub const fn has_unflushed_stripes(&self) -> bool {
        self.unflushed_stripes > 0
    }
    /// The members were flushed: every stripe written so far is durable.
    pub fn stripes_flushed(&mut self) {
        self.unflushed_stripes = 0;
    }
    /// Whether bytes of the open stripe are not in the intent log yet.
    pub const fn open_bytes_unlogged(&self) -> bool {
        self.fill > self.zil_done
    }

    /// Forgets which of the open stripe's bytes intent-log records hold: the next flush logs
    /// them all again (the device that held the records leaves the pool).
    pub fn relog_open_stripe(&mut self) {
        self.zil_done = 0;
    }

    /// Whether the log writes into the last segment of its window while a checkpoint would
    /// reserve another (a free segment exists): it must checkpoint before that segment fills,
    /// or the next append finds no room ([`IoError::LogFull`]). With a window of two segments
    /// (or fewer, on a nearly full pool) "half the window used" is already the last segment.
    pub fn window_closing(&self, free_outside_window: bool) -> bool {
        self.res_idx + 1 >= self.reserved.len() && free_outside_window
    }

    /// Bytes left in the current segment.
    pub fn segment_room(&self) -> u64 {
        let Some(cur) = self.current_segment() else {
            return 0;
        };
        (self.seg_start(cur) + self.segment_bytes()).saturating_sub(self.head())
    }

    /// Free segments outside the window, counted from the table's free count (the window
    /// holds at most 16), so the answer costs the same on any pool size. `sut`: the table.
    pub fn free_outside(&self, sut: &[u8]) -> u32 {
        let reserved_free = self
            .reserved
            .iter()
            .filter(|&&s| {
                SegEntry::decode(sut, s as usize * crate::format::SEG_ENTRY_BYTES).state
                    == SegState::Free
            })
            .count() as u32;
        self.seg_counts.free.saturating_sub(reserved_free)
    }

    /// Takes the note that a stripe write reached too few members (the data in it is lost and
    /// the pool must fault).
    pub fn take_write_failed(&mut self) -> bool {
        core::mem::take(&mut self.write_failed)
    }

    /// Moves the open stripe to `stripe_addr` (import: the stripe holding the log's end), with
    /// `fill` bytes of it written, sequence numbers from `next_item_seq` and `stripe_seq`, in
    /// segment `res_idx` of the window `reserved`.
    pub fn reopen(
        &mut self,
        reserved: &[u32],
        res_idx: usize,
        stripe_addr: u64,
        fill: usize,
        next_item_seq: u64,
        stripe_seq: u64,
    ) {
        self.reserved.clear();
        for &s in reserved.iter().take(16) {
            let _ = self.reserved.push(s);
        }
        self.res_idx = res_idx;
        self.stripe_addr = stripe_addr;
        self.fill = fill;
        self.next_item_seq = next_item_seq;
        self.stripe_seq = stripe_seq;
        self.zil_done = 0;
        self.zil_records = 0;
    }

    /// Records that the log's use of `seg` began with item `first_seq` (0: keep the number
    /// recorded); the table entry becomes `Used` when the table is at hand.
    pub fn note_entered(&mut self, seg: u32, first_seq: u64) {
        let _ = self.mark_used.push_back((seg, first_seq));
    }

    /// Segments the log entered are used from now on.
    fn apply_mark_used(marks: &mut Deque<(u32, u64), 4>, sut: &mut SegmentTable<'_>) {
        while let Some((seg, first_seq)) = marks.pop_front() {
            let e = sut.get(seg);
            sut.set(
                seg,
                SegEntry {
                    live: e.live,
                    state: SegState::Used,
                    first_seq: if first_seq == 0 {
                        e.first_seq
                    } else {
                        first_seq
                    },
                },
            );
        }
    }
}

impl<D: BlockDevice, const N: usize> LogIo<'_, D, N> {
    /// The segment usage table.
    pub fn segs(&mut self) -> SegmentTable<'_> {
        SegmentTable::new(self.sut, self.log.layout.segments, &mut self.log.seg_counts)
    }

    /// Marks entered segments used.
    pub fn apply_mark_used(&mut self) {
        let log = &mut *self.log;
        let mut t = SegmentTable::new(self.sut, log.layout.segments, &mut log.seg_counts);
        Log::apply_mark_used(&mut log.mark_used, &mut t);
    }

    /// Whether more than `n` segments outside the window are free.
    pub fn free_above(&self, n: u32) -> bool {
        self.log.free_outside(self.sut) > n
    }

    /// See [`Log::window_closing`].
    pub fn window_closing(&self) -> bool {
        let free = self.free_above(0);
        self.log.window_closing(free)
    }

    /// Replaces the segment usage table with the `len` bytes at `self.item[off..]` (a table
    /// read back from the log).
    pub fn load_segment_table(&mut self, off: usize, len: usize) -> Result<(), IoError> {
        let body = self.item.get(off..off + len).ok_or(bug!(IoError))?;
        SegmentTable::new(self.sut, self.log.layout.segments, &mut self.log.seg_counts)
            .load(body)
            .ok_or(bug!(IoError))
    }

    /// Writes the open stripe if it is full and its write waited for a host condition.
    pub fn write_waiting_stripe(&mut self) -> Result<(), IoError> {
        if self.log.fill == self.stripe.len() {
            self.write_open_stripe()?;
        }
        Ok(())
    }

    /// Writes the open stripe (full) to the array and opens the next one. After a stripe write
    /// that reached too few members, no stripe is written again until the pool has taken the
    /// note ([`Log::take_write_failed`]): the open stripe's next write would be a second write
    /// of a stripe some members already hold, and a crash in it tears their columns (a caller
    /// that swallowed the first error used to rewrite it).
    pub fn write_open_stripe(&mut self) -> Result<(), IoError> {
        if self.log.write_failed {
            return Err(IoError::Faulted);
        }
        let sdb = self.log.sdb as u64;
        let stripe = self.log.stripe_addr / sdb;
        let before = *self.array.stats();
        let res = self.array.write_stripe(stripe, self.stripe, self.scratch);
        let after = *self.array.stats();
        self.counters.redundancy_bytes +=
            after.redundancy_bytes_written - before.redundancy_bytes_written;
        self.log.unflushed_stripes += 1;
        match res {
            Ok(()) => {}
            // The stripe stays open, unchanged, and is written again once the host's condition
            // clears (the same bytes to every member; nothing acknowledged depends on it).
            Err(e @ crate::raid::ArrayError::HostCondition { .. }) => {
                return Err(IoError::Device(e));
            }
            Err(e) => {
                self.log.write_failed = true;
                return Err(IoError::Device(e));
            }
        }
        self.stripe.fill(0);
        self.log.stripe_addr += sdb;
        self.log.stripe_seq += 1;
        self.log.fill = 0;
        self.log.zil_done = 0;
        self.log.zil_records = 0;
        self.enter_next_segment_if_full();
        Ok(())
    }

    /// When the open stripe address reached the end of the current segment, moves to the next
    /// reserved segment (marking it used). Without one the log is exhausted until the next
    /// checkpoint reserves more; `ensure_room` then refuses appends.
    fn enter_next_segment_if_full(&mut self) {
        let log = &mut *self.log;
        let Some(cur) = log.current_segment() else {
            return;
        };
        if log.stripe_addr < log.seg_start(cur) + log.segment_bytes() {
            return;
        }
        if let Some(&next) = log.reserved.get(log.res_idx + 1) {
            log.epoch += 1;
            log.res_idx += 1;
            log.stripe_addr = log.seg_start(next);
            let seq = log.next_item_seq;
            log.note_entered(next, seq);
        }
    }

    /// Copies `src` into the log at the head, writing stripes as they fill.
    fn put(&mut self, mut src: &[u8]) -> Result<(), IoError> {
        while !src.is_empty() {
            let room = self.stripe.len() - self.log.fill;
            let n = room.min(src.len());
            let (now, rest) = src.split_at(n);
            let fill = self.log.fill;
            self.stripe
                .get_mut(fill..fill + n)
                .ok_or(bug!(IoError))?
                .copy_from_slice(now);
            self.log.fill += n;
            src = rest;
            if self.log.fill == self.stripe.len() {
                self.write_open_stripe()?;
            }
        }
        Ok(())
    }

    /// Advances the head by `n` zero bytes (the buffer past `fill` is always zero).
    fn put_zeros(&mut self, mut n: usize) -> Result<(), IoError> {
        while n > 0 {
            let room = self.stripe.len() - self.log.fill;
            let k = room.min(n);
            self.log.fill += k;
            n -= k;
            if self.log.fill == self.stripe.len() {
                self.write_open_stripe()?;
            }
        }
        Ok(())
    }

    /// Writes a pad item of exactly `bytes` (a multiple of 64, at least 64) at the head.
    fn pad(&mut self, bytes: usize) -> Result<(), IoError> {
        let hdr = ItemHeader {
            kind: ItemKind::Pad,
            flags: 0,
            lun: 0,
            lba: 0,
            blocks: 0,
            stored_len: (bytes - HEADER_BYTES) as u32,
            raw_len: 0,
            payload_crc: 0,
            seq: self.log.next_item_seq,
            pool: self.log.tag,
            addr: self.log.head(),
        };
        let mut h = [0u8; HEADER_BYTES];
        hdr.encode(&mut h).map_err(IoError::Corrupt)?;
        self.log.next_item_seq += 1;
        self.put(&h)?;
        self.put_zeros(bytes - HEADER_BYTES)?;
        self.counters.pad_log_bytes += bytes as u64;
        Ok(())
    }

    /// Fills the open stripe with a pad item and writes it, if anything is in it.
    pub fn seal_stripe(&mut self) -> Result<(), IoError> {
        if self.log.fill == 0 {
            return Ok(());
        }
        if self.log.fill == self.stripe.len() {
            // Full already: its write waited for a host condition to clear.
            return self.write_open_stripe();
        }
        let rest = self.stripe.len() - self.log.fill;
        self.pad(rest)
    }

    /// Makes sure an item of `bytes` fits in the current segment: pads the segment's end (which
    /// moves the log to the next reserved segment) if it does not.
    pub fn ensure_room(&mut self, bytes: usize) -> Result<(), IoError> {
        self.apply_mark_used();
        let room = self.log.segment_room();
        if bytes as u64 <= room {
            return Ok(());
        }
        if room > 0 {
            if self.log.res_idx + 1 >= self.log.reserved.len() {
                return Err(IoError::LogFull);
            }
            self.pad(room as usize)?;
        }
        // A segment filled exactly while no next one was reserved (a checkpoint reserves more
        // afterwards): move on now, or the log would stay stuck at the full segment's end.
        self.enter_next_segment_if_full();
        self.apply_mark_used();
        if (bytes as u64) <= self.log.segment_room() {
            Ok(())
        } else {
            Err(IoError::LogFull)
        }
    }

    /// Appends an item: header (its `seq`, `pool`, `addr` and `payload_crc` are filled in here)
    /// and payload. `live`: count its bytes as live in its segment. Returns its pointer.
    pub fn append(
        &mut self,
        hdr: ItemHeader,
        payload: &[u8],
        live: bool,
    ) -> Result<BlockPtr, IoError> {
        let crc = if hdr.kind == ItemKind::Pad {
            0
        } else {
            crate::format::crc32c(payload)
        };
        self.append_with_crc(hdr, payload, crc, live)
    }

    /// [`LogIo::append`] of an item whose payload CRC-32C the caller has already computed
    /// (an uncompressed extent's, from its blocks' CRCs): `payload_crc` must be that of
    /// `payload`, or the item will not check when read.
    pub fn append_with_crc(
        &mut self,
        mut hdr: ItemHeader,
        payload: &[u8],
        payload_crc: u32,
        live: bool,
    ) -> Result<BlockPtr, IoError> {
        if self.pass != Pass::Live {
            return Err(bug!(IoError));
        }
        hdr.stored_len = payload.len() as u32;
        let bytes = hdr.item_bytes();
        self.ensure_room(bytes)?;
        hdr.seq = self.log.next_item_seq;
        hdr.pool = self.log.tag;
        hdr.addr = self.log.head();
        hdr.payload_crc = payload_crc;
        let mut h = [0u8; HEADER_BYTES];
        hdr.encode(&mut h).map_err(IoError::Corrupt)?;
        self.log.next_item_seq += 1;
        let addr = hdr.addr;
        if live {
            let seg = self.log.seg_of(addr);
            self.segs().account(seg, bytes as u32, true);
        }
        self.put_item_bytes(&h, payload, bytes)?;
        Ok(BlockPtr {
            addr,
            len: bytes as u32,
            crc: hdr.payload_crc,
            ditto: None,
        })
    }

    /// Appends a metadata item twice, as [`BlockPtr::ditto`] describes: the first copy at the
    /// head, the second after a pad of [`ditto_gap`] bytes, both in one segment. `live`: count
    /// both copies' bytes as live. Returns the pointer naming both; where the log has no room
    /// left for both, one copy (counted in `metadata_single_copies`).
    pub fn append_ditto(
        &mut self,
        hdr: ItemHeader,
        payload: &[u8],
        live: bool,
    ) -> Result<BlockPtr, IoError> {
        let bytes = crate::format::round_up(HEADER_BYTES + payload.len(), ITEM_ALIGN);
        let pair = match self.place_ditto(bytes) {
            Ok(_) => true,
            // A nearly full pool: one copy rather than a failed write.
            Err(IoError::LogFull) => false,
            Err(e) => return Err(e),
        };
        let first = self.append(hdr, payload, live)?;
        if !pair {
            self.counters.metadata_single_copies += 1;
            return Ok(first);
        }
        self.append_copy(first, hdr, payload, live)
    }

    /// Appends the ditto copy of the item `first` (written with `hdr` and `payload`) at the
    /// first member block boundary from the head where no member block row of a stripe holds
    /// bytes of both copies (a pad fills the gap; the next stripe, or segment, if need be).
    /// Returns `first` naming it (or alone, where the log has no room left for it).
    pub fn append_copy(
        &mut self,
        first: BlockPtr,
        hdr: ItemHeader,
        payload: &[u8],
        live: bool,
    ) -> Result<BlockPtr, IoError> {
        let bytes = crate::format::round_up(HEADER_BYTES + payload.len(), ITEM_ALIGN) as u64;
        let span = (first.addr, first.addr + u64::from(first.len));
        let gap = match self.fit(|geo, head| {
            let gap = copy_gap(geo, span, head, bytes);
            (gap, gap + bytes)
        }) {
            Ok(gap) => gap,
            Err(IoError::LogFull) => {
                self.counters.metadata_single_copies += 1;
                return Ok(first);
            }
            Err(e) => return Err(e),
        };
        if gap > 0 {
            self.pad(gap as usize)?;
        }
        let second = self.append(hdr, payload, live)?;
        Ok(BlockPtr {
            ditto: Some(second.addr),
            ..first
        })
    }

    /// Opens a checkpoint's metadata region of `bytes` (its first copies, written in order
    /// with [`Self::append_first`]), whose ditto copies follow in the same order from the
    /// stripe after its end ([`Self::append_copy_at`]): one pad for the whole checkpoint, where
    /// a pad per item would cost up to a stripe each on narrow strips. Both halves lie in one
    /// segment (the head moves to the next if need be). Returns the shift from each first copy
    /// to its ditto, or `None` when no segment holds the region (write pairs instead).
    pub fn begin_region(&mut self, bytes: u64) -> Option<u64> {
        let sdb = self.log.sdb as u64;
        // Only where the current segment holds it: moving to the next would pad the rest of
        // this one, which on a nearly full pool costs more than it saves (the cleaner then
        // moves data for every checkpoint).
        self.apply_mark_used();
        if 2 * bytes + sdb > self.log.segment_room() {
            return None;
        }
        let start = self.log.head();
        let shift = (start + bytes).div_ceil(sdb) * sdb - start;
        self.log.region = Some((start, shift));
        Some(shift)
    }

    /// Closes the metadata region.
    pub fn end_region(&mut self) {
        self.log.region = None;
    }

    /// Appends a first copy in the open region: its pointer names its ditto copy, at the
    /// region's shift after it (written later by [`Self::append_copy_at`]). Outside a region,
    /// a plain append.
    pub fn append_first(
        &mut self,
        hdr: ItemHeader,
        payload: &[u8],
        live: bool,
    ) -> Result<BlockPtr, IoError> {
        let ptr = self.append(hdr, payload, live)?;
        Ok(self.naming_region_copy(ptr))
    }

    /// `ptr` (a first copy) naming its ditto copy in the open region, if one is open.
    fn naming_region_copy(&self, ptr: BlockPtr) -> BlockPtr {
        BlockPtr {
            ditto: self.log.region.map(|(_, shift)| ptr.addr + shift),
            ..ptr
        }
    }

    /// Whether the head is where `first` says its ditto copy lies (else a bug).
    fn at_copy_of(&self, first: BlockPtr) -> Result<(), IoError> {
        if first.ditto == Some(self.log.head()) {
            Ok(())
        } else {
            Err(bug!(IoError))
        }
    }

    /// Appends the ditto copy of `first` (written with `hdr` and `payload`) where its pointer
    /// says it lies; its bytes were counted live when the region's segment table was.
    pub fn append_copy_at(
        &mut self,
        first: BlockPtr,
        hdr: ItemHeader,
        payload: &[u8],
    ) -> Result<(), IoError> {
        self.at_copy_of(first)?;
        self.append(hdr, payload, false).map(|_| ())
    }

    /// Pads from the head up to log address `to` (a multiple of 64 at or after it).
    pub fn pad_to(&mut self, to: u64) -> Result<(), IoError> {
        let head = self.log.head();
        match to.checked_sub(head) {
            Some(0) => Ok(()),
            Some(n) if n >= HEADER_BYTES as u64 && n.is_multiple_of(ITEM_ALIGN as u64) => {
                self.pad(usize::try_from(n).map_err(|_| bug!(IoError))?)
            }
            _ => Err(bug!(IoError)),
        }
    }

    /// The open region's start and shift.
    pub fn region(&self) -> Option<(u64, u64)> {
        self.log.region
    }

    /// The segment usage table's first copy in the open region, with `copies` bytes of ditto
    /// copies to come counted live in the region's segment first (so the table it encodes
    /// holds them). Returns its pointer (naming its ditto).
    pub fn segment_table_first(&mut self, copies: u64) -> Result<BlockPtr, IoError> {
        let (len, bytes) = self.log.segment_table_item();
        let seg = self.log.seg_of(self.log.head());
        let live = u32::try_from(copies + bytes as u64).map_err(|_| bug!(IoError))?;
        self.segs().account(seg, live, true);
        let ptr = self.put_segment_table(len, bytes)?;
        Ok(self.naming_region_copy(ptr))
    }

    /// The segment usage table's ditto copy, at the head, where `first` says it lies.
    pub fn segment_table_copy(&mut self, first: BlockPtr) -> Result<(), IoError> {
        self.at_copy_of(first)?;
        let (len, bytes) = self.log.segment_table_item();
        self.put_segment_table(len, bytes).map(|_| ())
    }

    /// Moves the head to where an item of `bytes` and its ditto copy fit in one segment (to
    /// the next reserved segment if the current one is too short); returns the gap between
    /// the copies there.
    fn place_ditto(&mut self, bytes: usize) -> Result<u64, IoError> {
        let bytes = bytes as u64;
        self.fit(|geo, head| {
            let gap = ditto_gap(geo, head, bytes);
            (gap, 2 * bytes + gap)
        })
    }

    /// Moves the head until `need(geometry, head)` — a gap and the bytes that must fit in one
    /// segment from the head — fits in the current segment (at most to the segment after the
    /// next); returns the gap there. [`IoError::LogFull`] when the window has no room.
    fn fit(&mut self, need: impl Fn(&Geometry, u64) -> (u64, u64)) -> Result<u64, IoError> {
        for _ in 0..3 {
            let geo = *self.array.geometry();
            let (gap, total) = need(&geo, self.log.head());
            self.apply_mark_used();
            if total <= self.log.segment_room() {
                return Ok(gap);
            }
            self.ensure_room(usize::try_from(total).map_err(|_| IoError::LogFull)?)?;
        }
        Err(IoError::LogFull)
    }

    /// Appends the segment usage table itself, one copy (live until the next checkpoint; a
    /// checkpoint without room for its metadata region); its own bytes are counted before it
    /// is encoded.
    pub fn append_segment_table(&mut self) -> Result<BlockPtr, IoError> {
        let (len, bytes) = self.log.segment_table_item();
        self.ensure_room(bytes)?;
        let seg = self.log.seg_of(self.log.head());
        self.segs().account(seg, bytes as u32, true);
        self.counters.metadata_single_copies += u64::from(self.log.ditto);
        self.put_segment_table(len, bytes)
    }

    /// One copy of the segment usage table (`len` bytes, an item of `bytes`) at the head.
    fn put_segment_table(&mut self, len: usize, bytes: usize) -> Result<BlockPtr, IoError> {
        let segments = self.log.layout.segments;
        let addr = self.log.head();
        let payload = self.sut.get(..len).ok_or(bug!(IoError))?;
        let hdr = ItemHeader {
            kind: ItemKind::SegmentTable,
            flags: 0,
            lun: 0,
            lba: 0,
            blocks: segments,
            stored_len: len as u32,
            raw_len: len as u32,
            payload_crc: crate::format::crc32c(payload),
            seq: self.log.next_item_seq,
            pool: self.log.tag,
            addr,
        };
        let mut h = [0u8; HEADER_BYTES];
        hdr.encode(&mut h).map_err(IoError::Corrupt)?;
        self.log.next_item_seq += 1;
        // Writing the item touches only the stripe buffer: lend it the table meanwhile.
        let sut = core::mem::take(&mut self.sut);
        let res = match sut.get(..len) {
            Some(table) => self.put_item_bytes(&h, table, bytes),
            None => Err(bug!(IoError)),
        };
        self.sut = sut;
        res?;
        self.counters.metadata_log_bytes += bytes as u64;
        Ok(BlockPtr {
            addr,
            len: bytes as u32,
            crc: hdr.payload_crc,
            ditto: None,
        })
    }

    /// Writes an encoded header, the payload and zeros up to `item_bytes` at the head.
    fn put_item_bytes(
        &mut self,
        header: &[u8],
        payload: &[u8],
        item_bytes: usize,
    ) -> Result<(), IoError> {
        self.put(header)?;
        self.put(payload)?;
        self.put_zeros(item_bytes - header.len() - payload.len())
    }
}

/// Bytes of pad between a metadata item of `len` bytes at log address `at` and its ditto copy:
/// the least that starts the copy on a member block boundary from which no member block row of
/// any stripe (one block at the same offset in each strip of the stripe, every copy on
/// mirrors) holds bytes of both copies. A latent sector error, or one with members out,
/// destroys such a row (the error's block, and the blocks rebuilt through it); the other copy
/// lies in other rows. Where the strip is too short for that next to the first copy, the copy
/// starts the next stripe.
pub(crate) fn ditto_gap(geo: &Geometry, at: u64, len: u64) -> u64 {
    copy_gap(geo, (at, at + len), at + len, len)
}

/// Bytes of pad from log address `head` to where a copy of `len` bytes of the item at
/// `first` starts ([`ditto_gap`]'s rule, for a copy written later than right after it).
fn copy_gap(geo: &Geometry, first: (u64, u64), head: u64, len: u64) -> u64 {
    let bb = geo.block_bytes() as u64;
    let sdb = geo.stripe_data_bytes() as u64;
    let next = head.div_ceil(bb) * bb;
    if !shares_row(geo, first, (next, next + len)) {
        return next - head;
    }
    // The stripe after the one holding `next`: none of the first copy's stripes (it ends at
    // or before the head).
    (next / sdb + 1) * sdb - head
}

/// The most [`ditto_gap`] can be for an item of `len` bytes in this geometry: under a member
/// block where a strip holds both copies side by side (twice the item and two blocks), else
/// up to a stripe.
pub(crate) const fn ditto_gap_max(geo: &Geometry, len: usize) -> usize {
    let bb = geo.block_bytes();
    if geo.strip_bytes() >= 2 * len + 2 * bb {
        bb
    } else {
        geo.stripe_data_bytes()
    }
}

/// Whether log byte ranges `a` and `b` have bytes in one member block row of one stripe.
fn shares_row(geo: &Geometry, a: (u64, u64), b: (u64, u64)) -> bool {
    let bb = geo.block_bytes() as u64;
    let sdb = geo.stripe_data_bytes() as u64;
    let strip = geo.strip_bytes() as u64;
    let strips = sdb / strip.max(1);
    let mut x = b.0 / bb * bb;
    while x < b.1 {
        let (s, row) = (x / sdb, x % sdb % strip);
        let touched = (0..strips).any(|j| {
            let lo = s * sdb + j * strip + row;
            lo < a.1 && lo + bb > a.0
        });
        if touched {
            return true;
        }
        x += bb;
    }
    false
}

#[cfg(test)]
mod ditto_tests {
    use super::*;
    use crate::raid::Level;
    use raidcore_hal::BlockSize;

    /// Every (stripe, row) the bytes `[lo, hi)` touch, by brute force over member blocks.
    fn rows(geo: &Geometry, lo: u64, hi: u64) -> std::vec::Vec<(u64, u64)> {
        let bb = geo.block_bytes() as u64;
        let sdb = geo.stripe_data_bytes() as u64;
        let strip = geo.strip_bytes() as u64;
        let mut out = std::vec::Vec::new();
        let mut x = lo / bb * bb;
        while x < hi {
            out.push((x / sdb, x % sdb % strip / bb));
            x += bb;
        }
        out
    }

    /// The copy placed after any item, in any geometry, shares no member block row of a
    /// stripe with it, starts on a block boundary, and is as near as the bound says.
    #[test]
    fn a_ditto_copy_never_shares_a_row_with_its_first_copy() {
        let mut cases = 0;
        for (level, disks) in [(Level::Raid1, 2), (Level::Raid5, 4), (Level::Raid6, 6)] {
            for strip in [4096u32, 8192, 16384, 65536] {
                for bs in [BlockSize::B512, BlockSize::B4096] {
                    let geo = Geometry::try_new(level, disks, strip, bs, 1 << 16, 0).unwrap();
                    let bb = geo.block_bytes() as u64;
                    for len in [4096u64, 1088, 8256, 3 * 65536 + 64] {
                        for at in (0..3 * geo.stripe_data_bytes() as u64).step_by(64 * 37) {
                            let gap = ditto_gap(&geo, at, len);
                            let d = at + len + gap;
                            assert_eq!(d % bb, 0, "{geo:?} at {at} len {len}");
                            let first = rows(&geo, at, at + len);
                            let shared = rows(&geo, d, d + len)
                                .into_iter()
                                .find(|r| first.contains(r));
                            assert_eq!(shared, None, "{geo:?} at {at} len {len} gap {gap}");
                            let max = ditto_gap_max(&geo, len as usize) as u64;
                            assert!(gap < max.max(bb), "{geo:?} at {at} len {len} gap {gap}");
                            cases += 1;
                        }
                    }
                }
            }
        }
        std::println!("{cases} placements checked");
    }

    /// Where a strip holds both copies side by side, the gap is only the block alignment.
    #[test]
    fn a_page_and_its_ditto_sit_side_by_side_in_a_wide_strip() {
        let geo = Geometry::try_new(Level::Raid6, 6, 65536, BlockSize::B512, 1 << 16, 0).unwrap();
        assert_eq!(ditto_gap(&geo, 0, 4096), 0);
        assert_eq!(ditto_gap(&geo, 64, 4096), 448);
        // Too narrow a strip: the copy starts the next stripe.
        let narrow = Geometry::try_new(Level::Raid6, 6, 4096, BlockSize::B512, 1 << 16, 0).unwrap();
        assert_eq!(ditto_gap(&narrow, 64, 4096), 4 * 4096 - 4160);
    }
}
