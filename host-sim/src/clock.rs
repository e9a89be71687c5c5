//! Virtual time: a shared nanosecond clock and a tracker of I/O completion times.
//!
//! Nothing in the simulator reads the wall clock. Time only moves when the caller (a workload
//! runner, a test) moves it, so every run replays exactly. Timed disks
//! ([`crate::model::TimedDisk`]) read the clock to know when an operation is submitted and report
//! when it completes; they never advance the clock themselves, which is what lets the members of a
//! stripe work in parallel in virtual time although the engine calls them one after another.
//!
//! Both types are cheap cloneable handles (`Arc` + atomics), so a disk stack stays `Send` and can
//! be moved to the thread that serves it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Nanoseconds in one microsecond.
pub const NS_PER_US: u64 = 1_000;
/// Nanoseconds in one millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds in one second.
pub const NS_PER_S: u64 = 1_000_000_000;

/// A shared virtual clock, in nanoseconds since the start of the simulation. Clones share the
/// same time. Time never goes backwards.
#[derive(Debug, Clone, Default)]
pub struct SimClock {
    now_ns: Arc<AtomicU64>,
}

impl SimClock {
    /// A clock at time 0.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The current virtual time, in nanoseconds.
    #[must_use]
    pub fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }

    /// Moves time forward by `delta_ns` nanoseconds (saturating); returns the new time.
    pub fn advance_ns(&self, delta_ns: u64) -> u64 {
        let old = self
            .now_ns
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(delta_ns))
            })
            .unwrap_or_else(|t| t);
        old.saturating_add(delta_ns)
    }

    /// Moves time forward to `t_ns` if that is later than now (never backwards); returns the new
    /// time, `max(now, t_ns)`.
    pub fn advance_to_ns(&self, t_ns: u64) -> u64 {
        let old = self.now_ns.fetch_max(t_ns, Ordering::SeqCst);
        old.max(t_ns)
    }
}

/// Records the latest completion time of the operations issued since it was last reset, shared
/// by every timed disk it is attached to. A workload runner resets it when a client request
/// starts, lets the engine issue the disk operations, then reads [`IoTracker::completion_ns`]:
/// that is when the client request completed in virtual time.
#[derive(Debug, Clone, Default)]
pub struct IoTracker {
    inner: Arc<TrackerInner>,
}

#[derive(Debug, Default)]
struct TrackerInner {
    since_ns: AtomicU64,
    latest_ns: AtomicU64,
    ops: AtomicU64,
}

impl IoTracker {
    /// A tracker reset at time 0.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a new measurement at `now_ns`: forgets earlier completions and the op count.
    pub fn reset(&self, now_ns: u64) {
        self.inner.since_ns.store(now_ns, Ordering::SeqCst);
        self.inner.latest_ns.store(now_ns, Ordering::SeqCst);
        self.inner.ops.store(0, Ordering::SeqCst);
    }

    /// Records one operation completing at `completion_ns` (called by timed disks).
    pub fn record(&self, completion_ns: u64) {
        self.inner
            .latest_ns
            .fetch_max(completion_ns, Ordering::SeqCst);
        self.inner.ops.fetch_add(1, Ordering::SeqCst);
    }

    /// The latest completion time recorded since the last reset, or the reset time if no
    /// operation was recorded, in nanoseconds.
    #[must_use]
    pub fn completion_ns(&self) -> u64 {
        self.inner.latest_ns.load(Ordering::SeqCst)
    }

    /// The time of the last reset, in nanoseconds.
    #[must_use]
    pub fn since_ns(&self) -> u64 {
        self.inner.since_ns.load(Ordering::SeqCst)
    }

    /// `completion_ns() - since_ns()`: how long the operations since the reset took, in
    /// nanoseconds.
    #[must_use]
    pub fn elapsed_ns(&self) -> u64 {
        self.completion_ns().saturating_sub(self.since_ns())
    }

    /// Number of operations recorded since the last reset.
    #[must_use]
    pub fn ops(&self) -> u64 {
        self.inner.ops.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_moves_forward_only() {
        let c = SimClock::new();
        let c2 = c.clone();
        assert_eq!(c.advance_ns(5), 5);
        assert_eq!(c2.advance_to_ns(3), 5);
        assert_eq!(c2.advance_to_ns(9), 9);
        assert_eq!(c.now_ns(), 9);
        assert_eq!(c.advance_ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn tracker_keeps_latest() {
        let t = IoTracker::new();
        t.reset(100);
        assert_eq!(t.completion_ns(), 100);
        t.record(250);
        t.record(180);
        assert_eq!(t.completion_ns(), 250);
        assert_eq!(t.elapsed_ns(), 150);
        assert_eq!(t.ops(), 2);
        t.reset(300);
        assert_eq!((t.completion_ns(), t.ops()), (300, 0));
    }
}
