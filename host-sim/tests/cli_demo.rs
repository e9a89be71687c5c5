//! `raidcore-sim demo` and `bench` through the binary: small sizes, JSON, SVG, exit status.

use std::process::Command;

fn sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_raidcore-sim"))
        .args(args)
        .output()
        .expect("run raidcore-sim")
}

const SMALL: [&str; 8] = [
    "--disk-size",
    "64M",
    "--lun-size",
    "2M",
    "--seconds",
    "0.5",
    "--real-data-size",
    "4M",
];

#[test]
fn demo_json_and_svg() {
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("demo.svg");
    let mut args = vec!["demo", "--json", "--svg", svg.to_str().unwrap()];
    args.extend(SMALL);
    let o = sim(&args);
    assert!(
        o.status.success(),
        "demo failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["workload"], "voice");
    assert_eq!(v["verify_errors"], 0);
    assert!(v["verified_blocks"].as_u64().unwrap() > 0);
    assert!(v["baseline"]["iops_total"].as_f64().unwrap() > 0.0);
    assert!(v["rebuild"]["virtual_seconds"].as_f64().is_some());
    let b = &v["branch_office"];
    let workloads = b["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 3, "{b}");
    for w in workloads {
        assert!(w["slowdown_percent"].is_f64(), "{w}");
        assert_eq!(w["blocks_lost"], 0, "{w}");
    }
    assert!(b["flush_latency_ms"]["failed"]["p99"].is_f64(), "{b}");
    assert!(v["wall_seconds"]["branch_office"].is_f64());
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "an SVG file");
    assert!(text.contains("rebuild done"), "the rebuild is marked");
}

#[test]
fn bench_workload_without_failure_or_baseline() {
    let mut args = vec![
        "bench",
        "random-write",
        "--json",
        "--no-fail",
        "--no-baseline",
        "--data",
        "synthetic:50",
        "--model",
        "ssd",
    ];
    args.extend(SMALL);
    let o = sim(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["workload"], "random-write");
    assert!(v["baseline"].is_null());
    assert!(v["rebuild"]["virtual_seconds"].is_null());
    assert!(v["throughput_mb_s"]["during_rebuild"].is_null());
    assert_eq!(v["verify_errors"], 0);
    // Synthetic data at 50 % compressible: LZ4 roughly halves it.
    let c = v["compression_ratio"].as_f64().unwrap();
    assert!((1.5..2.5).contains(&c), "compression ratio {c}");
}

#[test]
fn bench_refuses_unknown_targets_and_bad_options() {
    assert_eq!(sim(&["bench", "nosuch"]).status.code(), Some(2));
    assert_eq!(
        sim(&["bench", "voice", "--seconds", "0"]).status.code(),
        Some(2)
    );
    assert_eq!(
        sim(&["demo", "--data", "synthetic:200"]).status.code(),
        Some(2)
    );
    assert_eq!(sim(&["demo", "--fail-at", "2"]).status.code(), Some(2));
}

/// `bench nbd --json` has both targets' figures and the ratio (keys only: wall-clock figures are
/// not asserted). Needs fio and nbdkit (CI installs both); without them it must fail clearly.
#[test]
fn bench_nbd_json_keys() {
    let have = |p: &str| Command::new(p).arg("--version").output().is_ok();
    let o = sim(&[
        "bench",
        "nbd",
        "--json",
        "--seconds",
        "1",
        "--disk-size",
        "64M",
        "--lun-size",
        "2M",
        "--luns",
        "2",
    ]);
    if !have("fio") || !have("nbdkit") {
        assert_eq!(o.status.code(), Some(2), "no fio/nbdkit: exit 2");
        eprintln!("fio or nbdkit missing: only the refusal was checked");
        return;
    }
    assert!(
        o.status.success(),
        "bench nbd failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["workload"], "nbd");
    assert!(v["ratio_iops"].as_f64().is_some());
    assert!(v["meets_target"].is_boolean());
    for t in ["raidcore", "nbdkit"] {
        let r = &v[t]["result"];
        for k in ["iops_total", "iops_slowest_job"] {
            assert!(r[k].as_f64().is_some(), "{t}.{k}");
        }
        for k in ["p50", "p99", "p99_9"] {
            assert!(r["latency_us"][k].as_f64().is_some(), "{t}.latency_us.{k}");
        }
        assert_eq!(r["iops_per_job"].as_array().unwrap().len(), 2, "{t}");
        assert_eq!(r["verify_errors"], 0, "{t}");
        assert_eq!(r["fio_exit_ok"], true, "{t}");
        assert!(r["writes"].as_u64().unwrap() > 0, "{t}");
    }
}
