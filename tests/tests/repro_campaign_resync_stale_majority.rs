//! Fault campaign, seed 6011 (shrunk): a three-way mirror, an unflushed 19-block write and a
//! power cut. The write's extent spans three stripes; the cut left the new data of stripe 2
//! only on its first copy (the other two kept the old contents), yet that copy, which reads
//! take, holds the whole item and its CRC checks, so roll-forward kept it. The recovery's
//! resync of the log tail then compared the copies, found one dissenter against two agreeing
//! copies and rewrote it from them: the checked copy was replaced by the stale majority, and
//! LUN 0 LBA 1 read "data lost" within tolerance. The same holds on parity levels, where a torn
//! stripe write with stale P and Q makes the syndrome name a data column by chance. Fixed: when
//! the item walk has just checked every item of the stripe, the scrub keeps the data as reads
//! take it and rewrites only the redundancy (the other copies, or P and Q), whatever the
//! comparison suspects; the walk now also checks table and TRIM items and reports whether an
//! item of the stripe itself failed.

use raidcore_tests::assert_history_passes;

const SEED_6011: &str = "\
shape seed=6011 level=raid1 disks=3 spares=0 block=4096 disk_blocks=1786 strip=8192 extent=8 compress=1 zil=32 seg_stripes=4 reserved=3 cleaner=2 step=1 idle=93 cache=67108864
create_lun blocks=20
write lun=0 lba=535 blocks=19 fua=0 tag=4
power_cut shuffle=795470230
";

#[test]
fn crash_resync_keeps_the_checked_copy_against_a_stale_majority() {
    assert_history_passes(SEED_6011);
}
