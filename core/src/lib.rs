//! # raidcore: the engine
//!
//! A `no_std`, heap-free block-storage controller core: RAID-0/1/10/5/6 geometry and parity,
//! recovery of every failure set a level tolerates, and (in later modules) a log-structured,
//! compressing volume layer. See `ARCHITECTURE.md` for the layering and the invariants.
//!
//! Modules, bottom up:
//! - [`gf256`]: GF(2^8) arithmetic (polynomial 0x11d), tables built at compile time.
//! - [`parity`]: P/Q generation and every RAID-5/RAID-6 recovery case.
//! - [`raid`]: geometry (stripes, strips, rotating parity) and the array over `BlockDevice`s.
#![no_std]
#![deny(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

#[cfg(any(feature = "std", test))]
extern crate std;

// Declared first so every module sees the logging macros.
#[macro_use]
mod fmt;

pub mod checksum;
pub mod error;
pub mod event;
/// The on-disk format: not API for integrators (the pool re-exports the types its API uses);
/// public to the simulator, tests and fuzz targets with the private feature `_test`.
#[cfg(any(feature = "_test", test))]
pub mod format;
#[cfg(not(any(feature = "_test", test)))]
pub(crate) mod format;
pub mod gf256;
pub mod parity;
pub mod raid;

pub(crate) mod log;
#[cfg(feature = "_mutate")]
pub mod mutate;
pub mod pool;
pub(crate) mod volume;
/// The map cache's model-based check, for its fuzz target and the cross-crate tests.
#[cfg(all(feature = "_test", feature = "std"))]
pub use volume::map_fuzz;
#[cfg(test)]
mod seeded;
