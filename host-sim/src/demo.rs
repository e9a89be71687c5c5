//! `raidcore-sim demo` and `raidcore-sim bench <workload>`: build a pool on file images in a
//! temporary directory, run a workload in virtual time with a disk failing mid-run, rebuild
//! onto the hot spare, verify every block, and do the same again with coalescing off as the
//! baseline, so the gain is a ratio from one run.
//!
//! ## The demo (defaults of [`SimOptions::demo`])
//! The seed's setup: RAID-6 over 6 simulated 10,000 RPM SAS drives plus 1 hot spare
//! (256 MiB images), 64 KiB strips, 8 LUNs of 16 MiB, the `voice` workload (8 streams of
//! 4 KiB sequential writes at queue depth 1, a flush per stream every second) on real data
//! from this machine's files, 3 virtual seconds, one member pulled at a third of the run.
//!
//! ## The baseline (coalescing off)
//! Extents of one 4 KiB block (`max_extent_blocks: 1`), and every write FUA (write-through):
//! each 4 KiB write is made durable before it completes, which the pool does by copying it to
//! its intent log on m + 1 = 3 members and flushing them (and by a full-stripe write whenever
//! the open stripe fills). That is what a RAID-6 without a write-back cache pays per small write
//! — three member writes and a wait for the disks, like the three writes of a read-modify-write
//! (whose three reads the log-structured layout never needs). Everything else (level, disks,
//! data, failure, rebuild rule) is the same.

use std::path::{Path, PathBuf};

use raidcore::pool::{BackgroundPolicy, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::BlockSize;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::clock::{NS_PER_MS, NS_PER_S};
use crate::model::ModelKind;
use crate::pooldir::{CreateOptions, DirPool, HwOptions, model_name};
use crate::report::{Report, RunReport};
use crate::runner::{self, FailPlan, RunConfig, RunResult};
use crate::workload::data::{DataKind, DataSource};
use crate::workload::{WorkloadKind, WorkloadSpec};
use raidcore_host::units::format_bytes;

/// Everything a demo or bench run is made of.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The workload.
    pub workload: WorkloadSpec,
    /// RAID level.
    pub level: Level,
    /// Member disks.
    pub disks: usize,
    /// Hot spares.
    pub spares: usize,
    /// Size of each disk image, in bytes.
    pub disk_bytes: u64,
    /// Strip size, in bytes.
    pub strip_bytes: u32,
    /// LUNs.
    pub luns: usize,
    /// Size of each LUN, in bytes.
    pub lun_bytes: u64,
    /// Device model of every disk.
    pub model: ModelKind,
    /// Block content.
    pub data: DataKind,
    /// Real data to read, in bytes.
    pub real_data_bytes: usize,
    /// Virtual length of the run, in nanoseconds.
    pub duration_ns: u64,
    /// Fail a member this far into the run (a fraction in thousandths of the duration); `None`:
    /// no failure.
    pub fail_at_permille: Option<u32>,
    /// Rebuild share of device time, in thousandths (when the runner paces the rebuild).
    pub rebuild_share_permille: u32,
    /// The pool's own pacing of the rebuild (`None`: the runner's share paces it).
    pub background: Option<BackgroundPolicy>,
    /// Stripes per maintenance call.
    pub stripes_per_step: u32,
    /// Controller CPU per request, in nanoseconds.
    pub cpu_ns_per_request: u64,
    /// Controller CPU per 4 KiB block, in nanoseconds.
    pub cpu_ns_per_block: u64,
    /// Run the baseline (coalescing off) too.
    pub baseline: bool,
    /// Scrub after each run and count repairs as verification errors.
    pub scrub_after: bool,
    /// Seed of everything random.
    pub seed: u64,
    /// Keep the images here (subfolders `raidcore/` and `baseline/`) instead of a temporary
    /// directory that is removed.
    pub keep_dir: Option<PathBuf>,
    /// Timeline bucket, in nanoseconds.
    pub bucket_ns: u64,
    /// A dedicated intent-log device of this model ([`LOG_DEVICE_FILE`] in the pool's
    /// directory); `None`: the intent log is on the members.
    pub log_device: Option<ModelKind>,
    /// At `fail_at_permille`, the log device dies instead of a member.
    pub fail_log_device: bool,
}

/// The log device's file in a run's pool directory (not an image: `disk<N>.img` are).
pub const LOG_DEVICE_FILE: &str = "log-device.img";
/// Its size: the labels and the intent-log ring (which fills the device, up to 16 MiB).
pub const LOG_DEVICE_BYTES: u64 = 16 << 20;

impl SimOptions {
    /// The demo's defaults (see the module docs).
    #[must_use]
    pub fn demo() -> SimOptions {
        SimOptions {
            workload: WorkloadSpec::new(WorkloadKind::Voice),
            level: Level::Raid6,
            disks: 6,
            spares: 1,
            disk_bytes: 256 << 20,
            strip_bytes: 64 << 10,
            luns: 8,
            lun_bytes: 16 << 20,
            model: ModelKind::Hdd10k,
            data: DataKind::Real,
            real_data_bytes: 64 << 20,
            duration_ns: 3 * NS_PER_S,
            fail_at_permille: Some(333),
            rebuild_share_permille: 500,
            background: None,
            stripes_per_step: 8,
            cpu_ns_per_request: 10_000,
            cpu_ns_per_block: 10_000,
            baseline: true,
            scrub_after: true,
            seed: 1,
            keep_dir: None,
            bucket_ns: 50 * NS_PER_MS,
            log_device: None,
            fail_log_device: false,
        }
    }

    /// A tiny configuration for tests: small images, memory-speed data paths, short run.
    #[must_use]
    pub fn tiny() -> SimOptions {
        SimOptions {
            disk_bytes: 64 << 20,
            lun_bytes: 2 << 20,
            real_data_bytes: 4 << 20,
            duration_ns: NS_PER_S / 2,
            ..SimOptions::demo()
        }
    }

    /// The pool settings of the main run.
    #[must_use]
    pub fn pool_config(&self) -> PoolConfig {
        PoolConfig {
            level: self.level,
            strip_bytes: self.strip_bytes,
            stripes_per_step: self.stripes_per_step,
            background: self.background,
            ..PoolConfig::default()
        }
    }

    /// The setup, as reported.
    #[must_use]
    pub fn setup_json(&self, data: &DataSource) -> serde_json::Value {
        json!({
            "level": self.level.name(),
            "disks": self.disks,
            "spares": self.spares,
            "disk_bytes": self.disk_bytes,
            "strip_bytes": self.strip_bytes,
            "luns": self.luns,
            "lun_bytes": self.lun_bytes,
            "model": model_name(self.model),
            "data": self.data.to_string(),
            "real_data_bytes": data.real_blocks() * 4096,
            "real_data_files": data.files(),
            "virtual_seconds_asked": self.duration_ns as f64 / 1e9,
            "fail_at_fraction": self.fail_at_permille.map(|p| f64::from(p) / 1000.0),
            "rebuild_share": self.background.is_none().then(|| f64::from(self.rebuild_share_permille) / 1000.0),
            "rebuild_paced_by": if self.background.is_some() { "engine" } else { "runner" },
            "rebuild_min_mib_s": self.background.map(|b| f64::from(b.min_kib_s) / 1024.0),
            "rebuild_max_mib_s": self.background.map(|b| f64::from(b.max_kib_s) / 1024.0),
            "rebuild_stripes_per_step": self.stripes_per_step,
            "cpu_us_per_request": self.cpu_ns_per_request as f64 / 1e3,
            "cpu_us_per_block": self.cpu_ns_per_block as f64 / 1e3,
            "read_percent": self.workload.read_percent,
            "rate_per_stream": self.workload.rate_per_stream,
            "log_device": self.log_device.map(model_name),
            "fail_log_device": self.fail_log_device,
            "baseline": "max_extent_blocks 1 and every write FUA (write-through): each 4 KiB write waits for intent-log copies on m+1 members",
        })
    }

    /// One-line description for progress output.
    #[must_use]
    pub fn describe(&self) -> String {
        let log = self.log_device.map_or(String::new(), |m| {
            format!(" + {} log device", model_name(m))
        });
        format!(
            "{} on {} x {} {} ({} + {} spare{log}), {} LUNs of {}",
            self.workload.kind,
            self.disks,
            format_bytes(self.disk_bytes),
            model_name(self.model),
            self.level.name(),
            self.spares,
            self.luns,
            format_bytes(self.lun_bytes)
        )
    }
}

/// What [`run`] hands back beside the report: the runs' raw results (for plots).
#[derive(Debug)]
pub struct Outcome {
    /// The report.
    pub report: Report,
    /// The main run.
    pub main: RunResult,
    /// The baseline run.
    pub baseline: Option<RunResult>,
}

/// Builds one pool in `dir` and runs the workload on it (`baseline`: coalescing off and
/// writes through); `label` names the run in progress and errors.
pub(crate) fn one_run(
    opts: &SimOptions,
    dir: &Path,
    data: &DataSource,
    baseline: bool,
    label: &str,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<RunResult, String> {
    let mut cfg = opts.pool_config();
    if baseline {
        cfg.max_extent_blocks = 1;
    }
    let mut uuid = [0u8; 16];
    ChaCha8Rng::seed_from_u64(opts.seed ^ 0x5eed).fill(&mut uuid);
    let create = CreateOptions {
        disks: opts.disks,
        spares: opts.spares,
        disk_bytes: opts.disk_bytes,
        block_size: BlockSize::B512,
        config: cfg,
        luns: opts.luns,
        lun_bytes: opts.lun_bytes,
        uuid,
        overwrite: true,
        sparse: true,
    };
    let hw = HwOptions {
        seed: opts.seed,
        sync_on_flush: false,
        ..HwOptions::default()
    };
    let with_model = HwOptions {
        model: Some(opts.model),
        ..hw
    };
    let mut dp = DirPool::create(dir, &create, &with_model).map_err(|e| e.to_string())?;
    if let Some(m) = opts.log_device {
        let path = dir.join(LOG_DEVICE_FILE);
        dp.add_log_device(&path, Some(LOG_DEVICE_BYTES), Some(model_name(m)))
            .map_err(|e| format!("the {label} pool's log device: {e}"))?;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed ^ 0xfa11);
    let slot = rng.random_range(0..opts.disks);
    let run_cfg = RunConfig {
        duration_ns: opts.duration_ns,
        fail: opts.fail_at_permille.map(|p| FailPlan {
            at_ns: opts.duration_ns / 1000 * u64::from(p),
            slot,
            log_device: opts.fail_log_device,
        }),
        rebuild_share_permille: opts.rebuild_share_permille,
        engine_paced: opts.background.is_some(),
        cpu_ns_per_request: opts.cpu_ns_per_request,
        cpu_ns_per_block: opts.cpu_ns_per_block,
        write_through: baseline,
        flush_interval_ns: opts.workload.kind.flush_interval_ns(),
        bucket_ns: opts.bucket_ns,
        seed: opts.seed,
        scrub_after: opts.scrub_after,
    };
    let mut result = runner::run(&mut dp, &opts.workload, data, &run_cfg, |d, t| {
        progress(label, d, t);
    });
    dp.close()
        .map_err(|e| format!("closing the {label} pool: {e}"))?;
    // What the images hold: import the pool from them and read every block again.
    let mut again = DirPool::open(dir, cfg, &hw)
        .map_err(|e| format!("importing the {label} pool again: {e}"))?;
    result.reimport = Some(runner::verify_all(&mut again, &result.oracle, data));
    again
        .close()
        .map_err(|e| format!("closing the {label} pool: {e}"))?;
    Ok(result)
}

/// Where a run keeps its images: `opts.keep_dir`, or a new temporary directory named from
/// `prefix` (removed when the returned guard drops).
pub(crate) fn work_dir(
    opts: &SimOptions,
    prefix: &str,
) -> Result<(PathBuf, Option<tempfile::TempDir>), String> {
    if let Some(d) = &opts.keep_dir {
        return Ok((d.clone(), None));
    }
    let tmp = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    Ok((tmp.path().to_path_buf(), Some(tmp)))
}

/// Runs the main run and (if asked) the baseline, and reports.
pub fn run(opts: &SimOptions, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<Outcome, String> {
    let data = DataSource::new(opts.data, opts.real_data_bytes, opts.seed)?;
    let (base, _tmp) = work_dir(opts, "raidcore-sim-")?;
    let main = one_run(
        opts,
        &base.join("raidcore"),
        &data,
        false,
        "raidcore",
        progress,
    )?;
    let baseline = if opts.baseline {
        Some(one_run(
            opts,
            &base.join("baseline"),
            &data,
            true,
            "baseline",
            progress,
        )?)
    } else {
        None
    };
    let name = opts.workload.kind.name();
    let main_rep = RunReport::new("raidcore", "coalescing + write-back", name, &main);
    let base_rep = baseline
        .as_ref()
        .map(|b| RunReport::new("baseline", "no coalescing, write-through", name, b));
    let report = Report::new(main_rep, base_rep, opts.setup_json(&data), opts.seed);
    Ok(Outcome {
        report,
        main,
        baseline,
    })
}
