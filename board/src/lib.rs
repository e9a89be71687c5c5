//! # raidcore-board
//!
//! Backends that let raidcore run on a real storage-controller board built from `embedded-hal`
//! 1.0 drivers, target-agnostic and generic over the `embedded-hal` traits:
//!
//! - [`sd`]: an SD/SDHC/SDXC card in SPI mode as a [`raidcore_hal::BlockDevice`], on the
//!   maintained [`embedded_sdmmc`] driver, with the driver's errors mapped onto
//!   [`raidcore_hal::ErrorKind`] so the RAID layer can tell a CRC glitch (retry) from a bad block
//!   (repair) from a pulled card (fail the member). Several cards may share one SPI bus
//!   (`embedded-hal-bus` shared devices) or have one bus each.
//! - [`sdmmc`]: adapters both ways with `embedded-sdmmc`'s own `BlockDevice` trait: any device
//!   implementing it can be a pool member, and a FAT volume can sit on a raidcore LUN.
//! - [`pico`]: the pool configuration of the RP2040 example firmware (RAID-6 over six SD cards
//!   and a spare in 264 KiB of SRAM), which the QEMU self-test measures.
//! - [`scsi`]: a SCSI block device (the command set of USB mass storage) over a pool LUN,
//!   independent of the transport; the RP2040 firmware puts it behind USB.
//! - [`selftest`]: a RAID-6 parity self-test over any set of member devices (seeded data, P/Q,
//!   one member failed, rebuilt onto a spare, every block verified); the example firmware and the
//!   QEMU image run it.
//! - `semihosting` (feature `semihosting`): a disk that is a file on the debug host, reached
//!   through ARM semihosting, for emulated Cortex-M (QEMU) runs.
//! - `fake_sd` (feature `fake-sd`, std): a fake SD card that speaks the SPI-mode protocol, with
//!   fault hooks, for host tests.
//!
//! - `stack` (Cortex-M): stack painting, for the high-water mark of pool calls.
//! - `usb` (feature `usb`): the SCSI target as a USB mass-storage class (`usbd-storage`'s
//!   Bulk-Only Transport).
//!
//! Features: `defmt` or `log` (at most one) for logging, `semihosting`, `fake-sd`, `usb`, `std`.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

#[cfg(any(feature = "std", test))]
extern crate std;

// Declared first so every module sees the logging macros.
#[macro_use]
mod fmt;

#[cfg(feature = "fake-sd")]
pub mod fake_sd;
pub mod pico;
pub mod scsi;
pub mod sd;
pub mod sdmmc;
pub mod selftest;
#[cfg(feature = "semihosting")]
pub mod semihosting;
#[cfg(all(target_arch = "arm", target_os = "none"))]
pub mod stack;
#[cfg(feature = "usb")]
pub mod usb;

pub use sd::{SdBlockDevice, SdError};
