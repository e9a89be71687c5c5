//! Shared helpers for raidcore's cross-crate tests (reference vectors, seeded data).
pub mod map_fuzz;
pub mod metadata_fuzz;
pub mod parity_fuzz;
pub mod volume_fuzz;
