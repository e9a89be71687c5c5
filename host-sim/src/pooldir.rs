//! Pool directories under the simulated hardware. The directory itself (images, description,
//! locks, create/open/fail/replace) is the product's ([`raidcore_host::dir::PoolDir`]); here
//! each image is wrapped into the simulator's standard member ([`SimMember`]: fault injection
//! inside, a device model on a virtual clock outside) by [`SimMembers`], so the same pool value
//! serves command-line management, workloads in virtual time and the NBD export.
//!
//! [`MemPool`] builds the same pool on memory disks instead, with no directory (for benchmarks
//! that compare against RAM-backed servers).

use std::path::PathBuf;

use raidcore_host::dir::create::{check_layout, create_pool};
// The directory's names, layout and errors are the product's (`raidcore_host::dir`).
pub use raidcore_host::dir::{CreateOptions, DirError};
use raidcore_host::dir::{DirMeta, HostPool, Members, PoolDir, image_name};
use raidcore_host::nbd::pool::ServedPool;

use crate::clock::{IoTracker, SimClock};
use crate::disk::{FileDisk, MemDisk, SimDisk};
use crate::fault::{FaultConfig, MemberHandles, SimMember, sim_member};
use crate::model::ModelKind;

/// The pool type the simulator uses: [`SimMember`] disks, a `Vec<u8>` arena.
pub type SimPool = HostPool<SimMember>;

/// A pool open on the images of a directory, with the simulated hardware under it
/// ([`SimMembers`]: clock, tracker, handles).
pub type DirPool = PoolDir<SimMembers>;

/// Parses a device model name: the names of [`ModelKind`] and the short forms `memory`
/// (no latency), `ssd`, `nvme`, `sd` (`nvram` has no short form).
pub fn parse_model(s: &str) -> Result<ModelKind, String> {
    match s.to_ascii_lowercase().as_str() {
        "memory" | "mem" | "instant" | "none" => Ok(ModelKind::Instant),
        "hdd" | "hdd10k" => Ok(ModelKind::Hdd10k),
        "ssd" | "sata-ssd" => Ok(ModelKind::SataSsd),
        "nvme" | "nvme-ssd" => Ok(ModelKind::NvmeSsd),
        "sd" | "sd-card" => Ok(ModelKind::SdCard),
        "nvram" => Ok(ModelKind::Nvram),
        _ => Err(format!(
            "unknown device model {s:?} (expected memory, hdd10k, ssd, nvme, sd or nvram)"
        )),
    }
}

/// The command-line name of a model (`memory`, `hdd10k`, `ssd`, `nvme`, `sd`, `nvram`).
#[must_use]
pub const fn model_name(m: ModelKind) -> &'static str {
    match m {
        ModelKind::Instant => "memory",
        ModelKind::Hdd10k => "hdd10k",
        ModelKind::SataSsd => "ssd",
        ModelKind::NvmeSsd => "nvme",
        ModelKind::SdCard => "sd",
        ModelKind::Nvram => "nvram",
    }
}

/// How to build the simulated hardware under a pool directory's images.
#[derive(Debug, Clone, Copy)]
pub struct HwOptions {
    /// Device model; `None`: the one recorded in the directory (or, for a new pool, none:
    /// `memory`).
    pub model: Option<ModelKind>,
    /// Seed of the members' fault generators (member `i` gets `seed + i`).
    pub seed: u64,
    /// `flush` of an image calls `fdatasync(2)` (see
    /// [`FileDiskOptions::sync_on_flush`](crate::disk::FileDiskOptions::sync_on_flush)). Off
    /// for simulations whose images are thrown away.
    pub sync_on_flush: bool,
    /// Fault-injection behaviour of every member. The default here has no volatile cache: the
    /// simulated drives have their write cache off, like [`crate::model::Hdd10k`].
    pub faults: FaultConfig,
}

impl Default for HwOptions {
    fn default() -> Self {
        HwOptions {
            model: None,
            seed: 0,
            sync_on_flush: true,
            faults: FaultConfig {
                volatile_cache: false,
                ..FaultConfig::default()
            },
        }
    }
}

/// The simulated hardware of a pool: makes every image (or memory disk) a [`SimMember`] on one
/// virtual clock, and keeps each member's handles.
#[derive(Debug)]
pub struct SimMembers {
    hw: HwOptions,
    /// The model the members are timed with.
    pub model: ModelKind,
    /// Virtual clock of the members' device models.
    pub clock: SimClock,
    /// Completion tracker shared by the members.
    pub tracker: IoTracker,
    /// Handles by image number (`None` for images not opened).
    pub handles: Vec<Option<MemberHandles>>,
    /// The dedicated intent-log device's handles, if the pool has one open, and its model.
    pub log_device: Option<(MemberHandles, ModelKind)>,
}

impl From<&HwOptions> for SimMembers {
    fn from(hw: &HwOptions) -> Self {
        SimMembers {
            hw: *hw,
            model: hw.model.unwrap_or(ModelKind::Instant),
            clock: SimClock::new(),
            tracker: IoTracker::new(),
            handles: Vec::new(),
            log_device: None,
        }
    }
}

impl SimMembers {
    /// Makes `disk`, number `number`, a member: faults seeded `seed + number`, timed by the
    /// model on the clock; keeps its handles.
    fn wrap(&mut self, number: usize, disk: impl Into<SimDisk>) -> SimMember {
        let (m, h) = sim_member(
            disk,
            self.model.build(),
            self.hw.seed.wrapping_add(number as u64),
            self.hw.faults,
            &self.clock,
            &self.tracker,
        );
        if self.handles.len() <= number {
            self.handles.resize(number + 1, None);
        }
        self.handles[number] = Some(h);
        m
    }
}

impl Members for SimMembers {
    type Disk = SimMember;

    fn sync_on_flush(&self) -> bool {
        self.hw.sync_on_flush
    }

    fn model_name(&self) -> &'static str {
        model_name(self.model)
    }

    /// Takes the recorded device model unless [`HwOptions::model`] names one.
    fn described(&mut self, meta: &DirMeta) -> Result<(), DirError> {
        if self.hw.model.is_none() {
            self.model = parse_model(&meta.model).map_err(DirError::Invalid)?;
        }
        Ok(())
    }

    fn member(&mut self, number: usize, image: FileDisk) -> SimMember {
        self.wrap(number, image)
    }

    /// Times the log device with `model` (`None`: the members'), on the members' clock and
    /// tracker, so a flush waits for it as for a member; its faults are seeded
    /// [`LOG_DEVICE_SEED`] after the members'.
    fn log_device(&mut self, image: FileDisk, model: Option<&str>) -> Result<SimMember, DirError> {
        let kind = match model {
            Some(m) => parse_model(m).map_err(DirError::Invalid)?,
            None => self.model,
        };
        let (m, h) = sim_member(
            image,
            kind.build(),
            self.hw.seed.wrapping_add(LOG_DEVICE_SEED),
            self.hw.faults,
            &self.clock,
            &self.tracker,
        );
        self.log_device = Some((h, kind));
        Ok(m)
    }
}

/// What the log device's fault generator adds to [`HwOptions::seed`] (members add their
/// image number).
pub const LOG_DEVICE_SEED: u64 = 1 << 20;

/// A pool like a [`DirPool`], but on sparse memory disks ([`MemDisk`]) instead of image files:
/// nothing touches the file system, and everything is lost when the value is dropped. There is
/// no directory, so nothing here replaces a member.
#[derive(Debug)]
pub struct MemPool {
    /// The pool.
    pub pool: SimPool,
    /// The simulated hardware under it.
    pub members: SimMembers,
}

impl MemPool {
    /// Creates the pool `opts` describes (its `overwrite` is ignored) on memory disks timed
    /// with `hw.model` (none if `None`).
    ///
    /// Errors: as [`PoolDir::create`] ([`DirError::Invalid`] for a bad layout, pool creation
    /// errors as [`DirError::Create`]).
    pub fn create(opts: &CreateOptions, hw: &HwOptions) -> Result<MemPool, DirError> {
        check_layout(None, opts)?;
        let bs = opts.block_size.bytes() as u64;
        let mut members = SimMembers::from(hw);
        let mut disks = Vec::new();
        for n in 0..opts.disks + opts.spares {
            let disk = MemDisk::new(opts.block_size, opts.disk_bytes / bs).map_err(|err| {
                DirError::Disk {
                    path: PathBuf::from(image_name(n)),
                    err,
                }
            })?;
            disks.push(members.wrap(n, disk));
        }
        let spares = disks.split_off(opts.disks);
        let pool = create_pool(disks, spares, opts)?;
        Ok(MemPool { pool, members })
    }
}

impl ServedPool for MemPool {
    type Disk = SimMember;

    fn pool(&self) -> &SimPool {
        &self.pool
    }

    fn pool_mut(&mut self) -> &mut SimPool {
        &mut self.pool
    }

    fn take_spare_for_failed(&mut self) -> Result<bool, DirError> {
        Ok(raidcore_host::dir::admin::take_spare_for_failed(&mut self.pool)?.is_some())
    }

    fn close(self) -> Result<(), DirError> {
        self.pool.shutdown()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use raidcore::pool::PoolConfig;
    use raidcore_hal::BlockSize;

    use super::*;

    #[test]
    fn a_pool_in_memory_serves_io_and_survives_a_failed_member() {
        let opts = CreateOptions {
            disks: 6,
            spares: 1,
            disk_bytes: 64 << 20,
            block_size: BlockSize::B512,
            config: PoolConfig::default(),
            luns: 2,
            lun_bytes: 1 << 20,
            uuid: [7; 16],
            overwrite: false,
            sparse: true,
        };
        let hw = HwOptions {
            model: Some(ModelKind::Instant),
            sync_on_flush: false,
            ..HwOptions::default()
        };
        let mut mp = MemPool::create(&opts, &hw).unwrap();
        assert_eq!(mp.pool.luns().count(), 2);
        let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        mp.pool.write(1, 3, &data, true).unwrap();
        let mut back = vec![0u8; 8192];
        mp.pool.read(1, 3, &mut back).unwrap();
        assert_eq!(back, data);
        mp.pool.fail_disk(0).unwrap();
        mp.pool.read(1, 3, &mut back).unwrap();
        assert_eq!(back, data);
        ServedPool::close(mp).unwrap();
    }
}
