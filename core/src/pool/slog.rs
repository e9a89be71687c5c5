//! The pool's dedicated intent-log device: adding and removing it, and what status shows of
//! it. Its records and flush marks are written and read by the log (`crate::log::slog`,
//! `crate::log::zil`); this file only decides membership.

use raidcore_hal::BlockDevice;

use super::{AdminError, Health, Pool};
use crate::error::IoError;
use crate::format::{FLUSH_MARK_SLOTS, SLOT_BYTES};
use crate::log::slog::{LogDevice, ON_LOG_DEVICE, blocks_for_ring, ring_slots_for};
use crate::raid::ArrayError;

/// What [`super::Status::log_device`] shows of the pool's dedicated intent-log device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogDeviceStatus {
    /// Its GUID.
    pub guid: u64,
    /// Where it stands.
    pub state: LogDeviceState,
}

/// Where a pool's dedicated intent-log device stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LogDeviceState {
    /// Flushes go to it.
    Online,
    /// It failed (under I/O, or a forced import went on without it) and the configuration
    /// records so: the intent log is on the members' rings, as in a pool without one, and
    /// nothing was lost.
    Failed,
    /// The configuration names it working and it was not given: only a look
    /// ([`super::Pool::peek`]) opens a pool so; an import refuses it unless forced.
    Missing,
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Gives the pool a dedicated intent-log device (a SLOG, as `zpool add POOL log DEV`): a
    /// fast device (SSD, NVMe, NVRAM) that takes the intent log's records and flush marks,
    /// so a flush or FUA write completes once it holds the data; stripes are still written
    /// whole to the members. It replaces a log device that failed. `disk` needs room for the
    /// label area and a member's intent-log ring (`zil_slots` 4 KiB slots plus ten); its ring
    /// fills the device, up to 4096 slots (16 MiB), and is zeroed first, so nothing another
    /// pool or an earlier use left there is replayed.
    ///
    /// Errors: [`AdminError::Faulted`]; [`AdminError::LogDevicePresent`] when a working one
    /// is attached; [`AdminError::DiskMismatch`] for a device too small or with blocks larger
    /// than 4 KiB; [`AdminError::Io`] when zeroing it or writing the configuration failed.
    pub fn add_log_device(&mut self, mut disk: D) -> Result<(), AdminError> {
        if self.health() == Health::Faulted {
            return Err(AdminError::Faulted);
        }
        if self.members.slog.as_ref().is_some_and(LogDevice::online) {
            return Err(AdminError::LogDevicePresent);
        }
        let bs = disk.block_size().bytes();
        let member_ring = self.log.zil_slots().saturating_sub(FLUSH_MARK_SLOTS);
        let ring = ring_slots_for(disk.block_count(), bs, member_ring);
        if !SLOT_BYTES.is_multiple_of(bs) || ring == 0 {
            return Err(AdminError::DiskMismatch);
        }
        let zeros = [0u8; SLOT_BYTES];
        let per = (SLOT_BYTES / bs) as u64;
        let need = blocks_for_ring(ring, bs);
        let device = |kind| {
            IoError::Device(ArrayError::Disk {
                disk: ON_LOG_DEVICE,
                kind,
            })
        };
        for lba in (0..need).step_by(per as usize) {
            disk.write(lba, &zeros)
                .map_err(|e| device(raidcore_hal::Error::kind(&e)))?;
        }
        disk.flush()
            .map_err(|e| device(raidcore_hal::Error::kind(&e)))?;
        let guid = self.members.new_guid();
        let retries = self.cfg.array.retries;
        self.members.slog = Some(LogDevice::new(disk, guid, retries, ring));
        self.write_config()?;
        Ok(())
    }

    /// Takes the dedicated intent-log device out of the pool and returns its disk (`None`
    /// when it was not attached), labels erased. The open stripe's bytes it held records of
    /// are logged on the members' rings first (a flush), so nothing depends on it after.
    ///
    /// Errors: [`AdminError::NoLogDevice`]; [`AdminError::Io`] when that flush or writing the
    /// configuration failed (the device then stays).
    pub fn remove_log_device(&mut self) -> Result<Option<D>, AdminError> {
        let Some(dev) = self.members.slog.take() else {
            return Err(AdminError::NoLogDevice);
        };
        self.log.relog_open_stripe();
        let r = self.flush_all();
        if let Err(e) = self.settled(r) {
            self.members.slog = Some(dev);
            return Err(e.into());
        }
        if let Err(e) = self.write_config() {
            self.members.slog = Some(dev);
            return Err(e.into());
        }
        let mut disk = dev.disk;
        if let Some(d) = disk.as_mut() {
            super::membership::erase_labels(d, d.block_size().bytes());
        }
        Ok(disk)
    }

    /// Slots of each member's intent-log area (`PoolConfig::zil_slots` as the pool was made):
    /// a log device needs at least its labels and this many 4 KiB slots.
    pub fn layout_zil_slots(&self) -> u32 {
        self.log.zil_slots()
    }

    /// The log device as [`super::Status::log_device`] shows it.
    pub(super) fn log_device_status(&self) -> Option<LogDeviceStatus> {
        self.members.slog.as_ref().map(|d| LogDeviceStatus {
            guid: d.guid,
            state: if d.online() {
                LogDeviceState::Online
            } else if d.disk.is_none() && d.failed_by.is_some() {
                LogDeviceState::Missing
            } else {
                LogDeviceState::Failed
            },
        })
    }
}
