//! Fault campaign, seed 695 (shrunk): RAID-6, a write lost on member 1 (silent), member 5
//! failed by hand and a spare rebuilding it while a scrub runs. The lost write left member 1
//! with an item of the segment's previous use at log address 0, whose header and CRC both
//! check, so item walks took it for the live one. The rebuild reconstructed member 5 from that
//! stale column, leaving two wrong columns in stripe 0; the scrub's syndrome then rewrote Q to
//! match, and LUN 1 LBA 8 read "data lost" within tolerance. Fixed by recording in the segment
//! table the sequence number each segment's use began with (walks reject older items and
//! rebuild the column), and by a RAID-6 rebuild checking each reconstructed chunk against the
//! parity left, walking the segment's items to heal the stale column when they disagree.

use raidcore_tests::assert_history_passes;

const SEED_695: &str = "\
shape seed=695 level=raid6 disks=9 spares=1 block=512 disk_blocks=14720 strip=65536 extent=16 compress=1 zil=16 seg_stripes=1 reserved=3 cleaner=2 step=4 idle=242 cache=262144
create_lun blocks=8
create_lun blocks=10
create_lun blocks=13
create_lun blocks=12
scrub
maintenance calls=2
power_cut shuffle=1625412633
scrub
lose slot=1
write lun=1 lba=18 blocks=1 fua=1 tag=37
delete_lun lun=2
fail slot=5 admin=1
maintenance calls=3
";

#[test]
fn rebuild_and_scrub_keep_data_after_a_lost_write_within_tolerance() {
    assert_history_passes(SEED_695);
}
