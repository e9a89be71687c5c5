//! Regression test (fault campaign, seed 728 shrunk): the log stuck at a full segment. RAID-5,
//! a member failed by hand and a spare rebuilt; the rebuild's checkpoints filled the current
//! segment exactly while no next segment was reserved, and the next checkpoint reserved one
//! but left the log at the full segment's end, so the next append (here: shutdown's checkpoint)
//! failed with "log segments exhausted" on an almost empty pool. The log now moves on to the
//! next reserved segment whenever its current one is full.

use raidcore_tests::assert_history_passes;

const SEED_728: &str = "\
shape seed=728 level=raid5 disks=5 spares=2 block=512 disk_blocks=4608 strip=32768 extent=1 compress=0 zil=32 seg_stripes=1 reserved=2 cleaner=1 step=8 idle=216 cache=4194304
create_lun blocks=320
create_lun blocks=255
write lun=1 lba=46 blocks=29 fua=0 tag=1
write lun=1 lba=75 blocks=9 fua=0 tag=2
write lun=1 lba=63 blocks=20 fua=0 tag=3
write lun=1 lba=0 blocks=18 fua=0 tag=4
write lun=1 lba=55 blocks=4 fua=0 tag=5
write lun=1 lba=58 blocks=3 fua=0 tag=6
write lun=1 lba=61 blocks=27 fua=0 tag=7
write lun=0 lba=86 blocks=32 fua=0 tag=13
write lun=1 lba=83 blocks=14 fua=1 tag=14
write lun=0 lba=9 blocks=1 fua=0 tag=15
write lun=0 lba=10 blocks=7 fua=0 tag=16
write lun=0 lba=17 blocks=21 fua=0 tag=17
fail slot=2 admin=1
maintenance calls=3
";

#[test]
fn log_moves_on_from_a_segment_filled_exactly() {
    assert_history_passes(SEED_728);
}
