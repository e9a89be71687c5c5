//! Regression test (fault campaign, seed 166 shrunk): a four-way RAID-1, misdirected writes on
//! two copies, writes, power cut. The stripe at the log head was good on only two of the four
//! copies; import tried the plain read and each copy left out alone, which always read a bad
//! copy first, so the roll-forward stopped and a FUA write was lost. On RAID-1 every copy is
//! now tried on its own.

use raidcore_tests::assert_history_passes;

const SEED_166: &str = "\
shape seed=166 level=raid1 disks=4 spares=2 block=4096 disk_blocks=1496 strip=32768 extent=2 compress=1 zil=16 seg_stripes=1 reserved=3 cleaner=1 step=16 idle=300 cache=4194304
create_lun blocks=10
write lun=0 lba=1 blocks=8 fua=0 tag=4
misdirect slot=0 pick=422453417
misdirect slot=1 pick=267112778
write lun=0 lba=90 blocks=4 fua=0 tag=90
write lun=0 lba=94 blocks=1 fua=1 tag=91
power_cut shuffle=269139118
";

#[test]
fn four_way_mirror_with_two_misdirected_copies_rolls_forward() {
    assert_history_passes(SEED_166);
}
