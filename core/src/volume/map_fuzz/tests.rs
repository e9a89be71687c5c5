//! The map cache against its `HashMap` model (see the parent module), as seeded property
//! tests, plus the proof that the checks fail on a broken store and the cases the random runs
//! only allow for (CacheFull) shown to happen.
use std::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::seeded;

fn at() -> impl Strategy<Value = At> {
    (any::<u8>(), prop_oneof![3 => 0u16..300, 1 => 0u16..1024])
        .prop_map(|(spot, off)| At { spot, off })
}

fn size(depths: core::ops::RangeInclusive<u8>) -> impl Strategy<Value = Size> {
    (depths, any::<u32>()).prop_map(|(d, frac)| Size { depth: d - 1, frac })
}

fn op(luns: u8) -> impl Strategy<Value = Op> {
    let lun = 0..luns;
    prop_oneof![
        12 => (lun.clone(), at(), any::<u32>()).prop_map(|(lun, at, tag)| Op::Set { lun, at, tag }),
        6 => (lun.clone(), at()).prop_map(|(lun, at)| Op::Get { lun, at }),
        2 => (lun.clone(), at(), prop_oneof![0u16..40, 0u16..2048])
            .prop_map(|(lun, at, blocks)| Op::Unmap { lun, at, blocks }),
        1 => Just(Op::WriteBack),
        1 => Just(Op::Remount),
        1 => lun.clone().prop_map(|lun| Op::Delete { lun }),
        1 => (lun.clone(), size(1..=3)).prop_map(|(lun, size)| Op::Create { lun, size }),
        1 => (lun.clone(), size(1..=3)).prop_map(|(lun, size)| Op::Resize { lun, size }),
        2 => (lun.clone(), 0u8..3, at(), proptest::bool::weighted(0.1))
            .prop_map(|(lun, level, at, past)| Op::PagePtr { lun, level, at, past }),
        1 => (lun, 0u8..3, at()).prop_map(|(lun, level, at)| Op::Relocate { lun, level, at }),
    ]
}

/// A case: cache size number, LUN sizes (tree depths in `depths`), operations.
fn case(
    caches: core::ops::Range<u8>,
    depths: core::ops::RangeInclusive<u8>,
    ops: usize,
) -> impl Strategy<Value = (u8, Vec<Size>, Vec<Op>)> {
    (caches, proptest::collection::vec(size(depths), 1..=4)).prop_flat_map(move |(c, luns)| {
        let n = luns.len() as u8;
        (
            Just(c),
            Just(luns),
            proptest::collection::vec(op(n), 1..ops),
        )
    })
}

/// Every cache size (2 to 16 pages) over one to four LUNs of depth 1 to 3.
#[test]
fn map_cache_matches_a_hashmap_model() {
    seeded::check(
        "map_cache_matches_a_hashmap_model",
        0x6d61_7031,
        256,
        case(0..6, 1..=3, 160),
        |(c, luns, ops)| run(c, &luns, &ops, Fault::None),
    );
}

/// Deep trees (depth 2 and 3) on the smallest caches that hold them (3 and 4 pages):
/// eviction and pinning on nearly every step.
#[test]
fn deep_trees_on_small_caches_match_the_model() {
    seeded::check(
        "deep_trees_on_small_caches_match_the_model",
        0x6d61_7032,
        256,
        case(1..3, 2..=3, 200),
        |(c, luns, ops)| run(c, &luns, &ops, Fault::None),
    );
}

/// Sets spread over many leaves of a depth-3 and a depth-2 LUN (more leaves than the cache
/// holds, so evictions write pages), read back, then a restart.
fn spread_ops() -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..48u32 {
        let at = At {
            spot: (i % 4) as u8,
            off: (i * 97 % 1000) as u16,
        };
        ops.push(Op::Set {
            lun: (i % 2) as u8,
            at,
            tag: i * 7 + 1,
        });
    }
    ops.push(Op::Remount);
    ops
}

fn spread_luns() -> [Size; 2] {
    [
        Size {
            depth: 2,
            frac: 1_000_000,
        },
        Size {
            depth: 1,
            frac: 40_000,
        },
    ]
}

/// Page writes and releases a clean run of [`spread_ops`] makes, with a 4-page cache.
fn clean_run_io() -> (u64, u64) {
    let mut run = Run::<4>::new(&spread_luns(), Fault::None);
    for op in spread_ops() {
        run.step(op).unwrap();
    }
    (run.store.writes, run.store.releases)
}

/// A store that loses any one page write (acknowledged, reads back as zeros with a matching
/// checksum, so only the model can tell) fails the check.
#[test]
fn a_store_that_drops_a_write_fails_the_check() {
    let (writes, _) = clean_run_io();
    assert!(writes >= 20, "the run writes pages ({writes})");
    for n in 0..writes {
        let res = run_sized::<4>(&spread_luns(), &spread_ops(), Fault::DropWrite(n));
        assert!(res.is_err(), "write {n} of {writes} dropped, not caught");
    }
}

/// A store that keeps any one released page live (a space leak) fails the check.
#[test]
fn a_store_that_leaks_a_release_fails_the_check() {
    let (_, releases) = clean_run_io();
    assert!(releases >= 5, "the run releases pages ({releases})");
    for n in 0..releases {
        let res = run_sized::<4>(&spread_luns(), &spread_ops(), Fault::KeepReleased(n));
        let err = res.expect_err("leak not caught");
        assert!(err.contains("unreachable"), "{err}");
    }
}

/// CacheFull comes exactly when a LUN's tree has more levels than the cache has pages, leaves
/// the cache usable, and is not a failure of the LUNs that fit.
#[test]
fn cache_full_only_when_the_tree_is_deeper_than_the_cache() {
    let deep = Size { depth: 2, frac: 7 };
    let mid = Size { depth: 1, frac: 7 };
    let mut run = Run::<2>::new(&[deep, mid], Fault::None);
    let e = entry_of(5);
    for lba in [0, 300, 70_000] {
        let (map, mut st, pages) = run.parts(None);
        assert_eq!(
            map.map_set(&mut st, pages, 0, lba, e),
            Err(IoError::CacheFull)
        );
        let (map, mut st, pages) = run.parts(None);
        assert_eq!(
            map.map_set(&mut st, pages, 1, lba % 253, e),
            Ok(MapEntry::NONE)
        );
        run.model.insert((1, lba % 253), e);
    }
    run.step(Op::Remount).unwrap();
    let mut run = Run::<3>::new(&[deep, mid], Fault::None);
    run.step(Op::Set {
        lun: 0,
        at: At { spot: 2, off: 0 },
        tag: 9,
    })
    .unwrap();
    run.step(Op::Remount).unwrap();
}

/// `page_ptr` promises "the current on-disk pointer, if the page exists"; a page that is
/// cached but was never written has none (it answered `Some(BlockPtr::NONE)`). The cleaner
/// compares that pointer's address with the item it found (`p.addr == cursor`), so a stale
/// copy of the page at log address 0 would count as live (an extra page write, no data
/// loss).
#[test]
fn page_ptr_of_a_page_never_written_is_none() {
    let lun = Size {
        depth: 1,
        frac: 100,
    };
    let mut run = Run::<4>::new(&[lun], Fault::None);
    let (map, mut st, pages) = run.parts(None);
    map.map_set(&mut st, pages, 0, 3, entry_of(1)).unwrap();
    let (map, mut st, pages) = run.parts(None);
    assert_eq!(map.page_ptr(&mut st, pages, 0, 0, 0), Ok(None));
    assert_eq!(map.page_ptr(&mut st, pages, 0, 1, 0), Ok(None));
}

/// `unmap_range(lun, 0, 0)` on a tree of depth 2 or more whose root exists: `unmap_walk`
/// computes the last child as `(hi - 1 - base) / child_span` with `hi == 0`, which overflows
/// (a panic with overflow checks; without them `last` wraps to about 2^64 / 252 and the walk
/// loops over that many children, a hang). `Pool::trim` refuses zero blocks, but roll-forward
/// (`replay_item` in pool/import.rs) applies a Trim item's `blocks` from the log unchecked,
/// and `ItemHeader::decode` accepts `blocks == 0`: a checksummed Trim item of zero blocks at
/// LBA 0 in an image makes import panic or hang (ARCHITECTURE invariant 5). Found by the
/// `map_cache` fuzz body (`raidcore-tests`, seed 187 of its seeded test before zero-length
/// unmaps were left out).
#[test]
fn an_empty_unmap_at_lba_0_is_a_no_op() {
    let lun = Size {
        depth: 1,
        frac: 1000,
    };
    let mut run = Run::<4>::new(&[lun], Fault::None);
    run.step(Op::Set {
        lun: 0,
        at: At { spot: 0, off: 5 },
        tag: 3,
    })
    .unwrap();
    let (map, mut st, pages) = run.parts(None);
    assert_eq!(map.unmap_range(&mut st, pages, 0, 0, 0), Ok(()));
    run.step(Op::Remount).unwrap();
}

/// The fuzz entry point decodes short and empty inputs without failing.
#[test]
fn fuzz_entry_takes_any_bytes() {
    check_bytes(&[]).unwrap();
    check_bytes(&[0; 3]).unwrap();
    check_bytes(&[5, 3, 2, 0, 0, 0, 1, 255, 255]).unwrap();
}
