//! Fault campaign, seed 9112 (shrunk): RAID-0 with a hot spare, a member fails (deliberately
//! beyond tolerance). The pool took the spare, started a "rebuild" that could only record
//! every stripe as lost, and kept serving: health counted failed members, and the spare in
//! the failed slot was no longer failed. After a clean shutdown and import, LUN 0 LBA 0 read
//! zeros where it must fail. Health and the fault decision now count members out of sync
//! (failed or still rebuilding), and a pool past its tolerance takes no spare.

use raidcore_tests::assert_history_passes;

const SEED_9112: &str = "\
shape seed=9112 level=raid0 disks=5 spares=1 block=512 disk_blocks=2680 strip=4096 extent=4 compress=0 zil=16 seg_stripes=3 reserved=4 cleaner=2 step=4 idle=160 cache=262144
create_lun blocks=440
create_lun blocks=14
write lun=1 lba=17 blocks=2 fua=0 tag=4
write lun=0 lba=0 blocks=1 fua=0 tag=5
write lun=2 lba=5 blocks=3 fua=0 tag=34
write lun=2 lba=13 blocks=6 fua=0 tag=54
exceed silent=0 pick=1467319108
write lun=1 lba=80 blocks=1 fua=0 tag=55
write lun=0 lba=13 blocks=1 fua=0 tag=56
";

#[test]
fn raid0_member_failure_faults_the_pool_even_with_a_spare() {
    assert_history_passes(SEED_9112);
}
