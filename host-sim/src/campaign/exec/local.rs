//! The exact-loss oracle ([`Step::Local`]): a fault past one row's tolerance that stays local,
//! the blocks it destroys worked out from where their extents lie, and the checks that exactly
//! those may fail.
//!
//! The loss is worked out at the granularity the format checks ([`MapEntry::read_span`]): a
//! block of an uncompressed extent is checked alone against the CRC its map entry holds, so it
//! is lost when a byte of its own 4 KiB lies in a member block row that no reconstruction
//! recovers; a compressed extent (header and payload) is checked and decoded whole, so each of
//! its blocks is lost when any byte of the item lies in such a row. Map pages and tables in
//! the row lose nothing where the pool keeps ditto copies of them (in other rows); rows that
//! hold metadata without them (or after the pool fell back to a single copy) are not chosen.
//! A row is unrecoverable in the data strips it hit when more of its columns are unreadable
//! than the level has redundancy (every copy, on mirrors). Blocks still in RAM (an open
//! extent, the open log stripe, the decoded-extent cache) may still read correct: the model
//! allows either.

use raidcore::format::ItemKind;
use raidcore::pool::{Health, MapEntry};
use raidcore::raid::{Column, Geometry, Level};

use super::{Sim, StepResult, fail};
use crate::campaign::FailureKind;
use crate::fault::Fault;

/// A block the model knows and the map entry that places it.
type Placed = ((u16, u64), MapEntry);

/// Where a local fault strikes.
struct Aim {
    /// Member slots hit.
    hit: Vec<usize>,
    /// The member block hit on each of them.
    member_lba: u64,
    /// Log byte ranges no reconstruction recovers.
    lost: Vec<(u64, u64)>,
    /// A copy of a map page or table lies in them.
    metadata: bool,
}

impl Sim {
    /// Whether the damage a local fault does can be worked out now: nothing damaged, silent,
    /// armed, rebuilding or put back, no power cut armed, within tolerance, no local fault yet.
    pub(crate) fn quiet(&mut self) -> bool {
        if self.over
            || self.dead
            || self.local.is_some()
            || self.pool.is_none()
            || self.rail.armed()
        {
            return false;
        }
        if self.any_silent() || self.copy.is_some() || self.put_back.is_some() {
            return false;
        }
        if !self.device_failed.is_empty() || !self.sticky.is_empty() {
            return false;
        }
        // With no silent damage, damaged() forgets nothing: asking changes no later step, so
        // a replay (which does not ask) runs the same.
        if !self.damaged().is_empty() {
            return false;
        }
        let st = self.pool().status();
        st.health == Health::Online && st.rebuild.is_none() && st.bad_ranges == 0
    }

    /// [`Step::Local`]: flush and checkpoint (the extents hit are then in the checkpoint's
    /// map, not only in the log's tail), then latent sector errors on one row of the stripe
    /// under the `pick`-th mapped block, at byte `row` of its extent's item (on all the
    /// members hit, or with `row`'s top bit on the first and the others failed by hand); the
    /// model marks the blocks lost (see the module docs).
    pub(super) fn local_fault(&mut self, pick: u32, row: u32) -> StepResult {
        let at = self.step;
        if !self.quiet() {
            self.stats.faults_skipped += 1;
            return Ok(());
        }
        let settled = self.pool().flush().and_then(|()| self.pool().checkpoint());
        match settled {
            Ok(()) => self.model.flush_ok(),
            Err(_) if self.excused() => return Ok(()),
            Err(e) => {
                return Err(fail(
                    FailureKind::OpError,
                    at,
                    format!("flush and checkpoint before a local fault failed: {e}"),
                ));
            }
        }
        let placed = self.placements(at)?;
        let Some(aim) = self.aim_local(&placed, pick, row) else {
            self.stats.faults_skipped += 1;
            return Ok(());
        };
        // Half of them degraded: the latent error on a survivor of a degraded stripe.
        let degraded = row >> 31 == 1 && aim.hit.len() > 1;
        self.strike(&aim, degraded, at)?;
        let lost = aim.lost;
        let mut marked = 0;
        for &((lun, lba), e) in &placed {
            let (lo, hi) = e.read_span();
            if lost.iter().any(|&(a, b)| lo < b && a < hi) && self.model.mark_lost(lun, lba) {
                marked += 1;
            }
        }
        if self.trace {
            eprintln!(
                "  local fault: member block {} on slots {:?}, log ranges {lost:?}, {marked} \
                 blocks lost",
                aim.member_lba, aim.hit
            );
        }
        self.local = Some(at);
        self.fault(if degraded { "local_degraded" } else { "local" });
        self.stats.local_faults += 1;
        self.stats.local_metadata += u64::from(aim.metadata);
        self.stats.local_lost_blocks += marked;
        if let Some(sc) = self.scrub.as_mut() {
            sc.1 = false;
        }
        Ok(())
    }

    /// Latent sector errors on the members `aim` hits, or (`degraded`) on the first of them
    /// with the others failed by hand.
    fn strike(&mut self, aim: &Aim, degraded: bool, at: usize) -> StepResult {
        let (lse, out) = aim.hit.split_at(if degraded { 1 } else { aim.hit.len() });
        for &d in lse {
            if let Some(disk) = self.pool().array_mut().disk_mut(d) {
                disk.handle().inject(Fault::Medium {
                    lba: aim.member_lba,
                    blocks: 1,
                    sticky: false,
                });
            }
        }
        for &d in out {
            if let Some(id) = self.pool().array_mut().disk_mut(d).map(|x| x.id()) {
                self.may_fail.insert(id);
            }
            if let Err(e) = self.pool().fail_disk(d)
                && !self.excused()
            {
                return Err(fail(
                    FailureKind::OpError,
                    at,
                    format!("fail_disk({d}) for a degraded local fault failed: {e}"),
                ));
            }
        }
        Ok(())
    }

    /// Where a local fault strikes: under the extent of the `pick`-th placed block (or the
    /// next ones), at byte `row` of its item. Map pages and tables in the row lose nothing
    /// where the pool keeps ditto copies (in other rows); without them, or once the pool has
    /// written a single copy for want of room, such rows are not chosen. `None` when eight
    /// candidates all meet those or lie where a walk of the segment's items does not reach.
    fn aim_local(&mut self, placed: &[Placed], pick: u32, row: u32) -> Option<Aim> {
        let geo = *self.pool().array().geometry();
        // Every metadata item has a ditto copy only if no checkpoint ever fell back to one.
        let ditto = self.shape.metadata_copies > 1
            && self.pool().stats().counters.metadata_single_copies == 0;
        for k in 0..8 {
            let (_, target) = *placed.get((pick as usize + k * 7919) % placed.len().max(1))?;
            let a = target.addr() + u64::from(row) % target.item_bytes() as u64;
            let (stripe, strip, off) = geo.locate(a)?;
            let bb = geo.block_bytes();
            let hit = hit_set(&geo, stripe, strip, pick);
            let lost = lost_ranges(&geo, stripe, strip, off / bb * bb, &hit);
            let mut metadata = false;
            let trace = self.trace;
            let walked = self.pool().walk_items(a, |addr, len, kind| {
                let hi = addr + u64::from(len);
                if lost.iter().any(|&(lo, h)| addr < h && lo < hi) {
                    if trace {
                        eprintln!("    in the row: {kind:?} at {addr}+{len}");
                    }
                    metadata |= !matches!(kind, ItemKind::Extent | ItemKind::Pad);
                }
            });
            // Items past where the walk stopped are unknown; metadata without a ditto copy is
            // lost with the row, which the model does not work out.
            let seen = lost.iter().all(|&(_, h)| walked.is_ok_and(|r| r >= h));
            if seen && (!metadata || ditto) {
                let member_lba = geo.stripe_lba(stripe) + (off / bb) as u64;
                return Some(Aim {
                    hit,
                    member_lba,
                    lost,
                    metadata,
                });
            }
        }
        None
    }

    /// Every block the model knows that the map points at, with its entry.
    fn placements(&mut self, at: usize) -> Result<Vec<Placed>, super::Failure> {
        let mut out = Vec::new();
        for (lun, lba) in self.model.known_blocks() {
            match self.pool().locate(lun, lba) {
                Ok(Some(e)) => out.push(((lun, lba), e)),
                Ok(None) => {}
                Err(e) => {
                    return Err(fail(
                        FailureKind::ReadError,
                        at,
                        format!("locate of LUN {lun} LBA {lba} failed within tolerance: {e}"),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Every range on the pool's loss list must hold blocks the local fault destroyed (a
    /// block listed that a copy or reconstruction still makes check is loss over-declared).
    pub(super) fn check_listed_loss(&mut self, at: usize) -> StepResult {
        let lost = self.model.lost_blocks();
        let ranges = self.pool().bad_ranges().to_vec();
        for r in ranges {
            if let Some(b) = (r.lba..r.end()).find(|&b| !lost.contains(&(r.lun, b))) {
                return Err(fail(
                    FailureKind::Health,
                    at,
                    format!(
                        "LUN {} LBA {b} listed lost (range {}..{}), but no fault destroyed \
                         every copy of it",
                        r.lun,
                        r.lba,
                        r.end()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Member slots a local fault hits in `stripe`: every copy of data strip `strip` on mirrors;
/// on parity levels the member holding it and `tolerance` others (chosen by `pick`); on
/// RAID-0 the member alone.
fn hit_set(geo: &Geometry, stripe: u64, strip: usize, pick: u32) -> Vec<usize> {
    let n = geo.disks();
    match geo.level() {
        Level::Raid1 | Level::Raid10 => (0..n)
            .filter(|&d| {
                let column = geo.column_of(stripe, d);
                matches!(column, Some(Column::Mirror { data, .. }) if data == strip)
            })
            .collect(),
        Level::Raid0 | Level::Raid5 | Level::Raid6 => {
            let Some(target) = geo.disk_of(stripe, Column::Data(strip)) else {
                return Vec::new();
            };
            let mut out = vec![target];
            let others: Vec<usize> = (0..n).filter(|&d| d != target).collect();
            for k in 0..geo.tolerance().min(others.len()) {
                out.push(others[(pick as usize + k) % others.len()]);
            }
            out
        }
    }
}

/// Log byte ranges `[lo, hi)` a local fault destroyed: the row at byte `row_off` of each data
/// strip whose member was hit (the strip `strip` alone on mirrors, whose copies were all hit).
fn lost_ranges(
    geo: &Geometry,
    stripe: u64,
    strip: usize,
    row_off: usize,
    hit: &[usize],
) -> Vec<(u64, u64)> {
    let sdb = geo.stripe_data_bytes() as u64;
    let sb = geo.strip_bytes() as u64;
    let bb = geo.block_bytes() as u64;
    let at = |j: usize| stripe * sdb + j as u64 * sb + row_off as u64;
    let strips: Vec<usize> = match geo.level() {
        Level::Raid1 | Level::Raid10 => vec![strip],
        _ => hit
            .iter()
            .filter_map(|&d| match geo.column_of(stripe, d) {
                Some(Column::Data(j)) => Some(j),
                _ => None,
            })
            .collect(),
    };
    strips.into_iter().map(|j| (at(j), at(j) + bb)).collect()
}
