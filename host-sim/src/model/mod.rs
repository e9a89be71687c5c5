//! Device latency models on virtual time, and [`TimedDisk`], the wrapper that applies one to any
//! disk.
//!
//! A model answers one question: an operation of this kind, at this byte offset, of this many
//! bytes, starting at this virtual time, keeps the device busy how long, and completes how long
//! after it started ([`Service`])? Models are deterministic state machines (head position,
//! platter angle derived from virtual time, last offset); they never read the wall clock.
//!
//! Models work in **bytes and nanoseconds**, independent of the block size.
//!
//! | model | stands for | source of its figures |
//! | --- | --- | --- |
//! | [`Hdd10k`] | 300 GB 10,000 RPM SAS drive, write cache off | Seagate Savvio 10K.4 / 10K.3 SAS product manuals |
//! | [`Flash::sata_ssd`] | 960 GB enterprise SATA SSD | Kingston DC600M 960 GB specifications |
//! | [`Flash::nvme_ssd`] | 2 TB enterprise NVMe SSD | Intel SSD DC P4500 2.0 TB (Lenovo product guide) |
//! | [`Flash::sd_card`] | SD card marked Class 10 + A1 | SD Association speed and application performance classes |
//! | [`Nvram::pcie_card`] | 8 GB PCIe NVRAM card (intent-log / SLOG device) | Radian RMS-200 class: PCIe Gen3 x8 (Radian RMS-325 data sheet); 2 µs per command assumed |

mod flash;
mod hdd;
mod nvram;
mod timed;

pub use flash::{Flash, FlashParams};
pub use hdd::{Hdd10k, HddParams};
pub use nvram::{Nvram, NvramParams};
pub use timed::{DEFAULT_TIMEOUT_NS, DiskStats, Slowdown, TimedDisk, TimingHandle};

use core::fmt;
use core::str::FromStr;

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A read.
    Read,
    /// A write.
    Write,
    /// A cache flush (no data).
    Flush,
    /// A TRIM / UNMAP (no data transferred).
    Trim,
}

/// One operation as a model sees it. All sizes are in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoOp {
    /// The kind of operation.
    pub kind: OpKind,
    /// Byte offset of the first byte (`lba * block_size`); 0 for a flush.
    pub offset_bytes: u64,
    /// Bytes transferred (or trimmed); 0 for a flush.
    pub len_bytes: u64,
    /// Capacity of the device in bytes.
    pub capacity_bytes: u64,
}

/// How long one operation takes, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Service {
    /// How long the device cannot start the next operation (its queue is occupied).
    pub busy_ns: u64,
    /// How long from start to completion; at least `busy_ns`. Larger than `busy_ns` for devices
    /// that pipeline (an SSD accepts the next command while flash reads are under way).
    pub latency_ns: u64,
}

impl Service {
    /// A service where the device is busy for the whole latency (no pipelining).
    #[must_use]
    pub const fn serial(ns: u64) -> Self {
        Self {
            busy_ns: ns,
            latency_ns: ns,
        }
    }
}

/// A device's timing behaviour.
pub trait DeviceModel {
    /// Times `op`, which starts at virtual time `start_ns` (the device is idle then), and updates
    /// the model's state (head position and the like). Deterministic in its inputs and state.
    fn service(&mut self, op: &IoOp, start_ns: u64) -> Service;
}

/// A device that takes no time: a [`TimedDisk`] over it only counts operations and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Instant;

impl DeviceModel for Instant {
    fn service(&mut self, _op: &IoOp, _start_ns: u64) -> Service {
        Service::default()
    }
}

/// One concrete type over every model, so that a pool of mixed devices has one member type.
#[derive(Debug, Clone)]
pub enum AnyModel {
    /// A 10K RPM hard disk.
    Hdd(Hdd10k),
    /// A flash device (SSD or SD card).
    Flash(Flash),
    /// An NVRAM card.
    Nvram(Nvram),
    /// No time at all.
    Instant,
}

impl DeviceModel for AnyModel {
    fn service(&mut self, op: &IoOp, start_ns: u64) -> Service {
        match self {
            AnyModel::Hdd(m) => m.service(op, start_ns),
            AnyModel::Flash(m) => m.service(op, start_ns),
            AnyModel::Nvram(m) => m.service(op, start_ns),
            AnyModel::Instant => Service::default(),
        }
    }
}

impl From<Hdd10k> for AnyModel {
    fn from(m: Hdd10k) -> Self {
        AnyModel::Hdd(m)
    }
}

impl From<Flash> for AnyModel {
    fn from(m: Flash) -> Self {
        AnyModel::Flash(m)
    }
}

impl From<Nvram> for AnyModel {
    fn from(m: Nvram) -> Self {
        AnyModel::Nvram(m)
    }
}

/// The named models, e.g. for a command-line option (`hdd10k`, `sata-ssd`, `nvme-ssd`,
/// `sd-card`, `nvram`, `instant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelKind {
    /// [`Hdd10k::new`].
    Hdd10k,
    /// [`Flash::sata_ssd`].
    SataSsd,
    /// [`Flash::nvme_ssd`].
    NvmeSsd,
    /// [`Flash::sd_card`].
    SdCard,
    /// [`Nvram::pcie_card`].
    Nvram,
    /// [`Instant`].
    Instant,
}

impl ModelKind {
    /// Every kind, in a fixed order.
    pub const ALL: [ModelKind; 6] = [
        ModelKind::Hdd10k,
        ModelKind::SataSsd,
        ModelKind::NvmeSsd,
        ModelKind::SdCard,
        ModelKind::Nvram,
        ModelKind::Instant,
    ];

    /// A fresh model of this kind.
    #[must_use]
    pub fn build(self) -> AnyModel {
        match self {
            ModelKind::Hdd10k => AnyModel::Hdd(Hdd10k::new()),
            ModelKind::SataSsd => AnyModel::Flash(Flash::sata_ssd()),
            ModelKind::NvmeSsd => AnyModel::Flash(Flash::nvme_ssd()),
            ModelKind::SdCard => AnyModel::Flash(Flash::sd_card()),
            ModelKind::Nvram => AnyModel::Nvram(Nvram::pcie_card()),
            ModelKind::Instant => AnyModel::Instant,
        }
    }

    /// The name accepted by `FromStr`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            ModelKind::Hdd10k => "hdd10k",
            ModelKind::SataSsd => "sata-ssd",
            ModelKind::NvmeSsd => "nvme-ssd",
            ModelKind::SdCard => "sd-card",
            ModelKind::Nvram => "nvram",
            ModelKind::Instant => "instant",
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownModel(pub String);

impl fmt::Display for UnknownModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown device model {:?} (expected hdd10k, sata-ssd, nvme-ssd, sd-card, nvram or instant)",
            self.0
        )
    }
}

impl std::error::Error for UnknownModel {}

impl FromStr for ModelKind {
    type Err = UnknownModel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownModel(s.to_string()))
    }
}

/// `bytes` at `bytes_per_s`, in nanoseconds (rounded up; 0 if the rate is 0).
pub(crate) fn transfer_ns(bytes: u64, bytes_per_s: u64) -> u64 {
    if bytes_per_s == 0 {
        return 0;
    }
    let ns = u128::from(bytes) * 1_000_000_000u128;
    ns.div_ceil(u128::from(bytes_per_s))
        .try_into()
        .unwrap_or(u64::MAX)
}
