//! The portable kernel: 64-byte lanes of eight `u64` words, disks in the inner loop. Every target
//! has it, and the SIMD kernels hand it the bytes past their last whole vector block.
//!
//! Conventions shared by every kernel (the callers in `mod.rs` check shapes first): the output
//! slices give the length; sources are read at `off..off + len`; a source shorter than that (the
//! erased columns, left empty) counts as all zero bytes.

use crate::gf256;

const LANE_WORDS: usize = 8;
const LANE_BYTES: usize = LANE_WORDS * 8;

type Lane = [u64; LANE_WORDS];

/// Loads `words` words of `s` at byte `o` into `out`; `false` (and `out` untouched) when `s`
/// does not hold them, which is how erased columns read as zero.
#[inline]
fn load(s: &[u8], o: usize, words: usize, out: &mut Lane) -> bool {
    let Some(bytes) = s.get(o..o + words * 8) else {
        return false;
    };
    for (v, ch) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        *v = u64::from_le_bytes(ch.try_into().unwrap_or([0; 8]));
    }
    true
}

#[inline]
fn store(s: &mut [u8], o: usize, words: usize, v: &Lane) {
    if let Some(bytes) = s.get_mut(o..o + words * 8) {
        for (ch, x) in bytes.chunks_exact_mut(8).zip(v.iter()) {
            ch.copy_from_slice(&x.to_le_bytes());
        }
    }
}

/// (offset, words) of each lane of a `len`-byte strip.
fn lanes(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len)
        .step_by(LANE_BYTES)
        .map(move |o| (o, (len - o).min(LANE_BYTES) / 8))
}

/// P and Q over one lane. Horner's rule from the highest index: q = q·g ⊕ D_i.
// Out of line: LLVM's choice to inline it into its three callers flips with unrelated changes
// elsewhere and costs 2.9 KB of Cortex-M flash.
#[inline(never)]
fn lane_syndromes<C: AsRef<[u8]>>(srcs: &[C], o: usize, words: usize) -> (Lane, Lane) {
    let mut p = [0u64; LANE_WORDS];
    let mut q = [0u64; LANE_WORDS];
    let mut d = [0u64; LANE_WORDS];
    for c in srcs.iter().rev() {
        for qw in q.iter_mut().take(words) {
            *qw = gf256::mul2_u64(*qw);
        }
        if load(c.as_ref(), o, words, &mut d) {
            for ((pw, qw), dw) in p.iter_mut().zip(q.iter_mut()).zip(d.iter()).take(words) {
                *pw ^= dw;
                *qw ^= dw;
            }
        }
    }
    (p, q)
}

/// `out` := XOR of the sources.
pub(super) fn xor<C: AsRef<[u8]>>(srcs: &[C], off: usize, out: &mut [u8]) {
    let mut d = [0u64; LANE_WORDS];
    for (o, words) in lanes(out.len()) {
        let mut acc = [0u64; LANE_WORDS];
        for s in srcs {
            if load(s.as_ref(), off + o, words, &mut d) {
                for (a, dw) in acc.iter_mut().zip(d.iter()).take(words) {
                    *a ^= dw;
                }
            }
        }
        store(out, o, words, &acc);
    }
}

/// `p` (if given) := XOR of the sources, `q` := Σ g^i·src_i.
pub(super) fn pq<C: AsRef<[u8]>>(srcs: &[C], off: usize, mut p: Option<&mut [u8]>, q: &mut [u8]) {
    for (o, words) in lanes(q.len()) {
        let (lp, lq) = lane_syndromes(srcs, off + o, words);
        if let Some(p) = p.as_deref_mut() {
            store(p, o, words, &lp);
        }
        store(q, o, words, &lq);
    }
}

/// `out` := c·(Q(srcs) ⊕ q_stored).
pub(super) fn from_q<C: AsRef<[u8]>>(
    srcs: &[C],
    off: usize,
    q_stored: &[u8],
    c: u8,
    out: &mut [u8],
) {
    let t = gf256::mul_table(c);
    let mut sq = [0u64; LANE_WORDS];
    for (o, words) in lanes(out.len()) {
        let (_, lq) = lane_syndromes(srcs, off + o, words);
        load(q_stored, off + o, words, &mut sq);
        let mut r = [0u64; LANE_WORDS];
        for ((rw, qw), sw) in r.iter_mut().zip(lq.iter()).zip(sq.iter()).take(words) {
            *rw = mul_word(&t, qw ^ sw);
        }
        store(out, o, words, &r);
    }
}

/// `dx` := a·(P(srcs) ⊕ p_stored) ⊕ b·(Q(srcs) ⊕ q_stored), `dy` := (P(srcs) ⊕ p_stored) ⊕ dx.
#[allow(clippy::too_many_arguments)]
pub(super) fn two<C: AsRef<[u8]>>(
    srcs: &[C],
    off: usize,
    p_stored: &[u8],
    q_stored: &[u8],
    a: u8,
    b: u8,
    dx: &mut [u8],
    dy: &mut [u8],
) {
    let ta = gf256::mul_table(a);
    let tb = gf256::mul_table(b);
    let mut sp = [0u64; LANE_WORDS];
    let mut sq = [0u64; LANE_WORDS];
    for (o, words) in lanes(dx.len()) {
        let (lp, lq) = lane_syndromes(srcs, off + o, words);
        load(p_stored, off + o, words, &mut sp);
        load(q_stored, off + o, words, &mut sq);
        let mut rx = [0u64; LANE_WORDS];
        let mut ry = [0u64; LANE_WORDS];
        let outs = rx.iter_mut().zip(ry.iter_mut());
        let ins = lp.iter().zip(lq.iter()).zip(sp.iter().zip(sq.iter()));
        for ((xw, yw), ((pw, qw), (spw, sqw))) in outs.zip(ins).take(words) {
            let pd = pw ^ spw;
            *xw = mul_word(&ta, pd) ^ mul_word(&tb, qw ^ sqw);
            *yw = pd ^ *xw;
        }
        store(dx, o, words, &rx);
        store(dy, o, words, &ry);
    }
}

/// Multiplies the eight bytes of `v` by the constant whose table is `t`.
#[inline]
fn mul_word(t: &[u8; 256], v: u64) -> u64 {
    let mut b = v.to_le_bytes();
    for x in &mut b {
        // A u8 index into a 256-entry table.
        *x = t.get(*x as usize).copied().unwrap_or(0);
    }
    u64::from_le_bytes(b)
}
