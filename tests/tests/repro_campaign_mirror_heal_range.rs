//! Regression tests (fault campaign, seeds 7738 and 2912 shrunk): four-way RAID-1 pools where
//! one copy had damage (bit rot, a misdirected write) inside an item and another copy had it
//! elsewhere in the same strip. A read that found the item good on one copy healed the other
//! copies by copying that copy's whole strips, bytes nobody had checked included, so the damage
//! outside the item spread to every copy and a later read of the neighbouring item found no
//! good copy ("data lost" within tolerance). Healing now rewrites only the item's own bytes
//! (`Array::heal_data`).

use raidcore_tests::assert_history_passes;

const SEED_7738: &str = "\
shape seed=7738 level=raid1 disks=4 spares=2 block=512 disk_blocks=21792 strip=8192 extent=8 compress=1 zil=32 seg_stripes=4 reserved=2 cleaner=1 step=8 idle=250 cache=262144
create_lun blocks=2010
write lun=0 lba=1138 blocks=30 fua=0 tag=18
write lun=0 lba=25 blocks=1 fua=0 tag=19
write lun=0 lba=1 blocks=1 fua=0 tag=30
write lun=0 lba=704 blocks=1 fua=0 tag=31
flush
write lun=0 lba=44 blocks=9 fua=0 tag=33
scrub
write lun=0 lba=861 blocks=4 fua=0 tag=34
write lun=0 lba=54 blocks=3 fua=0 tag=36
maintenance calls=2
write lun=0 lba=50 blocks=1 fua=0 tag=37
write lun=0 lba=58 blocks=1 fua=0 tag=39
write lun=0 lba=59 blocks=2 fua=0 tag=40
write lun=0 lba=1704 blocks=1 fua=0 tag=42
flush
write lun=0 lba=63 blocks=5 fua=0 tag=43
flush
bitrot slot=1 pick=1965472760 bits=4 label=0
write lun=0 lba=70 blocks=4 fua=0 tag=46
write lun=0 lba=58 blocks=1 fua=0 tag=47
write lun=0 lba=625 blocks=1 fua=0 tag=48
misdirect slot=0 pick=2256744112
write lun=0 lba=90 blocks=1 fua=0 tag=51
write lun=0 lba=541 blocks=1 fua=0 tag=52
";

const SEED_2912: &str = "\
shape seed=2912 level=raid1 disks=4 spares=2 block=512 disk_blocks=20992 strip=32768 extent=8 compress=1 zil=16 seg_stripes=4 reserved=4 cleaner=1 step=16 idle=34 cache=1048576
create_lun blocks=9
create_lun blocks=26
create_lun blocks=608
write lun=1 lba=47 blocks=1 fua=0 tag=1
flush
write lun=2 lba=0 blocks=18 fua=0 tag=4
write lun=2 lba=18 blocks=1 fua=0 tag=5
write lun=2 lba=19 blocks=9 fua=0 tag=6
write lun=2 lba=28 blocks=1 fua=0 tag=7
write lun=1 lba=0 blocks=7 fua=0 tag=9
tick dt=430
arm_power_cut writes=64 shuffle=3315174136
write lun=2 lba=543 blocks=1 fua=0 tag=11
write lun=2 lba=110 blocks=2 fua=0 tag=12
write lun=1 lba=7 blocks=4 fua=0 tag=13
write lun=1 lba=11 blocks=4 fua=0 tag=15
write lun=2 lba=18 blocks=1 fua=0 tag=16
flush
write lun=2 lba=59 blocks=4 fua=0 tag=18
write lun=0 lba=0 blocks=9 fua=0 tag=19
flush
write lun=0 lba=30 blocks=1 fua=0 tag=20
fail slot=2 admin=1
flush
scrub
delete_lun lun=0
maintenance calls=1
write lun=1 lba=21 blocks=3 fua=0 tag=27
write lun=0 lba=9 blocks=4 fua=0 tag=28
maintenance calls=2
read lun=2 lba=110 blocks=1
write lun=1 lba=24 blocks=7 fua=0 tag=29
misdirect slot=0 pick=1152225048
write lun=0 lba=20 blocks=3 fua=0 tag=33
flush
misdirect slot=1 pick=2972788338
";

#[test]
fn healing_an_item_does_not_spread_bit_rot_from_the_copy_that_checked() {
    assert_history_passes(SEED_7738);
}

#[test]
fn healing_after_misdirected_writes_on_two_copies_loses_nothing() {
    assert_history_passes(SEED_2912);
}
