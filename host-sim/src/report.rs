//! Reports of workload runs: the JSON object (`--json`) and the human table, built from
//! [`RunResult`]s. Every figure derives from virtual time and counters, so the same seed gives a
//! byte-identical report.
//!
//! Units: IOPS are reads + writes completed per virtual second (flushes are not counted);
//! latencies are in milliseconds of virtual time from issue to completion; throughput is in
//! MB/s (10^6 bytes per virtual second) of client data; bytes are bytes.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::runner::{RoleResult, RunResult};

/// Rounds to 3 decimals (reports stay readable and byte-stable).
fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn secs(ns: u64) -> f64 {
    r3(ns as f64 / 1e9)
}

/// Latency percentiles, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Latency {
    /// From a histogram of nanoseconds (all zeros when empty).
    #[must_use]
    pub fn from_hist(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency {
                p50: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
                mean: 0.0,
            };
        }
        let ms = |ns: u64| r3(ns as f64 / 1e6);
        Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: r3(h.mean() / 1e6),
        }
    }
}

/// The rebuild, as measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RebuildReport {
    /// Member slot that failed.
    pub failed_disk: Option<usize>,
    /// When it failed (seconds of virtual time into the run).
    pub failed_at_s: Option<f64>,
    /// When the pool started rebuilding onto the spare.
    pub started_at_s: Option<f64>,
    /// When the rebuild finished.
    pub done_at_s: Option<f64>,
    /// From the failure to the end of the rebuild, in virtual seconds (`null` if it did not
    /// finish within the run).
    pub virtual_seconds: Option<f64>,
    /// Bytes the rebuild wrote to the spare.
    pub bytes_moved: u64,
    /// Bytes read from the survivors for it (member reads beyond client reads in the window).
    pub bytes_read: u64,
    /// Stripes rebuilt (stripes of used segments only).
    pub stripes: u64,
}

/// Client throughput by phase, in MB/s (10^6 bytes per virtual second).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    /// From the start to the failure (the whole run without a failure).
    pub before_failure: f64,
    /// From the failure to the end of the rebuild.
    pub during_rebuild: Option<f64>,
    /// From the end of the rebuild to the end of the run.
    pub after_rebuild: Option<f64>,
    /// `during_rebuild / before_failure`: how much of its speed the pool kept.
    pub during_vs_before: Option<f64>,
}

/// Read and write latency by phase of the run, by completion time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseLatency {
    /// From the start to the failure (the whole run without a failure).
    pub before_failure: Latency,
    /// From the failure to the end of the rebuild (`null` without a failure).
    pub during_rebuild: Option<Latency>,
    /// From the end of the rebuild to the end of the run (`null` if it did not finish).
    pub after_rebuild: Option<Latency>,
}

/// One workload of a run (the streams of one role, e.g. `sql`), as reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadReport {
    /// The role of its streams (`sql`, `vdi desktop`, `file share`, `sequential write`, …).
    pub workload: String,
    /// The LUN it uses (its first stream's).
    pub lun: u16,
    /// Its streams.
    pub streams: usize,
    /// Reads + writes per virtual second.
    pub iops: f64,
    /// Client MB/s.
    pub mb_s: f64,
    /// Read and write latency.
    pub latency_ms: Latency,
    /// Transactions (requests ended by a flush the workload asked for) per virtual second;
    /// `null` for a workload without them.
    pub transactions_per_s: Option<f64>,
    /// From a transaction's first request to its commit's completion.
    pub transaction_latency_ms: Option<Latency>,
    /// Client MB/s by phase.
    pub throughput_mb_s: Throughput,
    /// Within the asked run length (`setup.virtual_seconds_asked` from the start, the window
    /// two runs share even when a rebuild made one longer): reads + writes per virtual second.
    pub window_iops: f64,
    /// Client MB/s in that window.
    pub window_mb_s: f64,
    /// Transactions per virtual second in that window (`null` without transactions).
    pub window_transactions_per_s: Option<f64>,
    /// Blocks of its LUN that did not read back as written after the run, or after the pool
    /// was imported again from its images, whichever found more.
    pub blocks_lost: u64,
}

impl WorkloadReport {
    /// From one role's figures in a run of `r`.
    #[must_use]
    pub fn new(role: &RoleResult, r: &RunResult) -> WorkloadReport {
        let dur = r.duration_ns.max(1) as f64 / 1e9;
        let win = r.asked_ns.min(r.duration_ns).max(1) as f64 / 1e9;
        let t = throughput(r, &role.phase_bytes);
        WorkloadReport {
            workload: role.role.to_string(),
            lun: role.lun,
            streams: role.streams,
            iops: r3(role.ops as f64 / dur),
            mb_s: r3(role.bytes as f64 / 1e6 / dur),
            latency_ms: Latency::from_hist(&role.latency),
            transactions_per_s: (role.commits > 0).then(|| r3(role.commits as f64 / dur)),
            transaction_latency_ms: (role.commits > 0)
                .then(|| Latency::from_hist(&role.commit_latency)),
            throughput_mb_s: t,
            window_iops: r3(role.window_ops as f64 / win),
            window_mb_s: r3(role.window_bytes as f64 / 1e6 / win),
            window_transactions_per_s: (role.commits > 0)
                .then(|| r3(role.window_commits as f64 / win)),
            blocks_lost: role.blocks_lost.max(
                r.reimport
                    .as_ref()
                    .and_then(|v| v.lun_errors.get(&role.lun).copied())
                    .unwrap_or(0),
            ),
        }
    }
}

/// Client MB/s by phase of `r`, from the bytes completed in each phase.
fn throughput(r: &RunResult, phase_bytes: &[u64; 3]) -> Throughput {
    let mbs = |k: usize| {
        (r.phase_ns[k] > 0).then(|| r3(phase_bytes[k] as f64 / 1e6 / (r.phase_ns[k] as f64 / 1e9)))
    };
    let before = mbs(0).unwrap_or(0.0);
    let during = r.fail_ns.and(mbs(1));
    let after = r.rebuild_done_ns.and(mbs(2));
    Throughput {
        before_failure: before,
        during_rebuild: during,
        after_rebuild: after,
        during_vs_before: during.filter(|_| before > 0.0).map(|d| r3(d / before)),
    }
}

/// One run, as reported (the keys of `--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// What this run is (`raidcore` or `baseline`).
    pub label: String,
    /// How writes were handled, in words.
    pub mode: String,
    /// Workload name.
    pub workload: String,
    /// Client streams.
    pub streams: usize,
    /// Virtual length of the measured run, in seconds.
    pub virtual_seconds: f64,
    /// Reads + writes per virtual second, all streams.
    pub iops_total: f64,
    /// Per stream.
    pub iops_per_stream: Vec<f64>,
    /// The slowest stream.
    pub iops_per_stream_min: f64,
    /// What each stream does (`sequential write`, `oltp`, `vdi`, `file server`, …).
    pub stream_roles: Vec<String>,
    /// The streams of each role together, in the order of each role's first stream.
    pub workloads: Vec<WorkloadReport>,
    /// Read and write latency.
    pub latency_ms: Latency,
    /// Read and write latency before, during and after the rebuild.
    pub latency_by_phase_ms: PhaseLatency,
    /// Open loop: requests each stream asked per virtual second (`null`: closed loop, each
    /// request issued when the one before completed).
    pub rate_per_stream: Option<u32>,
    /// Flush latency.
    pub flush_latency_ms: Latency,
    /// Flushes completed.
    pub flushes: u64,
    /// Member bytes written for client data (data + parity + intent log + labels) per client
    /// byte written; rebuild traffic is not included (see `rebuild`).
    pub write_amplification: f64,
    /// LZ4 over the run's extents: raw bytes / stored bytes.
    pub compression_ratio: f64,
    /// Client bytes written.
    pub client_bytes_written: u64,
    /// The rebuild.
    pub rebuild: RebuildReport,
    /// Throughput by phase.
    pub throughput_mb_s: Throughput,
    /// Blocks read back through the pool after the run and compared.
    pub verified_blocks: u64,
    /// Of those, blocks that had been written (the others must read as zeros).
    pub verified_written_blocks: u64,
    /// Blocks read back and compared again after the pool was closed and imported from its
    /// disk images (`null` if not done).
    pub verified_after_reimport_blocks: Option<u64>,
    /// Reads that returned wrong data or failed (during the run, after it, and after
    /// re-import), plus blocks the scrub after the run had to repair or could not.
    pub verify_errors: u64,
    /// Blocks the scrub after the run repaired.
    pub scrub_repaired_blocks: Option<u64>,
    /// Blocks the scrub after the run could not repair.
    pub scrub_unrepairable_blocks: Option<u64>,
    /// Pool health at the end.
    pub final_health: String,
    /// Pool errors during the run.
    pub error_count: u64,
    /// The first few of them.
    pub errors: Vec<String>,
}

impl RunReport {
    /// Builds the report of `r`.
    #[must_use]
    pub fn new(label: &str, mode: &str, workload: &str, r: &RunResult) -> RunReport {
        let dur = r.duration_ns.max(1) as f64 / 1e9;
        let iops: Vec<f64> = r.streams.iter().map(|s| r3(s.ops() as f64 / dur)).collect();
        let total: u64 = r
            .streams
            .iter()
            .map(super::runner::StreamCounters::ops)
            .sum();
        let scrub_bad =
            r.scrub_repaired_blocks.unwrap_or(0) + r.scrub_unrepairable_blocks.unwrap_or(0);
        RunReport {
            label: label.to_string(),
            mode: mode.to_string(),
            workload: workload.to_string(),
            streams: r.streams.len(),
            virtual_seconds: secs(r.duration_ns),
            iops_total: r3(total as f64 / dur),
            iops_per_stream_min: iops.iter().copied().fold(f64::INFINITY, f64::min).min(1e18),
            iops_per_stream: iops,
            stream_roles: r.streams.iter().map(|s| s.role.to_string()).collect(),
            workloads: r.roles.iter().map(|k| WorkloadReport::new(k, r)).collect(),
            latency_ms: Latency::from_hist(&r.latency),
            latency_by_phase_ms: PhaseLatency {
                before_failure: Latency::from_hist(&r.phase_latency[0]),
                during_rebuild: r.fail_ns.map(|_| Latency::from_hist(&r.phase_latency[1])),
                after_rebuild: r
                    .rebuild_done_ns
                    .map(|_| Latency::from_hist(&r.phase_latency[2])),
            },
            rate_per_stream: r.rate_per_stream,
            flush_latency_ms: Latency::from_hist(&r.flush_latency),
            flushes: r.streams.iter().map(|s| s.flushes).sum(),
            write_amplification: r3(r.write_amplification),
            compression_ratio: r3(r.compression_ratio),
            client_bytes_written: r.client_bytes_written,
            rebuild: RebuildReport {
                failed_disk: r.fail_slot,
                failed_at_s: r.fail_ns.map(secs),
                started_at_s: r.rebuild_start_ns.map(secs),
                done_at_s: r.rebuild_done_ns.map(secs),
                virtual_seconds: r.rebuild_done_ns.zip(r.fail_ns).map(|(d, f)| secs(d - f)),
                bytes_moved: r.rebuild_bytes_written,
                bytes_read: r.rebuild_bytes_read,
                stripes: r.rebuild_stripes,
            },
            throughput_mb_s: throughput(r, &r.phase_bytes),
            verified_blocks: r.verified_blocks,
            verified_written_blocks: r.verified_written_blocks,
            verified_after_reimport_blocks: r.reimport.as_ref().map(|v| v.blocks),
            verify_errors: r.verify_errors
                + scrub_bad
                + r.reimport.as_ref().map_or(0, |v| v.errors),
            scrub_repaired_blocks: r.scrub_repaired_blocks,
            scrub_unrepairable_blocks: r.scrub_unrepairable_blocks,
            final_health: r.final_health.clone(),
            error_count: r.error_count,
            errors: r
                .errors
                .iter()
                .cloned()
                .chain(
                    r.reimport
                        .iter()
                        .flat_map(|v| v.messages.iter().map(|m| format!("after re-import: {m}"))),
                )
                .take(20)
                .collect(),
        }
    }

    /// Whether verification passed.
    #[must_use]
    pub fn verified(&self) -> bool {
        self.verify_errors == 0 && self.verified_blocks > 0
    }
}

/// A report: the main run, the baseline beside it (if run), and how the runs were set up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The main run (its keys are at the top level of the JSON object).
    #[serde(flatten)]
    pub main: RunReport,
    /// The same run with coalescing off.
    pub baseline: Option<RunReport>,
    /// `main / baseline` for the headline figures.
    pub gain: Option<Gain>,
    /// The setup.
    pub setup: serde_json::Value,
    /// Seed of the run.
    pub seed: u64,
}

/// Ratios of the main run to the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gain {
    /// `iops_total` ratio.
    pub iops_total: f64,
    /// `iops_per_stream_min` ratio.
    pub iops_per_stream_min: f64,
    /// Baseline p99 latency / main p99 latency.
    pub p99_latency: f64,
    /// Baseline write amplification / main write amplification.
    pub write_amplification: f64,
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { r3(a / b) }
}

impl Report {
    /// Assembles a report.
    #[must_use]
    pub fn new(
        main: RunReport,
        baseline: Option<RunReport>,
        setup: serde_json::Value,
        seed: u64,
    ) -> Report {
        let gain = baseline.as_ref().map(|b| Gain {
            iops_total: ratio(main.iops_total, b.iops_total),
            iops_per_stream_min: ratio(main.iops_per_stream_min, b.iops_per_stream_min),
            p99_latency: ratio(b.latency_ms.p99, main.latency_ms.p99),
            write_amplification: ratio(b.write_amplification, main.write_amplification),
        });
        Report {
            main,
            baseline,
            gain,
            setup,
            seed,
        }
    }

    /// Whether every run verified.
    #[must_use]
    pub fn verified(&self) -> bool {
        self.main.verified() && self.baseline.as_ref().is_none_or(RunReport::verified)
    }

    /// The JSON object, pretty-printed, with a final newline.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut s =
            serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }

    /// The human-readable table: the runs side by side.
    #[must_use]
    #[expect(clippy::too_many_lines, reason = "the demo table, one line per figure")]
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let runs: Vec<&RunReport> = std::iter::once(&self.main)
            .chain(self.baseline.as_ref())
            .collect();
        let w = 26;
        let line = |s: &mut String, name: &str, vals: Vec<String>| {
            let _ = write!(s, "  {name:<30}");
            for v in vals {
                let _ = write!(s, " {v:>w$}");
            }
            s.push('\n');
        };
        let f = |x: f64| format!("{x:.1}");
        let f2 = |x: f64| format!("{x:.2}");
        let f3 = |x: f64| format!("{x:.3}");
        let opt =
            |x: Option<f64>, d: usize| x.map_or_else(|| "-".to_string(), |v| format!("{v:.d$}"));
        let _ = writeln!(
            s,
            "workload {} — {} streams{}, {:.2} virtual seconds, seed {}",
            self.main.workload,
            self.main.streams,
            self.main.rate_per_stream.map_or(String::new(), |r| format!(
                " (open loop, {r} requests/s each)"
            )),
            self.main.virtual_seconds,
            self.seed
        );
        line(&mut s, "", runs.iter().map(|r| r.label.clone()).collect());
        line(
            &mut s,
            "",
            runs.iter().map(|r| format!("({})", r.mode)).collect(),
        );
        line(
            &mut s,
            "IOPS total",
            runs.iter().map(|r| f(r.iops_total)).collect(),
        );
        line(
            &mut s,
            "IOPS per stream (min)",
            runs.iter().map(|r| f(r.iops_per_stream_min)).collect(),
        );
        let max_streams = runs
            .iter()
            .map(|r| r.iops_per_stream.len())
            .max()
            .unwrap_or(0);
        let roles = &self.main.stream_roles;
        let mixed = roles.iter().any(|r| Some(r) != roles.first());
        // Many streams of several workloads: a line per workload, not per stream.
        let per_stream = !mixed || max_streams <= 8;
        if mixed {
            workload_lines(&mut s, &runs, &line);
        }
        for i in (0..max_streams).filter(|_| per_stream) {
            let role = roles.get(i).filter(|_| mixed);
            line(
                &mut s,
                &role.map_or(format!("  stream {i}"), |r| format!("  stream {i} ({r})")),
                runs.iter()
                    .map(|r| r.iops_per_stream.get(i).map_or("-".into(), |v| f(*v)))
                    .collect(),
            );
        }
        line(
            &mut s,
            "latency p50 (ms)",
            runs.iter().map(|r| f3(r.latency_ms.p50)).collect(),
        );
        line(
            &mut s,
            "latency p99 (ms)",
            runs.iter().map(|r| f3(r.latency_ms.p99)).collect(),
        );
        line(
            &mut s,
            "latency p99.9 (ms)",
            runs.iter().map(|r| f3(r.latency_ms.p999)).collect(),
        );
        line(
            &mut s,
            "flush latency p99 (ms)",
            runs.iter().map(|r| f3(r.flush_latency_ms.p99)).collect(),
        );
        line(
            &mut s,
            "write amplification",
            runs.iter().map(|r| f2(r.write_amplification)).collect(),
        );
        line(
            &mut s,
            "compression ratio",
            runs.iter().map(|r| f2(r.compression_ratio)).collect(),
        );
        line(
            &mut s,
            "disk failed (slot @ s)",
            runs.iter()
                .map(|r| match (r.rebuild.failed_disk, r.rebuild.failed_at_s) {
                    (Some(d), Some(t)) => format!("{d} @ {t:.2}"),
                    _ => "-".into(),
                })
                .collect(),
        );
        line(
            &mut s,
            "rebuild time (virtual s)",
            runs.iter()
                .map(|r| opt(r.rebuild.virtual_seconds, 3))
                .collect(),
        );
        line(
            &mut s,
            "rebuild moved (written/read)",
            runs.iter()
                .map(|r| {
                    format!(
                        "{} / {}",
                        raidcore_host::units::format_bytes(r.rebuild.bytes_moved),
                        raidcore_host::units::format_bytes(r.rebuild.bytes_read)
                    )
                })
                .collect(),
        );
        line(
            &mut s,
            "MB/s before failure",
            runs.iter()
                .map(|r| f2(r.throughput_mb_s.before_failure))
                .collect(),
        );
        line(
            &mut s,
            "MB/s during rebuild",
            runs.iter()
                .map(|r| opt(r.throughput_mb_s.during_rebuild, 2))
                .collect(),
        );
        line(
            &mut s,
            "MB/s after rebuild",
            runs.iter()
                .map(|r| opt(r.throughput_mb_s.after_rebuild, 2))
                .collect(),
        );
        if runs.iter().any(|r| r.rebuild.failed_disk.is_some()) {
            phase_latency_lines(&mut s, &runs, &line);
        }
        line(
            &mut s,
            "verified blocks (written)",
            runs.iter()
                .map(|r| format!("{} ({})", r.verified_blocks, r.verified_written_blocks))
                .collect(),
        );
        line(
            &mut s,
            "verified again after re-import",
            runs.iter()
                .map(|r| {
                    r.verified_after_reimport_blocks
                        .map_or_else(|| "-".to_string(), |b| b.to_string())
                })
                .collect(),
        );
        line(
            &mut s,
            "verify errors",
            runs.iter().map(|r| r.verify_errors.to_string()).collect(),
        );
        line(
            &mut s,
            "final health",
            runs.iter().map(|r| r.final_health.clone()).collect(),
        );
        if let Some(g) = self.gain {
            let _ = writeln!(
                s,
                "gain over the baseline: {:.1}x IOPS total, {:.1}x IOPS of the slowest stream, {:.1}x lower p99 latency, {:.1}x less write amplification",
                g.iops_total, g.iops_per_stream_min, g.p99_latency, g.write_amplification
            );
        }
        if self.main.workload == "voice" {
            let _ = writeln!(
                s,
                "the seed's question — over 200 IOPS of 4 KiB sequential writes for each of {} voice VMs (their ZFS appliance: 746 per VM): raidcore's slowest stream {:.0} IOPS ({:.1}x 200){}",
                self.main.streams,
                self.main.iops_per_stream_min,
                self.main.iops_per_stream_min / 200.0,
                self.baseline.as_ref().map_or(String::new(), |b| format!(
                    ", baseline's {:.0} ({:.1}x 200)",
                    b.iops_per_stream_min,
                    b.iops_per_stream_min / 200.0
                ))
            );
        }
        if let Some(rate) = self.main.rate_per_stream {
            let kept = |r: &RunReport| {
                format!(
                    "{} {:.0} ({:.0} %)",
                    r.label,
                    r.iops_per_stream_min,
                    100.0 * r.iops_per_stream_min / f64::from(rate)
                )
            };
            let _ = writeln!(
                s,
                "open loop: each stream asked {rate} requests per virtual second; the slowest completed: {}",
                runs.iter().map(|r| kept(r)).collect::<Vec<_>>().join(", ")
            );
        }
        for r in &runs {
            for e in &r.errors {
                let _ = writeln!(s, "  {} error: {e}", r.label);
            }
            if r.error_count > r.errors.len() as u64 {
                let _ = writeln!(
                    s,
                    "  {} errors: {} more not shown",
                    r.label,
                    r.error_count - r.errors.len() as u64
                );
            }
        }
        let _ = writeln!(
            s,
            "verification: {}",
            if self.verified() {
                "PASSED (every block read back as written)"
            } else {
                "FAILED"
            }
        );
        s
    }
}

/// The table's lines per workload (role): IOPS and MB/s, and transactions per second with
/// their p99 latency where the workload has transactions; one column per run.
fn workload_lines(
    s: &mut String,
    runs: &[&RunReport],
    line: &impl Fn(&mut String, &str, Vec<String>),
) {
    let Some(main) = runs.first() else {
        return;
    };
    for (k, w) in main.workloads.iter().enumerate() {
        let cell = |f: &dyn Fn(&WorkloadReport) -> String| {
            runs.iter()
                .map(|r| r.workloads.get(k).map_or_else(|| "-".to_string(), f))
                .collect()
        };
        let name = format!("  {} ({} streams)", w.workload, w.streams);
        line(
            s,
            &name,
            cell(&|w| format!("{:.0} IOPS, {:.2} MB/s", w.iops, w.mb_s)),
        );
        if w.transactions_per_s.is_some() {
            line(
                s,
                "    transactions/s (p99 ms)",
                cell(
                    &|w| match (w.transactions_per_s, w.transaction_latency_ms) {
                        (Some(t), Some(l)) => format!("{t:.1} ({:.1})", l.p99),
                        _ => "-".to_string(),
                    },
                ),
            );
        }
    }
}

/// The table's lines of read and write latency (p50 / p99 / p99.9, ms) before, during and
/// after the rebuild, one column per run.
fn phase_latency_lines(
    s: &mut String,
    runs: &[&RunReport],
    line: &impl Fn(&mut String, &str, Vec<String>),
) {
    let cell = |l: Option<Latency>| {
        l.map_or_else(
            || "-".to_string(),
            |l| format!("{:.3} / {:.3} / {:.3}", l.p50, l.p99, l.p999),
        )
    };
    let p = |r: &RunReport| r.latency_by_phase_ms;
    let phases = [
        (
            "  before failure",
            runs.iter().map(|r| Some(p(r).before_failure)).collect(),
        ),
        (
            "  during rebuild",
            runs.iter().map(|r| p(r).during_rebuild).collect(),
        ),
        (
            "  after rebuild",
            runs.iter().map(|r| p(r).after_rebuild).collect::<Vec<_>>(),
        ),
    ];
    let head = runs
        .iter()
        .map(|_| "p50 / p99 / p99.9".to_string())
        .collect();
    line(s, "latency by phase (ms)", head);
    for (name, cells) in phases {
        line(s, name, cells.into_iter().map(cell).collect());
    }
}
