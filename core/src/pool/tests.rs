//! Pool tests over in-memory disks: round trips, crash recovery, degraded import, space.
use std::vec;
use std::vec::Vec;

use super::*;
use crate::raid::tests::RamDisk;

type TestPool = Pool<RamDisk, Vec<u8>, 8, 4, 32, 8>;

fn cfg() -> PoolConfig {
    PoolConfig {
        level: Level::Raid6,
        strip_bytes: 4096,
        max_extent_blocks: 8,
        zil_slots: 32,
        segment_stripes: 4,
        max_segments: 256,
        ..PoolConfig::default()
    }
}

fn disks(n: usize, blocks: u64) -> Vec<RamDisk> {
    (0..n).map(|_| RamDisk::new(512, blocks)).collect()
}

fn new_pool(c: PoolConfig, n: usize, blocks: u64) -> TestPool {
    let mem = vec![0u8; TestPool::memory_bytes(&c, n)];
    TestPool::create(disks(n, blocks), disks(0, blocks), c, [7; 16], mem).unwrap()
}

fn block(seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..4096)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

fn reimport(p: TestPool) -> (TestPool, ImportReport) {
    let (members, spares, mem) = p.into_parts();
    let all: Vec<RamDisk> = members.into_iter().flatten().chain(spares).collect();
    TestPool::import(
        all,
        ImportOptions {
            config: cfg(),
            skip_refused: false,
        },
        mem,
    )
    .unwrap()
}

#[test]
fn write_read_round_trip_and_zeros() {
    let mut p = new_pool(cfg(), 6, 40_000);
    let lun = p.create_lun("a", 1000).unwrap();
    for i in 0..100u64 {
        p.write(lun, i, &block(i), false).unwrap();
    }
    let mut buf = vec![0u8; 4096];
    for i in 0..100u64 {
        p.read(lun, i, &mut buf).unwrap();
        assert_eq!(buf, block(i), "block {i}");
    }
    p.read(lun, 500, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    // Overwrite and trim.
    p.write(lun, 5, &block(1000), false).unwrap();
    p.trim(lun, 6, 2).unwrap();
    p.read(lun, 5, &mut buf).unwrap();
    assert_eq!(buf, block(1000));
    p.read(lun, 6, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    p.read(lun, 8, &mut buf).unwrap();
    assert_eq!(buf, block(8));
}

#[test]
fn flushed_data_survives_a_crash() {
    let mut p = new_pool(cfg(), 6, 40_000);
    let lun = p.create_lun("a", 4000).unwrap();
    for i in 0..300u64 {
        p.write(lun, i * 7 % 4000, &block(i), false).unwrap();
    }
    p.flush().unwrap();
    let (mut p, rep) = reimport(p);
    assert!(rep.items_replayed > 0);
    let mut buf = vec![0u8; 4096];
    for i in 0..300u64 {
        p.read(lun, i * 7 % 4000, &mut buf).unwrap();
        assert_eq!(buf, block(i), "block {i}");
    }
}

#[test]
fn bad_input_is_refused() {
    let mut p = new_pool(cfg(), 6, 40_000);
    let lun = p.create_lun("a", 10).unwrap();
    assert_eq!(p.write(lun, 10, &block(0), false), Err(IoError::OutOfRange));
    assert_eq!(
        p.write(lun, 0, &[0u8; 100], false),
        Err(IoError::Misaligned)
    );
    assert_eq!(p.write(lun, 0, &[], false), Err(IoError::Misaligned));
    assert_eq!(p.write(3, 0, &block(0), false), Err(IoError::NoSuchLun));
    assert_eq!(p.create_lun("a", 10), Err(LunError::NameTaken));
    assert_eq!(p.create_lun("", 10), Err(LunError::BadName));
    assert_eq!(p.create_lun("huge", 1 << 40), Err(LunError::BadSize));
}

#[test]
fn writes_after_import_read_back() {
    let mut p = new_pool(cfg(), 6, 40_000);
    let lun = p.create_lun("a", 1000).unwrap();
    let (mut p, _) = reimport(p);
    p.write(lun, 3, &block(3), true).unwrap();
    let mut buf = vec![0u8; 4096];
    p.read(lun, 3, &mut buf).unwrap();
    assert_eq!(buf, block(3));
    let (mut p, _) = reimport(p);
    p.read(lun, 3, &mut buf).unwrap();
    assert_eq!(buf, block(3));
}
