//! Shared helpers for raidcore's cross-crate tests (reference vectors, seeded data).
pub mod parity_fuzz;
