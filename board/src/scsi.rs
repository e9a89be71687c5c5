//! A SCSI block device (the SCSI transparent command set of USB mass storage: a subset of
//! SPC-4 and SBC-3) over one raidcore LUN, independent of the transport.
//!
//! The transport (USB Bulk-Only in the RP2040 firmware, a test double on the host) hands each
//! command descriptor block to [`ScsiTarget::start`], then calls [`ScsiTarget::poll`] until it
//! returns [`Poll::Done`], moving the data phase through a [`DataPhase`] in whatever pieces it
//! has room for. `poll` never blocks on the transport: when the transport takes or gives no
//! more bytes it returns [`Poll::Busy`], so the firmware can poll USB in between.
//!
//! | command | what the pool does |
//! | --- | --- |
//! | READ(6/10/16) | [`Pool::read`](raidcore::pool::Pool::read) of the 4 KiB blocks covered |
//! | WRITE(6/10/16) | [`Pool::write`](raidcore::pool::Pool::write) of each 4 KiB block (read first where the command covers part of it); with FUA a [`Pool::flush`](raidcore::pool::Pool::flush) before status |
//! | SYNCHRONIZE CACHE(10/16), START STOP UNIT (stop) | flush |
//! | UNMAP | [`Pool::trim`](raidcore::pool::Pool::trim) of the whole 4 KiB blocks; the parts of partly covered blocks are written as zeros (so unmapped blocks read as zeros, LBPRZ) |
//! | TEST UNIT READY, INQUIRY (standard, VPD 00h, 80h, B0h, B2h), MODE SENSE(6/10) (caching page, DPOFUA), READ CAPACITY(10/16), READ FORMAT CAPACITIES, REQUEST SENSE, PREVENT ALLOW MEDIUM REMOVAL, VERIFY(10) | answered here |
//!
//! Errors become CHECK CONDITION with fixed-format sense data (see [`Sense`]): a block the pool
//! reports lost is MEDIUM ERROR / UNRECOVERED READ ERROR with the first logical block of the
//! lost 4 KiB block in the INFORMATION field; a faulted pool is HARDWARE ERROR / LOGICAL UNIT
//! FAILURE for every command that needs the medium; a full pool is DATA PROTECT / SPACE
//! ALLOCATION FAILED WRITE PROTECT.
//!
//! Logical blocks are 512 or 4096 bytes ([`BlockSize`]); the pool's blocks are 4 KiB, so with
//! 512-byte logical blocks eight make one pool block, and READ CAPACITY(16) says so.

use raidcore::pool::LUN_BLOCK;
use raidcore::pool::{Health, IoError, Pool};
use raidcore_hal::{BlockDevice, BlockSize};

/// Bytes of fixed-format sense data.
pub const SENSE_BYTES: usize = 18;
/// Most block descriptors one UNMAP may carry (reported in the Block Limits VPD page).
pub const MAX_UNMAP_DESCRIPTORS: usize = 16;

/// What the SCSI target needs of the pool; implemented for [`Pool`].
pub trait PoolIo {
    /// [`Pool::read`].
    fn read(&mut self, lun: u16, lba: u64, buf: &mut [u8]) -> Result<(), IoError>;
    /// [`Pool::write`].
    fn write(&mut self, lun: u16, lba: u64, data: &[u8]) -> Result<(), IoError>;
    /// [`Pool::flush`].
    fn flush(&mut self) -> Result<(), IoError>;
    /// [`Pool::trim`].
    fn trim(&mut self, lun: u16, lba: u64, blocks: u64) -> Result<(), IoError>;
    /// Size of `lun` in 4 KiB blocks, `None` if there is no such LUN.
    fn lun_blocks(&self, lun: u16) -> Option<u64>;
    /// True when the pool serves no I/O (more members out than the level tolerates).
    fn faulted(&self) -> bool;
    /// The pool's UUID (the unit serial number is made from it).
    fn uuid(&self) -> [u8; 16];
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    PoolIo for Pool<D, M, N, L, P, S>
{
    fn read(&mut self, lun: u16, lba: u64, buf: &mut [u8]) -> Result<(), IoError> {
        Pool::read(self, lun, lba, buf)
    }
    fn write(&mut self, lun: u16, lba: u64, data: &[u8]) -> Result<(), IoError> {
        Pool::write(self, lun, lba, data, false)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        Pool::flush(self)
    }
    fn trim(&mut self, lun: u16, lba: u64, blocks: u64) -> Result<(), IoError> {
        Pool::trim(self, lun, lba, blocks)
    }
    fn lun_blocks(&self, lun: u16) -> Option<u64> {
        self.luns().find(|l| l.id == lun).map(|l| l.blocks)
    }
    fn faulted(&self) -> bool {
        self.status().health == Health::Faulted
    }
    fn uuid(&self) -> [u8; 16] {
        Pool::uuid(self)
    }
}

/// The transport's side of a command's data phase. Both calls return at once.
pub trait DataPhase {
    /// Copies up to `buf.len()` bytes the host sent (data-out) into `buf`; returns how many
    /// (0 when none has arrived yet).
    fn receive(&mut self, buf: &mut [u8]) -> usize;
    /// Offers `data` for the host (data-in); returns how many bytes the transport took (0 when
    /// it has no room now).
    fn send(&mut self, data: &[u8]) -> usize;
}

/// Sense keys used here (SPC-4, table 51).
pub mod key {
    /// No error.
    pub const NO_SENSE: u8 = 0x0;
    /// The medium cannot be read or written at this block.
    pub const MEDIUM_ERROR: u8 = 0x3;
    /// The device failed.
    pub const HARDWARE_ERROR: u8 = 0x4;
    /// The command or its parameters are wrong.
    pub const ILLEGAL_REQUEST: u8 = 0x5;
    /// Writes refused.
    pub const DATA_PROTECT: u8 = 0x7;
}

/// Fixed-format sense data: key, additional sense code and qualifier, and the INFORMATION
/// field (a logical block address) where there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sense {
    /// Sense key ([`key`]).
    pub key: u8,
    /// Additional sense code.
    pub asc: u8,
    /// Additional sense code qualifier.
    pub ascq: u8,
    /// INFORMATION: the first logical block the error concerns.
    pub info: Option<u64>,
}

impl Sense {
    /// No sense data.
    pub const NONE: Sense = Sense::new(key::NO_SENSE, 0, 0);
    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
    pub const INVALID_OPCODE: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x20, 0);
    /// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE.
    pub const LBA_OUT_OF_RANGE: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x21, 0);
    /// ILLEGAL REQUEST, INVALID FIELD IN CDB.
    pub const INVALID_FIELD_IN_CDB: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x24, 0);
    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST.
    pub const INVALID_FIELD_IN_PARAMETERS: Sense = Sense::new(key::ILLEGAL_REQUEST, 0x26, 0);
    /// HARDWARE ERROR, LOGICAL UNIT FAILURE: the pool is faulted.
    pub const POOL_FAULTED: Sense = Sense::new(key::HARDWARE_ERROR, 0x3E, 0x01);
    /// HARDWARE ERROR, INTERNAL TARGET FAILURE: any other pool error.
    pub const INTERNAL_FAILURE: Sense = Sense::new(key::HARDWARE_ERROR, 0x44, 0);
    /// DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT: the pool is full.
    pub const POOL_FULL: Sense = Sense::new(key::DATA_PROTECT, 0x27, 0x07);
    /// MEDIUM ERROR, MEDIUM FORMAT CORRUPTED: the pool's metadata failed its checks.
    pub const METADATA_CORRUPT: Sense = Sense::new(key::MEDIUM_ERROR, 0x31, 0);

    /// Sense data without an INFORMATION field.
    pub const fn new(key: u8, asc: u8, ascq: u8) -> Self {
        Sense {
            key,
            asc,
            ascq,
            info: None,
        }
    }

    /// MEDIUM ERROR, UNRECOVERED READ ERROR at logical block `lba`.
    pub const fn unrecovered_read(lba: u64) -> Self {
        Sense {
            info: Some(lba),
            ..Sense::new(key::MEDIUM_ERROR, 0x11, 0)
        }
    }

    /// The 18 bytes of fixed-format sense data (response code 70h). INFORMATION holds 32
    /// bits; a larger LBA leaves it invalid (VALID = 0).
    pub fn encode(&self) -> [u8; SENSE_BYTES] {
        let mut s = [0u8; SENSE_BYTES];
        s[0] = 0x70;
        s[2] = self.key & 0x0F;
        if let Some(info) = self.info.and_then(|l| u32::try_from(l).ok()) {
            s[0] |= 0x80;
            s[3..7].copy_from_slice(&info.to_be_bytes());
        }
        s[7] = (SENSE_BYTES - 8) as u8;
        s[12] = self.asc;
        s[13] = self.ascq;
        s
    }

    /// The sense data for a pool error at logical block `lba` (with `per` logical blocks per
    /// 4 KiB pool block).
    pub fn of(e: IoError, lba: u64, per: u64) -> Self {
        match e {
            IoError::Unrecoverable { lba: b, .. } => Sense::unrecovered_read(b * per),
            IoError::Faulted => Sense::POOL_FAULTED,
            IoError::NoSpace => Sense::POOL_FULL,
            IoError::OutOfRange => Sense::LBA_OUT_OF_RANGE,
            IoError::Corrupt(_) => Sense {
                info: Some(lba),
                ..Sense::METADATA_CORRUPT
            },
            _ => Sense::INTERNAL_FAILURE,
        }
    }
}

/// The SCSI status a command ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Status {
    /// GOOD.
    Good,
    /// CHECK CONDITION: the sense data says why ([`ScsiTarget::sense`]).
    CheckCondition,
}

/// What [`ScsiTarget::poll`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Poll {
    /// The data phase waits for the transport; poll again.
    Busy,
    /// The command is complete: its status and the data bytes it transferred.
    Done {
        /// Status.
        status: Status,
        /// Bytes moved in the data phase.
        bytes: u32,
    },
}

/// Identification returned by INQUIRY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// T10 vendor identification (8 bytes, space padded).
    pub vendor: [u8; 8],
    /// Product identification (16 bytes, space padded).
    pub product: [u8; 16],
    /// Product revision level (4 bytes).
    pub revision: [u8; 4],
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            vendor: *b"raidcore",
            product: *b"RAID pool LUN   ",
            revision: *b"0.1 ",
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Idle,
    /// The command is complete.
    Finished(Status, u32),
    /// Data-in of `len` bytes prepared in the buffer, `sent` of them sent.
    Send {
        len: usize,
        sent: usize,
    },
    /// READ: LUN bytes `pos..end` still to send; the buffer holds pool block `pos / 4096`
    /// when `loaded`.
    Read {
        start: u64,
        pos: u64,
        end: u64,
        loaded: bool,
    },
    /// WRITE: LUN bytes `pos..end` still to receive into pool block `pos / 4096` (read first
    /// when the command covers part of it; the buffer holds it when `loaded`).
    Write {
        start: u64,
        pos: u64,
        end: u64,
        loaded: bool,
        fua: bool,
    },
    /// UNMAP: its parameter list, `len` bytes, `got` received.
    UnmapParams {
        len: usize,
        got: usize,
    },
}

/// A SCSI logical unit over LUN `lun` of a pool. Owns its state and one 4 KiB buffer; the pool
/// is passed to each call (it stays the caller's, so the idle loop can run
/// [`Pool::maintenance`] between commands).
pub struct ScsiTarget {
    lun: u16,
    block: BlockSize,
    op: Op,
    sense: Sense,
    identity: Identity,
    buf: [u8; LUN_BLOCK],
}

impl core::fmt::Debug for ScsiTarget {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScsiTarget")
            .field("lun", &self.lun)
            .field("block", &self.block)
            .field("op", &self.op)
            .field("sense", &self.sense)
            .finish_non_exhaustive()
    }
}

fn be16(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 2)
        .map_or(0, |s| u64::from(u16::from_be_bytes([s[0], s[1]])))
}

fn be32(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 4).map_or(0, |s| {
        u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    })
}

fn be64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_be_bytes(a)
    })
}

/// Writes `v` big-endian into `out[at..at + N]` (nothing if out of bounds).
fn put<const W: usize>(out: &mut [u8], at: usize, v: u64) {
    if let Some(d) = out.get_mut(at..at + W) {
        d.copy_from_slice(&v.to_be_bytes()[8 - W..]);
    }
}

impl ScsiTarget {
    /// A logical unit over `lun` with `block`-byte logical blocks.
    pub fn new(lun: u16, block: BlockSize) -> Self {
        ScsiTarget {
            lun,
            block,
            op: Op::Idle,
            sense: Sense::NONE,
            identity: Identity::default(),
            buf: [0; LUN_BLOCK],
        }
    }

    /// Sets what INQUIRY reports.
    #[must_use]
    pub fn with_identity(mut self, identity: Identity) -> Self {
        self.identity = identity;
        self
    }

    /// The current sense data (what REQUEST SENSE would return).
    pub fn sense(&self) -> Sense {
        self.sense
    }

    /// True while a command is in progress (between `start` and `Done`).
    pub fn busy(&self) -> bool {
        !matches!(self.op, Op::Idle)
    }

    /// Abandons the command in progress (a transport reset). Writes already made stay.
    pub fn reset(&mut self) {
        self.op = Op::Idle;
    }

    fn per(&self) -> u64 {
        (LUN_BLOCK / self.block.bytes()) as u64
    }

    fn capacity(&self, pool: &impl PoolIo) -> u64 {
        pool.lun_blocks(self.lun).unwrap_or(0) * self.per()
    }

    fn fail(&mut self, sense: Sense, bytes: u32) -> Op {
        self.sense = sense;
        Op::Finished(Status::CheckCondition, bytes)
    }

    /// Starts the command in `cdb` (a command in progress is abandoned). Its status comes from
    /// [`ScsiTarget::poll`].
    pub fn start(&mut self, pool: &mut impl PoolIo, cdb: &[u8]) {
        let opcode = cdb.first().copied().unwrap_or(0xFF);
        if opcode != 0x03 {
            self.sense = Sense::NONE;
        }
        self.op = match opcode {
            0x00 => self.no_data(pool, false), // TEST UNIT READY
            0x03 => self.request_sense(cdb),
            0x12 => self.inquiry(pool, cdb),
            0x1A | 0x5A => self.mode_sense(cdb),
            0x1B => self.no_data(pool, cdb.get(4).is_some_and(|b| b & 1 == 0)), // START STOP
            0x1E => Op::Finished(Status::Good, 0), // PREVENT ALLOW MEDIUM REMOVAL
            0x23 => self.read_format_capacities(pool, cdb),
            0x25 => self.read_capacity_10(pool),
            0x9E if cdb.len() >= 16 && cdb[1] & 0x1F == 0x10 => self.read_capacity_16(pool, cdb),
            0x08 | 0x0A | 0x28 | 0x2A | 0x88 | 0x8A => self.transfer(pool, cdb),
            0x2F => self.verify(pool, cdb),
            0x35 | 0x91 => self.no_data(pool, true), // SYNCHRONIZE CACHE
            0x42 => self.unmap_start(cdb),
            _ => self.fail(Sense::INVALID_OPCODE, 0),
        };
    }

    /// A command without data: checks the pool, flushes if asked.
    fn no_data(&mut self, pool: &mut impl PoolIo, flush: bool) -> Op {
        if pool.faulted() {
            return self.fail(Sense::POOL_FAULTED, 0);
        }
        if flush && let Err(e) = pool.flush() {
            return self.fail(Sense::of(e, 0, self.per()), 0);
        }
        Op::Finished(Status::Good, 0)
    }

    /// Sends the first `len` bytes of the buffer, cut to the allocation length.
    fn send(len: usize, alloc: u64) -> Op {
        Op::Send {
            len: len.min(usize::try_from(alloc).unwrap_or(usize::MAX)),
            sent: 0,
        }
    }

    fn request_sense(&mut self, cdb: &[u8]) -> Op {
        let s = self.sense.encode();
        self.buf[..SENSE_BYTES].copy_from_slice(&s);
        self.sense = Sense::NONE;
        Self::send(SENSE_BYTES, cdb.get(4).map_or(0, |&b| u64::from(b)))
    }

    fn inquiry(&mut self, pool: &impl PoolIo, cdb: &[u8]) -> Op {
        if cdb.len() < 5 {
            return self.fail(Sense::INVALID_FIELD_IN_CDB, 0);
        }
        let alloc = be16(cdb, 3);
        let evpd = cdb[1] & 1 != 0;
        let page = cdb[2];
        let per = self.per();
        self.buf.fill(0);
        let b = &mut self.buf;
        if !evpd {
            if page != 0 {
                return self.fail(Sense::INVALID_FIELD_IN_CDB, 0);
            }
            b[2] = 0x06; // SPC-4
            b[3] = 0x02; // response data format 2
            b[4] = 31;
            b[8..16].copy_from_slice(&self.identity.vendor);
            b[16..32].copy_from_slice(&self.identity.product);
            b[32..36].copy_from_slice(&self.identity.revision);
            return Self::send(36, alloc);
        }
        b[1] = page;
        let len = match page {
            0x00 => {
                b[4..8].copy_from_slice(&[0x00, 0x80, 0xB0, 0xB2]);
                4
            }
            0x80 => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                for (i, byte) in pool.uuid().iter().enumerate() {
                    b[4 + 2 * i] = HEX[usize::from(byte >> 4)];
                    b[5 + 2 * i] = HEX[usize::from(byte & 15)];
                }
                32
            }
            0xB0 => {
                // Block limits: optimal transfer granularity = one pool block; UNMAP limits.
                put::<2>(b, 6, per);
                put::<4>(b, 20, u64::from(u32::MAX));
                put::<4>(b, 24, MAX_UNMAP_DESCRIPTORS as u64);
                put::<4>(b, 28, per);
                0x3C
            }
            0xB2 => {
                b[5] = 0x80 | 0x04; // LBPU (UNMAP), LBPRZ = 1: unmapped blocks read zeros
                b[6] = 0x02; // thin provisioned
                4
            }
            _ => return self.fail(Sense::INVALID_FIELD_IN_CDB, 0),
        };
        put::<2>(b, 2, len as u64);
        Self::send(4 + len, alloc)
    }

    fn mode_sense(&mut self, cdb: &[u8]) -> Op {
        let ten = cdb.first() == Some(&0x5A);
        if cdb.len() < if ten { 9 } else { 5 } {
            return self.fail(Sense::INVALID_FIELD_IN_CDB, 0);
        }
        let page = cdb[2] & 0x3F;
        let changeable = cdb[2] >> 6 == 1;
        let head = if ten { 8 } else { 4 };
        self.buf.fill(0);
        let mut len = head;
        match page {
            0x08 | 0x3F => {
                // Caching mode page: a volatile write cache (WCE), so hosts send SYNCHRONIZE
                // CACHE; nothing is changeable.
                self.buf[len] = 0x08;
                self.buf[len + 1] = 0x12;
                if !changeable {
                    self.buf[len + 2] = 0x04;
                }
                len += 20;
            }
            0x00 => {}
            _ => return self.fail(Sense::INVALID_FIELD_IN_CDB, 0),
        }
        // Device-specific parameter: DPOFUA (FUA is honoured), not write protected.
        let (alloc, dev_param) = if ten {
            put::<2>(&mut self.buf, 0, (len - 2) as u64);
            (be16(cdb, 7), 3)
        } else {
            self.buf[0] = (len - 1) as u8;
            (u64::from(cdb[4]), 2)
        };
        self.buf[dev_param] = 0x10;
        Self::send(len, alloc)
    }

    fn read_capacity_10(&mut self, pool: &impl PoolIo) -> Op {
        let last = self
            .capacity(pool)
            .saturating_sub(1)
            .min(u64::from(u32::MAX));
        put::<4>(&mut self.buf, 0, last);
        put::<4>(&mut self.buf, 4, self.block.bytes() as u64);
        Self::send(8, 8)
    }

    fn read_capacity_16(&mut self, pool: &impl PoolIo, cdb: &[u8]) -> Op {
        self.buf[..32].fill(0);
        let last = self.capacity(pool).saturating_sub(1);
        put::<8>(&mut self.buf, 0, last);
        put::<4>(&mut self.buf, 8, self.block.bytes() as u64);
        // Logical blocks per physical block exponent (8 x 512 in a 4 KiB pool block).
        self.buf[13] = self.per().trailing_zeros() as u8;
        self.buf[14] = 0x80 | 0x40; // LBPME (thin provisioned, UNMAP), LBPRZ
        Self::send(32, be32(cdb, 10))
    }

    fn read_format_capacities(&mut self, pool: &impl PoolIo, cdb: &[u8]) -> Op {
        self.buf[..12].fill(0);
        self.buf[3] = 8;
        let blocks = self.capacity(pool).min(u64::from(u32::MAX));
        put::<4>(&mut self.buf, 4, blocks);
        self.buf[8] = 0x02; // formatted media
        put::<3>(&mut self.buf, 9, self.block.bytes() as u64);
        Self::send(12, be16(cdb, 7))
    }

    /// The LBA, block count and FUA bit of a READ or WRITE CDB, or `None` if it is too short.
    fn rw_fields(cdb: &[u8]) -> Option<(u64, u64, bool)> {
        let fua = cdb.get(1).is_some_and(|b| b & 0x08 != 0);
        match cdb.first()? {
            0x08 | 0x0A if cdb.len() >= 6 => {
                let lba = be32(cdb, 0) & 0x1F_FFFF;
                let n = u64::from(cdb[4]);
                Some((lba, if n == 0 { 256 } else { n }, false))
            }
            0x28 | 0x2A if cdb.len() >= 10 => Some((be32(cdb, 2), be16(cdb, 7), fua)),
            0x88 | 0x8A if cdb.len() >= 16 => Some((be64(cdb, 2), be32(cdb, 10), fua)),
            _ => None,
        }
    }

    /// Checks that `n` logical blocks from `lba` are inside the LUN; the byte range.
    fn range(&self, pool: &impl PoolIo, lba: u64, n: u64) -> Option<(u64, u64)> {
        let end = lba.checked_add(n)?;
        if end > self.capacity(pool) {
            return None;
        }
        let bs = self.block.bytes() as u64;
        Some((lba * bs, end * bs))
    }

    fn transfer(&mut self, pool: &mut impl PoolIo, cdb: &[u8]) -> Op {
        let Some((lba, n, fua)) = Self::rw_fields(cdb) else {
            return self.fail(Sense::INVALID_FIELD_IN_CDB, 0);
        };
        let Some((start, end)) = self.range(pool, lba, n) else {
            return self.fail(Sense::LBA_OUT_OF_RANGE, 0);
        };
        if pool.faulted() {
            return self.fail(Sense::POOL_FAULTED, 0);
        }
        let write = matches!(cdb[0], 0x0A | 0x2A | 0x8A);
        if write {
            Op::Write {
                start,
                pos: start,
                end,
                loaded: false,
                fua,
            }
        } else {
            Op::Read {
                start,
                pos: start,
                end,
                loaded: false,
            }
        }
    }

    fn verify(&mut self, pool: &mut impl PoolIo, cdb: &[u8]) -> Op {
        if cdb.len() < 10 || cdb[1] & 0x06 != 0 {
            // BYTCHK (compare with data from the host) is not supported.
            return self.fail(Sense::INVALID_FIELD_IN_CDB, 0);
        }
        if self.range(pool, be32(cdb, 2), be16(cdb, 7)).is_none() {
            return self.fail(Sense::LBA_OUT_OF_RANGE, 0);
        }
        self.no_data(pool, false)
    }

    fn unmap_start(&mut self, cdb: &[u8]) -> Op {
        let len = be16(cdb, 7) as usize;
        if cdb.len() < 10 || len > 8 + 16 * MAX_UNMAP_DESCRIPTORS {
            return self.fail(Sense::INVALID_FIELD_IN_CDB, 0);
        }
        if len == 0 {
            return Op::Finished(Status::Good, 0);
        }
        Op::UnmapParams { len, got: 0 }
    }

    /// Advances the command: moves what the transport has room or data for, runs pool calls.
    /// Returns [`Poll::Done`] once (then the target is idle), [`Poll::Busy`] while it waits.
    pub fn poll(&mut self, pool: &mut impl PoolIo, io: &mut impl DataPhase) -> Poll {
        let op = match self.op {
            Op::Idle => return Poll::Busy,
            Op::Finished(status, bytes) => {
                self.op = Op::Idle;
                return Poll::Done { status, bytes };
            }
            Op::Send { len, sent } => {
                let n = io.send(&self.buf[sent..len]);
                if sent + n == len {
                    Op::Finished(Status::Good, len as u32)
                } else {
                    Op::Send {
                        len,
                        sent: sent + n,
                    }
                }
            }
            Op::Read { .. } => self.poll_read(pool, io),
            Op::Write { .. } => self.poll_write(pool, io),
            Op::UnmapParams { len, got } => {
                let n = io.receive(&mut self.buf[got..len]);
                if got + n == len {
                    self.unmap(pool, len)
                } else {
                    Op::UnmapParams { len, got: got + n }
                }
            }
        };
        self.op = op;
        if let Op::Finished(status, bytes) = op {
            self.op = Op::Idle;
            return Poll::Done { status, bytes };
        }
        Poll::Busy
    }

    /// The piece of pool block `pos / 4096` that LUN bytes `pos..end` cover: offset, length.
    fn piece(pos: u64, end: u64) -> (usize, usize) {
        let off = (pos % LUN_BLOCK as u64) as usize;
        let len = (end - pos).min((LUN_BLOCK - off) as u64) as usize;
        (off, len)
    }

    fn poll_read(&mut self, pool: &mut impl PoolIo, io: &mut impl DataPhase) -> Op {
        let Op::Read {
            start,
            mut pos,
            end,
            mut loaded,
        } = self.op
        else {
            return Op::Idle;
        };
        let bs = self.block.bytes() as u64;
        while pos < end {
            let blk = pos / LUN_BLOCK as u64;
            if !loaded {
                if let Err(e) = pool.read(self.lun, blk, &mut self.buf) {
                    return self.fail(Sense::of(e, pos / bs, self.per()), (pos - start) as u32);
                }
                loaded = true;
            }
            let (off, len) = Self::piece(pos, end);
            let n = io.send(&self.buf[off..off + len]);
            pos += n as u64;
            if n == len {
                loaded = false;
            } else {
                return Op::Read {
                    start,
                    pos,
                    end,
                    loaded,
                };
            }
        }
        Op::Finished(Status::Good, (end - start) as u32)
    }

    fn poll_write(&mut self, pool: &mut impl PoolIo, io: &mut impl DataPhase) -> Op {
        let Op::Write {
            start,
            mut pos,
            end,
            mut loaded,
            fua,
        } = self.op
        else {
            return Op::Idle;
        };
        let bs = self.block.bytes() as u64;
        while pos < end {
            let blk = pos / LUN_BLOCK as u64;
            let (off, len) = Self::piece(pos, end);
            if !loaded {
                // A pool block the command covers only in part keeps the rest of its bytes.
                if (off != 0 || len != LUN_BLOCK)
                    && let Err(e) = pool.read(self.lun, blk, &mut self.buf)
                {
                    return self.fail(Sense::of(e, pos / bs, self.per()), (pos - start) as u32);
                }
                loaded = true;
            }
            let n = io.receive(&mut self.buf[off..off + len]);
            pos += n as u64;
            if n < len {
                return Op::Write {
                    start,
                    pos,
                    end,
                    loaded,
                    fua,
                };
            }
            let first = (blk * LUN_BLOCK as u64).max(start);
            if let Err(e) = pool.write(self.lun, blk, &self.buf) {
                return self.fail(Sense::of(e, first / bs, self.per()), (first - start) as u32);
            }
            loaded = false;
        }
        if fua && let Err(e) = pool.flush() {
            return self.fail(Sense::of(e, start / bs, self.per()), 0);
        }
        Op::Finished(Status::Good, (end - start) as u32)
    }

    /// Runs an UNMAP parameter list of `len` bytes in the buffer.
    fn unmap(&mut self, pool: &mut impl PoolIo, len: usize) -> Op {
        if len < 8 {
            return self.fail(Sense::INVALID_FIELD_IN_PARAMETERS, len as u32);
        }
        let p = &self.buf[..len];
        let descs = (be16(p, 2) as usize).min(len - 8) / 16;
        let mut ranges = heapless::Vec::<(u64, u64), MAX_UNMAP_DESCRIPTORS>::new();
        for i in 0..descs {
            let at = 8 + 16 * i;
            let (lba, n) = (be64(p, at), be32(p, at + 8));
            if n == 0 {
                continue;
            }
            let Some(bytes) = self.range(pool, lba, n) else {
                return self.fail(Sense::LBA_OUT_OF_RANGE, len as u32);
            };
            if ranges.push(bytes).is_err() {
                return self.fail(Sense::INVALID_FIELD_IN_PARAMETERS, len as u32);
            }
        }
        if pool.faulted() {
            return self.fail(Sense::POOL_FAULTED, len as u32);
        }
        for (start, end) in ranges {
            if let Err(e) = self.unmap_range(pool, start, end) {
                let bs = self.block.bytes() as u64;
                return self.fail(Sense::of(e, start / bs, self.per()), len as u32);
            }
        }
        Op::Finished(Status::Good, len as u32)
    }

    /// Unmaps LUN bytes `start..end`: trims the whole pool blocks, zeroes the parts of the
    /// (at most two) pool blocks it covers only in part.
    fn unmap_range(&mut self, pool: &mut impl PoolIo, start: u64, end: u64) -> Result<(), IoError> {
        let b = LUN_BLOCK as u64;
        let (first_whole, end_whole) = (start.div_ceil(b), end / b);
        if first_whole < end_whole {
            pool.trim(self.lun, first_whole, end_whole - first_whole)?;
        }
        let head = (start, end.min(first_whole * b));
        let tail = ((end_whole * b).max(head.1), end);
        for (from, to) in [head, tail] {
            if from < to {
                let (off, len) = Self::piece(from, to);
                pool.read(self.lun, from / b, &mut self.buf)?;
                self.buf[off..off + len].fill(0);
                pool.write(self.lun, from / b, &self.buf)?;
            }
        }
        Ok(())
    }
}
