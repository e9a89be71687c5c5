//! Exhaustive recovery: every level, every width (RAID-6 up to 32 members, the others up to 16),
//! every set of failed members the level survives (RAID-1: all but one; RAID-10: at most one of
//! each mirror pair; RAID-5/6: up to one/two), read back byte-exact through the array, with the
//! failed members' disks refusing every request so that a read which used one fails. RAID-5/6
//! also get every set of one failure more (up to 16 members), which must read as
//! `Unrecoverable`, never as other data.
//!
//! Each case reads one stripe, a different one per case so that every parity rotation is met,
//! and the whole array (every rotation) up to 16 members (RAID-1: 8).
use std::vec;
use std::vec::Vec;

use raidcore_hal::ErrorKind;

use super::tests::{RamDisk, array, fill};
use super::{Array, ArrayError, Level};

const STRIP: u32 = 4096;

/// Every set (as a bit mask) of at most `k` of `w` members.
fn up_to(w: usize, k: usize) -> Vec<u32> {
    fn go(w: usize, k: usize, from: usize, mask: u32, out: &mut Vec<u32>) {
        out.push(mask);
        if k == 0 {
            return;
        }
        for d in from..w {
            go(w, k - 1, d + 1, mask | 1 << d, out);
        }
    }
    let mut out = Vec::new();
    go(w, k, 0, 0, &mut out);
    out
}

/// The sets of failed members `level` survives on `w` members.
fn survivable(level: Level, w: usize) -> Vec<u32> {
    // Mirrors have at most 16 members here, so every mask fits.
    let all = || 0..1u32 << w.min(16);
    match level {
        Level::Raid0 => vec![0],
        Level::Raid1 => all().filter(|m| m.count_ones() < w as u32).collect(),
        Level::Raid10 => all()
            .filter(|m| (0..w / 2).all(|p| (m >> (2 * p)) & 3 != 3))
            .collect(),
        Level::Raid5 | Level::Raid6 => up_to(w, level.tolerance(w)),
    }
}

/// Fails the members in `mask` (their disks refuse every request), reads stripe `stripe` (or
/// everything, for `None`) into `out`, and puts the members back online.
fn read_with_failed(
    a: &mut Array<RamDisk, 32>,
    mask: u32,
    stripe: Option<u64>,
    out: &mut [u8],
    scratch: &mut [u8],
) -> Result<(), ArrayError> {
    let failed = || (0..32).filter(move |d| mask >> d & 1 == 1);
    for d in failed() {
        a.fail(d, ErrorKind::DeviceFailed).unwrap();
        a.disk_mut(d).unwrap().failed = true;
    }
    let sdb = a.geometry().stripe_data_bytes();
    let res = match stripe {
        Some(s) => a.read(s * sdb as u64, &mut out[..sdb], scratch),
        None => a.read(0, out, scratch),
    };
    for d in failed() {
        a.disk_mut(d).unwrap().failed = false;
        a.set_state(d, super::DiskState::Online).unwrap();
    }
    res
}

/// Runs every case of `level` on `w` members; returns how many.
fn level_width(level: Level, w: usize) -> usize {
    let stripes = w as u64;
    let mut a = array(level, w, STRIP, stripes);
    let all = fill(&mut a, 0x5eed ^ w as u64);
    let sdb = a.geometry().stripe_data_bytes();
    let mut out = vec![0u8; all.len()];
    let mut scratch = vec![0u8; STRIP as usize * w];
    let mut cases = 0;
    for (i, &mask) in survivable(level, w).iter().enumerate() {
        let s = i as u64 % stripes;
        read_with_failed(&mut a, mask, Some(s), &mut out, &mut scratch)
            .unwrap_or_else(|e| panic!("{level:?} × {w}, failed {mask:#x}, stripe {s}: {e:?}"));
        let want = &all[s as usize * sdb..][..sdb];
        assert!(
            out[..sdb] == *want,
            "{level:?} × {w}, failed {mask:#x}, stripe {s}: other data"
        );
        if w <= 16 && (level != Level::Raid1 || w <= 8) {
            read_with_failed(&mut a, mask, None, &mut out, &mut scratch).unwrap();
            assert!(out == all, "{level:?} × {w}, failed {mask:#x}: other data");
        }
        cases += 1;
    }
    if matches!(level, Level::Raid5 | Level::Raid6) && w <= 16 {
        let k = level.tolerance(w) + 1;
        for (i, mask) in up_to(w, k).into_iter().enumerate() {
            if mask.count_ones() as usize != k {
                continue;
            }
            let s = i as u64 % stripes;
            let res = read_with_failed(&mut a, mask, Some(s), &mut out, &mut scratch);
            assert!(
                matches!(res, Err(ArrayError::Unrecoverable { .. })),
                "{level:?} × {w}, failed {mask:#x}, stripe {s}: {res:?}"
            );
            cases += 1;
        }
    }
    cases
}

#[test]
fn exhaustive_recovery_every_level_width_and_failure_set() {
    let levels = [
        (Level::Raid0, 2..=16, 1),
        (Level::Raid1, 2..=16, 1),
        (Level::Raid10, 4..=16, 2),
        (Level::Raid5, 3..=16, 1),
        (Level::Raid6, 4..=32, 1),
    ];
    let mut total = 0;
    for (level, widths, step) in levels {
        let mut n = 0;
        for w in widths.step_by(step) {
            n += level_width(level, w);
        }
        std::println!("exhaustive recovery: {level:?}: {n} cases");
        total += n;
    }
    std::println!("exhaustive recovery: {total} cases in all");
}
