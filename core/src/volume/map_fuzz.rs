//! A model-based check of the map cache: the body of the `map_cache` fuzz target and of the
//! core's seeded property tests, so both run the same checks.
//!
//! A sequence of operations (set, get, unmap, write-back, restart, LUN deletion, creation and
//! resize across tree heights,
//! the cleaner's page lookup and relocation) runs against `MapCache<P>` over an in-memory page
//! store and against a `HashMap` of the entries that should be mapped. Checked after every
//! operation: each answer against the model; CacheFull only on a LUN whose tree is deeper than
//! the cache has slots; the per-LUN space counts the store is told about (mapped blocks, the
//! extents' live bytes) against sums over the model. Checked by the store while the cache works
//! it: every page read is the newest copy and still live; every page written holds exactly the
//! model's entries (leaves) or the newest copy of each child (index pages); nothing live is
//! released twice and no current copy is released. Checked after every write-back, straight
//! from the store: the trees reachable from the LUN roots map exactly the model, and the live
//! pages are exactly the reachable ones (no leaked or lost page); after a restart (a fresh
//! cache over the same store), every block reads back.
//!
//! Not API: compiled for the core's tests and, with the private feature `_test` and `std`, for
//! the fuzz target and the cross-crate tests.

use std::collections::{HashMap, HashSet};
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use super::map::{MapCache, PageKey, PageStore};
use crate::error::IoError;
use crate::format::{
    BlockPtr, ENTRY_BYTES, FANOUT, FormatError, HEADER_BYTES, ItemHeader, ItemKind, MapEntry,
    PAGE_PAYLOAD, crc32c,
};

#[cfg(test)]
mod tests;

/// Most operations [`check_bytes`] decodes from one input.
pub const MAX_OPS: usize = 512;

/// Cache sizes a run can use: 2 and 3 are below or at a depth-3 tree's need (CacheFull), the
/// rest evict and pin.
const CACHE_SIZES: [usize; 6] = [2, 3, 4, 6, 8, 16];

/// Bytes of a map page item in the log (header and payload).
const PAGE_ITEM: u32 = (HEADER_BYTES + PAGE_PAYLOAD) as u32;

/// A block address: `off` blocks from one of four spots of a LUN (its start, its end counting
/// back, a third and two thirds in), taken modulo the LUN's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At {
    pub spot: u8,
    pub off: u16,
}

impl At {
    fn lba(self, blocks: u64) -> u64 {
        let off = u64::from(self.off);
        let lba = match self.spot % 4 {
            0 => off,
            1 => blocks.saturating_sub(1 + off),
            2 => blocks / 3 + off,
            _ => blocks / 3 * 2 + off,
        };
        lba % blocks.max(1)
    }
}

/// A LUN size: tree depth 1..=3 (`depth` is taken modulo 3) and a point `frac` in that depth's
/// range of sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Size {
    pub depth: u8,
    pub frac: u32,
}

impl Size {
    fn blocks(self) -> u64 {
        let d = u32::from(self.depth % 3);
        let fan = FANOUT as u64;
        let lo = if d == 0 { 1 } else { fan.pow(d) + 1 };
        let hi = fan.pow(d + 1);
        lo + u64::from(self.frac) % (hi - lo + 1)
    }
}

/// One step of a run. LUN numbers are taken modulo the run's LUN count; steps on a deleted
/// LUN (other than [`Op::Create`]) are skipped, as the pool would refuse them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `map_set` of the block at `at` to the entry made from `tag`.
    Set { lun: u8, at: At, tag: u32 },
    /// `map_get` of the block at `at`.
    Get { lun: u8, at: At },
    /// `unmap_range` of `blocks` blocks (at least one) from `at`, clipped to the LUN.
    Unmap { lun: u8, at: At, blocks: u16 },
    /// `write_dirty_pages`, then the store's trees are checked.
    WriteBack,
    /// A restart: write-back, then a fresh cache (with garbage in its page slots) over the
    /// same store; every mapped block and its neighbours must read back.
    Remount,
    /// LUN deletion: `release_lun_map`.
    Delete { lun: u8 },
    /// A deleted LUN comes back with a new size (and possibly a new depth).
    Create { lun: u8, size: Size },
    /// A LUN takes a new size, as `Pool::resize_lun` does: the blocks past the new end are
    /// unmapped, then `resize` (pages past the end released, height changed).
    Resize { lun: u8, size: Size },
    /// `page_ptr` of the page at `level` over the block at `at` (or, with `past`, the first
    /// page index past the LUN's end).
    PagePtr {
        lun: u8,
        level: u8,
        at: At,
        past: bool,
    },
    /// The cleaner moving a page: `page_ptr`, and if the page exists, load it and mark it dirty.
    Relocate { lun: u8, level: u8, at: At },
}

/// A deliberately broken store, to show the checks can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Fault {
    #[default]
    None,
    /// Page write number `n` (from 0) is acknowledged but its bytes are lost (the page reads
    /// back as zeros, with a checksum that matches them).
    DropWrite(u64),
    /// Release number `n` (from 0) is ignored: the page's space leaks.
    KeepReleased(u64),
}

/// The map entry a [`Op::Set`] with `tag` writes: fields spread from the tag, all within what
/// the entry encoding keeps.
pub(crate) fn entry_of(tag: u32) -> MapEntry {
    let t = u64::from(tag);
    let blocks = 1 + (tag % 32) as u8;
    MapEntry {
        unit: (t * 0x9e37 + 1) & 0xffff_ffff_ffff,
        stored_len: 64 + (tag.rotate_left(7) % (32 * 4096)),
        index: (tag >> 8) as u8 % blocks,
        blocks,
        compressed: tag & 0x100 != 0,
        crc: tag.wrapping_mul(0x2c1b_3c6d),
        block_crc: tag & 0x300 == 0x200,
        ditto: None,
        valid: true,
    }
}

/// Tree depth of a LUN of `blocks` blocks (the smallest with `FANOUT^depth >= blocks`).
fn depth_of(blocks: u64) -> u8 {
    let mut d = 1u8;
    let mut cover = FANOUT as u64;
    while cover < blocks {
        cover = cover.saturating_mul(FANOUT as u64);
        d += 1;
    }
    d
}

/// Pages at `level` of a tree over `blocks` blocks.
fn pages_at(blocks: u64, level: u8) -> u64 {
    let span = (FANOUT as u64).saturating_pow(u32::from(level) + 1);
    blocks.div_ceil(span).max(1)
}

/// A block's share of its extent's log bytes (what the pool counts as live per block).
fn share(e: MapEntry) -> u64 {
    u64::from(e.share(e.item_bytes() as u32))
}

type Key = (u16, u8, u64);

fn key_of(k: PageKey) -> Key {
    (k.lun, k.level, k.index)
}

#[derive(Debug, Clone, Copy)]
struct LunRec {
    blocks: u64,
    depth: u8,
    root: BlockPtr,
}

#[derive(Debug)]
struct StoredPage {
    key: Key,
    payload: Vec<u8>,
    crc: u32,
    live: bool,
}

/// What an operation may leave in between: entries of an unmap range may be old or unmapped
/// while it runs; a LUN being deleted releases its current pages.
#[derive(Debug, Clone, Copy)]
enum Flux {
    Unmap {
        lun: u16,
        lo: u64,
        hi: u64,
    },
    Release {
        lun: u16,
    },
    /// A change of height to `depth` levels for a LUN of `blocks` blocks.
    Resize {
        lun: u16,
        depth: u8,
        blocks: u64,
    },
}

/// Map pages in memory, with the accounting the pool keeps.
#[derive(Debug, Default)]
struct MemStore {
    luns: Vec<LunRec>,
    pages: HashMap<u64, StoredPage>,
    next_addr: u64,
    /// The newest copy of each page of the LUNs as they are now.
    newest: HashMap<Key, BlockPtr>,
    /// Per LUN: mapped blocks and the extents' live bytes, as `entry_changed` reported them.
    mapped: Vec<u64>,
    extent_bytes: Vec<u64>,
    writes: u64,
    releases: u64,
    fault: Fault,
    /// What the store saw the cache do wrong (the first few).
    violations: Vec<String>,
}

impl MemStore {
    fn violation(&mut self, what: String) {
        if self.violations.len() < 4 {
            self.violations.push(what);
        }
    }
}

/// The store as one cache call sees it: with the model, for checking what is written.
struct View<'a> {
    s: &'a mut MemStore,
    model: &'a HashMap<(u16, u64), MapEntry>,
    flux: Option<Flux>,
}

impl View<'_> {
    fn releasing(&self, lun: u16) -> bool {
        matches!(self.flux, Some(Flux::Release { lun: l }) if l == lun)
    }

    /// The new depth and size of `lun`, while it changes height.
    fn resizing(&self, lun: u16) -> Option<(u8, u64)> {
        match self.flux {
            Some(Flux::Resize {
                lun: l,
                depth,
                blocks,
            }) if l == lun => Some((depth, blocks)),
            _ => None,
        }
    }

    /// Whether page `k` is outside the shape its LUN is changing to (a change of height may
    /// release it).
    fn outside_new_shape(&self, k: Key) -> bool {
        self.resizing(k.0)
            .is_some_and(|(depth, blocks)| k.1 >= depth || k.2 >= pages_at(blocks, k.1))
    }

    /// What entry `i` of the page `k` should hold now; `None` when it need not be checked.
    fn expected(&self, k: Key, i: u64) -> Option<(MapEntry, bool)> {
        let (lun, level, index) = k;
        if self.releasing(lun) {
            return None;
        }
        let child = index * FANOUT as u64 + i;
        if level > 0 {
            let e = self.s.newest.get(&(lun, level - 1, child));
            let pruned = self.outside_new_shape((lun, level - 1, child));
            return Some((e.map_or(MapEntry::NONE, |p| MapEntry::from_ptr(*p)), pruned));
        }
        let want = self.model.get(&(lun, child)).copied();
        let unmapping = matches!(self.flux,
            Some(Flux::Unmap { lun: l, lo, hi }) if l == lun && (lo..hi).contains(&child));
        Some((want.unwrap_or(MapEntry::NONE), unmapping))
    }

    /// Checks a page the cache writes: its header names a page of a live LUN, and it holds
    /// what the model says.
    fn check_write(&mut self, k: Key, hdr: &ItemHeader, payload: &[u8]) {
        let rec = self.s.luns.get(k.0 as usize).copied();
        let new_depth = self.resizing(k.0).map_or(0, |(d, _)| d);
        let fits = rec.is_some_and(|r| {
            r.blocks > 0 && k.1 < r.depth.max(new_depth) && k.2 < pages_at(r.blocks, k.1)
        });
        if hdr.kind != ItemKind::MapPage || payload.len() != PAGE_PAYLOAD || !fits {
            self.s
                .violation(format!("write of page {k:?}: bad header {hdr:?} or size"));
            return;
        }
        for i in 0..FANOUT as u64 {
            let got = MapEntry::decode(payload, i as usize * ENTRY_BYTES);
            let Some((want, or_none)) = self.expected(k, i) else {
                return;
            };
            if got != want && !(or_none && got == MapEntry::NONE) {
                self.s.violation(format!(
                    "page {k:?} written with entry {i} = {got:?}, expected {want:?}"
                ));
                return;
            }
        }
    }
}

impl PageStore for View<'_> {
    fn read_page(&mut self, key: PageKey, ptr: BlockPtr, out: &mut [u8]) -> Result<bool, IoError> {
        let k = key_of(key);
        let newest = self.s.newest.get(&k) == Some(&ptr);
        let page = self
            .s
            .pages
            .get(&ptr.addr)
            .filter(|p| p.live && p.key == k && p.crc == ptr.crc && ptr.len == PAGE_ITEM);
        match page {
            Some(p) if newest && out.len() == p.payload.len() => {
                out.copy_from_slice(&p.payload);
                Ok(false)
            }
            _ => {
                self.s.violation(format!(
                    "read of page {k:?} at {ptr:?}: not its live newest copy"
                ));
                Err(IoError::Corrupt(FormatError::Crc))
            }
        }
    }

    fn write_page(&mut self, hdr: ItemHeader, payload: &[u8]) -> Result<BlockPtr, IoError> {
        let k = (hdr.lun, hdr.blocks as u8, hdr.lba);
        self.check_write(k, &hdr, payload);
        let n = self.s.writes;
        self.s.writes += 1;
        let mut bytes = payload.to_vec();
        if self.s.fault == Fault::DropWrite(n) {
            bytes.fill(0);
        }
        let crc = crc32c(&bytes);
        let addr = self.s.next_addr;
        self.s.next_addr += u64::from(PAGE_ITEM);
        let ptr = BlockPtr {
            addr,
            len: PAGE_ITEM,
            crc,
            ditto: None,
        };
        let page = StoredPage {
            key: k,
            payload: bytes,
            crc,
            live: true,
        };
        self.s.pages.insert(addr, page);
        self.s.newest.insert(k, ptr);
        Ok(ptr)
    }

    fn release(&mut self, ptr: BlockPtr) {
        let n = self.s.releases;
        self.s.releases += 1;
        let Some(p) = self.s.pages.get(&ptr.addr).filter(|p| p.live) else {
            self.s
                .violation(format!("release of {ptr:?}: not a live page"));
            return;
        };
        let key = p.key;
        if self.s.newest.get(&key) == Some(&ptr)
            && !self.releasing(key.0)
            && !self.outside_new_shape(key)
        {
            self.s
                .violation(format!("release of page {key:?}'s current copy"));
        }
        if self.s.fault == Fault::KeepReleased(n) {
            return;
        }
        if let Some(p) = self.s.pages.get_mut(&ptr.addr) {
            p.live = false;
        }
    }

    fn entry_changed(&mut self, lun: u16, old: MapEntry, new: MapEntry) -> Result<(), IoError> {
        let i = lun as usize;
        let (Some(m), Some(b)) = (self.s.mapped.get_mut(i), self.s.extent_bytes.get_mut(i)) else {
            return Err(IoError::NoSuchLun);
        };
        let mut ok = true;
        if old.valid {
            ok = m.checked_sub(1).is_some() && b.checked_sub(share(old)).is_some();
            *m = m.saturating_sub(1);
            *b = b.saturating_sub(share(old));
        }
        if new.valid {
            *m += 1;
            *b += share(new);
        }
        if !ok {
            self.s
                .violation(format!("LUN {lun}: counts went below zero"));
        }
        Ok(())
    }

    fn root(&self, lun: u16) -> Result<BlockPtr, IoError> {
        Ok(self
            .s
            .luns
            .get(lun as usize)
            .ok_or(IoError::NoSuchLun)?
            .root)
    }

    fn set_root(&mut self, lun: u16, ptr: BlockPtr) -> Result<(), IoError> {
        // While the height changes, the root may be the newest copy of any level's page 0.
        let top = match self.s.pages.get(&ptr.addr) {
            Some(p) if self.resizing(lun).is_some() && p.key.0 == lun => p.key.1,
            _ => self.top(lun)?,
        };
        let newest = self.s.newest.get(&(lun, top, 0)).copied();
        let emptied = self.releasing(lun) || self.resizing(lun).is_some();
        if newest != Some(ptr) && !(ptr.is_none() && emptied) {
            self.s.violation(format!(
                "LUN {lun}: root set to {ptr:?}, newest copy is {newest:?}"
            ));
        }
        self.s
            .luns
            .get_mut(lun as usize)
            .ok_or(IoError::NoSuchLun)?
            .root = ptr;
        Ok(())
    }

    fn top(&self, lun: u16) -> Result<u8, IoError> {
        let r = self.s.luns.get(lun as usize).ok_or(IoError::NoSuchLun)?;
        Ok(r.depth.saturating_sub(1))
    }

    fn set_top(&mut self, lun: u16, top: u8) -> Result<(), IoError> {
        let r = self
            .s
            .luns
            .get_mut(lun as usize)
            .ok_or(IoError::NoSuchLun)?;
        r.depth = top + 1;
        Ok(())
    }

    fn size(&self, lun: u16) -> Option<(u64, u8)> {
        let r = self.s.luns.get(lun as usize).filter(|r| r.blocks > 0)?;
        Some((r.blocks, r.depth.saturating_sub(1)))
    }
}

/// The cache, its page slots, the store and the model.
struct Run<const P: usize> {
    cache: MapCache<P>,
    pages: Vec<u8>,
    store: MemStore,
    model: HashMap<(u16, u64), MapEntry>,
}

impl<const P: usize> Run<P> {
    fn new(luns: &[Size], fault: Fault) -> Self {
        let recs: Vec<LunRec> = luns
            .iter()
            .map(|s| LunRec {
                blocks: s.blocks(),
                depth: depth_of(s.blocks()),
                root: BlockPtr::NONE,
            })
            .collect();
        let store = MemStore {
            mapped: vec![0; recs.len()],
            extent_bytes: vec![0; recs.len()],
            luns: recs,
            fault,
            ..MemStore::default()
        };
        Run {
            cache: MapCache::default(),
            pages: vec![0; P * PAGE_PAYLOAD],
            store,
            model: HashMap::new(),
        }
    }

    /// The cache, the store for one call, and the page slots.
    fn parts(&mut self, flux: Option<Flux>) -> (&mut MapCache<P>, View<'_>, &mut [u8]) {
        let view = View {
            s: &mut self.store,
            model: &self.model,
            flux,
        };
        (&mut self.cache, view, &mut self.pages)
    }

    /// LUN `l` (modulo the count) if it exists.
    fn live(&self, l: u8) -> Option<(u16, LunRec)> {
        let n = self.store.luns.len().max(1);
        let lun = (l as usize % n) as u16;
        let rec = *self.store.luns.get(lun as usize)?;
        (rec.blocks > 0).then_some((lun, rec))
    }

    /// The outcome of a cache call on a LUN: a value, or `None` for a CacheFull that the
    /// LUN's depth explains (more levels than the cache has slots).
    fn outcome<T>(rec: LunRec, what: &str, res: Result<T, IoError>) -> Result<Option<T>, String> {
        match res {
            Ok(v) => Ok(Some(v)),
            Err(IoError::CacheFull) if rec.depth as usize > P => Ok(None),
            Err(e) => Err(format!(
                "{what}: {e:?} (cache of {P} pages, tree depth {})",
                rec.depth
            )),
        }
    }

    fn step(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Set { lun, at, tag } => self.set(lun, at, tag),
            Op::Get { lun, at } => self.get(lun, at),
            Op::Unmap { lun, at, blocks } => self.unmap(lun, at, blocks),
            Op::WriteBack => self.write_back(),
            Op::Remount => self.remount(),
            Op::Delete { lun } => self.delete(lun),
            Op::Create { lun, size } => {
                self.create(lun, size);
                Ok(())
            }
            Op::Resize { lun, size } => self.resize(lun, size),
            Op::PagePtr {
                lun,
                level,
                at,
                past,
            } => self.page_ptr(lun, level, at, past).map(|_| ()),
            Op::Relocate { lun, level, at } => self.relocate(lun, level, at),
        }?;
        self.check_counts()?;
        match self.store.violations.first() {
            Some(v) => Err(format!("store: {v}")),
            None => Ok(()),
        }
    }

    fn set(&mut self, l: u8, at: At, tag: u32) -> Result<(), String> {
        let Some((lun, rec)) = self.live(l) else {
            return Ok(());
        };
        let lba = at.lba(rec.blocks);
        let e = entry_of(tag);
        let (map, mut st, pages) = self.parts(None);
        let res = map.map_set(&mut st, pages, lun, lba, e);
        let Some(old) = Self::outcome(rec, "map_set", res)? else {
            return Ok(());
        };
        let want = self.model.insert((lun, lba), e).unwrap_or(MapEntry::NONE);
        if old != want {
            return Err(format!(
                "map_set({lun}, {lba}) returned old {old:?}, model {want:?}"
            ));
        }
        Ok(())
    }

    fn get_at(&mut self, lun: u16, rec: LunRec, lba: u64) -> Result<(), String> {
        let (map, mut st, pages) = self.parts(None);
        let res = map.map_get(&mut st, pages, lun, lba);
        let Some(got) = Self::outcome(rec, "map_get", res)? else {
            return Ok(());
        };
        let want = self
            .model
            .get(&(lun, lba))
            .copied()
            .unwrap_or(MapEntry::NONE);
        if got != want {
            return Err(format!("map_get({lun}, {lba}) = {got:?}, model {want:?}"));
        }
        Ok(())
    }

    fn get(&mut self, l: u8, at: At) -> Result<(), String> {
        match self.live(l) {
            Some((lun, rec)) => self.get_at(lun, rec, at.lba(rec.blocks)),
            None => Ok(()),
        }
    }

    fn unmap(&mut self, l: u8, at: At, blocks: u16) -> Result<(), String> {
        let Some((lun, rec)) = self.live(l) else {
            return Ok(());
        };
        let lo = at.lba(rec.blocks);
        // At least one block, as `Pool::trim` asks: an empty unmap at LBA 0 panics (see
        // `tests::an_empty_unmap_at_lba_0_is_a_no_op`).
        let hi = (lo + u64::from(blocks.max(1))).min(rec.blocks);
        let flux = Flux::Unmap { lun, lo, hi };
        let (map, mut st, pages) = self.parts(Some(flux));
        let res = map.unmap_range(&mut st, pages, lun, lo, hi - lo);
        if Self::outcome(rec, "unmap_range", res)?.is_some() {
            self.model
                .retain(|&(l, lba), _| l != lun || !(lo..hi).contains(&lba));
        }
        Ok(())
    }

    fn write_back(&mut self) -> Result<(), String> {
        let (map, mut st, pages) = self.parts(None);
        map.write_dirty_pages(&mut st, pages)
            .map_err(|e| format!("write_dirty_pages: {e:?}"))?;
        self.check_tree()
    }

    /// A restart: write-back, a fresh cache, and every mapped block, its neighbours and each
    /// LUN's first and last block read back.
    fn remount(&mut self) -> Result<(), String> {
        self.write_back()?;
        self.cache = MapCache::default();
        self.pages.fill(0xa5);
        let mut probes: Vec<(u16, u64)> = self.model.keys().copied().collect();
        probes.sort_unstable();
        let near: Vec<(u16, u64)> = probes
            .iter()
            .flat_map(|&(l, b)| [(l, b.saturating_sub(1)), (l, b + 1)])
            .collect();
        probes.extend(near);
        for (lun, rec) in self.store.luns.clone().into_iter().enumerate() {
            probes.extend([(lun as u16, 0), (lun as u16, rec.blocks.saturating_sub(1))]);
        }
        for (lun, lba) in probes {
            let rec = self.store.luns.get(lun as usize).copied();
            if let Some(rec) = rec.filter(|r| lba < r.blocks) {
                self.get_at(lun, rec, lba)?;
            }
        }
        Ok(())
    }

    fn delete(&mut self, l: u8) -> Result<(), String> {
        let Some((lun, rec)) = self.live(l) else {
            return Ok(());
        };
        let (map, mut st, pages) = self.parts(Some(Flux::Release { lun }));
        let res = map.release_lun_map(&mut st, pages, lun, rec.blocks);
        Self::outcome(rec, "release_lun_map", res)?;
        self.model.retain(|&(l, _), _| l != lun);
        self.store.newest.retain(|k, _| k.0 != lun);
        if let Some(r) = self.store.luns.get_mut(lun as usize) {
            *r = LunRec {
                blocks: 0,
                depth: 1,
                root: BlockPtr::NONE,
            };
        }
        let left = self
            .store
            .pages
            .values()
            .filter(|p| p.live && p.key.0 == lun);
        match left.map(|p| p.key).next() {
            Some(k) => Err(format!("LUN {lun} deleted, its page {k:?} still live")),
            None => Ok(()),
        }
    }

    fn create(&mut self, l: u8, size: Size) {
        let n = self.store.luns.len().max(1);
        if let Some(r) = self.store.luns.get_mut(l as usize % n)
            && r.blocks == 0
        {
            let blocks = size.blocks();
            *r = LunRec {
                blocks,
                depth: depth_of(blocks),
                root: BlockPtr::NONE,
            };
        }
    }

    /// `Pool::resize_lun`'s map work: the tail past the new end unmapped, then the height
    /// changed; the store's pages outside the new shape are gone from its newest copies.
    fn resize(&mut self, l: u8, size: Size) -> Result<(), String> {
        let Some((lun, rec)) = self.live(l) else {
            return Ok(());
        };
        let blocks = size.blocks();
        // A tree deeper than the cache cannot be worked at all (every call is CacheFull);
        // growing into one would leave pages no deletion can reach.
        if depth_of(blocks) as usize > P {
            return Ok(());
        }
        if blocks < rec.blocks {
            let (lo, hi) = (blocks, rec.blocks);
            let (map, mut st, pages) = self.parts(Some(Flux::Unmap { lun, lo, hi }));
            let res = map.unmap_range(&mut st, pages, lun, lo, hi - lo);
            if Self::outcome(rec, "unmap_range", res)?.is_none() {
                return Ok(());
            }
            self.model
                .retain(|&(l, lba), _| l != lun || !(lo..hi).contains(&lba));
        }
        let depth = depth_of(blocks);
        let flux = Flux::Resize { lun, depth, blocks };
        let (map, mut st, pages) = self.parts(Some(flux));
        let res = map.resize(&mut st, pages, lun, blocks, depth - 1);
        let deeper = LunRec {
            depth: depth.max(rec.depth),
            ..rec
        };
        let changed = Self::outcome(deeper, "resize", res)?.is_some();
        let r = self
            .store
            .luns
            .get_mut(lun as usize)
            .ok_or("resize: LUN gone")?;
        if !changed {
            if r.depth == rec.depth {
                return Ok(());
            }
            return Err(format!("resize failed with depth {} left", r.depth));
        }
        if r.depth != depth {
            return Err(format!("resize to {depth} levels left {}", r.depth));
        }
        r.blocks = blocks;
        self.store
            .newest
            .retain(|k, _| k.0 != lun || (k.1 < depth && k.2 < pages_at(blocks, k.1)));
        Ok(())
    }

    /// The page key `level`/`at`/`past` name in `rec`'s tree.
    fn page_key(lun: u16, rec: LunRec, level: u8, at: At, past: bool) -> PageKey {
        let level = level % rec.depth;
        let span = (FANOUT as u64).pow(u32::from(level) + 1);
        let index = if past {
            pages_at(rec.blocks, level)
        } else {
            at.lba(rec.blocks) / span
        };
        PageKey { lun, level, index }
    }

    /// `page_ptr` checked against the newest copy the store holds. A cached page never
    /// written answers `Some(BlockPtr::NONE)`, taken here as "no copy" (see the tests).
    fn page_ptr(
        &mut self,
        l: u8,
        level: u8,
        at: At,
        past: bool,
    ) -> Result<Option<PageKey>, String> {
        let Some((lun, rec)) = self.live(l) else {
            return Ok(None);
        };
        let key = Self::page_key(lun, rec, level, at, past);
        let (map, mut st, pages) = self.parts(None);
        let res = map.page_ptr(&mut st, pages, lun, key.level, key.index);
        let Some(got) = Self::outcome(rec, "page_ptr", res)? else {
            return Ok(None);
        };
        let got = got.filter(|p| !p.is_none());
        let want = self.store.newest.get(&key_of(key)).copied();
        if got != want {
            return Err(format!("page_ptr({key:?}) = {got:?}, newest copy {want:?}"));
        }
        Ok(got.map(|_| key))
    }

    fn relocate(&mut self, l: u8, level: u8, at: At) -> Result<(), String> {
        let Some(key) = self.page_ptr(l, level, at, false)? else {
            return Ok(());
        };
        let rec = self.live(l).map(|x| x.1).ok_or("relocate: LUN gone")?;
        let (map, mut st, pages) = self.parts(None);
        let res = map.load_page(&mut st, pages, key);
        if let Some(slot) = Self::outcome(rec, "load_page", res)? {
            map.mark_dirty(slot);
        }
        Ok(())
    }

    /// The counts the store was told about against sums over the model.
    fn check_counts(&self) -> Result<(), String> {
        let n = self.store.luns.len();
        let (mut mapped, mut bytes) = (vec![0u64; n], vec![0u64; n]);
        for (&(lun, _), &e) in &self.model {
            if let (Some(m), Some(b)) = (mapped.get_mut(lun as usize), bytes.get_mut(lun as usize))
            {
                *m += 1;
                *b += share(e);
            }
        }
        if mapped != self.store.mapped || bytes != self.store.extent_bytes {
            return Err(format!(
                "counts: mapped {:?} bytes {:?}, model {mapped:?} {bytes:?}",
                self.store.mapped, self.store.extent_bytes
            ));
        }
        Ok(())
    }

    /// Straight from the store: the trees under the roots map exactly the model, and the live
    /// pages are exactly the reachable ones.
    fn check_tree(&self) -> Result<(), String> {
        let mut reached = HashSet::new();
        let mut found = HashMap::new();
        for (lun, rec) in self.store.luns.iter().enumerate() {
            if rec.blocks > 0 && !rec.root.is_none() {
                let at = (lun as u16, rec.depth - 1, 0);
                self.walk(at, rec.root, &mut reached, &mut found)?;
            }
        }
        if found != self.model {
            let extra = found.iter().find(|(k, e)| self.model.get(k) != Some(e));
            let missing = self.model.iter().find(|(k, e)| found.get(k) != Some(e));
            return Err(format!(
                "store's trees: found {extra:?} not in the model, model's {missing:?} not found"
            ));
        }
        let live: HashSet<u64> = self
            .store
            .pages
            .iter()
            .filter(|(_, p)| p.live)
            .map(|(&a, _)| a)
            .collect();
        if live != reached {
            let leaked = live.difference(&reached).next();
            let lost = reached.difference(&live).next();
            return Err(format!(
                "live pages: {leaked:?} live but unreachable, {lost:?} reachable but released"
            ));
        }
        Ok(())
    }

    fn walk(
        &self,
        k: Key,
        ptr: BlockPtr,
        reached: &mut HashSet<u64>,
        found: &mut HashMap<(u16, u64), MapEntry>,
    ) -> Result<(), String> {
        let p = self
            .store
            .pages
            .get(&ptr.addr)
            .filter(|p| p.key == k && p.crc == ptr.crc)
            .ok_or_else(|| format!("page {k:?}: pointer {ptr:?} names no copy of it"))?;
        if !reached.insert(ptr.addr) {
            return Err(format!("page {k:?} reachable twice"));
        }
        let (lun, level, index) = k;
        for i in 0..FANOUT as u64 {
            let e = MapEntry::decode(&p.payload, i as usize * ENTRY_BYTES);
            let child = index * FANOUT as u64 + i;
            if !e.valid {
                continue;
            }
            if level == 0 {
                found.insert((lun, child), e);
            } else {
                self.walk((lun, level - 1, child), e.ptr(), reached, found)?;
            }
        }
        Ok(())
    }
}

/// Runs `ops` with a cache of `P` pages over LUNs of sizes `luns` (then a final restart).
fn run_sized<const P: usize>(luns: &[Size], ops: &[Op], fault: Fault) -> Result<(), String> {
    let mut run = Run::<P>::new(luns, fault);
    for (i, &op) in ops.iter().enumerate() {
        run.step(op)
            .map_err(|e| format!("step {i} ({op:?}), cache of {P} pages: {e}"))?;
    }
    run.step(Op::Remount)
        .map_err(|e| format!("final restart, cache of {P} pages: {e}"))
}

/// Runs `ops` with cache size number `cache` (modulo the sizes offered: 2, 3, 4, 6, 8, 16
/// pages) over LUNs of sizes `luns`, against a store with `fault`.
pub(crate) fn run(cache: u8, luns: &[Size], ops: &[Op], fault: Fault) -> Result<(), String> {
    match CACHE_SIZES.get(cache as usize % CACHE_SIZES.len()) {
        Some(2) => run_sized::<2>(luns, ops, fault),
        Some(3) => run_sized::<3>(luns, ops, fault),
        Some(4) => run_sized::<4>(luns, ops, fault),
        Some(6) => run_sized::<6>(luns, ops, fault),
        Some(8) => run_sized::<8>(luns, ops, fault),
        _ => run_sized::<16>(luns, ops, fault),
    }
}

/// Reads fixed-size fields from fuzz input; missing bytes read as zero.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }
    fn at(&mut self) -> At {
        At {
            spot: self.u8(),
            off: self.u16() % 1024,
        }
    }
    fn op(&mut self) -> Op {
        let lun = self.u8();
        match self.u8() % 17 {
            0..=5 => Op::Set {
                lun,
                at: self.at(),
                tag: self.u32(),
            },
            6..=8 => Op::Get { lun, at: self.at() },
            9 => Op::Unmap {
                lun,
                at: self.at(),
                blocks: self.u16() % 2048,
            },
            10 => Op::WriteBack,
            11 => Op::Remount,
            12 => Op::Delete { lun },
            13 => Op::Create {
                lun,
                size: Size {
                    depth: self.u8(),
                    frac: self.u32(),
                },
            },
            14 => Op::PagePtr {
                lun,
                level: self.u8(),
                at: self.at(),
                past: self.u8() & 1 == 1,
            },
            15 => Op::Relocate {
                lun,
                level: self.u8(),
                at: self.at(),
            },
            _ => Op::Resize {
                lun,
                size: Size {
                    depth: self.u8(),
                    frac: self.u32(),
                },
            },
        }
    }
}

/// Runs the operations `data` describes against the map cache and its model: byte 0 picks
/// the cache size (2, 3, 4, 6, 8 or 16 pages), byte 1 the LUN count (1..=4), then 5 bytes per
/// LUN its size (tree depth 1..=3), then operations of 2 to 8 bytes each (at most
/// [`MAX_OPS`]) until the input ends. `Err` describes the first check that failed and the
/// step that failed it.
pub fn check_bytes(data: &[u8]) -> Result<(), String> {
    let mut b = Bytes(data);
    let cache = b.u8();
    let n = 1 + b.u8() % 4;
    let luns: Vec<Size> = (0..n)
        .map(|_| Size {
            depth: b.u8(),
            frac: b.u32(),
        })
        .collect();
    let mut ops = Vec::new();
    while !b.0.is_empty() && ops.len() < MAX_OPS {
        ops.push(b.op());
    }
    run(cache, &luns, &ops, Fault::None)
}
