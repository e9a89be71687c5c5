//! The pool a seed runs on: RAID level, member and spare count, block size, strip and extent
//! size, compression, intent-log and segment settings, disk size and the member write cache.
//! Disks are sparse memory disks sized so the pool has a chosen number of segments (a few MiB
//! to a few tens of MiB each).

use raidcore::pool::PoolConfig;
use raidcore::raid::{ArrayConfig, Level};
use raidcore_hal::BlockSize;

use super::source::Source;

/// Cached map pages of a campaign pool (the `P` of [`super::CampPool`]).
pub const CAMPAIGN_PAGES: usize = 16;
/// Open extents of a campaign pool (the `S` of [`super::CampPool`]).
pub const CAMPAIGN_STREAMS: usize = 4;
/// LUN slots of a campaign pool (the `L` of [`super::CampPool`]).
pub const CAMPAIGN_LUNS: usize = 4;
/// Member plus spare disks a campaign pool holds at most (the `N` of [`super::CampPool`]).
pub const CAMPAIGN_DISKS: usize = 16;

/// Everything fixed about one seed's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The seed (pool UUID, disk fault generators and write contents derive from it).
    pub seed: u64,
    /// RAID level.
    pub level: Level,
    /// Members.
    pub disks: u8,
    /// Hot spares at creation.
    pub spares: u8,
    /// Member block size.
    pub block: BlockSize,
    /// Member size in blocks.
    pub disk_blocks: u64,
    /// Strip size in bytes (4–64 KiB).
    pub strip_bytes: u32,
    /// Largest extent in 4 KiB blocks.
    pub max_extent_blocks: u8,
    /// LZ4 compression of extents.
    pub compression: bool,
    /// Largest compressed extent in 4 KiB blocks (the unit extents are compressed in).
    pub compress_unit_blocks: u8,
    /// Copies of each metadata item (1, or 2 with ditto copies).
    pub metadata_copies: u8,
    /// Intent-log slots per member.
    pub zil_slots: u32,
    /// Smallest segment, in stripes.
    pub segment_stripes: u32,
    /// Segments the log may fill between checkpoints.
    pub reserved_segments: u8,
    /// Free segments kept for the cleaner.
    pub cleaner_reserve: u32,
    /// Stripes one maintenance call rebuilds or scrubs.
    pub stripes_per_step: u32,
    /// Idle time after which an open extent closes (campaign time units).
    pub idle_close: u64,
    /// Volatile write cache per member, in bytes.
    pub cache_bytes: u64,
    /// The pool has a dedicated intent-log device (on the same power rail, with its own
    /// volatile cache), which may die mid-run.
    pub log_device: bool,
}

/// Most segments a campaign pool plans for (sizes its segment table).
const MAX_SEGMENTS: u32 = 256;

impl Shape {
    /// Failures the level tolerates with these members.
    #[must_use]
    pub fn tolerance(&self) -> usize {
        self.level.tolerance(usize::from(self.disks))
    }

    /// The pool configuration.
    #[must_use]
    pub fn config(&self) -> PoolConfig {
        PoolConfig {
            level: self.level,
            strip_bytes: self.strip_bytes,
            max_extent_blocks: self.max_extent_blocks,
            compression: self.compression,
            compress_unit_blocks: self.compress_unit_blocks,
            metadata_copies: self.metadata_copies,
            zil_slots: self.zil_slots,
            segment_stripes: self.segment_stripes,
            max_segments: MAX_SEGMENTS,
            reserved_segments: self.reserved_segments,
            cleaner_reserve: self.cleaner_reserve,
            idle_close: self.idle_close,
            array: ArrayConfig::default(),
            stripes_per_step: self.stripes_per_step,
            // The campaign runs maintenance until idle; pacing would only change when.
            background: None,
        }
    }

    /// Draws a shape. `small` keeps everything minimal (fuzzing).
    pub fn generate(seed: u64, src: &mut Source<'_>, small: bool) -> Shape {
        let level = match src.weighted(&[6, 14, 12, 30, 38]) {
            0 => Level::Raid0,
            1 => Level::Raid1,
            2 => Level::Raid10,
            3 => Level::Raid5,
            _ => Level::Raid6,
        };
        let disks = match level {
            Level::Raid0 => src.range(2, 5),
            Level::Raid1 => src.range(2, 4),
            Level::Raid10 => 2 * src.range(2, 4),
            Level::Raid5 => src.range(3, if small { 5 } else { 8 }),
            Level::Raid6 => src.range(4, if small { 6 } else { 10 }),
        } as u8;
        let spares = src.weighted(&[45, 35, 20]) as u8;
        let block = if src.chance(700) {
            BlockSize::B512
        } else {
            BlockSize::B4096
        };
        let strip_bytes = 4096u32 << src.below(if small { 2 } else { 5 });
        let max_extent_blocks = [1u8, 2, 4, 4, 8, 8, 16, 32][src.below(8) as usize];
        let compression = src.chance(700);
        let zil_slots = [16u32, 16, 24, 32, 64][src.below(5) as usize];
        let segment_stripes = 1 + src.below(4) as u32;
        let reserved_segments = src.range(2, 4) as u8;
        let cleaner_reserve = src.range(1, 2) as u32;
        let stripes_per_step = [1u32, 2, 4, 8, 16][src.below(5) as usize];
        let idle_close = src.range(20, 400);
        let cache_bytes = [256u64 << 10, 1 << 20, 4 << 20, 64 << 20][src.below(4) as usize];
        let target_segments = if small {
            u32::from(reserved_segments) + cleaner_reserve + 6
        } else {
            src.range(
                u64::from(reserved_segments) + u64::from(cleaner_reserve) + 6,
                28,
            ) as u32
        };
        let mut s = Shape {
            seed,
            level,
            disks,
            spares,
            block,
            disk_blocks: 0,
            strip_bytes,
            max_extent_blocks,
            compression,
            compress_unit_blocks: unit_of(seed, max_extent_blocks),
            metadata_copies: copies_of(seed),
            zil_slots,
            segment_stripes,
            reserved_segments,
            cleaner_reserve,
            stripes_per_step,
            idle_close,
            cache_bytes,
            log_device: log_device_of(seed),
        };
        s.disk_blocks = s.plan_disk_blocks(target_segments);
        s
    }

    /// Data strips per stripe.
    fn data_strips(&self) -> u64 {
        let d = u64::from(self.disks);
        match self.level {
            Level::Raid0 => d,
            Level::Raid1 => 1,
            Level::Raid10 => d / 2,
            Level::Raid5 => d - 1,
            Level::Raid6 => d - 2,
        }
    }

    /// Member size giving about `segments` segments, following the pool's segment planning (a
    /// segment holds a checkpoint's worst case twice over; see `Pool::create`).
    fn plan_disk_blocks(&self, segments: u32) -> u64 {
        let strip = u64::from(self.strip_bytes);
        let sdb = self.data_strips() * strip;
        let max_item = (64 + u64::from(self.max_extent_blocks) * 4096).div_ceil(512) * 512;
        let need = 2
            * (CAMPAIGN_PAGES as u64 * 4096
                + CAMPAIGN_STREAMS as u64 * max_item
                + 64 * 1024
                + 8 * u64::from(MAX_SEGMENTS))
            + 2 * sdb;
        let seg_stripes = u64::from(self.segment_stripes).max(need.div_ceil(sdb));
        let stripes = u64::from(segments) * seg_stripes + 1;
        let bs = self.block.bytes() as u64;
        let strip_blocks = strip / bs;
        let label = ((2 + 8 + u64::from(self.zil_slots)) * (4096 / bs)).div_ceil(strip_blocks)
            * strip_blocks;
        label + stripes * strip_blocks
    }

    /// One line: `shape seed=… level=… …` (parsed back by [`Shape::parse`]). `unit=` is left
    /// out where the unit is the whole extent, so histories written before units were drawn
    /// print as they were.
    #[must_use]
    pub fn to_line(&self) -> String {
        let unit = if self.compress_unit_blocks == self.max_extent_blocks {
            String::new()
        } else {
            format!(" unit={}", self.compress_unit_blocks)
        };
        let copies = if self.metadata_copies > 1 {
            format!(" copies={}", self.metadata_copies)
        } else {
            String::new()
        };
        let unit = unit + &copies + if self.log_device { " log=1" } else { "" };
        format!(
            "shape seed={} level={} disks={} spares={} block={} disk_blocks={} strip={} extent={} \
             compress={}{unit} zil={} seg_stripes={} reserved={} cleaner={} step={} idle={} \
             cache={}",
            self.seed,
            self.level.name(),
            self.disks,
            self.spares,
            self.block.bytes(),
            self.disk_blocks,
            self.strip_bytes,
            self.max_extent_blocks,
            u8::from(self.compression),
            self.zil_slots,
            self.segment_stripes,
            self.reserved_segments,
            self.cleaner_reserve,
            self.stripes_per_step,
            self.idle_close,
            self.cache_bytes
        )
    }

    /// Parses [`Shape::to_line`].
    pub fn parse(line: &str) -> Result<Shape, String> {
        let kv = super::step::key_values(line, "shape")?;
        let get = |k: &str| -> Result<u64, String> {
            kv.get(k)
                .ok_or_else(|| format!("shape: missing {k}"))?
                .parse::<u64>()
                .map_err(|e| format!("shape: {k}: {e}"))
        };
        let level = match kv.get("level").map(String::as_str) {
            Some("raid0") => Level::Raid0,
            Some("raid1") => Level::Raid1,
            Some("raid10") => Level::Raid10,
            Some("raid5") => Level::Raid5,
            Some("raid6") => Level::Raid6,
            other => return Err(format!("shape: bad level {other:?}")),
        };
        let block = match get("block")? {
            512 => BlockSize::B512,
            4096 => BlockSize::B4096,
            b => return Err(format!("shape: bad block size {b}")),
        };
        let extent = get("extent")? as u8;
        Ok(Shape {
            seed: get("seed")?,
            level,
            disks: get("disks")? as u8,
            spares: get("spares")? as u8,
            block,
            disk_blocks: get("disk_blocks")?,
            strip_bytes: get("strip")? as u32,
            max_extent_blocks: extent,
            compression: get("compress")? != 0,
            // Histories written before units were drawn compressed whole extents.
            compress_unit_blocks: kv
                .get("unit")
                .map_or(Ok(u64::from(extent)), |_| get("unit"))?
                as u8,
            metadata_copies: kv.get("copies").map_or(Ok(1), |_| get("copies"))? as u8,
            zil_slots: get("zil")? as u32,
            segment_stripes: get("seg_stripes")? as u32,
            reserved_segments: get("reserved")? as u8,
            cleaner_reserve: get("cleaner")? as u32,
            stripes_per_step: get("step")? as u32,
            idle_close: get("idle")?,
            cache_bytes: get("cache")?,
            // Histories written before log devices had none.
            log_device: kv.get("log").map_or(Ok(0), |_| get("log"))? != 0,
        })
    }
}

/// Metadata copies of seed `seed`'s pool: two (ditto copies) in half the seeds, worked out
/// from the seed as [`unit_of`] is.
fn copies_of(seed: u64) -> u8 {
    if seed.wrapping_mul(0xd6e8_feb8_6659_fd93) >> 63 == 1 {
        2
    } else {
        1
    }
}

/// Whether seed `seed`'s pool has a log device: a quarter of the seeds, worked out from the
/// seed as [`unit_of`] is.
fn log_device_of(seed: u64) -> bool {
    seed.wrapping_mul(0xa076_1d64_78bd_642f) >> 62 == 0
}

/// The compression unit of seed `seed`'s pool with extents of `max` blocks: the whole extent
/// in half the seeds, a half or a quarter of it in the others. Worked out from the seed, not
/// drawn from the history's source, so every other draw of a seed stays as it was.
fn unit_of(seed: u64, max: u8) -> u8 {
    let pick = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 62;
    match pick {
        0 => (max / 4).max(1),
        1 => (max / 2).max(1),
        _ => max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_line_round_trips_and_an_old_one_compresses_whole_extents() {
        let old = "shape seed=5 level=raid5 disks=4 spares=1 block=512 disk_blocks=7040 \
                   strip=65536 extent=8 compress=1 zil=16 seg_stripes=1 reserved=3 cleaner=2 \
                   step=4 idle=273 cache=262144";
        let s = Shape::parse(old).unwrap();
        assert_eq!(
            s.compress_unit_blocks, 8,
            "a line without unit= is a whole extent"
        );
        assert_eq!(s.to_line(), old, "and prints as it was");
        let halved = Shape {
            compress_unit_blocks: 4,
            ..s
        };
        assert!(halved.to_line().contains(" unit=4 "));
        let dittos = Shape {
            metadata_copies: 2,
            ..halved
        };
        assert!(dittos.to_line().contains(" unit=4 copies=2 "));
        assert_eq!(Shape::parse(&dittos.to_line()).unwrap(), dittos);
        assert_eq!(s.metadata_copies, 1, "a line without copies= has one");
        let copies: Vec<u8> = (0..64).map(copies_of).collect();
        assert!(copies.contains(&1) && copies.contains(&2));
        assert_eq!(Shape::parse(&halved.to_line()).unwrap(), halved);
        let units: Vec<u8> = (0..64).map(|seed| unit_of(seed, 8)).collect();
        assert!(units.contains(&2) && units.contains(&4) && units.contains(&8));
        assert_eq!(unit_of(3, 1), 1, "never below one block");
    }
}
