//! Where every strip of every stripe lives: RAID levels, strip size, rotating parity.
//!
//! Terms: a *stripe* is one row across the member disks; each member holds one *strip* (chunk) of
//! it, `strip_bytes` long, at the same disk offset. A stripe has `data_strips` data strips and
//! `parity_strips` P/Q strips (RAID-5/6) or mirror copies (RAID-1/10). *Columns* number a
//! stripe's strips in parity order: data columns `0..data_strips`, then P, then Q — the column
//! order of [`crate::parity::reconstruct`]. Mirror levels number copies instead (see
//! [`Column`]).
//!
//! Parity rotates left-symmetric, md's default layout (`ALGORITHM_LEFT_SYMMETRIC`): in stripe
//! `s` of an `n`-disk array, P is on disk `n - 1 - (s mod n)`, Q (RAID-6) on the next disk, and the
//! data strips follow on the disks after that, wrapping around.

use raidcore_hal::BlockSize;

/// Most member disks one array may have.
pub const MAX_DISKS: usize = 32;

/// Smallest strip, in bytes.
pub const MIN_STRIP_BYTES: u32 = 4096;
/// Largest strip, in bytes.
pub const MAX_STRIP_BYTES: u32 = 1 << 20;

/// A RAID level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Level {
    /// Striping without redundancy: tolerates no failure.
    Raid0,
    /// An n-way mirror: every disk holds every strip; tolerates n - 1 failures.
    Raid1,
    /// Striped 2-way mirrors (md "near 2" layout): disks 2i and 2i+1 hold data strip i.
    /// Tolerates one failure in each pair.
    Raid10,
    /// Striping with rotating P parity: tolerates one failure.
    Raid5,
    /// Striping with rotating P and Q parity: tolerates two failures.
    Raid6,
}

impl Level {
    /// Member-disk count range allowed for the level.
    #[must_use]
    pub const fn disk_range(self) -> (usize, usize) {
        match self {
            Level::Raid0 | Level::Raid1 => (2, MAX_DISKS),
            Level::Raid5 => (3, MAX_DISKS),
            Level::Raid10 | Level::Raid6 => (4, MAX_DISKS),
        }
    }

    /// How many members may fail (in the worst placement) with every stripe still readable.
    #[must_use]
    pub const fn tolerance(self, disks: usize) -> usize {
        match self {
            Level::Raid0 => 0,
            Level::Raid1 => disks.saturating_sub(1),
            Level::Raid10 | Level::Raid5 => 1,
            Level::Raid6 => 2,
        }
    }

    /// Lower-case name as used on the command line (`raid0` … `raid6`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid10 => "raid10",
            Level::Raid5 => "raid5",
            Level::Raid6 => "raid6",
        }
    }
}

/// The role of one strip in a stripe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Column {
    /// Data strip `i` (0-based, in stripe data order).
    Data(usize),
    /// The P (XOR) parity strip.
    P,
    /// The Q (Reed–Solomon syndrome) parity strip.
    Q,
    /// Copy `copy` of data strip `data` (RAID-1: data is always 0).
    Mirror {
        /// Which data strip.
        data: usize,
        /// Which copy of it (0-based).
        copy: usize,
    },
}

/// Why a geometry was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GeometryError {
    /// The disk count is outside the level's range (see [`Level::disk_range`]), or odd for RAID-10.
    DiskCount,
    /// The strip size is not a power of two between 4 KiB and 1 MiB.
    StripSize,
    /// The disks are too small to hold the reserved area and at least one stripe.
    TooSmall,
}

impl core::fmt::Display for GeometryError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            GeometryError::DiskCount => "disk count not allowed for this RAID level",
            GeometryError::StripSize => "strip size must be a power of two from 4 KiB to 1 MiB",
            GeometryError::TooSmall => "disks too small for the reserved area and one stripe",
        })
    }
}

impl core::error::Error for GeometryError {}

/// The shape of an array: level, member count, strip size and where the data area lies on each
/// member. All members have the same block size and the same usable size (the smallest's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Geometry {
    level: Level,
    disks: u8,
    strip_bytes: u32,
    block_bytes: u32,
    /// First disk block of the data area on every member.
    data_start_lba: u64,
    stripes: u64,
}

impl Geometry {
    /// Builds a geometry, checking every rule.
    ///
    /// - `disks`: member count, in [`Level::disk_range`] (even for RAID-10);
    /// - `strip_bytes`: a power of two from 4 KiB to 1 MiB (hence a whole number of blocks);
    /// - `disk_blocks`: usable blocks per member (the smallest member's count);
    /// - `reserved_front_blocks`: blocks at the start of each member kept out of the data area
    ///   (labels, superblocks, intent log); the data area starts there, rounded up to a strip.
    pub fn try_new(
        level: Level,
        disks: usize,
        strip_bytes: u32,
        block_size: BlockSize,
        disk_blocks: u64,
        reserved_front_blocks: u64,
    ) -> Result<Self, GeometryError> {
        let (lo, hi) = level.disk_range();
        if disks < lo || disks > hi || (level == Level::Raid10 && !disks.is_multiple_of(2)) {
            return Err(GeometryError::DiskCount);
        }
        if !strip_bytes.is_power_of_two()
            || !(MIN_STRIP_BYTES..=MAX_STRIP_BYTES).contains(&strip_bytes)
        {
            return Err(GeometryError::StripSize);
        }
        let block_bytes = block_size.bytes() as u32;
        let strip_blocks = u64::from(strip_bytes / block_bytes);
        let data_start_lba = reserved_front_blocks.div_ceil(strip_blocks) * strip_blocks;
        let stripes = disk_blocks.saturating_sub(data_start_lba) / strip_blocks;
        if stripes == 0 {
            return Err(GeometryError::TooSmall);
        }
        Ok(Geometry {
            level,
            disks: disks as u8,
            strip_bytes,
            block_bytes,
            data_start_lba,
            stripes,
        })
    }

    /// Whether this geometry keeps every rule [`Geometry::try_new`] checks (one decoded from
    /// disk is not built by it): disk count, strip size, block size (512 or 4096), a data area
    /// starting on a strip boundary with at least one stripe, and no address past `u64`.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        let (lo, hi) = self.level.disk_range();
        let disks = self.disks as usize;
        let strip_ok = self.strip_bytes.is_power_of_two()
            && (MIN_STRIP_BYTES..=MAX_STRIP_BYTES).contains(&self.strip_bytes);
        let block_ok = matches!(self.block_bytes, 512 | 4096);
        if !(lo..=hi).contains(&disks)
            || (self.level == Level::Raid10 && !disks.is_multiple_of(2))
            || !strip_ok
            || !block_ok
            || self.stripes == 0
        {
            return false;
        }
        let strip_blocks = u64::from(self.strip_bytes / self.block_bytes);
        self.data_start_lba.is_multiple_of(strip_blocks)
            && self
                .stripes
                .checked_mul(strip_blocks)
                .and_then(|b| b.checked_add(self.data_start_lba))
                .is_some()
            && self
                .stripes
                .checked_mul(self.stripe_data_bytes() as u64)
                .is_some()
    }

    /// The RAID level.
    #[must_use]
    pub const fn level(&self) -> Level {
        self.level
    }
    /// Number of member disks.
    #[must_use]
    pub const fn disks(&self) -> usize {
        self.disks as usize
    }
    /// Strip (chunk) size in bytes.
    #[must_use]
    pub const fn strip_bytes(&self) -> usize {
        self.strip_bytes as usize
    }
    /// Member block size in bytes (512 or 4096).
    #[must_use]
    pub const fn block_bytes(&self) -> usize {
        self.block_bytes as usize
    }
    /// Strip size in member blocks.
    #[must_use]
    pub const fn strip_blocks(&self) -> u64 {
        (self.strip_bytes / self.block_bytes) as u64
    }
    /// First member block of the data area.
    #[must_use]
    pub const fn data_start_lba(&self) -> u64 {
        self.data_start_lba
    }
    /// Number of stripes in the data area.
    #[must_use]
    pub const fn stripes(&self) -> u64 {
        self.stripes
    }
    /// Members that may fail in the worst placement with every stripe readable.
    #[must_use]
    pub const fn tolerance(&self) -> usize {
        self.level.tolerance(self.disks as usize)
    }

    /// Data strips per stripe.
    #[must_use]
    pub const fn data_strips(&self) -> usize {
        let n = self.disks as usize;
        match self.level {
            Level::Raid0 => n,
            Level::Raid1 => 1,
            Level::Raid10 => n / 2,
            Level::Raid5 => n - 1,
            Level::Raid6 => n - 2,
        }
    }

    /// Copies of each data strip (1 for parity levels and RAID-0).
    #[must_use]
    pub const fn copies(&self) -> usize {
        match self.level {
            Level::Raid1 => self.disks as usize,
            Level::Raid10 => 2,
            _ => 1,
        }
    }

    /// Parity strips per stripe (0, 1 or 2).
    #[must_use]
    pub const fn parity_strips(&self) -> usize {
        match self.level {
            Level::Raid5 => 1,
            Level::Raid6 => 2,
            _ => 0,
        }
    }

    /// Bytes of data one stripe holds (`data_strips * strip_bytes`).
    #[must_use]
    pub const fn stripe_data_bytes(&self) -> usize {
        self.data_strips() * self.strip_bytes as usize
    }

    /// Bytes of data the whole array holds.
    #[must_use]
    pub const fn data_bytes(&self) -> u64 {
        self.stripes * self.stripe_data_bytes() as u64
    }

    /// Member disk holding `column` of `stripe`. `None` if the column does not exist at this
    /// level or the stripe is past the end.
    #[must_use]
    pub fn disk_of(&self, stripe: u64, column: Column) -> Option<usize> {
        if stripe >= self.stripes {
            return None;
        }
        let n = self.disks as usize;
        let k = self.data_strips();
        match (self.level, column) {
            (Level::Raid0, Column::Data(i)) if i < k => Some(i),
            (Level::Raid1, Column::Mirror { data: 0, copy }) if copy < n => Some(copy),
            (Level::Raid10, Column::Mirror { data, copy }) if data < k && copy < 2 => {
                Some(data * 2 + copy)
            }
            (Level::Raid5 | Level::Raid6, _) => {
                let pd = n - 1 - (stripe % n as u64) as usize;
                let first_data = pd + self.parity_strips();
                match column {
                    Column::P => Some(pd),
                    Column::Q if self.level == Level::Raid6 => Some((pd + 1) % n),
                    Column::Data(i) if i < k => Some((first_data + i) % n),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Members holding copy 0, 1, … of data strip `strip` of `stripe` on a mirrored level
    /// (RAID-1, RAID-10), in copy order; none at other levels or past the end.
    pub fn mirror_disks(&self, stripe: u64, strip: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.copies())
            .filter_map(move |copy| self.disk_of(stripe, Column::Mirror { data: strip, copy }))
    }

    /// The column `disk` holds in `stripe` (inverse of [`Geometry::disk_of`]).
    #[must_use]
    pub fn column_of(&self, stripe: u64, disk: usize) -> Option<Column> {
        let n = self.disks as usize;
        if stripe >= self.stripes || disk >= n {
            return None;
        }
        Some(match self.level {
            Level::Raid0 => Column::Data(disk),
            Level::Raid1 => Column::Mirror {
                data: 0,
                copy: disk,
            },
            Level::Raid10 => Column::Mirror {
                data: disk / 2,
                copy: disk % 2,
            },
            Level::Raid5 | Level::Raid6 => {
                let pd = n - 1 - (stripe % n as u64) as usize;
                let rel = (disk + n - pd) % n;
                match (self.level, rel) {
                    (_, 0) => Column::P,
                    (Level::Raid6, 1) => Column::Q,
                    _ => Column::Data(rel - self.parity_strips()),
                }
            }
        })
    }

    /// Index of `column` in the parity order used by [`crate::parity::reconstruct`]
    /// (data 0..k, then P, then Q). Mirror columns have no parity index.
    #[must_use]
    pub fn parity_index(&self, column: Column) -> Option<usize> {
        let k = self.data_strips();
        match column {
            Column::Data(i) if i < k => Some(i),
            Column::P if self.parity_strips() >= 1 => Some(k),
            Column::Q if self.parity_strips() == 2 => Some(k + 1),
            _ => None,
        }
    }

    /// The column at parity-order index `i` (data 0..k, then P, then Q); `None` past the last.
    #[must_use]
    pub fn parity_column(&self, i: usize) -> Option<Column> {
        let k = self.data_strips();
        match i.checked_sub(k) {
            None => Some(Column::Data(i)),
            Some(0) if self.parity_strips() >= 1 => Some(Column::P),
            Some(1) if self.parity_strips() == 2 => Some(Column::Q),
            _ => None,
        }
    }

    /// First member block of `stripe`'s strip on every member.
    #[must_use]
    pub const fn stripe_lba(&self, stripe: u64) -> u64 {
        self.data_start_lba + stripe * self.strip_blocks()
    }

    /// Maps a member block in the data area back to `(stripe, column, byte offset in the strip)`.
    #[must_use]
    pub fn locate_disk_block(&self, disk: usize, lba: u64) -> Option<(u64, Column, usize)> {
        let rel = lba.checked_sub(self.data_start_lba)?;
        let stripe = rel / self.strip_blocks();
        let off = (rel % self.strip_blocks()) as usize * self.block_bytes as usize;
        Some((stripe, self.column_of(stripe, disk)?, off))
    }

    /// Where array byte address `addr` lives: `(stripe, data strip, byte offset in the strip)`.
    /// Array addresses count data bytes only, stripe after stripe.
    #[must_use]
    pub fn locate(&self, addr: u64) -> Option<(u64, usize, usize)> {
        let sdb = self.stripe_data_bytes() as u64;
        let stripe = addr / sdb;
        if stripe >= self.stripes {
            return None;
        }
        let in_stripe = (addr % sdb) as usize;
        Some((
            stripe,
            in_stripe / self.strip_bytes(),
            in_stripe % self.strip_bytes(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(level: Level, n: usize) -> Geometry {
        Geometry::try_new(level, n, 4096, BlockSize::B512, 1 << 16, 100).unwrap()
    }

    #[test]
    fn md_left_symmetric_raid6() {
        // md raid6 left-symmetric, 5 disks: stripe 0 has P on disk 4, Q on disk 0, data 1,2,3.
        let g = geo(Level::Raid6, 5);
        assert_eq!(g.disk_of(0, Column::P), Some(4));
        assert_eq!(g.disk_of(0, Column::Q), Some(0));
        assert_eq!(g.disk_of(0, Column::Data(0)), Some(1));
        assert_eq!(g.disk_of(1, Column::P), Some(3));
        assert_eq!(g.disk_of(1, Column::Q), Some(4));
        assert_eq!(g.disk_of(1, Column::Data(0)), Some(0));
        assert_eq!(g.disk_of(4, Column::P), Some(0));
        assert_eq!(g.disk_of(4, Column::Q), Some(1));
    }

    #[test]
    fn md_left_symmetric_raid5() {
        // md raid5 left-symmetric, 4 disks: stripe 0: D0 D1 D2 P; stripe 1: D1 D2 P D0 as disks
        // 0..3 hold data 1, 2, P, 0.
        let g = geo(Level::Raid5, 4);
        let row = |s| {
            (0..4)
                .map(|d| g.column_of(s, d).unwrap())
                .collect::<heapless::Vec<_, 4>>()
        };
        assert_eq!(
            row(0).as_slice(),
            &[Column::Data(0), Column::Data(1), Column::Data(2), Column::P]
        );
        assert_eq!(
            row(1).as_slice(),
            &[Column::Data(1), Column::Data(2), Column::P, Column::Data(0)]
        );
    }

    #[test]
    fn disk_of_and_column_of_are_inverse() {
        for level in [
            Level::Raid0,
            Level::Raid1,
            Level::Raid10,
            Level::Raid5,
            Level::Raid6,
        ] {
            let (lo, hi) = level.disk_range();
            for n in lo..=hi {
                if level == Level::Raid10 && n % 2 == 1 {
                    continue;
                }
                let g = geo(level, n);
                for s in 0..(2 * n as u64) {
                    for d in 0..n {
                        let c = g.column_of(s, d).unwrap();
                        assert_eq!(g.disk_of(s, c), Some(d), "{level:?} n={n} s={s} d={d}");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_geometries_are_refused() {
        let b = BlockSize::B512;
        assert_eq!(
            Geometry::try_new(Level::Raid6, 3, 4096, b, 1 << 20, 0),
            Err(GeometryError::DiskCount)
        );
        assert_eq!(
            Geometry::try_new(Level::Raid10, 5, 4096, b, 1 << 20, 0),
            Err(GeometryError::DiskCount)
        );
        assert_eq!(
            Geometry::try_new(Level::Raid5, 33, 4096, b, 1 << 20, 0),
            Err(GeometryError::DiskCount)
        );
        assert_eq!(
            Geometry::try_new(Level::Raid5, 4, 6144, b, 1 << 20, 0),
            Err(GeometryError::StripSize)
        );
        assert_eq!(
            Geometry::try_new(Level::Raid5, 4, 2048, b, 1 << 20, 0),
            Err(GeometryError::StripSize)
        );
        assert_eq!(
            Geometry::try_new(Level::Raid5, 4, 2 << 20, b, 1 << 30, 0),
            Err(GeometryError::StripSize)
        );
        assert_eq!(
            Geometry::try_new(Level::Raid5, 4, 4096, b, 7, 0),
            Err(GeometryError::TooSmall)
        );
    }

    #[test]
    fn data_area_starts_on_a_strip_boundary() {
        let g = Geometry::try_new(Level::Raid5, 4, 65536, BlockSize::B4096, 1000, 5).unwrap();
        assert_eq!(g.strip_blocks(), 16);
        assert_eq!(g.data_start_lba(), 16);
        assert_eq!(g.stripes(), (1000 - 16) / 16);
        assert_eq!(g.stripe_data_bytes(), 3 * 65536);
        assert_eq!(g.locate(65536 * 3 + 70000), Some((1, 1, 70000 - 65536)));
    }
}
