//! The log: items (extents, map pages, tables) appended into the open stripe, which goes to the
//! RAID layer only as a whole stripe, so no stripe is ever read-modify-written and no live stripe
//! is rewritten in place (no write hole). Stripes group into segments; the log uses only the
//! segments the last checkpoint reserved, in order, so recovery knows where to look.
//!
//! Reading an item checks everything its pointer and header promise (kind, pool, LUN, LBA range,
//! its own address, length, CRC32C kept outside the item); on a mismatch it tries the
//! reconstruction of each member (each pair on RAID-6) until the checks pass, then rewrites the
//! bad member's strips (self-healing). Data that no combination explains is an error, never
//! returned.

pub(crate) mod checkpoint;
pub(crate) mod cleaner;
pub(crate) mod zil;

use raidcore_hal::BlockDevice;

use crate::error::{IoError, bug};
use crate::event::Event;
use crate::format::{BlockPtr, HEADER_BYTES, ItemHeader, ItemKind, SECTOR, SegEntry, SegState};
use crate::pool::state::{Bufs, LogBufs, State, seg_account};
use crate::raid::{ArrayError, DiskSet, Level};

/// What an item read must find.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect {
    pub kind: ItemKind,
    pub lun: Option<u16>,
    /// For extents: an LBA the extent must cover. For pages: the page index.
    pub lba: Option<u64>,
    /// For pages: the level.
    pub level: Option<u32>,
    /// The item's sequence number, when known (roll-forward).
    pub seq: Option<u64>,
}

impl Expect {
    pub const fn extent(lun: u16, lba: u64) -> Self {
        Expect {
            kind: ItemKind::Extent,
            lun: Some(lun),
            lba: Some(lba),
            level: None,
            seq: None,
        }
    }
    pub const fn page(lun: u16, level: u8, index: u64) -> Self {
        Expect {
            kind: ItemKind::MapPage,
            lun: Some(lun),
            lba: Some(index),
            level: Some(level as u32),
            seq: None,
        }
    }
    pub const fn table(kind: ItemKind) -> Self {
        Expect {
            kind,
            lun: None,
            lba: None,
            level: None,
            seq: None,
        }
    }
}

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    /// Writes the open stripe (full) to the array and opens the next one.
    pub(crate) fn write_open_stripe(&mut self, lb: &mut LogBufs) -> Result<(), IoError> {
        let sdb = self.sdb() as u64;
        let stripe = self.log.stripe_addr / sdb;
        let before = *self.array.stats();
        let res = self.array.write_stripe(stripe, lb.stripe, lb.scratch);
        let after = *self.array.stats();
        self.counters.redundancy_bytes +=
            after.redundancy_bytes_written - before.redundancy_bytes_written;
        self.log.unflushed_stripes += 1;
        if let Err(e) = res {
            self.faulted = true;
            return Err(IoError::Device(e));
        }
        lb.stripe.fill(0);
        self.log.stripe_addr += sdb;
        self.log.stripe_seq += 1;
        self.log.fill = 0;
        self.log.zil_done = 0;
        self.log.zil_records = 0;
        self.enter_next_segment_if_full(lb);
        Ok(())
    }

    /// When the open stripe address reached the end of the current segment, moves to the next
    /// reserved segment (marking it used). Without one the log is exhausted until the next
    /// checkpoint reserves more; `ensure_room` then refuses appends.
    fn enter_next_segment_if_full(&mut self, lb: &mut LogBufs) {
        let _ = lb;
        let Some(&cur) = self.log.reserved.get(self.log.res_idx) else {
            return;
        };
        if self.log.stripe_addr < self.seg_start(cur) + self.segment_bytes() {
            return;
        }
        if let Some(&next) = self.log.reserved.get(self.log.res_idx + 1) {
            // Decoded copies of items that lived in the reused segment are stale now.
            self.raw_cache.clear();
            self.log.res_idx += 1;
            self.log.stripe_addr = self.seg_start(next);
            self.mark_used
                .push_back((next, self.log.next_item_seq))
                .ok();
        }
    }

    /// Whether the log writes into the last segment of its window while a checkpoint would
    /// reserve another (a free segment exists): it must checkpoint before that segment fills,
    /// or the next append finds no room ([`IoError::LogFull`]). With a window of two segments
    /// (or fewer, on a nearly full pool) "half the window used" is already the last segment.
    pub(crate) fn window_closing(&self, b: &Bufs) -> bool {
        self.log.res_idx + 1 >= self.log.reserved.len() && self.free_segments_above(b, 0)
    }

    /// Bytes left in the current segment.
    pub(crate) fn segment_room(&self) -> u64 {
        let Some(&cur) = self.log.reserved.get(self.log.res_idx) else {
            return 0;
        };
        (self.seg_start(cur) + self.segment_bytes()).saturating_sub(self.log.head())
    }

    /// Copies `src` into the log at the head, writing stripes as they fill.
    fn put(&mut self, lb: &mut LogBufs, mut src: &[u8]) -> Result<(), IoError> {
        while !src.is_empty() {
            let room = lb.stripe.len() - self.log.fill;
            let n = room.min(src.len());
            let (now, rest) = src.split_at(n);
            lb.stripe
                .get_mut(self.log.fill..self.log.fill + n)
                .ok_or(bug!(IoError))?
                .copy_from_slice(now);
            self.log.fill += n;
            src = rest;
            if self.log.fill == lb.stripe.len() {
                self.write_open_stripe(lb)?;
            }
        }
        Ok(())
    }

    /// Advances the head by `n` zero bytes (the buffer past `fill` is always zero).
    fn put_zeros(&mut self, lb: &mut LogBufs, mut n: usize) -> Result<(), IoError> {
        while n > 0 {
            let room = lb.stripe.len() - self.log.fill;
            let k = room.min(n);
            self.log.fill += k;
            n -= k;
            if self.log.fill == lb.stripe.len() {
                self.write_open_stripe(lb)?;
            }
        }
        Ok(())
    }

    /// Writes a pad item of exactly `bytes` (a multiple of 64, at least 64) at the head.
    fn pad(&mut self, lb: &mut LogBufs, bytes: usize) -> Result<(), IoError> {
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
            pool: self.conf.pool_tag,
            addr: self.log.head(),
        };
        let mut h = [0u8; HEADER_BYTES];
        hdr.encode(&mut h).map_err(IoError::Corrupt)?;
        self.log.next_item_seq += 1;
        self.put(lb, &h)?;
        self.put_zeros(lb, bytes - HEADER_BYTES)?;
        self.counters.pad_log_bytes += bytes as u64;
        Ok(())
    }

    /// Fills the open stripe with a pad item and writes it, if anything is in it.
    pub(crate) fn seal_stripe(&mut self, lb: &mut LogBufs) -> Result<(), IoError> {
        if self.log.fill == 0 {
            return Ok(());
        }
        let rest = lb.stripe.len() - self.log.fill;
        self.pad(lb, rest)
    }

    /// Makes sure an item of `bytes` fits in the current segment: pads the segment's end (which
    /// moves the log to the next reserved segment) if it does not.
    pub(crate) fn ensure_room(
        &mut self,
        lb: &mut LogBufs,
        sut: &mut [u8],
        bytes: usize,
    ) -> Result<(), IoError> {
        self.apply_mark_used(sut);
        let room = self.segment_room();
        if bytes as u64 <= room {
            return Ok(());
        }
        if room > 0 {
            if self.log.res_idx + 1 >= self.log.reserved.len() {
                return Err(IoError::LogFull);
            }
            self.pad(lb, room as usize)?;
        }
        // A segment filled exactly while no next one was reserved (a checkpoint reserves more
        // afterwards): move on now, or the log would stay stuck at the full segment's end.
        self.enter_next_segment_if_full(lb);
        self.apply_mark_used(sut);
        if (bytes as u64) <= self.segment_room() {
            Ok(())
        } else {
            Err(IoError::LogFull)
        }
    }

    /// Segments the log entered are used from now on.
    pub(crate) fn apply_mark_used(&mut self, sut: &mut [u8]) {
        while let Some((seg, first_seq)) = self.mark_used.pop_front() {
            let at = seg as usize * crate::format::SEG_ENTRY_BYTES;
            let e = SegEntry::decode(sut, at);
            SegEntry {
                live: e.live,
                state: SegState::Used,
                first_seq: if first_seq == 0 {
                    e.first_seq
                } else {
                    first_seq
                },
            }
            .encode(sut, at);
        }
    }

    /// Appends an item: header (its `seq`, `pool`, `addr` and `payload_crc` are filled in here)
    /// and payload. `live`: count its bytes as live in its segment. Returns its pointer.
    pub(crate) fn append(
        &mut self,
        lb: &mut LogBufs,
        sut: &mut [u8],
        mut hdr: ItemHeader,
        payload: &[u8],
        live: bool,
    ) -> Result<BlockPtr, IoError> {
        if self.log.replaying {
            return Err(bug!(IoError));
        }
        hdr.stored_len = payload.len() as u32;
        let bytes = hdr.item_bytes();
        self.ensure_room(lb, sut, bytes)?;
        hdr.seq = self.log.next_item_seq;
        hdr.pool = self.conf.pool_tag;
        hdr.addr = self.log.head();
        if hdr.kind != ItemKind::Pad {
            hdr.payload_crc = crate::format::crc32c(payload);
        }
        let mut h = [0u8; HEADER_BYTES];
        hdr.encode(&mut h).map_err(IoError::Corrupt)?;
        self.log.next_item_seq += 1;
        let addr = hdr.addr;
        if live {
            seg_account(sut, self.seg_of(addr), bytes as u32, true);
        }
        self.put_item_bytes(lb, &h, payload, bytes)?;
        Ok(BlockPtr {
            addr,
            len: bytes as u32,
            crc: hdr.payload_crc,
        })
    }

    /// Writes an encoded header, the payload and zeros up to `item_bytes` at the head.
    pub(crate) fn put_item_bytes(
        &mut self,
        lb: &mut LogBufs,
        header: &[u8],
        payload: &[u8],
        item_bytes: usize,
    ) -> Result<(), IoError> {
        self.put(lb, header)?;
        self.put(lb, payload)?;
        self.put_zeros(lb, item_bytes - header.len() - payload.len())
    }

    /// Reads log bytes `addr..addr + len` into `buf`, returning where in `buf` they start.
    /// `buf` needs `len + 2 * block` bytes of room, because member reads are block-aligned.
    /// Bytes in the open stripe come from memory; during import, intent-log records patch the
    /// stripe that was open at the crash.
    pub(crate) fn read_log(
        &mut self,
        lb: &mut LogBufs,
        addr: u64,
        len: usize,
        buf: &mut [u8],
        exclude: DiskSet,
    ) -> Result<usize, IoError> {
        let bb = self.geo().block_bytes() as u64;
        let start = addr / bb * bb;
        let end = (addr + len as u64).div_ceil(bb) * bb;
        let total = (end - start) as usize;
        if total > buf.len() {
            return Err(bug!(IoError));
        }
        let sdb = self.sdb() as u64;
        let open_lo = self.log.stripe_addr;
        let open_hi = open_lo + sdb;
        let mut at = start;
        while at < end {
            let stripe_end = (at / sdb + 1) * sdb;
            let piece_end = stripe_end.min(end);
            let dst = buf
                .get_mut((at - start) as usize..(piece_end - start) as usize)
                .ok_or(bug!(IoError))?;
            if at >= open_lo && at < open_hi && !self.log.replaying {
                let o = (at - open_lo) as usize;
                let src = lb.stripe.get(o..o + dst.len()).ok_or(bug!(IoError))?;
                dst.copy_from_slice(src);
            } else {
                self.array
                    .read_excluding(at, dst, lb.scratch, exclude)
                    .map_err(IoError::Device)?;
                if !self.zil_refs.is_empty() {
                    self.zil_patch(at, dst)?;
                }
            }
            at = piece_end;
        }
        Ok((addr - start) as usize)
    }

    /// The `i`-th set of members to treat as holding bad data when reading something that did
    /// not check: none, then each member alone, then (RAID-6, which can rebuild two) each pair;
    /// on RAID-1 (any number of copies) every copy but one, for each copy in turn. `None` past
    /// the last.
    pub(crate) fn suspect_set(&self, i: usize) -> Option<DiskSet> {
        let n = self.geo().disks();
        if i == 0 {
            return Some(DiskSet::EMPTY);
        }
        let i = i - 1;
        if self.geo().level() == Level::Raid1 {
            let all = (0..n).fold(DiskSet::EMPTY, DiskSet::with);
            return (i < n).then(|| all.without(i));
        }
        if i < n {
            return Some(DiskSet::one(i));
        }
        if self.geo().level() != Level::Raid6 {
            return None;
        }
        let mut k = i - n;
        for a in 0..n {
            let pairs = n - a - 1;
            if k < pairs {
                return Some(DiskSet::one(a).with(a + 1 + k));
            }
            k -= pairs;
        }
        None
    }

    /// The header of the item at log address `addr`, with at most `room` bytes to the end of
    /// its segment: it must decode, carry this pool's tag and its own address, fit, and have a
    /// sequence number `seq` accepts. Read plainly first, then with each
    /// [`suspect_set`](Self::suspect_set) rebuilt from redundancy. Returns the header, where it
    /// starts in `b.item`, and the members its read left out (empty: the plain read checked).
    pub(crate) fn find_header(
        &mut self,
        b: &mut Bufs,
        addr: u64,
        room: usize,
        seq: SeqRule,
    ) -> Option<(ItemHeader, usize, DiskSet)> {
        let mut k = 0;
        while let Some(ex) = self.suspect_set(k) {
            k += 1;
            let Ok(off) = self.read_log(&mut b.log, addr, SECTOR, b.item, ex) else {
                continue;
            };
            let Some(bytes) = b.item.get(off..off + HEADER_BYTES) else {
                continue;
            };
            if let Ok(h) = ItemHeader::decode(bytes, room.saturating_sub(HEADER_BYTES))
                && h.pool == self.conf.pool_tag
                && h.addr == addr
                && h.item_bytes() <= room
                && match seq {
                    SeqRule::Exact(s) => h.seq == s,
                    SeqRule::AtLeast(s) => h.seq >= s,
                }
            {
                return Some((h, off, ex));
            }
        }
        None
    }

    /// Reads and checks the item at `ptr` into `b.item`; returns its header and the offset of
    /// its payload in `b.item`. Repairs members whose data failed the checks (self-healing).
    pub(crate) fn load_item(
        &mut self,
        b: &mut Bufs,
        ptr: BlockPtr,
        expect: Expect,
    ) -> Result<(ItemHeader, usize), IoError> {
        let len = ptr.len as usize;
        if len < HEADER_BYTES || len > b.item.len().saturating_sub(2 * 4096) {
            return Err(IoError::Corrupt(crate::format::FormatError::Bounds));
        }
        let first = self.try_item(b, ptr, expect, DiskSet::EMPTY);
        let err = match first {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        // Items still in memory cannot be healed from members.
        let open = self.log.stripe_addr..self.log.stripe_addr + self.sdb() as u64;
        let in_memory = open.contains(&ptr.addr) && !self.log.replaying;
        if in_memory
            || matches!(
                err,
                IoError::Device(
                    ArrayError::Misaligned | ArrayError::OutOfRange | ArrayError::LogicBug { .. }
                )
            )
        {
            return Err(err);
        }
        // Try each member (RAID-6: each pair) as the one holding bad data.
        let mut i = 1;
        while let Some(ex) = self.suspect_set(i) {
            i += 1;
            if let Ok(v) = self.try_item(b, ptr, expect, ex) {
                if self.log.replaying {
                    // Import rewrites the whole stripe from checked bytes instead.
                    self.recovery_healed = true;
                } else {
                    self.heal(b, ptr, v.1 - HEADER_BYTES, ex);
                }
                return Ok(v);
            }
        }
        // Not in roll-forward's first pass, which finds where the log ends: an unreadable item
        // there is most often the torn tail (writes never flushed). A loss before the end is
        // read again, and reported, by the second pass.
        if !self.log.replaying
            && let Some(s) = self.geo().locate(ptr.addr).map(|l| l.0)
        {
            self.array
                .events_mut()
                .push(Event::Unrecoverable { stripe: s });
        }
        Err(err)
    }

    fn try_item(
        &mut self,
        b: &mut Bufs,
        ptr: BlockPtr,
        expect: Expect,
        exclude: DiskSet,
    ) -> Result<(ItemHeader, usize), IoError> {
        let len = ptr.len as usize;
        let off = self.read_log(&mut b.log, ptr.addr, len, b.item, exclude)?;
        let max_payload = len - HEADER_BYTES;
        let bytes = b.item.get(off..off + len).ok_or(bug!(IoError))?;
        let hdr = ItemHeader::decode(bytes, max_payload).map_err(IoError::Corrupt)?;
        let bad = crate::format::FormatError::Crc;
        if hdr.pool != self.conf.pool_tag
            || hdr.addr != ptr.addr
            || hdr.item_bytes() != len
            || hdr.kind != expect.kind
            || expect.lun.is_some_and(|l| l != hdr.lun)
            || expect.seq.is_some_and(|s| s != hdr.seq)
            || expect.level.is_some_and(|lv| lv != hdr.blocks)
        {
            return Err(IoError::Corrupt(bad));
        }
        if let Some(x) = expect.lba {
            let ok = match hdr.kind {
                ItemKind::Extent => x >= hdr.lba && x < hdr.lba + u64::from(hdr.blocks),
                _ => x == hdr.lba,
            };
            if !ok {
                return Err(IoError::Corrupt(bad));
            }
        }
        let payload = bytes
            .get(HEADER_BYTES..HEADER_BYTES + hdr.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let crc = crate::format::crc32c(payload);
        if crc != hdr.payload_crc || (ptr.crc != 0 && crc != ptr.crc) {
            return Err(IoError::Corrupt(bad));
        }
        Ok((hdr, off + HEADER_BYTES))
    }

    /// Rewrites, on members `bad`, the bytes of the item at `ptr` (checked, at `b.item[at..]`)
    /// in every stripe it touches, and records the repair. Only the item's own bytes: the rest
    /// of those strips was checked nowhere (see [`Array::heal_data`]).
    ///
    /// [`Array::heal_data`]: crate::raid::Array::heal_data
    pub(crate) fn heal(&mut self, b: &mut Bufs, ptr: BlockPtr, at: usize, bad: DiskSet) {
        let sdb = self.sdb() as u64;
        let strip = self.geo().strip_bytes() as u64;
        let (start, end) = (ptr.addr, ptr.addr + u64::from(ptr.len));
        // Mirrors: the set is every copy but the one that checked; which of them were wrong is
        // not known, so none is blamed (each is rewritten all the same).
        let blame = self.geo().level() != Level::Raid1 || bad.len() == 1;
        for s in start / sdb..=(end - 1) / sdb {
            for d in bad.iter().filter(|_| blame) {
                self.array.note_checksum_error(d);
                self.array.events_mut().push(Event::ChecksumRepaired {
                    disk: d as u8,
                    stripe: s,
                });
            }
            let before = self.array.stats().repair_bytes_written;
            // Each piece of the item within one data strip of stripe `s`.
            let mut a = start.max(s * sdb);
            while a < end.min((s + 1) * sdb) {
                let piece_end = end.min((a / strip + 1) * strip);
                let in_stripe = a - s * sdb;
                let from = at + (a - start) as usize;
                if let Some(good) = b.item.get(from..from + (piece_end - a) as usize) {
                    let _ = self.array.heal_data(
                        s,
                        (in_stripe / strip) as usize,
                        (in_stripe % strip) as usize,
                        good,
                        bad,
                        b.log.scratch,
                    );
                }
                a = piece_end;
            }
            self.counters.repair_bytes += self.array.stats().repair_bytes_written - before;
        }
    }

    /// Marks a segment used from the next checkpoint's point of view and, when the pool's
    /// membership changed (a member failed during I/O), writes the new configuration.
    pub(crate) fn after_membership_change(&mut self) -> Result<(), IoError> {
        let failed = self.array.failed();
        let recorded = self.recorded_failed();
        if failed != recorded {
            self.on_members_failed()?;
        }
        Ok(())
    }
}

/// Which sequence numbers an item header found by `find_header` may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeqRule {
    /// Exactly this one (roll-forward, which knows the next number).
    Exact(u64),
    /// This one or higher (walks over a segment: items of one use ascend, and a member that
    /// lost a write still shows an older use's item, whose header and CRC check).
    AtLeast(u64),
}

impl SeqRule {
    /// The rule for the first item of a walk over segment `seg` from its start: at least the
    /// number its current use began with. After each item found, the next must carry a higher
    /// number ([`SeqRule::after`]).
    pub(crate) fn walk(b: &Bufs, seg: u32) -> SeqRule {
        SeqRule::AtLeast(b.seg(seg).first_seq)
    }

    /// The rule for the item after one numbered `seq` in the same walk.
    pub(crate) fn after(self, seq: u64) -> SeqRule {
        match self {
            SeqRule::Exact(_) => SeqRule::Exact(seq.saturating_add(1)),
            SeqRule::AtLeast(s) => SeqRule::AtLeast(s.max(seq.saturating_add(1))),
        }
    }
}
