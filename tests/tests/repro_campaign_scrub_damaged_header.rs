//! Regression test (fault campaign, seed 999 shrunk; seed 72 before it): RAID-5, one misdirected
//! write on member 0, then scrubs. The misdirected block hit an item header; the scrub's item
//! walk stopped at the header it could not decode, the stripe's re-check named no suspect, and
//! the scrub rewrote parity from the damaged data, so a flushed block became "data lost". The
//! walk now reconstructs a damaged header from the other members (and heals the item), and a
//! scrub never rewrites parity for a stripe whose items it could not check.

use raidcore_tests::assert_history_passes;

const SEED_999: &str = "\
shape seed=999 level=raid5 disks=7 spares=0 block=512 disk_blocks=7936 strip=32768 extent=32 compress=1 zil=32 seg_stripes=2 reserved=2 cleaner=2 step=2 idle=344 cache=1048576
create_lun blocks=11
delete_lun lun=0
create_lun blocks=44
scrub
write lun=0 lba=11 blocks=31 fua=0 tag=12
write lun=0 lba=42 blocks=1 fua=0 tag=13
flush
maintenance calls=2
write lun=0 lba=45 blocks=1 fua=0 tag=15
scrub
maintenance calls=2
flush
misdirect slot=0 pick=939188603
scrub
maintenance calls=3
scrub
maintenance calls=1
";

#[test]
fn scrub_heals_a_misdirected_write_over_an_item_header() {
    assert_history_passes(SEED_999);
}
