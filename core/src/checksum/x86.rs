//! x86-64 CRC-32C paths: the SSE4.2 `crc32` instruction on three interleaved streams, and
//! folding with VPCLMULQDQ for buffers of a few hundred bytes or more, on 512-bit zmm registers
//! (AVX-512) or on 256-bit ymm registers alongside three `crc32` streams (AVX2, for CPUs with
//! VPCLMULQDQ but without AVX-512: AMD Zen 3, Intel Alder Lake).
//!
//! ## Folding
//! Carry-less multiplication folds a 128-bit block of the message forward by D bits: the block
//! is a polynomial X(x) of degree < 128 that still has D more message bits after it, and
//! X(x)·x^D ≡ H(x)·(x^(D+64) mod P) ⊕ L(x)·(x^D mod P) (mod P), with H and L the block's high-
//! and low-degree 64-bit halves. Each product is one `pclmulqdq` of a half with a 32-bit
//! constant, and the 96-bit result is XORed into the block D bits further on, so the CRC of
//! the whole message equals that of the last block. VPCLMULQDQ does this on every 128-bit lane
//! of a wide register at once:
//! - zmm ([`update_folded`]): four lanes; four registers fold 256 bytes per step (D = 2048).
//! - ymm ([`update_folded_avx2`]): two lanes; four registers fold 128 bytes per step.
//!
//! The registers are then folded into one, its lanes into one block, the remaining whole
//! 16-byte blocks into that, and the last block and the bytes past it go through the `crc32`
//! instruction (which applies the final multiplication by x^32 mod P). Source: V. Gopal et al.,
//! "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009).
//! The constants are computed at compile time.
//!
//! ## The AVX2 path: folding and `crc32` together
//! Without AVX-512 a VPCLMULQDQ folds only 32 bytes, and on AMD Zen 3 folding alone measured
//! no faster than the three-stream `crc32` path (both about 26 GB/s on 64 KiB, each at its
//! unit's throughput limit). The two run on different units (vector and integer), so
//! [`update_folded_avx2`] does both at once, on disjoint parts of the buffer:
//! `[fold region][s1][s2][s3][tail]`. Each step of the main loop folds one 128-byte group of
//! the fold region and runs the three `crc32` streams s1, s2, s3 over [`STREAM_WORDS`] words
//! each. The streams start from a zero register and are merged at the end by the linearity of
//! CRC, crc(A‖B) = shift_|B|(crc(A)) ⊕ crc₀(B): the fold region's last block is folded forward
//! over the three streams (3S bytes, one fold), each of the first two stream registers is
//! multiplied by x^(8·shift) mod P with one `pclmulqdq` and XORed into it, the block is
//! reduced, and the third register is XORed in. The constants for every stream length are a
//! table built at compile time ([`MERGE`]).
//!
//! Bit order: CRC-32C is reflected, so message bit i (bit i mod 8 of byte i / 8) has the highest
//! degree first, and a 64-bit half loaded little-endian holds x^(63-i) at bit i. A constant c(x)
//! of degree < 32 is stored that way too (x^d at bit 63 - d); the product of two such halves,
//! read as a 128-bit block in the same order, is their product times x, which the exponents
//! below account for.

use core::arch::x86_64::{
    __m128i, __m256i, __m512i, _MM_HINT_T0, _mm_clmulepi64_si128, _mm_crc32_u8, _mm_crc32_u64,
    _mm_cvtsi32_si128, _mm_cvtsi64_si128, _mm_cvtsi128_si64, _mm_extract_epi64, _mm_loadu_si128,
    _mm_prefetch, _mm_set_epi64x, _mm_xor_si128, _mm256_broadcastsi128_si256,
    _mm256_castsi256_si128, _mm256_clmulepi64_epi128, _mm256_extracti128_si256, _mm256_loadu_si256,
    _mm256_setzero_si256, _mm256_xor_si256, _mm256_zextsi128_si256, _mm512_broadcast_i32x4,
    _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32, _mm512_loadu_si512, _mm512_set_epi64,
    _mm512_setzero_si512, _mm512_ternarylogic_epi64, _mm512_xor_si512, _mm512_zextsi128_si512,
};

/// Stream lengths of the three-way interleave, in bytes (whole cache lines), longest first.
/// 21824 makes a 64 KiB buffer three streams and a one-line tail, 1344 does the same for
/// 4 KiB, 128 for 512 bytes; 8192 serves the sizes in between.
const STREAM_BYTES: [usize; 4] = [21824, 8192, 1344, 128];

/// How far ahead of each stream to prefetch, in bytes: three streams far apart defeat the
/// hardware prefetcher on buffers that are not in cache.
const PREFETCH_BYTES: usize = 1024;

static SHIFT: [[[u32; 256]; 4]; 4] = [
    super::zeros_table(STREAM_BYTES[0]),
    super::zeros_table(STREAM_BYTES[1]),
    super::zeros_table(STREAM_BYTES[2]),
    super::zeros_table(STREAM_BYTES[3]),
];

#[cfg(any(feature = "std", test))]
macro_rules! detected {
    ($($f:tt),+) => {
        $(std::is_x86_feature_detected!($f))&&+
    };
}

#[cfg(not(any(feature = "std", test)))]
macro_rules! detected {
    ($($f:tt),+) => {
        false
    };
}

/// Whether this CPU has the `crc32` instruction (compile-time target, or run-time detection with
/// feature `std`).
pub(super) fn has_sse42() -> bool {
    cfg!(target_feature = "sse4.2") || detected!("sse4.2")
}

/// Whether this CPU runs the zmm folding path: AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE4.2.
pub(super) fn has_vpclmulqdq() -> bool {
    cfg!(all(
        target_feature = "avx512f",
        target_feature = "vpclmulqdq",
        target_feature = "pclmulqdq",
        target_feature = "sse4.2"
    )) || detected!("avx512f", "vpclmulqdq", "pclmulqdq", "sse4.2")
}

/// Whether this CPU runs the ymm folding path: AVX2, VPCLMULQDQ, PCLMULQDQ and SSE4.2.
pub(super) fn has_vpclmulqdq_avx2() -> bool {
    cfg!(all(
        target_feature = "avx2",
        target_feature = "vpclmulqdq",
        target_feature = "pclmulqdq",
        target_feature = "sse4.2"
    )) || detected!("avx2", "vpclmulqdq", "pclmulqdq", "sse4.2")
}

#[inline]
fn shift(t: &[[u32; 256]; 4], crc: u32) -> u32 {
    let [b0, b1, b2, b3] = crc.to_le_bytes();
    // u8 indices into 256-entry tables.
    t[0].get(b0 as usize).copied().unwrap_or(0)
        ^ t[1].get(b1 as usize).copied().unwrap_or(0)
        ^ t[2].get(b2 as usize).copied().unwrap_or(0)
        ^ t[3].get(b3 as usize).copied().unwrap_or(0)
}

/// Updates the raw (un-inverted) register `crc` with `data`.
///
/// # Safety
/// The CPU must have SSE4.2.
#[target_feature(enable = "sse4.2")]
pub(super) unsafe fn update(crc: u32, mut data: &[u8]) -> u32 {
    let mut crc = u64::from(crc);
    for (len, table) in STREAM_BYTES.iter().zip(SHIFT.iter()) {
        while data.len() >= 3 * len {
            let (a, rest) = data.split_at(*len);
            let (b, rest) = rest.split_at(*len);
            let (c, rest) = rest.split_at(*len);
            let (la, _) = a.as_chunks::<64>();
            let (lb, _) = b.as_chunks::<64>();
            let (lc, _) = c.as_chunks::<64>();
            let (mut cb, mut cc) = (0u64, 0u64);
            for ((la, lb), lc) in la.iter().zip(lb).zip(lc) {
                // A prefetch is only a hint: an address past the buffer does not fault.
                _mm_prefetch::<_MM_HINT_T0>(la.as_ptr().wrapping_add(PREFETCH_BYTES).cast());
                _mm_prefetch::<_MM_HINT_T0>(lb.as_ptr().wrapping_add(PREFETCH_BYTES).cast());
                _mm_prefetch::<_MM_HINT_T0>(lc.as_ptr().wrapping_add(PREFETCH_BYTES).cast());
                let (wa, _) = la.as_chunks::<8>();
                let (wb, _) = lb.as_chunks::<8>();
                let (wc, _) = lc.as_chunks::<8>();
                for ((x, y), z) in wa.iter().zip(wb).zip(wc) {
                    crc = _mm_crc32_u64(crc, u64::from_le_bytes(*x));
                    cb = _mm_crc32_u64(cb, u64::from_le_bytes(*y));
                    cc = _mm_crc32_u64(cc, u64::from_le_bytes(*z));
                }
            }
            let ab = shift(table, crc as u32) ^ cb as u32;
            crc = u64::from(shift(table, ab) ^ cc as u32);
            data = rest;
        }
    }
    let (words, tail) = data.as_chunks::<8>();
    for w in words {
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(*w));
    }
    let mut crc = crc as u32;
    for &b in tail {
        crc = _mm_crc32_u8(crc, b);
    }
    crc
}

/// The reflected polynomial of CRC-32C without its x^32 term, unreflected: 0x1EDC6F41.
const POLY_NORMAL: u32 = 0x1edc_6f41;

/// a(x)·b(x) mod P, both with x^d at bit d (Horner's rule from b's highest bit).
const fn mul_mod(a: u32, b: u32) -> u32 {
    let mut r: u32 = 0;
    let mut i = 32;
    while i > 0 {
        i -= 1;
        let carry = r & 0x8000_0000 != 0;
        r <<= 1;
        if carry {
            r ^= POLY_NORMAL;
        }
        if (b >> i) & 1 != 0 {
            r ^= a;
        }
    }
    r
}

/// x^e mod P as a polynomial with x^d at bit d (square and multiply).
const fn xpow_mod(mut e: u32) -> u32 {
    let (mut r, mut sq) = (1, 2);
    while e != 0 {
        if e & 1 != 0 {
            r = mul_mod(r, sq);
        }
        sq = mul_mod(sq, sq);
        e >>= 1;
    }
    r
}

/// x^e mod P in the bit order of a reflected 64-bit half (x^d at bit 63 - d).
const fn reflected(e: u32) -> u64 {
    (xpow_mod(e).reverse_bits() as u64) << 32
}

/// The constants that fold a 128-bit block forward by `bits`: for its low (high-degree) half and
/// for its high (low-degree) half. The products carry an extra factor x, hence the -1.
const fn fold_constants(bits: u32) -> (u64, u64) {
    (reflected(bits + 64 - 1), reflected(bits - 1))
}

/// The constant that moves a 32-bit register `bytes` bytes on (appends that many zero bytes):
/// the register in the low half, times this, is a block whose reduction ([`reduce`]) is the
/// register shifted. Register (×x^32 in the half), product (×x) and reduction (×x^32) add 65.
const fn shift_constant(bytes: u32) -> u64 {
    reflected(8 * bytes - 65)
}

/// zmm registers the AVX-512 main loop folds in parallel, 64 bytes each: one step folds
/// ACC × 64 bytes forward by as many bits, enough independent chains to cover the
/// multiplications' latency.
const ACC: usize = 4;

/// ymm registers the AVX2 path folds in parallel, 32 bytes each: one group of ACC_YMM × 32 =
/// 128 bytes per step. Four chains cover the multiplications' latency; eight were no faster on
/// AMD Zen 3 and cost more to fold together at the end.
const ACC_YMM: usize = 4;

/// How far ahead of the bytes being folded to prefetch: several calls on consecutive 4 KiB
/// blocks from memory otherwise wait for each block's first lines.
const FOLD_PREFETCH_BYTES: usize = 1024;

/// `t[k - 1]` folds forward by k blocks of `block_bits` bits each, for k in 1..=N.
// Evaluated at compile time: an index error would fail the build.
#[allow(clippy::indexing_slicing)]
const fn fold_table<const N: usize>(block_bits: u32) -> [(u64, u64); N] {
    let mut t = [(0, 0); N];
    let mut k = 0;
    while k < N {
        t[k] = fold_constants(block_bits * (k as u32 + 1));
        k += 1;
    }
    t
}

/// `FOLD_BLOCKS[k - 1]` folds forward by k 64-byte blocks (k · 512 bits), for k in 1..=ACC.
const FOLD_BLOCKS: [(u64, u64); ACC] = fold_table(512);
/// `FOLD_YMM_BLOCKS[k - 1]` folds forward by k 32-byte blocks (k · 256 bits), for k in
/// 1..=ACC_YMM.
const FOLD_YMM_BLOCKS: [(u64, u64); ACC_YMM] = fold_table(256);
const FOLD_384: (u64, u64) = fold_constants(384);
const FOLD_256: (u64, u64) = fold_constants(256);
const FOLD_128: (u64, u64) = fold_constants(128);

#[inline]
#[target_feature(enable = "pclmulqdq")]
fn pair(k: (u64, u64)) -> __m128i {
    _mm_set_epi64x(k.1.cast_signed(), k.0.cast_signed())
}

#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn splat(k: (u64, u64)) -> __m512i {
    _mm512_broadcast_i32x4(pair(k))
}

#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
fn splat_ymm(k: (u64, u64)) -> __m256i {
    _mm256_broadcastsi128_si256(pair(k))
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load64(b: &[u8; 64]) -> __m512i {
    // SAFETY: `b` is 64 readable bytes; the unaligned load has no alignment need.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx")]
fn load32(b: &[u8; 32]) -> __m256i {
    // SAFETY: `b` is 32 readable bytes; the unaligned load has no alignment need.
    unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "sse2")]
fn load16(b: &[u8; 16]) -> __m128i {
    // SAFETY: `b` is 16 readable bytes; the unaligned load has no alignment need.
    unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
}

/// Hints the cache lines `FOLD_PREFETCH_BYTES` past the `bytes` bytes at `at`.
#[inline]
#[target_feature(enable = "sse")]
fn prefetch_ahead(at: *const u8, bytes: usize) {
    let ahead = at.wrapping_add(FOLD_PREFETCH_BYTES).cast::<i8>();
    for line in (0..bytes).step_by(64) {
        // A prefetch is only a hint: an address past the buffer does not fault.
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line));
    }
}

/// Each 128-bit lane of `x` folded forward by the distance `k` was made for, XORed into `next`.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold512(x: __m512i, k: __m512i, next: __m512i) -> __m512i {
    let a = _mm512_clmulepi64_epi128::<0x00>(x, k);
    let b = _mm512_clmulepi64_epi128::<0x11>(x, k);
    _mm512_ternarylogic_epi64::<0x96>(a, b, next)
}

/// [`fold512`] on the two lanes of a ymm register.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
fn fold256(x: __m256i, k: __m256i, next: __m256i) -> __m256i {
    let a = _mm256_clmulepi64_epi128::<0x00>(x, k);
    let b = _mm256_clmulepi64_epi128::<0x11>(x, k);
    _mm256_xor_si256(_mm256_xor_si256(a, b), next)
}

#[inline]
#[target_feature(enable = "pclmulqdq")]
fn fold128(x: __m128i, k: __m128i, next: __m128i) -> __m128i {
    let a = _mm_clmulepi64_si128::<0x00>(x, k);
    let b = _mm_clmulepi64_si128::<0x11>(x, k);
    _mm_xor_si128(_mm_xor_si128(a, b), next)
}

/// ACC consecutive 64-byte blocks folded into one register (at the last one's position).
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold_all(acc: &[__m512i; ACC]) -> __m512i {
    let (last, earlier) = acc.split_last().unwrap_or((&acc[0], &[]));
    let mut x = *last;
    // Block i is ACC - 1 - i blocks before the last.
    for (a, k) in earlier.iter().zip(FOLD_BLOCKS.iter().rev().skip(1)) {
        x = fold512(*a, splat(*k), x);
    }
    x
}

/// The four 128-bit lanes of `x` folded into the last one.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold_lanes(x: __m512i) -> __m128i {
    let (a, b, c) = (FOLD_384, FOLD_256, FOLD_128);
    // Lane 3 is last and stays: its constants are zero and it is XORed back in below.
    let k = _mm512_set_epi64(
        0,
        0,
        c.1.cast_signed(),
        c.0.cast_signed(),
        b.1.cast_signed(),
        b.0.cast_signed(),
        a.1.cast_signed(),
        a.0.cast_signed(),
    );
    let last = _mm512_zextsi128_si512(_mm512_extracti32x4_epi32::<3>(x));
    let t = fold512(x, k, last);
    let l01 = _mm_xor_si128(
        _mm512_extracti32x4_epi32::<0>(t),
        _mm512_extracti32x4_epi32::<1>(t),
    );
    let l23 = _mm_xor_si128(
        _mm512_extracti32x4_epi32::<2>(t),
        _mm512_extracti32x4_epi32::<3>(t),
    );
    _mm_xor_si128(l01, l23)
}

/// The whole 16-byte blocks of `pieces` folded, in order, after the block `x`.
#[inline]
#[target_feature(enable = "pclmulqdq")]
fn fold_pieces(mut x: __m128i, pieces: &[[u8; 16]]) -> __m128i {
    let k = pair(FOLD_128);
    for b in pieces {
        x = fold128(x, k, load16(b));
    }
    x
}

/// The raw register of a message whose last 16 bytes are the block `x` (all earlier bytes
/// already folded into it): the CRC of the block from a zero register, X(x)·x^32 mod P.
#[inline]
#[target_feature(enable = "sse4.2")]
fn reduce(x: __m128i) -> u32 {
    let lo = _mm_cvtsi128_si64(x).cast_unsigned();
    let hi = _mm_extract_epi64::<1>(x).cast_unsigned();
    _mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32
}

/// Updates the raw (un-inverted) register `crc` with `data` by folding on zmm registers.
/// Buffers shorter than ACC × 64 = 256 bytes take [`update`].
///
/// # Safety
/// The CPU must have AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE4.2 ([`has_vpclmulqdq`]).
#[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
pub(super) unsafe fn update_folded(crc: u32, data: &[u8]) -> u32 {
    let (blocks, rest) = data.as_chunks::<64>();
    let Some((first, blocks)) = blocks.split_first_chunk::<ACC>() else {
        // SAFETY: the CPU has SSE4.2 (the caller's contract).
        return unsafe { update(crc, data) };
    };
    let mut acc = [_mm512_setzero_si512(); ACC];
    for (a, b) in acc.iter_mut().zip(first) {
        *a = load64(b);
    }
    // The register enters as an XOR into the first 32 message bits.
    acc[0] = _mm512_xor_si512(
        acc[0],
        _mm512_zextsi128_si512(_mm_cvtsi32_si128(crc.cast_signed())),
    );
    let (step, one) = (splat(FOLD_BLOCKS[ACC - 1]), splat(FOLD_BLOCKS[0]));
    let (groups, singles) = blocks.as_chunks::<ACC>();
    for g in groups {
        prefetch_ahead(g.as_ptr().cast(), ACC * 64);
        for (a, b) in acc.iter_mut().zip(g) {
            *a = fold512(*a, step, load64(b));
        }
    }
    let mut x = fold_all(&acc);
    for b in singles {
        x = fold512(x, one, load64(b));
    }
    let (pieces, tail) = rest.as_chunks::<16>();
    let raw = reduce(fold_pieces(fold_lanes(x), pieces));
    // SAFETY: the CPU has SSE4.2 (the caller's contract).
    unsafe { update(raw, tail) }
}

// The AVX2 path: ymm folding interleaved with three `crc32` streams.

/// 8-byte words each `crc32` stream of the AVX2 path takes per step: per step the vector
/// units fold one group (128 bytes) while the integer units run 3 × STREAM_WORDS `crc32`
/// instructions (168 bytes), so both kinds run near their throughput limits. Measured on AMD
/// Zen 3 (5 to 8 words per stream were within a few percent).
const STREAM_WORDS: usize = 7;

/// Bytes each stream takes per step.
const STREAM_STEP_BYTES: usize = 8 * STREAM_WORDS;

/// Bytes one step consumes: a fold group and a step of each of the three streams.
const STEP_BYTES: usize = 32 * ACC_YMM + 3 * STREAM_STEP_BYTES;

/// Shorter buffers take [`update`]: below this the fixed cost of folding the registers
/// together and merging the streams outweighs what they gain (measured on AMD Zen 3: this path
/// and [`update`] tie at about 550 bytes; a CPU with faster ymm multiplication may gain below).
const FOLD_MIN_BYTES: usize = 576;

/// Most steps with streams in one pass ([`PASS_MAX_BYTES`]). Bounds [`MERGE`]. Long enough
/// that a 64 KiB buffer is one pass: each pass starts four regions the hardware prefetcher must
/// pick up, and with passes of a quarter of that, buffers read from memory were slower than on
/// the `sse4.2` path.
const STEPS_MAX: usize = 256;

/// Longest pass, in bytes (about 74 KiB): STEPS_MAX steps after the first group.
const PASS_MAX_BYTES: usize = STEPS_MAX * STEP_BYTES + 32 * ACC_YMM;

/// `MERGE[n]`, for n ≥ 1 steps (three streams of S = n × STREAM_STEP_BYTES bytes): the fold
/// constants that move the fold region's last block over the streams (3S bytes), and the
/// shift constants of the first and second streams' registers (2S and S bytes). 257 × 32 bytes
/// (8 KiB) of read-only data, of which a call reads one entry; entry 0 is unused.
// Evaluated at compile time: an index error would fail the build.
#[allow(clippy::indexing_slicing)]
static MERGE: [[u64; 4]; STEPS_MAX + 1] = {
    let mut t = [[0; 4]; STEPS_MAX + 1];
    let mut n = 1;
    while n <= STEPS_MAX {
        let s = (n * STREAM_STEP_BYTES) as u32;
        let f = fold_constants(8 * 3 * s);
        t[n] = [f.0, f.1, shift_constant(2 * s), shift_constant(s)];
        n += 1;
    }
    t
};

/// Updates the raw (un-inverted) register `crc` with `data`, folding on ymm registers with
/// `crc32` streams alongside (see [`pass`]): the path for CPUs with VPCLMULQDQ but not
/// AVX-512. Buffers shorter than [`FOLD_MIN_BYTES`] take [`update`]; longer ones than
/// [`PASS_MAX_BYTES`] are cut into passes.
///
/// # Safety
/// The CPU must have AVX2, VPCLMULQDQ, PCLMULQDQ and SSE4.2 ([`has_vpclmulqdq_avx2`]).
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
pub(super) unsafe fn update_folded_avx2(mut crc: u32, mut data: &[u8]) -> u32 {
    if data.len() < FOLD_MIN_BYTES {
        // SAFETY: the CPU has SSE4.2 (the caller's contract).
        return unsafe { update(crc, data) };
    }
    while data.len() > PASS_MAX_BYTES {
        // Two passes of similar length rather than a full one and a short one.
        let take = if data.len() >= 2 * PASS_MAX_BYTES {
            PASS_MAX_BYTES
        } else {
            data.len() / 2
        };
        let (a, rest) = data.split_at_checked(take).unwrap_or((data, &[]));
        crc = pass(crc, a);
        data = rest;
    }
    pass(crc, data)
}

/// One pass of [`update_folded_avx2`] over `data`, laid out as
/// `[fold region][stream 1][stream 2][stream 3][tail]`: n = (`data.len()` − one group) /
/// STEP_BYTES steps (at most STEPS_MAX), streams of S = n × STREAM_STEP_BYTES bytes, a tail
/// under 16 bytes, and the fold region (a whole number of 16-byte blocks) the rest, at least
/// n + 1 groups. The register enters the fold region; the streams start from zero and are
/// merged in by the linearity of CRC: crc = shift_3S(fold) ⊕ shift_2S(c1) ⊕ shift_S(c2) ⊕ c3.
/// Buffers shorter than one group (128 bytes) take [`update`].
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn pass(crc: u32, data: &[u8]) -> u32 {
    // The first group only loads: the steps are what follows it.
    let n = (data.len().saturating_sub(32 * ACC_YMM) / STEP_BYTES).min(STEPS_MAX);
    let s = n * STREAM_STEP_BYTES;
    let fold_bytes = data.len().saturating_sub(3 * s) & !15;
    let (fold, rest) = data.split_at_checked(fold_bytes).unwrap_or((&[], data));
    let (s1, rest) = rest.split_at_checked(s).unwrap_or((&[], rest));
    let (s2, rest) = rest.split_at_checked(s).unwrap_or((&[], rest));
    let (s3, tail) = rest.split_at_checked(s).unwrap_or((&[], rest));
    let (blocks, pieces) = fold.as_chunks::<32>();
    let (pieces, _) = pieces.as_chunks::<16>();
    // Blocks short of a whole group lead, so the groups keep all registers busy.
    let (head, body) = blocks.split_at(blocks.len() % ACC_YMM);
    let (groups, _) = body.as_chunks::<ACC_YMM>();
    let Some((first, groups)) = groups.split_first() else {
        // SAFETY: this function enables SSE4.2, so any caller runs on a CPU that has it.
        return unsafe { update(crc, data) };
    };
    let streams = [
        s1.as_chunks::<STREAM_STEP_BYTES>().0,
        s2.as_chunks::<STREAM_STEP_BYTES>().0,
        s3.as_chunks::<STREAM_STEP_BYTES>().0,
    ];
    let (acc, c) = fold_and_stream(load_first(head, first, crc), groups, streams);
    let x = fold_all_ymm(&acc);
    // Lane 0 folded into lane 1, 128 bits on.
    let lo = _mm256_castsi256_si128(x);
    let x = fold128(lo, pair(FOLD_128), _mm256_extracti128_si256::<1>(x));
    let raw = merge(fold_pieces(x, pieces), c, MERGE.get(n).filter(|_| n > 0));
    // SAFETY: this function enables SSE4.2, so any caller runs on a CPU that has it.
    unsafe { update(raw, tail) }
}

/// The registers after the first group, `first`, with the register `crc` XORed into the first
/// 32 message bits, which are in `head` (fewer than ACC_YMM blocks, folded one after another
/// into the group's first block) or, without a head, in the group.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
fn load_first(head: &[[u8; 32]], first: &[[u8; 32]; ACC_YMM], crc: u32) -> [__m256i; ACC_YMM] {
    let mut acc = [_mm256_setzero_si256(); ACC_YMM];
    for (a, b) in acc.iter_mut().zip(first) {
        *a = load32(b);
    }
    let c = _mm256_zextsi128_si256(_mm_cvtsi32_si128(crc.cast_signed()));
    acc[0] = match head.split_first() {
        None => _mm256_xor_si256(acc[0], c),
        Some((h, rest)) => {
            let one = splat_ymm(FOLD_YMM_BLOCKS[0]);
            let mut x = _mm256_xor_si256(load32(h), c);
            for b in rest {
                x = fold256(x, one, load32(b));
            }
            fold256(x, one, acc[0])
        }
    };
    acc
}

/// The main loop: each step folds one group into `acc` and runs each stream one step on the
/// `crc32` instruction; whichever has steps left then runs alone. Returns the accumulators
/// and the three streams' raw registers (started from zero).
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,sse4.2")]
fn fold_and_stream(
    mut acc: [__m256i; ACC_YMM],
    groups: &[[[u8; 32]; ACC_YMM]],
    [s1, s2, s3]: [&[[u8; STREAM_STEP_BYTES]]; 3],
) -> ([__m256i; ACC_YMM], [u64; 3]) {
    let k = splat_ymm(FOLD_YMM_BLOCKS[ACC_YMM - 1]);
    let mut groups = groups.iter();
    let fold_group = |acc: &mut [__m256i; ACC_YMM], g: &[[u8; 32]; ACC_YMM]| {
        prefetch_ahead(g.as_ptr().cast(), ACC_YMM * 32);
        for (a, b) in acc.iter_mut().zip(g) {
            *a = fold256(*a, k, load32(b));
        }
    };
    let mut c = [0u64; 3];
    for ((x, y), z) in s1.iter().zip(s2).zip(s3) {
        for s in [x, y, z] {
            prefetch_ahead(s.as_ptr(), STREAM_STEP_BYTES);
        }
        let (x, y, z) = (
            x.as_chunks::<8>().0,
            y.as_chunks::<8>().0,
            z.as_chunks::<8>().0,
        );
        for ((x, y), z) in x.iter().zip(y).zip(z) {
            let [c1, c2, c3] = &mut c;
            *c1 = _mm_crc32_u64(*c1, u64::from_le_bytes(*x));
            *c2 = _mm_crc32_u64(*c2, u64::from_le_bytes(*y));
            *c3 = _mm_crc32_u64(*c3, u64::from_le_bytes(*z));
        }
        if let Some(g) = groups.next() {
            fold_group(&mut acc, g);
        }
    }
    for g in groups {
        fold_group(&mut acc, g);
    }
    (acc, c)
}

/// ACC_YMM consecutive 32-byte blocks folded into one register (at the last one's position).
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq")]
fn fold_all_ymm(acc: &[__m256i; ACC_YMM]) -> __m256i {
    let (last, earlier) = acc.split_last().unwrap_or((&acc[0], &[]));
    let mut x = *last;
    // Block i is ACC_YMM - 1 - i blocks before the last.
    for (a, k) in earlier.iter().zip(FOLD_YMM_BLOCKS.iter().rev().skip(1)) {
        x = fold256(*a, splat_ymm(*k), x);
    }
    x
}

/// The raw register after the fold region, whose last block is `x`, and the three streams,
/// whose raw registers are `c`, with `merge` the streams' [`MERGE`] entry (`None` for no
/// streams).
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.2")]
fn merge(x: __m128i, [c1, c2, c3]: [u64; 3], merge: Option<&[u64; 4]>) -> u32 {
    let Some(&[f0, f1, k2, k1]) = merge else {
        return reduce(x);
    };
    let shift = |c: u64, k: u64| {
        let (c, k) = (
            _mm_cvtsi64_si128(c.cast_signed()),
            _mm_cvtsi64_si128(k.cast_signed()),
        );
        _mm_clmulepi64_si128::<0x00>(c, k)
    };
    let streams = _mm_xor_si128(shift(c1, k2), shift(c2, k1));
    reduce(fold128(x, pair((f0, f1)), streams)) ^ c3 as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_x_reduce_by_the_polynomial() {
        assert_eq!(xpow_mod(0), 1);
        assert_eq!(xpow_mod(31), 0x8000_0000);
        assert_eq!(xpow_mod(32), POLY_NORMAL);
        // x^(a+b) = x^a · x^b: multiply by x one step at a time from x^100.
        let mut r = xpow_mod(100);
        for _ in 0..1000 {
            r = (r << 1) ^ if r & 0x8000_0000 != 0 { POLY_NORMAL } else { 0 };
        }
        assert_eq!(r, xpow_mod(1100));
        // Square and multiply against one multiplication by x at a time.
        let mut r = 1u32;
        for e in 0..600 {
            assert_eq!(xpow_mod(e), r, "x^{e}");
            r = (r << 1) ^ if r & 0x8000_0000 != 0 { POLY_NORMAL } else { 0 };
        }
    }

    #[test]
    fn avx2_path_agrees_at_every_stream_length_and_pass_cut() {
        if !has_vpclmulqdq_avx2() {
            std::println!("skipped: this CPU lacks AVX2/VPCLMULQDQ, the ymm folding path");
            return;
        }
        let data: std::vec::Vec<u8> = (0..3 * PASS_MAX_BYTES as u32 + 1000)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 17) as u8)
            .collect();
        let check = |len: usize| {
            let d = &data[..len];
            let want = super::super::crc32c_append_portable(0x1234_5678, d);
            // SAFETY: the CPU has what the path needs (checked above).
            let got = !unsafe { update_folded_avx2(!0x1234_5678, d) };
            assert_eq!(got, want, "len {len}");
            // One pass directly, including the lengths `update_folded_avx2` sends elsewhere.
            if len <= PASS_MAX_BYTES {
                // SAFETY: as above.
                assert_eq!(!unsafe { pass(!0x1234_5678, d) }, want, "pass, len {len}");
            }
        };
        // Every MERGE entry (n steps after the first group), with heads, pieces and tails.
        for n in 0..=STEPS_MAX {
            for extra in [0, 8, 16, 31, 32, 40, 96 + 15, 127, STEP_BYTES - 1] {
                check(32 * ACC_YMM + n * STEP_BYTES + extra);
            }
        }
        for len in [0, 1, 127, 128, FOLD_MIN_BYTES - 1, FOLD_MIN_BYTES] {
            check(len);
        }
        for k in 1..=3 {
            for len in [
                k * PASS_MAX_BYTES - 1,
                k * PASS_MAX_BYTES,
                k * PASS_MAX_BYTES + 1,
            ] {
                check(len);
            }
        }
    }
}
