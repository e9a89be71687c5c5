//! The C ABI's contracts from Rust: null pointers and bad configurations are refused with
//! codes, and a disk callback that calls back into its own pool gets `RAIDCORE_E_BUSY`.
// FFI calls as C makes them: references passed where the ABI takes pointers.
#![allow(clippy::borrow_as_ptr, clippy::ref_as_ptr)]

use core::ffi::c_void;
use core::ptr::{null, null_mut};
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use raidcore_capi::*;

const BLOCKS: u64 = 4096; // 2 MiB of 512-byte blocks

/// The pool whose callbacks try to re-enter it, and what that call returned.
static POOL: AtomicPtr<raidcore_pool> = AtomicPtr::new(null_mut());
static REENTRY: AtomicI32 = AtomicI32::new(1);

unsafe extern "C" fn read(ctx: *mut c_void, lba: u64, buf: *mut u8, n: u32, _: *mut u64) -> i32 {
    // SAFETY: `ctx` is the Vec this test gave, `buf` holds `n` blocks.
    unsafe {
        let d = &*ctx.cast::<Vec<u8>>();
        buf.copy_from(d.as_ptr().add(lba as usize * 512), n as usize * 512);
    }
    RAIDCORE_DISK_OK
}

unsafe extern "C" fn write(ctx: *mut c_void, lba: u64, buf: *const u8, n: u32, _: *mut u64) -> i32 {
    // SAFETY: as in `read`.
    unsafe {
        let d = &mut *ctx.cast::<Vec<u8>>();
        d.as_mut_ptr()
            .add(lba as usize * 512)
            .copy_from(buf, n as usize * 512);
    }
    RAIDCORE_DISK_OK
}

unsafe extern "C" fn flush(_: *mut c_void) -> i32 {
    let p = POOL.load(Ordering::SeqCst);
    if !p.is_null() {
        // SAFETY: a live handle; the call must be refused without touching the pool.
        REENTRY.store(unsafe { raidcore_flush(p) }, Ordering::SeqCst);
    }
    RAIDCORE_DISK_OK
}

fn config() -> raidcore_config {
    let mut c = core::mem::MaybeUninit::<raidcore_config>::uninit();
    // SAFETY: a writable config.
    assert_eq!(
        unsafe { raidcore_config_default(c.as_mut_ptr()) },
        RAIDCORE_OK
    );
    // SAFETY: filled in above.
    let mut c = unsafe { c.assume_init() };
    c.strip_bytes = 4096;
    c.max_extent_blocks = 4;
    c.zil_slots = 16;
    c.segment_stripes = 4;
    c.max_segments = 128;
    c
}

/// The C descriptions of the in-memory `disks` (512-byte blocks), with flush callback
/// `flush`.
fn disk_ops(disks: &mut [Vec<u8>], flush: raidcore_flush_fn) -> Vec<raidcore_disk> {
    disks
        .iter_mut()
        .map(|d| raidcore_disk {
            ctx: (d as *mut Vec<u8>).cast(),
            block_size: 512,
            block_count: (d.len() / 512) as u64,
            read: Some(read),
            write: Some(write),
            flush,
        })
        .collect()
}

/// A new pool of the first `members` disks of `ops` (the rest are hot spares), in `arena`
/// (sized here).
///
/// # Safety
/// `ops`' contexts and `arena` outlive the pool.
unsafe fn create(
    ops: &[raidcore_disk],
    members: u32,
    cfg: &raidcore_config,
    arena: &mut Vec<u8>,
) -> *mut raidcore_pool {
    let (m, sp) = ops.split_at(members as usize);
    let spares = if sp.is_empty() { null() } else { sp.as_ptr() };
    let uuid = *b"raidcore-abi-tst";
    let mut pool = null_mut();
    // SAFETY: valid config, disks, arena and out pointers (the caller's promise).
    unsafe {
        *arena = vec![0u8; raidcore_memory_bytes(cfg, ops.len() as u32)];
        assert_eq!(
            raidcore_pool_create(
                m.as_ptr(),
                members,
                spares,
                sp.len() as u32,
                cfg,
                uuid.as_ptr(),
                arena.as_mut_ptr(),
                arena.len(),
                &mut pool
            ),
            RAIDCORE_OK
        );
    }
    pool
}

/// A new LUN "t" of `blocks` 4 KiB blocks.
///
/// # Safety
/// `pool` is a live handle.
unsafe fn new_lun(pool: *mut raidcore_pool, blocks: u64) -> u16 {
    let mut lun = 0u16;
    // SAFETY: the caller's promise; the name is NUL-terminated and `lun` writable.
    let code = unsafe { raidcore_lun_create(pool, c"t".as_ptr(), blocks, &mut lun) };
    assert_eq!(code, RAIDCORE_OK);
    lun
}

#[test]
fn null_pointers_and_bad_settings_are_refused() {
    let mut cfg = config();
    // SAFETY: every pointer is null or valid.
    unsafe {
        assert_eq!(raidcore_config_default(null_mut()), RAIDCORE_E_INVALID);
        assert_eq!(raidcore_memory_bytes(null(), 6), 0);
        assert_eq!(raidcore_flush(null_mut()), RAIDCORE_E_INVALID);
        cfg.level = 7;
        assert_eq!(raidcore_memory_bytes(&cfg, 6), 0);
        let mut out = null_mut();
        let mut arena = vec![0u8; 1 << 20];
        let uuid = [1u8; 16];
        assert_eq!(
            raidcore_pool_create(
                null(),
                6,
                null(),
                0,
                &config(),
                uuid.as_ptr(),
                arena.as_mut_ptr(),
                arena.len(),
                &mut out
            ),
            RAIDCORE_E_INVALID
        );
        let name = raidcore_error_name(RAIDCORE_E_BUSY);
        assert!(
            core::ffi::CStr::from_ptr(name)
                .to_str()
                .unwrap()
                .contains("busy")
        );
    }
}

#[test]
fn a_callback_calling_its_own_pool_is_refused_with_busy() {
    let cfg = config();
    let mut disks: Vec<Vec<u8>> = (0..6).map(|_| vec![0u8; BLOCKS as usize * 512]).collect();
    let ops = disk_ops(&mut disks, Some(flush));
    let mut arena = Vec::new();
    // SAFETY: valid config, disks, arena and out pointers; all outlive the pool.
    unsafe {
        let pool = create(&ops, 6, &cfg, &mut arena);
        let lun = new_lun(pool, 64);
        let block = [0x5Au8; 4096];
        assert_eq!(
            raidcore_write(pool, lun, 3, block.as_ptr(), block.len(), false),
            RAIDCORE_OK
        );
        POOL.store(pool, Ordering::SeqCst);
        assert_eq!(raidcore_flush(pool), RAIDCORE_OK);
        POOL.store(null_mut(), Ordering::SeqCst);
        assert_eq!(REENTRY.load(Ordering::SeqCst), RAIDCORE_E_BUSY);
        // The pool is unharmed.
        let mut back = [0u8; 4096];
        assert_eq!(
            raidcore_read(pool, lun, 3, back.as_mut_ptr(), back.len()),
            RAIDCORE_OK
        );
        assert_eq!(back, block);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
    }
}

/// A flush that does nothing more (the re-entering `flush` belongs to the test above, whose
/// statics a second pool must not touch).
unsafe extern "C" fn flush_only(_: *mut c_void) -> i32 {
    RAIDCORE_DISK_OK
}

#[test]
fn a_removed_spare_is_blank_and_out_of_the_pool() {
    let cfg = config();
    let mut disks: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; BLOCKS as usize * 512]).collect();
    let ops = disk_ops(&mut disks, Some(flush_only));
    let mut arena = Vec::new();
    // SAFETY: valid config, disks, arena and out pointers; all outlive the pool.
    unsafe {
        let pool = create(&ops, 6, &cfg, &mut arena);
        assert_eq!(raidcore_remove_spare(pool, 2), RAIDCORE_E_INVALID);
        assert_eq!(raidcore_remove_spare(pool, 1), RAIDCORE_OK);
        let mut st = core::mem::MaybeUninit::<raidcore_status>::uninit();
        assert_eq!(raidcore_pool_status(pool, st.as_mut_ptr()), RAIDCORE_OK);
        assert_eq!(st.assume_init().spares, 1);
        assert_eq!(raidcore_remove_spare(pool, 1), RAIDCORE_E_INVALID);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
    }
    // The second spare held only its superblocks, now zeroed; the first still has its own.
    assert!(
        disks[7].iter().all(|&b| b == 0),
        "the removed spare is blank"
    );
    assert!(
        disks[6].iter().any(|&b| b != 0),
        "the other spare kept its superblocks"
    );
}

/// RAID-5 with member 1 failed by hand, then member 3 gone: a plain import is refused, an
/// unknown flag too, and `RAIDCORE_IMPORT_FORCE` takes member 1 back and says so.
#[test]
fn a_forced_import_takes_a_failed_member_back() {
    let mut cfg = config();
    cfg.level = RAIDCORE_RAID5;
    let mut disks: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; BLOCKS as usize * 512]).collect();
    let mut arena = Vec::new();
    // SAFETY: valid config, disks, arena and out pointers; all outlive the pools.
    unsafe {
        let ops = disk_ops(&mut disks, Some(flush_only));
        let pool = create(&ops, 4, &cfg, &mut arena);
        assert_eq!(raidcore_fail_disk(pool, 1), RAIDCORE_OK);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
        let given = [ops[0], ops[2], ops[1]];
        let mut forced = 0u32;
        let mut import =
            |flags: u32| import_with(&given, &cfg, flags, &mut arena, null_mut(), &mut forced);
        assert_eq!(import(0).0, RAIDCORE_E_TOO_MANY_MISSING);
        assert_eq!(import(4).0, RAIDCORE_E_INVALID);
        let (code, pool) = import(RAIDCORE_IMPORT_FORCE);
        assert_eq!(code, RAIDCORE_OK);
        assert_eq!(forced, 1 << 1);
        let mut st = core::mem::MaybeUninit::<raidcore_status>::uninit();
        assert_eq!(raidcore_pool_status(pool, st.as_mut_ptr()), RAIDCORE_OK);
        let st = st.assume_init();
        assert_eq!(st.health, RAIDCORE_HEALTH_DEGRADED);
        assert_eq!(st.member_state[1], RAIDCORE_MEMBER_ONLINE);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
    }
}

/// `raidcore_pool_import_with` of the disks `ops` with `flags`, into `arena`: the code and
/// the handle (null on failure).
///
/// # Safety
/// `ops`' contexts and `arena` outlive the pool; `report` and `forced` are null or writable.
unsafe fn import_with(
    ops: &[raidcore_disk],
    cfg: &raidcore_config,
    flags: u32,
    arena: &mut [u8],
    report: *mut raidcore_import_report,
    forced: *mut u32,
) -> (i32, *mut raidcore_pool) {
    let mut pool = null_mut();
    // SAFETY: the caller's promises; `pool` is writable.
    let code = unsafe {
        raidcore_pool_import_with(
            ops.as_ptr(),
            ops.len() as u32,
            cfg,
            flags,
            arena.as_mut_ptr(),
            arena.len(),
            &mut pool,
            report,
            forced,
        )
    };
    (code, pool)
}

/// Imports the pool of `ops` with no flags; `*report` receives what import found.
///
/// # Safety
/// As for [`import_with`].
unsafe fn import(
    ops: &[raidcore_disk],
    cfg: &raidcore_config,
    arena: &mut [u8],
    report: &mut raidcore_import_report,
) -> *mut raidcore_pool {
    // SAFETY: the caller's promises.
    let (code, pool) = unsafe { import_with(ops, cfg, 0, arena, report, null_mut()) };
    assert_eq!(code, RAIDCORE_OK);
    pool
}

/// RAID-5: an older copy of member 2's image put back after two more checkpoints is reported in
/// `behind_slots`, resynced by maintenance, and then serves with member 0 failed.
#[test]
fn an_older_copy_put_back_is_reported_behind_and_resynced() {
    let mut cfg = config();
    cfg.level = RAIDCORE_RAID5;
    let mut disks: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; BLOCKS as usize * 512]).collect();
    let ops = disk_ops(&mut disks, Some(flush_only));
    let mut arena = Vec::new();
    let mut rep = raidcore_import_report::default();
    let fill = |salt: u8, lba: u64| [salt ^ lba as u8; 4096];
    // SAFETY: valid config, disks, arena and out pointers; all outlive the pools. The copy is
    // taken and put back while no pool holds the disks.
    unsafe {
        let pool = create(&ops, 4, &cfg, &mut arena);
        let lun = new_lun(pool, 64);
        let write = |pool, lo: u64, hi: u64, salt: u8| {
            for lba in lo..hi {
                let b = fill(salt, lba);
                assert_eq!(
                    raidcore_write(pool, lun, lba, b.as_ptr(), b.len(), false),
                    RAIDCORE_OK
                );
            }
        };
        write(pool, 0, 64, 1);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
        let old = (*ops[2].ctx.cast::<Vec<u8>>()).clone();
        let pool = import(&ops, &cfg, &mut arena, &mut rep);
        assert_eq!(rep.behind_slots, 0, "a clean restart: {rep:?}");
        write(pool, 0, 16, 2);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
        let pool = import(&ops, &cfg, &mut arena, &mut rep);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
        (*ops[2].ctx.cast::<Vec<u8>>()).copy_from_slice(&old);
        let pool = import(&ops, &cfg, &mut arena, &mut rep);
        assert_eq!(rep.behind_slots, 1 << 2, "{rep:?}");
        let mut m = raidcore_maintenance_report::default();
        for _ in 0..1000 {
            assert_eq!(raidcore_maintenance(pool, &mut m), RAIDCORE_OK);
            if m.idle {
                break;
            }
        }
        assert!(m.idle, "maintenance went idle");
        assert_eq!(raidcore_fail_disk(pool, 0), RAIDCORE_OK);
        let mut back = [0u8; 4096];
        for lba in 0..64 {
            assert_eq!(
                raidcore_read(pool, lun, lba, back.as_mut_ptr(), back.len()),
                RAIDCORE_OK
            );
            let salt = if lba < 16 { 2 } else { 1 };
            assert!(
                back == fill(salt, lba),
                "block {lba} reads what was written last"
            );
        }
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
    }
}

/// RAID-1: member 0 failed by hand and left, the pool wrote on, then member 1 is gone. A forced
/// import of member 0 alone would serve it as it left: refused with `RAIDCORE_E_REWIND_NEEDED`,
/// opened with `RAIDCORE_IMPORT_REWIND`, reading what member 0 held, and the report says it was
/// rewound.
#[test]
fn a_forced_import_of_a_member_taken_back_alone_needs_a_rewind() {
    let mut cfg = config();
    cfg.level = RAIDCORE_RAID1;
    // Big enough for the segments a mirror of two needs.
    let mut disks: Vec<Vec<u8>> = (0..2).map(|_| vec![0u8; 16 << 20]).collect();
    let ops = disk_ops(&mut disks, Some(flush_only));
    let mut arena = Vec::new();
    // SAFETY: valid config, disks, arena and out pointers; all outlive the pools.
    unsafe {
        let pool = create(&ops, 2, &cfg, &mut arena);
        let lun = new_lun(pool, 8);
        let write = |pool, b: &[u8; 4096]| {
            let code = raidcore_write(pool, lun, 0, b.as_ptr(), b.len(), true);
            assert_eq!(code, RAIDCORE_OK);
        };
        write(pool, &[1; 4096]);
        assert_eq!(raidcore_fail_disk(pool, 0), RAIDCORE_OK);
        write(pool, &[2; 4096]);
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
        let mut rep = raidcore_import_report::default();
        let mut import =
            |flags: u32| import_with(&ops[..1], &cfg, flags, &mut arena, &mut rep, null_mut());
        assert_eq!(import(RAIDCORE_IMPORT_FORCE).0, RAIDCORE_E_REWIND_NEEDED);
        let name = core::ffi::CStr::from_ptr(raidcore_error_name(RAIDCORE_E_REWIND_NEEDED));
        assert!(name.to_str().unwrap().contains("rewind"), "{name:?}");
        let both = RAIDCORE_IMPORT_FORCE | RAIDCORE_IMPORT_REWIND;
        let (code, pool) = import(both);
        assert_eq!(code, RAIDCORE_OK);
        let mut back = [0u8; 4096];
        assert_eq!(
            raidcore_read(pool, lun, 0, back.as_mut_ptr(), back.len()),
            RAIDCORE_OK
        );
        assert!(back == [1; 4096], "as member 0 left it");
        assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
        assert_eq!(
            (rep.rewound, rep.log_cut, rep.map_pages_lost),
            (1, 0, 0),
            "{rep:?}"
        );
    }
}

/// The default config keeps two metadata copies; a count other than 1 or 2 is refused at
/// create, and one copy is taken.
#[test]
fn metadata_copies_are_chosen_in_the_config() {
    let mut cfg = config();
    assert_eq!(cfg.metadata_copies, 2);
    cfg.level = RAIDCORE_RAID5;
    let mut disks: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; BLOCKS as usize * 512]).collect();
    let ops = disk_ops(&mut disks, Some(flush_only));
    let uuid = *b"raidcore-abi-tst";
    for (copies, want) in [
        (3u8, RAIDCORE_E_INVALID),
        (0, RAIDCORE_E_INVALID),
        (1, RAIDCORE_OK),
    ] {
        cfg.metadata_copies = copies;
        let mut pool = null_mut();
        // SAFETY: valid config, disks, arena and out pointers; all outlive the pool.
        unsafe {
            let mut arena = vec![0u8; raidcore_memory_bytes(&cfg, 4)];
            let code = raidcore_pool_create(
                ops.as_ptr(),
                4,
                null(),
                0,
                &cfg,
                uuid.as_ptr(),
                arena.as_mut_ptr(),
                arena.len(),
                &mut pool,
            );
            assert_eq!(code, want, "{copies} copies");
            if code == RAIDCORE_OK {
                assert_eq!(raidcore_pool_shutdown(pool), RAIDCORE_OK);
            }
        }
    }
}
