//! An SD/SDHC/SDXC card in SPI mode as a raidcore [`BlockDevice`], on `embedded-sdmmc`'s
//! [`SdCard`] driver.
//!
//! ## Bringing a card up
//! 1. Configure the SPI bus at **400 kHz or less**, mode 0, MSB first. MISO needs a pull-up
//!    (10–100 kΩ, as the SD specification asks for DAT0): a removed card must read as `0xFF`, which
//!    is how a card that stopped answering is recognised.
//! 2. Drive every card's chip select high, then send at least 74 clocks with MOSI high and **no**
//!    chip select asserted: [`power_up_clocks`] on the raw `SpiBus` does this (80 clocks). The driver
//!    cannot do it itself because an `SpiDevice` always asserts its chip select. Some cards
//!    work without it, many do not.
//! 3. Wrap each card's chip select and the bus into an [`SpiDevice`]: `ExclusiveDevice` when the
//!    card has the bus to itself, `RefCellDevice` (or `CriticalSectionDevice`, `AtomicDevice`)
//!    from `embedded-hal-bus` when several cards share one bus.
//! 4. [`SdBlockDevice::new`] initialises the card (CMD0, CMD59 to turn CRCs on, CMD8, ACMD41,
//!    CMD58) and reads its capacity from the CSD (CMD9).
//! 5. Raise the bus clock (up to 25 MHz for default-speed cards) through the bus driver; the card
//!    keeps its state.
//!
//! ```
//! # use raidcore_board::fake_sd::{FakeSd, FakeDelay};
//! # let card_spi = FakeSd::sdhc(2048);
//! use raidcore_board::sd::SdBlockDevice;
//! use raidcore_hal::BlockDevice;
//!
//! // `card_spi`: an embedded-hal `SpiDevice` for the card (bus + chip select).
//! let mut card = SdBlockDevice::new(card_spi, FakeDelay::default())?;
//! let mut block = [0u8; 512];
//! card.read(0, &mut block)?;
//! # Ok::<(), raidcore_board::sd::SdError>(())
//! ```
//!
//! ## Error kinds
//! | driver error | kind | why |
//! | --- | --- | --- |
//! | SPI peripheral error, CRC mismatch on a data block, data block rejected for its CRC (token `0x0B`) | `Transport` | the bus garbled a transfer; the medium is fine, retry |
//! | no start token / still busy after the driver's retry budget | `Timeout` | the card is slow or hung; retry, repeated timeouts fail the member |
//! | a command gets no answer and the card cannot be re-initialised (or answers as a different card) | `DeviceFailed` | the card was pulled or died |
//! | a command gets no answer but the card re-initialises | `Timeout` | a dropped command; the card is back |
//! | data error token on a read (ECC failed, ...) | `Medium { lba }` | a latent sector error; the LBA is pinpointed by re-reading block by block |
//! | write error token (`0x0D`) or a programming error in the status after a write | `Medium { lba }` | the card could not program that block |
//! | card not found at initialisation, CRC cannot be enabled | `DeviceFailed` | not a usable card |
//! | bad register read, bad state | `Other` | anything else |
//!
//! After a failed multi-block transfer the card may still be streaming (CMD18) or waiting for data
//! (CMD25). The backend then ends the transfer itself (Stop Tran token, CMD12, wait for not-busy)
//! and marks the card for re-initialisation, so the next request starts from a known state.
//!
//! ## Power loss and flush
//! A block written through CMD24 is programmed when the driver sees the busy signal end and CMD13
//! report no error. After a CMD25 multi-block write the driver returns as soon as it has sent the
//! Stop Tran token, while the card is still busy programming; [`BlockDevice::flush`] waits for
//! that busy to end (it issues CMD9, which waits for not-busy first), so after `flush` every
//! completed write is on the medium.

use core::cell::Cell;

use embedded_hal::delay::DelayNs;
use embedded_hal::spi::{ErrorType as SpiErrorType, Operation, SpiBus, SpiDevice};
use embedded_sdmmc::sdcard::spi::AcquireOpts;
use embedded_sdmmc::{Block, BlockDevice as SdmmcBlockDevice, BlockIdx, SdCard, SdCardError};
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io};

/// Bytes in one SD block. SDHC/SDXC cards have fixed 512-byte blocks; `embedded-sdmmc` uses 512
/// for standard-capacity cards too.
pub const SD_BLOCK_BYTES: usize = 512;

/// Blocks moved per CMD18/CMD25 command: requests are split into chunks of this many blocks,
/// bounced through a stack buffer of `BOUNCE_BLOCKS * 512` bytes (4 KiB) because the driver
/// takes `[Block]` slices. One chunk is one raidcore 4 KiB block.
pub const BOUNCE_BLOCKS: usize = 8;

/// Stop Tran token: ends a CMD25 multi-block write.
const STOP_TRAN_TOKEN: u8 = 0xFD;
/// CMD12 (STOP_TRANSMISSION, argument 0) with its CRC7: ends a CMD18 multi-block read.
const CMD12_FRAME: [u8; 6] = [0x4C, 0, 0, 0, 0, 0x61];
/// Bytes clocked while waiting for the card to release busy during a resync: enough for the
/// 500 ms write-busy limit of the SD specification at a 25 MHz bus clock (about 1.6 M bytes).
const RESYNC_BUSY_BYTES_MAX: u32 = 1 << 21;
/// Data response token (masked with 0x1F): data rejected because of a CRC error.
const DATA_RES_CRC_ERROR: u8 = 0x0B;

/// Sends 80 clocks with MOSI high on a raw SPI bus, as an SD card needs after power-up before
/// the first command (the specification asks for at least 74).
///
/// Call it with **every chip select on the bus de-asserted (high)** and the bus at 400 kHz or
/// less, before the first [`SdBlockDevice::new`] on that bus. On a bus shared through a
/// `RefCell`, call it on `&mut *bus.borrow_mut()`.
pub fn power_up_clocks<BUS: SpiBus<u8>>(bus: &mut BUS) -> Result<(), BUS::Error> {
    bus.write(&[0xFF; 10])?;
    bus.flush()
}

/// Counters of one card's traffic, for tests and footprint figures (no clock involved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SdStats {
    /// SPI transactions issued (one per chip-select assertion).
    pub transactions: u64,
    /// Bytes clocked over the bus in either direction (one byte = 8 clocks).
    pub bus_bytes: u64,
    /// Failed multi-block transfers that were ended by hand (Stop Tran / CMD12) and the card
    /// marked for re-initialisation.
    pub resyncs: u64,
    /// Times a command got no answer and the card was re-initialised to tell a dropped command
    /// from a gone card.
    pub probes: u64,
    /// Multi-block writes that the card rejected and that then succeeded block by block (a
    /// transient CRC rejection); the request returned `Ok`.
    pub write_retries: u64,
}

/// An [`SpiDevice`] wrapper that counts traffic and remembers the last byte the card sent,
/// so that a rejected write can be told apart (CRC error vs write error) although the driver
/// reports both as `WriteError`. Transparent otherwise.
#[derive(Debug)]
pub struct Tap<SPI> {
    spi: SPI,
    last_miso: u8,
    transactions: u64,
    bus_bytes: u64,
}

impl<SPI> Tap<SPI> {
    fn new(spi: SPI) -> Self {
        Tap {
            spi,
            last_miso: 0xFF,
            transactions: 0,
            bus_bytes: 0,
        }
    }

    /// The wrapped SPI device (e.g. to change its clock through the bus driver).
    pub fn inner_mut(&mut self) -> &mut SPI {
        &mut self.spi
    }
}

impl<SPI: SpiErrorType> SpiErrorType for Tap<SPI> {
    type Error = SPI::Error;
}

impl<SPI: SpiDevice<u8>> SpiDevice<u8> for Tap<SPI> {
    fn transaction(&mut self, operations: &mut [Operation<'_, u8>]) -> Result<(), Self::Error> {
        self.transactions += 1;
        let result = self.spi.transaction(operations);
        for op in operations.iter() {
            match op {
                Operation::Read(buf) | Operation::TransferInPlace(buf) => {
                    self.bus_bytes += buf.len() as u64;
                    if let Some(&b) = buf.last() {
                        self.last_miso = b;
                    }
                }
                Operation::Transfer(read, write) => {
                    self.bus_bytes += read.len().max(write.len()) as u64;
                    if let Some(&b) = read.last() {
                        self.last_miso = b;
                    }
                }
                Operation::Write(buf) => self.bus_bytes += buf.len() as u64,
                Operation::DelayNs(_) => {}
            }
        }
        result
    }
}

/// An error of [`SdBlockDevice`]: its [`ErrorKind`] and, where the driver raised it, the driver's
/// own error.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SdError {
    kind: ErrorKind,
    driver: Option<SdCardError>,
}

impl SdError {
    /// The error `embedded-sdmmc` reported, or `None` for a request refused before it reached
    /// the card (`OutOfRange`, `Misaligned`).
    pub fn driver_error(&self) -> Option<SdCardError> {
        self.driver
    }

    fn request(kind: ErrorKind) -> Self {
        SdError { kind, driver: None }
    }
}

impl raidcore_hal::Error for SdError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl core::fmt::Display for SdError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.driver {
            Some(e) => write!(f, "SD card: {} ({e})", self.kind),
            None => write!(f, "SD card: {}", self.kind),
        }
    }
}

impl core::error::Error for SdError {}

/// The kind of a driver error where the error alone decides it. `lba` is the block the failed
/// command addressed. Command timeouts are classified [`ErrorKind::Timeout`] here;
/// [`SdBlockDevice`] refines them to `DeviceFailed` when the card cannot be re-initialised.
pub fn classify(err: &SdCardError, lba: u64) -> ErrorKind {
    use embedded_sdmmc::embedded_sdmmc_types::sdcard::CmdId;
    match err {
        SdCardError::Transport | SdCardError::CrcError(..) => ErrorKind::Transport,
        SdCardError::TimeoutCommand(CmdId::CMD0_GoIdleState)
        | SdCardError::CardNotFound
        | SdCardError::CantEnableCRC => ErrorKind::DeviceFailed,
        SdCardError::TimeoutReadBuffer
        | SdCardError::TimeoutWaitNotBusy
        | SdCardError::TimeoutCommand(_)
        | SdCardError::TimeoutACommand(_) => ErrorKind::Timeout,
        SdCardError::ReadError | SdCardError::WriteError => ErrorKind::Medium { lba },
        SdCardError::Cmd58Error
        | SdCardError::RegisterReadError
        | SdCardError::BadState
        | SdCardError::GpioError => ErrorKind::Other,
    }
}

/// An SD card on an SPI device as a raidcore [`BlockDevice`] of 512-byte blocks.
///
/// `SPI` is the card's `embedded-hal` [`SpiDevice`] (bus + chip select), `DELAY` the delay
/// the driver polls with (it waits 10 µs between polls: up to 100 ms for a read, 500 ms for a
/// write, per the SD specification). Capacity is read once at [`SdBlockDevice::new`]; cards
/// up to 2 TiB (the driver's 32-bit block index).
pub struct SdBlockDevice<SPI, DELAY>
where
    SPI: SpiDevice<u8>,
    DELAY: DelayNs,
{
    card: SdCard<Tap<SPI>, DELAY>,
    blocks: u64,
    resyncs: Cell<u64>,
    probes: u64,
    write_retries: u64,
}

impl<SPI, DELAY> core::fmt::Debug for SdBlockDevice<SPI, DELAY>
where
    SPI: SpiDevice<u8>,
    DELAY: DelayNs,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SdBlockDevice")
            .field("blocks", &self.blocks)
            .finish_non_exhaustive()
    }
}

impl<SPI, DELAY> SdBlockDevice<SPI, DELAY>
where
    SPI: SpiDevice<u8>,
    DELAY: DelayNs,
{
    /// Initialises the card behind `spi` with the driver's default options (CRC on, 50
    /// attempts of CMD0) and reads its capacity. See the module docs for the power-up clocks the
    /// caller sends first.
    pub fn new(spi: SPI, delay: DELAY) -> Result<Self, SdError> {
        Self::new_with_options(spi, delay, AcquireOpts::default())
    }

    /// As [`SdBlockDevice::new`], with the driver's options (`use_crc`, `acquire_retries`).
    /// Turning CRCs off is not advised: a garbled block would then be returned as data.
    pub fn new_with_options(spi: SPI, delay: DELAY, options: AcquireOpts) -> Result<Self, SdError> {
        let card = SdCard::new_with_options(Tap::new(spi), delay, options);
        let blocks = match card.num_blocks() {
            Ok(n) => u64::from(n.0),
            Err(e) => {
                warn!("SD card initialisation failed");
                return Err(SdError {
                    kind: classify(&e, 0),
                    driver: Some(e),
                });
            }
        };
        if blocks == 0 {
            return Err(SdError {
                kind: ErrorKind::DeviceFailed,
                driver: Some(SdCardError::RegisterReadError),
            });
        }
        debug!("SD card ready: {} blocks", blocks);
        Ok(SdBlockDevice {
            card,
            blocks,
            resyncs: Cell::new(0),
            probes: 0,
            write_retries: 0,
        })
    }

    /// The driver, e.g. to read the card type or borrow the SPI device.
    pub fn card(&self) -> &SdCard<Tap<SPI>, DELAY> {
        &self.card
    }

    /// Gives the driver back.
    pub fn into_inner(self) -> SdCard<Tap<SPI>, DELAY> {
        self.card
    }

    /// Traffic and recovery counters since [`SdBlockDevice::new`].
    pub fn stats(&self) -> SdStats {
        let (transactions, bus_bytes) = self.card.spi(|t| (t.transactions, t.bus_bytes));
        SdStats {
            transactions,
            bus_bytes,
            resyncs: self.resyncs.get(),
            probes: self.probes,
            write_retries: self.write_retries,
        }
    }

    /// Ends whatever multi-block transfer the card may still be in after a failed request,
    /// then marks the card for re-initialisation. Errors are ignored: if the card is gone, the
    /// next request finds out.
    fn resync(&self) {
        self.resyncs.set(self.resyncs.get() + 1);
        self.card.spi(|tap| {
            let spi = &mut tap.spi;
            // A CMD25 in progress ends with Stop Tran (plus one stuff byte), then programming busy.
            let _ = spi.write(&[STOP_TRAN_TOKEN, 0xFF]);
            wait_not_busy(spi);
            // A CMD18 in progress ends with CMD12; its R1b answer comes after one stuff byte.
            let _ = spi.write(&CMD12_FRAME);
            for _ in 0..16 {
                let mut b = [0xFF];
                if spi.transfer_in_place(&mut b).is_err() || b[0] & 0x80 == 0 {
                    break;
                }
            }
            wait_not_busy(spi);
        });
        self.card.mark_card_uninit();
    }

    /// Classifies a driver error on a request at `lba`, probing the card when a command got no
    /// answer at all: re-initialising it tells a dropped command (`Timeout`) from a removed or dead
    /// card (`DeviceFailed`), and a card of a different size (swapped) is `DeviceFailed` too.
    fn fail(&mut self, err: SdCardError, lba: u64) -> SdError {
        let mut kind = classify(&err, lba);
        if matches!(err, SdCardError::WriteError) {
            let token = self.card.spi(|t| t.last_miso) & 0x1F;
            if token == DATA_RES_CRC_ERROR {
                kind = ErrorKind::Transport;
            }
        }
        if matches!(
            err,
            SdCardError::TimeoutCommand(_) | SdCardError::TimeoutACommand(_)
        ) {
            self.probes += 1;
            self.card.mark_card_uninit();
            kind = match self.card.num_blocks() {
                Ok(n) if u64::from(n.0) == self.blocks => ErrorKind::Timeout,
                _ => ErrorKind::DeviceFailed,
            };
        }
        warn!("SD card error at LBA {}", lba);
        SdError {
            kind,
            driver: Some(err),
        }
    }

    /// Reads one chunk of at most [`BOUNCE_BLOCKS`] blocks.
    fn read_chunk(&mut self, lba: u64, out: &mut [u8]) -> Result<(), SdError> {
        let mut bounce: [Block; BOUNCE_BLOCKS] = core::array::from_fn(|_| Block::new());
        let n = out.len() / SD_BLOCK_BYTES;
        let blocks = bounce
            .get_mut(..n)
            .ok_or(SdError::request(ErrorKind::Misaligned))?;
        let start = block_idx(lba)?;
        match self.card.read(blocks, start) {
            Ok(()) => {
                copy_out(blocks, out);
                Ok(())
            }
            Err(e) => {
                if n > 1 {
                    self.resync();
                }
                if n > 1 && matches!(e, SdCardError::ReadError) {
                    // Pinpoint the unreadable block: read the chunk again block by block. Blocks
                    // before it are transferred, as the HAL contract allows.
                    for (i, dst) in out.chunks_exact_mut(SD_BLOCK_BYTES).enumerate() {
                        let at = lba + i as u64;
                        let one = bounce
                            .get_mut(..1)
                            .ok_or(SdError::request(ErrorKind::Misaligned))?;
                        if let Err(e) = self.card.read(one, block_idx(at)?) {
                            return Err(self.fail(e, at));
                        }
                        copy_out(one, dst);
                    }
                    // Every block read alone: the first error was transient.
                    return Ok(());
                }
                Err(self.fail(e, lba))
            }
        }
    }

    /// Writes one chunk of at most [`BOUNCE_BLOCKS`] blocks.
    fn write_chunk(&mut self, lba: u64, data: &[u8]) -> Result<(), SdError> {
        let mut bounce: [Block; BOUNCE_BLOCKS] = core::array::from_fn(|_| Block::new());
        let n = data.len() / SD_BLOCK_BYTES;
        let blocks = bounce
            .get_mut(..n)
            .ok_or(SdError::request(ErrorKind::Misaligned))?;
        for (b, src) in blocks.iter_mut().zip(data.chunks_exact(SD_BLOCK_BYTES)) {
            b.contents.copy_from_slice(src);
        }
        let start = block_idx(lba)?;
        match self.card.write(blocks, start) {
            Ok(()) => Ok(()),
            Err(e) => {
                if n == 1 {
                    return Err(self.fail(e, lba));
                }
                // Read the token before the resync clocks more bytes through the tap.
                let crc_rejected = self.card.spi(|t| t.last_miso) & 0x1F == DATA_RES_CRC_ERROR;
                self.resync();
                if !matches!(e, SdCardError::WriteError) {
                    return Err(self.fail(e, lba));
                }
                // The card rejected a block (CRC or write error; the driver does not say which
                // block). Write the chunk block by block: a block the card rejects again is a
                // medium error at that LBA (or transport, if rejected for its CRC).
                for (i, b) in blocks.iter().enumerate() {
                    let at = lba + i as u64;
                    if let Err(e) = self.card.write(core::slice::from_ref(b), block_idx(at)?) {
                        return Err(self.fail(e, at));
                    }
                }
                debug!(
                    "SD write retried block by block (CRC rejected: {})",
                    crc_rejected
                );
                self.write_retries += 1;
                Ok(())
            }
        }
    }
}

fn block_idx(lba: u64) -> Result<BlockIdx, SdError> {
    u32::try_from(lba)
        .map(BlockIdx)
        .map_err(|_| SdError::request(ErrorKind::OutOfRange))
}

fn copy_out(blocks: &[Block], out: &mut [u8]) {
    for (b, dst) in blocks.iter().zip(out.chunks_exact_mut(SD_BLOCK_BYTES)) {
        dst.copy_from_slice(&b.contents);
    }
}

/// Clocks bytes until the card releases MISO (reads `0xFF`), within [`RESYNC_BUSY_BYTES_MAX`].
fn wait_not_busy<S: SpiDevice<u8>>(spi: &mut S) {
    for _ in 0..RESYNC_BUSY_BYTES_MAX {
        let mut b = [0xFF];
        if spi.transfer_in_place(&mut b).is_err() || b[0] == 0xFF {
            return;
        }
    }
}

impl<SPI, DELAY> ErrorType for SdBlockDevice<SPI, DELAY>
where
    SPI: SpiDevice<u8>,
    DELAY: DelayNs,
{
    type Error = SdError;
}

impl<SPI, DELAY> BlockDevice for SdBlockDevice<SPI, DELAY>
where
    SPI: SpiDevice<u8>,
    DELAY: DelayNs,
{
    fn block_size(&self) -> BlockSize {
        BlockSize::B512
    }

    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
        check_io(BlockSize::B512, self.blocks, lba, buf.len()).map_err(SdError::request)?;
        let mut at = lba;
        for chunk in buf.chunks_mut(BOUNCE_BLOCKS * SD_BLOCK_BYTES) {
            self.read_chunk(at, chunk)?;
            at += (chunk.len() / SD_BLOCK_BYTES) as u64;
        }
        Ok(())
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), SdError> {
        check_io(BlockSize::B512, self.blocks, lba, buf.len()).map_err(SdError::request)?;
        let mut at = lba;
        for chunk in buf.chunks(BOUNCE_BLOCKS * SD_BLOCK_BYTES) {
            self.write_chunk(at, chunk)?;
            at += (chunk.len() / SD_BLOCK_BYTES) as u64;
        }
        Ok(())
    }

    /// Waits until the card has finished programming every block written so far (CMD9 waits
    /// for not-busy before it is sent) and checks that the same card still answers.
    fn flush(&mut self) -> Result<(), SdError> {
        match self.card.num_blocks() {
            Ok(n) if u64::from(n.0) == self.blocks => Ok(()),
            Ok(_) => Err(SdError {
                kind: ErrorKind::DeviceFailed,
                driver: None,
            }),
            Err(e) => Err(self.fail(e, 0)),
        }
    }
}
