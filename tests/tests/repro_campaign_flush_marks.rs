//! Regression tests (fault campaign, seeds 4007, 8706, 363 and 4083 shrunk): more faults than
//! the level tolerates, then a power cut or a shutdown. Roll-forward stopped at the first log
//! item no redundancy could rebuild, as if the log ended there, so writes acknowledged by a
//! completed flush after it were dropped and their blocks read their older data: wrong data
//! where an error was due. A flush now leaves a flush mark naming the position it made durable;
//! import keeps a damaged item before that position (its blocks read as errors) and goes on,
//! and refuses the pool (`IoError::LogLost`) when the damaged item's header is gone too. A
//! shutdown of a faulted pool now fails instead of reporting success (seed 4083). Seed 1180: a
//! RAID-6 with two members failed lost the tail of FUA writes that only intent-log records held;
//! while members are out of sync every flush now leaves a mark.

use raidcore_tests::assert_history_passes;

const SEED_1180: &str = "\
shape seed=1180 level=raid6 disks=8 spares=0 block=4096 disk_blocks=560 strip=16384 extent=2 compress=1 zil=64 seg_stripes=3 reserved=4 cleaner=1 step=8 idle=276 cache=1048576
create_lun blocks=255
create_lun blocks=54
create_lun blocks=24
write lun=2 lba=0 blocks=27 fua=0 tag=3
flush
power_cut shuffle=2075305064
arm_power_cut writes=87 shuffle=3716057336
write lun=2 lba=23 blocks=1 fua=0 tag=20
lose slot=1
flush
write lun=0 lba=165 blocks=3 fua=0 tag=21
write lun=0 lba=29 blocks=1 fua=0 tag=22
write lun=0 lba=10 blocks=1 fua=0 tag=24
flush
write lun=1 lba=29 blocks=1 fua=0 tag=25
write lun=0 lba=29 blocks=1 fua=0 tag=27
write lun=0 lba=12 blocks=2 fua=1 tag=28
write lun=1 lba=11 blocks=1 fua=0 tag=39
write lun=0 lba=8 blocks=1 fua=0 tag=40
write lun=1 lba=13 blocks=1 fua=0 tag=42
flush
write lun=1 lba=9 blocks=1 fua=0 tag=43
exceed silent=0 pick=841717594
flush
write lun=1 lba=10 blocks=1 fua=0 tag=45
write lun=1 lba=14 blocks=4 fua=0 tag=46
write lun=1 lba=18 blocks=23 fua=0 tag=47
write lun=1 lba=9 blocks=1 fua=0 tag=48
flush
write lun=1 lba=74 blocks=1 fua=0 tag=49
write lun=0 lba=20 blocks=15 fua=0 tag=55
write lun=1 lba=43 blocks=1 fua=0 tag=60
write lun=0 lba=167 blocks=1 fua=0 tag=61
write lun=1 lba=45 blocks=1 fua=0 tag=63
write lun=0 lba=38 blocks=4 fua=0 tag=64
write lun=0 lba=29 blocks=6 fua=0 tag=65
write lun=0 lba=127 blocks=1 fua=0 tag=66
write lun=0 lba=31 blocks=13 fua=0 tag=67
write lun=0 lba=234 blocks=1 fua=1 tag=68
";

const SEED_4007: &str = "\
shape seed=4007 level=raid6 disks=6 spares=0 block=4096 disk_blocks=698 strip=4096 extent=16 compress=1 zil=24 seg_stripes=2 reserved=4 cleaner=1 step=16 idle=180 cache=262144
create_lun blocks=12
write lun=0 lba=0 blocks=11 fua=0 tag=1
flush
exceed silent=1 pick=2908076365
power_cut shuffle=1898279437
";

const SEED_8706: &str = "\
shape seed=8706 level=raid1 disks=3 spares=2 block=512 disk_blocks=21880 strip=4096 extent=4 compress=1 zil=24 seg_stripes=3 reserved=4 cleaner=2 step=4 idle=186 cache=4194304
create_lun blocks=13
write lun=0 lba=251 blocks=4 fua=0 tag=73
exceed silent=1 pick=1938990646
flush
power_cut shuffle=2493000129
";

const SEED_363: &str = "\
shape seed=363 level=raid5 disks=3 spares=1 block=512 disk_blocks=9544 strip=4096 extent=2 compress=1 zil=64 seg_stripes=4 reserved=4 cleaner=2 step=2 idle=190 cache=262144
create_lun blocks=16
misdirect slot=0 pick=838650854
write lun=1 lba=20 blocks=1 fua=0 tag=69
write lun=0 lba=941 blocks=1 fua=0 tag=87
exceed silent=0 pick=2495149789
flush
power_cut shuffle=1870530089
";

const SEED_4083: &str = "\
shape seed=4083 level=raid1 disks=2 spares=0 block=512 disk_blocks=29888 strip=32768 extent=8 compress=0 zil=64 seg_stripes=4 reserved=3 cleaner=1 step=2 idle=366 cache=262144
create_lun blocks=10
fail slot=0 admin=1
write lun=1 lba=144 blocks=12 fua=0 tag=49
exceed silent=0 pick=2594676129
";

#[test]
fn raid6_silent_damage_past_tolerance_reads_errors_not_old_data() {
    assert_history_passes(SEED_4007);
}

#[test]
fn mirror_silent_damage_past_tolerance_reads_errors_not_old_data() {
    assert_history_passes(SEED_8706);
}

#[test]
fn a_lost_item_header_before_the_flush_mark_refuses_import() {
    assert_history_passes(SEED_363);
}

#[test]
fn shutdown_of_a_faulted_pool_fails() {
    assert_history_passes(SEED_4083);
}

#[test]
fn fua_writes_on_a_degraded_raid6_past_tolerance_read_errors_not_old_data() {
    assert_history_passes(SEED_1180);
}
