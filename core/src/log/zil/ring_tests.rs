//! The intent-log ring and flush marks through a [`LogIo`] over a small array of memory disks,
//! against a model kept from what the disks hold (read straight from their bytes, not through
//! the code under test).
//!
//! Random appends, flushes (as the pool flushes: members first when stripes were written, then
//! the intent log, sealing the stripe when it refuses, then a flush mark), extra flush marks,
//! member failures within the level's tolerance and crashes run on RAID-0/1/10/5/6. Checked:
//! - each record lands on `min(tolerance + 1, 4)` distinct writable members (fewer only when
//!   fewer are writable), holds exactly the open stripe's bytes it names, and the records of a
//!   flush cover the stripe from the last logged sector to its fill, in order;
//! - the ring never overwrites a record still needed (written since the stripes were last
//!   flushed): every copy of every needed record still reads back byte for byte;
//! - after a crash (a copy of the disks, a fresh log, some record copies and flush marks
//!   corrupted), `zil_scan` returns exactly the records of the newest stripe that still
//!   verify, `zil_patch` lays exactly their bytes over a buffer (the open stripe's bytes up to
//!   what was logged, when the open stripe is the newest), the newest intact flush mark is
//!   found, and the next mark goes to the other slot, leaving it intact;
//! - flush marks alternate between the two slots; every mark slot holds the last mark
//!   written there.
use std::collections::{BTreeMap, HashSet};
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use proptest::prelude::*;
use raidcore_hal::{BlockSize, ErrorKind};

use super::*;
use crate::format::{Counters, ItemHeader, ItemKind, PoolLayout};
use crate::log::segments::SegmentTable;
use crate::log::{Log, Pass};
use crate::raid::tests::RamDisk;
use crate::raid::{Array, ArrayConfig, Geometry, Level};
use crate::seeded;

const N: usize = 8;
const TAG: u64 = 0x5a11_7e57_0000_0001;
const BS: usize = 512;
const SEGMENTS: u32 = 8;
const SEGMENT_STRIPES: u32 = 16;

/// Byte offset on a member of intent-log slot `slot` (ring slots, then the mark slots).
fn slot_byte(slot: u32) -> usize {
    (2 + ROOT_SLOTS as usize + slot as usize) * SLOT_BYTES
}

/// Deterministic bytes for payload `tag`.
fn pattern(tag: u64, len: usize) -> Vec<u8> {
    let mut s = tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

/// The log, its array and its arena slices.
struct Rig {
    array: Array<RamDisk, N>,
    log: Log,
    stripe: Vec<u8>,
    scratch: Vec<u8>,
    item: Vec<u8>,
    sut: Vec<u8>,
    counters: Counters,
    layout: PoolLayout,
}

impl Rig {
    /// A log over `disks` members at `level`, with a ring of `ring` slots and records of up
    /// to `chunk_slots` slots of payload.
    fn new(level: Level, disks: usize, ring: u32, chunk_slots: usize) -> Rig {
        let layout = PoolLayout {
            zil_slots: ring + FLUSH_MARK_SLOTS,
            segment_stripes: SEGMENT_STRIPES,
            segments: SEGMENTS,
            max_extent_blocks: 8,
            compression: false,
        };
        let front = u64::from(2 + ROOT_SLOTS + layout.zil_slots) * (SLOT_BYTES / BS) as u64;
        let strip = 4096u32;
        let stripes = u64::from(SEGMENTS * SEGMENT_STRIPES);
        let blocks = front + stripes * u64::from(strip) / BS as u64;
        let geo = Geometry::try_new(level, disks, strip, BlockSize::B512, blocks, front).unwrap();
        let members = (0..disks).map(|_| Some(RamDisk::new(BS, blocks)));
        let array = Array::new(geo, members, ArrayConfig::default()).unwrap();
        let mut rig = Rig::around(array, layout, chunk_slots);
        rig.io(&[]).segs().clear();
        rig
    }

    fn around(array: Array<RamDisk, N>, layout: PoolLayout, chunk_slots: usize) -> Rig {
        let sdb = array.geometry().stripe_data_bytes();
        let reserved: Vec<u32> = (0..SEGMENTS).collect();
        Rig {
            log: Log::new(TAG, layout, sdb, &reserved),
            stripe: vec![0; sdb],
            scratch: vec![0; 64 * 1024],
            item: vec![0; HEADER_BYTES + (chunk_slots + 2) * SLOT_BYTES],
            sut: vec![0; SegmentTable::encoded_len(SEGMENTS)],
            counters: Counters::default(),
            layout,
            array,
        }
    }

    fn io<'a>(&'a mut self, patches: &'a [ZilRef]) -> LogIo<'a, RamDisk, N> {
        LogIo {
            array: &mut self.array,
            log: &mut self.log,
            stripe: &mut self.stripe,
            scratch: &mut self.scratch,
            item: &mut self.item,
            sut: &mut self.sut,
            counters: &mut self.counters,
            patches,
            pass: Pass::FindEnd { healed: false },
            plan: None,
            slog: None,
        }
    }

    fn live_io(&mut self) -> LogIo<'_, RamDisk, N> {
        let mut io = self.io(&[]);
        io.pass = Pass::Live;
        io
    }

    /// The disks as a power cut leaves them, under a freshly opened log (what import has).
    fn crashed(&mut self) -> Rig {
        let geo = *self.array.geometry();
        let n = geo.disks();
        let disks: Vec<Option<RamDisk>> = (0..n).map(|d| self.array.disk_mut(d).cloned()).collect();
        let mut array = Array::new(geo, disks, ArrayConfig::default()).unwrap();
        for d in 0..n {
            array
                .set_state(d, self.array.member(d).unwrap().state())
                .unwrap();
        }
        let chunk_slots = (self.item.len() - HEADER_BYTES) / SLOT_BYTES - 2;
        Rig::around(array, self.layout, chunk_slots)
    }

    fn disks(&self) -> usize {
        self.array.geometry().disks()
    }

    fn ring(&self) -> u32 {
        self.layout.zil_slots - FLUSH_MARK_SLOTS
    }

    fn sdb(&self) -> usize {
        self.stripe.len()
    }

    /// Member `d`'s bytes.
    fn bytes(&mut self, d: usize) -> &mut Vec<u8> {
        &mut self.array.disk_mut(d).unwrap().data
    }

    fn copies(&self) -> usize {
        (self.array.geometry().tolerance() + 1).min(MAX_COPIES)
    }
}

/// A record as the disks showed it when it was written.
#[derive(Debug, Clone)]
struct Rec {
    seq: u64,
    stripe_seq: u64,
    stripe_addr: u64,
    offset: u32,
    len: u32,
    slots: u32,
    payload: Vec<u8>,
    copies: Vec<(usize, u32)>,
}

/// What the disks should hold.
#[derive(Debug, Default)]
struct Model {
    recs: Vec<Rec>,
    /// Per member and ring slot: the record that last wrote it.
    owner: Vec<Vec<Option<u64>>>,
    /// Records from this sequence number on are still needed.
    needed_from: u64,
    next_seq: u64,
    marks: Vec<FlushMark>,
    /// Per member and mark slot: the mark last written there.
    mark_owner: Vec<[Option<u64>; 2]>,
    failed: HashSet<usize>,
}

/// A record header at ring slot `slot` of `bytes` (one member), with its whole record.
fn record_at(bytes: &[u8], slot: u32, ring: u32, sdb: usize) -> Option<(ZilHeader, &[u8])> {
    let at = slot_byte(slot);
    let h = ZilHeader::decode(bytes.get(at..at + SLOT_BYTES)?, sdb).ok()?;
    let slots = (HEADER_BYTES + h.len as usize).div_ceil(SLOT_BYTES) as u32;
    if h.pool != TAG || slot + slots > ring {
        return None;
    }
    Some((h, bytes.get(at..at + slots as usize * SLOT_BYTES)?))
}

impl Model {
    fn new(rig: &Rig) -> Model {
        Model {
            owner: vec![vec![None; rig.ring() as usize]; rig.disks()],
            mark_owner: vec![[None; 2]; rig.disks()],
            ..Model::default()
        }
    }

    /// Every record copy from `self.next_seq` on, read from the disks.
    fn new_records(&self, rig: &mut Rig) -> Result<BTreeMap<u64, Rec>, String> {
        let (ring, sdb) = (rig.ring(), rig.sdb());
        let mut found: BTreeMap<u64, Rec> = BTreeMap::new();
        for d in 0..rig.disks() {
            let bytes = rig.bytes(d).clone();
            for slot in 0..ring {
                let Some((h, rec)) = record_at(&bytes, slot, ring, sdb) else {
                    continue;
                };
                if h.record_seq < self.next_seq {
                    continue;
                }
                let payload = rec[HEADER_BYTES..HEADER_BYTES + h.len as usize].to_vec();
                if crate::format::crc32c(&payload) != h.payload_crc {
                    return Err(format!(
                        "record {} on member {d} does not verify",
                        h.record_seq
                    ));
                }
                let r = found.entry(h.record_seq).or_insert_with(|| Rec {
                    seq: h.record_seq,
                    stripe_seq: h.stripe_seq,
                    stripe_addr: h.stripe_addr,
                    offset: h.offset,
                    len: h.len,
                    slots: rec.len().div_ceil(SLOT_BYTES) as u32,
                    payload: payload.clone(),
                    copies: Vec::new(),
                });
                if r.payload != payload || (r.offset, r.len) != (h.offset, h.len) {
                    return Err(format!("copies of record {} differ", h.record_seq));
                }
                r.copies.push((d, slot));
            }
        }
        Ok(found)
    }

    /// The records one `zil_write` left (see the module docs); `from`: the first byte it had
    /// to log, `ok`: what it returned.
    fn observe_records(&mut self, rig: &mut Rig, from: usize, ok: bool) -> Result<(), String> {
        let found = self.new_records(rig)?;
        let writable = (0..rig.disks())
            .filter(|d| !self.failed.contains(d))
            .count();
        let want = rig.copies().min(writable);
        let mut end = from / SECTOR * SECTOR;
        for (i, r) in found.values().enumerate() {
            let disks: HashSet<usize> = r.copies.iter().map(|c| c.0).collect();
            if r.seq != self.next_seq + i as u64 || disks.len() != r.copies.len() {
                return Err(format!(
                    "record {r:?}: numbering or copies on one member twice"
                ));
            }
            if disks.len() != want || disks.iter().any(|d| self.failed.contains(d)) {
                return Err(format!(
                    "record {} on members {disks:?}, want {want} writable",
                    r.seq
                ));
            }
            let stripe = &rig.stripe[r.offset as usize..(r.offset + r.len) as usize];
            if r.payload != stripe || r.stripe_seq != rig.log.stripe_seq || r.offset as usize != end
            {
                return Err(format!("record {} is not the stripe's next bytes", r.seq));
            }
            end += r.len as usize;
        }
        if ok && end != rig.log.fill {
            return Err(format!(
                "records end at {end}, the stripe is filled to {}",
                rig.log.fill
            ));
        }
        for r in found.into_values() {
            self.claim(&r)?;
            self.next_seq = r.seq + 1;
            self.recs.push(r);
        }
        self.check_needed(rig)
    }

    /// Takes the ring slots of `r`'s copies; none may hold a record still needed.
    fn claim(&mut self, r: &Rec) -> Result<(), String> {
        for &(d, slot) in &r.copies {
            for s in slot..slot + r.slots {
                let o = &mut self.owner[d][s as usize];
                if let Some(old) = *o
                    && old >= self.needed_from
                {
                    return Err(format!(
                        "record {} overwrote needed record {old} on member {d}",
                        r.seq
                    ));
                }
                *o = Some(r.seq);
            }
        }
        Ok(())
    }

    /// Every copy of every needed record reads back.
    fn check_needed(&self, rig: &mut Rig) -> Result<(), String> {
        let (ring, sdb) = (rig.ring(), rig.sdb());
        for r in self.recs.iter().filter(|r| r.seq >= self.needed_from) {
            for &(d, slot) in &r.copies {
                let bytes = rig.bytes(d);
                let got = record_at(bytes, slot, ring, sdb);
                let same = got.is_some_and(|(h, rec)| {
                    h.record_seq == r.seq && rec[HEADER_BYTES..][..r.len as usize] == r.payload[..]
                });
                if !same {
                    return Err(format!(
                        "needed record {} lost on member {d} slot {slot}",
                        r.seq
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Model {
    /// After `write_flush_mark`: the mark the model expects (if the position moved since the
    /// last one), on the members it expects, and every mark slot holding its last mark.
    fn observe_mark(&mut self, rig: &mut Rig, marked: Option<(u64, u32)>) -> Result<(), String> {
        let at = (rig.log.stripe_seq, rig.log.zil_done as u32);
        let seq = self.marks.len() as u64;
        if marked != Some(at) {
            let mark = FlushMark {
                pool: TAG,
                stripe_addr: rig.log.stripe_addr,
                stripe_seq: at.0,
                durable: at.1,
                mark_seq: seq,
            };
            let n = rig.disks();
            let on = (0..n)
                .map(|k| (seq as usize + k) % n)
                .filter(|d| !self.failed.contains(d))
                .take(rig.copies());
            for d in on {
                self.mark_owner[d][(seq % 2) as usize] = Some(seq);
            }
            self.marks.push(mark);
        }
        if rig.log.zil.mark_seq != self.marks.len() as u64 {
            return Err(format!(
                "next mark {}, model {}",
                rig.log.zil.mark_seq,
                self.marks.len()
            ));
        }
        self.check_marks(rig, &HashSet::new())
    }

    /// Every mark slot on every member holds the mark the model last put there (or none).
    fn check_marks(&self, rig: &mut Rig, torn: &HashSet<(usize, usize)>) -> Result<(), String> {
        let (ring, sdb) = (rig.ring(), rig.sdb());
        for d in 0..rig.disks() {
            for k in 0..2 {
                let at = slot_byte(ring + k as u32);
                let got = FlushMark::decode(&rig.bytes(d)[at..at + SLOT_BYTES], sdb).ok();
                let want = self.mark_owner[d][k]
                    .filter(|_| !torn.contains(&(d, k)))
                    .map(|m| self.marks[m as usize]);
                if got != want {
                    return Err(format!("member {d} mark slot {k}: {got:?}, model {want:?}"));
                }
            }
        }
        Ok(())
    }

    /// Whether copy `(d, slot)` of `r` still holds it: its first slot (`whole`: all its slots).
    fn intact(&self, r: &Rec, d: usize, slot: u32, whole: bool) -> bool {
        let n = if whole { r.slots } else { 1 };
        (slot..slot + n).all(|s| self.owner[d][s as usize] == Some(r.seq))
    }
}

/// Damage a crash test does to the disks copy: record headers, record payloads, mark slots.
#[derive(Debug, Default)]
struct Damage {
    headers: HashSet<(usize, u32)>,
    payloads: HashSet<(usize, u32)>,
    marks: HashSet<(usize, usize)>,
}

/// Flips one byte of an intact record copy's header or payload, or of a mark slot, picked by
/// `(which, pos)`, on the crashed copy `c`.
fn damage(model: &Model, c: &mut Rig, which: u16, pos: u16, dmg: &mut Damage) {
    let copies: Vec<(&Rec, usize, u32)> = model
        .recs
        .iter()
        .flat_map(|r| r.copies.iter().map(move |&(d, s)| (r, d, s)))
        .filter(|&(r, d, s)| model.intact(r, d, s, true))
        .collect();
    let marks: Vec<(usize, usize)> = (0..c.disks())
        .flat_map(|d| [(d, 0), (d, 1)])
        .filter(|&(d, k)| model.mark_owner[d][k].is_some())
        .collect();
    let pos = usize::from(pos);
    let ring = c.ring();
    let pick = usize::from(which / 3);
    let (d, byte) = match which % 3 {
        0 | 1 if !copies.is_empty() => {
            let (r, d, s) = copies[pick % copies.len()];
            if which.is_multiple_of(3) {
                dmg.headers.insert((d, s));
                (d, slot_byte(s) + pos % 60)
            } else {
                dmg.payloads.insert((d, s));
                (d, slot_byte(s) + HEADER_BYTES + pos % r.len as usize)
            }
        }
        _ if !marks.is_empty() => {
            let (d, k) = marks[pick % marks.len()];
            dmg.marks.insert((d, k));
            (d, slot_byte(ring + k as u32) + pos % 60)
        }
        _ => return,
    };
    // An add, not an exclusive or: two damages of one byte must not cancel.
    c.bytes(d)[byte] = c.bytes(d)[byte].wrapping_add(0x5b);
}

/// The records `zil_scan(min)` must return: those of the newest stripe (at or after `min`)
/// with a visible header anywhere that still verify on some member, by sequence number.
fn expected_scan<'m>(model: &'m Model, min: u64, dmg: &Damage) -> Vec<&'m Rec> {
    let visible =
        |r: &Rec, d: usize, s: u32| model.intact(r, d, s, false) && !dmg.headers.contains(&(d, s));
    let verified = |r: &Rec, d: usize, s: u32| {
        visible(r, d, s) && model.intact(r, d, s, true) && !dmg.payloads.contains(&(d, s))
    };
    let newest = model
        .recs
        .iter()
        .filter(|r| r.stripe_seq >= min && r.copies.iter().any(|&(d, s)| visible(r, d, s)))
        .map(|r| r.stripe_seq)
        .max();
    model
        .recs
        .iter()
        .filter(|r| Some(r.stripe_seq) == newest)
        .filter(|r| r.copies.iter().any(|&(d, s)| verified(r, d, s)))
        .collect()
}

/// The scan's records against [`expected_scan`].
fn check_scan(model: &Model, refs: &[ZilRef], want: &[&Rec], dmg: &Damage) -> Result<(), String> {
    let got: Vec<u64> = refs.iter().map(|r| r.record_seq).collect();
    let seqs: Vec<u64> = want.iter().map(|r| r.seq).collect();
    if got != seqs {
        return Err(format!("zil_scan found records {got:?}, model {seqs:?}"));
    }
    for (z, r) in refs.iter().zip(want) {
        let at = (z.disk as usize, z.slot);
        let good = r.copies.contains(&at)
            && model.intact(r, at.0, at.1, true)
            && !dmg.headers.contains(&at)
            && !dmg.payloads.contains(&at);
        if !good || (z.stripe_addr, z.offset, z.len) != (r.stripe_addr, r.offset, r.len) {
            return Err(format!("zil_scan's {z:?} is not a good copy of {}", r.seq));
        }
    }
    Ok(())
}

/// `zil_patch` over the newest stripe (whole, and a middle part) lays exactly the records'
/// bytes; over the open stripe with all its records, it gives back what was logged of it.
fn check_patch(rig: &Rig, c: &mut Rig, refs: &[ZilRef], want: &[&Rec]) -> Result<(), String> {
    let Some(first) = want.first() else {
        return Ok(());
    };
    let (addr, sdb) = (first.stripe_addr, c.sdb());
    let mut expect = vec![0xee; sdb];
    for r in want {
        expect[r.offset as usize..(r.offset + r.len) as usize].copy_from_slice(&r.payload);
    }
    let mut whole = vec![0xee; sdb];
    let mut part = vec![0xee; sdb - 200];
    let mut io = c.io(refs);
    io.zil_patch(addr, &mut whole)
        .map_err(|e| format!("zil_patch: {e:?}"))?;
    io.zil_patch(addr + 100, &mut part)
        .map_err(|e| format!("zil_patch: {e:?}"))?;
    if whole != expect || part[..] != expect[100..sdb - 100] {
        return Err("zil_patch laid other bytes than the records'".into());
    }
    let open = rig.log.stripe_seq;
    let all = rig.log.zil_records as usize;
    let done = rig.log.zil_done;
    if first.stripe_seq == open && want.len() == all && whole[..done] != rig.stripe[..done] {
        return Err(format!(
            "patched open stripe differs from its first {done} bytes"
        ));
    }
    Ok(())
}

/// The newest intact mark at or after `min`, as the scan must find it.
fn expected_mark(model: &Model, min: u64, dmg: &Damage) -> Option<FlushMark> {
    (0..model.mark_owner.len())
        .flat_map(|d| [(d, 0), (d, 1)])
        .filter(|at| !dmg.marks.contains(at))
        .filter_map(|(d, k)| model.mark_owner[d][k])
        .map(|m| model.marks[m as usize])
        .filter(|m| m.stripe_seq >= min)
        .max_by_key(|m| (m.stripe_seq, m.durable))
}

/// After the scan the next mark is numbered after every mark found and goes to the other
/// slot: the newest mark found stays intact everywhere it was.
fn check_next_mark(model: &Model, c: &mut Rig, min: u64, dmg: &Damage) -> Result<(), String> {
    let found = expected_mark(model, min, dmg);
    let want_next = found.map_or(0, |m| m.mark_seq + 1);
    if c.log.zil.mark_seq != want_next {
        return Err(format!(
            "after the scan the next mark is {}, want {want_next}",
            c.log.zil.mark_seq
        ));
    }
    c.live_io()
        .write_flush_mark()
        .map_err(|e| format!("write_flush_mark: {e:?}"))?;
    let (ring, sdb) = (c.ring(), c.sdb());
    let Some(best) = found else {
        return Ok(());
    };
    let k = (best.mark_seq % 2) as usize;
    for d in 0..c.disks() {
        if model.mark_owner[d][k] == Some(best.mark_seq) && !dmg.marks.contains(&(d, k)) {
            let at = slot_byte(ring + k as u32);
            let got = FlushMark::decode(&c.bytes(d)[at..at + SLOT_BYTES], sdb).ok();
            if got != Some(best) {
                return Err(format!(
                    "the next mark overwrote mark {} on member {d}",
                    best.mark_seq
                ));
            }
        }
    }
    Ok(())
}

/// What the scan's records prove durable: each record's offset less whole chunks (it may be
/// a later chunk of its flush), the furthest of them; never past what the flushes before the
/// crash made durable.
fn check_proven(
    rig: &Rig,
    c: &mut Rig,
    proven: Option<(u64, u64)>,
    want: &[&Rec],
) -> Result<(), String> {
    let chunk = c.io(&[]).zil_chunk_max() as u64;
    let model = want
        .iter()
        .map(|r| (r.stripe_seq, u64::from(r.offset) % chunk))
        .max_by_key(|p| p.1);
    if proven != model {
        return Err(format!(
            "zil_scan's records prove {proven:?} durable, model {model:?}"
        ));
    }
    let durable = (rig.log.stripe_seq, rig.log.zil_done as u64);
    if proven.is_some_and(|p| p > durable) {
        return Err(format!(
            "zil_scan's records prove {proven:?} durable, but only {durable:?} was"
        ));
    }
    Ok(())
}

/// A power cut now: the scan, the patch and the marks on a damaged copy of the disks.
fn crash(
    rig: &mut Rig,
    model: &Model,
    min_open: bool,
    damages: &[(u16, u16)],
) -> Result<(), String> {
    let mut c = rig.crashed();
    let mut dmg = Damage::default();
    for &(which, pos) in damages {
        damage(model, &mut c, which, pos, &mut dmg);
    }
    let min = if min_open { rig.log.stripe_seq } else { 0 };
    let replay = c.io(&[]).zil_scan(min);
    let want = expected_scan(model, min, &dmg);
    check_scan(model, &replay.zil_refs, &want, &dmg)?;
    check_patch(rig, &mut c, &replay.zil_refs, &want)?;
    check_proven(rig, &mut c, replay.durable_records, &want)?;
    let mark = expected_mark(model, min, &dmg);
    if replay.durable_mark != mark {
        return Err(format!(
            "zil_scan found mark {:?}, model {mark:?}",
            replay.durable_mark
        ));
    }
    check_next_mark(model, &mut c, min, &dmg)
}

#[derive(Debug, Clone)]
enum Op {
    /// An item of `1 + len % 6000` payload bytes.
    Append(u16),
    Flush,
    Mark,
    /// Member `d` fails, if the level tolerates one more.
    Fail(u8),
    Crash {
        min_open: bool,
        damage: Vec<(u16, u16)>,
    },
}

/// The rig, its model and a payload counter.
struct Case {
    rig: Rig,
    model: Model,
    tag: u64,
}

impl Case {
    fn flush_stripes(&mut self) {
        self.rig.array.flush();
        self.rig.log.stripes_flushed();
        self.rig.log.zil.obsolete();
        self.model.needed_from = self.model.next_seq;
    }

    fn mark(&mut self) -> Result<(), String> {
        let marked = self.rig.log.zil.marked;
        self.rig
            .live_io()
            .write_flush_mark()
            .map_err(|e| format!("write_flush_mark: {e:?}"))?;
        self.model.observe_mark(&mut self.rig, marked)
    }

    /// A flush as the pool does it (`Pool::flush_all` without the streams).
    fn flush(&mut self) -> Result<(), String> {
        let mut stripes = self.rig.log.has_unflushed_stripes();
        if stripes {
            self.flush_stripes();
        }
        if self.rig.log.open_bytes_unlogged() {
            let from = self.rig.log.zil_done;
            let ok = self
                .rig
                .live_io()
                .zil_write()
                .map_err(|e| format!("zil_write: {e:?}"))?;
            self.model.observe_records(&mut self.rig, from, ok)?;
            if !ok {
                self.rig
                    .live_io()
                    .seal_stripe()
                    .map_err(|e| format!("seal: {e:?}"))?;
                self.flush_stripes();
                stripes = true;
            }
        }
        if stripes || !self.rig.array.not_in_sync().is_empty() {
            self.mark()?;
        }
        Ok(())
    }

    /// One step; `Ok(false)` when the log is full (the case ends).
    fn step(&mut self, op: &Op) -> Result<bool, String> {
        match op {
            Op::Append(len) => {
                self.tag += 1;
                let payload = pattern(self.tag, 1 + usize::from(*len) % 6000);
                let hdr = ItemHeader {
                    kind: ItemKind::Extent,
                    flags: 0,
                    lun: 0,
                    lba: self.tag,
                    blocks: 1,
                    stored_len: 0,
                    raw_len: payload.len() as u32,
                    payload_crc: 0,
                    seq: 0,
                    pool: 0,
                    addr: 0,
                };
                match self.rig.live_io().append(hdr, &payload, true) {
                    Ok(_) => {}
                    Err(IoError::LogFull) => return Ok(false),
                    Err(e) => return Err(format!("append: {e:?}")),
                }
            }
            Op::Flush => self.flush()?,
            Op::Mark => self.mark()?,
            Op::Fail(d) => {
                let d = usize::from(*d) % self.rig.disks();
                if self.model.failed.len() < self.rig.array.geometry().tolerance()
                    && self.model.failed.insert(d)
                {
                    self.rig
                        .array
                        .fail(d, ErrorKind::DeviceFailed)
                        .map_err(|e| format!("{e:?}"))?;
                }
            }
            Op::Crash { min_open, damage } => crash(&mut self.rig, &self.model, *min_open, damage)?,
        }
        Ok(true)
    }
}

const LEVELS: [(Level, usize); 6] = [
    (Level::Raid0, 3),
    (Level::Raid1, 3),
    (Level::Raid1, 5),
    (Level::Raid10, 4),
    (Level::Raid5, 4),
    (Level::Raid6, 6),
];

fn run(level: usize, ring: u32, chunk_slots: usize, ops: &[Op]) -> Result<(), String> {
    let (lv, n) = LEVELS[level % LEVELS.len()];
    let rig = Rig::new(lv, n, ring, chunk_slots);
    let model = Model::new(&rig);
    let mut case = Case { rig, model, tag: 0 };
    let what = format!("{lv:?} on {n}, ring of {ring} slots, records up to {chunk_slots} slots");
    for (i, op) in ops.iter().enumerate() {
        match case.step(op) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(format!("{what}: step {i} ({op:?}): {e}")),
        }
    }
    crash(&mut case.rig, &case.model, false, &[]).map_err(|e| format!("{what}: final crash: {e}"))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => prop_oneof![0u16..600, any::<u16>()].prop_map(Op::Append),
        5 => Just(Op::Flush),
        1 => Just(Op::Mark),
        1 => any::<u8>().prop_map(Op::Fail),
        2 => (any::<bool>(), proptest::collection::vec((any::<u16>(), any::<u16>()), 0..4))
            .prop_map(|(min_open, damage)| Op::Crash { min_open, damage }),
    ]
}

#[test]
fn intent_log_ring_matches_its_model() {
    seeded::check(
        "intent_log_ring_matches_its_model",
        0x7a69_6c31,
        192,
        (
            0..LEVELS.len(),
            3u32..=12,
            1usize..=3,
            proptest::collection::vec(op(), 1..120),
        ),
        |(level, ring, chunk, ops)| run(level, ring, chunk, &ops),
    );
}

/// The check fails when the ring overwrites a needed record (here: by hand, on one member).
#[test]
fn an_overwritten_needed_record_is_caught() {
    let rig = Rig::new(Level::Raid5, 4, 6, 1);
    let model = Model::new(&rig);
    let mut case = Case { rig, model, tag: 0 };
    case.step(&Op::Append(300)).unwrap();
    case.step(&Op::Flush).unwrap();
    let (d, slot) = case.model.recs[0].copies[0];
    case.rig.bytes(d)[slot_byte(slot) + HEADER_BYTES] ^= 1;
    let err = case.model.check_needed(&mut case.rig).unwrap_err();
    assert!(err.contains("needed record 0 lost"), "{err}");
}

/// After every record became obsolete the whole ring is free, so a record that fits the ring
/// should be taken. It is refused when it does not fit between the head and the ring's end
/// and is longer than the head: the obsolete slots from the head to the end still count as
/// used ("waste"), so `zil_write` answers "full" and the pool seals the stripe instead (a pad
/// and a full-stripe write instead of a 3-slot record). Only rings shorter than about twice a
/// record see it (the default ring of 254 slots takes records of at most 33).
#[test]
#[ignore = "bug (minor): zil_write refuses a record that fits an empty ring when it would wrap"]
fn an_empty_ring_takes_a_record_that_fits_it() {
    // RAID-5 on 4: 12 KiB stripes; a ring of 4 slots; records of up to 3 slots of payload.
    let rig = Rig::new(Level::Raid5, 4, 4, 3);
    let model = Model::new(&rig);
    let mut case = Case { rig, model, tag: 0 };
    // Four 1-slot records, each on two members taken in turn, each stripe then sealed and
    // flushed: every record is obsolete, and every member's head is at slot 2.
    for _ in 0..4 {
        case.step(&Op::Append(1000)).unwrap();
        assert!(case.rig.live_io().zil_write().unwrap());
        case.rig.live_io().seal_stripe().unwrap();
        case.flush_stripes();
    }
    assert!(
        case.rig.log.zil.rings[..4]
            .iter()
            .all(|r| r.head == 2 && r.used == 0)
    );
    // A 3-slot record (9 KiB of the new stripe) into the empty 4-slot ring.
    case.step(&Op::Append(5999)).unwrap();
    case.step(&Op::Append(2999)).unwrap();
    assert_eq!((HEADER_BYTES + case.rig.log.fill).div_ceil(SLOT_BYTES), 3);
    assert!(
        case.rig.live_io().zil_write().unwrap(),
        "an empty ring refused a 3-slot record"
    );
}
