//! A disk that stores nothing.

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io, check_range};

use super::DiskError;

/// A disk of any size that reads zeros and discards writes: `create` lays a pool out on such
/// disks before it makes any image (so a layout the pool refuses leaves no file behind), and
/// timing-only runs (device-model measurements, benchmarks at full capacity: a 300 GB drive under
/// millions of random writes) need no RAM or disk space. Never use it where data must be verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NullDisk {
    block_size: BlockSize,
    block_count: u64,
}

impl NullDisk {
    /// A disk of `block_count` blocks of `block_size`.
    ///
    /// Errors: [`ErrorKind::OutOfRange`] if `block_count` is 0 or the size overflows `u64`.
    pub fn new(block_size: BlockSize, block_count: u64) -> Result<Self, DiskError> {
        if block_count == 0 || block_count.checked_mul(block_size.bytes() as u64).is_none() {
            return Err(DiskError::with_context(
                ErrorKind::OutOfRange,
                "null disk size (zero blocks or over 2^64 bytes)",
            ));
        }
        Ok(Self {
            block_size,
            block_count,
        })
    }
}

impl ErrorType for NullDisk {
    type Error = DiskError;
}

impl BlockDevice for NullDisk {
    fn block_size(&self) -> BlockSize {
        self.block_size
    }

    fn block_count(&self) -> u64 {
        self.block_count
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), DiskError> {
        check_io(self.block_size, self.block_count, lba, buf.len())?;
        buf.fill(0);
        Ok(())
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), DiskError> {
        check_io(self.block_size, self.block_count, lba, buf.len())?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), DiskError> {
        Ok(())
    }

    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), DiskError> {
        check_range(self.block_count, lba, blocks)?;
        Ok(())
    }
}
