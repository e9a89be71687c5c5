//! The NBD export, and what tests run it with.
//!
//! The server is the product's ([`raidcore_host::nbd`], re-exported here under its old paths);
//! this module adds the simulator's side: [`testing`] (a sparse memory backend and a wrapper that
//! checks the server keeps the [`Backend`] contract) and [`fuzz`] (whole sessions run in memory,
//! for the fuzz target `nbd_requests` and deterministic tests).

pub use raidcore_host::nbd::*;

pub mod fuzz;
pub mod testing;

pub use fuzz::fuzz_session;
