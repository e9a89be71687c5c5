//! Issue 5 tests: hot spares, rebuild of live data only, scrub, self-healing reads, stale
//! members and power cuts during rebuild, on RAID-5/6 pools over simulated faulty memory disks.
//!
//! Every test is deterministic: the data written is a function of a fixed seed (printed in
//! every assertion message), the faults are injected at chosen places, and nothing depends on
//! time.

use raidcore::event::Event;
use raidcore::format::{
    BadRange, ITEM_ALIGN, ItemHeader, ItemKind, LUN_BLOCK, ROOT_SLOTS, SLOT_BYTES, root_slot,
    superblock_slot,
};
use raidcore::pool::{AdminError, Health, ImportOptions, IoError, Pool, PoolConfig};
use raidcore::raid::{Column, DiskState, Level};
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind};
use raidcore_sim::disk::MemDisk;
use raidcore_sim::fault::{
    EventKind, Fault, FaultConfig, FaultHandle, FaultyDisk, PendingFate, TransientKind,
};

type FPool = Pool<FaultyDisk<MemDisk>, Vec<u8>, 8, 4, 32, 8>;

/// Blocks of 512 bytes per simulated disk (8 MiB).
const DISK_BLOCKS: u64 = 16384;

fn config(level: Level) -> PoolConfig {
    PoolConfig {
        level,
        strip_bytes: 4096,
        max_extent_blocks: 8,
        compression: false,
        zil_slots: 32,
        segment_stripes: 4,
        max_segments: 256,
        stripes_per_step: 8,
        ..PoolConfig::default()
    }
}

/// Incompressible content of LUN block `i` written in generation `generation` under `seed`.
fn block(seed: u64, generation: u64, i: u64) -> Vec<u8> {
    let mut s = (seed ^ generation.wrapping_mul(0xd1b5_4a32_d192_ed03))
        .wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        | 1;
    (0..LUN_BLOCK)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

fn faulty(inner: MemDisk, seed: u64, volatile: bool) -> FaultyDisk<MemDisk> {
    FaultyDisk::with_config(
        inner,
        seed,
        FaultConfig {
            volatile_cache: volatile,
            power_cut: PendingFate::Seeded,
            ..FaultConfig::default()
        },
    )
}

fn blank(seed: u64, volatile: bool) -> FaultyDisk<MemDisk> {
    faulty(
        MemDisk::new(BlockSize::B512, DISK_BLOCKS).unwrap(),
        seed,
        volatile,
    )
}

/// A pool of `members` blank disks and `spares` hot spares; the handles of all of them (members
/// first, then spares).
fn build(
    level: Level,
    members: usize,
    spares: usize,
    seed: u64,
    volatile: bool,
) -> (FPool, Vec<FaultHandle>) {
    let cfg = config(level);
    let m: Vec<_> = (0..members)
        .map(|i| blank(seed ^ i as u64, volatile))
        .collect();
    let s: Vec<_> = (0..spares)
        .map(|i| blank(seed ^ (100 + i as u64), volatile))
        .collect();
    let handles = m.iter().chain(s.iter()).map(FaultyDisk::handle).collect();
    let mem = vec![0u8; FPool::memory_bytes(&cfg, members)];
    let pool = FPool::create(m, s, cfg, [7; 16], mem).unwrap();
    (pool, handles)
}

/// [`build`], then a LUN "a" of 2000 blocks with `blocks` blocks of generation 0, flushed and
/// checkpointed.
fn filled(
    level: Level,
    members: usize,
    spares: usize,
    seed: u64,
    volatile: bool,
    blocks: u64,
) -> (FPool, Vec<FaultHandle>, u16) {
    let (mut p, h) = build(level, members, spares, seed, volatile);
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, blocks);
    p.checkpoint().unwrap();
    (p, h, lun)
}

fn fill(pool: &mut FPool, lun: u16, seed: u64, generation: u64, blocks: u64) {
    for i in 0..blocks {
        pool.write(lun, i, &block(seed, generation, i), false)
            .unwrap_or_else(|e| panic!("seed {seed}: write of block {i}: {e:?}"));
    }
    pool.flush()
        .unwrap_or_else(|e| panic!("seed {seed}: flush: {e:?}"));
}

fn verify(pool: &mut FPool, lun: u16, seed: u64, generation: u64, blocks: u64, what: &str) {
    verify_lost(pool, lun, seed, generation, blocks, &[], what);
}

/// Runs maintenance until it reports nothing left to do; returns the pool events of the run
/// (read after every call: the event ring is shorter than a rebuild's events).
fn run_to_idle(pool: &mut FPool, seed: u64) -> Vec<Event> {
    let mut events = Vec::new();
    for _ in 0..100_000 {
        let seq = pool.events().next_seq();
        let rep = pool
            .maintenance()
            .unwrap_or_else(|e| panic!("seed {seed}: maintenance: {e:?}"));
        events.extend(events_since(pool, seq));
        if rep.idle {
            return events;
        }
    }
    panic!("seed {seed}: maintenance never became idle");
}

fn mem_of(pool: &mut FPool, slot: usize) -> &mut MemDisk {
    pool.array_mut()
        .disk_mut(slot)
        .expect("member present")
        .inner_mut()
        .expect("settled")
}

fn snapshots(pool: &mut FPool) -> Vec<MemDisk> {
    let n = pool.array().geometry().disks();
    (0..n).map(|i| mem_of(pool, i).snapshot()).collect()
}

/// Member blocks that differ between two images of the same disk.
fn diff_blocks(a: &MemDisk, b: &MemDisk) -> Vec<u64> {
    let (mut a, mut b) = (a.snapshot(), b.snapshot());
    let mut out = Vec::new();
    let chunk = 256u64;
    let (mut x, mut y) = (vec![0u8; 512 * 256], vec![0u8; 512 * 256]);
    let mut lba = 0;
    while lba < DISK_BLOCKS {
        a.read(lba, &mut x).unwrap();
        b.read(lba, &mut y).unwrap();
        for i in 0..chunk as usize {
            if x[i * 512..(i + 1) * 512] != y[i * 512..(i + 1) * 512] {
                out.push(lba + i as u64);
            }
        }
        lba += chunk;
    }
    out
}

/// The blocks of `changed` in the data area that held something (not all zeros) in `before`:
/// anything else the pool wrote was an append to the log (the closing checkpoint's items).
fn overwritten(before: &MemDisk, changed: &[u64], data_start: u64) -> Vec<u64> {
    let mut d = before.snapshot();
    let mut b = vec![0u8; 512];
    changed
        .iter()
        .copied()
        .filter(|&l| {
            d.read(l, &mut b).unwrap();
            l >= data_start && b.iter().any(|&x| x != 0)
        })
        .collect()
}

fn scrub(pool: &mut FPool, seed: u64) -> (u64, u64) {
    pool.start_scrub();
    run_to_idle(pool, seed);
    let st = pool.status();
    assert_eq!(st.scrub, None, "seed {seed}: scrub still running");
    (st.scrub_repaired, st.scrub_unrepairable)
}

/// Flips bit `bit` of member block `lba` on the medium of member `slot`.
fn flip(pool: &mut FPool, slot: usize, lba: u64, bit: usize) {
    let d = mem_of(pool, slot);
    let mut b = vec![0u8; 512];
    d.read(lba, &mut b).unwrap();
    b[bit / 8] ^= 1 << (bit % 8);
    d.write(lba, &b).unwrap();
}

fn import(disks: Vec<FaultyDisk<MemDisk>>, level: Level) -> (FPool, raidcore::pool::ImportReport) {
    let cfg = config(level);
    let mem = vec![0u8; FPool::memory_bytes(&cfg, 8)];
    FPool::import(
        disks,
        ImportOptions {
            config: cfg,
            skip_refused: true,
            force: false,
            rewind: false,
        },
        mem,
    )
    .unwrap_or_else(|e| panic!("import: {e}"))
}

/// Imports the members of a pool (all present), checking that none is missing or refused.
fn reimport(members: Vec<Option<FaultyDisk<MemDisk>>>, level: Level, seed: u64) -> FPool {
    let disks: Vec<_> = members
        .into_iter()
        .map(|m| m.expect("member present"))
        .collect();
    let (q, report) = import(disks, level);
    assert_eq!(
        (report.missing, report.refused.len()),
        (0, 0),
        "seed {seed}: {report:?}"
    );
    q
}

/// Cuts the power of every disk of `h` (their volatile caches fare as seeded), restores it and
/// imports the members (the pool has no spare left).
fn power_cycle(p: FPool, h: &[FaultHandle], level: Level, seed: u64) -> FPool {
    for hd in h {
        hd.inject(Fault::PowerCut);
    }
    let (members, spares, _mem) = p.into_parts();
    assert!(spares.is_empty(), "seed {seed}: spares left");
    for m in members.iter().flatten() {
        m.handle().inject(Fault::PowerRestore);
    }
    reimport(members.into_iter().collect(), level, seed)
}

// 1. Scrub twice with no new faults: the second repairs nothing; scrub of a healthy pool
//    changes no byte on any disk.
#[test]
fn scrub_of_healthy_pool_changes_nothing_and_second_scrub_repairs_nothing() {
    let seed = 11;
    let (mut p, _h) = build(Level::Raid5, 4, 0, seed, false);
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, 400);
    p.checkpoint().unwrap();
    let before = snapshots(&mut p);
    let repair_before = p.stats().member_repair_bytes;
    assert_eq!(scrub(&mut p, seed), (0, 0), "seed {seed}: healthy scrub");
    assert_eq!(
        p.stats().member_repair_bytes - repair_before,
        0,
        "seed {seed}: repair bytes of a healthy scrub"
    );
    let after = snapshots(&mut p);
    let data_start = p.array().geometry().data_start_lba();
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        let d = diff_blocks(a, b);
        eprintln!(
            "seed {seed}: member {i} blocks changed by healthy scrub: {d:?} (data from {data_start})"
        );
        assert_eq!(
            overwritten(a, &d, data_start),
            Vec::<u64>::new(),
            "seed {seed}: scrub of a healthy pool overwrote written blocks of member {i} (changed: {d:?})"
        );
    }
    verify(&mut p, lun, seed, 0, 400, "after healthy scrub");

    // One silent fault, then two scrubs: the first repairs, the second finds nothing.
    let geo = *p.array().geometry();
    let stripe = 20;
    let d = geo.disk_of(stripe, Column::Data(0)).unwrap();
    flip(&mut p, d, geo.stripe_lba(stripe) + 2, 77);
    let (r1, u1) = scrub(&mut p, seed);
    assert_eq!(
        (r1 > 0, u1),
        (true, 0),
        "seed {seed}: first scrub ({r1}, {u1})"
    );
    assert_eq!(scrub(&mut p, seed), (0, 0), "seed {seed}: second scrub");
    verify(&mut p, lun, seed, 0, 400, "after two scrubs");
}

// 2. Rebuild work proportional to live data.
fn rebuild_bytes(blocks: impl Fn(u64) -> u64, seed: u64) -> (u64, u64, u64) {
    let (mut p, h) = build(Level::Raid5, 4, 1, seed, false);
    let cap = p.usable_bytes() / LUN_BLOCK as u64;
    eprintln!("seed {seed}: usable {cap} LUN blocks");
    let lun = p.create_lun("a", cap).unwrap();
    let blocks = blocks(cap);
    fill(&mut p, lun, seed, 0, blocks);
    p.checkpoint().unwrap();
    let before = p.stats().member_repair_bytes;
    let spare_before = h[4].writes();
    p.fail_disk(1).unwrap();
    let mut total = 0;
    loop {
        let rep = p.maintenance().unwrap();
        if let Some(r) = p.status().rebuild {
            total = r.2;
        }
        if rep.idle {
            break;
        }
    }
    assert_eq!(
        p.status().health,
        Health::Online,
        "seed {seed}: after rebuild"
    );
    verify(&mut p, lun, seed, 0, blocks, "after rebuild");
    let repair = p.stats().member_repair_bytes - before;
    (repair, h[4].writes() - spare_before, total)
}

#[test]
fn rebuild_work_is_proportional_to_live_data() {
    let seed = 22;
    // Usable: 3 data members of 8 MiB, less labels, log and reserve; 9000 blocks (~35 MiB)
    // is the pool nearly full, 900 a tenth of it.
    let (full, full_w, full_total) = rebuild_bytes(|cap| cap * 95 / 100, seed);
    let (tenth, tenth_w, tenth_total) = rebuild_bytes(|cap| cap / 10, seed);
    eprintln!(
        "seed {seed}: full {full} B / {full_w} writes / {full_total} stripes, tenth {tenth} B / {tenth_w} writes / {tenth_total} stripes"
    );
    assert!(full > 0, "seed {seed}: the full rebuild wrote nothing");
    assert!(
        tenth * 100 <= full * 15,
        "seed {seed}: 10 % full rebuild wrote {tenth} B, full {full} B"
    );
    assert!(
        tenth_w * 100 <= full_w * 15,
        "seed {seed}: spare writes 10 %: {tenth_w}, full: {full_w}"
    );
    // Only the stripes the rebuild counted were written, one strip each.
    assert_eq!(full, full_total * 4096, "seed {seed}: full rebuild bytes");
    assert_eq!(
        tenth,
        tenth_total * 4096,
        "seed {seed}: tenth rebuild bytes"
    );
}

// 3. Silent corruption in a data and a parity column: healed by a read and by scrub.
fn corrupt_case(column: Column, heal_by_read: bool) {
    let seed = 33;
    let blocks = 400;
    let (mut p, _h) = build(Level::Raid5, 5, 0, seed, false);
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, blocks);
    p.checkpoint().unwrap();
    let geo = *p.array().geometry();
    let pristine = snapshots(&mut p);
    for stripe in [10u64, 30, 55] {
        let d = geo.disk_of(stripe, column).unwrap();
        flip(
            &mut p,
            d,
            geo.stripe_lba(stripe) + 3,
            1000 + stripe as usize,
        );
    }
    let what = format!(
        "{column:?} corrupted, healed by {}",
        if heal_by_read { "read" } else { "scrub" }
    );
    if heal_by_read {
        verify(&mut p, lun, seed, 0, blocks, &what);
    } else {
        let (r, u) = scrub(&mut p, seed);
        assert_eq!(
            (r > 0, u),
            (true, 0),
            "seed {seed}, {what}: scrub ({r}, {u})"
        );
        verify(&mut p, lun, seed, 0, blocks, &what);
    }
    if matches!(column, Column::Data(_)) || !heal_by_read {
        // Healed: the media hold exactly what they held before the corruption.
        let now = snapshots(&mut p);
        let data_start = geo.data_start_lba();
        for (i, (a, b)) in pristine.iter().zip(&now).enumerate() {
            let d = diff_blocks(a, b);
            eprintln!("seed {seed}, {what}: member {i} differs at {d:?}");
            assert_eq!(
                overwritten(a, &d, data_start),
                Vec::<u64>::new(),
                "seed {seed}, {what}: member {i} not restored"
            );
        }
    }
    // And nothing is left for a scrub to find.
    assert_eq!(
        scrub(&mut p, seed),
        (0, 0),
        "seed {seed}, {what}: scrub after heal"
    );
}

#[test]
fn bit_flip_in_data_column_healed_by_read() {
    corrupt_case(Column::Data(1), true);
}

#[test]
fn bit_flip_in_data_column_healed_by_scrub() {
    corrupt_case(Column::Data(2), false);
}

#[test]
fn bit_flip_in_parity_column_healed_by_scrub() {
    corrupt_case(Column::P, false);
}

// 4. After a RAID-6 rebuild onto a hot spare, any set of up to two members can fail.
#[test]
fn after_raid6_rebuild_any_two_members_can_fail() {
    let seed = 44;
    let blocks = 300;
    let (mut p, _h) = build(Level::Raid6, 6, 1, seed, false);
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, blocks);
    p.fail_disk(2).unwrap();
    assert_eq!(p.status().spares, 0, "seed {seed}: spare not taken");
    run_to_idle(&mut p, seed);
    let st = p.status();
    assert_eq!(st.health, Health::Online, "seed {seed}: after rebuild");
    assert_eq!(st.rebuild, None, "seed {seed}");
    let (members, _spares, _mem) = p.shutdown().unwrap();
    let images: Vec<MemDisk> = members
        .into_iter()
        .map(|m| m.expect("member present").into_inner())
        .collect();
    let n = images.len();
    let mut sets: Vec<Vec<usize>> = (0..n).map(|a| vec![a]).collect();
    for a in 0..n {
        for b in a + 1..n {
            sets.push(vec![a, b]);
        }
    }
    for set in sets {
        let disks: Vec<_> = images
            .iter()
            .enumerate()
            .filter(|(i, _)| !set.contains(i))
            .map(|(i, d)| faulty(d.snapshot(), seed ^ i as u64, false))
            .collect();
        let (mut q, report) = import(disks, Level::Raid6);
        assert_eq!(
            (report.missing as usize, report.refused.len()),
            (set.len(), 0),
            "seed {seed}: members {set:?} left out: {report:?}"
        );
        assert_eq!(q.status().health, Health::Degraded, "seed {seed}: {set:?}");
        let lun = q.lun_by_name("a").unwrap();
        verify(
            &mut q,
            lun,
            seed,
            0,
            blocks,
            &format!("members {set:?} missing"),
        );
    }
}

// 5. More failures than RAID-5 tolerates.
#[test]
fn raid5_with_two_failed_members_is_faulted_and_stays_faulted() {
    let seed = 55;
    let blocks = 200;
    let (mut p, h) = build(Level::Raid5, 4, 0, seed, false);
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, blocks);
    p.checkpoint().unwrap();
    h[0].inject(Fault::Fail);
    h[2].inject(Fault::Fail);
    let _ = p.fail_disk(0);
    let _ = p.fail_disk(2);
    assert_eq!(p.status().health, Health::Faulted, "seed {seed}");
    let check_reads = |p: &mut FPool, what: &str| {
        for i in 0..blocks {
            let mut buf = vec![0xa5u8; LUN_BLOCK];
            let r = p.read(lun, i, &mut buf);
            assert!(
                r.is_err(),
                "seed {seed}, {what}: block {i} read succeeded (zeros: {}, right data: {})",
                buf.iter().all(|&b| b == 0),
                buf == block(seed, 0, i)
            );
        }
    };
    check_reads(&mut p, "two members failed");
    assert!(
        p.write(lun, 0, &block(seed, 1, 0), true).is_err(),
        "seed {seed}: write to a faulted pool succeeded"
    );
    let _ = p.add_spare(blank(seed ^ 0x384, false));
    let _ = p.add_spare(blank(seed ^ 0x385, false));
    let _ = p.maintenance();
    assert_eq!(
        p.status().health,
        Health::Faulted,
        "seed {seed}: blank spares un-faulted the pool"
    );
    check_reads(&mut p, "after adding blank spares");
    assert!(
        matches!(p.maintenance(), Err(IoError::Faulted)),
        "seed {seed}: maintenance on a faulted pool"
    );
}

// 6. A member that returns after a spare took its place is stale.
#[test]
fn returning_member_after_spare_took_over_is_stale() {
    let seed = 66;
    let blocks = 300;
    let (mut p, h) = build(Level::Raid5, 4, 1, seed, false);
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, blocks);
    p.checkpoint().unwrap();
    // Member 1 drops out; keep what it holds.
    let old = mem_of(&mut p, 1).snapshot();
    h[1].inject(Fault::Fail);
    p.fail_disk(1).unwrap();
    run_to_idle(&mut p, seed);
    assert_eq!(
        p.status().health,
        Health::Online,
        "seed {seed}: after rebuild"
    );
    // New data everywhere while it is away.
    fill(&mut p, lun, seed, 1, blocks);
    let (members, _, _) = p.shutdown().unwrap();
    let images: Vec<MemDisk> = members
        .into_iter()
        .map(|m| m.unwrap().into_inner())
        .collect();

    // All current members plus the returning one: it is refused, the data is the new one.
    let mut disks: Vec<_> = images
        .iter()
        .enumerate()
        .map(|(i, d)| faulty(d.snapshot(), seed ^ i as u64, false))
        .collect();
    disks.push(faulty(old.snapshot(), seed ^ 0x4d, false));
    let (mut q, report) = import(disks, Level::Raid5);
    assert_eq!(
        (report.missing, report.refused.len()),
        (0, 1),
        "seed {seed}: {report:?}"
    );
    assert_eq!(report.refused[0].0, 4, "seed {seed}: {report:?}");
    assert_eq!(q.status().health, Health::Online, "seed {seed}");
    let lun = q.lun_by_name("a").unwrap();
    verify(&mut q, lun, seed, 1, blocks, "stale member offered");
    drop(q);

    // A current member missing: the returning disk must not stand in for it.
    for gone in 0..images.len() {
        let mut disks: Vec<_> = images
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != gone)
            .map(|(i, d)| faulty(d.snapshot(), seed ^ i as u64, false))
            .collect();
        disks.insert(0, faulty(old.snapshot(), seed ^ 0x4d, false));
        let (mut q, report) = import(disks, Level::Raid5);
        assert_eq!(
            (report.missing, report.refused.len()),
            (1, 1),
            "seed {seed}, member {gone} missing: {report:?}"
        );
        assert_eq!(q.status().health, Health::Degraded, "seed {seed}, {gone}");
        let lun = q.lun_by_name("a").unwrap();
        verify(
            &mut q,
            lun,
            seed,
            1,
            blocks,
            &format!("member {gone} missing, stale disk offered"),
        );
    }
}

// 7. Power cut during a rebuild: it resumes after import and completes.
#[test]
fn power_cut_during_rebuild_before_any_checkpoint_resumes_after_import() {
    power_cut_case(77, false);
}

#[test]
fn power_cut_during_rebuild_after_a_checkpoint_resumes_after_import() {
    power_cut_case(78, true);
}

fn power_cut_case(seed: u64, checkpoint_mid: bool) {
    let blocks = 1500;
    let (mut p, h) = build(Level::Raid6, 5, 1, seed, true);
    let cap = p.usable_bytes() / LUN_BLOCK as u64;
    let lun = p.create_lun("a", cap).unwrap();
    fill(&mut p, lun, seed, 0, blocks);
    p.checkpoint().unwrap();
    p.fail_disk(3).unwrap();
    assert_eq!(
        p.status().rebuild.map(|r| r.0),
        Some(3),
        "seed {seed}: rebuild started"
    );
    let (done, total) = loop {
        let rep = p.maintenance().unwrap();
        assert!(!rep.idle, "seed {seed}: rebuild ended early");
        let (_, done, total) = p.status().rebuild.expect("rebuild running");
        if checkpoint_mid && done * 4 >= total && done * 4 < total + 4 * 8 {
            p.checkpoint().unwrap();
        }
        if done * 2 >= total {
            break (done, total);
        }
    };
    eprintln!("seed {seed}: cut at {done} of {total} stripes");
    assert!(done < total, "seed {seed}: rebuild finished before the cut");
    let mut q = power_cycle(p, &h, Level::Raid6, seed);
    let st = q.status();
    assert_eq!(
        (st.health, st.disks[3].state),
        (Health::Degraded, DiskState::Rebuilding),
        "seed {seed}: after import: {st:?}"
    );
    // The first maintenance call after import resumes the rebuild of member 3.
    let rep = q.maintenance().unwrap();
    let st = q.status();
    eprintln!(
        "seed {seed}: first maintenance after import: {rep:?}, rebuild {:?}",
        st.rebuild
    );
    let (slot, at, total2) = st
        .rebuild
        .unwrap_or_else(|| panic!("seed {seed}: no rebuild after import: {st:?}"));
    assert_eq!(slot, 3, "seed {seed}: {st:?}");
    if checkpoint_mid {
        // Resumed from the checkpointed cursor: less than the whole, at least what was not done.
        assert!(
            total2 < total && total2 + done >= total,
            "seed {seed}: {total} stripes, cut at {done}, {total2} left after import"
        );
    } else {
        // No checkpoint recorded a cursor: the rebuild starts over (it must not skip the part
        // that was not done, nor trust the part that was).
        assert!(
            total2 + 8 >= total,
            "seed {seed}: {total} stripes, cut at {done}, {total2} left after import"
        );
    }
    assert!(
        rep.rebuilt_stripes > 0 && at <= done + rep.rebuilt_stripes,
        "seed {seed}: {rep:?} {st:?}"
    );
    let lun = q.lun_by_name("a").unwrap();
    verify(
        &mut q,
        lun,
        seed,
        0,
        blocks,
        "after import, rebuild resumed",
    );
    run_to_idle(&mut q, seed);
    assert_eq!(q.status().health, Health::Online, "seed {seed}");
    verify(&mut q, lun, seed, 0, blocks, "after resumed rebuild");
    assert_eq!(
        scrub(&mut q, seed),
        (0, 0),
        "seed {seed}: scrub after rebuild"
    );
    // The rebuilt member holds correct data: the pool survives losing two others.
    let (members, _, _) = q.shutdown().unwrap();
    let disks: Vec<_> = members
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 0 && *i != 4)
        .map(|(_, m)| m.unwrap())
        .collect();
    let (mut r, report) = import(disks, Level::Raid6);
    assert_eq!(report.missing, 2, "seed {seed}: {report:?}");
    let lun = r.lun_by_name("a").unwrap();
    verify(
        &mut r,
        lun,
        seed,
        0,
        blocks,
        "rebuilt member with members 0 and 4 gone",
    );
}

/// The pool events pushed since event number `seq`.
fn events_since(pool: &FPool, seq: u64) -> Vec<Event> {
    pool.events().since(seq).map(|(_, e)| *e).collect()
}

/// Member blocks of one superblock or root slot.
const SLOT_BLOCKS: u64 = (SLOT_BYTES / 512) as u64;

/// Member blocks a pool writes outside the stripes: the first block of each superblock slot, and
/// the root ring's range (the intent log follows the label area).
fn label_area() -> ([u64; 2], core::ops::Range<u64>) {
    let first = |slot: u32| u64::from(slot) * SLOT_BLOCKS;
    (
        [first(superblock_slot(0)), first(superblock_slot(1))],
        first(root_slot(0))..first(root_slot(0)) + u64::from(ROOT_SLOTS) * SLOT_BLOCKS,
    )
}

// 8. A rebuild writes to its target only. While it runs, no other disk gets a single write.
//    The call that completes it also records the new membership and writes a checkpoint, as
//    every membership change and the end of every rebuild do, on all members: allowed there are
//    exactly the two superblock slots, one root slot and the checkpoint's own log stripes, which
//    are appended after the log head (blocks that held nothing), never a block that held data.
//    (A rebuild that meets a medium error on another member also rewrites that block there:
//    see `medium_errors_during_raid6_rebuild_are_repaired`; none is injected here.)
fn rebuild_writes_only_to_target(level: Level, members: usize, seed: u64) {
    let blocks = 600;
    let target = 1;
    let (mut p, h, lun) = filled(level, members, 1, seed, false, blocks);
    p.fail_disk(target).unwrap();
    let spare = members; // the spare's handle: it now fills slot `target`
    let before = snapshots(&mut p);
    let mut calls = 0;
    let (w, now) = loop {
        let w: Vec<u64> = h.iter().map(FaultHandle::writes).collect();
        let rep = p.maintenance().unwrap();
        calls += 1;
        let now: Vec<u64> = h.iter().map(FaultHandle::writes).collect();
        if p.status().rebuild.is_none() {
            break (w, now);
        }
        for i in (0..h.len()).filter(|&i| i != spare) {
            assert_eq!(
                now[i], w[i],
                "seed {seed}: maintenance call {calls} ({rep:?}) wrote to disk {i} during the rebuild of slot {target}"
            );
        }
        // One write of a whole strip per rebuilt stripe.
        assert!(
            rep.rebuilt_stripes > 0 && now[spare] - w[spare] == rep.rebuilt_stripes,
            "seed {seed}: call {calls}: {rep:?}, {} writes to the target",
            now[spare] - w[spare]
        );
    };
    assert!(calls > 2, "seed {seed}: rebuild done in {calls} calls");
    assert_eq!(p.status().health, Health::Online, "seed {seed}");
    // The completing call.
    let after = snapshots(&mut p);
    let geo = *p.array().geometry();
    let data_start = geo.data_start_lba();
    let (supers, roots) = label_area();
    let mut checkpoint_stripes = std::collections::BTreeSet::new();
    let mut root_written = None;
    for slot in (0..members).filter(|&s| s != target) {
        let changed = diff_blocks(&before[slot], &after[slot]);
        let (labels, data): (Vec<u64>, Vec<u64>) = changed.iter().partition(|&&l| l < data_start);
        let (sb, root): (Vec<u64>, Vec<u64>) = labels.iter().partition(|&&l| !roots.contains(&l));
        assert_eq!(
            sb,
            supers.to_vec(),
            "seed {seed}: member {slot}: superblock blocks changed ({changed:?})"
        );
        assert!(
            root.len() == 1 && roots.contains(&root[0]),
            "seed {seed}: member {slot}: label blocks changed besides the superblocks: {root:?}"
        );
        assert!(
            root_written.is_none_or(|r| r == root[0]),
            "seed {seed}: member {slot}: root slot {} vs {root_written:?}",
            root[0]
        );
        root_written = Some(root[0]);
        assert_eq!(
            overwritten(&before[slot], &data, data_start),
            Vec::<u64>::new(),
            "seed {seed}: member {slot}: the completing call overwrote data blocks ({data:?})"
        );
        checkpoint_stripes.extend(data.iter().map(|l| (l - data_start) / geo.strip_blocks()));
        // One write per changed slot and per checkpoint stripe (counted below once all are known).
    }
    assert!(
        !checkpoint_stripes.is_empty(),
        "seed {seed}: no checkpoint after the rebuild"
    );
    for slot in (0..members).filter(|&s| s != target) {
        assert_eq!(
            now[slot] - w[slot],
            3 + checkpoint_stripes.len() as u64,
            "seed {seed}: member {slot}: writes of the completing call (checkpoint stripes {checkpoint_stripes:?})"
        );
    }
    // The failed disk, taken out, got nothing.
    assert_eq!(
        now[target], w[target],
        "seed {seed}: the failed disk was written"
    );
    verify(&mut p, lun, seed, 0, blocks, "after rebuild");
}

#[test]
fn raid5_rebuild_writes_only_to_the_target() {
    rebuild_writes_only_to_target(Level::Raid5, 4, 81);
}

#[test]
fn raid6_rebuild_writes_only_to_the_target() {
    rebuild_writes_only_to_target(Level::Raid6, 6, 82);
}

/// A pool of `members` members and one spare filled with `blocks` blocks of generation 0, with
/// a latent sector error on member block `row` of the strip of each `(stripe, slot)` of
/// `errors`; then member `target` fails and the spare takes its place. Returns the pool,
/// the handles, the LUN and the member blocks with errors (slot, block).
fn medium_errors_then_fail(
    level: Level,
    members: usize,
    seed: u64,
    blocks: u64,
    target: usize,
    errors: &[(u64, usize)],
    row: u64,
) -> (FPool, Vec<FaultHandle>, u16, Vec<(usize, u64)>) {
    let (mut p, h, lun) = filled(level, members, 1, seed, false, blocks);
    let geo = *p.array().geometry();
    let bad: Vec<(usize, u64)> = errors
        .iter()
        .map(|&(s, slot)| (slot, geo.stripe_lba(s) + row))
        .collect();
    for &(slot, lba) in &bad {
        assert_ne!(
            slot, target,
            "seed {seed}: the error must be on another member"
        );
        latent_error(&h[slot], lba);
    }
    p.fail_disk(target).unwrap();
    (p, h, lun, bad)
}

/// A latent sector error on block `lba` of a disk (a write repairs it).
fn latent_error(h: &FaultHandle, lba: u64) {
    h.inject(Fault::Medium {
        lba,
        blocks: 1,
        sticky: false,
    });
}

/// The events `ev` say each (member slot, block) of `bad` met a medium error and was rewritten,
/// and the disk no longer has an unreadable block.
fn assert_medium_repaired(ev: &[Event], h: &[FaultHandle], bad: &[(usize, u64)], seed: u64) {
    for &(slot, lba) in bad {
        assert!(
            ev.contains(&Event::MediumError {
                disk: slot as u8,
                lba
            }),
            "seed {seed}: no medium error event for member {slot} block {lba}: {ev:?}"
        );
        assert!(
            ev.iter()
                .any(|e| matches!(e, Event::Repaired { disk, lba: at, blocks }
                if usize::from(*disk) == slot && *at <= lba && lba < *at + u64::from(*blocks))),
            "seed {seed}: member {slot} block {lba} not repaired: {ev:?}"
        );
        assert_eq!(
            h[slot].medium_errors(),
            Vec::<u64>::new(),
            "seed {seed}: member {slot} still has unreadable blocks"
        );
    }
}

// 9. Latent sector errors met by a rebuild. RAID-6 still has a second redundancy: every block
//    is rebuilt, and the unreadable block is rewritten from the reconstruction.
#[test]
fn medium_errors_during_raid6_rebuild_are_repaired() {
    let seed = 91;
    let blocks = 600;
    let target = 2;
    let (mut p, h, lun, bad) = medium_errors_then_fail(
        Level::Raid6,
        6,
        seed,
        blocks,
        target,
        &[(20, 0), (45, 3), (70, 5)],
        3,
    );
    assert_eq!(
        p.status().rebuild.map(|r| r.0),
        Some(target as u8),
        "seed {seed}"
    );
    let ev = run_to_idle(&mut p, seed);
    let st = p.status();
    assert_eq!(
        (st.health, st.bad_ranges),
        (Health::Online, 0),
        "seed {seed}: after rebuild: {st:?}"
    );
    assert_medium_repaired(&ev, &h, &bad, seed);
    for &(slot, _) in &bad {
        let e = st.disks[slot].errors;
        assert!(
            e.medium == 1 && e.repaired >= 1,
            "seed {seed}: member {slot} counters {e:?}"
        );
    }
    assert!(
        ev.iter().any(|e| matches!(e, Event::RebuildDone { disk, unrecoverable: 0, .. } if usize::from(*disk) == target)),
        "seed {seed}: {ev:?}"
    );
    assert!(
        !ev.iter()
            .any(|e| matches!(e, Event::Unrecoverable { .. } | Event::DiskFailed { .. })),
        "seed {seed}: {ev:?}"
    );
    verify(
        &mut p,
        lun,
        seed,
        0,
        blocks,
        "after rebuild with medium errors",
    );
    assert_eq!(
        scrub(&mut p, seed),
        (0, 0),
        "seed {seed}: scrub after rebuild"
    );
}

/// LUN blocks on the unrecoverable list.
/// What is truly lost: the blocks `0..blocks` of `lun` that a degraded pool cannot read, from an
/// import (with `cfg`) of `p`'s members as they are now but `target`, with a sticky latent
/// sector error on member `slot`'s block `lba`.
fn unreadable_when_degraded(
    p: &mut FPool,
    cfg: PoolConfig,
    target: usize,
    (slot, lba): (usize, u64),
    lun: u16,
    blocks: u64,
) -> Vec<u64> {
    let n = p.array().geometry().disks();
    let disks: Vec<_> = (0..n)
        .filter(|&i| i != target)
        .map(|i| {
            let d = faulty(mem_of(p, i).snapshot(), i as u64, false);
            if i == slot {
                d.handle().inject(Fault::Medium {
                    lba,
                    blocks: 1,
                    sticky: true,
                });
            }
            d
        })
        .collect();
    let mem = vec![0u8; FPool::memory_bytes(&cfg, 8)];
    let opts = ImportOptions {
        config: cfg,
        skip_refused: true,
        force: false,
        rewind: false,
    };
    let (mut o, _) = FPool::import(disks, opts, mem).unwrap();
    let mut buf = vec![0u8; LUN_BLOCK];
    (0..blocks)
        .filter(|&i| o.read(lun, i, &mut buf).is_err())
        .collect()
}

fn bad_lbas(pool: &FPool, lun: u16) -> Vec<u64> {
    pool.bad_ranges()
        .iter()
        .filter(|r| r.lun == lun)
        .flat_map(|r| r.lba..r.lba + u64::from(r.blocks))
        .collect()
}

/// Every block of `0..blocks` reads back: an `Unrecoverable` error naming it for the blocks of
/// `lost` (the buffer untouched: never zeros, never other data), generation `generation`'s data
/// for the others.
fn verify_lost(
    pool: &mut FPool,
    lun: u16,
    seed: u64,
    generation: u64,
    blocks: u64,
    lost: &[u64],
    what: &str,
) {
    for i in 0..blocks {
        let mut buf = vec![0xa5u8; LUN_BLOCK];
        let r = pool.read(lun, i, &mut buf);
        if lost.contains(&i) {
            assert_eq!(
                r,
                Err(IoError::Unrecoverable { lun, lba: i }),
                "seed {seed}, {what}: lost block {i} (zeros: {}, old data: {})",
                buf.iter().all(|&b| b == 0),
                buf == block(seed, generation, i)
            );
            assert!(
                buf.iter().all(|&b| b == 0xa5),
                "seed {seed}, {what}: lost block {i}: the failed read filled the buffer"
            );
        } else {
            r.unwrap_or_else(|e| panic!("seed {seed}, {what}: read of block {i}: {e:?}"));
            assert!(
                buf == block(seed, generation, i),
                "seed {seed}, {what}: block {i} reads back wrong data"
            );
        }
    }
}

// 10. The same on RAID-5: with one member rebuilding, a latent sector error on another leaves
//     that stripe without redundancy. The rebuild records the LUN blocks it held as lost, goes
//     on, and ends; they read as errors (across a restart) until rewritten; all others read.
#[test]
fn medium_error_during_raid5_rebuild_reports_the_lost_blocks() {
    let seed = 101;
    let blocks = 400;
    let target = 1;
    let stripe = 30;
    let (mut p, h, lun, bad) =
        medium_errors_then_fail(Level::Raid5, 4, seed, blocks, target, &[(stripe, 3)], 3);
    // What is truly lost, from the members as they are (the target gone, the error in place):
    // the blocks a degraded pool cannot read.
    let (slot, lba) = bad[0];
    let oracle = unreadable_when_degraded(
        &mut p,
        config(Level::Raid5),
        target,
        (slot, lba),
        lun,
        blocks,
    );
    let ev = run_to_idle(&mut p, seed);
    let st = p.status();
    assert_eq!(
        (st.health, st.rebuild),
        (Health::Online, None),
        "seed {seed}: after rebuild: {st:?}"
    );
    let (slot, lba) = bad[0];
    assert!(
        ev.contains(&Event::MediumError {
            disk: slot as u8,
            lba
        }),
        "seed {seed}: {ev:?}"
    );
    assert!(
        ev.contains(&Event::Unrecoverable { stripe }),
        "seed {seed}: {ev:?}"
    );
    assert!(
        ev.iter().any(|e| matches!(e, Event::RebuildDone { disk, unrecoverable: 1, .. } if usize::from(*disk) == target)),
        "seed {seed}: {ev:?}"
    );
    let lost = bad_lbas(&p, lun);
    eprintln!("seed {seed}: lost {lost:?}, ranges {:?}", p.bad_ranges());
    assert!(!lost.is_empty(), "seed {seed}: nothing reported lost");
    assert_eq!(
        lost, oracle,
        "seed {seed}: reported lost vs unreadable when degraded"
    );
    verify_lost(&mut p, lun, seed, 0, blocks, &lost, "after rebuild");
    // The rebuild is over: more maintenance does nothing.
    let rep = p.maintenance().unwrap();
    assert!(rep.idle && rep.rebuilt_stripes == 0, "seed {seed}: {rep:?}");

    // Export and import: the list is kept.
    let ranges = p.bad_ranges().to_vec();
    let (members, spares, _) = p.shutdown().unwrap();
    assert!(spares.is_empty(), "seed {seed}");
    let mut q = reimport(members.into_iter().collect(), Level::Raid5, seed);
    assert_eq!(q.bad_ranges(), &ranges[..], "seed {seed}: after import");
    let lun = q.lun_by_name("a").unwrap();
    verify_lost(&mut q, lun, seed, 0, blocks, &lost, "after import");

    // A client rewrites one in the middle: it reads the new data; the others stay lost.
    let mid = lost[lost.len() / 2];
    q.write(lun, mid, &block(seed, 1, mid), false).unwrap();
    q.flush().unwrap();
    let mut buf = vec![0u8; LUN_BLOCK];
    q.read(lun, mid, &mut buf)
        .unwrap_or_else(|e| panic!("seed {seed}: rewritten block {mid}: {e:?}"));
    assert!(
        buf == block(seed, 1, mid),
        "seed {seed}: rewritten block {mid}"
    );
    let rest: Vec<u64> = lost.iter().copied().filter(|&i| i != mid).collect();
    assert_eq!(
        bad_lbas(&q, lun),
        rest,
        "seed {seed}: after rewriting block {mid}"
    );
    for &i in &rest {
        assert_eq!(
            q.read(lun, i, &mut buf),
            Err(IoError::Unrecoverable { lun, lba: i }),
            "seed {seed}: block {i} after rewriting block {mid}"
        );
    }
    // Then the rest, one block at a time: they read the new data, nothing is lost any more.
    for &i in &rest {
        q.write(lun, i, &block(seed, 1, i), false).unwrap();
    }
    q.flush().unwrap();
    assert_eq!(q.bad_ranges(), &[], "seed {seed}: after rewrite");
    let check = |q: &mut FPool, what: &str| {
        let mut buf = vec![0u8; LUN_BLOCK];
        for i in 0..blocks {
            q.read(lun, i, &mut buf)
                .unwrap_or_else(|e| panic!("seed {seed}, {what}: read of block {i}: {e:?}"));
            let g = u64::from(lost.contains(&i));
            assert!(buf == block(seed, g, i), "seed {seed}, {what}: block {i}");
        }
    };
    check(&mut q, "after rewrite");
    let (members, _, _) = q.shutdown().unwrap();
    let mut r = reimport(members.into_iter().collect(), Level::Raid5, seed);
    assert_eq!(r.bad_ranges(), &[], "seed {seed}: after rewrite and import");
    check(&mut r, "after rewrite and import");
    let _ = h;
}

// 11. Power cut during a scrub: after import the scrub resumes where its progress was last
//     checkpointed (without the client checkpointing anything), and completes; what it repaired
//     before the cut stays repaired, and what lay past the cut is repaired after it.
#[test]
fn power_cut_during_scrub_resumes_after_import() {
    let seed = 111;
    let blocks = 1500;
    let (mut p, h, lun) = filled(Level::Raid5, 4, 0, seed, true, blocks);
    let geo = *p.array().geometry();
    let st = p.stats();
    let seg_stripes = st.segment_bytes / geo.stripe_data_bytes() as u64;
    let used = u64::from(st.segments - st.free_segments);
    assert!(used >= 4, "seed {seed}: {used} segments used");
    // Silent corruption in a data column of a stripe in every used segment.
    let rotted: Vec<u64> = (0..used).map(|seg| seg * seg_stripes + 5).collect();
    for &s in &rotted {
        let d = geo.disk_of(s, Column::Data((s % 3) as usize)).unwrap();
        flip(&mut p, d, geo.stripe_lba(s) + 2, 100 + s as usize);
    }
    p.start_scrub();
    let cut_at = (used / 2) as u32;
    let mut calls = 0;
    while p.status().scrub.is_some_and(|(next, _)| next < cut_at) {
        p.maintenance().unwrap();
        calls += 1;
        assert!(calls < 10_000, "seed {seed}: scrub makes no progress");
    }
    let (next, total) = p.status().scrub.expect("scrub still running");
    let repaired = p.status().scrub_repaired;
    eprintln!(
        "seed {seed}: cut at segment {next} of {total}, {used} used, {repaired} repaired; rotted stripes {rotted:?} ({seg_stripes} per segment)"
    );
    assert!(repaired > 0, "seed {seed}: nothing repaired before the cut");
    let mut q = power_cycle(p, &h, Level::Raid5, seed);
    let st = q.status();
    let (resumed, total2) = st
        .scrub
        .unwrap_or_else(|| panic!("seed {seed}: no scrub after import: {st:?}"));
    eprintln!("seed {seed}: resumed at segment {resumed}");
    assert!(
        resumed > 0 && resumed <= next && total2 == total,
        "seed {seed}: cut at {next} of {total}, resumed at {resumed} of {total2}"
    );
    let ev = run_to_idle(&mut q, seed);
    let st = q.status();
    assert_eq!(st.scrub, None, "seed {seed}");
    let done = ev.iter().find_map(|e| match e {
        Event::ScrubDone {
            repaired,
            unrepairable,
            ..
        } => Some((*repaired, *unrepairable)),
        _ => None,
    });
    assert!(
        done.is_some_and(|(r, u)| r > 0 && u == 0),
        "seed {seed}: resumed scrub: {done:?}"
    );
    // Before reading anything (reads heal too): a second scrub finds nothing left.
    assert_eq!(scrub(&mut q, seed), (0, 0), "seed {seed}: second scrub");
    verify(&mut q, lun, seed, 0, blocks, "after resumed scrub");
}

/// A pool whose member `flaky` fails its next `ops` operations with a transport error while the
/// client writes `blocks` blocks (and flushes); returns the pool, the handles, the LUN and the
/// pool events of the writes.
fn transient_during_writes(
    level: Level,
    members: usize,
    spares: usize,
    seed: u64,
    blocks: u64,
    flaky: usize,
    ops: u64,
) -> (FPool, Vec<FaultHandle>, u16, Vec<Event>) {
    let (mut p, h) = build(level, members, spares, seed, false);
    let lun = p.create_lun("a", 2000).unwrap();
    let seq = p.events().next_seq();
    h[flaky].inject(Fault::Transient {
        kind: TransientKind::Transport,
        ops,
    });
    fill(&mut p, lun, seed, 0, blocks);
    let ev = events_since(&p, seq);
    let seen = h[flaky]
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Transient(_)))
        .count() as u64;
    assert_eq!(
        seen, ops,
        "seed {seed}: transient errors returned by member {flaky}"
    );
    (p, h, lun, ev)
}

// 12. A member write that fails transiently is retried; when the retry succeeds an event says
//     so and the stripe keeps its full redundancy: another member can fail and every block
//     still reads.
#[test]
fn transient_write_failure_is_retried_and_the_stripe_keeps_its_redundancy() {
    let seed = 121;
    let blocks = 400;
    let flaky = 2;
    let (mut p, h, lun, ev) = transient_during_writes(Level::Raid5, 4, 0, seed, blocks, flaky, 1);
    assert!(
        ev.contains(&Event::RetrySucceeded {
            disk: flaky as u8,
            write: true
        }),
        "seed {seed}: {ev:?}"
    );
    assert!(
        !ev.iter().any(|e| matches!(e, Event::DiskFailed { .. })),
        "seed {seed}: {ev:?}"
    );
    let st = p.status();
    assert_eq!(st.health, Health::Online, "seed {seed}");
    let e = st.disks[flaky].errors;
    assert_eq!((e.transient, e.write), (1, 0), "seed {seed}: {e:?}");
    // Every stripe agrees with its parity (the flaky member holds every strip it was sent)...
    assert_eq!(
        scrub(&mut p, seed),
        (0, 0),
        "seed {seed}: scrub after the retried write"
    );
    // ... and another member fails: its data comes from the strips the flaky member holds.
    h[0].inject(Fault::Fail);
    p.fail_disk(0).unwrap();
    assert_eq!(p.status().health, Health::Degraded, "seed {seed}");
    verify(
        &mut p,
        lun,
        seed,
        0,
        blocks,
        "member 0 failed after a retried write on member 2",
    );
}

// 13. When the retries run out too, the member is failed (an event says so): no stripe is left
//     believing it holds a strip it does not. A spare takes its place; after the rebuild any two
//     other members of the RAID-6 pool can fail and every block still reads.
#[test]
fn transient_write_failure_past_the_retries_fails_the_member() {
    let seed = 131;
    let blocks = 400;
    let flaky = 2;
    let ops = u64::from(raidcore::raid::ArrayConfig::default().retries) + 1;
    let (mut p, h, lun, ev) = transient_during_writes(Level::Raid6, 6, 1, seed, blocks, flaky, ops);
    assert!(
        ev.contains(&Event::DiskFailed {
            disk: flaky as u8,
            kind: ErrorKind::Transport
        }),
        "seed {seed}: {ev:?}"
    );
    assert!(
        ev.contains(&Event::SpareTaken { disk: flaky as u8 }),
        "seed {seed}: {ev:?}"
    );
    verify(&mut p, lun, seed, 0, blocks, "member 2 failed by a write");
    run_to_idle(&mut p, seed);
    assert_eq!(p.status().health, Health::Online, "seed {seed}");
    for gone in [0, 4] {
        h[gone].inject(Fault::Fail);
        p.fail_disk(gone).unwrap();
    }
    assert_eq!(p.status().health, Health::Degraded, "seed {seed}");
    verify(
        &mut p,
        lun,
        seed,
        0,
        blocks,
        "members 0 and 4 failed after the rebuild",
    );
}

// 14. A latent sector error in a parity column is found and repaired by a scrub (no client
//     read ever touches parity): afterwards the block reads, and the pool survives losing the
//     level's tolerance of other members.
#[test]
fn scrub_repairs_a_medium_error_in_a_parity_column() {
    let seed = 141;
    let blocks = 400;
    let (mut p, h, lun) = filled(Level::Raid6, 6, 0, seed, false, blocks);
    let geo = *p.array().geometry();
    let mut bad = Vec::new();
    for (stripe, col) in [(20, Column::P), (40, Column::Q)] {
        let slot = geo.disk_of(stripe, col).unwrap();
        let lba = geo.stripe_lba(stripe) + 5;
        latent_error(&h[slot], lba);
        bad.push((slot, lba));
    }
    p.start_scrub();
    let ev = run_to_idle(&mut p, seed);
    let st = p.status();
    assert_eq!(
        (st.scrub_repaired > 0, st.scrub_unrepairable),
        (true, 0),
        "seed {seed}: scrub: {st:?}"
    );
    assert_medium_repaired(&ev, &h, &bad, seed);
    assert_eq!(scrub(&mut p, seed), (0, 0), "seed {seed}: second scrub");
    // Two other members go: the repaired parity is what reconstructs their data.
    let gone: Vec<usize> = (0..6)
        .filter(|d| bad.iter().all(|b| b.0 != *d))
        .take(2)
        .collect();
    for &g in &gone {
        h[g].inject(Fault::Fail);
        p.fail_disk(g).unwrap();
    }
    verify(
        &mut p,
        lun,
        seed,
        0,
        blocks,
        &format!("members {gone:?} failed"),
    );
}

#[test]
fn raid10_rebuild_writes_only_to_the_target() {
    rebuild_writes_only_to_target(Level::Raid10, 6, 83);
}

/// A crash with writes not yet flushed leaves a torn item at the log's end. Roll-forward drops
/// it, as it may, and that is no loss: the import records no `Unrecoverable` event (it did,
/// for the stripe of the torn item), and every flushed block reads back.
#[test]
fn a_torn_unflushed_tail_is_no_unrecoverable_event() {
    let seed = 41;
    let (mut p, _h, lun) = filled(Level::Raid5, 4, 0, seed, false, 300);
    // Unflushed: full stripes of these reach the members, the open stripe does not.
    for i in 300..341 {
        p.write(lun, i, &block(seed, 0, i), false).unwrap();
    }
    let (members, _spares, _mem) = p.into_parts();
    let mut q = reimport(members.into_iter().collect(), Level::Raid5, seed);
    let lost: Vec<Event> = q
        .events()
        .iter()
        .map(|(_, e)| *e)
        .filter(|e| matches!(e, Event::Unrecoverable { .. }))
        .collect();
    assert_eq!(lost, Vec::<Event>::new(), "seed {seed}: import events");
    verify(&mut q, lun, seed, 0, 300, "after the crash");
}

// 7. A removed hot spare leaves the configuration and comes back blank; the pool takes the
//    other spare, and an import of the members lists only that one.
#[test]
fn removed_spare_is_blank_and_never_taken() {
    let seed = 77;
    let blocks = 200;
    let (mut p, h, lun) = filled(Level::Raid5, 4, 2, seed, false, blocks);
    let guids: Vec<u64> = p.spare_guids().collect();
    assert_eq!(guids.len(), 2, "seed {seed}: spares {guids:?}");
    let gen_before = raidcore::pool::read_label(mem_of(&mut p, 0))
        .unwrap()
        .generation;
    let mut removed = p.remove_spare(guids[0]).unwrap();
    assert!(
        raidcore::pool::read_label(&mut removed).is_err(),
        "seed {seed}: the removed spare still holds a superblock"
    );
    assert_eq!(
        p.remove_spare(guids[0]).unwrap_err(),
        AdminError::NoSuchSpare { guid: guids[0] },
        "seed {seed}"
    );
    assert_eq!(
        p.spare_guids().collect::<Vec<_>>(),
        [guids[1]],
        "seed {seed}"
    );
    let label = raidcore::pool::read_label(mem_of(&mut p, 0)).unwrap();
    assert_eq!(
        label.generation,
        gen_before + 1,
        "seed {seed}: no new configuration"
    );
    assert_eq!(label.spares.as_slice(), [guids[1]], "seed {seed}");
    assert_eq!(p.status().spares, 1, "seed {seed}");

    h[1].inject(Fault::Fail);
    p.fail_disk(1).unwrap();
    run_to_idle(&mut p, seed);
    assert_eq!(
        p.status().health,
        Health::Online,
        "seed {seed}: spare not taken"
    );
    assert_eq!(p.spare_guids().count(), 0, "seed {seed}");
    verify(
        &mut p,
        lun,
        seed,
        0,
        blocks,
        "after the remaining spare took slot 1",
    );

    let (members, _spares, _mem) = p.into_parts();
    let mut q = reimport(members.into_iter().collect(), Level::Raid5, seed);
    assert_eq!(q.spare_guids().count(), 0, "seed {seed}: a spare came back");
    verify(&mut q, lun, seed, 0, blocks, "after import");
}

// 12. With 64 KiB strips, a latent sector error in one row of a survivor during a RAID-5
//     rebuild loses only the extents that lie in that row of the two columns it leaves without
//     redundancy: every other row of the stripe reaches the spare, and the blocks a degraded
//     pool can read stay readable.
#[test]
fn rebuild_past_a_latent_error_loses_only_its_row() {
    let seed = 121;
    let blocks = 600;
    let (target, slot, stripe) = (3, 1, 6);
    let cfg = PoolConfig {
        strip_bytes: 64 * 1024,
        ..config(Level::Raid5)
    };
    let m: Vec<_> = (0..4).map(|i| blank(seed ^ i, false)).collect();
    let spare = blank(seed ^ 0x64, false);
    let h: Vec<FaultHandle> = m.iter().map(FaultyDisk::handle).collect();
    let mem = vec![0u8; FPool::memory_bytes(&cfg, 4)];
    let mut p = FPool::create(m, vec![spare], cfg, [7; 16], mem).unwrap();
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, blocks);
    p.checkpoint().unwrap();
    let lba = p.array().geometry().stripe_lba(stripe);
    let oracle = unreadable_when_degraded(&mut p, cfg, target, (slot, lba), lun, blocks);
    latent_error(&h[slot], lba);
    p.fail_disk(target).unwrap();
    let ev = run_to_idle(&mut p, seed);
    assert_eq!(p.status().health, Health::Online, "seed {seed}");
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::RebuildDone {
                unrecoverable: 1,
                ..
            }
        )),
        "seed {seed}: {ev:?}"
    );
    let lost = bad_lbas(&p, lun);
    eprintln!("seed {seed}: lost {lost:?}, degraded pool cannot read {oracle:?}");
    assert!(!oracle.is_empty(), "seed {seed}: the error hit no data");
    assert_eq!(
        lost, oracle,
        "seed {seed}: reported lost vs unreadable when degraded"
    );
    verify_lost(&mut p, lun, seed, 0, blocks, &lost, "after rebuild");
    // The rows the error spared reached the new member: with the survivor failed as well,
    // every other block still reads.
    h[slot].inject(Fault::Fail);
    p.fail_disk(slot).unwrap();
    assert_eq!(p.status().health, Health::Degraded, "seed {seed}");
    verify_lost(
        &mut p,
        lun,
        seed,
        0,
        blocks,
        &lost,
        "with the survivor failed",
    );
}

// 13. RAID-1: a latent sector error under an extent whose block 6 was rewritten since, met by
//     the rebuild with the other member failed: the blocks whose bytes the bad sector holds
//     (the start of block 20, and the end of block 19 when the sector starts before it) are
//     lost and listed; the rest of the extent (each block has its own checksum) and block 6
//     (which lives in another, intact extent) read back.
#[test]
fn lost_extent_leaves_out_its_rewritten_blocks() {
    let seed = 131;
    let cfg = PoolConfig {
        max_extent_blocks: 32,
        ..config(Level::Raid1)
    };
    // Mirrors of 8 MiB hold too few segments for a pool: 64 MiB (sparse) disks.
    let big = |s: u64| {
        faulty(
            MemDisk::new(BlockSize::B512, 8 * DISK_BLOCKS).unwrap(),
            s,
            false,
        )
    };
    let m: Vec<_> = (0..2).map(|i| big(seed ^ i)).collect();
    let h: Vec<FaultHandle> = m.iter().map(FaultyDisk::handle).collect();
    let mem = vec![0u8; FPool::memory_bytes(&cfg, 2)];
    let mut p = FPool::create(m, vec![], cfg, [7; 16], mem).unwrap();
    let lun = p.create_lun("a", 2000).unwrap();
    fill(&mut p, lun, seed, 0, 32);
    p.write(lun, 6, &block(seed, 1, 6), false).unwrap();
    p.flush().unwrap();
    p.checkpoint().unwrap();
    // Member 0's block holding the start of LUN block 20 (stored verbatim: no compression).
    let at = {
        let mut d = mem_of(&mut p, 0).snapshot();
        let mut head = vec![0u8; 8 << 20];
        d.read(0, &mut head).unwrap();
        let want = &block(seed, 0, 20)[..64];
        let at = head.windows(64).position(|w| w == want);
        at.expect("block 20 on member 0") as u64
    };
    let lba = at / 512;
    h[1].inject(Fault::Fail);
    p.fail_disk(1).unwrap();
    h[0].inject(Fault::Medium {
        lba,
        blocks: 1,
        sticky: true,
    });
    p.add_spare(big(seed ^ 0x64)).unwrap();
    run_to_idle(&mut p, seed);
    let first = if at % 512 == 0 { 20 } else { 19 };
    let want = [BadRange {
        lun,
        lba: first,
        blocks: 21 - first as u32,
    }];
    assert_eq!(p.bad_ranges(), &want, "seed {seed}");
    let mut buf = vec![0u8; LUN_BLOCK];
    p.read(lun, 6, &mut buf).unwrap();
    assert!(buf == block(seed, 1, 6), "seed {seed}: block 6");
    for i in (0..32).filter(|&i| i != 6) {
        if (first..21).contains(&i) {
            assert_eq!(
                p.read(lun, i, &mut buf),
                Err(IoError::Unrecoverable { lun, lba: i }),
                "seed {seed}: block {i}"
            );
        } else {
            p.read(lun, i, &mut buf).unwrap();
            assert!(buf == block(seed, 0, i), "seed {seed}: block {i}");
        }
    }
}

// 14. Latent sector errors under the live copy of a map page on two survivors, met by a RAID-5
//     rebuild: that copy cannot be rebuilt, but the page is in memory and is written anew, and
//     the rows the rebuild could not write stay unreadable on the new member (no "repair"
//     computes other members' blocks from them). The pool stays online, and after a restart
//     the map reads and only the extents in the lost rows are lost.
#[test]
fn map_page_lost_on_disk_is_rewritten_from_memory() {
    let seed = 141;
    let blocks = 400;
    let (mut p, h, lun) = filled(Level::Raid5, 4, 1, seed, false, blocks);
    // More data on another LUN: the log moves on, so the page's stripe is closed (the open
    // stripe is rewritten from memory as the log fills it).
    let other = p.create_lun("b", 2000).unwrap();
    fill(&mut p, other, seed ^ 1, 0, 200);
    let geo = *p.array().geometry();
    // The newest copy of the LUN's first leaf map page (which nothing dirties again), found by
    // its header in the array's data.
    let len = (geo.stripes().min(512) as usize) * geo.stripe_data_bytes();
    let mut data = vec![0u8; len];
    p.array_mut()
        .read(0, &mut data, &mut vec![0u8; 64 * 1024])
        .unwrap();
    let page = (0..len - 64)
        .step_by(ITEM_ALIGN)
        .filter_map(|at| ItemHeader::decode(&data[at..], 1 << 20).ok())
        .filter(|h| h.kind == ItemKind::MapPage && h.blocks == 0 && h.lba == 0)
        .max_by_key(|h| h.seq)
        .expect("a leaf map page");
    // Its bytes on each member (it may cross strips); the target is a member without any.
    let mut parts = Vec::new();
    let (mut at, end) = (page.addr, page.addr + page.item_bytes() as u64);
    while at < end {
        let (stripe, strip, off) = geo.locate(at).unwrap();
        let n = (geo.strip_bytes() - off).min((end - at) as usize);
        let slot = geo.disk_of(stripe, Column::Data(strip)).unwrap();
        let first = geo.stripe_lba(stripe) + (off / 512) as u64;
        let last = geo.stripe_lba(stripe) + (off + n).div_ceil(512) as u64;
        parts.push((slot, first, last - first));
        at += n as u64;
    }
    for &(slot, lba, blocks) in &parts {
        h[slot].inject(Fault::Medium {
            lba,
            blocks,
            sticky: true,
        });
    }
    let target = (0..4).find(|d| parts.iter().all(|p| p.0 != *d)).unwrap();
    p.fail_disk(target).unwrap();
    run_to_idle(&mut p, seed);
    assert_eq!(p.status().health, Health::Online, "seed {seed}");
    let lost = bad_lbas(&p, lun);
    assert!(lost.len() < 64, "seed {seed}: lost {lost:?}");
    verify_lost(&mut p, lun, seed, 0, blocks, &lost, "after rebuild");
    let (members, _, _) = p.shutdown().unwrap();
    let mut q = reimport(members.into_iter().collect(), Level::Raid5, seed);
    assert_eq!(bad_lbas(&q, lun), lost, "seed {seed}: after import");
    verify_lost(&mut q, lun, seed, 0, blocks, &lost, "after import");
}

// 15. A scrub of a degraded RAID-5 that meets bit rot under live data lists exactly the blocks
//     no reconstruction makes check (it counted them and listed nothing); they read as errors
//     across a restart, every other block reads.
#[test]
fn scrub_lists_the_blocks_it_finds_lost() {
    let seed = 151;
    let blocks = 400;
    let (mut p, h, lun) = filled(Level::Raid5, 4, 0, seed, false, blocks);
    h[3].inject(Fault::Fail);
    p.fail_disk(3).unwrap();
    let geo = *p.array().geometry();
    // A data block of a survivor, in the middle of what was written.
    let stripe = (20..24)
        .find(|&s| geo.disk_of(s, Column::Data(0)) != Some(3))
        .unwrap();
    let slot = geo.disk_of(stripe, Column::Data(0)).unwrap();
    h[slot].inject(Fault::BitRot {
        lba: Some(geo.stripe_lba(stripe) + 1),
        bits: 5,
    });
    let mut buf = vec![0u8; LUN_BLOCK];
    let unreadable: Vec<u64> = (0..blocks)
        .filter(|&i| p.read(lun, i, &mut buf).is_err())
        .collect();
    assert!(
        !unreadable.is_empty(),
        "seed {seed}: the rot hit no live data"
    );
    let (_, unrepairable) = scrub(&mut p, seed);
    assert!(unrepairable > 0, "seed {seed}: the scrub found nothing");
    let lost = bad_lbas(&p, lun);
    assert_eq!(lost, unreadable, "seed {seed}: listed vs unreadable");
    verify_lost(&mut p, lun, seed, 0, blocks, &lost, "after the scrub");
    let (members, _, _) = p.shutdown().unwrap();
    let (mut q, _) = import(members.into_iter().flatten().collect(), Level::Raid5);
    assert_eq!(bad_lbas(&q, lun), lost, "seed {seed}: after import");
    verify_lost(&mut q, lun, seed, 0, blocks, &lost, "after import");
}
