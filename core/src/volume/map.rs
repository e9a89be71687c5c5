//! The forward map: LUN + LBA → extent location, one 16-byte entry per 4 KiB block, in a radix
//! tree of 4 KiB pages per LUN (fan-out 252), like dm-vdo's block map. Pages are written
//! copy-on-write into the log and paged through a cache of `P` slots, so RAM does not depend on
//! LUN size: a 1 TiB LUN (depth 4) runs in the same cache as a 1 GiB one (depth 3).
//!
//! Cache rule: every cached page's ancestors are cached too (a page with cached children is
//! pinned), so writing an evicted dirty page can always update its parent in memory. The cache
//! therefore needs at least `depth + 1` slots; [`crate::pool::PoolConfig`] checks a margin.

use raidcore_hal::BlockDevice;

use crate::error::{IoError, bug};
use crate::format::{BlockPtr, ENTRY_BYTES, FANOUT, ItemHeader, ItemKind, MapEntry, PAGE_PAYLOAD};
use crate::log::Expect;
use crate::pool::state::{Bufs, PageKey, PageMeta, State, seg_account};

fn page(pages: &mut [u8], slot: usize) -> Result<&mut [u8], IoError> {
    pages
        .get_mut(slot * PAGE_PAYLOAD..(slot + 1) * PAGE_PAYLOAD)
        .ok_or(bug!(IoError))
}

/// `FANOUT^level`, saturating.
pub(crate) fn span(level: u8) -> u64 {
    (FANOUT as u64).saturating_pow(u32::from(level))
}

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    fn top_level(&self, lun: u16) -> Result<u8, IoError> {
        let l = self.luns.get(lun as usize).ok_or(IoError::NoSuchLun)?;
        Ok(l.rec.depth.saturating_sub(1))
    }

    fn cache_find(&self, key: PageKey) -> Option<usize> {
        self.cache
            .iter()
            .position(|m| m.is_some_and(|m| m.key == key))
    }

    fn meta_mut(&mut self, slot: usize) -> Result<&mut PageMeta, IoError> {
        self.cache
            .get_mut(slot)
            .and_then(Option::as_mut)
            .ok_or(bug!(IoError))
    }

    /// Loads the page `key` (and its ancestors) into the cache; returns its slot.
    pub(crate) fn load_page(&mut self, b: &mut Bufs, key: PageKey) -> Result<usize, IoError> {
        if let Some(s) = self.cache_find(key) {
            let t = self.touch();
            self.meta_mut(s)?.lru = t;
            return Ok(s);
        }
        let top = self.top_level(key.lun)?;
        let (ptr, parent) = if key.level >= top {
            let l = self.luns.get(key.lun as usize).ok_or(IoError::NoSuchLun)?;
            (l.rec.map_root, None)
        } else {
            let pk = PageKey {
                lun: key.lun,
                level: key.level + 1,
                index: key.index / FANOUT as u64,
            };
            let ps = self.load_page(b, pk)?;
            let at = (key.index % FANOUT as u64) as usize * ENTRY_BYTES;
            let e = MapEntry::decode(page(b.pages, ps)?, at);
            (e.ptr(), Some(ps))
        };
        // Pin the parent while a slot is found for the child.
        if let Some(ps) = parent {
            self.meta_mut(ps)?.children += 1;
        }
        let res = self.fill_slot(b, key, ptr);
        if res.is_err()
            && let Some(ps) = parent
        {
            let m = self.meta_mut(ps)?;
            m.children = m.children.saturating_sub(1);
        }
        res
    }

    fn fill_slot(&mut self, b: &mut Bufs, key: PageKey, ptr: BlockPtr) -> Result<usize, IoError> {
        let slot = self.alloc_slot(b)?;
        if ptr.is_none() {
            page(b.pages, slot)?.fill(0);
        } else {
            match self.load_item(b, ptr, Expect::page(key.lun, key.level, key.index)) {
                Ok((h, off)) if h.stored_len as usize == PAGE_PAYLOAD => {
                    let src = b.item.get(off..off + PAGE_PAYLOAD).ok_or(bug!(IoError))?;
                    page(b.pages, slot)?.copy_from_slice(src);
                }
                Ok(_) => return Err(IoError::Corrupt(crate::format::FormatError::Bounds)),
                Err(e) => return Err(e),
            }
        }
        let lru = self.touch();
        if let Some(m) = self.cache.get_mut(slot) {
            *m = Some(PageMeta {
                key,
                ptr,
                dirty: false,
                children: 0,
                lru,
            });
        }
        Ok(slot)
    }

    /// Finds a free cache slot, evicting the least recently used page without cached children
    /// (writing it to the log first if dirty).
    fn alloc_slot(&mut self, b: &mut Bufs) -> Result<usize, IoError> {
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
        self.evict(b, victim)?;
        Ok(victim)
    }

    fn evict(&mut self, b: &mut Bufs, slot: usize) -> Result<(), IoError> {
        let m = self
            .cache
            .get(slot)
            .copied()
            .flatten()
            .ok_or(bug!(IoError))?;
        if m.dirty {
            self.write_page(b, slot)?;
        }
        if m.key.level < self.top_level(m.key.lun)? {
            let pk = PageKey {
                lun: m.key.lun,
                level: m.key.level + 1,
                index: m.key.index / FANOUT as u64,
            };
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
    pub(crate) fn write_page(&mut self, b: &mut Bufs, slot: usize) -> Result<(), IoError> {
        let m = self
            .cache
            .get(slot)
            .copied()
            .flatten()
            .ok_or(bug!(IoError))?;
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
        let payload = b
            .pages
            .get(slot * PAGE_PAYLOAD..(slot + 1) * PAGE_PAYLOAD)
            .ok_or(bug!(IoError))?;
        let ptr = self.append(&mut b.log, b.sut, hdr, payload, true)?;
        self.counters.metadata_log_bytes += u64::from(ptr.len);
        if !m.ptr.is_none() {
            let seg = self.seg_of(m.ptr.addr);
            seg_account(b.sut, seg, m.ptr.len, false);
        }
        {
            let mm = self.meta_mut(slot)?;
            mm.ptr = ptr;
            mm.dirty = false;
        }
        self.log.pages_since_checkpoint += 1;
        if m.key.level < self.top_level(m.key.lun)? {
            let pk = PageKey {
                lun: m.key.lun,
                level: m.key.level + 1,
                index: m.key.index / FANOUT as u64,
            };
            let ps = self.cache_find(pk).ok_or(bug!(IoError))?;
            let at = (m.key.index % FANOUT as u64) as usize * ENTRY_BYTES;
            MapEntry::from_ptr(ptr).encode(page(b.pages, ps)?, at);
            self.meta_mut(ps)?.dirty = true;
        } else {
            let l = self
                .luns
                .get_mut(m.key.lun as usize)
                .ok_or(IoError::NoSuchLun)?;
            l.rec.map_root = ptr;
        }
        Ok(())
    }

    /// Writes every dirty page, leaves first, so parents pick up their children's new copies.
    pub(crate) fn write_dirty_pages(&mut self, b: &mut Bufs) -> Result<(), IoError> {
        for level in 0..=u8::MAX {
            let mut any_left = false;
            for slot in 0..self.cache.len() {
                let Some(m) = self.cache.get(slot).copied().flatten() else {
                    continue;
                };
                if m.key.level > level {
                    any_left = true;
                }
                if m.dirty && m.key.level == level {
                    self.write_page(b, slot)?;
                }
            }
            if !any_left {
                break;
            }
        }
        Ok(())
    }

    /// The map entry of `lun`'s block `lba`.
    pub(crate) fn map_get(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        lba: u64,
    ) -> Result<MapEntry, IoError> {
        let slot = self.load_page(
            b,
            PageKey {
                lun,
                level: 0,
                index: lba / FANOUT as u64,
            },
        )?;
        let at = (lba % FANOUT as u64) as usize * ENTRY_BYTES;
        Ok(MapEntry::decode(page(b.pages, slot)?, at))
    }

    /// Sets the map entry of `lun`'s block `lba`; returns the old one. Space accounting of the
    /// old entry is released and of the new one added (segment live bytes, LUN counters).
    pub(crate) fn map_set(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        lba: u64,
        e: MapEntry,
    ) -> Result<MapEntry, IoError> {
        let slot = self.load_page(
            b,
            PageKey {
                lun,
                level: 0,
                index: lba / FANOUT as u64,
            },
        )?;
        let at = (lba % FANOUT as u64) as usize * ENTRY_BYTES;
        let pg = page(b.pages, slot)?;
        let old = MapEntry::decode(pg, at);
        e.encode(pg, at);
        self.meta_mut(slot)?.dirty = true;
        self.account_entry(b, lun, old, false)?;
        self.account_entry(b, lun, e, true)?;
        Ok(old)
    }

    /// Adds (or removes) one mapped block's share of its item to the space counters. The
    /// segment's live bytes of a new item were added when it was appended, so only removal
    /// touches them.
    pub(crate) fn account_entry(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        e: MapEntry,
        add: bool,
    ) -> Result<(), IoError> {
        if !e.valid {
            return Ok(());
        }
        let log_share = e.share(e.item_bytes() as u32);
        let stored_share = e.share(e.stored_len);
        if !add {
            let seg = self.seg_of(e.addr());
            seg_account(b.sut, seg, log_share, false);
        }
        let c = &mut self
            .luns
            .get_mut(lun as usize)
            .ok_or(IoError::NoSuchLun)?
            .rec
            .counters;
        if add {
            c.mapped_blocks += 1;
            c.log_bytes += u64::from(log_share);
            c.stored_bytes += u64::from(stored_share);
        } else {
            c.mapped_blocks = c.mapped_blocks.saturating_sub(1);
            c.log_bytes = c.log_bytes.saturating_sub(u64::from(log_share));
            c.stored_bytes = c.stored_bytes.saturating_sub(u64::from(stored_share));
        }
        Ok(())
    }

    /// Whether page `index` at `level` of `lun`'s tree may exist: false when an ancestor's
    /// pointer is null and nothing of the subtree is cached (so walks can skip it).
    pub(crate) fn page_may_exist(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        level: u8,
        index: u64,
    ) -> Result<bool, IoError> {
        let top = self.top_level(lun)?;
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
            && self
                .luns
                .get(lun as usize)
                .ok_or(IoError::NoSuchLun)?
                .rec
                .map_root
                .is_none()
        {
            return Ok(false);
        }
        // Walk down from the top until a null pointer or the page's parent.
        for l in (level + 1..=top).rev() {
            let idx = index / span(l - level);
            let slot = self.load_page(
                b,
                PageKey {
                    lun,
                    level: l,
                    index: idx,
                },
            )?;
            let child = (index / span(l - 1 - level)) % FANOUT as u64;
            let e = MapEntry::decode(page(b.pages, slot)?, child as usize * ENTRY_BYTES);
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
    fn drop_slot(&mut self, slot: usize) -> Result<(), IoError> {
        let m = self
            .cache
            .get(slot)
            .copied()
            .flatten()
            .ok_or(bug!(IoError))?;
        if m.key.level < self.top_level(m.key.lun)? {
            let pk = PageKey {
                lun: m.key.lun,
                level: m.key.level + 1,
                index: m.key.index / FANOUT as u64,
            };
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
        b: &mut Bufs,
        lun: u16,
        level: u8,
        index: u64,
        child: u64,
    ) -> Result<(MapEntry, bool), IoError> {
        let slot = self.load_page(b, PageKey { lun, level, index })?;
        let e = MapEntry::decode(page(b.pages, slot)?, child as usize * ENTRY_BYTES);
        let cached = self
            .cache_find(PageKey {
                lun,
                level: level - 1,
                index: index * FANOUT as u64 + child,
            })
            .is_some();
        Ok((e, cached))
    }

    fn root_exists(&self, lun: u16) -> Result<bool, IoError> {
        let top = self.top_level(lun)?;
        let l = self.luns.get(lun as usize).ok_or(IoError::NoSuchLun)?;
        Ok(!l.rec.map_root.is_none()
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
        b: &mut Bufs,
        lun: u16,
        lba: u64,
        blocks: u64,
    ) -> Result<(), IoError> {
        if !self.root_exists(lun)? {
            return Ok(());
        }
        let top = self.top_level(lun)?;
        self.unmap_walk(b, lun, top, 0, lba, lba + blocks)
    }

    fn unmap_walk(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        level: u8,
        index: u64,
        lo: u64,
        hi: u64,
    ) -> Result<(), IoError> {
        if level == 0 {
            for y in lo..hi {
                if self.map_get(b, lun, y)?.valid {
                    self.map_set(b, lun, y, MapEntry::NONE)?;
                }
            }
            return Ok(());
        }
        let child_span = span(level);
        let base = index * span(level + 1);
        let first = (lo - base) / child_span;
        let last = (hi - 1 - base) / child_span;
        for child in first..=last {
            let (e, cached) = self.child_entry(b, lun, level, index, child)?;
            if !e.valid && !cached {
                continue;
            }
            let c_lo = base + child * child_span;
            self.unmap_walk(
                b,
                lun,
                level - 1,
                index * FANOUT as u64 + child,
                lo.max(c_lo),
                hi.min(c_lo + child_span),
            )?;
        }
        Ok(())
    }

    /// Releases the space of every block a LUN maps and of all its map pages, and drops its
    /// cached pages (LUN deletion). Memory stays bounded by the cache.
    pub(crate) fn release_lun_map(&mut self, b: &mut Bufs, lun: u16) -> Result<(), IoError> {
        let blocks = self
            .luns
            .get(lun as usize)
            .ok_or(IoError::NoSuchLun)?
            .rec
            .blocks;
        self.unmap_range(b, lun, 0, blocks)?;
        if self.root_exists(lun)? {
            let top = self.top_level(lun)?;
            let root = self
                .luns
                .get(lun as usize)
                .ok_or(IoError::NoSuchLun)?
                .rec
                .map_root;
            self.release_walk(b, lun, top, 0, root)?;
        }
        if let Some(l) = self.luns.get_mut(lun as usize) {
            l.rec.map_root = BlockPtr::NONE;
        }
        Ok(())
    }

    /// Releases page `(level, index)` (whose on-disk copy, per its parent, is `ptr`) and its
    /// whole subtree, children first, dropping them from the cache unwritten.
    fn release_walk(
        &mut self,
        b: &mut Bufs,
        lun: u16,
        level: u8,
        index: u64,
        ptr: BlockPtr,
    ) -> Result<(), IoError> {
        if level > 0 {
            for child in 0..FANOUT as u64 {
                let (e, cached) = self.child_entry(b, lun, level, index, child)?;
                if e.valid || cached {
                    self.release_walk(b, lun, level - 1, index * FANOUT as u64 + child, e.ptr())?;
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
                self.drop_slot(s)?;
                p
            }
            None => ptr,
        };
        if !ptr.is_none() {
            let seg = self.seg_of(ptr.addr);
            seg_account(b.sut, seg, ptr.len, false);
        }
        Ok(())
    }
}
