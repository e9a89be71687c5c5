//! The last resort of a checked read: silent damage in different rows of one item (a
//! misdirected write under one block, stale parity under the next) needs a different set of
//! members left out in each row, which no single [`suspect_set`] gives. The span is cut into
//! slots of whole blocks (one block each for items up to [`PLAN_SLOTS`] blocks); each slot is
//! surveyed for the distinct bytes it reads as without each set of members that could matter
//! to it; then the item is read with one slot, and then two, taken from a reconstruction and
//! the rest as they lie, until one checks. ZFS's RAID-Z tries column combinations the same
//! way; here the combinations are per row, as parity is.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::LogIo;
use super::read::suspect_set;
use crate::error::{IoError, bug};
use crate::format::BlockPtr;
use crate::raid::{ArrayError, Column, DiskSet, Geometry, Level};

/// Slots a mixed read cuts a span into: one per 4 KiB block of the largest item (32 data
/// blocks, its header and the blocks its ends share).
pub(crate) const PLAN_SLOTS: usize = 36;
/// Distinct reconstructions kept per slot besides the plain read.
const SLOT_VERSIONS: usize = 6;
/// Most item reads one mixed read attempts.
const MIXED_ATTEMPTS: usize = 512;

/// Which members each slot of a span is read without.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Log address of the first slot (block-aligned).
    start: u64,
    /// Bytes per slot, whole blocks.
    slot_bytes: u64,
    sets: [DiskSet; PLAN_SLOTS],
}

impl Plan {
    fn slot(&self, addr: u64) -> usize {
        (addr.saturating_sub(self.start) / self.slot_bytes) as usize
    }

    fn set(&mut self, slot: usize, set: DiskSet) {
        if let Some(s) = self.sets.get_mut(slot) {
            *s = set;
        }
    }
}

/// The member holding the data of log byte `addr` on a parity level; every member on a mirror
/// (each copy holds it, and each set of copies left out matters).
fn holder(geo: &Geometry, addr: u64) -> DiskSet {
    geo.locate(addr)
        .and_then(|(stripe, strip, _)| geo.disk_of(stripe, Column::Data(strip)))
        .filter(|_| !matches!(geo.level(), Level::Raid1 | Level::Raid10))
        .map_or(DiskSet(u32::MAX), DiskSet::one)
}

impl<D: BlockDevice, const N: usize> LogIo<'_, D, N> {
    /// Reads array bytes at `at` into `dst` without the members of `exclude`, and without
    /// those the active [`Plan`] names for each slot.
    pub(super) fn read_planned(
        &mut self,
        at: u64,
        dst: &mut [u8],
        exclude: DiskSet,
    ) -> Result<(), ArrayError> {
        let Some(plan) = self.plan else {
            return self.array.read_excluding(at, dst, self.scratch, exclude);
        };
        let end = at + dst.len() as u64;
        let mut a = at;
        while a < end {
            let k = plan.slot(a);
            let b = (plan.start + (k as u64 + 1) * plan.slot_bytes).min(end);
            let set = plan.sets.get(k).map_or(0, |s| s.0) | exclude.0;
            let d = dst
                .get_mut((a - at) as usize..(b - at) as usize)
                .ok_or(bug!(ArrayError))?;
            self.array
                .read_excluding(a, d, self.scratch, DiskSet(set))?;
            a = b;
        }
        Ok(())
    }

    /// Reads `span` through `attempt` with slots taken from reconstructions (see the module
    /// documentation), heals what the plan that checked left out (live reads; import notes a
    /// heal) and returns `attempt`'s result, where `span` starts in `self.item` and every
    /// member left out somewhere. `None` when no plan within [`MIXED_ATTEMPTS`] checks.
    // Its table (about 1 KiB) stays out of the frame of every checked read.
    #[inline(never)]
    pub(super) fn read_mixed<T>(
        &mut self,
        span: BlockPtr,
        attempt: &mut impl FnMut(&mut Self, DiskSet) -> Result<(T, usize), IoError>,
    ) -> Option<(T, usize, DiskSet)> {
        let bb = self.array.geometry().block_bytes() as u64;
        let start = span.addr / bb * bb;
        let end = (span.addr + u64::from(span.len)).div_ceil(bb) * bb;
        let slot_bytes = ((end - start) / bb).div_ceil(PLAN_SLOTS as u64).max(1) * bb;
        let slots = (end - start).div_ceil(slot_bytes) as usize;
        if slots < 2 {
            return None;
        }
        let mut table: [Vec<DiskSet, SLOT_VERSIONS>; PLAN_SLOTS] =
            core::array::from_fn(|_| Vec::new());
        for (k, versions) in table.iter_mut().enumerate().take(slots) {
            let a = start + k as u64 * slot_bytes;
            *versions = self.survey(span, a, (a + slot_bytes).min(end), (a - start) as usize);
        }
        let base = Plan {
            start,
            slot_bytes,
            sets: [DiskSet::EMPTY; PLAN_SLOTS],
        };
        let table = table.get(..slots)?;
        let mut tries = 0;
        // One slot reconstructed, then two.
        for pairs in [false, true] {
            for (k, firsts) in table.iter().enumerate() {
                for (l, seconds) in table.iter().enumerate().skip(k) {
                    if pairs == (l == k) {
                        continue;
                    }
                    let seconds = if pairs {
                        seconds.as_slice()
                    } else {
                        &[DiskSet::EMPTY]
                    };
                    for (&v, &w) in firsts
                        .iter()
                        .flat_map(|v| seconds.iter().map(move |w| (v, w)))
                    {
                        if tries == MIXED_ATTEMPTS {
                            return None;
                        }
                        tries += 1;
                        let mut plan = base;
                        plan.set(k, v);
                        if pairs {
                            plan.set(l, w);
                        }
                        if let Some((t, at)) = self.attempt_plan(plan, attempt) {
                            self.heal_plan(span, at, &plan);
                            return Some((t, at, DiskSet(v.0 | w.0)));
                        }
                    }
                }
            }
        }
        None
    }

    fn attempt_plan<T>(
        &mut self,
        plan: Plan,
        attempt: &mut impl FnMut(&mut Self, DiskSet) -> Result<(T, usize), IoError>,
    ) -> Option<(T, usize)> {
        self.plan = Some(plan);
        let r = attempt(self, DiskSet::EMPTY);
        self.plan = None;
        r.ok()
    }

    /// The sets of members whose absence makes log bytes `a..b` (a slot, block-aligned; only
    /// the bytes within `span` compared) read other than they read as they lie, one per
    /// distinct result, in [`suspect_set`] order. Read to `self.item[at..]`.
    fn survey(&mut self, span: BlockPtr, a: u64, b: u64, at: usize) -> Vec<DiskSet, SLOT_VERSIONS> {
        let geo = *self.array.geometry();
        // A slot crosses at most one strip boundary.
        let holders = DiskSet(holder(&geo, a).0 | holder(&geo, b - 1).0);
        let (lo, hi) = (
            span.addr.max(a) - a,
            (span.addr + u64::from(span.len)).min(b) - a,
        );
        let mut seen: Vec<u32, { SLOT_VERSIONS + 1 }> = Vec::new();
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(set) = suspect_set(&geo, i) {
            i += 1;
            // A set without the slot's data members reads it as it lies.
            if (i > 1 && set.0 & holders.0 == 0) || out.is_full() {
                continue;
            }
            // Each slot where the item's reads put it: a caller may still use bytes of a
            // read that failed (import keeps an unreadable item's header).
            let buf = core::mem::take(&mut self.item);
            let read = match buf.get_mut(at..) {
                Some(dst) => self.read_log(a, (b - a) as usize, dst, set),
                None => Err(bug!(IoError)),
            };
            self.item = buf;
            let crc = read.ok().and_then(|off| {
                let bytes = self
                    .item
                    .get(at + off + lo as usize..at + off + hi as usize)?;
                Some(crate::format::crc32c(bytes))
            });
            let Some(crc) = crc else { continue };
            if !seen.contains(&crc) && seen.push(crc).is_ok() && i > 1 {
                let _ = out.push(set);
            }
        }
        out
    }

    /// Heals, in each slot `plan` took from a reconstruction, the members it left out, with
    /// the checked bytes of `span` (at `at` in `self.item`); import only notes the heal.
    fn heal_plan(&mut self, span: BlockPtr, at: usize, plan: &Plan) {
        if self.pass != super::Pass::Live {
            self.note_healed();
            return;
        }
        let end = span.addr + u64::from(span.len);
        for (k, &set) in plan.sets.iter().enumerate() {
            let a = (plan.start + k as u64 * plan.slot_bytes).max(span.addr);
            let b = (plan.start + (k as u64 + 1) * plan.slot_bytes).min(end);
            if set.is_empty() || a >= b {
                continue;
            }
            let piece = BlockPtr {
                addr: a,
                len: (b - a) as u32,
                crc: 0,
                ditto: None,
            };
            self.heal(piece, at + (a - span.addr) as usize, set);
        }
    }
}
