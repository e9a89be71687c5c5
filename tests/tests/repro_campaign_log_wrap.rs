//! Regression tests (fault campaign, shrunk histories): the log may wrap to a reserved segment at
//! a lower address, and code that compared log addresses by order went wrong after that.
//!
//! - Seed 991 (RAID-5, no fault; a scrub's checkpoint makes the log wrap): import failed with
//!   "metadata damaged: checksum mismatch" because the roll-forward's second pass stopped where
//!   the first pass's end address was numerically below its start.
//! - Seed 875 (RAID-6, bit rot on one member, power cuts): a flushed block read as "data lost":
//!   with the open stripe at address 0, every item counted as still in memory, so a rotten item
//!   was never reconstructed from the members; rebuild and scrub also skipped filled reserved
//!   segments above the open stripe.

use raidcore_tests::assert_history_passes;

const SEED_991: &str = "\
shape seed=991 level=raid5 disks=6 spares=2 block=4096 disk_blocks=1072 strip=65536 extent=4 compress=0 zil=16 seg_stripes=3 reserved=3 cleaner=1 step=1 idle=394 cache=4194304
create_lun blocks=34
create_lun blocks=45
create_lun blocks=39
write lun=0 lba=112 blocks=3 fua=0 tag=1
write lun=2 lba=1 blocks=29 fua=0 tag=5
write lun=0 lba=7 blocks=2 fua=0 tag=6
write lun=2 lba=30 blocks=1 fua=0 tag=7
flush
write lun=0 lba=7 blocks=2 fua=1 tag=8
scrub
maintenance calls=4
write lun=1 lba=470 blocks=12 fua=0 tag=13
flush
write lun=2 lba=32 blocks=15 fua=0 tag=14
write lun=1 lba=0 blocks=1 fua=0 tag=16
write lun=1 lba=1 blocks=4 fua=0 tag=17
flush
create_lun blocks=16
write lun=1 lba=5 blocks=17 fua=0 tag=22
flush
write lun=1 lba=22 blocks=1 fua=0 tag=23
write lun=1 lba=646 blocks=4 fua=1 tag=24
write lun=1 lba=23 blocks=1 fua=0 tag=26
write lun=0 lba=13 blocks=9 fua=0 tag=27
write lun=0 lba=9 blocks=1 fua=0 tag=28
flush
scrub
write lun=0 lba=209 blocks=6 fua=0 tag=40
write lun=0 lba=391 blocks=27 fua=0 tag=42
flush
maintenance calls=3
write lun=0 lba=42 blocks=15 fua=0 tag=46
write lun=1 lba=25 blocks=26 fua=0 tag=49
flush
power_cut shuffle=3788708648
";

const SEED_875: &str = "\
shape seed=875 level=raid6 disks=9 spares=0 block=512 disk_blocks=4416 strip=32768 extent=1 compress=0 zil=16 seg_stripes=2 reserved=3 cleaner=1 step=16 idle=254 cache=67108864
create_lun blocks=14
create_lun blocks=17
create_lun blocks=31
delete_lun lun=0
power_cut shuffle=607349690
write lun=1 lba=0 blocks=29 fua=0 tag=4
write lun=1 lba=9 blocks=26 fua=0 tag=6
write lun=0 lba=2 blocks=1 fua=0 tag=7
write lun=0 lba=32 blocks=4 fua=0 tag=9
write lun=0 lba=100 blocks=10 fua=0 tag=10
write lun=0 lba=92 blocks=9 fua=0 tag=11
flush
power_cut shuffle=352388291
write lun=0 lba=102 blocks=3 fua=0 tag=12
write lun=0 lba=96 blocks=6 fua=0 tag=16
write lun=1 lba=31 blocks=1 fua=0 tag=17
write lun=0 lba=19 blocks=10 fua=0 tag=18
write lun=1 lba=32 blocks=4 fua=0 tag=19
flush
bitrot slot=4 pick=3904103827 bits=14 label=0
create_lun blocks=10
write lun=0 lba=29 blocks=5 fua=0 tag=22
write lun=0 lba=39 blocks=8 fua=0 tag=23
write lun=2 lba=0 blocks=10 fua=0 tag=25
write lun=0 lba=47 blocks=1 fua=1 tag=26
";

#[test]
fn import_after_the_log_wrapped_to_a_lower_segment() {
    assert_history_passes(SEED_991);
}

#[test]
fn rotten_item_heals_after_the_log_wrapped_to_address_zero() {
    assert_history_passes(SEED_875);
}
