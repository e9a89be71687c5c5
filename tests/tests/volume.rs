//! The volume layer's tests (issue "volume layer"): a model-based property test, compression on
//! this machine's files, write amplification of interleaved sequential streams, steady-state
//! overwrites with the cleaner, and a 1 TiB LUN in the same RAM as a 1 GiB one.

use std::collections::HashMap;

use proptest::prelude::*;
use raidcore::format::LUN_BLOCK;
use raidcore::pool::{IoError, LunError, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::BlockSize;
use raidcore_sim::disk::MemDisk;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type TestPool = Pool<MemDisk, Vec<u8>, 8, 8, 64, 8>;

fn disks(n: usize, mib: u64) -> Vec<MemDisk> {
    (0..n)
        .map(|_| MemDisk::new(BlockSize::B4096, mib * 256).unwrap())
        .collect()
}

fn pool(cfg: PoolConfig, n: usize, mib: u64) -> TestPool {
    let mem = vec![0u8; TestPool::memory_bytes(&cfg, n)];
    TestPool::create(disks(n, mib), Vec::new(), cfg, [3; 16], mem).unwrap()
}

fn small_cfg(level: Level) -> PoolConfig {
    PoolConfig {
        level,
        strip_bytes: 16 * 1024,
        max_extent_blocks: 8,
        zil_slots: 32,
        segment_stripes: 4,
        max_segments: 512,
        ..PoolConfig::default()
    }
}

/// Random, incompressible block for (tag, lba).
fn noise(tag: u64, lba: u64) -> Vec<u8> {
    let mut r = ChaCha8Rng::seed_from_u64(tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ lba);
    let mut v = vec![0u8; LUN_BLOCK];
    r.fill(&mut v[..]);
    v
}

// ---------------------------------------------------------------------------------------------
// Model-based property test.

#[derive(Debug, Clone)]
enum Op {
    Write {
        lun: usize,
        lba: u64,
        blocks: u64,
        tag: u8,
        fua: bool,
    },
    Read {
        lun: usize,
        lba: u64,
        blocks: u64,
    },
    Trim {
        lun: usize,
        lba: u64,
        blocks: u64,
    },
    Flush,
    Create {
        lun: usize,
        blocks: u64,
    },
    Delete {
        lun: usize,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let lun = 0usize..3;
    prop_oneof![
        8 => (lun.clone(), 0u64..600, 1u64..40, any::<u8>(), proptest::bool::weighted(0.05))
            .prop_map(|(lun, lba, blocks, tag, fua)| Op::Write { lun, lba, blocks, tag, fua }),
        4 => (lun.clone(), 0u64..600, 1u64..40).prop_map(|(lun, lba, blocks)| Op::Read { lun, lba, blocks }),
        2 => (lun.clone(), 0u64..600, 1u64..80).prop_map(|(lun, lba, blocks)| Op::Trim { lun, lba, blocks }),
        2 => Just(Op::Flush),
        1 => (lun.clone(), 100u64..700).prop_map(|(lun, blocks)| Op::Create { lun, blocks }),
        1 => lun.prop_map(|lun| Op::Delete { lun }),
        1 => Just(Op::Reopen),
    ]
}

/// Content of a written block: depends on the op's tag and the LBA, half compressible.
fn content(tag: u8, lba: u64) -> Vec<u8> {
    let mut v = noise(u64::from(tag), lba);
    if tag.is_multiple_of(2) {
        v[LUN_BLOCK / 2..].fill(tag);
    }
    v
}

struct Model {
    /// name -> (pool LUN id, size, blocks written)
    luns: HashMap<usize, (u16, u64, HashMap<u64, u8>)>,
}

#[expect(
    clippy::too_many_lines,
    reason = "the model-checked interpreter, one arm per operation"
)]
fn run_model(ops: &[Op]) -> Result<(), TestCaseError> {
    let cfg = small_cfg(Level::Raid6);
    let mut p = Some(pool(cfg, 6, 64));
    let mut m = Model {
        luns: HashMap::new(),
    };
    for (i, op) in ops.iter().enumerate() {
        let pl = p.as_mut().unwrap();
        match op.clone() {
            Op::Create { lun, blocks } => {
                let name = format!("lun{lun}");
                let r = pl.create_lun(&name, blocks);
                match m.luns.entry(lun) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        prop_assert_eq!(r, Err(LunError::NameTaken), "op {}", i);
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let id =
                            r.map_err(|e| TestCaseError::fail(format!("op {i}: create: {e}")))?;
                        v.insert((id, blocks, HashMap::new()));
                    }
                }
            }
            Op::Delete { lun } => {
                if let Some((id, _, _)) = m.luns.remove(&lun) {
                    pl.delete_lun(id)
                        .map_err(|e| TestCaseError::fail(format!("op {i}: delete: {e}")))?;
                }
            }
            Op::Write {
                lun,
                lba,
                blocks,
                tag,
                fua,
            } => {
                let Some((id, size, map)) = m.luns.get_mut(&lun) else {
                    continue;
                };
                let data: Vec<u8> = (lba..lba + blocks).flat_map(|l| content(tag, l)).collect();
                let r = pl.write(*id, lba, &data, fua);
                if lba + blocks > *size {
                    prop_assert_eq!(r, Err(IoError::OutOfRange), "op {}", i);
                } else {
                    r.map_err(|e| TestCaseError::fail(format!("op {i}: write: {e}")))?;
                    for l in lba..lba + blocks {
                        map.insert(l, tag);
                    }
                }
            }
            Op::Trim { lun, lba, blocks } => {
                let Some((id, size, map)) = m.luns.get_mut(&lun) else {
                    continue;
                };
                let r = pl.trim(*id, lba, blocks);
                if lba + blocks > *size {
                    prop_assert_eq!(r, Err(IoError::OutOfRange), "op {}", i);
                } else {
                    r.map_err(|e| TestCaseError::fail(format!("op {i}: trim: {e}")))?;
                    for l in lba..lba + blocks {
                        map.remove(&l);
                    }
                }
            }
            Op::Read { lun, lba, blocks } => {
                let Some((id, size, map)) = m.luns.get(&lun) else {
                    continue;
                };
                let mut buf = vec![0u8; blocks as usize * LUN_BLOCK];
                let r = pl.read(*id, lba, &mut buf);
                if lba + blocks > *size {
                    prop_assert_eq!(r, Err(IoError::OutOfRange), "op {}", i);
                    continue;
                }
                r.map_err(|e| TestCaseError::fail(format!("op {i}: read: {e}")))?;
                for (k, l) in (lba..lba + blocks).enumerate() {
                    let got = &buf[k * LUN_BLOCK..(k + 1) * LUN_BLOCK];
                    match map.get(&l) {
                        Some(&tag) => prop_assert!(
                            got == content(tag, l).as_slice(),
                            "op {}: lun {} lba {} wrong data",
                            i,
                            lun,
                            l
                        ),
                        None => prop_assert!(
                            got.iter().all(|&b| b == 0),
                            "op {}: lun {} lba {} not zero",
                            i,
                            lun,
                            l
                        ),
                    }
                }
            }
            Op::Flush => pl
                .flush()
                .map_err(|e| TestCaseError::fail(format!("op {i}: flush: {e}")))?,
            Op::Reopen => {
                // Clean shutdown and import: everything written reads back.
                let (members, spares, mem) = p.take().unwrap().shutdown().unwrap();
                let all: Vec<MemDisk> = members.into_iter().flatten().chain(spares).collect();
                let opts = raidcore::pool::ImportOptions {
                    config: cfg,
                    skip_refused: false,
                    force: false,
                    rewind: false,
                };
                let (np, _) = TestPool::import(all, opts, mem)
                    .map_err(|e| TestCaseError::fail(format!("op {i}: import: {e}")))?;
                p = Some(np);
            }
        }
    }
    // Final full check of every LUN.
    let pl = p.as_mut().unwrap();
    for (lun, (id, size, map)) in &m.luns {
        let mut buf = vec![0u8; LUN_BLOCK];
        for l in 0..*size {
            pl.read(*id, l, &mut buf)
                .map_err(|e| TestCaseError::fail(format!("final read: {e}")))?;
            match map.get(&l) {
                Some(&tag) => prop_assert!(buf == content(tag, l), "final: lun {} lba {}", lun, l),
                None => prop_assert!(
                    buf.iter().all(|&b| b == 0),
                    "final: lun {} lba {} not zero",
                    lun,
                    l
                ),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]
    /// Random operation sequences over several LUNs agree with a trivial model after every
    /// operation (proptest prints the failing sequence and its seed).
    #[test]
    fn volume_matches_model(ops in proptest::collection::vec(op(), 1..200)) {
        let mut ops = ops;
        ops.insert(0, Op::Create { lun: 0, blocks: 640 });
        run_model(&ops)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Compression on real data.

/// Up to `max` bytes of this machine's files from `dirs`, in sorted path order.
fn machine_files(dirs: &[&str], max: usize, executables: bool) -> Vec<u8> {
    let mut paths = Vec::new();
    let mut stack: Vec<std::path::PathBuf> = dirs.iter().map(Into::into).collect();
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                paths.push(p);
            }
        }
    }
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        if out.len() >= max {
            break;
        }
        let Ok(b) = std::fs::read(&p) else { continue };
        let is_elf = b.starts_with(b"\x7fELF");
        // Already-compressed files (gzip, xz, bzip2, zstd, PNG) are not text.
        let packed = [
            &b"\x1f\x8b"[..],
            b"\xfd7zXZ",
            b"BZh",
            b"\x28\xb5\x2f\xfd",
            b"\x89PNG",
        ]
        .iter()
        .any(|m| b.starts_with(m));
        if executables != is_elf || (!executables && packed) {
            continue;
        }
        out.extend_from_slice(&b);
    }
    out.truncate(max / LUN_BLOCK * LUN_BLOCK);
    out
}

fn write_and_check(data: &[u8], compression: bool) -> (f64, u64) {
    let cfg = PoolConfig {
        compression,
        max_extent_blocks: 16,
        ..small_cfg(Level::Raid6)
    };
    let mut p = pool(cfg, 6, 128);
    let blocks = (data.len() / LUN_BLOCK) as u64;
    let lun = p.create_lun("files", blocks).unwrap();
    for (i, chunk) in data.chunks(16 * LUN_BLOCK).enumerate() {
        p.write(lun, i as u64 * 16, chunk, false).unwrap();
    }
    p.flush().unwrap();
    let mut back = vec![0u8; data.len()];
    for (i, chunk) in back.chunks_mut(16 * LUN_BLOCK).enumerate() {
        p.read(lun, i as u64 * 16, chunk).unwrap();
    }
    assert!(back == data, "files did not read back identical");
    let info = p.luns().next().unwrap();
    (p.stats().compression_ratio(), info.compression_savings)
}

#[test]
fn machine_text_compresses_and_reads_back() {
    let text = machine_files(
        &["/usr/share/doc", "/usr/share/common-licenses"],
        8 << 20,
        false,
    );
    assert!(
        text.len() >= 1 << 20,
        "need at least 1 MiB of /usr/share/doc"
    );
    let (ratio, savings) = write_and_check(&text, true);
    println!(
        "{} bytes of /usr/share/doc: compression ratio {ratio:.2}",
        text.len()
    );
    assert!(ratio > 1.5, "text compressed only {ratio:.2}x");
    assert!(savings > text.len() as u64 / 4);
}

#[test]
fn machine_binaries_read_back() {
    let bins = machine_files(&["/usr/lib/x86_64-linux-gnu", "/usr/bin"], 8 << 20, true);
    assert!(bins.len() >= 1 << 20, "need at least 1 MiB of ELF files");
    let (ratio, _) = write_and_check(&bins, true);
    println!(
        "{} bytes of ELF files: compression ratio {ratio:.2}",
        bins.len()
    );
    assert!(ratio >= 1.0);
}

#[test]
fn random_data_is_stored_raw() {
    let data: Vec<u8> = (0..512).flat_map(|l| noise(77, l)).collect();
    let (ratio, savings) = write_and_check(&data, true);
    assert!((ratio - 1.0).abs() < 1e-9, "random data ratio {ratio}");
    assert_eq!(savings, 0);
}

// ---------------------------------------------------------------------------------------------
// Write amplification.

/// Eight interleaved sequential 4 KiB streams, one per LUN, on RAID-6 with 4 data + 2 parity,
/// with `copies` of each metadata item.
fn eight_streams(compressible: bool, copies: u8) -> f64 {
    let cfg = PoolConfig {
        level: Level::Raid6,
        strip_bytes: 64 * 1024,
        zil_slots: 64,
        metadata_copies: copies,
        ..PoolConfig::default()
    };
    let mut p = pool(cfg, 6, 512);
    let luns: Vec<u16> = (0..8)
        .map(|i| p.create_lun(&format!("vm{i}"), 4096).unwrap())
        .collect();
    let before = p.stats();
    for step in 0..24_000u64 {
        let s = (step % 8) as usize;
        let lba = step / 8;
        let mut b = noise(s as u64, lba);
        if compressible {
            b[1024..].fill(s as u8);
        }
        p.write(luns[s], lba, &b, false).unwrap();
    }
    p.flush().unwrap();
    let st = p.stats();
    let written = st.member_data_bytes + st.member_redundancy_bytes + st.member_raw_bytes
        - (before.member_data_bytes + before.member_redundancy_bytes + before.member_raw_bytes);
    let client = st.session_client_bytes - before.session_client_bytes;
    let c = st.counters;
    let b = before.counters;
    println!(
        "  client {client}, extents {} (raw {} stored {}), metadata {}, pad {}, zil {}, labels {}, checkpoints {}, segment {} bytes",
        c.extent_log_bytes - b.extent_log_bytes,
        c.extent_raw_bytes - b.extent_raw_bytes,
        c.extent_stored_bytes - b.extent_stored_bytes,
        c.metadata_log_bytes - b.metadata_log_bytes,
        c.pad_log_bytes - b.pad_log_bytes,
        c.zil_bytes - b.zil_bytes,
        c.label_bytes - b.label_bytes,
        c.checkpoints - b.checkpoints,
        st.segment_bytes
    );
    written as f64 / client as f64
}

#[test]
fn write_amplification_of_eight_sequential_streams() {
    // Ditto copies write each checkpoint's metadata twice, the second copies from the next
    // stripe on, so they add the metadata again and up to a stripe of pad per checkpoint.
    for (copies, bound) in [(1, 1.03), (2, 1.05)] {
        let wa = eight_streams(false, copies);
        println!(
            "8 sequential 4 KiB streams, RAID-6 4+2, incompressible, {copies} metadata copies: write amplification {wa:.4} (minimum 1.5)"
        );
        assert!(
            wa >= 1.5,
            "below the geometric minimum: accounting is wrong ({wa})"
        );
        assert!(wa <= 1.5 * bound, "more than {bound} x 1.5: {wa}");
    }
    let wa_c = eight_streams(true, 2);
    println!("… compressible: write amplification {wa_c:.4}");
    assert!(
        wa_c < 1.5,
        "compressible data should cost less than the geometric minimum: {wa_c}"
    );
}

// ---------------------------------------------------------------------------------------------
// Steady state with the cleaner.

#[test]
fn steady_state_random_overwrites_with_twenty_percent_headroom() {
    let seed = 11u64;
    let cfg = PoolConfig {
        compression: false,
        ..small_cfg(Level::Raid5)
    };
    let mut p = pool(cfg, 4, 12);
    let usable = p.usable_bytes();
    let blocks = usable * 8 / 10 / LUN_BLOCK as u64;
    let lun = p.create_lun("steady", blocks).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model: Vec<u32> = vec![0; blocks as usize];
    // Fill once, then overwrite 5x the LUN at random.
    for lba in 0..blocks {
        p.write(lun, lba, &noise(1, lba), false).unwrap();
        model[lba as usize] = 1;
    }
    for i in 0..blocks * 5 {
        let lba = rng.random_range(0..blocks);
        let tag = 2 + i as u32;
        let r = p.write(lun, lba, &noise(u64::from(tag), lba), false);
        assert!(r.is_ok(), "seed {seed}: write {i} of {}: {r:?}", blocks * 5);
        model[lba as usize] = tag;
        if i % 4096 == 0 {
            p.flush().unwrap();
        }
    }
    p.flush().unwrap();
    let mut buf = vec![0u8; LUN_BLOCK];
    for lba in 0..blocks {
        p.read(lun, lba, &mut buf).unwrap();
        assert!(
            buf == noise(u64::from(model[lba as usize]), lba),
            "seed {seed}: lba {lba}"
        );
    }
    let st = p.stats();
    println!(
        "steady state: {blocks} blocks overwritten 5x; cleaner wrote {} bytes, write amplification {:.2}",
        st.counters.cleaner_log_bytes,
        st.write_amplification()
    );
    assert!(st.counters.cleaner_log_bytes > 0, "the cleaner never ran");
}

#[test]
fn a_truly_full_pool_says_no_space_and_loses_nothing() {
    let cfg = PoolConfig {
        compression: false,
        ..small_cfg(Level::Raid5)
    };
    let mut p = pool(cfg, 4, 24);
    let usable = p.usable_bytes() / LUN_BLOCK as u64;
    // Two thin LUNs that together exceed the pool (overcommit).
    let a = p.create_lun("a", usable).unwrap();
    let b = p.create_lun("b", usable).unwrap();
    let mut written = 0u64;
    let mut err = None;
    'outer: for lun in [a, b] {
        for lba in 0..usable {
            match p.write(lun, lba, &noise(u64::from(lun), lba), false) {
                Ok(()) => written += 1,
                Err(e) => {
                    err = Some((lun, lba, e));
                    break 'outer;
                }
            }
        }
    }
    let (lun, lba, e) = err.expect("the pool never filled");
    assert_eq!(e, IoError::NoSpace);
    assert!(
        written as f64 >= usable as f64 * 0.9,
        "filled only {written} of {usable} blocks"
    );
    // Full stays full without the cleaner moving anything until space is freed.
    let moved = p.stats().counters.cleaner_log_bytes;
    for x in lba..lba + 64 {
        let r = p.write(lun, x, &noise(u64::from(lun), x), false);
        assert_eq!(r, Err(IoError::NoSpace), "lba {x}");
    }
    assert_eq!(
        p.stats().counters.cleaner_log_bytes,
        moved,
        "the cleaner churned"
    );
    // A write of many extents is refused whole: the blocks it named keep their data.
    let many: Vec<u8> = (0..64).flat_map(|x| noise(99, x)).collect();
    assert_eq!(p.write(a, 0, &many, false), Err(IoError::NoSpace));
    p.flush().unwrap();
    // Everything acknowledged reads back.
    let mut buf = vec![0u8; LUN_BLOCK];
    let mut n = 0;
    for l in [a, b] {
        for x in 0..usable {
            if n == written {
                break;
            }
            p.read(l, x, &mut buf).unwrap();
            assert!(buf == noise(u64::from(l), x), "lun {l} lba {x}");
            n += 1;
        }
    }
    // Freeing space (trim) lets writes continue.
    p.trim(a, 0, usable / 2).unwrap();
    p.write(lun, lba, &noise(u64::from(lun), lba), false)
        .unwrap();
}

/// A pool 90 % full of data overwritten at random (so every write needs the cleaner) takes
/// one write of a quarter of its LUN (each extent of it pays for the cleaning it needs), and
/// writes go on after it.
#[test]
fn a_large_write_on_a_pool_that_must_clean_is_taken_whole() {
    let cfg = PoolConfig {
        compression: false,
        ..small_cfg(Level::Raid5)
    };
    let mut p = pool(cfg, 4, 12);
    let blocks = p.usable_bytes() * 9 / 10 / LUN_BLOCK as u64;
    let lun = p.create_lun("busy", blocks).unwrap();
    for lba in 0..blocks {
        p.write(lun, lba, &noise(1, lba), false).unwrap();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for i in 0..blocks {
        let lba = rng.random_range(0..blocks);
        p.write(lun, lba, &noise(2, lba), false)
            .unwrap_or_else(|e| panic!("overwrite {i} (LBA {lba}): {e:?}"));
    }
    let moved = p.stats().counters.cleaner_log_bytes;
    assert!(moved > 0, "the cleaner never ran");
    let quarter = blocks / 4;
    let big: Vec<u8> = (0..quarter).flat_map(|x| noise(3, x)).collect();
    p.write(lun, 0, &big, false).unwrap();
    for lba in quarter..quarter + 64 {
        p.write(lun, lba, &noise(4, lba), false).unwrap();
    }
    p.flush().unwrap();
    let mut buf = vec![0u8; LUN_BLOCK];
    for lba in (0..quarter).step_by(97) {
        p.read(lun, lba, &mut buf).unwrap();
        assert!(buf == noise(3, lba), "lba {lba}");
    }
}

/// Filling a pool with ditto metadata: near the end the dead bytes are old map pages and
/// checkpoint pads spread thin, and each victim's checkpoints ate what it freed (28 GB moved
/// to take 216 MB). The cleaner's budget (16 bytes moved per byte written, plus 4 segments)
/// now holds it to less than that, and the pool still takes nearly all it offers.
#[test]
fn filling_a_pool_with_ditto_metadata_moves_a_bounded_amount() {
    let cfg = PoolConfig {
        level: Level::Raid6,
        strip_bytes: 64 * 1024,
        max_extent_blocks: 32,
        segment_stripes: 8,
        metadata_copies: 2,
        compression: false,
        ..small_cfg(Level::Raid6)
    };
    let mut p = pool(cfg, 6, 64);
    let usable = p.usable_bytes() / LUN_BLOCK as u64;
    let lun = p.create_lun("fill", usable).unwrap();
    let mut written = 0u64;
    for lba in 0..usable {
        match p.write(lun, lba, &noise(5, lba), false) {
            Ok(()) => written += 1,
            Err(IoError::NoSpace) => break,
            Err(e) => panic!("lba {lba}: {e:?}"),
        }
    }
    let moved = p.stats().counters.cleaner_log_bytes;
    let segment = 8 * 4 * 64 * 1024;
    println!("filled {written} of {usable} blocks; the cleaner moved {moved} bytes");
    assert!(
        moved <= 16 * written * LUN_BLOCK as u64 + 4 * segment,
        "moved {moved} bytes to write {written} blocks"
    );
    assert!(
        written * 100 >= usable * 95,
        "took {written} of {usable} blocks"
    );
}

// ---------------------------------------------------------------------------------------------
// RAM does not grow with LUN size.

#[test]
fn one_tib_lun_runs_in_the_same_ram_as_one_gib() {
    type BigPool = Pool<MemDisk, Vec<u8>, 8, 4, 64, 8>;
    let cfg = PoolConfig {
        max_segments: 4096,
        ..PoolConfig::default()
    };
    let arena = BigPool::memory_bytes(&cfg, 6);
    let object = std::mem::size_of::<BigPool>();
    for (lun_bytes, disk_blocks) in [
        (1u64 << 30, (1u64 << 30) / 4096),
        (1u64 << 40, (300u64 << 30) / 4096),
    ] {
        let members: Vec<MemDisk> = (0..6)
            .map(|_| MemDisk::new(BlockSize::B4096, disk_blocks).unwrap())
            .collect();
        let mut p = BigPool::create(members, Vec::new(), cfg, [9; 16], vec![0u8; arena]).unwrap();
        let blocks = lun_bytes / LUN_BLOCK as u64;
        let lun = p.create_lun("big", blocks).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut written = Vec::new();
        for i in 0..3000u64 {
            let lba = rng.random_range(0..blocks);
            p.write(lun, lba, &noise(i, lba), false).unwrap();
            written.push((lba, i));
        }
        p.flush().unwrap();
        let mut buf = vec![0u8; LUN_BLOCK];
        let mut last = HashMap::new();
        for &(lba, i) in &written {
            last.insert(lba, i);
        }
        for (&lba, &i) in &last {
            p.read(lun, lba, &mut buf).unwrap();
            assert!(buf == noise(i, lba), "lba {lba}");
        }
        println!(
            "{} GiB LUN: pool object {object} bytes + arena {arena} bytes (same for every LUN size)",
            lun_bytes >> 30
        );
    }
    // The arena is fixed by configuration; this is what the two runs above used.
    assert!(arena < 16 << 20, "arena {arena}");
}

/// Random 4 KiB overwrites of a LUN of 80 % of the usable capacity, RAID-5 of 4 × 64 MiB with
/// the default configuration and a map (about 100 leaf pages) larger than the test's 64-page
/// map cache, one and two metadata copies: every write is taken, the write amplification stays
/// bounded, and every block reads back its last write (docs/figures.md, "Random overwrites
/// near full").
#[test]
fn random_overwrites_at_eighty_percent_of_usable_are_taken() {
    for copies in [1u8, 2] {
        let cfg = PoolConfig {
            level: Level::Raid5,
            compression: false,
            metadata_copies: copies,
            ..PoolConfig::default()
        };
        let mut p = pool(cfg, 4, 64);
        let blocks = p.usable_bytes() * 8 / 10 / LUN_BLOCK as u64;
        let lun = p.create_lun("steady", blocks).unwrap();
        let seed = 5;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut last = vec![1u64; blocks as usize];
        for lba in 0..blocks {
            p.write(lun, lba, &noise(1, lba), false).unwrap();
        }
        let before = p.stats().counters;
        for i in 0..blocks * 2 {
            let lba = rng.random_range(0..blocks);
            let r = p.write(lun, lba, &noise(7 + i, lba), false);
            assert!(
                r.is_ok(),
                "seed {seed}, {copies} copies: overwrite {i}: {r:?}"
            );
            last[lba as usize] = 7 + i;
        }
        let c = p.stats().counters;
        let logged =
            c.extent_log_bytes + c.cleaner_log_bytes + c.metadata_log_bytes + c.pad_log_bytes
                - before.extent_log_bytes
                - before.cleaner_log_bytes
                - before.metadata_log_bytes
                - before.pad_log_bytes;
        let wa = logged as f64 / (c.client_bytes_written - before.client_bytes_written) as f64;
        println!("{copies} copies: write amplification {wa:.1}");
        // Measured 6.5 (one copy) and 14.0 (two).
        assert!(
            wa < 24.0,
            "seed {seed}, {copies} copies: write amplification {wa:.1}"
        );
        p.flush().unwrap();
        let mut buf = vec![0u8; LUN_BLOCK];
        for lba in 0..blocks {
            p.read(lun, lba, &mut buf).unwrap();
            assert!(
                buf == noise(last[lba as usize], lba),
                "seed {seed}, {copies} copies: lba {lba}"
            );
        }
    }
}
