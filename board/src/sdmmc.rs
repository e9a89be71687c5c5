//! Adapters both ways between raidcore's [`BlockDevice`] and `embedded-sdmmc`'s
//! [`embedded_sdmmc::BlockDevice`].
//!
//! - [`SdmmcMember`]: any `embedded-sdmmc` block device (an SDIO/SDMMC peripheral driver from a
//!   chip HAL, a USB mass-storage driver, ...) becomes a raidcore pool member. Its error kinds come
//!   from [`ClassifyError`], which the device's error type implements (done here for the SPI
//!   driver's [`SdCardError`](embedded_sdmmc::SdCardError)).
//! - [`LunVolume`]: a raidcore LUN becomes an `embedded-sdmmc` block device, so a FAT volume
//!   (`embedded_sdmmc::VolumeManager`) can sit on it. The LUN shape it needs is just
//!   [`BlockDevice`] with 512- or 4096-byte blocks; with 4096-byte blocks, 512-byte sector
//!   writes become read-modify-write of one 4 KiB block through a buffer inside the adapter.

use core::cell::RefCell;

use embedded_sdmmc::{Block, BlockCount, BlockIdx};
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io};

/// Sector size of `embedded-sdmmc`, in bytes.
const SECTOR: usize = Block::LEN;

/// Maps a device error onto raidcore's [`ErrorKind`]. Implement it for the error type of an
/// `embedded-sdmmc` block device to use that device as a pool member through [`SdmmcMember`].
pub trait ClassifyError {
    /// The kind of this error. `lba` is the first block (512-byte sector) of the failed request,
    /// for kinds that name a block ([`ErrorKind::Medium`]).
    fn error_kind(&self, lba: u64) -> ErrorKind;
}

impl ClassifyError for embedded_sdmmc::SdCardError {
    fn error_kind(&self, lba: u64) -> ErrorKind {
        crate::sd::classify(self, lba)
    }
}

impl ClassifyError for core::convert::Infallible {
    fn error_kind(&self, _lba: u64) -> ErrorKind {
        match *self {}
    }
}

/// An error of [`SdmmcMember`]: the kind, and the device's own error where the device raised it.
#[derive(Debug, Clone, Copy)]
pub struct SdmmcMemberError<E> {
    kind: ErrorKind,
    device: Option<E>,
}

impl<E> SdmmcMemberError<E> {
    /// The device's own error, or `None` for a request refused before it reached the device.
    pub fn device_error(&self) -> Option<&E> {
        self.device.as_ref()
    }
}

impl<E: core::fmt::Debug> raidcore_hal::Error for SdmmcMemberError<E> {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

/// Any `embedded-sdmmc` block device as a raidcore [`BlockDevice`] of 512-byte blocks.
///
/// Transfers go through a stack buffer of [`crate::sd::BOUNCE_BLOCKS`] sectors (4 KiB) because
/// `embedded-sdmmc` moves `[Block]` slices. `flush` is a no-op: `embedded-sdmmc`'s trait has no
/// flush, so the device must make writes durable by the time they complete (use
/// [`crate::sd::SdBlockDevice`] for SPI cards, whose flush waits out the programming busy).
#[derive(Debug)]
pub struct SdmmcMember<D> {
    dev: D,
    blocks: u64,
}

impl<D> SdmmcMember<D>
where
    D: embedded_sdmmc::BlockDevice,
    D::Error: ClassifyError + Clone,
{
    /// Wraps `dev`, reading its size once.
    pub fn new(dev: D) -> Result<Self, SdmmcMemberError<D::Error>> {
        match dev.num_blocks() {
            Ok(n) => Ok(SdmmcMember {
                dev,
                blocks: u64::from(n.0),
            }),
            Err(e) => Err(SdmmcMemberError {
                kind: e.error_kind(0),
                device: Some(e),
            }),
        }
    }

    /// Gives the device back.
    pub fn into_inner(self) -> D {
        self.dev
    }

    fn check(&self, lba: u64, len: usize) -> Result<(), SdmmcMemberError<D::Error>> {
        check_io(BlockSize::B512, self.blocks, lba, len)
            .map(|_| ())
            .map_err(|kind| SdmmcMemberError { kind, device: None })
    }
}

fn idx<E>(lba: u64) -> Result<BlockIdx, SdmmcMemberError<E>> {
    u32::try_from(lba)
        .map(BlockIdx)
        .map_err(|_| SdmmcMemberError {
            kind: ErrorKind::OutOfRange,
            device: None,
        })
}

impl<D> ErrorType for SdmmcMember<D>
where
    D: embedded_sdmmc::BlockDevice,
    D::Error: ClassifyError + Clone,
{
    type Error = SdmmcMemberError<D::Error>;
}

impl<D> BlockDevice for SdmmcMember<D>
where
    D: embedded_sdmmc::BlockDevice,
    D::Error: ClassifyError + Clone,
{
    fn block_size(&self) -> BlockSize {
        BlockSize::B512
    }

    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.check(lba, buf.len())?;
        let mut bounce: [Block; crate::sd::BOUNCE_BLOCKS] = core::array::from_fn(|_| Block::new());
        let mut at = lba;
        for chunk in buf.chunks_mut(bounce.len() * SECTOR) {
            let n = chunk.len() / SECTOR;
            let blocks = bounce.get_mut(..n).ok_or(SdmmcMemberError {
                kind: ErrorKind::Misaligned,
                device: None,
            })?;
            self.dev
                .read(blocks, idx(at)?)
                .map_err(|e| SdmmcMemberError {
                    kind: e.error_kind(at),
                    device: Some(e),
                })?;
            for (b, dst) in blocks.iter().zip(chunk.chunks_exact_mut(SECTOR)) {
                dst.copy_from_slice(&b.contents);
            }
            at += n as u64;
        }
        Ok(())
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), Self::Error> {
        self.check(lba, buf.len())?;
        let mut bounce: [Block; crate::sd::BOUNCE_BLOCKS] = core::array::from_fn(|_| Block::new());
        let mut at = lba;
        for chunk in buf.chunks(bounce.len() * SECTOR) {
            let n = chunk.len() / SECTOR;
            let blocks = bounce.get_mut(..n).ok_or(SdmmcMemberError {
                kind: ErrorKind::Misaligned,
                device: None,
            })?;
            for (b, src) in blocks.iter_mut().zip(chunk.chunks_exact(SECTOR)) {
                b.contents.copy_from_slice(src);
            }
            self.dev
                .write(blocks, idx(at)?)
                .map_err(|e| SdmmcMemberError {
                    kind: e.error_kind(at),
                    device: Some(e),
                })?;
            at += n as u64;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// An error of [`LunVolume`], as `embedded-sdmmc` wants it (`core::error::Error + 'static`):
/// the LUN's kind and its own error.
#[derive(Debug, Clone, Copy)]
pub struct LunError<E> {
    kind: ErrorKind,
    lun: Option<E>,
}

impl<E> LunError<E> {
    /// The LUN's own error, or `None` for a request refused by the adapter (out of range, or a LUN
    /// with more than 2^32 sectors asked for its size).
    pub fn lun_error(&self) -> Option<&E> {
        self.lun.as_ref()
    }

    /// The kind of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl<E: raidcore_hal::Error> From<E> for LunError<E> {
    fn from(e: E) -> Self {
        LunError {
            kind: e.kind(),
            lun: Some(e),
        }
    }
}

impl<E> core::fmt::Display for LunError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "LUN: {}", self.kind)
    }
}

impl<E: core::fmt::Debug> core::error::Error for LunError<E> {}

/// Largest LUN block the adapter handles, in bytes.
const LUN_BLOCK_MAX: usize = 4096;

struct LunState<L> {
    lun: L,
    /// One LUN block for read-modify-write of 512-byte sectors on a 4 KiB-block LUN.
    rmw: [u8; LUN_BLOCK_MAX],
}

/// A raidcore LUN (any [`BlockDevice`] with 512- or 4096-byte blocks) as an `embedded-sdmmc`
/// block device of 512-byte sectors, so `embedded_sdmmc::VolumeManager` can put a FAT file
/// system on it.
///
/// Sector `s` is byte offset `s * 512` of the LUN. On a 4 KiB-block LUN, reads and writes of
/// whole, aligned 4 KiB blocks go straight through; a partial block is read, patched and written
/// back (read-modify-write through a 4 KiB buffer inside the adapter), so a power cut during it
/// may lose the other seven sectors' *unchanged* content only if the LUN itself tears a 4 KiB
/// write, which raidcore's volume layer does not. The LUN is behind a `RefCell` because
/// `embedded-sdmmc` calls take `&self`; the adapter is not `Sync`.
pub struct LunVolume<L> {
    state: RefCell<LunState<L>>,
    sectors: u64,
}

impl<L> core::fmt::Debug for LunVolume<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LunVolume")
            .field("sectors", &self.sectors)
            .finish_non_exhaustive()
    }
}

impl<L: BlockDevice> LunVolume<L> {
    /// Wraps `lun`. Its size in 512-byte sectors is `block_count * block_size / 512`.
    pub fn new(lun: L) -> Self {
        let per = (lun.block_size().bytes() / SECTOR) as u64;
        let sectors = lun.block_count().saturating_mul(per);
        LunVolume {
            state: RefCell::new(LunState {
                lun,
                rmw: [0; LUN_BLOCK_MAX],
            }),
            sectors,
        }
    }

    /// Gives the LUN back.
    pub fn into_inner(self) -> L {
        self.state.into_inner().lun
    }

    /// Size in 512-byte sectors.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// Flushes the LUN (`embedded-sdmmc` has no flush of its own: call this after closing files
    /// and before power may go).
    pub fn flush(&self) -> Result<(), LunError<L::Error>> {
        Ok(self.state.borrow_mut().lun.flush()?)
    }

    fn range(&self, start: BlockIdx, count: usize) -> Result<u64, LunError<L::Error>> {
        let s = u64::from(start.0);
        check_io(
            BlockSize::B512,
            self.sectors,
            s,
            count.saturating_mul(SECTOR),
        )
        .map_err(|kind| LunError { kind, lun: None })?;
        Ok(s)
    }
}

impl<L> embedded_sdmmc::BlockDevice for LunVolume<L>
where
    L: BlockDevice,
    L::Error: 'static,
{
    type Error = LunError<L::Error>;

    fn read(&self, blocks: &mut [Block], start: BlockIdx) -> Result<(), Self::Error> {
        let first = self.range(start, blocks.len())?;
        let mut st = self.state.borrow_mut();
        let LunState { lun, rmw } = &mut *st;
        let per = (lun.block_size().bytes() / SECTOR) as u64;
        for (i, b) in blocks.iter_mut().enumerate() {
            let s = first + i as u64;
            if per == 1 {
                lun.read(s, &mut b.contents)?;
            } else {
                let buf = rmw.get_mut(..lun.block_size().bytes()).ok_or(LunError {
                    kind: ErrorKind::Unsupported,
                    lun: None,
                })?;
                lun.read(s / per, buf)?;
                let off = (s % per) as usize * SECTOR;
                let src = buf.get(off..off + SECTOR).ok_or(LunError {
                    kind: ErrorKind::Other,
                    lun: None,
                })?;
                b.contents.copy_from_slice(src);
            }
        }
        Ok(())
    }

    fn write(&self, blocks: &[Block], start: BlockIdx) -> Result<(), Self::Error> {
        let first = self.range(start, blocks.len())?;
        let mut st = self.state.borrow_mut();
        let LunState { lun, rmw } = &mut *st;
        let bs = lun.block_size().bytes();
        let per = (bs / SECTOR) as u64;
        let mut i = 0usize;
        while let Some(b) = blocks.get(i) {
            let s = first + i as u64;
            if per == 1 {
                lun.write(s, &b.contents)?;
                i += 1;
                continue;
            }
            let buf = rmw.get_mut(..bs).ok_or(LunError {
                kind: ErrorKind::Unsupported,
                lun: None,
            })?;
            let lba = s / per;
            let in_block = (s % per) as usize;
            let take = (per as usize - in_block).min(blocks.len() - i);
            if take < per as usize {
                // Partial LUN block: read it first so the other sectors keep their content.
                lun.read(lba, buf)?;
            }
            for (j, sec) in blocks.iter().skip(i).take(take).enumerate() {
                let off = (in_block + j) * SECTOR;
                if let Some(dst) = buf.get_mut(off..off + SECTOR) {
                    dst.copy_from_slice(&sec.contents);
                }
            }
            lun.write(lba, buf)?;
            i += take;
        }
        Ok(())
    }

    fn num_blocks(&self) -> Result<BlockCount, Self::Error> {
        u32::try_from(self.sectors)
            .map(BlockCount)
            .map_err(|_| LunError {
                kind: ErrorKind::OutOfRange,
                lun: None,
            })
    }
}
