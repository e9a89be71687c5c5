//! Regression test (fixed; found by the fault campaign, seeds 41, 67, 76, 80, 91, … shrunk to two steps): a member whose
//! next I/Os fail with a retryable error (a transport error or timeout, which the array retries
//! three times everywhere else) is refused at import as "holds no raidcore superblock": import
//! reads the superblocks without retrying. The pool then imports degraded (or, with a member
//! already missing, not at all) although every disk is healthy.

use raidcore::format::LUN_BLOCK;
use raidcore::pool::{ImportOptions, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::BlockSize;
use raidcore_sim::disk::MemDisk;
use raidcore_sim::fault::{Fault, FaultConfig, FaultyDisk, TransientKind};
use raidcore_tests::assert_history_passes;

type FPool = Pool<FaultyDisk<MemDisk>, Vec<u8>, 8, 4, 16, 4>;

/// The campaign's shrunk history: a transient fault of 3 operations on member 2, a power cut,
/// import.
const HISTORY: &str = "\
shape seed=67 level=raid6 disks=5 spares=2 block=512 disk_blocks=19136 strip=32768 extent=32 compress=0 zil=64 seg_stripes=2 reserved=4 cleaner=2 step=2 idle=33 cache=1048576
transient slot=2 ops=3
power_cut shuffle=4293541467
";

#[test]
fn campaign_history_passes() {
    assert_history_passes(HISTORY);
}

/// The same with the pool API: RAID-5 over three faulty memory disks, clean shutdown, two
/// transport errors pending on member 0, import.
#[test]
fn import_retries_transient_errors() {
    let cfg = PoolConfig {
        level: Level::Raid5,
        strip_bytes: 4096,
        max_extent_blocks: 4,
        zil_slots: 16,
        segment_stripes: 4,
        max_segments: 64,
        ..PoolConfig::default()
    };
    let disks: Vec<FaultyDisk<MemDisk>> = (0..3)
        .map(|i| {
            FaultyDisk::with_config(
                MemDisk::new(BlockSize::B512, 4 << 11).unwrap(),
                i,
                FaultConfig {
                    volatile_cache: false,
                    ..FaultConfig::default()
                },
            )
        })
        .collect();
    let handle = disks[0].handle();
    let mem = vec![0u8; FPool::memory_bytes(&cfg, 3)];
    let mut pool = FPool::create(disks, Vec::new(), cfg, [9; 16], mem).unwrap();
    let lun = pool.create_lun("a", 16).unwrap();
    pool.write(lun, 0, &vec![1u8; LUN_BLOCK], true).unwrap();
    let (members, spares, mem) = pool.shutdown().unwrap();
    handle.inject(Fault::Transient {
        kind: TransientKind::Transport,
        ops: 2,
    });
    let opts = ImportOptions {
        config: cfg,
        skip_refused: true,
    };
    let (_pool, report) = FPool::import(members.into_iter().flatten().chain(spares), opts, mem)
        .unwrap_or_else(|e| panic!("import: {e}"));
    assert!(
        report.refused.is_empty() && report.missing == 0,
        "a healthy member was left out: {report:?}"
    );
}
