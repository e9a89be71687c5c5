//! Deliberate bugs for the fault campaign's "test the test" runs (feature `mutate` only; never
//! in a default build). A mutation is switched on at run time, so one binary checks them all.

use core::sync::atomic::{AtomicU8, Ordering};

/// A deliberate bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutation {
    /// No bug.
    None = 0,
    /// A reconstruction flips one byte of what it returns.
    ReconFlip = 1,
    /// A flush returns before the data is durable (skips the intent log).
    EarlyFlush = 2,
    /// A rebuild skips a stripe.
    RebuildSkip = 3,
    /// A lost extent's blocks go on the loss list even where they were rewritten since.
    LossOverDeclared = 4,
}

static ACTIVE: AtomicU8 = AtomicU8::new(0);

/// Turns a mutation on (or off with [`Mutation::None`]) for the whole process.
pub fn set(m: Mutation) {
    ACTIVE.store(m as u8, Ordering::Relaxed);
}

/// Whether `m` is on.
pub fn active(m: Mutation) -> bool {
    m != Mutation::None && ACTIVE.load(Ordering::Relaxed) == m as u8
}
