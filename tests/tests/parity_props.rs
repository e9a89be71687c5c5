//! Property tests of P/Q parity: random geometries, data and erasure sets; every kernel this CPU
//! runs. Proptest prints the failing case and its seed, and keeps failing seeds in
//! `parity_props.proptest-regressions` beside this file so they are replayed first on the next run. The seeded
//! `fuzz_bodies_on_seeded_inputs` test runs the fuzz target's checks on inputs from ChaCha8.

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use raidcore::parity::{self, CheckResult, Kernel, ParityError, Scheme};
use raidcore_tests::parity_fuzz::check_parity_reconstruct;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A stripe: data strip count (1..=30, sometimes 253..=255), strip length (multiple of 8), and
/// the data itself.
fn stripe() -> impl Strategy<Value = (Vec<Vec<u8>>, usize)> {
    let n = prop_oneof![9 => 1usize..=30, 1 => 253usize..=255];
    (n, 1usize..=40).prop_flat_map(|(n, words)| {
        // Keep 255-strip stripes short so a case stays fast.
        let words = if n > 30 { words.min(4) } else { words };
        (
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), words * 8), n),
            Just(words * 8),
        )
    })
}

fn with_parity(data: &[Vec<u8>], scheme: Scheme, kernel: Kernel) -> Vec<Vec<u8>> {
    let len = data[0].len();
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut cols = data.to_vec();
    let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
    match scheme {
        Scheme::P => {
            parity::gen_p_with(kernel, &refs, &mut p).unwrap();
            cols.push(p);
        }
        Scheme::PQ => {
            parity::gen_pq_with(kernel, &refs, &mut p, &mut q).unwrap();
            cols.push(p);
            cols.push(q);
        }
    }
    cols
}

/// `n` strips of `len` random bytes.
fn random_strips(rng: &mut ChaCha8Rng, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let mut v = vec![0u8; len];
            rng.fill_bytes(&mut v);
            v
        })
        .collect()
}

fn config() -> Config {
    Config {
        cases: 96,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Any erasure set within the tolerance rebuilds the original stripe, with every kernel.
    #[test]
    fn reconstruct_restores_original(
        (data, _len) in stripe(),
        pq in any::<bool>(),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..=2),
        junk in any::<u8>(),
    ) {
        let scheme = if pq { Scheme::PQ } else { Scheme::P };
        let golden = with_parity(&data, scheme, Kernel::PORTABLE);
        let width = golden.len();
        let mut erased: Vec<usize> = picks.iter().map(|i| i.index(width)).collect();
        erased.dedup();
        erased.truncate(scheme.parity_columns());
        for kernel in Kernel::supported() {
            prop_assert_eq!(&with_parity(&data, scheme, kernel), &golden, "{:?} generation", kernel);
            let mut work = golden.clone();
            for &e in &erased {
                work[e].fill(junk);
            }
            let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
            prop_assert_eq!(parity::reconstruct_with(kernel, &mut m, scheme, &erased), Ok(()));
            prop_assert!(work == golden, "{:?}: erased {:?} not restored", kernel, erased);
        }
    }

    /// One corrupted byte is flagged; with PQ its column is named.
    #[test]
    fn check_flags_single_corruption(
        (data, len) in stripe(),
        pq in any::<bool>(),
        col in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let scheme = if pq { Scheme::PQ } else { Scheme::P };
        let mut cols = with_parity(&data, scheme, Kernel::PORTABLE);
        let n = data.len();
        let c = col.index(cols.len());
        cols[c][at.index(len)] ^= mask;
        let refs: Vec<&[u8]> = cols.iter().map(Vec::as_slice).collect();
        for kernel in Kernel::supported() {
            match parity::check_with(kernel, &refs, scheme) {
                Ok(CheckResult::Mismatch { p_bad, q_bad, suspect }) => {
                    if scheme == Scheme::PQ {
                        prop_assert_eq!(suspect, Some(c), "{:?}", kernel);
                        prop_assert_eq!(p_bad, c != n + 1);
                        prop_assert_eq!(q_bad, c != n);
                    } else {
                        prop_assert!(p_bad && !q_bad && suspect.is_none());
                    }
                }
                other => prop_assert!(false, "{:?}: column {} corrupt, check says {:?}", kernel, c, other),
            }
        }
    }

    /// More erasures than the scheme tolerates: `ParityError::Erasures`, and nothing changes.
    #[test]
    fn too_many_erasures_are_refused(
        (data, _len) in stripe(),
        pq in any::<bool>(),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 3..=6),
    ) {
        let scheme = if pq { Scheme::PQ } else { Scheme::P };
        let cols = with_parity(&data, scheme, Kernel::PORTABLE);
        let width = cols.len();
        let mut erased: Vec<usize> = Vec::new();
        for i in &picks {
            let c = i.index(width);
            if !erased.contains(&c) {
                erased.push(c);
            }
        }
        prop_assume!(erased.len() > scheme.parity_columns());
        for kernel in Kernel::supported() {
            let mut work = cols.clone();
            let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
            prop_assert_eq!(parity::reconstruct_with(kernel, &mut m, scheme, &erased), Err(ParityError::Erasures));
            prop_assert!(work == cols);
        }
    }
}

/// Kernels agree on lengths that are multiples of 8 but not of the 64-, 128- or 256-byte SIMD
/// blocks, for every recovery case (two data, data + P, data + Q, data from P, P + Q).
#[test]
fn kernels_agree_on_odd_lengths() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x0dd1);
    let mut cases = 0;
    for len in [
        8usize, 24, 56, 72, 120, 136, 200, 248, 256, 264, 504, 520, 776, 4104, 4200,
    ] {
        for n in [1usize, 2, 4, 7, 16] {
            let data = random_strips(&mut rng, n, len);
            let golden = with_parity(&data, Scheme::PQ, Kernel::PORTABLE);
            for kernel in Kernel::supported() {
                assert_eq!(
                    with_parity(&data, Scheme::PQ, kernel),
                    golden,
                    "{kernel:?} n={n} len={len}"
                );
                for x in 0..n + 2 {
                    for y in x + 1..n + 2 {
                        let mut work = golden.clone();
                        work[x].fill(0x33);
                        work[y].fill(0xcc);
                        let mut m: Vec<&mut [u8]> =
                            work.iter_mut().map(Vec::as_mut_slice).collect();
                        parity::reconstruct_with(kernel, &mut m, Scheme::PQ, &[x, y]).unwrap();
                        assert_eq!(work, golden, "{kernel:?} n={n} len={len} erased {x},{y}");
                        cases += 1;
                    }
                }
            }
        }
    }
    assert!(cases > 100);
}

/// This CPU's SIMD kernels are really exercised by the tests here; a kernel the CPU cannot run
/// is reported as skipped.
#[test]
#[cfg(target_arch = "x86_64")]
fn simd_kernels_present_when_cpu_has_them() {
    use std::is_x86_feature_detected as has;
    let names: Vec<&str> = Kernel::supported().map(Kernel::name).collect();
    for (name, cpu_has) in [
        ("ssse3", has!("ssse3")),
        ("avx2", has!("avx2")),
        ("avx512bw", has!("avx512bw")),
        ("gfni", has!("avx512bw") && has!("gfni")),
    ] {
        assert_eq!(names.contains(&name), cpu_has, "{name}");
        if !cpu_has {
            println!("skipped: this CPU lacks what the {name} parity kernel needs");
        }
    }
}

/// Every kernel and every operation (P, P+Q, each recovery case, check) at every byte
/// alignment of sources and outputs that matters: the strips of one stripe are slices of one
/// buffer at `skew` bytes past a 64-byte boundary (unaligned vector loads and stores, and the
/// streaming stores' alignment fallback at 16 KiB and more).
#[test]
fn kernels_agree_at_every_alignment() {
    let mut rng = ChaCha8Rng::seed_from_u64(0xa119);
    let n = 5;
    for len in [8usize, 248, 264, 4096, 4104, 16_392] {
        let data = random_strips(&mut rng, n, len);
        let golden = with_parity(&data, Scheme::PQ, Kernel::PORTABLE);
        for skew in [0usize, 1, 3, 8, 17, 32, 63] {
            let mut buf = vec![0u8; (n + 2) * len + 128];
            let base = buf.as_ptr().align_offset(64) + skew;
            for kernel in Kernel::supported() {
                let at = format!("{kernel:?} len {len} skew {skew}");
                let stripe = &mut buf[base..base + (n + 2) * len];
                for (c, g) in stripe.chunks_exact_mut(len).zip(&golden) {
                    c.copy_from_slice(g);
                }
                {
                    let (d, pq) = stripe.split_at_mut(n * len);
                    let (p, q) = pq.split_at_mut(len);
                    let refs: Vec<&[u8]> = d.chunks_exact(len).collect();
                    p.fill(0);
                    q.fill(0);
                    parity::gen_pq_with(kernel, &refs, p, q).unwrap();
                    assert!(*p == *golden[n] && *q == *golden[n + 1], "P+Q {at}");
                    p.fill(0);
                    parity::gen_p_with(kernel, &refs, p).unwrap();
                    assert!(*p == *golden[n], "P {at}");
                }
                let refs: Vec<&[u8]> = stripe.chunks_exact(len).collect();
                assert_eq!(
                    parity::check_with(kernel, &refs, Scheme::PQ),
                    Ok(CheckResult::Consistent),
                    "check {at}"
                );
                for x in 0..n + 2 {
                    for y in x..n + 2 {
                        let erased: Vec<usize> = if x == y { vec![x] } else { vec![x, y] };
                        let mut cols: Vec<&mut [u8]> = stripe.chunks_exact_mut(len).collect();
                        for &e in &erased {
                            cols[e].fill(0x6b);
                        }
                        parity::reconstruct_with(kernel, &mut cols, Scheme::PQ, &erased).unwrap();
                        for (c, g) in cols.iter().zip(&golden) {
                            assert!(**c == **g, "{at} erased {erased:?}");
                        }
                    }
                }
            }
        }
    }
}

/// The fuzz target's body on a few thousand seeded inputs. Replays one seed with
/// `RAIDCORE_FUZZ_SEED=<n>`.
#[test]
fn fuzz_bodies_on_seeded_inputs() {
    let seed = std::env::var("RAIDCORE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0001_u64);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut buf = vec![0u8; 600];
    let runs = 3000;
    for i in 0..runs {
        let len = (rng.next_u32() % 600) as usize;
        rng.fill_bytes(&mut buf[..len]);
        if let Err(e) = check_parity_reconstruct(&buf[..len]) {
            panic!("seed {seed:#x}, run {i}: {e}\ninput: {:02x?}", &buf[..len]);
        }
    }
}

/// Large parity outputs take the streaming-store path of the x86 kernels, which needs aligned
/// output: try P and Q at every alignment that matters (0, 8, 16, 32 bytes past a 64-byte
/// boundary), lengths at and past the threshold, RAID-5 and RAID-6.
#[test]
fn kernels_agree_on_large_strips_at_every_alignment() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x1a29e);
    for len in [16_384usize, 16_392, 65_544] {
        let n = 5;
        let data = random_strips(&mut rng, n, len);
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let golden = with_parity(&data, Scheme::PQ, Kernel::PORTABLE);
        for skew in [0usize, 8, 16, 32] {
            let mut buf = vec![0u8; 2 * len + 256];
            let base = buf.as_ptr().align_offset(64) + skew;
            for kernel in Kernel::supported() {
                buf.fill(0x5c);
                let (p, rest) = buf[base..].split_at_mut(len);
                let q = &mut rest[..len];
                parity::gen_pq_with(kernel, &refs, p, q).unwrap();
                assert_eq!(
                    &*p,
                    golden[n].as_slice(),
                    "{kernel:?} P len {len} skew {skew}"
                );
                assert_eq!(
                    &*q,
                    golden[n + 1].as_slice(),
                    "{kernel:?} Q len {len} skew {skew}"
                );
                p.fill(0);
                parity::gen_p_with(kernel, &refs, p).unwrap();
                assert_eq!(
                    &*p,
                    golden[n].as_slice(),
                    "{kernel:?} gen_p len {len} skew {skew}"
                );
            }
        }
    }
}
