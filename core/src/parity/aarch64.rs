//! aarch64 NEON kernel (16-byte vectors), the same algorithm as the x86-64 ones: Q by Horner's
//! rule with a vector multiply-by-{02}, multiplication by a constant through split-nibble tables
//! looked up with `tbl` (`vqtbl1q_u8`). NEON is part of the baseline of every aarch64 target
//! raidcore builds for with an OS; a target without it gets only the portable kernel.

pub(in crate::parity) mod neon {
    use core::arch::aarch64::{
        uint8x16_t, vaddq_u8, vandq_u8, vcltzq_s8, vdupq_n_u8, veorq_u8, vld1q_u8, vqtbl1q_u8,
        vreinterpretq_s8_u8, vshrq_n_u8, vst1q_u8,
    };

    use super::super::portable;
    use crate::gf256;

    const W: usize = 16;
    const U: usize = 4;
    const B: usize = W * U;

    type V = uint8x16_t;
    type Block = [V; U];

    #[inline]
    #[target_feature(enable = "neon")]
    fn zero() -> V {
        vdupq_n_u8(0)
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn ld(s: &[u8; W]) -> V {
        // SAFETY: `s` is 16 readable bytes; `ld1` has no alignment need.
        unsafe { vld1q_u8(s.as_ptr()) }
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn st(d: &mut [u8; W], v: V) {
        // SAFETY: `d` is 16 writable bytes; `st1` has no alignment need.
        unsafe { vst1q_u8(d.as_mut_ptr(), v) }
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn get(s: &[u8], o: usize) -> Option<Block> {
        let (chunks, _) = s.get(o..o + B)?.as_chunks::<W>();
        let mut v = [zero(); U];
        for (x, ch) in v.iter_mut().zip(chunks) {
            *x = ld(ch);
        }
        Some(v)
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn put(out: &mut [u8], o: usize, v: &Block) {
        if let Some(d) = out.get_mut(o..o + B) {
            let (chunks, _) = d.as_chunks_mut::<W>();
            for (ch, x) in chunks.iter_mut().zip(v) {
                st(ch, *x);
            }
        }
    }

    /// v·{02} in every byte.
    #[inline]
    #[target_feature(enable = "neon")]
    fn xtime(v: V) -> V {
        let high = vcltzq_s8(vreinterpretq_s8_u8(v));
        veorq_u8(vaddq_u8(v, v), vandq_u8(high, vdupq_n_u8(0x1d)))
    }

    #[derive(Clone, Copy)]
    struct Tab {
        lo: V,
        hi: V,
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn tab(c: u8) -> Tab {
        let (lo, hi) = gf256::nibble_tables(c);
        Tab {
            lo: ld(&lo),
            hi: ld(&hi),
        }
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn mul(t: Tab, v: V) -> V {
        let l = vandq_u8(v, vdupq_n_u8(0x0f));
        let h = vshrq_n_u8::<4>(v);
        veorq_u8(vqtbl1q_u8(t.lo, l), vqtbl1q_u8(t.hi, h))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    fn syndromes<C: AsRef<[u8]>>(srcs: &[C], o: usize) -> (Block, Block) {
        let mut p = [zero(); U];
        let mut q = [zero(); U];
        for c in srcs.iter().rev() {
            for x in &mut q {
                *x = xtime(*x);
            }
            if let Some(s) = c.as_ref().get(o..o + B) {
                let (chunks, _) = s.as_chunks::<W>();
                for ((pv, qv), ch) in p.iter_mut().zip(q.iter_mut()).zip(chunks) {
                    let d = ld(ch);
                    *pv = veorq_u8(*pv, d);
                    *qv = veorq_u8(*qv, d);
                }
            }
        }
        (p, q)
    }

    #[target_feature(enable = "neon")]
    fn xor_impl<C: AsRef<[u8]>>(srcs: &[C], off: usize, out: &mut [u8]) -> usize {
        let len = out.len() / B * B;
        let mut o = 0;
        while o < len {
            let mut acc = [zero(); U];
            for c in srcs {
                if let Some(s) = c.as_ref().get(off + o..off + o + B) {
                    let (chunks, _) = s.as_chunks::<W>();
                    for (a, ch) in acc.iter_mut().zip(chunks) {
                        *a = veorq_u8(*a, ld(ch));
                    }
                }
            }
            put(out, o, &acc);
            o += B;
        }
        len
    }

    #[target_feature(enable = "neon")]
    fn pq_impl<C: AsRef<[u8]>>(
        srcs: &[C],
        off: usize,
        mut p: Option<&mut [u8]>,
        q: &mut [u8],
    ) -> usize {
        let len = q.len() / B * B;
        let mut o = 0;
        while o < len {
            let (vp, vq) = syndromes(srcs, off + o);
            if let Some(p) = p.as_deref_mut() {
                put(p, o, &vp);
            }
            put(q, o, &vq);
            o += B;
        }
        len
    }

    #[target_feature(enable = "neon")]
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
            let sq = get(q_stored, off + o).unwrap_or([zero(); U]);
            for (x, s) in vq.iter_mut().zip(sq) {
                *x = mul(t, veorq_u8(*x, s));
            }
            put(out, o, &vq);
            o += B;
        }
        len
    }

    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "neon")]
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
            let sp = get(p_stored, off + o).unwrap_or([zero(); U]);
            let sq = get(q_stored, off + o).unwrap_or([zero(); U]);
            for (((pv, qv), s), t) in vp.iter_mut().zip(vq.iter_mut()).zip(sp).zip(sq) {
                let pd = veorq_u8(*pv, s);
                let x = veorq_u8(mul(ta, pd), mul(tb, veorq_u8(*qv, t)));
                *qv = x;
                *pv = veorq_u8(pd, x);
            }
            put(dx, o, &vq);
            put(dy, o, &vp);
            o += B;
        }
        len
    }

    // Reached only through `dispatch!` with a NEON `Kernel`, which `Kernel::supported` offers
    // only when the target has NEON: the proof every `unsafe` call below relies on.

    pub(in crate::parity) fn xor<C: AsRef<[u8]>>(srcs: &[C], off: usize, out: &mut [u8]) {
        // SAFETY: the CPU has NEON (see above).
        let done = unsafe { xor_impl(srcs, off, out) };
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
        // SAFETY: the CPU has NEON (see above).
        let done = unsafe { pq_impl(srcs, off, p.as_deref_mut(), q) };
        if let Some(tail) = q.get_mut(done..) {
            portable::pq(srcs, off + done, p.and_then(|p| p.get_mut(done..)), tail);
        }
    }

    pub(in crate::parity) fn from_q<C: AsRef<[u8]>>(
        srcs: &[C],
        off: usize,
        q_stored: &[u8],
        c: u8,
        out: &mut [u8],
    ) {
        // SAFETY: the CPU has NEON (see above).
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
        // SAFETY: the CPU has NEON (see above).
        let done = unsafe { two_impl(srcs, off, p_stored, q_stored, a, b, dx, dy) };
        if let (Some(tx), Some(ty)) = (dx.get_mut(done..), dy.get_mut(done..)) {
            portable::two(srcs, off + done, p_stored, q_stored, a, b, tx, ty);
        }
    }
}
