//! Regression test (fixed; found by the fault campaign, seed 167 shrunk; the most frequent campaign failure): with no
//! fault at all, deleting every LUN and creating a new one (which reuses LUN slot 0), writing
//! one block to it and shutting the pool down cleanly, the block no longer reads after import:
//! `IoError::Corrupt(FormatError::Bounds)` ("metadata damaged: field out of range"). Deleting
//! one LUN of two and re-creating it, with other steps between, fails the same way in about
//! 60 of 300 campaign seeds.

use raidcore::format::LUN_BLOCK;
use raidcore::pool::{ImportOptions, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::BlockSize;
use raidcore_sim::disk::MemDisk;
use raidcore_tests::assert_history_passes;

type MemPool = Pool<MemDisk, Vec<u8>, 8, 4, 16, 4>;

/// The campaign's shrunk history (replayed with every campaign check).
const HISTORY: &str = "\
shape seed=167 level=raid10 disks=8 spares=2 block=4096 disk_blocks=624 strip=65536 extent=4 compress=0 zil=16 seg_stripes=3 reserved=2 cleaner=1 step=2 idle=252 cache=262144
create_lun blocks=15
create_lun blocks=12
delete_lun lun=0
delete_lun lun=0
create_lun blocks=12
write lun=0 lba=277 blocks=1 fua=0 tag=44
";

#[test]
fn campaign_history_passes() {
    assert_history_passes(HISTORY);
}

/// The same with the pool API alone, on a three-disk RAID-5.
#[test]
fn recreated_lun_reads_back_after_import() {
    let cfg = PoolConfig {
        level: Level::Raid5,
        strip_bytes: 4096,
        max_extent_blocks: 4,
        zil_slots: 16,
        segment_stripes: 4,
        max_segments: 64,
        ..PoolConfig::default()
    };
    let disks: Vec<MemDisk> = (0..3)
        .map(|_| MemDisk::new(BlockSize::B512, 4 << 11).unwrap())
        .collect();
    let mem = vec![0u8; MemPool::memory_bytes(&cfg, 3)];
    let mut pool = MemPool::create(disks, Vec::new(), cfg, [7; 16], mem).unwrap();
    let a = pool.create_lun("a", 15).unwrap();
    let b = pool.create_lun("b", 12).unwrap();
    pool.delete_lun(a).unwrap();
    pool.delete_lun(b).unwrap();
    let c = pool.create_lun("c", 12).unwrap();
    let data = vec![0x5au8; LUN_BLOCK];
    pool.write(c, 1, &data, false).unwrap();
    let mut buf = vec![0u8; LUN_BLOCK];
    pool.read(c, 1, &mut buf).unwrap();
    assert_eq!(buf, data, "before shutdown");
    let (members, spares, mem) = pool.shutdown().unwrap();
    let disks = members.into_iter().flatten().chain(spares);
    let opts = ImportOptions {
        config: cfg,
        skip_refused: false,
    };
    let (mut pool, _) = MemPool::import(disks, opts, mem).unwrap();
    let c = pool.lun_by_name("c").expect("LUN c after import");
    pool.read(c, 1, &mut buf)
        .unwrap_or_else(|e| panic!("read of the re-created LUN after import: {e}"));
    assert_eq!(buf, data, "after import");
}
