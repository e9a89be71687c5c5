//! # raidcore-capi: raidcore for C firmware
//!
//! A C ABI over [`raidcore::pool::Pool`]: link `libraidcore_capi.a` and include
//! `include/raidcore.h` (generated from this file by cbindgen; a test fails when it is stale).
//!
//! - **Disks** are callbacks: each [`raidcore_disk`] gives a context pointer, its block size
//!   and count, and `read` / `write` / `flush` functions returning a `RAIDCORE_DISK_*` code.
//! - **Memory** is one caller-provided arena of [`raidcore_memory_bytes`] bytes: the pool object
//!   itself is placed at its (aligned) start, its buffers after it. Nothing is allocated.
//! - **Errors** are plain `int32_t` codes (`RAIDCORE_OK`, `RAIDCORE_E_*`), named by
//!   [`raidcore_error_name`].
//!
//! ## Ownership
//! The arena and the disks' contexts stay the caller's memory, lent to the pool from
//! `raidcore_pool_create` / `raidcore_pool_import` until `raidcore_pool_shutdown` /
//! `raidcore_pool_abandon` returns: in between the caller must not touch the arena, and every
//! context must stay valid. The `raidcore_pool *` handle points into the arena; it is invalid
//! after shutdown or abandon. The pool copies the `raidcore_disk` structs it is given (their
//! memory may be reused at once); buffers passed to calls are only used during the call.
//!
//! ## Threading
//! A pool is not thread-safe: call it from one thread at a time (or under one lock). Disk
//! callbacks run synchronously, on the calling thread, inside the pool call; one device never
//! sees two requests at once. A callback must not call into the same pool: such a call returns
//! `RAIDCORE_E_BUSY` and does nothing. Different pools are independent.
//!
//! ## Panics
//! The core is built not to panic (every fault is a typed error), and nothing may unwind into
//! C. On hosted targets each call runs under `catch_unwind`: a panic returns `RAIDCORE_E_PANIC`
//! and poisons the pool (every later call returns it too). On bare-metal targets
//! (`target_os = "none"`) the library brings its own panic handler, which parks the CPU in a
//! loop (a watchdog resets the board).
#![cfg_attr(target_os = "none", no_std)]
#![deny(missing_docs)]
#![allow(non_camel_case_types)]

use core::ffi::{CStr, c_char, c_void};
use core::mem::{align_of, size_of};

use raidcore::pool::{
    AdminError, Health, ImportOptions, IoError, LunError, MaintenanceReport, OpenError, Pool,
    PoolConfig,
};
use raidcore::raid::{DiskState, Level};
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType};

/// Success.
pub const RAIDCORE_OK: i32 = 0;
/// A null pointer, a bad argument or a configuration out of range.
pub const RAIDCORE_E_INVALID: i32 = -1;
/// The arena is smaller than `raidcore_memory_bytes` for this configuration.
pub const RAIDCORE_E_MEMORY: i32 = -2;
/// No LUN with that number.
pub const RAIDCORE_E_NO_SUCH_LUN: i32 = -3;
/// The block range is not inside the LUN (or the member slot does not exist).
pub const RAIDCORE_E_OUT_OF_RANGE: i32 = -4;
/// The buffer is empty or not a whole number of 4 KiB blocks.
pub const RAIDCORE_E_MISALIGNED: i32 = -5;
/// The pool is full; nothing of the write was taken.
pub const RAIDCORE_E_NO_SPACE: i32 = -6;
/// The data of a block is lost (more damage than the level tolerates); it reads back as this
/// error until rewritten.
pub const RAIDCORE_E_LOST: i32 = -7;
/// More members failed than the level tolerates: the pool serves no I/O.
pub const RAIDCORE_E_FAULTED: i32 = -8;
/// A member or array operation failed.
pub const RAIDCORE_E_DEVICE: i32 = -9;
/// On-disk metadata failed its checks and could not be repaired (or a log is unreadable
/// before its last flush).
pub const RAIDCORE_E_CORRUPT: i32 = -10;
/// The configuration is too small for the workload (log window or map cache).
pub const RAIDCORE_E_TOO_SMALL: i32 = -11;
/// An internal invariant did not hold (a bug); the operation was abandoned.
pub const RAIDCORE_E_INTERNAL: i32 = -12;
/// Import: no pool on the disks, or a disk that is foreign, stale, of an unknown version or
/// of the wrong size.
pub const RAIDCORE_E_NO_POOL: i32 = -13;
/// Import: more members missing or failed than the level tolerates.
pub const RAIDCORE_E_TOO_MANY_MISSING: i32 = -14;
/// A call into a pool from inside one of its own disk callbacks.
pub const RAIDCORE_E_BUSY: i32 = -15;
/// A panic was caught (a bug); the pool is poisoned.
pub const RAIDCORE_E_PANIC: i32 = -16;
/// LUN creation: too many LUNs, a bad size, or a bad or taken name.
pub const RAIDCORE_E_LUN: i32 = -17;
/// The pool is suspended (a disk reported its host's storage full or read-only); nothing was
/// written. Free the space and call [`raidcore_pool_resume`].
pub const RAIDCORE_E_SUSPENDED: i32 = -18;
/// Import: the pool opens only as it was at an earlier point (its log is unreadable before the
/// last flush's end, or a forced import found only members taken back); nothing was written.
/// `RAIDCORE_IMPORT_REWIND` opens it so, and the blocks written after that point then read
/// their older contents.
pub const RAIDCORE_E_REWIND_NEEDED: i32 = -19;

/// Disk callback result: done.
pub const RAIDCORE_DISK_OK: i32 = 0;
/// Disk callback result: a latent sector error; the callback stores the first bad block in
/// `*bad_lba` (left alone, the request's first block is taken).
pub const RAIDCORE_DISK_MEDIUM: i32 = -1;
/// Disk callback result: a link error (CRC, dropped command); worth a retry.
pub const RAIDCORE_DISK_TRANSPORT: i32 = -2;
/// Disk callback result: no answer in time; worth a retry.
pub const RAIDCORE_DISK_TIMEOUT: i32 = -3;
/// Disk callback result: the device is gone or failed.
pub const RAIDCORE_DISK_FAILED: i32 = -4;

/// `raidcore_pool_import_with` flag: a forced import (as `mdadm --assemble --force`): when
/// more members are missing than the level tolerates, failed members whose disks are given and
/// whose slots never went to another disk are taken back; what they missed reads as
/// `RAIDCORE_E_LOST`, never as other data.
pub const RAIDCORE_IMPORT_FORCE: u32 = 1;
/// `raidcore_pool_import_with` flag: a rewind (as `zpool import -F`): a log unreadable before
/// the last flush's end is cut there instead of refused, and a forced import whose members in
/// sync are all missing opens as the members taken back left it (without it, both are
/// `RAIDCORE_E_REWIND_NEEDED`); the writes after that are lost and the blocks they wrote read
/// their older contents.
pub const RAIDCORE_IMPORT_REWIND: u32 = 2;

/// `raidcore_config.level`: striping, no redundancy.
pub const RAIDCORE_RAID0: u8 = 0;
/// `raidcore_config.level`: n-way mirror.
pub const RAIDCORE_RAID1: u8 = 1;
/// `raidcore_config.level`: striped mirrors.
pub const RAIDCORE_RAID10: u8 = 10;
/// `raidcore_config.level`: rotating P parity.
pub const RAIDCORE_RAID5: u8 = 5;
/// `raidcore_config.level`: rotating P + Q parity.
pub const RAIDCORE_RAID6: u8 = 6;

/// `raidcore_status.health`: every member in sync.
pub const RAIDCORE_HEALTH_ONLINE: u8 = 0;
/// `raidcore_status.health`: members out of sync within the level's tolerance.
pub const RAIDCORE_HEALTH_DEGRADED: u8 = 1;
/// `raidcore_status.health`: more members out than the level tolerates.
pub const RAIDCORE_HEALTH_FAULTED: u8 = 2;
/// `raidcore_status.health`: suspended by a host condition (storage full or read-only).
pub const RAIDCORE_HEALTH_SUSPENDED: u8 = 3;

/// `raidcore_status.member_state`: in sync.
pub const RAIDCORE_MEMBER_ONLINE: u8 = 0;
/// `raidcore_status.member_state`: failed.
pub const RAIDCORE_MEMBER_FAILED: u8 = 1;
/// `raidcore_status.member_state`: being rebuilt.
pub const RAIDCORE_MEMBER_REBUILDING: u8 = 2;
/// `raidcore_status.member_state`: no disk in the slot.
pub const RAIDCORE_MEMBER_MISSING: u8 = 3;

/// Most member + spare disks of one pool.
pub const RAIDCORE_MAX_DISKS: u32 = 16;
/// Most LUNs of one pool.
pub const RAIDCORE_MAX_LUNS: u32 = 8;
/// Map pages the pool caches (4032 bytes of arena each).
pub const RAIDCORE_MAP_PAGES: u32 = 16;
/// Open write streams (extents being coalesced).
pub const RAIDCORE_STREAMS: u32 = 4;
/// Bytes of one LUN block: reads and writes move whole multiples of it.
pub const RAIDCORE_BLOCK_BYTES: u32 = 4096;

/// Reads `blocks` device blocks from `lba` into `buf` (`blocks * block_size` bytes).
pub type raidcore_read_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        lba: u64,
        buf: *mut u8,
        blocks: u32,
        bad_lba: *mut u64,
    ) -> i32,
>;
/// Writes `blocks` device blocks from `buf` to `lba`; done means accepted, not yet durable.
pub type raidcore_write_fn = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        lba: u64,
        buf: *const u8,
        blocks: u32,
        bad_lba: *mut u64,
    ) -> i32,
>;
/// Makes every completed write durable (a cache flush).
pub type raidcore_flush_fn = Option<unsafe extern "C" fn(ctx: *mut c_void) -> i32>;

/// One disk: its geometry and callbacks. Every callback returns a `RAIDCORE_DISK_*` code; the
/// pool never passes a range outside `0..block_count` or a null buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct raidcore_disk {
    /// Passed to every callback; the pool never reads it.
    pub ctx: *mut c_void,
    /// Bytes per block: 512 or 4096.
    pub block_size: u32,
    /// Blocks on the device.
    pub block_count: u64,
    /// Read callback (required).
    pub read: raidcore_read_fn,
    /// Write callback (required).
    pub write: raidcore_write_fn,
    /// Flush callback (required).
    pub flush: raidcore_flush_fn,
}

/// Pool settings. `raidcore_config_default` fills in sensible values; the first six are fixed
/// at creation, the rest are run-time policy (import takes them again).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct raidcore_config {
    /// `RAIDCORE_RAID0`, `_RAID1`, `_RAID10`, `_RAID5` or `_RAID6`.
    pub level: u8,
    /// LZ4-compress extents (kept where it saves at least 12.5 %).
    pub compression: bool,
    /// Largest extent in 4 KiB blocks (1 to 32).
    pub max_extent_blocks: u8,
    /// Strip size in bytes: a power of two from 4 KiB to 1 MiB.
    pub strip_bytes: u32,
    /// Intent-log slots per member (4 KiB each, at least 16).
    pub zil_slots: u32,
    /// Smallest segment, in stripes.
    pub segment_stripes: u32,
    /// Most segments (16 bytes of arena each, twice).
    pub max_segments: u32,
    /// Stripes one `raidcore_maintenance` call may rebuild or scrub.
    pub stripes_per_step: u32,
    /// Close an open extent idle for longer than this, in the unit of `raidcore_set_time`.
    pub idle_close: u64,
    /// Copies of each metadata item: 2 (the default, a "ditto" copy in another member block
    /// row, so one latent sector error on a degraded stripe cannot lose the map) or 1.
    pub metadata_copies: u8,
}

/// What `raidcore_maintenance` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct raidcore_maintenance_report {
    /// Stripes rebuilt.
    pub rebuilt_stripes: u64,
    /// Stripes scrubbed.
    pub scrubbed_stripes: u64,
    /// Nothing is left to do (no rebuild or scrub in progress).
    pub idle: bool,
}

/// What `raidcore_pool_status` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct raidcore_status {
    /// `RAIDCORE_HEALTH_*`.
    pub health: u8,
    /// Member slots.
    pub members: u8,
    /// Hot spares waiting.
    pub spares: u8,
    /// A rebuild is in progress.
    pub rebuilding: bool,
    /// The slot being rebuilt (when `rebuilding`).
    pub rebuild_slot: u8,
    /// Stripes rebuilt so far.
    pub rebuild_done: u64,
    /// Stripes to rebuild in all.
    pub rebuild_total: u64,
    /// `RAIDCORE_MEMBER_*` of each slot (first `members` entries).
    pub member_state: [u8; 32],
}

/// What `raidcore_pool_import` found.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct raidcore_import_report {
    /// Log items replayed after the checkpoint.
    pub items_replayed: u64,
    /// Of those, items no redundancy could rebuild (their blocks read as `RAIDCORE_E_LOST`).
    pub items_lost: u64,
    /// Members missing or failed.
    pub missing: u8,
    /// Disks given that were left out.
    pub refused: u8,
    /// Members found behind the pool (an older copy of the image put back), set rebuilding and
    /// resynced for what they missed by `raidcore_maintenance`: bit `i` for slot `i`.
    pub behind_slots: u32,
    /// A forced import walked the map under the checkpoint it loaded: map pages (each with
    /// the pages under it) that cannot be read, so the blocks they map read as
    /// `RAIDCORE_E_LOST` until rewritten (0 for other imports).
    pub map_pages_lost: u64,
    /// With `RAIDCORE_IMPORT_REWIND`: where the log was cut (bytes of log address, when
    /// `log_cut` is 1); writes acknowledged after it are lost and their blocks read their older
    /// contents.
    pub log_cut_at: u64,
    /// 1 when the log was cut at `log_cut_at`, else 0.
    pub log_cut: u8,
    /// 1 when a rewind opened members taken back alone, serving the pool as they left it.
    pub rewound: u8,
}

/// A disk seen through its C callbacks.
#[derive(Debug)]
struct CDisk {
    d: raidcore_disk,
    bs: BlockSize,
}

impl CDisk {
    /// Checks the callbacks and the block size.
    fn new(d: &raidcore_disk) -> Option<Self> {
        let bs = BlockSize::from_bytes(d.block_size as usize)?;
        (d.read.is_some() && d.write.is_some() && d.flush.is_some()).then_some(CDisk { d: *d, bs })
    }

    /// A callback's result code as a device result (`bad`: the block it named, if any).
    fn result(code: i32, lba: u64, blocks: u64, bad: u64) -> Result<(), ErrorKind> {
        Err(match code {
            RAIDCORE_DISK_OK => return Ok(()),
            RAIDCORE_DISK_MEDIUM => ErrorKind::Medium {
                lba: if (lba..lba + blocks).contains(&bad) {
                    bad
                } else {
                    lba
                },
            },
            RAIDCORE_DISK_TRANSPORT => ErrorKind::Transport,
            RAIDCORE_DISK_TIMEOUT => ErrorKind::Timeout,
            RAIDCORE_DISK_FAILED => ErrorKind::DeviceFailed,
            _ => ErrorKind::Other,
        })
    }
}

impl ErrorType for CDisk {
    type Error = ErrorKind;
}

impl BlockDevice for CDisk {
    fn block_size(&self) -> BlockSize {
        self.bs
    }
    fn block_count(&self) -> u64 {
        self.d.block_count
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ErrorKind> {
        let n = raidcore_hal::check_io(self.bs, self.d.block_count, lba, buf.len())?;
        let f = self.d.read.ok_or(ErrorKind::DeviceFailed)?;
        let mut bad = u64::MAX;
        // SAFETY: the integrator promised (raidcore_disk) a callback valid with this context;
        // `buf` holds exactly `n` blocks and lives across the call.
        let r = unsafe { f(self.d.ctx, lba, buf.as_mut_ptr(), n as u32, &raw mut bad) };
        Self::result(r, lba, n, bad)
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), ErrorKind> {
        let n = raidcore_hal::check_io(self.bs, self.d.block_count, lba, buf.len())?;
        let f = self.d.write.ok_or(ErrorKind::DeviceFailed)?;
        let mut bad = u64::MAX;
        // SAFETY: as in `read`.
        let r = unsafe { f(self.d.ctx, lba, buf.as_ptr(), n as u32, &raw mut bad) };
        Self::result(r, lba, n, bad)
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        let f = self.d.flush.ok_or(ErrorKind::DeviceFailed)?;
        // SAFETY: as in `read`.
        let r = unsafe { f(self.d.ctx) };
        Self::result(r, 0, 0, 0)
    }
}

/// The pool's part of the caller's arena (after the pool object).
#[derive(Debug)]
struct Arena {
    ptr: *mut u8,
    len: usize,
}

impl AsMut<[u8]> for Arena {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: the caller lent `len` bytes at `ptr` to the pool until shutdown or abandon
        // and does not touch them meanwhile; only the pool (which owns this Arena) uses them.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

type CPool = Pool<
    CDisk,
    Arena,
    { RAIDCORE_MAX_DISKS as usize },
    { RAIDCORE_MAX_LUNS as usize },
    { RAIDCORE_MAP_PAGES as usize },
    { RAIDCORE_STREAMS as usize },
>;

/// A pool (opaque). It lives at the start of the caller's arena.
#[derive(Debug)]
pub struct raidcore_pool {
    pool: CPool,
    busy: bool,
    poisoned: bool,
}

fn level(l: u8) -> Option<Level> {
    Some(match l {
        RAIDCORE_RAID0 => Level::Raid0,
        RAIDCORE_RAID1 => Level::Raid1,
        RAIDCORE_RAID10 => Level::Raid10,
        RAIDCORE_RAID5 => Level::Raid5,
        RAIDCORE_RAID6 => Level::Raid6,
        _ => return None,
    })
}

impl raidcore_config {
    fn pool_config(&self) -> Option<PoolConfig> {
        Some(PoolConfig {
            level: level(self.level)?,
            strip_bytes: self.strip_bytes,
            max_extent_blocks: self.max_extent_blocks,
            compression: self.compression,
            zil_slots: self.zil_slots,
            segment_stripes: self.segment_stripes,
            max_segments: self.max_segments,
            stripes_per_step: self.stripes_per_step,
            idle_close: self.idle_close,
            metadata_copies: self.metadata_copies,
            ..PoolConfig::default()
        })
    }
}

// The wildcard arms take variants the core may add later (its error types grow).
#[allow(clippy::match_wildcard_for_single_variants)]
fn io_code(e: IoError) -> i32 {
    match e {
        IoError::NoSuchLun => RAIDCORE_E_NO_SUCH_LUN,
        IoError::OutOfRange => RAIDCORE_E_OUT_OF_RANGE,
        IoError::Misaligned => RAIDCORE_E_MISALIGNED,
        IoError::NoSpace => RAIDCORE_E_NO_SPACE,
        IoError::Unrecoverable { .. } => RAIDCORE_E_LOST,
        IoError::Faulted => RAIDCORE_E_FAULTED,
        IoError::Suspended { .. } => RAIDCORE_E_SUSPENDED,
        IoError::Device(_) => RAIDCORE_E_DEVICE,
        IoError::Corrupt(_) | IoError::LogLost { .. } => RAIDCORE_E_CORRUPT,
        IoError::LogFull | IoError::CacheFull => RAIDCORE_E_TOO_SMALL,
        _ => RAIDCORE_E_INTERNAL,
    }
}

fn open_code(e: OpenError) -> i32 {
    match e {
        OpenError::Geometry(_)
        | OpenError::TooFewSegments { .. }
        | OpenError::Config(_)
        | OpenError::Disks => RAIDCORE_E_INVALID,
        OpenError::Memory { .. } => RAIDCORE_E_MEMORY,
        OpenError::TooManyMissing { .. } => RAIDCORE_E_TOO_MANY_MISSING,
        OpenError::NoValidRoot => RAIDCORE_E_CORRUPT,
        OpenError::RewindNeeded | OpenError::Io(IoError::LogLost { .. }) => {
            RAIDCORE_E_REWIND_NEEDED
        }
        OpenError::Io(e) => io_code(e),
        _ => RAIDCORE_E_NO_POOL,
    }
}

fn admin_code(e: AdminError) -> i32 {
    match e {
        AdminError::Io(e) => io_code(e),
        AdminError::Faulted => RAIDCORE_E_FAULTED,
        _ => RAIDCORE_E_INVALID,
    }
}

fn lun_code(e: LunError) -> i32 {
    match e {
        LunError::NoSuchLun => RAIDCORE_E_NO_SUCH_LUN,
        LunError::Io(e) => io_code(e),
        _ => RAIDCORE_E_LUN,
    }
}

/// Runs `f`, turning a panic into `RAIDCORE_E_PANIC` where unwinding exists.
fn guard(f: impl FnOnce() -> i32) -> i32 {
    #[cfg(not(target_os = "none"))]
    {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(RAIDCORE_E_PANIC)
    }
    #[cfg(target_os = "none")]
    {
        f()
    }
}

#[cfg(all(target_os = "none", not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

/// Runs `f` on the pool behind handle `p`, refusing re-entry from a callback and a poisoned
/// pool.
///
/// # Safety
/// `p` is null or a handle from create/import that was not shut down or abandoned.
unsafe fn with_pool(p: *mut raidcore_pool, f: impl FnOnce(&mut CPool) -> i32) -> i32 {
    if p.is_null() {
        return RAIDCORE_E_INVALID;
    }
    // Fields are reached through the raw pointer one at a time: a re-entrant call from a
    // callback only reads `busy`, never touching the pool the outer call is using.
    // SAFETY: `p` is a live handle (the caller's promise).
    unsafe {
        if (*p).poisoned {
            return RAIDCORE_E_PANIC;
        }
        if (*p).busy {
            return RAIDCORE_E_BUSY;
        }
        (*p).busy = true;
        let pool = &mut (*p).pool;
        let r = guard(|| f(pool));
        if r == RAIDCORE_E_PANIC {
            (*p).poisoned = true;
        }
        (*p).busy = false;
        r
    }
}

/// Reads the disks of a `raidcore_disk` array into a list.
///
/// # Safety
/// `disks` is null with `n == 0`, or points to `n` valid structs.
unsafe fn disk_list(
    disks: *const raidcore_disk,
    n: u32,
) -> Option<heapless::Vec<CDisk, { RAIDCORE_MAX_DISKS as usize }>> {
    let mut v = heapless::Vec::new();
    if n == 0 {
        return Some(v);
    }
    if disks.is_null() || n > RAIDCORE_MAX_DISKS {
        return None;
    }
    // SAFETY: the caller's promise.
    let s = unsafe { core::slice::from_raw_parts(disks, n as usize) };
    for d in s {
        v.push(CDisk::new(d)?).ok()?;
    }
    Some(v)
}

/// Where the pool object and the pool's buffers go in an arena of `len` bytes at `arena`.
fn place(arena: *mut u8, len: usize) -> Option<(*mut raidcore_pool, Arena)> {
    if arena.is_null() {
        return None;
    }
    let off = arena.align_offset(align_of::<raidcore_pool>());
    let head = off.checked_add(size_of::<raidcore_pool>())?;
    let rest = len.checked_sub(head)?;
    // SAFETY: `head <= len`, so both pointers stay inside (or one past) the caller's arena.
    // The pool object's address is aligned by `align_offset` above.
    #[allow(clippy::cast_ptr_alignment)]
    let (obj, ptr) = unsafe { (arena.add(off).cast::<raidcore_pool>(), arena.add(head)) };
    Some((obj, Arena { ptr, len: rest }))
}

/// Fills `*out` with the defaults: RAID-6, 64 KiB strips, 32-block extents, LZ4 on.
///
/// # Safety
/// `out` is null or points to writable memory for one `raidcore_config`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_config_default(out: *mut raidcore_config) -> i32 {
    let d = PoolConfig::default();
    let c = raidcore_config {
        level: RAIDCORE_RAID6,
        compression: d.compression,
        max_extent_blocks: d.max_extent_blocks,
        strip_bytes: d.strip_bytes,
        zil_slots: d.zil_slots,
        segment_stripes: d.segment_stripes,
        max_segments: d.max_segments,
        stripes_per_step: d.stripes_per_step,
        idle_close: d.idle_close,
        metadata_copies: d.metadata_copies,
    };
    // SAFETY: the caller's promise; null is refused.
    match unsafe { out.as_mut() } {
        Some(o) => {
            *o = c;
            RAIDCORE_OK
        }
        None => RAIDCORE_E_INVALID,
    }
}

/// Bytes of arena a pool with `*cfg` over `members` member disks (spares not counted) needs,
/// the pool object included; 0 if `cfg` is null or invalid. Independent of disk size.
///
/// # Safety
/// `cfg` is null or points to a `raidcore_config`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_memory_bytes(cfg: *const raidcore_config, members: u32) -> usize {
    // SAFETY: the caller's promise; null is refused.
    let Some(c) = (unsafe { cfg.as_ref() }).and_then(raidcore_config::pool_config) else {
        return 0;
    };
    let mut n = 0;
    guard(|| {
        n = (align_of::<raidcore_pool>() - 1)
            + size_of::<raidcore_pool>()
            + CPool::memory_bytes(&c, members as usize);
        RAIDCORE_OK
    });
    n
}

/// Creates a pool on blank `members` (slot order) with hot `spares`, identified by the 16
/// bytes at `uuid`, in the arena of `arena_len` bytes at `arena`; `*out` receives the handle.
///
/// # Safety
/// `members` / `spares` point to `n_members` / `n_spares` disks (null if 0) whose callbacks
/// and contexts stay valid until shutdown; `cfg` points to a config, `uuid` to 16 bytes,
/// `arena` to `arena_len` writable bytes lent to the pool until shutdown; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_pool_create(
    members: *const raidcore_disk,
    n_members: u32,
    spares: *const raidcore_disk,
    n_spares: u32,
    cfg: *const raidcore_config,
    uuid: *const u8,
    arena: *mut u8,
    arena_len: usize,
    out: *mut *mut raidcore_pool,
) -> i32 {
    // SAFETY: the caller's promises, as documented; nulls are refused.
    unsafe {
        let (Some(ms), Some(sp)) = (disk_list(members, n_members), disk_list(spares, n_spares))
        else {
            return RAIDCORE_E_INVALID;
        };
        let Some(c) = cfg.as_ref().and_then(raidcore_config::pool_config) else {
            return RAIDCORE_E_INVALID;
        };
        if uuid.is_null() || out.is_null() {
            return RAIDCORE_E_INVALID;
        }
        let id: [u8; 16] = *uuid.cast::<[u8; 16]>();
        let Some((obj, mem)) = place(arena, arena_len) else {
            return RAIDCORE_E_MEMORY;
        };
        guard(|| match CPool::create(ms, sp, c, id, mem) {
            Ok(pool) => {
                obj.write(raidcore_pool {
                    pool,
                    busy: false,
                    poisoned: false,
                });
                *out = obj;
                RAIDCORE_OK
            }
            Err(e) => open_code(e),
        })
    }
}

/// Imports a pool from its disks, given in any order (members and spares alike), with the
/// run-time policy of `*cfg` (the fixed settings come from the disks); `*out` receives the
/// handle and, unless `report` is null, `*report` what import found. As
/// `raidcore_pool_import_with` without flags.
///
/// # Safety
/// As for `raidcore_pool_create`; `report` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_pool_import(
    disks: *const raidcore_disk,
    n_disks: u32,
    cfg: *const raidcore_config,
    arena: *mut u8,
    arena_len: usize,
    out: *mut *mut raidcore_pool,
    report: *mut raidcore_import_report,
) -> i32 {
    // SAFETY: the caller's promises, passed on.
    unsafe {
        raidcore_pool_import_with(
            disks,
            n_disks,
            cfg,
            0,
            arena,
            arena_len,
            out,
            report,
            core::ptr::null_mut(),
        )
    }
}

/// `raidcore_pool_import` with `flags` (`RAIDCORE_IMPORT_FORCE`, `RAIDCORE_IMPORT_REWIND`, or
/// 0; other bits are `RAIDCORE_E_INVALID`); unless `forced_slots` is null, `*forced_slots`
/// receives the member slots a forced import took back, bit `i` for slot `i`.
///
/// # Safety
/// As for `raidcore_pool_import`; `forced_slots` is null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe extern "C" fn raidcore_pool_import_with(
    disks: *const raidcore_disk,
    n_disks: u32,
    cfg: *const raidcore_config,
    flags: u32,
    arena: *mut u8,
    arena_len: usize,
    out: *mut *mut raidcore_pool,
    report: *mut raidcore_import_report,
    forced_slots: *mut u32,
) -> i32 {
    // SAFETY: the caller's promises, as documented; nulls are refused.
    unsafe {
        let Some(ds) = disk_list(disks, n_disks) else {
            return RAIDCORE_E_INVALID;
        };
        let Some(c) = cfg.as_ref().and_then(raidcore_config::pool_config) else {
            return RAIDCORE_E_INVALID;
        };
        if out.is_null() || flags & !(RAIDCORE_IMPORT_FORCE | RAIDCORE_IMPORT_REWIND) != 0 {
            return RAIDCORE_E_INVALID;
        }
        let Some((obj, mem)) = place(arena, arena_len) else {
            return RAIDCORE_E_MEMORY;
        };
        let opts = ImportOptions {
            config: c,
            skip_refused: true,
            force: flags & RAIDCORE_IMPORT_FORCE != 0,
            rewind: flags & RAIDCORE_IMPORT_REWIND != 0,
        };
        guard(|| match CPool::import(ds, opts, mem) {
            Ok((pool, rep)) => {
                obj.write(raidcore_pool {
                    pool,
                    busy: false,
                    poisoned: false,
                });
                *out = obj;
                if let Some(r) = report.as_mut() {
                    *r = raidcore_import_report {
                        items_replayed: rep.items_replayed,
                        items_lost: rep.items_lost,
                        missing: rep.missing,
                        refused: rep.refused.len() as u8,
                        behind_slots: slot_bits(&rep.behind),
                        map_pages_lost: rep.map_pages_lost,
                        log_cut_at: rep.log_cut_at.unwrap_or(0),
                        log_cut: u8::from(rep.log_cut_at.is_some()),
                        rewound: u8::from(rep.rewound),
                    };
                }
                if let Some(f) = forced_slots.as_mut() {
                    *f = slot_bits(&rep.forced);
                }
                RAIDCORE_OK
            }
            Err(e) => open_code(e),
        })
    }
}

/// Member slots as a bit mask, bit `i` for slot `i` (slots past 31 are not shown).
fn slot_bits(slots: &[u8]) -> u32 {
    slots
        .iter()
        .filter(|&&s| s < 32)
        .fold(0, |m, &s| m | 1 << s)
}

/// Takes the pool out of its arena (the handle is invalid afterwards).
///
/// # Safety
/// `p` is a live handle that no call is using.
unsafe fn take(p: *mut raidcore_pool) -> Option<raidcore_pool> {
    // SAFETY: the caller's promise; the value is moved out once and the handle dies with it.
    unsafe { (!p.is_null() && !(*p).busy).then(|| p.read()) }
}

/// Flushes and checkpoints, then releases the disks and the arena; the handle is invalid
/// afterwards, whatever the result (an error says the last writes may not be durable).
///
/// # Safety
/// `pool` is a live handle; not called from a disk callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_pool_shutdown(pool: *mut raidcore_pool) -> i32 {
    // SAFETY: the caller's promise.
    let Some(h) = (unsafe { take(pool) }) else {
        return RAIDCORE_E_INVALID;
    };
    if h.poisoned {
        return RAIDCORE_E_PANIC;
    }
    guard(|| match h.pool.shutdown() {
        Ok(_) => RAIDCORE_OK,
        Err(e) => io_code(e),
    })
}

/// Releases the disks and the arena without writing anything (what a power cut leaves; for a
/// faulted pool, or tests). The handle is invalid afterwards.
///
/// # Safety
/// As for `raidcore_pool_shutdown`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_pool_abandon(pool: *mut raidcore_pool) -> i32 {
    // SAFETY: the caller's promise.
    match unsafe { take(pool) } {
        Some(h) => {
            drop(h.pool.into_parts());
            RAIDCORE_OK
        }
        None => RAIDCORE_E_INVALID,
    }
}

/// Creates a LUN named by the NUL-terminated `name` (1 to 24 bytes) of `blocks` 4 KiB blocks
/// (thin: space is used only as written); `*lun` receives its number.
///
/// # Safety
/// `pool` is a live handle, `name` a NUL-terminated string, `lun` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_lun_create(
    pool: *mut raidcore_pool,
    name: *const c_char,
    blocks: u64,
    lun: *mut u16,
) -> i32 {
    if name.is_null() || lun.is_null() {
        return RAIDCORE_E_INVALID;
    }
    // SAFETY: the caller's promises.
    let Ok(name) = (unsafe { CStr::from_ptr(name) }).to_str() else {
        return RAIDCORE_E_LUN;
    };
    // SAFETY: the caller's promise.
    unsafe {
        with_pool(pool, |p| match p.create_lun(name, blocks) {
            Ok(id) => {
                *lun = id;
                RAIDCORE_OK
            }
            Err(e) => lun_code(e),
        })
    }
}

/// Writes `len` bytes (whole 4 KiB blocks) from `data` to `lun` at block `lba`. Done when
/// buffered; with `fua`, durable when it returns.
///
/// # Safety
/// `pool` is a live handle, `data` points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_write(
    pool: *mut raidcore_pool,
    lun: u16,
    lba: u64,
    data: *const u8,
    len: usize,
    fua: bool,
) -> i32 {
    if data.is_null() {
        return RAIDCORE_E_INVALID;
    }
    // SAFETY: the caller's promises.
    unsafe {
        let d = core::slice::from_raw_parts(data, len);
        with_pool(pool, |p| {
            p.write(lun, lba, d, fua).map_or_else(io_code, |()| 0)
        })
    }
}

/// Reads `len` bytes (whole 4 KiB blocks) of `lun` from block `lba` into `buf`: the data last
/// written (zeros where never written or trimmed), or an error, never other data.
///
/// # Safety
/// `pool` is a live handle, `buf` points to `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_read(
    pool: *mut raidcore_pool,
    lun: u16,
    lba: u64,
    buf: *mut u8,
    len: usize,
) -> i32 {
    if buf.is_null() {
        return RAIDCORE_E_INVALID;
    }
    // SAFETY: the caller's promises.
    unsafe {
        let b = core::slice::from_raw_parts_mut(buf, len);
        with_pool(pool, |p| p.read(lun, lba, b).map_or_else(io_code, |()| 0))
    }
}

/// Makes every write acknowledged so far durable.
///
/// # Safety
/// `pool` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_flush(pool: *mut raidcore_pool) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { with_pool(pool, |p| p.flush().map_or_else(io_code, |()| 0)) }
}

/// Resumes a suspended pool once its disks' host storage has room again (or is writable):
/// writes what waits. Returns `RAIDCORE_E_SUSPENDED` while the condition lasts.
///
/// # Safety
/// `pool` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_pool_resume(pool: *mut raidcore_pool) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { with_pool(pool, |p| p.resume().map_or_else(io_code, |()| 0)) }
}

/// Unmaps `blocks` 4 KiB blocks of `lun` from `lba`: they read as zeros, their space is freed
/// (durable after the next flush).
///
/// # Safety
/// `pool` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_trim(
    pool: *mut raidcore_pool,
    lun: u16,
    lba: u64,
    blocks: u64,
) -> i32 {
    // SAFETY: the caller's promise.
    unsafe {
        with_pool(pool, |p| {
            p.trim(lun, lba, blocks).map_or_else(io_code, |()| 0)
        })
    }
}

/// Background work, bounded by `stripes_per_step`: rebuild onto spares, scrub, clean. Call it
/// from the idle loop; `*report` (unless null) says what it did and whether it is idle.
///
/// # Safety
/// `pool` is a live handle, `report` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_maintenance(
    pool: *mut raidcore_pool,
    report: *mut raidcore_maintenance_report,
) -> i32 {
    // SAFETY: the caller's promises.
    unsafe {
        with_pool(pool, |p| match p.maintenance() {
            Ok(MaintenanceReport {
                rebuilt_stripes,
                scrubbed_stripes,
                idle,
                ..
            }) => {
                if let Some(r) = report.as_mut() {
                    *r = raidcore_maintenance_report {
                        rebuilt_stripes,
                        scrubbed_stripes,
                        idle,
                    };
                }
                RAIDCORE_OK
            }
            Err(e) => io_code(e),
        })
    }
}

/// Fails member `slot` by hand; a hot spare takes over if there is one (rebuilt by
/// `raidcore_maintenance`).
///
/// # Safety
/// `pool` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_fail_disk(pool: *mut raidcore_pool, slot: u32) -> i32 {
    // SAFETY: the caller's promise.
    unsafe {
        with_pool(pool, |p| {
            p.fail_disk(slot as usize).map_or_else(admin_code, |()| 0)
        })
    }
}

/// Brings failed member `slot` back with the disk it still holds (failed by hand, or its
/// device answers again): only the stripes written since it left are rebuilt (by
/// `raidcore_maintenance`). `RAIDCORE_E_FAULTED` on a faulted pool; `RAIDCORE_E_INVALID` for a
/// slot out of range, not failed, or whose disk's label is not this member's.
///
/// # Safety
/// `pool` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_online(pool: *mut raidcore_pool, slot: u32) -> i32 {
    // SAFETY: the caller's promise.
    unsafe {
        with_pool(pool, |p| {
            p.online(slot as usize).map_or_else(admin_code, |()| 0)
        })
    }
}

/// Puts the blank `*disk` into failed member slot `slot` and starts rebuilding onto it.
///
/// # Safety
/// `pool` is a live handle; `disk` points to a disk valid until shutdown.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_replace_disk(
    pool: *mut raidcore_pool,
    slot: u32,
    disk: *const raidcore_disk,
) -> i32 {
    // SAFETY: the caller's promises.
    unsafe {
        let Some(d) = disk.as_ref().and_then(CDisk::new) else {
            return RAIDCORE_E_INVALID;
        };
        with_pool(pool, |p| {
            p.replace_disk(slot as usize, d)
                .map_or_else(admin_code, |()| 0)
        })
    }
}

/// Adds the blank `*disk` as a hot spare.
///
/// # Safety
/// `pool` is a live handle; `disk` points to a disk valid until shutdown.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_add_spare(
    pool: *mut raidcore_pool,
    disk: *const raidcore_disk,
) -> i32 {
    // SAFETY: the caller's promises.
    unsafe {
        let Some(d) = disk.as_ref().and_then(CDisk::new) else {
            return RAIDCORE_E_INVALID;
        };
        with_pool(pool, |p| p.add_spare(d).map_or_else(admin_code, |()| 0))
    }
}

/// Removes hot spare `index` (spares are numbered in the order they were given or added, from
/// 0): the configuration is written without it and its superblocks are zeroed, so the disk is
/// blank again. The pool no longer calls its callbacks after this returns.
///
/// Errors: `RAIDCORE_E_INVALID` for an index past the spares, `RAIDCORE_E_FAULTED`, or the
/// I/O error that kept the configuration from being written (the spare stays).
///
/// # Safety
/// `pool` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_remove_spare(pool: *mut raidcore_pool, index: u32) -> i32 {
    // SAFETY: the caller's promises.
    unsafe {
        with_pool(pool, |p| {
            let Some(guid) = p.spare_guids().nth(index as usize) else {
                return RAIDCORE_E_INVALID;
            };
            p.remove_spare(guid).map_or_else(admin_code, |_| 0)
        })
    }
}

/// Fills `*out` with the pool's health, member states and rebuild progress.
///
/// # Safety
/// `pool` is a live handle, `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_pool_status(
    pool: *mut raidcore_pool,
    out: *mut raidcore_status,
) -> i32 {
    // SAFETY: the caller's promises.
    unsafe {
        let Some(o) = out.as_mut() else {
            return RAIDCORE_E_INVALID;
        };
        with_pool(pool, |p| {
            let st = p.status();
            let mut s = raidcore_status {
                health: match st.health {
                    Health::Online => RAIDCORE_HEALTH_ONLINE,
                    Health::Degraded => RAIDCORE_HEALTH_DEGRADED,
                    Health::Faulted => RAIDCORE_HEALTH_FAULTED,
                    Health::Suspended => RAIDCORE_HEALTH_SUSPENDED,
                },
                members: st.disks.len() as u8,
                spares: st.spares,
                rebuilding: st.rebuild.is_some(),
                rebuild_slot: st.rebuild.map_or(0, |r| r.0),
                rebuild_done: st.rebuild.map_or(0, |r| r.1),
                rebuild_total: st.rebuild.map_or(0, |r| r.2),
                member_state: [0; 32],
            };
            for (m, d) in s.member_state.iter_mut().zip(st.disks.iter()) {
                *m = match d.state {
                    _ if !d.present => RAIDCORE_MEMBER_MISSING,
                    DiskState::Online => RAIDCORE_MEMBER_ONLINE,
                    DiskState::Rebuilding => RAIDCORE_MEMBER_REBUILDING,
                    DiskState::Failed => RAIDCORE_MEMBER_FAILED,
                };
            }
            *o = s;
            RAIDCORE_OK
        })
    }
}

/// Tells the pool the time (monotonic, in the unit of `idle_close`).
///
/// # Safety
/// `pool` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raidcore_set_time(pool: *mut raidcore_pool, now: u64) -> i32 {
    // SAFETY: the caller's promise.
    unsafe {
        with_pool(pool, |p| {
            p.set_time(now);
            RAIDCORE_OK
        })
    }
}

/// The name of a `RAIDCORE_*` result code, as a static NUL-terminated string.
#[unsafe(no_mangle)]
pub extern "C" fn raidcore_error_name(code: i32) -> *const c_char {
    let s: &CStr = match code {
        RAIDCORE_OK => c"ok",
        RAIDCORE_E_INVALID => c"invalid argument",
        RAIDCORE_E_MEMORY => c"arena too small",
        RAIDCORE_E_NO_SUCH_LUN => c"no such LUN",
        RAIDCORE_E_OUT_OF_RANGE => c"out of range",
        RAIDCORE_E_MISALIGNED => c"not whole 4 KiB blocks",
        RAIDCORE_E_NO_SPACE => c"pool full",
        RAIDCORE_E_LOST => c"data lost",
        RAIDCORE_E_FAULTED => c"pool faulted",
        RAIDCORE_E_DEVICE => c"device error",
        RAIDCORE_E_CORRUPT => c"metadata damaged",
        RAIDCORE_E_TOO_SMALL => c"configuration too small for the workload",
        RAIDCORE_E_INTERNAL => c"internal error",
        RAIDCORE_E_NO_POOL => c"no usable pool on the disks",
        RAIDCORE_E_TOO_MANY_MISSING => c"too many members missing",
        RAIDCORE_E_BUSY => c"pool busy (call from a disk callback)",
        RAIDCORE_E_PANIC => c"panic caught; pool poisoned",
        RAIDCORE_E_LUN => c"LUN refused",
        RAIDCORE_E_SUSPENDED => c"pool suspended (host storage full or read-only)",
        RAIDCORE_E_REWIND_NEEDED => c"pool opens only as it was earlier (import with rewind)",
        _ => c"unknown code",
    };
    s.as_ptr()
}
