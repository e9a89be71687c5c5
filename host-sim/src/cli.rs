//! The `raidcore-sim` command line (clap): pools on disk images in a directory (`create`,
//! `status`, `fail`, `replace`, `scrub`) and the NBD export (`serve`) — the product's commands
//! ([`raidcore_host::cli`]) run over the simulated hardware ([`SimMembers`]) —, workloads and
//! benchmarks (`bench`), the fault campaign (`sim`) and the demo (`demo`).
//!
//! Exit status: 0 on success; 1 when a verification failed (a run read back wrong data, a scrub
//! found damage it could not repair); 2 for bad usage and errors before anything was verified.
//! Progress bars go to stderr and are hidden when stderr is not a terminal; results go to stdout,
//! as a human table or, with `--json`, as one JSON object.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use clap::{Args, Parser, Subcommand};
use indicatif::ProgressBar;
use raidcore::pool::{BackgroundPolicy, PoolConfig};
use raidcore_hal::BlockSize;
pub use raidcore_host::cli::Failure;
use raidcore_host::cli::console::bar;
use raidcore_host::cli::create::CreateArgs;
use raidcore_host::cli::fail::FailArgs;
use raidcore_host::cli::replace::ReplaceArgs;
use raidcore_host::cli::scrub::ScrubArgs;
use raidcore_host::cli::serve::ServeArgs;
use raidcore_host::cli::status::StatusArgs;
use raidcore_host::cli::values::{parse_level, size_arg};
use raidcore_host::cli::{self as pool_cli, Console};

use crate::campaign::{self, CampaignOptions, MutationKind};
use crate::clock::NS_PER_MS;
use crate::demo::{self, SimOptions};
use crate::model::ModelKind;
use crate::nbd::{self, PoolBackend, ServeConfig};
use crate::plot;
use crate::pooldir::{CreateOptions, HwOptions, MemPool, SimMembers, parse_model};
use crate::workload::data::DataKind;
use crate::workload::{WorkloadKind, WorkloadSpec};

/// raidcore host simulator: pools on disk images, NBD export, workloads, the demo.
#[derive(Debug, Parser)]
#[command(name = "raidcore-sim", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Create a pool on new disk images disk0.img, disk1.img, … in a directory.
    Create(SimCreateArgs),
    /// Show pool health, disks, rebuild/scrub progress and LUNs (like `zpool status`).
    Status(StatusArgs),
    /// Fail a member disk by hand (a hot spare takes over if there is one).
    Fail(FailArgs),
    /// Put a blank image into a failed member slot and rebuild onto it.
    Replace(ReplaceArgs),
    /// Check every used stripe's parity and every extent's checksum, repairing from redundancy.
    Scrub(ScrubArgs),
    /// Run a workload (voice, mixed, random-write, sequential-read), or `parity` / `nbd`.
    Bench(BenchArgs),
    /// The deterministic fault campaign.
    Sim(SimArgs),
    /// Export the pool's LUNs over NBD.
    Serve(ServeArgs),
    /// The seed setup: RAID-6 of 10K RPM drives + hot spare, 8 voice streams, a disk failing
    /// mid-run, rebuild, verification; beside the same run with coalescing off.
    Demo(DemoArgs),
}

fn model_arg(s: &str) -> Result<ModelKind, String> {
    parse_model(s)
}

/// Options of `create`: the product's, and the device model the simulator times the disks
/// with (recorded in the pool's description; `raidcore` ignores it).
#[derive(Debug, Args)]
pub struct SimCreateArgs {
    /// The pool's options.
    #[command(flatten)]
    pub pool: CreateArgs,
    /// Device model of the disks: memory, hdd10k, ssd, nvme, sd or nvram.
    #[arg(long, value_parser = model_arg, default_value = "memory")]
    pub model: ModelKind,
    /// Device model of the log device (`--log-device`; default: the disks').
    #[arg(long, value_parser = model_arg)]
    pub log_model: Option<ModelKind>,
}

/// Options of `sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Number of seeds to run.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Steps (client operations, faults, background work) per seed.
    #[arg(long, default_value_t = campaign::DEFAULT_OPS)]
    pub ops: u32,
    /// Shrink each failing history to a short one that still fails, and print it.
    #[arg(long)]
    pub shrink: bool,
    /// Switch on a deliberate core bug: recon-flip, early-flush, rebuild-skip or
    /// loss-over-declared (needs a build with feature `mutate`).
    #[arg(long)]
    pub mutate: Option<MutationKind>,
    /// Threads running seeds (default: the CPUs available; results do not depend on it).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options shared by `demo` and `bench <workload>`.
#[derive(Debug, Args, Clone)]
#[allow(clippy::struct_excessive_bools)] // command-line switches
pub struct RunArgs {
    /// Seed of everything random (data placement, failing disk, stream phases).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Virtual seconds to run (longer if the rebuild runs over).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Size of each disk image.
    #[arg(long, value_parser = size_arg, default_value = "256M")]
    pub disk_size: u64,
    /// Member disks.
    #[arg(long, default_value_t = 6)]
    pub disks: usize,
    /// Hot spares.
    #[arg(long, default_value_t = 1)]
    pub spares: usize,
    /// RAID level.
    #[arg(long, value_parser = parse_level, default_value = "raid6")]
    pub level: raidcore::raid::Level,
    /// Strip size.
    #[arg(long, value_parser = size_arg, default_value = "64K")]
    pub strip_size: u64,
    /// LUNs.
    #[arg(long, default_value_t = 8)]
    pub luns: usize,
    /// Size of each LUN.
    #[arg(long, value_parser = size_arg, default_value = "16M")]
    pub lun_size: u64,
    /// Device model: memory, hdd10k, ssd, nvme, sd or nvram.
    #[arg(long, value_parser = model_arg, default_value = "hdd10k")]
    pub model: ModelKind,
    /// A dedicated intent-log device of this model (ssd, nvme, nvram, …): flushes complete
    /// once it holds their data. Default: none for the voice runs, ssd for the branch office.
    #[arg(long, value_parser = model_arg)]
    pub log_device: Option<ModelKind>,
    /// At `--fail-at`, the log device dies instead of a member (with `--log-device`).
    #[arg(long)]
    pub fail_log_device: bool,
    /// Block content: `real` (files of this machine) or `synthetic:<percent compressible>`.
    #[arg(long, value_parser = DataKind::parse, default_value = "real")]
    pub data: DataKind,
    /// How much real data to read.
    #[arg(long, value_parser = size_arg, default_value = "64M")]
    pub real_data_size: u64,
    /// Fail a member at this fraction of the run (0 to 1).
    #[arg(long, default_value_t = 0.333)]
    pub fail_at: f64,
    /// No disk failure.
    #[arg(long)]
    pub no_fail: bool,
    /// Share of device time the rebuild gets (0 to 1).
    #[arg(long, default_value_t = 0.5)]
    pub rebuild_share: f64,
    /// Stripes rebuilt per maintenance step.
    #[arg(long, default_value_t = 8)]
    pub rebuild_stripes: u32,
    /// Let the pool pace its rebuild (`PoolConfig::background`, as md's `speed_limit_min`):
    /// at least this many MiB/s of each member while clients are active (0: none, the rebuild
    /// waits for idle clients). With it, `--rebuild-share` is not used.
    #[arg(long)]
    pub rebuild_min: Option<f64>,
    /// With the pool's pacing: at most this many MiB/s of each member once clients have been
    /// idle 100 ms (md's `speed_limit_max`; default 200; 0: no ceiling). Given alone, the
    /// floor is 4.
    #[arg(long)]
    pub rebuild_max: Option<f64>,
    /// Controller CPU per request, in microseconds.
    #[arg(long, default_value_t = 10.0)]
    pub cpu_us_per_request: f64,
    /// Controller CPU per 4 KiB block, in microseconds.
    #[arg(long, default_value_t = 10.0)]
    pub cpu_us_per_block: f64,
    /// Streams (default: the workload's).
    #[arg(long)]
    pub streams: Option<usize>,
    /// Voice: percent of requests that are reads.
    #[arg(long, default_value_t = 0)]
    pub read_percent: u8,
    /// Open loop: each stream asks this many requests per virtual second, on schedule, and
    /// latency counts from when a request was due (200 is Cisco's figure for a voice VM, 746
    /// what the seed's ZFS appliance measured). Default: closed loop, each request issued when
    /// the one before completed.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rate: Option<u32>,
    /// Skip the baseline run (coalescing off).
    #[arg(long)]
    pub no_baseline: bool,
    /// Skip the scrub after each run.
    #[arg(long)]
    pub no_scrub: bool,
    /// Width of a timeline bucket (plots), in virtual milliseconds.
    #[arg(long, default_value_t = 50)]
    pub bucket_ms: u64,
    /// Keep the disk images in this directory (default: a temporary one, removed; `bench nbd`
    /// keeps its disks in memory and has no images).
    #[arg(long)]
    pub keep_dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write a plot of IOPS and latency over virtual time to this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Options of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run options (of the voice run; the branch office takes its seed, run length, failure
    /// point, device model, data, disk size and `--rebuild-min/--rebuild-max` from them, and
    /// is skipped with `--no-fail`).
    #[command(flatten)]
    pub run: RunArgs,
    /// Run the voice workload only, not the branch office after it.
    #[arg(long)]
    pub no_branch_office: bool,
}

/// Options of `bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// voice, mixed, random-write, sequential-read, branch-office, parity, engine or nbd.
    pub what: String,
    /// Run options (workloads and `nbd`).
    #[command(flatten)]
    pub run: RunArgs,
    /// `parity` and `engine`: the full (slower, more samples) mode.
    #[arg(long)]
    pub full: bool,
    /// `parity`: time this raidcore kernel (`portable`, `ssse3`, `avx2`, `neon`) instead of the
    /// fastest this CPU has; `portable` times the portable CRC-32C path (the `crc` crate) too,
    /// i.e. what a Cortex-M runs.
    #[arg(long)]
    pub kernel: Option<String>,
}

/// How `raidcore-sim` speaks: its name on every message.
pub const RAIDCORE_SIM: Console = Console {
    name: "raidcore-sim",
    scripted: false,
};

/// Parses the command line and runs it; the exit status to return.
#[must_use]
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // `RAIDCORE_SIM_LOG` sets the level of the library's log lines.
    RAIDCORE_SIM.init_log(
        "RAIDCORE_SIM_LOG",
        if matches!(cli.cmd, Cmd::Serve(_)) {
            log::LevelFilter::Info
        } else {
            log::LevelFilter::Warn
        },
    );
    RAIDCORE_SIM.exit(run(cli))
}

/// The simulated hardware the pool commands run on: no latency (the device model a pool was
/// created with is for in-process runs such as `demo`), no faults, images synced on flush.
fn pool_hw() -> HwOptions {
    HwOptions {
        model: Some(ModelKind::Instant),
        ..HwOptions::default()
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), Failure> {
    let con = RAIDCORE_SIM;
    match cli.cmd {
        Cmd::Create(a) => {
            let hw = HwOptions {
                model: Some(a.model),
                ..HwOptions::default()
            };
            let log_model = a.log_model.map(crate::pooldir::model_name);
            pool_cli::create::run_with_log_model::<SimMembers>(&a.pool, &hw, log_model, con)
        }
        Cmd::Status(a) => pool_cli::status::run::<SimMembers>(&a, &&pool_hw(), con),
        Cmd::Fail(a) => pool_cli::fail::run::<SimMembers>(&a, &pool_hw(), con),
        Cmd::Replace(a) => pool_cli::replace::run::<SimMembers>(&a, &pool_hw(), con),
        Cmd::Scrub(a) => pool_cli::scrub::run::<SimMembers>(&a, &pool_hw(), con),
        Cmd::Serve(a) => pool_cli::serve::run(
            &a,
            |sync_on_flush| {
                SimMembers::from(&HwOptions {
                    sync_on_flush,
                    ..pool_hw()
                })
            },
            con,
        ),
        Cmd::Bench(a) => bench(&a),
        Cmd::Sim(a) => sim(&a),
        Cmd::Demo(a) => demo(&a),
    }
}

fn print(text: &str) {
    RAIDCORE_SIM.print(text);
}

/// The simulation options of `demo` / `bench <workload>` from the command line.
// The float-to-integer casts below convert values checked to be in range and non-negative.
#[allow(clippy::cast_sign_loss)]
pub fn sim_options(r: &RunArgs, kind: WorkloadKind) -> Result<SimOptions, Failure> {
    if !(r.seconds > 0.0 && r.seconds <= 3600.0) {
        return Err(Failure::Error("--seconds must be in (0, 3600]".into()));
    }
    if !(0.0..=1.0).contains(&r.fail_at) {
        return Err(Failure::Error("--fail-at must be in [0, 1]".into()));
    }
    if !(r.rebuild_share > 0.0 && r.rebuild_share <= 1.0) {
        return Err(Failure::Error("--rebuild-share must be in (0, 1]".into()));
    }
    if r.read_percent > 100 {
        return Err(Failure::Error("--read-percent must be 0 to 100".into()));
    }
    let strip = u32::try_from(r.strip_size)
        .map_err(|_| Failure::Error(format!("--strip-size {}: too large", r.strip_size)))?;
    let mut workload = WorkloadSpec::new(kind);
    if let Some(s) = r.streams {
        if s == 0 || s > 64 {
            return Err(Failure::Error("--streams must be 1 to 64".into()));
        }
        workload.streams = s;
    }
    workload.read_percent = r.read_percent;
    workload.rate_per_stream = r.rate;
    if r.fail_log_device && r.log_device.is_none() {
        return Err(Failure::Error(
            "--fail-log-device needs --log-device (the pool has no log device to fail)".into(),
        ));
    }
    let us = |x: f64| (x.max(0.0) * 1e3).round() as u64;
    Ok(SimOptions {
        workload,
        level: r.level,
        disks: r.disks,
        spares: r.spares,
        disk_bytes: r.disk_size,
        strip_bytes: strip,
        luns: r.luns,
        lun_bytes: r.lun_size,
        model: r.model,
        data: r.data,
        real_data_bytes: usize::try_from(r.real_data_size).unwrap_or(usize::MAX),
        duration_ns: (r.seconds * 1e9).round() as u64,
        fail_at_permille: (!r.no_fail).then_some((r.fail_at * 1000.0).round() as u32),
        rebuild_share_permille: (r.rebuild_share * 1000.0).round().max(1.0) as u32,
        background: background_policy(r)?,
        stripes_per_step: r.rebuild_stripes.max(1),
        cpu_ns_per_request: us(r.cpu_us_per_request),
        cpu_ns_per_block: us(r.cpu_us_per_block),
        baseline: !r.no_baseline,
        scrub_after: !r.no_scrub,
        seed: r.seed,
        keep_dir: r.keep_dir.clone(),
        bucket_ns: r.bucket_ms.max(1) * NS_PER_MS,
        log_device: r.log_device,
        fail_log_device: r.fail_log_device,
    })
}

/// The pool's rebuild pacing from `--rebuild-min` / `--rebuild-max` (MiB/s), if either is given.
// The float-to-integer casts convert values checked to be in range and non-negative.
#[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
fn background_policy(r: &RunArgs) -> Result<Option<BackgroundPolicy>, Failure> {
    if r.rebuild_min.is_none() && r.rebuild_max.is_none() {
        return Ok(None);
    }
    let kib = |mib: f64, what: &str| {
        if (0.0..=1_000_000.0).contains(&mib) {
            Ok((mib * 1024.0).round() as u32)
        } else {
            Err(Failure::Error(format!("{what} must be 0 to 1000000 MiB/s")))
        }
    };
    let min_kib_s = kib(r.rebuild_min.unwrap_or(4.0), "--rebuild-min")?;
    let max_kib_s = kib(r.rebuild_max.unwrap_or(200.0), "--rebuild-max")?;
    if max_kib_s != 0 && min_kib_s > max_kib_s {
        return Err(Failure::Error(
            "--rebuild-min is above --rebuild-max: the floor under load cannot exceed the ceiling when idle".into(),
        ));
    }
    Ok(Some(BackgroundPolicy {
        min_kib_s,
        max_kib_s,
        idle_after: 100 * NS_PER_MS,
        ticks_per_s: 1_000_000_000,
    }))
}

/// `sim`: the fault campaign; exit 1 when a seed failed.
fn sim(a: &SimArgs) -> Result<(), Failure> {
    if a.mutate.is_some() && !cfg!(feature = "mutate") {
        return Err(campaign::CampaignError::MutateUnsupported.into());
    }
    let opts = CampaignOptions {
        seeds: a.seeds,
        from: a.from,
        ops: a.ops,
        mutate: a.mutate,
        shrink: a.shrink,
        jobs: a.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        }),
        ..CampaignOptions::default()
    };
    let pb = bar(a.seeds, "seeds");
    let sum = campaign::run_with_progress(&opts, &|out| {
        pb.inc(1);
        if out.failure.is_some() {
            pb.suspend(|| eprintln!("raidcore-sim: seed {} failed", out.seed));
        }
    })?;
    pb.finish_and_clear();
    if a.json {
        let mut s = serde_json::to_string_pretty(&sum.to_json())?;
        s.push('\n');
        print(&s);
    } else {
        print(&sum.render());
    }
    if sum.passed() {
        Ok(())
    } else {
        Err(Failure::Verify(format!(
            "{} of {} seeds failed",
            sum.failures.len(),
            sum.seeds_run
        )))
    }
}

/// Progress bars of runs in turn, one per run label, on stderr.
#[derive(Default)]
struct Bars(Vec<(String, ProgressBar)>);

impl Bars {
    fn update(&mut self, label: &str, done: u64, len: u64) {
        if self.0.last().is_none_or(|(l, _)| l != label) {
            if let Some((_, b)) = self.0.last() {
                b.finish_and_clear();
            }
            self.0.push((label.to_string(), bar(len.max(1), label)));
        }
        if let Some((_, b)) = self.0.last() {
            b.set_length(len.max(1));
            b.set_position(done.min(len));
        }
    }

    fn finish(&self) {
        for (_, b) in &self.0 {
            b.finish_and_clear();
        }
    }
}

/// Runs `opts` (and its baseline) with progress bars, and writes the plot if asked.
fn run_workload(r: &RunArgs, opts: &SimOptions) -> Result<demo::Outcome, Failure> {
    eprintln!("raidcore-sim: {}", opts.describe());
    let mut bars = Bars::default();
    let out = demo::run(opts, &mut |label, done, len| bars.update(label, done, len))
        .map_err(Failure::Error)?;
    bars.finish();
    if let Some(path) = &r.svg {
        let mut series = vec![plot::Series {
            label: "raidcore",
            run: &out.main,
        }];
        if let Some(b) = &out.baseline {
            series.push(plot::Series {
                label: "baseline",
                run: b,
            });
        }
        let title = format!("{} (seed {})", opts.describe(), opts.seed);
        plot::write_svg(path, &title, &series).map_err(Failure::Error)?;
        eprintln!("raidcore-sim: wrote {}", path.display());
    }
    Ok(out)
}

/// The exit for a report that verified or not.
fn verdict(report: &crate::report::Report) -> Result<(), Failure> {
    if report.verified() {
        Ok(())
    } else {
        Err(Failure::Verify(format!(
            "{} verify errors (raidcore), {} (baseline)",
            report.main.verify_errors,
            report.baseline.as_ref().map_or(0, |b| b.verify_errors)
        )))
    }
}

fn sim_run(r: &RunArgs, kind: WorkloadKind) -> Result<(), Failure> {
    let opts = sim_options(r, kind)?;
    let out = run_workload(r, &opts)?;
    if r.json {
        print(&out.report.to_json());
    } else {
        print(&out.report.to_text());
    }
    verdict(&out.report)
}

/// `demo`: the voice workload beside its baseline, then the branch office healthy beside
/// failed; one JSON object with `--json` (the voice run's keys, `branch_office` and
/// `wall_seconds`).
fn demo(a: &DemoArgs) -> Result<(), Failure> {
    let opts = sim_options(&a.run, WorkloadKind::Voice)?;
    let t = std::time::Instant::now();
    let out = run_workload(&a.run, &opts)?;
    let voice_wall = t.elapsed().as_secs_f64();
    if !a.no_branch_office && opts.fail_at_permille.is_none() {
        eprintln!(
            "raidcore-sim: --no-fail: no branch office (it compares a run with a member failed against a healthy one)"
        );
    }
    let branch = if a.no_branch_office || opts.fail_at_permille.is_none() {
        None
    } else {
        let bopts = crate::branch::options(&opts);
        eprintln!("raidcore-sim: branch office: {}", bopts.describe());
        let t = std::time::Instant::now();
        let mut bars = Bars::default();
        let rep = crate::branch::run(&bopts, &mut |l, d, n| bars.update(l, d, n))
            .map_err(Failure::Error)?;
        bars.finish();
        Some((rep, t.elapsed().as_secs_f64()))
    };
    let wall = serde_json::json!({
        "voice": (voice_wall * 10.0).round() / 10.0,
        "branch_office": branch.as_ref().map(|b| (b.1 * 10.0).round() / 10.0),
    });
    if a.run.json {
        let mut v = serde_json::to_value(&out.report)?;
        v["branch_office"] = serde_json::to_value(branch.as_ref().map(|b| &b.0))?;
        v["wall_seconds"] = wall;
        let mut s = serde_json::to_string_pretty(&v)?;
        s.push('\n');
        print(&s);
    } else {
        let mut s = out.report.to_text();
        if let Some((b, _)) = &branch {
            s.push('\n');
            s.push_str(&b.to_text());
        }
        let _ = writeln!(
            s,
            "wall time: voice {voice_wall:.1} s{}",
            branch
                .as_ref()
                .map_or(String::new(), |b| format!(", branch office {:.1} s", b.1))
        );
        print(&s);
    }
    verdict(&out.report)?;
    match branch {
        Some((b, _)) if !b.verified() => Err(Failure::Verify(format!(
            "branch office: {} verify errors (healthy), {} (failed)",
            b.healthy.verify_errors, b.failed.verify_errors
        ))),
        _ => Ok(()),
    }
}

fn bench(a: &BenchArgs) -> Result<(), Failure> {
    match a.what.as_str() {
        "parity" => bench_parity(a),
        "engine" => bench_engine(a),
        "nbd" => bench_nbd(a),
        w => sim_run(
            &a.run,
            WorkloadKind::parse(w)
                .map_err(|e| Failure::Error(format!("{e}, parity, engine or nbd")))?,
        ),
    }
}

/// `bench engine`: the engine's CPU per 4 KiB beside memcpy and lz4_flex (see
/// [`crate::bench_engine`]); `--full` runs more blocks and rounds.
fn bench_engine(a: &BenchArgs) -> Result<(), Failure> {
    use crate::bench_engine::{EngineOptions, format_table, run};
    let mut o = EngineOptions {
        real_bytes: usize::try_from(a.run.real_data_size).unwrap_or(usize::MAX),
        ..EngineOptions::default()
    };
    if a.full {
        (o.blocks, o.rounds) = (65_536, 9);
    }
    let quiet = a.run.json;
    let (rows, units) = run(&o, |what| {
        if !quiet {
            eprintln!("raidcore-sim: bench engine: {what}");
        }
    })
    .map_err(Failure::Error)?;
    if a.run.json {
        let v = serde_json::json!({
            "blocks": o.blocks, "rounds": o.rounds, "rows": rows, "compression_units": units,
        });
        print(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        print(&format_table(&rows, &units, &o));
    }
    Ok(())
}

fn bench_parity(a: &BenchArgs) -> Result<(), Failure> {
    use crate::bench_parity::{BenchParityOptions, format_table, run, to_json};
    use raidcore::parity::Kernel;
    let mut opts = if a.full {
        BenchParityOptions::full()
    } else {
        BenchParityOptions::quick()
    };
    let kernel = match &a.kernel {
        None => Kernel::selected(),
        Some(name) => Kernel::supported()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let have: Vec<&str> = Kernel::supported().map(Kernel::name).collect();
                let known = ["portable", "ssse3", "avx2", "neon"];
                Failure::Error(if known.contains(&name.as_str()) {
                    format!(
                        "kernel {name:?} is not available on this CPU; it has {}",
                        have.join(", ")
                    )
                } else {
                    format!(
                        "unknown kernel {name:?}: the kernels are {} (this CPU has {})",
                        known.join(", "),
                        have.join(", ")
                    )
                })
            })?,
    };
    opts.kernel = Some(kernel);
    let rows = run(&opts, |row| {
        if !a.run.json {
            let shape = if row.op == "crc32c" {
                String::new()
            } else {
                format!(" {}+2", row.data_strips)
            };
            eprintln!(
                "raidcore-sim: {}{shape} {} B {} done",
                row.op, row.strip_bytes, row.working_set
            );
        }
    });
    if a.run.json {
        let mut s = serde_json::to_string_pretty(&to_json(&rows, kernel))?;
        s.push('\n');
        print(&s);
    } else {
        print(&format_table(&rows, kernel));
    }
    Ok(())
}

/// `bench nbd`: a pool on memory disks (instant device model) exported over NBD on a Unix socket, and
/// `nbdkit memory` (one server per LUN), each driven in turn by the same fio job (the seed
/// workload, see [`crate::bench_nbd`]) for `--seconds` of wall-clock time. Prints IOPS, the
/// slowest job, completion-latency percentiles and the ratio; exits 2 without fio or nbdkit,
/// 1 if fio reports errors (verification included). Wall-clock figures: not deterministic.
#[allow(clippy::cast_sign_loss)] // `seconds` is checked positive
#[expect(
    clippy::too_many_lines,
    reason = "the NBD bench: both servers, fio, CPU sampling, the table; to split"
)]
fn bench_nbd(a: &BenchArgs) -> Result<(), Failure> {
    use crate::bench_nbd::{
        FSYNC_EVERY, Job, NbdkitPeer, TARGET_RATIO, cpu_us_per_request, process_cpu_secs, run_fio,
    };
    let r = &a.run;
    let fio = crate::bench_nbd::fio_version()
        .map_err(|e| Failure::Error(format!("bench nbd needs fio (Debian package fio): {e}")))?;
    let nbdkit = crate::bench_nbd::nbdkit_version().map_err(|e| {
        Failure::Error(format!(
            "bench nbd compares against `nbdkit memory` and needs nbdkit (Debian package nbdkit): {e}"
        ))
    })?;
    let tmp = tempfile::Builder::new()
        .prefix("raidcore-sim-nbd-")
        .tempdir()?;
    let strip = u32::try_from(r.strip_size)
        .map_err(|_| Failure::Error(format!("--strip-size {}: too large", r.strip_size)))?;
    let mut uuid = [0u8; 16];
    rand::fill(&mut uuid);
    let opts = CreateOptions {
        disks: r.disks,
        spares: r.spares,
        disk_bytes: r.disk_size,
        block_size: BlockSize::B512,
        config: PoolConfig {
            level: r.level,
            strip_bytes: strip,
            ..PoolConfig::default()
        },
        luns: r.luns,
        lun_bytes: r.lun_size,
        uuid,
        overwrite: true,
        sparse: true,
    };
    let hw = HwOptions {
        model: Some(ModelKind::Instant),
        sync_on_flush: false,
        ..HwOptions::default()
    };
    let sock = tmp.path().join("nbd.sock");
    let config = ServeConfig {
        tcp: None,
        unix: Some(sock.clone()),
        ..ServeConfig::default()
    };
    let shutdown = config.shutdown.clone();
    // Memory disks, as `nbdkit memory` keeps its disk in RAM: the comparison is of the servers,
    // not of the page cache. Built on the owner thread (a pool need not be `Send`).
    let server = nbd::Server::start(config, move || {
        let mp = MemPool::create(&opts, &hw).map_err(std::io::Error::other)?;
        Ok(PoolBackend::new(mp))
    })?;
    let names: Vec<String> = server.exports().iter().map(|e| e.name.clone()).collect();
    let jobs: Vec<Job> = names
        .iter()
        .map(|n| Job {
            name: n.clone(),
            uri: format!("nbd+unix:///{n}?socket={}", sock.display()),
        })
        .collect();
    let handle = std::thread::spawn(move || server.run());
    let secs = r.seconds.max(1.0).round() as u64;
    let quiet = r.json;
    if !quiet {
        eprintln!(
            "raidcore-sim: fio on {} raidcore exports for {secs} s",
            names.len()
        );
    }
    let me = std::process::id();
    let cpu_before = process_cpu_secs(me);
    let ours = run_fio(secs, r.lun_size, &jobs);
    let our_cpu = process_cpu_secs(me).zip(cpu_before).map(|(a, b)| a - b);
    shutdown.store(true, Ordering::SeqCst);
    let joined = handle.join();
    let ours = ours.map_err(Failure::Error)?;
    match joined {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Failure::Error(format!("NBD server: {e}"))),
        Err(_) => return Err(Failure::Error("NBD server thread panicked".into())),
    }

    if !quiet {
        eprintln!(
            "raidcore-sim: fio on {} `nbdkit memory` servers for {secs} s",
            names.len()
        );
    }
    let peer = NbdkitPeer::start(tmp.path(), &names, r.lun_size).map_err(Failure::Error)?;
    let cpu_before = peer.cpu_secs();
    let theirs = run_fio(secs, r.lun_size, peer.jobs());
    let their_cpu = peer.cpu_secs().zip(cpu_before).map(|(a, b)| a - b);
    drop(peer);
    let theirs = theirs.map_err(Failure::Error)?;

    let (o, t) = (&ours.summary, &theirs.summary);
    let ratio = if t.iops_total() > 0.0 {
        o.iops_total() / t.iops_total()
    } else {
        0.0
    };
    let our_cpu_us = cpu_us_per_request(our_cpu, o);
    let their_cpu_us = cpu_us_per_request(their_cpu, t);
    let level = format!("{:?}", r.level);
    let report = serde_json::json!({
        "workload": "nbd",
        "client": format!(
            "{fio} --ioengine=nbd --thread: one job per LUN, 4 KiB sequential writes, QD1, \
             flush every {FSYNC_EVERY} writes, verify=crc32c"
        ),
        "clock": "wall",
        "seconds": secs,
        "streams": names.len(),
        "lun_bytes": r.lun_size,
        "raidcore": {
            "target": format!(
                "raidcore-sim NBD export, {level} of {} memory disks + {} spare, {} KiB strips, CRC32C, LZ4",
                r.disks, r.spares, r.strip_size >> 10
            ),
            "result": ours.summary.to_json(ours.exit_ok),
            "server_cpu_us_per_request": our_cpu_us,
        },
        "nbdkit": {
            "target": format!("{nbdkit}: one `nbdkit memory size={}` per LUN", r.lun_size),
            "result": theirs.summary.to_json(theirs.exit_ok),
            "server_cpu_us_per_request": their_cpu_us,
        },
        "ratio_iops": ratio,
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
    });
    if r.json {
        print(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    } else {
        let row = |label: &str, s: &crate::bench_nbd::FioSummary, ok: bool, cpu: Option<f64>| {
            format!(
                "  {label:<14} {:>10.0} {:>12.0} {:>8.1} {:>8.1} {:>9.1} {:>10}  {}\n",
                s.iops_total(),
                s.iops_min(),
                s.clat_us_p50,
                s.clat_us_p99,
                s.clat_us_p999,
                cpu.map_or_else(|| "-".to_string(), |c| format!("{c:.1}")),
                if s.errors == 0 && ok {
                    format!("passed ({} reads)", s.verify_reads)
                } else {
                    "FAILED".into()
                }
            )
        };
        print(&format!(
            "bench nbd: fio --ioengine=nbd over Unix sockets, {} jobs (one per LUN) x 4 KiB sequential writes QD1, flush every {FSYNC_EVERY}, {secs} s wall clock each\n  \
             {:<14} {:>10} {:>12} {:>8} {:>8} {:>9} {:>10}  fio verify (crc32c)\n{}{}  ratio raidcore/nbdkit IOPS {ratio:.2} (target {TARGET_RATIO}: {})\n",
            names.len(),
            "",
            "IOPS total",
            "slowest job",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "cpu us/req",
            row("raidcore", o, ours.exit_ok, our_cpu_us),
            row("nbdkit memory", t, theirs.exit_ok, their_cpu_us),
            if ratio >= TARGET_RATIO {
                "met"
            } else {
                "not met"
            }
        ));
    }
    let mut failed = Vec::new();
    for (label, run) in [("raidcore", &ours), ("nbdkit", &theirs)] {
        if run.summary.errors > 0 || !run.exit_ok {
            failed.push(format!("{label}: {}", run.diagnostics));
        }
    }
    if !failed.is_empty() {
        return Err(Failure::Verify(format!(
            "fio reported errors: {}",
            failed.join("; ")
        )));
    }
    Ok(())
}
