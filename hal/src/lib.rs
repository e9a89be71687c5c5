//! # raidcore-hal: the disk contract
//!
//! The one trait a disk backend implements so that the raidcore engine can use it as a pool
//! member: [`BlockDevice`]. It is shaped like the `embedded-hal` 1.0 traits: blocking calls on
//! `&mut self`, an associated [`ErrorType::Error`] that keeps the backend's own error and exposes a
//! portable [`ErrorKind`] through [`Error::kind`]. The RAID layer decides from the kind alone
//! whether to retry the I/O, repair one block, or fail the member.
//!
//! This crate holds no logic beyond one range check that every backend needs
//! ([`check_io`]); it is the stable surface every backend and every integrator sees.
//!
//! ## Units
//! Everything is counted in **device blocks** of [`BlockDevice::block_size`] bytes (512 or 4096).
//! A logical block address (`lba`) is a block index from 0 to [`BlockDevice::block_count`] - 1.
//! Buffers are byte slices whose length is a whole, non-zero number of blocks. No memory
//! alignment is required of buffers: a backend that needs DMA alignment bounces internally.
//!
//! ## Power loss
//! A device is modelled as a disk with a volatile write cache:
//! - a completed [`BlockDevice::write`] may still be lost on power loss until a later
//!   [`BlockDevice::flush`] completes;
//! - a write interrupted by power loss (or not yet flushed) may leave **each block** of its range
//!   holding either its old or its new content, in any combination (a torn write), but never a
//!   block holding bytes of neither. Blocks are the atomic unit; nothing smaller is promised.
//! - writes are not promised to reach the medium in the order they were issued; only `flush`
//!   orders them.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[cfg(feature = "std")]
extern crate std;

/// Block size of a device, in bytes. Only the two sizes disks actually use are allowed, so
/// every layer above can rely on `4096 % block_size == 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BlockSize {
    /// 512-byte blocks (SD/MMC cards, legacy and 512e disks).
    B512,
    /// 4096-byte blocks (4Kn disks, NVMe with 4 KiB LBA format).
    B4096,
}

impl BlockSize {
    /// The block size in bytes (512 or 4096).
    #[must_use]
    pub const fn bytes(self) -> usize {
        match self {
            BlockSize::B512 => 512,
            BlockSize::B4096 => 4096,
        }
    }

    /// The block size for a byte count, or `None` if `bytes` is neither 512 nor 4096.
    #[must_use]
    pub const fn from_bytes(bytes: usize) -> Option<Self> {
        match bytes {
            512 => Some(BlockSize::B512),
            4096 => Some(BlockSize::B4096),
            _ => None,
        }
    }
}

/// What went wrong, in terms the RAID layer acts on. Backends map their own errors onto these.
///
/// `#[non_exhaustive]`: match with a wildcard arm; new kinds may be added in minor releases, and
/// an unknown kind should be handled like [`ErrorKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// The LBA range is not inside `0..block_count`. A caller bug; nothing was transferred.
    OutOfRange,
    /// The buffer length is zero or not a whole number of blocks. A caller bug; nothing was
    /// transferred.
    Misaligned,
    /// A latent sector error: the block at `lba` (in device blocks) cannot be read (or written)
    /// but the device as a whole is healthy. Blocks before `lba` in the request may have been
    /// transferred; no block after it was. Rewriting the block usually repairs it (the drive
    /// remaps the sector).
    Medium {
        /// The first unreadable block, in device blocks.
        lba: u64,
    },
    /// The link to the device failed (CRC error on the bus, a dropped command). The same request
    /// is worth a retry; the medium is not known to be bad.
    Transport,
    /// The device is gone or has declared itself failed. Retrying is pointless.
    DeviceFailed,
    /// The device did not answer in time. May be transient; repeated timeouts fail the member.
    Timeout,
    /// The device does not support the operation (e.g. `trim` on a device that cannot).
    Unsupported,
    /// The host storage behind the device is full (ENOSPC of a file-backed disk): the device
    /// is not at fault, and the write may succeed once space is freed. Not retried; the pool
    /// suspends instead of failing members.
    NoSpace,
    /// The host storage behind the device went read-only (EROFS): as [`ErrorKind::NoSpace`].
    ReadOnly,
    /// Anything else; treated like a device failure after retries.
    Other,
}

impl ErrorKind {
    /// True where retrying the same request may succeed (transport errors and timeouts).
    #[must_use]
    pub const fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Transport | ErrorKind::Timeout)
    }

    /// True for conditions of the host around the device, which hit every member alike and
    /// clear when the host's operator acts ([`ErrorKind::NoSpace`], [`ErrorKind::ReadOnly`]):
    /// the pool suspends, and no member is failed for them.
    #[must_use]
    pub const fn is_host_condition(self) -> bool {
        matches!(self, ErrorKind::NoSpace | ErrorKind::ReadOnly)
    }
}

impl core::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ErrorKind::OutOfRange => f.write_str("LBA range out of range"),
            ErrorKind::Misaligned => f.write_str("buffer is not a whole number of blocks"),
            ErrorKind::Medium { lba } => {
                write!(f, "medium error (latent sector error) at LBA {lba}")
            }
            ErrorKind::Transport => f.write_str("transport error"),
            ErrorKind::DeviceFailed => f.write_str("device failed"),
            ErrorKind::Timeout => f.write_str("device timed out"),
            ErrorKind::Unsupported => f.write_str("operation not supported by the device"),
            ErrorKind::NoSpace => f.write_str("no space left on the host's storage"),
            ErrorKind::ReadOnly => f.write_str("the host's storage is read-only"),
            ErrorKind::Other => f.write_str("device error"),
        }
    }
}

impl core::error::Error for ErrorKind {}

/// A device error: the backend's own error value, classified by [`Error::kind`].
pub trait Error: core::fmt::Debug {
    /// The portable classification of this error.
    fn kind(&self) -> ErrorKind;
}

impl Error for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

impl Error for core::convert::Infallible {
    fn kind(&self) -> ErrorKind {
        match *self {}
    }
}

/// The error type of a device, as in `embedded-hal` 1.0.
pub trait ErrorType {
    /// The backend's error type.
    type Error: Error;
}

impl<T: ErrorType + ?Sized> ErrorType for &mut T {
    type Error = T::Error;
}

/// One disk: a fixed number of fixed-size blocks that can be read, written and flushed.
///
/// Calls are blocking and take `&mut self`; the engine never issues two requests to one device at
/// once. All LBAs and counts are in device blocks ([`BlockDevice::block_size`] bytes each).
pub trait BlockDevice: ErrorType {
    /// Size of one block in bytes. Must not change during the device's life.
    fn block_size(&self) -> BlockSize;

    /// Number of blocks on the device. Must not change during the device's life.
    fn block_count(&self) -> u64;

    /// Reads `buf.len() / block_size` blocks starting at block `lba` into `buf`.
    ///
    /// `buf.len()` is a non-zero multiple of the block size, else [`ErrorKind::Misaligned`];
    /// the range must lie inside the device, else [`ErrorKind::OutOfRange`]. On error the
    /// content of `buf` is unspecified (some blocks may have been filled). Reading has no
    /// effect on the medium.
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Writes `buf.len() / block_size` blocks starting at block `lba`.
    ///
    /// Same length and range rules as [`BlockDevice::read`]. Completion means the device
    /// accepted the data, not that it is durable: until a later [`BlockDevice::flush`]
    /// completes, power loss may leave each block of the range with its old or its new content
    /// (a torn write). On error, each block of the range holds its old or its new content.
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), Self::Error>;

    /// Makes every write completed before this call durable (a cache flush, like ATA FLUSH
    /// CACHE or NVMe Flush). When it returns `Ok`, those writes survive power loss.
    fn flush(&mut self) -> Result<(), Self::Error>;

    /// Tells the device that `blocks` blocks from `lba` no longer hold useful data (TRIM /
    /// UNMAP / DISCARD). Advisory: afterwards each block may read back its old content or
    /// zeros, and raidcore never relies on which. The range rules of [`BlockDevice::read`]
    /// apply to `lba` and `blocks`.
    ///
    /// The default does nothing and returns `Ok(())`, which is correct for any device.
    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), Self::Error> {
        let _ = (lba, blocks);
        Ok(())
    }
}

impl<T: BlockDevice + ?Sized> BlockDevice for &mut T {
    fn block_size(&self) -> BlockSize {
        T::block_size(self)
    }
    fn block_count(&self) -> u64 {
        T::block_count(self)
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        T::read(self, lba, buf)
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), Self::Error> {
        T::write(self, lba, buf)
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        T::flush(self)
    }
    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), Self::Error> {
        T::trim(self, lba, blocks)
    }
}

/// Checks a request against a device's shape, the way every backend must before touching the
/// medium: `len_bytes` is a non-zero multiple of `block_size`, and the blocks it covers from
/// `lba` lie inside `0..block_count`.
///
/// Returns the number of blocks the request covers, or [`ErrorKind::Misaligned`] /
/// [`ErrorKind::OutOfRange`].
pub fn check_io(
    block_size: BlockSize,
    block_count: u64,
    lba: u64,
    len_bytes: usize,
) -> Result<u64, ErrorKind> {
    let bs = block_size.bytes();
    if len_bytes == 0 || !len_bytes.is_multiple_of(bs) {
        return Err(ErrorKind::Misaligned);
    }
    let blocks = (len_bytes / bs) as u64;
    check_range(block_count, lba, blocks)?;
    Ok(blocks)
}

/// Checks that `blocks` blocks from `lba` lie inside `0..block_count` (and `blocks > 0`).
pub fn check_range(block_count: u64, lba: u64, blocks: u64) -> Result<(), ErrorKind> {
    match lba.checked_add(blocks) {
        Some(end) if blocks > 0 && end <= block_count => Ok(()),
        _ => Err(ErrorKind::OutOfRange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_io_rules() {
        assert_eq!(check_io(BlockSize::B512, 8, 0, 4096), Ok(8));
        assert_eq!(
            check_io(BlockSize::B512, 8, 1, 4096),
            Err(ErrorKind::OutOfRange)
        );
        assert_eq!(check_io(BlockSize::B512, 8, 7, 512), Ok(1));
        assert_eq!(
            check_io(BlockSize::B512, 8, 0, 0),
            Err(ErrorKind::Misaligned)
        );
        assert_eq!(
            check_io(BlockSize::B4096, 8, 0, 512),
            Err(ErrorKind::Misaligned)
        );
        assert_eq!(
            check_io(BlockSize::B4096, 8, u64::MAX, 4096),
            Err(ErrorKind::OutOfRange)
        );
        assert_eq!(check_range(8, 0, 0), Err(ErrorKind::OutOfRange));
    }

    #[test]
    fn retryable_kinds() {
        assert!(ErrorKind::Transport.is_retryable());
        assert!(ErrorKind::Timeout.is_retryable());
        assert!(!ErrorKind::Medium { lba: 3 }.is_retryable());
        assert!(!ErrorKind::DeviceFailed.is_retryable());
    }
}
