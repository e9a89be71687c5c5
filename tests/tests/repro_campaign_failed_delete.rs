//! Fault campaign, seed 8448 (shrunk): three of eight RAID-6 members fail (deliberately beyond
//! tolerance), then a LUN is deleted. The delete noticed the failures midway: the LUN was gone
//! from memory and the checkpoint that would make that durable failed. The campaign then
//! flagged the next write's "no such LUN" as a bug. A campaign fix: beyond tolerance, a LUN
//! whose delete failed is no longer owed (as one missing after an import beyond tolerance is
//! not), while the pool keeps checking a request's arguments before its own state.

use raidcore_tests::assert_history_passes;

const SEED_8448: &str = "\
shape seed=8448 level=raid6 disks=8 spares=0 block=512 disk_blocks=6304 strip=16384 extent=4 compress=1 zil=16 seg_stripes=1 reserved=3 cleaner=2 step=16 idle=108 cache=4194304
create_lun blocks=15
exceed silent=0 pick=3755750874
delete_lun lun=0
write lun=0 lba=25 blocks=1 fua=0 tag=60
";

#[test]
fn failed_delete_beyond_tolerance_may_have_removed_the_lun() {
    assert_history_passes(SEED_8448);
}
