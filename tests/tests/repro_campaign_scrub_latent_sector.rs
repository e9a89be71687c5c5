//! Regression tests (fault campaign): scrub and latent sector errors.
//!
//! Seed 478 (shrunk): RAID-5, a latent sector error on one member in a block no live item
//! covered (parity or dead data), a scrub, then a latent sector error on another member of the
//! same stripe. The scrub's stripe check skipped unreadable columns and called the stripe
//! consistent, so it never rewrote the bad block; the second error then lost data within the
//! level's tolerance. Scrub now rewrites in-sync columns it could not read from the others.
//!
//! Seed 138 (shrunk): the same repair must not count a member whose device died (its read
//! failed because it is gone): that is a rebuild's business, and a scrub of a pool without
//! silent damage repairs nothing.

use raidcore_tests::assert_history_passes;

const SEED_478: &str = "\
shape seed=478 level=raid5 disks=5 spares=0 block=512 disk_blocks=6432 strip=4096 extent=4 compress=1 zil=64 seg_stripes=2 reserved=4 cleaner=2 step=1 idle=193 cache=1048576
create_lun blocks=1836
write lun=0 lba=969 blocks=14 fua=0 tag=1
write lun=0 lba=0 blocks=2 fua=1 tag=3
write lun=0 lba=3 blocks=19 fua=0 tag=6
write lun=0 lba=22 blocks=1 fua=0 tag=7
power_cut shuffle=2340187633
write lun=0 lba=26 blocks=3 fua=0 tag=9
write lun=0 lba=1634 blocks=1 fua=0 tag=10
write lun=0 lba=29 blocks=1 fua=0 tag=11
create_lun blocks=918
write lun=1 lba=0 blocks=1 fua=0 tag=12
write lun=1 lba=1 blocks=1 fua=0 tag=13
tick dt=369
write lun=0 lba=1634 blocks=1 fua=0 tag=15
write lun=0 lba=46 blocks=3 fua=0 tag=16
write lun=1 lba=471 blocks=1 fua=0 tag=18
write lun=1 lba=2 blocks=2 fua=0 tag=19
flush
write lun=0 lba=46 blocks=3 fua=0 tag=21
write lun=1 lba=4 blocks=27 fua=0 tag=22
write lun=0 lba=476 blocks=5 fua=0 tag=24
flush
write lun=1 lba=15 blocks=26 fua=0 tag=27
medium slot=1 pick=3409918701 blocks=2 sticky=0 label=0
write lun=0 lba=1035 blocks=3 fua=0 tag=31
write lun=0 lba=45 blocks=12 fua=0 tag=33
write lun=1 lba=478 blocks=3 fua=0 tag=34
write lun=0 lba=1634 blocks=1 fua=0 tag=37
write lun=0 lba=477 blocks=2 fua=0 tag=39
write lun=0 lba=56 blocks=1 fua=0 tag=40
write lun=0 lba=194 blocks=1 fua=1 tag=42
write lun=0 lba=57 blocks=27 fua=0 tag=43
write lun=0 lba=84 blocks=1 fua=0 tag=44
delete_lun lun=0
scrub
write lun=0 lba=480 blocks=2 fua=0 tag=45
write lun=0 lba=74 blocks=6 fua=0 tag=46
write lun=0 lba=51 blocks=4 fua=0 tag=48
create_lun blocks=402
write lun=1 lba=0 blocks=1 fua=0 tag=49
flush
maintenance calls=5
medium slot=2 pick=427567471 blocks=2 sticky=0 label=0
";

const SEED_138: &str = "\
shape seed=138 level=raid6 disks=9 spares=0 block=512 disk_blocks=4960 strip=16384 extent=1 compress=1 zil=64 seg_stripes=4 reserved=3 cleaner=2 step=8 idle=33 cache=262144
fail slot=3 admin=0
scrub
maintenance calls=1
";

#[test]
fn scrub_rewrites_a_latent_sector_error_no_item_covers() {
    assert_history_passes(SEED_478);
}

#[test]
fn scrub_does_not_repair_onto_a_dead_member() {
    assert_history_passes(SEED_138);
}
