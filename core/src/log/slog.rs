//! A pool's dedicated intent-log device (ZFS's SLOG, a RAID controller's protected write-back
//! cache): an SSD, NVMe or NVRAM/FRAM device that takes the intent log's records and flush
//! marks, so that a flush waits for one fast device instead of `m + 1` members. Stripes are
//! still written whole to the members; the device never holds data the members lack for
//! longer than the open stripe's life.
//!
//! Its layout is a member's label area: two superblock copies (role [`crate::format::Role::Log`]),
//! the root slots (unused), then the intent-log ring of the pool's `zil_slots` and the flush-mark
//! slots, so records and marks are read with the same code as the members' rings.
//!
//! Its failure loses nothing: records live on it only while the open stripe's bytes are also
//! in RAM, and the flush that finds it failed writes them again to the members' rings. The pool
//! records the failure in its configuration, and import then does not wait for it.

use raidcore_hal::{BlockDevice, ErrorKind};

use crate::format::SECTOR;
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
}

impl<D: BlockDevice> LogDevice<D> {
    /// A working log device `disk` with GUID `guid`.
    pub fn new(disk: D, guid: u64, retries: u8) -> Self {
        LogDevice {
            disk: Some(disk),
            guid,
            failed: false,
            failed_by: None,
            retries,
        }
    }

    /// Whether records may go to it.
    pub fn online(&self) -> bool {
        !self.failed && self.disk.is_some()
    }

    /// Runs `op` on the device with retries. An error other than a host condition
    /// ([`ErrorKind::is_host_condition`]: the host's file system, not the device) fails it.
    fn io(&mut self, op: impl FnMut(&mut D) -> Result<(), D::Error>) -> Result<(), ErrorKind> {
        let mut op = op;
        let Some(disk) = self.disk.as_mut().filter(|_| !self.failed) else {
            return Err(ErrorKind::DeviceFailed);
        };
        let (r, _) = with_retries(self.retries, || op(disk));
        if let Err(kind) = r
            && !kind.is_host_condition()
        {
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

    /// Its blocks (0 when it is not here).
    pub fn block_count(&self) -> u64 {
        self.disk.as_ref().map_or(0, BlockDevice::block_count)
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
