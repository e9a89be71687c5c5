//! Reading the log: bytes at a log address (from the open stripe in memory, from the members,
//! or patched by intent-log records at import), item headers found by address, and items read
//! and checked against everything their pointer promises, reconstructed without each member
//! (each pair on RAID-6) when they do not check, and healed.

use raidcore_hal::BlockDevice;

use super::{LogIo, Pass};
use crate::error::{IoError, bug};
use crate::event::Event;
use crate::format::{
    BlockPtr, FormatError, HEADER_BYTES, ITEM_ALIGN, ItemHeader, ItemKind, LUN_BLOCK, MapEntry,
    SegEntry,
};
use crate::raid::{Array, ArrayError, Column, DiskSet, Geometry, Level};

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
    /// For uncompressed extents read through a map entry holding its block's CRC: that block's
    /// index in the item and its CRC32C (the pointer then carries no payload CRC, and this is
    /// what tells the current item from an older one at the same address).
    pub block: Option<(u8, u32)>,
}

impl Expect {
    pub const fn extent(lun: u16, lba: u64) -> Self {
        Expect {
            kind: ItemKind::Extent,
            lun: Some(lun),
            lba: Some(lba),
            level: None,
            seq: None,
            block: None,
        }
    }
    /// An extent read through map entry `e` of `lun`'s block `lba`.
    pub const fn entry(lun: u16, lba: u64, e: &MapEntry) -> Self {
        let mut x = Expect::extent(lun, lba);
        if e.block_crc && !e.compressed {
            x.block = Some((e.index, e.crc));
        }
        x
    }
    pub const fn page(lun: u16, level: u8, index: u64) -> Self {
        Expect {
            kind: ItemKind::MapPage,
            lun: Some(lun),
            lba: Some(index),
            level: Some(level as u32),
            seq: None,
            block: None,
        }
    }
    pub const fn table(kind: ItemKind) -> Self {
        Expect {
            kind,
            lun: None,
            lba: None,
            level: None,
            seq: None,
            block: None,
        }
    }
    /// Whatever `h` says of itself, at its sequence number (walks over a segment).
    pub const fn header(h: &ItemHeader) -> Self {
        Expect {
            kind: h.kind,
            lun: None,
            lba: None,
            level: None,
            seq: Some(h.seq),
            block: None,
        }
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
    /// The rule for the first item of a walk over a segment whose table entry is `e`: at least
    /// the number its current use began with. After each item found, the next must carry a
    /// higher number ([`SeqRule::after`]).
    pub(crate) const fn walk(e: SegEntry) -> SeqRule {
        SeqRule::AtLeast(e.first_seq)
    }

    /// The rule for the item after one numbered `seq` in the same walk.
    pub(crate) fn after(self, seq: u64) -> SeqRule {
        match self {
            SeqRule::Exact(_) => SeqRule::Exact(seq.saturating_add(1)),
            SeqRule::AtLeast(s) => SeqRule::AtLeast(s.max(seq.saturating_add(1))),
        }
    }
}

/// The `i`-th set of members to treat as holding bad data when reading something that did not
/// check: none, then each member alone, then (RAID-6, which can rebuild two) each pair; on
/// RAID-1 (any number of copies) every copy but one, for each copy in turn. `None` past the
/// last.
pub(crate) fn suspect_set(geo: &Geometry, i: usize) -> Option<DiskSet> {
    let n = geo.disks();
    if i == 0 {
        return Some(DiskSet::EMPTY);
    }
    let i = i - 1;
    if geo.level() == Level::Raid1 {
        let all = (0..n).fold(DiskSet::EMPTY, DiskSet::with);
        return (i < n).then(|| all.without(i));
    }
    if i < n {
        return Some(DiskSet::one(i));
    }
    if geo.level() != Level::Raid6 {
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

/// Whether member `d` holds, in stripe `s`, a data strip (a copy of one, on mirrors) that log
/// bytes `span` touch; `sdb` is the stripe's data bytes.
fn holds_piece(geo: &Geometry, s: u64, d: usize, span: (u64, u64), sdb: u64) -> bool {
    let base = s * sdb;
    let (lo, hi) = (
        span.0.max(base) - base,
        span.1.min(base + sdb).saturating_sub(base),
    );
    let strip = geo.strip_bytes() as u64;
    match geo.column_of(s, d) {
        Some(Column::Data(i) | Column::Mirror { data: i, .. }) => {
            let i = i as u64;
            i * strip < hi && (i + 1) * strip > lo
        }
        _ => false,
    }
}

impl<D: BlockDevice, const N: usize> LogIo<'_, D, N> {
    /// Notes that a read of import's first pass needed reconstruction or patches.
    pub(crate) fn note_healed(&mut self) {
        if let Pass::FindEnd { healed } = &mut self.pass {
            *healed = true;
        }
    }

    /// Reads log bytes `addr..addr + len` into `buf`, returning where in `buf` they start.
    /// `buf` needs `len + 2 * block` bytes of room, because member reads are block-aligned.
    /// Bytes in the open stripe come from memory (not in import's first pass); intent-log
    /// records patch the stripe that was open at the crash.
    pub fn read_log(
        &mut self,
        addr: u64,
        len: usize,
        buf: &mut [u8],
        exclude: DiskSet,
    ) -> Result<usize, IoError> {
        let bb = self.array.geometry().block_bytes() as u64;
        let start = addr / bb * bb;
        let end = (addr + len as u64).div_ceil(bb) * bb;
        let total = (end - start) as usize;
        if total > buf.len() {
            return Err(bug!(IoError));
        }
        let sdb = self.log.sdb as u64;
        let open = self.log.open_span();
        let mut at = start;
        while at < end {
            let stripe_end = (at / sdb + 1) * sdb;
            let piece_end = stripe_end.min(end);
            let dst = buf
                .get_mut((at - start) as usize..(piece_end - start) as usize)
                .ok_or(bug!(IoError))?;
            if open.contains(&at) && self.pass == Pass::Live {
                let o = (at - open.start) as usize;
                let src = self.stripe.get(o..o + dst.len()).ok_or(bug!(IoError))?;
                dst.copy_from_slice(src);
            } else {
                let want = (addr.max(at), (addr + len as u64).min(piece_end));
                match self.read_planned(at, dst, exclude) {
                    Ok(()) => {}
                    // Bytes the records cover whole need nothing from the members: the stripe
                    // open at the crash was never written there.
                    Err(_) if self.zil_covers(want.0, want.1) => dst.fill(0),
                    Err(e) => return Err(IoError::Device(e)),
                }
                if !self.patches.is_empty() {
                    self.zil_patch(at, dst)?;
                }
            }
            at = piece_end;
        }
        Ok((addr - start) as usize)
    }

    /// The header of the item at log address `addr`, with at most `room` bytes to the end of
    /// its segment: it must decode, carry this pool's tag and its own address, fit, and have a
    /// sequence number `seq` accepts. Read plainly first, then with each [`suspect_set`]
    /// rebuilt from redundancy. Returns the header, where it starts in `self.item`, and the
    /// members its read left out (empty: the plain read checked).
    pub fn find_header(
        &mut self,
        addr: u64,
        room: usize,
        seq: SeqRule,
    ) -> Option<(ItemHeader, usize, DiskSet)> {
        let geo = *self.array.geometry();
        let mut k = 0;
        while let Some(ex) = suspect_set(&geo, k) {
            k += 1;
            let buf = core::mem::take(&mut self.item);
            // The header alone: bytes past a short item may lie in a row nothing rebuilds
            // (the open stripe at a crash) and must not hide a header the records cover.
            let read = self.read_log(addr, HEADER_BYTES, buf, ex);
            self.item = buf;
            let Ok(off) = read else {
                continue;
            };
            if let Some(h) = self.header_in_item(off, addr, room, seq) {
                return Some((h, off, ex));
            }
        }
        None
    }

    /// The header at `self.item[off..]`, taken as the item at log address `addr` with `room`
    /// bytes to its segment's end, if it passes [`Self::find_header`]'s checks.
    fn header_in_item(
        &self,
        off: usize,
        addr: u64,
        room: usize,
        seq: SeqRule,
    ) -> Option<ItemHeader> {
        let bytes = self.item.get(off..off + HEADER_BYTES)?;
        let h = ItemHeader::decode(bytes, room.saturating_sub(HEADER_BYTES)).ok()?;
        let seq_ok = match seq {
            SeqRule::Exact(s) => h.seq == s,
            SeqRule::AtLeast(s) => h.seq >= s,
        };
        (h.pool == self.log.tag && h.addr == addr && h.item_bytes() <= room && seq_ok).then_some(h)
    }

    /// The log address of the first item header after `from` and before `end` that a plain
    /// read finds (headers are [`ITEM_ALIGN`]-aligned and never cross a member block), so a
    /// walk can go on past an item whose header no reconstruction rebuilds. Unreadable blocks
    /// are stepped over whole. `None` when there is none.
    pub fn next_header(&mut self, from: u64, end: u64, seq: SeqRule) -> Option<u64> {
        let bb = self.array.geometry().block_bytes() as u64;
        let align = ITEM_ALIGN as u64;
        let mut a = (from / align + 1) * align;
        while a + HEADER_BYTES as u64 <= end {
            let block_end = ((a / bb + 1) * bb).min(end);
            let buf = core::mem::take(&mut self.item);
            let read = self.read_log(a, (block_end - a) as usize, buf, DiskSet::EMPTY);
            self.item = buf;
            if let Ok(off) = read {
                let mut x = a;
                while x + HEADER_BYTES as u64 <= block_end {
                    let at = off + (x - a) as usize;
                    if self
                        .header_in_item(at, x, (end - x) as usize, seq)
                        .is_some()
                    {
                        return Some(x);
                    }
                    x += align;
                }
            }
            a = block_end.div_ceil(align) * align;
        }
        None
    }

    /// Reads and checks the item at `ptr` into `self.item`; returns its header and the offset
    /// of its payload there. Repairs members whose data failed the checks (self-healing).
    pub fn load_item(
        &mut self,
        ptr: BlockPtr,
        expect: Expect,
    ) -> Result<(ItemHeader, usize), IoError> {
        self.load_item_rebuilt(ptr, expect)
            .map(|(h, off, _)| (h, off))
    }

    /// [`Self::load_item`] of the first copy `ptr` names, else of its ditto copy; also says
    /// whether the first copy was lost (no reconstruction of it checked), so the caller can
    /// write the item anew.
    pub fn load_item_copies(
        &mut self,
        ptr: BlockPtr,
        expect: Expect,
    ) -> Result<(ItemHeader, usize, bool), IoError> {
        let first = BlockPtr { ditto: None, ..ptr };
        let err = match self.load_item(first, expect) {
            Ok((h, off)) => return Ok((h, off, false)),
            Err(e) => e,
        };
        match ptr.ditto_ptr() {
            Some(d) => self.load_item(d, expect).map(|(h, off)| (h, off, true)),
            None => Err(err),
        }
    }

    /// [`Self::load_item`], also saying which members the read that checked left out (empty:
    /// the plain read checked). A heal may write nothing (the bad member holds parity there,
    /// or is missing), so only this tells that the item did not check as it lies.
    pub fn load_item_rebuilt(
        &mut self,
        ptr: BlockPtr,
        expect: Expect,
    ) -> Result<(ItemHeader, usize, DiskSet), IoError> {
        let len = ptr.len as usize;
        if len < HEADER_BYTES || len > self.item.len().saturating_sub(2 * 4096) {
            return Err(IoError::Corrupt(FormatError::Bounds));
        }
        let (h, at, ex) = self.read_checked(ptr, |io, ex| io.try_item(ptr, expect, ex))?;
        Ok((h, at + HEADER_BYTES, ex))
    }

    /// Whether the item at `ptr` checks, as [`Self::load_item_rebuilt`] checks it, when read
    /// without the members of `without` (their columns reconstructed from the others). Only
    /// that one read: no other set is tried and nothing is healed.
    pub fn item_checks_without(&mut self, ptr: BlockPtr, expect: Expect, without: DiskSet) -> bool {
        let len = ptr.len as usize;
        (HEADER_BYTES..=self.item.len().saturating_sub(2 * 4096)).contains(&len)
            && self.try_item(ptr, expect, without).is_ok()
    }

    /// Reads `crcs.len()` whole 4 KiB blocks of the uncompressed extent item at log address
    /// `item`, from its block `first`, into `self.item`, each checked against its CRC32C in
    /// `crcs` (from the blocks' map entries) — the item's header and its other blocks are not
    /// read. Blocks that do not check are read again without each [`suspect_set`], and the bad
    /// members healed, as [`Self::load_item`] does for items. Returns where the first block
    /// starts in `self.item`.
    ///
    /// # Errors
    /// [`IoError::Corrupt`] or [`IoError::Device`] when no reconstruction makes every block
    /// check; `Corrupt(Bounds)` for more blocks than the item buffer holds.
    pub fn load_blocks(&mut self, item: u64, first: u8, crcs: &[u32]) -> Result<usize, IoError> {
        let len = crcs.len() * LUN_BLOCK;
        if crcs.is_empty() || len > self.item.len().saturating_sub(2 * 4096) {
            return Err(IoError::Corrupt(FormatError::Bounds));
        }
        let span = BlockPtr {
            addr: item + HEADER_BYTES as u64 + u64::from(first) * LUN_BLOCK as u64,
            len: len as u32,
            crc: 0,
            ditto: None,
        };
        let ((), at, _) = self.read_checked(span, |io, ex| {
            let buf = core::mem::take(&mut io.item);
            let read = io.read_log(span.addr, len, buf, ex);
            io.item = buf;
            let at = read?;
            let blocks = io.item.get(at..at + len).ok_or(bug!(IoError))?;
            let ok = blocks
                .chunks_exact(LUN_BLOCK)
                .zip(crcs)
                .all(|(b, &crc)| crate::format::crc32c(b) == crc);
            if ok {
                Ok(((), at))
            } else {
                Err(IoError::Corrupt(FormatError::Crc))
            }
        })?;
        Ok(at)
    }

    /// The read every checked load shares: `attempt` reads the log bytes of `span` leaving out
    /// a set of members, checks them, and returns what it found and where `span`'s first byte
    /// lies in `self.item`. Tried with the members as they lie, then without each
    /// [`suspect_set`] in turn, then with each row from its own reconstruction
    /// ([`Self::read_mixed`]); the first read that checks has the members it left out healed
    /// (live reads; import rewrites whole stripes instead) and is returned with its result.
    fn read_checked<T>(
        &mut self,
        span: BlockPtr,
        mut attempt: impl FnMut(&mut Self, DiskSet) -> Result<(T, usize), IoError>,
    ) -> Result<(T, usize, DiskSet), IoError> {
        let _ = self.array.take_lse_left();
        let err = match attempt(self, DiskSet::EMPTY) {
            Ok((t, at)) => {
                self.heal_lse(span, at);
                return Ok((t, at, DiskSet::EMPTY));
            }
            Err(e) => e,
        };
        // Bytes still in memory cannot be healed from members.
        let open = self.log.open_span();
        let in_memory = open.contains(&span.addr) && self.pass == Pass::Live;
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
        let geo = *self.array.geometry();
        let mut i = 1;
        while let Some(ex) = suspect_set(&geo, i) {
            i += 1;
            if let Ok((t, at)) = attempt(self, ex) {
                if self.pass == Pass::Live {
                    self.heal(span, at, ex);
                    self.heal_lse(span, at);
                } else {
                    // Import rewrites the whole stripe from checked bytes instead.
                    self.note_healed();
                }
                return Ok((t, at, ex));
            }
        }
        // Rows that need different members left out.
        if let Some(found) = self.read_mixed(span, &mut attempt) {
            self.heal_lse(span, found.1);
            return Ok(found);
        }
        // Not in roll-forward's first pass, which finds where the log ends: an unreadable item
        // there is most often the torn tail (writes never flushed). A loss before the end is
        // read again, and reported, by the second pass.
        if self.pass == Pass::Live
            && let Some(s) = geo.locate(span.addr).map(|l| l.0)
        {
            self.array
                .events_mut()
                .push(Event::Unrecoverable { stripe: s });
        }
        Err(err)
    }

    /// One attempt of [`Self::load_item_rebuilt`]: the item read without the members of
    /// `exclude` and checked. Returns its header and where the item starts in `self.item`.
    fn try_item(
        &mut self,
        ptr: BlockPtr,
        expect: Expect,
        exclude: DiskSet,
    ) -> Result<(ItemHeader, usize), IoError> {
        let len = ptr.len as usize;
        let buf = core::mem::take(&mut self.item);
        let read = self.read_log(ptr.addr, len, buf, exclude);
        self.item = buf;
        let off = read?;
        let max_payload = len - HEADER_BYTES;
        let bytes = self.item.get(off..off + len).ok_or(bug!(IoError))?;
        let hdr = ItemHeader::decode(bytes, max_payload).map_err(IoError::Corrupt)?;
        let bad = IoError::Corrupt(FormatError::Crc);
        if hdr.pool != self.log.tag
            || hdr.addr != ptr.addr
            || hdr.item_bytes() != len
            || hdr.kind != expect.kind
            || expect.lun.is_some_and(|l| l != hdr.lun)
            || expect.seq.is_some_and(|s| s != hdr.seq)
            || expect.level.is_some_and(|lv| lv != hdr.blocks)
        {
            return Err(bad);
        }
        if let Some(x) = expect.lba {
            let ok = match hdr.kind {
                ItemKind::Extent => x >= hdr.lba && x < hdr.lba + u64::from(hdr.blocks),
                _ => x == hdr.lba,
            };
            if !ok {
                return Err(bad);
            }
        }
        let payload = bytes
            .get(HEADER_BYTES..HEADER_BYTES + hdr.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let crc = crate::format::crc32c(payload);
        if crc != hdr.payload_crc || (ptr.crc != 0 && crc != ptr.crc) {
            return Err(bad);
        }
        if let Some((i, want)) = expect.block {
            let at = usize::from(i) * LUN_BLOCK;
            let block = payload.get(at..at + LUN_BLOCK).ok_or(bad)?;
            if hdr.flags & crate::format::FLAG_COMPRESSED != 0
                || crate::format::crc32c(block) != want
            {
                return Err(bad);
            }
        }
        Ok((hdr, off))
    }

    /// Rewrites, on members `bad`, the bytes of the item at `ptr` (checked, at `self.item[at..]`)
    /// in every stripe it touches, and records the repair. Only the item's own bytes: the rest
    /// of those strips was checked nowhere (see [`Array::heal_data`]). A failed repair write
    /// fails the member; the pool records that after the operation.
    ///
    /// [`Array::heal_data`]: crate::raid::Array::heal_data
    pub fn heal(&mut self, ptr: BlockPtr, at: usize, bad: DiskSet) {
        let geo = *self.array.geometry();
        let sdb = self.log.sdb as u64;
        let (start, end) = (ptr.addr, ptr.addr + u64::from(ptr.len));
        // Mirrors: the set is every copy but the one that checked; which of them were wrong is
        // not known, so none is blamed (each is rewritten all the same).
        let blame = geo.level() != Level::Raid1 || bad.len() == 1;
        for s in start / sdb..=(end - 1) / sdb {
            for d in bad.iter().filter(|_| blame) {
                self.array.note_checksum_error(d);
                // Only the item's data strips are rewritten, so only their members count as
                // repaired (a parity member of the set waits for the scrub).
                if holds_piece(&geo, s, d, (start, end), sdb) {
                    self.array.events_mut().push(Event::ChecksumRepaired {
                        disk: d as u8,
                        stripe: s,
                    });
                }
            }
            self.each_piece(ptr, at, s, |a, strip, off, good, scratch| {
                a.heal_data(s, strip, off, good, bad, scratch)
            });
        }
    }

    /// After a read of `ptr` checked (its bytes at `at` in the item buffer): writes those bytes
    /// onto the blocks that do not read of the members whose latent sector errors the read met
    /// and left ([`Array::take_lse_left`], [`Array::heal_unreadable`]), as md and ZFS repair a
    /// read error, but from checked bytes only. Blames no member (the error was counted when
    /// met). Import's first pass heals nothing but notes the read, so the stripe is written
    /// back whole.
    ///
    /// [`Array::take_lse_left`]: crate::raid::Array::take_lse_left
    /// [`Array::heal_unreadable`]: crate::raid::Array::heal_unreadable
    fn heal_lse(&mut self, ptr: BlockPtr, at: usize) {
        let left = self.array.take_lse_left();
        if left.is_empty() {
            return;
        }
        if self.pass != Pass::Live {
            self.note_healed();
            return;
        }
        let sdb = self.log.sdb as u64;
        let (start, end) = (ptr.addr, ptr.addr + u64::from(ptr.len));
        for s in start / sdb..=(end - 1) / sdb {
            self.each_piece(ptr, at, s, |a, strip, off, good, scratch| {
                a.heal_unreadable(s, strip, off, good, left, scratch)
            });
        }
    }

    /// Makes every copy of a mirror hold the checked bytes of `ptr` (at `at` in the item
    /// buffer) within stripe `s`, writing only the member blocks that differ or do not read
    /// ([`Array::sync_copies`]): where a mirror's copies disagree and one of them has a latent
    /// sector error, reads took some items from one copy and some from another, so no single
    /// copy is known to be the checked one. Blames no member.
    ///
    /// [`Array::sync_copies`]: crate::raid::Array::sync_copies
    pub fn sync_copies(&mut self, ptr: BlockPtr, at: usize, s: u64) {
        self.each_piece(ptr, at, s, |a, strip, off, good, scratch| {
            a.sync_copies(s, strip, off, good, scratch)
        });
    }

    /// Calls `f` with each piece of `ptr` (its bytes at `at` in the item buffer) that lies in
    /// one data strip of stripe `s`: the strip, the offset in it and the bytes; adds what the
    /// calls wrote to the repair counter.
    fn each_piece(
        &mut self,
        ptr: BlockPtr,
        at: usize,
        s: u64,
        mut f: impl FnMut(&mut Array<D, N>, usize, usize, &[u8], &mut [u8]) -> Result<(), ArrayError>,
    ) {
        let sdb = self.log.sdb as u64;
        let strip = self.array.geometry().strip_bytes() as u64;
        let (start, end) = (ptr.addr, ptr.addr + u64::from(ptr.len));
        let before = self.array.stats().repair_bytes_written;
        let mut a = start.max(s * sdb);
        while a < end.min((s + 1) * sdb) {
            let piece_end = end.min((a / strip + 1) * strip);
            let in_stripe = a - s * sdb;
            let from = at + (a - start) as usize;
            if let Some(good) = self.item.get(from..from + (piece_end - a) as usize) {
                let (strip_no, off) = ((in_stripe / strip) as usize, (in_stripe % strip) as usize);
                let _ = f(self.array, strip_no, off, good, self.scratch);
            }
            a = piece_end;
        }
        self.counters.repair_bytes += self.array.stats().repair_bytes_written - before;
    }
}

#[cfg(test)]
mod tests {
    use raidcore_hal::BlockSize;

    use super::*;

    /// A heal names the members whose data strips the item touches, never a parity member.
    #[test]
    fn a_heal_repairs_only_members_holding_the_item() {
        let geo = Geometry::try_new(Level::Raid6, 4, 4096, BlockSize::B512, 4096, 0).unwrap();
        let sdb = geo.stripe_data_bytes() as u64;
        let s = 3;
        let disk = |c| geo.disk_of(s, c).unwrap();
        let first_strip = (s * sdb + 100, s * sdb + 200);
        assert!(holds_piece(
            &geo,
            s,
            disk(Column::Data(0)),
            first_strip,
            sdb
        ));
        assert!(!holds_piece(
            &geo,
            s,
            disk(Column::Data(1)),
            first_strip,
            sdb
        ));
        assert!(!holds_piece(&geo, s, disk(Column::P), first_strip, sdb));
        assert!(!holds_piece(&geo, s, disk(Column::Q), first_strip, sdb));
        // An item from the stripe before that ends in the second strip touches both.
        let across = ((s - 1) * sdb + 10, s * sdb + 4096 + 1);
        assert!(holds_piece(&geo, s, disk(Column::Data(0)), across, sdb));
        assert!(holds_piece(&geo, s, disk(Column::Data(1)), across, sdb));
    }
}
