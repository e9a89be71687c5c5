//! P and Q parity over the data strips of a stripe, and every recovery case of RAID-5 and RAID-6.
//!
//! P = D_0 ⊕ D_1 ⊕ … ⊕ D_{n-1};  Q = g^0·D_0 ⊕ g^1·D_1 ⊕ … ⊕ g^{n-1}·D_{n-1} in GF(2^8) with
//! g = {02} and polynomial 0x11d ([`crate::gf256`]). This is bit for bit the parity of Linux md
//! RAID-6 and Intel ISA-L `pq_gen`.
//!
//! Recovery follows H. Peter Anvin, "The mathematics of RAID-6": one data strip from P; one data
//! strip and P from Q (D_x = (Q ⊕ Q_x)·g^{-x}); one data strip and Q from P; two data strips x < y
//! from P and Q (D_x = A·(P ⊕ P_xy) ⊕ B·(Q ⊕ Q_xy), D_y = (P ⊕ P_xy) ⊕ D_x with
//! A = g^{y-x}/(g^{y-x} ⊕ 1), B = g^{-x}/(g^{y-x} ⊕ 1)); P and/or Q by recomputation.
//!
//! ## Shapes
//! Every strip of one call has the same length, a non-zero multiple of [`STRIP_ALIGN`] (8) bytes;
//! there are 1 to [`MAX_DATA_STRIPS`] data strips. Buffers need no memory alignment. Nothing
//! here allocates; intermediate syndromes are built in the output buffers themselves.
//!
//! The kernel is portable: 64-byte lanes of eight `u64` words with the disks in the inner loop,
//! which compilers vectorise on targets that have vectors.
// Indexing below is on offsets < the strip length checked by `check_shapes` at every entry
// point, and on column indices < `columns.len()` checked there too.
#![allow(clippy::indexing_slicing)]

use crate::gf256;

/// Strip lengths must be a multiple of this many bytes.
pub const STRIP_ALIGN: usize = 8;

/// Most data strips one stripe may have (Q needs a distinct g^i per strip, and 255 is g's order).
pub const MAX_DATA_STRIPS: usize = 255;

const LANE_WORDS: usize = 8;
const LANE_BYTES: usize = LANE_WORDS * 8;

/// Why a parity call was refused. Nothing was written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ParityError {
    /// Strips differ in length, or a length is zero or not a multiple of [`STRIP_ALIGN`].
    Length,
    /// No data strips, more than [`MAX_DATA_STRIPS`], or a column count that does not match the
    /// scheme.
    StripCount,
    /// More erasures than the scheme tolerates, a repeated index, or an index past the last
    /// column.
    Erasures,
}

impl core::fmt::Display for ParityError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ParityError::Length => "strip lengths differ or are not a non-zero multiple of 8 bytes",
            ParityError::StripCount => "wrong number of strips for the parity scheme",
            ParityError::Erasures => "erasure set not recoverable by the parity scheme",
        })
    }
}

/// Which parity a stripe carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Scheme {
    /// P only (RAID-5): columns are D_0..D_{n-1}, P. Tolerates one erasure.
    P,
    /// P and Q (RAID-6): columns are D_0..D_{n-1}, P, Q. Tolerates two erasures.
    PQ,
}

impl Scheme {
    /// Number of parity columns (1 or 2).
    #[must_use]
    pub const fn parity_columns(self) -> usize {
        match self {
            Scheme::P => 1,
            Scheme::PQ => 2,
        }
    }
}

/// What [`check`] found when comparing stored parity with parity recomputed from the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CheckResult {
    /// Stored P (and Q) equal the recomputed ones.
    Consistent,
    /// They differ. `p_bad`/`q_bad` say which stored parity differs somewhere; `suspect` is the one
    /// column whose corruption explains every difference, when there is exactly one such column
    /// (RAID-6 can name a data column by the syndrome ratio Q'/P' = g^z; RAID-5 only P itself).
    Mismatch {
        /// Stored P differs from the recomputed P in at least one byte.
        p_bad: bool,
        /// Stored Q differs from the recomputed Q in at least one byte (always false for RAID-5).
        q_bad: bool,
        /// The single column (data index, or `n` for P, `n + 1` for Q) that explains all
        /// differences, if one does.
        suspect: Option<usize>,
    },
}

fn check_len(len: usize) -> Result<(), ParityError> {
    if len == 0 || !len.is_multiple_of(STRIP_ALIGN) {
        return Err(ParityError::Length);
    }
    Ok(())
}

fn check_count(n: usize) -> Result<(), ParityError> {
    if n == 0 || n > MAX_DATA_STRIPS {
        return Err(ParityError::StripCount);
    }
    Ok(())
}

#[inline]
fn load(s: &[u8], o: usize, words: usize, out: &mut [u64; LANE_WORDS]) {
    for (w, v) in out.iter_mut().enumerate().take(words) {
        let b = o + w * 8;
        let mut a = [0u8; 8];
        a.copy_from_slice(&s[b..b + 8]);
        *v = u64::from_le_bytes(a);
    }
}

#[inline]
fn store(s: &mut [u8], o: usize, words: usize, v: &[u64; LANE_WORDS]) {
    for (w, x) in v.iter().enumerate().take(words) {
        let b = o + w * 8;
        s[b..b + 8].copy_from_slice(&x.to_le_bytes());
    }
}

/// P and Q over one lane (bytes `o..o + 8*words`) of the data columns `0..n`, treating the columns
/// in `skip` as zero. Horner's rule from the highest index: q = q·g ⊕ D_i.
#[inline]
fn lane_syndromes<C: AsRef<[u8]>>(
    cols: &[C],
    n: usize,
    skip: &[usize],
    o: usize,
    words: usize,
) -> ([u64; LANE_WORDS], [u64; LANE_WORDS]) {
    let mut p = [0u64; LANE_WORDS];
    let mut q = [0u64; LANE_WORDS];
    let mut d = [0u64; LANE_WORDS];
    for i in (0..n).rev() {
        for qw in q.iter_mut().take(words) {
            *qw = gf256::mul2_u64(*qw);
        }
        if skip.contains(&i) {
            continue;
        }
        load(cols[i].as_ref(), o, words, &mut d);
        for w in 0..words {
            p[w] ^= d[w];
            q[w] ^= d[w];
        }
    }
    (p, q)
}

fn lanes(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len)
        .step_by(LANE_BYTES)
        .map(move |o| (o, (len - o).min(LANE_BYTES) / 8))
}

/// Computes P over `data` into `p`.
///
/// `data`: 1 to [`MAX_DATA_STRIPS`] strips; `p` and every strip of one length, a non-zero multiple
/// of 8 bytes.
pub fn gen_p(data: &[&[u8]], p: &mut [u8]) -> Result<(), ParityError> {
    check_count(data.len())?;
    let len = p.len();
    check_len(len)?;
    if data.iter().any(|d| d.len() != len) {
        return Err(ParityError::Length);
    }
    let mut d = [0u64; LANE_WORDS];
    for (o, words) in lanes(len) {
        let mut acc = [0u64; LANE_WORDS];
        for s in data {
            load(s, o, words, &mut d);
            for w in 0..words {
                acc[w] ^= d[w];
            }
        }
        store(p, o, words, &acc);
    }
    Ok(())
}

/// Computes P and Q over `data` into `p` and `q` (ISA-L `pq_gen`, md `gen_syndrome`).
///
/// Shapes as for [`gen_p`]; `q` has the same length as `p`.
pub fn gen_pq(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) -> Result<(), ParityError> {
    check_count(data.len())?;
    let len = p.len();
    check_len(len)?;
    if q.len() != len || data.iter().any(|d| d.len() != len) {
        return Err(ParityError::Length);
    }
    for (o, words) in lanes(len) {
        let (lp, lq) = lane_syndromes(data, data.len(), &[], o, words);
        store(p, o, words, &lp);
        store(q, o, words, &lq);
    }
    Ok(())
}

/// Compares stored parity with parity recomputed from the data (the scrub primitive), without
/// changing anything. `columns` as for [`reconstruct`].
pub fn check(columns: &[&[u8]], scheme: Scheme) -> Result<CheckResult, ParityError> {
    let n = data_count(columns.len(), scheme)?;
    let len = columns[0].len();
    check_len(len)?;
    if columns.iter().any(|c| c.len() != len) {
        return Err(ParityError::Length);
    }
    let mut p_bad = false;
    let mut q_bad = false;
    // The data column every differing byte points at; `None` once two bytes disagree.
    let mut suspect: Option<Option<usize>> = None;
    let mut sp = [0u64; LANE_WORDS];
    let mut sq = [0u64; LANE_WORDS];
    for (o, words) in lanes(len) {
        let (lp, lq) = lane_syndromes(columns, n, &[], o, words);
        load(columns[n], o, words, &mut sp);
        if scheme == Scheme::PQ {
            load(columns[n + 1], o, words, &mut sq);
        }
        for w in 0..words {
            let dp = (lp[w] ^ sp[w]).to_le_bytes();
            let dq = if scheme == Scheme::PQ { (lq[w] ^ sq[w]).to_le_bytes() } else { [0; 8] };
            for (bp, bq) in dp.iter().zip(dq.iter()) {
                let here = match (*bp != 0, *bq != 0) {
                    (false, false) => continue,
                    (true, false) => Some(n),
                    (false, true) => Some(n + 1),
                    (true, true) => {
                        // A data byte D_z off by e makes P' = e and Q' = g^z·e.
                        let z = (gf256::LOG[*bq as usize] as usize + 255
                            - gf256::LOG[*bp as usize] as usize)
                            % 255;
                        (z < n).then_some(z)
                    }
                };
                p_bad |= *bp != 0;
                q_bad |= *bq != 0;
                suspect = match suspect {
                    None => Some(here),
                    Some(s) if s == here => Some(s),
                    Some(_) => Some(None),
                };
            }
        }
    }
    Ok(match suspect {
        None => CheckResult::Consistent,
        Some(s) => CheckResult::Mismatch {
            p_bad,
            q_bad,
            // RAID-5 cannot tell a bad data byte from a bad P byte.
            suspect: if scheme == Scheme::P { None } else { s },
        },
    })
}

fn data_count(columns: usize, scheme: Scheme) -> Result<usize, ParityError> {
    let n = columns
        .checked_sub(scheme.parity_columns())
        .ok_or(ParityError::StripCount)?;
    check_count(n)?;
    Ok(n)
}

/// Recomputes the `erased` columns of a stripe in place from the others.
///
/// `columns`: the data strips D_0..D_{n-1}, then P, then (for [`Scheme::PQ`]) Q, all of one
/// length (a non-zero multiple of 8 bytes). `erased`: distinct column indices, at most one for
/// [`Scheme::P`] and two for [`Scheme::PQ`]; the content of erased columns on entry is ignored.
/// An empty `erased` does nothing. On error nothing is written.
pub fn reconstruct(
    columns: &mut [&mut [u8]],
    scheme: Scheme,
    erased: &[usize],
) -> Result<(), ParityError> {
    let n = data_count(columns.len(), scheme)?;
    let len = columns[0].len();
    check_len(len)?;
    if columns.iter().any(|c| c.len() != len) {
        return Err(ParityError::Length);
    }
    let mut e: heapless::Vec<usize, 2> = heapless::Vec::new();
    for &x in erased {
        if x >= columns.len() || e.contains(&x) || e.push(x).is_err() {
            return Err(ParityError::Erasures);
        }
    }
    if e.len() > scheme.parity_columns() {
        return Err(ParityError::Erasures);
    }
    e.sort_unstable();
    let p_col = n;
    let q_col = n + 1;
    match (scheme, e.as_slice()) {
        (_, []) => {}
        // Any data strip, or P, from the others by XOR; then Q if it was lost too.
        (Scheme::P, [x]) => recompute_p_or_data(columns, n, *x),
        (Scheme::PQ, [x]) if *x < n || *x == p_col => {
            recompute_p_or_data(columns, n, *x);
        }
        (Scheme::PQ, [_q]) => recompute_q(columns, n),
        (Scheme::PQ, [x, y]) if *x == p_col && *y == q_col => {
            recompute_p_or_data(columns, n, p_col);
            recompute_q(columns, n);
        }
        (Scheme::PQ, [x, y]) if *x < n && *y == q_col => {
            recompute_p_or_data(columns, n, *x);
            recompute_q(columns, n);
        }
        (Scheme::PQ, [x, y]) if *x < n && *y == p_col => {
            recover_data_from_q(columns, n, *x)?;
            recompute_p_or_data(columns, n, p_col);
        }
        (Scheme::PQ, [x, y]) => recover_two_data(columns, n, *x, *y)?,
        _ => return Err(ParityError::Erasures),
    }
    Ok(())
}

/// Column `target` (a data column or P) := XOR of all the other columns among D_0..D_{n-1}, P.
fn recompute_p_or_data(columns: &mut [&mut [u8]], n: usize, target: usize) {
    let len = columns[0].len();
    let mut d = [0u64; LANE_WORDS];
    for (o, words) in lanes(len) {
        let mut acc = [0u64; LANE_WORDS];
        for (i, c) in columns.iter().enumerate().take(n + 1) {
            if i == target {
                continue;
            }
            load(c, o, words, &mut d);
            for w in 0..words {
                acc[w] ^= d[w];
            }
        }
        store(columns[target], o, words, &acc);
    }
}

/// Q := syndrome of the data columns.
fn recompute_q(columns: &mut [&mut [u8]], n: usize) {
    let len = columns[0].len();
    for (o, words) in lanes(len) {
        let (_, lq) = lane_syndromes(columns, n, &[], o, words);
        store(columns[n + 1], o, words, &lq);
    }
}

/// D_x and P lost: Q_x = Q with D_x taken as zero, D_x = (Q ⊕ Q_x)·g^{-x}.
fn recover_data_from_q(columns: &mut [&mut [u8]], n: usize, x: usize) -> Result<(), ParityError> {
    let len = columns[0].len();
    let ginv = gf256::inv(gf256::exp(x)).ok_or(ParityError::Erasures)?;
    let t = gf256::mul_table(ginv);
    let mut sq = [0u64; LANE_WORDS];
    for (o, words) in lanes(len) {
        let (_, lq) = lane_syndromes(columns, n, &[x], o, words);
        load(columns[n + 1], o, words, &mut sq);
        let mut out = [0u64; LANE_WORDS];
        for w in 0..words {
            out[w] = mul_word(&t, lq[w] ^ sq[w]);
        }
        store(columns[x], o, words, &out);
    }
    Ok(())
}

/// D_x and D_y (x < y) lost: from P_xy, Q_xy (syndromes with both taken as zero).
fn recover_two_data(
    columns: &mut [&mut [u8]],
    n: usize,
    x: usize,
    y: usize,
) -> Result<(), ParityError> {
    let len = columns[0].len();
    // g^{y-x} ⊕ 1 is never 0 for 0 < y-x < 255.
    let gyx = gf256::exp(y - x);
    let denom = gf256::inv(gyx ^ 1).ok_or(ParityError::Erasures)?;
    let a = gf256::mul(gyx, denom);
    let gx_inv = gf256::inv(gf256::exp(x)).ok_or(ParityError::Erasures)?;
    let b = gf256::mul(gx_inv, denom);
    let ta = gf256::mul_table(a);
    let tb = gf256::mul_table(b);
    let mut sp = [0u64; LANE_WORDS];
    let mut sq = [0u64; LANE_WORDS];
    for (o, words) in lanes(len) {
        let (lp, lq) = lane_syndromes(columns, n, &[x, y], o, words);
        load(columns[n], o, words, &mut sp);
        load(columns[n + 1], o, words, &mut sq);
        let mut dx = [0u64; LANE_WORDS];
        let mut dy = [0u64; LANE_WORDS];
        for w in 0..words {
            let pd = lp[w] ^ sp[w];
            let qd = lq[w] ^ sq[w];
            dx[w] = mul_word(&ta, pd) ^ mul_word(&tb, qd);
            dy[w] = pd ^ dx[w];
        }
        store(columns[x], o, words, &dx);
        store(columns[y], o, words, &dy);
    }
    Ok(())
}

#[inline]
fn mul_word(t: &[u8; 256], v: u64) -> u64 {
    let mut b = v.to_le_bytes();
    for x in &mut b {
        *x = t[*x as usize];
    }
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{vec, vec::Vec};

    fn fill(seed: u64, buf: &mut [u8]) {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for b in buf {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        }
    }

    /// Byte-at-a-time reference straight from the definition.
    fn reference_pq(data: &[Vec<u8>]) -> (Vec<u8>, Vec<u8>) {
        let len = data[0].len();
        let mut p = vec![0u8; len];
        let mut q = vec![0u8; len];
        for (i, d) in data.iter().enumerate() {
            let g = gf256::exp(i);
            for k in 0..len {
                p[k] ^= d[k];
                q[k] ^= gf256::mul(g, d[k]);
            }
        }
        (p, q)
    }

    #[test]
    fn pq_matches_definition() {
        for n in [1usize, 2, 3, 5, 16, 30] {
            for len in [8usize, 64, 72, 4096] {
                let data: Vec<Vec<u8>> = (0..n)
                    .map(|i| {
                        let mut v = vec![0; len];
                        fill((n * 1000 + i) as u64, &mut v);
                        v
                    })
                    .collect();
                let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
                let (mut p, mut q) = (vec![0; len], vec![0; len]);
                gen_pq(&refs, &mut p, &mut q).unwrap();
                let (rp, rq) = reference_pq(&data);
                assert_eq!(p, rp, "P n={n} len={len}");
                assert_eq!(q, rq, "Q n={n} len={len}");
                let mut p2 = vec![0; len];
                gen_p(&refs, &mut p2).unwrap();
                assert_eq!(p2, rp);
            }
        }
    }

    #[test]
    fn every_pq_erasure_pair_recovers() {
        let n = 6;
        let len = 136;
        let mut cols: Vec<Vec<u8>> = (0..n + 2)
            .map(|i| {
                let mut v = vec![0; len];
                fill(i as u64 + 77, &mut v);
                v
            })
            .collect();
        {
            let (d, pq) = cols.split_at_mut(n);
            let refs: Vec<&[u8]> = d.iter().map(Vec::as_slice).collect();
            let (p, q) = pq.split_at_mut(1);
            gen_pq(&refs, &mut p[0], &mut q[0]).unwrap();
        }
        let refs: Vec<&[u8]> = cols.iter().map(Vec::as_slice).collect();
        assert_eq!(check(&refs, Scheme::PQ), Ok(CheckResult::Consistent));
        for x in 0..n + 2 {
            for y in x..n + 2 {
                let mut work = cols.clone();
                work[x].fill(0xa5);
                work[y].fill(0x5a);
                let erased: Vec<usize> = if x == y { vec![x] } else { vec![x, y] };
                let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
                reconstruct(&mut m, Scheme::PQ, &erased).unwrap();
                assert_eq!(work, cols, "erased {erased:?}");
            }
        }
    }

    #[test]
    fn check_locates_one_bad_column() {
        let n = 5;
        let len = 64;
        let mut cols: Vec<Vec<u8>> = (0..n + 2)
            .map(|i| {
                let mut v = vec![0; len];
                fill(i as u64 + 3, &mut v);
                v
            })
            .collect();
        let mut m: Vec<&mut [u8]> = cols.iter_mut().map(Vec::as_mut_slice).collect();
        reconstruct(&mut m, Scheme::PQ, &[n, n + 1]).unwrap();
        for bad in 0..n + 2 {
            let mut c = cols.clone();
            c[bad][9] ^= 0x41;
            c[bad][40] ^= 0x03;
            let refs: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            match check(&refs, Scheme::PQ).unwrap() {
                CheckResult::Mismatch { suspect, .. } => assert_eq!(suspect, Some(bad)),
                CheckResult::Consistent => panic!("corruption of column {bad} not seen"),
            }
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        let a = [0u8; 16];
        let b = [0u8; 24];
        let mut p = [0u8; 16];
        assert_eq!(gen_p(&[&a, &b], &mut p), Err(ParityError::Length));
        assert_eq!(gen_p(&[], &mut p), Err(ParityError::StripCount));
        let mut odd = [0u8; 12];
        assert_eq!(gen_p(&[&odd.clone()], &mut odd), Err(ParityError::Length));
        let mut c0 = [0u8; 16];
        let mut c1 = [0u8; 16];
        let mut c2 = [0u8; 16];
        let mut m: [&mut [u8]; 3] = [&mut c0, &mut c1, &mut c2];
        assert_eq!(reconstruct(&mut m, Scheme::P, &[0, 1]), Err(ParityError::Erasures));
        assert_eq!(reconstruct(&mut m, Scheme::P, &[3]), Err(ParityError::Erasures));
        assert_eq!(reconstruct(&mut m, Scheme::PQ, &[0, 0]), Err(ParityError::Erasures));
    }
}
