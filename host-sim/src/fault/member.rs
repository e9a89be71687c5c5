//! The simulator's standard pool member: a disk, fault injection inside, timing outside.

use super::{FaultConfig, FaultHandle, FaultyDisk};
use crate::clock::{IoTracker, SimClock};
use crate::disk::SimDisk;
use crate::model::{AnyModel, TimedDisk, TimingHandle};

/// One simulated pool member: `TimedDisk<FaultyDisk<SimDisk>, AnyModel>`. Every member of a
/// pool has this one type whatever its medium (memory, file, null) and model.
pub type SimMember = TimedDisk<FaultyDisk<SimDisk>, AnyModel>;

/// The handles of one [`SimMember`], to reach it after the pool owns it.
#[derive(Debug, Clone)]
pub struct MemberHandles {
    /// Fault injection and its event log.
    pub fault: FaultHandle,
    /// Timeline and counters.
    pub timing: TimingHandle,
}

/// Builds a [`SimMember`] over `disk`, timed by `model` on `clock`, reporting completions to
/// `tracker`, with faults drawn from `seed` under `config`; the fault handle is connected to the
/// timing handle (so [`super::Fault::Slow`] works) and time triggers use `clock`.
pub fn sim_member(
    disk: impl Into<SimDisk>,
    model: impl Into<AnyModel>,
    seed: u64,
    config: FaultConfig,
    clock: &SimClock,
    tracker: &IoTracker,
) -> (SimMember, MemberHandles) {
    let faulty = FaultyDisk::with_config(disk.into(), seed, config).with_clock(clock);
    let fault = faulty.handle();
    let member = TimedDisk::new(faulty, model.into(), clock).with_tracker(tracker);
    let timing = member.handle();
    fault.connect_timing(&timing);
    (member, MemberHandles { fault, timing })
}
