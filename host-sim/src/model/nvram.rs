//! NVRAM: battery- or capacitor-backed DRAM exposed as a block device, as used for a pool's
//! dedicated intent-log device (a "SLOG").

use super::{DeviceModel, IoOp, OpKind, Service, transfer_ns};

/// The figures an [`Nvram`] model is built from. Times in nanoseconds, rates in bytes per second
/// (decimal GB/s, as interface and datasheet figures are given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvramParams {
    /// What the figures describe (for reports).
    pub name: &'static str,
    /// Fixed cost of one read or write command, from submission to completion, without the
    /// data transfer: doorbell, command fetch, DMA set-up, completion. Overlaps between queued
    /// commands.
    pub command_ns: u64,
    /// Transfer rate of reads and writes alike (DRAM is symmetric; the link is the limit).
    pub bytes_per_s: u64,
    /// Cost of a cache flush.
    pub flush_ns: u64,
    /// Cost of a trim.
    pub trim_ns: u64,
}

impl NvramParams {
    /// A PCIe NVRAM card of the Radian RMS-200 kind: 8 GB of DRAM behind an NVMe controller,
    /// saved to on-board flash by capacitors on power loss.
    ///
    /// - Interface: PCIe Gen3 x8, as Radian's data sheet of the same family (RMS-325, "NVMe
    ///   PCIe x8 Gen3 interface", on-board capacitors, flush-to-flash backup) gives. Gen3 x8
    ///   carries 8 lanes × 8 GT/s × 128/130 = 7.88 GB/s raw; after TLP headers and DMA overhead
    ///   we take **6 GB/s** for reads and writes ("several GB/s" class).
    /// - Per-command latency: **2 µs**, an assumed figure for a DRAM card behind an NVMe
    ///   controller (not read off a data sheet: about a tenth of a fast NVMe SSD's write
    ///   latency, where the flash program time is gone). DRAM has no seek, no
    ///   program/erase and no garbage collection, so every command costs the same wherever it
    ///   lands, sequential or not.
    /// - Flush and trim: free. The data is power-safe once written (no volatile cache to
    ///   destage) and DRAM has nothing to erase.
    ///
    /// Capacity is the device's own (the RMS-200 holds 8 GB); the timing does not depend on it.
    pub const PCIE_CARD: NvramParams = NvramParams {
        name: "NVRAM (PCIe Gen3 x8 DRAM card, Radian RMS-200 class, 8 GB)",
        command_ns: 2_000,
        bytes_per_s: 6_000_000_000,
        flush_ns: 0,
        trim_ns: 0,
    };
}

/// An NVRAM device: every read or write completes `command_ns` + `len / rate` after it starts,
/// wherever it lands; the device is busy only for the transfer (commands are queued and their
/// fixed costs overlap, so a deep queue runs at the link rate). No command-rate limit is
/// modelled: a deep queue of tiny commands is optimistic. Flush and trim cost their fixed
/// figures. Stateless: the result depends on the operation's kind and length only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nvram {
    params: NvramParams,
}

impl Default for Nvram {
    fn default() -> Self {
        Self::pcie_card()
    }
}

impl Nvram {
    /// A device with these figures.
    #[must_use]
    pub const fn new(params: NvramParams) -> Self {
        Self { params }
    }

    /// [`NvramParams::PCIE_CARD`].
    #[must_use]
    pub const fn pcie_card() -> Self {
        Self::new(NvramParams::PCIE_CARD)
    }

    /// The figures this device was built from.
    #[must_use]
    pub const fn params(&self) -> &NvramParams {
        &self.params
    }
}

impl DeviceModel for Nvram {
    fn service(&mut self, op: &IoOp, _start_ns: u64) -> Service {
        let p = &self.params;
        match op.kind {
            OpKind::Flush => Service::serial(p.flush_ns),
            OpKind::Trim => Service::serial(p.trim_ns),
            OpKind::Read | OpKind::Write => {
                let xfer = transfer_ns(op.len_bytes, p.bytes_per_s);
                Service {
                    busy_ns: xfer,
                    latency_ns: p.command_ns.saturating_add(xfer),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use raidcore_hal::{BlockDevice, BlockSize};

    use super::*;
    use crate::clock::{NS_PER_US, SimClock};
    use crate::disk::NullDisk;
    use crate::model::{ModelKind, TimedDisk};

    fn op(kind: OpKind, offset_bytes: u64, len_bytes: u64, capacity_bytes: u64) -> IoOp {
        IoOp {
            kind,
            offset_bytes,
            len_bytes,
            capacity_bytes,
        }
    }

    #[test]
    fn service_is_command_latency_plus_transfer() {
        let mut m = Nvram::pcie_card();
        let gib = 1u64 << 30;
        // 4 KiB at 6 GB/s: 682.7 ns, rounded up; plus the 2 µs command.
        let small = Service {
            busy_ns: 683,
            latency_ns: 2_683,
        };
        // Same cost anywhere, in any order, on any capacity: no seek, no GC, no sequential bonus.
        for (off, cap) in [
            (0, 8 * gib),
            (4096, 8 * gib),
            (5 * gib, 8 * gib),
            (0, 64 * gib),
        ] {
            assert_eq!(m.service(&op(OpKind::Write, off, 4096, cap), 0), small);
            assert_eq!(m.service(&op(OpKind::Read, off, 4096, cap), 7), small);
        }
        // 1 MiB: 174,762.7 ns of transfer.
        let big = m.service(&op(OpKind::Write, 0, 1 << 20, 8 * gib), 0);
        assert_eq!((big.busy_ns, big.latency_ns), (174_763, 176_763));
        assert_eq!(
            m.service(&op(OpKind::Flush, 0, 0, 8 * gib), 0),
            Service::default()
        );
        assert_eq!(
            m.service(&op(OpKind::Trim, 0, gib, 8 * gib), 0),
            Service::default()
        );
    }

    /// Virtual time from submitting a 4 KiB write at time 0 to the completion of the flush
    /// that follows it, on a fresh device of `kind`.
    fn write_flush_ns(kind: ModelKind) -> u64 {
        let clock = SimClock::new();
        let disk = NullDisk::new(BlockSize::B4096, 2 << 20).unwrap();
        let mut d = TimedDisk::new(disk, kind.build(), &clock);
        d.write(12_345, &[0u8; 4096]).unwrap();
        clock.advance_to_ns(d.handle().last_completion_ns());
        d.flush().unwrap();
        d.handle().last_completion_ns()
    }

    #[test]
    fn write_and_flush_is_microseconds_and_far_below_ssds() {
        let nvram = write_flush_ns(ModelKind::Nvram);
        assert_eq!(nvram, 2_683);
        assert!(nvram < 3 * NS_PER_US);
        // SATA SSD: one random write slot at 65,000 IOPS (15.4 µs); NVMe SSD: 38,000 IOPS
        // (26.3 µs); the 10K disk: at least its 0.2 ms controller overhead twice (write and
        // flush), plus a short seek and the rotational wait.
        assert_eq!(write_flush_ns(ModelKind::SataSsd), 15_385);
        assert_eq!(write_flush_ns(ModelKind::NvmeSsd), 26_316);
        assert!(5 * nvram < write_flush_ns(ModelKind::SataSsd));
        assert!(100 * nvram < write_flush_ns(ModelKind::Hdd10k));
    }

    #[test]
    fn a_deep_queue_runs_at_the_link_rate() {
        let clock = SimClock::new();
        let disk = NullDisk::new(BlockSize::B4096, 2 << 20).unwrap();
        let mut d = TimedDisk::new(disk, Nvram::pcie_card(), &clock);
        let buf = vec![0u8; 1 << 20];
        for i in 0..100 {
            d.write(i * 256, &buf).unwrap();
        }
        let h = d.handle();
        assert_eq!(h.busy_until_ns(), 100 * 174_763);
        assert_eq!(h.last_completion_ns(), 100 * 174_763 + 2_000);
    }
}
