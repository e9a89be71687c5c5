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
use raidcore_hal::{BlockDevice, ErrorKind};

use super::LogIo;
use super::replay::Replay;
use super::slog::ON_LOG_DEVICE;
use crate::error::{IoError, bug};
use crate::format::{
    FLUSH_MARK_SLOTS, FlushMark, HEADER_BYTES, ROOT_SLOTS, SECTOR, SLOT_BYTES, ZilHeader,
};
use crate::raid::{ArrayError, DiskSet};

/// Records one stripe may collect before a flush seals it instead.
pub(crate) const MAX_RECORDS_PER_STRIPE: u32 = 32;
/// Most copies of a record.
pub(crate) const MAX_COPIES: usize = 4;

/// A verified intent-log record found at import.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZilRef {
    /// Member slot, or [`ON_LOG_DEVICE`].
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

/// Most ring slots of a log device (16 MiB): import reads the whole ring twice.
pub(crate) const LOG_DEVICE_RING_MAX: u32 = 4096;

/// Capacity for the records of one stripe with all their copies.
pub(crate) const ZIL_REFS: usize = MAX_RECORDS_PER_STRIPE as usize * MAX_COPIES;

/// Member block of intent-log ring slot `slot` on members of `block_bytes` blocks: after the
/// two superblock copies and the root ring.
const fn zil_lba(block_bytes: usize, slot: u32) -> u64 {
    let per = (SLOT_BYTES / block_bytes) as u64;
    (2 + ROOT_SLOTS as u64 + slot as u64) * per
}

/// Intent-log ring state of one member (or of the log device).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ZilRing {
    /// Next slot to write (0-based within the ring).
    pub head: u32,
    /// Slots holding records still needed (ending at `head`).
    pub used: u32,
}

impl ZilRing {
    /// Where a record of `slots` slots would start in a ring of `ring` slots (0 when it
    /// wraps), if the ring has room for it.
    fn place(self, slots: u32, ring: u32) -> Option<u32> {
        let (start, waste) = if self.head + slots > ring {
            (0, ring.saturating_sub(self.head))
        } else {
            (self.head, 0)
        };
        (self.used + waste + slots <= ring).then_some(start)
    }

    /// Takes the slots of a record of `slots` slots written at `start` ([`Self::place`]).
    fn take(&mut self, start: u32, slots: u32, ring: u32) {
        let waste = if start == 0 && self.head != 0 {
            ring.saturating_sub(self.head)
        } else {
            0
        };
        self.used += waste + slots;
        self.head = (start + slots) % ring.max(1);
    }
}

/// The intent log: every member's ring, the record and flush-mark sequence numbers.
#[derive(Debug, Clone, Default)]
pub(crate) struct IntentLog {
    rings: [ZilRing; 32],
    /// The dedicated log device's ring.
    slog_ring: ZilRing,
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
    /// The next flush mark is written even if it names the position the last one did (the
    /// last one may be on a log device that failed).
    pub fn forget_mark(&mut self) {
        self.marked = None;
    }

    /// Every record written so far is obsolete (its stripe is durable on the members).
    pub fn obsolete(&mut self) {
        for r in &mut self.rings {
            r.used = 0;
        }
        self.slog_ring.used = 0;
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

    /// Ring slots of member `disk`, or of the log device ([`ON_LOG_DEVICE`]; as its record in
    /// the configuration says, [`super::slog::ring_slots_for`]).
    fn ring_slots_of(&self, disk: u8) -> u32 {
        let member = self.zil_ring_slots();
        if disk != ON_LOG_DEVICE {
            return member;
        }
        self.slog.as_deref().map_or(member, |d| d.ring_slots)
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
    /// first item it cannot read). A pool with a working log device writes the mark there
    /// instead (one write, one device flush).
    pub fn write_flush_mark(&mut self) -> Result<(), IoError> {
        let copies = self.zil_copies();
        self.write_mark(copies, true)
    }

    /// After a checkpoint's root is durable (at a clean stop): a [`FlushMark`] at the log
    /// position the root names, on every writable member. Import takes a mark at or past a
    /// root's position as proof that the root reached every member (the checkpoint appends its
    /// tables and seals a stripe before the root, so no mark written earlier names that
    /// stripe): a member then one root behind is an older copy put back, not a checkpoint cut
    /// short.
    pub fn write_checkpoint_mark(&mut self) -> Result<(), IoError> {
        let all = self.array.geometry().disks();
        self.write_mark(all, false)
    }

    /// Whether a flush mark at or past stripe `min_stripe_seq` is on any member (read-only
    /// look; later marks are numbered after it).
    pub fn marked_since(&mut self, min_stripe_seq: u64) -> bool {
        self.newest_mark(min_stripe_seq).is_some()
    }

    /// Writes a mark naming the position now durable and makes it durable: on the log device
    /// when the pool has one that works (a flush mark is intent-log state, and the device is
    /// where a flush waits least), else on `copies` writable members taken in turn
    /// ([`Self::write_flush_mark`]). `log_device`: the log device may take it.
    fn write_mark(&mut self, copies: usize, log_device: bool) -> Result<(), IoError> {
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
        let which = (mark_seq % 2) as u32;
        let slot = self.item.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
        slot.fill(0);
        mark.encode(slot).map_err(IoError::Corrupt)?;
        self.log.zil.mark_seq = mark_seq.wrapping_add(1);
        let device_slot = self.ring_slots_of(ON_LOG_DEVICE) + which;
        let on_device = log_device && self.mark_on_log_device(device_slot);
        let member_slot = self.zil_ring_slots() + which;
        if !on_device && !self.mark_on_members(mark_seq, member_slot, copies)? {
            // No copy durable: the flush is not acknowledged.
            return Err(IoError::Faulted);
        }
        self.log.zil.marked = Some(at);
        Ok(())
    }

    /// Writes the mark in the item buffer to the log device's mark slot `mark_slot` and flushes
    /// it; false when the pool has no working log device or it failed now (the members then
    /// take the mark).
    fn mark_on_log_device(&mut self, mark_slot: u32) -> bool {
        let Some(dev) = self.slog.as_deref_mut().filter(|d| d.online()) else {
            return false;
        };
        let Some(slot) = self.item.get(..SLOT_BYTES) else {
            return false;
        };
        dev.write(zil_lba(dev.block_bytes(), mark_slot), slot)
            .is_ok()
            && dev.flush().is_ok()
    }

    /// Writes the mark in the item buffer to `copies` writable members taken in turn from
    /// `mark_seq` and flushes them; false when no copy became durable.
    fn mark_on_members(
        &mut self,
        mark_seq: u64,
        mark_slot: u32,
        copies: usize,
    ) -> Result<bool, IoError> {
        let lba = self.zil_lba(mark_slot);
        let slot = self.item.get(..SLOT_BYTES).ok_or(bug!(IoError))?;
        let n = self.array.geometry().disks();
        let first = (mark_seq % n as u64) as usize;
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
        Ok(!self.array.flush_members(written).is_empty())
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
            if let Some(start) = r.place(slots, zil_slots) {
                let _ = chosen.push((d, start));
            }
        }
        self.log.zil.rr = (self.log.zil.rr + 1) % n.max(1);
        chosen
    }

    /// The open stripe's bytes a flush must log: `from..fill` (exactly up to `fill`: bytes
    /// past it are not final, later items go there, and a record must never patch them at
    /// import; starting at a sector boundary below `zil_done` only repeats final bytes), and
    /// the most bytes one record carries. `None`: nothing to log.
    fn zil_pending(&self) -> Option<(usize, usize, usize)> {
        let fill = self.log.fill;
        let from = self.log.zil_done / SECTOR * SECTOR;
        (from < fill).then(|| (from, fill, self.zil_chunk_max()))
    }

    /// Builds in the item buffer the record of the open stripe's bytes `off..off + len`;
    /// returns its bytes and slots.
    fn zil_record(&mut self, off: usize, len: usize) -> Result<(usize, u32), IoError> {
        let slots = (HEADER_BYTES + len).div_ceil(SLOT_BYTES) as u32;
        let total = slots as usize * SLOT_BYTES;
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
        Ok((total, slots))
    }

    /// Whether the pool has a working log device.
    pub fn log_device_online(&self) -> bool {
        self.slog.as_ref().is_some_and(|d| d.online())
    }

    /// Makes the open stripe's unflushed bytes durable through intent-log records: on the
    /// log device when the pool has one that works (flushed even with nothing new, so a dead
    /// device is found while its records are still in memory), else on the members' rings.
    /// Returns `Ok(false)` when the records do not fit (too many for this stripe, or the
    /// rings are full); the caller then seals the stripe instead.
    pub fn zil_write(&mut self) -> Result<bool, IoError> {
        if self.log_device_online() {
            if self.zil_write_log_device()? {
                return Ok(true);
            }
            // The device failed (or its ring is full): records on it no longer count, so the
            // members' rings take every byte of the open stripe, not only the new ones.
            self.log.zil_done = 0;
        }
        self.zil_write_members()
    }

    /// [`Self::zil_write`] to the log device: one copy, one device flush. `Ok(false)` when
    /// the device failed or the records do not fit.
    fn zil_write_log_device(&mut self) -> Result<bool, IoError> {
        let Some((from, fill, chunk_max)) = self.zil_pending() else {
            // Nothing new, but the device may hold records of the open stripe: a flush finds
            // out now whether it still answers, not at the next power cut.
            return Ok(self.slog.as_deref_mut().is_some_and(|d| d.flush().is_ok()));
        };
        let ring = self.ring_slots_of(ON_LOG_DEVICE);
        let records = (fill - from).div_ceil(chunk_max.max(1)) as u32;
        if chunk_max == 0 || self.log.zil_records + records > MAX_RECORDS_PER_STRIPE {
            return Ok(self.log_device_full());
        }
        let mut off = from;
        while off < fill {
            let len = chunk_max.min(fill - off);
            let (total, slots) = self.zil_record(off, len)?;
            let Some(start) = self.log.zil.slog_ring.place(slots, ring) else {
                return Ok(self.log_device_full());
            };
            let Some(dev) = self.slog.as_deref_mut() else {
                return Ok(false);
            };
            let rec = self.item.get(..total).ok_or(bug!(IoError))?;
            if dev.write(zil_lba(dev.block_bytes(), start), rec).is_err() {
                return Ok(false);
            }
            self.log.zil.slog_ring.take(start, slots, ring);
            self.counters.zil_bytes += total as u64;
            self.log.zil_records += 1;
            off += len;
        }
        if self.slog.as_deref_mut().is_none_or(|d| d.flush().is_err()) {
            return Ok(false);
        }
        self.log.zil_done = fill;
        Ok(true)
    }

    /// The log device cannot take this flush's records (its ring is full, or the stripe has
    /// too many): the members' rings take them. The device is flushed anyway, so that a dead
    /// one is still found (and recorded) at this flush. Always `false`.
    fn log_device_full(&mut self) -> bool {
        if let Some(d) = self.slog.as_deref_mut() {
            let _ = d.flush();
        }
        false
    }

    /// [`Self::zil_write`] to the members' rings: `copies` members per record.
    fn zil_write_members(&mut self) -> Result<bool, IoError> {
        let Some((from, fill, chunk_max)) = self.zil_pending() else {
            return Ok(true);
        };
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
            let (total, slots) = self.zil_record(off, len)?;
            let on = self.zil_write_copies(&chosen, total, slots)?;
            if on.is_empty() {
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

    /// Writes the record built in the item buffer (`total` bytes, `slots` slots) to the
    /// `chosen` members at their ring slots; returns the members it reached.
    fn zil_write_copies(
        &mut self,
        chosen: &[(usize, u32)],
        total: usize,
        slots: u32,
    ) -> Result<DiskSet, IoError> {
        let zil_slots = self.zil_ring_slots();
        let bb = self.array.geometry().block_bytes();
        let rec = self.item.get(..total).ok_or(bug!(IoError))?;
        let mut on = DiskSet::EMPTY;
        for &(d, start) in chosen {
            if self.array.disk_write(d, zil_lba(bb, start), rec).is_ok() {
                on = on.with(d);
                self.counters.zil_bytes += total as u64;
                if let Some(r) = self.log.zil.rings.get_mut(d) {
                    r.take(start, slots, zil_slots);
                }
            }
        }
        Ok(on)
    }

    /// Scans every present member's ring for the records of the newest stripe with a sequence
    /// number of at least `min_stripe_seq`, verifies their payloads, and returns them (sorted
    /// by record sequence) with the furthest flush mark at or past that stripe and, when some
    /// record verified, what they prove durable ([`Replay::durable_records`]): what import's roll-forward
    /// needs ([`Replay`]). Later record and mark numbers continue after theirs.
    pub fn zil_scan(&mut self, min_stripe_seq: u64) -> Replay {
        let mut replay = Replay::default();
        let n = self.array.geometry().disks();
        let mut newest: Option<(u64, u64)> = None;
        let dev = self.slog.as_ref().is_some_and(|d| d.disk.is_some());
        for pass in 0..2 {
            for d in 0..n {
                if self
                    .array
                    .member(d)
                    .is_some_and(crate::raid::Member::is_present)
                {
                    self.scan_ring(d as u8, pass, min_stripe_seq, &mut newest, &mut replay);
                }
            }
            if dev {
                self.scan_ring(
                    ON_LOG_DEVICE,
                    pass,
                    min_stripe_seq,
                    &mut newest,
                    &mut replay,
                );
            }
        }
        replay.durable_mark = self.newest_mark(min_stripe_seq);
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
        replay
    }

    /// Reads `buf` at ring or mark slot `slot` of member `disk` or, for [`ON_LOG_DEVICE`],
    /// of the log device.
    fn ring_read(&mut self, disk: u8, slot: u32, buf: &mut [u8]) -> Result<(), IoError> {
        if disk == ON_LOG_DEVICE {
            let failed = |kind| IoError::Device(ArrayError::Disk { disk, kind });
            let dev = self
                .slog
                .as_deref_mut()
                .ok_or(failed(ErrorKind::DeviceFailed))?;
            let lba = zil_lba(dev.block_bytes(), slot);
            return dev.read(lba, buf).map_err(failed);
        }
        let lba = self.zil_lba(slot);
        self.array
            .disk_read(usize::from(disk), lba, buf)
            .map_err(IoError::Device)
    }

    /// [`Self::ring_read`] into the first `len` bytes of the item buffer.
    fn ring_read_item(&mut self, disk: u8, slot: u32, len: usize) -> Result<(), IoError> {
        let item = core::mem::take(&mut self.item);
        let r = match item.get_mut(..len) {
            Some(buf) => self.ring_read(disk, slot, buf),
            None => Err(bug!(IoError)),
        };
        self.item = item;
        r
    }

    /// One member's (or the log device's) ring for [`Self::zil_scan`]: pass 0 finds the newest
    /// stripe with records, pass 1 keeps that stripe's verified records.
    fn scan_ring(
        &mut self,
        d: u8,
        pass: u32,
        min_stripe_seq: u64,
        newest: &mut Option<(u64, u64)>,
        replay: &mut Replay,
    ) {
        let zil_slots = self.ring_slots_of(d);
        let sdb = self.log.sdb;
        let mut slot = 0;
        while slot < zil_slots {
            if self.ring_read_item(d, slot, SLOT_BYTES).is_err() {
                slot += 1;
                continue;
            }
            let Ok(h) = ZilHeader::decode(self.item, sdb) else {
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
                if self.ring_read_item(d, slot, total).is_ok() {
                    let payload = self.item.get(HEADER_BYTES..HEADER_BYTES + h.len as usize);
                    if payload.is_some_and(|p| crate::format::crc32c(p) == h.payload_crc) {
                        let _ = replay.zil_refs.push(ZilRef {
                            disk: d,
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

    /// The furthest flush mark at or past stripe `min_stripe_seq` on any member; later marks
    /// are numbered after every mark found.
    fn newest_mark(&mut self, min_stripe_seq: u64) -> Option<FlushMark> {
        let n = self.array.geometry().disks() as u8;
        let sdb = self.log.sdb;
        let dev = self.slog.as_ref().is_some_and(|d| d.disk.is_some());
        let mut best: Option<FlushMark> = None;
        for d in (0..n).chain(dev.then_some(ON_LOG_DEVICE)) {
            let marks_at = self.ring_slots_of(d);
            for k in 0..FLUSH_MARK_SLOTS {
                if self.ring_read_item(d, marks_at + k, SLOT_BYTES).is_err() {
                    continue;
                }
                let Ok(m) = FlushMark::decode(self.item, sdb) else {
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
        best
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
                self.ring_read(r.disk, r.slot + slot as u32, &mut tmp)?;
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
