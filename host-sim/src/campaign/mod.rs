//! # The deterministic fault campaign
//!
//! Each seed builds a pool of a random shape ([`Shape`]: RAID-0/1/10/5/6, 2–10 members, 0–2 hot
//! spares, 512 B or 4 KiB member blocks, 4–64 KiB strips, extents of 1–32 blocks, compression on
//! or off, small sparse memory disks with a volatile write cache), runs a random history of
//! client operations, background work and faults against it ([`Step`]), and checks every step
//! against a reference model of what each LBA must (or may) contain:
//!
//! - every read returns exactly the model's data; after a power cut, a block written since the
//!   last completed flush may read its flushed version or any version written since, nothing
//!   else; every flushed (or FUA) write survives every power cut;
//! - within the level's tolerance nothing fails: no read, write, flush, trim, LUN change,
//!   maintenance or import error, no lost LBA ranges, health never `faulted`, health `degraded`
//!   exactly when a member is out of sync, no member failed without a fault that could fail it,
//!   no good disk refused at import, a scrub of a pool free of silent damage repairs nothing;
//! - counters agree with what was acknowledged;
//! - bad requests get their typed error;
//! - nothing panics (each step runs under `catch_unwind`; a panic is a failure with the seed).
//!
//! Faults: member failures (by the device or by hand), returns of failed devices (which the
//! pool must never trust again: refused as stale at import), replacement disks and hot spares,
//! latent sector errors (some sticky), bit rot, lost and misdirected writes, transient errors,
//! power cuts between operations and in the middle of them (after a chosen number of member
//! writes; each member's volatile cache then keeps, drops or tears each unflushed write),
//! imports in shuffled order with an old, replaced disk sometimes offered back, an older copy
//! of a member's image put back in its place (which import must resync, or it counts as
//! stale content until a scrub), rebuilds and scrubs interrupted by all of these. Faults are kept within what the level survives at each
//! moment (see [`exec`]); about 6 % of seeds exceed it once on purpose, after which reads may
//! fail but must never return other data (counted separately in the [`Summary`]).
//!
//! The exact-loss oracle: in about 30 % of seeds, once the pool is quiet (nothing damaged,
//! rebuilding or armed), a local fault past one row's tolerance strikes ([`Step::Local`]):
//! latent sector errors on one member block row of one more member than the level survives,
//! under live extents (in half of them on one member, the others failed by hand: a survivor
//! of a degraded stripe). The model works out which blocks no copy or reconstruction recovers
//! (those whose extent items have bytes in that row's data strips); exactly those may read as
//! errors, every other block must read exactly, nothing else may go on the pool's loss list,
//! the pool must stay online and no member may be failed. No other fault follows in the seed;
//! power cuts do.
//!
//! Slow disks are not simulated: the core is synchronous, has no clock of its own and no
//! timeouts, so a slow member changes no result; virtual time is advanced by [`Step::Tick`].
//!
//! On failure the seed is printed with a command that replays it
//! ([`replay_command`]); with `shrink`, the failing history is cut down to a short one that
//! still fails the same way ([`shrink`]), printed one step per line ([`History`]), which
//! [`replay`] (and a reproducer test) runs again.
//!
//! With feature `mutate`, [`CampaignOptions::mutate`] switches on one of the core's deliberate
//! bugs (`raidcore::mutate`), to check that the campaign catches it.

mod disk;
mod exec;
mod model;
mod shape;
mod shrink;
pub mod source;
mod step;

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub use disk::CampDisk;
pub use exec::CampPool;
pub use model::{Model, Verdict, Version, content};
pub use shape::{CAMPAIGN_DISKS, CAMPAIGN_LUNS, CAMPAIGN_PAGES, CAMPAIGN_STREAMS, Shape};
pub use shrink::shrink;
pub use source::Source;
pub use step::Step;

use exec::Sim;
use step::Generator;

/// Client operations (steps) per seed when not told otherwise.
pub const DEFAULT_OPS: u32 = 200;

/// Most steps a fuzz input drives ([`run_bytes`]).
pub const FUZZ_MAX_OPS: u32 = 64;

/// A deliberate bug of the core (feature `mutate`) the campaign must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MutationKind {
    /// A reconstruction flips one byte of what it returns.
    ReconFlip,
    /// A flush returns before the data is durable.
    EarlyFlush,
    /// A rebuild skips a stripe.
    RebuildSkip,
    /// A lost extent's blocks are listed lost even where they were rewritten since.
    LossOverDeclared,
}

impl MutationKind {
    /// Every mutation.
    pub const ALL: [MutationKind; 4] = [
        MutationKind::ReconFlip,
        MutationKind::EarlyFlush,
        MutationKind::RebuildSkip,
        MutationKind::LossOverDeclared,
    ];

    /// Command-line name (`recon-flip`, `early-flush`, `rebuild-skip`, `loss-over-declared`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            MutationKind::ReconFlip => "recon-flip",
            MutationKind::EarlyFlush => "early-flush",
            MutationKind::RebuildSkip => "rebuild-skip",
            MutationKind::LossOverDeclared => "loss-over-declared",
        }
    }
}

impl std::str::FromStr for MutationKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        MutationKind::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown mutation {s:?} (recon-flip, early-flush, rebuild-skip or \
                     loss-over-declared)"
                )
            })
    }
}

impl fmt::Display for MutationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`run`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CampaignOptions {
    /// Seeds to run.
    pub seeds: u64,
    /// First seed.
    pub from: u64,
    /// Steps per seed (client operations, faults, background work; LUN setup not counted).
    pub ops: u32,
    /// Deliberate core bug to switch on (needs feature `mutate`).
    pub mutate: Option<MutationKind>,
    /// Shrink each failing history.
    pub shrink: bool,
    /// Threads running seeds (results do not depend on it).
    pub jobs: usize,
    /// Stop starting new seeds after this many failures (`None`: run them all).
    pub max_failures: Option<usize>,
    /// Run exactly these seeds instead of `from..from + seeds` (when not empty).
    pub seed_list: Vec<u64>,
}

impl Default for CampaignOptions {
    fn default() -> Self {
        CampaignOptions {
            seeds: 100,
            from: 0,
            ops: DEFAULT_OPS,
            mutate: None,
            shrink: false,
            jobs: 1,
            max_failures: None,
            seed_list: Vec::new(),
        }
    }
}

/// Why [`run`] could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CampaignError {
    /// A mutation was asked for in a build without feature `mutate`.
    MutateUnsupported,
}

impl fmt::Display for CampaignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CampaignError::MutateUnsupported => f.write_str(
                "mutations need a build with feature `mutate` \
                 (cargo run -p raidcore-sim --features mutate -- sim --mutate …)",
            ),
        }
    }
}

impl std::error::Error for CampaignError {}

/// What kind of check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum FailureKind {
    /// A read returned data the model does not allow (other data, or a lost flushed write).
    WrongData,
    /// A read failed although the faults were within the level's tolerance.
    ReadError,
    /// A write, flush, trim, LUN change or maintenance call failed within tolerance.
    OpError,
    /// A bad request got the wrong answer.
    WrongError,
    /// Import failed within tolerance.
    ImportFailed,
    /// Import refused a disk that was a good member.
    DiskRefused,
    /// Health or member states disagree with the faults injected.
    Health,
    /// A scrub of a pool without silent damage repaired something.
    ScrubDirty,
    /// Counters disagree with what was acknowledged.
    Counters,
    /// Something panicked.
    Panic,
    /// One step issued more member I/Os than any step needs (a livelock in the core).
    Hang,
    /// The pool could not be created (a campaign bug).
    Setup,
}

impl FailureKind {
    /// Short name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            FailureKind::WrongData => "wrong data",
            FailureKind::ReadError => "read error within tolerance",
            FailureKind::OpError => "operation error within tolerance",
            FailureKind::WrongError => "wrong error for a bad request",
            FailureKind::ImportFailed => "import failed",
            FailureKind::DiskRefused => "good disk refused",
            FailureKind::Health => "health inconsistent",
            FailureKind::ScrubDirty => "scrub repaired a clean pool",
            FailureKind::Counters => "counters inconsistent",
            FailureKind::Panic => "panic",
            FailureKind::Hang => "hang (livelock)",
            FailureKind::Setup => "setup",
        }
    }
}

/// One failed check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Failure {
    /// Kind.
    pub kind: FailureKind,
    /// Step index: 0 setup, 1..=n the history's steps, n + 1 the final checks.
    pub step: usize,
    /// What was seen.
    pub what: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at step {}: {}",
            self.kind.name(),
            self.step,
            self.what
        )
    }
}

/// Counters of one seed (summed in [`Summary`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SeedStats {
    /// Steps executed.
    pub steps: u64,
    /// Client writes issued.
    pub writes: u64,
    /// Client reads issued (verification passes included).
    pub reads: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Bytes of acknowledged client writes.
    pub bytes_written: u64,
    /// Bytes read back and found equal to the model.
    pub bytes_verified: u64,
    /// Full verification passes.
    pub verify_passes: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Faults skipped because the pool could not have survived them at that moment.
    pub faults_skipped: u64,
    /// Power cuts (between and during operations).
    pub power_cuts: u64,
    /// Cuts armed to strike in the middle of a later operation.
    pub cuts_armed: u64,
    /// Imports.
    pub imports: u64,
    /// Old disks offered back at an import.
    pub stale_disks_offered: u64,
    /// Disks an import refused (all of them stale, failed or unreadable).
    pub disks_refused: u64,
    /// Rebuilds started.
    pub rebuilds_started: u64,
    /// Rebuilds completed.
    pub rebuilds_done: u64,
    /// Failed members brought back (`Pool::online`) and resynced.
    pub onlined: u64,
    /// Older copies of images put back that import resynced as behind.
    pub behind_resynced: u64,
    /// Stripes rebuilt.
    pub rebuilt_stripes: u64,
    /// Scrubs started.
    pub scrubs_started: u64,
    /// Scrubs completed.
    pub scrubs_done: u64,
    /// Stripes scrubbed.
    pub scrubbed_stripes: u64,
    /// Writes refused for lack of space.
    pub no_space: u64,
    /// Bad requests checked.
    pub invalid_requests: u64,
    /// The seed exceeded the level's tolerance on purpose.
    pub over: bool,
    /// Over tolerance: reads that failed with an error (the right answer for lost data).
    pub over_read_errors: u64,
    /// Over tolerance: blocks read back correct.
    pub over_reads_ok: u64,
    /// Over tolerance: imports refused.
    pub over_import_refused: u64,
    /// Local faults past one row's tolerance injected ([`Step::Local`]).
    pub local_faults: u64,
    /// Of those, faults whose row held a copy of a map page or table.
    pub local_metadata: u64,
    /// Blocks those faults destroyed, as the model works it out.
    pub local_lost_blocks: u64,
    /// Reads of such blocks that failed with an error (the rest read correct from RAM).
    pub local_read_errors: u64,
}

impl SeedStats {
    fn add(&mut self, o: &SeedStats) {
        self.steps += o.steps;
        self.writes += o.writes;
        self.reads += o.reads;
        self.flushes += o.flushes;
        self.bytes_written += o.bytes_written;
        self.bytes_verified += o.bytes_verified;
        self.verify_passes += o.verify_passes;
        for (k, v) in &o.faults {
            *self.faults.entry(k).or_default() += v;
        }
        self.faults_skipped += o.faults_skipped;
        self.power_cuts += o.power_cuts;
        self.cuts_armed += o.cuts_armed;
        self.imports += o.imports;
        self.stale_disks_offered += o.stale_disks_offered;
        self.disks_refused += o.disks_refused;
        self.rebuilds_started += o.rebuilds_started;
        self.rebuilds_done += o.rebuilds_done;
        self.onlined += o.onlined;
        self.behind_resynced += o.behind_resynced;
        self.rebuilt_stripes += o.rebuilt_stripes;
        self.scrubs_started += o.scrubs_started;
        self.scrubs_done += o.scrubs_done;
        self.scrubbed_stripes += o.scrubbed_stripes;
        self.no_space += o.no_space;
        self.invalid_requests += o.invalid_requests;
        self.over_read_errors += o.over_read_errors;
        self.over_reads_ok += o.over_reads_ok;
        self.over_import_refused += o.over_import_refused;
        self.local_faults += o.local_faults;
        self.local_metadata += o.local_metadata;
        self.local_lost_blocks += o.local_lost_blocks;
        self.local_read_errors += o.local_read_errors;
    }
}

/// A pool shape and the steps run on it: everything a seed's run depends on. Its text form is
/// the shape line followed by one step per line (`#` lines are comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    /// The pool.
    pub shape: Shape,
    /// The steps.
    pub steps: Vec<Step>,
}

impl fmt::Display for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.shape.to_line())?;
        for s in &self.steps {
            writeln!(f, "{s}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for History {
    type Err = String;
    fn from_str(text: &str) -> Result<History, String> {
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        let shape = Shape::parse(lines.next().ok_or("empty history")?)?;
        let steps = lines.map(str::parse).collect::<Result<Vec<Step>, _>>()?;
        Ok(History { shape, steps })
    }
}

/// The result of one seed (or one replayed history).
#[derive(Debug, Clone)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// What ran (with the generated steps).
    pub history: History,
    /// Counters.
    pub stats: SeedStats,
    /// The first failed check, if any.
    pub failure: Option<Failure>,
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string())
}

/// Runs `f` on the simulation, turning a panic into a failure at the current step.
fn guarded(sim: &mut Sim, f: impl FnOnce(&mut Sim) -> Result<(), Failure>) -> Result<(), Failure> {
    let step = sim.step;
    match catch_unwind(AssertUnwindSafe(|| f(sim))) {
        Ok(r) => r,
        Err(p) => {
            let what = panic_text(&*p);
            Err(Failure {
                kind: if what.starts_with(disk::WATCHDOG) {
                    FailureKind::Hang
                } else {
                    FailureKind::Panic
                },
                step: step + 1,
                what,
            })
        }
    }
}

fn new_sim(shape: Shape) -> Result<Sim, Failure> {
    match catch_unwind(|| Sim::new(shape)) {
        Ok(r) => r,
        Err(p) => Err(Failure {
            kind: FailureKind::Panic,
            step: 0,
            what: panic_text(&*p),
        }),
    }
}

/// Draws and runs a history from `src` (steps are drawn as the run goes, seeing the pool).
fn run_source(seed: u64, ops: u32, src: &mut Source<'_>, small: bool) -> SeedOutcome {
    let shape = Shape::generate(seed, src, small);
    let mut history = History {
        shape,
        steps: Vec::new(),
    };
    let mut sim = match new_sim(shape) {
        Ok(s) => s,
        Err(f) => {
            return SeedOutcome {
                seed,
                history,
                stats: SeedStats::default(),
                failure: Some(f),
            };
        }
    };
    let mut gen_ = Generator::new(src, ops);
    if matches!(src, Source::Rng(_)) {
        gen_.plan_local(&mut Source::seeded(seed ^ 0x6c6f_6361_6c5f_6c6f), ops);
    }
    let mut failure = None;
    for step in Generator::initial_luns(src, sim.usable_blocks()) {
        history.steps.push(step);
        if let Err(f) = guarded(&mut sim, |s| s.exec(step)) {
            failure = Some(f);
            break;
        }
    }
    if failure.is_none() {
        for _ in 0..ops {
            if src.exhausted() || sim.dead() {
                break;
            }
            let mut v = sim.view();
            if gen_.local_due() && !v.local {
                v.quiet = sim.quiet();
            }
            let step = gen_.next(src, &v);
            history.steps.push(step);
            if let Err(f) = guarded(&mut sim, |s| s.exec(step)) {
                failure = Some(f);
                break;
            }
        }
    }
    if failure.is_none()
        && let Err(f) = guarded(&mut sim, Sim::epilogue)
    {
        failure = Some(f);
    }
    SeedOutcome {
        seed,
        history,
        stats: sim.stats.clone(),
        failure,
    }
}

/// Runs one seed of `ops` steps.
#[must_use]
pub fn run_seed(seed: u64, ops: u32) -> SeedOutcome {
    let mut src = Source::seeded(seed);
    run_source(seed, ops, &mut src, false)
}

/// Runs a history again, exactly (the shrinker's and reproducer tests' entry point).
#[must_use]
pub fn replay(h: &History) -> SeedOutcome {
    let seed = h.shape.seed;
    let mut out = SeedOutcome {
        seed,
        history: h.clone(),
        stats: SeedStats::default(),
        failure: None,
    };
    let mut sim = match new_sim(h.shape) {
        Ok(s) => s,
        Err(f) => {
            out.failure = Some(f);
            return out;
        }
    };
    for &step in &h.steps {
        if let Err(f) = guarded(&mut sim, |s| s.exec(step)) {
            out.failure = Some(f);
            out.stats = sim.stats.clone();
            return out;
        }
    }
    if let Err(f) = guarded(&mut sim, Sim::epilogue) {
        out.failure = Some(f);
    }
    out.stats = sim.stats.clone();
    out
}

/// The fuzz body of `volume_ops`: `data` chooses a small pool shape and up to
/// [`FUZZ_MAX_OPS`] steps (operations and faults, drawn with the input as the choice source),
/// which run with every campaign check. Panics propagate (the fuzzer reports them).
///
/// Errors: the first failed check, with the history that produced it.
///
/// # Panics
/// When a step panics (re-raised with the history).
pub fn run_bytes(data: &[u8]) -> Result<SeedStats, String> {
    let mut src = Source::bytes(data);
    let seed = src.below(1 << 32);
    let out = run_source(seed, FUZZ_MAX_OPS, &mut src, true);
    match out.failure {
        None => Ok(out.stats),
        Some(Failure {
            kind: FailureKind::Panic,
            what,
            ..
        }) => panic!("{what}\nhistory:\n{}", out.history),
        Some(f) => Err(format!("{f}\nhistory:\n{}", out.history)),
    }
}

/// The command line that replays seed `seed`.
#[must_use]
pub fn replay_command(seed: u64, ops: u32, mutate: Option<MutationKind>) -> String {
    let m = mutate.map_or_else(String::new, |m| format!(" --mutate {m}"));
    let features = if mutate.is_some() {
        " --features mutate"
    } else {
        ""
    };
    format!(
        "cargo run --release -p raidcore-sim{features} -- sim --seeds 1 --from {seed} --ops {ops}{m}"
    )
}

/// A failed seed in a [`Summary`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct FailureReport {
    /// The seed.
    pub seed: u64,
    /// Steps per seed it ran with.
    pub ops: u32,
    /// The pool shape (one line).
    pub shape: String,
    /// The failed check.
    pub failure: Failure,
    /// The step that failed (text), if it was a history step.
    pub step: Option<String>,
    /// Command that replays it.
    pub replay: String,
    /// The shrunk history (text) and its failure, with `shrink`.
    pub shrunk: Option<(String, Failure)>,
    /// Steps in the shrunk history.
    pub shrunk_steps: Option<usize>,
}

/// What a campaign did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    /// First seed.
    pub from: u64,
    /// Steps per seed.
    pub ops: u32,
    /// Mutation switched on.
    pub mutate: Option<MutationKind>,
    /// Seeds run.
    pub seeds_run: u64,
    /// Seeds that passed.
    pub seeds_passed: u64,
    /// Seeds by RAID level.
    pub levels: BTreeMap<&'static str, u64>,
    /// Seeds that exceeded the tolerance on purpose.
    pub over_tolerance_seeds: u64,
    /// Seeds with a local fault past one row's tolerance (the exact-loss oracle).
    pub local_fault_seeds: u64,
    /// Counters over every seed.
    pub totals: SeedStats,
    /// Failed seeds, by seed.
    pub failures: Vec<FailureReport>,
}

impl Summary {
    /// True when every seed passed.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// As JSON.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Human-readable report.
    #[must_use]
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let t = &self.totals;
        let mut s = String::new();
        let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
        let _ = writeln!(
            s,
            "fault campaign: {} seeds from {} ({} steps each){}: {} passed, {} failed",
            self.seeds_run,
            self.from,
            self.ops,
            self.mutate
                .map_or_else(String::new, |m| format!(", mutation {m}")),
            self.seeds_passed,
            self.failures.len()
        );
        let levels: Vec<String> = self
            .levels
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(s, "  levels: {}", levels.join(", "));
        let _ = writeln!(
            s,
            "  operations {}: {} writes ({:.1} MiB acknowledged), {} reads, {} flushes, {} bad requests",
            t.steps,
            t.writes,
            mib(t.bytes_written),
            t.reads,
            t.flushes,
            t.invalid_requests
        );
        let faults: Vec<String> = t.faults.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(
            s,
            "  faults injected: {} ({} skipped: beyond tolerance at that moment)",
            faults.join(", "),
            t.faults_skipped
        );
        let _ = writeln!(
            s,
            "  power cuts {} ({} armed mid-operation), imports {}, old disks offered back {}, \
             disks refused {}",
            t.power_cuts, t.cuts_armed, t.imports, t.stale_disks_offered, t.disks_refused
        );
        let _ = writeln!(
            s,
            "  rebuilds {} started, {} completed ({} stripes), members brought back {}, older \
             copies resynced {}; scrubs {} started, {} completed ({} stripes); writes refused \
             for space {}",
            t.rebuilds_started,
            t.rebuilds_done,
            t.rebuilt_stripes,
            t.onlined,
            t.behind_resynced,
            t.scrubs_started,
            t.scrubs_done,
            t.scrubbed_stripes,
            t.no_space
        );
        let _ = writeln!(
            s,
            "  verified {:.1} MiB ({} full passes)",
            mib(t.bytes_verified),
            t.verify_passes
        );
        let _ = writeln!(
            s,
            "  beyond tolerance on purpose: {} seeds; reads refused with an error {}, blocks \
             still read correct {}, imports refused {}",
            self.over_tolerance_seeds, t.over_read_errors, t.over_reads_ok, t.over_import_refused
        );
        let _ = writeln!(
            s,
            "  local faults past a row's tolerance (exact-loss oracle): {} in {} seeds ({} on a \
             copy of a map page or table); {} blocks lost as the model works it out, {} reads \
             of them refused with an error, every other block read exactly",
            t.local_faults,
            self.local_fault_seeds,
            t.local_metadata,
            t.local_lost_blocks,
            t.local_read_errors
        );
        self.render_failures(&mut s);
        s
    }

    /// The failures part of [`Self::render`]: each seed, its step, shape, replay command and
    /// shrunk history.
    fn render_failures(&self, s: &mut String) {
        use std::fmt::Write as _;
        for f in &self.failures {
            let _ = writeln!(s, "FAIL seed {}: {}", f.seed, f.failure);
            if let Some(step) = &f.step {
                let _ = writeln!(s, "  failing step: {step}");
            }
            let _ = writeln!(s, "  {}", f.shape);
            let _ = writeln!(s, "  replay: {}", f.replay);
            if let Some((h, fl)) = &f.shrunk {
                let _ = writeln!(
                    s,
                    "  shrunk to {} steps, still failing: {fl}",
                    f.shrunk_steps.unwrap_or(0)
                );
                for line in h.lines() {
                    let _ = writeln!(s, "    {line}");
                }
            }
        }
    }
}

/// Serialises campaigns in one process: a mutation is a process-wide switch.
static RUN_LOCK: Mutex<()> = Mutex::new(());

/// Switches a mutation on for the life of the guard.
struct MutationGuard;

impl MutationGuard {
    #[cfg_attr(feature = "mutate", allow(clippy::unnecessary_wraps))] // fails only without it
    fn set(m: Option<MutationKind>) -> Result<Self, CampaignError> {
        #[cfg(feature = "mutate")]
        {
            use raidcore::mutate::{Mutation, set};
            set(match m {
                None => Mutation::None,
                Some(MutationKind::ReconFlip) => Mutation::ReconFlip,
                Some(MutationKind::EarlyFlush) => Mutation::EarlyFlush,
                Some(MutationKind::RebuildSkip) => Mutation::RebuildSkip,
                Some(MutationKind::LossOverDeclared) => Mutation::LossOverDeclared,
            });
            Ok(MutationGuard)
        }
        #[cfg(not(feature = "mutate"))]
        {
            if m.is_some() {
                return Err(CampaignError::MutateUnsupported);
            }
            Ok(MutationGuard)
        }
    }
}

impl Drop for MutationGuard {
    fn drop(&mut self) {
        #[cfg(feature = "mutate")]
        raidcore::mutate::set(raidcore::mutate::Mutation::None);
    }
}

/// Runs a campaign (see the module docs).
///
/// Errors: [`CampaignError::MutateUnsupported`] when a mutation is asked for without feature
/// `mutate`.
pub fn run(opts: &CampaignOptions) -> Result<Summary, CampaignError> {
    run_with_progress(opts, &|_| {})
}

/// [`run`], calling `progress` after each seed (from the thread that ran it).
///
/// Errors: as [`run`].
pub fn run_with_progress(
    opts: &CampaignOptions,
    progress: &(dyn Fn(&SeedOutcome) + Sync),
) -> Result<Summary, CampaignError> {
    let _lock = RUN_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let _m = MutationGuard::set(opts.mutate)?;
    let next = AtomicU64::new(0);
    let failed = AtomicUsize::new(0);
    let results: Mutex<Vec<SeedOutcome>> = Mutex::new(Vec::new());
    let jobs = opts.jobs.max(1);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    if opts
                        .max_failures
                        .is_some_and(|m| failed.load(Ordering::SeqCst) >= m)
                    {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let seed = if opts.seed_list.is_empty() {
                        if i >= opts.seeds {
                            break;
                        }
                        opts.from.wrapping_add(i)
                    } else {
                        match opts.seed_list.get(i as usize) {
                            Some(&s) => s,
                            None => break,
                        }
                    };
                    let out = run_seed(seed, opts.ops);
                    if out.failure.is_some() {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                    progress(&out);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(out);
                }
            });
        }
    });
    let mut results = results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    results.sort_by_key(|o| o.seed);
    let mut sum = Summary {
        from: opts.from,
        ops: opts.ops,
        mutate: opts.mutate,
        ..Summary::default()
    };
    for out in results {
        sum.seeds_run += 1;
        *sum.levels
            .entry(out.history.shape.level.name())
            .or_default() += 1;
        if out.stats.over {
            sum.over_tolerance_seeds += 1;
        }
        if out.stats.local_faults > 0 {
            sum.local_fault_seeds += 1;
        }
        sum.totals.add(&out.stats);
        let Some(f) = out.failure else {
            sum.seeds_passed += 1;
            continue;
        };
        let step = f
            .step
            .checked_sub(1)
            .and_then(|i| out.history.steps.get(i))
            .map(ToString::to_string);
        let shrunk = opts.shrink.then(|| {
            let (h, fl) = shrink(&out.history, &f);
            (h.steps.len(), (h.to_string(), fl))
        });
        sum.failures.push(FailureReport {
            seed: out.seed,
            ops: opts.ops,
            shape: out.history.shape.to_line(),
            failure: f,
            step,
            replay: replay_command(out.seed, opts.ops, opts.mutate),
            shrunk_steps: shrunk.as_ref().map(|s| s.0),
            shrunk: shrunk.map(|s| s.1),
        });
    }
    Ok(sum)
}
