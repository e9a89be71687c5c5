//! Device models reproduce their documented figures, from virtual time only.
// Times and rates here are far below 2^52, so converting them to f64 is exact enough.
#![allow(clippy::cast_precision_loss)]

use raidcore_hal::{BlockDevice, BlockSize};
use raidcore_sim::clock::{IoTracker, NS_PER_MS, NS_PER_S, NS_PER_US, SimClock};
use raidcore_sim::disk::{MemDisk, NullDisk};
use raidcore_sim::model::{
    AnyModel, DeviceModel, Flash, FlashParams, Hdd10k, HddParams, ModelKind, Slowdown, TimedDisk,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 0x5EED_0001;
const GB: u64 = 1_000_000_000;

#[derive(Clone, Copy)]
enum Access {
    Random,
    /// Sequential from this byte offset.
    Sequential(u64),
}

#[derive(Clone, Copy)]
enum Queue {
    /// Each operation is submitted when the previous one completed.
    Depth1,
    /// Every operation is submitted at time 0 (the device works through its queue).
    Deep,
}

struct Run {
    ops_per_s: f64,
    bytes_per_s: f64,
    total_ns: u64,
}

/// Runs `n` operations of `len` bytes on a `capacity`-byte disk timed by `model`.
fn run<M: DeviceModel>(
    model: M,
    capacity: u64,
    write: bool,
    access: Access,
    queue: Queue,
    len: usize,
    n: u64,
) -> Run {
    let clock = SimClock::new();
    let disk = NullDisk::new(BlockSize::B4096, capacity / 4096).unwrap();
    let mut d = TimedDisk::new(disk, model, &clock);
    let h = d.handle();
    let blocks = (len / 4096) as u64;
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut buf = vec![0u8; len];
    for i in 0..n {
        let lba = match access {
            Access::Random => rng.random_range(0..d.block_count() - blocks),
            Access::Sequential(off) => off / 4096 + i * blocks,
        };
        if write {
            d.write(lba, &buf).unwrap();
        } else {
            d.read(lba, &mut buf).unwrap();
        }
        if let Queue::Depth1 = queue {
            clock.advance_to_ns(h.last_completion_ns());
        }
    }
    let total_ns = h.last_completion_ns();
    let s = total_ns as f64 / NS_PER_S as f64;
    Run {
        ops_per_s: n as f64 / s,
        bytes_per_s: (n * len as u64) as f64 / s,
        total_ns,
    }
}

fn assert_within(what: &str, got: f64, want: f64, tolerance: f64) {
    let err = (got - want).abs() / want;
    eprintln!(
        "{what}: {got:.1} (documented {want:.1}, {:.1} % off)",
        err * 100.0
    );
    assert!(
        err <= tolerance,
        "{what}: {got:.1} is not within {:.0} % of {want:.1} (seed {SEED:#x})",
        tolerance * 100.0
    );
}

/// 1 / (controller overhead + average seek + half a revolution + 4 KiB at the mean media rate):
/// the datasheet's "access to data = access time + latency time".
fn hdd_documented_iops(write: bool) -> f64 {
    let p = HddParams::SAVVIO_10K;
    let seek = if write {
        p.seek_write_ns[1]
    } else {
        p.seek_read_ns[1]
    };
    let mean_rate = (p.media_rate_od_bytes_per_s + p.media_rate_id_bytes_per_s) as f64 / 2.0;
    let ns = p.overhead_ns as f64
        + seek as f64
        + p.revolution_ns() as f64 / 2.0
        + 4096.0 / mean_rate * 1e9;
    1e9 / ns
}

#[test]
fn hdd_random_4k_iops_match_the_datasheet() {
    assert_eq!(HddParams::SAVVIO_10K.revolution_ns(), 6 * NS_PER_MS);
    for write in [false, true] {
        let r = run(
            Hdd10k::new(),
            300 * GB,
            write,
            Access::Random,
            Queue::Depth1,
            4096,
            3000,
        );
        let what = if write {
            "HDD random 4 KiB write IOPS"
        } else {
            "HDD random 4 KiB read IOPS"
        };
        assert_within(what, r.ops_per_s, hdd_documented_iops(write), 0.20);
        // And they are tight, not just within 20 %: the model is the datasheet.
        assert_within(what, r.ops_per_s, hdd_documented_iops(write), 0.05);
    }
}

#[test]
fn hdd_random_iops_do_not_depend_on_image_size() {
    // The geometry scales to the device by default: a 4 GiB image seeks like a whole drive.
    let small = run(
        Hdd10k::new(),
        4 << 30,
        true,
        Access::Random,
        Queue::Depth1,
        4096,
        2000,
    );
    assert_within(
        "HDD 4 GiB image random write IOPS",
        small.ops_per_s,
        hdd_documented_iops(true),
        0.05,
    );
    // A short-stroked drive (geometry of 300 GB, only 4 GiB used) is much faster.
    let short = HddParams {
        geometry_capacity_bytes: Some(300 * GB),
        ..HddParams::SAVVIO_10K
    };
    let r = run(
        Hdd10k::with_params(short),
        4 << 30,
        true,
        Access::Random,
        Queue::Depth1,
        4096,
        2000,
    );
    assert!(
        r.ops_per_s > 1.3 * small.ops_per_s,
        "short-stroked {} vs {}",
        r.ops_per_s,
        small.ops_per_s
    );
}

#[test]
fn hdd_sequential_runs_at_the_media_rate() {
    let mib = 1 << 20;
    let hdd = Hdd10k::new();
    for write in [false, true] {
        // 512 MiB from the outer edge.
        let r = run(
            Hdd10k::new(),
            300 * GB,
            write,
            Access::Sequential(0),
            Queue::Depth1,
            mib,
            512,
        );
        let want = hdd.media_rate_at(256.0 * mib as f64 / (300 * GB) as f64) as f64;
        assert_within(
            "HDD sequential 1 MiB at OD, bytes/s",
            r.bytes_per_s,
            want,
            0.20,
        );
        assert_within(
            "HDD sequential 1 MiB at OD, bytes/s",
            r.bytes_per_s,
            want,
            0.02,
        );
        // 512 MiB at the inner edge.
        let start = 300 * GB - 600 * mib as u64;
        let r = run(
            Hdd10k::new(),
            300 * GB,
            write,
            Access::Sequential(start),
            Queue::Depth1,
            mib,
            512,
        );
        let want = hdd.media_rate_at(1.0) as f64;
        assert_within(
            "HDD sequential 1 MiB at ID, bytes/s",
            r.bytes_per_s,
            want,
            0.20,
        );
    }
}

#[test]
fn hdd_sequential_is_much_faster_than_random() {
    let seq = run(
        Hdd10k::new(),
        300 * GB,
        true,
        Access::Sequential(0),
        Queue::Depth1,
        4096,
        2000,
    );
    let rnd = run(
        Hdd10k::new(),
        300 * GB,
        true,
        Access::Random,
        Queue::Depth1,
        4096,
        2000,
    );
    eprintln!(
        "4 KiB writes: sequential {:.0} IOPS, random {:.0} IOPS",
        seq.ops_per_s, rnd.ops_per_s
    );
    assert!(seq.ops_per_s > 100.0 * rnd.ops_per_s);
}

#[test]
fn hdd_rotational_wait_follows_the_platter() {
    // Two reads of the same sector one revolution apart: the second waits a whole revolution
    // minus nothing (it just passed), i.e. the wait depends on virtual time, deterministically.
    let clock = SimClock::new();
    let mut d = TimedDisk::new(
        NullDisk::new(BlockSize::B4096, 1 << 20).unwrap(),
        Hdd10k::new(),
        &clock,
    );
    let h = d.handle();
    let mut buf = vec![0; 4096];
    d.read(1000, &mut buf).unwrap();
    let first = h.last_completion_ns();
    // Re-reading the same block right away: no seek (same track), wait until it comes round.
    clock.advance_to_ns(first);
    d.read(1000, &mut buf).unwrap();
    let second = h.last_completion_ns() - first;
    let overhead = HddParams::SAVVIO_10K.overhead_ns;
    let xfer = 4096 * NS_PER_S / Hdd10k::new().media_rate_at(0.0);
    let rev = HddParams::SAVVIO_10K.revolution_ns();
    // The head is just past the block's end; after the overhead it needs nearly a revolution.
    let wait = second - overhead - xfer;
    assert!(
        wait > rev - overhead - 2 * xfer && wait < rev,
        "wait {wait} ns"
    );
}

#[test]
fn disks_of_a_stripe_work_in_parallel() {
    let clock = SimClock::new();
    let tracker = IoTracker::new();
    let mut disks: Vec<_> = (0..6)
        .map(|_| {
            TimedDisk::new(
                NullDisk::new(BlockSize::B4096, 1 << 20).unwrap(),
                Hdd10k::new(),
                &clock,
            )
            .with_tracker(&tracker)
        })
        .collect();
    clock.advance_ns(NS_PER_MS);
    tracker.reset(clock.now_ns());
    let buf = vec![0u8; 65536];
    let mut each = Vec::new();
    for (i, d) in disks.iter_mut().enumerate() {
        d.write(50_000 + i as u64 * 1000, &buf).unwrap();
        each.push(d.handle().last_completion_ns() - NS_PER_MS);
    }
    assert_eq!(tracker.ops(), 6);
    let max = *each.iter().max().unwrap();
    let sum: u64 = each.iter().sum();
    assert_eq!(
        tracker.elapsed_ns(),
        max,
        "request completes with its slowest member"
    );
    assert!(tracker.elapsed_ns() < sum / 3);
    // A second write to one disk queues behind the first.
    let d = &mut disks[0];
    let busy = d.handle().busy_until_ns();
    d.write(900_000, &buf).unwrap();
    assert!(d.handle().last_completion_ns() > busy);
    assert_eq!(
        tracker.completion_ns(),
        d.handle().last_completion_ns().max(NS_PER_MS + max)
    );
}

#[test]
fn stats_count_ops_bytes_and_busy_time() {
    let clock = SimClock::new();
    let mut d = TimedDisk::new(
        MemDisk::new(BlockSize::B512, 1 << 16).unwrap(),
        Flash::sd_card(),
        &clock,
    );
    let h = d.handle();
    let mut buf = vec![0u8; 4096];
    d.write(0, &buf).unwrap();
    d.write(8, &buf).unwrap();
    d.read(0, &mut buf).unwrap();
    d.flush().unwrap();
    d.trim(0, 8).unwrap();
    assert!(d.read(1 << 16, &mut buf).is_err());
    let s = h.stats();
    assert_eq!(
        (s.reads, s.writes, s.flushes, s.trims, s.errors),
        (2, 2, 1, 1, 1)
    );
    assert_eq!((s.bytes_read, s.bytes_written), (4096, 8192));
    assert_eq!(s.ops(), 6);
    // Random write (2 ms at 500 IOPS), sequential write (4 KiB at 10 MB/s), random read
    // (667 µs at 1500 IOPS); flush, trim and the refused read cost nothing.
    let want = 2 * NS_PER_MS + 409_600 + 666_667;
    assert_eq!(s.busy_ns, want);
    assert_eq!(h.busy_until_ns(), want);
    h.reset_stats();
    assert_eq!(h.stats().ops(), 0);
}

#[test]
fn slowdown_scales_service_time() {
    let base = run(
        Flash::sata_ssd(),
        100 * GB,
        false,
        Access::Random,
        Queue::Depth1,
        4096,
        100,
    );
    let clock = SimClock::new();
    let mut d = TimedDisk::new(
        NullDisk::new(BlockSize::B4096, 1 << 20).unwrap(),
        Flash::sata_ssd(),
        &clock,
    );
    d.handle().set_slowdown(Slowdown {
        factor_permille: 3000,
        extra_ns: 5 * NS_PER_US,
    });
    let mut buf = vec![0u8; 4096];
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    for _ in 0..100 {
        let lba = rng.random_range(0..(1 << 20) - 1);
        d.read(lba, &mut buf).unwrap();
        clock.advance_to_ns(d.handle().last_completion_ns());
    }
    assert_eq!(clock.now_ns(), 3 * base.total_ns + 100 * 5 * NS_PER_US);
}

fn flash_checks(name: &str, model: impl Fn() -> Flash, p: FlashParams) {
    let mib = 1 << 20;
    let r = run(
        model(),
        100 * GB,
        false,
        Access::Random,
        Queue::Deep,
        4096,
        20_000,
    );
    assert_within(
        &format!("{name} random 4 KiB read IOPS"),
        r.ops_per_s,
        f64::from(p.read_iops),
        0.20,
    );
    let r = run(
        model(),
        100 * GB,
        true,
        Access::Random,
        Queue::Deep,
        4096,
        20_000,
    );
    assert_within(
        &format!("{name} random 4 KiB write IOPS"),
        r.ops_per_s,
        f64::from(p.write_iops),
        0.20,
    );
    let r = run(
        model(),
        100 * GB,
        false,
        Access::Sequential(0),
        Queue::Depth1,
        mib,
        256,
    );
    assert_within(
        &format!("{name} sequential 1 MiB read bytes/s"),
        r.bytes_per_s,
        p.seq_read_bytes_per_s as f64,
        0.20,
    );
    let r = run(
        model(),
        100 * GB,
        true,
        Access::Sequential(0),
        Queue::Depth1,
        mib,
        256,
    );
    assert_within(
        &format!("{name} sequential 1 MiB write bytes/s"),
        r.bytes_per_s,
        p.seq_write_bytes_per_s as f64,
        0.20,
    );
}

#[test]
fn sata_ssd_matches_its_datasheet() {
    flash_checks("SATA SSD", Flash::sata_ssd, FlashParams::SATA_SSD);
}

#[test]
fn nvme_ssd_matches_its_datasheet() {
    let p = FlashParams::NVME_SSD;
    flash_checks("NVMe SSD", Flash::nvme_ssd, p);
    // At queue depth 1 each random read takes the datasheet's 85 µs access latency.
    let r = run(
        Flash::nvme_ssd(),
        100 * GB,
        false,
        Access::Random,
        Queue::Depth1,
        4096,
        1000,
    );
    assert_within(
        "NVMe QD1 random read latency, ns",
        r.total_ns as f64 / 1000.0,
        p.read_latency_ns as f64,
        0.01,
    );
}

#[test]
fn sd_card_matches_class_10_a1() {
    let p = FlashParams::SD_CARD;
    // SD cards take one command at a time: depth 1 gives the same IOPS as a deep queue.
    for queue in [Queue::Depth1, Queue::Deep] {
        let r = run(
            Flash::sd_card(),
            32 * GB,
            false,
            Access::Random,
            queue,
            4096,
            3000,
        );
        assert_within("SD random 4 KiB read IOPS", r.ops_per_s, 1500.0, 0.20);
        let r = run(
            Flash::sd_card(),
            32 * GB,
            true,
            Access::Random,
            queue,
            4096,
            1000,
        );
        assert_within("SD random 4 KiB write IOPS", r.ops_per_s, 500.0, 0.20);
    }
    let r = run(
        Flash::sd_card(),
        32 * GB,
        true,
        Access::Sequential(0),
        Queue::Depth1,
        1 << 20,
        64,
    );
    assert_within(
        "SD sequential write bytes/s",
        r.bytes_per_s,
        p.seq_write_bytes_per_s as f64,
        0.20,
    );
    assert!(r.bytes_per_s >= 10e6 * 0.999, "Class 10 floor");
}

#[test]
fn runs_replay_from_their_seed() {
    for kind in ModelKind::ALL {
        let a = run(
            kind.build(),
            300 * GB,
            true,
            Access::Random,
            Queue::Depth1,
            4096,
            500,
        );
        let b = run(
            kind.build(),
            300 * GB,
            true,
            Access::Random,
            Queue::Depth1,
            4096,
            500,
        );
        assert_eq!(a.total_ns, b.total_ns, "{kind}");
    }
    assert_eq!(
        run(
            AnyModel::Instant,
            GB,
            true,
            Access::Random,
            Queue::Depth1,
            4096,
            10
        )
        .total_ns,
        0
    );
}

#[test]
fn model_names_parse() {
    for kind in ModelKind::ALL {
        assert_eq!(kind.name().parse::<ModelKind>(), Ok(kind));
        assert_eq!(
            kind.to_string().to_uppercase().parse::<ModelKind>(),
            Ok(kind)
        );
    }
    let e = "floppy".parse::<ModelKind>().unwrap_err();
    assert!(e.to_string().contains("floppy"));
}
