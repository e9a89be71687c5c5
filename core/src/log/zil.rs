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

use crate::error::{IoError, bug};
use crate::format::{
    FLUSH_MARK_SLOTS, FlushMark, HEADER_BYTES, ROOT_SLOTS, SECTOR, SLOT_BYTES, ZilHeader,
};
use crate::pool::state::{Bufs, State};
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

/// Capacity for the records of one stripe with all their copies.
pub(crate) const ZIL_REFS: usize = MAX_RECORDS_PER_STRIPE as usize * MAX_COPIES;

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    /// Member block of ring slot `slot`.
    fn zil_lba(&self, slot: u32) -> u64 {
        let per = (SLOT_BYTES / self.geo().block_bytes()) as u64;
        (2 + u64::from(ROOT_SLOTS) + u64::from(slot)) * per
    }

    /// Slots of each member's ring: the intent-log area less the flush-mark slots at its end.
    fn zil_ring_slots(&self) -> u32 {
        self.conf.layout.zil_slots.saturating_sub(FLUSH_MARK_SLOTS)
    }

    /// After a flush completed: writes a [`FlushMark`] naming the log position it made durable
    /// to as many writable members as an intent-log record goes to (the level's tolerance plus
    /// one; not flushed: the next flush or checkpoint carries it), unless the last mark already
    /// names that position. Marks alternate between the
    /// [`FLUSH_MARK_SLOTS`] slots so a torn write leaves the previous one. A member that fails
    /// the write is failed like any other; the mark is best effort (import without one reads
    /// like before: roll-forward ends at the first item it cannot read).
    pub(crate) fn write_flush_mark(&mut self, b: &mut Bufs) -> Result<(), IoError> {
        let at = (self.log.stripe_seq, self.log.zil_done as u32);
        if self.marked == Some(at) {
            return Ok(());
        }
        let mark = FlushMark {
            pool: self.conf.pool_tag,
            stripe_addr: self.log.stripe_addr,
            stripe_seq: at.0,
            durable: at.1,
            mark_seq: self.mark_seq,
        };
        let slot = b.meta.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
        slot.fill(0);
        mark.encode(slot).map_err(IoError::Corrupt)?;
        let lba = self.zil_lba(self.zil_ring_slots() + (self.mark_seq % 2) as u32);
        // As many copies as intent-log records get, on members taken in turn.
        let n = self.geo().disks();
        let first = (self.mark_seq % n as u64) as usize;
        self.mark_seq = self.mark_seq.wrapping_add(1);
        let mut written = 0;
        for k in 0..n {
            if written == self.zil_copies() {
                break;
            }
            if self.array.disk_write((first + k) % n, lba, slot).is_ok() {
                written += 1;
            }
        }
        self.marked = Some(at);
        Ok(())
    }

    /// Copies of each record: the level's tolerance plus one, at most [`MAX_COPIES`].
    fn zil_copies(&self) -> usize {
        (self.geo().tolerance() + 1).min(MAX_COPIES)
    }

    /// Every record written so far is obsolete (its stripe is durable on the members).
    pub(crate) fn zil_obsolete(&mut self) {
        for r in &mut self.zil {
            r.used = 0;
        }
    }

    /// Makes the open stripe's unflushed bytes durable through intent-log records. Returns
    /// `Ok(false)` when the records do not fit (too many for this stripe, or the rings are
    /// full); the caller then seals the stripe instead.
    pub(crate) fn zil_write(&mut self, b: &mut Bufs) -> Result<bool, IoError> {
        // Exactly up to `fill`: bytes past it are not final (later items go there), and a record
        // must never patch them at import. Starting at a sector boundary below `zil_done` only
        // repeats final bytes.
        let fill = self.log.fill;
        let from = self.log.zil_done / SECTOR * SECTOR;
        if from >= fill {
            return Ok(true);
        }
        let chunk_max = (b.item.len() - HEADER_BYTES - 2 * SLOT_BYTES) / SECTOR * SECTOR;
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
            // Pick `copies` writable members with room, round robin.
            let n = self.geo().disks();
            let mut chosen: Vec<(usize, u32), MAX_COPIES> = Vec::new();
            for k in 0..n {
                if chosen.len() == copies {
                    break;
                }
                let d = (self.zil_rr + k) % n;
                let writable = self.array.writable(d);
                let Some(r) = self.zil.get(d) else { continue };
                if !writable {
                    continue;
                }
                let (start, waste) = if r.head + slots > zil_slots {
                    (0, zil_slots - r.head)
                } else {
                    (r.head, 0)
                };
                if r.used + waste + slots <= zil_slots {
                    let _ = chosen.push((d, start));
                }
            }
            self.zil_rr = (self.zil_rr + 1) % n;
            let writable_members = (0..n).filter(|&d| self.array.writable(d)).count();
            if chosen.len() < copies.min(writable_members) || chosen.is_empty() {
                return Ok(false);
            }
            let total = slots as usize * SLOT_BYTES;
            let rec = b.item.get_mut(..total).ok_or(bug!(IoError))?;
            rec.fill(0);
            let payload = b.log.stripe.get(off..off + len).ok_or(bug!(IoError))?;
            let hdr = ZilHeader {
                pool: self.conf.pool_tag,
                stripe_addr: self.log.stripe_addr,
                stripe_seq: self.log.stripe_seq,
                offset: off as u32,
                len: len as u32,
                payload_crc: crate::format::crc32c(payload),
                record_seq: self.zil_record_seq,
            };
            hdr.encode(rec).map_err(IoError::Corrupt)?;
            rec.get_mut(HEADER_BYTES..HEADER_BYTES + len)
                .ok_or(bug!(IoError))?
                .copy_from_slice(payload);
            self.zil_record_seq += 1;
            let mut written = 0;
            let mut on = DiskSet::EMPTY;
            for &(d, start) in &chosen {
                let lba = self.zil_lba(start);
                if self.array.disk_write(d, lba, rec).is_ok() {
                    written += 1;
                    on = on.with(d);
                    self.counters.zil_bytes += total as u64;
                    if let Some(r) = self.zil.get_mut(d) {
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
    /// number of at least `min_stripe_seq`, verifies their payloads, and keeps them in
    /// `self.zil_refs` (sorted by record sequence) for [`State::zil_patch`]. Keeps the
    /// furthest flush mark at or past that stripe in `self.durable_mark`.
    pub(crate) fn zil_scan(&mut self, b: &mut Bufs, min_stripe_seq: u64) -> Result<(), IoError> {
        self.zil_refs.clear();
        let n = self.geo().disks();
        let zil_slots = self.zil_ring_slots();
        let sdb = self.sdb();
        let mut newest: Option<(u64, u64)> = None;
        for pass in 0..2 {
            for d in 0..n {
                if !self
                    .array
                    .member(d)
                    .is_some_and(crate::raid::Member::is_present)
                {
                    continue;
                }
                let mut slot = 0;
                while slot < zil_slots {
                    let lba = self.zil_lba(slot);
                    let one = b.meta.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
                    if self.array.disk_read(d, lba, one).is_err() {
                        slot += 1;
                        continue;
                    }
                    let Ok(h) = ZilHeader::decode(one, sdb) else {
                        slot += 1;
                        continue;
                    };
                    let slots = (HEADER_BYTES + h.len as usize).div_ceil(SLOT_BYTES) as u32;
                    let fits =
                        h.offset as usize + h.len as usize <= sdb && slot + slots <= zil_slots;
                    if h.pool != self.conf.pool_tag || h.stripe_seq < min_stripe_seq || !fits {
                        slot += 1;
                        continue;
                    }
                    if pass == 0 {
                        if newest.is_none_or(|(s, _)| h.stripe_seq > s) {
                            newest = Some((h.stripe_seq, h.stripe_addr));
                        }
                    } else if newest == Some((h.stripe_seq, h.stripe_addr))
                        && !self.zil_refs.iter().any(|r| r.record_seq == h.record_seq)
                    {
                        // Verify the payload before trusting the record.
                        let total = slots as usize * SLOT_BYTES;
                        let rec = b.item.get_mut(..total).ok_or(bug!(IoError))?;
                        if self.array.disk_read(d, lba, rec).is_ok() {
                            let payload = rec.get(HEADER_BYTES..HEADER_BYTES + h.len as usize);
                            if payload.is_some_and(|p| crate::format::crc32c(p) == h.payload_crc) {
                                let _ = self.zil_refs.push(ZilRef {
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
            }
        }
        self.durable_mark = None;
        for d in 0..n {
            for k in 0..FLUSH_MARK_SLOTS {
                let lba = self.zil_lba(zil_slots + k);
                let one = b.meta.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
                if self.array.disk_read(d, lba, one).is_err() {
                    continue;
                }
                let Ok(m) = FlushMark::decode(one, sdb) else {
                    continue;
                };
                if m.pool != self.conf.pool_tag || m.stripe_seq < min_stripe_seq {
                    continue;
                }
                self.mark_seq = self.mark_seq.max(m.mark_seq.saturating_add(1));
                // Positions only grow within one run of the pool: the furthest is the newest.
                if self
                    .durable_mark
                    .is_none_or(|x| (m.stripe_seq, m.durable) > (x.stripe_seq, x.durable))
                {
                    self.durable_mark = Some(m);
                }
            }
        }
        self.zil_refs.sort_unstable_by_key(|r| r.record_seq);
        if let Some(last) = self.zil_refs.last() {
            self.zil_record_seq = self.zil_record_seq.max(last.record_seq + 1);
        }
        Ok(())
    }

    /// During import: overwrites the bytes of `dst` (log bytes from `at`) that intent-log
    /// records cover with the records' bytes, oldest record first.
    pub(crate) fn zil_patch(&mut self, at: u64, dst: &mut [u8]) -> Result<(), IoError> {
        let end = at + dst.len() as u64;
        let mut tmp = [0u8; SLOT_BYTES];
        for i in 0..self.zil_refs.len() {
            let Some(r) = self.zil_refs.get(i).copied() else {
                break;
            };
            let base = r.stripe_addr + u64::from(r.offset);
            let lo = base.max(at);
            let hi = (base + u64::from(r.len)).min(end);
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
                self.recovery_healed = true;
                x += n as u64;
            }
        }
        Ok(())
    }
}
