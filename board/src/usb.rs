//! USB mass storage for a pool LUN (feature `usb`): `usbd-storage`'s Bulk-Only Transport
//! carries the command blocks and data of a [`ScsiTarget`] (SCSI transparent command set,
//! interface subclass 06h, protocol 50h).
//!
//! [`MassStorage`] is a `usb-device` class. The firmware polls the device with it, then calls
//! [`MassStorage::process`] with the pool, which starts or advances the current command as far
//! as the transport has room or data; between commands it runs `Pool::maintenance`.
//!
//! The class reads the raw command block itself (`BulkOnly::get_command`) instead of
//! `usbd_storage::subclass::scsi`'s parsed commands, which drop the FUA bit and the fields of
//! SYNCHRONIZE CACHE and UNMAP.

use core::borrow::BorrowMut;

use usb_device::bus::{InterfaceNumber, UsbBus, UsbBusAllocator};
use usb_device::class::{ControlIn, UsbClass};
use usb_device::descriptor::DescriptorWriter;
use usbd_storage::subclass::scsi::SUBCLASS_SCSI;
use usbd_storage::transport::bbb::{BulkOnly, BulkOnlyError};
use usbd_storage::transport::{CommandStatus, Transport};

use crate::scsi::{DataPhase, Poll, PoolIo, ScsiTarget, Status};

/// USB class code of mass storage.
const CLASS_MASS_STORAGE: u8 = 0x08;
/// Bulk packet size at full speed.
const PACKET: u16 = 64;

/// A USB mass-storage interface serving one [`ScsiTarget`]. `Buf` is the transport's I/O
/// buffer (at least 64 bytes; 512 is plenty).
pub struct MassStorage<'a, B: UsbBus, Buf: BorrowMut<[u8]>> {
    interface: InterfaceNumber,
    bot: BulkOnly<'a, B, Buf>,
    target: ScsiTarget,
}

impl<B: UsbBus, Buf: BorrowMut<[u8]>> core::fmt::Debug for MassStorage<'_, B, Buf> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MassStorage")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// The data phase through the transport's buffer.
struct Io<'b, 'a, B: UsbBus, Buf: BorrowMut<[u8]>>(&'b mut BulkOnly<'a, B, Buf>);

impl<B: UsbBus, Buf: BorrowMut<[u8]>> DataPhase for Io<'_, '_, B, Buf> {
    fn receive(&mut self, buf: &mut [u8]) -> usize {
        self.0.read_data(buf).unwrap_or(0)
    }
    fn send(&mut self, data: &[u8]) -> usize {
        self.0.write_data(data).unwrap_or(0)
    }
}

impl<'a, B: UsbBus, Buf: BorrowMut<[u8]>> MassStorage<'a, B, Buf> {
    /// Allocates the interface and its two bulk endpoints (one LUN).
    ///
    /// # Errors
    /// [`BulkOnlyError::BufferTooSmall`] for a buffer under 64 bytes.
    ///
    /// # Panics
    /// If the bus has no two bulk endpoints left (`usb-device`'s allocator panics).
    pub fn new(
        alloc: &'a UsbBusAllocator<B>,
        buf: Buf,
        target: ScsiTarget,
    ) -> Result<Self, BulkOnlyError> {
        Ok(MassStorage {
            interface: alloc.interface(),
            bot: BulkOnly::new(alloc, PACKET, 0, buf)?,
            target,
        })
    }

    /// True when no command is in progress (the time for `Pool::maintenance`).
    pub fn idle(&self) -> bool {
        !self.target.busy() && self.bot.get_command().is_none()
    }

    /// The SCSI target (its sense data).
    pub fn target(&self) -> &ScsiTarget {
        &self.target
    }

    /// Starts the command the host sent, or advances the one in progress, as far as the
    /// transport allows; sets its status when done.
    pub fn process(&mut self, pool: &mut impl PoolIo) {
        let _ = self.bot.read();
        let _ = self.bot.write();
        let mut cdb = [0u8; 16];
        let len = match self.bot.get_command() {
            Some(c) if !self.bot.has_status() => {
                let n = c.bytes.len().min(cdb.len());
                cdb[..n].copy_from_slice(&c.bytes[..n]);
                n
            }
            _ => return,
        };
        if !self.target.busy() {
            self.target.start(pool, &cdb[..len]);
        }
        if let Poll::Done { status, .. } = self.target.poll(pool, &mut Io(&mut self.bot)) {
            // The transport counts the residue itself from the bytes that moved.
            self.bot.set_status(match status {
                Status::Good => CommandStatus::Passed,
                Status::CheckCondition => CommandStatus::Failed,
            });
        }
        // Errors here are "would block" and "no full packet yet": the next poll goes on.
        let _ = self.bot.write();
        let _ = self.bot.read();
    }
}

impl<B: UsbBus, Buf: BorrowMut<[u8]>> UsbClass<B> for MassStorage<'_, B, Buf> {
    fn get_configuration_descriptors(
        &self,
        writer: &mut DescriptorWriter,
    ) -> usb_device::Result<()> {
        writer.interface(
            self.interface,
            CLASS_MASS_STORAGE,
            SUBCLASS_SCSI,
            <BulkOnly<'_, B, Buf> as Transport>::PROTO,
        )?;
        self.bot.get_endpoint_descriptors(writer)
    }

    fn reset(&mut self) {
        self.bot.reset();
        self.target.reset();
    }

    fn control_in(&mut self, xfer: ControlIn<B>) {
        self.bot.control_in(xfer);
    }
}
