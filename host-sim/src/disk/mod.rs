//! Simulated disks: sparse memory ([`MemDisk`]), and [`SimDisk`], one concrete type over it and
//! the host's disks (disk-image files, [`FileDisk`]; the data-less [`NullDisk`] for timing-only
//! runs, both from [`raidcore_host::disk`]) so that a pool (which needs a single member type `D`)
//! can mix them.
//!
//! All of them implement [`raidcore_hal::BlockDevice`] with the host's error type ([`SimError`]
//! here), which wrappers ([`crate::fault::FaultyDisk`], [`crate::model::TimedDisk`]) pass on
//! unchanged. Requests are checked with [`raidcore_hal::check_io`] before anything is touched, so
//! a bad range or length changes nothing.

mod mem;

pub use mem::{CHUNK_BYTES, MemDisk};
pub use raidcore_host::disk::{DiskError as SimError, FileDisk, FileDiskOptions, NullDisk};

use raidcore_hal::{BlockDevice, BlockSize, ErrorType};

/// One disk of any simulated kind, so that a pool of mixed members has one member type.
#[derive(Debug)]
pub enum SimDisk {
    /// A sparse in-memory disk.
    Mem(MemDisk),
    /// A disk-image file.
    File(FileDisk),
    /// A disk that stores nothing (timing-only runs).
    Null(NullDisk),
}

impl From<MemDisk> for SimDisk {
    fn from(d: MemDisk) -> Self {
        SimDisk::Mem(d)
    }
}

impl From<FileDisk> for SimDisk {
    fn from(d: FileDisk) -> Self {
        SimDisk::File(d)
    }
}

impl From<NullDisk> for SimDisk {
    fn from(d: NullDisk) -> Self {
        SimDisk::Null(d)
    }
}

impl ErrorType for SimDisk {
    type Error = SimError;
}

impl BlockDevice for SimDisk {
    fn block_size(&self) -> BlockSize {
        match self {
            SimDisk::Mem(d) => d.block_size(),
            SimDisk::File(d) => d.block_size(),
            SimDisk::Null(d) => d.block_size(),
        }
    }

    fn block_count(&self) -> u64 {
        match self {
            SimDisk::Mem(d) => d.block_count(),
            SimDisk::File(d) => d.block_count(),
            SimDisk::Null(d) => d.block_count(),
        }
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.read(lba, buf),
            SimDisk::File(d) => d.read(lba, buf),
            SimDisk::Null(d) => d.read(lba, buf),
        }
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.write(lba, buf),
            SimDisk::File(d) => d.write(lba, buf),
            SimDisk::Null(d) => d.write(lba, buf),
        }
    }

    fn flush(&mut self) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.flush(),
            SimDisk::File(d) => d.flush(),
            SimDisk::Null(d) => d.flush(),
        }
    }

    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.trim(lba, blocks),
            SimDisk::File(d) => d.trim(lba, blocks),
            SimDisk::Null(d) => d.trim(lba, blocks),
        }
    }
}
