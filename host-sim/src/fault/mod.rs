//! Fault injection: [`FaultyDisk`], a wrapper that makes any disk fail the ways real disks fail,
//! from a seed, on a schedule; and [`WriteLog`] / [`materialise`], which record the writes of
//! several disks in one global order and rebuild the disks as a power cut at any point of that
//! order would leave them.
//!
//! The wrapped disk is the pristine medium: latent sector errors and bit rot live in an overlay
//! next to it (as in TigerBeetle's test storage), so [`Fault::Repair`] switches them off and the
//! original data is back. Misdirected and lost writes and power cuts really change what the
//! medium holds, as they would on a real drive; each is logged as a [`FaultEvent`] so a test
//! knows what happened.
//!
//! Every random choice (torn subsets, fates of cached writes, rotted bits, random blocks) comes
//! from the disk's own ChaCha8 generator seeded at construction and drawn in operation order, so a
//! run replays exactly from its seed.

mod member;
mod record;

pub use member::{MemberHandles, SimMember, sim_member};
pub use record::{CrashPoint, Record, RecordingDisk, Tear, Unflushed, WriteLog, materialise};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io, check_range};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::clock::SimClock;
use crate::disk::SimError;
use crate::model::{Slowdown, TimingHandle};

/// Which retryable error a transient fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransientKind {
    /// [`ErrorKind::Transport`] (a CRC error on the link, a dropped command).
    Transport,
    /// [`ErrorKind::Timeout`] (the device did not answer; a timed disk charges the timeout).
    Timeout,
}

impl TransientKind {
    /// The HAL kind returned.
    #[must_use]
    pub const fn kind(self) -> ErrorKind {
        match self {
            TransientKind::Transport => ErrorKind::Transport,
            TransientKind::Timeout => ErrorKind::Timeout,
        }
    }
}

/// One fault. LBAs and counts are in device blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The device fails: every operation returns [`ErrorKind::DeviceFailed`] until
    /// [`Fault::Return`]. The data is kept (a pulled drive, not a shredded one).
    Fail,
    /// The failed device comes back with its data.
    Return,
    /// Latent sector errors on `blocks` blocks from `lba` (clamped to the device): reads that
    /// reach one fail with [`ErrorKind::Medium`] naming the first bad block. A write to a bad
    /// block repairs it (the drive remaps the sector) unless `sticky`, in which case writes to
    /// it fail with the same error too (the drive is out of spare sectors).
    Medium {
        /// First bad block.
        lba: u64,
        /// Number of bad blocks (at least 1 is used).
        blocks: u64,
        /// Writes do not repair the block.
        sticky: bool,
    },
    /// Silent corruption: flips `bits` distinct random bits (at least 1) of block `lba`, or of
    /// a random block if `None`, as seen by every later read. Reads succeed with the wrong data.
    /// A later write to the block replaces the corruption with the new data.
    BitRot {
        /// The block, or a seeded random block.
        lba: Option<u64>,
        /// Bits to flip.
        bits: u32,
    },
    /// The next write (if `from` is `None`), or the next write starting at block `from`, is
    /// acknowledged but lands at block `to` instead (clamped so the whole write fits). Silent.
    Misdirect {
        /// Which write to misdirect.
        from: Option<u64>,
        /// Where it lands.
        to: u64,
    },
    /// The next write (if `lba` is `None`), or the next write starting at block `lba`, is
    /// acknowledged but not applied. Silent.
    LoseWrite {
        /// Which write to lose.
        lba: Option<u64>,
    },
    /// The next `ops` operations (of any kind) fail with a retryable error and transfer
    /// nothing.
    Transient {
        /// The error returned.
        kind: TransientKind,
        /// How many operations fail.
        ops: u64,
    },
    /// The disk becomes slow: forwarded to the [`TimingHandle`] connected with
    /// [`FaultHandle::connect_timing`] (no effect without one). [`Slowdown::NONE`] restores it.
    Slow(Slowdown),
    /// Power is cut. Writes not yet flushed (the volatile cache, see [`FaultConfig`]) are each
    /// applied whole, dropped, or torn (a seeded subset of their blocks applied), as
    /// [`FaultConfig::power_cut`] says. Then every operation returns [`ErrorKind::DeviceFailed`]
    /// until [`Fault::PowerRestore`].
    PowerCut,
    /// Power comes back; the disk holds what survived the cut.
    PowerRestore,
    /// Switches off every lasting fault: medium errors, bit rot, pending misdirects and lost
    /// writes, transient errors, slowness. The pristine data shows again. Does not undo
    /// [`Fault::Fail`] or a power cut, nor the damage of misdirected or lost writes already
    /// done.
    Repair,
}

/// When a scheduled fault takes effect. Faults are checked at the start of each operation, so a
/// fault due at time t takes effect at the first operation submitted at or after t.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// At once.
    Now,
    /// At the first operation submitted when the virtual clock reads at least this many
    /// nanoseconds (needs [`FaultyDisk::with_clock`]).
    AtTimeNs(u64),
    /// Before the operation with this 0-based index (counting every operation the disk saw).
    AtOp(u64),
    /// Before the operation this many operations from now (0: the next one).
    AfterOps(u64),
}

/// How the unflushed writes of the volatile cache fare at a power cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PendingFate {
    /// Each write, independently and from the seed: applied whole, dropped, or torn (each of its
    /// blocks applied with probability 1/2), each with probability 1/3.
    #[default]
    Seeded,
    /// Every unflushed write survives (as if the cache had been flushed).
    KeepAll,
    /// Every unflushed write is lost.
    DropAll,
}

/// A power-cut "fuel" counter: the device loses power at an exact point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fuel {
    /// The next n writes are accepted; power is cut right after the n-th is acknowledged
    /// (n = 0: the next write fails with the cut).
    Writes(u64),
    /// Writes are accepted while they fit in this many bytes; a write that does not fit has its
    /// first whole blocks that fit accepted, then power is cut and it fails with
    /// [`ErrorKind::DeviceFailed`]; a write that uses the last byte is acknowledged, then power
    /// is cut.
    Bytes(u64),
}

/// How a [`FaultyDisk`] behaves apart from injected faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultConfig {
    /// Writes go to a volatile write cache and reach the wrapped disk only on flush (or when the
    /// cache is full, oldest first), so a power cut can lose or tear them, as the HAL allows.
    /// `false`: writes go straight through and a power cut loses nothing written. Default
    /// `true`.
    pub volatile_cache: bool,
    /// Size of the volatile cache in bytes; past it the oldest writes are written through.
    /// Default 64 MiB (a typical drive buffer).
    pub cache_bytes: u64,
    /// What a power cut does to the cached writes. Default [`PendingFate::Seeded`].
    pub power_cut: PendingFate,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            volatile_cache: true,
            cache_bytes: 64 << 20,
            power_cut: PendingFate::Seeded,
        }
    }
}

/// What happened, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultEvent {
    /// Operations the disk had begun when it happened; during an operation this counts that
    /// operation, so the operation with 0-based index i reports i + 1.
    pub ops_seen: u64,
    /// The virtual time, if the disk has a clock.
    pub time_ns: Option<u64>,
    /// What happened.
    pub kind: EventKind,
}

/// The kinds of [`FaultEvent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A fault took effect (injected now or fired from the schedule).
    Injected(Fault),
    /// A bit-rot fault corrupted this block.
    Rotted {
        /// The block.
        lba: u64,
    },
    /// A write meant for `intended` landed at `actual`.
    Misdirected {
        /// Where the write was meant to go.
        intended: u64,
        /// Where it went.
        actual: u64,
        /// Its length in blocks.
        blocks: u64,
    },
    /// A write was acknowledged but not applied.
    Lost {
        /// Its first block.
        lba: u64,
        /// Its length in blocks.
        blocks: u64,
    },
    /// An operation returned a medium error.
    MediumError {
        /// The block named in the error.
        lba: u64,
    },
    /// An operation returned a transient error.
    Transient(TransientKind),
    /// The fuel ran out.
    FuelExhausted,
    /// Power was cut; the cached writes fared like this.
    PowerCut {
        /// Writes in the cache.
        pending: usize,
        /// Applied whole.
        whole: usize,
        /// Dropped.
        dropped: usize,
        /// Torn (some blocks applied).
        torn: usize,
    },
}

#[derive(Debug, Clone)]
struct PendingWrite {
    lba: u64,
    data: Vec<u8>,
}

/// The volatile write cache: writes by sequence number, and for each cached block the newest
/// write holding it.
#[derive(Debug, Default)]
struct WriteCache {
    writes: BTreeMap<u64, PendingWrite>,
    newest: BTreeMap<u64, u64>,
    next_seq: u64,
    bytes: u64,
}

impl WriteCache {
    fn push(&mut self, lba: u64, data: &[u8], bs: usize) {
        let seq = self.next_seq;
        self.next_seq += 1;
        for i in 0..(data.len() / bs) as u64 {
            self.newest.insert(lba + i, seq);
        }
        self.bytes += data.len() as u64;
        self.writes.insert(
            seq,
            PendingWrite {
                lba,
                data: data.to_vec(),
            },
        );
    }

    /// Removes and returns the oldest write.
    fn pop_oldest(&mut self, bs: usize) -> Option<PendingWrite> {
        let (seq, w) = self.writes.pop_first()?;
        for i in 0..(w.data.len() / bs) as u64 {
            if self.newest.get(&(w.lba + i)) == Some(&seq) {
                self.newest.remove(&(w.lba + i));
            }
        }
        self.bytes -= w.data.len() as u64;
        Some(w)
    }

    /// Puts a write that could not be destaged back at the front.
    fn unpop(&mut self, w: PendingWrite, bs: usize) {
        let seq = self
            .writes
            .first_key_value()
            .map_or(self.next_seq, |(s, _)| *s)
            - 1;
        for i in 0..(w.data.len() / bs) as u64 {
            self.newest.entry(w.lba + i).or_insert(seq);
        }
        self.bytes += w.data.len() as u64;
        self.writes.insert(seq, w);
    }

    /// Copies the cached blocks of `lba..lba + buf.len()/bs` over `buf`.
    fn overlay(&self, lba: u64, buf: &mut [u8], bs: usize) {
        let end = lba + (buf.len() / bs) as u64;
        for (&b, seq) in self.newest.range(lba..end) {
            if let Some(w) = self.writes.get(seq) {
                let src = ((b - w.lba) as usize) * bs;
                let dst = ((b - lba) as usize) * bs;
                buf[dst..dst + bs].copy_from_slice(&w.data[src..src + bs]);
            }
        }
    }

    fn take_all(&mut self) -> Vec<PendingWrite> {
        self.newest.clear();
        self.bytes = 0;
        std::mem::take(&mut self.writes).into_values().collect()
    }
}

/// The fate of one write at a power cut, as a per-block mask (`true` = applied).
pub(crate) fn seeded_fate(rng: &mut ChaCha8Rng, blocks: usize) -> (Vec<bool>, FateKind) {
    match rng.random_range(0..3u8) {
        0 => (vec![true; blocks], FateKind::Whole),
        1 => (vec![false; blocks], FateKind::Dropped),
        _ => (
            (0..blocks).map(|_| rng.random_bool(0.5)).collect(),
            FateKind::Torn,
        ),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FateKind {
    Whole,
    Dropped,
    Torn,
}

/// Runs of applied blocks of a write: `(first block, byte range in data)`.
pub(crate) fn applied_runs(
    lba: u64,
    mask: &[bool],
    bs: usize,
) -> Vec<(u64, core::ops::Range<usize>)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < mask.len() {
        if mask[i] {
            let start = i;
            while i < mask.len() && mask[i] {
                i += 1;
            }
            runs.push((lba + start as u64, start * bs..i * bs));
        } else {
            i += 1;
        }
    }
    runs
}

#[derive(Debug)]
struct FaultState {
    seed: u64,
    rng: ChaCha8Rng,
    config: FaultConfig,
    clock: Option<SimClock>,
    timing: Option<TimingHandle>,
    block_size: BlockSize,
    block_count: u64,
    ops: u64,
    writes: u64,
    schedule: Vec<(Trigger, Fault)>,
    failed: bool,
    powered: bool,
    medium: BTreeMap<u64, bool>,
    rot: BTreeMap<u64, Vec<u8>>,
    misdirects: Vec<(Option<u64>, u64)>,
    lost: Vec<Option<u64>>,
    transient: Option<(TransientKind, u64)>,
    slowdown: Slowdown,
    cache: WriteCache,
    survivors: VecDeque<PendingWrite>,
    fuel: Option<Fuel>,
    events: Vec<FaultEvent>,
}

impl FaultState {
    fn bs(&self) -> usize {
        self.block_size.bytes()
    }

    fn event(&mut self, kind: EventKind) {
        let time_ns = self.clock.as_ref().map(SimClock::now_ns);
        self.events.push(FaultEvent {
            ops_seen: self.ops,
            time_ns,
            kind,
        });
    }

    /// Counts an operation and fires the scheduled faults due before it.
    fn begin_op(&mut self) {
        let index = self.ops;
        self.ops += 1;
        let now = self.clock.as_ref().map(SimClock::now_ns);
        let mut due = Vec::new();
        self.schedule.retain(|&(t, f)| {
            let fire = match t {
                Trigger::Now => true,
                Trigger::AtOp(n) | Trigger::AfterOps(n) => n <= index,
                Trigger::AtTimeNs(at) => now.is_some_and(|now| now >= at),
            };
            if fire {
                due.push(f);
            }
            !fire
        });
        for f in due {
            self.apply(f);
        }
    }

    fn apply(&mut self, fault: Fault) {
        self.event(EventKind::Injected(fault));
        match fault {
            Fault::Fail => self.failed = true,
            Fault::Return => self.failed = false,
            Fault::Medium {
                lba,
                blocks,
                sticky,
            } => {
                let end = lba.saturating_add(blocks.max(1)).min(self.block_count);
                for b in lba..end {
                    self.medium.insert(b, sticky);
                }
            }
            Fault::BitRot { lba, bits } => {
                let lba = match lba {
                    Some(l) if l < self.block_count => l,
                    Some(_) => return,
                    None => self.rng.random_range(0..self.block_count),
                };
                let total_bits = self.bs() * 8;
                let want = (bits.max(1) as usize).min(total_bits);
                let mut chosen = BTreeSet::new();
                while chosen.len() < want {
                    chosen.insert(self.rng.random_range(0..total_bits));
                }
                let bs = self.bs();
                let mask = self.rot.entry(lba).or_insert_with(|| vec![0; bs]);
                for bit in chosen {
                    mask[bit / 8] ^= 1 << (bit % 8);
                }
                self.event(EventKind::Rotted { lba });
            }
            Fault::Misdirect { from, to } => self.misdirects.push((from, to)),
            Fault::LoseWrite { lba } => self.lost.push(lba),
            Fault::Transient { kind, ops } => {
                self.transient = (ops > 0).then_some((kind, ops));
            }
            Fault::Slow(s) => {
                self.slowdown = s;
                if let Some(t) = &self.timing {
                    t.set_slowdown(s);
                }
            }
            Fault::PowerCut => self.cut_power(),
            Fault::PowerRestore => self.powered = true,
            Fault::Repair => {
                self.medium.clear();
                self.rot.clear();
                self.misdirects.clear();
                self.lost.clear();
                self.transient = None;
                self.slowdown = Slowdown::NONE;
                if let Some(t) = &self.timing {
                    t.set_slowdown(Slowdown::NONE);
                }
            }
        }
    }

    /// Decides the fate of every cached write; the survivors are written to the medium before
    /// the next access to it.
    fn cut_power(&mut self) {
        if !self.powered {
            return;
        }
        let bs = self.bs();
        let pending = self.cache.take_all();
        let (mut whole, mut dropped, mut torn) = (0, 0, 0);
        for w in &pending {
            let blocks = w.data.len() / bs;
            let (mask, kind) = match self.config.power_cut {
                PendingFate::KeepAll => (vec![true; blocks], FateKind::Whole),
                PendingFate::DropAll => (vec![false; blocks], FateKind::Dropped),
                PendingFate::Seeded => seeded_fate(&mut self.rng, blocks),
            };
            match kind {
                FateKind::Whole => whole += 1,
                FateKind::Dropped => dropped += 1,
                FateKind::Torn => torn += 1,
            }
            for (lba, range) in applied_runs(w.lba, &mask, bs) {
                self.survivors.push_back(PendingWrite {
                    lba,
                    data: w.data[range].to_vec(),
                });
            }
        }
        self.powered = false;
        self.event(EventKind::PowerCut {
            pending: pending.len(),
            whole,
            dropped,
            torn,
        });
    }

    /// The gate every operation passes after its range check.
    fn gate(&mut self) -> Result<(), SimError> {
        if !self.powered || self.failed {
            return Err(SimError::with_context(
                ErrorKind::DeviceFailed,
                if self.failed {
                    "injected device failure"
                } else {
                    "injected power cut"
                },
            ));
        }
        if let Some((kind, left)) = self.transient {
            self.transient = (left > 1).then_some((kind, left - 1));
            self.event(EventKind::Transient(kind));
            return Err(SimError::with_context(
                kind.kind(),
                "injected transient error",
            ));
        }
        Ok(())
    }

    fn first_medium(&self, lba: u64, blocks: u64, sticky_only: bool) -> Option<u64> {
        self.medium
            .range(lba..lba + blocks)
            .find(|&(_, &sticky)| sticky || !sticky_only)
            .map(|(&b, _)| b)
    }
}

fn lock(state: &Mutex<FaultState>) -> MutexGuard<'_, FaultState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A cloneable handle on one [`FaultyDisk`], usable after the disk was handed to the engine.
#[derive(Debug, Clone)]
pub struct FaultHandle {
    state: Arc<Mutex<FaultState>>,
}

impl FaultHandle {
    /// Makes `fault` take effect now.
    pub fn inject(&self, fault: Fault) {
        lock(&self.state).apply(fault);
    }

    /// Makes `fault` take effect at `when`.
    ///
    /// Errors: [`ErrorKind::Unsupported`] for [`Trigger::AtTimeNs`] on a disk without a clock.
    pub fn schedule(&self, when: Trigger, fault: Fault) -> Result<(), SimError> {
        let mut st = lock(&self.state);
        let when = match when {
            Trigger::Now => {
                st.apply(fault);
                return Ok(());
            }
            Trigger::AtTimeNs(_) if st.clock.is_none() => {
                return Err(SimError::with_context(
                    ErrorKind::Unsupported,
                    "time trigger on a faulty disk without a clock",
                ));
            }
            Trigger::AfterOps(n) => Trigger::AtOp(st.ops.saturating_add(n)),
            t => t,
        };
        st.schedule.push((when, fault));
        Ok(())
    }

    /// Forgets every scheduled fault that has not fired yet.
    pub fn cancel_schedule(&self) {
        lock(&self.state).schedule.clear();
    }

    /// Sets (or with `None` removes) the power-cut fuel counter.
    pub fn set_fuel(&self, fuel: Option<Fuel>) {
        lock(&self.state).fuel = fuel;
    }

    /// What is left of the fuel, if set.
    #[must_use]
    pub fn fuel(&self) -> Option<Fuel> {
        lock(&self.state).fuel
    }

    /// Lets [`Fault::Slow`] reach a timed disk (typically the [`crate::model::TimedDisk`]
    /// wrapping this one).
    pub fn connect_timing(&self, timing: &TimingHandle) {
        let mut st = lock(&self.state);
        timing.set_slowdown(st.slowdown);
        st.timing = Some(timing.clone());
    }

    /// Whether the device is failed ([`Fault::Fail`]).
    #[must_use]
    pub fn is_failed(&self) -> bool {
        lock(&self.state).failed
    }

    /// Whether the device has power.
    #[must_use]
    pub fn is_powered(&self) -> bool {
        lock(&self.state).powered
    }

    /// Operations the disk has seen (every call, failed ones included).
    #[must_use]
    pub fn ops(&self) -> u64 {
        lock(&self.state).ops
    }

    /// Writes the disk acknowledged (lost and misdirected ones included).
    #[must_use]
    pub fn writes(&self) -> u64 {
        lock(&self.state).writes
    }

    /// Writes in the volatile cache (not yet flushed), and their total size in bytes.
    #[must_use]
    pub fn pending(&self) -> (usize, u64) {
        let st = lock(&self.state);
        (st.cache.writes.len(), st.cache.bytes)
    }

    /// Blocks with an active medium error, ascending.
    #[must_use]
    pub fn medium_errors(&self) -> Vec<u64> {
        lock(&self.state).medium.keys().copied().collect()
    }

    /// Blocks with active bit rot, ascending.
    #[must_use]
    pub fn rotted_blocks(&self) -> Vec<u64> {
        lock(&self.state).rot.keys().copied().collect()
    }

    /// Everything that happened so far.
    #[must_use]
    pub fn events(&self) -> Vec<FaultEvent> {
        lock(&self.state).events.clone()
    }

    /// The seed the disk was built with.
    #[must_use]
    pub fn seed(&self) -> u64 {
        lock(&self.state).seed
    }
}

/// A disk that fails on demand (see the module docs and [`Fault`]). Wrap it in a
/// [`crate::model::TimedDisk`] (not the other way round) so faults cost virtual time.
///
/// Errors are [`SimError`]; errors of the wrapped disk are converted with `Into`.
#[derive(Debug)]
pub struct FaultyDisk<D> {
    inner: D,
    state: Arc<Mutex<FaultState>>,
}

impl<D> FaultyDisk<D>
where
    D: BlockDevice,
    D::Error: Into<SimError>,
{
    /// Wraps `inner` with the default [`FaultConfig`] and a generator seeded with `seed`.
    pub fn new(inner: D, seed: u64) -> Self {
        Self::with_config(inner, seed, FaultConfig::default())
    }

    /// Wraps `inner` with `config` and a generator seeded with `seed`.
    pub fn with_config(inner: D, seed: u64, config: FaultConfig) -> Self {
        let state = FaultState {
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            config,
            clock: None,
            timing: None,
            block_size: inner.block_size(),
            block_count: inner.block_count(),
            ops: 0,
            writes: 0,
            schedule: Vec::new(),
            failed: false,
            powered: true,
            medium: BTreeMap::new(),
            rot: BTreeMap::new(),
            misdirects: Vec::new(),
            lost: Vec::new(),
            transient: None,
            slowdown: Slowdown::NONE,
            cache: WriteCache::default(),
            survivors: VecDeque::new(),
            fuel: None,
            events: Vec::new(),
        };
        Self {
            inner,
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// Gives the disk a clock, for [`Trigger::AtTimeNs`] and event times.
    #[must_use]
    pub fn with_clock(self, clock: &SimClock) -> Self {
        lock(&self.state).clock = Some(clock.clone());
        self
    }

    /// A handle to inject faults and read what happened.
    #[must_use]
    pub fn handle(&self) -> FaultHandle {
        FaultHandle {
            state: self.state.clone(),
        }
    }

    /// The wrapped disk (the medium), after writing the survivors of a power cut to it. Writes
    /// still in the volatile cache are not on it yet.
    pub fn inner_mut(&mut self) -> Result<&mut D, SimError> {
        let mut st = lock(&self.state);
        settle(&mut self.inner, &mut st)?;
        drop(st);
        Ok(&mut self.inner)
    }

    /// The wrapped disk, as an orderly shutdown would leave it: the survivors of a power cut
    /// and then every write still in the volatile cache are written to it. Overlay faults (bit
    /// rot, medium errors) are dropped: the result holds the pristine data. A write the wrapped
    /// disk refuses is skipped (memory disks never refuse).
    pub fn into_inner(mut self) -> D {
        let mut st = lock(&self.state);
        let bs = st.bs();
        let _ = settle(&mut self.inner, &mut st);
        while let Some(w) = st.cache.pop_oldest(bs) {
            let _ = self.inner.write(w.lba, &w.data);
        }
        drop(st);
        self.inner
    }
}

/// Writes the survivors of a power cut to the medium.
fn settle<D>(inner: &mut D, st: &mut FaultState) -> Result<(), SimError>
where
    D: BlockDevice,
    D::Error: Into<SimError>,
{
    while let Some(w) = st.survivors.pop_front() {
        if let Err(e) = inner.write(w.lba, &w.data) {
            st.survivors.push_front(w);
            return Err(e.into());
        }
    }
    Ok(())
}

/// Writes cached writes to the medium, oldest first, until the cache holds at most `keep_bytes`.
fn destage<D>(inner: &mut D, st: &mut FaultState, keep_bytes: u64) -> Result<(), SimError>
where
    D: BlockDevice,
    D::Error: Into<SimError>,
{
    let bs = st.bs();
    while st.cache.bytes > keep_bytes {
        let Some(w) = st.cache.pop_oldest(bs) else {
            break;
        };
        if let Err(e) = inner.write(w.lba, &w.data) {
            st.cache.unpop(w, bs);
            return Err(e.into());
        }
    }
    Ok(())
}

/// Takes the bit rot under a write of `data` at `lba` off the overlay, except for the bytes
/// the write puts back exactly as they read rotten (a read-modify-write that patched other
/// bytes of the block): those stay rotten, on the overlay, so the damage is still known. Returns
/// the data to store (with those bytes as the medium holds them) when it differs from `data`.
fn keep_rewritten_rot<D>(
    inner: &mut D,
    st: &mut FaultState,
    lba: u64,
    data: &[u8],
) -> Result<Option<Vec<u8>>, SimError>
where
    D: BlockDevice,
    D::Error: Into<SimError>,
{
    let bs = st.bs();
    let end = lba + (data.len() / bs) as u64;
    let rotted: Vec<u64> = st.rot.range(lba..end).map(|(&b, _)| b).collect();
    let mut out: Option<Vec<u8>> = None;
    let mut medium = vec![0u8; bs];
    for b in rotted {
        let Some(mask) = st.rot.remove(&b) else {
            continue;
        };
        inner.read(b, &mut medium).map_err(Into::into)?;
        st.cache.overlay(b, &mut medium, bs);
        let at = ((b - lba) as usize) * bs;
        let buf = out.get_or_insert_with(|| data.to_vec());
        let mut still = vec![0u8; bs];
        for i in 0..bs {
            if mask[i] != 0 && buf[at + i] ^ mask[i] == medium[i] {
                buf[at + i] = medium[i];
                still[i] = mask[i];
            }
        }
        if still.iter().any(|&m| m != 0) {
            st.rot.insert(b, still);
        }
    }
    Ok(out)
}

/// Stores an acknowledged write at `lba` (its final place): repairs non-sticky medium errors and
/// bit rot under it, stops at a sticky medium error, then caches or writes through.
fn store<D>(inner: &mut D, st: &mut FaultState, lba: u64, data: &[u8]) -> Result<(), SimError>
where
    D: BlockDevice,
    D::Error: Into<SimError>,
{
    let bs = st.bs();
    let blocks = (data.len() / bs) as u64;
    let sticky = st.first_medium(lba, blocks, true);
    let good = sticky.map_or(blocks, |b| b - lba);
    let kept = keep_rewritten_rot(inner, st, lba, &data[..good as usize * bs])?;
    for b in lba..lba + good {
        st.medium.remove(&b);
    }
    if good > 0 {
        let data = kept.as_deref().unwrap_or(&data[..good as usize * bs]);
        if st.config.volatile_cache {
            st.cache.push(lba, data, bs);
            let limit = st.config.cache_bytes;
            destage(inner, st, limit)?;
        } else {
            inner.write(lba, data).map_err(Into::into)?;
        }
    }
    match sticky {
        Some(b) => {
            st.event(EventKind::MediumError { lba: b });
            Err(SimError::with_context(
                ErrorKind::Medium { lba: b },
                "injected sticky medium error",
            ))
        }
        None => Ok(()),
    }
}

impl<D: BlockDevice> ErrorType for FaultyDisk<D> {
    type Error = SimError;
}

impl<D> BlockDevice for FaultyDisk<D>
where
    D: BlockDevice,
    D::Error: Into<SimError>,
{
    fn block_size(&self) -> BlockSize {
        self.inner.block_size()
    }

    fn block_count(&self) -> u64 {
        self.inner.block_count()
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SimError> {
        let mut st = lock(&self.state);
        st.begin_op();
        settle(&mut self.inner, &mut st)?;
        let blocks = check_io(st.block_size, st.block_count, lba, buf.len())?;
        st.gate()?;
        self.inner.read(lba, buf).map_err(Into::into)?;
        let bs = st.bs();
        st.cache.overlay(lba, buf, bs);
        if let Some(bad) = st.first_medium(lba, blocks, false) {
            st.event(EventKind::MediumError { lba: bad });
            return Err(SimError::with_context(
                ErrorKind::Medium { lba: bad },
                "injected medium error",
            ));
        }
        for (&b, mask) in st.rot.range(lba..lba + blocks) {
            let at = ((b - lba) as usize) * bs;
            for (x, m) in buf[at..at + bs].iter_mut().zip(mask) {
                *x ^= m;
            }
        }
        Ok(())
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), SimError> {
        let mut st = lock(&self.state);
        st.begin_op();
        settle(&mut self.inner, &mut st)?;
        let blocks = check_io(st.block_size, st.block_count, lba, buf.len())?;
        st.gate()?;
        let bs = st.bs();
        // Fuel: how much of this write is accepted, and whether power goes after it.
        let (accepted, cut_after) = match st.fuel {
            None => (blocks, false),
            Some(Fuel::Writes(0)) => (0, true),
            Some(Fuel::Writes(n)) => {
                st.fuel = Some(Fuel::Writes(n - 1));
                (blocks, n == 1)
            }
            Some(Fuel::Bytes(left)) => {
                let len = buf.len() as u64;
                if len <= left {
                    st.fuel = Some(Fuel::Bytes(left - len));
                    (blocks, len == left)
                } else {
                    (left / bs as u64, true)
                }
            }
        };
        let result = if accepted == blocks {
            let lost = st.lost.iter().position(|l| l.is_none_or(|l| l == lba));
            let misdirect = st
                .misdirects
                .iter()
                .position(|(from, _)| from.is_none_or(|f| f == lba));
            if let Some(i) = lost {
                st.lost.remove(i);
                st.event(EventKind::Lost { lba, blocks });
                Ok(())
            } else if let Some(i) = misdirect {
                let (_, to) = st.misdirects.remove(i);
                let actual = to.min(st.block_count - blocks);
                st.event(EventKind::Misdirected {
                    intended: lba,
                    actual,
                    blocks,
                });
                store(&mut self.inner, &mut st, actual, buf)
            } else {
                store(&mut self.inner, &mut st, lba, buf)
            }
        } else if accepted > 0 {
            store(
                &mut self.inner,
                &mut st,
                lba,
                &buf[..accepted as usize * bs],
            )
        } else {
            Ok(())
        };
        if result.is_ok() && accepted == blocks {
            st.writes += 1;
        }
        if cut_after {
            st.fuel = None;
            st.event(EventKind::FuelExhausted);
            st.cut_power();
            if accepted < blocks {
                return Err(SimError::with_context(
                    ErrorKind::DeviceFailed,
                    "power cut (fuel exhausted) during write",
                ));
            }
        }
        result
    }

    fn flush(&mut self) -> Result<(), SimError> {
        let mut st = lock(&self.state);
        st.begin_op();
        settle(&mut self.inner, &mut st)?;
        st.gate()?;
        destage(&mut self.inner, &mut st, 0)?;
        self.inner.flush().map_err(Into::into)
    }

    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), SimError> {
        let mut st = lock(&self.state);
        st.begin_op();
        settle(&mut self.inner, &mut st)?;
        check_range(st.block_count, lba, blocks)?;
        st.gate()?;
        // Cached writes to the range are still destaged later: the blocks then read their
        // pre-trim content, which trim allows.
        self.inner.trim(lba, blocks).map_err(Into::into)
    }
}
