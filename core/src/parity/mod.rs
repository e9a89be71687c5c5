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
//! here allocates; intermediate syndromes are built in the output buffers themselves (and, for
//! [`check`], in two 512-byte stack buffers).
//!
//! ## Kernels
//! A [`Kernel`] is one implementation of the inner loops; all give identical bytes.
//! - portable (every target): 64-byte lanes of eight `u64` words with the disks in the inner loop,
//!   Q by Horner's rule with a word-wide multiply-by-{02} ("xtime"), which compilers vectorise
//!   where the target has vectors;
//! - x86-64 SSSE3 (16-byte) and AVX2 (32-byte): the same Horner loop on vector registers, and
//!   multiplication by a constant through split-nibble `pshufb` tables (c·v = T_lo\[v & 15\] ⊕
//!   T_hi\[v >> 4\]); parity outputs of 16 KiB or more are written with streaming (non-temporal)
//!   stores, as ISA-L does, which saves the read-for-ownership of every parity line when the
//!   stripe streams from memory, except into the output buffer the previous call wrote when the
//!   whole call fits in L2 (a reused parity scratch, which normal stores keep in cache);
//! - aarch64 NEON (16-byte): the same with `tbl` (`vqtbl1q_u8`).
//!
//! The plain functions ([`gen_pq`], [`reconstruct`], …) use [`Kernel::selected`]: the best
//! kernel the build target guarantees, or with feature `std` on x86-64 the best this CPU has
//! (detected once, then cached). The `*_with` forms take an explicit kernel, for tests and
//! benchmarks. Bytes past the last whole vector block go through the portable kernel.
//!
//! Building with `RUSTFLAGS="--cfg raidcore_force_portable"` leaves out every SIMD kernel (and
//! the hardware CRC-32C paths in [`crate::checksum`]): the portable kernel alone, as on a
//! Cortex-M, on any target. `core/footprint.sh` uses it to measure what the SIMD paths cost.
// Indexing below is on offsets < the strip length checked by `check_shapes` at every entry
// point, and on column indices < `columns.len()` checked there too.
#![allow(clippy::indexing_slicing)]

use crate::gf256;

mod portable;

#[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
mod x86;

#[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
mod aarch64;

/// Strip lengths must be a multiple of this many bytes.
pub const STRIP_ALIGN: usize = 8;

/// Most data strips one stripe may have (Q needs a distinct g^i per strip, and 255 is g's order).
pub const MAX_DATA_STRIPS: usize = 255;

/// Bytes [`check`] recomputes at a time into its stack buffers.
const CHECK_BLOCK: usize = 512;

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

impl core::error::Error for ParityError {}

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

/// One implementation of the parity inner loops. Only kernels this CPU can run can be obtained
/// (from [`Kernel::supported`], [`Kernel::selected`] or [`Kernel::PORTABLE`]), so every call
/// with one is sound.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Kernel(Id);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Id {
    Portable,
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    Ssse3,
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    Avx2,
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    Avx512bw,
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    Gfni,
    #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
    Neon,
}

impl core::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Kernel {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.name());
    }
}

impl Kernel {
    /// The portable kernel, available on every target.
    pub const PORTABLE: Kernel = Kernel(Id::Portable);

    /// Short name: `portable`, `ssse3`, `avx2`, `avx512bw`, `gfni` (AVX-512BW with GFNI) or
    /// `neon`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self.0 {
            Id::Portable => "portable",
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Ssse3 => "ssse3",
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Avx2 => "avx2",
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Avx512bw => "avx512bw",
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Gfni => "gfni",
            #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
            Id::Neon => "neon",
        }
    }

    /// Every kernel this CPU runs, slowest first (portable first, the one [`Kernel::selected`]
    /// picks last). Without feature `std` only what the build target guarantees.
    pub fn supported() -> impl Iterator<Item = Kernel> {
        [
            Some(Kernel::PORTABLE),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            x86::has_ssse3().then_some(Kernel(Id::Ssse3)),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            x86::has_avx2().then_some(Kernel(Id::Avx2)),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            x86::has_avx512bw().then_some(Kernel(Id::Avx512bw)),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            x86::has_gfni().then_some(Kernel(Id::Gfni)),
            #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
            cfg!(target_feature = "neon").then_some(Kernel(Id::Neon)),
        ]
        .into_iter()
        .flatten()
    }

    /// The kernel [`gen_pq`], [`reconstruct`] and the other plain functions use: the fastest of
    /// [`Kernel::supported`]. With feature `std` on x86-64 it is detected at the first call and
    /// cached in an atomic; otherwise it is fixed at compile time.
    #[must_use]
    pub fn selected() -> Kernel {
        #[cfg(all(
            all(target_arch = "x86_64", not(raidcore_force_portable)),
            any(feature = "std", test)
        ))]
        {
            use core::sync::atomic::AtomicU8;
            // Every x86-64 kernel, in the order of `supported()`.
            const ALL: [Id; 5] = [Id::Portable, Id::Ssse3, Id::Avx2, Id::Avx512bw, Id::Gfni];
            static CACHE: AtomicU8 = AtomicU8::new(0);
            Kernel(cached_choice(&CACHE, &ALL, || Self::best().0))
        }
        #[cfg(not(all(
            all(target_arch = "x86_64", not(raidcore_force_portable)),
            any(feature = "std", test)
        )))]
        Self::best()
    }

    fn best() -> Kernel {
        Self::supported().last().unwrap_or(Kernel::PORTABLE)
    }
}

/// The choice `detect` makes, made once: `cache` holds 0 until then, 1 + its index in `all`
/// after (a choice not in `all` is not cached). Shared by the parity kernels and the CRC-32C
/// paths ([`crate::checksum`]).
#[cfg(all(
    all(target_arch = "x86_64", not(raidcore_force_portable)),
    any(feature = "std", test)
))]
pub(crate) fn cached_choice<T: Copy + PartialEq>(
    cache: &core::sync::atomic::AtomicU8,
    all: &[T],
    detect: impl FnOnce() -> T,
) -> T {
    use core::sync::atomic::Ordering::Relaxed;
    // Relaxed: two threads that both detect store the same value.
    let code = usize::from(cache.load(Relaxed));
    if let Some(&c) = code.checked_sub(1).and_then(|i| all.get(i)) {
        return c;
    }
    let c = detect();
    if let Some(i) = all.iter().position(|&x| x == c) {
        cache.store(u8::try_from(i + 1).unwrap_or(0), Relaxed);
    }
    c
}

/// Calls the same inner-loop function of whichever kernel `$k` names.
macro_rules! dispatch {
    ($k:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $k.0 {
            Id::Portable => portable::$f($($arg),*),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Ssse3 => x86::ssse3::$f($($arg),*),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Avx2 => x86::avx2::$f($($arg),*),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Avx512bw => x86::avx512bw::$f($($arg),*),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            Id::Gfni => x86::gfni::$f($($arg),*),
            #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
            Id::Neon => aarch64::neon::$f($($arg),*),
        }
    };
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

/// Computes P over `data` into `p`.
///
/// `data`: 1 to [`MAX_DATA_STRIPS`] strips; `p` and every strip of one length, a non-zero multiple
/// of 8 bytes.
pub fn gen_p(data: &[&[u8]], p: &mut [u8]) -> Result<(), ParityError> {
    gen_p_with(Kernel::selected(), data, p)
}

/// [`gen_p`] with an explicit kernel.
pub fn gen_p_with(kernel: Kernel, data: &[&[u8]], p: &mut [u8]) -> Result<(), ParityError> {
    check_count(data.len())?;
    let len = p.len();
    check_len(len)?;
    if data.iter().any(|d| d.len() != len) {
        return Err(ParityError::Length);
    }
    dispatch!(kernel, xor(data, 0, p));
    Ok(())
}

/// Computes P and Q over `data` into `p` and `q` (ISA-L `pq_gen`, md `gen_syndrome`).
///
/// Shapes as for [`gen_p`]; `q` has the same length as `p`.
pub fn gen_pq(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) -> Result<(), ParityError> {
    gen_pq_with(Kernel::selected(), data, p, q)
}

/// [`gen_pq`] with an explicit kernel.
pub fn gen_pq_with(
    kernel: Kernel,
    data: &[&[u8]],
    p: &mut [u8],
    q: &mut [u8],
) -> Result<(), ParityError> {
    check_count(data.len())?;
    let len = p.len();
    check_len(len)?;
    if q.len() != len || data.iter().any(|d| d.len() != len) {
        return Err(ParityError::Length);
    }
    dispatch!(kernel, pq(data, 0, Some(p), q));
    Ok(())
}

/// Compares stored parity with parity recomputed from the data (the scrub primitive), without
/// changing anything. `columns` as for [`reconstruct`].
pub fn check(columns: &[&[u8]], scheme: Scheme) -> Result<CheckResult, ParityError> {
    check_with(Kernel::selected(), columns, scheme)
}

/// [`check`] with an explicit kernel.
pub fn check_with(
    kernel: Kernel,
    columns: &[&[u8]],
    scheme: Scheme,
) -> Result<CheckResult, ParityError> {
    let n = data_count(columns.len(), scheme)?;
    let len = columns[0].len();
    check_len(len)?;
    if columns.iter().any(|c| c.len() != len) {
        return Err(ParityError::Length);
    }
    let data = &columns[..n];
    let stored_p = columns[n];
    let stored_q: &[u8] = if scheme == Scheme::PQ {
        columns[n + 1]
    } else {
        &[]
    };
    let mut p_bad = false;
    let mut q_bad = false;
    // The column every differing byte points at; `None` once two bytes disagree.
    let mut suspect: Option<Option<usize>> = None;
    let mut bp = [0u8; CHECK_BLOCK];
    let mut bq = [0u8; CHECK_BLOCK];
    let mut o = 0;
    while o < len {
        let m = (len - o).min(CHECK_BLOCK);
        let (lp, lq) = (&mut bp[..m], &mut bq[..m]);
        let sp = &stored_p[o..o + m];
        let sq = stored_q.get(o..o + m).unwrap_or(&[]);
        let same = if scheme == Scheme::PQ {
            dispatch!(kernel, pq(data, o, Some(&mut *lp), &mut *lq));
            lp == sp && lq == sq
        } else {
            dispatch!(kernel, xor(data, o, &mut *lp));
            lp == sp
        };
        o += m;
        if same {
            continue;
        }
        // Rare: find which column explains the differing bytes.
        for k in 0..m {
            let dp = lp[k] ^ sp[k];
            let dq = sq.get(k).map_or(0, |s| lq[k] ^ s);
            let here = match (dp != 0, dq != 0) {
                (false, false) => continue,
                (true, false) => Some(n),
                (false, true) => Some(n + 1),
                (true, true) => {
                    // A data byte D_z off by e makes P' = e and Q' = g^z·e.
                    let z = (gf256::LOG[dq as usize] as usize + 255
                        - gf256::LOG[dp as usize] as usize)
                        % 255;
                    (z < n).then_some(z)
                }
            };
            p_bad |= dp != 0;
            q_bad |= dq != 0;
            suspect = match suspect {
                None => Some(here),
                Some(s) if s == here => Some(s),
                Some(_) => Some(None),
            };
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
    reconstruct_with(Kernel::selected(), columns, scheme, erased)
}

/// [`reconstruct`] with an explicit kernel.
pub fn reconstruct_with(
    kernel: Kernel,
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
    // Two at most: a swap, not a slice sort (several KB of flash on Cortex-M).
    if let [a, b] = e.as_mut_slice()
        && *a > *b
    {
        core::mem::swap(a, b);
    }
    let p_col = n;
    let q_col = n + 1;
    match (scheme, e.as_slice()) {
        (_, []) => {}
        // Any data strip, or P, from the others by XOR; then Q if it was lost too.
        (Scheme::P, [x]) => recompute_p_or_data(kernel, columns, n, *x),
        (Scheme::PQ, [x]) if *x < n || *x == p_col => {
            recompute_p_or_data(kernel, columns, n, *x);
        }
        (Scheme::PQ, [_q]) => recompute_q(kernel, columns, n),
        (Scheme::PQ, [x, y]) if *x == p_col && *y == q_col => {
            recompute_p_or_data(kernel, columns, n, p_col);
            recompute_q(kernel, columns, n);
        }
        (Scheme::PQ, [x, y]) if *x < n && *y == q_col => {
            recompute_p_or_data(kernel, columns, n, *x);
            recompute_q(kernel, columns, n);
        }
        (Scheme::PQ, [x, y]) if *x < n && *y == p_col => {
            recover_data_from_q(kernel, columns, n, *x)?;
            recompute_p_or_data(kernel, columns, n, p_col);
        }
        (Scheme::PQ, [x, y]) => recover_two_data(kernel, columns, n, *x, *y)?,
        _ => return Err(ParityError::Erasures),
    }
    Ok(())
}

// The recovery helpers below take the erased columns out of `columns` with `mem::take`, which
// leaves empty slices in their place: the kernels read an empty column as all zero bytes, which
// is exactly "the syndrome with D_x taken as zero". The columns are put back before returning.

/// Column `target` (a data column or P) := XOR of all the other columns among D_0..D_{n-1}, P.
fn recompute_p_or_data(kernel: Kernel, columns: &mut [&mut [u8]], n: usize, target: usize) {
    let out = core::mem::take(&mut columns[target]);
    dispatch!(kernel, xor(&columns[..=n], 0, &mut *out));
    columns[target] = out;
}

/// Q := syndrome of the data columns.
fn recompute_q(kernel: Kernel, columns: &mut [&mut [u8]], n: usize) {
    let out = core::mem::take(&mut columns[n + 1]);
    dispatch!(kernel, pq(&columns[..n], 0, None, &mut *out));
    columns[n + 1] = out;
}

/// D_x and P lost: Q_x = Q with D_x taken as zero, D_x = (Q ⊕ Q_x)·g^{-x}.
fn recover_data_from_q(
    kernel: Kernel,
    columns: &mut [&mut [u8]],
    n: usize,
    x: usize,
) -> Result<(), ParityError> {
    let ginv = gf256::inv(gf256::exp(x)).ok_or(ParityError::Erasures)?;
    let out = core::mem::take(&mut columns[x]);
    let (data, parity) = columns.split_at(n);
    dispatch!(kernel, from_q(data, 0, &*parity[1], ginv, &mut *out));
    columns[x] = out;
    Ok(())
}

/// D_x and D_y (x < y) lost: from P_xy, Q_xy (syndromes with both taken as zero).
fn recover_two_data(
    kernel: Kernel,
    columns: &mut [&mut [u8]],
    n: usize,
    x: usize,
    y: usize,
) -> Result<(), ParityError> {
    // g^{y-x} ⊕ 1 is never 0 for 0 < y-x < 255.
    let gyx = gf256::exp(y - x);
    let denom = gf256::inv(gyx ^ 1).ok_or(ParityError::Erasures)?;
    let a = gf256::mul(gyx, denom);
    let gx_inv = gf256::inv(gf256::exp(x)).ok_or(ParityError::Erasures)?;
    let b = gf256::mul(gx_inv, denom);
    let dx = core::mem::take(&mut columns[x]);
    let dy = core::mem::take(&mut columns[y]);
    let (data, parity) = columns.split_at(n);
    dispatch!(
        kernel,
        two(data, 0, &*parity[0], &*parity[1], a, b, &mut *dx, &mut *dy)
    );
    columns[x] = dx;
    columns[y] = dy;
    Ok(())
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
        for k in Kernel::supported() {
            for n in [1usize, 2, 3, 5, 16, 30] {
                // Around the 64-, 128- and 256-byte blocks of the SIMD kernels, with tails.
                for len in [8usize, 64, 72, 136, 248, 256, 264, 520, 4096, 4104] {
                    let data: Vec<Vec<u8>> = (0..n)
                        .map(|i| {
                            let mut v = vec![0; len];
                            fill((n * 1000 + i) as u64, &mut v);
                            v
                        })
                        .collect();
                    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
                    let (mut p, mut q) = (vec![0; len], vec![0; len]);
                    gen_pq_with(k, &refs, &mut p, &mut q).unwrap();
                    let (rp, rq) = reference_pq(&data);
                    assert_eq!(p, rp, "{k:?} P n={n} len={len}");
                    assert_eq!(q, rq, "{k:?} Q n={n} len={len}");
                    let mut p2 = vec![0; len];
                    gen_p_with(k, &refs, &mut p2).unwrap();
                    assert_eq!(p2, rp);
                }
            }
        }
    }

    #[test]
    fn every_pq_erasure_pair_recovers() {
        let n = 6;
        for k in Kernel::supported() {
            for len in [136, 4104] {
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
                    gen_pq_with(k, &refs, &mut p[0], &mut q[0]).unwrap();
                }
                let refs: Vec<&[u8]> = cols.iter().map(Vec::as_slice).collect();
                assert_eq!(
                    check_with(k, &refs, Scheme::PQ),
                    Ok(CheckResult::Consistent)
                );
                for x in 0..n + 2 {
                    for y in x..n + 2 {
                        let mut work = cols.clone();
                        work[x].fill(0xa5);
                        work[y].fill(0x5a);
                        let erased: Vec<usize> = if x == y { vec![x] } else { vec![x, y] };
                        let mut m: Vec<&mut [u8]> =
                            work.iter_mut().map(Vec::as_mut_slice).collect();
                        reconstruct_with(k, &mut m, Scheme::PQ, &erased).unwrap();
                        assert_eq!(work, cols, "{k:?} len {len} erased {erased:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn check_locates_one_bad_column() {
        let n = 5;
        for k in Kernel::supported() {
            let len = 1096;
            let mut cols: Vec<Vec<u8>> = (0..n + 2)
                .map(|i| {
                    let mut v = vec![0; len];
                    fill(i as u64 + 3, &mut v);
                    v
                })
                .collect();
            let mut m: Vec<&mut [u8]> = cols.iter_mut().map(Vec::as_mut_slice).collect();
            reconstruct_with(k, &mut m, Scheme::PQ, &[n, n + 1]).unwrap();
            for bad in 0..n + 2 {
                let mut c = cols.clone();
                c[bad][9] ^= 0x41;
                c[bad][700] ^= 0x03;
                c[bad][1090] ^= 0x80;
                let refs: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
                match check_with(k, &refs, Scheme::PQ).unwrap() {
                    CheckResult::Mismatch {
                        suspect,
                        p_bad,
                        q_bad,
                    } => {
                        assert_eq!(suspect, Some(bad), "{k:?}");
                        assert_eq!(p_bad, bad != n + 1);
                        assert_eq!(q_bad, bad != n);
                    }
                    CheckResult::Consistent => panic!("{k:?}: corruption of column {bad} not seen"),
                }
            }
        }
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    fn every_kernel_this_cpu_has_is_offered() {
        use std::is_x86_feature_detected as has;
        let names: Vec<&str> = Kernel::supported().map(Kernel::name).collect();
        assert_eq!(names[0], "portable");
        let expected = [
            ("ssse3", has!("ssse3")),
            ("avx2", has!("avx2")),
            ("avx512bw", has!("avx512bw")),
            ("gfni", has!("avx512bw") && has!("gfni")),
        ];
        for (name, cpu_has) in expected {
            assert_eq!(names.contains(&name), cpu_has, "{name}");
            if !cpu_has {
                std::println!("skipped: this CPU lacks what the {name} kernel needs");
            }
        }
    }

    /// Each kernel's multiplication by a constant (the recovery paths' only use of it) gives
    /// c·x for every c and x: `from_q` over no sources is c·Q_stored. 520 bytes: two 256-byte
    /// blocks and a tail.
    #[test]
    fn every_kernel_multiplies_by_every_constant() {
        let q: Vec<u8> = (0..520usize).map(|i| (i * 7 + i / 256) as u8).collect();
        let none: [&[u8]; 0] = [];
        for k in Kernel::supported() {
            let mut out = vec![0u8; q.len()];
            for c in 0..=255u8 {
                dispatch!(k, from_q(&none, 0, &q, c, &mut out));
                for (i, (&o, &x)) in out.iter().zip(&q).enumerate() {
                    assert_eq!(o, gf256::mul(c, x), "{k:?} {c:#04x}·{x:#04x} at {i}");
                }
            }
        }
    }

    #[test]
    #[cfg(all(
        all(target_arch = "aarch64", not(raidcore_force_portable)),
        target_feature = "neon"
    ))]
    fn neon_is_offered() {
        assert!(Kernel::supported().any(|k| k.name() == "neon"));
    }

    #[test]
    fn selected_is_the_last_supported() {
        assert_eq!(Some(Kernel::selected()), Kernel::supported().last());
        assert_eq!(Kernel::selected(), Kernel::selected());
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
        assert_eq!(
            reconstruct(&mut m, Scheme::P, &[0, 1]),
            Err(ParityError::Erasures)
        );
        assert_eq!(
            reconstruct(&mut m, Scheme::P, &[3]),
            Err(ParityError::Erasures)
        );
        assert_eq!(
            reconstruct(&mut m, Scheme::PQ, &[0, 0]),
            Err(ParityError::Erasures)
        );
    }
}
