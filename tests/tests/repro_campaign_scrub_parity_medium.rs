//! Regression test (fault campaign, seed 17 shrunk, once scrubs checkpoint their progress):
//! RAID-6, a latent sector error on member 5, a full scrub, then two members fail and the
//! rebuild finds a stripe lost. The bad blocks were in a parity column: the scrub's stripe check
//! skips an unreadable column, and its item walk reads only data columns, so the scrub "passed"
//! and left them for the rebuild to meet with no redundancy to spare. A scrub now rewrites the
//! strip of every member in sync it could not read.

use raidcore_tests::assert_history_passes;

const SEED_17: &str = "\
shape seed=17 level=raid6 disks=8 spares=1 block=4096 disk_blocks=440 strip=16384 extent=4 compress=1 zil=32 seg_stripes=2 reserved=3 cleaner=2 step=8 idle=294 cache=262144
create_lun blocks=9
scrub
write lun=1 lba=50 blocks=4 fua=0 tag=47
maintenance calls=1
power_cut shuffle=864841749
medium slot=5 pick=155466487 blocks=4 sticky=0 label=0
scrub
maintenance calls=1
fail slot=3 admin=1
fail slot=2 admin=0
maintenance calls=1
";

#[test]
fn scrub_repairs_a_medium_error_in_a_parity_column() {
    assert_history_passes(SEED_17);
}
