//! The pool: one RAID array of member disks (plus hot spares), a log-structured volume layer on
//! it, and LUNs carved from it. This is the object an integrator holds.
//!
//! ## Write-cache semantics (what integrators can rely on)
//! The pool behaves like a disk with a volatile write cache:
//! - [`Pool::write`] returns once the data is buffered in RAM (an open extent or the open
//!   stripe); it is readable at once, but a power cut may lose it;
//! - [`Pool::flush`] returns only when every write acknowledged before it is durable: it closes
//!   the open extents, makes written stripes durable (member flushes) and copies the open
//!   stripe's new bytes to the intent log on `min(m + 1, 4)` members;
//! - a write with `fua = true` is durable when it returns (it is followed by a flush);
//! - after a power cut, import brings back every flushed write; writes that were not flushed
//!   read back either their old or their new content, never anything else.
//!
//! ## Memory
//! RAM is the `Pool` value itself (bookkeeping sized by the const generics `N` member+spare
//! disks, `L` LUNs, `P` cached map pages, `S` open extents) plus a caller-provided arena `M`
//! of [`Pool::memory_bytes`] bytes. Neither depends on disk or LUN size.
//!
//! ## Time
//! The core has no clock: [`Pool::set_time`] tells it the time (any monotonic unit, the one
//! [`PoolConfig::idle_close`] is given in); idle extents close by it.

pub(crate) mod health;
pub(crate) mod state;
#[cfg(test)]
mod tests;

use heapless::Vec;
use raidcore_hal::{BlockDevice, BlockSize};

use crate::event::EventLog;
use crate::format::{
    self, BlockPtr, Counters, FormatError, LUN_BLOCK, LUN_NAME_MAX, LunCounters, LunRecord,
    MemberRecord, PoolLayout, ROOT_SLOTS, Role, Root, SLOT_BYTES, SegEntry, SegState, Superblock,
};
use crate::raid::{Array, ArrayConfig, DiskState, Geometry, GeometryError, Level};
use state::{Bufs, Config, LogState, Lun, MemLayout, Spare, State, ZilRing};

pub use crate::error::IoError;
pub use health::{DiskStatus, Health, MaintenanceReport, Status};

use crate::error::bug;

/// Settings of a pool. The first group is fixed at creation (recorded in the superblocks); the
/// rest are run-time policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// RAID level.
    pub level: Level,
    /// Strip (chunk) size in bytes: a power of two from 4 KiB to 1 MiB.
    pub strip_bytes: u32,
    /// Largest extent, in 4 KiB blocks (1 to 32, i.e. 4–128 KiB).
    pub max_extent_blocks: u8,
    /// LZ4-compress extents (kept only where it saves at least 12.5 %).
    pub compression: bool,
    /// Intent-log ring per member, in 4 KiB slots (at least 16).
    pub zil_slots: u32,
    /// Smallest segment, in stripes (segments grow on large disks to respect `max_segments`).
    pub segment_stripes: u32,
    /// Most segments: sizes the segment usage table in RAM (8 bytes each).
    pub max_segments: u32,
    /// Segments the log may fill between checkpoints (2 to 16); recovery reads at most these.
    pub reserved_segments: u8,
    /// Free segments kept back for the cleaner and checkpoints; client writes get
    /// [`IoError::NoSpace`] rather than dip into them.
    pub cleaner_reserve: u32,
    /// Close an open extent idle for longer than this (in the unit of [`Pool::set_time`]).
    pub idle_close: u64,
    /// Member error policy.
    pub array: ArrayConfig,
    /// Stripes one [`Pool::maintenance`] call may rebuild or scrub.
    pub stripes_per_step: u32,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            level: Level::Raid6,
            strip_bytes: 64 * 1024,
            max_extent_blocks: 32,
            compression: true,
            zil_slots: 256,
            segment_stripes: 32,
            max_segments: 1024,
            reserved_segments: 4,
            cleaner_reserve: 2,
            idle_close: 100_000_000,
            array: ArrayConfig::default(),
            stripes_per_step: 16,
        }
    }
}

/// Why a LUN could not be created or deleted. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LunError {
    /// All `L` LUN slots are in use.
    TooMany,
    /// Size zero, or larger than the pool's usable capacity.
    BadSize,
    /// Empty or longer than 24 bytes.
    BadName,
    /// A LUN with this name exists.
    NameTaken,
    /// No LUN with that number.
    NoSuchLun,
    /// Writing the new LUN table failed.
    Io(IoError),
}

impl core::fmt::Display for LunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LunError::TooMany => f.write_str("too many LUNs for this pool's configuration"),
            LunError::BadSize => f.write_str("LUN size is zero or larger than the pool"),
            LunError::BadName => f.write_str("LUN name must be 1 to 24 bytes"),
            LunError::NameTaken => f.write_str("a LUN with this name exists"),
            LunError::NoSuchLun => f.write_str("no such LUN"),
            LunError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for LunError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            LunError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a pool could not be created or imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpenError {
    /// The geometry is not allowed.
    Geometry(GeometryError),
    /// A setting is out of range; the text says which.
    Config(&'static str),
    /// The arena is smaller than [`Pool::memory_bytes`].
    Memory {
        /// Bytes needed.
        needed: usize,
    },
    /// Disks differ in block size, or more disks than `N`.
    Disks,
    /// No disk was given, or none holds a raidcore superblock.
    NoPool,
    /// Disk `disk` (0-based in the order given) belongs to another pool.
    ForeignDisk {
        /// Index in the order given.
        disk: u8,
    },
    /// Disk `disk` is a stale member: the pool moved on without it (a newer configuration
    /// failed or replaced it). It is never trusted for data.
    StaleDisk {
        /// Index in the order given.
        disk: u8,
    },
    /// Disk `disk` was written by an unknown format version.
    UnknownVersion {
        /// Index in the order given.
        disk: u8,
        /// The version found.
        version: u16,
    },
    /// Disk `disk` holds no valid raidcore superblock.
    NotRaidcore {
        /// Index in the order given.
        disk: u8,
    },
    /// Disk `disk` carries the pool's superblock but has another block size, or fewer blocks
    /// than the pool's members need (a truncated image, a swapped smaller drive). It is left
    /// out like a missing member.
    WrongSize {
        /// Index in the order given.
        disk: u8,
    },
    /// More members are missing or failed than the level tolerates.
    TooManyMissing {
        /// Members missing or failed.
        missing: u8,
    },
    /// No checkpoint root whose tables read back intact.
    NoValidRoot,
    /// I/O during creation or recovery failed.
    Io(IoError),
}

impl core::fmt::Display for OpenError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OpenError::Geometry(g) => write!(f, "{g}"),
            OpenError::Config(s) => write!(f, "bad configuration: {s}"),
            OpenError::Memory { needed } => write!(f, "arena too small: {needed} bytes needed"),
            OpenError::Disks => f.write_str("disks differ in block size or are too many"),
            OpenError::NoPool => f.write_str("no raidcore pool on the given disks"),
            OpenError::ForeignDisk { disk } => write!(f, "disk {disk} belongs to another pool"),
            OpenError::StaleDisk { disk } => {
                write!(
                    f,
                    "disk {disk} is a stale member (the pool changed while it was away)"
                )
            }
            OpenError::UnknownVersion { disk, version } => {
                write!(f, "disk {disk} has unknown format version {version}")
            }
            OpenError::NotRaidcore { disk } => {
                write!(f, "disk {disk} holds no raidcore superblock")
            }
            OpenError::WrongSize { disk } => {
                write!(
                    f,
                    "disk {disk} is smaller than the pool's members or has another block size"
                )
            }
            OpenError::TooManyMissing { missing } => {
                let s = if *missing == 1 { "" } else { "s" };
                write!(
                    f,
                    "{missing} member{s} missing or failed: more than the level tolerates"
                )
            }
            OpenError::NoValidRoot => f.write_str("no intact checkpoint root found"),
            OpenError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            OpenError::Geometry(e) => Some(e),
            OpenError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Options for [`Pool::import`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportOptions {
    /// Run-time policy (the fixed settings come from the superblocks).
    pub config: PoolConfig,
    /// Import even when some given disks are refused (foreign, stale, unreadable): they are
    /// left out and reported. Without it, any refused disk fails the import.
    pub skip_refused: bool,
}

/// What import found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImportReport {
    /// Checkpoint generation import started from.
    pub root_gen: u64,
    /// Log items replayed after it.
    pub items_replayed: u64,
    /// Of those, items written before the last completed flush that no redundancy could
    /// rebuild (more faults than the level tolerates): their blocks read as
    /// [`IoError::Unrecoverable`] until rewritten.
    pub items_lost: u64,
    /// Intent-log records applied.
    pub zil_records: u32,
    /// Stripes written since the checkpoint whose parity (or mirror copies) the crash left
    /// inconsistent with their data (the write hole), repaired during import.
    pub resynced_stripes: u64,
    /// Members missing or failed.
    pub missing: u8,
    /// Disks left out (index in the order given, and why).
    pub refused: Vec<(u8, OpenError), 32>,
}

/// A LUN's identity and space use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LunInfo {
    /// LUN number.
    pub id: u16,
    /// Export name.
    pub name: heapless::String<LUN_NAME_MAX>,
    /// Size in 4 KiB blocks.
    pub blocks: u64,
    /// Logical bytes mapped (4 KiB per mapped block).
    pub logical_bytes: u64,
    /// Bytes its live extents occupy in the log (headers and sector rounding included).
    pub physical_bytes: u64,
    /// Of those, stored payload bytes (after compression).
    pub stored_bytes: u64,
    /// Header and rounding overhead: `physical_bytes - stored_bytes`.
    pub padding_bytes: u64,
    /// Parity (or mirror copies) written for its physical bytes.
    pub parity_bytes: u64,
    /// Bytes compression saved: `logical_bytes - stored_bytes`.
    pub compression_savings: u64,
}

/// Pool-wide counters (see [`Pool::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Persistent counters (client bytes, log bytes by kind, intent log, labels, repairs).
    pub counters: Counters,
    /// Bytes written to members since the pool was opened, by the array: data strips.
    pub member_data_bytes: u64,
    /// … parity strips and mirror copies.
    pub member_redundancy_bytes: u64,
    /// … labels and intent log.
    pub member_raw_bytes: u64,
    /// … repairs and rebuilds.
    pub member_repair_bytes: u64,
    /// Client bytes written since the pool was opened.
    pub session_client_bytes: u64,
    /// Live bytes in the log.
    pub live_bytes: u64,
    /// Bytes of used segments that are dead (reclaimable by the cleaner).
    pub dead_bytes: u64,
    /// Segments: total, free.
    pub segments: u32,
    /// Free segments.
    pub free_segments: u32,
    /// Bytes one segment holds.
    pub segment_bytes: u64,
}

impl Stats {
    /// Bytes written to members per client byte, since the pool was opened. 0 before any write.
    #[must_use]
    pub fn write_amplification(&self) -> f64 {
        if self.session_client_bytes == 0 {
            return 0.0;
        }
        (self.member_data_bytes
            + self.member_redundancy_bytes
            + self.member_raw_bytes
            + self.member_repair_bytes) as f64
            / self.session_client_bytes as f64
    }
    /// Raw extent bytes per stored extent byte (LZ4 savings); 1.0 when nothing was written.
    #[must_use]
    pub fn compression_ratio(&self) -> f64 {
        if self.counters.extent_stored_bytes == 0 {
            return 1.0;
        }
        self.counters.extent_raw_bytes as f64 / self.counters.extent_stored_bytes as f64
    }
}

/// What a closed pool hands back: member disks in slot order (`None` where missing), hot
/// spares, and the arena.
pub type PoolParts<D, M, const N: usize> = (Vec<Option<D>, N>, Vec<D, N>, M);

/// A pool over member disks of type `D`, with its arena `M`.
///
/// Const generics: `N` most member + spare disks (≤ 32), `L` most LUNs, `P` map cache pages
/// (4032 bytes of arena each), `S` open extents (streams).
pub struct Pool<
    D,
    M,
    const N: usize = 16,
    const L: usize = 16,
    const P: usize = 256,
    const S: usize = 16,
> {
    st: State<D, N, L, P, S>,
    mem: M,
}

impl<D, M, const N: usize, const L: usize, const P: usize, const S: usize> core::fmt::Debug
    for Pool<D, M, N, L, P, S>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pool")
            .field("luns", &self.st.luns.len())
            .field("root_gen", &self.st.root_gen)
            .finish_non_exhaustive()
    }
}

/// Reads the newer valid superblock of a disk (slots A and B).
///
/// A retryable error (transport, timeout) is retried as often as the array retries member I/O
/// ([`ArrayConfig::retries`]), so a hiccup at import does not leave a
/// healthy member out of the pool.
pub fn read_superblock<D: BlockDevice>(disk: &mut D) -> Result<Superblock, OpenError> {
    let mut slot = [0u8; SLOT_BYTES];
    let per = (SLOT_BYTES / disk.block_size().bytes()) as u64;
    let retries = ArrayConfig::default().retries;
    let mut best: Option<Superblock> = None;
    let mut version = None;
    for i in 0..2 {
        let lba = u64::from(format::superblock_slot(i)) * per;
        let (read, _) = crate::raid::with_retries(retries, || disk.read(lba, &mut slot));
        if read.is_err() {
            continue;
        }
        match Superblock::decode(&slot) {
            Ok(sb) => {
                if best.as_ref().is_none_or(|b| sb.generation > b.generation) {
                    best = Some(sb);
                }
            }
            Err(FormatError::Version(v)) => version = Some(v),
            Err(_) => {}
        }
    }
    match (best, version) {
        (Some(sb), _) => Ok(sb),
        (None, Some(v)) => Err(OpenError::UnknownVersion {
            disk: 0,
            version: v,
        }),
        (None, None) => Err(OpenError::NotRaidcore { disk: 0 }),
    }
}

impl PoolConfig {
    /// The configuration recorded in a superblock, with run-time policy from `self`.
    #[must_use]
    pub fn with_superblock(mut self, sb: &Superblock) -> Self {
        self.level = sb.geometry.level();
        self.strip_bytes = sb.geometry.strip_bytes() as u32;
        self.max_extent_blocks = sb.layout.max_extent_blocks;
        self.compression = sb.layout.compression;
        self.zil_slots = sb.layout.zil_slots;
        self.segment_stripes = sb.layout.segment_stripes;
        self.max_segments = sb.layout.segments;
        self
    }

    fn check(&self) -> Result<(), OpenError> {
        if self.max_extent_blocks == 0 || self.max_extent_blocks > 32 {
            return Err(OpenError::Config("max_extent_blocks must be 1..=32"));
        }
        if self.zil_slots < 16 {
            return Err(OpenError::Config("zil_slots must be at least 16"));
        }
        if !(2..=16).contains(&self.reserved_segments) {
            return Err(OpenError::Config("reserved_segments must be 2..=16"));
        }
        if self.segment_stripes == 0 || self.max_segments < 8 {
            return Err(OpenError::Config(
                "segment_stripes >= 1 and max_segments >= 8",
            ));
        }
        Ok(())
    }
}

/// Member blocks before the data area: two superblocks, the root ring, the intent-log ring.
fn label_blocks(zil_slots: u32, block: BlockSize) -> u64 {
    (2 + u64::from(ROOT_SLOTS) + u64::from(zil_slots)) * (SLOT_BYTES / block.bytes()) as u64
}

/// The GUID of the `n`-th disk a pool with tag `tag` takes (members, spares, replacements):
/// the splitmix64 finaliser of `tag ^ n`, so GUIDs are distinct and reproducible from the UUID.
pub(crate) fn disk_guid(tag: u64, n: u64) -> u64 {
    let mut x = (tag ^ n).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Arena bytes a pool with this configuration needs, for `disks` members (not counting
    /// spares). Independent of disk size.
    #[must_use]
    pub fn memory_bytes(cfg: &PoolConfig, disks: usize) -> usize {
        Self::layout(cfg, disks).total()
    }

    fn layout(cfg: &PoolConfig, disks: usize) -> MemLayout {
        let data = match cfg.level {
            Level::Raid0 => disks,
            Level::Raid1 => 1,
            Level::Raid10 => disks / 2,
            Level::Raid5 => disks.saturating_sub(1),
            Level::Raid6 => disks.saturating_sub(2),
        };
        MemLayout::new(cfg, data.max(1) * cfg.strip_bytes as usize, disks, S, P)
    }

    /// Creates a pool on blank `members` (slot order) with hot `spares`, identified by `uuid`
    /// (the caller makes it unique: random bytes on a host, a serial number on a board). Every
    /// disk gets a superblock; the pool starts with no LUN.
    pub fn create(
        members: impl IntoIterator<Item = D>,
        spares: impl IntoIterator<Item = D>,
        cfg: PoolConfig,
        uuid: [u8; 16],
        mut mem: M,
    ) -> Result<Self, OpenError> {
        cfg.check()?;
        let mut ms: Vec<D, N> = Vec::new();
        for d in members {
            ms.push(d).map_err(|_| OpenError::Disks)?;
        }
        let first = ms.first().ok_or(OpenError::NoPool)?;
        let bs = first.block_size();
        if ms.iter().any(|d| d.block_size() != bs) {
            return Err(OpenError::Disks);
        }
        let mut sp: Vec<D, N> = Vec::new();
        for d in spares {
            if d.block_size() != bs {
                return Err(OpenError::Disks);
            }
            sp.push(d).map_err(|_| OpenError::Disks)?;
        }
        if ms.len() + sp.len() > N || ms.len() > 32 {
            return Err(OpenError::Disks);
        }
        let min_blocks = ms.iter().map(BlockDevice::block_count).min().unwrap_or(0);
        let label = label_blocks(cfg.zil_slots, bs);
        let geo = Geometry::try_new(cfg.level, ms.len(), cfg.strip_bytes, bs, min_blocks, label)
            .map_err(OpenError::Geometry)?;
        let layout = Self::plan_segments(&cfg, &geo)?;
        if sp
            .iter()
            .any(|d| d.block_count() < geo.stripe_lba(geo.stripes()))
        {
            return Err(OpenError::Disks);
        }
        let cfg = PoolConfig {
            max_segments: layout.segments,
            ..cfg
        };
        let mlayout = Self::layout(&cfg, geo.disks());
        let needed = mlayout.total();
        if mem.as_mut().len() < needed {
            return Err(OpenError::Memory { needed });
        }
        let tag = format::pool_tag(&uuid);
        let mut guids: Vec<u64, 32> = Vec::new();
        let mut next_guid = 1u64;
        for _ in 0..ms.len() {
            let _ = guids.push(disk_guid(tag, next_guid));
            next_guid += 1;
        }
        let mut spares_v: Vec<Spare<D>, N> = Vec::new();
        for d in sp {
            let guid = disk_guid(tag, next_guid);
            next_guid += 1;
            let _ = spares_v.push(Spare { disk: d, guid });
        }
        let array = Array::new(geo, ms.into_iter().map(Some), cfg.array)
            .map_err(|e| OpenError::Io(IoError::Device(e)))?;
        let conf = Config {
            pool_uuid: uuid,
            pool_tag: tag,
            generation: 0,
            geometry: geo,
            layout,
            member_guids: guids,
            next_guid,
        };
        let mut st = Self::new_state(array, spares_v, cfg, mlayout, conf);
        let b = mlayout
            .split(mem.as_mut())
            .ok_or(OpenError::Memory { needed })?;
        let mut b = b;
        b.sut.fill(0);
        b.log.stripe.fill(0);
        for s in 0..layout.segments {
            b.set_seg(s, SegEntry::FREE);
        }
        // The log starts in segment 0 with the first reserved segments.
        for s in 0..u32::from(cfg.reserved_segments).min(layout.segments) {
            let _ = st.log.reserved.push(s);
        }
        b.set_seg(
            0,
            SegEntry {
                live: 0,
                state: SegState::Used,
                first_seq: st.log.next_item_seq,
            },
        );
        st.write_config().map_err(OpenError::Io)?;
        st.checkpoint(&mut b).map_err(OpenError::Io)?;
        Ok(Pool { st, mem })
    }

    fn plan_segments(cfg: &PoolConfig, geo: &Geometry) -> Result<PoolLayout, OpenError> {
        let sdb = geo.stripe_data_bytes() as u64;
        // A segment must hold a checkpoint's worst case: every cached page, every open extent,
        // the tables, plus a stripe of padding, twice over.
        let max_item = state::max_item_bytes(cfg) as u64;
        let need = 2
            * (P as u64 * 4096 + S as u64 * max_item + 64 * 1024 + 8 * u64::from(cfg.max_segments))
            + 2 * sdb;
        let by_size = need.div_ceil(sdb) as u32;
        let by_count = geo.stripes().div_ceil(u64::from(cfg.max_segments)) as u32;
        let seg_stripes = cfg.segment_stripes.max(by_size).max(by_count);
        if u64::from(seg_stripes) * sdb >= 1 << 32 {
            return Err(OpenError::Config(
                "segments would exceed 4 GiB: raise max_segments (a segment is the data \
                 capacity divided by max_segments) or use smaller disks",
            ));
        }
        let segments = (geo.stripes() / u64::from(seg_stripes)) as u32;
        let min = 2 * u32::from(cfg.reserved_segments) + cfg.cleaner_reserve + 2;
        if segments < min {
            return Err(OpenError::Geometry(GeometryError::TooSmall));
        }
        Ok(PoolLayout {
            zil_slots: cfg.zil_slots,
            segment_stripes: seg_stripes,
            segments,
            max_extent_blocks: cfg.max_extent_blocks,
            compression: cfg.compression,
        })
    }

    fn new_state(
        array: Array<D, N>,
        spares: Vec<Spare<D>, N>,
        cfg: PoolConfig,
        mem: MemLayout,
        conf: Config,
    ) -> State<D, N, L, P, S> {
        let mut recorded = Vec::new();
        for m in array.members() {
            let _ = recorded.push(m.state());
        }
        State {
            array,
            spares,
            cfg,
            mem,
            conf,
            log: LogState::default(),
            zil: [ZilRing::default(); 32],
            zil_record_seq: 0,
            zil_rr: 0,
            mark_seq: 0,
            marked: None,
            durable_mark: None,
            root_gen: 0,
            luns: Vec::new(),
            table_ptrs: [BlockPtr::NONE; 3],
            cache: Vec::new(),
            streams: Vec::new(),
            counters: Counters::default(),
            bad: Vec::new(),
            now: 0,
            tick: 0,
            raw_cache: Vec::new(),
            rebuild: None,
            scrub: None,
            table: if cfg.max_extent_blocks as usize * LUN_BLOCK < 65535 {
                lz4_flex::block::CompressTable::small()
            } else {
                lz4_flex::block::CompressTable::large()
            },
            faulted: false,
            recovery_healed: false,
            mark_used: heapless::Deque::new(),
            zil_refs: Vec::new(),
            recorded_states: recorded,
            session_client_bytes: 0,
            clean_skip: Vec::new(),
            cleaned: Vec::new(),
            last_scrub: (0, 0),
        }
    }

    /// Imports a pool from its disks alone, in any order: finds members by pool UUID and disk
    /// GUID, refuses foreign, stale and unknown-version disks, imports degraded when up to the
    /// level's tolerance of members is missing, loads the newest intact checkpoint, rolls the
    /// log forward and replays the intent log, then writes a checkpoint.
    pub fn import(
        disks: impl IntoIterator<Item = D>,
        opts: ImportOptions,
        mut mem: M,
    ) -> Result<(Self, ImportReport), OpenError> {
        let mut report = ImportReport::default();
        // Superblocks.
        let mut found: Vec<(D, Option<Superblock>), N> = Vec::new();
        for mut d in disks {
            let sb = read_superblock(&mut d);
            let idx = found.len() as u8;
            let sb = match sb {
                Ok(sb) => Some(sb),
                Err(OpenError::UnknownVersion { version, .. }) => {
                    let _ = report
                        .refused
                        .push((idx, OpenError::UnknownVersion { disk: idx, version }));
                    None
                }
                Err(_) => {
                    let _ = report
                        .refused
                        .push((idx, OpenError::NotRaidcore { disk: idx }));
                    None
                }
            };
            found.push((d, sb)).map_err(|_| OpenError::Disks)?;
        }
        // The pool: the UUID most disks carry; the configuration: its newest generation.
        let mut best: Option<([u8; 16], usize)> = None;
        for (_, sb) in &found {
            if let Some(sb) = sb {
                let n = found
                    .iter()
                    .filter(|(_, o)| o.as_ref().is_some_and(|o| o.pool_uuid == sb.pool_uuid))
                    .count();
                if best.is_none_or(|(_, m)| n > m) {
                    best = Some((sb.pool_uuid, n));
                }
            }
        }
        let uuid = best.ok_or(OpenError::NoPool)?.0;
        let newest = found
            .iter()
            .filter_map(|(_, sb)| sb.as_ref())
            .filter(|sb| sb.pool_uuid == uuid)
            .max_by_key(|sb| sb.generation)
            .cloned()
            .ok_or(OpenError::NoPool)?;
        let geo = newest.geometry;
        let mut slots: Vec<Option<D>, 32> = Vec::new();
        for _ in 0..geo.disks() {
            let _ = slots.push(None);
        }
        let mut spares: Vec<Spare<D>, N> = Vec::new();
        // Blocks every member and spare must have (the array checks it too, for the whole pool).
        let need = geo.stripe_lba(geo.stripes());
        for (i, (d, sb)) in found.into_iter().enumerate() {
            let idx = i as u8;
            let Some(sb) = sb else { continue };
            if sb.pool_uuid != uuid {
                let _ = report
                    .refused
                    .push((idx, OpenError::ForeignDisk { disk: idx }));
                continue;
            }
            if d.block_size().bytes() != geo.block_bytes() || d.block_count() < need {
                let _ = report
                    .refused
                    .push((idx, OpenError::WrongSize { disk: idx }));
                continue;
            }
            let member = newest.members.iter().position(|m| m.guid == sb.disk_guid);
            match member {
                Some(slot)
                    if newest
                        .members
                        .get(slot)
                        .is_some_and(|m| m.state != DiskState::Failed) =>
                {
                    match slots.get_mut(slot) {
                        Some(s @ None) => *s = Some(d),
                        _ => {
                            let _ = report
                                .refused
                                .push((idx, OpenError::StaleDisk { disk: idx }));
                        }
                    }
                }
                _ if newest.spares.contains(&sb.disk_guid) => {
                    let _ = spares.push(Spare {
                        disk: d,
                        guid: sb.disk_guid,
                    });
                }
                _ => {
                    let _ = report
                        .refused
                        .push((idx, OpenError::StaleDisk { disk: idx }));
                }
            }
        }
        if !opts.skip_refused
            && let Some((_, e)) = report.refused.first()
        {
            return Err(*e);
        }
        let cfg = opts.config.with_superblock(&newest);
        cfg.check()?;
        let missing = slots
            .iter()
            .zip(newest.members.iter())
            .filter(|(d, m)| d.is_none() || m.state == DiskState::Failed)
            .count();
        report.missing = missing as u8;
        if missing > geo.tolerance() {
            return Err(OpenError::TooManyMissing {
                missing: missing as u8,
            });
        }
        let mlayout = Self::layout(&cfg, geo.disks());
        let needed = mlayout.total();
        if mem.as_mut().len() < needed {
            return Err(OpenError::Memory { needed });
        }
        let mut array = Array::new(geo, slots, cfg.array).map_err(|_| OpenError::Disks)?;
        for (i, m) in newest.members.iter().enumerate() {
            if m.state == DiskState::Rebuilding
                && array.member(i).is_some_and(crate::raid::Member::is_present)
            {
                let _ = array.set_state(i, DiskState::Rebuilding);
            }
        }
        let mut guids: Vec<u64, 32> = Vec::new();
        for m in &newest.members {
            let _ = guids.push(m.guid);
        }
        let conf = Config {
            pool_uuid: uuid,
            pool_tag: format::pool_tag(&uuid),
            generation: newest.generation,
            geometry: geo,
            layout: newest.layout,
            member_guids: guids,
            next_guid: newest
                .members
                .iter()
                .map(|m| m.guid)
                .chain(newest.spares.iter().copied())
                .count() as u64
                + 1,
        };
        let mut st = Self::new_state(array, spares, cfg, mlayout, conf);
        // Recorded states are the newest configuration's (missing members show as changes).
        st.recorded_states.clear();
        for m in &newest.members {
            let _ = st.recorded_states.push(m.state);
        }
        st.conf.next_guid =
            newest.members.len() as u64 + newest.spares.len() as u64 + newest.generation + 1;
        let mut b = mlayout
            .split(mem.as_mut())
            .ok_or(OpenError::Memory { needed })?;
        // Roots, newest first; the first whose tables load wins.
        let root = st.find_root(&mut b)?;
        st.root_gen = root.root_gen;
        st.counters = root.counters;
        st.restore_rebuild(&root);
        st.release_pending(&mut b);
        let end = st.recover(&mut b, &root).map_err(OpenError::Io)?;
        report.root_gen = root.root_gen;
        report.items_replayed = end.items;
        report.items_lost = end.lost;
        report.resynced_stripes = end.resynced;
        report.zil_records = st.zil_refs.len() as u32;
        if st.array.failed() != st.recorded_failed() || missing > 0 {
            st.on_members_failed().map_err(OpenError::Io)?;
        }
        st.checkpoint(&mut b).map_err(OpenError::Io)?;
        st.zil_refs.clear();
        Ok((Pool { st, mem }, report))
    }

    /// Capacity clients can fill, in bytes: all segments but the log's window of reserved
    /// segments, the free segments that renew it at the next checkpoint (as many again), and
    /// the cleaner's reserve — exactly what the cleaner keeps free before it takes a write.
    pub fn usable_bytes(&self) -> u64 {
        let keep =
            2 * u64::from(self.st.cfg.reserved_segments) + u64::from(self.st.cfg.cleaner_reserve);
        u64::from(self.st.segments()).saturating_sub(keep) * self.st.segment_bytes()
    }

    fn bufs(&mut self) -> Result<(&mut State<D, N, L, P, S>, Bufs<'_>), IoError> {
        let layout = self.st.mem;
        let b = layout.split(self.mem.as_mut()).ok_or(bug!(IoError))?;
        Ok((&mut self.st, b))
    }

    /// Creates a LUN of `blocks` 4 KiB blocks named `name` (1–24 bytes), thin-provisioned:
    /// it takes space only as it is written. Returns its number. Durable on return.
    pub fn create_lun(&mut self, name: &str, blocks: u64) -> Result<u16, LunError> {
        if name.is_empty() || name.len() > LUN_NAME_MAX {
            return Err(LunError::BadName);
        }
        if blocks == 0 || blocks.saturating_mul(LUN_BLOCK as u64) > self.usable_bytes() {
            return Err(LunError::BadSize);
        }
        if self
            .st
            .luns
            .iter()
            .any(|l| l.rec.name.as_str() == name && l.rec.blocks > 0)
        {
            return Err(LunError::NameTaken);
        }
        self.ready().map_err(LunError::Io)?;
        // Reuse a deleted slot (blocks == 0) or append.
        let id = match self.st.luns.iter().position(|l| l.rec.blocks == 0) {
            Some(i) => i,
            None if self.st.luns.len() < L => self.st.luns.len(),
            None => return Err(LunError::TooMany),
        };
        let rec = LunRecord {
            id: id as u16,
            name: heapless::String::try_from(name).map_err(|_| LunError::BadName)?,
            blocks,
            map_root: BlockPtr::NONE,
            depth: Lun::depth_for(blocks),
            counters: LunCounters::default(),
        };
        if id == self.st.luns.len() {
            self.st
                .luns
                .push(Lun { rec })
                .map_err(|_| LunError::TooMany)?;
        } else if let Some(l) = self.st.luns.get_mut(id) {
            l.rec = rec;
        }
        let (st, mut b) = self.bufs().map_err(LunError::Io)?;
        st.checkpoint(&mut b).map_err(LunError::Io)?;
        Ok(id as u16)
    }

    /// Deletes a LUN and frees its space (the cleaner reclaims it). Durable on return.
    pub fn delete_lun(&mut self, lun: u16) -> Result<(), LunError> {
        self.lun_rec(lun).map_err(|_| LunError::NoSuchLun)?;
        self.ready().map_err(LunError::Io)?;
        let (st, mut b) = self.bufs().map_err(LunError::Io)?;
        // Open extents of the LUN are dropped, not written.
        for s in st.streams.iter_mut().filter(|s| s.lun == lun) {
            s.blocks = 0;
        }
        st.release_lun_map(&mut b, lun).map_err(LunError::Io)?;
        st.bad.retain(|r| r.lun != lun);
        if let Some(l) = st.luns.get_mut(lun as usize) {
            l.rec.blocks = 0;
            l.rec.name.clear();
            l.rec.counters = LunCounters::default();
            l.rec.depth = 1;
        }
        st.checkpoint(&mut b).map_err(LunError::Io)
    }

    fn lun_rec(&self, lun: u16) -> Result<&LunRecord, IoError> {
        self.st
            .luns
            .get(lun as usize)
            .map(|l| &l.rec)
            .filter(|r| r.blocks > 0)
            .ok_or(IoError::NoSuchLun)
    }

    /// The LUN named `name`.
    pub fn lun_by_name(&self, name: &str) -> Option<u16> {
        self.st
            .luns
            .iter()
            .find(|l| l.rec.blocks > 0 && l.rec.name.as_str() == name)
            .map(|l| l.rec.id)
    }

    /// Every LUN with its space use.
    pub fn luns(&self) -> impl Iterator<Item = LunInfo> + '_ {
        let geo = *self.st.geo();
        self.st
            .luns
            .iter()
            .filter(|l| l.rec.blocks > 0)
            .map(move |l| {
                let c = l.rec.counters;
                let k = geo.data_strips() as u64;
                let red = geo.parity_strips() as u64 + geo.copies() as u64 - 1;
                LunInfo {
                    id: l.rec.id,
                    name: l.rec.name.clone(),
                    blocks: l.rec.blocks,
                    logical_bytes: c.mapped_blocks * LUN_BLOCK as u64,
                    physical_bytes: c.log_bytes,
                    stored_bytes: c.stored_bytes,
                    padding_bytes: c.log_bytes.saturating_sub(c.stored_bytes),
                    parity_bytes: c.log_bytes * red / k.max(1),
                    compression_savings: (c.mapped_blocks * LUN_BLOCK as u64)
                        .saturating_sub(c.stored_bytes),
                }
            })
    }

    fn check_io(&self, lun: u16, lba: u64, len: usize) -> Result<u64, IoError> {
        let rec = self.lun_rec(lun)?;
        if len == 0 || !len.is_multiple_of(LUN_BLOCK) {
            return Err(IoError::Misaligned);
        }
        let n = (len / LUN_BLOCK) as u64;
        match lba.checked_add(n) {
            Some(end) if end <= rec.blocks => Ok(n),
            _ => Err(IoError::OutOfRange),
        }
    }

    /// Refuses I/O on a faulted pool; writes a checkpoint when the log has used half its
    /// reserved segments (bounding recovery) or many map pages since the last one, and always
    /// once it writes into the last segment of its window while a free segment could extend
    /// it (otherwise the window could fill up: "log segments exhausted").
    fn ready(&mut self) -> Result<(), IoError> {
        if self.st.health() == Health::Faulted {
            self.st.faulted = true;
            return Err(IoError::Faulted);
        }
        let half = (usize::from(self.st.cfg.reserved_segments) / 2).max(1);
        let pages_limit = self.st.segment_bytes() / 2 / 4096;
        let due = self.st.log.res_idx >= half || self.st.log.pages_since_checkpoint >= pages_limit;
        let mut forced =
            self.st.log.res_idx > half || self.st.log.pages_since_checkpoint >= 2 * pages_limit;
        if !forced {
            let (st, b) = self.bufs()?;
            forced = st.window_closing(&b);
        }
        // A checkpoint pads the open stripe to its end: when one is due but not yet forced,
        // wait until the stripe is nearly full, so the padding is small.
        if forced || (due && self.st.checkpoint_fits_well()) {
            let (st, mut b) = self.bufs()?;
            st.checkpoint(&mut b)?;
        }
        Ok(())
    }

    /// Writes `data` (whole 4 KiB blocks) to `lun` from block `lba`. Acknowledged when buffered;
    /// with `fua`, durable when it returns. Errors change nothing, except that a write failing
    /// after buffering (a device error) leaves the blocks either old or new.
    pub fn write(&mut self, lun: u16, lba: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        let n = self.check_io(lun, lba, data.len())?;
        let r = self.write_settling(lun, lba, data, n, fua);
        self.settled(r)
    }

    fn write_settling(
        &mut self,
        lun: u16,
        lba: u64,
        data: &[u8],
        n: u64,
        fua: bool,
    ) -> Result<(), IoError> {
        self.ready()?;
        self.make_room(n)?;
        let (st, mut b) = self.bufs()?;
        st.close_idle_streams(&mut b)?;
        for (i, blk) in data.chunks_exact(LUN_BLOCK).enumerate() {
            st.buffer_block(&mut b, lun, lba + i as u64, blk)?;
        }
        st.forget_bad(lun, lba, n);
        st.counters.client_bytes_written += data.len() as u64;
        st.session_client_bytes += data.len() as u64;
        if fua {
            st.flush(&mut b)?;
        }
        Ok(())
    }

    /// Reads whole 4 KiB blocks of `lun` from `lba` into `buf`: the data last written (blocks
    /// never written or trimmed read as zeros), or an error — never other data.
    pub fn read(&mut self, lun: u16, lba: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.check_io(lun, lba, buf.len())?;
        if self.st.faulted {
            return Err(IoError::Faulted);
        }
        let (st, mut b) = self.bufs()?;
        let mut res = Ok(());
        for (i, blk) in buf.chunks_exact_mut(LUN_BLOCK).enumerate() {
            res = st.read_block(&mut b, lun, lba + i as u64, blk);
            if res.is_err() {
                break;
            }
        }
        // A member that failed under the reads gets a spare and a rebuild now.
        st.after_membership_change()?;
        res?;
        st.counters.client_bytes_read += buf.len() as u64;
        Ok(())
    }

    /// Makes every write acknowledged so far durable (see the module docs).
    pub fn flush(&mut self) -> Result<(), IoError> {
        self.ready()?;
        let (st, mut b) = self.bufs()?;
        let r = st.flush(&mut b);
        self.settled(r)
    }

    /// Records a membership change the operation that returned `r` caused (a member failed
    /// under its I/O): spares, rebuilds, the new configuration. `r`'s error comes first.
    pub(crate) fn settled<T>(&mut self, r: Result<T, IoError>) -> Result<T, IoError> {
        let s = self.st.after_membership_change();
        let v = r?;
        s?;
        Ok(v)
    }

    /// Unmaps `blocks` blocks of `lun` from `lba` (TRIM / UNMAP): they read as zeros and their
    /// space is freed. Like a write, durable after the next flush.
    pub fn trim(&mut self, lun: u16, lba: u64, blocks: u64) -> Result<(), IoError> {
        let rec = self.lun_rec(lun)?;
        if blocks == 0 || lba.checked_add(blocks).is_none_or(|e| e > rec.blocks) {
            return Err(IoError::OutOfRange);
        }
        let r = self.trim_settling(lun, lba, blocks);
        self.settled(r)
    }

    fn trim_settling(&mut self, lun: u16, lba: u64, blocks: u64) -> Result<(), IoError> {
        self.ready()?;
        let (st, mut b) = self.bufs()?;
        st.close_streams_in(&mut b, lun, lba, blocks)?;
        // Log the unmap (for roll-forward), then apply it.
        let hdr = format::ItemHeader {
            kind: format::ItemKind::Trim,
            flags: 0,
            lun,
            lba,
            blocks: blocks.min(u64::from(u32::MAX)) as u32,
            stored_len: 0,
            raw_len: 0,
            payload_crc: 0,
            seq: 0,
            pool: 0,
            addr: 0,
        };
        let mut done = 0u64;
        while done < blocks {
            let n = (blocks - done).min(u64::from(u32::MAX));
            let h = format::ItemHeader {
                lba: lba + done,
                blocks: n as u32,
                ..hdr
            };
            let ptr = st.append(&mut b.log, b.sut, h, &[], false)?;
            st.counters.metadata_log_bytes += u64::from(ptr.len);
            st.unmap_range(&mut b, lun, lba + done, n)?;
            done += n;
        }
        st.forget_bad(lun, lba, blocks);
        Ok(())
    }

    /// Write-zeroes: the same as [`Pool::trim`] (unmapped blocks read as zeros).
    pub fn write_zeroes(&mut self, lun: u16, lba: u64, blocks: u64) -> Result<(), IoError> {
        self.trim(lun, lba, blocks)
    }

    /// Tells the pool the time (monotonic, in the unit of [`PoolConfig::idle_close`]).
    pub fn set_time(&mut self, now: u64) {
        self.st.now = self.st.now.max(now);
    }

    /// Writes a checkpoint now (normally automatic).
    pub fn checkpoint(&mut self) -> Result<(), IoError> {
        if self.st.faulted {
            return Err(IoError::Faulted);
        }
        let (st, mut b) = self.bufs()?;
        st.checkpoint(&mut b)
    }

    /// Counters: client bytes, member bytes by kind, compression, live and dead space.
    pub fn stats(&mut self) -> Stats {
        let a = *self.st.array.stats();
        let counters = self.st.counters;
        let session = self.st.session_client_bytes;
        let seg_bytes = self.st.segment_bytes();
        let Ok((st, b)) = self.bufs() else {
            return Stats::default();
        };
        let mut live = 0u64;
        let mut used = 0u64;
        let mut free = 0u32;
        for s in 0..st.segments() {
            let e = b.seg(s);
            live += u64::from(e.live);
            match e.state {
                SegState::Used => used += 1,
                SegState::Free => free += 1,
                SegState::Pending(_) => {}
            }
        }
        Stats {
            counters,
            member_data_bytes: a.data_bytes_written,
            member_redundancy_bytes: a.redundancy_bytes_written,
            member_raw_bytes: a.raw_bytes_written,
            member_repair_bytes: a.repair_bytes_written,
            session_client_bytes: session,
            live_bytes: live,
            dead_bytes: (used * seg_bytes).saturating_sub(live),
            segments: st.segments(),
            free_segments: free,
            segment_bytes: seg_bytes,
        }
    }

    /// The event log (disk failures, spares, rebuild, scrub, repairs).
    pub fn events(&self) -> &EventLog {
        self.st.array.events()
    }

    /// The array (geometry, member states, counters).
    pub fn array(&self) -> &Array<D, N> {
        &self.st.array
    }

    /// The array, mutable: for tools and tests that reach member disks directly (fault
    /// injection). Changing member states here bypasses the pool's bookkeeping.
    pub fn array_mut(&mut self) -> &mut Array<D, N> {
        &mut self.st.array
    }

    /// Flushes and checkpoints, then hands back the member disks (slot order; `None` for
    /// missing ones), the spares and the arena.
    ///
    /// # Errors
    /// The flush's or checkpoint's error; [`IoError::Faulted`] for a faulted pool, which can
    /// make nothing durable (writes acknowledged since its last flush are lost; a success here
    /// would say otherwise). [`Pool::into_parts`] takes a faulted pool apart.
    pub fn shutdown(mut self) -> Result<PoolParts<D, M, N>, IoError> {
        if self.st.faulted {
            return Err(IoError::Faulted);
        }
        let (st, mut b) = self.bufs()?;
        st.flush(&mut b)?;
        st.checkpoint(&mut b)?;
        Ok(self.into_parts())
    }

    /// Hands back the disks and arena without writing anything (what a power cut leaves, for
    /// tests and tools).
    pub fn into_parts(mut self) -> PoolParts<D, M, N> {
        let mut members = Vec::new();
        for i in 0..self.st.geo().disks() {
            let _ = members.push(self.st.array.take(i));
        }
        let mut spares = Vec::new();
        while let Some(s) = self.st.spares.pop() {
            let _ = spares.push(s.disk);
        }
        spares.reverse();
        (members, spares, self.mem)
    }

    /// Pool UUID.
    pub fn uuid(&self) -> [u8; 16] {
        self.st.conf.pool_uuid
    }

    /// The last checkpoint's generation.
    pub fn root_gen(&self) -> u64 {
        self.st.root_gen
    }

    /// Makes room for `blocks` more blocks: runs the cleaner when free segments run low, and
    /// refuses with [`IoError::NoSpace`] when the pool is truly full. A write is refused whole:
    /// nothing of it is buffered.
    fn make_room(&mut self, blocks: u64) -> Result<(), IoError> {
        let (st, mut b) = self.bufs()?;
        st.make_room(&mut b, blocks)
    }
}

impl<D: BlockDevice, const N: usize, const L: usize, const P: usize, const S: usize>
    State<D, N, L, P, S>
{
    /// Flush: close open extents, make written stripes durable, copy the open stripe's new
    /// bytes to the intent log (or seal the stripe when the intent log cannot take them), then,
    /// when whole stripes became durable, leave a flush mark naming the position now durable.
    pub(crate) fn flush(&mut self, b: &mut Bufs) -> Result<(), IoError> {
        self.close_all_streams(b)?;
        // Deliberate bug for the fault campaign's self-test: acknowledge before durable.
        #[cfg(feature = "mutate")]
        if crate::mutate::active(crate::mutate::Mutation::EarlyFlush) {
            return Ok(());
        }
        // Whether this flush made whole stripes durable (a flush mark is due, see below).
        let mut stripes = self.log.unflushed_stripes > 0;
        if stripes {
            self.array.flush();
            self.after_membership_change()?;
            self.log.unflushed_stripes = 0;
            self.zil_obsolete();
        }
        if self.log.fill > self.log.zil_done && !self.zil_write(b)? {
            self.seal_stripe(&mut b.log)?;
            self.array.flush();
            self.after_membership_change()?;
            self.log.unflushed_stripes = 0;
            self.zil_obsolete();
            stripes = true;
        }
        self.after_membership_change()?;
        if self.faulted {
            return Err(IoError::Faulted);
        }
        // A mark after whole stripes became durable: a few extra writes per stripe, not per
        // flush. A flush that wrote only intent-log records (a FUA write into the open stripe)
        // leaves one only while members are out of sync, when fewer faults take the records
        // past what redundancy rebuilds; marking every flush made write-through workloads on
        // seeking disks several times slower (the demo's baseline: 1 566 IOPS to 176).
        if stripes || !self.array.not_in_sync().is_empty() {
            self.write_flush_mark(b)?;
        }
        Ok(())
    }

    /// Bytes a checkpoint would append now: dirty map pages and the ancestors their new
    /// copies dirty, the LUN table, the bad list and the segment table (approximately, to a
    /// sector or two).
    pub(crate) fn checkpoint_bytes(&self) -> usize {
        let mut pages = 0usize;
        for m in self.cache.iter().flatten() {
            // A page is written if it or any cached descendant is dirty.
            let k = m.key;
            let written = m.dirty
                || self.cache.iter().flatten().any(|c| {
                    c.dirty
                        && c.key.lun == k.lun
                        && c.key.level < k.level
                        && c.key.index / crate::volume::map::span(k.level - c.key.level) == k.index
                });
            if written {
                pages += 1;
            }
        }
        let tables = format::round_up(64 + 16 + self.luns.len() * 72, format::ITEM_ALIGN)
            + format::round_up(64 + 16 + self.bad.len() * 16, format::ITEM_ALIGN)
            + format::round_up(
                64 + self.segments() as usize * format::SEG_ENTRY_BYTES,
                format::ITEM_ALIGN,
            );
        pages * 4096 + tables
    }

    /// Whether checkpointing now would pad little: the checkpoint's own bytes end within one
    /// extent of a stripe boundary.
    pub(crate) fn checkpoint_fits_well(&self) -> bool {
        let sdb = self.sdb();
        let end = (self.log.fill + self.checkpoint_bytes()) % sdb;
        let pad = if end == 0 { 0 } else { sdb - end };
        pad <= state::max_item_bytes(&self.cfg)
    }

    /// Finds the newest root on any member whose tables load.
    fn find_root(&mut self, b: &mut Bufs) -> Result<Root, OpenError> {
        let mut roots: Vec<Root, 8> = Vec::new();
        self.log.replaying = true;
        for d in 0..self.geo().disks() {
            for i in 0..ROOT_SLOTS {
                let lba = self.root_lba(i);
                let Some(slot) = b.meta.get_mut(..SLOT_BYTES) else {
                    continue;
                };
                if self.array.disk_read(d, lba, slot).is_err() {
                    continue;
                }
                let Ok(r) = Root::decode(slot) else { continue };
                if r.pool_uuid != self.conf.pool_uuid
                    || roots.iter().any(|x| x.root_gen == r.root_gen)
                {
                    continue;
                }
                if roots.is_full() {
                    // Keep the newest eight.
                    if let Some((mi, _)) = roots.iter().enumerate().min_by_key(|(_, x)| x.root_gen)
                        && roots.get(mi).is_some_and(|x| x.root_gen < r.root_gen)
                    {
                        roots.swap_remove(mi);
                    } else {
                        continue;
                    }
                }
                let _ = roots.push(r);
            }
        }
        roots.sort_unstable_by_key(|r| core::cmp::Reverse(r.root_gen));
        for r in roots {
            if self.load_tables(b, &r).is_ok() {
                self.log.replaying = false;
                return Ok(r);
            }
        }
        Err(OpenError::NoValidRoot)
    }

    /// Writes the configuration (membership, generation + 1) to every member and spare: slot A
    /// on all, flush, slot B on all, flush — a torn write leaves the other copy valid.
    pub(crate) fn write_config(&mut self) -> Result<(), IoError> {
        self.conf.generation += 1;
        let mut members: Vec<MemberRecord, 32> = Vec::new();
        for (i, guid) in self.conf.member_guids.iter().enumerate() {
            let state = self
                .array
                .member(i)
                .map_or(DiskState::Failed, crate::raid::Member::state);
            let _ = members.push(MemberRecord { guid: *guid, state });
        }
        let mut spares: Vec<u64, 32> = Vec::new();
        for s in &self.spares {
            let _ = spares.push(s.guid);
        }
        let mut sb = Superblock {
            magic: format::SUPER_MAGIC,
            version: format::FORMAT_VERSION,
            pool_uuid: self.conf.pool_uuid,
            disk_guid: 0,
            role: Role::Spare,
            generation: self.conf.generation,
            geometry: self.conf.geometry,
            layout: self.conf.layout,
            members: members.clone(),
            spares,
        };
        let per = (SLOT_BYTES / self.geo().block_bytes()) as u64;
        let mut slot = [0u8; SLOT_BYTES];
        for copy in 0..2u32 {
            let lba = u64::from(format::superblock_slot(copy)) * per;
            for i in 0..self.geo().disks() {
                let Some(m) = members.get(i) else { continue };
                if m.state == DiskState::Failed {
                    continue;
                }
                sb.disk_guid = m.guid;
                sb.role = Role::Member(i as u8);
                sb.encode(&mut slot).map_err(IoError::Corrupt)?;
                if self.array.disk_write(i, lba, &slot).is_ok() {
                    self.counters.label_bytes += SLOT_BYTES as u64;
                }
            }
            for si in 0..self.spares.len() {
                let Some(guid) = self.spares.get(si).map(|s| s.guid) else {
                    continue;
                };
                sb.disk_guid = guid;
                sb.role = Role::Spare;
                sb.encode(&mut slot).map_err(IoError::Corrupt)?;
                if let Some(s) = self.spares.get_mut(si) {
                    let _ = s.disk.write(lba, &slot);
                    let _ = s.disk.flush();
                }
            }
            self.array.flush();
        }
        self.recorded_states.clear();
        for m in &members {
            let _ = self.recorded_states.push(m.state);
        }
        Ok(())
    }

    /// Member slots the superblocks record as failed.
    pub(crate) fn recorded_failed(&self) -> crate::raid::DiskSet {
        self.recorded_states
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == DiskState::Failed)
            .fold(crate::raid::DiskSet::EMPTY, |s, (i, _)| s.with(i))
    }
}
