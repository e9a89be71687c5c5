//! x86-64 kernels: SSSE3 (16-byte vectors) and AVX2 (32-byte vectors), generated from one template.
//!
//! Q is built by Horner's rule with a vector multiply-by-{02} ("xtime": add each byte to itself and
//! XOR 0x1d into the bytes whose top bit was set; SSSE3 finds them by a signed compare with zero,
//! AVX2 picks between the two results with `vpblendvb`, one instruction fewer).
//! Multiplication by a constant c uses split-nibble tables: c·v = T_lo[v & 15] ⊕ T_hi[v >> 4],
//! sixteen entries each, looked up sixteen bytes at a time with `pshufb`. Each loop step handles a
//! block of four vectors per column (64 bytes for SSSE3, 128 for AVX2); what is left after the
//! last whole block goes to the portable kernel.
//!
//! `unsafe` appears only where the intrinsics need it: unaligned loads/stores through pointers
//! made from slices of exactly the vector width, and calls into `#[target_feature]` functions
//! after the CPU feature was confirmed.

#[cfg(any(feature = "std", test))]
macro_rules! detected {
    ($f:tt) => {
        std::is_x86_feature_detected!($f)
    };
}

#[cfg(not(any(feature = "std", test)))]
macro_rules! detected {
    ($f:tt) => {
        false
    };
}

/// Whether this CPU runs the SSSE3 kernel (compile-time target, or run-time detection with
/// feature `std`).
pub(super) fn has_ssse3() -> bool {
    cfg!(target_feature = "ssse3") || detected!("ssse3")
}

/// Whether this CPU runs the AVX2 kernel.
pub(super) fn has_avx2() -> bool {
    cfg!(target_feature = "avx2") || detected!("avx2")
}

/// Generates one kernel module from the intrinsic names of one vector width.
macro_rules! simd_kernel {
    (
        $modname:ident, $feat:literal, $V:ty, $W:literal,
        zero: $zero:ident, set1: $set1:ident, load: $load:ident, store: $store:ident,
        xor: $xor:ident, and: $and:ident, shuffle: $shuf:ident, srli16: $srli:ident,
        table: $table:ident, xtime: $xtime:ident, stream: $stream:ident
    ) => {
        pub(in crate::parity) mod $modname {
            use core::arch::x86_64::*;

            use super::super::portable;
            use crate::gf256;

            /// Vector width in bytes.
            const W: usize = $W;
            /// Vectors per column in one loop step.
            const U: usize = 4;
            /// Bytes per column in one loop step.
            const B: usize = W * U;

            type V = $V;
            type Block = [V; U];

            #[inline]
            #[target_feature(enable = $feat)]
            fn ld(s: &[u8; W]) -> V {
                // SAFETY: `s` is W readable bytes; the unaligned load has no alignment need.
                unsafe { $load(s.as_ptr().cast()) }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            fn st(d: &mut [u8; W], v: V) {
                // SAFETY: `d` is W writable bytes; the unaligned store has no alignment need.
                unsafe { $store(d.as_mut_ptr().cast(), v) }
            }

            /// Bytes `o..o + B` of `s` as a block, or `None` if `s` is shorter (erased: zero).
            #[inline]
            #[target_feature(enable = $feat)]
            fn get(s: &[u8], o: usize) -> Option<Block> {
                let (chunks, _) = s.get(o..o + B)?.as_chunks::<W>();
                let mut v = [$zero(); U];
                for (x, ch) in v.iter_mut().zip(chunks) {
                    *x = ld(ch);
                }
                Some(v)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            fn put(out: &mut [u8], o: usize, v: &Block) {
                if let Some(d) = out.get_mut(o..o + B) {
                    let (chunks, _) = d.as_chunks_mut::<W>();
                    for (ch, x) in chunks.iter_mut().zip(v) {
                        st(ch, *x);
                    }
                }
            }

            /// Like `put`, with non-temporal stores (they bypass the caches and skip the read
            /// for ownership); a chunk that is not W-aligned falls back to a normal store.
            #[inline]
            #[target_feature(enable = $feat)]
            fn put_nt(out: &mut [u8], o: usize, v: &Block) {
                if let Some(d) = out.get_mut(o..o + B) {
                    let (chunks, _) = d.as_chunks_mut::<W>();
                    for (ch, x) in chunks.iter_mut().zip(v) {
                        if ch.as_ptr().addr().is_multiple_of(W) {
                            // SAFETY: `ch` is W writable bytes at a W-aligned address, as the
                            // streaming store requires.
                            unsafe { $stream(ch.as_mut_ptr().cast(), *x) }
                        } else {
                            st(ch, *x);
                        }
                    }
                }
            }

            /// v·{02} in every byte.
            #[inline]
            #[target_feature(enable = $feat)]
            fn xtime(v: V) -> V {
                super::$xtime(v)
            }

            /// Split-nibble tables of x -> c·x.
            #[derive(Clone, Copy)]
            struct Tab {
                lo: V,
                hi: V,
            }

            #[inline]
            #[target_feature(enable = $feat)]
            fn tab(c: u8) -> Tab {
                let (lo, hi) = gf256::nibble_tables(c);
                Tab {
                    lo: super::$table(&lo),
                    hi: super::$table(&hi),
                }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            fn mul(t: Tab, v: V) -> V {
                let nib = $set1(0x0f);
                let l = $and(v, nib);
                let h = $and($srli::<4>(v), nib);
                $xor($shuf(t.lo, l), $shuf(t.hi, h))
            }

            /// P and Q of the block at `o`, Horner's rule from the highest source.
            #[inline]
            #[target_feature(enable = $feat)]
            fn syndromes<C: AsRef<[u8]>>(srcs: &[C], o: usize) -> (Block, Block) {
                let mut p = [$zero(); U];
                let mut q = [$zero(); U];
                for c in srcs.iter().rev() {
                    for x in &mut q {
                        *x = xtime(*x);
                    }
                    if let Some(s) = c.as_ref().get(o..o + B) {
                        let (chunks, _) = s.as_chunks::<W>();
                        for ((pv, qv), ch) in p.iter_mut().zip(q.iter_mut()).zip(chunks) {
                            let d = ld(ch);
                            *pv = $xor(*pv, d);
                            *qv = $xor(*qv, d);
                        }
                    }
                }
                (p, q)
            }

            #[target_feature(enable = $feat)]
            fn xor_impl<C: AsRef<[u8]>>(srcs: &[C], off: usize, out: &mut [u8], nt: bool) -> usize {
                let len = out.len() / B * B;
                let mut o = 0;
                while o < len {
                    let mut acc = [$zero(); U];
                    for c in srcs {
                        if let Some(s) = c.as_ref().get(off + o..off + o + B) {
                            let (chunks, _) = s.as_chunks::<W>();
                            for (a, ch) in acc.iter_mut().zip(chunks) {
                                *a = $xor(*a, ld(ch));
                            }
                        }
                    }
                    if nt {
                        put_nt(out, o, &acc);
                    } else {
                        put(out, o, &acc);
                    }
                    o += B;
                }
                if nt {
                    _mm_sfence();
                }
                len
            }

            #[target_feature(enable = $feat)]
            fn pq_impl<C: AsRef<[u8]>>(
                srcs: &[C],
                off: usize,
                mut p: Option<&mut [u8]>,
                q: &mut [u8],
                nt: bool,
            ) -> usize {
                let len = q.len() / B * B;
                let mut o = 0;
                while o < len {
                    let (vp, vq) = syndromes(srcs, off + o);
                    if nt {
                        if let Some(p) = p.as_deref_mut() {
                            put_nt(p, o, &vp);
                        }
                        put_nt(q, o, &vq);
                    } else {
                        if let Some(p) = p.as_deref_mut() {
                            put(p, o, &vp);
                        }
                        put(q, o, &vq);
                    }
                    o += B;
                }
                if nt {
                    _mm_sfence();
                }
                len
            }

            #[target_feature(enable = $feat)]
            fn from_q_impl<C: AsRef<[u8]>>(
                srcs: &[C],
                off: usize,
                q_stored: &[u8],
                c: u8,
                out: &mut [u8],
            ) -> usize {
                let t = tab(c);
                let len = out.len() / B * B;
                let mut o = 0;
                while o < len {
                    let (_, mut vq) = syndromes(srcs, off + o);
                    let sq = get(q_stored, off + o).unwrap_or([$zero(); U]);
                    for (x, s) in vq.iter_mut().zip(sq) {
                        *x = mul(t, $xor(*x, s));
                    }
                    put(out, o, &vq);
                    o += B;
                }
                len
            }

            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $feat)]
            fn two_impl<C: AsRef<[u8]>>(
                srcs: &[C],
                off: usize,
                p_stored: &[u8],
                q_stored: &[u8],
                a: u8,
                b: u8,
                dx: &mut [u8],
                dy: &mut [u8],
            ) -> usize {
                let ta = tab(a);
                let tb = tab(b);
                let len = dx.len() / B * B;
                let mut o = 0;
                while o < len {
                    let (mut vp, mut vq) = syndromes(srcs, off + o);
                    let sp = get(p_stored, off + o).unwrap_or([$zero(); U]);
                    let sq = get(q_stored, off + o).unwrap_or([$zero(); U]);
                    for (((pv, qv), s), t) in vp.iter_mut().zip(vq.iter_mut()).zip(sp).zip(sq) {
                        let pd = $xor(*pv, s);
                        let x = $xor(mul(ta, pd), mul(tb, $xor(*qv, t)));
                        // vq now holds D_x, vp holds D_y.
                        *qv = x;
                        *pv = $xor(pd, x);
                    }
                    put(dx, o, &vq);
                    put(dy, o, &vp);
                    o += B;
                }
                len
            }

            // The safe entry points below are reached only through `dispatch!` with a `Kernel`
            // of this kind, and `Kernel::supported` makes one only after the CPU feature was
            // found; that is the proof every `unsafe` call below relies on.

            pub(in crate::parity) fn xor<C: AsRef<[u8]>>(srcs: &[C], off: usize, out: &mut [u8]) {
                let nt = super::streaming(out, srcs.len() + 1);
                // SAFETY: the CPU has the feature (see above).
                let done = unsafe { xor_impl(srcs, off, out, nt) };
                if let Some(tail) = out.get_mut(done..) {
                    portable::xor(srcs, off + done, tail);
                }
            }

            pub(in crate::parity) fn pq<C: AsRef<[u8]>>(
                srcs: &[C],
                off: usize,
                mut p: Option<&mut [u8]>,
                q: &mut [u8],
            ) {
                let nt = super::streaming(q, srcs.len() + 2);
                // SAFETY: the CPU has the feature (see above).
                let done = unsafe { pq_impl(srcs, off, p.as_deref_mut(), q, nt) };
                if let Some(tail) = q.get_mut(done..) {
                    portable::pq(srcs, off + done, p.and_then(|p| p.get_mut(done..)), tail);
                }
            }

            /// `xor` and `pq` with the kind of store given, for the tests of both.
            #[cfg(test)]
            pub(super) fn gen_with_stores(
                srcs: &[&[u8]],
                p: &mut [u8],
                q: Option<&mut [u8]>,
                nt: bool,
            ) -> bool {
                if !super::super::Kernel::supported().any(|k| k.name() == $feat) {
                    return false;
                }
                // SAFETY: the CPU has the feature (checked just above).
                let done = unsafe {
                    match q {
                        Some(q) => {
                            let d = pq_impl(srcs, 0, Some(&mut *p), &mut *q, nt);
                            portable::pq(srcs, d, p.get_mut(d..), &mut q[d..]);
                            d
                        }
                        None => xor_impl(srcs, 0, p, nt),
                    }
                };
                portable::xor(srcs, done, &mut p[done..]);
                true
            }

            pub(in crate::parity) fn from_q<C: AsRef<[u8]>>(
                srcs: &[C],
                off: usize,
                q_stored: &[u8],
                c: u8,
                out: &mut [u8],
            ) {
                // SAFETY: the CPU has the feature (see above).
                let done = unsafe { from_q_impl(srcs, off, q_stored, c, out) };
                if let Some(tail) = out.get_mut(done..) {
                    portable::from_q(srcs, off + done, q_stored, c, tail);
                }
            }

            #[allow(clippy::too_many_arguments)]
            pub(in crate::parity) fn two<C: AsRef<[u8]>>(
                srcs: &[C],
                off: usize,
                p_stored: &[u8],
                q_stored: &[u8],
                a: u8,
                b: u8,
                dx: &mut [u8],
                dy: &mut [u8],
            ) {
                // SAFETY: the CPU has the feature (see above).
                let done = unsafe { two_impl(srcs, off, p_stored, q_stored, a, b, dx, dy) };
                if let (Some(tx), Some(ty)) = (dx.get_mut(done..), dy.get_mut(done..)) {
                    portable::two(srcs, off + done, p_stored, q_stored, a, b, tx, ty);
                }
            }
        }
    };
}

use core::arch::x86_64::{
    __m128i, __m256i, _mm_add_epi8, _mm_and_si128, _mm_cmpgt_epi8, _mm_loadu_si128, _mm_set1_epi8,
    _mm_setzero_si128, _mm_xor_si128, _mm256_add_epi8, _mm256_blendv_epi8,
    _mm256_broadcastsi128_si256, _mm256_set1_epi8, _mm256_xor_si256,
};

/// Parity outputs at least this long may be written with non-temporal (streaming) stores, as
/// ISA-L `pq_gen`/`xor_gen` and md's AVX2 `gen_syndrome` always do: parity of a large stripe goes
/// to the disks next, not back to the CPU, and skipping the caches saves the read for ownership
/// of every parity line (a quarter of the memory traffic of a 4+2 stripe). Shorter outputs stay
/// in cache for whoever reads them next. Recovered data is always stored normally: a degraded
/// read hands it to the caller at once.
const STREAM_MIN_BYTES: usize = 16 * 1024;

/// Calls that touch at most this many bytes (sources and outputs) and write into the buffer the
/// previous call wrote keep normal stores: three quarters of a 512 KiB L2 (AMD Zen 2/3, the
/// smallest L2 of current x86 server cores), so the whole stripe stays in L2 from call to call.
const CACHED_FOOTPRINT_MAX: usize = 384 * 1024;

/// Start address of the output the last P or P/Q generation wrote (0: none yet).
static LAST_OUTPUT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Whether to write `out`, the last output of a call that touches `buffers` buffers of its length
/// (sources and outputs), with streaming stores; see [`stream_choice`]. Remembers `out` for the
/// next call.
fn streaming(out: &[u8], buffers: usize) -> bool {
    use core::sync::atomic::Ordering::Relaxed;
    let addr = out.as_ptr().addr();
    // Relaxed: a stale value from another thread only picks the slower store kind for one call.
    let reused = LAST_OUTPUT.load(Relaxed) == addr;
    LAST_OUTPUT.store(addr, Relaxed);
    stream_choice(reused, out.len(), buffers)
}

/// The store policy: stream outputs of at least [`STREAM_MIN_BYTES`] unless the output buffer is
/// the one the previous call wrote (`reused`) and the call touches at most
/// [`CACHED_FOOTPRINT_MAX`] bytes in all (`buffers` buffers of `len` bytes).
///
/// A reused output buffer, such as the parity scratch `raid::Array` writes every stripe through,
/// is in cache when the call's data fits beside it: there a normal store costs no memory traffic,
/// while a streaming store evicts the line and writes it to memory. That bound a 4+2 stripe of
/// 64 KiB strips hot in L2 at memory write speed; with normal stores it ran 1.7-2.0x faster. A
/// fresh buffer is not in cache, and there streaming saves the read for ownership (normal stores
/// ran 7-9 % slower over a 64 MiB working set). The first call into a reused buffer streams; the
/// next ones find it reused. Only the kind of store depends on this, never the bytes written.
const fn stream_choice(reused: bool, len: usize, buffers: usize) -> bool {
    let footprint = len.saturating_mul(buffers);
    len >= STREAM_MIN_BYTES && !(reused && footprint <= CACHED_FOOTPRINT_MAX)
}

#[inline]
#[target_feature(enable = "ssse3")]
fn ssse3_table(t: &[u8; 16]) -> __m128i {
    // SAFETY: `t` is 16 readable bytes; the unaligned load has no alignment need.
    unsafe { _mm_loadu_si128(t.as_ptr().cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn avx2_table(t: &[u8; 16]) -> __m256i {
    // The same 16 entries in both 128-bit lanes, since `vpshufb` looks up within each lane.
    _mm256_broadcastsi128_si256(ssse3_table(t))
}

/// v·{02} in every byte, four instructions: double each byte, and XOR 0x1d into those whose top
/// bit was set, found by a signed compare with zero (SSSE3 has no variable blend).
#[inline]
#[target_feature(enable = "ssse3")]
fn ssse3_xtime(v: __m128i) -> __m128i {
    let high = _mm_cmpgt_epi8(_mm_setzero_si128(), v);
    _mm_xor_si128(_mm_add_epi8(v, v), _mm_and_si128(high, _mm_set1_epi8(0x1d)))
}

/// v·{02} in every byte, three instructions: double each byte, then pick between the doubled
/// byte and the doubled byte XOR 0x1d by the top bit of the original (`vpblendvb` reads only
/// that bit). Written so because LLVM turns a blend between zero and 0x1d back into the
/// four-instruction compare-and-mask form; the Horner loop is bound by vector ALU work when the
/// data is in cache or the core is shared, where this saves a quarter of the multiply's cost.
#[inline]
#[target_feature(enable = "avx2")]
fn avx2_xtime(v: __m256i) -> __m256i {
    let d = _mm256_add_epi8(v, v);
    _mm256_blendv_epi8(d, _mm256_xor_si256(d, _mm256_set1_epi8(0x1d)), v)
}

simd_kernel!(
    ssse3, "ssse3", __m128i, 16,
    zero: _mm_setzero_si128, set1: _mm_set1_epi8, load: _mm_loadu_si128, store: _mm_storeu_si128,
    xor: _mm_xor_si128, and: _mm_and_si128, shuffle: _mm_shuffle_epi8, srli16: _mm_srli_epi16,
    table: ssse3_table, xtime: ssse3_xtime, stream: _mm_stream_si128
);

simd_kernel!(
    avx2, "avx2", __m256i, 32,
    zero: _mm256_setzero_si256, set1: _mm256_set1_epi8, load: _mm256_loadu_si256,
    store: _mm256_storeu_si256, xor: _mm256_xor_si256, and: _mm256_and_si256,
    shuffle: _mm256_shuffle_epi8, srli16: _mm256_srli_epi16, table: avx2_table,
    xtime: avx2_xtime, stream: _mm256_stream_si256
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::{format, vec, vec::Vec};

    #[test]
    fn stores_stream_unless_a_reused_output_fits_in_cache() {
        // Short outputs never stream.
        assert!(!stream_choice(false, STREAM_MIN_BYTES - 8, 6));
        // A fresh output streams; the same output again, with its stripe in cache, does not.
        assert!(stream_choice(false, 64 * 1024, 6));
        assert!(!stream_choice(true, 64 * 1024, 6));
        // A reused output whose stripe is too big for L2 streams (8+2 × 64 KiB).
        assert!(stream_choice(true, 64 * 1024, 10));
        assert!(stream_choice(true, usize::MAX, usize::MAX));
    }

    #[test]
    fn streaming_remembers_the_last_output() {
        let a = vec![0u8; 64 * 1024];
        let b = vec![0u8; 64 * 1024];
        // Other tests may call the kernels between these lines, so only the first answers for a
        // buffer that cannot have been the last output are certain.
        assert!(streaming(&a, 6));
        assert!(streaming(&b, 6));
    }

    /// Both kinds of store write the same bytes as the portable kernel, at every output
    /// alignment that matters (streaming stores need W-aligned chunks; the others fall back) and
    /// with a tail shorter than one block.
    #[test]
    fn both_store_kinds_write_the_portable_parity() {
        type Gen = fn(&[&[u8]], &mut [u8], Option<&mut [u8]>, bool) -> bool;
        let len = STREAM_MIN_BYTES + 72;
        let data: Vec<Vec<u8>> = (0..5u8)
            .map(|i| {
                (0..len)
                    .map(|k| (k as u8).wrapping_mul(31) ^ i.wrapping_mul(97))
                    .collect()
            })
            .collect();
        let srcs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut gp = vec![0u8; len];
        let mut gq = vec![0u8; len];
        super::super::portable::pq(&srcs, 0, Some(&mut gp), &mut gq);
        let mut buf = vec![0u8; 2 * len + 256];
        let base = buf.as_ptr().align_offset(64);
        let kernels: [(&str, Gen); 2] = [
            ("ssse3", ssse3::gen_with_stores),
            ("avx2", avx2::gen_with_stores),
        ];
        let mut runs = 0;
        for (name, generate) in kernels {
            for skew in [0usize, 8, 16, 32] {
                for nt in [false, true] {
                    for pq in [false, true] {
                        buf.fill(0x5c);
                        let (p, rest) = buf[base + skew..].split_at_mut(len);
                        let q = &mut rest[..len];
                        if !generate(&srcs, p, pq.then_some(&mut *q), nt) {
                            continue;
                        }
                        runs += 1;
                        let at = format!("{name} skew {skew} streaming {nt} P+Q {pq}");
                        assert!(p == gp.as_slice(), "P: {at}");
                        assert!(!pq || q == gq.as_slice(), "Q: {at}");
                    }
                }
            }
        }
        assert_eq!(runs > 0, has_ssse3() || has_avx2());
    }
}
