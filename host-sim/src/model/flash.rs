//! Flash devices: SATA and NVMe SSDs, SD cards.

use super::{DeviceModel, IoOp, OpKind, Service, transfer_ns};

/// The figures a [`Flash`] model is built from. Rates in bytes per second (decimal MB/s as
/// datasheets use them), times in nanoseconds, IOPS for 4 KiB random operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashParams {
    /// What the figures describe (for reports).
    pub name: &'static str,
    /// Random 4 KiB read IOPS the device sustains with a deep queue.
    pub read_iops: u32,
    /// Random 4 KiB write IOPS the device sustains with a deep queue.
    pub write_iops: u32,
    /// Sequential read rate.
    pub seq_read_bytes_per_s: u64,
    /// Sequential write rate.
    pub seq_write_bytes_per_s: u64,
    /// Latency of one random read at queue depth 1 (0: as long as the device is busy).
    pub read_latency_ns: u64,
    /// Latency of one random write at queue depth 1 (0: as long as the device is busy).
    pub write_latency_ns: u64,
    /// Latency of one sequential read at queue depth 1 (0: as long as the device is busy).
    pub seq_read_latency_ns: u64,
    /// Latency of one sequential write at queue depth 1 (0: as long as the device is busy).
    pub seq_write_latency_ns: u64,
    /// Cost of a cache flush.
    pub flush_ns: u64,
    /// Cost of a trim.
    pub trim_ns: u64,
}

impl FlashParams {
    /// An enterprise 960 GB SATA SSD: Kingston DC600M 960 GB (SEDC600M/960G) specifications as
    /// listed by Puget Systems: sequential read 560 MB/s, sequential write 530 MB/s, random
    /// 4 KiB read 94,000 IOPS, random 4 KiB write 65,000 IOPS. The listing gives no latency,
    /// so queue-depth-1 latency equals the busy time (optimistic). The drive has power-loss
    /// protection, so a flush costs nothing.
    pub const SATA_SSD: FlashParams = FlashParams {
        name: "SATA SSD (Kingston DC600M 960 GB)",
        read_iops: 94_000,
        write_iops: 65_000,
        seq_read_bytes_per_s: 560_000_000,
        seq_write_bytes_per_s: 530_000_000,
        read_latency_ns: 0,
        write_latency_ns: 0,
        seq_read_latency_ns: 0,
        seq_write_latency_ns: 0,
        flush_ns: 0,
        trim_ns: 0,
    };

    /// An enterprise 2 TB NVMe SSD: Intel SSD DC P4500 2.0 TB, from the Lenovo product guide
    /// "Intel P4500 Entry NVMe PCIe 3.0 SSDs", table "Technical specifications": random 4 KiB
    /// read 490,000 IOPS, write 38,000 IOPS; sequential read 3.2 GB/s, write 1.05 GB/s; read
    /// access latency 85 µs random / 10 µs sequential, write 20 µs random / 13 µs sequential.
    /// Power-loss protected, so a flush costs nothing.
    pub const NVME_SSD: FlashParams = FlashParams {
        name: "NVMe SSD (Intel DC P4500 2.0 TB)",
        read_iops: 490_000,
        write_iops: 38_000,
        seq_read_bytes_per_s: 3_200_000_000,
        seq_write_bytes_per_s: 1_050_000_000,
        read_latency_ns: 85_000,
        write_latency_ns: 20_000,
        seq_read_latency_ns: 10_000,
        seq_write_latency_ns: 13_000,
        flush_ns: 0,
        trim_ns: 0,
    };

    /// An SD card carrying the Class 10 and A1 marks, at exactly the floors those marks
    /// guarantee (SD Association, "Speed Class" and "Application Performance Class", SD
    /// Physical Layer Specification 5.1): sustained sequential 10 MB/s (Class 10 is a write
    /// floor; reads are taken at the same rate), random 4 KiB read 1,500 IOPS, random 4 KiB
    /// write 500 IOPS. One command at a time (no pipelining); no volatile cache to flush.
    pub const SD_CARD: FlashParams = FlashParams {
        name: "SD card (Class 10, A1)",
        read_iops: 1_500,
        write_iops: 500,
        seq_read_bytes_per_s: 10_000_000,
        seq_write_bytes_per_s: 10_000_000,
        read_latency_ns: 0,
        write_latency_ns: 0,
        seq_read_latency_ns: 0,
        seq_write_latency_ns: 0,
        flush_ns: 0,
        trim_ns: 0,
    };
}

/// A flash device: no mechanics, so cost depends on size and on whether the operation continues
/// the previous one.
///
/// - Sequential (the operation starts where the previous one ended): busy for `len / seq rate`.
/// - Random: busy for `max(1 s / IOPS, len / seq rate)`, so 4 KiB random operations run at the
///   datasheet IOPS with a deep queue and large ones at the sequential rate.
/// - Completion comes `max(busy, latency)` after the start, where latency is the datasheet's
///   queue-depth-1 access latency: an SSD accepts the next command while the flash works, so
///   IOPS with a queue and latency at depth 1 both match the datasheet.
#[derive(Debug, Clone)]
pub struct Flash {
    params: FlashParams,
    next_bytes: Option<u64>,
}

impl Flash {
    /// A device with these figures.
    #[must_use]
    pub const fn new(params: FlashParams) -> Self {
        Self {
            params,
            next_bytes: None,
        }
    }

    /// [`FlashParams::SATA_SSD`].
    #[must_use]
    pub const fn sata_ssd() -> Self {
        Self::new(FlashParams::SATA_SSD)
    }

    /// [`FlashParams::NVME_SSD`].
    #[must_use]
    pub const fn nvme_ssd() -> Self {
        Self::new(FlashParams::NVME_SSD)
    }

    /// [`FlashParams::SD_CARD`].
    #[must_use]
    pub const fn sd_card() -> Self {
        Self::new(FlashParams::SD_CARD)
    }

    /// The figures this device was built from.
    #[must_use]
    pub const fn params(&self) -> &FlashParams {
        &self.params
    }
}

impl DeviceModel for Flash {
    fn service(&mut self, op: &IoOp, _start_ns: u64) -> Service {
        let p = &self.params;
        let (iops, rate, lat, seq_lat) = match op.kind {
            OpKind::Flush => return Service::serial(p.flush_ns),
            OpKind::Trim => return Service::serial(p.trim_ns),
            OpKind::Read => (
                p.read_iops,
                p.seq_read_bytes_per_s,
                p.read_latency_ns,
                p.seq_read_latency_ns,
            ),
            OpKind::Write => (
                p.write_iops,
                p.seq_write_bytes_per_s,
                p.write_latency_ns,
                p.seq_write_latency_ns,
            ),
        };
        let sequential = self.next_bytes == Some(op.offset_bytes);
        self.next_bytes = Some(op.offset_bytes.saturating_add(op.len_bytes));
        let xfer = transfer_ns(op.len_bytes, rate);
        let (busy, latency) = if sequential {
            (xfer, seq_lat)
        } else {
            let per_op = 1_000_000_000u64.div_ceil(u64::from(iops.max(1)));
            (xfer.max(per_op), lat)
        };
        Service {
            busy_ns: busy,
            latency_ns: busy.max(latency),
        }
    }
}
