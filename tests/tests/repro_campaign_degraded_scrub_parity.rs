//! Fault campaign, seed 6035 (shrunk): RAID-6 over five members. A write lost on member 0 (its
//! P or Q strip of a log stripe stayed stale), member 4's device failed, a scrub ran, then
//! member 3 failed too. With one member missing the scrub's parity check skipped the stripe
//! altogether ("with a column missing, parity can only be checked by the pool's checksums"),
//! and the item walk reads only data columns, so the stale parity strip stayed. The second
//! failure then reconstructed from it, and LUN 0 LBA 0 read "data lost" within tolerance (the
//! lost write was repairable while only one member was missing). Fixed: RAID-6 with one member
//! missing still checks its remaining redundancy (the missing column is rebuilt, then the other
//! parity compared), and once the walk has checked the stripe's items the scrub rewrites Q (or
//! P when Q is the missing one), which the reads' reconstruction did not use.

use raidcore_tests::assert_history_passes;

const SEED_6035: &str = "\
shape seed=6035 level=raid6 disks=5 spares=0 block=4096 disk_blocks=633 strip=4096 extent=8 compress=0 zil=24 seg_stripes=3 reserved=2 cleaner=2 step=4 idle=138 cache=262144
create_lun blocks=9
create_lun blocks=15
write lun=0 lba=0 blocks=9 fua=0 tag=1
lose slot=0
fail slot=4 admin=0
write lun=0 lba=22 blocks=13 fua=0 tag=20
scrub
maintenance calls=2
fail slot=3 admin=0
";

#[test]
fn degraded_raid6_scrub_repairs_a_stale_parity_strip() {
    assert_history_passes(SEED_6035);
}
