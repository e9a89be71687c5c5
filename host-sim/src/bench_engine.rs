//! `raidcore-sim bench engine`: the engine's CPU cost per 4 KiB operation, in this process, on
//! memory disks (no device model, no NBD, no threads), beside peers timed in the same run on the
//! same blocks: `memcpy` of each block, and `lz4_flex` compressing them alone in the units the
//! engine compresses in. A second table compares compression units (real data): the space each
//! costs and the random reads it buys.
//!
//! ## Method
//! A RAID-6 of 6 sparse memory disks ([`MemDisk`]), 64 KiB strips, LZ4 on, one LUN of `blocks`
//! 4 KiB blocks. Each round builds a new pool on the same disks (a first round, not counted,
//! has their memory allocated, so the rounds time the engine, not the allocator), writes every block in
//! LBA order (one flush every 256 writes, as the seed's voice streams), flushes and checkpoints,
//! then reads every block back 4 KiB at a time in LBA order (sequential) and in a seeded random
//! order (random), checking each. Figures are wall-clock µs per 4 KiB on one thread, the median
//! of the rounds; a ratio divides ours by the peer's or the other figure's median of the same
//! run. The data: incompressible blocks (`synthetic:0`) or this machine's own files (`real`).
//! Wall-clock figures on a shared machine: compare ratios, not runs.

// µs and ratios are f64 of counts far below 2^52.
#![allow(clippy::cast_precision_loss)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use raidcore::pool::{LUN_BLOCK, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::{BlockDevice, BlockSize};

use raidcore_host::dir::create::create_pool;

use crate::disk::MemDisk;
use crate::pooldir::CreateOptions;
use crate::workload::data::{DataKind, DataSource};

/// Blocks written per flush, as the seed's voice streams flush.
const FLUSH_EVERY: u64 = 256;

/// What `bench engine` runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Blocks written and read per round (the LUN's size).
    pub blocks: u64,
    /// Rounds per figure (the median is reported).
    pub rounds: usize,
    /// Member disk size of the normal pool, bytes.
    pub disk_bytes: u64,
    /// Member disk size of the large pool (write cost against pool size), bytes.
    pub large_disk_bytes: u64,
    /// Bytes of real data to read from this machine's files.
    pub real_bytes: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            blocks: 16_384,
            rounds: 5,
            disk_bytes: 256 << 20,
            large_disk_bytes: 4 << 30,
            real_bytes: 64 << 20,
        }
    }
}

/// One line of the table: our figure, the peer's, and the goal on their ratio.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineRow {
    /// What was timed.
    pub measure: String,
    /// Our median, µs per 4 KiB.
    pub ours_us: f64,
    /// What it is compared with.
    pub peer: String,
    /// The peer's median, µs per 4 KiB.
    pub peer_us: f64,
    /// `ours_us / peer_us`.
    pub ratio: f64,
    /// Issue 20's bound on the ratio (at most).
    pub goal_max: f64,
}

/// Per-round timings of one data kind on one pool setup, µs per 4 KiB, and the space the
/// extents took.
#[derive(Debug, Default, Clone)]
struct Rounds {
    write: Vec<f64>,
    read_seq: Vec<f64>,
    read_rand: Vec<f64>,
    /// Client bytes per byte of extent items in the log (headers and rounding included).
    space_ratio: f64,
}

/// One line of the compression-unit table: what a unit costs and gains.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnitRow {
    /// Compression unit, 4 KiB blocks.
    pub unit_blocks: u8,
    /// Client bytes per byte of extent items in the log.
    pub space_ratio: f64,
    /// Median µs per 4 KiB: writes, sequential reads, random reads.
    pub write_us: f64,
    /// See `write_us`.
    pub read_seq_us: f64,
    /// See `write_us`.
    pub read_rand_us: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

fn us_per_block(d: Duration, blocks: u64) -> f64 {
    d.as_secs_f64() * 1e6 / blocks.max(1) as f64
}

/// The blocks of one round: `blocks` × 4 KiB from `src`, block `i` at `i * 4096`.
fn content(src: &DataSource, blocks: u64) -> Vec<u8> {
    let mut out = vec![0u8; blocks as usize * LUN_BLOCK];
    for (i, b) in out.chunks_exact_mut(LUN_BLOCK).enumerate() {
        src.fill(i as u64, b);
    }
    out
}

/// How the pools of a bench are made: one LUN of `blocks` blocks, RAID-6 of 6 disks,
/// compressed in units of `unit` blocks.
fn create_options(disk_bytes: u64, blocks: u64, unit: u8) -> CreateOptions {
    CreateOptions {
        disks: 6,
        spares: 0,
        disk_bytes,
        block_size: BlockSize::B512,
        config: PoolConfig {
            level: Level::Raid6,
            strip_bytes: 64 << 10,
            compress_unit_blocks: unit,
            ..PoolConfig::default()
        },
        luns: 1,
        lun_bytes: blocks * LUN_BLOCK as u64,
        uuid: [0x5a; 16],
        overwrite: true,
        sparse: true,
    }
}

/// Six blank sparse memory disks of `disk_bytes`.
fn blank_disks(disk_bytes: u64) -> Result<Vec<MemDisk>, String> {
    (0..6)
        .map(|_| MemDisk::new(BlockSize::B512, disk_bytes / 512).map_err(|e| e.to_string()))
        .collect()
}

/// A seeded permutation of `0..n` (xorshift Fisher–Yates).
fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut s = seed | 1;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

/// One round on a new pool made on `disks` (which a round before may have written: their
/// memory is then allocated already, and the round times the engine, not the allocator): the
/// writes, then both read orders, each block checked. Returns the disks.
fn round(
    disks: Vec<MemDisk>,
    data: &[u8],
    (seed, unit): (u64, u8),
    r: &mut Rounds,
) -> Result<Vec<MemDisk>, String> {
    let blocks = (data.len() / LUN_BLOCK) as u64;
    let disk_bytes = disks.first().map_or(0, |d| d.block_count() * 512);
    let opts = create_options(disk_bytes, blocks, unit);
    let mut p = create_pool(disks, Vec::new(), &opts).map_err(|e| format!("pool: {e}"))?;
    let err = |what: &str, e: raidcore::error::IoError| format!("{what}: {e}");
    let t = Instant::now();
    for (lba, b) in (0u64..).zip(data.chunks_exact(LUN_BLOCK)) {
        p.write(0, lba, b, false).map_err(|e| err("write", e))?;
        if lba % FLUSH_EVERY == FLUSH_EVERY - 1 {
            p.flush().map_err(|e| err("flush", e))?;
        }
    }
    p.flush().map_err(|e| err("flush", e))?;
    r.write.push(us_per_block(t.elapsed(), blocks));
    let c = p.stats().counters;
    r.space_ratio = c.extent_raw_bytes as f64 / c.extent_log_bytes.max(1) as f64;
    p.checkpoint().map_err(|e| err("checkpoint", e))?;
    let mut buf = vec![0u8; LUN_BLOCK];
    for (order, out) in [
        ((0..blocks).collect::<Vec<u64>>(), &mut r.read_seq),
        (shuffled(blocks, seed), &mut r.read_rand),
    ] {
        let t = Instant::now();
        for &lba in &order {
            p.read(0, lba, &mut buf).map_err(|e| err("read", e))?;
            let at = lba as usize * LUN_BLOCK;
            if data.get(at..at + LUN_BLOCK) != Some(buf.as_slice()) {
                return Err(format!("LBA {lba} read back other data"));
            }
        }
        out.push(us_per_block(t.elapsed(), blocks));
    }
    Ok(p.into_parts().0.into_iter().flatten().collect())
}

/// The peers on the same blocks, µs per 4 KiB: (memcpy, lz4_flex compressing them in units of
/// `unit` blocks, as the engine does).
fn peers(data: &[u8], unit: u8) -> (f64, f64) {
    let blocks = (data.len() / LUN_BLOCK) as u64;
    let mut dst = vec![0u8; LUN_BLOCK];
    let t = Instant::now();
    for b in data.chunks_exact(LUN_BLOCK) {
        dst.copy_from_slice(black_box(b));
        black_box(&mut dst);
    }
    let copy = us_per_block(t.elapsed(), blocks);
    // As the engine calls it: one hash table reused from unit to unit.
    let unit = usize::from(unit) * LUN_BLOCK;
    let mut out = vec![0u8; lz4_flex::block::get_maximum_output_size(unit)];
    let mut table = if unit < 65535 {
        lz4_flex::block::CompressTable::small()
    } else {
        lz4_flex::block::CompressTable::large()
    };
    let t = Instant::now();
    for e in data.chunks(unit) {
        let n = lz4_flex::block::compress_into_with_table(black_box(e), &mut out, &mut table);
        black_box(n.unwrap_or(0));
    }
    (copy, us_per_block(t.elapsed(), blocks))
}

/// Runs the rounds of one data kind on one disk size, after one that warms the disks up (its
/// figures are dropped); also the peers' medians.
fn measure(
    data: &[u8],
    o: &EngineOptions,
    disk_bytes: u64,
    unit: u8,
) -> Result<(Rounds, f64, f64), String> {
    let warm = (0, unit);
    let mut disks = round(blank_disks(disk_bytes)?, data, warm, &mut Rounds::default())?;
    let mut r = Rounds::default();
    let (mut copy, mut lz4) = (Vec::new(), Vec::new());
    for k in 0..o.rounds {
        disks = round(disks, data, (k as u64 + 1, unit), &mut r)?;
        let (c, l) = peers(data, unit);
        copy.push(c);
        lz4.push(l);
    }
    Ok((r, median(&copy), median(&lz4)))
}

fn row(measure: String, ours: f64, peer: String, theirs: f64, goal_max: f64) -> EngineRow {
    EngineRow {
        measure,
        ours_us: ours,
        peer,
        peer_us: theirs,
        ratio: ours / theirs,
        goal_max,
    }
}

/// Runs the bench; `progress` hears what is being timed. Returns the table against the peers
/// and the compression-unit table (real data, each unit of [`UNITS`]).
///
/// # Errors
/// A pool that cannot be made, an operation that fails, a block read back wrong, or no real
/// data to read.
pub fn run(
    o: &EngineOptions,
    progress: impl Fn(&str),
) -> Result<(Vec<EngineRow>, Vec<UnitRow>), String> {
    let mut rows = Vec::new();
    let small = o.disk_bytes >> 20;
    let unit = PoolConfig::default().compress_unit_blocks;
    let mut units = Vec::new();
    for kind in [DataKind::Synthetic(0), DataKind::Real] {
        progress(&format!("{kind} data on 6 x {small} MiB"));
        let data = content(&DataSource::new(kind, o.real_bytes, 7)?, o.blocks);
        let (r, copy, lz4) = measure(&data, o, o.disk_bytes, unit)?;
        let (write, seq, rand) = (median(&r.write), median(&r.read_seq), median(&r.read_rand));
        rows.push(if kind == DataKind::Real {
            row(
                format!("write, {kind}"),
                write,
                "lz4_flex alone".into(),
                lz4,
                1.2,
            )
        } else {
            row(format!("write, {kind}"), write, "memcpy".into(), copy, 3.0)
        });
        let m = format!("random 4 KiB read, {kind}");
        rows.push(row(m, rand, "sequential read".into(), seq, 2.0));
        if kind != DataKind::Real {
            continue;
        }
        let large = o.large_disk_bytes >> 20;
        progress(&format!("{kind} data on 6 x {large} MiB"));
        let (big, _, _) = measure(&data, o, o.large_disk_bytes, unit)?;
        let m = format!("write, {kind}, 6 x {large} MiB disks");
        let peer = format!("6 x {small} MiB disks");
        rows.push(row(m, median(&big.write), peer, write, 1.1));
        for u in UNITS {
            progress(&format!("{kind} data compressed in units of {u} blocks"));
            let (r, _, _) = measure(&data, o, o.disk_bytes, u)?;
            units.push(UnitRow {
                unit_blocks: u,
                space_ratio: r.space_ratio,
                write_us: median(&r.write),
                read_seq_us: median(&r.read_seq),
                read_rand_us: median(&r.read_rand),
            });
        }
    }
    Ok((rows, units))
}

/// Compression units the unit table compares, in 4 KiB blocks.
pub const UNITS: [u8; 5] = [32, 16, 8, 4, 2];

/// The tables `bench engine` prints.
#[must_use]
pub fn format_table(rows: &[EngineRow], units: &[UnitRow], o: &EngineOptions) -> String {
    let mut s = format!(
        "bench engine: RAID-6 of 6 memory disks, 64 KiB strips, LZ4 on (units of {} blocks), \
         {} blocks of 4 KiB, median of {} rounds, wall-clock µs per 4 KiB on one thread\n  \
         {:<40} {:>9}  {:<22} {:>9} {:>7} {:>6}\n",
        PoolConfig::default().compress_unit_blocks,
        o.blocks,
        o.rounds,
        "measure",
        "raidcore",
        "peer",
        "peer",
        "ratio",
        "goal"
    );
    for r in rows {
        let met = if r.ratio <= r.goal_max {
            ""
        } else {
            " (not met)"
        };
        let _ = writeln!(
            s,
            "  {:<40} {:>9.2}  {:<22} {:>9.2} {:>6.2}x <={:.1}x{met}",
            r.measure, r.ours_us, r.peer, r.peer_us, r.ratio, r.goal_max
        );
    }
    s.push_str(
        "compression unit (real data): client bytes per log byte of extents, µs per 4 KiB\n  \
         unit  space ratio   write  seq read  rand read  rand/seq\n",
    );
    for u in units {
        let _ = writeln!(
            s,
            "  {:>4}  {:>11.3} {:>7.2} {:>9.2} {:>10.2} {:>8.2}x",
            u.unit_blocks,
            u.space_ratio,
            u.write_us,
            u.read_seq_us,
            u.read_rand_us,
            u.read_rand_us / u.read_seq_us
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permutation_holds_every_block_once() {
        let mut v = shuffled(1000, 3);
        assert_ne!(v, (0..1000).collect::<Vec<u64>>(), "shuffled");
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<u64>>());
    }

    #[test]
    fn a_small_round_reads_back_what_it_wrote() {
        let src = DataSource::new(DataKind::Synthetic(50), 0, 1).unwrap();
        let data = content(&src, 600);
        let mut r = Rounds::default();
        let disks = round(blank_disks(64 << 20).unwrap(), &data, (1, 8), &mut r).unwrap();
        round(disks, &data, (2, 2), &mut r).unwrap();
        assert!(
            r.space_ratio > 1.2,
            "half of each block compresses: {}",
            r.space_ratio
        );
        assert_eq!(
            (r.write.len(), r.read_seq.len(), r.read_rand.len()),
            (2, 2, 2)
        );
    }
}
