//! Every on-disk structure, encoded and decoded in one place so format changes have one home.
//!
//! Everything read from a disk is untrusted: every decoder checks magic, version, lengths and a
//! CRC32C before it believes a field, and returns [`FormatError`] instead of panicking.
//!
//! ## Member disk layout (all sizes in bytes)
//! ```text
//! 0         4 KiB                 36 KiB    40 KiB                           40 KiB + zil_slots×4 KiB
//! | super A | root ring (8 slots) | super B | intent-log ring (zil_slots − 2) | flush marks (2) | data area …
//! ```
//! Both superblock copies are written in turn with a flush between them, so a torn write leaves
//! the other valid. Checkpoint roots go round the ring, one slot per checkpoint generation, on
//! every member.
//!
//! ## Log items (in the data area, 64-byte aligned)
//! Every item starts with a 64-byte [`ItemHeader`] followed by its payload; the item occupies
//! `round_up(64 + stored_len, 64)` bytes. Items never cross a segment boundary; they may cross
//! stripe boundaries.
//!
//! Fixed-layout structures (item and intent-log headers, map entries) are little-endian at fixed
//! offsets because they are read at random; variable structures (superblock, root, LUN table)
//! are `postcard`-encoded behind a length and a CRC32C.

use heapless::Vec;
use serde::{Deserialize, Serialize};

use crate::raid::{DiskState, Geometry};

/// Format version written by this code; others are refused on import.
/// (2: a rebuild cursor names the disk it belongs to; 3: segment entries carry the sequence
/// number their use began with; 4: the last [`FLUSH_MARK_SLOTS`] slots of the intent-log area
/// hold flush marks, not ring records; 5: 64-byte headers are sealed with [`header_crc`], not
/// CRC32C; 6: map entries of uncompressed extents carry their own block's CRC32C,
/// [`MapEntry::block_crc`]; 7: metadata items (map pages, tables) are written twice, and their
/// pointers name both copies, [`BlockPtr::ditto`]; 8: superblocks name the pool's dedicated
/// intent-log device, [`Superblock::log_device`], and a disk may have [`Role::Log`].)
pub const FORMAT_VERSION: u16 = 8;
/// Magic of a superblock ("RCSUPER1").
pub const SUPER_MAGIC: u64 = u64::from_le_bytes(*b"RCSUPER1");
/// Magic of a checkpoint root ("RCROOT01").
pub const ROOT_MAGIC: u64 = u64::from_le_bytes(*b"RCROOT01");
/// Magic of a log item header.
pub const ITEM_MAGIC: u32 = u32::from_le_bytes(*b"RCIT");
/// Magic of an intent-log record header.
pub const ZIL_MAGIC: u32 = u32::from_le_bytes(*b"RCZL");
/// Magic of a flush mark ("RCFM").
pub const FLUSH_MARK_MAGIC: u32 = u32::from_le_bytes(*b"RCFM");
/// Slots at the end of each member's intent-log area that hold [`FlushMark`]s, written in turn
/// so a torn write of one leaves the other.
pub const FLUSH_MARK_SLOTS: u32 = 2;

/// Size of a label slot (superblock, root, intent-log block), in bytes.
pub const SLOT_BYTES: usize = 4096;
/// Slots of the root ring. The label area before the intent log holds superblock copy A, the
/// root ring, then superblock copy B ([`superblock_slot`], [`root_slot`]).
pub const ROOT_SLOTS: u32 = 8;

/// Label slot (in [`SLOT_BYTES`] units from a member's first byte) of superblock copy `copy`
/// (0 = A, 1 = B). The copies lie apart, on either side of the root ring, so that one run of
/// unreadable blocks cannot take both (adjacent copies did: two latent sector errors on blocks 7
/// and 8 of a 512-byte-block disk left no superblock, and import refused a good member).
#[must_use]
pub const fn superblock_slot(copy: u32) -> u32 {
    if copy == 0 { 0 } else { 1 + ROOT_SLOTS }
}

/// First member block of superblock copy `copy` (0 or 1) on a member of `block_bytes` blocks.
#[must_use]
pub const fn superblock_lba(copy: u32, block_bytes: usize) -> u64 {
    superblock_slot(copy) as u64 * (SLOT_BYTES / block_bytes) as u64
}

/// Label slot of root ring entry `i` (taken modulo [`ROOT_SLOTS`]).
#[must_use]
pub const fn root_slot(i: u32) -> u32 {
    1 + i % ROOT_SLOTS
}
/// A disk sector, in bytes: the unit intent-log ranges are rounded to, and the least a kept
/// compression must save.
pub const SECTOR: usize = 512;
/// Alignment and allocation unit of log items, in bytes: a 64-byte header plus a 4 KiB block
/// costs 4160 bytes, not 4608.
pub const ITEM_ALIGN: usize = 64;
/// Size of an item header and of an intent-log record header, in bytes.
pub const HEADER_BYTES: usize = 64;
/// Client block size, in bytes: LUN LBAs count 4 KiB blocks.
pub const LUN_BLOCK: usize = 4096;
/// Largest extent, in bytes (32 blocks of 4 KiB).
pub const MAX_EXTENT_BYTES: usize = 32 * LUN_BLOCK;
/// Bytes of one map page item payload.
pub const PAGE_PAYLOAD: usize = 4096 - HEADER_BYTES;
/// Bytes of one map entry.
pub const ENTRY_BYTES: usize = 16;
/// Entries per map page (leaf or index): the radix tree's fan-out.
pub const FANOUT: usize = PAGE_PAYLOAD / ENTRY_BYTES;

/// Why on-disk bytes were not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FormatError {
    /// Wrong magic: not a raidcore structure (or never written).
    Magic,
    /// Checksum mismatch: torn, rotten or overwritten.
    Crc,
    /// A length or field out of its allowed range.
    Bounds,
    /// Written by a format version this code does not know.
    Version(u16),
    /// Encoding failed (buffer too small for the structure).
    Encode,
}

impl core::fmt::Display for FormatError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FormatError::Magic => f.write_str("bad magic"),
            FormatError::Crc => f.write_str("checksum mismatch"),
            FormatError::Bounds => f.write_str("field out of range"),
            FormatError::Version(v) => write!(f, "unknown format version {v}"),
            FormatError::Encode => f.write_str("structure too large to encode"),
        }
    }
}

impl core::error::Error for FormatError {}

/// CRC-32C (Castagnoli) of `data`, as iSCSI, ext4 and ZFS use it.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    crate::checksum::crc32c(data)
}

/// `x` rounded up to a multiple of `to` (a power of two).
#[must_use]
pub const fn round_up(x: usize, to: usize) -> usize {
    (x + to - 1) & !(to - 1)
}

fn get_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        a.copy_from_slice(s);
    }
    u16::from_le_bytes(a)
}
fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(s) = b.get_mut(at..at + v.len()) {
        s.copy_from_slice(v);
    }
}

/// What a log item holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum ItemKind {
    /// Client data: `blocks` 4 KiB blocks of LUN `lun` from LBA `lba`.
    Extent = 1,
    /// A map page: level in `blocks`, page index in `lba`.
    MapPage = 2,
    /// An unmap of `blocks` blocks of LUN `lun` from LBA `lba` (TRIM, write-zeroes).
    Trim = 3,
    /// Filler up to a stripe or segment end.
    Pad = 4,
    /// The LUN table (postcard).
    LunTable = 5,
    /// The segment usage table (packed 8-byte entries).
    SegmentTable = 6,
    /// The list of LBAs that could not be recovered (postcard).
    BadList = 7,
}

impl ItemKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => ItemKind::Extent,
            2 => ItemKind::MapPage,
            3 => ItemKind::Trim,
            4 => ItemKind::Pad,
            5 => ItemKind::LunTable,
            6 => ItemKind::SegmentTable,
            7 => ItemKind::BadList,
            _ => return None,
        })
    }
}

/// Item flag: the payload is LZ4-compressed.
pub const FLAG_COMPRESSED: u8 = 1;
/// Item flag: written by the cleaner (relocated live data).
pub const FLAG_CLEANER: u8 = 2;

/// The 64-byte header in front of every log item. It names the pool, LUN, LBA range, sequence
/// number and its own log address, so a torn, lost, stale or misdirected write is caught even
/// when the block itself looks valid (ARCHITECTURE invariant 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ItemHeader {
    /// What the item holds.
    pub kind: ItemKind,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// LUN number (extents, map pages, trims).
    pub lun: u16,
    /// First LBA in 4 KiB blocks (extents, trims), page index (map pages).
    pub lba: u64,
    /// Block count (extents, trims), tree level (map pages).
    pub blocks: u32,
    /// Payload bytes stored after the header.
    pub stored_len: u32,
    /// Payload bytes once decompressed.
    pub raw_len: u32,
    /// CRC32C of the stored payload.
    pub payload_crc: u32,
    /// Log sequence number: items are numbered consecutively in log order.
    pub seq: u64,
    /// The first 8 bytes of the pool UUID.
    pub pool: u64,
    /// The log address this item was written at, in bytes.
    pub addr: u64,
}

/// The seal of a 64-byte header: CRC-32/ISO-HDLC (the CRC of Ethernet and zlib) of its bytes
/// 0..60, through `crc`.
///
/// Not CRC32C, the payloads' checksum, because a CRC is linear: the XOR of two headers sealed
/// with it (two versions of one log position: a reused segment gets items at the same
/// offsets) is a codeword of that CRC, and adding a codeword anywhere inside a payload leaves
/// the payload's CRC unchanged. A parity rebuild against a torn stripe (power cut mid-write, one
/// member holding the old version of such a header, parity the new) is off by exactly that
/// XOR, so with one CRC for both it passed as the data written. A second, coprime polynomial
/// makes that difference visible to the payload's CRC32C (but for a 2^-32 chance).
pub fn header_crc(bytes: &[u8]) -> u32 {
    HEADER_CRC.checksum(bytes)
}

static HEADER_CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

/// Framing shared by the fixed 64-byte headers ([`ItemHeader`], [`ZilHeader`], [`FlushMark`]):
/// a 4-byte magic at 0 and the [`header_crc`] of bytes 0..60 at 60. Zeroes the header at the
/// start of `out`, writes `magic`, and returns it for the caller's fields.
fn header_mut(out: &mut [u8], magic: u32) -> Result<&mut [u8], FormatError> {
    let b = out.get_mut(..HEADER_BYTES).ok_or(FormatError::Encode)?;
    b.fill(0);
    put(b, 0, &magic.to_le_bytes());
    Ok(b)
}

/// Writes the [`header_crc`] of a framed header's bytes 0..60 at 60 (the last step of
/// encoding).
fn seal_header(b: &mut [u8]) -> Result<(), FormatError> {
    let crc = header_crc(b.get(..60).ok_or(FormatError::Encode)?);
    put(b, 60, &crc.to_le_bytes());
    Ok(())
}

/// The 64-byte header at the start of `b`, once its magic is `magic` and its CRC checks.
fn checked_header(b: &[u8], magic: u32) -> Result<&[u8], FormatError> {
    let b = b.get(..HEADER_BYTES).ok_or(FormatError::Bounds)?;
    if get_u32(b, 0) != magic {
        return Err(FormatError::Magic);
    }
    if header_crc(b.get(..60).ok_or(FormatError::Bounds)?) != get_u32(b, 60) {
        return Err(FormatError::Crc);
    }
    Ok(b)
}

/// [`checked_header`] for headers that carry [`FORMAT_VERSION`] at byte 4.
fn checked_versioned_header(b: &[u8], magic: u32) -> Result<&[u8], FormatError> {
    let b = checked_header(b, magic)?;
    let v = get_u16(b, 4);
    if v != FORMAT_VERSION {
        return Err(FormatError::Version(v));
    }
    Ok(b)
}

impl ItemHeader {
    /// Bytes the whole item occupies in the log (header + payload, rounded to 64 bytes).
    #[must_use]
    pub const fn item_bytes(&self) -> usize {
        round_up(HEADER_BYTES + self.stored_len as usize, ITEM_ALIGN)
    }

    /// Encodes into the first 64 bytes of `out` (which must be at least that long).
    pub fn encode(&self, out: &mut [u8]) -> Result<(), FormatError> {
        let b = header_mut(out, ITEM_MAGIC)?;
        put(b, 4, &[self.kind as u8, self.flags]);
        put(b, 6, &self.lun.to_le_bytes());
        put(b, 8, &self.lba.to_le_bytes());
        put(b, 16, &self.blocks.to_le_bytes());
        put(b, 20, &self.stored_len.to_le_bytes());
        put(b, 24, &self.raw_len.to_le_bytes());
        put(b, 28, &self.payload_crc.to_le_bytes());
        put(b, 32, &self.seq.to_le_bytes());
        put(b, 40, &self.pool.to_le_bytes());
        put(b, 48, &self.addr.to_le_bytes());
        seal_header(b)
    }

    /// Decodes and checks a header (magic, CRC, kind, lengths up to `max_payload` bytes).
    pub fn decode(b: &[u8], max_payload: usize) -> Result<Self, FormatError> {
        let b = checked_header(b, ITEM_MAGIC)?;
        let kind = ItemKind::from_u8(b.get(4).copied().unwrap_or(0)).ok_or(FormatError::Bounds)?;
        let h = ItemHeader {
            kind,
            flags: b.get(5).copied().unwrap_or(0),
            lun: get_u16(b, 6),
            lba: get_u64(b, 8),
            blocks: get_u32(b, 16),
            stored_len: get_u32(b, 20),
            raw_len: get_u32(b, 24),
            payload_crc: get_u32(b, 28),
            seq: get_u64(b, 32),
            pool: get_u64(b, 40),
            addr: get_u64(b, 48),
        };
        // Extents may decompress to more than they store; nothing else is compressed.
        let max_raw = if h.kind == ItemKind::Extent {
            MAX_EXTENT_BYTES
        } else {
            max_payload
        };
        if h.stored_len as usize > max_payload || h.raw_len as usize > max_raw {
            return Err(FormatError::Bounds);
        }
        if !h.addr.is_multiple_of(ITEM_ALIGN as u64) || !h.fields_fit_kind() {
            return Err(FormatError::Bounds);
        }
        Ok(h)
    }

    /// Whether the fields hold what the writer of this kind of item puts there: an extent
    /// covers 1 to 32 blocks whose raw bytes it holds (stored as they are, or compressed
    /// smaller); a map page is one page of a tree level a LUN can have; a TRIM covers at least
    /// one block; tables store what they say; the LBA range does not overflow. Nothing that
    /// fails this is used, whatever its CRC says.
    #[must_use]
    pub fn fields_fit_kind(&self) -> bool {
        let span = self.lba.checked_add(u64::from(self.blocks)).is_some();
        match self.kind {
            ItemKind::Extent => {
                let compressed = self.flags & FLAG_COMPRESSED != 0;
                span && (1..=(MAX_EXTENT_BYTES / LUN_BLOCK) as u32).contains(&self.blocks)
                    && self.raw_len as usize == self.blocks as usize * LUN_BLOCK
                    && self.flags & !(FLAG_COMPRESSED | FLAG_CLEANER) == 0
                    && if compressed {
                        self.stored_len < self.raw_len
                    } else {
                        self.stored_len == self.raw_len
                    }
            }
            ItemKind::MapPage => {
                self.blocks <= MAX_MAP_LEVEL
                    && self.stored_len as usize == PAGE_PAYLOAD
                    && self.raw_len as usize == PAGE_PAYLOAD
            }
            ItemKind::Trim => span && self.blocks >= 1 && self.stored_len == 0,
            ItemKind::Pad => self.raw_len == 0,
            ItemKind::LunTable | ItemKind::BadList => self.raw_len == self.stored_len,
            ItemKind::SegmentTable => {
                self.stored_len == self.raw_len
                    && self.stored_len as usize == self.blocks as usize * SEG_ENTRY_BYTES
            }
        }
    }
}

/// The highest map tree level: a LUN of 2^64 blocks needs 9 levels of fan-out [`FANOUT`].
pub const MAX_MAP_LEVEL: u32 = 8;

/// A pointer to a log item: where it is, how long, and the CRC32C of its payload (kept outside
/// the item, as ZFS keeps checksums in block pointers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockPtr {
    /// Log address of the item, in bytes (0 with `len` 0 means "none").
    pub addr: u64,
    /// Item length in the log, in bytes (header + payload + rounding).
    pub len: u32,
    /// CRC32C of the payload.
    pub crc: u32,
    /// Log address of a second copy of the item (same length and payload, its own header),
    /// placed so that no member block row holds bytes of both: metadata's "ditto" copy, as ZFS
    /// keeps extra copies of its metadata, so that one latent sector error on a degraded stripe
    /// cannot take both. Encoded as one varint, 0 for none (a copy never lies at address 0).
    #[serde(with = "ditto_addr")]
    pub ditto: Option<u64>,
}

/// [`BlockPtr::ditto`] as one `u64`, 0 for none: smaller code on Cortex-M than postcard's
/// `Option` (the encoding is one byte for none either way).
mod ditto_addr {
    use serde::{Deserialize, Deserializer, Serializer};

    // serde's `with` hands the field over by reference.
    #[allow(clippy::ref_option)]
    pub(super) fn serialize<S: Serializer>(d: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.unwrap_or(0))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        u64::deserialize(d).map(|a| (a != 0).then_some(a))
    }
}

impl BlockPtr {
    /// The null pointer.
    pub const NONE: BlockPtr = BlockPtr {
        addr: 0,
        len: 0,
        crc: 0,
        ditto: None,
    };
    /// True for the null pointer.
    #[must_use]
    pub const fn is_none(&self) -> bool {
        self.len == 0
    }

    /// The pointer to the ditto copy alone, if there is one.
    #[must_use]
    pub const fn ditto_ptr(&self) -> Option<BlockPtr> {
        match self.ditto {
            Some(addr) => Some(BlockPtr {
                addr,
                len: self.len,
                crc: self.crc,
                ditto: None,
            }),
            None => None,
        }
    }

    /// Each copy's pointer alone: the first, then the ditto if there is one.
    pub fn copies(&self) -> impl Iterator<Item = BlockPtr> {
        let first = BlockPtr {
            ditto: None,
            ..*self
        };
        core::iter::once(first).chain(self.ditto_ptr())
    }
}

/// Ditto addresses an index entry can hold: 44 bits of 64-byte units (1 PiB of log).
const DITTO_UNITS: u64 = 1 << 44;

/// One 16-byte map entry: where a LUN block (leaf pages) or a child page (index pages) lives.
///
/// Layout: `[0..6]` item address in 64-byte units, `[6]` block index inside the extent, `[7]`
/// extent block count, `[8..12]` stored payload length in bytes (bit 31: valid, bit 30:
/// compressed, bit 29: [`MapEntry::block_crc`]; the item's length follows from bits 0..29),
/// `[12..16]` a CRC32C: of this entry's own 4 KiB block when `block_crc` is set, else of the
/// item's whole payload. An all-zero entry is unmapped.
///
/// An index entry whose child page has a ditto copy sets bit 28 instead: its payload length is
/// then a page's (4 KiB less its header), and the ditto's address in 64-byte units takes bytes
/// `[6..8]` (its low 16 bits) and bits 0..28 of `[8..12]` (the next 28).
///
/// A block CRC lets a read of one block of an uncompressed extent read and check that block
/// alone (not the item's header or the other blocks), and lets loss be exact to the block: a
/// block whose bytes still check is served even when the rest of its extent is lost. Compressed
/// extents decode only whole, so their entries keep the payload's CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MapEntry {
    /// Item address in 64-byte units.
    pub unit: u64,
    /// Stored payload bytes of the item (below 2^29).
    pub stored_len: u32,
    /// Index of this block inside its extent.
    pub index: u8,
    /// Blocks in the extent.
    pub blocks: u8,
    /// The payload is compressed.
    pub compressed: bool,
    /// CRC32C of this block's 4 KiB (`block_crc`) or of the item's payload.
    pub crc: u32,
    /// `crc` covers this entry's own block (uncompressed extents), not the whole payload.
    pub block_crc: bool,
    /// Index entries: the log address of the child page's ditto copy (`BlockPtr::ditto`).
    pub ditto: Option<u64>,
    /// The entry maps something.
    pub valid: bool,
}

impl MapEntry {
    /// The unmapped entry.
    pub const NONE: MapEntry = MapEntry {
        unit: 0,
        stored_len: 0,
        index: 0,
        blocks: 0,
        compressed: false,
        crc: 0,
        block_crc: false,
        ditto: None,
        valid: false,
    };

    /// Log address of the item, in bytes.
    #[must_use]
    pub const fn addr(&self) -> u64 {
        self.unit * ITEM_ALIGN as u64
    }

    /// Item length in the log, in bytes.
    #[must_use]
    pub const fn item_bytes(&self) -> usize {
        round_up(HEADER_BYTES + self.stored_len as usize, ITEM_ALIGN)
    }

    /// An entry pointing at a whole map page item (index pages).
    #[must_use]
    pub fn from_ptr(p: BlockPtr) -> Self {
        if p.is_none() {
            return MapEntry::NONE;
        }
        MapEntry {
            unit: p.addr / ITEM_ALIGN as u64,
            stored_len: (p.len as usize).saturating_sub(HEADER_BYTES) as u32,
            index: 0,
            blocks: 0,
            compressed: false,
            crc: p.crc,
            block_crc: false,
            ditto: p.ditto.filter(|&a| a / (ITEM_ALIGN as u64) < DITTO_UNITS),
            valid: true,
        }
    }

    /// The item this entry points at, with the payload CRC it must match (0: none known here,
    /// for an entry holding its block's CRC instead).
    #[must_use]
    pub const fn ptr(&self) -> BlockPtr {
        if !self.valid {
            return BlockPtr::NONE;
        }
        BlockPtr {
            addr: self.addr(),
            len: self.item_bytes() as u32,
            crc: if self.block_crc { 0 } else { self.crc },
            ditto: self.ditto,
        }
    }

    /// Log address of this entry's own 4 KiB block inside an uncompressed extent item.
    #[must_use]
    pub const fn block_addr(&self) -> u64 {
        self.addr() + HEADER_BYTES as u64 + self.index as u64 * LUN_BLOCK as u64
    }

    /// The log bytes `[lo, hi)` a read of this block needs: its own 4 KiB when the entry holds
    /// its block's CRC, else the whole item (header and payload, checked and decoded whole).
    #[must_use]
    pub const fn read_span(&self) -> (u64, u64) {
        if self.block_crc {
            (self.block_addr(), self.block_addr() + LUN_BLOCK as u64)
        } else {
            (self.addr(), self.addr() + self.item_bytes() as u64)
        }
    }

    /// This block's share of `total` (bytes of the whole extent): the shares of an extent's
    /// blocks add up to `total` exactly, so space counters stay exact as blocks are remapped.
    #[must_use]
    pub const fn share(&self, total: u32) -> u32 {
        let n = if self.blocks == 0 {
            1
        } else {
            self.blocks as u32
        };
        total / n
            + if (self.index as u32) < total % n {
                1
            } else {
                0
            }
    }

    /// Encodes into 16 bytes at `out[at..]`.
    pub fn encode(&self, out: &mut [u8], at: usize) {
        let mut b = [0u8; ENTRY_BYTES];
        if self.valid {
            let u = self.unit.to_le_bytes();
            b[..6].copy_from_slice(&u[..6]);
            b[6] = self.index;
            b[7] = self.blocks;
            let mut len = (self.stored_len & 0x1fff_ffff)
                | 0x8000_0000
                | if self.compressed { 0x4000_0000 } else { 0 }
                | if self.block_crc { 0x2000_0000 } else { 0 };
            let ditto = self.ditto.map(|a| a / ITEM_ALIGN as u64);
            if let Some(d) = ditto.filter(|&d| d < DITTO_UNITS) {
                b[6..8].copy_from_slice(&(d as u16).to_le_bytes());
                len = 0x9000_0000 | ((d >> 16) as u32 & 0x0fff_ffff);
            }
            b[8..12].copy_from_slice(&len.to_le_bytes());
            b[12..16].copy_from_slice(&self.crc.to_le_bytes());
        }
        put(out, at, &b);
    }

    /// Decodes 16 bytes at `b[at..]` (missing bytes read as unmapped).
    #[must_use]
    pub fn decode(b: &[u8], at: usize) -> Self {
        let Some(e) = b.get(at..at + ENTRY_BYTES) else {
            return MapEntry::NONE;
        };
        let len = get_u32(e, 8);
        if len & 0x8000_0000 == 0 {
            return MapEntry::NONE;
        }
        let mut u = [0u8; 8];
        if let (Some(d), Some(src)) = (u.get_mut(..6), e.get(..6)) {
            d.copy_from_slice(src);
        }
        if len & 0x1000_0000 != 0 {
            let low = u64::from(get_u16(e, 6));
            let ditto = (u64::from(len & 0x0fff_ffff) << 16 | low) * ITEM_ALIGN as u64;
            return MapEntry {
                unit: u64::from_le_bytes(u),
                stored_len: PAGE_PAYLOAD as u32,
                index: 0,
                blocks: 0,
                compressed: false,
                crc: get_u32(e, 12),
                block_crc: false,
                ditto: Some(ditto),
                valid: true,
            };
        }
        MapEntry {
            unit: u64::from_le_bytes(u),
            stored_len: len & 0x1fff_ffff,
            index: e.get(6).copied().unwrap_or(0),
            blocks: e.get(7).copied().unwrap_or(0),
            compressed: len & 0x4000_0000 != 0,
            crc: get_u32(e, 12),
            block_crc: len & 0x2000_0000 != 0,
            ditto: None,
            valid: true,
        }
    }
}

/// The role a disk plays in its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Role {
    /// Member in this slot.
    Member(u8),
    /// Hot spare.
    Spare,
    /// The pool's dedicated intent-log device (a SLOG): holds intent-log records and flush
    /// marks, never stripes.
    Log,
}

/// One member slot as the pool configuration records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// GUID of the disk that fills the slot (0: none).
    pub guid: u64,
    /// Its state.
    pub state: DiskState,
}

/// Layout and volume settings fixed at pool creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolLayout {
    /// Intent-log ring size per member, in 4 KiB slots.
    pub zil_slots: u32,
    /// Stripes per segment.
    pub segment_stripes: u32,
    /// Segments in the data area.
    pub segments: u32,
    /// Largest extent, in 4 KiB blocks.
    pub max_extent_blocks: u8,
    /// LZ4 compression of extents.
    pub compression: bool,
}

/// The pool configuration, written on every member and spare. `generation` grows with every
/// membership change, so a disk that was away while the pool changed is recognised as stale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superblock {
    /// [`SUPER_MAGIC`].
    pub magic: u64,
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u16,
    /// The pool's identity.
    pub pool_uuid: [u8; 16],
    /// This disk's identity.
    pub disk_guid: u64,
    /// This disk's role.
    pub role: Role,
    /// Configuration generation.
    pub generation: u64,
    /// Array geometry.
    pub geometry: Geometry,
    /// Layout settings.
    pub layout: PoolLayout,
    /// Member slots: which disk fills each and its state.
    pub members: Vec<MemberRecord, 32>,
    /// GUIDs of the hot spares.
    pub spares: Vec<u64, 32>,
    /// The dedicated intent-log device, if the pool has one.
    pub log_device: Option<LogDeviceRecord>,
}

/// The pool's dedicated intent-log device as the configuration records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogDeviceRecord {
    /// Its GUID.
    pub guid: u64,
    /// `Online`, or `Failed` once it failed (the pool then logs on its members, and import
    /// does not wait for it).
    pub state: DiskState,
    /// Slots of its intent-log ring, fixed when it was added: a device found smaller at
    /// import is refused, and one made larger keeps its ring where it was.
    pub ring_slots: u32,
}

/// Encodes a postcard structure into a slot: `[len u32][crc u32][bytes]`.
fn encode_framed<T: Serialize>(v: &T, out: &mut [u8]) -> Result<usize, FormatError> {
    let (head, body) = out.split_at_mut_checked(8).ok_or(FormatError::Encode)?;
    let used = postcard::to_slice(v, body)
        .map_err(|_| FormatError::Encode)?
        .len();
    let crc = crc32c(body.get(..used).ok_or(FormatError::Encode)?);
    put(head, 0, &(used as u32).to_le_bytes());
    put(head, 4, &crc.to_le_bytes());
    Ok(used + 8)
}

fn decode_framed<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T, FormatError> {
    let len = get_u32(b, 0) as usize;
    let body = b
        .get(8..8usize.checked_add(len).ok_or(FormatError::Bounds)?)
        .ok_or(FormatError::Bounds)?;
    if len == 0 {
        return Err(FormatError::Magic);
    }
    if crc32c(body) != get_u32(b, 4) {
        return Err(FormatError::Crc);
    }
    postcard::from_bytes(body).map_err(|_| FormatError::Bounds)
}

impl Superblock {
    /// Encodes into a 4 KiB slot (zero-filled past the structure).
    pub fn encode(&self, out: &mut [u8]) -> Result<(), FormatError> {
        let slot = out.get_mut(..SLOT_BYTES).ok_or(FormatError::Encode)?;
        slot.fill(0);
        encode_framed(self, slot).map(|_| ())
    }

    /// Decodes and checks a slot.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let sb: Superblock = decode_framed(b.get(..SLOT_BYTES).ok_or(FormatError::Bounds)?)?;
        if sb.magic != SUPER_MAGIC {
            return Err(FormatError::Magic);
        }
        if sb.version != FORMAT_VERSION {
            return Err(FormatError::Version(sb.version));
        }
        // The geometry is decoded, not built by `Geometry::try_new`: its rules are checked
        // here before anything divides by its block size or walks its stripes.
        if !sb.geometry.is_valid() || sb.members.len() != sb.geometry.disks() {
            return Err(FormatError::Bounds);
        }
        Ok(sb)
    }
}

/// The first 8 bytes of a pool UUID as a number (what item and intent-log headers carry).
#[must_use]
pub fn pool_tag(uuid: &[u8; 16]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(uuid.get(..8).unwrap_or(&[0; 8]));
    u64::from_le_bytes(a)
}

/// Where the log continues after a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LogCursor {
    /// Log address of the next item, in bytes (a stripe boundary after a checkpoint).
    pub head: u64,
    /// Sequence number the next item gets.
    pub next_item_seq: u64,
    /// Sequence number the stripe at `head` gets when written.
    pub next_stripe_seq: u64,
}

/// Progress of a rebuild, saved in every root so a restart resumes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildCursor {
    /// Member slot being rebuilt.
    pub disk: u8,
    /// Stripes below this are rebuilt.
    pub next_stripe: u64,
    /// GUID of the disk being rebuilt: the cursor applies to that disk only, not to a spare
    /// that took the slot after this root was written (its rebuild starts over).
    pub guid: u64,
}

/// Progress of a scrub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubCursor {
    /// Next segment to scrub.
    pub next_segment: u32,
    /// Blocks repaired so far in this pass.
    pub repaired: u64,
    /// Blocks found unrepairable so far in this pass.
    pub unrepairable: u64,
}

/// Counters that survive restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Bytes clients wrote.
    pub client_bytes_written: u64,
    /// Bytes clients read.
    pub client_bytes_read: u64,
    /// Raw (uncompressed) bytes of client extents appended.
    pub extent_raw_bytes: u64,
    /// Stored bytes of client extents appended (after compression, without headers).
    pub extent_stored_bytes: u64,
    /// Log bytes of client extents (headers and rounding included).
    pub extent_log_bytes: u64,
    /// Log bytes written by the cleaner.
    pub cleaner_log_bytes: u64,
    /// Log bytes of metadata items (map pages, tables, trims).
    pub metadata_log_bytes: u64,
    /// Log bytes of padding.
    pub pad_log_bytes: u64,
    /// Bytes written to intent-log rings (all copies).
    pub zil_bytes: u64,
    /// Bytes written to superblock and root slots.
    pub label_bytes: u64,
    /// Bytes of parity and mirror copies written.
    pub redundancy_bytes: u64,
    /// Bytes written by rebuilds and repairs.
    pub repair_bytes: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Metadata items written with one copy, not two (`BlockPtr::ditto`): the log had no
    /// room left for both (a nearly full pool); the page or table gets two again when next
    /// written.
    pub metadata_single_copies: u64,
}

/// A checkpoint root (uberblock): the newest valid one on any member is where import starts.
#[allow(clippy::struct_field_names)] // `root_gen`: the name the root has on every member
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    /// [`ROOT_MAGIC`].
    pub magic: u64,
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u16,
    /// The pool's identity.
    pub pool_uuid: [u8; 16],
    /// Checkpoint generation (grows by one per checkpoint).
    pub root_gen: u64,
    /// Configuration generation current when it was written.
    pub config_gen: u64,
    /// Where the log continues.
    pub log: LogCursor,
    /// Segments the log may use until the next checkpoint, in order; the first is the one
    /// holding `log.head`.
    pub reserved: Vec<u32, 16>,
    /// The LUN table item.
    pub luns: BlockPtr,
    /// The segment usage table item.
    pub segments: BlockPtr,
    /// The unrecoverable-LBA list item.
    pub bad: BlockPtr,
    /// Rebuild in progress.
    pub rebuild: Option<RebuildCursor>,
    /// Scrub in progress.
    pub scrub: Option<ScrubCursor>,
    /// Persistent counters.
    pub counters: Counters,
}

impl Root {
    /// Encodes into a 4 KiB slot.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), FormatError> {
        let slot = out.get_mut(..SLOT_BYTES).ok_or(FormatError::Encode)?;
        slot.fill(0);
        encode_framed(self, slot).map(|_| ())
    }

    /// Decodes and checks a slot.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let r: Root = decode_framed(b.get(..SLOT_BYTES).ok_or(FormatError::Bounds)?)?;
        if r.magic != ROOT_MAGIC {
            return Err(FormatError::Magic);
        }
        if r.version != FORMAT_VERSION {
            return Err(FormatError::Version(r.version));
        }
        Ok(r)
    }

    /// Whether every field fits a pool of `disks` members, `stripes` stripes and `layout`
    /// (what import checks before it uses a root: the window's segments exist and differ, the
    /// head lies in the window's first segment, the tables and cursors lie in the pool).
    #[must_use]
    pub fn fits(&self, layout: &PoolLayout, stripes: u64, disks: usize, sdb: u64) -> bool {
        let seg_bytes = u64::from(layout.segment_stripes) * sdb;
        let data = stripes * sdb;
        let first = self.reserved.first().copied();
        let window_ok = !self.reserved.is_empty()
            && self.reserved.iter().all(|&s| s < layout.segments)
            && self
                .reserved
                .iter()
                .enumerate()
                .all(|(i, s)| !self.reserved.iter().skip(i + 1).any(|t| t == s));
        let head_ok = first.is_some_and(|s| {
            let start = u64::from(s) * seg_bytes;
            self.log.head >= start && self.log.head <= start + seg_bytes
        });
        let ptr_ok = |p: &BlockPtr| {
            let in_log = |a: u64| a.checked_add(u64::from(p.len)).is_some_and(|e| e <= data);
            p.len > 0 && in_log(p.addr) && p.ditto.is_none_or(in_log)
        };
        window_ok
            && head_ok
            && ptr_ok(&self.luns)
            && ptr_ok(&self.segments)
            && ptr_ok(&self.bad)
            && self
                .rebuild
                .is_none_or(|r| usize::from(r.disk) < disks && r.next_stripe <= stripes)
            && self.scrub.is_none_or(|c| c.next_segment <= layout.segments)
    }
}

/// Per-LUN space counters, kept exactly by adding and removing each mapped block's share of its
/// item (the share is computed the same way both times).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LunCounters {
    /// Mapped 4 KiB blocks.
    pub mapped_blocks: u64,
    /// Sum over mapped blocks of stored payload bytes / blocks of their extent.
    pub stored_bytes: u64,
    /// Sum over mapped blocks of log item bytes / blocks of their extent.
    pub log_bytes: u64,
}

/// Longest LUN name, in bytes.
pub const LUN_NAME_MAX: usize = 24;

/// One LUN as the LUN table records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LunRecord {
    /// LUN number (its index in the table).
    pub id: u16,
    /// Export name.
    pub name: heapless::String<LUN_NAME_MAX>,
    /// Size in 4 KiB blocks.
    pub blocks: u64,
    /// Root page of its map (none while empty).
    pub map_root: BlockPtr,
    /// Height of its map tree (1 = the root is a leaf).
    pub depth: u8,
    /// Space counters.
    pub counters: LunCounters,
}

/// Encodes a LUN table (postcard) into `out`; returns the bytes used.
pub fn encode_lun_table(luns: &[LunRecord], out: &mut [u8]) -> Result<usize, FormatError> {
    encode_framed(&luns, out)
}

/// Decodes a LUN table of at most `L` LUNs.
pub fn decode_lun_table<const L: usize>(b: &[u8]) -> Result<Vec<LunRecord, L>, FormatError> {
    decode_framed(b)
}

/// Bytes of one segment usage table entry.
pub const SEG_ENTRY_BYTES: usize = 16;

/// State of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SegState {
    /// Free: may be reserved for the log.
    Free,
    /// Holds (or is receiving) log items.
    Used,
    /// Emptied by the cleaner at checkpoint generation `.0`; free once a later checkpoint is
    /// durable (so the previous root never points into reused space).
    Pending(u32),
}

/// One segment usage table entry: live bytes, state, and where its current use began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SegEntry {
    /// Bytes of live items in the segment.
    pub live: u32,
    /// Its state.
    pub state: SegState,
    /// Sequence number of the first item the log wrote in the segment since it last left the
    /// free list (0: not known). An item found there with a lower number is a leftover of an
    /// earlier use, which a member that lost a write still shows (its header and CRC check),
    /// so walks over the segment's items reject it and rebuild the column instead.
    pub first_seq: u64,
}

impl SegEntry {
    /// A free segment's entry.
    pub const FREE: SegEntry = SegEntry {
        live: 0,
        state: SegState::Free,
        first_seq: 0,
    };

    /// Encodes into [`SEG_ENTRY_BYTES`] bytes at `out[at..]`.
    pub fn encode(&self, out: &mut [u8], at: usize) {
        let tag: u32 = match self.state {
            SegState::Free => 0,
            SegState::Used => 1,
            SegState::Pending(g) => 0x8000_0000 | (g & 0x7fff_ffff),
        };
        put(out, at, &self.live.to_le_bytes());
        put(out, at + 4, &tag.to_le_bytes());
        put(out, at + 8, &self.first_seq.to_le_bytes());
    }

    /// Decodes [`SEG_ENTRY_BYTES`] bytes at `b[at..]` (missing bytes read as zeros).
    pub fn decode(b: &[u8], at: usize) -> Self {
        let tag = get_u32(b, at + 4);
        let state = match tag {
            0 => SegState::Free,
            1 => SegState::Used,
            t if t & 0x8000_0000 != 0 => SegState::Pending(t & 0x7fff_ffff),
            _ => SegState::Used,
        };
        SegEntry {
            live: get_u32(b, at),
            state,
            first_seq: get_u64(b, at + 8),
        }
    }
}

/// The header of an intent-log (ZIL) record: a copy of bytes `offset..offset + len` of the open
/// stripe at `stripe_addr`, whose stripe sequence number is `stripe_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ZilHeader {
    /// First 8 bytes of the pool UUID.
    pub pool: u64,
    /// Log address of the stripe's first byte.
    pub stripe_addr: u64,
    /// The stripe's sequence number.
    pub stripe_seq: u64,
    /// Offset of the copied bytes in the stripe.
    pub offset: u32,
    /// Bytes copied (the payload follows the header).
    pub len: u32,
    /// CRC32C of the payload.
    pub payload_crc: u32,
    /// Record sequence number (grows with every record).
    pub record_seq: u64,
}

impl ZilHeader {
    /// Encodes into the first 64 bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), FormatError> {
        let b = header_mut(out, ZIL_MAGIC)?;
        put(b, 4, &FORMAT_VERSION.to_le_bytes());
        put(b, 8, &self.pool.to_le_bytes());
        put(b, 16, &self.stripe_addr.to_le_bytes());
        put(b, 24, &self.stripe_seq.to_le_bytes());
        put(b, 32, &self.offset.to_le_bytes());
        put(b, 36, &self.len.to_le_bytes());
        put(b, 40, &self.payload_crc.to_le_bytes());
        put(b, 44, &self.record_seq.to_le_bytes());
        seal_header(b)
    }

    /// Decodes and checks a record header; `max_len` bounds the payload length.
    pub fn decode(b: &[u8], max_len: usize) -> Result<Self, FormatError> {
        let b = checked_versioned_header(b, ZIL_MAGIC)?;
        let h = ZilHeader {
            pool: get_u64(b, 8),
            stripe_addr: get_u64(b, 16),
            stripe_seq: get_u64(b, 24),
            offset: get_u32(b, 32),
            len: get_u32(b, 36),
            payload_crc: get_u32(b, 40),
            record_seq: get_u64(b, 44),
        };
        if h.len == 0 || h.len as usize > max_len {
            return Err(FormatError::Bounds);
        }
        Ok(h)
    }
}

/// A flush mark: written to every member after a flush completed (its cache flushes returned),
/// and never flushed itself. Finding one proves the log was durable up to byte `durable` of the
/// stripe at `stripe_addr` (sequence `stripe_seq`). Import uses it to tell damage from a torn
/// tail: roll-forward that stops short of the newest mark has met an item that more faults
/// than the level tolerates destroyed, not one a power cut left unwritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FlushMark {
    /// First 8 bytes of the pool UUID.
    pub pool: u64,
    /// Log address of the stripe open at the flush.
    pub stripe_addr: u64,
    /// That stripe's sequence number.
    pub stripe_seq: u64,
    /// Bytes of that stripe durable at the flush.
    pub durable: u32,
    /// Mark sequence number (grows with every mark; the newest wins).
    pub mark_seq: u64,
}

impl FlushMark {
    /// Encodes into the first 64 bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), FormatError> {
        let b = header_mut(out, FLUSH_MARK_MAGIC)?;
        put(b, 4, &FORMAT_VERSION.to_le_bytes());
        put(b, 8, &self.pool.to_le_bytes());
        put(b, 16, &self.stripe_addr.to_le_bytes());
        put(b, 24, &self.stripe_seq.to_le_bytes());
        put(b, 32, &self.durable.to_le_bytes());
        put(b, 36, &self.mark_seq.to_le_bytes());
        seal_header(b)
    }

    /// Decodes and checks a mark; `stripe_bytes` bounds `durable` (a stripe's data bytes).
    pub fn decode(b: &[u8], stripe_bytes: usize) -> Result<Self, FormatError> {
        let b = checked_versioned_header(b, FLUSH_MARK_MAGIC)?;
        let m = FlushMark {
            pool: get_u64(b, 8),
            stripe_addr: get_u64(b, 16),
            stripe_seq: get_u64(b, 24),
            durable: get_u32(b, 32),
            mark_seq: get_u64(b, 36),
        };
        if m.durable as usize >= stripe_bytes {
            return Err(FormatError::Bounds);
        }
        Ok(m)
    }
}

/// Longest list of unrecoverable LBAs kept.
pub const BAD_LIST_MAX: usize = 64;

/// A run of LBAs that could not be recovered: they read back as errors until rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BadRange {
    /// LUN.
    pub lun: u16,
    /// First LBA (4 KiB blocks).
    pub lba: u64,
    /// Blocks.
    pub blocks: u32,
}

impl BadRange {
    /// The LBA after the range.
    #[must_use]
    pub const fn end(&self) -> u64 {
        self.lba.saturating_add(self.blocks as u64)
    }
}

/// Encodes the bad-LBA list.
pub fn encode_bad_list(list: &[BadRange], out: &mut [u8]) -> Result<usize, FormatError> {
    encode_framed(&list, out)
}

/// Decodes the bad-LBA list.
pub fn decode_bad_list(b: &[u8]) -> Result<Vec<BadRange, BAD_LIST_MAX>, FormatError> {
    decode_framed(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raid::Level;
    use raidcore_hal::BlockSize;

    fn header() -> ItemHeader {
        ItemHeader {
            kind: ItemKind::Extent,
            flags: FLAG_COMPRESSED,
            lun: 3,
            lba: 123_456,
            blocks: 16,
            stored_len: 30_000,
            raw_len: 65_536,
            payload_crc: 0xdead_beef,
            seq: 99,
            pool: 0x1122_3344_5566_7788,
            addr: 64 * 1001,
        }
    }

    #[test]
    fn item_header_round_trip_and_corruption() {
        let mut b = [0u8; 64];
        let h = header();
        h.encode(&mut b).unwrap();
        assert_eq!(ItemHeader::decode(&b, 1 << 20), Ok(h));
        assert_eq!(h.item_bytes(), round_up(64 + 30_000, 64));
        for i in 0..64 {
            let mut c = b;
            c[i] ^= 0x40;
            assert!(
                ItemHeader::decode(&c, 1 << 20).is_err(),
                "flip at {i} not caught"
            );
        }
        assert_eq!(ItemHeader::decode(&b, 1000), Err(FormatError::Bounds));
        assert_eq!(
            ItemHeader::decode(&[0u8; 10], 1000),
            Err(FormatError::Bounds)
        );
    }

    /// A parity rebuild against a torn stripe adds the XOR of two versions of another member's
    /// header to the rebuilt bytes. Sealed with the payloads' own CRC32C, that XOR left a
    /// payload's CRC32C unchanged wherever it landed (the rebuild was served as the data
    /// written); with [`header_crc`] it changes it.
    #[test]
    fn two_versions_of_a_header_xored_into_a_payload_change_its_crc32c() {
        let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
        header().encode(&mut a).unwrap();
        ItemHeader {
            seq: 1944,
            ..header()
        }
        .encode(&mut b)
        .unwrap();
        let delta: Vec<u8, 64> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
        // The same pair sealed with CRC32C, as format 4 did.
        let reseal = |mut h: [u8; 64]| {
            let c = crc32c(&h[..60]);
            h[60..].copy_from_slice(&c.to_le_bytes());
            h
        };
        let (a4, b4) = (reseal(a), reseal(b));
        let delta4: Vec<u8, 64> = a4.iter().zip(&b4).map(|(x, y)| x ^ y).collect();
        let payload: Vec<u8, 4096> = (0..4096u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for at in [0, 480, 4032] {
            let xored = |d: &[u8]| {
                let mut p = payload.clone();
                for (x, y) in p[at..at + 64].iter_mut().zip(d) {
                    *x ^= y;
                }
                crc32c(&p)
            };
            assert_eq!(xored(&delta4), crc32c(&payload), "CRC32C seal at {at}");
            assert_ne!(xored(&delta), crc32c(&payload), "header_crc seal at {at}");
        }
    }

    #[test]
    fn map_entry_round_trip() {
        let e = MapEntry {
            unit: (1 << 48) - 1,
            stored_len: 131_072,
            index: 15,
            blocks: 32,
            compressed: true,
            crc: 0x0102_0304,
            block_crc: false,
            ditto: None,
            valid: true,
        };
        let mut b = [0u8; 32];
        e.encode(&mut b, 16);
        assert_eq!(MapEntry::decode(&b, 16), e);
        let raw = MapEntry {
            compressed: false,
            block_crc: true,
            ..e
        };
        raw.encode(&mut b, 16);
        assert_eq!(MapEntry::decode(&b, 16), raw);
        // Its block alone: past the header, at its index; the item's pointer carries no CRC.
        let block = (1u64 << 48) - 1;
        let lo = block * 64 + 64 + 15 * 4096;
        assert_eq!(raw.read_span(), (lo, lo + 4096));
        assert_eq!(raw.ptr().crc, 0);
        assert_eq!(
            e.read_span(),
            (block * 64, block * 64 + e.item_bytes() as u64)
        );
        e.encode(&mut b, 16);
        assert_eq!(MapEntry::decode(&b, 0), MapEntry::NONE);
        assert_eq!(MapEntry::decode(&b, 30), MapEntry::NONE);
        let p = BlockPtr {
            addr: 4096 * 7,
            len: 4096,
            crc: 5,
            ditto: None,
        };
        assert_eq!(MapEntry::from_ptr(p).ptr(), p);
        // A page pointer with a ditto copy, as far as an entry holds it.
        for ditto in [64, 4096 * 9 + 128, ((1u64 << 44) - 1) * 64] {
            let d = BlockPtr {
                ditto: Some(ditto),
                ..p
            };
            let mut b = [0u8; 16];
            MapEntry::from_ptr(d).encode(&mut b, 0);
            assert_eq!(MapEntry::decode(&b, 0).ptr(), d, "ditto at {ditto}");
        }
        let far = BlockPtr {
            ditto: Some((1u64 << 44) * 64),
            ..p
        };
        assert_eq!(
            MapEntry::from_ptr(far).ptr(),
            p,
            "past what an entry holds: none"
        );
        // Shares of an extent's blocks add up to the whole.
        let total = 30_001u32;
        let sum: u32 = (0..7u8)
            .map(|i| {
                MapEntry {
                    index: i,
                    blocks: 7,
                    ..e
                }
                .share(total)
            })
            .sum();
        assert_eq!(sum, total);
        assert_eq!(FANOUT, 252);
    }

    #[test]
    fn superblock_and_root_round_trip_and_refusals() {
        let g = Geometry::try_new(Level::Raid6, 6, 65536, BlockSize::B4096, 1 << 20, 300).unwrap();
        let mut members = Vec::new();
        for i in 0..6 {
            members
                .push(MemberRecord {
                    guid: 100 + i,
                    state: DiskState::Online,
                })
                .unwrap();
        }
        let sb = Superblock {
            magic: SUPER_MAGIC,
            version: FORMAT_VERSION,
            pool_uuid: [7; 16],
            disk_guid: 101,
            role: Role::Member(1),
            generation: 5,
            geometry: g,
            layout: PoolLayout {
                zil_slots: 256,
                segment_stripes: 16,
                segments: 1000,
                max_extent_blocks: 16,
                compression: true,
            },
            members,
            spares: Vec::new(),
            log_device: Some(LogDeviceRecord {
                guid: 200,
                state: DiskState::Online,
                ring_slots: 1000,
            }),
        };
        let mut slot = [0u8; SLOT_BYTES];
        sb.encode(&mut slot).unwrap();
        assert_eq!(Superblock::decode(&slot), Ok(sb.clone()));
        let mut torn = slot;
        torn[20] ^= 1;
        assert_eq!(Superblock::decode(&torn), Err(FormatError::Crc));
        assert_eq!(
            Superblock::decode(&[0u8; SLOT_BYTES]),
            Err(FormatError::Magic)
        );
        let mut other = sb.clone();
        other.version = FORMAT_VERSION + 1;
        other.encode(&mut slot).unwrap();
        assert_eq!(
            Superblock::decode(&slot),
            Err(FormatError::Version(FORMAT_VERSION + 1))
        );

        let root = Root {
            magic: ROOT_MAGIC,
            version: FORMAT_VERSION,
            pool_uuid: [7; 16],
            root_gen: 42,
            config_gen: 5,
            log: LogCursor {
                head: 1 << 30,
                next_item_seq: 77,
                next_stripe_seq: 9,
            },
            reserved: Vec::from_slice(&[3, 4, 5, 6]).unwrap(),
            luns: BlockPtr {
                addr: 512,
                len: 1024,
                crc: 1,
                ditto: Some(8192),
            },
            segments: BlockPtr::NONE,
            bad: BlockPtr::NONE,
            rebuild: Some(RebuildCursor {
                disk: 2,
                next_stripe: 100,
                guid: 0x1234_5678,
            }),
            scrub: None,
            counters: Counters::default(),
        };
        root.encode(&mut slot).unwrap();
        assert_eq!(Root::decode(&slot), Ok(root));
        // A superblock is not a root.
        sb.encode(&mut slot).unwrap();
        assert!(Root::decode(&slot).is_err());
    }

    #[test]
    fn zil_header_and_segment_entries() {
        let z = ZilHeader {
            pool: 1,
            stripe_addr: 1 << 20,
            stripe_seq: 5,
            offset: 512,
            len: 4096,
            payload_crc: 9,
            record_seq: 11,
        };
        let mut b = [0u8; 64];
        z.encode(&mut b).unwrap();
        assert_eq!(ZilHeader::decode(&b, 1 << 20), Ok(z));
        assert_eq!(ZilHeader::decode(&b, 100), Err(FormatError::Bounds));
        let mut s = [0u8; 3 * SEG_ENTRY_BYTES];
        for (i, e) in [
            SegEntry {
                live: 5,
                state: SegState::Free,
                first_seq: 0,
            },
            SegEntry {
                live: u32::MAX,
                state: SegState::Used,
                first_seq: u64::MAX,
            },
            SegEntry {
                live: 0,
                state: SegState::Pending(77),
                first_seq: 1 << 40,
            },
        ]
        .iter()
        .enumerate()
        {
            e.encode(&mut s, i * SEG_ENTRY_BYTES);
            assert_eq!(SegEntry::decode(&s, i * SEG_ENTRY_BYTES), *e);
        }
    }

    #[test]
    fn flush_mark_round_trip_and_checks() {
        let m = FlushMark {
            pool: 7,
            stripe_addr: 3 << 16,
            stripe_seq: 42,
            durable: 4032,
            mark_seq: 9,
        };
        let mut b = [0u8; 64];
        m.encode(&mut b).unwrap();
        assert_eq!(FlushMark::decode(&b, 65536), Ok(m));
        // `durable` must lie inside the stripe.
        assert_eq!(FlushMark::decode(&b, 4032), Err(FormatError::Bounds));
        // A ring record is not a mark, nor a mark a ring record.
        assert_eq!(ZilHeader::decode(&b, 1 << 20), Err(FormatError::Magic));
        let mut torn = b;
        torn[20] ^= 1;
        assert_eq!(FlushMark::decode(&torn, 65536), Err(FormatError::Crc));
    }

    #[test]
    fn lun_table_round_trip() {
        let luns = [LunRecord {
            id: 0,
            name: heapless::String::try_from("lun0").unwrap(),
            blocks: 1 << 28,
            map_root: BlockPtr {
                addr: 4096,
                len: 4096,
                crc: 3,
                ditto: Some(12288),
            },
            depth: 4,
            counters: LunCounters {
                mapped_blocks: 5,
                stored_bytes: 6,
                log_bytes: 7,
            },
        }];
        let mut b = [0u8; 512];
        let n = encode_lun_table(&luns, &mut b).unwrap();
        assert!(n < 100);
        let back: Vec<LunRecord, 8> = decode_lun_table(&b).unwrap();
        assert_eq!(back.as_slice(), &luns);
        // A table with more LUNs than the caller's capacity is refused, not truncated.
        let many: std::vec::Vec<LunRecord> = (0..9)
            .map(|i| LunRecord {
                id: i,
                ..luns[0].clone()
            })
            .collect();
        let mut big = [0u8; 2048];
        encode_lun_table(&many, &mut big).unwrap();
        assert_eq!(decode_lun_table::<8>(&big), Err(FormatError::Bounds));
        assert_eq!(decode_lun_table::<16>(&big).unwrap().len(), 9);
    }
}
