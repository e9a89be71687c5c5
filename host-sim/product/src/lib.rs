//! # raidcore-host: raidcore on a Linux host
//!
//! The product part of the host tools, what an operator runs on real files, as TigerBeetle
//! keeps `storage` apart from `testing/storage`: it never uses the simulator (`raidcore-sim`
//! depends on this crate, never the reverse; `tests/layering.rs` checks the manifest). Layers,
//! from the disk up:
//!
//! - [`disk`]: disk-image files ([`disk::FileDisk`], locked while open) and the data-less
//!   [`disk::NullDisk`] that `create` tries a layout on.
//! - [`dir`]: a pool kept as disk images in a directory ([`dir::PoolDir`]): names and the
//!   description file, the lock, create, open (import), which image is what, fail and replace;
//!   generic over how an image becomes a member ([`dir::Members`]; [`dir::FileMembers`] here).
//! - [`status`]: what `status` reports, as text or JSON.
//! - [`ops`]: what each pool command does to an open pool, and [`control`]: the server's
//!   control channel, through which commands reach a served pool.
//! - [`nbd`]: the NBD server (protocol, sessions, sockets and threads, statistics) over any
//!   [`nbd::Backend`], and [`nbd::PoolBackend`], which serves a pool's LUNs.
//! - [`cli`]: the `raidcore` command (create, status, serve, fail, replace, scrub), whose
//!   commands `raidcore-sim` runs too, over its simulated members.
//! - [`units`]: sizes with binary suffixes.

pub mod cli;
pub mod control;
pub mod dir;
pub mod disk;
pub mod nbd;
pub mod ops;
pub mod status;
pub mod units;
