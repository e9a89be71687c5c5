//! # raidcore-host: raidcore on a Linux host
//!
//! The product part of the host tools: what an operator runs on real files. It never uses the
//! simulator (`raidcore-sim` depends on this crate, not the reverse; `tests/layering.rs` checks
//! the manifest).
//!
//! - [`cli`]: the `raidcore` command (create, status, serve, fail, replace, scrub), whose
//!   commands `raidcore-sim` runs too.
//! - [`disk`]: disk-image files ([`disk::FileDisk`]) and the data-less disk layouts are tried on.
//! - [`dir`]: a pool kept as disk images in a directory: names, the description file, locks.
//! - [`status`]: what `status` reports, as text or JSON.
//! - [`units`]: sizes with binary suffixes.
//! - [`nbd`]: the NBD server (protocol, sessions, sockets and threads, statistics) over any
//!   [`nbd::Backend`].
pub mod cli;
pub mod dir;
pub mod disk;
pub mod nbd;
pub mod status;
pub mod units;
