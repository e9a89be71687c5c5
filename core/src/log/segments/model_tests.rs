//! The segment usage table under random sequences of sets, space accounting, clears and loads
//! against a model (a `Vec` of entries): after every step each entry reads back as the model
//! has it, entries past the end read as free, and the free count equals the number of free
//! entries. A new view is made for every step, as the log does, so the table's state must live
//! in the arena slice and the counts alone.
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::seeded;

#[derive(Debug, Clone)]
enum Op {
    Set(u32, SegEntry),
    Account {
        seg: u32,
        bytes: u32,
        add: bool,
    },
    Clear,
    /// Loads the model's entries with these changes, encoded.
    LoadTable(Vec<(u32, SegEntry)>),
    /// Loads raw bytes (one entry's worth per 16 bytes).
    LoadRaw(Vec<u8>),
    /// Loads more bytes than the slice holds: refused, nothing changes.
    LoadTooLong,
}

fn entry() -> impl Strategy<Value = SegEntry> {
    let state = prop_oneof![
        2 => Just(SegState::Free),
        2 => Just(SegState::Used),
        1 => (0u32..0x8000_0000).prop_map(SegState::Pending),
    ];
    (
        prop_oneof![any::<u32>(), 0u32..100_000],
        state,
        any::<u64>(),
    )
        .prop_map(|(live, state, first_seq)| SegEntry {
            live,
            state,
            first_seq,
        })
}

fn op(segments: u32) -> impl Strategy<Value = Op> {
    // A few indices past the end, which the table ignores.
    let seg = 0..segments + 3;
    prop_oneof![
        8 => (seg.clone(), entry()).prop_map(|(i, e)| Op::Set(i, e)),
        8 => (seg.clone(), prop_oneof![0u32..5000, any::<u32>()], any::<bool>())
            .prop_map(|(seg, bytes, add)| Op::Account { seg, bytes, add }),
        1 => Just(Op::Clear),
        1 => proptest::collection::vec((seg, entry()), 0..8).prop_map(Op::LoadTable),
        1 => proptest::collection::vec(
                prop_oneof![3 => Just(0u8), 1 => Just(1u8), 2 => any::<u8>()],
                segments as usize * SEG_ENTRY_BYTES,
            ).prop_map(Op::LoadRaw),
        1 => Just(Op::LoadTooLong),
    ]
}

fn case() -> impl Strategy<Value = (u32, Vec<Op>)> {
    (1u32..=40).prop_flat_map(|n| (Just(n), proptest::collection::vec(op(n), 1..120)))
}

/// What `e` reads back as once encoded (the state's generation keeps 31 bits).
fn stored(e: SegEntry) -> SegEntry {
    let mut b = [0u8; SEG_ENTRY_BYTES];
    e.encode(&mut b, 0);
    SegEntry::decode(&b, 0)
}

fn encode_all(model: &[SegEntry]) -> Vec<u8> {
    let mut b = vec![0u8; model.len() * SEG_ENTRY_BYTES];
    for (i, e) in model.iter().enumerate() {
        e.encode(&mut b, i * SEG_ENTRY_BYTES);
    }
    b
}

/// Applies `op` to the table and the model.
fn apply(t: &mut SegmentTable<'_>, model: &mut [SegEntry], op: &Op) -> Result<(), String> {
    match op {
        Op::Set(i, e) => {
            t.set(*i, *e);
            if let Some(m) = model.get_mut(*i as usize) {
                *m = stored(*e);
            }
        }
        Op::Account { seg, bytes, add } => {
            t.account(*seg, *bytes, *add);
            if let Some(m) = model.get_mut(*seg as usize) {
                m.live = if *add {
                    m.live.saturating_add(*bytes)
                } else {
                    m.live.saturating_sub(*bytes)
                };
            }
        }
        Op::Clear => {
            t.clear();
            model.fill(SegEntry::FREE);
        }
        Op::LoadTable(changes) => {
            for &(i, e) in changes {
                if let Some(m) = model.get_mut(i as usize) {
                    *m = stored(e);
                }
            }
            t.load(&encode_all(model))
                .ok_or("load refused a whole table")?;
        }
        Op::LoadRaw(bytes) => {
            t.load(bytes).ok_or("load refused a whole table")?;
            for (i, m) in model.iter_mut().enumerate() {
                *m = SegEntry::decode(bytes, i * SEG_ENTRY_BYTES);
            }
        }
        Op::LoadTooLong => {
            let n = SegmentTable::encoded_len(t.segments()) + 1;
            if t.load(&vec![0xff; n]).is_some() {
                return Err("a table longer than the slice was loaded".into());
            }
        }
    }
    Ok(())
}

/// The table against the model: every entry, entries past the end, the free count and the
/// live bytes. Free entries are counted from the raw state word (0), not through the table's
/// decoding.
fn check(t: &SegmentTable<'_>, model: &[SegEntry], raw: &[u8]) -> Result<(), String> {
    for (i, want) in model.iter().enumerate() {
        let got = t.get(i as u32);
        if got != *want {
            return Err(format!("segment {i}: {got:?}, model {want:?}"));
        }
    }
    let n = model.len() as u32;
    for i in n..n + 3 {
        if t.get(i).state != SegState::Free {
            return Err(format!("segment {i} past the end reads {:?}", t.get(i)));
        }
    }
    let free = (0..model.len())
        .filter(|i| raw.get(i * SEG_ENTRY_BYTES + 4..i * SEG_ENTRY_BYTES + 8) == Some(&[0; 4]))
        .count() as u32;
    let modelled = model.iter().filter(|e| e.state == SegState::Free).count() as u32;
    if t.free() != free || free != modelled {
        return Err(format!(
            "free count {}, free state words {free}, model {modelled}",
            t.free()
        ));
    }
    let live: u64 = model.iter().map(|e| u64::from(e.live)).sum();
    if t.live() != live {
        return Err(format!("live bytes {}, model {live}", t.live()));
    }
    Ok(())
}

fn run(segments: u32, ops: &[Op]) -> Result<(), String> {
    let mut mem = vec![0u8; SegmentTable::encoded_len(segments)];
    let mut counts = SegmentCounts::default();
    let mut model = vec![SegEntry::FREE; segments as usize];
    SegmentTable::new(&mut mem, segments, &mut counts).clear();
    for (i, op) in ops.iter().enumerate() {
        let mut t = SegmentTable::new(&mut mem, segments, &mut counts);
        apply(&mut t, &mut model, op).map_err(|e| format!("step {i} ({op:?}): {e}"))?;
        let copy = mem.clone();
        let t = SegmentTable::new(&mut mem, segments, &mut counts);
        check(&t, &model, &copy).map_err(|e| format!("after step {i} ({op:?}): {e}"))?;
    }
    Ok(())
}

#[test]
fn segment_table_matches_its_model() {
    seeded::check(
        "segment_table_matches_its_model",
        0x7365_6731,
        256,
        case(),
        |(n, ops)| run(n, &ops),
    );
}

/// The check fails on a table whose free count drifts: a set that makes a segment free
/// without the table seeing it (written straight into the slice) is caught.
#[test]
fn a_free_count_that_drifts_is_caught() {
    let mut mem = vec![0u8; SegmentTable::encoded_len(4)];
    let mut counts = SegmentCounts::default();
    let mut t = SegmentTable::new(&mut mem, 4, &mut counts);
    t.clear();
    let used = SegEntry {
        live: 1,
        state: SegState::Used,
        first_seq: 2,
    };
    t.set(1, used);
    let mut model = vec![SegEntry::FREE; 4];
    model[1] = used;
    SegEntry::FREE.encode(&mut mem, SEG_ENTRY_BYTES);
    model[1] = SegEntry::FREE;
    let copy = mem.clone();
    let t = SegmentTable::new(&mut mem, 4, &mut counts);
    let err = check(&t, &model, &copy).unwrap_err();
    assert!(err.contains("free count 3"), "{err}");
}
