//! # raidcore-sim: the host simulator
//!
//! Simulated disks implementing [`raidcore_hal::BlockDevice`] (sparse memory and file images),
//! device latency models on a virtual clock, fault injection, the NBD export, workloads and the
//! demo. Everything here is deterministic from a seed and virtual time.

pub mod bench_nbd;
pub mod bench_parity;
pub mod campaign;
pub mod cli;
pub mod clock;
pub mod demo;
pub mod disk;
pub mod fault;
pub mod model;
pub mod nbd;
pub mod plot;
pub mod pooldir;
pub mod report;
pub mod runner;
pub mod workload;
