//! # raidcore: the engine
//!
//! A `no_std`, heap-free block-storage controller core: RAID-0/1/10/5/6 over member
//! [`BlockDevice`](raidcore_hal::BlockDevice)s, under a log-structured, compressing volume
//! layer, behind one object an integrator holds ([`pool::Pool`]). RAM is the `Pool` value plus
//! one caller-provided arena, both fixed by configuration.
//!
//! Layers, bottom up; each names only the ones below it (a test, `tests/layering.rs`, checks):
//! - [`gf256`], [`parity`], [`checksum`]: GF(2^8) (polynomial 0x11d), P/Q generation and every
//!   RAID-5/6 recovery case (portable, SSSE3, AVX2, AVX-512BW, GFNI, NEON kernels), CRC32C.
//! - `format`: every on-disk structure, decoded with bounds and CRC checks.
//! - [`raid`]: geometry (stripes, strips, rotating parity) and the array: full-stripe writes,
//!   degraded reads, repair, verify and rebuild primitives, member states and error policy.
//! - `log`: the log of items in whole stripes (`Log`, lent its arena slices per operation in a
//!   `LogIo`), the segment usage table, item reads with self-healing, the intent log and flush
//!   marks, and import's roll-forward (`log::replay`).
//! - `volume`: coalescing streams, extent encoding and the decoded-extent cache, the forward
//!   map's page cache (over a `PageStore`), the LUN table with the lost-LBA list.
//! - [`pool`]: the `Pool` that owns every component, decides what happens after each
//!   operation (member failures, spares, rebuilds), and runs checkpoints, import, rebuild,
//!   scrub and the cleaner.
//!
//! [`error`] holds the data-path error every layer returns; [`event`] the operator's event
//! log. See `ARCHITECTURE.md` for the data flow and the invariants.
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
