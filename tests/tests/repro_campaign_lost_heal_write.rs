//! Fault campaign, seed 2540 (shrunk): RAID-5, a lost write armed on member 5, then bit rot on
//! the same member, then a scrub. The scrub's item walk found the rotten item, rebuilt it
//! without member 5 and "healed" it, but that heal write was the one member 5 lost. The walk
//! still counted the stripe as checked, and the scrub rewrote P from the still-wrong data,
//! after which the item failed every reconstruction. A walk that needed repairs in the stripe
//! now runs again, and the stripe counts as checked only when its items check as they lie.

use raidcore_tests::assert_history_passes;

const SEED_2540: &str = "\
shape seed=2540 level=raid5 disks=6 spares=1 block=4096 disk_blocks=616 strip=16384 extent=16 compress=1 zil=24 seg_stripes=1 reserved=2 cleaner=1 step=16 idle=68 cache=4194304
create_lun blocks=15
create_lun blocks=26
create_lun blocks=13
scrub
maintenance calls=1
write lun=2 lba=1116 blocks=3 fua=0 tag=3
write lun=1 lba=1259 blocks=17 fua=1 tag=9
lose slot=5
bitrot slot=5 pick=2437226310 bits=6 label=0
scrub
maintenance calls=1
";

#[test]
fn scrub_confirms_a_heal_landed_before_rewriting_parity() {
    assert_history_passes(SEED_2540);
}
