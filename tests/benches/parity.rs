//! Criterion benchmarks: raidcore's P/Q generation, two-data-strip recovery and CRC-32C next to
//! ISA-L (loaded at run time; skipped if absent), reed-solomon-simd, the crc32c crate and memcpy,
//! on the same buffers (one stripe, hot in cache). Every parity kernel and CRC-32C path this CPU
//! runs is measured.
//! The 64 MiB working-set comparison and ratios are in the `parity_table` bench.

#[allow(dead_code)]
#[path = "../../host-sim/src/bench_parity.rs"]
mod bench_parity;

use std::hint::black_box;

use bench_parity::Isal;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use raidcore::checksum::{self, Crc32cPath};
use raidcore::parity::{self, Kernel, Scheme};

/// `columns` strips of `len` bytes, 64-byte aligned (ISA-L needs 32), filled with a pattern.
struct Stripe {
    buf: Vec<u8>,
    start: usize,
    len: usize,
    columns: usize,
}

impl Stripe {
    fn new(columns: usize, len: usize) -> Stripe {
        let mut buf = vec![0u8; columns * len + 64];
        let start = buf.as_ptr().align_offset(64);
        let mut s = 0x1234_5678_9abc_def1_u64;
        for b in &mut buf[start..] {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        }
        Stripe {
            buf,
            start,
            len,
            columns,
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.columns * self.len]
    }

    /// Data strips, P, Q.
    fn split(&mut self) -> (Vec<&[u8]>, &mut [u8], &mut [u8]) {
        let (n, len) = (self.columns - 2, self.len);
        let (data, pq) = self.bytes().split_at_mut(n * len);
        let (p, q) = pq.split_at_mut(len);
        (data.chunks_exact(len).collect(), p, q)
    }
}

const SHAPES: [usize; 3] = [4, 8, 16];
const STRIPS: [usize; 2] = [4096, 65536];

fn gen_pq(c: &mut Criterion) {
    let isal = Isal::load().ok();
    for len in STRIPS {
        for n in SHAPES {
            let mut g = c.benchmark_group(format!("gen/{n}+2/{}KiB", len >> 10));
            g.throughput(Throughput::Bytes((n * len) as u64));
            let mut st = Stripe::new(n + 2, len);
            for k in Kernel::supported() {
                g.bench_function(BenchmarkId::new("raidcore", k.name()), |b| {
                    b.iter(|| {
                        let (data, p, q) = st.split();
                        parity::gen_pq_with(k, &data, p, q).unwrap();
                    });
                });
            }
            if let Some(isal) = &isal {
                g.bench_function("isal", |b| {
                    b.iter(|| {
                        let (data, p, q) = st.split();
                        isal.pq_gen(&data, p, q);
                    });
                });
            }
            let mut rs = reed_solomon_simd::ReedSolomonEncoder::new(n, 2, len).unwrap();
            g.bench_function("reed-solomon-simd", |b| {
                b.iter(|| {
                    let (data, _, _) = st.split();
                    for d in data {
                        rs.add_original_shard(d).unwrap();
                    }
                    black_box(rs.encode().unwrap().recovery(0).map(|r| r[0]));
                });
            });
            let mut dst = vec![0u8; n * len];
            g.bench_function("memcpy", |b| {
                b.iter(|| {
                    dst.copy_from_slice(&st.bytes()[..n * len]);
                    black_box(&dst);
                });
            });
            g.finish();
        }
    }
}

fn recover2(c: &mut Criterion) {
    let isal = Isal::load().ok();
    for len in STRIPS {
        for n in SHAPES {
            let (x, y) = (0, n / 2);
            let mut g = c.benchmark_group(format!("recover2/{n}+2/{}KiB", len >> 10));
            g.throughput(Throughput::Bytes((n * len) as u64));
            let mut st = Stripe::new(n + 2, len);
            {
                let (data, p, q) = st.split();
                parity::gen_pq(&data, p, q).unwrap();
            }
            for k in Kernel::supported() {
                g.bench_function(BenchmarkId::new("raidcore", k.name()), |b| {
                    b.iter(|| {
                        let mut cols: Vec<&mut [u8]> = st.bytes().chunks_exact_mut(len).collect();
                        parity::reconstruct_with(k, &mut cols, Scheme::PQ, &[x, y]).unwrap();
                    });
                });
            }
            if let Some(isal) = &isal {
                let rec = isal.recovery(n, x, y);
                let mut out = Stripe::new(2, len);
                let golden = st.bytes().to_vec();
                let survivors: Vec<&[u8]> = golden
                    .chunks_exact(len)
                    .enumerate()
                    .filter(|(i, _)| *i != x && *i != y)
                    .map(|(_, c)| c)
                    .collect();
                g.bench_function("isal", |b| {
                    b.iter(|| {
                        let (dx, dy) = out.bytes().split_at_mut(len);
                        isal.recover(&rec, &survivors, dx, dy);
                    });
                });
            }
            let golden = st.bytes().to_vec();
            let mut enc = reed_solomon_simd::ReedSolomonEncoder::new(n, 2, len).unwrap();
            for d in golden[..n * len].chunks_exact(len) {
                enc.add_original_shard(d).unwrap();
            }
            let recovery: Vec<Vec<u8>> = enc
                .encode()
                .unwrap()
                .recovery_iter()
                .map(<[u8]>::to_vec)
                .collect();
            let mut dec = reed_solomon_simd::ReedSolomonDecoder::new(n, 2, len).unwrap();
            g.bench_function("reed-solomon-simd", |b| {
                b.iter(|| {
                    for (i, d) in golden[..n * len].chunks_exact(len).enumerate() {
                        if i != x && i != y {
                            dec.add_original_shard(i, d).unwrap();
                        }
                    }
                    dec.add_recovery_shard(0, &recovery[0]).unwrap();
                    dec.add_recovery_shard(1, &recovery[1]).unwrap();
                    black_box(dec.decode().unwrap().restored_original(x).map(|r| r[0]));
                });
            });
            let mut dst = vec![0u8; n * len];
            g.bench_function("memcpy", |b| {
                b.iter(|| {
                    dst.copy_from_slice(&golden[..n * len]);
                    black_box(&dst);
                });
            });
            g.finish();
        }
    }
}

fn crc(c: &mut Criterion) {
    let isal = Isal::load().ok();
    for len in STRIPS {
        let mut st = Stripe::new(1, len);
        let data = st.bytes().to_vec();
        let mut g = c.benchmark_group(format!("crc32c/{}KiB", len >> 10));
        g.throughput(Throughput::Bytes(len as u64));
        for path in Crc32cPath::supported() {
            g.bench_function(BenchmarkId::new("raidcore", path.name()), |b| {
                b.iter(|| black_box(checksum::crc32c_append_with(path, 0, black_box(&data))));
            });
        }
        if let Some(isal) = &isal {
            g.bench_function("isal", |b| {
                b.iter(|| black_box(isal.crc32c(black_box(&data))));
            });
        }
        g.bench_function("crc32c-crate", |b| {
            b.iter(|| black_box(crc32c::crc32c(black_box(&data))));
        });
        let mut dst = vec![0u8; len];
        g.bench_function("memcpy", |b| {
            b.iter(|| {
                dst.copy_from_slice(&data);
                black_box(&dst);
            });
        });
        g.finish();
    }
}

criterion_group!(benches, gen_pq, recover2, crc);
criterion_main!(benches);
