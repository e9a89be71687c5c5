//! Checkpoints and recovery.
//!
//! A checkpoint writes the dirty map pages (copy-on-write, leaves first), the LUN table, the
//! unrecoverable-LBA list and the segment usage table into the log, seals the open stripe,
//! flushes every member, and then writes a new root (generation + 1) into the root ring of every
//! member and flushes again. The root names the tables, where the log continues, and the
//! segments the log may use until the next checkpoint.
//!
//! Recovery loads the newest root whose tables read back intact (falling back to older
//! generations), then rolls forward through the log written after it: item after item, each
//! checked (pool, own address, consecutive sequence number, CRC32C), patched by intent-log records
//! where the stripe that was open at the crash is concerned, until the first item that does not
//! check. Roll-forward reads at most the root's reserved segments (bounded work), in two passes:
//! the first finds the end, the second replays extents and TRIMs into the map while new writes
//! (evicted map pages) go after that end. A checkpoint then makes the result durable.
//!
//! Segments emptied by the cleaner are reused only once two later checkpoints are durable, so the
//! previous root's tables are never overwritten while it may still be needed as a fallback.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use crate::error::{IoError, bug};
use crate::format::{
    self, BadRange, BlockPtr, HEADER_BYTES, ITEM_ALIGN, ItemHeader, ItemKind, LogCursor, LunRecord,
    MapEntry, ROOT_MAGIC, ROOT_SLOTS, Root, SEG_ENTRY_BYTES, SLOT_BYTES, SegEntry, SegState,
    round_up,
};
use crate::log::{Expect, SeqRule};
use crate::pool::state::{Bufs, State, seg_account};
use crate::raid::{DiskSet, DiskState};

/// The stripe a first roll-forward pass is assembling.
pub(crate) struct Assembly {
    stripe: u64,
    dirty: bool,
}

/// Where a roll-forward scan stopped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogEnd {
    pub addr: u64,
    pub next_item_seq: u64,
    pub res_idx: usize,
    /// Address and sequence number of the stripe holding `addr`.
    pub stripe_addr: u64,
    pub stripe_seq: u64,
    pub items: u64,
    /// Of those, items before the newest flush mark that no redundancy could rebuild (kept in
    /// the map, so their blocks read as errors).
    pub lost: u64,
    /// Stripes of the log's tail whose parity (or mirror copies) a crash left inconsistent,
    /// rewritten by [`State::resync_log_tail`].
    pub resynced: u64,
}

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    /// Member block of root ring slot `i`.
    pub(crate) fn root_lba(&self, i: u32) -> u64 {
        let per = (SLOT_BYTES / self.geo().block_bytes()) as u64;
        u64::from(format::root_slot(i)) * per
    }

    /// Writes a checkpoint (see the module docs).
    pub(crate) fn checkpoint(&mut self, b: &mut Bufs) -> Result<(), IoError> {
        if self.log.replaying {
            return Err(bug!(IoError));
        }
        self.write_dirty_pages(b)?;
        // The previous tables die with this checkpoint.
        for p in self.table_ptrs {
            if !p.is_none() {
                let seg = self.seg_of(p.addr);
                seg_account(b.sut, seg, p.len, false);
            }
        }
        // Segments whose data all died are freed (after two more checkpoints).
        let generation = self.root_gen as u32;
        for s in 0..self.segments() {
            let e = b.seg(s);
            if e.state == SegState::Used && e.live == 0 && !self.log.reserved.contains(&s) {
                b.set_seg(
                    s,
                    SegEntry {
                        live: 0,
                        state: SegState::Pending(generation),
                        first_seq: 0,
                    },
                );
            }
        }
        let mut recs: Vec<LunRecord, L> = Vec::new();
        for l in &self.luns {
            recs.push(l.rec.clone()).map_err(|_| bug!(IoError))?;
        }
        let n = format::encode_lun_table(&recs, b.meta).map_err(IoError::Corrupt)?;
        let lun_ptr = self.append_table(b, ItemKind::LunTable, n)?;
        let n = format::encode_bad_list(&self.bad, b.meta).map_err(IoError::Corrupt)?;
        let bad_ptr = self.append_table(b, ItemKind::BadList, n)?;
        let sut_ptr = self.append_sut(b)?;
        self.seal_stripe(&mut b.log)?;
        self.apply_mark_used(b.sut);
        let durable = self.array.flush();
        self.log.unflushed_stripes = 0;
        self.after_membership_change()?;
        if durable.is_empty() {
            return Err(IoError::Faulted);
        }
        // The log continues in the current segment; reserve free ones after it.
        let cur = *self
            .log
            .reserved
            .get(self.log.res_idx)
            .ok_or(bug!(IoError))?;
        let mut reserved: Vec<u32, 16> = Vec::new();
        let _ = reserved.push(cur);
        let want = usize::from(self.cfg.reserved_segments).clamp(2, 16);
        for s in 0..self.segments() {
            if reserved.len() >= want {
                break;
            }
            if s != cur && b.seg(s).state == SegState::Free {
                let _ = reserved.push(s);
            }
        }
        let root = Root {
            magic: ROOT_MAGIC,
            version: format::FORMAT_VERSION,
            pool_uuid: self.conf.pool_uuid,
            root_gen: self.root_gen + 1,
            config_gen: self.conf.generation,
            log: LogCursor {
                head: self.log.head(),
                next_item_seq: self.log.next_item_seq,
                next_stripe_seq: self.log.stripe_seq,
            },
            reserved: reserved.clone(),
            luns: lun_ptr,
            segments: sut_ptr,
            bad: bad_ptr,
            rebuild: self.rebuild.map(|r| format::RebuildCursor {
                disk: r.disk,
                next_stripe: r.next_stripe,
                guid: self
                    .conf
                    .member_guids
                    .get(usize::from(r.disk))
                    .copied()
                    .unwrap_or(0),
            }),
            scrub: self.scrub.map(|s| format::ScrubCursor {
                next_segment: s.next_segment,
                repaired: s.repaired,
                unrepairable: s.unrepairable,
            }),
            counters: self.counters,
        };
        let slot = b.meta.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
        root.encode(slot).map_err(IoError::Corrupt)?;
        let lba = self.root_lba((root.root_gen % u64::from(ROOT_SLOTS)) as u32);
        let mut written = DiskSet::EMPTY;
        for d in 0..self.geo().disks() {
            if self.array.disk_write(d, lba, slot).is_ok() {
                written = written.with(d);
                self.counters.label_bytes += SLOT_BYTES as u64;
            }
        }
        let durable = self.array.flush();
        self.after_membership_change()?;
        if (durable.0 & written.0) == 0 {
            return Err(IoError::Faulted);
        }
        self.root_gen = root.root_gen;
        if let Some(sc) = self.scrub.as_mut() {
            sc.saved = Some(sc.next_segment);
        }
        self.log.reserved = reserved;
        self.log.res_idx = 0;
        self.table_ptrs = [lun_ptr, sut_ptr, bad_ptr];
        self.release_pending(b);
        self.settle_cleaned(b);
        self.zil_obsolete();
        self.log.pages_since_checkpoint = 0;
        self.counters.checkpoints += 1;
        Ok(())
    }

    /// Pending segments become free once the root two generations after their emptying is
    /// durable.
    pub(crate) fn release_pending(&mut self, b: &mut Bufs) {
        for s in 0..self.segments() {
            if let SegState::Pending(g) = b.seg(s).state
                && self.root_gen >= u64::from(g) + 2
            {
                b.set_seg(s, SegEntry::FREE);
            }
        }
    }

    /// Appends `b.meta[..n]` as a table item (live until the next checkpoint).
    fn append_table(
        &mut self,
        b: &mut Bufs,
        kind: ItemKind,
        n: usize,
    ) -> Result<BlockPtr, IoError> {
        let hdr = ItemHeader {
            kind,
            flags: 0,
            lun: 0,
            lba: 0,
            blocks: 0,
            stored_len: 0,
            raw_len: n as u32,
            payload_crc: 0,
            seq: 0,
            pool: 0,
            addr: 0,
        };
        let payload = b.meta.get(..n).ok_or(bug!(IoError))?;
        let ptr = self.append(&mut b.log, b.sut, hdr, payload, true)?;
        self.counters.metadata_log_bytes += u64::from(ptr.len);
        Ok(ptr)
    }

    /// Appends the segment usage table itself; its own bytes are counted before it is encoded.
    fn append_sut(&mut self, b: &mut Bufs) -> Result<BlockPtr, IoError> {
        let len = self.segments() as usize * SEG_ENTRY_BYTES;
        let bytes = round_up(HEADER_BYTES + len, ITEM_ALIGN);
        self.ensure_room(&mut b.log, b.sut, bytes)?;
        let addr = self.log.head();
        let seg = self.seg_of(addr);
        seg_account(b.sut, seg, bytes as u32, true);
        let payload = b.sut.get(..len).ok_or(bug!(IoError))?;
        let hdr = ItemHeader {
            kind: ItemKind::SegmentTable,
            flags: 0,
            lun: 0,
            lba: 0,
            blocks: self.segments(),
            stored_len: len as u32,
            raw_len: len as u32,
            payload_crc: format::crc32c(payload),
            seq: self.log.next_item_seq,
            pool: self.conf.pool_tag,
            addr,
        };
        let mut h = [0u8; HEADER_BYTES];
        hdr.encode(&mut h).map_err(IoError::Corrupt)?;
        self.log.next_item_seq += 1;
        // `put` must not see the table mutably; it only reads it.
        let sut: &[u8] = b.sut;
        let payload = sut.get(..len).ok_or(bug!(IoError))?;
        self.put_item_bytes(&mut b.log, &h, payload, bytes)?;
        self.counters.metadata_log_bytes += bytes as u64;
        Ok(BlockPtr {
            addr,
            len: bytes as u32,
            crc: hdr.payload_crc,
        })
    }

    /// Scans the log from `root`'s cursor (see the module docs). With `apply`, extents and
    /// TRIMs update the map and the space counters. Without it (the first pass), the checked
    /// bytes of every item are assembled stripe by stripe in the stripe buffer: a stripe whose
    /// items needed reconstruction or intent-log patches is rewritten whole from them (so its
    /// members and parity agree again), and the stripe holding the end is left in the buffer.
    pub(crate) fn scan_log(
        &mut self,
        b: &mut Bufs,
        root: &Root,
        apply: bool,
        stop: Option<u64>,
    ) -> Result<LogEnd, IoError> {
        let sdb = self.sdb() as u64;
        let assemble = !apply;
        let mut cursor = root.log.head;
        let mut seq = root.log.next_item_seq;
        let mut res_idx = 0usize;
        let mut stripe_addr = cursor / sdb * sdb;
        let mut stripe_seq = root.log.next_stripe_seq;
        let mut items = 0;
        let mut lost = 0;
        let mut asm = Assembly {
            stripe: stripe_addr,
            dirty: false,
        };
        if assemble {
            b.log.stripe.fill(0);
        }
        loop {
            // Equality, not order: the reserved segments need not ascend (the log may wrap to a
            // segment at a lower address), and the second pass walks the first one's path.
            if stop == Some(cursor) {
                break;
            }
            let Some(&seg) = root.reserved.get(res_idx) else {
                break;
            };
            let seg_end = self.seg_start(seg) + self.segment_bytes();
            if cursor >= seg_end {
                let Some(&next) = root.reserved.get(res_idx + 1) else {
                    break;
                };
                // The stripes up to the segment's end were all written.
                stripe_seq += seg_end.saturating_sub(stripe_addr) / sdb;
                res_idx += 1;
                cursor = self.seg_start(next);
                stripe_addr = cursor;
                if assemble {
                    self.finish_stripe(b, &mut asm)?;
                    asm.stripe = cursor;
                }
                if apply {
                    // Its first item is the one expected next.
                    let _ = self.mark_used.push_back((next, seq));
                    self.apply_mark_used(b.sut);
                }
                continue;
            }
            self.recovery_healed = false;
            let Some((h, hoff)) = self.read_header(b, cursor, seq, (seg_end - cursor) as usize)
            else {
                if !apply
                    && self.before_durable_mark(stripe_seq, cursor.saturating_sub(stripe_addr))
                {
                    return Err(IoError::LogLost { addr: cursor });
                }
                break;
            };
            let mut src = hoff;
            let mut avail = HEADER_BYTES;
            if h.kind != ItemKind::Pad {
                let ptr = BlockPtr {
                    addr: cursor,
                    len: h.item_bytes() as u32,
                    crc: h.payload_crc,
                };
                let expect = Expect {
                    kind: h.kind,
                    lun: None,
                    lba: None,
                    level: None,
                    seq: Some(seq),
                };
                match self.load_item(b, ptr, expect) {
                    Ok((_, payload_off)) => {
                        src = payload_off - HEADER_BYTES;
                        avail = h.item_bytes();
                    }
                    // Before the newest flush mark an item no redundancy rebuilds is damage,
                    // not a torn tail: keep it (its blocks read as errors, never as the older
                    // data the map held) and go on to the items after it. Pass 2 follows the
                    // path pass 1 took.
                    Err(_)
                        if apply
                            || self.before_durable_mark(
                                stripe_seq,
                                cursor.saturating_sub(stripe_addr),
                            ) =>
                    {
                        lost += 1;
                    }
                    Err(_) => break,
                }
                if apply {
                    self.replay_item(b, &h)?;
                }
            }
            if assemble {
                let healed = self.recovery_healed;
                self.assemble_item(b, &mut asm, cursor, h.item_bytes(), src, avail, healed)?;
            }
            items += 1;
            cursor += h.item_bytes() as u64;
            seq += 1;
            if cursor >= stripe_addr + sdb {
                let n = (cursor - stripe_addr) / sdb;
                stripe_seq += n;
                stripe_addr += n * sdb;
            }
        }
        // A stripe the scan left exactly at its end is complete: finish it too.
        if assemble && cursor >= asm.stripe + sdb {
            self.finish_stripe(b, &mut asm)?;
        }
        Ok(LogEnd {
            addr: cursor,
            next_item_seq: seq,
            res_idx,
            stripe_addr,
            stripe_seq,
            items,
            lost,
            resynced: 0,
        })
    }

    /// Whether byte `off` of the stripe numbered `stripe_seq` lies before the position the
    /// newest flush mark found at import names (so it was durable before the crash).
    fn before_durable_mark(&self, stripe_seq: u64, off: u64) -> bool {
        self.durable_mark
            .is_some_and(|m| (stripe_seq, off) < (m.stripe_seq, u64::from(m.durable)))
    }

    /// Copies an item's checked bytes (`b.item[src..src + avail]`, zeros past `avail`) into the
    /// stripe being assembled, finishing stripes as the item crosses their ends.
    #[allow(clippy::too_many_arguments)]
    fn assemble_item(
        &mut self,
        b: &mut Bufs,
        asm: &mut Assembly,
        addr: u64,
        len: usize,
        src: usize,
        avail: usize,
        healed: bool,
    ) -> Result<(), IoError> {
        let sdb = self.sdb() as u64;
        let mut pos = addr;
        let end = addr + len as u64;
        while pos < end {
            while pos >= asm.stripe + sdb {
                self.finish_stripe(b, asm)?;
                asm.stripe += sdb;
            }
            asm.dirty |= healed;
            let upto = end.min(asm.stripe + sdb);
            let k = (pos - addr) as usize;
            let n = (upto - pos) as usize;
            let dst = b
                .log
                .stripe
                .get_mut((pos - asm.stripe) as usize..(upto - asm.stripe) as usize)
                .ok_or(bug!(IoError))?;
            // Bytes of the item we hold; the rest (a pad's payload) is zeros.
            let have = avail.saturating_sub(k).min(n);
            if have > 0 {
                let from = b.item.get(src + k..src + k + have).ok_or(bug!(IoError))?;
                dst.get_mut(..have)
                    .ok_or(bug!(IoError))?
                    .copy_from_slice(from);
            }
            dst.get_mut(have..).ok_or(bug!(IoError))?.fill(0);
            pos = upto;
        }
        Ok(())
    }

    /// Writes an assembled stripe back when its members did not hold its checked bytes.
    fn finish_stripe(&mut self, b: &mut Bufs, asm: &mut Assembly) -> Result<(), IoError> {
        if asm.dirty {
            let sdb = self.sdb() as u64;
            self.array
                .write_stripe(asm.stripe / sdb, b.log.stripe, b.log.scratch)
                .map_err(IoError::Device)?;
            self.array.flush();
        }
        asm.dirty = false;
        b.log.stripe.fill(0);
        Ok(())
    }

    /// Reads and checks the header of the item expected at `addr` with sequence `seq`; tries
    /// each member's reconstruction when the plain read does not check. Returns the header and
    /// where it starts in `b.item`.
    fn read_header(
        &mut self,
        b: &mut Bufs,
        addr: u64,
        seq: u64,
        room: usize,
    ) -> Option<(ItemHeader, usize)> {
        let (h, off, rebuilt) = self.find_header(b, addr, room, SeqRule::Exact(seq))?;
        self.recovery_healed |= !rebuilt.is_empty();
        Some((h, off))
    }

    /// Applies one logged item to the map during roll-forward.
    fn replay_item(&mut self, b: &mut Bufs, h: &ItemHeader) -> Result<(), IoError> {
        match h.kind {
            ItemKind::Extent => {
                if self
                    .luns
                    .get(h.lun as usize)
                    .is_none_or(|l| h.lba + u64::from(h.blocks) > l.rec.blocks)
                {
                    return Ok(());
                }
                let bytes = h.item_bytes() as u32;
                let seg = self.seg_of(h.addr);
                seg_account(b.sut, seg, bytes, true);
                for i in 0..h.blocks {
                    let e = MapEntry {
                        unit: h.addr / ITEM_ALIGN as u64,
                        stored_len: h.stored_len,
                        index: i as u8,
                        blocks: h.blocks as u8,
                        compressed: h.flags & format::FLAG_COMPRESSED != 0,
                        crc: h.payload_crc,
                        valid: true,
                    };
                    self.map_set(b, h.lun, h.lba + u64::from(i), e)?;
                }
                self.forget_bad(h.lun, h.lba, u64::from(h.blocks));
            }
            ItemKind::Trim
                if self
                    .luns
                    .get(h.lun as usize)
                    .is_some_and(|l| h.lba + u64::from(h.blocks) <= l.rec.blocks) =>
            {
                self.unmap_range(b, h.lun, h.lba, u64::from(h.blocks))?;
                self.forget_bad(h.lun, h.lba, u64::from(h.blocks));
            }
            _ => {}
        }
        Ok(())
    }

    /// Drops LBAs from the unrecoverable list once they are rewritten or trimmed.
    ///
    /// Only the rewritten blocks leave the list: a range they cover in part is trimmed (or split
    /// in two) to the blocks still lost. Dropping only ranges covered whole made a client that
    /// rewrites a lost range block by block (4 KiB writes, the usual case) read errors for the
    /// data it had just written, until a restart replayed the coalesced extent.
    pub(crate) fn forget_bad(&mut self, lun: u16, lba: u64, blocks: u64) {
        let end = lba.saturating_add(blocks);
        let mut i = 0;
        while let Some(r) = self.bad.get(i).copied() {
            let r_end = r.lba.saturating_add(u64::from(r.blocks));
            if r.lun != lun || r_end <= lba || r.lba >= end {
                i += 1;
                continue;
            }
            let head = (r.lba < lba).then(|| BadRange {
                lun,
                lba: r.lba,
                blocks: (lba - r.lba) as u32,
            });
            let tail = (r_end > end).then(|| BadRange {
                lun,
                lba: end,
                blocks: (r_end - end) as u32,
            });
            match (head, tail) {
                (Some(h), Some(t)) => {
                    if let Some(x) = self.bad.get_mut(i) {
                        *x = h;
                    }
                    // With the list full the tail goes unlisted: its extent's checksum still
                    // keeps its blocks from reading back as anything but their data or an error.
                    let _ = self.bad.push(t);
                    i += 1;
                }
                (Some(x), None) | (None, Some(x)) => {
                    if let Some(y) = self.bad.get_mut(i) {
                        *y = x;
                    }
                    i += 1;
                }
                (None, None) => {
                    self.bad.swap_remove(i);
                }
            }
        }
    }

    /// Loads the tables a root points at into the state; false if any is unreadable.
    pub(crate) fn load_tables(&mut self, b: &mut Bufs, root: &Root) -> Result<(), IoError> {
        // LUN table.
        let (h, off) = self.load_item(b, root.luns, Expect::table(ItemKind::LunTable))?;
        let body = b
            .item
            .get(off..off + h.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let recs: Vec<LunRecord, L> = format::decode_lun_table(body).map_err(IoError::Corrupt)?;
        // Bad list.
        let (h2, off2) = self.load_item(b, root.bad, Expect::table(ItemKind::BadList))?;
        let body2 = b
            .item
            .get(off2..off2 + h2.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let bad = format::decode_bad_list(body2).map_err(IoError::Corrupt)?;
        // Segment table.
        let len = self.segments() as usize * SEG_ENTRY_BYTES;
        let (h3, off3) = self.load_item(b, root.segments, Expect::table(ItemKind::SegmentTable))?;
        if h3.stored_len as usize != len {
            return Err(IoError::Corrupt(format::FormatError::Bounds));
        }
        let body3 = b.item.get(off3..off3 + len).ok_or(bug!(IoError))?;
        b.sut
            .get_mut(..len)
            .ok_or(bug!(IoError))?
            .copy_from_slice(body3);
        self.luns.clear();
        for r in recs {
            if r.depth != crate::pool::state::Lun::depth_for(r.blocks) {
                return Err(IoError::Corrupt(format::FormatError::Bounds));
            }
            self.luns
                .push(crate::pool::state::Lun { rec: r })
                .map_err(|_| bug!(IoError))?;
        }
        self.bad = Vec::new();
        for r in bad {
            let _ = self.bad.push(r);
        }
        self.table_ptrs = [root.luns, root.segments, root.bad];
        Ok(())
    }

    /// After import: which member slots the root's rebuild cursor covers.
    pub(crate) fn restore_rebuild(&mut self, root: &Root) {
        // The cursor belongs to the disk it was written for: a spare that took the slot since
        // (the membership is newer than the root) has rebuilt nothing yet.
        if let Some(rc) = root.rebuild
            && self
                .array
                .member(rc.disk as usize)
                .is_some_and(|m| m.state() == DiskState::Rebuilding)
            && self.conf.member_guids.get(usize::from(rc.disk)) == Some(&rc.guid)
        {
            let _ = self
                .array
                .set_rebuilt_below(rc.disk as usize, rc.next_stripe);
            self.start_rebuild_at(rc.disk, rc.next_stripe);
        }
        // A member recorded as rebuilding after the root was written (a spare taken, a disk
        // replaced, and power lost before the next checkpoint) has no cursor: start over.
        if self.rebuild.is_none()
            && let Some(d) = (0..self.geo().disks()).find(|&d| {
                self.array
                    .member(d)
                    .is_some_and(|m| m.state() == DiskState::Rebuilding)
            })
        {
            self.start_rebuild_at(d as u8, 0);
        }
        if let Some(sc) = root.scrub {
            self.scrub = Some(crate::pool::state::Scrub {
                next_segment: sc.next_segment,
                stripes: 0,
                repaired: sc.repaired,
                unrepairable: sc.unrepairable,
                saved: Some(sc.next_segment),
            });
        }
    }

    /// Recovery after the tables of `root` are loaded: intent-log scan, two roll-forward passes,
    /// reopening the log at its end. The caller then checkpoints.
    pub(crate) fn recover(&mut self, b: &mut Bufs, root: &Root) -> Result<LogEnd, IoError> {
        self.log.replaying = true;
        self.log.reserved = root.reserved.clone();
        self.log.res_idx = 0;
        self.zil_scan(b, root.log.next_stripe_seq)?;
        let end = self.scan_log(b, root, false, None)?;
        // Reopen the log at the end, so pass 2 can append (evicted map pages) after it.
        let sdb = self.sdb();
        self.log.stripe_addr = end.stripe_addr;
        // Sequence numbers jump past every number an item or stripe (intent-log records) written
        // before the crash could carry beyond the end just found: items the crash cut off still
        // lie past that end, and once the log has come round to their address again one would
        // pass every check of the next roll-forward (pool, address, CRC, the expected sequence
        // number) and bring back a write this recovery dropped. Only the root's reserved
        // segments can hold them, at most one item per ITEM_ALIGN bytes.
        let gap = root.reserved.len() as u64 * self.segment_bytes() / ITEM_ALIGN as u64 + 1;
        self.log.stripe_seq = end.stripe_seq.saturating_add(gap);
        self.log.fill = (end.addr - end.stripe_addr) as usize;
        self.log.next_item_seq = end.next_item_seq.saturating_add(gap);
        self.log.res_idx = end.res_idx;
        self.log.zil_done = 0;
        self.log.zil_records = 0;
        // The stripe buffer holds the checked prefix of the stripe at the end (pass 1); the
        // rest must be zeros (padding relies on it).
        b.log
            .stripe
            .get_mut(self.log.fill..)
            .ok_or(bug!(IoError))?
            .fill(0);
        if self.log.fill >= sdb {
            return Err(bug!(IoError));
        }
        // Segments the log went through are in use.
        for i in 0..=end.res_idx {
            if let Some(&s) = root.reserved.get(i) {
                // (Pass 2 records where each entered segment's use began.)
                let _ = self.mark_used.push_back((s, 0));
                self.apply_mark_used(b.sut);
            }
        }
        self.log.replaying = false;
        let replayed = self.scan_log(b, root, true, Some(end.addr))?;
        if replayed.addr != end.addr {
            return Err(IoError::Corrupt(format::FormatError::Crc));
        }
        let resynced = self.resync_log_tail(b, root, &end)?;
        Ok(LogEnd { resynced, ..end })
    }

    /// Closes the RAID write hole after a crash: the stripes the log wrote since the checkpoint
    /// (bounded by the root's reserved segments, which roll-forward has just read) may have
    /// reached some members and not others, leaving parity that disagrees with data the
    /// roll-forward accepted. A later member failure would reconstruct garbage from it. Each
    /// such stripe is checked and repaired like a scrub does (its items' checksums decide;
    /// parity is rewritten only when they all check). The open stripe at the end is rewritten
    /// whole when it fills, so it is not checked. Returns the stripes repaired.
    fn resync_log_tail(&mut self, b: &mut Bufs, root: &Root, end: &LogEnd) -> Result<u64, IoError> {
        let sdb = self.sdb() as u64;
        let mut resynced = 0;
        for i in 0..=end.res_idx {
            let Some(&seg) = root.reserved.get(i) else {
                break;
            };
            let seg_start = self.seg_start(seg);
            let seg_end = seg_start + self.segment_bytes();
            let from = if i == 0 {
                (root.log.head / sdb * sdb).clamp(seg_start, seg_end)
            } else {
                seg_start
            };
            let to = if i == end.res_idx {
                end.stripe_addr.clamp(seg_start, seg_end)
            } else {
                seg_end
            };
            let mut a = from;
            let mut walked = None;
            while a < to {
                let (repaired, _) = self.scrub_stripe(b, a / sdb, &mut walked, false)?;
                if repaired > 0 {
                    resynced += 1;
                }
                a += sdb;
            }
        }
        Ok(resynced)
    }
}
