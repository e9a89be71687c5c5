//! Regression test (fault campaign, seed 846 shrunk): the cleaner spun forever (a livelock:
//! millions of member I/Os in one write) on a nearly full pool. RAID-10 with 11 segments, a
//! window of 4 and a cleaner reserve of 1: make_room wants more than 5 free segments outside
//! the window, but cleaning the one data segment (85 % live) only moved its bytes into the
//! window and left the victim pending, so the count never rose, and clean_one, which reported
//! progress for every victim, was called again and again. make_room now checkpoints first when
//! the segments already emptied would satisfy it (pending ones become free after two
//! checkpoints), and stops cleaning after `segments()` victims in a row that did not raise the
//! count of reclaimed segments (free, pending or emptied) past its best; it then answers as it
//! does with nothing to clean (the write proceeds, or `NoSpace` below the cleaner's reserve).

use raidcore_tests::assert_history_passes;

const SEED_846: &str = "\
shape seed=846 level=raid10 disks=4 spares=0 block=512 disk_blocks=7552 strip=65536 extent=1 compress=0 zil=24 seg_stripes=2 reserved=4 cleaner=1 step=8 idle=221 cache=67108864
create_lun blocks=320
create_lun blocks=320
write lun=1 lba=33 blocks=13 fua=0 tag=1
write lun=0 lba=2 blocks=1 fua=0 tag=7
write lun=0 lba=3 blocks=21 fua=0 tag=8
write lun=0 lba=23 blocks=19 fua=0 tag=9
write lun=1 lba=2 blocks=3 fua=0 tag=10
write lun=1 lba=5 blocks=23 fua=0 tag=17
write lun=0 lba=30 blocks=4 fua=1 tag=21
write lun=0 lba=108 blocks=1 fua=0 tag=22
write lun=0 lba=25 blocks=3 fua=0 tag=23
write lun=0 lba=34 blocks=2 fua=0 tag=24
write lun=0 lba=36 blocks=16 fua=0 tag=25
write lun=1 lba=29 blocks=10 fua=0 tag=26
write lun=1 lba=39 blocks=1 fua=0 tag=27
write lun=0 lba=52 blocks=1 fua=0 tag=28
write lun=1 lba=39 blocks=1 fua=1 tag=29
write lun=1 lba=40 blocks=8 fua=0 tag=34
write lun=0 lba=102 blocks=3 fua=0 tag=35
write lun=0 lba=61 blocks=6 fua=0 tag=36
write lun=0 lba=280 blocks=1 fua=0 tag=37
write lun=1 lba=48 blocks=8 fua=0 tag=38
scrub
write lun=0 lba=67 blocks=1 fua=0 tag=42
write lun=0 lba=68 blocks=2 fua=0 tag=43
write lun=1 lba=187 blocks=3 fua=0 tag=44
maintenance calls=3
write lun=0 lba=129 blocks=1 fua=0 tag=45
";

#[test]
fn cleaner_gives_up_instead_of_moving_the_same_data_forever() {
    assert_history_passes(SEED_846);
}
