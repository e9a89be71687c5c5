//! Fault campaign, seed 6007 (shrunk): a power cut while the end of a RAID-6 rebuild wrote
//! the new configuration. One member's superblock naming the rebuilt member online reached its
//! medium, but the rebuild's last strips, still in the rebuilt member's write cache, did not;
//! import trusted the member, and the next scrub repaired 256 blocks of a pool the campaign
//! knew had no silent damage (on RAID-5 that is data lost). The end of a rebuild now flushes
//! the members, and names the member online only once its own flush succeeded.

use raidcore_tests::assert_history_passes;

const SEED_6007: &str = "\
shape seed=6007 level=raid6 disks=8 spares=1 block=512 disk_blocks=11136 strip=65536 extent=8 compress=1 zil=16 seg_stripes=3 reserved=4 cleaner=2 step=16 idle=32 cache=1048576
create_lun blocks=11
create_lun blocks=43
write lun=0 lba=0 blocks=1 fua=0 tag=1
scrub
maintenance calls=1
arm_power_cut writes=60 shuffle=691295946
write lun=1 lba=1 blocks=1 fua=0 tag=6
write lun=1 lba=2 blocks=7 fua=0 tag=7
fail slot=7 admin=0
write lun=0 lba=5 blocks=1 fua=0 tag=12
transient slot=1 ops=2
write lun=1 lba=10 blocks=16 fua=0 tag=13
write lun=1 lba=2569 blocks=16 fua=0 tag=16
write lun=0 lba=5 blocks=2 fua=1 tag=18
maintenance calls=1
scrub
maintenance calls=1
";

#[test]
fn rebuilt_member_is_durable_before_a_superblock_names_it_online() {
    assert_history_passes(SEED_6007);
}
