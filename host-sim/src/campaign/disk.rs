//! The campaign's member disk: a sparse [`MemDisk`] inside a [`FaultyDisk`] (volatile write cache,
//! seeded power-cut fates, overlay faults), plus what the campaign needs on top:
//!
//! - a shared power rail ([`Rail`]) that cuts every disk of the pool at the same instant, after a
//!   chosen number of member writes in total — a power cut in the middle of an operation;
//! - lost and misdirected writes aimed at the data area (the next write at or above the first
//!   data block), so their damage is in stripes a scrub checks;
//! - a record of recent writes, so overlay faults land on blocks that hold something;
//! - a graveyard: a disk the pool drops (replaced by a spare or a new disk) leaves a snapshot of
//!   its medium behind, which may come back at a later import as a stale member.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use raidcore_hal::{BlockDevice, BlockSize, ErrorType};

use crate::disk::{MemDisk, SimError};
use crate::fault::{Fault, FaultHandle, FaultyDisk};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Member I/Os one step may issue before the watchdog calls it a hang (a rebuild or scrub
/// step, an import with its checks, a full verification all stay far below).
pub(crate) const STEP_IO_LIMIT: u64 = 2_000_000;

/// The watchdog's panic message starts with this.
pub(crate) const WATCHDOG: &str = "campaign watchdog";

#[derive(Debug, Default)]
struct RailState {
    /// Member I/Os since the step began.
    step_ios: u64,
    /// Member writes left before the cut (the write that takes it to zero is the last one).
    fuel: Option<u64>,
    /// The cut happened and nobody handled it yet.
    fired: bool,
    handles: Vec<FaultHandle>,
}

/// One power supply for every disk of a pool.
#[derive(Debug, Default)]
pub(crate) struct Rail {
    st: Mutex<RailState>,
}

impl Rail {
    /// Cuts power after `writes` more member writes (at least 1).
    pub(crate) fn arm(&self, writes: u64) {
        lock(&self.st).fuel = Some(writes.max(1));
    }

    /// Forgets an armed cut.
    pub(crate) fn disarm(&self) {
        lock(&self.st).fuel = None;
    }

    /// Whether a cut is armed and has not happened.
    pub(crate) fn armed(&self) -> bool {
        lock(&self.st).fuel.is_some()
    }

    /// Counts one member write; true if power goes right after it.
    fn on_write(&self) -> bool {
        let mut st = lock(&self.st);
        match st.fuel {
            Some(n) if n <= 1 => {
                st.fuel = None;
                true
            }
            Some(n) => {
                st.fuel = Some(n - 1);
                false
            }
            None => false,
        }
    }

    /// Cuts power on every disk at once.
    pub(crate) fn cut_all(&self) {
        let mut st = lock(&self.st);
        st.fuel = None;
        st.fired = true;
        for h in &st.handles {
            h.inject(Fault::PowerCut);
        }
    }

    /// Whether an armed cut fired (and nobody took it yet).
    pub(crate) fn fired(&self) -> bool {
        lock(&self.st).fired
    }

    /// Whether an armed cut fired; clears the flag.
    pub(crate) fn take_fired(&self) -> bool {
        std::mem::take(&mut lock(&self.st).fired)
    }

    /// Power back on every disk.
    pub(crate) fn restore_all(&self) {
        let st = lock(&self.st);
        for h in &st.handles {
            h.inject(Fault::PowerRestore);
        }
    }

    /// A new step begins (resets the watchdog).
    pub(crate) fn new_step(&self) {
        lock(&self.st).step_ios = 0;
    }

    /// Counts one member I/O; panics (caught per step, reported as a hang) past the limit.
    fn io(&self) {
        let n = {
            let mut st = lock(&self.st);
            st.step_ios += 1;
            st.step_ios
        };
        assert!(
            n <= STEP_IO_LIMIT,
            "{WATCHDOG}: one step issued more than {STEP_IO_LIMIT} member I/Os (a livelock?)"
        );
    }

    fn register(&self, h: FaultHandle) {
        lock(&self.st).handles.push(h);
    }
}

/// A disk the pool dropped (replaced it in its slot).
#[derive(Debug)]
pub(crate) struct Dropped {
    /// Its campaign id.
    pub id: u32,
    /// The disk itself: medium, write cache, overlay faults (bit rot stays bit rot).
    pub disk: FaultyDisk<MemDisk>,
    /// Dropped while the power was off: it never left the enclosure, so it is back at the next
    /// import (an operator only pulls disks while the power is on).
    pub during_cut: bool,
}

/// Snapshots of dropped disks.
pub(crate) type Graveyard = Arc<Mutex<Vec<Dropped>>>;

/// Recent writes remembered per area.
const RECENT: usize = 32;

/// A member disk of a campaign pool (see the module docs).
#[derive(Debug)]
pub struct CampDisk {
    id: u32,
    inner: FaultyDisk<MemDisk>,
    handle: FaultHandle,
    rail: Arc<Rail>,
    yard: Graveyard,
    data_start: u64,
    recent_data: VecDeque<(u64, u32)>,
    recent_label: VecDeque<(u64, u32)>,
    high_water: u64,
    lose_next: bool,
    misdirect_next: Option<u64>,
    /// Silent write faults that took effect (lost or misdirected data-area writes).
    pub(crate) silent_done: u32,
}

impl CampDisk {
    pub(crate) fn new(
        id: u32,
        inner: FaultyDisk<MemDisk>,
        rail: &Arc<Rail>,
        yard: &Graveyard,
        data_start: u64,
    ) -> Self {
        let handle = inner.handle();
        rail.register(handle.clone());
        CampDisk {
            id,
            inner,
            handle,
            rail: rail.clone(),
            yard: yard.clone(),
            data_start,
            recent_data: VecDeque::new(),
            recent_label: VecDeque::new(),
            high_water: 0,
            lose_next: false,
            misdirect_next: None,
            silent_done: 0,
        }
    }

    /// The campaign's number for this disk (unique within a seed).
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Fault injection on this disk.
    #[must_use]
    pub fn handle(&self) -> &FaultHandle {
        &self.handle
    }

    /// A copy of what the medium holds now (writes still in the volatile cache are not on it),
    /// as a copy of the disk's image would be.
    pub(crate) fn medium_copy(&mut self) -> Option<MemDisk> {
        self.inner.inner_mut().ok().map(|m| m.snapshot())
    }

    /// Puts `medium` (an older [`CampDisk::medium_copy`]) back in place of what the disk
    /// holds; overlay faults stay where they are.
    pub(crate) fn put_back(&mut self, medium: MemDisk) {
        if let Ok(m) = self.inner.inner_mut() {
            *m = medium;
        }
    }

    /// Loses the next write that starts in the data area.
    pub(crate) fn arm_lose(&mut self) {
        self.lose_next = true;
    }

    /// Sends the next write that starts in the data area to `to` instead.
    pub(crate) fn arm_misdirect(&mut self, to: u64) {
        self.misdirect_next = Some(to);
    }

    /// A block that was written recently, chosen by `pick`: in the data area, or (with `label`)
    /// below it (superblocks, roots, intent log). `None` if nothing was written there yet.
    pub(crate) fn pick_block(&self, pick: u32, label: bool) -> Option<u64> {
        let list = if label {
            &self.recent_label
        } else {
            &self.recent_data
        };
        if list.is_empty() {
            return None;
        }
        let (lba, blocks) = list[(pick as usize / 7) % list.len()];
        Some(lba + u64::from(pick) % u64::from(blocks.max(1)))
    }

    /// A data-area block at or below the highest block written (for misdirected writes).
    pub(crate) fn pick_data_block(&self, pick: u32) -> u64 {
        let lo = self.data_start;
        let hi = self.high_water.max(lo + 1);
        lo + u64::from(pick) % (hi - lo)
    }
}

impl Drop for CampDisk {
    fn drop(&mut self) {
        let during_cut = !self.handle.is_powered();
        // A one-block stand-in takes the disk's place in `self`, which is going away.
        let Ok(stub) = MemDisk::new(BlockSize::B4096, 1) else {
            return;
        };
        let disk = std::mem::replace(&mut self.inner, FaultyDisk::new(stub, 0));
        let mut y = lock(&self.yard);
        y.retain(|d| d.id != self.id);
        y.push(Dropped {
            id: self.id,
            disk,
            during_cut,
        });
        // Keep the newest few of those pulled with the power on.
        while y.iter().filter(|d| !d.during_cut).count() > 4 {
            if let Some(i) = y.iter().position(|d| !d.during_cut) {
                y.remove(i);
            }
        }
    }
}

impl ErrorType for CampDisk {
    type Error = SimError;
}

impl BlockDevice for CampDisk {
    fn block_size(&self) -> BlockSize {
        self.inner.block_size()
    }

    fn block_count(&self) -> u64 {
        self.inner.block_count()
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SimError> {
        self.rail.io();
        self.inner.read(lba, buf)
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), SimError> {
        self.rail.io();
        let last = self.rail.on_write();
        let mut armed = false;
        if lba >= self.data_start && self.handle.is_powered() && !self.handle.is_failed() {
            if self.lose_next {
                self.lose_next = false;
                self.handle.inject(Fault::LoseWrite { lba: Some(lba) });
                armed = true;
            } else if let Some(to) = self.misdirect_next.take() {
                let to = to.max(self.data_start);
                self.handle.inject(Fault::Misdirect {
                    from: Some(lba),
                    to,
                });
                armed = true;
            }
        }
        let r = self.inner.write(lba, buf);
        let bs = self.inner.block_size().bytes();
        let blocks = (buf.len() / bs) as u32;
        if r.is_ok() {
            if armed {
                self.silent_done += 1;
            }
            let list = if lba >= self.data_start {
                &mut self.recent_data
            } else {
                &mut self.recent_label
            };
            list.push_back((lba, blocks));
            if list.len() > RECENT {
                list.pop_front();
            }
            self.high_water = self.high_water.max(lba + u64::from(blocks));
        } else if armed {
            // The write never reached the fault: drop the pending lost/misdirected write so it
            // cannot hit a later write unaccounted (this also clears the disk's other overlay
            // faults, which only makes it healthier than the campaign assumes).
            self.handle.inject(Fault::Repair);
        }
        if last {
            self.rail.cut_all();
        }
        r
    }

    fn flush(&mut self) -> Result<(), SimError> {
        self.rail.io();
        self.inner.flush()
    }

    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), SimError> {
        self.inner.trim(lba, blocks)
    }
}
