//! Regression tests (fault campaign, seeds 8516, 6523 and 153 shrunk).
//! - 8516: a latent sector error on one superblock copy and bit rot on the other, on one
//!   member: the scrub never looked at labels, so import later refused a good member. A scrub
//!   now rewrites a superblock copy that fails its checks.
//! - 6523: a pad item's header, damaged on one mirror copy, was read from another copy but never
//!   healed (pads have no payload read that heals); the scrub then kept that copy's strip over
//!   the others, every walk ended at the pad, and an unchecked majority vote later overwrote the
//!   only good copy of a stripe. Pad headers found through redundancy are now healed.
//! - 153: a rebuild target failed mid-stripe and a spare took its slot; the rebuild went on from
//!   its old cursor, naming the new disk rebuilt below a stripe it never received.

use raidcore_tests::assert_history_passes;

const SEED_8516: &str = "\
shape seed=8516 level=raid5 disks=7 spares=0 block=4096 disk_blocks=980 strip=4096 extent=16 compress=1 zil=24 seg_stripes=3 reserved=4 cleaner=1 step=4 idle=294 cache=4194304
create_lun blocks=9
flush
medium slot=1 pick=1458176685 blocks=2 sticky=0 label=1
bitrot slot=1 pick=2587509937 bits=16 label=1
scrub
maintenance calls=1
power_cut shuffle=2752978490
";

const SEED_6523: &str = "\
shape seed=6523 level=raid1 disks=3 spares=0 block=4096 disk_blocks=5200 strip=65536 extent=32 compress=1 zil=16 seg_stripes=4 reserved=3 cleaner=1 step=16 idle=341 cache=1048576
create_lun blocks=150
add_spare
write lun=0 lba=0 blocks=1 fua=0 tag=3
flush
write lun=0 lba=1 blocks=4 fua=0 tag=6
write lun=1 lba=10 blocks=16 fua=0 tag=7
misdirect slot=0 pick=3930490984
flush
scrub
maintenance calls=1
lose slot=1
fail slot=0 admin=0
write lun=1 lba=67 blocks=26 fua=0 tag=69
write lun=2 lba=61 blocks=1 fua=0 tag=73
write lun=0 lba=28 blocks=1 fua=0 tag=74
write lun=1 lba=2302 blocks=1 fua=0 tag=75
scrub
write lun=2 lba=60 blocks=1 fua=0 tag=76
maintenance calls=1
";

const SEED_153: &str = "\
shape seed=153 level=raid1 disks=2 spares=2 block=512 disk_blocks=21504 strip=65536 extent=8 compress=0 zil=16 seg_stripes=3 reserved=3 cleaner=2 step=2 idle=178 cache=4194304
create_lun blocks=9
create_lun blocks=80
create_lun blocks=19
write lun=0 lba=0 blocks=4 fua=0 tag=1
write lun=1 lba=0 blocks=10 fua=0 tag=3
arm_power_cut writes=67 shuffle=2896123265
flush
write lun=1 lba=105 blocks=20 fua=0 tag=4
write lun=1 lba=3 blocks=8 fua=0 tag=6
write lun=1 lba=0 blocks=3 fua=0 tag=7
write lun=2 lba=0 blocks=12 fua=0 tag=8
write lun=0 lba=17 blocks=1 fua=0 tag=9
write lun=1 lba=124 blocks=12 fua=0 tag=10
fail slot=0 admin=0
flush
write lun=0 lba=5 blocks=14 fua=1 tag=12
write lun=1 lba=14 blocks=1 fua=0 tag=13
flush
write lun=0 lba=8 blocks=5 fua=0 tag=14
write lun=1 lba=41 blocks=2 fua=0 tag=16
write lun=0 lba=19 blocks=1 fua=0 tag=17
flush
write lun=0 lba=5 blocks=1 fua=0 tag=18
flush
maintenance calls=8
fail slot=0 admin=0
scrub
maintenance calls=11
";

#[test]
fn scrub_rewrites_a_damaged_superblock_copy() {
    assert_history_passes(SEED_8516);
}

#[test]
fn a_pad_header_read_through_redundancy_is_healed() {
    assert_history_passes(SEED_6523);
}

#[test]
fn a_spare_taking_a_failed_rebuild_target_rebuilds_from_stripe_0() {
    assert_history_passes(SEED_153);
}
