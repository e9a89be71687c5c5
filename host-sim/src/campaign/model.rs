//! The reference model: what every LBA of every LUN must contain, or may contain.
//!
//! Each block holds a *version*: 0 for zeros (never written, or trimmed), otherwise the tag of
//! the write that put it there; [`content`] turns (seed, tag, LBA) into the 4 KiB the write
//! carried. Per block the model keeps
//! - `cur`: what a read may return now (one version, or several after a write that failed
//!   part-way, which leaves old or new);
//! - `durable`: what a read may return after a power cut if nothing was written since the last
//!   flush (the state the last completed flush made durable);
//! - `since`: every version written (or tried) after that flush — after a power cut any of
//!   them, or the durable one, may be back.
//!
//! A read pins the block to the version it returned (a later read must agree).

use std::collections::{BTreeMap, BTreeSet};

use raidcore::format::LUN_BLOCK;

/// A block version: 0 = zeros, else a write tag.
pub type Version = u32;

/// The 4 KiB that write `tag` put at `lba`, for a campaign seed. Three kinds of content, chosen
/// by the tag, so compression meets incompressible, half-compressible and very compressible
/// data.
#[must_use]
pub fn content(seed: u64, tag: Version, lba: u64) -> Vec<u8> {
    let mut v = vec![0u8; LUN_BLOCK];
    fill_content(seed, tag, lba, &mut v);
    v
}

/// [`content`] into `out` (4 KiB).
pub fn fill_content(seed: u64, tag: Version, lba: u64, out: &mut [u8]) {
    if tag == 0 {
        out.fill(0);
        return;
    }
    let mut s = (seed ^ (u64::from(tag) << 40) ^ lba.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_mul(0xbf58_476d_1ce4_e5b9)
        | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    match tag % 3 {
        0 => {
            for c in out.chunks_exact_mut(8) {
                c.copy_from_slice(&next().to_le_bytes());
            }
        }
        1 => {
            let half = out.len() / 2;
            for c in out[..half].chunks_exact_mut(8) {
                c.copy_from_slice(&next().to_le_bytes());
            }
            let b = next() as u8;
            out[half..].fill(b);
        }
        _ => {
            // A short record repeated, with the LBA and tag in every record (log-like text).
            let rec = format!("tag {tag:08x} lba {lba:012} seed {seed:016x}\n");
            for (o, c) in out.iter_mut().zip(rec.bytes().cycle()) {
                *o = c;
            }
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Cell {
    cur: Vec<Version>,
    durable: Vec<Version>,
    since: Vec<Version>,
}

fn union(into: &mut Vec<Version>, from: &[Version]) {
    for v in from {
        if !into.contains(v) {
            into.push(*v);
        }
    }
}

/// One LUN of the model.
#[derive(Debug, Clone)]
pub struct LunModel {
    /// The pool's LUN number.
    pub id: u16,
    /// Its name.
    pub name: String,
    /// Size in 4 KiB blocks.
    pub blocks: u64,
    cells: BTreeMap<u64, Cell>,
}

/// What a read of one block found, against the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The data is one of the allowed versions (which one).
    Ok(Version),
    /// The data is none of them.
    Wrong {
        /// Versions allowed.
        allowed: Vec<Version>,
        /// The version the data matches among every version the block ever had, if any.
        found: Option<Version>,
    },
}

/// The model of every LUN.
#[derive(Debug, Clone, Default)]
pub struct Model {
    seed: u64,
    luns: Vec<LunModel>,
    /// (LUN number, LBA) of blocks written since the last completed flush.
    dirty: BTreeSet<(u16, u64)>,
    /// Every version each block ever had (to name what wrong data is).
    history: BTreeMap<(u16, u64), Vec<Version>>,
    /// Versions a local fault left with no copy or reconstruction that checks: a read of a
    /// block that may hold one of them may fail (see [`Model::may_fail`]).
    lost: BTreeSet<(u16, u64, Version)>,
}

impl Model {
    /// An empty model for a campaign seed.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Model {
            seed,
            ..Model::default()
        }
    }

    /// The LUNs, in creation order.
    #[must_use]
    pub fn luns(&self) -> &[LunModel] {
        &self.luns
    }

    /// The LUN with pool number `id`.
    #[must_use]
    pub fn lun(&self, id: u16) -> Option<&LunModel> {
        self.luns.iter().find(|l| l.id == id)
    }

    /// A new, all-zero LUN.
    pub fn add_lun(&mut self, id: u16, name: &str, blocks: u64) {
        self.luns.retain(|l| l.id != id);
        self.luns.push(LunModel {
            id,
            name: name.to_string(),
            blocks,
            cells: BTreeMap::new(),
        });
    }

    /// A deleted LUN.
    pub fn remove_lun(&mut self, id: u16) {
        self.luns.retain(|l| l.id != id);
        self.dirty.retain(|(l, _)| *l != id);
        self.history.retain(|(l, _), _| *l != id);
        self.lost.retain(|(l, _, _)| *l != id);
    }

    fn cell(&mut self, lun: u16, lba: u64) -> Option<&mut Cell> {
        let l = self.luns.iter_mut().find(|l| l.id == lun)?;
        Some(l.cells.entry(lba).or_insert_with(|| Cell {
            cur: vec![0],
            durable: vec![0],
            since: Vec::new(),
        }))
    }

    /// A write (or trim, with `tag` 0) of `blocks` blocks from `lba` was acknowledged; with
    /// `durable` (FUA) it is durable too.
    pub fn write_ok(&mut self, lun: u16, lba: u64, blocks: u64, tag: Version, durable: bool) {
        for b in lba..lba + blocks {
            let Some(c) = self.cell(lun, b) else { return };
            c.cur = vec![tag];
            if durable {
                c.durable = vec![tag];
                c.since.clear();
            } else {
                union(&mut c.since, &[tag]);
            }
            let h = self.history.entry((lun, b)).or_default();
            if !h.contains(&tag) {
                h.push(tag);
            }
            if durable {
                self.dirty.remove(&(lun, b));
            } else {
                self.dirty.insert((lun, b));
            }
        }
    }

    /// A write (or trim) failed part-way: each block holds its old content or the new.
    pub fn write_maybe(&mut self, lun: u16, lba: u64, blocks: u64, tag: Version) {
        for b in lba..lba + blocks {
            let Some(c) = self.cell(lun, b) else { return };
            union(&mut c.cur, &[tag]);
            union(&mut c.since, &[tag]);
            let h = self.history.entry((lun, b)).or_default();
            if !h.contains(&tag) {
                h.push(tag);
            }
            self.dirty.insert((lun, b));
        }
    }

    /// A flush completed: everything acknowledged is durable.
    pub fn flush_ok(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for (lun, lba) in dirty {
            if let Some(c) = self.cell(lun, lba) {
                c.durable = c.cur.clone();
                c.since.clear();
            }
        }
    }

    /// Power was cut: every block written since the last flush may hold its durable version or
    /// any version written since. Returns those blocks (they are checked after import).
    pub fn power_cut(&mut self) -> Vec<(u16, u64)> {
        let dirty: Vec<(u16, u64)> = self.dirty.iter().copied().collect();
        for &(lun, lba) in &dirty {
            if let Some(c) = self.cell(lun, lba) {
                let mut allowed = c.durable.clone();
                union(&mut allowed, &c.since);
                c.cur = allowed;
            }
        }
        dirty
    }

    /// After import: the state read back is the durable state (import checkpoints it).
    pub fn settle_after_import(&mut self) {
        self.flush_ok();
    }

    /// Versions a read of (lun, lba) may return now.
    #[must_use]
    pub fn allowed(&self, lun: u16, lba: u64) -> Vec<Version> {
        self.lun(lun)
            .and_then(|l| l.cells.get(&lba))
            .map_or_else(|| vec![0], |c| c.cur.clone())
    }

    /// Checks the 4 KiB `data` read from (lun, lba) and pins the block to what it holds.
    pub fn check(&mut self, lun: u16, lba: u64, data: &[u8]) -> Verdict {
        let seed = self.seed;
        let allowed = self.allowed(lun, lba);
        let mut buf = vec![0u8; LUN_BLOCK];
        for &v in &allowed {
            fill_content(seed, v, lba, &mut buf);
            if buf == data {
                let dirty = self.dirty.contains(&(lun, lba));
                if let Some(c) = self.cell(lun, lba) {
                    c.cur = vec![v];
                    if !dirty {
                        c.durable = vec![v];
                    }
                }
                return Verdict::Ok(v);
            }
        }
        let mut found = None;
        if data.iter().all(|&b| b == 0) {
            found = Some(0);
        } else if let Some(h) = self.history.get(&(lun, lba)) {
            for &v in h {
                fill_content(seed, v, lba, &mut buf);
                if buf == data {
                    found = Some(v);
                    break;
                }
            }
        }
        Verdict::Wrong { allowed, found }
    }

    /// A local fault destroyed every copy of the versions (lun, lba) may hold now (its
    /// extent's bytes lie in a row no reconstruction recovers). Zeros (version 0) are never
    /// lost: they are not stored. Returns whether a version was marked.
    pub fn mark_lost(&mut self, lun: u16, lba: u64) -> bool {
        let mut any = false;
        for v in self.allowed(lun, lba) {
            if v != 0 {
                any |= self.lost.insert((lun, lba, v));
            }
        }
        any
    }

    /// Whether a read of (lun, lba) may fail: a version it may hold now was lost. A rewrite
    /// clears this (the new version is not lost) until a power cut brings the lost one back
    /// among the allowed.
    #[must_use]
    pub fn may_fail(&self, lun: u16, lba: u64) -> bool {
        !self.lost.is_empty()
            && self
                .allowed(lun, lba)
                .iter()
                .any(|&v| self.lost.contains(&(lun, lba, v)))
    }

    /// Blocks that may hold a lost version now (see [`Model::mark_lost`]).
    #[must_use]
    pub fn lost_blocks(&self) -> BTreeSet<(u16, u64)> {
        self.lost
            .iter()
            .filter(|&&(l, b, _)| self.may_fail(l, b))
            .map(|&(l, b, _)| (l, b))
            .collect()
    }

    /// Every (lun, lba) the model knows anything about (written, trimmed or read).
    #[must_use]
    pub fn known_blocks(&self) -> Vec<(u16, u64)> {
        self.luns
            .iter()
            .flat_map(|l| l.cells.keys().map(move |&b| (l.id, b)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_kinds_differ_and_compress_differently() {
        let a = content(1, 3, 10);
        let b = content(1, 4, 10);
        let c = content(1, 5, 10);
        assert_ne!(a, b);
        assert_ne!(b, c);
        assert_eq!(content(1, 3, 10), a);
        assert_ne!(content(2, 3, 10), a);
        assert!(content(1, 0, 10).iter().all(|&x| x == 0));
    }

    #[test]
    fn power_cut_allows_durable_or_later_versions() {
        let mut m = Model::new(7);
        m.add_lun(0, "a", 100);
        m.write_ok(0, 5, 1, 1, false);
        m.flush_ok();
        m.write_ok(0, 5, 1, 2, false);
        m.write_ok(0, 5, 1, 3, false);
        assert_eq!(m.allowed(0, 5), vec![3]);
        let dirty = m.power_cut();
        assert_eq!(dirty, vec![(0, 5)]);
        assert_eq!(m.allowed(0, 5), vec![1, 2, 3]);
        assert_eq!(m.check(0, 5, &content(7, 2, 5)), Verdict::Ok(2));
        assert_eq!(m.allowed(0, 5), vec![2]);
        let v = m.check(0, 5, &content(7, 1, 5));
        assert_eq!(
            v,
            Verdict::Wrong {
                allowed: vec![2],
                found: Some(1)
            }
        );
    }

    #[test]
    fn a_lost_version_may_fail_until_rewritten_and_again_after_a_cut() {
        let mut m = Model::new(7);
        m.add_lun(0, "a", 100);
        m.write_ok(0, 3, 2, 1, true);
        assert!(m.mark_lost(0, 3));
        assert!(!m.mark_lost(0, 9), "zeros are never lost");
        assert!(m.may_fail(0, 3));
        assert!(!m.may_fail(0, 4));
        m.write_ok(0, 3, 1, 2, false);
        assert!(!m.may_fail(0, 3), "the rewrite's version is not lost");
        m.power_cut();
        assert!(m.may_fail(0, 3), "the cut may bring the lost version back");
        assert_eq!(m.check(0, 3, &content(7, 2, 3)), Verdict::Ok(2));
        assert!(!m.may_fail(0, 3));
        assert!(m.lost_blocks().is_empty());
        m.remove_lun(0);
        assert!(m.lost.is_empty());
    }

    #[test]
    fn fua_is_durable_and_failed_writes_are_old_or_new() {
        let mut m = Model::new(7);
        m.add_lun(0, "a", 100);
        m.write_ok(0, 1, 2, 4, true);
        m.write_maybe(0, 1, 1, 5);
        assert_eq!(m.allowed(0, 1), vec![4, 5]);
        assert_eq!(m.allowed(0, 2), vec![4]);
        m.power_cut();
        assert_eq!(m.allowed(0, 1), vec![4, 5]);
        assert_eq!(m.allowed(0, 2), vec![4]);
        assert_eq!(m.allowed(0, 50), vec![0]);
    }
}
