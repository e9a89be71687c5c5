//! Regression test (fault campaign, seed 710 shrunk): RAID-6, lost writes armed on two
//! members, a write, flush, power cut. The stripe holding the log head lost two columns
//! silently; import looked for the first item's header with at most one member rebuilt, found
//! none, and stopped the roll-forward there, losing the flushed write. Headers are now sought
//! like items: plainly, then with each member, then (RAID-6) each pair rebuilt.

use raidcore_tests::assert_history_passes;

const SEED_710: &str = "\
shape seed=710 level=raid6 disks=8 spares=2 block=512 disk_blocks=3672 strip=4096 extent=2 compress=1 zil=32 seg_stripes=3 reserved=4 cleaner=2 step=2 idle=314 cache=1048576
create_lun blocks=16
create_lun blocks=15
lose slot=6
lose slot=4
write lun=1 lba=941 blocks=12 fua=0 tag=10
flush
power_cut shuffle=4272495041
";

#[test]
fn raid6_log_head_with_two_lost_columns_rolls_forward() {
    assert_history_passes(SEED_710);
}
