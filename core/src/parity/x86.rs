//! x86-64 kernels, generated from one template: SSSE3 (16-byte vectors), AVX2 (32-byte),
//! AVX-512BW (64-byte) and AVX-512BW with GFNI (64-byte).
//!
//! Q is built by Horner's rule, q := q·{02} ⊕ D_i from the highest source down. The kernels differ
//! in how they multiply:
//! - SSSE3, AVX2, AVX-512BW: by {02} ("xtime"): add each byte to itself and XOR 0x1d into the
//!   bytes whose top bit was set (SSSE3 finds them by a signed compare with zero, AVX2 picks
//!   between the two results with `vpblendvb`, AVX-512BW moves the top bits into a mask register
//!   and folds the XORs with D_i into one `vpternlogq`); by a constant c through split-nibble
//!   tables, `c·v = T_lo[v & 15] ⊕ T_hi[v >> 4]`, sixteen entries each, looked up sixteen bytes at a
//!   time with `pshufb`;
//! - GFNI: multiplication by a constant c is linear over GF(2), so it is an 8×8 bit matrix (column
//!   j is c·2^j), which `vgf2p8affineqb` applies to every byte in one instruction, for {02} as for
//!   any c. (`vgf2p8mulb` multiplies in the AES field, polynomial 0x11b, not md's 0x11d.)
//!
//! Each loop step handles a block of four vectors per column (64 bytes for SSSE3, 128 for AVX2,
//! 256 for the AVX-512 kernels); what is left after the last whole block goes to the portable
//! kernel.
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

/// Whether this CPU runs the AVX-512BW kernel (with feature `std`, detection also checks that the
/// OS saves the 512-bit state).
pub(super) fn has_avx512bw() -> bool {
    cfg!(target_feature = "avx512bw") || detected!("avx512bw")
}

/// Whether this CPU runs the GFNI kernel (AVX-512BW and GFNI).
pub(super) fn has_gfni() -> bool {
    let both = cfg!(all(target_feature = "avx512bw", target_feature = "gfni"));
    both || (has_avx512bw() && detected!("gfni"))
}

/// Generates one kernel module from the intrinsic names of one vector width and the field
/// operations of one instruction set: `horner(q, d)` = q·{02} ⊕ d, `xtime(v)` = v·{02},
/// `tab(c)` prepares multiplication by c (a `Tab`), `mul(t, v)` = c·v. `name` is the kernel's name,
/// `feat` the target features its functions are compiled for.
macro_rules! simd_kernel {
    (
        $modname:ident, name: $name:literal, feat: $feat:literal, $V:ty, $W:literal,
        zero: $zero:ident, load: $load:ident, store: $store:ident, xor: $xor:ident,
        stream: $stream:ident, horner: $horner:ident, xtime: $xtime:ident,
        Tab: $Tab:ty, tab: $tab:ident, mul: $mul:ident
    ) => {
        pub(in crate::parity) mod $modname {
            use core::arch::x86_64::*;

            use super::super::portable;

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

            type Tab = $Tab;

            #[inline]
            #[target_feature(enable = $feat)]
            fn tab(c: u8) -> Tab {
                super::$tab(c)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            fn mul(t: Tab, v: V) -> V {
                super::$mul(t, v)
            }

            /// P and Q of the block at `o`, Horner's rule from the highest source.
            #[inline]
            #[target_feature(enable = $feat)]
            fn syndromes<C: AsRef<[u8]>>(srcs: &[C], o: usize) -> (Block, Block) {
                let mut p = [$zero(); U];
                let mut q = [$zero(); U];
                for c in srcs.iter().rev() {
                    if let Some(s) = c.as_ref().get(o..o + B) {
                        let (chunks, _) = s.as_chunks::<W>();
                        for ((pv, qv), ch) in p.iter_mut().zip(q.iter_mut()).zip(chunks) {
                            let d = ld(ch);
                            *pv = $xor(*pv, d);
                            *qv = super::$horner(*qv, d);
                        }
                    } else {
                        for x in &mut q {
                            *x = super::$xtime(*x);
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
                if let Some(tail) = out.get_mut(done..).filter(|t| !t.is_empty()) {
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
                if let Some(tail) = q.get_mut(done..).filter(|t| !t.is_empty()) {
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
                if !super::super::Kernel::supported().any(|k| k.name() == $name) {
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
                // Not even an empty tail: the portable kernel builds its 256-entry table first.
                if let Some(tail) = out.get_mut(done..).filter(|t| !t.is_empty()) {
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
                let tails = (dx.get_mut(done..), dy.get_mut(done..));
                if let (Some(tx), Some(ty)) = tails
                    && !tx.is_empty()
                {
                    portable::two(srcs, off + done, p_stored, q_stored, a, b, tx, ty);
                }
            }
        }
    };
}

use core::arch::x86_64::{
    __m128i, __m256i, __m512i, _mm_add_epi8, _mm_and_si128, _mm_cmpgt_epi8, _mm_loadu_si128,
    _mm_set1_epi8, _mm_setzero_si128, _mm_shuffle_epi8, _mm_srli_epi16, _mm_xor_si128,
    _mm256_add_epi8, _mm256_and_si256, _mm256_blendv_epi8, _mm256_broadcastsi128_si256,
    _mm256_set1_epi8, _mm256_shuffle_epi8, _mm256_srli_epi16, _mm256_xor_si256, _mm512_add_epi8,
    _mm512_and_si512, _mm512_broadcast_i32x4, _mm512_gf2p8affine_epi64_epi8, _mm512_maskz_mov_epi8,
    _mm512_movepi8_mask, _mm512_set1_epi8, _mm512_set1_epi64, _mm512_setzero_si512,
    _mm512_shuffle_epi8, _mm512_srli_epi16, _mm512_ternarylogic_epi64, _mm512_xor_si512,
};

use crate::gf256;

/// Parity outputs at least this long may be written with non-temporal (streaming) stores, as
/// ISA-L `pq_gen`/`xor_gen` and md's AVX2 `gen_syndrome` always do: parity of a large stripe goes
/// to the disks next, not back to the CPU, and skipping the caches saves the read for ownership
/// of every parity line (a quarter of the memory traffic of a 4+2 stripe). Shorter outputs stay
/// in cache for whoever reads them next. Recovered data is always stored normally: a degraded
/// read hands it to the caller at once.
const STREAM_MIN_BYTES: usize = 16 * 1024;

/// Calls that touch at most this many bytes (sources and outputs) and write into the buffer the
/// previous call wrote keep normal stores, when CPUID does not give the L2 size: three quarters
/// of a 512 KiB L2 (AMD Zen 2/3, the smallest L2 of current x86 server cores), so the whole
/// stripe stays in L2 from call to call. See [`cached_footprint_max`].
const CACHED_FOOTPRINT_MAX: usize = 384 * 1024;

/// Three quarters of this core's L2 cache as CPUID reports it (leaf 0x8000_0006, ECX bits
/// 31..16 in KiB, on AMD and Intel alike), read once; [`CACHED_FOOTPRINT_MAX`] if it does not.
/// On a 1 MiB L2 (Zen 4/5) an 8+2 stripe of 64 KiB strips (640 KiB) then keeps its parity in
/// cache: 1.10x faster hot in L2 than with streaming stores.
fn cached_footprint_max() -> usize {
    use core::arch::x86_64::__cpuid;
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static CACHE: AtomicUsize = AtomicUsize::new(0);
    let cached = CACHE.load(Relaxed);
    if cached != 0 {
        return cached;
    }
    let l2_kib = if __cpuid(0x8000_0000).eax >= 0x8000_0006 {
        (__cpuid(0x8000_0006).ecx >> 16) as usize
    } else {
        0
    };
    let max = if l2_kib == 0 {
        CACHED_FOOTPRINT_MAX
    } else {
        l2_kib * 1024 / 4 * 3
    };
    // Relaxed: every thread computes the same value.
    CACHE.store(max, Relaxed);
    max
}

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
    stream_choice(reused, out.len(), buffers, cached_footprint_max())
}

/// The store policy: stream outputs of at least [`STREAM_MIN_BYTES`] unless the output buffer is
/// the one the previous call wrote (`reused`) and the call touches at most `cached_max` bytes in
/// all (`buffers` buffers of `len` bytes; see [`cached_footprint_max`]).
///
/// A reused output buffer, such as the parity scratch `raid::Array` writes every stripe through,
/// is in cache when the call's data fits beside it: there a normal store costs no memory traffic,
/// while a streaming store evicts the line and writes it to memory. That bound a 4+2 stripe of
/// 64 KiB strips hot in L2 at memory write speed; with normal stores it ran 1.7-2.0x faster. A
/// fresh buffer is not in cache, and there streaming saves the read for ownership (normal stores
/// ran 7-9 % slower over a 64 MiB working set). The first call into a reused buffer streams; the
/// next ones find it reused. Only the kind of store depends on this, never the bytes written.
const fn stream_choice(reused: bool, len: usize, buffers: usize, cached_max: usize) -> bool {
    let footprint = len.saturating_mul(buffers);
    len >= STREAM_MIN_BYTES && !(reused && footprint <= cached_max)
}

/// Split-nibble tables of x -> c·x in vector registers.
#[derive(Clone, Copy)]
struct Nibbles<V> {
    lo: V,
    hi: V,
}

/// Defines `$tab(c)` (nibble tables of c, each 16 entries repeated in every 128-bit lane, since
/// `pshufb` looks up within a lane) and `$mul(t, v)` = c·v for one vector type.
macro_rules! nibble_mul {
    (
        $feat:literal, $V:ty, $tab:ident, $mul:ident, table: $table:expr,
        set1: $set1:ident, and: $and:ident, srli16: $srli:ident, shuffle: $shuf:ident,
        xor: $xor:ident
    ) => {
        #[inline]
        #[target_feature(enable = $feat)]
        fn $tab(c: u8) -> Nibbles<$V> {
            let (lo, hi) = gf256::nibble_tables(c);
            Nibbles {
                lo: $table(ssse3_table(&lo)),
                hi: $table(ssse3_table(&hi)),
            }
        }

        #[inline]
        #[target_feature(enable = $feat)]
        fn $mul(t: Nibbles<$V>, v: $V) -> $V {
            let nib = $set1(0x0f);
            let l = $and(v, nib);
            let h = $and($srli::<4>(v), nib);
            $xor($shuf(t.lo, l), $shuf(t.hi, h))
        }
    };
}

#[inline]
#[target_feature(enable = "ssse3")]
fn ssse3_table(t: &[u8; 16]) -> __m128i {
    // SAFETY: `t` is 16 readable bytes; the unaligned load has no alignment need.
    unsafe { _mm_loadu_si128(t.as_ptr().cast()) }
}

nibble_mul!(
    "ssse3", __m128i, ssse3_tab, ssse3_mul, table: core::convert::identity,
    set1: _mm_set1_epi8, and: _mm_and_si128, srli16: _mm_srli_epi16, shuffle: _mm_shuffle_epi8,
    xor: _mm_xor_si128
);

nibble_mul!(
    "avx2", __m256i, avx2_tab, avx2_mul, table: _mm256_broadcastsi128_si256,
    set1: _mm256_set1_epi8, and: _mm256_and_si256, srli16: _mm256_srli_epi16,
    shuffle: _mm256_shuffle_epi8, xor: _mm256_xor_si256
);

nibble_mul!(
    "avx512bw", __m512i, avx512bw_tab, avx512bw_mul, table: _mm512_broadcast_i32x4,
    set1: _mm512_set1_epi8, and: _mm512_and_si512, srli16: _mm512_srli_epi16,
    shuffle: _mm512_shuffle_epi8, xor: _mm512_xor_si512
);

/// v·{02} in every byte, four instructions: double each byte, and XOR 0x1d into those whose top
/// bit was set, found by a signed compare with zero (SSSE3 has no variable blend).
#[inline]
#[target_feature(enable = "ssse3")]
fn ssse3_xtime(v: __m128i) -> __m128i {
    let high = _mm_cmpgt_epi8(_mm_setzero_si128(), v);
    _mm_xor_si128(_mm_add_epi8(v, v), _mm_and_si128(high, _mm_set1_epi8(0x1d)))
}

#[inline]
#[target_feature(enable = "ssse3")]
fn ssse3_horner(q: __m128i, d: __m128i) -> __m128i {
    _mm_xor_si128(ssse3_xtime(q), d)
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

#[inline]
#[target_feature(enable = "avx2")]
fn avx2_horner(q: __m256i, d: __m256i) -> __m256i {
    _mm256_xor_si256(avx2_xtime(q), d)
}

/// q·{02} ⊕ d in every byte, four instructions: the top bits of q into a mask register, 0x1d
/// where they are set (a zero-masked move), q doubled, and one three-way XOR (`vpternlogq`
/// 0x96) of the three.
#[inline]
#[target_feature(enable = "avx512bw")]
fn avx512bw_horner(q: __m512i, d: __m512i) -> __m512i {
    let poly = _mm512_maskz_mov_epi8(_mm512_movepi8_mask(q), _mm512_set1_epi8(0x1d));
    _mm512_ternarylogic_epi64::<0x96>(_mm512_add_epi8(q, q), poly, d)
}

#[inline]
#[target_feature(enable = "avx512bw")]
fn avx512bw_xtime(v: __m512i) -> __m512i {
    avx512bw_horner(v, _mm512_setzero_si512())
}

/// The matrix of x -> c·x for `vgf2p8affineqb`: output bit i of a byte is the parity of the byte
/// AND matrix byte 7 - i, so byte 7 - i holds bit i of c·2^j at bit j, for j in 0..8.
#[must_use]
const fn gfni_matrix(c: u8) -> u64 {
    let mut pow = [0u8; 8];
    let mut v = c;
    let mut j = 0;
    while j < 8 {
        pow[j] = v;
        v = (v << 1)
            ^ if v & 0x80 != 0 {
                (gf256::POLY & 0xff) as u8
            } else {
                0
            };
        j += 1;
    }
    let mut m = 0u64;
    let mut i = 0;
    while i < 8 {
        let mut row = 0u64;
        let mut j = 0;
        while j < 8 {
            row |= ((pow[j] >> i) & 1) as u64 * (1 << j);
            j += 1;
        }
        m |= row << (8 * (7 - i));
        i += 1;
    }
    m
}

/// `GFNI_MATRICES[c]` is the matrix of x -> c·x (2 KiB, built at compile time: a recovery call
/// needs two, and computing them cost more than a 4 KiB strip's arithmetic).
static GFNI_MATRICES: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = gfni_matrix(c as u8);
        c += 1;
    }
    t
};

/// The matrix of x -> {02}·x.
const GFNI_MUL2: u64 = gfni_matrix(2);

#[inline]
#[target_feature(enable = "avx512bw,gfni")]
fn gfni_tab(c: u8) -> __m512i {
    // A u8 index into a 256-entry table.
    _mm512_set1_epi64(GFNI_MATRICES[usize::from(c)].cast_signed())
}

/// c·v in every byte, one `vgf2p8affineqb` with the matrix of c.
#[inline]
#[target_feature(enable = "avx512bw,gfni")]
fn gfni_mul(t: __m512i, v: __m512i) -> __m512i {
    _mm512_gf2p8affine_epi64_epi8::<0>(v, t)
}

#[inline]
#[target_feature(enable = "avx512bw,gfni")]
fn gfni_xtime(v: __m512i) -> __m512i {
    gfni_mul(_mm512_set1_epi64(GFNI_MUL2.cast_signed()), v)
}

#[inline]
#[target_feature(enable = "avx512bw,gfni")]
fn gfni_horner(q: __m512i, d: __m512i) -> __m512i {
    _mm512_xor_si512(gfni_xtime(q), d)
}

simd_kernel!(
    ssse3, name: "ssse3", feat: "ssse3", __m128i, 16,
    zero: _mm_setzero_si128, load: _mm_loadu_si128, store: _mm_storeu_si128, xor: _mm_xor_si128,
    stream: _mm_stream_si128, horner: ssse3_horner, xtime: ssse3_xtime,
    Tab: super::Nibbles<__m128i>, tab: ssse3_tab, mul: ssse3_mul
);

simd_kernel!(
    avx2, name: "avx2", feat: "avx2", __m256i, 32,
    zero: _mm256_setzero_si256, load: _mm256_loadu_si256, store: _mm256_storeu_si256,
    xor: _mm256_xor_si256, stream: _mm256_stream_si256, horner: avx2_horner, xtime: avx2_xtime,
    Tab: super::Nibbles<__m256i>, tab: avx2_tab, mul: avx2_mul
);

simd_kernel!(
    avx512bw, name: "avx512bw", feat: "avx512bw", __m512i, 64,
    zero: _mm512_setzero_si512, load: _mm512_loadu_si512, store: _mm512_storeu_si512,
    xor: _mm512_xor_si512, stream: _mm512_stream_si512, horner: avx512bw_horner,
    xtime: avx512bw_xtime, Tab: super::Nibbles<__m512i>, tab: avx512bw_tab, mul: avx512bw_mul
);

simd_kernel!(
    gfni, name: "gfni", feat: "avx512bw,gfni", __m512i, 64,
    zero: _mm512_setzero_si512, load: _mm512_loadu_si512, store: _mm512_storeu_si512,
    xor: _mm512_xor_si512, stream: _mm512_stream_si512, horner: gfni_horner, xtime: gfni_xtime,
    Tab: __m512i, tab: gfni_tab, mul: gfni_mul
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::{format, vec, vec::Vec};

    #[test]
    fn stores_stream_unless_a_reused_output_fits_in_cache() {
        let m = CACHED_FOOTPRINT_MAX;
        // Short outputs never stream.
        assert!(!stream_choice(false, STREAM_MIN_BYTES - 8, 6, m));
        // A fresh output streams; the same output again, with its stripe in cache, does not.
        assert!(stream_choice(false, 64 * 1024, 6, m));
        assert!(!stream_choice(true, 64 * 1024, 6, m));
        // A reused output whose stripe is too big for L2 streams (8+2 × 64 KiB in 512 KiB)...
        assert!(stream_choice(true, 64 * 1024, 10, m));
        // ... but not in a 1 MiB L2.
        assert!(!stream_choice(true, 64 * 1024, 10, 768 * 1024));
        assert!(stream_choice(true, usize::MAX, usize::MAX, m));
    }

    #[test]
    fn cache_budget_is_three_quarters_of_an_l2() {
        let m = cached_footprint_max();
        // 3/4 of a power-of-two or 1.25/1.5/2.5 MiB L2, in whole KiB, within what exists.
        assert!((96 * 1024..=48 * 1024 * 1024).contains(&m), "{m}");
        assert_eq!(m % 768, 0, "{m}");
        assert_eq!(cached_footprint_max(), m);
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
        let kernels: [(&str, Gen); 4] = [
            ("ssse3", ssse3::gen_with_stores),
            ("avx2", avx2::gen_with_stores),
            ("avx512bw", avx512bw::gen_with_stores),
            ("gfni", gfni::gen_with_stores),
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
