//! A pool's dedicated intent-log device (ZFS's SLOG, a RAID controller's protected write-back
//! cache): an SSD, NVMe or NVRAM/FRAM device that takes the intent log's records and flush
//! marks, so that a flush waits for one fast device instead of `m + 1` members. Stripes are
//! still written whole to the members; the device never holds data the members lack for
//! longer than the open stripe's life.
//!
//! Its layout is a member's label area: two superblock copies (role [`crate::format::Role::Log`]),
//! the root slots (unused), then an intent-log ring and the two flush-mark slots after it, so
//! records and marks are read with the same code as the members' rings. Its ring fills the
//! device, from a member's (`zil_slots`) up to [`LOG_DEVICE_RING_MAX`] slots, and its length
//! is recorded in the configuration when the device is added ([`ring_slots_for`]): import
//! refuses a device too short for it.
//!
//! Its failure loses nothing: records live on it only while the open stripe's bytes are also
//! in RAM, and the flush that finds it failed writes them again to the members' rings. Every
//! flush flushes it, even with nothing new to log, so a device that died quietly is found
//! while those bytes are still in RAM. The pool records the failure in its configuration, and
//! import then does not wait for it. A power cut after it died and before a flush found out
//! loses the flushes only it held (one device, as ZFS's single SLOG; a mirrored pair is not
//! built).

use raidcore_hal::{BlockDevice, ErrorKind};

use super::zil::LOG_DEVICE_RING_MAX;
use crate::format::{FLUSH_MARK_SLOTS, ROOT_SLOTS, SECTOR, SLOT_BYTES};
use crate::raid::with_retries;

/// [`super::zil::ZilRef::disk`] of a record on the log device (members are 0..32).
pub(crate) const ON_LOG_DEVICE: u8 = u8::MAX;

/// A dedicated intent-log device and its state.
#[derive(Debug)]
pub(crate) struct LogDevice<D> {
    /// The device; `None` when the configuration names one that is not here (a forced import
    /// without it).
    pub disk: Option<D>,
    /// Its GUID, as the superblocks record it.
    pub guid: u64,
    /// Failed under I/O since the pool opened, or recorded failed: nothing is written to it.
    pub failed: bool,
    /// The error that failed it, until the pool records the failure.
    pub failed_by: Option<ErrorKind>,
    /// Retries of a retryable error, as for members ([`crate::raid::ArrayConfig::retries`]).
    pub retries: u8,
    /// Slots of its intent-log ring ([`ring_slots_for`], recorded in the configuration).
    pub ring_slots: u32,
}

/// Ring slots of a log device of `blocks` blocks of `block_bytes`: the slots after its label
/// area less the flush-mark slots, at most [`LOG_DEVICE_RING_MAX`] (import reads the whole
/// ring), and at least a member's `member_ring` (else 0: too small).
#[must_use]
pub(crate) fn ring_slots_for(blocks: u64, block_bytes: usize, member_ring: u32) -> u32 {
    let per = (SLOT_BYTES / block_bytes.max(1)) as u64;
    let slots = blocks / per.max(1);
    let ring = slots.saturating_sub(2 + u64::from(ROOT_SLOTS) + u64::from(FLUSH_MARK_SLOTS));
    let ring = ring.min(u64::from(LOG_DEVICE_RING_MAX)) as u32;
    if ring < member_ring { 0 } else { ring }
}

/// Blocks (of `block_bytes`) a log device with a ring of `ring_slots` spans: labels, ring,
/// flush marks.
#[must_use]
pub(crate) fn blocks_for_ring(ring_slots: u32, block_bytes: usize) -> u64 {
    let per = (SLOT_BYTES / block_bytes.max(1)) as u64;
    (2 + u64::from(ROOT_SLOTS) + u64::from(ring_slots) + u64::from(FLUSH_MARK_SLOTS)) * per
}

impl<D: BlockDevice> LogDevice<D> {
    /// A working log device `disk` with GUID `guid` and a ring of `ring_slots`.
    pub fn new(disk: D, guid: u64, retries: u8, ring_slots: u32) -> Self {
        LogDevice {
            disk: Some(disk),
            guid,
            failed: false,
            failed_by: None,
            retries,
            ring_slots,
        }
    }

    /// Whether records may go to it.
    pub fn online(&self) -> bool {
        !self.failed && self.disk.is_some()
    }

    /// Runs `op` on the device with retries; an error that remains fails it. A host condition
    /// ([`ErrorKind::is_host_condition`]: the file system under a file-backed device filled
    /// up) fails it too: failing it loses nothing and costs no redundancy (the members' rings
    /// take the intent log), where keeping it would fall back on every flush unseen; the
    /// event names the cause, and `add_log_device` puts it back once the host is fixed.
    fn io(&mut self, mut op: impl FnMut(&mut D) -> Result<(), D::Error>) -> Result<(), ErrorKind> {
        let Some(disk) = self.disk.as_mut().filter(|_| !self.failed) else {
            return Err(ErrorKind::DeviceFailed);
        };
        let (r, _) = with_retries(self.retries, || op(disk));
        if let Err(kind) = r {
            self.failed = true;
            self.failed_by = Some(kind);
        }
        r
    }

    /// Reads `buf` at block `lba`. A read error fails nothing (import reads past an
    /// unreadable slot as it does on members).
    pub fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ErrorKind> {
        let Some(disk) = self.disk.as_mut().filter(|_| !self.failed) else {
            return Err(ErrorKind::DeviceFailed);
        };
        with_retries(self.retries, || disk.read(lba, buf)).0
    }

    /// Its block size in bytes.
    pub fn block_bytes(&self) -> usize {
        self.disk
            .as_ref()
            .map_or(SECTOR, |d| d.block_size().bytes())
    }

    /// Writes `buf` at block `lba`.
    pub fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), ErrorKind> {
        self.io(|d| d.write(lba, buf))
    }

    /// Flushes its write cache.
    pub fn flush(&mut self) -> Result<(), ErrorKind> {
        self.io(BlockDevice::flush)
    }
}
