//! The forward map: LUN + LBA → extent location, one 16-byte entry per 4 KiB block, in a radix
//! tree of 4 KiB pages per LUN (fan-out 252), like dm-vdo's block map. Pages are written
//! copy-on-write into the log and paged through a cache of `P` slots, so RAM does not depend on
//! LUN size: a 1 TiB LUN (depth 4) runs in the same cache as a 1 GiB one (depth 3).
//!
//! Cache rule: every cached page's ancestors are cached too (a page with cached children is
//! pinned), so writing an evicted dirty page can always update its parent in memory. The cache
//! therefore needs at least `depth + 1` slots (the pool's configuration checks a margin).
//!
//! [`MapCache`] owns the cache's bookkeeping; the page bytes live in an arena slice lent per
//! call, and pages are read, written and accounted through a [`PageStore`] (the log and the
//! LUN table in the pool; a `HashMap` in the tests).

use heapless::Vec;

use crate::error::{IoError, bug};
use crate::format::{BlockPtr, ENTRY_BYTES, FANOUT, ItemHeader, ItemKind, MapEntry, PAGE_PAYLOAD};
use crate::raid::ArrayError;

/// Where map pages live and what their changes cost.
pub(crate) trait PageStore {
    /// Reads the page `key` whose on-disk copies `ptr` names into `out` ([`PAGE_PAYLOAD`]
    /// bytes), checked; true when a copy was lost (the page should be written anew).
    fn read_page(&mut self, key: PageKey, ptr: BlockPtr, out: &mut [u8]) -> Result<bool, IoError>;
    /// Writes a new copy of a page (`hdr` names it; the store fills in the rest); returns
    /// where it went.
    fn write_page(&mut self, hdr: ItemHeader, payload: &[u8]) -> Result<BlockPtr, IoError>;
    /// Whether a page and its ditto copy written together cost up to a stripe of padding
    /// (strips too narrow for both side by side): evictions then write one copy, and the next
    /// checkpoint writes the page anew with both, batched with its other pages.
    fn pairs_cost_a_stripe(&self) -> bool {
        false
    }
    /// One copy of a page: in a checkpoint's metadata region, the first (its pointer names the
    /// ditto to come); outside one, the page's only copy until it is written again.
    fn write_page_first(&mut self, hdr: ItemHeader, payload: &[u8]) -> Result<BlockPtr, IoError> {
        self.write_page(hdr, payload)
    }
    /// The ditto copy of the page whose first copy is `first`, where `first` says it lies (in
    /// a checkpoint's metadata region; `first` already names it). A store without copies
    /// writes nothing.
    fn write_page_copy(
        &mut self,
        first: BlockPtr,
        hdr: ItemHeader,
        payload: &[u8],
    ) -> Result<(), IoError> {
        let _ = (first, hdr, payload);
        Ok(())
    }
    /// The bytes at `ptr` (an old page copy) are dead.
    fn release(&mut self, ptr: BlockPtr);
    /// `lun`'s block entry changed from `old` to `new` (space accounting).
    fn entry_changed(&mut self, lun: u16, old: MapEntry, new: MapEntry) -> Result<(), IoError>;
    /// The on-disk copy of `lun`'s root page (none while never written).
    fn root(&self, lun: u16) -> Result<BlockPtr, IoError>;
    /// Points `lun`'s root at `ptr`.
    fn set_root(&mut self, lun: u16, ptr: BlockPtr) -> Result<(), IoError>;
    /// Top level of `lun`'s tree (0: the root is a leaf).
    fn top(&self, lun: u16) -> Result<u8, IoError>;
    /// Sets the top level of `lun`'s tree (a change of height; see
    /// [`MapCache::resize`]).
    fn set_top(&mut self, lun: u16, top: u8) -> Result<(), IoError>;
    /// `lun`'s size in blocks and top level, if it exists.
    fn size(&self, lun: u16) -> Option<(u64, u8)>;
}

/// The key of a map page: LUN, tree level (0 = leaves) and index within the level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageKey {
    pub lun: u16,
    pub level: u8,
    pub index: u64,
}

impl PageKey {
    /// The leaf page holding the entry of `lun`'s block `lba`.
    pub const fn leaf(lun: u16, lba: u64) -> PageKey {
        PageKey {
            lun,
            level: 0,
            index: lba / FANOUT as u64,
        }
    }

    /// The page one level up whose entry points at this one.
    pub const fn parent(self) -> PageKey {
        PageKey {
            lun: self.lun,
            level: self.level.saturating_add(1),
            index: self.index / FANOUT as u64,
        }
    }
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

/// Pages an eviction may write with one copy before the next checkpoint gives them two
/// ([`PageStore::pairs_cost_a_stripe`]); past it, evictions write both copies.
pub(crate) const UNCOPIED: usize = 16;

/// The map cache: `P` slots of [`PAGE_PAYLOAD`] bytes in the pages arena slice.
#[derive(Debug, Clone, Default)]
pub(crate) struct MapCache<const P: usize> {
    cache: Vec<Option<PageMeta>, P>,
    tick: u64,
    /// Pages written since the last checkpoint.
    pages_written: u64,
    /// Pages evicted with one copy since the last checkpoint, which writes them anew with two.
    uncopied: Vec<PageKey, UNCOPIED>,
    /// A checkpoint is writing pages: evictions write both copies.
    checkpointing: bool,
}

fn page(pages: &mut [u8], slot: usize) -> Result<&mut [u8], IoError> {
    pages
        .get_mut(slot * PAGE_PAYLOAD..(slot + 1) * PAGE_PAYLOAD)
        .ok_or(bug!(IoError))
}

/// `FANOUT^level`, saturating.
pub(crate) fn span(level: u8) -> u64 {
    (FANOUT as u64).saturating_pow(u32::from(level))
}

impl<const P: usize> MapCache<P> {
    fn touch(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn cache_find(&self, key: PageKey) -> Option<usize> {
        self.cache
            .iter()
            .position(|m| m.is_some_and(|m| m.key == key))
    }

    /// Whether the page `key` is in the cache (using it then costs no read and no eviction).
    pub(crate) fn is_cached(&self, key: PageKey) -> bool {
        self.cache_find(key).is_some()
    }

    /// Whether every slot holds a page (a miss then evicts one, writing it if dirty).
    pub(crate) fn is_full(&self) -> bool {
        self.cache.is_full() && self.cache.iter().all(Option::is_some)
    }

    fn meta_mut(&mut self, slot: usize) -> Result<&mut PageMeta, IoError> {
        self.cache
            .get_mut(slot)
            .and_then(Option::as_mut)
            .ok_or(bug!(IoError))
    }

    /// Loads the page `key` (and its ancestors) into the cache; returns its slot.
    pub(crate) fn load_page(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        key: PageKey,
    ) -> Result<usize, IoError> {
        if let Some(s) = self.cache_find(key) {
            let t = self.touch();
            self.meta_mut(s)?.lru = t;
            return Ok(s);
        }
        // A page of a deleted LUN would stay cached without its tree, and break the ancestor
        // rule once the LUN's number is reused with a taller tree.
        if st.size(key.lun).is_none() {
            return Err(IoError::NoSuchLun);
        }
        let top = st.top(key.lun)?;
        let (ptr, parent) = if key.level >= top {
            (st.root(key.lun)?, None)
        } else {
            let pk = key.parent();
            let ps = self.load_page(st, pages, pk)?;
            let at = (key.index % FANOUT as u64) as usize * ENTRY_BYTES;
            let e = MapEntry::decode(page(pages, ps)?, at);
            (e.ptr(), Some(ps))
        };
        // Pin the parent while a slot is found for the child.
        if let Some(ps) = parent {
            self.meta_mut(ps)?.children += 1;
        }
        let res = self.fill_slot(st, pages, key, ptr);
        if res.is_err()
            && let Some(ps) = parent
        {
            let m = self.meta_mut(ps)?;
            m.children = m.children.saturating_sub(1);
        }
        res
    }

    fn fill_slot(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        key: PageKey,
        ptr: BlockPtr,
    ) -> Result<usize, IoError> {
        let slot = self.alloc_slot(st, pages)?;
        // A page read through its ditto copy is written anew (both copies again).
        let lost = if ptr.is_none() {
            page(pages, slot)?.fill(0);
            false
        } else {
            st.read_page(key, ptr, page(pages, slot)?)?
        };
        let lru = self.touch();
        if let Some(m) = self.cache.get_mut(slot) {
            *m = Some(PageMeta {
                key,
                ptr,
                dirty: lost,
                children: 0,
                lru,
            });
        }
        Ok(slot)
    }

    /// Finds a free cache slot, evicting the least recently used page without cached children
    /// (writing it to the log first if dirty).
    fn alloc_slot(&mut self, st: &mut impl PageStore, pages: &mut [u8]) -> Result<usize, IoError> {
        if let Some(i) = self.cache.iter().position(Option::is_none) {
            return Ok(i);
        }
        if self.cache.len() < P {
            let i = self.cache.len();
            self.cache.push(None).map_err(|_| bug!(IoError))?;
            return Ok(i);
        }
        let victim = self
            .cache
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.filter(|m| m.children == 0).map(|m| (i, m.lru)))
            .min_by_key(|&(_, lru)| lru)
            .map(|(i, _)| i)
            .ok_or(IoError::CacheFull)?;
        self.evict(st, pages, victim)?;
        Ok(victim)
    }

    fn evict(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        slot: usize,
    ) -> Result<(), IoError> {
        let m = self
            .cache
            .get(slot)
            .copied()
            .flatten()
            .ok_or(bug!(IoError))?;
        if m.dirty {
            let one_copy = st.pairs_cost_a_stripe()
                && !self.checkpointing
                && (self.uncopied.contains(&m.key) || !self.uncopied.is_full());
            if one_copy {
                self.write_first(st, pages, slot)?;
                if !self.uncopied.contains(&m.key) {
                    let _ = self.uncopied.push(m.key);
                }
            } else {
                self.write_page(st, pages, slot)?;
            }
        }
        if m.key.level < st.top(m.key.lun)? {
            let pk = m.key.parent();
            if let Some(ps) = self.cache_find(pk) {
                let p = self.meta_mut(ps)?;
                p.children = p.children.saturating_sub(1);
            }
        }
        if let Some(e) = self.cache.get_mut(slot) {
            *e = None;
        }
        Ok(())
    }

    /// Writes a cached page copy-on-write into the log and points its parent (or the LUN's
    /// root) at the new copy; the old copy's bytes become dead.
    pub(crate) fn write_page(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        slot: usize,
    ) -> Result<(), IoError> {
        let (hdr, payload) = page_item(self.meta(slot)?, pages, slot)?;
        let ptr = st.write_page(hdr, payload)?;
        self.written(st, pages, slot, ptr)
    }

    /// Writes the first copy of the page in `slot` ([`PageStore::write_page_first`]).
    fn write_first(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        slot: usize,
    ) -> Result<(), IoError> {
        let (hdr, payload) = page_item(self.meta(slot)?, pages, slot)?;
        let ptr = st.write_page_first(hdr, payload)?;
        self.written(st, pages, slot, ptr)
    }

    /// The cache's part of a page write: the old copy released, the slot clean, the parent
    /// (or the LUN's root) pointing at `ptr`.
    fn written(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        slot: usize,
        ptr: BlockPtr,
    ) -> Result<(), IoError> {
        let m = self.meta(slot)?;
        if !m.ptr.is_none() {
            st.release(m.ptr);
        }
        {
            let mm = self.meta_mut(slot)?;
            mm.ptr = ptr;
            mm.dirty = false;
        }
        self.pages_written += 1;
        if m.key.level < st.top(m.key.lun)? {
            let pk = m.key.parent();
            let ps = self.cache_find(pk).ok_or(bug!(IoError))?;
            let at = (m.key.index % FANOUT as u64) as usize * ENTRY_BYTES;
            MapEntry::from_ptr(ptr).encode(page(pages, ps)?, at);
            self.meta_mut(ps)?.dirty = true;
        } else {
            st.set_root(m.key.lun, ptr)?;
        }
        Ok(())
    }

    fn meta(&self, slot: usize) -> Result<PageMeta, IoError> {
        self.cache.get(slot).copied().flatten().ok_or(bug!(IoError))
    }

    /// Writes every dirty page, leaves first, so parents pick up their children's new copies.
    pub(crate) fn write_dirty_pages(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
    ) -> Result<(), IoError> {
        self.checkpointing = true;
        let r = self
            .recopy(st, pages)
            .and_then(|()| self.write_levels(st, pages, None));
        self.checkpointing = false;
        r
    }

    /// The first step of a checkpoint that writes its pages in a metadata region: every page
    /// an eviction wrote with one copy is loaded and dirtied (see [`Self::recopy`]); then
    /// [`Self::pages_to_write`] counts exactly what [`Self::write_firsts`] writes.
    pub(crate) fn recopy_all(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
    ) -> Result<(), IoError> {
        self.checkpointing = true;
        let r = self.recopy(st, pages);
        self.checkpointing = false;
        r
    }

    /// Writes the first copy of every dirty page, leaves first ([`PageStore::write_page_first`]:
    /// in a metadata region its pointer names its ditto, to come), recording the slots in the
    /// order written for [`Self::write_copies`].
    pub(crate) fn write_firsts(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        order: &mut Vec<usize, P>,
    ) -> Result<(), IoError> {
        self.write_levels(st, pages, Some(order))
    }

    /// Writes the ditto copies of the pages [`Self::write_firsts`] wrote, in its order.
    pub(crate) fn write_copies(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        order: &[usize],
    ) -> Result<(), IoError> {
        for &slot in order {
            let m = self.meta(slot)?;
            let (hdr, payload) = page_item(m, pages, slot)?;
            st.write_page_copy(m.ptr, hdr, payload)?;
        }
        Ok(())
    }

    /// Loads and dirties every page an eviction wrote with one copy that still has only that
    /// copy (not rewritten since, its LUN and place in the tree still there).
    fn recopy(&mut self, st: &mut impl PageStore, pages: &mut [u8]) -> Result<(), IoError> {
        while let Some(k) = self.uncopied.pop() {
            let ptr = match self.page_ptr(st, pages, k.lun, k.level, k.index) {
                Ok(p) => p,
                Err(IoError::NoSuchLun) => None,
                Err(e) => return Err(e),
            };
            if ptr.is_some_and(|p| p.ditto.is_none()) {
                match self.load_page(st, pages, k) {
                    Ok(slot) => self.mark_dirty(slot),
                    // Its one copy is lost: reads under it report that.
                    Err(IoError::Corrupt(_) | IoError::Device(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Writes every dirty page, a level at a time from the leaves: with `firsts`, the first
    /// copy of each ([`Self::write_firsts`]), recording the slots in order there; else
    /// whole ([`PageStore::write_page`]).
    fn write_levels(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        mut firsts: Option<&mut Vec<usize, P>>,
    ) -> Result<(), IoError> {
        for level in 0..=u8::MAX {
            let mut any_left = false;
            for slot in 0..self.cache.len() {
                let Some(m) = self.cache.get(slot).copied().flatten() else {
                    continue;
                };
                any_left |= m.key.level > level;
                if !m.dirty || m.key.level != level {
                    continue;
                }
                if let Some(order) = firsts.as_deref_mut() {
                    self.write_first(st, pages, slot)?;
                    order.push(slot).map_err(|_| bug!(IoError))?;
                } else {
                    self.write_page(st, pages, slot)?;
                }
            }
            if !any_left {
                break;
            }
        }
        Ok(())
    }

    /// The pages in `slots` were written with one copy (a checkpoint without room for its
    /// metadata region): the next checkpoint writes them anew, as many as the list holds (the
    /// rest keep one copy until they are next written, as `metadata_single_copies` counts).
    pub(crate) fn note_uncopied(&mut self, slots: &[usize]) {
        for &slot in slots {
            let Some(Some(m)) = self.cache.get(slot) else {
                continue;
            };
            if !self.uncopied.contains(&m.key) {
                let _ = self.uncopied.push(m.key);
            }
        }
    }

    /// The map entry of `lun`'s block `lba`.
    pub(crate) fn map_get(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        lba: u64,
    ) -> Result<MapEntry, IoError> {
        let slot = self.load_page(st, pages, PageKey::leaf(lun, lba))?;
        let at = (lba % FANOUT as u64) as usize * ENTRY_BYTES;
        Ok(MapEntry::decode(page(pages, slot)?, at))
    }

    /// Sets the map entry of `lun`'s block `lba`; returns the old one. Space accounting of the
    /// old entry is released and of the new one added (segment live bytes, LUN counters).
    pub(crate) fn map_set(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        lba: u64,
        e: MapEntry,
    ) -> Result<MapEntry, IoError> {
        let slot = self.load_page(st, pages, PageKey::leaf(lun, lba))?;
        let at = (lba % FANOUT as u64) as usize * ENTRY_BYTES;
        let pg = page(pages, slot)?;
        let old = MapEntry::decode(pg, at);
        e.encode(pg, at);
        self.meta_mut(slot)?.dirty = true;
        st.entry_changed(lun, old, e)?;
        Ok(old)
    }

    /// Whether page `index` at `level` of `lun`'s tree may exist: false when an ancestor's
    /// pointer is null and nothing of the subtree is cached (so walks can skip it).
    pub(crate) fn page_may_exist(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        level: u8,
        index: u64,
    ) -> Result<bool, IoError> {
        let top = st.top(lun)?;
        if level > top {
            return Ok(false);
        }
        if self.cache_find(PageKey { lun, level, index }).is_some() {
            return Ok(true);
        }
        if self
            .cache_find(PageKey {
                lun,
                level: top,
                index: 0,
            })
            .is_none()
            && st.root(lun)?.is_none()
        {
            return Ok(false);
        }
        // Walk down from the top until a null pointer or the page's parent.
        for l in (level + 1..=top).rev() {
            let idx = index / span(l - level);
            let slot = self.load_page(
                st,
                pages,
                PageKey {
                    lun,
                    level: l,
                    index: idx,
                },
            )?;
            let child = (index / span(l - 1 - level)) % FANOUT as u64;
            let e = MapEntry::decode(page(pages, slot)?, child as usize * ENTRY_BYTES);
            let child_key = PageKey {
                lun,
                level: l - 1,
                index: index / span(l - 1 - level),
            };
            if !e.valid && self.cache_find(child_key).is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Drops a cached page without writing it (its LUN is going away).
    fn drop_slot(&mut self, st: &impl PageStore, slot: usize) -> Result<(), IoError> {
        let m = self
            .cache
            .get(slot)
            .copied()
            .flatten()
            .ok_or(bug!(IoError))?;
        if m.key.level < st.top(m.key.lun)? {
            let pk = m.key.parent();
            if let Some(ps) = self.cache_find(pk) {
                let p = self.meta_mut(ps)?;
                p.children = p.children.saturating_sub(1);
            }
        }
        if let Some(e) = self.cache.get_mut(slot) {
            *e = None;
        }
        Ok(())
    }

    /// The pointer and cache state of child `child` of page `(level, index)`, re-finding the
    /// parent in the cache (it may have been evicted and reloaded meanwhile).
    fn child_entry(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        level: u8,
        index: u64,
        child: u64,
    ) -> Result<(MapEntry, bool), IoError> {
        let slot = self.load_page(st, pages, PageKey { lun, level, index })?;
        let e = MapEntry::decode(page(pages, slot)?, child as usize * ENTRY_BYTES);
        let cached = self
            .cache_find(PageKey {
                lun,
                level: level - 1,
                index: index * FANOUT as u64 + child,
            })
            .is_some();
        Ok((e, cached))
    }

    fn root_exists(&self, st: &impl PageStore, lun: u16) -> Result<bool, IoError> {
        let top = st.top(lun)?;
        Ok(!st.root(lun)?.is_none()
            || self
                .cache_find(PageKey {
                    lun,
                    level: top,
                    index: 0,
                })
                .is_some())
    }

    /// Unmaps blocks `lba..lba + blocks` of `lun`, skipping subtrees that map nothing.
    pub(crate) fn unmap_range(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        lba: u64,
        blocks: u64,
    ) -> Result<(), IoError> {
        if blocks == 0 {
            return Ok(());
        }
        if !self.root_exists(st, lun)? {
            return Ok(());
        }
        let top = st.top(lun)?;
        self.unmap_walk(
            st,
            pages,
            PageKey {
                lun,
                level: top,
                index: 0,
            },
            lba..lba + blocks,
        )
    }

    /// Unmaps the blocks `range` of the subtree under page `at`.
    fn unmap_walk(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        at: PageKey,
        range: core::ops::Range<u64>,
    ) -> Result<(), IoError> {
        let PageKey { lun, level, index } = at;
        let (lo, hi) = (range.start, range.end);
        if level == 0 {
            for y in lo..hi {
                if self.map_get(st, pages, lun, y)?.valid {
                    self.map_set(st, pages, lun, y, MapEntry::NONE)?;
                }
            }
            return Ok(());
        }
        let child_span = span(level);
        let base = index * span(level + 1);
        let first = (lo - base) / child_span;
        let last = (hi - 1 - base) / child_span;
        for child in first..=last {
            let (e, cached) = self.child_entry(st, pages, lun, level, index, child)?;
            if !e.valid && !cached {
                continue;
            }
            let c_lo = base + child * child_span;
            let child_key = PageKey {
                lun,
                level: level - 1,
                index: index * FANOUT as u64 + child,
            };
            self.unmap_walk(
                st,
                pages,
                child_key,
                lo.max(c_lo)..hi.min(c_lo + child_span),
            )?;
        }
        Ok(())
    }

    /// Releases the space of every block a LUN maps and of all its map pages, and drops its
    /// cached pages (LUN deletion). Memory stays bounded by the cache.
    pub(crate) fn release_lun_map(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        blocks: u64,
    ) -> Result<(), IoError> {
        self.unmap_range(st, pages, lun, 0, blocks)?;
        if self.root_exists(st, lun)? {
            let top = st.top(lun)?;
            let root = st.root(lun)?;
            self.release_walk(st, pages, lun, top, 0, root)?;
        }
        st.set_root(lun, BlockPtr::NONE)
    }

    /// Releases page `(level, index)` (whose on-disk copy, per its parent, is `ptr`) and its
    /// whole subtree, children first, dropping them from the cache unwritten.
    fn release_walk(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        level: u8,
        index: u64,
        ptr: BlockPtr,
    ) -> Result<(), IoError> {
        if level > 0 {
            for child in 0..FANOUT as u64 {
                let (e, cached) = self.child_entry(st, pages, lun, level, index, child)?;
                if e.valid || cached {
                    self.release_walk(
                        st,
                        pages,
                        lun,
                        level - 1,
                        index * FANOUT as u64 + child,
                        e.ptr(),
                    )?;
                }
            }
        }
        // The cached copy knows the newest on-disk location (a parent entry may be older).
        let key = PageKey { lun, level, index };
        let ptr = match self.cache_find(key) {
            Some(s) => {
                let p = self
                    .cache
                    .get(s)
                    .copied()
                    .flatten()
                    .ok_or(bug!(IoError))?
                    .ptr;
                self.drop_slot(st, s)?;
                p
            }
            None => ptr,
        };
        if !ptr.is_none() {
            st.release(ptr);
        }
        Ok(())
    }

    /// Map pages of `lun` that cannot be read: each one's subtree is unreachable and counts as
    /// that one page. Every page that reads is loaded through the cache (import walks the map
    /// of a forced import's root before it trusts it). Errors other than a page's read
    /// failing (no such LUN, a full cache, a suspended pool) end the walk.
    pub(crate) fn lost_pages(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
    ) -> Result<u64, IoError> {
        if !self.root_exists(st, lun)? {
            return Ok(0);
        }
        let level = st.top(lun)?;
        self.lost_walk(
            st,
            pages,
            PageKey {
                lun,
                level,
                index: 0,
            },
        )
    }

    fn lost_walk(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        key: PageKey,
    ) -> Result<u64, IoError> {
        match self.load_page(st, pages, key) {
            // A page read through its ditto copy stays clean: the walk only looks (an
            // eviction would write it), and import's own load finds the copy lost again.
            Ok(slot) => self.meta_mut(slot)?.dirty = false,
            Err(IoError::Device(ArrayError::LogicBug { at })) => {
                return Err(IoError::LogicBug { at });
            }
            Err(IoError::Corrupt(_) | IoError::Device(_) | IoError::Unrecoverable { .. }) => {
                return Ok(1);
            }
            Err(e) => return Err(e),
        }
        let mut lost = 0u64;
        if key.level == 0 {
            return Ok(lost);
        }
        for child in 0..FANOUT as u64 {
            let (e, cached) = self.child_entry(st, pages, key.lun, key.level, key.index, child)?;
            if e.valid || cached {
                let below = PageKey {
                    lun: key.lun,
                    level: key.level - 1,
                    index: key.index * FANOUT as u64 + child,
                };
                lost = lost.saturating_add(self.lost_walk(st, pages, below)?);
            }
        }
        Ok(lost)
    }

    /// Drops every cached page of `lun`, which must all be clean (written).
    fn drop_lun_pages(&mut self, lun: u16) -> Result<(), IoError> {
        for m in &mut self.cache {
            if m.is_some_and(|m| m.key.lun == lun) {
                if m.is_some_and(|m| m.dirty) {
                    return Err(bug!(IoError));
                }
                *m = None;
            }
        }
        Ok(())
    }

    /// Gives `lun`'s tree the shape of a LUN of `blocks` blocks with top level `top` (a LUN
    /// resize; the caller has unmapped every block from `blocks` on). Shrinking releases the
    /// pages wholly past the new end, so none is left behind for a later growth to find;
    /// a change of height adds or removes levels at the root, as a B-tree grows or shrinks:
    /// growing puts the old root under a chain of new roots, at entry 0 of each, and
    /// shrinking keeps the subtree under entry 0 of the dropped roots. Dirty pages are written
    /// first and `lun`'s pages leave the cache. An error leaves every block mapped as it was
    /// (pages past the end may be released in part).
    pub(crate) fn resize(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        blocks: u64,
        top: u8,
    ) -> Result<(), IoError> {
        let (old, now) = st.size(lun).ok_or(IoError::NoSuchLun)?;
        if blocks < old {
            self.prune_past(st, pages, lun, blocks)?;
        }
        if top == now {
            return Ok(());
        }
        self.write_dirty_pages(st, pages)?;
        self.drop_lun_pages(lun)?;
        if st.root(lun)?.is_none() {
            return st.set_top(lun, top);
        }
        if top > now {
            self.raise_root(st, pages, lun, top)
        } else {
            self.lower_root(st, pages, lun, top)
        }
    }

    /// Releases every page of `lun`'s tree that lies wholly past block `blocks` (they map
    /// nothing) and clears the entries that point at them, from the root down along the last
    /// page still in range.
    fn prune_past(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        blocks: u64,
    ) -> Result<(), IoError> {
        if blocks == 0 || !self.root_exists(st, lun)? {
            return Ok(());
        }
        for level in (1..=st.top(lun)?).rev() {
            let index = (blocks - 1) / span(level + 1);
            let kept = blocks.div_ceil(span(level)) - index * FANOUT as u64;
            for child in kept..FANOUT as u64 {
                let (e, cached) = self.child_entry(st, pages, lun, level, index, child)?;
                if !e.valid && !cached {
                    continue;
                }
                let key = PageKey {
                    lun,
                    level: level - 1,
                    index: index * FANOUT as u64 + child,
                };
                self.release_walk(st, pages, lun, key.level, key.index, e.ptr())?;
                let slot = self.load_page(st, pages, PageKey { lun, level, index })?;
                MapEntry::NONE.encode(page(pages, slot)?, child as usize * ENTRY_BYTES);
                self.mark_dirty(slot);
            }
        }
        Ok(())
    }

    /// Puts new roots above `lun`'s root up to level `top`, each pointing at the one below
    /// from entry 0. On an error the pages written so far are released.
    fn raise_root(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        top: u8,
    ) -> Result<(), IoError> {
        let old = st.root(lun)?;
        let mut written: Vec<BlockPtr, 8> = Vec::new();
        let mut below = old;
        for level in st.top(lun)? + 1..=top {
            let res = self
                .write_root_above(st, pages, lun, level, below)
                .and_then(|p| written.push(p).map(|()| p).map_err(|_| bug!(IoError)));
            match res {
                Ok(p) => below = p,
                Err(e) => {
                    for &p in &written {
                        st.release(p);
                    }
                    st.set_root(lun, old)?;
                    return Err(e);
                }
            }
        }
        st.set_top(lun, top)
    }

    /// Writes a page at `level` (above `lun`'s top) whose entry 0 is `child`; the root
    /// pointer follows it. Returns where it went.
    fn write_root_above(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        level: u8,
        child: BlockPtr,
    ) -> Result<BlockPtr, IoError> {
        let key = PageKey {
            lun,
            level,
            index: 0,
        };
        let slot = self.fill_slot(st, pages, key, BlockPtr::NONE)?;
        MapEntry::from_ptr(child).encode(page(pages, slot)?, 0);
        self.mark_dirty(slot);
        // Above the top, write_page points the root at the new copy.
        let res = self.write_page(st, pages, slot);
        let ptr = self.cache.get(slot).copied().flatten().map(|m| m.ptr);
        if let Some(m) = self.cache.get_mut(slot) {
            *m = None;
        }
        res?;
        ptr.ok_or(bug!(IoError))
    }

    /// Removes `lun`'s levels above `top`: the subtree under entry 0 of each becomes the
    /// tree and the old roots are released (their other entries are empty: see
    /// [`Self::prune_past`]).
    fn lower_root(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        top: u8,
    ) -> Result<(), IoError> {
        let from = st.top(lun)?;
        let mut chain: Vec<BlockPtr, 8> = Vec::new();
        let mut ptr = st.root(lun)?;
        for level in (top + 1..=from).rev() {
            chain.push(ptr).map_err(|_| bug!(IoError))?;
            if ptr.is_none() {
                break;
            }
            ptr = self.child_entry(st, pages, lun, level, 0, 0)?.0.ptr();
        }
        self.drop_lun_pages(lun)?;
        for &p in chain.iter().filter(|p| !p.is_none()) {
            st.release(p);
        }
        st.set_top(lun, top)?;
        st.set_root(lun, ptr)
    }

    /// The current on-disk pointer of map page `(lun, level, index)`, if the page exists
    /// (the cleaner's liveness test for a page it finds in a segment).
    pub(crate) fn page_ptr(
        &mut self,
        st: &mut impl PageStore,
        pages: &mut [u8],
        lun: u16,
        level: u8,
        index: u64,
    ) -> Result<Option<BlockPtr>, IoError> {
        let Some((blocks, top)) = st.size(lun) else {
            return Ok(None);
        };
        if level > top || index >= blocks.div_ceil(span(level + 1)).max(1) {
            return Ok(None);
        }
        if let Some(s) = self.cache_find(PageKey { lun, level, index }) {
            let ptr = self.cache.get(s).copied().flatten().map(|m| m.ptr);
            return Ok(ptr.filter(|p| !p.is_none()));
        }
        if level == top {
            return Ok(Some(st.root(lun)?).filter(|p| !p.is_none()));
        }
        if !self.page_may_exist(st, pages, lun, level + 1, index / FANOUT as u64)? {
            return Ok(None);
        }
        let ps = self.load_page(
            st,
            pages,
            PageKey {
                lun,
                level: level + 1,
                index: index / FANOUT as u64,
            },
        )?;
        let at = (index % FANOUT as u64) as usize * ENTRY_BYTES;
        let e = MapEntry::decode(page(pages, ps)?, at);
        Ok(Some(e.ptr()).filter(|p| !p.is_none()))
    }

    /// Marks dirty every cached page with an on-disk copy overlapping log addresses `lo..hi` (a copy
    /// that became unreadable: the next write puts the page elsewhere, from memory). Returns
    /// how many.
    pub(crate) fn dirty_copies_in(&mut self, lo: u64, hi: u64) -> usize {
        let mut n = 0;
        for m in self.cache.iter_mut().flatten() {
            let hit = m
                .ptr
                .copies()
                .any(|c| !c.is_none() && c.addr < hi && c.addr + u64::from(c.len) > lo);
            if hit {
                m.dirty = true;
                n += 1;
            }
        }
        n
    }

    /// Marks the page in slot `slot` dirty (its next write moves it).
    pub(crate) fn mark_dirty(&mut self, slot: usize) {
        if let Some(Some(m)) = self.cache.get_mut(slot) {
            m.dirty = true;
        }
    }

    /// Pages a checkpoint would write now: every dirty page and every cached ancestor of one.
    pub(crate) fn pages_to_write(&self) -> usize {
        let mut n = self.uncopied.len();
        for m in self.cache.iter().flatten() {
            // A page is written if it or any cached descendant is dirty.
            let k = m.key;
            let written = m.dirty
                || self.cache.iter().flatten().any(|c| {
                    c.dirty
                        && c.key.lun == k.lun
                        && c.key.level < k.level
                        && c.key.index / span(k.level - c.key.level) == k.index
                });
            if written {
                n += 1;
            }
        }
        n
    }

    /// Map pages written since [`Self::reset_pages_written`].
    pub(crate) const fn pages_written(&self) -> u64 {
        self.pages_written
    }

    /// A checkpoint made every page written so far reachable from its root.
    pub(crate) fn reset_pages_written(&mut self) {
        self.pages_written = 0;
    }
}

/// The header and payload of the page cached in `slot` (described by `m`), for a write.
fn page_item(m: PageMeta, pages: &[u8], slot: usize) -> Result<(ItemHeader, &[u8]), IoError> {
    let hdr = ItemHeader {
        kind: ItemKind::MapPage,
        flags: 0,
        lun: m.key.lun,
        lba: m.key.index,
        blocks: u32::from(m.key.level),
        stored_len: 0,
        raw_len: PAGE_PAYLOAD as u32,
        payload_crc: 0,
        seq: 0,
        pool: 0,
        addr: 0,
    };
    let payload = pages
        .get(slot * PAGE_PAYLOAD..(slot + 1) * PAGE_PAYLOAD)
        .ok_or(bug!(IoError))?;
    Ok((hdr, payload))
}
