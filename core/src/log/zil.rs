//! The intent log (ZIL): how a flush makes the open stripe's content durable without writing a
//! partial stripe.
//!
//! ## Design note
//! A flush must make every acknowledged write durable, but the log writes only whole stripes and
//! never rewrites a stripe that holds live data (ARCHITECTURE invariants 1–2). Two designs fit:
//! ZFS's intent log (copies of the pending bytes, replicated) and RAIDZ-style narrow parity
//! groups (a partial stripe with its own parity). raidcore uses the intent log because
//! - stripes stay full-width and fixed, so rebuild, scrub and the cleaner reason about one
//!   geometry, and no capacity is lost to narrow groups;
//! - what a flush costs is simple and bounded: `copies × new bytes since the last flush` (rounded
//!   to 4 KiB per record) plus two member flushes, where `copies = min(m + 1, 4)` on distinct
//!   members (m = the level's tolerance), so it survives the same failures as the data;
//! - the open stripe is still written once, in full, when it fills; the copies are then obsolete
//!   and their ring space is reused.
//!
//! A record copies bytes `offset..offset + len` of the open stripe, named by the stripe's log
//! address and its stripe sequence number. At import, after roll-forward reaches the stripe that
//! was open at the crash, those bytes patch what the members hold there; items in it then check
//! like any other. Records of older stripes (lower sequence numbers) are ignored.
//!
//! Each member keeps a ring of `zil_slots` 4 KiB slots after its label slots (superblock A, the
//! root ring, superblock B). A flush with many records per stripe or a full ring seals the
//! stripe instead (pad + full-stripe write).

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::LogIo;
use super::replay::Replay;
use crate::error::{IoError, bug};
use crate::format::{
    FLUSH_MARK_SLOTS, FlushMark, HEADER_BYTES, ROOT_SLOTS, SECTOR, SLOT_BYTES, ZilHeader,
};
use crate::raid::DiskSet;

/// Records one stripe may collect before a flush seals it instead.
pub(crate) const MAX_RECORDS_PER_STRIPE: u32 = 32;
/// Most copies of a record.
pub(crate) const MAX_COPIES: usize = 4;

/// A verified intent-log record found at import.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZilRef {
    pub disk: u8,
    /// First ring slot of the record.
    pub slot: u32,
    pub stripe_addr: u64,
    pub offset: u32,
    pub len: u32,
    pub record_seq: u64,
}

impl ZilRef {
    /// The log bytes the record covers.
    pub(crate) fn span(&self) -> core::ops::Range<u64> {
        let base = self.stripe_addr.saturating_add(u64::from(self.offset));
        base..base.saturating_add(u64::from(self.len))
    }
}

/// Capacity for the records of one stripe with all their copies.
pub(crate) const ZIL_REFS: usize = MAX_RECORDS_PER_STRIPE as usize * MAX_COPIES;

/// Member block of intent-log ring slot `slot` on members of `block_bytes` blocks: after the
/// two superblock copies and the root ring.
const fn zil_lba(block_bytes: usize, slot: u32) -> u64 {
    let per = (SLOT_BYTES / block_bytes) as u64;
    (2 + ROOT_SLOTS as u64 + slot as u64) * per
}

/// Intent-log ring state of one member.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ZilRing {
    /// Next slot to write (0-based within the ring).
    pub head: u32,
    /// Slots holding records still needed (ending at `head`).
    pub used: u32,
}

/// The intent log: every member's ring, the record and flush-mark sequence numbers.
#[derive(Debug, Clone, Default)]
pub(crate) struct IntentLog {
    rings: [ZilRing; 32],
    record_seq: u64,
    /// The member the next record's copies start from (round robin).
    rr: usize,
    /// Sequence number of the next flush mark.
    mark_seq: u64,
    /// `(stripe_seq, durable bytes)` the last flush mark written recorded (none written since
    /// this pool was opened: `None`).
    marked: Option<(u64, u32)>,
}

impl IntentLog {
    /// Every record written so far is obsolete (its stripe is durable on the members).
    pub fn obsolete(&mut self) {
        for r in &mut self.rings {
            r.used = 0;
        }
    }
}

impl<D: BlockDevice, const N: usize> LogIo<'_, D, N> {
    /// Member block of ring slot `slot`.
    fn zil_lba(&self, slot: u32) -> u64 {
        zil_lba(self.array.geometry().block_bytes(), slot)
    }

    /// Slots of each member's ring: the intent-log area less the flush-mark slots at its end.
    fn zil_ring_slots(&self) -> u32 {
        self.log.zil_slots().saturating_sub(FLUSH_MARK_SLOTS)
    }

    /// After a flush completed: writes a [`FlushMark`] naming the log position it made durable
    /// to as many writable members as an intent-log record goes to (the level's tolerance plus
    /// one), unless the last mark already names that position, and flushes those members: the
    /// flush is acknowledged only once its mark is durable (a mark left in the members' write
    /// caches was lost by a power cut, and import then took the first item no redundancy
    /// rebuilds past tolerance for the log's end, serving older data as current). Marks
    /// alternate between the [`FLUSH_MARK_SLOTS`] slots so a torn write leaves the previous
    /// one. A member that fails the write or the flush is failed like any other; the mark is
    /// then on fewer members (import without one reads like before: roll-forward ends at the
    /// first item it cannot read).
    pub fn write_flush_mark(&mut self) -> Result<(), IoError> {
        let copies = self.zil_copies();
        self.write_mark(copies)
    }

    /// After a checkpoint's root is durable (at a clean stop): a [`FlushMark`] at the log
    /// position the root names, on every writable member. Import takes a mark at or past a
    /// root's position as proof that the root reached every member (the checkpoint appends its
    /// tables and seals a stripe before the root, so no mark written earlier names that
    /// stripe): a member then one root behind is an older copy put back, not a checkpoint cut
    /// short.
    pub fn write_checkpoint_mark(&mut self) -> Result<(), IoError> {
        let all = self.array.geometry().disks();
        self.write_mark(all)
    }

    /// Whether a flush mark at or past stripe `min_stripe_seq` is on any member (read-only
    /// look; later marks are numbered after it).
    pub fn marked_since(&mut self, min_stripe_seq: u64) -> Result<bool, IoError> {
        Ok(self.newest_mark(min_stripe_seq)?.is_some())
    }

    /// Writes a mark naming the position now durable to `copies` writable members taken in
    /// turn and flushes them ([`Self::write_flush_mark`]).
    fn write_mark(&mut self, copies: usize) -> Result<(), IoError> {
        let at = (self.log.stripe_seq, self.log.zil_done as u32);
        if self.log.zil.marked == Some(at) {
            return Ok(());
        }
        let mark_seq = self.log.zil.mark_seq;
        let mark = FlushMark {
            pool: self.log.tag,
            stripe_addr: self.log.stripe_addr,
            stripe_seq: at.0,
            durable: at.1,
            mark_seq,
        };
        let lba = self.zil_lba(self.zil_ring_slots() + (mark_seq % 2) as u32);
        let slot = self.item.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
        slot.fill(0);
        mark.encode(slot).map_err(IoError::Corrupt)?;
        // As many copies as intent-log records get, on members taken in turn.
        let n = self.array.geometry().disks();
        let first = (mark_seq % n as u64) as usize;
        self.log.zil.mark_seq = mark_seq.wrapping_add(1);
        let mut written = DiskSet::EMPTY;
        for k in 0..n {
            if written.len() == copies {
                break;
            }
            let d = (first + k) % n;
            if self.array.disk_write(d, lba, slot).is_ok() {
                written = written.with(d);
            }
        }
        // No copy durable: the flush is not acknowledged.
        if self.array.flush_members(written).is_empty() {
            return Err(IoError::Faulted);
        }
        self.log.zil.marked = Some(at);
        Ok(())
    }

    /// The most stripe bytes one record carries (the item buffer, less a header and two
    /// slots, in whole sectors). The item buffer's size follows from the pool's layout, so
    /// import computes what the writer did.
    fn zil_chunk_max(&self) -> usize {
        self.item
            .len()
            .saturating_sub(HEADER_BYTES + 2 * SLOT_BYTES)
            / SECTOR
            * SECTOR
    }

    /// Copies of each record: the level's tolerance plus one, at most [`MAX_COPIES`].
    fn zil_copies(&self) -> usize {
        (self.array.geometry().tolerance() + 1).min(MAX_COPIES)
    }

    /// Up to `copies` writable members whose rings have room for a record of `slots` slots,
    /// taken round robin from the next member in turn, each with the slot the record starts
    /// at (0 when it wraps).
    fn zil_pick(&mut self, slots: u32, copies: usize) -> Vec<(usize, u32), MAX_COPIES> {
        let zil_slots = self.zil_ring_slots();
        let n = self.array.geometry().disks();
        let mut chosen: Vec<(usize, u32), MAX_COPIES> = Vec::new();
        for k in 0..n {
            if chosen.len() == copies {
                break;
            }
            let d = (self.log.zil.rr + k) % n;
            let Some(r) = self.log.zil.rings.get(d).filter(|_| self.array.writable(d)) else {
                continue;
            };
            let (start, waste) = if r.head + slots > zil_slots {
                (0, zil_slots - r.head)
            } else {
                (r.head, 0)
            };
            if r.used + waste + slots <= zil_slots {
                let _ = chosen.push((d, start));
            }
        }
        self.log.zil.rr = (self.log.zil.rr + 1) % n.max(1);
        chosen
    }

    /// Makes the open stripe's unflushed bytes durable through intent-log records. Returns
    /// `Ok(false)` when the records do not fit (too many for this stripe, or the rings are
    /// full); the caller then seals the stripe instead.
    pub fn zil_write(&mut self) -> Result<bool, IoError> {
        // Exactly up to `fill`: bytes past it are not final (later items go there), and a record
        // must never patch them at import. Starting at a sector boundary below `zil_done` only
        // repeats final bytes.
        let fill = self.log.fill;
        let from = self.log.zil_done / SECTOR * SECTOR;
        if from >= fill {
            return Ok(true);
        }
        let chunk_max = self.zil_chunk_max();
        if chunk_max == 0 {
            return Ok(false);
        }
        let records = (fill - from).div_ceil(chunk_max) as u32;
        if self.log.zil_records + records > MAX_RECORDS_PER_STRIPE {
            return Ok(false);
        }
        let zil_slots = self.zil_ring_slots();
        let copies = self.zil_copies();
        // The members each record of this call reached.
        let mut reached: Vec<DiskSet, { MAX_RECORDS_PER_STRIPE as usize }> = Vec::new();
        let mut off = from;
        while off < fill {
            let len = chunk_max.min(fill - off);
            let slots = (HEADER_BYTES + len).div_ceil(SLOT_BYTES) as u32;
            if slots > zil_slots {
                return Ok(false);
            }
            let chosen = self.zil_pick(slots, copies);
            let n = self.array.geometry().disks();
            let writable_members = (0..n).filter(|&d| self.array.writable(d)).count();
            if chosen.len() < copies.min(writable_members) || chosen.is_empty() {
                return Ok(false);
            }
            let total = slots as usize * SLOT_BYTES;
            let bb = self.array.geometry().block_bytes();
            let rec = self.item.get_mut(..total).ok_or(bug!(IoError))?;
            rec.fill(0);
            let payload = self.stripe.get(off..off + len).ok_or(bug!(IoError))?;
            let hdr = ZilHeader {
                pool: self.log.tag,
                stripe_addr: self.log.stripe_addr,
                stripe_seq: self.log.stripe_seq,
                offset: off as u32,
                len: len as u32,
                payload_crc: crate::format::crc32c(payload),
                record_seq: self.log.zil.record_seq,
            };
            hdr.encode(rec).map_err(IoError::Corrupt)?;
            rec.get_mut(HEADER_BYTES..HEADER_BYTES + len)
                .ok_or(bug!(IoError))?
                .copy_from_slice(payload);
            self.log.zil.record_seq += 1;
            let mut written = 0;
            let mut on = DiskSet::EMPTY;
            for &(d, start) in &chosen {
                let lba = zil_lba(bb, start);
                if self.array.disk_write(d, lba, rec).is_ok() {
                    written += 1;
                    on = on.with(d);
                    self.counters.zil_bytes += total as u64;
                    if let Some(r) = self.log.zil.rings.get_mut(d) {
                        let waste = if start == 0 && r.head != 0 {
                            zil_slots - r.head
                        } else {
                            0
                        };
                        r.used += waste + slots;
                        r.head = (start + slots) % zil_slots;
                    }
                }
            }
            if written == 0 {
                return Ok(false);
            }
            self.log.zil_records += 1;
            let _ = reached.push(on);
            off += len;
        }
        // The records must be durable before the flush is acknowledged: each on at least one
        // member whose cache flush succeeded. (The durable set used to be ignored, so a power
        // cut between the record writes and the flush acknowledged a flush whose records were
        // all still in volatile caches, when a hot spare taking a failed slot kept the pool
        // from counting as faulted.) Otherwise the caller seals the stripe instead.
        let durable = self.array.flush();
        if reached.iter().any(|on| (on.0 & durable.0) == 0) {
            return Ok(false);
        }
        self.log.zil_done = self.log.fill;
        Ok(true)
    }

    /// Scans every present member's ring for the records of the newest stripe with a sequence
    /// number of at least `min_stripe_seq`, verifies their payloads, and returns them (sorted
    /// by record sequence) with the furthest flush mark at or past that stripe and, when some
    /// record verified, what they prove durable ([`Replay::durable_records`]): what import's roll-forward
    /// needs ([`Replay`]). Later record and mark numbers continue after theirs.
    pub fn zil_scan(&mut self, min_stripe_seq: u64) -> Result<Replay, IoError> {
        let mut replay = Replay::default();
        let n = self.array.geometry().disks();
        let mut newest: Option<(u64, u64)> = None;
        for pass in 0..2 {
            for d in 0..n {
                if self
                    .array
                    .member(d)
                    .is_some_and(crate::raid::Member::is_present)
                {
                    self.scan_ring(d, pass, min_stripe_seq, &mut newest, &mut replay)?;
                }
            }
        }
        replay.durable_mark = self.newest_mark(min_stripe_seq)?;
        // A flush's records start where the bytes durable before it end and follow each
        // other in chunks of `chunk`: the `j`th of them starts `j` chunks later. A record at
        // offset `x` so proves the bytes below `x - j * chunk` durable, at least `x % chunk`.
        let chunk = (self.zil_chunk_max() as u64).max(1);
        let proven = replay
            .zil_refs
            .iter()
            .map(|r| u64::from(r.offset) % chunk)
            .max();
        replay.durable_records = newest.zip(proven).map(|((seq, _), off)| (seq, off));
        replay.zil_refs.sort_unstable_by_key(|r| r.record_seq);
        if let Some(last) = replay.zil_refs.last() {
            self.log.zil.record_seq = self.log.zil.record_seq.max(last.record_seq + 1);
        }
        Ok(replay)
    }

    /// One member's ring for [`Self::zil_scan`]: pass 0 finds the newest stripe with records,
    /// pass 1 keeps that stripe's verified records.
    fn scan_ring(
        &mut self,
        d: usize,
        pass: u32,
        min_stripe_seq: u64,
        newest: &mut Option<(u64, u64)>,
        replay: &mut Replay,
    ) -> Result<(), IoError> {
        let zil_slots = self.zil_ring_slots();
        let sdb = self.log.sdb;
        let mut slot = 0;
        while slot < zil_slots {
            let lba = self.zil_lba(slot);
            let one = self.item.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
            if self.array.disk_read(d, lba, one).is_err() {
                slot += 1;
                continue;
            }
            let Ok(h) = ZilHeader::decode(one, sdb) else {
                slot += 1;
                continue;
            };
            let slots = (HEADER_BYTES + h.len as usize).div_ceil(SLOT_BYTES) as u32;
            let fits = h.offset as usize + h.len as usize <= sdb && slot + slots <= zil_slots;
            if h.pool != self.log.tag || h.stripe_seq < min_stripe_seq || !fits {
                slot += 1;
                continue;
            }
            if pass == 0 {
                if newest.is_none_or(|(s, _)| h.stripe_seq > s) {
                    *newest = Some((h.stripe_seq, h.stripe_addr));
                }
            } else if *newest == Some((h.stripe_seq, h.stripe_addr))
                && !replay.zil_refs.iter().any(|r| r.record_seq == h.record_seq)
            {
                // Verify the payload before trusting the record.
                let total = slots as usize * SLOT_BYTES;
                let rec = self.item.get_mut(..total).ok_or(bug!(IoError))?;
                if self.array.disk_read(d, lba, rec).is_ok() {
                    let payload = rec.get(HEADER_BYTES..HEADER_BYTES + h.len as usize);
                    if payload.is_some_and(|p| crate::format::crc32c(p) == h.payload_crc) {
                        let _ = replay.zil_refs.push(ZilRef {
                            disk: d as u8,
                            slot,
                            stripe_addr: h.stripe_addr,
                            offset: h.offset,
                            len: h.len,
                            record_seq: h.record_seq,
                        });
                    }
                }
            }
            slot += slots;
        }
        Ok(())
    }

    /// The furthest flush mark at or past stripe `min_stripe_seq` on any member; later marks
    /// are numbered after every mark found.
    fn newest_mark(&mut self, min_stripe_seq: u64) -> Result<Option<FlushMark>, IoError> {
        let n = self.array.geometry().disks();
        let zil_slots = self.zil_ring_slots();
        let sdb = self.log.sdb;
        let mut best: Option<FlushMark> = None;
        for d in 0..n {
            for k in 0..FLUSH_MARK_SLOTS {
                let lba = self.zil_lba(zil_slots + k);
                let one = self.item.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
                if self.array.disk_read(d, lba, one).is_err() {
                    continue;
                }
                let Ok(m) = FlushMark::decode(one, sdb) else {
                    continue;
                };
                if m.pool != self.log.tag || m.stripe_seq < min_stripe_seq {
                    continue;
                }
                let zil = &mut self.log.zil;
                zil.mark_seq = zil.mark_seq.max(m.mark_seq.saturating_add(1));
                // Positions only grow within one run of the pool: the furthest is the newest.
                if best.is_none_or(|x| (m.stripe_seq, m.durable) > (x.stripe_seq, x.durable)) {
                    best = Some(m);
                }
            }
        }
        Ok(best)
    }

    /// During import: whether the intent-log records cover every log byte of `lo..hi` (false
    /// without records).
    pub(crate) fn zil_covers(&self, lo: u64, hi: u64) -> bool {
        if self.patches.is_empty() {
            return false;
        }
        let mut x = lo;
        while x < hi {
            // The furthest end of a record holding byte x; each step moves x forward.
            let reach = self
                .patches
                .iter()
                .map(ZilRef::span)
                .filter(|s| s.contains(&x))
                .map(|s| s.end)
                .max();
            match reach {
                Some(end) => x = end,
                None => return false,
            }
        }
        true
    }

    /// During import: overwrites the bytes of `dst` (log bytes from `at`) that intent-log
    /// records cover with the records' bytes, oldest record first.
    pub(crate) fn zil_patch(&mut self, at: u64, dst: &mut [u8]) -> Result<(), IoError> {
        let end = at + dst.len() as u64;
        let mut tmp = [0u8; SLOT_BYTES];
        for i in 0..self.patches.len() {
            let Some(r) = self.patches.get(i).copied() else {
                break;
            };
            let span = r.span();
            let base = span.start;
            let lo = base.max(at);
            let hi = span.end.min(end);
            let mut x = lo;
            // Payload byte p of the record sits at ring byte HEADER_BYTES + p; copy slot by slot.
            while x < hi {
                let p = (x - base) as usize + HEADER_BYTES;
                let slot = p / SLOT_BYTES;
                let in_slot = p % SLOT_BYTES;
                let n = ((SLOT_BYTES - in_slot) as u64).min(hi - x) as usize;
                let lba = self.zil_lba(r.slot + slot as u32);
                self.array
                    .disk_read(r.disk as usize, lba, &mut tmp)
                    .map_err(IoError::Device)?;
                let src = tmp.get(in_slot..in_slot + n).ok_or(bug!(IoError))?;
                dst.get_mut((x - at) as usize..(x - at) as usize + n)
                    .ok_or(bug!(IoError))?
                    .copy_from_slice(src);
                self.note_healed();
                x += n as u64;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod ring_tests;
