//! A 10,000 RPM SAS hard disk.
// Seek curves and platter angles are real-valued; the values converted are far below 2^52 ns
// and non-negative, so the casts lose nothing that matters.
#![allow(clippy::cast_precision_loss, clippy::cast_sign_loss)]

use super::{DeviceModel, IoOp, OpKind, Service, transfer_ns};

/// The figures a [`Hdd10k`] is built from. Times in nanoseconds, rates in bytes per second.
///
/// [`HddParams::SAVVIO_10K`] holds the reference drive's figures and their sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HddParams {
    /// Spindle speed, revolutions per minute.
    pub rpm: u32,
    /// Controller overhead charged once per non-sequential command.
    pub overhead_ns: u64,
    /// Read seek times: single track, average (weighted over all seek lengths as datasheets
    /// define it), full stroke. Settling included, overhead not.
    pub seek_read_ns: [u64; 3],
    /// Write seek times: single track, average, full stroke.
    pub seek_write_ns: [u64; 3],
    /// Tracks per surface: a seek shorter than one track costs no seek time.
    pub cylinders: u64,
    /// Media transfer rate at the outer diameter (LBA 0).
    pub media_rate_od_bytes_per_s: u64,
    /// Media transfer rate at the inner diameter (last LBA).
    pub media_rate_id_bytes_per_s: u64,
    /// Capacity the platter geometry stands for. `None` maps the device's own capacity onto the
    /// full stroke, so a small disk image seeks like a whole drive; `Some(bytes)` maps byte
    /// offsets onto a drive of that size, so a small image behaves like a short-stroked drive.
    pub geometry_capacity_bytes: Option<u64>,
}

impl HddParams {
    /// A 300 GB, 10,000 RPM, 2.5-inch SAS drive of the Seagate Savvio 10K family, write cache
    /// disabled (as RAID controllers with their own protected cache configure their members;
    /// the simulator's volatile cache and power-cut behaviour live in
    /// [`crate::fault::FaultyDisk`], not here).
    ///
    /// Sources:
    /// - seek times and overhead: Seagate *Savvio 10K.4 SAS Product Manual*, 100539221 Rev. A
    ///   (Dec 2009), §4.2.1 "Access time": average 3.8 / 4.4 ms, single track 0.30 / 0.56 ms,
    ///   full stroke 7.81 / 8.18 ms (read / write, without controller overhead); with overhead
    ///   4.0 / 4.6 ms, so overhead = 0.2 ms. Tracks per surface 147,620 (§4.1).
    /// - rotation: 10,000 RPM, average rotational latency 3.0 ms (same manual §4.1).
    /// - media rate: the 10K.4's peak internal data rate of 1.62 Gb/s is about 200 MB/s at the
    ///   outer diameter; the *Savvio 10K.3 SAS Product Manual* 100516229 Rev. G §5.2.3 gives a
    ///   sustained 67–124 MB/s (inner/outer ratio 0.54) for the 300 GB ST9300603SS. We take
    ///   200 MB/s outer and 120 MB/s inner (ratio 0.6), linear in LBA.
    pub const SAVVIO_10K: HddParams = HddParams {
        rpm: 10_000,
        overhead_ns: 200_000,
        seek_read_ns: [300_000, 3_800_000, 7_810_000],
        seek_write_ns: [560_000, 4_400_000, 8_180_000],
        cylinders: 147_620,
        media_rate_od_bytes_per_s: 200_000_000,
        media_rate_id_bytes_per_s: 120_000_000,
        geometry_capacity_bytes: None,
    };

    /// One revolution, in nanoseconds (6 ms at 10,000 RPM).
    #[must_use]
    pub const fn revolution_ns(&self) -> u64 {
        60_000_000_000 / self.rpm as u64
    }
}

/// Seek time as a function of the seek distance x (a fraction of the full stroke, 0 < x <= 1):
/// `t(x) = track + b·sqrt(x) + c·x`, the square-root-then-linear shape of Ruemmler & Wilkes,
/// "An introduction to disk drive modeling" (IEEE Computer, 1994). The two coefficients are
/// solved so that t(1) is the datasheet's full-stroke time and the mean of t over the datasheet's
/// weighting of seek lengths (seek length n weighted by max+1-n, i.e. |u - v| for u, v uniform,
/// where E[sqrt(x)] = 8/15 and E[x] = 1/3) is the datasheet's average.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SeekCurve {
    track_ns: f64,
    b: f64,
    c: f64,
}

impl SeekCurve {
    fn fit([track, avg, full]: [u64; 3]) -> Self {
        let track_ns = track as f64;
        let f = full as f64 - track_ns;
        let a = avg as f64 - track_ns;
        // b + c = f;  8/15 b + 1/3 c = a  =>  b/5 = a - f/3.
        let b = (5.0 * (a - f / 3.0)).max(0.0);
        let c = (f - b).max(0.0);
        Self { track_ns, b, c }
    }

    fn at(&self, x: f64) -> u64 {
        let x = x.clamp(0.0, 1.0);
        (self.track_ns + self.b * x.sqrt() + self.c * x).round() as u64
    }
}

/// A 10,000 RPM SAS hard disk with write cache disabled ([`HddParams::SAVVIO_10K`] unless built
/// with [`Hdd10k::with_params`]).
///
/// An operation that continues exactly where the previous one ended (sequential) costs only its
/// media transfer: no overhead, no seek, no rotational wait (the drive streams from its track
/// buffer). Any other read or write costs controller overhead + seek (by distance, see the
/// fitted curve) + rotational wait + media transfer. The rotational wait is not an average: the
/// platter angle is `(t mod revolution) / revolution` at virtual time t, the target sector's angle
/// is its offset within its track (track length = media rate × revolution time), and the head
/// waits until the sector comes round, so random access averages half a revolution (3 ms)
/// deterministically. The media rate falls linearly from the outer to the inner diameter.
/// Flush and trim cost the controller overhead (there is no write cache to destage).
///
/// With these figures a random 4 KiB read takes about 0.2 + 3.8 + 3.0 = 7.0 ms (143 IOPS) and
/// a random 4 KiB write about 7.6 ms (131 IOPS), which is what the datasheet's
/// "access to data = access time + latency time" gives; sequential transfers run at
/// 200 MB/s at LBA 0.
#[derive(Debug, Clone)]
pub struct Hdd10k {
    params: HddParams,
    read_curve: SeekCurve,
    write_curve: SeekCurve,
    /// Byte offset under the head.
    head_bytes: u64,
    /// Offset following the last transferred byte, if any transfer happened.
    next_bytes: Option<u64>,
}

impl Default for Hdd10k {
    fn default() -> Self {
        Self::new()
    }
}

impl Hdd10k {
    /// The reference drive, [`HddParams::SAVVIO_10K`], head at LBA 0.
    #[must_use]
    pub fn new() -> Self {
        Self::with_params(HddParams::SAVVIO_10K)
    }

    /// A drive with other figures.
    #[must_use]
    pub fn with_params(params: HddParams) -> Self {
        Self {
            params,
            read_curve: SeekCurve::fit(params.seek_read_ns),
            write_curve: SeekCurve::fit(params.seek_write_ns),
            head_bytes: 0,
            next_bytes: None,
        }
    }

    /// The figures this drive was built from.
    #[must_use]
    pub fn params(&self) -> &HddParams {
        &self.params
    }

    /// Seek time in nanoseconds for a seek over `fraction` of the full stroke (0..=1), for a
    /// read (`write == false`) or a write. A seek shorter than one track is 0.
    #[must_use]
    pub fn seek_ns(&self, fraction: f64, write: bool) -> u64 {
        if fraction * (self.params.cylinders as f64) < 1.0 {
            return 0;
        }
        if write {
            self.write_curve.at(fraction)
        } else {
            self.read_curve.at(fraction)
        }
    }

    /// Media transfer rate in bytes per second at `fraction` (0 = outer, 1 = inner diameter).
    #[must_use]
    pub fn media_rate_at(&self, fraction: f64) -> u64 {
        let od = self.params.media_rate_od_bytes_per_s as f64;
        let id = self.params.media_rate_id_bytes_per_s as f64;
        (od - (od - id) * fraction.clamp(0.0, 1.0)).round() as u64
    }

    fn fraction(&self, offset: u64, capacity: u64) -> f64 {
        let geom = self
            .params
            .geometry_capacity_bytes
            .unwrap_or(capacity)
            .max(1);
        (offset as f64 / geom as f64).clamp(0.0, 1.0)
    }

    /// Nanoseconds from `arrive_ns` until the sector at `offset` passes under the head.
    fn rotational_wait_ns(&self, arrive_ns: u64, offset: u64, rate: u64) -> u64 {
        let rev = self.params.revolution_ns();
        let track_bytes = (rate as f64 * rev as f64 / 1e9).max(1.0);
        let target = (offset as f64 / track_bytes).fract();
        let now = (arrive_ns % rev) as f64 / rev as f64;
        let turn = (target - now).rem_euclid(1.0);
        (turn * rev as f64).round() as u64
    }
}

impl DeviceModel for Hdd10k {
    fn service(&mut self, op: &IoOp, start_ns: u64) -> Service {
        let write = match op.kind {
            OpKind::Flush | OpKind::Trim => return Service::serial(self.params.overhead_ns),
            OpKind::Read => false,
            OpKind::Write => true,
        };
        let p = self.fraction(op.offset_bytes, op.capacity_bytes);
        let rate = self.media_rate_at(p);
        let xfer = transfer_ns(op.len_bytes, rate);
        let ns = if self.next_bytes == Some(op.offset_bytes) {
            xfer
        } else {
            let head = self.fraction(self.head_bytes, op.capacity_bytes);
            let seek = self.seek_ns((p - head).abs(), write);
            let arrive = start_ns
                .saturating_add(self.params.overhead_ns)
                .saturating_add(seek);
            let wait = self.rotational_wait_ns(arrive, op.offset_bytes, rate);
            self.params.overhead_ns + seek + wait + xfer
        };
        let end = op.offset_bytes.saturating_add(op.len_bytes);
        self.head_bytes = end;
        self.next_bytes = Some(end);
        Service::serial(ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_curve_meets_the_datasheet_points() {
        let h = Hdd10k::new();
        for (write, [track, avg, full]) in [
            (false, HddParams::SAVVIO_10K.seek_read_ns),
            (true, HddParams::SAVVIO_10K.seek_write_ns),
        ] {
            let curve = if write { h.write_curve } else { h.read_curve };
            assert!(curve.b > 0.0 && curve.c > 0.0, "monotone fit: {curve:?}");
            assert_eq!(h.seek_ns(1.0, write), full);
            assert_eq!(h.seek_ns(0.5 / 147_620.0, write), 0);
            // Mean over the triangular distribution of seek distances, by midpoint integration.
            let n = 100_000;
            let mut sum = 0.0;
            for i in 0..n {
                let x = (f64::from(i) + 0.5) / f64::from(n);
                sum += 2.0 * (1.0 - x) * curve.at(x) as f64 / f64::from(n);
            }
            assert!(
                (sum - avg as f64).abs() < 0.002 * avg as f64,
                "{sum} vs {avg}"
            );
            assert!(curve.at(1e-9) >= track);
        }
    }
}
