//! Regression test (fault campaign, seed 216 shrunk, once scrubs checkpoint their progress):
//! RAID-1 on four disks, a hot spare added while a replaced member rebuilds, then a power cut
//! armed to fall between the intent-log record writes of a flush and the members' cache
//! flushes. Every member failed its flush, the spare took a failed slot (so the pool did not
//! count as faulted), and the flush was acknowledged with its records only in volatile caches:
//! after import the block read its previous version. The intent log now acknowledges only
//! records that are durable on a member whose flush succeeded (else the stripe is sealed).

use raidcore_tests::assert_history_passes;

const SEED_216: &str = "\
shape seed=216 level=raid1 disks=4 spares=0 block=4096 disk_blocks=5584 strip=65536 extent=32 compress=0 zil=24 seg_stripes=4 reserved=4 cleaner=2 step=1 idle=187 cache=4194304
create_lun blocks=580
scrub
maintenance calls=3
write lun=0 lba=4 blocks=12 fua=0 tag=3
write lun=0 lba=396 blocks=8 fua=0 tag=4
write lun=0 lba=520 blocks=8 fua=0 tag=6
write lun=0 lba=452 blocks=15 fua=0 tag=8
write lun=0 lba=232 blocks=1 fua=1 tag=11
create_lun blocks=8
power_cut shuffle=758605598
write lun=0 lba=22 blocks=1 fua=0 tag=15
write lun=0 lba=200 blocks=1 fua=0 tag=16
delete_lun lun=1
fail slot=3 admin=0
write lun=0 lba=169 blocks=7 fua=0 tag=17
write lun=0 lba=16 blocks=1 fua=0 tag=18
write lun=0 lba=19 blocks=4 fua=0 tag=19
flush
write lun=0 lba=23 blocks=30 fua=0 tag=20
create_lun blocks=1840
lose slot=0
scrub
maintenance calls=2
write lun=1 lba=1010 blocks=1 fua=0 tag=28
create_lun blocks=14
add_spare
create_lun blocks=460
write lun=0 lba=131 blocks=2 fua=1 tag=35
write lun=0 lba=3 blocks=4 fua=1 tag=36
write lun=1 lba=8 blocks=4 fua=0 tag=38
flush
write lun=3 lba=1 blocks=7 fua=0 tag=40
write lun=3 lba=8 blocks=32 fua=0 tag=41
medium slot=2 pick=750575027 blocks=2 sticky=1 label=0
maintenance calls=2
delete_lun lun=2
scrub
write lun=3 lba=28 blocks=6 fua=0 tag=46
maintenance calls=10
flush
write lun=1 lba=566 blocks=1 fua=0 tag=48
arm_power_cut writes=131 shuffle=458083980
write lun=1 lba=12 blocks=1 fua=0 tag=49
write lun=1 lba=13 blocks=2 fua=0 tag=50
maintenance calls=4
maintenance calls=10
write lun=1 lba=0 blocks=3 fua=0 tag=51
write lun=3 lba=826 blocks=1 fua=0 tag=52
flush
write lun=2 lba=2 blocks=4 fua=0 tag=57
write lun=1 lba=15 blocks=2 fua=0 tag=58
replace slot=2
write lun=0 lba=342 blocks=24 fua=0 tag=60
maintenance calls=10
write lun=2 lba=6 blocks=2 fua=0 tag=61
write lun=0 lba=71 blocks=5 fua=0 tag=62
write lun=1 lba=17 blocks=1 fua=0 tag=63
write lun=1 lba=18 blocks=2 fua=0 tag=64
write lun=1 lba=20 blocks=1 fua=0 tag=65
add_spare
write lun=0 lba=76 blocks=1 fua=1 tag=66
bitrot slot=3 pick=670260290 bits=1 label=0
write lun=2 lba=599 blocks=3 fua=1 tag=67
write lun=1 lba=21 blocks=1 fua=0 tag=68
write lun=2 lba=8 blocks=1 fua=0 tag=69
write lun=2 lba=9 blocks=1 fua=0 tag=70
flush
maintenance calls=7
write lun=0 lba=342 blocks=1 fua=0 tag=71
maintenance calls=8
write lun=2 lba=10 blocks=8 fua=0 tag=72
flush
";

#[test]
fn flush_is_not_acknowledged_when_no_intent_log_copy_is_durable() {
    assert_history_passes(SEED_216);
}
