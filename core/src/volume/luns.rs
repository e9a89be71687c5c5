//! The LUN table: each LUN's record (name, size, map root and depth, space counters) and the
//! list of LBA ranges known lost (they read as errors until rewritten or trimmed). Both are
//! written by every checkpoint.

use heapless::Vec;

use crate::error::IoError;
use crate::format::{self, BAD_LIST_MAX, BadRange, BlockPtr, FANOUT, LunCounters, LunRecord};

/// A LUN's record.
#[derive(Debug, Clone)]
pub(crate) struct Lun {
    pub rec: LunRecord,
}

impl Lun {
    /// Height of the map tree for a LUN of `blocks` blocks.
    pub fn depth_for(blocks: u64) -> u8 {
        let mut d = 1u8;
        let mut cover = FANOUT as u64;
        while cover < blocks {
            cover = cover.saturating_mul(FANOUT as u64);
            d += 1;
        }
        d
    }
}

/// Up to `L` LUNs (deleted ones keep their slot, with size 0, for reuse) and the bad list.
#[derive(Debug, Clone, Default)]
pub(crate) struct LunTable<const L: usize> {
    luns: Vec<Lun, L>,
    bad: Vec<BadRange, BAD_LIST_MAX>,
}

/// Why a LUN could not be created, resized or deleted. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LunError {
    /// All `L` LUN slots are in use.
    TooMany,
    /// Size zero, or larger than the pool's usable capacity.
    BadSize,
    /// Empty or longer than 24 bytes.
    BadName,
    /// A LUN with this name exists.
    NameTaken,
    /// No LUN with that number.
    NoSuchLun,
    /// Writing the new LUN table failed.
    Io(IoError),
}

impl core::fmt::Display for LunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LunError::TooMany => f.write_str("too many LUNs for this pool's configuration"),
            LunError::BadSize => f.write_str("LUN size is zero or larger than the pool"),
            LunError::BadName => f.write_str("LUN name must be 1 to 24 bytes"),
            LunError::NameTaken => f.write_str("a LUN with this name exists"),
            LunError::NoSuchLun => f.write_str("no such LUN"),
            LunError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for LunError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            LunError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl<const L: usize> LunTable<L> {
    /// The record of slot `lun`, deleted or not.
    pub fn slot(&self, lun: u16) -> Option<&LunRecord> {
        self.luns.get(lun as usize).map(|l| &l.rec)
    }

    /// The record of slot `lun`, for changes.
    pub fn slot_mut(&mut self, lun: u16) -> Option<&mut LunRecord> {
        self.luns.get_mut(lun as usize).map(|l| &mut l.rec)
    }

    /// The record of a LUN that exists.
    pub fn live(&self, lun: u16) -> Result<&LunRecord, IoError> {
        self.slot(lun)
            .filter(|r| r.blocks > 0)
            .ok_or(IoError::NoSuchLun)
    }

    /// Every slot's record (deleted ones have size 0).
    pub fn records(&self) -> impl Iterator<Item = &LunRecord> + '_ {
        self.luns.iter().map(|l| &l.rec)
    }

    /// Slots in use or once used.
    pub fn slots(&self) -> usize {
        self.luns.len()
    }

    /// Top level of `lun`'s map tree (0: the root is a leaf).
    pub fn top_level(&self, lun: u16) -> Result<u8, IoError> {
        let r = self.slot(lun).ok_or(IoError::NoSuchLun)?;
        Ok(r.depth.saturating_sub(1))
    }

    /// The LUN named `name`.
    pub fn by_name(&self, name: &str) -> Option<u16> {
        self.records()
            .find(|r| r.blocks > 0 && r.name.as_str() == name)
            .map(|r| r.id)
    }

    /// Adds a LUN of `blocks` blocks named `name` in a deleted slot or a new one; returns its
    /// number. `name` and `blocks` are checked by the caller.
    pub fn create(&mut self, name: &str, blocks: u64) -> Result<u16, LunError> {
        if self.by_name(name).is_some() {
            return Err(LunError::NameTaken);
        }
        let id = match self.luns.iter().position(|l| l.rec.blocks == 0) {
            Some(i) => i,
            None if self.luns.len() < L => self.luns.len(),
            None => return Err(LunError::TooMany),
        };
        let rec = LunRecord {
            id: id as u16,
            name: heapless::String::try_from(name).map_err(|_| LunError::BadName)?,
            blocks,
            map_root: BlockPtr::NONE,
            depth: Lun::depth_for(blocks),
            counters: LunCounters::default(),
        };
        if id == self.luns.len() {
            self.luns.push(Lun { rec }).map_err(|_| LunError::TooMany)?;
        } else if let Some(l) = self.luns.get_mut(id) {
            l.rec = rec;
        }
        Ok(id as u16)
    }

    /// Marks slot `lun` deleted (its map must be released first) and forgets its lost ranges.
    pub fn delete(&mut self, lun: u16) {
        self.bad.retain(|r| r.lun != lun);
        if let Some(l) = self.luns.get_mut(lun as usize) {
            l.rec.blocks = 0;
            l.rec.name.clear();
            l.rec.counters = LunCounters::default();
            l.rec.depth = 1;
        }
    }

    /// Replaces the table with records and a bad list read back from a checkpoint; refuses
    /// records whose depth does not fit their size.
    pub fn load(
        &mut self,
        recs: Vec<LunRecord, L>,
        bad: &[BadRange],
    ) -> Result<(), format::FormatError> {
        if recs.iter().any(|r| r.depth != Lun::depth_for(r.blocks)) {
            return Err(format::FormatError::Bounds);
        }
        self.luns.clear();
        for rec in recs {
            self.luns
                .push(Lun { rec })
                .map_err(|_| format::FormatError::Bounds)?;
        }
        self.bad.clear();
        for r in bad {
            let _ = self.bad.push(*r);
        }
        Ok(())
    }

    /// LBA ranges known lost.
    pub fn bad(&self) -> &[BadRange] {
        &self.bad
    }

    /// The listed range that starts first at or after `lun`'s block `lba` (in LUN, then LBA
    /// order; the ranges of one LUN never overlap).
    pub fn next_bad_from(&self, lun: u16, lba: u64) -> Option<BadRange> {
        self.bad
            .iter()
            .filter(|r| (r.lun, r.lba) >= (lun, lba))
            .min_by_key(|r| (r.lun, r.lba))
            .copied()
    }

    /// Whether `lun`'s block `lba` is known lost.
    pub fn is_bad(&self, lun: u16, lba: u64) -> bool {
        self.bad.iter().any(|r| {
            r.lun == lun && lba >= r.lba && lba < r.lba.saturating_add(u64::from(r.blocks))
        })
    }

    /// Records `r` as lost, joined with the listed ranges of its LUN it overlaps or touches
    /// (their union is exactly what is lost). Returns false when the list is full and `r`
    /// touches none of them: it is not listed (the caller says so; nothing is over-declared).
    pub fn add_bad(&mut self, mut r: BadRange) -> bool {
        let mut i = 0;
        while let Some(x) = self.bad.get(i).copied() {
            let (lo, hi) = (r.lba.min(x.lba), r.end().max(x.end()));
            if x.lun == r.lun
                && x.lba <= r.end()
                && r.lba <= x.end()
                && u32::try_from(hi - lo).is_ok()
            {
                r = BadRange {
                    lun: r.lun,
                    lba: lo,
                    blocks: (hi - lo) as u32,
                };
                self.bad.remove(i);
                // The union may reach ranges passed over before.
                i = 0;
            } else {
                i += 1;
            }
        }
        self.bad.push(r).is_ok()
    }

    /// Drops LBAs from the unrecoverable list once they are rewritten or trimmed.
    ///
    /// Only the rewritten blocks leave the list: a range they cover in part is trimmed (or split
    /// in two) to the blocks still lost. Dropping only ranges covered whole made a client that
    /// rewrites a lost range block by block (4 KiB writes, the usual case) read errors for the
    /// data it had just written, until a restart replayed the coalesced extent.
    pub fn forget_bad(&mut self, lun: u16, lba: u64, blocks: u64) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(lun: u16, lba: u64, blocks: u32) -> BadRange {
        BadRange { lun, lba, blocks }
    }

    #[test]
    fn lost_ranges_join_exactly_and_a_full_list_refuses() {
        let mut t = LunTable::<4>::default();
        assert!(t.add_bad(r(0, 10, 2)));
        assert!(t.add_bad(r(0, 0, 5)));
        assert!(t.add_bad(r(1, 5, 5)), "another LUN's range stays apart");
        // Touching both of LUN 0's ranges: their union, no more.
        assert!(t.add_bad(r(0, 5, 5)));
        assert_eq!(t.bad(), &[r(1, 5, 5), r(0, 0, 12)]);
        assert!(t.add_bad(r(0, 3, 2)), "inside a listed range");
        assert_eq!(t.bad(), &[r(1, 5, 5), r(0, 0, 12)]);
        for i in 0..BAD_LIST_MAX as u64 - 2 {
            assert!(t.add_bad(r(2, 2 * i, 1)));
        }
        assert!(!t.add_bad(r(3, 0, 1)), "the full list took a range");
        assert!(
            t.add_bad(r(2, 1, 1)),
            "a range joining two listed ones fits"
        );
        assert_eq!(t.bad().len(), BAD_LIST_MAX - 1);
        assert!(t.is_bad(2, 0) && t.is_bad(2, 1) && t.is_bad(2, 2) && !t.is_bad(3, 0));
    }
}
