//! The demo, small: it must verify every block, rebuild onto the spare, beat its baseline, and
//! be deterministic (same seed, byte-identical report; another seed, another report).

use raidcore_sim::demo::{self, SimOptions};
use raidcore_sim::workload::data::DataKind;

fn run(opts: &SimOptions) -> demo::Outcome {
    demo::run(opts, &mut |_, _, _| {}).unwrap_or_else(|e| panic!("seed {}: {e}", opts.seed))
}

#[test]
fn tiny_demo_verifies_every_block_and_rebuilds() {
    let opts = SimOptions::tiny();
    let out = run(&opts);
    let r = &out.report;
    for run in std::iter::once(&r.main).chain(r.baseline.as_ref()) {
        assert_eq!(
            run.verify_errors, 0,
            "seed {} {}: {:?}",
            opts.seed, run.label, run.errors
        );
        assert_eq!(run.error_count, 0, "{}: {:?}", run.label, run.errors);
        // Every block of every LUN was read back, and the voice streams wrote all of them.
        assert_eq!(run.verified_blocks, 8 * (2 << 20) / 4096, "{}", run.label);
        assert!(run.verified_written_blocks > 0, "{}", run.label);
        // …and once more from the disk images, after closing and importing the pool.
        assert_eq!(
            run.verified_after_reimport_blocks,
            Some(run.verified_blocks),
            "{}",
            run.label
        );
        assert_eq!(run.scrub_repaired_blocks, Some(0), "{}", run.label);
        assert_eq!(run.scrub_unrepairable_blocks, Some(0), "{}", run.label);
        // The failed disk was replaced by the spare and rebuilt within the run.
        assert!(
            run.rebuild.virtual_seconds.is_some(),
            "{}: {:?}",
            run.label,
            run.rebuild
        );
        assert!(run.rebuild.bytes_moved > 0, "{}", run.label);
        assert_eq!(run.final_health, "online", "{}", run.label);
        assert!(run.throughput_mb_s.during_rebuild.is_some());
        assert!(run.throughput_mb_s.after_rebuild.is_some());
        assert_eq!(run.streams, 8);
        assert_eq!(run.iops_per_stream.len(), 8);
    }
    assert!(r.verified());
    // The seed's question: each voice stream gets well over 200 IOPS with coalescing; the
    // write-through baseline does not come close to that.
    let base = r.baseline.as_ref().expect("baseline ran");
    assert!(
        r.main.iops_per_stream_min > 1000.0,
        "{}",
        r.main.iops_per_stream_min
    );
    assert!(
        r.main.iops_total > 5.0 * base.iops_total,
        "{} vs {}",
        r.main.iops_total,
        base.iops_total
    );
    assert!(r.main.write_amplification < base.write_amplification);
    // LZ4 finds something to save in real files.
    assert!(
        r.main.compression_ratio > 1.05,
        "{}",
        r.main.compression_ratio
    );
}

#[test]
fn same_seed_same_report_other_seed_other_report() {
    let opts = SimOptions {
        data: DataKind::Synthetic(50),
        baseline: false,
        scrub_after: false,
        seed: 11,
        ..SimOptions::tiny()
    };
    let a = run(&opts).report.to_json();
    let b = run(&opts).report.to_json();
    assert_eq!(a, b, "seed 11 twice gave different reports");
    let c = run(&SimOptions {
        seed: 12,
        ..opts.clone()
    })
    .report
    .to_json();
    assert_ne!(a, c, "seeds 11 and 12 gave the same report");
    // The text form derives from the same figures.
    let t1 = run(&opts).report.to_text();
    assert!(t1.contains("IOPS total"));
}

#[test]
fn json_has_the_documented_keys() {
    let opts = SimOptions {
        data: DataKind::Synthetic(30),
        duration_ns: 300_000_000,
        scrub_after: false,
        ..SimOptions::tiny()
    };
    let out = run(&opts);
    let v: serde_json::Value = serde_json::from_str(&out.report.to_json()).unwrap();
    for obj in [&v, &v["baseline"]] {
        for k in [
            "workload",
            "streams",
            "iops_total",
            "iops_per_stream_min",
            "write_amplification",
            "compression_ratio",
            "verified_blocks",
            "verify_errors",
        ] {
            assert!(obj.get(k).is_some(), "key {k} missing in {obj}");
        }
        for k in ["p50", "p99", "p999"] {
            assert!(obj["latency_ms"][k].is_f64(), "latency_ms.{k}");
        }
        for k in ["virtual_seconds", "bytes_moved"] {
            assert!(obj["rebuild"].get(k).is_some(), "rebuild.{k}");
        }
        for k in ["before_failure", "during_rebuild", "after_rebuild"] {
            assert!(
                obj["throughput_mb_s"].get(k).is_some(),
                "throughput_mb_s.{k}"
            );
        }
    }
    assert_eq!(v["workload"], "voice");
    assert_eq!(v["streams"], 8);
    assert!(v["baseline"].is_object());
    assert_eq!(v["seed"], opts.seed);
}

/// The branch office (second use case), small: SQL, VDI and file share each on its LUN, run
/// healthy and with a member failed; nothing is lost, each workload is compared in its unit,
/// and the report says what the failed run went through.
#[test]
fn branch_office_compares_healthy_and_failed_runs_and_loses_nothing() {
    let voice = SimOptions {
        data: DataKind::Synthetic(40),
        duration_ns: 1_000_000_000,
        ..SimOptions::tiny()
    };
    let opts = raidcore_sim::branch::options(&voice);
    assert_eq!(opts.luns, 3);
    assert_eq!(opts.lun_bytes, 16 << 20, "a quarter of a 64 MiB disk");
    let b = raidcore_sim::branch::run(&opts, &mut |_, _, _| {})
        .unwrap_or_else(|e| panic!("seed {}: {e}", opts.seed));
    assert!(
        b.verified(),
        "seed {}: {:?} {:?}",
        opts.seed,
        b.healthy.errors,
        b.failed.errors
    );
    let got: Vec<(&str, u16, usize, &str)> = b
        .workloads
        .iter()
        .map(|w| (w.workload.as_str(), w.lun, w.streams, w.unit))
        .collect();
    assert_eq!(
        got,
        [
            ("sql", 0, 4, "transactions/s"),
            ("vdi desktop", 1, 20, "IOPS"),
            ("file share", 2, 2, "MB/s"),
        ]
    );
    for w in &b.workloads {
        assert_eq!(w.blocks_lost, 0, "{}", w.workload);
        assert!(w.healthy > 0.0, "{} did work", w.workload);
        let want = (100.0 * (w.healthy - w.failed) / w.healthy * 10.0).round() / 10.0;
        assert!(
            w.slowdown_percent.is_some_and(|p| (p - want).abs() < 1e-9),
            "{w:?}"
        );
    }
    assert_eq!(b.healthy.rebuild.failed_disk, None);
    assert!(b.failed.rebuild.failed_disk.is_some());
    assert!(
        b.failed.rebuild.started_at_s.is_some(),
        "the spare took the slot"
    );
    assert_eq!(b.failed.final_health, "online");
    assert!(b.flush_latency_ms.healthy.p50 > 0.0, "SQL commits flush");
    // The seed's SSD tier is an SSD log device, and its failure mid-run loses nothing.
    assert_eq!(b.setup["log_device"], "ssd");
    let l = b
        .log_device_failed
        .as_ref()
        .expect("a run with the log device failed");
    assert!(l.run.verified(), "{:?}", l.run.errors);
    assert_eq!(l.run.rebuild.failed_disk, None, "no member failed");
    assert_eq!(l.workloads.len(), 3);
    assert!(l.workloads.iter().all(|w| w.blocks_lost == 0), "{l:?}");
    // A flush that fills no stripe waits for the SSD alone: a 10K RPM member is milliseconds.
    assert!(
        b.flush_latency_ms.healthy.p50 < 1.0,
        "{:?}",
        b.flush_latency_ms
    );
    let text = b.to_text();
    assert!(text.contains("sql (4, LUN 0) transactions/s"), "{text}");
    assert!(text.contains("ssd log device"), "{text}");
    assert!(text.contains("log device failed at"), "{text}");
    assert!(text.contains("PASSED"), "{text}");
}

/// With the pool's own pacing the runner makes each rebuild step when the pool says: a higher
/// floor ends the rebuild sooner under the same load, without a floor the rebuild waits for
/// clients that never go idle (it does not finish within the run), and every run verifies.
#[test]
fn a_higher_rebuild_floor_ends_the_rebuild_sooner() {
    let rebuild_s = |min_kib_s: u32| {
        let opts = SimOptions {
            data: DataKind::Synthetic(40),
            baseline: false,
            scrub_after: false,
            background: Some(raidcore::pool::BackgroundPolicy {
                min_kib_s,
                ..raidcore_sim::branch::PACE
            }),
            ..SimOptions::tiny()
        };
        let out = run(&opts);
        let r = &out.report.main;
        assert_eq!(
            r.verify_errors, 0,
            "floor {min_kib_s} KiB/s: {:?}",
            r.errors
        );
        r.rebuild.virtual_seconds
    };
    let (slow, fast) = (rebuild_s(4 * 1024), rebuild_s(16 * 1024));
    let (Some(slow), Some(fast)) = (slow, fast) else {
        panic!("a floor ends the rebuild: 4 MiB/s {slow:?}, 16 MiB/s {fast:?}")
    };
    assert!(fast < slow, "16 MiB/s: {fast} s, 4 MiB/s: {slow} s");
    assert_eq!(
        rebuild_s(0),
        None,
        "no floor under steady load: not done in the run"
    );
}
