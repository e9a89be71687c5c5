//! A fake SD card for host tests: a stateful model of an SD card in SPI mode that decodes the
//! command stream byte by byte, keeps its blocks in memory, and can be told to misbehave.
//!
//! - [`FakeSd`] is a handle to one card. It implements `embedded_hal::spi::SpiDevice<u8>` (the
//!   card alone on its bus, chip select asserted for each transaction), and the test keeps a
//!   clone to inspect the card, pull it out or inject faults.
//! - [`FakeSpiBus`] is a raw `SpiBus<u8>` with several cards on it and one [`FakeCs`] chip
//!   select pin per card, for `embedded-hal-bus` shared devices (`RefCellDevice`, `RcDevice`);
//!   only the selected card sees MOSI and drives MISO. Cards on it can demand the 74 power-up
//!   clocks (sent with no chip select asserted) before they answer.
//! - [`FakeDelay`] is an `embedded_hal::delay::DelayNs` that only adds up the requested time
//!   (virtual time, no sleeping).
//!
//! Protocol (SD Physical Layer Simplified Specification, chapter 7, SPI mode): CMD0, CMD8 (R7),
//! CMD55 + ACMD41 (a few polls in idle before ready), CMD58 (OCR with CCS for SDHC), CMD59
//! (CRC on: CRC7 on commands and CRC16 on data are then checked), CMD9/CMD10 (CSD/CID as data
//! blocks), CMD16, CMD17/CMD18 (start token 0xFE, CRC16, streaming until CMD12), CMD24/CMD25
//! (tokens 0xFE / 0xFC / 0xFD, data response 0x05 / 0x0B / 0x0D, busy), ACMD23, CMD12, CMD13.
//! SDSC cards take byte addresses, SDHC/SDXC block addresses. CRCs are computed with the `crc`
//! crate (CRC-7/MMC, CRC-16/XMODEM), independently of the driver under test.

use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;
use std::vec;
use std::vec::Vec;

use embedded_hal::digital::{ErrorType as PinErrorType, OutputPin};
use embedded_hal::spi::{self, ErrorType, Operation, SpiBus, SpiDevice};

const BLOCK: usize = 512;
const CRC7: crc::Crc<u8> = crc::Crc::<u8>::new(&crc::CRC_7_MMC);
const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// Which kind of card to model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardKind {
    /// SDHC/SDXC: CMD8 answered, CCS set in the OCR, block addresses, CSD version 2.
    Sdhc,
    /// SDSC of physical layer 2.0: CMD8 answered, CCS clear, byte addresses, CSD version 1.
    SdscV2,
    /// SDSC of physical layer 1.x: CMD8 is an illegal command, byte addresses, CSD version 1.
    SdV1,
}

/// Something for the card to do wrong. Counted faults hit the next `count` occasions; the
/// block faults stay until [`FakeSd::clear_faults`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next `count` data blocks the card sends carry a wrong CRC16 (a bit flipped on the
    /// wire).
    ReadCrc {
        /// How many blocks.
        count: u32,
    },
    /// The next `count` read commands are acknowledged but no start token ever follows.
    ReadTimeout {
        /// How many reads.
        count: u32,
    },
    /// Reads of block `lba` answer with a data error token (card ECC failed) instead of data.
    ReadErrorAt {
        /// The bad block.
        lba: u32,
    },
    /// The next `count` data blocks written are rejected as if their CRC were wrong (data
    /// response `0x0B`), whatever their CRC.
    WriteCrcReject {
        /// How many blocks.
        count: u32,
    },
    /// Writes of block `lba` are rejected with a write error (data response `0x0D`).
    WriteRejectAt {
        /// The bad block.
        lba: u32,
    },
    /// After the next data block is accepted, the card stays busy (holds MISO low) for ever.
    BusyStuck,
    /// The next `count` commands get no answer at all (a dropped command).
    DropCommand {
        /// How many commands.
        count: u32,
    },
    /// The next `count` SPI transactions on this card fail with a bus error.
    BusError {
        /// How many transactions.
        count: u32,
    },
}

/// Counters of what the card saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeSdStats {
    /// Commands received, by index (ACMDs counted under their own index too).
    pub commands: Vec<u32>,
    /// Data blocks sent to the host (CSD/CID included).
    pub blocks_sent: u64,
    /// Data blocks accepted and stored.
    pub blocks_written: u64,
    /// Data blocks rejected (CRC or write error).
    pub blocks_rejected: u64,
    /// Bytes exchanged while selected.
    pub bytes: u64,
    /// Commands that arrived with a bad CRC7 while CRC checking was on.
    pub command_crc_errors: u64,
}

impl FakeSdStats {
    /// How many times command `index` was received.
    pub fn command_count(&self, index: u8) -> u32 {
        self.commands.get(index as usize).copied().unwrap_or(0)
    }
}

#[derive(Debug)]
enum Input {
    /// Waiting for or collecting a 6-byte command frame.
    Command { frame: [u8; 6], len: usize },
    /// After CMD24/CMD25: waiting for a start token (or Stop Tran in a multi-block write).
    WaitToken { lba: u32, multi: bool },
    /// Collecting a data block (512 bytes + CRC16).
    Data { lba: u32, multi: bool, buf: Vec<u8> },
}

#[derive(Debug)]
#[allow(clippy::struct_excessive_bools)] // a card's status flags, as the spec lists them
struct Card {
    kind: CardKind,
    data: Vec<u8>,
    blocks: u32,
    present: bool,
    needs_power_up: bool,
    idle_clocks: u64,
    ready: bool,
    acmd41_polls_left: u8,
    app_cmd: bool,
    crc_on: bool,
    status_error: bool,
    input: Input,
    out: VecDeque<u8>,
    /// Busy bytes (MISO low) still to send after `out` drains; `u64::MAX` = stuck.
    busy: u64,
    /// Next block of a CMD18 stream.
    stream: Option<u32>,
    // Faults.
    read_crc: u32,
    read_timeout: u32,
    write_crc_reject: u32,
    busy_stuck_next: bool,
    drop_commands: u32,
    bus_errors: u32,
    bad_read: BTreeSet<u32>,
    bad_write: BTreeSet<u32>,
    stats: FakeSdStats,
}

/// Busy bytes after a block is programmed (short: the model is instantaneous, but the driver's
/// busy handling is exercised).
const PROGRAM_BUSY_BYTES: u64 = 3;

impl Card {
    fn new(kind: CardKind, data: Vec<u8>) -> Self {
        let blocks = (data.len() / BLOCK) as u32;
        Card {
            kind,
            data,
            blocks,
            present: true,
            needs_power_up: false,
            idle_clocks: 0,
            ready: false,
            acmd41_polls_left: 2,
            app_cmd: false,
            crc_on: false,
            status_error: false,
            input: Input::Command {
                frame: [0; 6],
                len: 0,
            },
            out: VecDeque::new(),
            busy: 0,
            stream: None,
            read_crc: 0,
            read_timeout: 0,
            write_crc_reject: 0,
            busy_stuck_next: false,
            drop_commands: 0,
            bus_errors: 0,
            bad_read: BTreeSet::new(),
            bad_write: BTreeSet::new(),
            stats: FakeSdStats {
                commands: vec![0; 64],
                ..FakeSdStats::default()
            },
        }
    }

    fn powered(&self) -> bool {
        self.present && (!self.needs_power_up || self.idle_clocks >= 74)
    }

    /// 8 clocks with the card not selected: counts toward the power-up clocks, nothing else.
    fn clock_deselected(&mut self) {
        self.idle_clocks = self.idle_clocks.saturating_add(8);
    }

    /// One byte exchanged while selected: returns MISO, consumes MOSI.
    fn exchange(&mut self, mosi: u8) -> u8 {
        if !self.powered() {
            return 0xFF;
        }
        self.stats.bytes += 1;
        let miso = self.next_out();
        self.take_in(mosi);
        miso
    }

    fn next_out(&mut self) -> u8 {
        if let Some(b) = self.out.pop_front() {
            return b;
        }
        if self.busy > 0 {
            if self.busy != u64::MAX {
                self.busy -= 1;
            }
            return 0x00;
        }
        if let Some(lba) = self.stream {
            // CMD18: the next block follows after a gap byte.
            self.out.push_back(0xFF);
            if self.queue_block(lba) {
                self.stream = Some(lba + 1);
            } else {
                self.stream = None;
            }
        }
        0xFF
    }

    /// Queues block `lba` as a data packet (or an error token). False if the stream must stop.
    fn queue_block(&mut self, lba: u32) -> bool {
        if lba >= self.blocks {
            self.out.push_back(0x08); // data error token: out of range
            return false;
        }
        if self.bad_read.contains(&lba) {
            self.out.push_back(0x04); // data error token: card ECC failed
            return false;
        }
        let start = lba as usize * BLOCK;
        let payload = self.data[start..start + BLOCK].to_vec();
        self.queue_packet(&payload);
        true
    }

    fn queue_packet(&mut self, payload: &[u8]) {
        let mut crc = CRC16.checksum(payload);
        if self.read_crc > 0 {
            self.read_crc -= 1;
            crc ^= 0x0001;
        }
        self.out.push_back(0xFE);
        self.out.extend(payload.iter().copied());
        self.out.extend(crc.to_be_bytes());
        self.stats.blocks_sent += 1;
    }

    fn take_in(&mut self, mosi: u8) {
        match &mut self.input {
            Input::Command { frame, len } => {
                if *len == 0 && mosi & 0xC0 != 0x40 {
                    return; // not a command start (idle 0xFF, stray tokens)
                }
                frame[*len] = mosi;
                *len += 1;
                if *len == 6 {
                    let f = *frame;
                    self.input = Input::Command {
                        frame: [0; 6],
                        len: 0,
                    };
                    self.command(f);
                }
            }
            Input::WaitToken { lba, multi } => {
                let (lba, multi) = (*lba, *multi);
                match mosi {
                    0xFE if !multi => {
                        self.input = Input::Data {
                            lba,
                            multi,
                            buf: Vec::with_capacity(BLOCK + 2),
                        }
                    }
                    0xFC if multi => {
                        self.input = Input::Data {
                            lba,
                            multi,
                            buf: Vec::with_capacity(BLOCK + 2),
                        }
                    }
                    0xFD if multi => {
                        // Stop Tran: one stuff byte, then busy while the card finishes.
                        self.input = Input::Command {
                            frame: [0; 6],
                            len: 0,
                        };
                        self.out.push_back(0xFF);
                        self.busy = PROGRAM_BUSY_BYTES;
                    }
                    _ => {}
                }
            }
            Input::Data { lba, multi, buf } => {
                buf.push(mosi);
                if buf.len() == BLOCK + 2 {
                    let (lba, multi) = (*lba, *multi);
                    let buf = std::mem::take(buf);
                    self.data_block(lba, multi, &buf);
                }
            }
        }
    }

    fn data_block(&mut self, lba: u32, multi: bool, buf: &[u8]) {
        let (payload, crc) = buf.split_at(BLOCK);
        let crc_ok = !self.crc_on || CRC16.checksum(payload).to_be_bytes() == [crc[0], crc[1]];
        let token = if self.write_crc_reject > 0 || !crc_ok {
            self.write_crc_reject = self.write_crc_reject.saturating_sub(1);
            0x0B
        } else if lba >= self.blocks || self.bad_write.contains(&lba) {
            self.status_error = true;
            0x0D
        } else {
            let start = lba as usize * BLOCK;
            self.data[start..start + BLOCK].copy_from_slice(payload);
            0x05
        };
        self.out.push_back(token | 0xE0);
        if token == 0x05 {
            self.stats.blocks_written += 1;
            self.busy = if std::mem::take(&mut self.busy_stuck_next) {
                u64::MAX
            } else {
                PROGRAM_BUSY_BYTES
            };
        } else {
            self.stats.blocks_rejected += 1;
        }
        self.input = if multi {
            Input::WaitToken {
                lba: lba + 1,
                multi,
            }
        } else {
            Input::Command {
                frame: [0; 6],
                len: 0,
            }
        };
    }

    fn r1(&self) -> u8 {
        u8::from(!self.ready)
    }

    fn respond(&mut self, bytes: &[u8]) {
        self.out.push_back(0xFF); // N_CR: one byte before the response
        self.out.extend(bytes.iter().copied());
    }

    fn address(&self, arg: u32) -> Option<u32> {
        match self.kind {
            CardKind::Sdhc => Some(arg),
            CardKind::SdscV2 | CardKind::SdV1 => arg
                .is_multiple_of(BLOCK as u32)
                .then_some(arg / BLOCK as u32),
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one match over the SD command set, arm per command, as the spec lists them"
    )]
    fn command(&mut self, f: [u8; 6]) {
        let index = f[0] & 0x3F;
        let arg = u32::from_be_bytes([f[1], f[2], f[3], f[4]]);
        let app = std::mem::take(&mut self.app_cmd);
        self.stats.commands[index as usize] += 1;
        if self.drop_commands > 0 {
            self.drop_commands -= 1;
            return;
        }
        // During a CMD18 stream the card only listens for CMD12.
        if self.stream.is_some() && index != 12 {
            return;
        }
        let crc_needed = self.crc_on || index == 0 || index == 8;
        if crc_needed && CRC7.checksum(&f[..5]) != f[5] >> 1 {
            self.stats.command_crc_errors += 1;
            self.respond(&[self.r1() | 0x08]);
            return;
        }
        let illegal = self.r1() | 0x04;
        match (app, index) {
            (_, 0) => {
                self.ready = false;
                self.crc_on = false;
                self.status_error = false;
                self.acmd41_polls_left = 2;
                self.stream = None;
                self.out.clear();
                self.busy = 0;
                self.respond(&[0x01]);
            }
            (_, 8) => {
                if self.kind == CardKind::SdV1 {
                    self.respond(&[illegal]);
                } else {
                    self.respond(&[self.r1(), 0x00, 0x00, ((arg >> 8) & 0x0F) as u8, arg as u8]);
                }
            }
            (_, 55) => {
                self.app_cmd = true;
                self.respond(&[self.r1()]);
            }
            (true, 41) => {
                let hcs = arg & 0x4000_0000 != 0;
                // An SDHC card never finishes initialising for a host that does not set HCS.
                if self.acmd41_polls_left > 0 || (self.kind == CardKind::Sdhc && !hcs) {
                    self.acmd41_polls_left = self.acmd41_polls_left.saturating_sub(1);
                } else {
                    self.ready = true;
                }
                self.respond(&[self.r1()]);
            }
            (_, 59) => {
                self.crc_on = arg & 1 == 1;
                self.respond(&[self.r1()]);
            }
            (_, 58) => {
                let mut ocr: u32 = 0x00FF_8000;
                if self.ready {
                    ocr |= 0x8000_0000;
                    if self.kind == CardKind::Sdhc {
                        ocr |= 0x4000_0000;
                    }
                }
                let b = ocr.to_be_bytes();
                self.respond(&[self.r1(), b[0], b[1], b[2], b[3]]);
            }
            _ if !self.ready => self.respond(&[illegal]),
            (true, 23) => self.respond(&[0x00]),
            (_, 9) => {
                self.respond(&[0x00]);
                let csd = self.csd();
                self.out.push_back(0xFF);
                self.queue_packet(&csd);
            }
            (_, 10) => {
                self.respond(&[0x00]);
                let cid = cid();
                self.out.push_back(0xFF);
                self.queue_packet(&cid);
            }
            (_, 16) => self.respond(&[if arg == BLOCK as u32 { 0x00 } else { 0x40 }]),
            (_, 17 | 18) => match self.address(arg) {
                Some(lba) if lba < self.blocks => {
                    self.respond(&[0x00]);
                    if self.read_timeout > 0 {
                        self.read_timeout -= 1;
                        return;
                    }
                    if index == 17 {
                        self.out.push_back(0xFF);
                        self.queue_block(lba);
                    } else {
                        self.stream = Some(lba);
                    }
                }
                _ => self.respond(&[0x40]), // parameter/address error
            },
            (_, 12) => {
                self.stream = None;
                self.out.clear();
                // Stuff byte, then R1b (one busy byte).
                self.out.extend([0xFF, 0xFF, 0x00]);
                self.busy = 1;
            }
            (_, 13) => {
                let status = if std::mem::take(&mut self.status_error) {
                    0x04
                } else {
                    0x00
                };
                self.respond(&[0x00, status]);
            }
            (_, 24 | 25) => match self.address(arg) {
                Some(lba) if lba < self.blocks => {
                    self.respond(&[0x00]);
                    self.input = Input::WaitToken {
                        lba,
                        multi: index == 25,
                    };
                }
                _ => self.respond(&[0x40]),
            },
            _ => self.respond(&[illegal]),
        }
    }

    /// The CSD register (SD spec 5.3), CRC7 included.
    fn csd(&self) -> [u8; 16] {
        let mut v: u128 = 0;
        let set =
            |v: &mut u128, lo: u32, width: u32, x: u128| *v |= (x & ((1u128 << width) - 1)) << lo;
        match self.kind {
            CardKind::Sdhc => {
                set(&mut v, 126, 2, 1); // CSD_STRUCTURE = 1 (version 2.0)
                set(&mut v, 112, 8, 0x0E); // TAAC
                set(&mut v, 96, 8, 0x32); // TRAN_SPEED 25 MHz
                set(&mut v, 84, 12, 0x5B5); // CCC
                set(&mut v, 80, 4, 9); // READ_BL_LEN 512
                set(&mut v, 48, 22, u128::from(self.blocks / 1024 - 1)); // C_SIZE (512 KiB units)
                set(&mut v, 46, 1, 1); // ERASE_BLK_EN
                set(&mut v, 39, 7, 0x7F); // SECTOR_SIZE
                set(&mut v, 26, 3, 2); // R2W_FACTOR
                set(&mut v, 22, 4, 9); // WRITE_BL_LEN
            }
            CardKind::SdscV2 | CardKind::SdV1 => {
                // capacity = (C_SIZE + 1) * 2^(C_SIZE_MULT + 2) * 2^READ_BL_LEN, with 512-byte
                // blocks and C_SIZE_MULT = 7: (C_SIZE + 1) * 512 blocks.
                set(&mut v, 112, 8, 0x26);
                set(&mut v, 96, 8, 0x32);
                set(&mut v, 84, 12, 0x5F5);
                set(&mut v, 80, 4, 9);
                set(&mut v, 62, 12, u128::from(self.blocks / 512 - 1));
                set(&mut v, 47, 3, 7);
                set(&mut v, 46, 1, 1);
                set(&mut v, 39, 7, 0x1F);
                set(&mut v, 26, 3, 4);
                set(&mut v, 22, 4, 9);
            }
        }
        let mut raw = v.to_be_bytes();
        raw[15] = (CRC7.checksum(&raw[..15]) << 1) | 1;
        raw
    }
}

/// A CID register (SD spec 5.2), CRC7 included.
fn cid() -> [u8; 16] {
    let mut raw = *b"\x03RCFAKES\x10\x00\x00\x00\x01\x01\x8a\x00";
    raw[15] = (CRC7.checksum(&raw[..15]) << 1) | 1;
    raw
}

/// A handle to one fake card. Clones share the card. As an `SpiDevice`, the card is alone on
/// its bus and selected for each transaction.
#[derive(Debug, Clone)]
pub struct FakeSd {
    card: Rc<RefCell<Card>>,
}

impl FakeSd {
    /// An SDHC card of `blocks` 512-byte blocks, all zero. `blocks` is rounded up to a whole
    /// number of 512 KiB (the CSD v2 capacity unit).
    pub fn sdhc(blocks: u32) -> Self {
        Self::new(CardKind::Sdhc, blocks)
    }

    /// A card of the given kind and size in 512-byte blocks, all zero. The size is rounded up to
    /// the kind's capacity unit (1024 blocks for SDHC, 512 for SDSC), and SDSC cards are at most
    /// 1 GiB here (4096 * 512 blocks).
    ///
    /// # Panics
    /// If an SDSC card is asked for more than 1 GiB.
    pub fn new(kind: CardKind, blocks: u32) -> Self {
        let unit = if kind == CardKind::Sdhc { 1024 } else { 512 };
        let blocks = blocks.max(1).div_ceil(unit) * unit;
        assert!(
            kind == CardKind::Sdhc || blocks <= 4096 * 512,
            "this fake SDSC card holds at most 1 GiB"
        );
        Self::with_contents(kind, vec![0; blocks as usize * BLOCK])
    }

    /// A card holding `image` (its length a multiple of the capacity unit: 512 KiB for SDHC,
    /// 256 KiB for SDSC).
    pub fn with_contents(kind: CardKind, image: Vec<u8>) -> Self {
        FakeSd {
            card: Rc::new(RefCell::new(Card::new(kind, image))),
        }
    }

    /// Size in 512-byte blocks.
    pub fn blocks(&self) -> u32 {
        self.card.borrow().blocks
    }

    /// A copy of the card's content.
    pub fn contents(&self) -> Vec<u8> {
        self.card.borrow().data.clone()
    }

    /// Overwrites the card's content from byte `offset` behind the host's back (e.g. to plant
    /// data or corruption).
    pub fn poke(&self, offset: usize, bytes: &[u8]) {
        self.card.borrow_mut().data[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    /// Injects a fault.
    pub fn inject(&self, fault: Fault) {
        let mut c = self.card.borrow_mut();
        match fault {
            Fault::ReadCrc { count } => c.read_crc += count,
            Fault::ReadTimeout { count } => c.read_timeout += count,
            Fault::ReadErrorAt { lba } => {
                c.bad_read.insert(lba);
            }
            Fault::WriteCrcReject { count } => c.write_crc_reject += count,
            Fault::WriteRejectAt { lba } => {
                c.bad_write.insert(lba);
            }
            Fault::BusyStuck => c.busy_stuck_next = true,
            Fault::DropCommand { count } => c.drop_commands += count,
            Fault::BusError { count } => c.bus_errors += count,
        }
    }

    /// Removes every pending and persistent fault (a stuck busy is released too).
    pub fn clear_faults(&self) {
        let mut c = self.card.borrow_mut();
        c.read_crc = 0;
        c.read_timeout = 0;
        c.write_crc_reject = 0;
        c.busy_stuck_next = false;
        c.drop_commands = 0;
        c.bus_errors = 0;
        c.bad_read.clear();
        c.bad_write.clear();
        if c.busy == u64::MAX {
            c.busy = 0;
        }
    }

    /// Pulls the card out: it stops answering (MISO floats high). It keeps its content.
    pub fn remove(&self) {
        let mut c = self.card.borrow_mut();
        c.present = false;
    }

    /// Puts the card back, freshly powered: it needs initialising again (and the power-up
    /// clocks, if it demands them).
    pub fn insert(&self) {
        let mut c = self.card.borrow_mut();
        c.present = true;
        c.ready = false;
        c.crc_on = false;
        c.idle_clocks = 0;
        c.stream = None;
        c.out.clear();
        c.busy = 0;
        c.input = Input::Command {
            frame: [0; 6],
            len: 0,
        };
    }

    /// Makes the card stay silent until it has seen at least 74 clocks with its chip select
    /// de-asserted (as real cards may). Only a [`FakeSpiBus`] can give those clocks.
    pub fn require_power_up_clocks(&self) {
        let mut c = self.card.borrow_mut();
        c.needs_power_up = true;
        c.idle_clocks = 0;
    }

    /// Counters of what the card saw.
    pub fn stats(&self) -> FakeSdStats {
        self.card.borrow().stats.clone()
    }

    fn take_bus_error(&self) -> bool {
        let mut c = self.card.borrow_mut();
        if c.bus_errors > 0 {
            c.bus_errors -= 1;
            true
        } else {
            false
        }
    }
}

/// The error a fake SPI transfer fails with ([`Fault::BusError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeBusError;

impl spi::Error for FakeBusError {
    fn kind(&self) -> spi::ErrorKind {
        spi::ErrorKind::Other
    }
}

impl ErrorType for FakeSd {
    type Error = FakeBusError;
}

/// Runs one SPI operation against a byte-exchange function. `read` sends 0xFF on MOSI, as an SD
/// host must.
fn run_op(op: &mut Operation<'_, u8>, mut xchg: impl FnMut(u8) -> u8) {
    match op {
        Operation::Read(buf) => buf.iter_mut().for_each(|b| *b = xchg(0xFF)),
        Operation::Write(buf) => buf.iter().for_each(|&b| {
            xchg(b);
        }),
        Operation::Transfer(read, write) => {
            for i in 0..read.len().max(write.len()) {
                let r = xchg(write.get(i).copied().unwrap_or(0xFF));
                if let Some(slot) = read.get_mut(i) {
                    *slot = r;
                }
            }
        }
        Operation::TransferInPlace(buf) => buf.iter_mut().for_each(|b| *b = xchg(*b)),
        Operation::DelayNs(_) => {}
    }
}

impl SpiDevice<u8> for FakeSd {
    fn transaction(&mut self, operations: &mut [Operation<'_, u8>]) -> Result<(), FakeBusError> {
        if self.take_bus_error() {
            return Err(FakeBusError);
        }
        let mut c = self.card.borrow_mut();
        for op in operations.iter_mut() {
            run_op(op, |b| c.exchange(b));
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct BusState {
    cards: Vec<(FakeSd, bool)>,
}

/// A raw SPI bus with fake cards on it, each behind its own [`FakeCs`] chip select (active low).
/// Clones share the bus.
#[derive(Debug, Clone, Default)]
pub struct FakeSpiBus {
    state: Rc<RefCell<BusState>>,
}

impl FakeSpiBus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    /// Attaches `card` and returns its chip select pin (de-asserted).
    pub fn attach(&self, card: &FakeSd) -> FakeCs {
        let mut st = self.state.borrow_mut();
        st.cards.push((card.clone(), false));
        FakeCs {
            bus: self.state.clone(),
            index: st.cards.len() - 1,
        }
    }

    fn exchange(&self, mosi: u8) -> Result<u8, FakeBusError> {
        let st = self.state.borrow();
        let mut miso = 0xFF;
        for (card, selected) in &st.cards {
            if *selected {
                if card.take_bus_error() {
                    return Err(FakeBusError);
                }
                // Several selected cards fight over MISO; model it as wired-AND.
                miso &= card.card.borrow_mut().exchange(mosi);
            } else {
                card.card.borrow_mut().clock_deselected();
            }
        }
        Ok(miso)
    }
}

impl ErrorType for FakeSpiBus {
    type Error = FakeBusError;
}

impl SpiBus<u8> for FakeSpiBus {
    fn read(&mut self, words: &mut [u8]) -> Result<(), FakeBusError> {
        for w in words {
            *w = self.exchange(0xFF)?;
        }
        Ok(())
    }

    fn write(&mut self, words: &[u8]) -> Result<(), FakeBusError> {
        for &w in words {
            self.exchange(w)?;
        }
        Ok(())
    }

    fn transfer(&mut self, read: &mut [u8], write: &[u8]) -> Result<(), FakeBusError> {
        for i in 0..read.len().max(write.len()) {
            let r = self.exchange(write.get(i).copied().unwrap_or(0xFF))?;
            if let Some(slot) = read.get_mut(i) {
                *slot = r;
            }
        }
        Ok(())
    }

    fn transfer_in_place(&mut self, words: &mut [u8]) -> Result<(), FakeBusError> {
        for w in words {
            *w = self.exchange(*w)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), FakeBusError> {
        Ok(())
    }
}

/// The chip select of one card on a [`FakeSpiBus`]: low selects the card.
#[derive(Debug)]
pub struct FakeCs {
    bus: Rc<RefCell<BusState>>,
    index: usize,
}

impl PinErrorType for FakeCs {
    type Error = core::convert::Infallible;
}

impl OutputPin for FakeCs {
    fn set_low(&mut self) -> Result<(), Self::Error> {
        self.bus.borrow_mut().cards[self.index].1 = true;
        Ok(())
    }

    fn set_high(&mut self) -> Result<(), Self::Error> {
        self.bus.borrow_mut().cards[self.index].1 = false;
        Ok(())
    }
}

/// A delay that sleeps not at all and adds up the nanoseconds asked for (virtual time).
/// Clones share the total.
#[derive(Debug, Clone, Default)]
pub struct FakeDelay {
    total_ns: Rc<RefCell<u64>>,
}

impl FakeDelay {
    /// Nanoseconds of delay requested so far.
    pub fn total_ns(&self) -> u64 {
        *self.total_ns.borrow()
    }
}

impl embedded_hal::delay::DelayNs for FakeDelay {
    fn delay_ns(&mut self, ns: u32) {
        *self.total_ns.borrow_mut() += u64::from(ns);
    }
}

/// An SD card on a shared fake bus, as the driver sees it.
pub type SharedCard = crate::sd::SdBlockDevice<
    embedded_hal_bus::spi::RcDevice<FakeSpiBus, FakeCs, FakeDelay>,
    FakeDelay,
>;

/// A rig of fake cards spread over one or more fake buses: the cards (to inspect and fault)
/// and their initialised [`SharedCard`] block devices, in the same order.
#[derive(Debug)]
pub struct CardRig {
    /// The cards.
    pub cards: Vec<FakeSd>,
    /// The block devices, card `i` on bus `i % buses`.
    pub devices: Vec<SharedCard>,
    /// The buses.
    pub buses: Vec<FakeSpiBus>,
    /// The delay every device uses (virtual time).
    pub delay: FakeDelay,
}

/// Builds `count` SDHC cards of `blocks` blocks each, spread round-robin over `buses` shared
/// SPI buses, sends each bus the power-up clocks, and initialises every card through
/// `embedded-sdmmc` (`SdBlockDevice` on an `embedded-hal-bus` `RcDevice`). For the six-member
/// pools (plus spares) of the board tests.
///
/// # Panics
/// If `buses` is 0 or a card does not initialise (a bug in the fake or the driver).
pub fn card_rig(count: usize, buses: usize, blocks: u32) -> CardRig {
    assert!(buses > 0, "at least one bus");
    let delay = FakeDelay::default();
    let bus_list: Vec<FakeSpiBus> = (0..buses).map(|_| FakeSpiBus::new()).collect();
    let cards: Vec<FakeSd> = (0..count).map(|_| FakeSd::sdhc(blocks)).collect();
    let mut pins = Vec::new();
    for (i, card) in cards.iter().enumerate() {
        card.require_power_up_clocks();
        pins.push(bus_list[i % buses].attach(card));
    }
    let shared: Vec<Rc<RefCell<FakeSpiBus>>> = bus_list
        .iter()
        .map(|b| Rc::new(RefCell::new(b.clone())))
        .collect();
    for bus in &shared {
        crate::sd::power_up_clocks(&mut *bus.borrow_mut()).expect("fake bus");
    }
    let devices = pins
        .into_iter()
        .enumerate()
        .map(|(i, cs)| {
            let bus = Rc::clone(&shared[i % buses]);
            let spi = embedded_hal_bus::spi::RcDevice::new(bus, cs, delay.clone()).expect("cs pin");
            crate::sd::SdBlockDevice::new(spi, delay.clone()).expect("fake card initialises")
        })
        .collect();
    CardRig {
        cards,
        devices,
        buses: bus_list,
        delay,
    }
}
