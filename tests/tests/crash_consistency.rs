//! Crash consistency, exhaustively on small workloads (durability issue): every device write of a
//! workload is recorded; for every prefix of that write sequence — and with the last write torn
//! (first half of its blocks, a random subset, dropped), and with the unflushed writes of the
//! prefix applied, dropped or torn at random — the disks are rebuilt as a power cut there would
//! leave them, the pool is imported, and every block is checked: writes acknowledged by a
//! completed flush read back exactly; every other block reads its old or its new content; the
//! pool then accepts new writes. The same again with members missing at import.

use std::collections::BTreeMap;

use raidcore::format::LUN_BLOCK;
use raidcore::pool::{ImportOptions, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::BlockSize;
use raidcore_sim::disk::MemDisk;
use raidcore_sim::fault::{CrashPoint, RecordingDisk, Tear, Unflushed, WriteLog, materialise};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type RecPool = Pool<RecordingDisk<MemDisk>, Vec<u8>, 8, 4, 16, 4>;
type MemPool = Pool<MemDisk, Vec<u8>, 8, 4, 16, 4>;

fn config(level: Level) -> PoolConfig {
    PoolConfig {
        level,
        strip_bytes: 4096,
        max_extent_blocks: 4,
        zil_slots: 16,
        segment_stripes: 4,
        max_segments: 64,
        ..PoolConfig::default()
    }
}

/// Block content: a recognisable pattern per (op, block), half of it compressible.
fn content(op: u32, block: u64) -> Vec<u8> {
    let mut v = vec![0u8; LUN_BLOCK];
    let mut s = (u64::from(op) << 32 | block).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for (i, b) in v.iter_mut().enumerate() {
        if i < LUN_BLOCK / 2 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        } else {
            *b = (op as u8).wrapping_add(block as u8);
        }
    }
    v
}

/// What a block may hold: a version tag (op number, 0 = zeros).
type Version = u32;

/// Acknowledged version of every block ever written.
type State = BTreeMap<(u16, u64), Version>;

#[derive(Default, Clone)]
struct Oracle {
    /// Current (acknowledged) version per (lun, lba).
    now: BTreeMap<(u16, u64), Version>,
}

struct Run {
    /// Per block: (log length when the write or trim started, version), in order.
    history: BTreeMap<(u16, u64), Vec<(usize, Version)>>,
    lun_blocks: u64,
    /// Log length when each flush completed, with the state then.
    flushes: Vec<(usize, State)>,
    /// Every write/trim: (log length when it started, lun, lba, blocks, version).
    writes: Vec<(usize, u16, u64, u64, Version)>,
    base: Vec<MemDisk>,
    log: Vec<raidcore_sim::fault::Record>,
}

fn run_workload(
    level: Level,
    disks: usize,
    seed: u64,
    ops: u32,
    lun_blocks: u64,
    disk_mib: u64,
) -> Run {
    #[allow(non_snake_case)]
    let LUN_BLOCKS = lun_blocks;
    let cfg = config(level);
    let log = WriteLog::new();
    let blocks = disk_mib * 1024 * 1024 / 512 + 4096;
    let members: Vec<_> = (0..disks)
        .map(|i| RecordingDisk::new(MemDisk::new(BlockSize::B512, blocks).unwrap(), i, &log))
        .collect();
    let mem = vec![0u8; RecPool::memory_bytes(&cfg, disks)];
    let mut pool = RecPool::create(members, Vec::new(), cfg, [seed as u8; 16], mem).unwrap();
    let luns = [
        pool.create_lun("a", LUN_BLOCKS).unwrap(),
        pool.create_lun("b", LUN_BLOCKS).unwrap(),
    ];
    let base: Vec<MemDisk> = (0..disks)
        .map(|i| pool.array_mut().disk_mut(i).unwrap().inner().snapshot())
        .collect();
    log.clear();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut oracle = Oracle::default();
    let mut run = Run {
        history: BTreeMap::new(),
        lun_blocks,
        flushes: vec![(0, BTreeMap::new())],
        writes: Vec::new(),
        base,
        log: Vec::new(),
    };
    let mut next_seq = [0u64; 2];
    for op in 1..=ops {
        let which = rng.random_range(0..2usize);
        let lun = luns[which];
        let r = rng.random_range(0..100);
        let start = log.len();
        if r < 62 {
            let n = rng.random_range(1..=6u64);
            // Mostly sequential streams, some random overwrites.
            let lba = if rng.random_bool(0.6) {
                next_seq[which]
            } else {
                rng.random_range(0..LUN_BLOCKS)
            };
            let lba = lba.min(LUN_BLOCKS - n);
            let data: Vec<u8> = (0..n).flat_map(|b| content(op, lba + b)).collect();
            let fua = rng.random_bool(0.08);
            pool.write(lun, lba, &data, fua).unwrap();
            next_seq[which] = (lba + n) % (LUN_BLOCKS - 8);
            for b in 0..n {
                oracle.now.insert((lun, lba + b), op);
            }
            run.writes.push((start, lun, lba, n, op));
            if fua {
                run.flushes.push((log.len(), oracle.now.clone()));
            }
        } else if r < 72 {
            let n = rng.random_range(1..=12u64);
            let lba = rng.random_range(0..LUN_BLOCKS - n);
            pool.trim(lun, lba, n).unwrap();
            for b in 0..n {
                oracle.now.insert((lun, lba + b), 0);
            }
            run.writes.push((start, lun, lba, n, 0));
        } else {
            pool.flush().unwrap();
            run.flushes.push((log.len(), oracle.now.clone()));
        }
    }
    for &(start, lun, lba, n, v) in &run.writes {
        for b in lba..lba + n {
            run.history.entry((lun, b)).or_default().push((start, v));
        }
    }
    run.log = log.records();
    run
}

/// Checks one crash point; returns an error text on failure.
fn check_crash(
    run: &Run,
    cfg: &PoolConfig,
    crash: &CrashPoint,
    drop: &[usize],
) -> Result<(), String> {
    #[allow(non_snake_case)]
    let LUN_BLOCKS = run.lun_blocks;
    let disks = materialise(&run.base, &run.log, crash).map_err(|e| format!("materialise: {e}"))?;
    let n = disks.len();
    let kept: Vec<MemDisk> = disks
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, d)| d)
        .collect();
    let mem = vec![0u8; MemPool::memory_bytes(cfg, n)];
    let opts = ImportOptions {
        config: *cfg,
        skip_refused: false,
        force: false,
        rewind: false,
    };
    let (mut pool, rep) =
        MemPool::import(kept, opts, mem).map_err(|e| format!("import failed: {e}"))?;
    // The last flush completed at or before the cut.
    let (flush_at, durable) = run
        .flushes
        .iter()
        .rev()
        .find(|(at, _)| *at <= crash.prefix)
        .cloned()
        .unwrap_or_default();
    let mut buf = vec![0u8; LUN_BLOCK];
    // Every block ever written or trimmed, and a sample of the others (which must read zeros).
    let mut lbas: Vec<(u16, u64)> = run.history.keys().copied().collect();
    for lun in 0..2u16 {
        lbas.extend((0..LUN_BLOCKS).step_by(97).map(|l| (lun, l)));
    }
    for (lun, lba) in lbas {
        let want = durable.get(&(lun, lba)).copied().unwrap_or(0);
        // Later writes that may have reached the disks.
        let mut allowed = vec![want];
        for &(start, v) in run.history.get(&(lun, lba)).map_or(&[][..], Vec::as_slice) {
            if start >= flush_at && start <= crash.prefix {
                allowed.push(v);
            }
        }
        pool.read(lun, lba, &mut buf)
            .map_err(|e| format!("read lun {lun} lba {lba}: {e} (import: {rep:?})"))?;
        let ok = allowed.iter().any(|&v| {
            if v == 0 {
                buf.iter().all(|&x| x == 0)
            } else {
                buf == content(v, lba)
            }
        });
        if !ok {
            let got = (1..=10_000u32).find(|&v| buf == content(v, lba));
            return Err(format!(
                "lun {lun} lba {lba}: read {} but expected one of {allowed:?} (durable {want})",
                got.map_or("unknown data".to_string(), |v| format!("version {v}"))
            ));
        }
    }
    // The pool takes new writes.
    pool.write(0, 3, &content(99_999, 3), true)
        .map_err(|e| format!("write after import: {e}"))?;
    pool.read(0, 3, &mut buf)
        .map_err(|e| format!("read after import: {e}"))?;
    if buf != content(99_999, 3) {
        return Err("new write did not read back".into());
    }
    Ok(())
}

fn campaign(level: Level, disks: usize, seed: u64, ops: u32, drops: &[&[usize]]) -> usize {
    campaign_sized(level, disks, seed, ops, drops, 192, 2)
}

fn campaign_sized(
    level: Level,
    disks: usize,
    seed: u64,
    ops: u32,
    drops: &[&[usize]],
    lun_blocks: u64,
    disk_mib: u64,
) -> usize {
    let run = run_workload(level, disks, seed, ops, lun_blocks, disk_mib);
    let cfg = config(level);
    let mut checked = 0;
    let only: Option<usize> = std::env::var("RC_PREFIX").ok().and_then(|v| v.parse().ok());
    for prefix in 0..=run.log.len() {
        if only.is_some_and(|o| o != prefix) {
            continue;
        }
        let mut points = vec![CrashPoint::after(prefix)];
        if prefix > 0 {
            points.push(CrashPoint::torn(prefix, Tear::FirstHalf));
            points.push(CrashPoint::torn(
                prefix,
                Tear::Subset {
                    seed: prefix as u64,
                },
            ));
            points.push(CrashPoint {
                prefix,
                last: Tear::Subset {
                    seed: prefix as u64 ^ 0x55,
                },
                unflushed: Unflushed::Seeded {
                    seed: seed ^ prefix as u64,
                },
            });
        }
        for (i, p) in points.iter().enumerate() {
            let drop = drops[(prefix + i) % drops.len()];
            if let Err(e) = check_crash(&run, &cfg, p, drop) {
                panic!(
                    "{level:?} seed {seed}: crash after {} of {} device writes ({:?}, unflushed {:?}), members missing {drop:?}: {e}",
                    p.prefix,
                    run.log.len(),
                    p.last,
                    p.unflushed
                );
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn every_crash_point_raid6() {
    let checked = campaign(Level::Raid6, 6, 1, 40, &[&[]]);
    println!("RAID-6: {checked} crash points checked");
    assert!(checked > 100);
}

#[test]
fn every_crash_point_raid5_with_a_member_missing() {
    let checked = campaign(Level::Raid5, 4, 2, 40, &[&[0], &[1], &[2], &[3]]);
    println!("RAID-5, one member missing: {checked} crash points checked");
    assert!(checked > 100);
}

#[test]
fn every_crash_point_raid6_with_two_members_missing() {
    let checked = campaign(
        Level::Raid6,
        6,
        3,
        40,
        &[&[0, 1], &[2, 5], &[3, 4], &[1, 4]],
    );
    println!("RAID-6, two members missing: {checked} crash points checked");
    assert!(checked > 100);
}

/// Larger LUNs (a two-level map with a cache of 16 pages, so pages are evicted and written) and a
/// longer workload (segment changes and checkpoints happen inside it).
#[test]
fn every_crash_point_raid6_large_map() {
    let checked = campaign_sized(Level::Raid6, 6, 4, 150, &[&[], &[2]], 20_000, 48);
    println!("RAID-6, two-level map, 150 operations: {checked} crash points checked");
    assert!(checked > 400);
}
