//! Checkpoints.
//!
//! A checkpoint writes the dirty map pages (copy-on-write, leaves first), the LUN table, the
//! unrecoverable-LBA list and the segment usage table into the log, seals the open stripe,
//! flushes every member, and then writes a new root (generation + 1) into the root ring of every
//! member and flushes again. The root names the tables, where the log continues, and the
//! segments the log may use until the next checkpoint.
//!
//! Segments emptied by the cleaner are reused only once two later checkpoints are durable, so the
//! previous root's tables are never overwritten while it may still be needed as a fallback.
//! Import loads the newest root whose tables read back intact, falling back to older ones.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::{OpenError, Pool};
use crate::error::{IoError, bug};
use crate::format::{
    self, BlockPtr, HEADER_BYTES, ItemHeader, ItemKind, LogCursor, LunRecord, PAGE_PAYLOAD,
    ROOT_MAGIC, ROOT_SLOTS, Root, SLOT_BYTES, SegEntry, SegState,
};
use crate::log::{Expect, Pass};
use crate::raid::DiskSet;
use crate::volume::map::MapCache;

/// What the last checkpoint wrote.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Checkpoints {
    /// Its generation.
    pub root_gen: u64,
    /// Durable pointers of its tables (LUN table, segment table, bad list): dead once the
    /// next checkpoint is written.
    pub table_ptrs: [BlockPtr; 3],
    /// Its root is durable on every writable member (none missed the write or its flush).
    pub everywhere: bool,
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Member block of root ring slot `i`.
    pub(crate) fn root_lba(&self, i: u32) -> u64 {
        let per = (SLOT_BYTES / self.array.geometry().block_bytes()) as u64;
        u64::from(format::root_slot(i)) * per
    }

    /// Writes a checkpoint (see the module docs).
    pub(crate) fn write_checkpoint(&mut self) -> Result<(), IoError> {
        self.vol()?.recopy()?;
        let region = if self.log.ditto {
            self.plan_region()?
        } else {
            None
        };
        let (lun_ptr, bad_ptr, sut_ptr) = match region {
            Some(plan) => self.write_region(plan)?,
            None => self.write_single()?,
        };
        let mut io = self.io()?;
        io.seal_stripe()?;
        io.apply_mark_used();
        let durable = self.array.flush();
        self.log.stripes_flushed();
        self.after_membership_change()?;
        if durable.is_empty() {
            return Err(IoError::Faulted);
        }
        let reserved = self.next_window()?;
        let root = self.root(lun_ptr, sut_ptr, bad_ptr, reserved.clone());
        self.write_root(&root)?;
        self.ckpt.root_gen = root.root_gen;
        if let Some(sc) = self.scrub.as_mut() {
            sc.saved = Some(sc.next_segment);
        }
        self.log.set_window(reserved);
        self.ckpt.table_ptrs = [lun_ptr, sut_ptr, bad_ptr];
        self.release_pending()?;
        self.settle_cleaned()?;
        self.log.zil.obsolete();
        self.map.reset_pages_written();
        self.counters.checkpoints += 1;
        Ok(())
    }

    /// The previous tables die with this checkpoint; segments whose data all died are freed
    /// (after two more checkpoints).
    fn retire_tables(&mut self) -> Result<(), IoError> {
        let ptrs = self.ckpt.table_ptrs;
        let generation = self.ckpt.root_gen as u32;
        let mut io = self.io()?;
        for c in ptrs
            .iter()
            .filter(|p| !p.is_none())
            .flat_map(BlockPtr::copies)
        {
            let seg = io.log.seg_of(c.addr);
            io.segs().account(seg, c.len, false);
        }
        let window: Vec<u32, 16> = io.log.window().0.iter().copied().collect();
        let mut t = io.segs();
        for s in 0..t.segments() {
            let e = t.get(s);
            if e.state == SegState::Used && e.live == 0 && !window.contains(&s) {
                t.set(
                    s,
                    SegEntry {
                        live: 0,
                        state: SegState::Pending(generation),
                        first_seq: 0,
                    },
                );
            }
        }
        Ok(())
    }

    /// Appends the LUN table, the bad list and the segment table; returns their pointers.
    fn append_tables(&mut self) -> Result<(BlockPtr, BlockPtr, BlockPtr), IoError> {
        let mut recs: Vec<LunRecord, L> = Vec::new();
        for r in self.luns.records() {
            recs.push(r.clone()).map_err(|_| bug!(IoError))?;
        }
        let (mut io, meta) = self.io_and_meta()?;
        let n = format::encode_lun_table(&recs, meta).map_err(IoError::Corrupt)?;
        let lun_ptr = append_table(&mut io, meta, ItemKind::LunTable, n)?;
        let bad: Vec<format::BadRange, { format::BAD_LIST_MAX }> =
            self.luns.bad().iter().copied().collect();
        let (mut io, meta) = self.io_and_meta()?;
        let n = format::encode_bad_list(&bad, meta).map_err(IoError::Corrupt)?;
        let bad_ptr = append_table(&mut io, meta, ItemKind::BadList, n)?;
        let sut_ptr = io.append_segment_table()?;
        Ok((lun_ptr, bad_ptr, sut_ptr))
    }

    /// The metadata region this checkpoint writes (see [`LogIo::begin_region`]), opened: its
    /// pages and tables, the LUN table with room for its map roots to grow when the pages
    /// move. `None` when the current segment has no room for it ([`Self::write_single`] then
    /// writes one copy).
    ///
    /// [`LogIo::begin_region`]: crate::log::LogIo::begin_region
    fn plan_region(&mut self) -> Result<Option<Region>, IoError> {
        let slot = |n: usize| format::round_up(HEADER_BYTES + n, format::ITEM_ALIGN) as u64;
        // A map root's encoding grows by at most this when it changes (postcard varints).
        let root_growth = 32 * self.luns.slots();
        let pages = self.map.pages_to_write() as u64 * (HEADER_BYTES + PAGE_PAYLOAD) as u64;
        let lun = slot(self.encode_luns()? + root_growth);
        let bad = slot(self.encode_bad()?);
        let sut = self.log.segment_table_item().1 as u64;
        let Some(shift) = self.io()?.begin_region(pages + lun + bad + sut) else {
            return Ok(None);
        };
        Ok(Some(Region {
            shift,
            pages,
            lun,
            bad,
        }))
    }

    /// Writes the region `plan` opened: every page's and table's first copy, a pad to the
    /// stripe the ditto copies start, and the copies in the same order. Returns the tables'
    /// pointers (naming both copies).
    fn write_region(&mut self, plan: Region) -> Result<(BlockPtr, BlockPtr, BlockPtr), IoError> {
        let (start, _) = self.io()?.region().ok_or(bug!(IoError))?;
        let mut order: Vec<usize, P> = Vec::new();
        self.vol()?.write_page_firsts(&mut order)?;
        self.retire_tables()?;
        let lun_ptr = self.table_first(ItemKind::LunTable, plan.lun)?;
        let bad_ptr = self.table_first(ItemKind::BadList, plan.bad)?;
        let copies = plan.pages + u64::from(lun_ptr.len) + u64::from(bad_ptr.len);
        let mut io = self.io()?;
        let sut_len = io.log.segment_table_item().1 as u64;
        let sut_ptr = io.segment_table_first(copies + sut_len)?;
        io.pad_to(start + plan.shift)?;
        self.vol()?.write_page_copies(&order)?;
        self.table_copy(ItemKind::LunTable, lun_ptr, plan.lun)?;
        self.table_copy(ItemKind::BadList, bad_ptr, plan.bad)?;
        let mut io = self.io()?;
        io.segment_table_copy(sut_ptr)?;
        io.end_region();
        Ok((lun_ptr, bad_ptr, sut_ptr))
    }

    /// A checkpoint with one copy of its metadata: the pool's `metadata_copies` is 1, or the
    /// current segment has no room for the metadata region (moving to the next would pad this
    /// one's rest, which on a nearly full pool costs more than it saves). In the second case
    /// [`Counters::metadata_single_copies`] counts them and the pages go on the list the next
    /// checkpoint writes anew with two; the tables are new at every checkpoint.
    ///
    /// [`Counters::metadata_single_copies`]: crate::format::Counters::metadata_single_copies
    fn write_single(&mut self) -> Result<(BlockPtr, BlockPtr, BlockPtr), IoError> {
        let mut order: Vec<usize, P> = Vec::new();
        let mut vol = self.vol()?;
        vol.write_page_firsts(&mut order)?;
        if vol.io.log.ditto {
            vol.note_uncopied(&order);
            vol.io.counters.metadata_single_copies += order.len() as u64;
        }
        self.retire_tables()?;
        self.append_tables()
    }

    /// The LUN table, encoded into the metadata buffer; its length.
    fn encode_luns(&mut self) -> Result<usize, IoError> {
        let mut recs: Vec<LunRecord, L> = Vec::new();
        for r in self.luns.records() {
            recs.push(r.clone()).map_err(|_| bug!(IoError))?;
        }
        let (_, meta) = self.io_and_meta()?;
        format::encode_lun_table(&recs, meta).map_err(IoError::Corrupt)
    }

    /// The lost-block list, encoded into the metadata buffer; its length.
    fn encode_bad(&mut self) -> Result<usize, IoError> {
        let bad: Vec<format::BadRange, { format::BAD_LIST_MAX }> =
            self.luns.bad().iter().copied().collect();
        let (_, meta) = self.io_and_meta()?;
        format::encode_bad_list(&bad, meta).map_err(IoError::Corrupt)
    }

    /// Table `kind` encoded again (it has not changed since it was planned or first written).
    fn encode_table(&mut self, kind: ItemKind) -> Result<usize, IoError> {
        if kind == ItemKind::LunTable {
            self.encode_luns()
        } else {
            self.encode_bad()
        }
    }

    /// Table `kind`'s first copy in the region, padded to its `slot` bytes; its pointer.
    fn table_first(&mut self, kind: ItemKind, slot: u64) -> Result<BlockPtr, IoError> {
        let n = self.encode_table(kind)?;
        let (mut io, meta) = self.io_and_meta()?;
        let payload = meta.get(..n).ok_or(bug!(IoError))?;
        let ptr = io.append_first(table_header(kind, n), payload, true)?;
        io.counters.metadata_log_bytes += u64::from(ptr.len);
        io.pad_to(ptr.addr + slot)?;
        Ok(ptr)
    }

    /// Table `kind`'s ditto copy where `first` says, padded to its `slot` bytes.
    fn table_copy(&mut self, kind: ItemKind, first: BlockPtr, slot: u64) -> Result<(), IoError> {
        let n = self.encode_table(kind)?;
        let (mut io, meta) = self.io_and_meta()?;
        let payload = meta.get(..n).ok_or(bug!(IoError))?;
        io.append_copy_at(first, table_header(kind, n), payload)?;
        io.counters.metadata_log_bytes += u64::from(first.len);
        io.pad_to(first.ditto.ok_or(bug!(IoError))? + slot)
    }

    /// The window after this checkpoint: the current segment, then free ones.
    fn next_window(&mut self) -> Result<Vec<u32, 16>, IoError> {
        let want = usize::from(self.cfg.reserved_segments).clamp(2, 16);
        let mut io = self.io()?;
        let cur = io.log.current_segment().ok_or(bug!(IoError))?;
        let mut reserved: Vec<u32, 16> = Vec::new();
        let _ = reserved.push(cur);
        let t = io.segs();
        for s in 0..t.segments() {
            if reserved.len() >= want {
                break;
            }
            if s != cur && t.get(s).state == SegState::Free {
                let _ = reserved.push(s);
            }
        }
        Ok(reserved)
    }

    /// The root this checkpoint writes.
    fn root(
        &self,
        luns: BlockPtr,
        segments: BlockPtr,
        bad: BlockPtr,
        reserved: Vec<u32, 16>,
    ) -> Root {
        let c: LogCursor = self.log.cursor();
        Root {
            magic: ROOT_MAGIC,
            version: format::FORMAT_VERSION,
            pool_uuid: self.members.conf.pool_uuid,
            root_gen: self.ckpt.root_gen + 1,
            config_gen: self.members.conf.generation,
            log: c,
            reserved,
            luns,
            segments,
            bad,
            rebuild: self.rebuild.map(|r| format::RebuildCursor {
                disk: r.disk,
                next_stripe: r.next_stripe,
                guid: self
                    .members
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
        }
    }

    /// Writes `root` into its ring slot on every member and flushes; fails when no member
    /// that took it is durable. Records whether every writable member took it.
    fn write_root(&mut self, root: &Root) -> Result<(), IoError> {
        let lba = self.root_lba((root.root_gen % u64::from(ROOT_SLOTS)) as u32);
        let (io, meta) = self.io_and_meta()?;
        let slot = meta.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
        root.encode(slot).map_err(IoError::Corrupt)?;
        let mut written = DiskSet::EMPTY;
        for d in 0..io.array.geometry().disks() {
            if io.array.disk_write(d, lba, slot).is_ok() {
                written = written.with(d);
                io.counters.label_bytes += SLOT_BYTES as u64;
            }
        }
        let took = DiskSet(self.array.flush().0 & written.0);
        self.ckpt.everywhere =
            (0..self.array.geometry().disks()).all(|d| took.contains(d) || !self.array.writable(d));
        self.after_membership_change()?;
        if took.is_empty() {
            return Err(IoError::Faulted);
        }
        Ok(())
    }

    /// Pending segments become free once the root two generations after their emptying is
    /// durable.
    pub(crate) fn release_pending(&mut self) -> Result<(), IoError> {
        let root_gen = self.ckpt.root_gen;
        let mut io = self.io()?;
        let mut t = io.segs();
        for s in 0..t.segments() {
            if let SegState::Pending(g) = t.get(s).state
                && root_gen >= u64::from(g) + 2
            {
                t.set(s, SegEntry::FREE);
            }
        }
        Ok(())
    }

    /// Bytes a checkpoint would append now: dirty map pages and the ancestors their new
    /// copies dirty, the LUN table, the bad list and the segment table (approximately, to a
    /// sector or two); with ditto copies twice that and the pad between the halves.
    pub(crate) fn checkpoint_bytes(&self) -> usize {
        let pages = self.map.pages_to_write();
        let tables = format::round_up(64 + 16 + self.luns.slots() * 72, format::ITEM_ALIGN)
            + format::round_up(64 + 16 + self.luns.bad().len() * 16, format::ITEM_ALIGN)
            + self.log.segment_table_item().1;
        let once = pages * 4096 + tables;
        if self.log.ditto {
            2 * once + self.array.geometry().stripe_data_bytes()
        } else {
            once
        }
    }

    /// Whether checkpointing now would pad little: the checkpoint's own bytes end within one
    /// extent of a stripe boundary.
    pub(crate) fn checkpoint_fits_well(&self) -> bool {
        let sdb = self.log.sdb();
        let end = (self.log.fill() + self.checkpoint_bytes()) % sdb;
        let pad = if end == 0 { 0 } else { sdb - end };
        pad <= super::arena::max_item_bytes(&self.cfg)
    }

    /// Finds the newest root on any member whose tables load; also returns the log cursor of
    /// the newest root newer than that one, if one was passed over, and the map pages under
    /// the root found that cannot be read (counted only as `walk` asks). With
    /// [`MapWalk::PreferWhole`] a root whose map pages cannot all be read is passed over too,
    /// for the newest older one whose map reads whole (the log after it is rolled forward);
    /// when none does, the newest root whose tables load is taken after all.
    pub(crate) fn find_root(
        &mut self,
        walk: MapWalk,
    ) -> Result<(Root, Option<LogCursor>, u64), OpenError> {
        let mut roots: Vec<Root, 8> = Vec::new();
        for d in 0..self.array.geometry().disks() {
            for i in 0..ROOT_SLOTS {
                let lba = self.root_lba(i);
                if let Some(r) = self.read_root(d, lba)
                    && !roots.iter().any(|x| x.root_gen == r.root_gen)
                {
                    keep_newest(&mut roots, r);
                }
            }
        }
        roots.sort_unstable_by_key(|r| core::cmp::Reverse(r.root_gen));
        let mut skipped = None;
        let mut first = None;
        for r in roots {
            if self.load_tables(&r).is_ok() {
                // A walk that fails for another reason than a page's read (a map cache too
                // small for it) leaves the root as the tables found it.
                let lost = match walk {
                    MapWalk::Skip => 0,
                    _ => self.lost_map_pages().unwrap_or(0),
                };
                if lost == 0 || walk != MapWalk::PreferWhole {
                    return Ok((r, skipped, lost));
                }
                if first.is_none() {
                    first = Some((r.clone(), skipped, lost));
                }
            }
            skipped.get_or_insert(r.log);
        }
        let (r, skipped, lost) = first.ok_or(OpenError::NoValidRoot)?;
        self.load_tables(&r).map_err(OpenError::Io)?;
        Ok((r, skipped, lost))
    }

    /// Map pages of every LUN that cannot be read, read as import's first pass reads (nothing
    /// healed or written). The walk's pages leave the cache after: import loads them again.
    pub(crate) fn lost_map_pages(&mut self) -> Result<u64, IoError> {
        let mut vol = self.vol_in(Pass::FindEnd { healed: false })?;
        let ids: Vec<u16, L> = vol.luns.records().map(|l| l.id).collect();
        let lost = ids
            .iter()
            .try_fold(0u64, |n, &id| Ok(n.saturating_add(vol.lost_map_pages(id)?)));
        self.map = MapCache::default();
        lost
    }

    /// The newest root on member `d` alone, if any slot of its ring holds one.
    pub(crate) fn newest_root_on(&mut self, d: usize) -> Option<Root> {
        (0..ROOT_SLOTS)
            .filter_map(|i| {
                let lba = self.root_lba(i);
                self.read_root(d, lba)
            })
            .max_by_key(|r| r.root_gen)
    }

    /// The root in member `d`'s slot at `lba`, if it decodes, names this pool and fits its
    /// geometry ([`Root::fits`]).
    fn read_root(&mut self, d: usize, lba: u64) -> Option<Root> {
        self.read_slot(d, lba).ok()?;
        self.slot_root()
    }

    /// What member `d`'s ring slot for root generation `generation` holds; `Err` when it
    /// cannot be read (a bad sector, not a missed checkpoint).
    pub(crate) fn root_slot_on(&mut self, d: usize, generation: u64) -> Result<RootSlot, IoError> {
        let lba = self.root_lba((generation % u64::from(ROOT_SLOTS)) as u32);
        self.read_slot(d, lba)?;
        if let Some(r) = self.slot_root() {
            return Ok(RootSlot::Root {
                root_gen: r.root_gen,
                config_gen: r.config_gen,
            });
        }
        let (_, meta) = self.io_and_meta()?;
        let blank = meta
            .get(..SLOT_BYTES)
            .is_some_and(|b| b.iter().all(|&x| x == 0));
        Ok(if blank {
            RootSlot::Blank
        } else {
            RootSlot::Other
        })
    }

    /// Reads member `d`'s slot at `lba` into the metadata buffer.
    fn read_slot(&mut self, d: usize, lba: u64) -> Result<(), IoError> {
        let (io, meta) = self.io_and_meta()?;
        let slot = meta.get_mut(..SLOT_BYTES).ok_or(bug!(IoError))?;
        io.array.disk_read(d, lba, slot).map_err(IoError::Device)
    }

    /// The root [`Self::read_slot`] read, if it decodes, names this pool and fits its
    /// geometry ([`Root::fits`]).
    fn slot_root(&mut self) -> Option<Root> {
        let uuid = self.members.conf.pool_uuid;
        let layout = self.members.conf.layout;
        let geo = self.members.conf.geometry;
        let sdb = geo.stripe_data_bytes() as u64;
        let (_, meta) = self.io_and_meta().ok()?;
        Root::decode(meta.get(..SLOT_BYTES)?)
            .ok()
            .filter(|r| r.pool_uuid == uuid && r.fits(&layout, geo.stripes(), geo.disks(), sdb))
    }

    /// Loads the tables a root points at (import's first pass: nothing is healed).
    pub(crate) fn load_tables(&mut self, root: &Root) -> Result<(), IoError> {
        let mut io = self.io_in(Pass::FindEnd { healed: false })?;
        let (h, off, _) = io.load_item_copies(root.luns, Expect::table(ItemKind::LunTable))?;
        let body = io
            .item
            .get(off..off + h.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let recs: Vec<LunRecord, L> = format::decode_lun_table(body).map_err(IoError::Corrupt)?;
        let (h2, off2, _) = io.load_item_copies(root.bad, Expect::table(ItemKind::BadList))?;
        let body2 = io
            .item
            .get(off2..off2 + h2.stored_len as usize)
            .ok_or(bug!(IoError))?;
        let bad = format::decode_bad_list(body2).map_err(IoError::Corrupt)?;
        let len = io.log.segment_table_item().0;
        let (h3, off3, _) =
            io.load_item_copies(root.segments, Expect::table(ItemKind::SegmentTable))?;
        if h3.stored_len as usize != len {
            return Err(IoError::Corrupt(format::FormatError::Bounds));
        }
        io.load_segment_table(off3, len)?;
        self.luns.load(recs, &bad).map_err(IoError::Corrupt)?;
        self.ckpt.table_ptrs = [root.luns, root.segments, root.bad];
        Ok(())
    }
}

/// Whether [`Pool::find_root`] walks the map under the root it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapWalk {
    /// No walk.
    Skip,
    /// Count the map pages that cannot be read.
    Count,
    /// Count them, and pass over a root with any for an older one whose map reads whole.
    PreferWhole,
}

/// What a slot of a member's root ring holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RootSlot {
    /// A root of this pool: its generation and the configuration generation it was written
    /// with.
    Root { root_gen: u64, config_gen: u64 },
    /// Zeros: never written.
    Blank,
    /// Anything else (another pool's root, a torn or rotten write).
    Other,
}

/// Keeps the eight newest roots seen.
fn keep_newest(roots: &mut Vec<Root, 8>, r: Root) {
    if roots.is_full() {
        match roots.iter().enumerate().min_by_key(|(_, x)| x.root_gen) {
            Some((mi, x)) if x.root_gen < r.root_gen => {
                roots.swap_remove(mi);
            }
            _ => return,
        }
    }
    let _ = roots.push(r);
}

/// What a checkpoint's metadata region holds ([`Pool::plan_region`]): the shift from each
/// first copy to its ditto, the bytes of its pages, and the slots of the LUN table and the
/// lost-block list.
#[derive(Debug, Clone, Copy)]
struct Region {
    shift: u64,
    pages: u64,
    lun: u64,
    bad: u64,
}

/// The header of a table item of `n` payload bytes (the log fills in the rest).
const fn table_header(kind: ItemKind, n: usize) -> ItemHeader {
    ItemHeader {
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
    }
}

/// Appends `meta[..n]` as a table item, one copy (live until the next checkpoint).
fn append_table<D: BlockDevice, const N: usize>(
    io: &mut crate::log::LogIo<'_, D, N>,
    meta: &[u8],
    kind: ItemKind,
    n: usize,
) -> Result<BlockPtr, IoError> {
    let hdr = table_header(kind, n);
    let payload = meta.get(..n).ok_or(bug!(IoError))?;
    let ptr = io.append(hdr, payload, true)?;
    io.counters.metadata_log_bytes += u64::from(ptr.len);
    io.counters.metadata_single_copies += u64::from(io.log.ditto);
    Ok(ptr)
}
