//! Workloads: their request streams are deterministic and have the documented shape, and each
//! one runs against a pool and reads back what it wrote.

use raidcore_sim::demo::{self, SimOptions};
use raidcore_sim::model::ModelKind;
use raidcore_sim::workload::data::{BLOCK, DataKind, DataSource};
use raidcore_sim::workload::{Op, WorkloadKind, WorkloadSpec};

fn ops(spec: &WorkloadSpec, seed: u64, n: usize) -> Vec<Vec<Op>> {
    spec.streams(spec.streams, 4096, seed)
        .into_iter()
        .map(|mut s| (0..n).map(|_| s.next_op()).collect())
        .collect()
}

#[test]
fn streams_are_deterministic_per_seed() {
    for kind in WorkloadKind::ALL {
        let spec = WorkloadSpec::new(kind);
        assert_eq!(ops(&spec, 5, 200), ops(&spec, 5, 200), "{kind}");
        assert_ne!(ops(&spec, 5, 200), ops(&spec, 6, 200), "{kind}");
    }
}

#[test]
fn voice_is_sequential_4k_writes_with_the_asked_reads() {
    let spec = WorkloadSpec::new(WorkloadKind::Voice);
    assert_eq!(spec.streams, 8);
    for stream in ops(&spec, 1, 5000) {
        let writes: Vec<u64> = stream
            .iter()
            .filter_map(|o| match o {
                Op::Write { lba, blocks: 1, .. } => Some(*lba),
                Op::Write { .. } => panic!("voice writes one block: {o:?}"),
                _ => None,
            })
            .collect();
        assert_eq!(writes.len(), 5000, "no reads unless asked");
        for w in writes.windows(2) {
            assert_eq!(
                w[1],
                (w[0] + 1) % 4096,
                "sequential, wrapping at the LUN end"
            );
        }
    }
    let spec = WorkloadSpec {
        read_percent: 10,
        ..WorkloadSpec::new(WorkloadKind::Voice)
    };
    let all: Vec<Op> = ops(&spec, 1, 5000).concat();
    let reads = all.iter().filter(|o| matches!(o, Op::Read { .. })).count();
    // 10 % of 40,000 requests, give or take sampling noise.
    assert!((3400..4600).contains(&reads), "{reads} reads");
}

#[test]
fn mixed_has_oltp_vdi_and_file_server_shapes() {
    let spec = WorkloadSpec::new(WorkloadKind::Mixed);
    assert_eq!(spec.streams, 3);
    let s = ops(&spec, 3, 20_000);
    // OLTP: 8 KiB aligned, about 70 % reads.
    let reads = s[0].iter().filter(|o| matches!(o, Op::Read { .. })).count();
    assert!((13_400..14_600).contains(&reads), "OLTP reads {reads}");
    assert!(s[0].iter().all(|o| match o {
        Op::Read { lba, blocks } | Op::Write { lba, blocks, .. } => *blocks == 2 && lba % 2 == 0,
        Op::Idle(_) | Op::Flush => false,
    }));
    // VDI: bursts separated by idle time, mostly writes, 4–32 KiB.
    let idles = s[1].iter().filter(|o| matches!(o, Op::Idle(_))).count();
    assert!(idles > 100, "{idles} bursts");
    let (mut w, mut r) = (0, 0);
    for o in &s[1] {
        match o {
            Op::Write { blocks, .. } => {
                w += 1;
                assert!([1, 2, 4, 8].contains(blocks));
            }
            Op::Read { blocks, .. } => {
                r += 1;
                assert!([1, 2, 4, 8].contains(blocks));
            }
            Op::Idle(ns) => assert!((20_000_000..=200_000_000).contains(ns)),
            Op::Flush => panic!("mixed flushes on the runner's timer"),
        }
    }
    assert!(w > 3 * r, "VDI is write-heavy: {w} writes, {r} reads");
    // File server: runs of consecutive requests of up to 64 KiB.
    assert!(s[2].iter().all(|o| match o {
        Op::Read { blocks, .. } | Op::Write { blocks, .. } => *blocks <= 16,
        Op::Idle(_) | Op::Flush => false,
    }));
}

/// The second seed's shape: 4 SQL users, 20 VDI desktops and 2 file share users, each
/// workload on its own LUN; SQL transactions of page reads, a page write, a log append and a
/// commit; desktops boot (sequential 32 KiB reads), then work in bursts, mostly reading; the
/// share moves whole files and flushes each one it wrote.
#[test]
fn branch_office_has_sql_vdi_and_file_share_on_their_own_luns() {
    const LUN_BLOCKS: u64 = 4096;
    let spec = WorkloadSpec::new(WorkloadKind::BranchOffice);
    assert_eq!(spec.streams, 26);
    let mut gens = spec.streams(3, LUN_BLOCKS, 7);
    let roles: Vec<(&str, u16)> = gens.iter().map(|g| (g.role(), g.lun)).collect();
    let count = |r: &str, lun: u16| roles.iter().filter(|&&x| x == (r, lun)).count();
    assert_eq!(
        (
            count("sql", 0),
            count("vdi desktop", 1),
            count("file share", 2)
        ),
        (4, 20, 2),
        "{roles:?}"
    );
    // Each request, and whether it begins a transaction (a SQL transaction, a shared file).
    let (s, starts): (Vec<Vec<Op>>, Vec<Vec<bool>>) = gens
        .iter_mut()
        .map(|g| {
            (0..4000)
                .map(|_| (g.next_op(), g.take_transaction_start()))
                .unzip()
        })
        .unzip();
    assert!(
        starts[0]
            .iter()
            .enumerate()
            .all(|(k, &b)| b == (k % 7 == 0)),
        "a SQL transaction begins every 7 requests"
    );
    assert!(!starts[4].contains(&true), "desktops have no transactions");
    sql_transactions(&s[0], LUN_BLOCKS);
    // A desktop's boot: 16 sequential 32 KiB reads; then bursts, 60 % reads.
    let boot = &s[4][..16];
    for (k, o) in boot.iter().enumerate() {
        let Op::Read { lba, blocks: 8 } = o else {
            panic!("boot read {k}: {o:?}")
        };
        let Op::Read { lba: first, .. } = boot[0] else {
            unreachable!()
        };
        assert_eq!(*lba, (first + 8 * k as u64) % LUN_BLOCKS);
    }
    let work = &s[4][16..];
    let reads = work.iter().filter(|o| matches!(o, Op::Read { .. })).count();
    let writes = work
        .iter()
        .filter(|o| matches!(o, Op::Write { .. }))
        .count();
    assert!(
        reads > writes,
        "desktops read more: {reads} reads, {writes} writes"
    );
    assert!(work.iter().any(|o| matches!(o, Op::Idle(_))));
    // File share: files of half the LUN (100 MB files do not fit) in 64 KiB requests, and a
    // flush right after the last request of each file written.
    let share = &s[24];
    let mut in_file = 0u64;
    for (k, o) in share.iter().enumerate() {
        match o {
            Op::Read { blocks, .. } | Op::Write { blocks, .. } => {
                assert_eq!(*blocks, 16);
                assert_eq!(starts[24][k], in_file == 0, "request {k}: a file begins");
                in_file = (in_file + 16) % (LUN_BLOCKS / 2);
            }
            Op::Flush => {
                assert_eq!(in_file, 0, "flush {k} ends a file");
                assert!(matches!(share[k - 1], Op::Write { .. }), "after a write");
            }
            Op::Idle(_) => panic!("the share does not idle"),
        }
    }
    assert!(share.contains(&Op::Flush), "files were written");
}

/// SQL: each transaction is 4 random aligned 8 KiB reads and an 8 KiB write below the log,
/// a 4 KiB append to the log (the LUN's last eighth, sequential), then the commit.
fn sql_transactions(ops: &[Op], lun_blocks: u64) {
    let log_start = lun_blocks - lun_blocks / 8;
    let mut last_log = None;
    for (t, tx) in ops.chunks_exact(7).enumerate() {
        for o in &tx[..4] {
            assert!(
                matches!(o, Op::Read { lba, blocks: 2 } if lba % 2 == 0 && *lba < log_start),
                "transaction {t}: {tx:?}"
            );
        }
        assert!(
            matches!(tx[4], Op::Write { lba, blocks: 2, .. } if lba % 2 == 0 && lba < log_start),
            "transaction {t}: {tx:?}"
        );
        let Op::Write { lba, blocks: 1, .. } = tx[5] else {
            panic!("transaction {t}: {tx:?}")
        };
        assert!(lba >= log_start, "transaction {t}: log append at {lba}");
        if let Some(prev) = last_log {
            let next = if prev + 1 >= lun_blocks {
                log_start
            } else {
                prev + 1
            };
            assert_eq!(lba, next, "transaction {t}: the log is sequential");
        }
        last_log = Some(lba);
        assert_eq!(tx[6], Op::Flush, "transaction {t} commits");
    }
}

#[test]
fn synthetic_data_is_stable_and_as_compressible_as_asked() {
    let d = DataSource::new(DataKind::Synthetic(50), 0, 9).unwrap();
    assert_eq!(d.block(3), d.block(3));
    assert_ne!(d.block(3), d.block(4));
    let z = DataSource::new(DataKind::Synthetic(0), 0, 9).unwrap();
    assert_eq!(z.block(1).len(), BLOCK);
    assert!(DataKind::parse("synthetic:101").is_err());
    assert_eq!(
        DataKind::parse("synthetic:40").unwrap(),
        DataKind::Synthetic(40)
    );
    assert_eq!(DataKind::parse("real").unwrap(), DataKind::Real);
}

#[test]
fn real_data_comes_from_this_machine() {
    let d = DataSource::new(DataKind::Real, 1 << 20, 0).unwrap();
    assert_eq!(d.real_blocks(), 256);
    assert!(d.files() > 0);
    // Block ids wrap around what was read.
    assert_eq!(d.block(5), d.block(5 + 256));
}

#[test]
fn every_workload_runs_and_reads_back_what_it_wrote() {
    for kind in WorkloadKind::ALL {
        let opts = SimOptions {
            workload: WorkloadSpec::new(kind),
            model: ModelKind::SataSsd,
            data: DataKind::Synthetic(40),
            duration_ns: 200_000_000,
            baseline: false,
            scrub_after: false,
            fail_at_permille: None,
            ..SimOptions::tiny()
        };
        let out = demo::run(&opts, &mut |_, _, _| {}).unwrap();
        let r = &out.report.main;
        assert_eq!(r.verify_errors, 0, "{kind}: {:?}", r.errors);
        assert_eq!(r.error_count, 0, "{kind}: {:?}", r.errors);
        assert!(r.iops_total > 0.0, "{kind}");
        assert!(r.verified_written_blocks > 0, "{kind}");
        assert_eq!(r.workload, kind.name());
    }
}

/// Open loop at 200 requests per second per voice stream (Cisco's figure) on the 10K RPM
/// model: every stream completes what it asked, before, during and after the rebuild, each
/// request well within its 5 ms interval at p99. The write-through baseline cannot keep that
/// rate: its backlog shows as fewer requests completed and as latency past the interval, as a
/// client that keeps asking would see it.
#[test]
fn open_loop_streams_keep_their_rate_or_show_the_backlog_as_latency() {
    let opts = SimOptions {
        workload: WorkloadSpec {
            rate_per_stream: Some(200),
            ..WorkloadSpec::new(WorkloadKind::Voice)
        },
        data: DataKind::Synthetic(50),
        duration_ns: 1_000_000_000,
        scrub_after: false,
        ..SimOptions::tiny()
    };
    let out = demo::run(&opts, &mut |_, _, _| {}).unwrap();
    let (r, base) = (&out.report.main, out.report.baseline.as_ref().unwrap());
    for run in [r, base] {
        assert_eq!(run.verify_errors, 0, "{}: {:?}", run.label, run.errors);
        assert_eq!(run.rate_per_stream, Some(200));
        assert!(run.rebuild.virtual_seconds.is_some(), "{:?}", run.rebuild);
    }
    for (i, &iops) in r.iops_per_stream.iter().enumerate() {
        assert!((iops - 200.0).abs() <= 2.0, "stream {i}: {iops} IOPS");
    }
    let p = r.latency_by_phase_ms;
    let phases = [Some(p.before_failure), p.during_rebuild, p.after_rebuild];
    for (k, l) in phases.into_iter().enumerate() {
        let l = l.unwrap_or_else(|| panic!("phase {k} missing"));
        assert!(l.p99 < 5.0, "phase {k}: {l:?}");
    }
    assert!(
        base.iops_per_stream_min < 180.0,
        "{}",
        base.iops_per_stream_min
    );
    let behind = base.latency_by_phase_ms.after_rebuild.unwrap();
    assert!(behind.p50 > 5.0, "{behind:?}");
}

/// Open loop at a rate the 10K RPM pool cannot keep, on the mixed workload, whose VDI stream
/// thinks between bursts: a stream behind schedule takes its think time from when its next
/// request was due, never from before the events already run (the runner asserts that time
/// only moves forward), and reads back what it wrote.
#[test]
fn open_loop_behind_schedule_with_think_time_keeps_time_moving_forward() {
    let opts = SimOptions {
        workload: WorkloadSpec {
            rate_per_stream: Some(5000),
            ..WorkloadSpec::new(WorkloadKind::Mixed)
        },
        data: DataKind::Synthetic(40),
        duration_ns: 400_000_000,
        baseline: false,
        scrub_after: false,
        ..SimOptions::tiny()
    };
    let out = demo::run(&opts, &mut |_, _, _| {}).unwrap();
    let r = &out.report.main;
    assert_eq!(r.verify_errors, 0, "{:?}", r.errors);
    assert_eq!(r.stream_roles, ["oltp", "vdi", "file server"]);
    assert!(r.iops_per_stream_min < 5000.0, "{:?}", r.iops_per_stream);
}
