//! Reference vectors from `shared/vectors/` (computed with Intel ISA-L): RAID-6 P/Q, the GF(2^8)
//! multiplication table and CRC-32C. Every record must match, every recovery case must give the
//! record's data back, and every kernel this CPU runs must agree.
//!
//! The files are found at `../../shared/vectors/` from this crate's folder, or in the folder named
//! by the environment variable `RAIDCORE_VECTORS`.

use std::fs;
use std::path::PathBuf;

use raidcore::checksum::{Crc32c, Crc32cPath, crc32c, crc32c_append, crc32c_append_with};
use raidcore::gf256;
use raidcore::parity::{self, CheckResult, Kernel, Scheme};

fn vectors_dir() -> PathBuf {
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/vectors");
    if local.join("raid6_pq.txt").is_file() {
        return local;
    }
    match std::env::var_os("RAIDCORE_VECTORS") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "reference vectors not found at {} and RAIDCORE_VECTORS is not set",
            local.display()
        ),
    }
}

fn read_vectors(name: &str) -> String {
    let path = vectors_dir().join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length {}", s.len());
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|e| panic!("hex {s}: {e}")))
        .collect()
}

struct PqRecord {
    line: usize,
    data: Vec<Vec<u8>>,
    p: Vec<u8>,
    q: Vec<u8>,
}

/// Parses `raid6_pq.txt`: `ndata N len L`, N lines `D<i> <hex>`, `P <hex>`, `Q <hex>`.
fn pq_records() -> Vec<PqRecord> {
    let text = read_vectors("raid6_pq.txt");
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let mut out = Vec::new();
    while let Some((line_idx, head)) = lines.next() {
        let f: Vec<&str> = head.split_whitespace().collect();
        assert!(
            f.len() == 4 && f[0] == "ndata" && f[2] == "len",
            "line {}: bad record header {head:?}",
            line_idx + 1
        );
        let n: usize = f[1].parse().unwrap();
        let len: usize = f[3].parse().unwrap();
        let mut field = |want: &str| {
            let (i, l) = lines
                .next()
                .unwrap_or_else(|| panic!("record at line {}: truncated", line_idx + 1));
            let (tag, value) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("line {}: {l:?}", i + 1));
            assert_eq!(tag, want, "line {}", i + 1);
            let v = hex(value.trim());
            assert_eq!(v.len(), len, "line {}: length", i + 1);
            v
        };
        let data: Vec<Vec<u8>> = (0..n).map(|i| field(&format!("D{i}"))).collect();
        let p = field("P");
        let q = field("Q");
        out.push(PqRecord {
            line: line_idx + 1,
            data,
            p,
            q,
        });
    }
    out
}

/// Columns D_0..D_{n-1}, P, Q of a record.
fn columns(r: &PqRecord) -> Vec<Vec<u8>> {
    let mut c = r.data.clone();
    c.push(r.p.clone());
    c.push(r.q.clone());
    c
}

#[test]
fn raid6_pq_matches_isal() {
    let records = pq_records();
    // The file holds 25 records (2..30 data strips, 32/64/4096 bytes); an empty or cut file fails.
    assert!(records.len() >= 25, "only {} P/Q records", records.len());
    let mut checked = 0;
    for r in &records {
        let refs: Vec<&[u8]> = r.data.iter().map(Vec::as_slice).collect();
        let len = r.p.len();
        let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
        parity::gen_pq(&refs, &mut p, &mut q).unwrap();
        assert_eq!(p, r.p, "P of record at line {}", r.line);
        assert_eq!(q, r.q, "Q of record at line {}", r.line);
        let mut p1 = vec![0u8; len];
        parity::gen_p(&refs, &mut p1).unwrap();
        assert_eq!(p1, r.p, "gen_p of record at line {}", r.line);
        for k in Kernel::supported() {
            let (mut kp, mut kq) = (vec![0u8; len], vec![0u8; len]);
            parity::gen_pq_with(k, &refs, &mut kp, &mut kq).unwrap();
            assert_eq!(kp, r.p, "{k:?} P of record at line {}", r.line);
            assert_eq!(kq, r.q, "{k:?} Q of record at line {}", r.line);
            let mut kp1 = vec![0u8; len];
            parity::gen_p_with(k, &refs, &mut kp1).unwrap();
            assert_eq!(kp1, r.p, "{k:?} gen_p of record at line {}", r.line);
            // The record's strips copied into one buffer `skew` bytes past a 64-byte boundary:
            // unaligned sources and outputs, and the two-data-strip recovery from there.
            for skew in [1usize, 8, 17, 63] {
                let n = r.data.len();
                let mut buf = vec![0u8; (n + 2) * len + 128];
                let base = buf.as_ptr().align_offset(64) + skew;
                let stripe = &mut buf[base..base + (n + 2) * len];
                for (c, d) in stripe.chunks_exact_mut(len).zip(&r.data) {
                    c.copy_from_slice(d);
                }
                let (d, pq) = stripe.split_at_mut(n * len);
                let (p, q) = pq.split_at_mut(len);
                let refs: Vec<&[u8]> = d.chunks_exact(len).collect();
                parity::gen_pq_with(k, &refs, p, q).unwrap();
                assert!(
                    *p == *r.p && *q == *r.q,
                    "{k:?} skew {skew}, line {}",
                    r.line
                );
                let mut cols: Vec<&mut [u8]> = stripe.chunks_exact_mut(len).collect();
                cols[0].fill(0);
                cols[n - 1].fill(0);
                parity::reconstruct_with(k, &mut cols, Scheme::PQ, &[0, n - 1]).unwrap();
                assert!(
                    *cols[0] == *r.data[0] && *cols[n - 1] == *r.data[n - 1],
                    "{k:?} skew {skew} recovery, line {}",
                    r.line
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, records.len());
}

/// Every erasure set RAID-6 tolerates (and RAID-5 over D..P), for every record and kernel.
#[test]
fn raid6_every_recovery_case_reproduces_isal_records() {
    let records = pq_records();
    assert!(records.len() >= 25);
    let mut cases = 0usize;
    for r in &records {
        let cols = columns(r);
        let w = cols.len();
        let n = r.data.len();
        for k in Kernel::supported() {
            let refs: Vec<&[u8]> = cols.iter().map(Vec::as_slice).collect();
            assert_eq!(
                parity::check_with(k, &refs, Scheme::PQ),
                Ok(CheckResult::Consistent),
                "{k:?} record at line {}",
                r.line
            );
            for x in 0..w {
                for y in x..w {
                    let erased: Vec<usize> = if x == y { vec![x] } else { vec![x, y] };
                    let mut work = cols.clone();
                    for &e in &erased {
                        work[e].fill(0xee);
                    }
                    let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
                    parity::reconstruct_with(k, &mut m, Scheme::PQ, &erased).unwrap();
                    assert_eq!(
                        work, cols,
                        "{k:?} record at line {}, erased {erased:?}",
                        r.line
                    );
                    cases += 1;
                }
            }
            // RAID-5 view of the same stripe: D_0..D_{n-1}, P.
            for x in 0..=n {
                let mut work: Vec<Vec<u8>> = cols[..=n].to_vec();
                work[x].fill(0x11);
                let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
                parity::reconstruct_with(k, &mut m, Scheme::P, &[x]).unwrap();
                assert_eq!(
                    work,
                    cols[..=n],
                    "{k:?} RAID-5 record at line {}, erased {x}",
                    r.line
                );
                cases += 1;
            }
        }
        // And through the dispatching entry point.
        for x in 0..w {
            for y in x + 1..w {
                let mut work = cols.clone();
                work[x].fill(0);
                work[y].fill(0);
                let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
                parity::reconstruct(&mut m, Scheme::PQ, &[y, x]).unwrap();
                assert_eq!(work, cols, "record at line {}, erased {x},{y}", r.line);
                cases += 1;
            }
        }
    }
    // Smallest possible: 25 records x (at least 6 pair cases for n = 2) through dispatch alone.
    assert!(cases > 25 * 6, "only {cases} recovery cases ran");
}

#[test]
fn gf256_mul_table_matches_isal() {
    let text = read_vectors("gf256_mul.txt");
    let mut rows = 0;
    let mut products = 0;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (a, row) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("line {}: {line:?}", i + 1));
        let a = u8::from_str_radix(a, 16).unwrap();
        let row = hex(row.trim());
        assert_eq!(row.len(), 256, "line {}", i + 1);
        let table = gf256::mul_table(a);
        for (b, &want) in row.iter().enumerate() {
            let b = b as u8;
            assert_eq!(gf256::mul(a, b), want, "{a:#04x} * {b:#04x}");
            assert_eq!(gf256::mul(b, a), want, "{b:#04x} * {a:#04x}");
            assert_eq!(table[b as usize], want, "mul_table({a:#04x})[{b:#04x}]");
            products += 1;
        }
        rows += 1;
    }
    assert_eq!(rows, 256);
    assert_eq!(products, 65536);
}

#[test]
fn crc32c_matches_isal() {
    let text = read_vectors("crc32c.txt");
    let mut checked = 0;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let (data, want) = match f.as_slice() {
            [tag, want] if tag.starts_with("len=") => (Vec::new(), *want),
            [tag, data, want] if tag.starts_with("len=") => (hex(data), *want),
            [tag, want] if tag.starts_with("ascii:") => {
                (tag.as_bytes()["ascii:".len()..].to_vec(), *want)
            }
            _ => panic!("line {}: {line:?}", i + 1),
        };
        if let Some(l) = f[0].strip_prefix("len=") {
            assert_eq!(data.len(), l.parse::<usize>().unwrap(), "line {}", i + 1);
        }
        let want = u32::from_str_radix(want, 16).unwrap();
        assert_eq!(crc32c(&data), want, "line {}", i + 1);
        // Every path this CPU has, at every start offset within a 64-byte line (a copy of the
        // record placed there), whole and appended in two pieces.
        for path in Crc32cPath::supported() {
            for skew in 0..64 {
                let mut buf = vec![0u8; data.len() + 64];
                buf[skew..skew + data.len()].copy_from_slice(&data);
                let d = &buf[skew..skew + data.len()];
                assert_eq!(
                    crc32c_append_with(path, 0, d),
                    want,
                    "{path:?} skew {skew}, line {}",
                    i + 1
                );
                let (a, b) = d.split_at(d.len() / 2);
                let first = crc32c_append_with(path, 0, a);
                assert_eq!(
                    crc32c_append_with(path, first, b),
                    want,
                    "{path:?} skew {skew} in two pieces, line {}",
                    i + 1
                );
            }
        }
        assert_eq!(
            raidcore::checksum::crc32c_portable(&data),
            want,
            "portable, line {}",
            i + 1
        );
        // Streaming in uneven pieces gives the same value.
        let mut d = Crc32c::new();
        let mut crc = 0;
        for piece in data.chunks(13) {
            d.update(piece);
            crc = crc32c_append(crc, piece);
        }
        assert_eq!(d.finalize(), want, "streaming, line {}", i + 1);
        assert_eq!(crc, want, "append, line {}", i + 1);
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} CRC-32C records");
}

/// CRC-32C against the `crc` crate (`CRC_32_ISCSI`) and the `crc32c` crate on seeded random
/// lengths 0..=70000 at random alignments, whole and in two pieces.
#[test]
fn crc32c_matches_crc_crates_on_random_lengths() {
    use rand::{Rng, RngCore, SeedableRng};
    let seed = 0xc3c3_2c2c_u64;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let reference = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);
    let mut buf = vec![0u8; 70_000 + 64];
    rng.fill_bytes(&mut buf);
    for run in 0..300 {
        let len = if run < 20 {
            run
        } else {
            rng.random_range(0..=70_000)
        };
        let start = rng.random_range(0..64);
        let data = &buf[start..start + len];
        let want = reference.checksum(data);
        assert_eq!(
            crc32c(data),
            want,
            "seed {seed:#x} run {run}: len {len} at +{start}"
        );
        assert_eq!(crc32c::crc32c(data), want, "crc32c crate, len {len}");
        let cut = rng.random_range(0..=len);
        assert_eq!(
            crc32c_append(crc32c(&data[..cut]), &data[cut..]),
            want,
            "seed {seed:#x} run {run}: len {len} cut {cut}"
        );
    }
}
