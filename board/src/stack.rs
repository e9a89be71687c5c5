//! Stack painting on Arm Cortex-M: fill the free stack below the current frame with a known
//! word, run something, and find the lowest word it overwrote (the stack's high-water mark).
//! The QEMU self-test measures the pool calls with it; the RP2040 firmware reports its own.

/// The word free stack is painted with.
pub const PAINT: u32 = 0x5AC3_5AC3;
/// Left unpainted below the current stack pointer (the painting code's own frame).
const MARGIN: usize = 256;

/// The current stack pointer.
#[inline]
pub fn sp() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer register only.
    unsafe { core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack)) };
    sp
}

/// Paints the free stack from `low` (rounded up to a word) to just below the current stack
/// pointer; returns the lowest painted address.
///
/// # Safety
/// `low..sp()` is free stack: memory no live object uses (the linker's end of static data or
/// higher).
#[inline(never)]
pub unsafe fn paint(low: usize) -> usize {
    let low = (low + 3) & !3;
    let top = sp().saturating_sub(MARGIN) & !3;
    let mut a = low;
    while a < top {
        // SAFETY: the caller's promise.
        unsafe { (a as *mut u32).write_volatile(PAINT) };
        a += 4;
    }
    low
}

/// The lowest address written since [`paint`] painted down to `low` (the painted region ends
/// below the stack pointer, so the scan stops there at the latest).
///
/// # Safety
/// As for [`paint`], with the same `low` (its return value).
pub unsafe fn lowest_used(low: usize) -> usize {
    let mut a = low;
    let top = sp();
    // SAFETY: the caller's promise; the painted region lies below the current frame.
    while a < top && unsafe { (a as *const u32).read_volatile() } == PAINT {
        a += 4;
    }
    a
}
