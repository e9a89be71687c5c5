//! Regression test (fault campaign, seed 9915 shrunk): "log segments exhausted" on an almost
//! empty pool. With a window of two reserved segments, "half the window used" (when a
//! checkpoint is due) is already the last segment, and a checkpoint that is due but not forced
//! waits until the open stripe is nearly full so its padding is small; the stripe never was at
//! a write's start, the log filled the second segment exactly, and shutdown's checkpoint found
//! no room (no next segment reserved). The same happens whenever a nearly full pool reserves
//! fewer segments than configured. A checkpoint is now forced as soon as the log writes into
//! the last segment of its window while a free segment could extend it (client writes and the
//! cleaner alike).

use raidcore_tests::assert_history_passes;

const SEED_9915: &str = "\
shape seed=9915 level=raid6 disks=7 spares=2 block=512 disk_blocks=8064 strip=65536 extent=8 compress=0 zil=16 seg_stripes=3 reserved=2 cleaner=2 step=2 idle=131 cache=67108864
create_lun blocks=30
create_lun blocks=30
write lun=1 lba=0 blocks=1 fua=0 tag=1
flush
write lun=1 lba=1 blocks=1 fua=0 tag=2
write lun=1 lba=2 blocks=2 fua=0 tag=3
write lun=0 lba=0 blocks=8 fua=0 tag=8
write lun=1 lba=9 blocks=1 fua=0 tag=9
write lun=1 lba=10 blocks=8 fua=0 tag=10
write lun=1 lba=390 blocks=3 fua=0 tag=13
flush
write lun=1 lba=18 blocks=8 fua=0 tag=15
write lun=1 lba=26 blocks=10 fua=0 tag=19
flush
write lun=1 lba=36 blocks=28 fua=0 tag=22
write lun=1 lba=68 blocks=1 fua=1 tag=37
write lun=0 lba=34 blocks=25 fua=0 tag=38
flush
write lun=1 lba=3 blocks=1 fua=0 tag=43
write lun=1 lba=71 blocks=15 fua=0 tag=45
";

#[test]
fn log_window_of_two_segments_is_renewed_before_it_fills() {
    assert_history_passes(SEED_9915);
}
