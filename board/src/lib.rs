//! # raidcore-board
//!
//! Backends that let raidcore run on a real storage-controller board built from `embedded-hal`
//! 1.0 drivers. Work in progress: see the board issue.
#![no_std]
#![deny(missing_docs)]
