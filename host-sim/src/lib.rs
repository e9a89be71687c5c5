//! # raidcore-sim: the host simulator
//!
//! Simulated disks implementing [`raidcore_hal::BlockDevice`] (sparse memory, and the product's
//! file images and data-less disks), device latency models on a virtual clock, fault injection,
//! workloads, benchmarks, the fault campaign and the demo. Everything here is deterministic from
//! a seed and virtual time.
//!
//! The product (file disks, pool directories, the NBD server, the pool commands) is the crate
//! `raidcore_host`, which never uses this one; [`pooldir`] puts the simulated hardware under its
//! pool directories, [`nbd`] adds what tests run its NBD server with, and [`cli`] runs its pool
//! commands beside the simulator's own.

pub mod bench_engine;
pub mod bench_nbd;
pub mod bench_parity;
pub mod branch;
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
