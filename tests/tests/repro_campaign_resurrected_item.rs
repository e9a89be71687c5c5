//! Regression test (fault campaign, seed 5262 shrunk): a write dropped by one recovery came
//! back at the next. RAID-6 rebuilding onto a spare; a power cut cut the log short of a
//! write's item, and the import's checkpoint brought the log head to exactly that item's
//! address with exactly the sequence number it carried (the tables and padding it wrote took
//! the same count of numbers as the items they replaced). After a second power cut the
//! roll-forward accepted the leftover item, and a block that had read version 17 now read 23.
//! Sequence numbers now jump, at every recovery, past any that a leftover could carry.

use raidcore_tests::assert_history_passes;

const SEED_5262: &str = "\
shape seed=5262 level=raid6 disks=6 spares=2 block=512 disk_blocks=2736 strip=4096 extent=1 compress=0 zil=16 seg_stripes=4 reserved=4 cleaner=1 step=4 idle=63 cache=67108864
create_lun blocks=14
power_cut shuffle=183832881
write lun=0 lba=408 blocks=1 fua=0 tag=1
write lun=0 lba=408 blocks=1 fua=0 tag=2
write lun=0 lba=408 blocks=1 fua=0 tag=3
write lun=0 lba=0 blocks=1 fua=0 tag=4
delete_lun lun=0
create_lun blocks=47
write lun=0 lba=4 blocks=24 fua=0 tag=9
write lun=0 lba=28 blocks=3 fua=0 tag=10
write lun=0 lba=408 blocks=1 fua=0 tag=11
power_cut shuffle=3064401991
write lun=0 lba=31 blocks=4 fua=0 tag=12
write lun=0 lba=0 blocks=20 fua=0 tag=13
write lun=0 lba=20 blocks=7 fua=0 tag=14
write lun=0 lba=27 blocks=1 fua=0 tag=15
write lun=0 lba=28 blocks=1 fua=0 tag=16
write lun=0 lba=29 blocks=1 fua=0 tag=17
arm_power_cut writes=98 shuffle=1015532314
write lun=0 lba=408 blocks=1 fua=0 tag=18
write lun=0 lba=30 blocks=13 fua=0 tag=19
write lun=0 lba=43 blocks=2 fua=0 tag=20
fail slot=3 admin=0
write lun=0 lba=45 blocks=1 fua=1 tag=21
write lun=0 lba=46 blocks=1 fua=0 tag=22
write lun=0 lba=26 blocks=9 fua=0 tag=23
write lun=0 lba=32 blocks=2 fua=0 tag=25
write lun=0 lba=25 blocks=7 fua=0 tag=26
write lun=0 lba=0 blocks=6 fua=0 tag=27
write lun=0 lba=42 blocks=3 fua=0 tag=28
power_cut shuffle=732198243
";

#[test]
fn a_write_dropped_by_one_recovery_stays_dropped_after_the_next() {
    assert_history_passes(SEED_5262);
}
