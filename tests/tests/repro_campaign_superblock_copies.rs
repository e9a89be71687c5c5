//! Fault campaign, seed 1714 (shrunk): a latent sector error two blocks long on the label area
//! of a member with 4 KiB blocks hit both superblock copies, which lay side by side (slots A and
//! B were the first two label slots), and import refused the good member as "holds no raidcore
//! superblock". The copies now lie on either side of the root ring (`format::superblock_slot`).
//! Seeds 3713, 3868, 4328 and 5496 failed the same way.

use raidcore_tests::assert_history_passes;

const SEED_1714: &str = "\
shape seed=1714 level=raid5 disks=3 spares=2 block=4096 disk_blocks=2304 strip=65536 extent=8 compress=0 zil=32 seg_stripes=1 reserved=4 cleaner=1 step=2 idle=38 cache=67108864
medium slot=2 pick=3751326435 blocks=2 sticky=0 label=1
scrub
maintenance calls=1
power_cut shuffle=2978467472
";

#[test]
fn latent_errors_across_the_label_area_leave_a_superblock() {
    assert_history_passes(SEED_1714);
}
