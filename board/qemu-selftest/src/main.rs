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
use raidcore_board::{pico, stack};
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

/// Arena of the pool-level self-test: the RP2040 firmware's configuration
/// (`raidcore_board::pico`).
static mut ARENA: [u8; pico::ARENA_BYTES] = [0; pico::ARENA_BYTES];

/// Painted below the stack pointer before the pool self-test (QEMU's 4 MiB of RAM holds it far
/// above the image's static data).
const STACK_DEPTH: usize = 192 * 1024;

/// The pool-level self-test (`arg=pool`): a RAID-6 pool in the RP2040 firmware's
/// configuration on the first four images with the seventh as hot spare, every 4 KiB block of a LUN
/// written from a seed (a flush every 64), a power cut and an import, member 2 failed and
/// rebuilt onto the spare by maintenance steps, a scrub, every block read back. Prints the
/// stack high-water mark of each phase and the worst instruction counts of single calls.
fn run_pool(
    disks: [SemihostingDisk<ArmSemihost>; MEMBERS + 1],
    lun_blocks: u64,
    write_only: bool,
) -> ! {
    let mut o = out();
    // The firmware's four members (images 0-3) and the last image as its spare.
    let [d0, d1, d2, d3, _, _, spare] = disks;
    let needed = selftest::pool_memory_bytes(pico::MEMBERS);
    // SAFETY: the only reference to ARENA, taken once.
    let arena = unsafe { &mut *core::ptr::addr_of_mut!(ARENA) };
    let Some(mem) = arena.get_mut(..needed) else {
        let _ = writeln!(o, "pool arena too small: {needed} bytes needed");
        fail()
    };
    let cfg = selftest::PoolConfig {
        seed: 0x5241_4944_434F_5245,
        lun_blocks,
        failed: 2,
        flush_every: 64,
    };
    let pool_value =
        core::mem::size_of::<pico::PicoPool<SemihostingDisk<ArmSemihost>, &'static mut [u8]>>();
    let _ = writeln!(
        o,
        "raidcore pool self-test on Cortex-M4F: RAID-6 pool on {} images + 1 spare, \
         RP2040 configuration (4 KiB strips, 8 KiB extents, LZ4 on, 4 map pages, 1 stream), \
         arena {needed} bytes (Pool::memory_bytes), Pool value {pool_value} bytes, \
         {} LUN blocks of 4 KiB, a flush every {}, member {} fails",
        pico::MEMBERS,
        cfg.lun_blocks,
        cfg.flush_every,
        cfg.failed
    );
    let mut clock = timer::ticks;
    // Stack: measured from the stack pointer here, the caller of the self-test.
    let entry = stack::sp();
    let region = entry - STACK_DEPTH;
    // SAFETY: the 192 KiB below this frame are free stack (see STACK_DEPTH).
    let mut low = unsafe { stack::paint(region) };
    let mut peaks = [(selftest::Phase::Create, 0usize); 6];
    let mut n = 0;
    let mut frame = 0;
    let mut probe = |phase| {
        if write_only && phase == selftest::Phase::Write {
            debug::exit(debug::EXIT_SUCCESS);
        }
        // SAFETY: `low` came from `paint` and the region is still free stack.
        let used = entry - unsafe { stack::lowest_used(low) };
        frame = frame.max(entry - stack::sp());
        if let Some(p) = peaks.get_mut(n) {
            *p = (phase, used);
        }
        n += 1;
        // SAFETY: as above; this frame lies above the region.
        low = unsafe { stack::paint(region) };
    };
    let res =
        selftest::pool_raid6_rebuild([d0, d1, d2, d3], spare, &cfg, mem, &mut clock, &mut probe);
    let r = match res {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(o, "pool self-test FAILED: {e:?}");
            fail()
        }
    };
    let _ = writeln!(
        o,
        "pool self-test PASSED: {} client bytes written ({} stored after LZ4), {} stripes rebuilt ({} bytes), {} scrubbed, {} blocks verified",
        r.data_bytes,
        r.bytes_stored,
        r.stripes_rebuilt,
        r.bytes_rebuilt,
        r.stripes_scrubbed,
        r.blocks_verified
    );
    let _ = write!(
        o,
        "stack high-water mark, bytes below the self-test's caller:"
    );
    for (phase, used) in peaks.iter().take(n) {
        let _ = write!(o, " {phase:?} {used},");
    }
    let _ = writeln!(
        o,
        " of which the self-test's frame (it holds the pool value) {frame}"
    );
    let _ = write!(
        o,
        "stack of the pool calls alone (high-water mark less that frame):"
    );
    for (phase, used) in peaks.iter().take(n) {
        let _ = write!(o, " {phase:?} {},", used.saturating_sub(frame));
    }
    let _ = writeln!(o);
    let i = |ticks: u64| ticks * INSTRUCTIONS_PER_TICK;
    let _ = writeln!(
        o,
        "instructions per 4 KiB written through the pool (write + flush): {}",
        per_4k(r.ticks_write, r.data_bytes)
    );
    let _ = writeln!(
        o,
        "instructions, worst single call: write {}, flush {} (of {}), read {}, import {} ({} log items replayed), rebuild step {} (of {}, 1 stripe each), scrub step {}; create {}",
        i(r.ticks_write_max),
        i(r.ticks_flush_max),
        r.flushes,
        i(r.ticks_read_max),
        i(r.ticks_import),
        r.items_replayed,
        i(r.ticks_rebuild_step_max),
        r.rebuild_steps,
        i(r.ticks_scrub_step_max),
        i(r.ticks_create)
    );
    let _ = writeln!(
        o,
        "instructions per 4 KiB rebuilt: {}",
        per_4k(r.ticks_rebuild, r.bytes_rebuilt)
    );
    debug::exit(debug::EXIT_SUCCESS);
    fail()
}

/// Instructions per 4 KiB of `bytes` over `ticks`.
fn per_4k(ticks: u64, bytes: u64) -> u64 {
    (ticks * INSTRUCTIONS_PER_TICK * 4096)
        .checked_div(bytes)
        .unwrap_or(0)
}

/// The command line QEMU passes (`-semihosting-config arg=...`, read with `SYS_GET_CMDLINE`),
/// or "".
fn cmdline(buf: &mut [u8; 64]) -> &str {
    let mut block = [buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: the host writes at most `block[1]` bytes into `buf` and the length back into
    // `block[1]`; both live across the call.
    // The host writes the length back into `block`: it is passed mutably on purpose.
    #[allow(clippy::unnecessary_mut_passed)]
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
    match mode {
        "pool" => run_pool(disks, 1024, false),
        // Create and 128 block writes only, then exit: for instruction profiles of the write
        // path (`-d in_asm,exec,nochain`; board/README.md).
        "pool-write" => run_pool(disks, 128, true),
        _ => {}
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
