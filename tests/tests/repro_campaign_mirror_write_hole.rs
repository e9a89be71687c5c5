//! Regression test (fault campaign, seed 885 shrunk): the write hole on mirrors. RAID-1 with
//! four copies, a power cut armed to fire while a scrub's checkpoint was being written: two
//! copies of the stripes in flight got the new data, two kept the old. With no majority the
//! check named no copy, so import's resync and every scrub left them ("could not repair"); the
//! last of them also ended in an item that runs on into the open stripe, which stopped the item
//! walk short. The first readable copy, which every read uses and the item walk has just
//! checked, is now copied over the others, and the walk goes up to the log's head.

use raidcore_tests::assert_history_passes;

const SEED_885: &str = "\
shape seed=885 level=raid1 disks=4 spares=1 block=512 disk_blocks=7216 strip=8192 extent=1 compress=0 zil=32 seg_stripes=3 reserved=4 cleaner=1 step=4 idle=389 cache=67108864
create_lun blocks=156
create_lun blocks=19
write lun=1 lba=0 blocks=1 fua=0 tag=1
write lun=0 lba=9 blocks=1 fua=0 tag=2
write lun=0 lba=0 blocks=12 fua=0 tag=3
write lun=0 lba=91 blocks=1 fua=0 tag=4
write lun=0 lba=12 blocks=1 fua=0 tag=5
power_cut shuffle=3084837873
write lun=1 lba=78 blocks=8 fua=0 tag=6
write lun=0 lba=91 blocks=1 fua=0 tag=7
scrub
write lun=1 lba=18 blocks=19 fua=0 tag=10
write lun=1 lba=1 blocks=1 fua=0 tag=11
write lun=1 lba=2 blocks=1 fua=0 tag=12
write lun=1 lba=3 blocks=1 fua=0 tag=13
write lun=0 lba=5 blocks=1 fua=0 tag=14
write lun=1 lba=4 blocks=14 fua=0 tag=15
maintenance calls=3
write lun=0 lba=87 blocks=27 fua=0 tag=16
write lun=1 lba=18 blocks=1 fua=0 tag=17
medium slot=0 pick=2363648360 blocks=2 sticky=0 label=0
flush
write lun=1 lba=0 blocks=1 fua=0 tag=18
write lun=1 lba=2 blocks=1 fua=0 tag=19
write lun=1 lba=19 blocks=1 fua=0 tag=20
write lun=1 lba=20 blocks=4 fua=0 tag=21
read lun=0 lba=83 blocks=15
power_cut shuffle=551370712
write lun=1 lba=24 blocks=7 fua=0 tag=23
write lun=1 lba=77 blocks=1 fua=0 tag=24
write lun=1 lba=31 blocks=4 fua=0 tag=25
write lun=0 lba=12 blocks=1 fua=0 tag=26
write lun=1 lba=35 blocks=15 fua=0 tag=27
scrub
write lun=0 lba=18 blocks=18 fua=0 tag=28
write lun=1 lba=29 blocks=5 fua=0 tag=29
write lun=1 lba=2 blocks=1 fua=0 tag=33
write lun=0 lba=36 blocks=1 fua=0 tag=34
write lun=0 lba=17 blocks=1 fua=0 tag=35
arm_power_cut writes=119 shuffle=558611733
write lun=0 lba=37 blocks=2 fua=0 tag=36
maintenance calls=5
write lun=1 lba=24 blocks=1 fua=0 tag=50
scrub
maintenance calls=6
";

#[test]
fn import_resyncs_torn_mirror_copies() {
    assert_history_passes(SEED_885);
}
