//! `raidcore-sim bench parity`: raidcore's P/Q generation, two-data-strip recovery and CRC-32C
//! side by side with Intel ISA-L, `reed-solomon-simd`, the `crc32c` crate and a plain memcpy of
//! the same bytes, in one run on the same buffers.
//!
//! ISA-L (`libisal.so.2`, Debian `libisal-dev`/`libisal2`) is loaded at run time, so building
//! never needs it; without it the ISA-L column reads "n/a".
//!
//! ## Method
//! Per-thread CPU time (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), so time the thread spends
//! descheduled on a busy machine does not count; many repetitions: every contender is timed in
//! `samples` samples, interleaved round-robin (sample i of every contender before sample i + 1 of
//! any) so frequency changes and noise from the other core hit all of them alike; one sample runs
//! the operation enough times to last about `sample_ms`. Reported: min / median / max of the
//! per-sample throughput, and ratios of the medians. Throughput is in GB/s (10^9 bytes per
//! second) of **data strips processed** (n × strip bytes per stripe; strip bytes for CRC-32C).
//!
//! Working sets: `l2` processes one stripe over and over (hot in L2 where it fits: n+2 strips;
//! 16+2 × 64 KiB is larger than a 1 MiB L2 and so spills to L3), `64MiB` walks through as many
//! stripes as fill 64 MiB, and for P+Q generation `1GiB` through 1 GiB, far more than any L3
//! (64 MiB fits in some), so every byte comes from DRAM.
//!
//! P+Q generation rows also time a **traffic bound**: a pass that reads the same data strips and
//! writes the same P and Q strips with one XOR per vector and no field arithmetic, with normal
//! and with non-temporal stores (the faster counts). Generation cannot move the same bytes faster,
//! so `vs bound` (ours / bound) says how close to the memory (or cache) traffic limit it runs.
//!
//! CRC-32C rows time every hardware path this CPU has (the `shape` column names it), or the
//! portable one with `--kernel portable`.
//!
//! Every contender's output is checked once against raidcore's before timing.

// Throughput arithmetic is in f64 on counts far below 2^52, and ISA-L's C `int` arguments are
// strip lengths and strip counts asserted to fit (`fits_c_int`).
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

use std::ffi::c_void;
use std::fmt::Write as _;

/// CPU time this thread has used, in seconds.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_THREAD_CPUTIME_ID exists on Linux and
    // every POSIX system with thread CPU clocks.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    if r != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

use raidcore::checksum::{self, Crc32cPath};
use raidcore::gf256;
use raidcore::parity::{self, Kernel, Scheme};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchParityOptions {
    /// Data strip counts (each with two parity strips).
    pub data_strips: Vec<usize>,
    /// Strip lengths in bytes (multiples of 64).
    pub strip_bytes: Vec<usize>,
    /// Bytes of the large working set (the `64MiB` rows).
    pub large_working_set_bytes: usize,
    /// Bytes of the DRAM working set of P+Q generation (the `1GiB` rows; 0 for none).
    pub dram_working_set_bytes: usize,
    /// Samples per contender and row.
    pub samples: usize,
    /// Target length of one sample in milliseconds.
    pub sample_ms: f64,
    /// Which raidcore kernel to time (`None`: the one `raidcore` selects).
    pub kernel: Option<Kernel>,
    /// Operations to run, of `gen`, `recover2`, `crc32c`.
    pub ops: Vec<&'static str>,
}

impl BenchParityOptions {
    /// The quick mode (under a minute): 4+2, 8+2, 16+2; 4 KiB and 64 KiB strips; L2, 64 MiB and,
    /// for P+Q generation, 1 GiB.
    #[must_use]
    pub fn quick() -> Self {
        BenchParityOptions {
            data_strips: vec![4, 8, 16],
            strip_bytes: vec![4096, 65536],
            large_working_set_bytes: 64 << 20,
            dram_working_set_bytes: 1 << 30,
            samples: 9,
            sample_ms: 2.0,
            kernel: None,
            ops: vec!["gen", "recover2", "crc32c"],
        }
    }

    /// The full mode: as quick, with more and longer samples.
    #[must_use]
    pub fn full() -> Self {
        BenchParityOptions {
            samples: 31,
            sample_ms: 10.0,
            ..Self::quick()
        }
    }
}

/// Min / median / max throughput in GB/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gbps {
    /// Slowest sample.
    pub min: f64,
    /// Median sample.
    pub median: f64,
    /// Fastest sample.
    pub max: f64,
}

/// One line of the result table.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRow {
    /// `gen` (P+Q generation), `recover2` (two data strips lost) or `crc32c`.
    pub op: &'static str,
    /// Data strips per stripe (1 for `crc32c`).
    pub data_strips: usize,
    /// Bytes per strip (per buffer for `crc32c`).
    pub strip_bytes: usize,
    /// `l2`, `64MiB` or `1GiB`.
    pub working_set: String,
    /// The raidcore kernel, or for `crc32c` the CRC-32C path, that was timed.
    pub path: &'static str,
    /// Bytes the operations walk through.
    pub working_set_bytes: usize,
    /// raidcore.
    pub ours: Gbps,
    /// ISA-L (`pq_gen`; `gf_invert_matrix` + `ec_encode_data`; `crc32_iscsi`), if loaded.
    pub isal: Option<Gbps>,
    /// The other peer: `reed-solomon-simd` (gen, recover2) or the `crc32c` crate.
    pub peer: Gbps,
    /// Name of `peer`.
    pub peer_name: &'static str,
    /// memcpy of the same data bytes.
    pub memcpy: Gbps,
    /// The traffic bound (`gen` rows only): the same reads and writes without field arithmetic.
    pub bound: Option<Gbps>,
}

impl BenchRow {
    /// ours / ISA-L, medians.
    #[must_use]
    pub fn ratio_to_isal(&self) -> Option<f64> {
        self.isal.map(|i| self.ours.median / i.median)
    }

    /// ours / traffic bound, medians.
    #[must_use]
    pub fn ratio_to_bound(&self) -> Option<f64> {
        self.bound.map(|b| self.ours.median / b.median)
    }
}

// ---------------------------------------------------------------------------------------------
// ISA-L, loaded at run time.

type PqGenFn = unsafe extern "C" fn(i32, i32, *mut *mut c_void) -> i32;
type GfInvertFn = unsafe extern "C" fn(*mut u8, *mut u8, i32) -> i32;
type EcInitTablesFn = unsafe extern "C" fn(i32, i32, *mut u8, *mut u8);
type EcEncodeFn = unsafe extern "C" fn(i32, i32, i32, *mut u8, *mut *mut u8, *mut *mut u8);
type Crc32IscsiFn = unsafe extern "C" fn(*mut u8, i32, u32) -> u32;

/// The ISA-L functions the benchmark compares with.
#[derive(Debug)]
pub struct Isal {
    pq_gen: PqGenFn,
    gf_invert_matrix: GfInvertFn,
    ec_init_tables: EcInitTablesFn,
    ec_encode_data: EcEncodeFn,
    crc32_iscsi: Crc32IscsiFn,
    // Keeps the function pointers above valid.
    _lib: libloading::Library,
}

/// Tables for ISA-L to rebuild data strips x and y of an n+2 stripe.
#[derive(Debug, Clone)]
pub struct IsalRecovery {
    n: usize,
    gftbls: Vec<u8>,
}

impl Isal {
    /// Loads `libisal.so.2` (or `libisal.so`).
    ///
    /// # Errors
    /// The library or one of its symbols was not found.
    pub fn load() -> Result<Isal, String> {
        let mut last = String::new();
        for name in ["libisal.so.2", "libisal.so"] {
            // SAFETY: loading ISA-L runs its (trivial) ELF constructors; it has no other side
            // effects at load time.
            match unsafe { libloading::Library::new(name) } {
                Ok(lib) => return Self::from_lib(lib),
                Err(e) => last = format!("{name}: {e}"),
            }
        }
        Err(last)
    }

    fn from_lib(lib: libloading::Library) -> Result<Isal, String> {
        // SAFETY: the symbol types are those declared in ISA-L's raid.h, erasure_code.h and crc.h
        // (int = i32, unsigned int = u32), unchanged since ISA-L 2.x.
        unsafe {
            let pq_gen = *lib.get::<PqGenFn>(b"pq_gen\0").map_err(|e| e.to_string())?;
            let gf_invert_matrix = *lib
                .get::<GfInvertFn>(b"gf_invert_matrix\0")
                .map_err(|e| e.to_string())?;
            let ec_init_tables = *lib
                .get::<EcInitTablesFn>(b"ec_init_tables\0")
                .map_err(|e| e.to_string())?;
            let ec_encode_data = *lib
                .get::<EcEncodeFn>(b"ec_encode_data\0")
                .map_err(|e| e.to_string())?;
            let crc32_iscsi = *lib
                .get::<Crc32IscsiFn>(b"crc32_iscsi\0")
                .map_err(|e| e.to_string())?;
            Ok(Isal {
                pq_gen,
                gf_invert_matrix,
                ec_init_tables,
                ec_encode_data,
                crc32_iscsi,
                _lib: lib,
            })
        }
    }

    /// P and Q of `data` into `p`, `q` with `pq_gen`. Every buffer must be 32-byte aligned with
    /// a length that is a multiple of 32, all equal.
    ///
    /// # Panics
    /// If a buffer breaks those rules (ISA-L would read or write out of bounds).
    pub fn pq_gen(&self, data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
        let len = p.len();
        let ok = |b: &[u8]| b.len() == len && (b.as_ptr() as usize).is_multiple_of(32);
        assert!(len.is_multiple_of(32) && ok(p) && ok(q) && data.iter().all(|d| ok(d)));
        assert!(fits_c_int(len) && fits_c_int(data.len() + 2));
        let mut ptrs: Vec<*mut c_void> =
            data.iter().map(|d| d.as_ptr().cast_mut().cast()).collect();
        ptrs.push(p.as_mut_ptr().cast());
        ptrs.push(q.as_mut_ptr().cast());
        // SAFETY: checked above: n + 2 pointers to `len` bytes each, 32-byte aligned; ISA-L only
        // reads the data pointers and writes P and Q, which are exclusively borrowed.
        let r = unsafe { (self.pq_gen)(ptrs.len() as i32, len as i32, ptrs.as_mut_ptr()) };
        assert_eq!(r, 0, "pq_gen refused the buffers");
    }

    /// The decode tables that rebuild data strips `x` and `y` (x != y) of an `n` + 2 stripe from
    /// the other data strips, P and Q (in that order), like md's RAID-6 layout.
    ///
    /// # Panics
    /// If the survivor matrix is singular (it never is for x != y < n <= 255).
    #[must_use]
    pub fn recovery(&self, n: usize, x: usize, y: usize) -> IsalRecovery {
        assert!(x != y && x < n && y < n && n <= 255);
        // Rows of the encode matrix for the n survivors: e_i for surviving data, 1..1 for P,
        // g^0..g^{n-1} for Q.
        let mut m = Vec::with_capacity(n * n);
        for i in (0..n).filter(|&i| i != x && i != y) {
            m.extend((0..n).map(|j| u8::from(i == j)));
        }
        m.extend(std::iter::repeat_n(1u8, n));
        m.extend((0..n).map(gf256::exp));
        let mut inv = vec![0u8; n * n];
        // SAFETY: both matrices are n×n bytes.
        let r = unsafe { (self.gf_invert_matrix)(m.as_mut_ptr(), inv.as_mut_ptr(), n as i32) };
        assert_eq!(r, 0, "singular survivor matrix");
        let mut rows: Vec<u8> = inv[x * n..(x + 1) * n].to_vec();
        rows.extend_from_slice(&inv[y * n..(y + 1) * n]);
        let mut gftbls = vec![0u8; 32 * n * 2];
        // SAFETY: `rows` is 2×n coefficients, `gftbls` 32×n×2 bytes as ec_init_tables needs.
        unsafe { (self.ec_init_tables)(n as i32, 2, rows.as_mut_ptr(), gftbls.as_mut_ptr()) };
        IsalRecovery { n, gftbls }
    }

    /// Rebuilds two data strips with `ec_encode_data` from the `n` survivors (surviving data in
    /// order, then P, then Q).
    ///
    /// # Panics
    /// If the shapes do not match `rec`.
    pub fn recover(&self, rec: &IsalRecovery, survivors: &[&[u8]], dx: &mut [u8], dy: &mut [u8]) {
        let len = dx.len();
        assert!(
            survivors.len() == rec.n && dy.len() == len && survivors.iter().all(|s| s.len() == len)
        );
        let mut src: Vec<*mut u8> = survivors.iter().map(|s| s.as_ptr().cast_mut()).collect();
        let mut dst = [dx.as_mut_ptr(), dy.as_mut_ptr()];
        let mut tbl = rec.gftbls.clone();
        // SAFETY: n sources and 2 destinations of `len` bytes each; the tables were made by
        // ec_init_tables for (n, 2); ISA-L reads the sources and writes only the destinations.
        unsafe {
            (self.ec_encode_data)(
                len as i32,
                rec.n as i32,
                2,
                tbl.as_mut_ptr(),
                src.as_mut_ptr(),
                dst.as_mut_ptr(),
            );
        }
    }

    /// Like [`Isal::recover`], with the tables borrowed mutably (ISA-L's signature takes a
    /// mutable pointer; it does not write them) to avoid a copy in the timed loop.
    fn recover_in_place(
        &self,
        rec: &mut IsalRecovery,
        survivors: &[&[u8]],
        dx: &mut [u8],
        dy: &mut [u8],
    ) {
        let len = dx.len();
        assert!(
            survivors.len() == rec.n && dy.len() == len && survivors.iter().all(|s| s.len() == len)
        );
        let mut src: Vec<*mut u8> = survivors.iter().map(|s| s.as_ptr().cast_mut()).collect();
        let mut dst = [dx.as_mut_ptr(), dy.as_mut_ptr()];
        // SAFETY: as in `recover`.
        unsafe {
            (self.ec_encode_data)(
                len as i32,
                rec.n as i32,
                2,
                rec.gftbls.as_mut_ptr(),
                src.as_mut_ptr(),
                dst.as_mut_ptr(),
            );
        }
    }

    /// CRC-32C of `data` with `crc32_iscsi` (converted to the standard form: ISA-L's function
    /// takes and returns the raw register).
    #[must_use]
    pub fn crc32c(&self, data: &[u8]) -> u32 {
        let len = i32::try_from(data.len()).unwrap_or(i32::MAX);
        // SAFETY: ISA-L reads `len` bytes of `data` and does not write it.
        !unsafe { (self.crc32_iscsi)(data.as_ptr().cast_mut(), len, !0) }
    }
}

fn fits_c_int(v: usize) -> bool {
    i32::try_from(v).is_ok()
}

// ---------------------------------------------------------------------------------------------
// Buffers.

/// One 64-byte-aligned arena holding `stripes` stripes of `columns` strips each, back to back.
struct Arena {
    buf: Vec<u8>,
    start: usize,
    strip_bytes: usize,
    columns: usize,
}

fn fill_random(buf: &mut [u8], mut seed: u64) {
    for ch in buf.chunks_mut(8) {
        // splitmix64
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ch.copy_from_slice(&z.to_le_bytes()[..ch.len()]);
    }
}

impl Arena {
    fn new(columns: usize, strip_bytes: usize, stripes: usize, seed: u64) -> Arena {
        let bytes = columns * strip_bytes * stripes;
        let mut buf = vec![0u8; bytes + 64];
        let start = buf.as_ptr().align_offset(64);
        fill_random(&mut buf[start..start + bytes], seed);
        Arena {
            buf,
            start,
            strip_bytes,
            columns,
        }
    }

    fn stripe(&self, s: usize) -> &[u8] {
        let sb = self.columns * self.strip_bytes;
        &self.buf[self.start + s * sb..self.start + (s + 1) * sb]
    }

    fn stripe_mut(&mut self, s: usize) -> &mut [u8] {
        let sb = self.columns * self.strip_bytes;
        &mut self.buf[self.start + s * sb..self.start + (s + 1) * sb]
    }
}

// ---------------------------------------------------------------------------------------------
// Timing.

/// Runs `op(i)` for i = 0, 1, 2, … in samples; returns GB/s per sample for `bytes_per_op`.
struct Timer {
    reps: usize,
    results: Vec<f64>,
}

fn calibrate(sample_ms: f64, op: &mut dyn FnMut(usize)) -> usize {
    let mut reps = 1usize;
    loop {
        let t = thread_cpu_secs();
        for i in 0..reps {
            op(i);
        }
        let ms = (thread_cpu_secs() - t) * 1e3;
        if ms >= sample_ms / 4.0 || reps >= 1 << 24 {
            let per = ms / reps as f64;
            return ((sample_ms / per.max(1e-6)).ceil() as usize).clamp(1, 1 << 24);
        }
        reps *= 4;
    }
}

fn stats(v: &[f64]) -> Gbps {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Gbps {
        min: s[0],
        median: s[s.len() / 2],
        max: s[s.len() - 1],
    }
}

/// Times the contenders round-robin; each gets `samples` samples.
fn race(
    opts: &BenchParityOptions,
    bytes_per_op: usize,
    ops: &mut [&mut dyn FnMut(usize)],
) -> Vec<Gbps> {
    let mut timers: Vec<Timer> = ops
        .iter_mut()
        .map(|op| Timer {
            reps: calibrate(opts.sample_ms, *op),
            results: Vec::new(),
        })
        .collect();
    let mut counter = 0usize;
    for _ in 0..opts.samples {
        for (op, t) in ops.iter_mut().zip(timers.iter_mut()) {
            let start = thread_cpu_secs();
            for _ in 0..t.reps {
                op(counter);
                counter = counter.wrapping_add(1);
            }
            let secs = (thread_cpu_secs() - start).max(1e-9);
            t.results.push((bytes_per_op * t.reps) as f64 / secs / 1e9);
        }
    }
    timers.iter().map(|t| stats(&t.results)).collect()
}

/// [`race`] over the contenders that are there (`Some`); the others get `None`, in order.
fn race_some(
    opts: &BenchParityOptions,
    bytes_per_op: usize,
    ops: &mut [Option<&mut dyn FnMut(usize)>],
) -> Vec<Option<Gbps>> {
    let there: Vec<bool> = ops.iter().map(Option::is_some).collect();
    let mut present: Vec<&mut dyn FnMut(usize)> = Vec::new();
    for f in ops.iter_mut().flatten() {
        present.push(&mut **f);
    }
    let mut results = race(opts, bytes_per_op, &mut present).into_iter();
    there
        .iter()
        .map(|&t| if t { results.next() } else { None })
        .collect()
}

/// The contenders of a row that always run, in order: ours, the peer, memcpy.
fn always(g: &[Option<Gbps>], at: usize) -> Gbps {
    g.get(at).copied().flatten().expect("contender timed")
}

// ---------------------------------------------------------------------------------------------
// The rows.

/// (label, stripes) of each working set: one stripe, then `large` and `dram` bytes of stripes
/// (`dram` only if given).
fn working_sets(
    opts: &BenchParityOptions,
    stripe_bytes: usize,
    dram: bool,
) -> Vec<(String, usize)> {
    let mut v = vec![("l2".to_string(), 1)];
    let large = [opts.large_working_set_bytes, opts.dram_working_set_bytes];
    for bytes in large.into_iter().take(if dram { 2 } else { 1 }) {
        if bytes > 0 {
            v.push((kib(bytes), (bytes / stripe_bytes).max(1)));
        }
    }
    v
}

/// Writes XOR of the `data` strips into `p` and `q`: the memory traffic of P+Q generation without
/// its arithmetic (the traffic bound). `nt`: non-temporal stores. Strips: equal lengths, a
/// multiple of 64 bytes, 64-byte aligned outputs when `nt`.
fn traffic_only(data: &[&[u8]], p: &mut [u8], q: &mut [u8], nt: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        let len = p.len();
        let aligned = |b: &[u8]| (b.as_ptr() as usize).is_multiple_of(64);
        assert!(len.is_multiple_of(64) && q.len() == len && data.iter().all(|d| d.len() == len));
        assert!(!nt || (aligned(p) && aligned(q)));
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F; the shapes were checked above.
            unsafe { traffic::avx512(data, p, q, nt) };
        } else {
            // SAFETY: SSE2 is part of x86-64; the shapes were checked above.
            unsafe { traffic::sse2(data, p, q, nt) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = nt;
        p.copy_from_slice(data[0]);
        q.copy_from_slice(data[0]);
    }
}

/// The loops of [`traffic_only`], four vectors per strip per step like the parity kernels.
// AVX-512 intrinsics need Rust 1.89, as raidcore-sim and raidcore do; raidcore-tests, which
// includes this file in its benches, declares the workspace's 1.88 but depends on both.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::incompatible_msrv)]
mod traffic {
    macro_rules! pass {
        ($name:ident, $feat:literal, $W:literal, $zero:ident, $load:ident, $xor:ident,
         $store:ident, $stream:ident) => {
            /// # Safety
            /// The CPU has the feature; strips of one length, a multiple of 64; outputs aligned
            /// to the vector width if `nt`.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $name(data: &[&[u8]], p: &mut [u8], q: &mut [u8], nt: bool) {
                use std::arch::x86_64::*;
                const U: usize = 256 / $W;
                let len = p.len();
                let mut o = 0;
                // 256 bytes per strip per step, then single vectors.
                while o < len {
                    let u = if len - o >= 256 { U } else { 1 };
                    let mut acc = [$zero(); U];
                    for d in data.iter().rev() {
                        let s = d.as_ptr();
                        if u == U {
                            for (k, a) in acc.iter_mut().enumerate() {
                                // SAFETY: o + (k + 1) * W <= o + 256 <= len = d.len().
                                *a = $xor(*a, unsafe { $load(s.add(o + k * $W).cast()) });
                            }
                        } else {
                            // SAFETY: o + W <= len = d.len().
                            acc[0] = $xor(acc[0], unsafe { $load(s.add(o).cast()) });
                        }
                    }
                    for out in [p.as_mut_ptr(), q.as_mut_ptr()] {
                        for (k, a) in acc.iter().take(u).enumerate() {
                            // SAFETY: o + (k + 1) * W <= len; aligned when streaming (checked
                            // by the caller).
                            unsafe {
                                if nt {
                                    $stream(out.add(o + k * $W).cast(), *a);
                                } else {
                                    $store(out.add(o + k * $W).cast(), *a);
                                }
                            }
                        }
                    }
                    o += u * $W;
                }
                _mm_sfence();
            }
        };
    }
    pass!(
        avx512,
        "avx512f",
        64,
        _mm512_setzero_si512,
        _mm512_loadu_si512,
        _mm512_xor_si512,
        _mm512_storeu_si512,
        _mm512_stream_si512
    );
    pass!(
        sse2,
        "sse2",
        16,
        _mm_setzero_si128,
        _mm_loadu_si128,
        _mm_xor_si128,
        _mm_storeu_si128,
        _mm_stream_si128
    );
}

fn split_stripe(stripe: &mut [u8], n: usize, len: usize) -> (Vec<&[u8]>, &mut [u8], &mut [u8]) {
    let (data, pq) = stripe.split_at_mut(n * len);
    let (p, q) = pq.split_at_mut(len);
    (data.chunks_exact(len).collect(), p, q)
}

/// An operation on (data strips, P, Q) of one stripe.
type StripeOp<'a> = dyn FnMut(&[&[u8]], &mut [u8], &mut [u8]) + 'a;

fn gen_row(
    opts: &BenchParityOptions,
    isal: Option<&Isal>,
    n: usize,
    len: usize,
    ws: (String, usize),
) -> BenchRow {
    let kernel = opts.kernel.unwrap_or_else(Kernel::selected);
    let (ws_name, stripes) = ws;
    let mut arena = Arena::new(n + 2, len, stripes, (n * 31 + len) as u64);
    let mut copy_dst = vec![0u8; n * len];
    let mut rs =
        reed_solomon_simd::ReedSolomonEncoder::new(n, 2, len).expect("reed-solomon-simd shape");

    // Cross-check once: ISA-L's P/Q equal ours; reed-solomon-simd runs.
    {
        let s = arena.stripe_mut(0);
        let (data, p, q) = split_stripe(s, n, len);
        parity::gen_pq_with(kernel, &data, p, q).expect("gen_pq");
        if let Some(isal) = isal {
            let (mut ip, mut iq) = (Aligned::new(len), Aligned::new(len));
            isal.pq_gen(&data, ip.as_mut(), iq.as_mut());
            assert!(
                ip.as_ref() == &*p && iq.as_ref() == &*q,
                "ISA-L pq_gen disagrees with raidcore"
            );
        }
    }

    let arena_cell = std::cell::RefCell::new(&mut arena);
    let with_stripe = |i: usize, f: &mut StripeOp<'_>| {
        let mut a = arena_cell.borrow_mut();
        let (data, p, q) = split_stripe(a.stripe_mut(i % stripes), n, len);
        f(&data, p, q);
    };
    let mut ours = |i: usize| {
        with_stripe(i, &mut |d, p, q| {
            parity::gen_pq_with(kernel, d, p, q).expect("gen_pq");
        });
    };
    let mut isal_op = |i: usize| {
        if let Some(isal) = isal {
            with_stripe(i, &mut |d, p, q| isal.pq_gen(d, p, q));
        }
    };
    let mut peer = |i: usize| {
        let a = arena_cell.borrow();
        let s = a.stripe(i % stripes);
        for d in s[..n * len].chunks_exact(len) {
            rs.add_original_shard(d).expect("add shard");
        }
        let r = rs.encode().expect("encode");
        std::hint::black_box(r.recovery(1).map(|x| x[0]));
    };
    let mut memcpy = |i: usize| {
        let a = arena_cell.borrow();
        copy_dst.copy_from_slice(&a.stripe(i % stripes)[..n * len]);
        std::hint::black_box(&copy_dst);
    };
    let mut bound_cached = |i: usize| with_stripe(i, &mut |d, p, q| traffic_only(d, p, q, false));
    let mut bound_streamed = |i: usize| with_stripe(i, &mut |d, p, q| traffic_only(d, p, q, true));
    let g = race_some(
        opts,
        n * len,
        &mut [
            Some(&mut ours),
            isal.map(|_| &mut isal_op as &mut dyn FnMut(usize)),
            Some(&mut peer),
            Some(&mut memcpy),
            Some(&mut bound_cached),
            Some(&mut bound_streamed),
        ],
    );
    let bound = [always(&g, 4), always(&g, 5)]
        .into_iter()
        .max_by(|a, b| a.median.total_cmp(&b.median));
    BenchRow {
        op: "gen",
        data_strips: n,
        strip_bytes: len,
        working_set: ws_name,
        path: kernel.name(),
        working_set_bytes: stripes * (n + 2) * len,
        ours: always(&g, 0),
        isal: g[1],
        peer: always(&g, 2),
        peer_name: "reed-solomon-simd",
        memcpy: always(&g, 3),
        bound,
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "one table row per recovery case and contender; to split with the bench harness"
)]
fn recover_row(
    opts: &BenchParityOptions,
    isal: Option<&Isal>,
    n: usize,
    len: usize,
    ws: (String, usize),
) -> BenchRow {
    let kernel = opts.kernel.unwrap_or_else(Kernel::selected);
    let (ws_name, stripes) = ws;
    // Lost: the first data strip and the one in the middle.
    let (x, y) = (0, n / 2);
    let mut arena = Arena::new(n + 2, len, stripes, (n * 77 + len) as u64);
    let mut rs_recovery: Vec<Vec<u8>> = Vec::with_capacity(stripes);
    let mut rs_enc =
        reed_solomon_simd::ReedSolomonEncoder::new(n, 2, len).expect("reed-solomon-simd shape");
    for s in 0..stripes {
        let stripe = arena.stripe_mut(s);
        let (data, p, q) = split_stripe(stripe, n, len);
        parity::gen_pq_with(kernel, &data, p, q).expect("gen_pq");
        for d in &data {
            rs_enc.add_original_shard(d).expect("add shard");
        }
        let r = rs_enc.encode().expect("encode");
        let mut both = r.recovery(0).expect("recovery 0").to_vec();
        both.extend_from_slice(r.recovery(1).expect("recovery 1"));
        rs_recovery.push(both);
    }
    let mut rs_dec =
        reed_solomon_simd::ReedSolomonDecoder::new(n, 2, len).expect("reed-solomon-simd shape");
    let mut isal_rec = isal.map(|i| i.recovery(n, x, y));
    let (mut sx, mut sy) = (Aligned::new(len), Aligned::new(len));
    let mut copy_dst = vec![0u8; n * len];

    // Cross-check once.
    {
        let golden: Vec<u8> = arena.stripe(0).to_vec();
        let s = arena.stripe_mut(0);
        s[x * len..(x + 1) * len].fill(0);
        s[y * len..(y + 1) * len].fill(0);
        let mut cols: Vec<&mut [u8]> = s.chunks_exact_mut(len).collect();
        parity::reconstruct_with(kernel, &mut cols, Scheme::PQ, &[x, y]).expect("reconstruct");
        assert!(
            arena.stripe(0) == golden.as_slice(),
            "raidcore recovery wrong"
        );
        if let (Some(isal), Some(rec)) = (isal, isal_rec.as_ref()) {
            let survivors: Vec<&[u8]> = golden
                .chunks_exact(len)
                .enumerate()
                .filter(|(i, _)| *i != x && *i != y)
                .map(|(_, c)| c)
                .collect();
            isal.recover(rec, &survivors, sx.as_mut(), sy.as_mut());
            assert!(
                sx.as_ref() == &golden[x * len..(x + 1) * len],
                "ISA-L recovery wrong (x)"
            );
            assert!(
                sy.as_ref() == &golden[y * len..(y + 1) * len],
                "ISA-L recovery wrong (y)"
            );
        }
        for (i, d) in golden[..n * len].chunks_exact(len).enumerate() {
            if i != x && i != y {
                rs_dec.add_original_shard(i, d).expect("add original");
            }
        }
        rs_dec
            .add_recovery_shard(0, &rs_recovery[0][..len])
            .expect("add recovery");
        rs_dec
            .add_recovery_shard(1, &rs_recovery[0][len..])
            .expect("add recovery");
        let r = rs_dec.decode().expect("decode");
        assert!(
            r.restored_original(x) == Some(&golden[x * len..(x + 1) * len]),
            "reed-solomon-simd recovery wrong"
        );
    }

    let arena_cell = std::cell::RefCell::new(&mut arena);
    let mut ours = |i: usize| {
        let mut a = arena_cell.borrow_mut();
        let s = a.stripe_mut(i % stripes);
        let mut cols: Vec<&mut [u8]> = s.chunks_exact_mut(len).collect();
        parity::reconstruct_with(kernel, &mut cols, Scheme::PQ, &[x, y]).expect("reconstruct");
    };
    let mut isal_op = |i: usize| {
        if let (Some(isal), Some(rec)) = (isal, isal_rec.as_mut()) {
            let mut a = arena_cell.borrow_mut();
            let s = a.stripe_mut(i % stripes);
            let mut cols: Vec<&mut [u8]> = s.chunks_exact_mut(len).collect();
            let dy = std::mem::take(&mut cols[y]);
            let dx = std::mem::take(&mut cols[x]);
            let survivors: Vec<&[u8]> = cols
                .iter()
                .filter(|c| !c.is_empty())
                .map(|c| &**c)
                .collect();
            isal.recover_in_place(rec, &survivors, dx, dy);
        }
    };
    let mut peer = |i: usize| {
        let a = arena_cell.borrow();
        let s = a.stripe(i % stripes);
        for (k, d) in s[..n * len].chunks_exact(len).enumerate() {
            if k != x && k != y {
                rs_dec.add_original_shard(k, d).expect("add original");
            }
        }
        let rec = &rs_recovery[i % stripes];
        rs_dec
            .add_recovery_shard(0, &rec[..len])
            .expect("add recovery");
        rs_dec
            .add_recovery_shard(1, &rec[len..])
            .expect("add recovery");
        let r = rs_dec.decode().expect("decode");
        std::hint::black_box(r.restored_original(x).map(|d| d[0]));
    };
    let mut memcpy = |i: usize| {
        let a = arena_cell.borrow();
        copy_dst.copy_from_slice(&a.stripe(i % stripes)[..n * len]);
        std::hint::black_box(&copy_dst);
    };
    let g = race_some(
        opts,
        n * len,
        &mut [
            Some(&mut ours),
            isal.map(|_| &mut isal_op as &mut dyn FnMut(usize)),
            Some(&mut peer),
            Some(&mut memcpy),
        ],
    );
    BenchRow {
        op: "recover2",
        data_strips: n,
        strip_bytes: len,
        working_set: ws_name,
        path: kernel.name(),
        working_set_bytes: stripes * (n + 2) * len,
        ours: always(&g, 0),
        isal: g[1],
        peer: always(&g, 2),
        peer_name: "reed-solomon-simd",
        memcpy: always(&g, 3),
        bound: None,
    }
}

fn crc_row(
    opts: &BenchParityOptions,
    isal: Option<&Isal>,
    len: usize,
    ws: (String, usize),
    path: Crc32cPath,
) -> BenchRow {
    let (ws_name, buffers) = ws;
    let arena = Arena::new(1, len, buffers, len as u64);
    let mut copy_dst = vec![0u8; len];
    {
        let b = arena.stripe(0);
        let want = checksum::crc32c_portable(b);
        assert_eq!(
            checksum::crc32c_append_with(path, 0, b),
            want,
            "{path:?} CRC-32C disagrees with the portable one"
        );
        assert_eq!(crc32c::crc32c(b), want, "crc32c crate disagrees");
        if let Some(isal) = isal {
            assert_eq!(isal.crc32c(b), want, "ISA-L crc32_iscsi disagrees");
        }
    }
    let mut ours = |i: usize| {
        std::hint::black_box(checksum::crc32c_append_with(
            path,
            0,
            arena.stripe(i % buffers),
        ));
    };
    let mut isal_op = |i: usize| {
        if let Some(isal) = isal {
            std::hint::black_box(isal.crc32c(arena.stripe(i % buffers)));
        }
    };
    let mut peer = |i: usize| {
        std::hint::black_box(crc32c::crc32c(arena.stripe(i % buffers)));
    };
    let mut memcpy = |i: usize| {
        copy_dst.copy_from_slice(arena.stripe(i % buffers));
        std::hint::black_box(&copy_dst);
    };
    let g = race_some(
        opts,
        len,
        &mut [
            Some(&mut ours),
            isal.map(|_| &mut isal_op as &mut dyn FnMut(usize)),
            Some(&mut peer),
            Some(&mut memcpy),
        ],
    );
    BenchRow {
        op: "crc32c",
        data_strips: 1,
        strip_bytes: len,
        working_set: ws_name,
        path: path.name(),
        working_set_bytes: buffers * len,
        ours: always(&g, 0),
        isal: g[1],
        peer: always(&g, 2),
        peer_name: "crc32c crate",
        memcpy: always(&g, 3),
        bound: None,
    }
}

/// The CRC-32C paths to time: the portable one with the portable parity kernel (what a
/// Cortex-M runs), otherwise every other path this CPU has.
fn crc_paths(opts: &BenchParityOptions) -> Vec<Crc32cPath> {
    if opts.kernel == Some(Kernel::PORTABLE) {
        return vec![Crc32cPath::PORTABLE];
    }
    let hw: Vec<Crc32cPath> = Crc32cPath::supported()
        .filter(|p| *p != Crc32cPath::PORTABLE)
        .collect();
    if hw.is_empty() {
        vec![Crc32cPath::PORTABLE]
    } else {
        hw
    }
}

/// A 64-byte-aligned scratch strip.
struct Aligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let buf = vec![0u8; len + 64];
        let start = buf.as_ptr().align_offset(64);
        Aligned { buf, start, len }
    }
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// Runs the benchmark. `progress` is called with each finished row (for printing as it goes).
///
/// # Panics
/// If a contender's output disagrees with raidcore's (the comparison would be meaningless), or a
/// strip length is not a multiple of 64.
pub fn run(opts: &BenchParityOptions, mut progress: impl FnMut(&BenchRow)) -> Vec<BenchRow> {
    assert!(
        opts.strip_bytes.iter().all(|l| *l > 0 && l % 64 == 0),
        "strip lengths must be multiples of 64"
    );
    let isal = Isal::load().ok();
    let mut rows = Vec::new();
    let mut push = |r: BenchRow| {
        progress(&r);
        rows.push(r);
    };
    for &len in opts
        .strip_bytes
        .iter()
        .filter(|_| opts.ops.contains(&"gen"))
    {
        for &n in &opts.data_strips {
            for ws in working_sets(opts, (n + 2) * len, true) {
                push(gen_row(opts, isal.as_ref(), n, len, ws));
            }
        }
    }
    for &len in opts
        .strip_bytes
        .iter()
        .filter(|_| opts.ops.contains(&"recover2"))
    {
        for &n in &opts.data_strips {
            for ws in working_sets(opts, (n + 2) * len, false) {
                push(recover_row(opts, isal.as_ref(), n, len, ws));
            }
        }
    }
    for &len in opts
        .strip_bytes
        .iter()
        .filter(|_| opts.ops.contains(&"crc32c"))
    {
        for ws in working_sets(opts, len, false) {
            for &path in &crc_paths(opts) {
                push(crc_row(opts, isal.as_ref(), len, ws.clone(), path));
            }
        }
    }
    rows
}

/// Whether ISA-L could be loaded (for the report header).
#[must_use]
pub fn isal_available() -> bool {
    Isal::load().is_ok()
}

fn shape(r: &BenchRow) -> String {
    if r.op == "crc32c" {
        r.path.to_string()
    } else {
        format!("{}+2", r.data_strips)
    }
}

fn kib(b: usize) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{}GiB", b >> 30)
    } else if b >= 1 << 20 {
        format!("{}MiB", b >> 20)
    } else {
        format!("{}KiB", b >> 10)
    }
}

fn cell(g: Option<Gbps>) -> String {
    g.map_or_else(
        || "n/a".to_string(),
        |g| format!("{:.2}/{:.2}/{:.2}", g.min, g.median, g.max),
    )
}

/// The result as a text table (GB/s of data strips, min/median/max; ratio of medians).
#[must_use]
pub fn format_table(rows: &[BenchRow], kernel: Kernel) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "raidcore parity kernel: {} | GB/s of data strips processed, min/median/max over samples (thread CPU time, interleaved samples)",
        kernel.name()
    );
    let _ = writeln!(
        s,
        "{:<9} {:>10} {:>6} {:>6} {:>17} {:>17} {:>17} {:>17} {:>17} {:>8} {:>8}",
        "op",
        "shape",
        "strip",
        "ws",
        "raidcore",
        "ISA-L",
        "peer",
        "memcpy",
        "bound",
        "vs ISA-L",
        "vs bound"
    );
    let ratio = |x: Option<f64>| x.map_or_else(|| "n/a".to_string(), |x| format!("{x:.2}x"));
    for r in rows {
        let _ = writeln!(
            s,
            "{:<9} {:>10} {:>6} {:>6} {:>17} {:>17} {:>17} {:>17} {:>17} {:>8} {:>8}",
            r.op,
            shape(r),
            kib(r.strip_bytes),
            r.working_set,
            cell(Some(r.ours)),
            cell(r.isal),
            cell(Some(r.peer)),
            cell(Some(r.memcpy)),
            cell(r.bound),
            ratio(r.ratio_to_isal()),
            ratio(r.ratio_to_bound()),
        );
    }
    let _ = writeln!(
        s,
        "peer: reed-solomon-simd (gen: encode 2 recovery shards; recover2: decode) | crc32c: the crc32c crate (shape: raidcore's CRC-32C path)\n\
         bound (gen): the same reads and writes with one XOR per vector, no field arithmetic (faster of normal and non-temporal stores)"
    );
    s
}

/// The result as a JSON array of rows.
#[must_use]
pub fn to_json(rows: &[BenchRow], kernel: Kernel) -> serde_json::Value {
    let g = |g: Gbps| serde_json::json!({"min": g.min, "median": g.median, "max": g.max});
    serde_json::Value::Array(
        rows.iter()
            .map(|r| {
                serde_json::json!({
                    "op": r.op,
                    "data_strips": r.data_strips,
                    "strip_bytes": r.strip_bytes,
                    "working_set": r.working_set,
                    "working_set_bytes": r.working_set_bytes,
                    "kernel": r.path,
                    "parity_kernel": kernel.name(),
                    "ours_gbps": r.ours.median,
                    "isal_gbps": r.isal.map(|i| i.median),
                    "memcpy_gbps": r.memcpy.median,
                    "peer": r.peer_name,
                    "peer_gbps": r.peer.median,
                    "ratio_to_isal": r.ratio_to_isal(),
                    "ours": g(r.ours),
                    "isal": r.isal.map(g),
                    "peer_detail": g(r.peer),
                    "memcpy": g(r.memcpy),
                    "bound": r.bound.map(g),
                    "ratio_to_bound": r.ratio_to_bound(),
                    "method": "thread CPU time, interleaved samples, median",
                })
            })
            .collect(),
    )
}
