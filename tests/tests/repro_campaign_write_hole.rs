//! Regression test (fault campaign, seed 102 shrunk): the RAID write hole. RAID-5, a power cut
//! armed to fire in the middle of a checkpoint: the stripe being written reached some members
//! and not others. Roll-forward accepted its items (their data columns had landed, their
//! checksums held) but its parity was stale, so the next scrub of a pool without any silent
//! damage "repaired" it; a member failure before that scrub would have rebuilt garbage. Import
//! now checks every stripe the log wrote since the checkpoint and rewrites parity that disagrees
//! with checked data.

use raidcore_tests::assert_history_passes;

const SEED_102: &str = "\
shape seed=102 level=raid5 disks=7 spares=0 block=4096 disk_blocks=1888 strip=65536 extent=32 compress=1 zil=24 seg_stripes=1 reserved=3 cleaner=1 step=16 idle=133 cache=262144
create_lun blocks=9
arm_power_cut writes=103 shuffle=3228593122
delete_lun lun=0
create_lun blocks=15
create_lun blocks=11
write lun=0 lba=109 blocks=1 fua=1 tag=9
lose slot=1
create_lun blocks=15
scrub
write lun=0 lba=62 blocks=1 fua=1 tag=21
create_lun blocks=13
maintenance calls=1
scrub
maintenance calls=1
scrub
maintenance calls=1
";

#[test]
fn import_resyncs_a_stripe_torn_by_a_power_cut() {
    assert_history_passes(SEED_102);
}
