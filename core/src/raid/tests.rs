//! Array tests over in-memory disks with injectable faults.
use std::vec;
use std::vec::Vec;

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType};

use super::*;
use crate::event::Event;

/// A plain in-memory disk with a few switchable faults, enough for unit tests of the array.
#[derive(Debug, Clone)]
pub(crate) struct RamDisk {
    pub data: Vec<u8>,
    pub bs: usize,
    pub failed: bool,
    pub medium: Vec<u64>,
    /// Blocks that fail every read and every write with a medium error (no spare left).
    pub sticky: Vec<u64>,
    pub transient: u32,
    pub writes: u64,
    /// Writes fail with the host's storage full ([`ErrorKind::NoSpace`]).
    pub full: bool,
    /// The next write starting in this block range is acknowledged and not made (a lost
    /// write); the range is cleared then.
    pub lose: Option<(u64, u64)>,
}

impl RamDisk {
    pub fn new(bs: usize, blocks: u64) -> Self {
        RamDisk {
            data: vec![0; bs * blocks as usize],
            bs,
            failed: false,
            medium: vec![],
            sticky: vec![],
            transient: 0,
            writes: 0,
            full: false,
            lose: None,
        }
    }
}

impl ErrorType for RamDisk {
    type Error = ErrorKind;
}

impl BlockDevice for RamDisk {
    fn block_size(&self) -> BlockSize {
        BlockSize::from_bytes(self.bs).unwrap()
    }
    fn block_count(&self) -> u64 {
        (self.data.len() / self.bs) as u64
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ErrorKind> {
        let n = raidcore_hal::check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        if self.failed {
            return Err(ErrorKind::DeviceFailed);
        }
        if self.transient > 0 {
            self.transient -= 1;
            return Err(ErrorKind::Timeout);
        }
        let mut bad = self.medium.iter().chain(&self.sticky);
        if let Some(&bad) = bad.find(|&&b| b >= lba && b < lba + n) {
            return Err(ErrorKind::Medium { lba: bad });
        }
        let o = lba as usize * self.bs;
        buf.copy_from_slice(&self.data[o..o + buf.len()]);
        Ok(())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), ErrorKind> {
        let n = raidcore_hal::check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        if self.failed {
            return Err(ErrorKind::DeviceFailed);
        }
        if self.full {
            return Err(ErrorKind::NoSpace);
        }
        if let Some(&bad) = self.sticky.iter().find(|&&b| b >= lba && b < lba + n) {
            return Err(ErrorKind::Medium { lba: bad });
        }
        if self.lose.is_some_and(|(lo, hi)| lba >= lo && lba < hi) {
            self.lose = None;
            return Ok(());
        }
        self.medium.retain(|&b| b < lba || b >= lba + n);
        let o = lba as usize * self.bs;
        self.data[o..o + buf.len()].copy_from_slice(buf);
        self.writes += 1;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        if self.failed {
            Err(ErrorKind::DeviceFailed)
        } else {
            Ok(())
        }
    }
}

pub(super) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

pub(super) fn array(level: Level, n: usize, strip: u32, stripes: u64) -> Array<RamDisk, 32> {
    let bs = 512;
    let blocks = 8 + stripes * u64::from(strip) / bs as u64;
    let g = Geometry::try_new(level, n, strip, BlockSize::B512, blocks, 8).unwrap();
    Array::new(
        g,
        (0..n).map(|_| Some(RamDisk::new(bs, blocks))),
        ArrayConfig::default(),
    )
    .unwrap()
}

pub(super) fn fill(a: &mut Array<RamDisk, 32>, seed: u64) -> Vec<u8> {
    let sdb = a.geometry().stripe_data_bytes();
    let all = pattern(seed, sdb * a.geometry().stripes() as usize);
    let mut scratch = vec![0u8; 8192];
    for (s, chunk) in all.chunks(sdb).enumerate() {
        a.write_stripe(s as u64, chunk, &mut scratch).unwrap();
    }
    all
}

const LEVELS: [(Level, usize); 5] = [
    (Level::Raid0, 3),
    (Level::Raid1, 3),
    (Level::Raid10, 4),
    (Level::Raid5, 5),
    (Level::Raid6, 6),
];

#[test]
fn write_then_read_every_level() {
    for (level, n) in LEVELS {
        let mut a = array(level, n, 4096, 2 * n as u64);
        let all = fill(&mut a, 1);
        let mut buf = vec![0u8; all.len()];
        let mut scratch = vec![0u8; 64 * 1024];
        a.read(0, &mut buf, &mut scratch).unwrap();
        assert_eq!(buf, all, "{level:?}");
        // Unaligned ranges crossing strip and stripe boundaries.
        for (off, len) in [
            (512usize, 4096usize),
            (3584, 9216),
            (all.len() - 1024, 1024),
        ] {
            let mut b = vec![0u8; len];
            a.read(off as u64, &mut b, &mut scratch).unwrap();
            assert_eq!(b, all[off..off + len], "{level:?} off={off}");
        }
    }
}

#[test]
fn parity_matches_the_reference_on_disk() {
    // RAID-6 on 6 disks: the P and Q strips on disk equal gen_pq of the data strips.
    let mut a = array(Level::Raid6, 6, 4096, 6);
    let all = fill(&mut a, 9);
    let g = *a.geometry();
    for s in 0..g.stripes() {
        let data: Vec<&[u8]> = (0..4)
            .map(|i| &all[(s as usize * 4 + i) * 4096..][..4096])
            .collect();
        let (mut p, mut q) = (vec![0u8; 4096], vec![0u8; 4096]);
        crate::parity::gen_pq(&data, &mut p, &mut q).unwrap();
        let lba = g.stripe_lba(s) as usize * 512;
        let pd = g.disk_of(s, Column::P).unwrap();
        let qd = g.disk_of(s, Column::Q).unwrap();
        assert_eq!(&a.disk_mut(pd).unwrap().data[lba..lba + 4096], &p[..]);
        assert_eq!(&a.disk_mut(qd).unwrap().data[lba..lba + 4096], &q[..]);
    }
}

#[test]
fn degraded_reads_and_too_many_failures() {
    for (level, n) in LEVELS {
        let tol = level.tolerance(n).min(2);
        let mut a = array(level, n, 4096, n as u64);
        let all = fill(&mut a, 2);
        let mut scratch = vec![0u8; 4096 * n];
        for d in 0..tol {
            a.fail(d, ErrorKind::DeviceFailed).unwrap();
            // Wipe the disk so a read that wrongly used it would be caught.
            a.disk_mut(d).unwrap().data.fill(0xee);
        }
        let mut buf = vec![0u8; all.len()];
        a.read(0, &mut buf, &mut scratch).unwrap();
        assert_eq!(buf, all, "{level:?} with {tol} failed");
        // One more failure than tolerated: errors, never wrong data. (RAID-10 survives a failure
        // in another pair, so fail the partner of disk 0 there.)
        let extra = if level == Level::Raid10 { 1 } else { tol };
        a.fail(extra, ErrorKind::DeviceFailed).unwrap();
        let res = a.read(0, &mut buf, &mut scratch);
        assert!(
            matches!(res, Err(ArrayError::Unrecoverable { .. })),
            "{level:?}: {res:?}"
        );
    }
}

/// An array of `level` on `n` disks (4 KiB strips, 4 stripes) filled with pattern 3, and a
/// latent sector error on block 3 of data strip 2 of stripe 1: the array, the data, that
/// member and the member block.
fn latent_error_under_data(level: Level, n: usize) -> (Array<RamDisk, 32>, Vec<u8>, usize, u64) {
    let mut a = array(level, n, 4096, 4);
    let all = fill(&mut a, 3);
    let g = *a.geometry();
    let d = g.disk_of(1, Column::Data(2)).unwrap();
    let bad = g.stripe_lba(1) + 3;
    a.disk_mut(d).unwrap().medium.push(bad);
    (a, all, d, bad)
}

/// A latent sector error under a read on RAID-6 with every other column present: the
/// reconstruction is verified by the parity left over, and the block is rewritten (only it).
#[test]
fn medium_error_is_reconstructed_and_rewritten() {
    let (mut a, all, d, bad) = latent_error_under_data(Level::Raid6, 5);
    let mut buf = vec![0u8; all.len()];
    let mut scratch = vec![0u8; 5 * 4096];
    a.read(0, &mut buf, &mut scratch).unwrap();
    assert_eq!(buf, all);
    assert!(a.disk_mut(d).unwrap().medium.is_empty(), "block rewritten");
    assert!(a.take_lse_left().is_empty());
    assert_eq!(a.member(d).unwrap().state(), DiskState::Online);
    assert_eq!(a.member(d).unwrap().errors().medium, 1);
    // Only the block that did not read is rewritten, not the rest of the piece.
    assert!(a.events().iter().any(|(_, e)| matches!(
        e,
        Event::Repaired { disk, lba, blocks: 1 } if *disk as usize == d && *lba == bad
    )));
}

/// RAID-5 has no redundancy left to verify a reconstruction around a latent sector error:
/// the read returns it, but the block is left for a caller that checks the bytes
/// ([`Array::take_lse_left`] names the member).
#[test]
fn medium_error_on_raid5_is_left_for_a_checked_repair() {
    let (mut a, all, d, bad) = latent_error_under_data(Level::Raid5, 4);
    let mut buf = vec![0u8; all.len()];
    let mut scratch = vec![0u8; 4 * 4096];
    a.read(0, &mut buf, &mut scratch).unwrap();
    assert_eq!(buf, all);
    assert_eq!(
        a.disk_mut(d).unwrap().medium,
        vec![bad],
        "block not rewritten"
    );
    assert_eq!(a.take_lse_left(), DiskSet::one(d));
    assert_eq!(a.member(d).unwrap().errors().medium, 1);
}

/// Seed 794086: parity silently wrong (a misdirected write) under a latent sector error on
/// RAID-6. The reconstruction from it disagrees with Q, so the block keeps its error rather
/// than taking the wrong bytes (which made two bad columns of one, and data lost once a
/// member failed).
#[test]
fn medium_error_over_bad_parity_is_not_rewritten() {
    let (mut a, all, d, bad) = latent_error_under_data(Level::Raid6, 5);
    let p = a.geometry().disk_of(1, Column::P).unwrap();
    a.disk_mut(p).unwrap().data[bad as usize * 512] ^= 0x5a;
    let mut buf = vec![0u8; all.len()];
    let mut scratch = vec![0u8; 5 * 4096];
    let _ = a.read(0, &mut buf, &mut scratch);
    assert_eq!(
        a.disk_mut(d).unwrap().medium,
        vec![bad],
        "block not rewritten"
    );
    assert_eq!(a.take_lse_left(), DiskSet::one(d));
}

/// A sector that takes no write (a drive out of spares) becomes a hole of its member, as md's
/// bad-block log keeps it: the member stays, serves every other block, counts the sector once,
/// and the hole's row is reconstructed from the others; a rewrite of it is no repair.
#[test]
fn a_block_no_write_can_place_is_a_hole_and_the_member_stays() {
    let mut a = array(Level::Raid5, 4, 4096, 4);
    let all = fill(&mut a, 7);
    let g = *a.geometry();
    let d = g.disk_of(1, Column::Data(0)).unwrap();
    let bad = g.stripe_lba(1) + 2;
    a.disk_mut(d).unwrap().sticky.push(bad);
    let mut buf = vec![0u8; all.len()];
    let mut scratch = vec![0u8; 4 * 4096];
    for pass in 0..3 {
        let repaired = a.stats().repair_bytes_written;
        a.read(0, &mut buf, &mut scratch).unwrap();
        assert!(buf == all, "pass {pass}: data read back");
        assert_eq!(
            a.member(d).unwrap().state(),
            DiskState::Online,
            "pass {pass}"
        );
        assert_eq!(
            a.member(d).unwrap().errors().medium,
            1,
            "pass {pass}: one sector"
        );
        assert_eq!(
            a.stats().repair_bytes_written,
            repaired,
            "pass {pass}: nothing placed"
        );
    }
    assert!(
        !a.events()
            .iter()
            .any(|(_, e)| matches!(e, Event::Repaired { .. }))
    );
    // A new stripe over it: written around the hole, read back whole, the member still in.
    let sdb = g.stripe_data_bytes();
    let new = pattern(8, sdb);
    a.write_stripe(1, &new, &mut scratch).unwrap();
    let mut got = vec![0u8; sdb];
    a.read(sdb as u64, &mut got, &mut scratch).unwrap();
    assert!(got == new, "rewritten stripe read back");
    assert_eq!(a.member(d).unwrap().state(), DiskState::Online);
    assert_eq!(a.member(d).unwrap().errors().medium, 1);
    // Raw member I/O (labels) is told plainly.
    assert!(matches!(
        a.disk_write(d, bad, &new[..512]),
        Err(ArrayError::Disk { kind: ErrorKind::Medium { lba }, .. }) if lba == bad
    ));
}

/// Holes on two members of a RAID-5 in one row leave that row of a new stripe unrecoverable:
/// the write fails rather than acknowledging data that cannot be read.
#[test]
fn a_stripe_write_with_holes_past_tolerance_in_one_row_fails() {
    let mut a = array(Level::Raid5, 4, 4096, 4);
    fill(&mut a, 9);
    let g = *a.geometry();
    let row = g.stripe_lba(2) + 5;
    a.disk_mut(0).unwrap().sticky.push(row);
    a.disk_mut(1).unwrap().sticky.push(row);
    let mut scratch = vec![0u8; 4 * 4096];
    let new = pattern(10, g.stripe_data_bytes());
    assert!(matches!(
        a.write_stripe(2, &new, &mut scratch),
        Err(ArrayError::WriteFailed { stripe: 2 })
    ));
    // Once member 1's bad sector sits one row further, each row has one hole: written.
    a.disk_mut(1).unwrap().sticky.clear();
    a.disk_mut(1).unwrap().sticky.push(row + 1);
    a.write_stripe(2, &new, &mut scratch).unwrap();
    let mut got = vec![0u8; new.len()];
    a.read(2 * new.len() as u64, &mut got, &mut scratch)
        .unwrap();
    assert!(got == new, "stripe 2 read back around both holes");
    assert_eq!(a.member(0).unwrap().state(), DiskState::Online);
    assert_eq!(a.member(1).unwrap().state(), DiskState::Online);
}

#[test]
fn medium_error_with_one_disk_failed_on_raid6() {
    let mut a = array(Level::Raid6, 6, 4096, 6);
    let all = fill(&mut a, 4);
    a.fail(0, ErrorKind::DeviceFailed).unwrap();
    a.disk_mut(0).unwrap().data.fill(0);
    for s in 0..6 {
        let d = if a.geometry().disk_of(s, Column::Data(1)).unwrap() == 0 {
            2
        } else {
            1
        };
        let lba = a.geometry().stripe_lba(s) + 1;
        a.disk_mut(d).unwrap().medium.push(lba);
    }
    let mut buf = vec![0u8; all.len()];
    let mut scratch = vec![0u8; 6 * 4096];
    a.read(0, &mut buf, &mut scratch).unwrap();
    assert_eq!(buf, all);
}

#[test]
fn transient_errors_are_retried() {
    let mut a = array(Level::Raid5, 4, 4096, 4);
    let all = fill(&mut a, 5);
    a.disk_mut(1).unwrap().transient = 2;
    let mut buf = vec![0u8; all.len()];
    let mut scratch = vec![0u8; 4 * 4096];
    a.read(0, &mut buf, &mut scratch).unwrap();
    assert_eq!(buf, all);
    assert_eq!(a.member(1).unwrap().state(), DiskState::Online);
    assert_eq!(a.member(1).unwrap().errors().transient, 2);
}

#[test]
fn rebuild_restores_the_exact_member_image() {
    for (level, n) in LEVELS.into_iter().filter(|(l, _)| *l != Level::Raid0) {
        let mut a = array(level, n, 8192, n as u64);
        fill(&mut a, 6);
        let target = n - 1;
        let original = a.disk_mut(target).unwrap().data.clone();
        let blocks = a.disk_mut(target).unwrap().block_count();
        a.fail(target, ErrorKind::DeviceFailed).unwrap();
        a.replace(target, RamDisk::new(512, blocks)).unwrap();
        let mut scratch = vec![0u8; 2048 * n]; // smaller than a strip: exercises chunking
        for s in 0..a.geometry().stripes() {
            a.rebuild_stripe(s, target, &mut scratch).unwrap();
            a.set_rebuilt_below(target, s + 1).unwrap();
        }
        a.set_online(target).unwrap();
        let start = a.geometry().data_start_lba() as usize * 512;
        assert_eq!(
            a.disk_mut(target).unwrap().data[start..],
            original[start..],
            "{level:?}"
        );
    }
}

/// A rebuild past a latent sector error on a survivor with no redundancy left: every row but
/// the bad one reaches the new member, and the bad row names exactly the data strips lost.
#[test]
fn rebuild_by_rows_writes_every_row_it_can() {
    for (level, n) in [(Level::Raid5, 4), (Level::Raid1, 2), (Level::Raid10, 4)] {
        let mut a = array(level, n, 4096, n as u64);
        fill(&mut a, 12);
        let g = *a.geometry();
        let (target, stripe, row) = (n - 1, 1, 2usize);
        // A survivor: the target's mirror partner, or any other member for RAID-5.
        let sick = if level == Level::Raid5 { 0 } else { target - 1 };
        let original = a.disk_mut(target).unwrap().data.clone();
        let blocks = a.disk_mut(target).unwrap().block_count();
        a.fail(target, ErrorKind::DeviceFailed).unwrap();
        a.replace(target, RamDisk::new(512, blocks)).unwrap();
        let bad = g.stripe_lba(stripe) + row as u64;
        a.disk_mut(sick).unwrap().medium.push(bad);
        let mut scratch = vec![0u8; 4096 * n];
        assert!(
            matches!(
                a.rebuild_stripe(stripe, target, &mut scratch),
                Err(ArrayError::Unrecoverable { .. })
            ),
            "{level:?}"
        );
        let lost = a.rebuild_stripe_rows(stripe, target, &mut scratch).unwrap();
        let data_strip = |d: usize| match g.column_of(stripe, d) {
            Some(Column::Data(i) | Column::Mirror { data: i, .. }) => 1u32 << i,
            _ => 0,
        };
        let strips = data_strip(target) | data_strip(sick);
        assert_eq!(
            lost.ranges(),
            &[LostRange {
                row: row as u32,
                rows: 1,
                strips
            }],
            "{level:?}"
        );
        let new = &a.disk_mut(target).unwrap().data;
        let strip_at = g.stripe_lba(stripe) as usize * 512;
        for r in (0..8).filter(|&r| r != row) {
            let at = strip_at + r * 512;
            assert_eq!(
                new[at..at + 512],
                original[at..at + 512],
                "{level:?} row {r}"
            );
        }
        // The row it could not write stays unreadable on the new member: a read of a lost
        // block fails rather than computing it from what the new member holds there.
        a.set_online(target).unwrap();
        for i in (0..g.data_strips()).filter(|i| strips >> i & 1 == 1) {
            let addr = stripe * g.stripe_data_bytes() as u64 + (i * 4096 + row * 512) as u64;
            let mut buf = vec![0u8; 512];
            assert_eq!(
                a.read(addr, &mut buf, &mut scratch),
                Err(ArrayError::Unrecoverable { stripe }),
                "{level:?} data strip {i}"
            );
        }
    }
}

/// Mirrors read around latent sector errors block by block: every block has a copy that reads
/// it, though no copy reads the whole piece, so the read succeeds. The copies are left for the
/// caller to repair once it has checked the bytes (the copy read may be silently bad).
#[test]
fn mirror_reads_each_block_from_a_copy_that_has_it() {
    for (level, n) in [(Level::Raid1, 3), (Level::Raid10, 4)] {
        let mut a = array(level, n, 4096, 2);
        let all = fill(&mut a, 13);
        let g = *a.geometry();
        let copies: Vec<usize> = (0..g.copies())
            .map(|c| g.disk_of(0, Column::Mirror { data: 0, copy: c }).unwrap())
            .collect();
        let base = g.stripe_lba(0);
        a.disk_mut(copies[0]).unwrap().medium.push(base + 2);
        a.disk_mut(copies[1]).unwrap().medium.push(base + 5);
        if let Some(&third) = copies.get(2) {
            a.fail(third, ErrorKind::DeviceFailed).unwrap();
        }
        let mut buf = vec![0u8; 4096];
        let mut scratch = vec![0u8; 4096 * n];
        a.read(0, &mut buf, &mut scratch).unwrap();
        assert_eq!(buf, all[..4096], "{level:?}");
        let left = a.take_lse_left();
        assert_eq!(left, DiskSet::EMPTY.with(copies[0]).with(copies[1]));
        assert_eq!(a.disk_mut(copies[0]).unwrap().medium, [base + 2]);
        assert_eq!(a.disk_mut(copies[1]).unwrap().medium, [base + 5]);
        a.heal_unreadable(0, 0, 0, &buf, left, &mut scratch)
            .unwrap();
        for &d in &copies[..2] {
            assert!(
                a.disk_mut(d).unwrap().medium.is_empty(),
                "{level:?}: copy {d} repaired"
            );
        }
    }
}

/// A mirror copy's latent sector error under a block the checked bytes cover only in part
/// (the edge of an item): the heal takes the rest of the block from the other copy, as a read
/// of it would, and writes the block whole. On RAID-5 no copy holds the rest: the block is
/// left for the scrub.
#[test]
fn heal_of_an_edge_block_takes_the_rest_from_another_copy() {
    for (level, n) in [(Level::Raid1, 2), (Level::Raid5, 4)] {
        let mut a = array(level, n, 4096, 2);
        let all = fill(&mut a, 21);
        let g = *a.geometry();
        let d = g
            .disk_of(0, Column::Data(0))
            .unwrap_or_else(|| g.disk_of(0, Column::Mirror { data: 0, copy: 0 }).unwrap());
        let lba = g.stripe_lba(0) + 1;
        a.disk_mut(d).unwrap().medium.push(lba);
        let mut scratch = vec![0u8; 4096 * n];
        let (off, end) = (700, 1700);
        let set = DiskSet::EMPTY.with(d);
        a.heal_unreadable(0, 0, off, &all[off..end], set, &mut scratch)
            .unwrap();
        let healed = a.disk_mut(d).unwrap().medium.is_empty();
        assert_eq!(healed, level == Level::Raid1, "{level:?}");
        if healed {
            let at = lba as usize * 512;
            assert_eq!(a.disk_mut(d).unwrap().data[at..at + 512], all[512..1024]);
        }
    }
}

#[test]
fn verify_names_the_corrupt_member() {
    let mut a = array(Level::Raid6, 7, 4096, 7);
    fill(&mut a, 7);
    let mut scratch = vec![0u8; 7 * 4096];
    for s in 0..7 {
        assert!(a.verify_stripe(s, &mut scratch).unwrap().consistent());
    }
    for d in 0..7 {
        let lba = a.geometry().stripe_lba(2) as usize * 512 + 100;
        a.disk_mut(d).unwrap().data[lba] ^= 0x10;
        let r = a.verify_stripe(2, &mut scratch).unwrap();
        assert_eq!(r.suspects, DiskSet::one(d), "corrupt member {d}");
        a.repair(2, 0, 4096, DiskSet::one(d), &mut scratch).unwrap();
        assert!(a.verify_stripe(2, &mut scratch).unwrap().consistent());
    }
    // RAID-5 sees the mismatch but cannot name the member.
    let mut a = array(Level::Raid5, 4, 4096, 4);
    fill(&mut a, 8);
    let lba = a.geometry().stripe_lba(0) as usize * 512;
    a.disk_mut(1).unwrap().data[lba] ^= 1;
    let r = a.verify_stripe(0, &mut scratch).unwrap();
    assert!(!r.consistent());
    assert!(r.p_bad && r.suspects.is_empty());
    // Three-way mirror: the odd copy out is named.
    let mut a = array(Level::Raid1, 3, 4096, 2);
    fill(&mut a, 9);
    let lba = a.geometry().stripe_lba(1) as usize * 512;
    a.disk_mut(2).unwrap().data[lba + 7] ^= 1;
    assert_eq!(
        a.verify_stripe(1, &mut scratch).unwrap().suspects,
        DiskSet::one(2)
    );
}

/// A latent sector error in a member's strip leaves that member out of its own row only: rot
/// three rows further down the same strip is still found (RAID-5: parity disagrees; RAID-6:
/// the syndrome names the member), where the whole strip used to go unchecked.
#[test]
fn verify_checks_around_a_latent_sector_error() {
    for (level, n) in [(Level::Raid5, 4), (Level::Raid6, 6)] {
        let mut a = array(level, n, 4096, 4);
        fill(&mut a, 11);
        let mut scratch = vec![0u8; n * 4096];
        let base = a.geometry().stripe_lba(1);
        a.disk_mut(1).unwrap().medium = vec![base];
        let r = a.verify_stripe(1, &mut scratch).unwrap();
        assert!(
            r.consistent(),
            "{level:?}: a latent error alone is no mismatch"
        );
        assert_eq!(r.unreadable, DiskSet::one(1), "{level:?}");
        a.disk_mut(1).unwrap().data[(base as usize + 3) * 512 + 5] ^= 0x20;
        let r = a.verify_stripe(1, &mut scratch).unwrap();
        assert_eq!(r.mismatched_chunks, 1, "{level:?}: the rotten row");
        assert_eq!(r.unreadable, DiskSet::one(1), "{level:?}");
        let named = if level == Level::Raid6 {
            DiskSet::one(1)
        } else {
            DiskSet::EMPTY
        };
        assert_eq!(r.suspects, named, "{level:?}");
    }
}

#[test]
fn excluding_a_member_reconstructs_its_data() {
    let mut a = array(Level::Raid6, 6, 4096, 6);
    let all = fill(&mut a, 10);
    // Silent corruption on member 3: a normal read returns it, an excluding read does not.
    for s in 0..6 {
        let lba = a.geometry().stripe_lba(s) as usize * 512;
        a.disk_mut(3).unwrap().data[lba..lba + 4096].fill(0x66);
    }
    let mut buf = vec![0u8; all.len()];
    let mut scratch = vec![0u8; 6 * 4096];
    a.read(0, &mut buf, &mut scratch).unwrap();
    assert_ne!(buf, all);
    a.read_excluding(0, &mut buf, &mut scratch, DiskSet::one(3))
        .unwrap();
    assert_eq!(buf, all);
}

#[test]
fn write_with_too_few_members_fails() {
    let mut a = array(Level::Raid5, 4, 4096, 4);
    a.fail(0, ErrorKind::DeviceFailed).unwrap();
    let data = pattern(1, a.geometry().stripe_data_bytes());
    let mut scratch = vec![0u8; 8192];
    a.write_stripe(0, &data, &mut scratch).unwrap(); // degraded write is fine
    a.disk_mut(1).unwrap().failed = true;
    assert_eq!(
        a.write_stripe(1, &data, &mut scratch),
        Err(ArrayError::WriteFailed { stripe: 1 })
    );
    assert_eq!(a.member(1).unwrap().state(), DiskState::Failed);
}

#[test]
fn bad_shapes_are_refused() {
    let mut a = array(Level::Raid5, 4, 4096, 4);
    let mut scratch = vec![0u8; 8192];
    let mut b = vec![0u8; 1000];
    assert_eq!(a.read(0, &mut b, &mut scratch), Err(ArrayError::Misaligned));
    let mut b = vec![0u8; 512];
    assert_eq!(
        a.read(100, &mut b, &mut scratch),
        Err(ArrayError::Misaligned)
    );
    let end = a.geometry().data_bytes();
    assert_eq!(
        a.read(end, &mut b, &mut scratch),
        Err(ArrayError::OutOfRange)
    );
    assert_eq!(
        a.write_stripe(4, &vec![0; 3 * 4096], &mut scratch),
        Err(ArrayError::OutOfRange)
    );
    assert_eq!(
        a.write_stripe(0, &[0; 4096], &mut scratch),
        Err(ArrayError::Misaligned)
    );
    assert_eq!(
        a.write_stripe(0, &vec![0; 3 * 4096], &mut [0u8; 100]),
        Err(ArrayError::ScratchTooSmall)
    );
}

#[test]
fn healing_a_range_on_a_mirror_copies_no_unchecked_bytes() {
    // Three copies. Copy 0 is wrong inside the checked range, copy 1 (the one that checked)
    // has bit rot just outside it, in the same member block as the range's last bytes.
    let mut a = array(Level::Raid1, 3, 4096, 2);
    let all = fill(&mut a, 21);
    let base = a.geometry().stripe_lba(1) as usize * 512;
    let (off, end) = (700usize, 2100usize); // blocks 1..=4, partial at both ends
    let good = all[4096 + off..4096 + end].to_vec();
    a.disk_mut(0).unwrap().data[base + 1000] ^= 0x40;
    a.disk_mut(1).unwrap().data[base + 2200] ^= 0x08;
    let mut scratch = vec![0u8; 3 * 512];
    a.heal_data(1, 0, off, &good, DiskSet::one(0).with(2), &mut scratch)
        .unwrap();
    let strip = |a: &mut Array<RamDisk, 32>, d: usize| {
        a.disk_mut(d).unwrap().data[base..base + 4096].to_vec()
    };
    // Copy 0: healed in range, and its own good byte 2200 kept (not copy 1's rot).
    assert_eq!(strip(&mut a, 0), all[4096..8192]);
    assert_eq!(strip(&mut a, 2), all[4096..8192]);
    // Copy 1 keeps its rot, for a later read or scrub to find; healing did not spread it.
    let mut want = all[4096..8192].to_vec();
    want[2200] ^= 0x08;
    assert_eq!(strip(&mut a, 1), want);
    // Bounds: past the strip's end is refused.
    assert_eq!(
        a.heal_data(1, 0, 4000, &good, DiskSet::one(0), &mut scratch),
        Err(ArrayError::OutOfRange)
    );
}

#[test]
fn healing_a_range_on_raid5_rewrites_the_data_member_in_range_only() {
    let mut a = array(Level::Raid5, 4, 4096, 4);
    let all = fill(&mut a, 22);
    let g = *a.geometry();
    let sdb = g.stripe_data_bytes();
    let (stripe, strip) = (2u64, 1usize);
    let d = g.disk_of(stripe, Column::Data(strip)).unwrap();
    let base = g.stripe_lba(stripe) as usize * 512;
    let data_at = stripe as usize * sdb + strip * 4096;
    // The data member is wrong at byte 300 (in range) and 3000 (outside it).
    a.disk_mut(d).unwrap().data[base + 300] ^= 1;
    a.disk_mut(d).unwrap().data[base + 3000] ^= 1;
    let good = all[data_at + 100..data_at + 900].to_vec();
    let mut scratch = vec![0u8; 4 * 512];
    a.heal_data(stripe, strip, 100, &good, DiskSet::one(d), &mut scratch)
        .unwrap();
    let got = a.disk_mut(d).unwrap().data[base..base + 4096].to_vec();
    assert_eq!(got[..2048], all[data_at..data_at + 2048]);
    // Outside the range nothing was rewritten: the damage at 3000 is still there.
    assert_eq!(got[3000], all[data_at + 3000] ^ 1);
}

/// A heal naming the parity member too leaves parity as it is: recomputed from the rows' other
/// data columns, which nothing checked, it would take on their silent damage (seeds 438648,
/// 515588, 597462 lost blocks within tolerance that way). Here another data column is rotten
/// in the healed rows.
#[test]
fn healing_leaves_parity_to_the_scrub() {
    let mut a = array(Level::Raid5, 4, 4096, 4);
    let all = fill(&mut a, 24);
    let g = *a.geometry();
    let sdb = g.stripe_data_bytes();
    let (stripe, strip) = (2u64, 0usize);
    let d = g.disk_of(stripe, Column::Data(strip)).unwrap();
    let other = g.disk_of(stripe, Column::Data(1)).unwrap();
    let p = g.disk_of(stripe, Column::P).unwrap();
    let base = g.stripe_lba(stripe) as usize * 512;
    a.disk_mut(d).unwrap().data[base + 300] ^= 1;
    a.disk_mut(other).unwrap().data[base + 200] ^= 1;
    let parity_before = a.disk_mut(p).unwrap().data[base..base + 4096].to_vec();
    let data_at = stripe as usize * sdb + strip * 4096;
    let good = all[data_at..data_at + 1024].to_vec();
    let mut scratch = vec![0u8; 4 * 512];
    a.heal_data(
        stripe,
        strip,
        0,
        &good,
        DiskSet::one(d).with(p),
        &mut scratch,
    )
    .unwrap();
    assert_eq!(a.disk_mut(d).unwrap().data[base + 300], all[data_at + 300]);
    assert_eq!(
        a.disk_mut(p).unwrap().data[base..base + 4096],
        parity_before[..],
        "parity was rewritten from an unchecked column"
    );
}

#[test]
fn a_checked_mirror_rebuild_refuses_copies_that_disagree() {
    // Three copies, member 0 replaced; the two survivors differ in one byte of stripe 1.
    let mut a = array(Level::Raid1, 3, 4096, 2);
    let all = fill(&mut a, 23);
    let base = a.geometry().stripe_lba(1) as usize * 512;
    a.disk_mut(2).unwrap().data[base + 3000] ^= 0x10;
    a.fail(0, ErrorKind::DeviceFailed).unwrap();
    a.replace(0, RamDisk::new(512, 64)).unwrap();
    let mut scratch = vec![0u8; 3 * 512];
    // Stripe 0 agrees and is rebuilt; stripe 1 is refused before its bad chunk is written.
    assert_eq!(a.rebuild_stripe_checked(0, 0, &mut scratch), Ok(true));
    let base0 = a.geometry().stripe_lba(0) as usize * 512;
    assert_eq!(
        a.disk_mut(0).unwrap().data[base0..base0 + 4096],
        all[..4096]
    );
    assert_eq!(a.rebuild_stripe_checked(1, 0, &mut scratch), Ok(false));
    assert!(
        a.disk_mut(0).unwrap().data[base + 2560..base + 3072]
            .iter()
            .all(|b| *b == 0)
    );
    // Once the survivors agree again, the checked rebuild copies the stripe.
    a.disk_mut(2).unwrap().data[base + 3000] ^= 0x10;
    assert_eq!(a.rebuild_stripe_checked(1, 0, &mut scratch), Ok(true));
    assert_eq!(
        a.disk_mut(0).unwrap().data[base..base + 4096],
        all[4096..8192]
    );
    // A two-way mirror with one copy left has nothing to compare: it rebuilds.
    let mut b = array(Level::Raid1, 2, 4096, 2);
    let all_b = fill(&mut b, 24);
    b.fail(1, ErrorKind::DeviceFailed).unwrap();
    b.replace(1, RamDisk::new(512, 64)).unwrap();
    assert_eq!(b.rebuild_stripe_checked(1, 1, &mut scratch), Ok(true));
    assert_eq!(
        b.disk_mut(1).unwrap().data[base..base + 4096],
        all_b[4096..8192]
    );
}

#[test]
fn an_exclusion_probe_that_cannot_reconstruct_is_no_loss_event() {
    // RAID-6 with one member failed: excluding two more is a probe the caller chose (the pool
    // looking for a silently damaged column); it fails, but nothing was lost. Failing two more
    // members for real is a loss, and says so.
    let mut a = array(Level::Raid6, 6, 4096, 6);
    let all = fill(&mut a, 25);
    a.fail(0, ErrorKind::DeviceFailed).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut scratch = vec![0u8; 6 * 4096];
    let lost = |a: &Array<RamDisk, 32>| {
        a.events()
            .iter()
            .filter(|(_, e)| matches!(e, Event::Unrecoverable { .. }))
            .count()
    };
    assert_eq!(
        a.read_excluding(0, &mut buf, &mut scratch, DiskSet::one(1).with(2)),
        Err(ArrayError::Unrecoverable { stripe: 0 })
    );
    assert_eq!(lost(&a), 0);
    a.read(0, &mut buf, &mut scratch).unwrap();
    assert_eq!(buf, all[..4096]);
    a.fail(1, ErrorKind::DeviceFailed).unwrap();
    a.fail(2, ErrorKind::DeviceFailed).unwrap();
    assert_eq!(
        a.read(0, &mut buf, &mut scratch),
        Err(ArrayError::Unrecoverable { stripe: 0 })
    );
    assert_eq!(lost(&a), 1);
    // Mirrors: a probe excluding the only readable copy is no loss either.
    let mut m = array(Level::Raid1, 2, 4096, 2);
    fill(&mut m, 26);
    m.fail(0, ErrorKind::DeviceFailed).unwrap();
    assert_eq!(
        m.read_excluding(0, &mut buf, &mut scratch, DiskSet::one(1)),
        Err(ArrayError::Unrecoverable { stripe: 0 })
    );
    assert_eq!(lost(&m), 0);
}
