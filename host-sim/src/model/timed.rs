//! [`TimedDisk`]: adds virtual time to any disk.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use raidcore_hal::{BlockDevice, BlockSize, Error as _, ErrorKind, ErrorType};

use super::{DeviceModel, IoOp, OpKind, Service};
use crate::clock::{IoTracker, NS_PER_S, SimClock};

/// What a timed-out operation costs when [`TimingHandle::set_timeout_ns`] was not called:
/// 30 s, the default SCSI command timeout of Linux (`/sys/block/sdX/device/timeout`).
pub const DEFAULT_TIMEOUT_NS: u64 = 30 * NS_PER_S;

/// Counters of one timed disk. Bytes count only operations that succeeded; every operation
/// counts in its kind, failed ones in `errors` too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskStats {
    /// Read operations.
    pub reads: u64,
    /// Write operations.
    pub writes: u64,
    /// Flush operations.
    pub flushes: u64,
    /// Trim operations.
    pub trims: u64,
    /// Operations that returned an error.
    pub errors: u64,
    /// Bytes read successfully.
    pub bytes_read: u64,
    /// Bytes written successfully.
    pub bytes_written: u64,
    /// Total time the device was busy, in nanoseconds.
    pub busy_ns: u64,
}

impl DiskStats {
    /// All operations, of every kind.
    #[must_use]
    pub const fn ops(&self) -> u64 {
        self.reads + self.writes + self.flushes + self.trims
    }
}

/// A degraded ("slow") disk: every service time `t` becomes
/// `t * factor_permille / 1000 + extra_ns`. Used by fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slowdown {
    /// Multiplier in thousandths (1000 = normal speed, 5000 = five times slower).
    pub factor_permille: u32,
    /// Fixed delay added to every operation, in nanoseconds.
    pub extra_ns: u64,
}

impl Slowdown {
    /// Normal speed.
    pub const NONE: Slowdown = Slowdown {
        factor_permille: 1000,
        extra_ns: 0,
    };

    /// `ns` as slowed down.
    #[must_use]
    pub fn apply(&self, ns: u64) -> u64 {
        let scaled = u128::from(ns) * u128::from(self.factor_permille) / 1000;
        u64::try_from(scaled)
            .unwrap_or(u64::MAX)
            .saturating_add(self.extra_ns)
    }
}

impl Default for Slowdown {
    fn default() -> Self {
        Self::NONE
    }
}

#[derive(Debug)]
struct TimingState {
    busy_until_ns: u64,
    last_completion_ns: u64,
    stats: DiskStats,
    slowdown: Slowdown,
    timeout_ns: u64,
}

/// A cloneable handle on one [`TimedDisk`]'s timeline and counters, usable after the disk was
/// handed to the engine.
#[derive(Debug, Clone)]
pub struct TimingHandle {
    state: Arc<Mutex<TimingState>>,
}

impl TimingHandle {
    fn lock(&self) -> MutexGuard<'_, TimingState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The disk's counters.
    #[must_use]
    pub fn stats(&self) -> DiskStats {
        self.lock().stats
    }

    /// Zeroes the counters (the timeline is kept).
    pub fn reset_stats(&self) {
        self.lock().stats = DiskStats::default();
    }

    /// Virtual time at which the disk finishes the work it has been given, in nanoseconds.
    #[must_use]
    pub fn busy_until_ns(&self) -> u64 {
        self.lock().busy_until_ns
    }

    /// Completion time of the last operation, in nanoseconds.
    #[must_use]
    pub fn last_completion_ns(&self) -> u64 {
        self.lock().last_completion_ns
    }

    /// The current slowdown.
    #[must_use]
    pub fn slowdown(&self) -> Slowdown {
        self.lock().slowdown
    }

    /// Makes the disk slow from its next operation on ([`Slowdown::NONE`] restores it).
    pub fn set_slowdown(&self, slowdown: Slowdown) {
        self.lock().slowdown = slowdown;
    }

    /// What an operation that fails with [`ErrorKind::Timeout`] costs, in nanoseconds.
    #[must_use]
    pub fn timeout_ns(&self) -> u64 {
        self.lock().timeout_ns
    }

    /// Sets what a timed-out operation costs, in nanoseconds.
    pub fn set_timeout_ns(&self, ns: u64) {
        self.lock().timeout_ns = ns;
    }
}

/// Any disk plus a [`DeviceModel`], on a [`SimClock`].
///
/// Each timed disk has its own queue: an operation submitted at `now` (the clock's time when
/// the engine calls the disk) starts at `max(now, busy_until)`, keeps the disk busy for the
/// model's busy time and completes at start + latency. The clock is never advanced here, so the
/// members of a stripe, called one after another by the engine, work in parallel in virtual
/// time; an operation that depends on another disk's result (read-modify-write across disks) is
/// not delayed by it, an approximation the log-structured engine rarely meets. Completion times
/// go to the [`IoTracker`] if one is attached.
///
/// Errors cost: nothing for [`ErrorKind::OutOfRange`], [`ErrorKind::Misaligned`] (never sent)
/// and [`ErrorKind::DeviceFailed`] (answered at once); [`TimingHandle::timeout_ns`] for
/// [`ErrorKind::Timeout`]; the model's normal time for the rest. Errors pass through unchanged.
///
/// Wrap fault injection inside timing (`TimedDisk<FaultyDisk<D>, M>`) so injected timeouts cost
/// time and a slow-disk fault reaches this wrapper's [`TimingHandle`].
#[derive(Debug)]
pub struct TimedDisk<D, M> {
    inner: D,
    model: M,
    clock: SimClock,
    tracker: Option<IoTracker>,
    handle: TimingHandle,
}

impl<D: BlockDevice, M: DeviceModel> TimedDisk<D, M> {
    /// `inner` timed by `model` on `clock`, idle at time 0.
    pub fn new(inner: D, model: M, clock: &SimClock) -> Self {
        Self {
            inner,
            model,
            clock: clock.clone(),
            tracker: None,
            handle: TimingHandle {
                state: Arc::new(Mutex::new(TimingState {
                    busy_until_ns: 0,
                    last_completion_ns: 0,
                    stats: DiskStats::default(),
                    slowdown: Slowdown::NONE,
                    timeout_ns: DEFAULT_TIMEOUT_NS,
                })),
            },
        }
    }

    /// Reports every completion to `tracker` (shared by the disks of a pool).
    #[must_use]
    pub fn with_tracker(mut self, tracker: &IoTracker) -> Self {
        self.tracker = Some(tracker.clone());
        self
    }

    /// A handle on this disk's timeline and counters.
    #[must_use]
    pub fn handle(&self) -> TimingHandle {
        self.handle.clone()
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The wrapped disk.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped disk, mutably (operations on it bypass the timing).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The wrapped disk.
    pub fn into_inner(self) -> D {
        self.inner
    }

    fn timed(
        &mut self,
        kind: OpKind,
        lba: u64,
        len_bytes: u64,
        op: impl FnOnce(&mut D) -> Result<(), D::Error>,
    ) -> Result<(), D::Error> {
        let now = self.clock.now_ns();
        let result = op(&mut self.inner);
        let bs = self.inner.block_size().bytes() as u64;
        let io = IoOp {
            kind,
            offset_bytes: lba.saturating_mul(bs),
            len_bytes,
            capacity_bytes: self.inner.block_count().saturating_mul(bs),
        };
        // The inner call is over: no lock is held while it runs, so a fault wrapper inside may
        // use this disk's handle.
        let mut st = self.handle.lock();
        let start = now.max(st.busy_until_ns);
        let (service, slowed) = match &result {
            Ok(()) => (self.model.service(&io, start), true),
            Err(e) => match e.kind() {
                ErrorKind::OutOfRange | ErrorKind::Misaligned | ErrorKind::DeviceFailed => {
                    (Service::default(), false)
                }
                ErrorKind::Timeout => (Service::serial(st.timeout_ns), true),
                _ => (self.model.service(&io, start), true),
            },
        };
        let (busy, latency) = if slowed {
            let busy = st.slowdown.apply(service.busy_ns);
            (busy, st.slowdown.apply(service.latency_ns).max(busy))
        } else {
            (service.busy_ns, service.latency_ns.max(service.busy_ns))
        };
        let completion = start.saturating_add(latency);
        st.busy_until_ns = start.saturating_add(busy);
        st.last_completion_ns = completion;
        let s = &mut st.stats;
        s.busy_ns = s.busy_ns.saturating_add(busy);
        match kind {
            OpKind::Read => s.reads += 1,
            OpKind::Write => s.writes += 1,
            OpKind::Flush => s.flushes += 1,
            OpKind::Trim => s.trims += 1,
        }
        match (&result, kind) {
            (Err(_), _) => s.errors += 1,
            (Ok(()), OpKind::Read) => s.bytes_read += len_bytes,
            (Ok(()), OpKind::Write) => s.bytes_written += len_bytes,
            (Ok(()), _) => {}
        }
        drop(st);
        if let Some(t) = &self.tracker {
            t.record(completion);
        }
        result
    }
}

impl<D: BlockDevice, M> ErrorType for TimedDisk<D, M> {
    type Error = D::Error;
}

impl<D: BlockDevice, M: DeviceModel> BlockDevice for TimedDisk<D, M> {
    fn block_size(&self) -> BlockSize {
        self.inner.block_size()
    }

    fn block_count(&self) -> u64 {
        self.inner.block_count()
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        let len = buf.len() as u64;
        self.timed(OpKind::Read, lba, len, |d| d.read(lba, buf))
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), D::Error> {
        let len = buf.len() as u64;
        self.timed(OpKind::Write, lba, len, |d| d.write(lba, buf))
    }

    fn flush(&mut self) -> Result<(), D::Error> {
        self.timed(OpKind::Flush, 0, 0, BlockDevice::flush)
    }

    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), D::Error> {
        let len = blocks.saturating_mul(self.inner.block_size().bytes() as u64);
        self.timed(OpKind::Trim, lba, len, |d| d.trim(lba, blocks))
    }
}
