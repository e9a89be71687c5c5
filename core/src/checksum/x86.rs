//! x86-64 CRC-32C paths: the SSE4.2 `crc32` instruction on three interleaved streams, and
//! folding with VPCLMULQDQ (AVX-512) for buffers of 256 bytes or more.
//!
//! ## Folding
//! Carry-less multiplication folds a 128-bit block of the message forward by D bits: the block
//! is a polynomial X(x) of degree < 128 that still has D more message bits after it, and
//! X(x)·x^D ≡ H(x)·(x^(D+64) mod P) ⊕ L(x)·(x^D mod P) (mod P), with H and L the block's high-
//! and low-degree 64-bit halves. Each product is one `pclmulqdq` of a half with a 32-bit
//! constant, and the 96-bit result is XORed into the block D bits further on, so the CRC of
//! the whole message equals that of the last block. VPCLMULQDQ does this on the four 128-bit
//! lanes of a zmm register at once; four registers fold 256 bytes per step (D = 2048), then
//! are folded into one register, its lanes into one block, and the last block and the bytes
//! past it go through the `crc32` instruction (which applies the final multiplication by x^32
//! mod P). Source: V. Gopal et al., "Fast CRC Computation for Generic Polynomials Using
//! PCLMULQDQ Instruction" (Intel, 2009). The constants are computed at compile time.
//!
//! Bit order: CRC-32C is reflected, so message bit i (bit i mod 8 of byte i / 8) has the highest
//! degree first, and a 64-bit half loaded little-endian holds x^(63-i) at bit i. A constant c(x)
//! of degree < 32 is stored that way too (x^d at bit 63 - d); the product of two such halves,
//! read as a 128-bit block in the same order, is their product times x, which the exponents
//! below account for.

use core::arch::x86_64::{
    __m128i, __m512i, _MM_HINT_T0, _mm_clmulepi64_si128, _mm_crc32_u8, _mm_crc32_u64,
    _mm_cvtsi32_si128, _mm_cvtsi128_si64, _mm_extract_epi64, _mm_loadu_si128, _mm_prefetch,
    _mm_set_epi64x, _mm_xor_si128, _mm512_broadcast_i32x4, _mm512_clmulepi64_epi128,
    _mm512_extracti32x4_epi32, _mm512_loadu_si512, _mm512_set_epi64, _mm512_setzero_si512,
    _mm512_ternarylogic_epi64, _mm512_xor_si512, _mm512_zextsi128_si512,
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

/// Whether this CPU runs the folding path: 512-bit VPCLMULQDQ, PCLMULQDQ and SSE4.2.
pub(super) fn has_vpclmulqdq() -> bool {
    cfg!(all(
        target_feature = "avx512f",
        target_feature = "vpclmulqdq",
        target_feature = "pclmulqdq",
        target_feature = "sse4.2"
    )) || detected!("avx512f", "vpclmulqdq", "pclmulqdq", "sse4.2")
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

/// x^e mod P as a polynomial with x^d at bit d.
const fn xpow_mod(e: u32) -> u32 {
    let mut r: u32 = 1;
    let mut i = 0;
    while i < e {
        let carry = r & 0x8000_0000 != 0;
        r <<= 1;
        if carry {
            r ^= POLY_NORMAL;
        }
        i += 1;
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

/// zmm registers the main loop folds in parallel, 64 bytes each: one step folds ACC × 64 bytes
/// forward by as many bits, enough independent chains to cover the multiplications' latency.
const ACC: usize = 4;

/// How far ahead of the bytes being folded to prefetch: several calls on consecutive 4 KiB
/// blocks from memory otherwise wait for each block's first lines.
const FOLD_PREFETCH_BYTES: usize = 1024;

/// `FOLD_BLOCKS[k - 1]` folds forward by k 64-byte blocks (k · 512 bits), for k in 1..=ACC.
// Evaluated at compile time: an index error would fail the build.
#[allow(clippy::indexing_slicing)]
const FOLD_BLOCKS: [(u64, u64); ACC] = {
    let mut t = [(0, 0); ACC];
    let mut k = 0;
    while k < ACC {
        t[k] = fold_constants(512 * (k as u32 + 1));
        k += 1;
    }
    t
};
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
#[target_feature(enable = "avx512f")]
fn load64(b: &[u8; 64]) -> __m512i {
    // SAFETY: `b` is 64 readable bytes; the unaligned load has no alignment need.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "sse2")]
fn load16(b: &[u8; 16]) -> __m128i {
    // SAFETY: `b` is 16 readable bytes; the unaligned load has no alignment need.
    unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
}

/// Each 128-bit lane of `x` folded forward by the distance `k` was made for, XORed into `next`.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold512(x: __m512i, k: __m512i, next: __m512i) -> __m512i {
    let a = _mm512_clmulepi64_epi128::<0x00>(x, k);
    let b = _mm512_clmulepi64_epi128::<0x11>(x, k);
    _mm512_ternarylogic_epi64::<0x96>(a, b, next)
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

/// Updates the raw (un-inverted) register `crc` with `data` by folding.
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
        let ahead = g.as_ptr().cast::<i8>().wrapping_add(FOLD_PREFETCH_BYTES);
        for (i, (a, b)) in acc.iter_mut().zip(g).enumerate() {
            // A prefetch is only a hint: an address past the buffer does not fault.
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * i));
            *a = fold512(*a, step, load64(b));
        }
    }
    let mut x = fold_all(&acc);
    for b in singles {
        x = fold512(x, one, load64(b));
    }
    let mut x = fold_lanes(x);
    let (pieces, tail) = rest.as_chunks::<16>();
    let k = pair(FOLD_128);
    for b in pieces {
        x = fold128(x, k, load16(b));
    }
    // The CRC of the last block's 16 bytes from a zero register is X(x)·x^32 mod P.
    let lo = _mm_cvtsi128_si64(x).cast_unsigned();
    let hi = _mm_extract_epi64::<1>(x).cast_unsigned();
    let raw = _mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32;
    // SAFETY: the CPU has SSE4.2 (the caller's contract).
    unsafe { update(raw, tail) }
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
    }
}
