//! Regression test (fault campaign, seed 836 shrunk): a rebuild cursor applied to the wrong
//! disk. RAID-5, a replacement disk rebuilding in slot 5 had reached stripe 36 when it was
//! failed by hand; a hot spare took the slot and started over, and power was lost before the
//! next checkpoint. Import resumed the spare's rebuild at the old disk's cursor, so stripes
//! 0..36 were never rebuilt onto it, and a later scrub found their parity wrong (a further
//! failure would have lost them). The cursor now names the disk it belongs to (format 2).

use raidcore_tests::assert_history_passes;

const SEED_836: &str = "\
shape seed=836 level=raid5 disks=8 spares=0 block=4096 disk_blocks=334 strip=4096 extent=1 compress=0 zil=24 seg_stripes=3 reserved=3 cleaner=2 step=4 idle=60 cache=262144
create_lun blocks=882
create_lun blocks=21
create_lun blocks=45
write lun=1 lba=1 blocks=1 fua=0 tag=2
write lun=1 lba=2 blocks=18 fua=0 tag=3
fail slot=5 admin=0
write lun=1 lba=0 blocks=1 fua=0 tag=4
write lun=1 lba=19 blocks=12 fua=0 tag=7
write lun=0 lba=0 blocks=1 fua=0 tag=8
delete_lun lun=1
write lun=1 lba=20 blocks=14 fua=0 tag=9
write lun=1 lba=0 blocks=1 fua=0 tag=10
write lun=0 lba=209 blocks=16 fua=0 tag=11
write lun=1 lba=0 blocks=1 fua=0 tag=12
write lun=1 lba=34 blocks=31 fua=0 tag=13
write lun=1 lba=85 blocks=18 fua=0 tag=14
write lun=1 lba=125 blocks=2 fua=0 tag=15
write lun=0 lba=1 blocks=1 fua=0 tag=16
write lun=1 lba=92 blocks=11 fua=0 tag=17
write lun=1 lba=126 blocks=1 fua=0 tag=18
write lun=1 lba=15 blocks=2 fua=0 tag=19
write lun=1 lba=11 blocks=1 fua=0 tag=20
write lun=0 lba=259 blocks=3 fua=1 tag=21
write lun=1 lba=65 blocks=8 fua=0 tag=22
write lun=0 lba=0 blocks=1 fua=0 tag=23
write lun=1 lba=92 blocks=1 fua=0 tag=24
write lun=1 lba=0 blocks=1 fua=0 tag=25
write lun=1 lba=73 blocks=13 fua=0 tag=26
write lun=1 lba=86 blocks=1 fua=0 tag=27
replace slot=5
write lun=0 lba=427 blocks=6 fua=0 tag=28
write lun=1 lba=87 blocks=1 fua=0 tag=29
write lun=1 lba=88 blocks=1 fua=0 tag=30
write lun=0 lba=2 blocks=13 fua=0 tag=31
write lun=1 lba=147 blocks=1 fua=0 tag=32
write lun=0 lba=15 blocks=22 fua=0 tag=33
write lun=0 lba=174 blocks=1 fua=0 tag=34
write lun=0 lba=505 blocks=1 fua=0 tag=35
write lun=1 lba=75 blocks=17 fua=0 tag=36
add_spare
write lun=1 lba=121 blocks=8 fua=0 tag=37
write lun=1 lba=16 blocks=1 fua=0 tag=38
write lun=1 lba=138 blocks=1 fua=0 tag=39
power_cut shuffle=2983409398
write lun=1 lba=7 blocks=2 fua=0 tag=46
write lun=0 lba=505 blocks=1 fua=0 tag=47
write lun=0 lba=39 blocks=4 fua=0 tag=49
write lun=1 lba=102 blocks=1 fua=0 tag=50
write lun=0 lba=63 blocks=10 fua=0 tag=51
write lun=1 lba=103 blocks=1 fua=0 tag=52
write lun=1 lba=121 blocks=1 fua=0 tag=53
write lun=0 lba=73 blocks=1 fua=0 tag=54
write lun=0 lba=74 blocks=1 fua=0 tag=55
write lun=0 lba=75 blocks=1 fua=0 tag=56
write lun=0 lba=518 blocks=2 fua=0 tag=57
write lun=0 lba=493 blocks=1 fua=0 tag=58
write lun=0 lba=76 blocks=3 fua=0 tag=59
write lun=1 lba=8 blocks=2 fua=0 tag=60
maintenance calls=9
write lun=1 lba=89 blocks=1 fua=0 tag=61
write lun=0 lba=345 blocks=13 fua=0 tag=62
write lun=1 lba=72 blocks=5 fua=0 tag=63
write lun=0 lba=79 blocks=1 fua=0 tag=64
write lun=1 lba=104 blocks=4 fua=0 tag=65
write lun=0 lba=80 blocks=13 fua=0 tag=66
write lun=0 lba=93 blocks=1 fua=0 tag=67
write lun=1 lba=111 blocks=1 fua=0 tag=70
fail slot=5 admin=1
power_cut shuffle=1382132136
scrub
maintenance calls=12
";

#[test]
fn spare_rebuild_is_not_resumed_at_another_disks_cursor() {
    assert_history_passes(SEED_836);
}
