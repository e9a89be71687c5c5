//! The second use case in the demo: a branch office, run healthy and again with a member
//! failed mid-run, each workload's throughput side by side.
//!
//! The seed: a vSAN 2-node hybrid cluster (SSD cache tier + HDD capacity) running a TPC-E-like
//! SQL database, 20 VDI desktops and a dbench file share at once for an hour, once healthy and
//! once with an SSD failed mid-run: no data lost, SQL 700 → 683 TPS (−2.4 %), file share
//! 52.31 → 48.82 MB/s (−6.7 %).
//!
//! Here: the `branch-office` workload ([`crate::workload`]: SQL, VDI desktops, file share,
//! each on its own LUN) on RAID-10 of 6 disks of the voice demo's size and device model plus a
//! hot spare, LUNs of a quarter of a disk. The same seed runs twice: healthy, and with a
//! member failed at the voice demo's point of the run and rebuilt onto the spare. A workload's
//! figure is its transactions per second (SQL), IOPS (VDI) or MB/s (file share) over the
//! asked run length from the start: the window both runs share, since the failed run goes on
//! until its rebuild is done. Every block of both pools is read back and compared after the
//! run and again after import from the images.
//!
//! The seed's SSD tier is the pool's log device (a SATA SSD model unless the voice run names
//! another): a flush that fills no stripe waits for it alone. A third run fails the log device
//! instead of a member at the same point: the flushes it held are logged on the members again,
//! nothing is lost, and flushes wait for the HDDs from then on.

use std::fmt::Write as _;

use raidcore::pool::BackgroundPolicy;
use raidcore::raid::Level;
use serde::Serialize;

use crate::demo::{SimOptions, one_run, work_dir};
use crate::model::ModelKind;
use crate::pooldir::model_name;
use crate::report::{Latency, RunReport, WorkloadReport};
use crate::workload::data::DataSource;
use crate::workload::{WorkloadKind, WorkloadSpec};
use raidcore_host::units::format_bytes;

/// The seed's slowdowns with a device failed mid-run, in percent: (workload, percent).
pub const SEED_SLOWDOWN_PERCENT: [(&str, f64); 2] = [("sql", 2.4), ("file share", 6.7)];

/// One workload of the branch office, healthy against failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BranchWorkload {
    /// The workload (`sql`, `vdi desktop`, `file share`).
    pub workload: String,
    /// Its LUN.
    pub lun: u16,
    /// Its client streams.
    pub streams: usize,
    /// The unit of `healthy` and `failed`: `transactions/s`, `IOPS` or `MB/s`.
    pub unit: &'static str,
    /// The healthy run's figure over the shared window.
    pub healthy: f64,
    /// The failed run's figure over the same window.
    pub failed: f64,
    /// `(healthy - failed) / healthy`, in percent (negative: the failed run was faster);
    /// `null` when the healthy run did none of it in the window.
    pub slowdown_percent: Option<f64>,
    /// Read and write latency of the healthy run.
    pub healthy_latency_ms: Latency,
    /// Read and write latency of the failed run.
    pub failed_latency_ms: Latency,
    /// Blocks of its LUN that did not read back as written after the failed run (0 is the
    /// only right answer: one member failing is within RAID-10's tolerance).
    pub blocks_lost: u64,
}

/// The run with the log device failed mid-run (the seed's fault: its SSD tier), against the
/// healthy run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogDeviceFailed {
    /// Per workload, in the units of [`BranchWorkload`].
    pub workloads: Vec<LogDeviceFailedWorkload>,
    /// Flush latency of the run.
    pub flush_latency_ms: Latency,
    /// The run, whole.
    pub run: RunReport,
}

/// One workload of [`LogDeviceFailed`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogDeviceFailedWorkload {
    /// The workload.
    pub workload: String,
    /// Its figure over the window the healthy run shares.
    pub value: f64,
    /// `(healthy - value) / healthy`, in percent.
    pub slowdown_percent: Option<f64>,
    /// Blocks of its LUN that did not read back as written (0 is the only right answer: the
    /// flushes the device held are logged on the members when it fails).
    pub blocks_lost: u64,
}

/// Flush latency of both runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlushLatency {
    /// The healthy run.
    pub healthy: Latency,
    /// The failed run.
    pub failed: Latency,
}

/// The branch-office comparison (the demo's `branch_office` in `--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BranchReport {
    /// Per workload.
    pub workloads: Vec<BranchWorkload>,
    /// Flush latency of the pool (with a log device, a flush that fills no stripe waits for
    /// it alone).
    pub flush_latency_ms: FlushLatency,
    /// The run with the log device failed mid-run instead of a member (pools with one).
    pub log_device_failed: Option<LogDeviceFailed>,
    /// The healthy run, whole.
    pub healthy: RunReport,
    /// The run with a member failed mid-run, whole.
    pub failed: RunReport,
    /// The setup.
    pub setup: serde_json::Value,
    /// Seed of both runs.
    pub seed: u64,
}

/// The rebuild pacing of the branch office unless the voice run sets one: the pool's own
/// ([`BackgroundPolicy`]), at least 4 MiB/s of each member while clients are active, at most
/// 200 MiB/s once they are idle, so the rebuild ends in bounded time under the load.
pub const PACE: BackgroundPolicy = BackgroundPolicy {
    min_kib_s: 4 * 1024,
    max_kib_s: 200 * 1024,
    idle_after: 100_000_000,
    ticks_per_s: 1_000_000_000,
};

/// The branch office's options, from the voice demo's: its seed, run length, failure point (a
/// third of the run if it has none), device model, data and pool pacing ([`PACE`] unless it
/// sets one; the voice run's share rule is not used);
/// RAID-10 of 6 disks of its size + 1 hot spare, 3 LUNs of a quarter of a disk, no baseline
/// (the healthy run is the comparison), and the seed's SSD tier as a SATA SSD log device
/// unless the voice run names another.
#[must_use]
pub fn options(voice: &SimOptions) -> SimOptions {
    SimOptions {
        background: voice.background.or(Some(PACE)),
        workload: WorkloadSpec::new(WorkloadKind::BranchOffice),
        level: Level::Raid10,
        disks: 6,
        spares: 1,
        luns: 3,
        lun_bytes: (voice.disk_bytes / 4) >> 20 << 20,
        fail_at_permille: Some(voice.fail_at_permille.unwrap_or(333)),
        baseline: false,
        keep_dir: voice.keep_dir.as_ref().map(|d| d.join("branch-office")),
        log_device: voice.log_device.or(Some(ModelKind::SataSsd)),
        ..voice.clone()
    }
}

/// The headline figure of a workload and its unit.
fn headline(w: &WorkloadReport) -> (&'static str, f64) {
    match w.workload.as_str() {
        "sql" => ("transactions/s", w.window_transactions_per_s.unwrap_or(0.0)),
        "file share" | "file server" => ("MB/s", w.window_mb_s),
        _ => ("IOPS", w.window_iops),
    }
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The log-device-failed `run` against the `healthy` one.
fn against(healthy: &RunReport, run: RunReport) -> LogDeviceFailed {
    let workloads = healthy
        .workloads
        .iter()
        .zip(&run.workloads)
        .map(|(h, w)| {
            let hv = headline(h).1;
            let value = headline(w).1;
            LogDeviceFailedWorkload {
                workload: w.workload.clone(),
                value,
                slowdown_percent: (hv > 0.0).then(|| r1(100.0 * (hv - value) / hv)),
                blocks_lost: w.blocks_lost,
            }
        })
        .collect();
    LogDeviceFailed {
        workloads,
        flush_latency_ms: run.flush_latency_ms,
        run,
    }
}

impl BranchReport {
    /// Side by side from the runs' reports: healthy, a member failed, and the log device
    /// failed (`log_failed`, for a pool with one).
    #[must_use]
    pub fn new(
        healthy: RunReport,
        failed: RunReport,
        log_failed: Option<RunReport>,
        setup: serde_json::Value,
    ) -> BranchReport {
        let workloads = healthy
            .workloads
            .iter()
            .zip(&failed.workloads)
            .map(|(h, f)| {
                let (unit, hv) = headline(h);
                let (_, fv) = headline(f);
                BranchWorkload {
                    workload: h.workload.clone(),
                    lun: h.lun,
                    streams: h.streams,
                    unit,
                    healthy: hv,
                    failed: fv,
                    slowdown_percent: (hv > 0.0).then(|| r1(100.0 * (hv - fv) / hv)),
                    healthy_latency_ms: h.latency_ms,
                    failed_latency_ms: f.latency_ms,
                    blocks_lost: f.blocks_lost,
                }
            })
            .collect();
        let log_device_failed = log_failed.map(|run| against(&healthy, run));
        BranchReport {
            workloads,
            flush_latency_ms: FlushLatency {
                healthy: healthy.flush_latency_ms,
                failed: failed.flush_latency_ms,
            },
            log_device_failed,
            seed: setup["seed"].as_u64().unwrap_or(0),
            healthy,
            failed,
            setup,
        }
    }

    /// Whether every run verified every block.
    #[must_use]
    pub fn verified(&self) -> bool {
        self.healthy.verified()
            && self.failed.verified()
            && self
                .log_device_failed
                .as_ref()
                .is_none_or(|l| l.run.verified())
    }

    /// The human-readable table.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let f = &self.failed;
        let _ = writeln!(
            s,
            "branch office (the second use case) — {}, {:.2} virtual seconds compared, seed {}",
            self.setup["describe"].as_str().unwrap_or(""),
            self.setup["virtual_seconds_asked"].as_f64().unwrap_or(0.0),
            self.seed
        );
        let failed_head = f.rebuild.failed_at_s.map_or_else(
            || "member failed".to_string(),
            |t| format!("member failed at {t:.2} s"),
        );
        let _ = writeln!(
            s,
            "  {:<34} {:>16} {:>24} {:>10} {:>12}",
            "workload (streams, LUN)", "healthy", failed_head, "slowdown", "blocks lost"
        );
        for w in &self.workloads {
            let name = format!("{} ({}, LUN {}) {}", w.workload, w.streams, w.lun, w.unit);
            let slowdown = w
                .slowdown_percent
                .map_or_else(|| "n/a".to_string(), |p| format!("{p:.1} %"));
            let _ = writeln!(
                s,
                "  {name:<34} {:>16.2} {:>24.2} {slowdown:>11} {:>12}",
                w.healthy, w.failed, w.blocks_lost
            );
        }
        let fl = self.flush_latency_ms;
        let cell = |l: Latency, n: u64| {
            if n == 0 {
                "-".to_string()
            } else {
                format!("{:.2} / {:.2}", l.p50, l.p99)
            }
        };
        let _ = writeln!(
            s,
            "  {:<34} {:>16} {:>24}",
            "flush p50 / p99 (ms, whole run)",
            cell(fl.healthy, self.healthy.flushes),
            cell(fl.failed, self.failed.flushes)
        );
        self.write_log_device_failed(&mut s);
        let rb = &f.rebuild;
        let pace = match (
            self.setup["rebuild_min_mib_s"].as_f64(),
            self.setup["rebuild_max_mib_s"].as_f64(),
        ) {
            (Some(lo), Some(hi)) => format!(
                "paced by the pool: at least {lo:.1} MiB/s of each member under load, at most {hi:.1} MiB/s idle"
            ),
            _ => format!(
                "paced by the runner: {} of device time",
                self.setup["rebuild_share"]
            ),
        };
        let _ = match (rb.virtual_seconds, rb.done_at_s) {
            (Some(v), Some(d)) => writeln!(
                s,
                "  rebuild onto the hot spare ({pace}): {v:.2} virtual s, done at {d:.2} s ({} written); the failed run lasted {:.2} s",
                format_bytes(rb.bytes_moved),
                f.virtual_seconds
            ),
            _ => writeln!(
                s,
                "  rebuild onto the hot spare ({pace}): not done within {:.2} virtual s ({} written by then; finished untimed before verifying)",
                f.virtual_seconds,
                format_bytes(rb.bytes_moved)
            ),
        };
        let seed: Vec<String> = SEED_SLOWDOWN_PERCENT
            .iter()
            .map(|(w, p)| format!("{w} −{p} %"))
            .collect();
        let _ = writeln!(
            s,
            "  the seed (vSAN hybrid, an SSD failed mid-run, an hour): {}, nothing lost",
            seed.join(", ")
        );
        let _ = writeln!(
            s,
            "branch office verification: {}",
            if self.verified() {
                "PASSED (every block of every run read back as written)"
            } else {
                "FAILED"
            }
        );
        s
    }

    /// The line of the run with the log device failed, if there was one.
    fn write_log_device_failed(&self, s: &mut String) {
        let Some(l) = &self.log_device_failed else {
            return;
        };
        let each: Vec<String> = l
            .workloads
            .iter()
            .map(|w| {
                let slow = w
                    .slowdown_percent
                    .map_or_else(|| "n/a".to_string(), |p| format!("{p:.1} %"));
                format!("{} {:.2} ({slow})", w.workload, w.value)
            })
            .collect();
        let lost: u64 = l.workloads.iter().map(|w| w.blocks_lost).sum();
        let at = l
            .run
            .rebuild
            .failed_at_s
            .map_or_else(String::new, |t| format!(" at {t:.2} s"));
        let _ = writeln!(
            s,
            "  log device failed{at} instead: {}; flush p50 / p99 {:.2} / {:.2} ms; {lost} blocks lost",
            each.join(", "),
            l.flush_latency_ms.p50,
            l.flush_latency_ms.p99
        );
    }
}

/// Runs the branch office healthy and with a member failed, and reports.
pub fn run(
    opts: &SimOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<BranchReport, String> {
    let data = DataSource::new(opts.data, opts.real_data_bytes, opts.seed)?;
    let (base, _tmp) = work_dir(opts, "raidcore-sim-branch-")?;
    let healthy_opts = SimOptions {
        fail_at_permille: None,
        ..opts.clone()
    };
    let name = opts.workload.kind.name();
    let h = one_run(
        &healthy_opts,
        &base.join("healthy"),
        &data,
        false,
        "healthy",
        progress,
    )?;
    let f = one_run(opts, &base.join("failed"), &data, false, "failed", progress)?;
    let log_opts = SimOptions {
        fail_log_device: true,
        ..opts.clone()
    };
    let l = match opts.log_device {
        Some(_) => Some(one_run(
            &log_opts,
            &base.join("log-device-failed"),
            &data,
            false,
            "log device failed",
            progress,
        )?),
        None => None,
    };
    let mut setup = opts.setup_json(&data);
    setup["seed"] = opts.seed.into();
    let log = opts.log_device.map_or(String::new(), |m| {
        format!(" + {} log device", model_name(m))
    });
    setup["describe"] = format!(
        "{} over {} x {} {} + {} hot spare{log}, {} LUNs of {}",
        opts.level.name(),
        opts.disks,
        format_bytes(opts.disk_bytes),
        model_name(opts.model),
        opts.spares,
        opts.luns,
        format_bytes(opts.lun_bytes)
    )
    .into();
    Ok(BranchReport::new(
        RunReport::new("healthy", "no failure", name, &h),
        RunReport::new("failed", "a member failed mid-run", name, &f),
        l.map(|l| {
            RunReport::new(
                "log device failed",
                "the log device failed mid-run",
                name,
                &l,
            )
        }),
        setup,
    ))
}
