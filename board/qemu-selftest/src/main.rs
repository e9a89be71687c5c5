//! raidcore on an emulated Cortex-M4F (QEMU `mps2-an386`): the RAID-6 self-test over disk images
//! that are files on the host, reached through semihosting.
//!
//! The host (`../qemu-selftest.sh`) creates `disk0.img` .. `disk5.img` (members) and
//! `disk6.img` (hot spare) in QEMU's working directory. The image opens them, runs
//! [`raidcore_board::selftest::raid6_rebuild`] (seeded data, P/Q, member 2 fails, rebuild onto
//! the spare, verify every block), prints the result and the cost in instructions, and exits
//! through semihosting with status 0 (passed) or 1 (failed, panicked, or faulted).
//!
//! Cost figures: QEMU runs with `-icount shift=0`, so virtual time advances 1 ns per
//! instruction, and the CMSDK APB timer 0 (25 MHz) ticks once per 40 instructions. Semihosting
//! calls cost only their trap instruction on the guest side.
#![no_std]
#![no_main]

use core::ffi::CStr;
use core::fmt::Write as _;

use cortex_m_rt::{ExceptionFrame, entry, exception};
use cortex_m_semihosting::{debug, hio};
use raidcore_board::selftest::{self, Config, Report};
use raidcore_board::semihosting::{ArmSemihost, SemihostingDisk};
use raidcore_hal::BlockSize;

/// Members (4 data + P + Q) and their image files; the spare is the last file.
const MEMBERS: usize = 6;
const IMAGES: [&CStr; MEMBERS + 1] = [
    c"disk0.img",
    c"disk1.img",
    c"disk2.img",
    c"disk3.img",
    c"disk4.img",
    c"disk5.img",
    c"disk6.img",
];
/// 4 KiB strips of 512-byte blocks.
const STRIP_BLOCKS: u64 = 8;
const STRIP_BYTES: usize = STRIP_BLOCKS as usize * 512;
/// Instructions per tick of the 25 MHz timer under `-icount shift=0` (1 ns per instruction).
const INSTRUCTIONS_PER_TICK: u64 = 40;

/// Caller memory for the self-test: one strip per member plus one for read-back (28 KiB).
static mut WORK: [u8; (MEMBERS + 1) * STRIP_BYTES] = [0; (MEMBERS + 1) * STRIP_BYTES];

/// CMSDK APB timer 0 of the MPS2 FPGA image, a 32-bit down-counter at 25 MHz.
mod timer {
    const BASE: usize = 0x4000_0000;
    const CTRL: *mut u32 = BASE as *mut u32;
    const VALUE: *mut u32 = (BASE + 4) as *mut u32;
    const RELOAD: *mut u32 = (BASE + 8) as *mut u32;

    /// Starts the timer free-running from 0xFFFF_FFFF.
    pub fn start() {
        // SAFETY: the timer's registers on this machine; nothing else uses timer 0.
        unsafe {
            RELOAD.write_volatile(u32::MAX);
            VALUE.write_volatile(u32::MAX);
            CTRL.write_volatile(1);
        }
    }

    /// Ticks since [`start`] (wraps after 2^32 ticks = 171 s of virtual time).
    pub fn ticks() -> u64 {
        // SAFETY: reading the counter register has no side effect.
        u64::from(u32::MAX - unsafe { VALUE.read_volatile() })
    }
}

fn out() -> hio::HostStream {
    match hio::hstdout() {
        Ok(s) => s,
        Err(()) => fail(),
    }
}

fn fail() -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::bkpt();
    }
}

/// Opens the member images and the spare (their size comes from the files).
fn open_disks() -> [SemihostingDisk<ArmSemihost>; MEMBERS + 1] {
    let mut o = out();
    IMAGES.map(
        |path| match SemihostingDisk::open(ArmSemihost, path, BlockSize::B512) {
            Ok(d) => d,
            Err(e) => {
                let _ = writeln!(o, "cannot open {}: {e}", path.to_str().unwrap_or("?"));
                fail()
            }
        },
    )
}

/// The self-test body. The pool-level test (create a RAID-6 pool on the six images, write from
/// the seed, fail member 2, rebuild onto the spare, verify every block) replaces this call when
/// `raidcore::pool` lands; it takes the same disks, seed and clock and returns a `Report`.
fn run(disks: [SemihostingDisk<ArmSemihost>; MEMBERS + 1], cfg: &Config) -> Result<Report, ()> {
    let [d0, d1, d2, d3, d4, d5, mut spare] = disks;
    let mut members = [d0, d1, d2, d3, d4, d5];
    // SAFETY: `run` is called once, from `main`, with interrupts unused: the only reference.
    let work = unsafe { &mut *core::ptr::addr_of_mut!(WORK) };
    let mut clock = timer::ticks;
    match selftest::raid6_rebuild(&mut members, &mut spare, cfg, work, &mut clock) {
        Ok(r) => Ok(r),
        Err(e) => {
            let _ = writeln!(out(), "self-test FAILED: {e:?}");
            Err(())
        }
    }
}

/// Arena of the pool-level self-test.
const POOL_ARENA: usize = 1024 * 1024;
static mut ARENA: [u8; POOL_ARENA] = [0; POOL_ARENA];

/// The pool-level self-test (`arg=pool`): a RAID-6 pool on the six images with the seventh as
/// hot spare, every 4 KiB block of a LUN written from a seed, member 2 failed, rebuilt onto the
/// spare by maintenance steps, every block read back.
fn run_pool(disks: [SemihostingDisk<ArmSemihost>; MEMBERS + 1]) -> ! {
    let mut o = out();
    let [d0, d1, d2, d3, d4, d5, spare] = disks;
    let needed = selftest::pool_memory_bytes(MEMBERS);
    // SAFETY: the only reference to ARENA, taken once.
    let arena = unsafe { &mut *core::ptr::addr_of_mut!(ARENA) };
    let Some(mem) = arena.get_mut(..needed) else {
        let _ = writeln!(o, "pool arena too small: {needed} bytes needed");
        fail()
    };
    let cfg = selftest::PoolConfig {
        seed: 0x5241_4944_434F_5245,
        lun_blocks: 1024,
        failed: 2,
    };
    let _ = writeln!(
        o,
        "raidcore pool self-test on Cortex-M4F: RAID-6 pool on {MEMBERS} images + 1 spare, {} KiB arena, \
         {} LUN blocks of 4 KiB, member {} fails",
        needed / 1024,
        cfg.lun_blocks,
        cfg.failed
    );
    let mut clock = timer::ticks;
    match selftest::pool_raid6_rebuild([d0, d1, d2, d3, d4, d5], spare, &cfg, mem, &mut clock) {
        Ok(r) => {
            let _ = writeln!(
                o,
                "pool self-test PASSED: {} client bytes written ({} bytes to members), {} stripes rebuilt ({} bytes), {} blocks verified",
                r.data_bytes, r.bytes_written, r.stripes, r.bytes_rebuilt, r.blocks_verified
            );
            let _ = writeln!(
                o,
                "instructions per 4 KiB written through the pool (write + flush): {}; per 4 KiB rebuilt: {}",
                per_4k(r.ticks_write, r.data_bytes),
                per_4k(r.ticks_rebuild, r.bytes_rebuilt)
            );
            debug::exit(debug::EXIT_SUCCESS);
            fail()
        }
        Err(e) => {
            let _ = writeln!(o, "pool self-test FAILED: {e:?}");
            fail()
        }
    }
}

/// Instructions per 4 KiB of `bytes` over `ticks`.
fn per_4k(ticks: u64, bytes: u64) -> u64 {
    if bytes == 0 {
        0
    } else {
        ticks * INSTRUCTIONS_PER_TICK * 4096 / bytes
    }
}

/// The command line QEMU passes (`-semihosting-config arg=...`, read with `SYS_GET_CMDLINE`),
/// or "".
fn cmdline(buf: &mut [u8; 64]) -> &str {
    let mut block = [buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: the host writes at most `block[1]` bytes into `buf` and the length back into
    // `block[1]`; both live across the call.
    let r =
        unsafe { cortex_m_semihosting::syscall(cortex_m_semihosting::nr::GET_CMDLINE, &mut block) };
    let len = if r == 0 { block[1].min(buf.len()) } else { 0 };
    core::str::from_utf8(buf.get(..len).unwrap_or(&[])).unwrap_or("")
}

/// Timer ticks for a loop of exactly `2 * n` instructions (`subs` + `bne` per turn), to check
/// the instructions-per-tick figure.
fn calibrate(n: u32) -> u64 {
    let t = timer::ticks();
    // SAFETY: a register-only countdown loop.
    unsafe {
        core::arch::asm!("1:", "subs {0}, #1", "bne 1b", inout(reg) n => _, options(nomem, nostack));
    }
    timer::ticks() - t
}

#[entry]
fn main() -> ! {
    timer::start();
    let mut o = out();
    // Failure modes, so the runner can prove that a panic or a fault ends QEMU with status 1
    // instead of hanging it.
    let mut args = [0u8; 64];
    // `-semihosting-config ...,arg=raidcore,arg=MODE`: the mode is the second word.
    let mode = cmdline(&mut args).split_whitespace().nth(1).unwrap_or("");
    match mode {
        "panic" => panic!("deliberate panic (failure-path check)"),
        "fault" => {
            // SAFETY: deliberately reads unmapped memory to raise a fault.
            let v = unsafe { core::ptr::read_volatile(0xF000_0000 as *const u32) };
            let _ = writeln!(o, "read {v} from unmapped memory: no fault raised");
            fail()
        }
        _ => {}
    }
    let ticks = calibrate(1_000_000);
    let _ = writeln!(
        o,
        "calibration: 2000000 instructions = {ticks} timer ticks ({} per tick)",
        2_000_000 / ticks.max(1)
    );
    let disks = open_disks();
    if mode == "pool" {
        run_pool(disks)
    }
    let blocks = disks
        .iter()
        .map(raidcore_hal::BlockDevice::block_count)
        .min()
        .unwrap_or(0);
    let stripes = blocks / STRIP_BLOCKS;
    let cfg = Config {
        seed: 0x5241_4944_434F_5245,
        stripes,
        strip_blocks: STRIP_BLOCKS,
        failed: 2,
    };
    let _ = writeln!(
        o,
        "raidcore self-test on Cortex-M4F (QEMU mps2-an386): {MEMBERS} members + 1 spare, \
         {stripes} stripes, {STRIP_BYTES}-byte strips, member {} fails",
        cfg.failed
    );
    let Ok(r) = run(disks, &cfg) else { fail() };
    let _ = writeln!(
        o,
        "self-test PASSED: {} data bytes written ({} with parity), {} bytes rebuilt, {} blocks verified",
        r.data_bytes, r.bytes_written, r.bytes_rebuilt, r.blocks_verified
    );
    let _ = writeln!(
        o,
        "instructions per 4 KiB of data written: P/Q generation {}, whole write path {}",
        per_4k(r.ticks_gen_pq, r.data_bytes),
        per_4k(r.ticks_write, r.data_bytes)
    );
    let _ = writeln!(
        o,
        "instructions per 4 KiB rebuilt: reconstruction {}, whole rebuild path {}",
        per_4k(r.ticks_reconstruct, r.bytes_rebuilt),
        per_4k(r.ticks_rebuild, r.bytes_rebuilt)
    );
    debug::exit(debug::EXIT_SUCCESS);
    loop {
        cortex_m::asm::bkpt();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    if let Ok(mut e) = hio::hstderr() {
        let _ = writeln!(e, "panic: {info}");
    }
    fail()
}

#[exception]
unsafe fn HardFault(frame: &ExceptionFrame) -> ! {
    if let Ok(mut e) = hio::hstderr() {
        let _ = writeln!(e, "HardFault at pc={:#010x}", frame.pc());
    }
    fail()
}
