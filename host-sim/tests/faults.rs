//! Fault injection does exactly what it says, replays from its seed, and the write log rebuilds
//! the disks of any crash point.

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind};
use raidcore_sim::clock::{IoTracker, NS_PER_MS, NS_PER_S, SimClock};
use raidcore_sim::disk::{MemDisk, SimError};
use raidcore_sim::fault::{
    CrashPoint, EventKind, Fault, FaultConfig, FaultyDisk, Fuel, MemberHandles, PendingFate,
    Record, RecordingDisk, SimMember, Tear, TransientKind, Trigger, Unflushed, WriteLog,
    materialise, sim_member,
};
use raidcore_sim::model::{ModelKind, Slowdown};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BS: usize = 4096;
const BLOCKS: u64 = 256;

/// Block `lba` as written in generation `generation` (0 = never written: zeros).
fn block(lba: u64, generation: u8) -> Vec<u8> {
    if generation == 0 {
        return vec![0; BS];
    }
    let mut v = vec![generation; BS];
    v[..8].copy_from_slice(&lba.to_le_bytes());
    v
}

fn blocks(lba: u64, n: u64, generation: u8) -> Vec<u8> {
    (lba..lba + n).flat_map(|b| block(b, generation)).collect()
}

fn mem() -> MemDisk {
    MemDisk::new(BlockSize::B4096, BLOCKS).unwrap()
}

fn read<D: BlockDevice<Error = SimError>>(
    d: &mut D,
    lba: u64,
    n: u64,
) -> Result<Vec<u8>, SimError> {
    let mut buf = vec![0xEE; n as usize * BS];
    d.read(lba, &mut buf).map(|()| buf)
}

fn kind<T: std::fmt::Debug>(r: Result<T, SimError>) -> ErrorKind {
    r.unwrap_err().kind()
}

/// A disk with generation 1 written and flushed everywhere.
fn written(seed: u64, config: FaultConfig) -> FaultyDisk<MemDisk> {
    let mut d = FaultyDisk::with_config(mem(), seed, config);
    d.write(0, &blocks(0, BLOCKS, 1)).unwrap();
    d.flush().unwrap();
    d
}

#[test]
fn device_failure_until_returned() {
    let mut d = written(1, FaultConfig::default());
    let h = d.handle();
    h.inject(Fault::Fail);
    assert!(h.is_failed());
    let mut buf = vec![0; BS];
    assert_eq!(kind(d.read(0, &mut buf)), ErrorKind::DeviceFailed);
    assert_eq!(kind(d.write(0, &block(0, 2))), ErrorKind::DeviceFailed);
    assert_eq!(kind(d.flush()), ErrorKind::DeviceFailed);
    assert_eq!(kind(d.trim(0, 1)), ErrorKind::DeviceFailed);
    // Range errors are still reported as such.
    assert_eq!(kind(d.read(BLOCKS, &mut buf)), ErrorKind::OutOfRange);
    h.inject(Fault::Return);
    assert_eq!(
        read(&mut d, 0, BLOCKS).unwrap(),
        blocks(0, BLOCKS, 1),
        "data kept"
    );
}

#[test]
fn faults_fire_by_operation_count_and_by_virtual_time() {
    let clock = SimClock::new();
    let mut d = written(2, FaultConfig::default()).with_clock(&clock);
    let h = d.handle();
    assert_eq!(h.ops(), 2);
    h.schedule(Trigger::AtOp(5), Fault::Fail).unwrap();
    h.schedule(Trigger::AfterOps(4), Fault::Return).unwrap(); // op 2 + 4 = 6
    h.schedule(Trigger::AtTimeNs(10 * NS_PER_MS), Fault::Fail)
        .unwrap();
    let mut buf = vec![0; BS];
    d.read(0, &mut buf).unwrap(); // op 2
    d.read(0, &mut buf).unwrap(); // op 3
    d.read(0, &mut buf).unwrap(); // op 4
    assert_eq!(kind(d.read(0, &mut buf)), ErrorKind::DeviceFailed); // op 5
    d.read(0, &mut buf).unwrap(); // op 6: returned
    clock.advance_ns(9 * NS_PER_MS);
    d.read(0, &mut buf).unwrap();
    clock.advance_ns(NS_PER_MS);
    assert_eq!(kind(d.read(0, &mut buf)), ErrorKind::DeviceFailed);
    let fired: Vec<_> = h
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Injected(f) => Some((e.ops_seen, e.time_ns, f)),
            _ => None,
        })
        .collect();
    assert_eq!(
        fired,
        vec![
            (6, Some(0), Fault::Fail),
            (7, Some(0), Fault::Return),
            (9, Some(10 * NS_PER_MS), Fault::Fail)
        ]
    );
    // Time triggers need a clock.
    let nd = FaultyDisk::new(mem(), 0);
    assert_eq!(
        nd.handle()
            .schedule(Trigger::AtTimeNs(1), Fault::Fail)
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
    h.schedule(Trigger::AtOp(100), Fault::Return).unwrap();
    h.cancel_schedule();
    for _ in 0..100 {
        assert!(d.read(0, &mut buf).is_err());
    }
}

#[test]
fn medium_errors_fail_reads_and_writes_repair_them() {
    let mut d = written(3, FaultConfig::default());
    let h = d.handle();
    h.inject(Fault::Medium {
        lba: 10,
        blocks: 2,
        sticky: false,
    });
    assert_eq!(h.medium_errors(), vec![10, 11]);
    assert_eq!(kind(read(&mut d, 8, 8)), ErrorKind::Medium { lba: 10 });
    assert_eq!(read(&mut d, 0, 10).unwrap(), blocks(0, 10, 1));
    assert_eq!(read(&mut d, 12, 4).unwrap(), blocks(12, 4, 1));
    // A write to block 10 remaps it; 11 is still bad.
    d.write(10, &block(10, 2)).unwrap();
    assert_eq!(kind(read(&mut d, 8, 8)), ErrorKind::Medium { lba: 11 });
    assert_eq!(read(&mut d, 10, 1).unwrap(), block(10, 2));
    d.write(11, &block(11, 2)).unwrap();
    assert_eq!(
        read(&mut d, 8, 4).unwrap(),
        [blocks(8, 2, 1), blocks(10, 2, 2)].concat()
    );
    assert!(h.medium_errors().is_empty());

    // Sticky: writes fail too (blocks before it are written), and Repair brings the pristine
    // data back.
    h.inject(Fault::Medium {
        lba: 20,
        blocks: 1,
        sticky: true,
    });
    assert_eq!(
        kind(d.write(18, &blocks(18, 4, 3))),
        ErrorKind::Medium { lba: 20 }
    );
    assert_eq!(read(&mut d, 18, 2).unwrap(), blocks(18, 2, 3));
    assert_eq!(kind(read(&mut d, 20, 1)), ErrorKind::Medium { lba: 20 });
    assert_eq!(
        read(&mut d, 21, 1).unwrap(),
        block(21, 1),
        "nothing after the bad block"
    );
    h.inject(Fault::Repair);
    assert_eq!(read(&mut d, 20, 1).unwrap(), block(20, 1));
    let reported: Vec<_> = h
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::MediumError { lba } => Some(lba),
            _ => None,
        })
        .collect();
    assert_eq!(reported, vec![10, 11, 20, 20]);
}

fn bit_diff(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[test]
fn bit_rot_is_silent_and_repairable() {
    let mut d = written(4, FaultConfig::default());
    let h = d.handle();
    h.inject(Fault::BitRot {
        lba: Some(5),
        bits: 3,
    });
    let got = read(&mut d, 0, 16).unwrap();
    let want = blocks(0, 16, 1);
    assert_eq!(bit_diff(&got, &want), 3, "exactly three bits flipped");
    assert_eq!(
        bit_diff(&got[5 * BS..6 * BS], &want[5 * BS..6 * BS]),
        3,
        "all in block 5"
    );
    assert_eq!(h.rotted_blocks(), vec![5]);
    // Switching the fault off shows the pristine data again.
    h.inject(Fault::Repair);
    assert_eq!(read(&mut d, 0, 16).unwrap(), want);
    // A write replaces rot with the new data.
    h.inject(Fault::BitRot {
        lba: Some(6),
        bits: 100,
    });
    assert_eq!(bit_diff(&read(&mut d, 6, 1).unwrap(), &block(6, 1)), 100);
    d.write(6, &block(6, 2)).unwrap();
    assert_eq!(read(&mut d, 6, 1).unwrap(), block(6, 2));
    assert!(h.rotted_blocks().is_empty());
}

/// A read-modify-write that patches other bytes of a rotted block writes the rotten bytes back
/// as it read them: they stay rotten and the block stays listed, until a write puts other data
/// there (what a scrub's repair does).
#[test]
fn bit_rot_written_back_as_read_stays_rot() {
    let mut d = written(7, FaultConfig::default());
    let h = d.handle();
    h.inject(Fault::BitRot {
        lba: Some(3),
        bits: 4,
    });
    let mut rotten = read(&mut d, 3, 1).unwrap();
    let at = (0..BS)
        .find(|&i| rotten[i] == block(3, 1)[i])
        .expect("an unrotted byte");
    rotten[at] ^= 0xff;
    d.write(3, &rotten).unwrap();
    assert_eq!(
        read(&mut d, 3, 1).unwrap(),
        rotten,
        "reads what was written"
    );
    assert_eq!(
        h.rotted_blocks(),
        vec![3],
        "the rot written back is still rot"
    );
    assert_eq!(bit_diff(&read(&mut d, 3, 1).unwrap(), &block(3, 1)), 4 + 8);
    d.write(3, &block(3, 1)).unwrap();
    assert!(
        h.rotted_blocks().is_empty(),
        "the pristine data replaced it"
    );
    assert_eq!(read(&mut d, 3, 1).unwrap(), block(3, 1));
}

fn rotted_lbas(seed: u64) -> Vec<u64> {
    let d = written(seed, FaultConfig::default());
    let h = d.handle();
    for _ in 0..8 {
        h.inject(Fault::BitRot { lba: None, bits: 1 });
    }
    h.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Rotted { lba } => Some(lba),
            _ => None,
        })
        .collect()
}

#[test]
fn random_bit_rot_replays_from_the_seed() {
    let a = rotted_lbas(42);
    assert_eq!(a.len(), 8);
    assert!(a.iter().all(|&l| l < BLOCKS));
    assert_eq!(a, rotted_lbas(42));
    assert_ne!(a, rotted_lbas(43));
}

#[test]
fn misdirected_and_lost_writes_are_silent() {
    let mut d = written(5, FaultConfig::default());
    let h = d.handle();
    // The next write lands elsewhere.
    h.inject(Fault::Misdirect {
        from: None,
        to: 100,
    });
    d.write(0, &blocks(0, 2, 2)).unwrap();
    assert_eq!(
        read(&mut d, 0, 2).unwrap(),
        blocks(0, 2, 1),
        "target untouched"
    );
    assert_eq!(
        read(&mut d, 100, 2).unwrap(),
        blocks(0, 2, 2),
        "landed at 100"
    );
    // Only a write to block 7 is misdirected; clamped to fit.
    h.inject(Fault::Misdirect {
        from: Some(7),
        to: BLOCKS,
    });
    d.write(3, &block(3, 2)).unwrap();
    assert_eq!(read(&mut d, 3, 1).unwrap(), block(3, 2));
    d.write(7, &blocks(7, 4, 2)).unwrap();
    assert_eq!(read(&mut d, 7, 4).unwrap(), blocks(7, 4, 1));
    assert_eq!(read(&mut d, BLOCKS - 4, 4).unwrap(), blocks(7, 4, 2));
    // Lost writes: acknowledged, not applied.
    h.inject(Fault::LoseWrite { lba: None });
    h.inject(Fault::LoseWrite { lba: Some(30) });
    d.write(20, &block(20, 2)).unwrap();
    d.write(21, &block(21, 2)).unwrap();
    d.write(30, &block(30, 2)).unwrap();
    d.flush().unwrap();
    assert_eq!(
        read(&mut d, 20, 2).unwrap(),
        [block(20, 1), block(21, 2)].concat()
    );
    assert_eq!(read(&mut d, 30, 1).unwrap(), block(30, 1));
    let silent: Vec<_> = h
        .events()
        .into_iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Misdirected { .. } | EventKind::Lost { .. }
            )
        })
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        silent,
        vec![
            EventKind::Misdirected {
                intended: 0,
                actual: 100,
                blocks: 2
            },
            EventKind::Misdirected {
                intended: 7,
                actual: BLOCKS - 4,
                blocks: 4
            },
            EventKind::Lost { lba: 20, blocks: 1 },
            EventKind::Lost { lba: 30, blocks: 1 },
        ]
    );
    assert_eq!(
        h.writes(),
        1 + 6,
        "acknowledged writes include the silent ones"
    );
}

#[test]
fn transient_errors_are_retryable_and_transfer_nothing() {
    let mut d = written(6, FaultConfig::default());
    let h = d.handle();
    h.inject(Fault::Transient {
        kind: TransientKind::Transport,
        ops: 2,
    });
    let e = d.write(0, &block(0, 2)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport);
    assert!(e.kind().is_retryable());
    assert_eq!(kind(d.flush()), ErrorKind::Transport);
    assert_eq!(
        read(&mut d, 0, 1).unwrap(),
        block(0, 1),
        "the failed write did nothing"
    );
    h.inject(Fault::Transient {
        kind: TransientKind::Timeout,
        ops: 1,
    });
    assert_eq!(kind(read(&mut d, 0, 1)), ErrorKind::Timeout);
    d.write(0, &block(0, 2)).unwrap();
    assert_eq!(read(&mut d, 0, 1).unwrap(), block(0, 2));
}

#[test]
fn timeouts_and_slowness_cost_virtual_time() {
    let clock = SimClock::new();
    let tracker = IoTracker::new();
    let (mut d, handles): (SimMember, MemberHandles) = sim_member(
        mem(),
        ModelKind::Hdd10k.build(),
        7,
        FaultConfig::default(),
        &clock,
        &tracker,
    );
    let (fh, th) = (handles.fault, handles.timing);
    d.write(0, &block(0, 1)).unwrap();
    clock.advance_to_ns(th.last_completion_ns());
    // A timeout costs the command timeout (30 s by default).
    fh.inject(Fault::Transient {
        kind: TransientKind::Timeout,
        ops: 1,
    });
    let before = clock.now_ns();
    assert_eq!(kind(read(&mut d, 0, 1)), ErrorKind::Timeout);
    assert_eq!(th.last_completion_ns() - before, 30 * NS_PER_S);
    clock.advance_to_ns(th.last_completion_ns());
    // A failed device answers at once.
    fh.inject(Fault::Fail);
    let before = clock.now_ns();
    assert_eq!(kind(read(&mut d, 0, 1)), ErrorKind::DeviceFailed);
    assert_eq!(th.last_completion_ns(), before);
    fh.inject(Fault::Return);
    // A slow-disk fault scheduled by operation count reaches the timing wrapper.
    let slow = Slowdown {
        factor_permille: 10_000,
        extra_ns: 0,
    };
    fh.schedule(Trigger::AfterOps(1), Fault::Slow(slow))
        .unwrap();
    let t0 = clock.now_ns();
    read(&mut d, 0, 1).unwrap(); // normal speed
    let normal = th.last_completion_ns() - t0;
    clock.advance_to_ns(th.last_completion_ns());
    assert_eq!(th.slowdown(), Slowdown::NONE);
    let t1 = clock.now_ns();
    read(&mut d, 0, 1).unwrap();
    assert_eq!(th.slowdown(), slow);
    let slowed = th.last_completion_ns() - t1;
    assert!(slowed > 5 * normal, "slowed {slowed} vs normal {normal}");
    assert!(
        slowed >= 10 * 200_000,
        "at least ten times the controller overhead"
    );
    fh.inject(Fault::Repair);
    assert_eq!(th.slowdown(), Slowdown::NONE);
    assert_eq!(tracker.completion_ns(), th.last_completion_ns());
    assert_eq!(tracker.ops(), th.stats().ops());
}

/// Writes `n` writes of 1..=4 blocks of generation 2 at seeded places after a flushed
/// generation 1; returns the disk and the writes.
fn cached_writes(
    seed: u64,
    policy: PendingFate,
    n: usize,
) -> (FaultyDisk<MemDisk>, Vec<(u64, u64)>) {
    let config = FaultConfig {
        power_cut: policy,
        ..FaultConfig::default()
    };
    let mut d = written(seed, config);
    let mut rng = ChaCha8Rng::seed_from_u64(1000);
    let mut writes = Vec::new();
    for _ in 0..n {
        let len = rng.random_range(1..=4);
        let lba = rng.random_range(0..BLOCKS - len);
        d.write(lba, &blocks(lba, len, 2)).unwrap();
        writes.push((lba, len));
    }
    (d, writes)
}

/// Contents after a power cut, per block: true if the new generation survived.
fn cut_and_inspect(seed: u64, policy: PendingFate, n: usize) -> (Vec<bool>, EventKind) {
    let (mut d, writes) = cached_writes(seed, policy, n);
    let h = d.handle();
    assert_eq!(h.pending().0, n);
    // Reads see the cache before the cut.
    for &(lba, len) in &writes {
        assert_eq!(read(&mut d, lba, len).unwrap(), blocks(lba, len, 2));
    }
    h.inject(Fault::PowerCut);
    assert!(!h.is_powered());
    assert_eq!(kind(read(&mut d, 0, 1)), ErrorKind::DeviceFailed);
    assert_eq!(kind(d.write(0, &block(0, 3))), ErrorKind::DeviceFailed);
    h.inject(Fault::PowerRestore);
    assert_eq!(h.pending().0, 0);
    let all = read(&mut d, 0, BLOCKS).unwrap();
    let mut survived = Vec::new();
    for (b, got) in all.chunks(BS).enumerate() {
        let b = b as u64;
        // Every block holds its old or its new content, never anything else.
        assert!(
            got == block(b, 1) || got == block(b, 2),
            "block {b} is neither old nor new"
        );
        survived.push(got == block(b, 2));
    }
    let cut = h
        .events()
        .into_iter()
        .find_map(|e| matches!(e.kind, EventKind::PowerCut { .. }).then_some(e.kind))
        .unwrap();
    (survived, cut)
}

#[test]
fn power_cut_keeps_flushed_data_and_tears_the_rest() {
    let (keep, _) = cut_and_inspect(8, PendingFate::KeepAll, 40);
    let (_, writes) = cached_writes(8, PendingFate::KeepAll, 40);
    let mut touched = vec![false; BLOCKS as usize];
    for (lba, len) in writes {
        for b in lba..lba + len {
            touched[b as usize] = true;
        }
    }
    assert_eq!(keep, touched, "KeepAll: every cached write survives");
    let (drop, cut) = cut_and_inspect(8, PendingFate::DropAll, 40);
    assert!(
        drop.iter().all(|&s| !s),
        "DropAll: only flushed data is left"
    );
    assert_eq!(
        cut,
        EventKind::PowerCut {
            pending: 40,
            whole: 0,
            dropped: 40,
            torn: 0
        }
    );

    let (a, cut) = cut_and_inspect(8, PendingFate::Seeded, 40);
    let EventKind::PowerCut {
        pending,
        whole,
        dropped,
        torn,
    } = cut
    else {
        unreachable!()
    };
    assert_eq!((pending, whole + dropped + torn), (40, 40));
    assert!(
        whole > 0 && dropped > 0 && torn > 0,
        "{whole} {dropped} {torn}"
    );
    assert!(a.iter().any(|&s| s) && a.iter().zip(&touched).any(|(&s, &t)| t && !s));
    // Same seed, same outcome; another seed, another.
    assert_eq!(
        cut_and_inspect(8, PendingFate::Seeded, 40),
        (a.clone(), cut)
    );
    assert_ne!(cut_and_inspect(9, PendingFate::Seeded, 40).0, a);
}

#[test]
fn flush_makes_writes_survive_a_cut() {
    let (mut d, _) = cached_writes(10, PendingFate::DropAll, 10);
    d.flush().unwrap();
    d.write(200, &block(200, 3)).unwrap();
    let h = d.handle();
    assert_eq!(h.pending(), (1, BS as u64));
    h.inject(Fault::PowerCut);
    h.inject(Fault::PowerRestore);
    let (_, writes) = cached_writes(10, PendingFate::DropAll, 10);
    for (lba, len) in writes {
        assert_eq!(read(&mut d, lba, len).unwrap(), blocks(lba, len, 2));
    }
    assert_eq!(read(&mut d, 200, 1).unwrap(), block(200, 1));
}

#[test]
fn write_through_and_cache_limit() {
    // Without a volatile cache a cut loses nothing.
    let config = FaultConfig {
        volatile_cache: false,
        ..FaultConfig::default()
    };
    let mut d = written(11, config);
    d.write(5, &block(5, 2)).unwrap();
    assert_eq!(d.handle().pending(), (0, 0));
    d.handle().inject(Fault::PowerCut);
    d.handle().inject(Fault::PowerRestore);
    assert_eq!(read(&mut d, 5, 1).unwrap(), block(5, 2));
    // A full cache writes its oldest entries through.
    let config = FaultConfig {
        cache_bytes: 2 * BS as u64,
        power_cut: PendingFate::DropAll,
        ..FaultConfig::default()
    };
    let mut d = written(11, config);
    for b in 0..5 {
        d.write(b, &block(b, 2)).unwrap();
    }
    assert_eq!(d.handle().pending(), (2, 2 * BS as u64));
    d.handle().inject(Fault::PowerCut);
    d.handle().inject(Fault::PowerRestore);
    assert_eq!(
        read(&mut d, 0, 5).unwrap(),
        [blocks(0, 3, 2), blocks(3, 2, 1)].concat()
    );
}

#[test]
fn fuel_cuts_power_at_an_exact_point() {
    let config = FaultConfig {
        power_cut: PendingFate::KeepAll,
        ..FaultConfig::default()
    };
    let mut d = written(12, config);
    let h = d.handle();
    h.set_fuel(Some(Fuel::Writes(3)));
    for b in 0..3 {
        d.write(b, &block(b, 2)).unwrap();
    }
    assert!(!h.is_powered(), "cut right after the third write");
    assert_eq!(kind(d.flush()), ErrorKind::DeviceFailed);
    assert_eq!(h.fuel(), None);
    h.inject(Fault::PowerRestore);
    assert_eq!(
        read(&mut d, 0, 4).unwrap(),
        [blocks(0, 3, 2), block(3, 1)].concat()
    );

    // Byte fuel: the write that does not fit is torn at the exact block.
    h.set_fuel(Some(Fuel::Bytes(3 * BS as u64 + 1000)));
    d.write(10, &blocks(10, 2, 3)).unwrap();
    assert_eq!(
        kind(d.write(12, &blocks(12, 2, 3))),
        ErrorKind::DeviceFailed
    );
    h.inject(Fault::PowerRestore);
    assert_eq!(
        read(&mut d, 10, 4).unwrap(),
        [blocks(10, 3, 3), block(13, 1)].concat()
    );
    let exhausted = h
        .events()
        .iter()
        .filter(|e| e.kind == EventKind::FuelExhausted)
        .count();
    assert_eq!(exhausted, 2);

    // Fuel 0: the next write fails with the cut.
    h.set_fuel(Some(Fuel::Writes(0)));
    assert_eq!(kind(d.write(20, &block(20, 3))), ErrorKind::DeviceFailed);
    h.inject(Fault::PowerRestore);
    assert_eq!(read(&mut d, 20, 1).unwrap(), block(20, 1));
}

#[test]
fn into_inner_returns_the_pristine_medium_with_cached_writes() {
    let mut d = written(13, FaultConfig::default());
    d.write(1, &block(1, 2)).unwrap();
    d.handle().inject(Fault::BitRot {
        lba: Some(2),
        bits: 5,
    });
    let mut m = d.into_inner();
    assert_eq!(
        read(&mut m, 0, 3).unwrap(),
        [block(0, 1), block(1, 2), block(2, 1)].concat()
    );
}

/// One seeded run of every fault kind; returns the events and the final contents.
fn campaign(seed: u64) -> (Vec<EventKind>, Vec<u8>) {
    let mut d = FaultyDisk::new(mem(), seed);
    let h = d.handle();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let faults = [
        Fault::BitRot { lba: None, bits: 7 },
        Fault::Misdirect { from: None, to: 77 },
        Fault::LoseWrite { lba: None },
        Fault::Transient {
            kind: TransientKind::Transport,
            ops: 1,
        },
        Fault::Medium {
            lba: 40,
            blocks: 3,
            sticky: false,
        },
        Fault::PowerCut,
        Fault::PowerRestore,
    ];
    for i in 0..300u64 {
        if i % 20 == 0 {
            h.inject(faults[rng.random_range(0..faults.len())]);
        }
        let lba = rng.random_range(0..BLOCKS - 2);
        match rng.random_range(0..10) {
            0 => {
                let _ = d.flush();
            }
            1..=4 => {
                let _ = read(&mut d, lba, 2);
            }
            _ => {
                let _ = d.write(lba, &blocks(lba, 2, (i % 250 + 1) as u8));
            }
        }
    }
    h.inject(Fault::PowerRestore);
    h.inject(Fault::Repair);
    let contents = read(&mut d, 0, BLOCKS).unwrap();
    (h.events().into_iter().map(|e| e.kind).collect(), contents)
}

#[test]
fn a_fault_campaign_replays_exactly_from_its_seed() {
    let a = campaign(77);
    assert!(a.0.len() > 10);
    assert_eq!(a, campaign(77));
    assert_ne!(a, campaign(78));
}

/// A workload over three recorded disks; returns the base images, the log and a snapshot of
/// every disk after each record.
fn recorded_workload() -> (Vec<MemDisk>, Vec<Record>, Vec<Vec<MemDisk>>) {
    let log = WriteLog::new();
    let mut disks: Vec<_> = (0..3)
        .map(|i| {
            let mut m = mem();
            m.write(0, &blocks(0, BLOCKS, 1)).unwrap();
            RecordingDisk::new(m, i, &log)
        })
        .collect();
    let base: Vec<MemDisk> = disks.iter().map(|d| d.inner().snapshot()).collect();
    let mut states = vec![base.clone()];
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for step in 0..60u64 {
        let i = rng.random_range(0..3);
        let d = &mut disks[i];
        if rng.random_range(0..5) == 0 {
            d.flush().unwrap();
        } else {
            let len = rng.random_range(1..=6);
            let lba = rng.random_range(0..BLOCKS - len);
            d.write(lba, &blocks(lba, len, (step + 2) as u8)).unwrap();
        }
        // Reads and failed writes are not logged.
        let _ = read(d, 0, 1).unwrap();
        assert!(d.write(BLOCKS, &block(0, 1)).is_err());
        states.push(disks.iter().map(|d| d.inner().snapshot()).collect());
    }
    assert_eq!(log.len(), 60);
    (base, log.records(), states)
}

#[test]
fn write_log_rebuilds_every_prefix() {
    let (base, log, states) = recorded_workload();
    for (k, state) in states.iter().enumerate() {
        let got = materialise(&base, &log, &CrashPoint::after(k)).unwrap();
        for (i, (g, want)) in got.iter().zip(state).enumerate() {
            assert_eq!(g.first_difference(want), None, "prefix {k}, disk {i}");
        }
    }
    assert_eq!(states.len(), log.len() + 1);
    // The base is untouched.
    assert_eq!(base[0].first_difference(&states[0][0]), None);
}

#[test]
fn write_log_tears_the_last_write() {
    let (base, log, states) = recorded_workload();
    let k = log
        .iter()
        .rposition(|r| matches!(r, Record::Write { data, .. } if data.len() >= 4 * BS))
        .unwrap()
        + 1;
    let Record::Write { disk, lba, data } = &log[k - 1] else {
        unreachable!()
    };
    let (disk, lba) = (&disk.clone(), *lba);
    let n = (data.len() / BS) as u64;
    let old = &states[k - 1][*disk];
    let new = &states[k][*disk];
    let rd = |m: &MemDisk, b: u64| read(&mut m.snapshot(), b, 1).unwrap();
    let half = materialise(&base, &log, &CrashPoint::torn(k, Tear::FirstHalf)).unwrap();
    for b in 0..n {
        let src = if b < n / 2 { new } else { old };
        assert_eq!(
            rd(&half[*disk], lba + b),
            rd(src, lba + b),
            "FirstHalf block {b} of {n}"
        );
    }
    let dropped = materialise(&base, &log, &CrashPoint::torn(k, Tear::Dropped)).unwrap();
    assert_eq!(dropped[*disk].first_difference(old), None);
    let two = materialise(&base, &log, &CrashPoint::torn(k, Tear::FirstBlocks(2))).unwrap();
    assert_eq!(rd(&two[*disk], lba + 1), rd(new, lba + 1));
    assert_eq!(rd(&two[*disk], lba + 2), rd(old, lba + 2));
    // A random subset: each block old or new, replayed from the seed.
    let subset =
        |seed| materialise(&base, &log, &CrashPoint::torn(k, Tear::Subset { seed })).unwrap();
    let s = subset(5);
    for b in lba..lba + n {
        let got = rd(&s[*disk], b);
        assert!(got == rd(old, b) || got == rd(new, b));
    }
    assert_eq!(subset(5)[*disk].first_difference(&s[*disk]), None);
    let differs = (6..20).any(|seed| subset(seed)[*disk].first_difference(&s[*disk]).is_some());
    assert!(differs, "other seeds tear differently");
    // Other disks are as at prefix k.
    for i in (0..3).filter(|&i| i != *disk) {
        assert_eq!(s[i].first_difference(&states[k][i]), None);
    }
}

#[test]
fn write_log_loses_only_unflushed_writes() {
    let (base, log, states) = recorded_workload();
    let k = log.len();
    let crash = CrashPoint {
        prefix: k,
        last: Tear::Whole,
        unflushed: Unflushed::Seeded { seed: 3 },
    };
    let got = materialise(&base, &log, &crash).unwrap();
    assert_eq!(
        materialise(&base, &log, &crash)
            .unwrap()
            .iter()
            .zip(&got)
            .filter(|(a, b)| a.first_difference(b).is_some())
            .count(),
        0
    );
    for disk in 0..3 {
        // Every block holds a value some prefix gave it, and everything durable at the disk's last
        // flush that no later write touched is still there.
        let last_flush = log.iter().rposition(|r| *r == Record::Flush { disk });
        let later: Vec<(u64, u64)> = log
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Record::Write { disk: d, lba, data }
                    if *d == disk && last_flush.is_none_or(|f| i > f) =>
                {
                    Some((*lba, (data.len() / BS) as u64))
                }
                _ => None,
            })
            .collect();
        let durable = &states[last_flush.map_or(0, |f| f + 1)][disk];
        for b in 0..BLOCKS {
            let g = read(&mut got[disk].snapshot(), b, 1).unwrap();
            if later.iter().all(|&(l, n)| b < l || b >= l + n) {
                assert_eq!(
                    g,
                    read(&mut durable.snapshot(), b, 1).unwrap(),
                    "disk {disk} block {b}"
                );
            } else {
                let seen = states
                    .iter()
                    .any(|s| read(&mut s[disk].snapshot(), b, 1).unwrap() == g);
                assert!(seen, "disk {disk} block {b} holds a value it never had");
            }
        }
    }
    // Bad crash points are refused.
    assert_eq!(
        kind(materialise(&base, &log, &CrashPoint::after(k + 1))),
        ErrorKind::OutOfRange
    );
    assert_eq!(
        kind(materialise(&base[..2], &log, &CrashPoint::after(k))),
        ErrorKind::OutOfRange
    );
}
