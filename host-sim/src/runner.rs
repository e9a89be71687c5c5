//! The workload runner: client streams against a pool in virtual time, one thread,
//! deterministic.
//!
//! ## How time works
//! The pool is single-threaded and its calls block; each member's device model keeps its own
//! timeline ([`crate::model::TimedDisk`] never moves the clock). The runner keeps the virtual
//! clock and an event list: each stream's next issue time (queue depth 1; closed loop unless
//! open, below), a scheduled disk failure, and background maintenance. It always takes the
//! earliest event (ties: failure, then maintenance, then streams by index).
//!
//! Open loop ([`WorkloadSpec::rate_per_stream`]): each stream's requests arrive on a fixed
//! schedule from its start; a request is issued at its arrival or when its stream's previous
//! one completes, whichever is later, and its latency counts from its arrival, so a pool that
//! falls behind the rate shows it as latency (queueing in the client), not as fewer requests
//! asked. Think time (`Op::Idle`) moves the schedule: the next request is due that long
//! after the one before was due (at once if the stream is that far behind).
//!
//! A client request at time `t` first waits for the controller CPU (one core, modelled as a
//! timeline: `cpu_ns_per_request + blocks × cpu_ns_per_block` per request), then the clock is
//! set to the end of that CPU work, the [`crate::clock::IoTracker`] is reset and the request is issued to the
//! pool. It completes at `max(CPU done, latest completion of the device operations it caused)`.
//! A buffered write thus completes after its CPU cost alone, until it fills a stripe (or a
//! flush comes) and the stream waits for the members — the write-back cache of a real array.
//! Backpressure is real: a stripe write submitted to members whose timelines are still busy
//! starts when they are free.
//!
//! ## Rebuild rule
//! After the failure, a maintenance event polls every 10 ms until the pool has started a
//! rebuild (it notices the dead member at its next I/O to it and takes the hot spare). Then
//! each maintenance event calls [`raidcore::pool::Pool::maintenance`] once (at most
//! `stripes_per_step` stripes) and measures how long that kept the members busy (`d`, from the
//! tracker); the next one comes `d × 1000 / rebuild_share_permille` later. So the rebuild gets
//! about `rebuild_share_permille / 1000` of the device time and clients the rest (they also
//! queue behind its I/O). `d` includes the time the step's I/O waited behind client requests
//! queued on the members, so on loaded disks the rebuild gets far less than its share.
//!
//! With [`RunConfig::engine_paced`] the pool paces instead: the next step comes when
//! [`raidcore::pool::Pool::maintenance_due`] says (the floor of its policy while clients are
//! active, the ceiling when they are idle), and never before the last step's I/O completed.
//!
//! ## End of the run
//! The run lasts `duration_ns` of virtual time after the start (after any pre-fill). If a
//! rebuild is still going then, the run goes on until it is done and then a quarter of the
//! duration more (for an "after" figure), at most ten times the duration in all.
//!
//! ## Verification
//! The runner keeps the block id written to each LBA (ids regenerate content, see
//! [`DataSource`]), checks every read during the run against it, and after the run (rebuild
//! finished) reads every block of every LUN back through the pool and compares.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use raidcore::pool::{MaintenanceReport, Stats};

use crate::clock::{NS_PER_MS, NS_PER_S};
use crate::fault::Fault;
use crate::pooldir::DirPool;
use crate::workload::data::{BLOCK, DataSource};
use crate::workload::{Op, Stream, WorkloadSpec};

/// How often the runner looks whether the pool has noticed the failure, in nanoseconds.
const POLL_NS: u64 = 10 * NS_PER_MS;
/// Content id of a block never written (or trimmed): it reads as zeros.
const ZEROS: u64 = u64::MAX;
/// Content id of a block whose last write failed: old or new content are both right.
const UNKNOWN: u64 = u64::MAX - 1;

/// A member failure during the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailPlan {
    /// When, in nanoseconds after the start of the measured run.
    pub at_ns: u64,
    /// Member slot that dies (its image stops answering, as a pulled drive).
    pub slot: usize,
    /// The pool's log device dies instead of member `slot` (nothing to rebuild: the intent
    /// log goes back to the members).
    pub log_device: bool,
}

/// How to run a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunConfig {
    /// Virtual length of the measured run, in nanoseconds.
    pub duration_ns: u64,
    /// A member failure, if any.
    pub fail: Option<FailPlan>,
    /// Share of device time the rebuild gets, in thousandths (1–1000), when the runner paces
    /// it.
    pub rebuild_share_permille: u32,
    /// The pool paces its rebuild ([`raidcore::pool::PoolConfig::background`]): each step is
    /// made when [`raidcore::pool::Pool::maintenance_due`] says, not by the share.
    pub engine_paced: bool,
    /// Controller CPU time per request, in nanoseconds.
    pub cpu_ns_per_request: u64,
    /// Controller CPU time per 4 KiB block moved, in nanoseconds.
    pub cpu_ns_per_block: u64,
    /// Every write is FUA (write-through): durable before it completes.
    pub write_through: bool,
    /// Each stream flushes this often (virtual nanoseconds), if set.
    pub flush_interval_ns: Option<u64>,
    /// Width of one timeline bucket, in nanoseconds.
    pub bucket_ns: u64,
    /// Seed of the streams (and of the start jitter).
    pub seed: u64,
    /// After the run, scrub the pool and count blocks it had to repair.
    pub scrub_after: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration_ns: 5 * NS_PER_S,
            fail: None,
            rebuild_share_permille: 500,
            engine_paced: false,
            cpu_ns_per_request: 10_000,
            cpu_ns_per_block: 10_000,
            write_through: false,
            flush_interval_ns: Some(NS_PER_S),
            bucket_ns: 100 * NS_PER_MS,
            seed: 1,
            scrub_after: true,
        }
    }
}

/// Counters of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamCounters {
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Transactions committed: flushes the workload asked for ([`Op::Flush`]), each ending
    /// the requests issued since the one before.
    pub commits: u64,
    /// Bytes read and written.
    pub bytes: u64,
    /// What the stream does ([`Stream::role`]).
    pub role: &'static str,
}

impl StreamCounters {
    /// Reads and writes (flushes are not I/Os of their own in IOPS figures).
    #[must_use]
    pub const fn ops(&self) -> u64 {
        self.reads + self.writes
    }
}

/// One timeline bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bucket {
    /// Reads and writes completed in the bucket.
    pub ops: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Sum of their latencies, in nanoseconds.
    pub latency_sum_ns: u64,
    /// Largest latency, in nanoseconds.
    pub latency_max_ns: u64,
}

/// One role's streams together (`sql`, `vdi desktop`, `file share`, …), for reports per
/// workload.
#[derive(Debug, Clone)]
pub struct RoleResult {
    /// The role ([`Stream::role`]).
    pub role: &'static str,
    /// The LUN of its first stream.
    pub lun: u16,
    /// Its streams.
    pub streams: usize,
    /// Reads and writes completed.
    pub ops: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Latency of its reads and writes, in nanoseconds.
    pub latency: Histogram<u64>,
    /// Transactions committed ([`StreamCounters::commits`]).
    pub commits: u64,
    /// From a transaction's first request to its commit's completion, in nanoseconds.
    pub commit_latency: Histogram<u64>,
    /// Bytes completed before the failure, during the rebuild, after it.
    pub phase_bytes: [u64; 3],
    /// Reads and writes completed in each phase.
    pub phase_ops: [u64; 3],
    /// Reads and writes completed within the asked run length ([`RunConfig::duration_ns`]
    /// from the start): the window two runs of one workload share, whether or not a rebuild
    /// made one of them longer.
    pub window_ops: u64,
    /// Their bytes.
    pub window_bytes: u64,
    /// Transactions committed within that window.
    pub window_commits: u64,
    /// Blocks of its LUN that read wrong or not at all when every block was read back after
    /// the run (its LUN is shared if other roles use it too).
    pub blocks_lost: u64,
}

/// What a run measured. Times are virtual nanoseconds after the start of the measured run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Length of the measured run (longer than asked if a rebuild ran over).
    pub duration_ns: u64,
    /// The length asked ([`RunConfig::duration_ns`]).
    pub asked_ns: u64,
    /// Per stream.
    pub streams: Vec<StreamCounters>,
    /// Per role, in the order of each role's first stream.
    pub roles: Vec<RoleResult>,
    /// Latency of reads and writes, in nanoseconds.
    pub latency: Histogram<u64>,
    /// Latency of flushes, in nanoseconds.
    pub flush_latency: Histogram<u64>,
    /// Timeline, `bucket_ns` wide buckets by completion time.
    pub timeline: Vec<Bucket>,
    /// Bucket width, in nanoseconds.
    pub bucket_ns: u64,
    /// When the member (or the log device) failed.
    pub fail_ns: Option<u64>,
    /// The slot that failed (none when the log device did).
    pub fail_slot: Option<usize>,
    /// When the pool started the rebuild (took the spare).
    pub rebuild_start_ns: Option<u64>,
    /// When the rebuild finished, if within the run.
    pub rebuild_done_ns: Option<u64>,
    /// Stripes rebuilt.
    pub rebuild_stripes: u64,
    /// Bytes the rebuild wrote (to the spare).
    pub rebuild_bytes_written: u64,
    /// Bytes read from members during the rebuild window beyond what clients read: an estimate
    /// of what the rebuild read (member reads minus client reads in that window).
    pub rebuild_bytes_read: u64,
    /// Client bytes completed before the failure, during the rebuild, after it.
    pub phase_bytes: [u64; 3],
    /// Lengths of those phases, in nanoseconds.
    pub phase_ns: [u64; 3],
    /// Latency of the reads and writes completed in each phase, in nanoseconds.
    pub phase_latency: [Histogram<u64>; 3],
    /// The open loop's rate, requests per virtual second per stream (`None`: closed loop).
    pub rate_per_stream: Option<u32>,
    /// Pool counters over the measured run (differences).
    pub write_amplification: f64,
    /// LZ4 ratio over the run's extents (raw / stored bytes).
    pub compression_ratio: f64,
    /// Client bytes written in the run.
    pub client_bytes_written: u64,
    /// Bytes written to members for client data (data, parity, intent log, labels): the
    /// numerator of the write amplification.
    pub member_bytes_written: u64,
    /// Blocks read back and compared after the run.
    pub verified_blocks: u64,
    /// Blocks of those that had been written (the rest must read as zeros).
    pub verified_written_blocks: u64,
    /// Reads (during or after the run) that returned wrong data or an error.
    pub verify_errors: u64,
    /// Blocks the scrub after the run repaired (should be 0).
    pub scrub_repaired_blocks: Option<u64>,
    /// Blocks the scrub after the run could not repair (should be 0).
    pub scrub_unrepairable_blocks: Option<u64>,
    /// Pool errors met during the run (first few, with their time).
    pub errors: Vec<String>,
    /// Pool errors in all.
    pub error_count: u64,
    /// Health at the end of the run (`online`, `degraded`, `faulted`).
    pub final_health: String,
    /// The content id of every block at the end (for verifying again, e.g. after re-import).
    pub oracle: Oracle,
    /// Filled in by callers that close the pool, import it again from its images and verify
    /// every block once more ([`verify_all`]).
    pub reimport: Option<Verification>,
    /// When the run started on the clock (after the pre-fill), in nanoseconds.
    pub start_clock_ns: u64,
}

/// The next thing that happens.
enum Ev {
    Fail(usize),
    Maint,
    Stream(usize),
}

/// A stream's request waiting for the CPU, with the time it was asked.
#[derive(Debug, Clone, Copy)]
enum Pending {
    None,
    Op(Op, u64),
    /// The flush of the runner's timer ([`RunConfig::flush_interval_ns`]).
    Flush(u64),
}

struct StreamState {
    source: Stream,
    next_ns: u64,
    /// Open loop: when the stream's next request arrives.
    next_arrival_ns: u64,
    next_flush_ns: u64,
    pending: Pending,
    counters: StreamCounters,
    /// When the stream's open transaction asked its first request.
    txn_start: Option<u64>,
    latency: Histogram<u64>,
    commit_latency: Histogram<u64>,
}

/// What the runner knows per LUN: the content id of each block (ids regenerate content with
/// [`DataSource::fill`]; two special values stand for "never written" and "last write failed").
#[derive(Debug, Clone, Default)]
pub struct Oracle {
    luns: BTreeMap<u16, Vec<u64>>,
}

/// What reading every block back found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verification {
    /// Blocks read and compared.
    pub blocks: u64,
    /// Of those, blocks that had been written (the others must read as zeros).
    pub written_blocks: u64,
    /// Blocks that read back wrong or failed to read.
    pub errors: u64,
    /// The first few failures.
    pub messages: Vec<String>,
    /// Blocks in `errors` per LUN.
    pub lun_errors: BTreeMap<u16, u64>,
}

/// Reads every block of every LUN the oracle knows through `dp`'s pool and compares it with
/// what was written (content from `data`).
pub fn verify_all(dp: &mut DirPool, oracle: &Oracle, data: &DataSource) -> Verification {
    let mut v = Verification::default();
    let mut buf = vec![0u8; 32 * BLOCK];
    let mut scratch = vec![0u8; BLOCK];
    for (&lun, ids) in &oracle.luns {
        let n = ids.len() as u64;
        let mut lba = 0u64;
        while lba < n {
            let blocks = (n - lba).min(32);
            let len = blocks as usize * BLOCK;
            match dp.pool.read(lun, lba, &mut buf[..len]) {
                Ok(()) => {
                    for (k, b) in buf[..len].chunks_exact(BLOCK).enumerate() {
                        let id = ids[(lba + k as u64) as usize];
                        if !block_ok(data, id, b, &mut scratch) {
                            v.errors += 1;
                            *v.lun_errors.entry(lun).or_default() += 1;
                            if v.messages.len() < 16 {
                                v.messages
                                    .push(format!("LUN {lun} LBA {}: wrong data", lba + k as u64));
                            }
                        }
                        if id != ZEROS {
                            v.written_blocks += 1;
                        }
                    }
                }
                Err(e) => {
                    v.errors += blocks;
                    *v.lun_errors.entry(lun).or_default() += blocks;
                    if v.messages.len() < 16 {
                        v.messages.push(format!("verify read: {e}"));
                    }
                }
            }
            v.blocks += blocks;
            lba += blocks;
        }
    }
    v
}

impl Oracle {
    fn set(&mut self, lun: u16, lba: u64, blocks: u32, id: u64) {
        if let Some(v) = self.luns.get_mut(&lun) {
            for i in 0..u64::from(blocks) {
                if let Some(x) = v.get_mut((lba + i) as usize) {
                    *x = if id >= UNKNOWN { id } else { id + i };
                }
            }
        }
    }

    fn get(&self, lun: u16, lba: u64) -> u64 {
        self.luns
            .get(&lun)
            .and_then(|v| v.get(lba as usize))
            .copied()
            .unwrap_or(ZEROS)
    }
}

/// Whether `got` (one block) is what content id `id` says.
fn block_ok(data: &DataSource, id: u64, got: &[u8], scratch: &mut [u8]) -> bool {
    match id {
        UNKNOWN => true,
        ZEROS => got.iter().all(|&b| b == 0),
        id => {
            data.fill(id, scratch);
            got == scratch
        }
    }
}

fn new_hist() -> Histogram<u64> {
    // 1 ns to 1 hour at 3 significant digits; cannot fail for these bounds.
    Histogram::new_with_bounds(1, 3_600 * NS_PER_S, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

/// Pool counters that make up the write amplification: member bytes for client data.
fn member_bytes(s: &Stats) -> u64 {
    s.member_data_bytes + s.member_redundancy_bytes + s.member_raw_bytes
}

/// Bytes read from all members so far.
fn member_read_bytes(dp: &DirPool) -> u64 {
    dp.members
        .handles
        .iter()
        .flatten()
        .map(|h| h.timing.stats().bytes_read)
        .sum()
}

/// Runs `spec` against the pool of `dp`, content from `data`, as `cfg` says. `progress(done,
/// total)` is called now and then with virtual nanoseconds.
///
/// The pool's LUNs must exist (streams use LUN `i % luns`). Pool errors do not stop the run;
/// they are counted and the first few kept in [`RunResult::errors`].
#[allow(clippy::too_many_lines)]
pub fn run(
    dp: &mut DirPool,
    spec: &WorkloadSpec,
    data: &DataSource,
    cfg: &RunConfig,
    mut progress: impl FnMut(u64, u64),
) -> RunResult {
    let luns: Vec<(u16, u64)> = dp.pool.luns().map(|l| (l.id, l.blocks)).collect();
    let lun_blocks = luns.iter().map(|l| l.1).min().unwrap_or(1);
    let mut oracle = Oracle {
        luns: luns
            .iter()
            .map(|&(id, b)| (id, vec![ZEROS; b as usize]))
            .collect(),
    };
    let mut gens = spec.streams(luns.len(), lun_blocks, cfg.seed);
    for g in &mut gens {
        g.lun = luns.get(usize::from(g.lun)).map_or(0, |l| l.0);
    }
    let mut errors = Vec::new();
    let mut error_count = 0u64;
    let mut note_err = |t: u64, what: &str, e: &dyn std::fmt::Display| {
        error_count += 1;
        if errors.len() < 16 {
            errors.push(format!("t={:.3}s {what}: {e}", t as f64 / 1e9));
        }
    };
    let mut buf = vec![0u8; 32 * BLOCK];
    let mut scratch = vec![0u8; BLOCK];
    let mut verify_errors = 0u64;

    // Pre-fill (untimed figures): every LUN written whole by its first stream, submitted at the
    // current time; the measured run starts when the members are idle again.
    if spec.kind.needs_prefill() {
        let mut done = std::collections::BTreeSet::new();
        for g in &mut gens {
            if !done.insert(g.lun) {
                continue;
            }
            for op in g.prefill_ops() {
                if let Op::Write {
                    lba,
                    blocks,
                    data: id,
                } = op
                {
                    let len = blocks as usize * BLOCK;
                    for (i, b) in buf[..len].chunks_exact_mut(BLOCK).enumerate() {
                        data.fill(id + i as u64, b);
                    }
                    match dp.pool.write(g.lun, lba, &buf[..len], false) {
                        Ok(()) => oracle.set(g.lun, lba, blocks, id),
                        Err(e) => {
                            oracle.set(g.lun, lba, blocks, UNKNOWN);
                            note_err(0, "prefill write", &e);
                        }
                    }
                }
            }
        }
        if let Err(e) = dp.pool.flush() {
            note_err(0, "prefill flush", &e);
        }
    }
    let busy = dp
        .members
        .handles
        .iter()
        .flatten()
        .map(|h| h.timing.busy_until_ns())
        .max()
        .unwrap_or(0);
    let t0 = dp.members.clock.now_ns().max(busy);
    dp.members.clock.advance_to_ns(t0);
    dp.pool.set_time(t0);
    for h in dp.members.handles.iter().flatten() {
        h.timing.reset_stats();
    }
    let stats0 = dp.pool.stats();

    let mut streams: Vec<StreamState> = gens
        .into_iter()
        .map(|mut g| {
            // Streams start within the first millisecond, in a seeded order.
            let jitter = rand::Rng::random_range(g.rng(), 0..NS_PER_MS);
            let role = g.role();
            StreamState {
                source: g,
                next_ns: t0 + jitter,
                next_arrival_ns: t0 + jitter,
                next_flush_ns: t0 + jitter + cfg.flush_interval_ns.unwrap_or(u64::MAX / 4),
                pending: Pending::None,
                counters: StreamCounters {
                    role,
                    ..StreamCounters::default()
                },
                txn_start: None,
                latency: new_hist(),
                commit_latency: new_hist(),
            }
        })
        .collect();

    let mut flush_latency = new_hist();
    let mut timeline: Vec<Bucket> = Vec::new();
    let bucket_ns = cfg.bucket_ns.max(1);
    // Completed client I/O: (completion time, bytes, latency, stream), for the phase figures.
    let mut completions: Vec<(u64, u64, u64, usize)> = Vec::new();
    // Transactions committed: (completion time, stream).
    let mut commits: Vec<(u64, usize)> = Vec::new();
    let interval_ns = spec
        .rate_per_stream
        .map(|r| (NS_PER_S / u64::from(r.max(1))).max(1));
    let mut cpu_free = t0;
    let mut fail_at = cfg.fail.map(|f| (t0 + f.at_ns, f.slot));
    let mut fail_ns = None;
    let mut maint_next: Option<u64> = None;
    let mut rebuild_start = None;
    let mut rebuild_done = None;
    let mut rebuild_stripes = 0u64;
    let mut rebuild_repair0 = 0u64;
    let mut rebuild_repair_bytes = 0u64;
    let mut rebuild_read0 = (0u64, 0u64);
    let mut rebuild_read = 0u64;
    let mut client_read_bytes = 0u64;
    let mut expect_rebuild = false;
    let base_end = t0 + cfg.duration_ns;
    let cap_end = t0 + cfg.duration_ns.saturating_mul(10);
    let mut end = base_end;
    let mut events = 0u64;
    let mut last_t = t0;

    // The earliest event. Streams waiting for the CPU all wake at the same time: the one
    // waiting longest goes first (a FIFO run queue), then the lower index.
    while let Some((si, ts, _)) = streams
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let since = match s.pending {
                Pending::Op(_, at) | Pending::Flush(at) => at,
                Pending::None => s.next_ns,
            };
            (i, s.next_ns, since)
        })
        .min_by_key(|&(i, t, since)| (t, since, i))
    {
        let (t, ev) = match (fail_at, maint_next) {
            (Some((f, slot)), _) if f <= ts && maint_next.is_none_or(|m| f <= m) => {
                (f, Ev::Fail(slot))
            }
            (_, Some(m)) if m <= ts => (m, Ev::Maint),
            _ => (ts, Ev::Stream(si)),
        };
        debug_assert!(t >= last_t, "event at {t} ns after one at {last_t} ns");
        last_t = t;
        // Extend the run while a rebuild is due or going on.
        if t >= end {
            let rebuilding = expect_rebuild && rebuild_done.is_none();
            if rebuilding && t < cap_end {
                end = t + 1;
            } else {
                break;
            }
        }
        events += 1;
        if events.is_multiple_of(4096) {
            progress(t - t0, end - t0);
        }
        match ev {
            Ev::Fail(slot) => {
                fail_at = None;
                fail_ns = Some(t);
                let log_device = cfg.fail.is_some_and(|f| f.log_device);
                let spares = usize::from(dp.pool.status().spares);
                expect_rebuild = spares > 0 && !log_device;
                let h = if log_device {
                    dp.members.log_device.as_ref().map(|(h, _)| h)
                } else {
                    dp.image_of_slot(slot)
                        .and_then(|n| dp.members.handles[n].as_ref())
                };
                if let Some(h) = h {
                    h.fault.inject(Fault::Fail);
                }
                if expect_rebuild {
                    maint_next = Some(t + POLL_NS);
                }
            }
            Ev::Maint => {
                if cpu_free > t {
                    maint_next = Some(cpu_free);
                    continue;
                }
                // The due time set after the last step moves when clients keep coming: ask again.
                if cfg.engine_paced && rebuild_start.is_some() {
                    dp.pool.set_time(t);
                    if let Some(due) = dp.pool.maintenance_due().filter(|&d| d > t) {
                        maint_next = Some(due);
                        continue;
                    }
                }
                let now = t + cfg.cpu_ns_per_request;
                cpu_free = now;
                dp.members.clock.advance_to_ns(now);
                dp.pool.set_time(now);
                if rebuild_start.is_none() {
                    // Reads alone do not make the pool take its spare (see
                    // DirPool::take_spare_for_failed); the runner's poll stands in for the
                    // management layer that would.
                    if let Err(e) = dp.take_spare_for_failed() {
                        note_err(now - t0, "taking the spare", &e);
                    }
                    let st = dp.pool.status();
                    if st.rebuild.is_some() {
                        rebuild_start = Some(now);
                        rebuild_repair0 = dp.pool.stats().member_repair_bytes;
                        rebuild_read0 = (member_read_bytes(dp), client_read_bytes);
                    } else {
                        maint_next = Some(now + POLL_NS);
                        continue;
                    }
                }
                dp.members.tracker.reset(now);
                let rep = dp.pool.maintenance();
                let done_t = dp.members.tracker.completion_ns().max(now);
                match rep {
                    Ok(MaintenanceReport {
                        rebuilt_stripes,
                        idle,
                        ..
                    }) => {
                        rebuild_stripes += rebuilt_stripes;
                        if idle && dp.pool.status().rebuild.is_none() {
                            rebuild_done = Some(done_t);
                            rebuild_repair_bytes =
                                dp.pool.stats().member_repair_bytes - rebuild_repair0;
                            rebuild_read = (member_read_bytes(dp) - rebuild_read0.0)
                                .saturating_sub(client_read_bytes - rebuild_read0.1);
                            end = end
                                .max(done_t + cfg.duration_ns / 4)
                                .min(cap_end.max(base_end).max(done_t));
                            maint_next = None;
                        } else if cfg.engine_paced {
                            // A blocking step: the next cannot start before this one's I/O is done.
                            let due = dp.pool.maintenance_due().unwrap_or(done_t);
                            maint_next = Some(due.max(done_t));
                        } else {
                            let d = (done_t - now).max(100_000);
                            let share = u64::from(cfg.rebuild_share_permille.clamp(1, 1000));
                            maint_next = Some(now + d * 1000 / share);
                        }
                    }
                    Err(e) => {
                        note_err(now - t0, "maintenance", &e);
                        maint_next = None;
                        expect_rebuild = false;
                    }
                }
            }
            Ev::Stream(i) => {
                let s = &mut streams[i];
                if matches!(s.pending, Pending::None) {
                    if cfg.flush_interval_ns.is_some() && t >= s.next_flush_ns {
                        s.pending = Pending::Flush(t);
                    } else {
                        let arrival = if interval_ns.is_some() {
                            s.next_arrival_ns
                        } else {
                            t
                        };
                        match s.source.next_op() {
                            Op::Idle(d) => {
                                // Behind schedule, the think time may already have passed.
                                s.next_arrival_ns = arrival + d.max(1);
                                s.next_ns = s.next_arrival_ns.max(t);
                                continue;
                            }
                            op => s.pending = Pending::Op(op, arrival),
                        }
                        s.next_arrival_ns = arrival + interval_ns.unwrap_or(0);
                    }
                }
                if cpu_free > t {
                    s.next_ns = cpu_free;
                    continue;
                }
                let (issued, blocks) = match s.pending {
                    Pending::Op(Op::Write { blocks, .. } | Op::Read { blocks, .. }, at) => {
                        (at, u64::from(blocks))
                    }
                    Pending::Flush(at) | Pending::Op(Op::Idle(_) | Op::Flush, at) => (at, 0),
                    Pending::None => (t, 0),
                };
                let cost = cfg.cpu_ns_per_request + blocks * cfg.cpu_ns_per_block;
                let now = t + cost;
                cpu_free = now;
                dp.members.clock.advance_to_ns(now);
                dp.pool.set_time(now);
                dp.members.tracker.reset(now);
                let lun = s.source.lun;
                let mut bytes = 0u64;
                let mut is_flush = false;
                let periodic = matches!(s.pending, Pending::Flush(_));
                if s.source.take_transaction_start() {
                    s.txn_start = Some(issued);
                }
                let mut flushed = false;
                match s.pending {
                    Pending::Op(
                        Op::Write {
                            lba,
                            blocks,
                            data: id,
                        },
                        _,
                    ) => {
                        let len = blocks as usize * BLOCK;
                        for (k, b) in buf[..len].chunks_exact_mut(BLOCK).enumerate() {
                            data.fill(id + k as u64, b);
                        }
                        match dp.pool.write(lun, lba, &buf[..len], cfg.write_through) {
                            Ok(()) => oracle.set(lun, lba, blocks, id),
                            Err(e) => {
                                oracle.set(lun, lba, blocks, UNKNOWN);
                                note_err(now - t0, "write", &e);
                            }
                        }
                        s.counters.writes += 1;
                        bytes = len as u64;
                    }
                    Pending::Op(Op::Read { lba, blocks }, _) => {
                        let len = blocks as usize * BLOCK;
                        match dp.pool.read(lun, lba, &mut buf[..len]) {
                            Ok(()) => {
                                for (k, b) in buf[..len].chunks_exact(BLOCK).enumerate() {
                                    let id = oracle.get(lun, lba + k as u64);
                                    if !block_ok(data, id, b, &mut scratch) {
                                        verify_errors += 1;
                                    }
                                }
                            }
                            Err(e) => {
                                verify_errors += u64::from(blocks);
                                note_err(now - t0, "read", &e);
                            }
                        }
                        s.counters.reads += 1;
                        bytes = len as u64;
                        client_read_bytes += bytes;
                    }
                    Pending::Flush(_) | Pending::Op(Op::Flush, _) => {
                        is_flush = true;
                        match dp.pool.flush() {
                            Ok(()) => flushed = true,
                            Err(e) => note_err(now - t0, "flush", &e),
                        }
                        s.counters.flushes += 1;
                    }
                    Pending::Op(Op::Idle(_), _) | Pending::None => {}
                }
                let done = now.max(dp.members.tracker.completion_ns());
                let lat = (done - issued).max(1);
                s.pending = Pending::None;
                s.next_ns = if interval_ns.is_some() {
                    done.max(s.next_arrival_ns)
                } else {
                    done
                };
                if is_flush && periodic {
                    let _ = flush_latency.record(lat);
                    let iv = cfg.flush_interval_ns.unwrap_or(NS_PER_S);
                    s.next_flush_ns += iv;
                    if s.next_flush_ns <= done {
                        s.next_flush_ns = done + iv;
                    }
                } else if is_flush {
                    let _ = flush_latency.record(lat);
                    if let Some(start) = s.txn_start.take().filter(|_| flushed) {
                        let _ = s.commit_latency.record((done - start).max(1));
                        s.counters.commits += 1;
                        commits.push((done, i));
                    }
                } else {
                    let _ = s.latency.record(lat);
                    s.counters.bytes += bytes;
                    completions.push((done, bytes, lat, i));
                    let b = ((done - t0) / bucket_ns) as usize;
                    if timeline.len() <= b {
                        timeline.resize(b + 1, Bucket::default());
                    }
                    let bk = &mut timeline[b];
                    bk.ops += 1;
                    bk.bytes += bytes;
                    bk.latency_sum_ns += lat;
                    bk.latency_max_ns = bk.latency_max_ns.max(lat);
                }
            }
        }
    }
    let end_ns = end;
    progress(end_ns - t0, end_ns - t0);

    // Counters of the measured run.
    let stats1 = dp.pool.stats();
    let client_written = stats1.session_client_bytes - stats0.session_client_bytes;
    let member_written = member_bytes(&stats1) - member_bytes(&stats0);
    let c0 = stats0.counters;
    let c1 = stats1.counters;
    let raw = c1.extent_raw_bytes - c0.extent_raw_bytes;
    let stored = c1.extent_stored_bytes - c0.extent_stored_bytes;

    // A rebuild that ran over the cap: finish it (untimed) before verifying.
    if expect_rebuild && rebuild_done.is_none() {
        loop {
            match dp.pool.maintenance() {
                Ok(r) => {
                    rebuild_stripes += r.rebuilt_stripes;
                    if r.idle {
                        break;
                    }
                }
                Err(e) => {
                    note_err(end_ns - t0, "maintenance after the run", &e);
                    break;
                }
            }
        }
        rebuild_repair_bytes = dp.pool.stats().member_repair_bytes - rebuild_repair0;
    }
    if let Err(e) = dp.pool.flush() {
        note_err(end_ns - t0, "final flush", &e);
    }

    // Phases.
    // A rebuild step's I/O may complete after the capped end of the run.
    let fail_t = fail_ns.unwrap_or(end_ns).min(end_ns);
    let rb_t = rebuild_done.unwrap_or(end_ns).clamp(fail_t, end_ns);
    let bounds = [(t0, fail_t), (fail_t, rb_t), (rb_t, end_ns)];
    let mut phase_bytes = [0u64; 3];
    let mut phase_latency = [new_hist(), new_hist(), new_hist()];
    for &(c, b, lat, _) in &completions {
        for (k, &(lo, hi)) in bounds.iter().enumerate() {
            if c >= lo && c < hi {
                phase_bytes[k] += b;
                let _ = phase_latency[k].record(lat);
            }
        }
    }
    let phase_ns = bounds.map(|(lo, hi)| hi - lo);

    // Read everything back.
    let check = verify_all(dp, &oracle, data);
    verify_errors += check.errors;
    for m in &check.messages {
        note_err(end_ns - t0, "after the run", m);
    }

    let (mut scrub_rep, mut scrub_unrep) = (None, None);
    if cfg.scrub_after {
        dp.pool.start_scrub();
        loop {
            match dp.pool.maintenance() {
                Ok(r) if r.idle => break,
                Ok(_) => {}
                Err(e) => {
                    note_err(end_ns - t0, "scrub", &e);
                    break;
                }
            }
        }
        let st = dp.pool.status();
        scrub_rep = Some(st.scrub_repaired);
        scrub_unrep = Some(st.scrub_unrepairable);
    }

    let done = Done {
        completions: &completions,
        commits: &commits,
        phases: &bounds,
        window: (t0, base_end),
    };
    let roles = role_results(&streams, &done, &check);
    let mut latency = new_hist();
    for r in &roles {
        let _ = latency.add(&r.latency);
    }
    RunResult {
        duration_ns: end_ns - t0,
        asked_ns: cfg.duration_ns,
        streams: streams.iter().map(|s| s.counters).collect(),
        roles,
        latency,
        flush_latency,
        timeline,
        bucket_ns,
        fail_ns: fail_ns.map(|f| f - t0),
        fail_slot: cfg
            .fail
            .filter(|f| !f.log_device)
            .map(|f| f.slot)
            .filter(|_| fail_ns.is_some()),
        rebuild_start_ns: rebuild_start.map(|r| r - t0),
        rebuild_done_ns: rebuild_done.map(|r| r - t0),
        rebuild_stripes,
        rebuild_bytes_written: rebuild_repair_bytes,
        rebuild_bytes_read: rebuild_read,
        phase_bytes,
        phase_ns,
        phase_latency,
        rate_per_stream: spec.rate_per_stream,
        write_amplification: if client_written == 0 {
            0.0
        } else {
            member_written as f64 / client_written as f64
        },
        compression_ratio: if stored == 0 {
            1.0
        } else {
            raw as f64 / stored as f64
        },
        client_bytes_written: client_written,
        member_bytes_written: member_written,
        verified_blocks: check.blocks,
        verified_written_blocks: check.written_blocks,
        verify_errors,
        scrub_repaired_blocks: scrub_rep,
        scrub_unrepairable_blocks: scrub_unrep,
        errors,
        error_count,
        final_health: dp.pool.status().health.name().to_string(),
        oracle,
        reimport: None,
        start_clock_ns: t0,
    }
}

/// What completed in a run, and the spans it is summed over (`[start, end)` in clock
/// nanoseconds).
struct Done<'a> {
    /// Reads and writes: (completion time, bytes, latency, stream).
    completions: &'a [(u64, u64, u64, usize)],
    /// Transactions: (completion time, stream).
    commits: &'a [(u64, usize)],
    /// Before the failure, during the rebuild, after it.
    phases: &'a [(u64, u64); 3],
    /// The asked run length.
    window: (u64, u64),
}

/// The streams' figures summed per role; `check` is what reading every block back found.
fn role_results(streams: &[StreamState], done: &Done, check: &Verification) -> Vec<RoleResult> {
    let mut roles: Vec<RoleResult> = Vec::new();
    let mut role_of = Vec::with_capacity(streams.len());
    for s in streams {
        let role = s.counters.role;
        let k = roles
            .iter()
            .position(|r| r.role == role)
            .unwrap_or_else(|| {
                roles.push(RoleResult {
                    role,
                    lun: s.source.lun,
                    streams: 0,
                    ops: 0,
                    bytes: 0,
                    latency: new_hist(),
                    commits: 0,
                    commit_latency: new_hist(),
                    phase_bytes: [0; 3],
                    phase_ops: [0; 3],
                    window_ops: 0,
                    window_bytes: 0,
                    window_commits: 0,
                    blocks_lost: check.lun_errors.get(&s.source.lun).copied().unwrap_or(0),
                });
                roles.len() - 1
            });
        let r = &mut roles[k];
        r.streams += 1;
        r.ops += s.counters.ops();
        r.bytes += s.counters.bytes;
        r.commits += s.counters.commits;
        let _ = r.latency.add(&s.latency);
        let _ = r.commit_latency.add(&s.commit_latency);
        role_of.push(k);
    }
    let (w0, w1) = done.window;
    for &(c, b, _, si) in done.completions {
        let r = &mut roles[role_of[si]];
        for (k, &(lo, hi)) in done.phases.iter().enumerate() {
            if c >= lo && c < hi {
                r.phase_bytes[k] += b;
                r.phase_ops[k] += 1;
            }
        }
        if c >= w0 && c < w1 {
            r.window_ops += 1;
            r.window_bytes += b;
        }
    }
    for &(c, si) in done.commits {
        if c >= w0 && c < w1 {
            roles[role_of[si]].window_commits += 1;
        }
    }
    roles
}
