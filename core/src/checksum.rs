//! CRC-32C (Castagnoli): the checksum of every extent and superblock.
//!
//! Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value and final XOR 0xFFFFFFFF, input and
//! output reflected: `crc::CRC_32_ISCSI`, the CRC of iSCSI, SCTP, ext4 metadata and Btrfs, and of
//! ISA-L `crc32_iscsi`. `crc32c(b"123456789") == 0xE306_9283`.
//!
//! ## Paths
//! - x86-64 with SSE4.2 (compile-time target feature, or detected at run time with feature `std`):
//!   the `crc32` instruction eight bytes at a time on three independent streams, so its 3-cycle
//!   latency is hidden; the three stream CRCs are merged by "appending zeros" operators (the
//!   linearity of CRC: crc(A‖B) = shift_{|B|}(crc(A)) ⊕ crc₀(B)), as in Mark Adler's crc32c.c.
//!   The operators for the four fixed stream lengths are 4×256-entry tables built at compile
//!   time (16 KiB of read-only data, x86-64 only). Each stream is prefetched ahead in software.
//! - aarch64 with the CRC extension: `crc32cx` eight bytes at a time.
//! - Everywhere else, and for short tails: the `crc` crate. On 32-bit Arm and RISC-V (the
//!   microcontroller targets, thumbv6m/thumbv7em) with its 1 KiB byte-wise table, because flash
//!   is scarce there and a Cortex-M has no cache for a larger table to help; elsewhere with its
//!   16 KiB slice-by-16 table, several times faster per byte.
//!
//! `--cfg raidcore_force_portable` (see [`crate::parity`]) leaves out the hardware paths.

#[cfg(any(target_arch = "arm", target_arch = "riscv32"))]
type CrcTable = crc::Table<1>;
#[cfg(not(any(target_arch = "arm", target_arch = "riscv32")))]
type CrcTable = crc::Table<16>;

static PORTABLE: crc::Crc<u32, CrcTable> = crc::Crc::<u32, CrcTable>::new(&crc::CRC_32_ISCSI);

/// CRC-32C of `data`.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// CRC-32C of `A ‖ data`, given `crc` = CRC-32C of `A` (0 for empty `A`). Lets a checksum be
/// computed over pieces: `crc32c_append(crc32c(a), b) == crc32c(a ‖ b)`.
#[must_use]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    if x86::has_sse42() {
        // SAFETY: the CPU has SSE4.2, checked just above.
        return !unsafe { x86::update(!crc, data) };
    }
    #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
    if aarch64::has_crc() {
        // SAFETY: the CPU has the CRC extension, checked just above.
        return !unsafe { aarch64::update(!crc, data) };
    }
    crc32c_append_portable(crc, data)
}

/// CRC-32C of `data` on the portable path only (for tests and benchmarks).
#[must_use]
pub fn crc32c_portable(data: &[u8]) -> u32 {
    crc32c_append_portable(0, data)
}

/// [`crc32c_append`] on the portable path only.
#[must_use]
pub fn crc32c_append_portable(crc: u32, data: &[u8]) -> u32 {
    // The crc crate takes the initial register unreflected and reflects it itself; the register
    // after a finished CRC is the CRC with the final XOR undone.
    let mut d = PORTABLE.digest_with_initial((!crc).reverse_bits());
    d.update(data);
    d.finalize()
}

/// Streaming CRC-32C: feed pieces with [`Crc32c::update`], read with [`Crc32c::finalize`]. The
/// result equals [`crc32c`] of the concatenated pieces, however they were split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crc32c {
    crc: u32,
}

impl Crc32c {
    /// A digest over no bytes yet.
    #[must_use]
    pub const fn new() -> Self {
        Crc32c { crc: 0 }
    }

    /// Appends `data`.
    pub fn update(&mut self, data: &[u8]) {
        self.crc = crc32c_append(self.crc, data);
    }

    /// CRC-32C of everything appended so far (the digest stays usable).
    #[must_use]
    pub const fn finalize(&self) -> u32 {
        self.crc
    }
}

/// Reflected CRC-32C polynomial.
const POLY_REFLECTED: u32 = 0x82f6_3b78;

/// A linear operator on the 32-bit CRC register as a GF(2) matrix: column i is the image of bit i.
type Matrix = [u32; 32];

// Compile-time helpers (also used by the tests); any index error would fail the build.
#[allow(clippy::indexing_slicing, dead_code)]
const fn apply(m: &Matrix, mut v: u32) -> u32 {
    let mut r = 0;
    let mut i = 0;
    while v != 0 {
        if v & 1 != 0 {
            r ^= m[i];
        }
        v >>= 1;
        i += 1;
    }
    r
}

#[allow(clippy::indexing_slicing, dead_code)]
const fn compose(a: &Matrix, b: &Matrix) -> Matrix {
    let mut r = [0u32; 32];
    let mut i = 0;
    while i < 32 {
        r[i] = apply(a, b[i]);
        i += 1;
    }
    r
}

/// The operator that appends `bytes` zero bytes to a message, acting on the raw register.
#[allow(clippy::indexing_slicing, dead_code)]
const fn zeros_operator(bytes: usize) -> Matrix {
    // One zero bit: shift right, XOR the polynomial if the bit shifted out was set.
    let mut bit = [0u32; 32];
    bit[0] = POLY_REFLECTED;
    let mut i = 1;
    while i < 32 {
        bit[i] = 1 << (i - 1);
        i += 1;
    }
    // One zero byte = eight zero bits; then square-and-multiply for `bytes` of them.
    let mut byte = bit;
    let mut k = 0;
    while k < 3 {
        byte = compose(&byte, &byte);
        k += 1;
    }
    let mut result = [0u32; 32];
    let mut i = 0;
    while i < 32 {
        result[i] = 1 << i;
        i += 1;
    }
    let mut n = bytes;
    let mut sq = byte;
    while n != 0 {
        if n & 1 != 0 {
            result = compose(&sq, &result);
        }
        sq = compose(&sq, &sq);
        n >>= 1;
    }
    result
}

/// The operator as four byte-indexed tables, so applying it costs four lookups.
#[allow(clippy::indexing_slicing, dead_code)]
const fn zeros_table(bytes: usize) -> [[u32; 256]; 4] {
    let m = zeros_operator(bytes);
    let mut t = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            t[k][b] = apply(&m, (b as u32) << (8 * k));
            b += 1;
        }
        k += 1;
    }
    t
}

#[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
mod x86 {
    use core::arch::x86_64::{_MM_HINT_T0, _mm_crc32_u8, _mm_crc32_u64, _mm_prefetch};

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
    pub(super) fn has_sse42() -> bool {
        cfg!(target_feature = "sse4.2") || std::is_x86_feature_detected!("sse4.2")
    }

    #[cfg(not(any(feature = "std", test)))]
    pub(super) fn has_sse42() -> bool {
        cfg!(target_feature = "sse4.2")
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
}

#[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
mod aarch64 {
    use core::arch::aarch64::{__crc32cb, __crc32cd};

    #[cfg(any(feature = "std", test))]
    pub(super) fn has_crc() -> bool {
        cfg!(target_feature = "crc") || std::arch::is_aarch64_feature_detected!("crc")
    }

    #[cfg(not(any(feature = "std", test)))]
    pub(super) fn has_crc() -> bool {
        cfg!(target_feature = "crc")
    }

    /// Updates the raw (un-inverted) register `crc` with `data`.
    ///
    /// # Safety
    /// The CPU must have the CRC extension.
    #[target_feature(enable = "crc")]
    pub(super) unsafe fn update(mut crc: u32, data: &[u8]) -> u32 {
        let (words, tail) = data.as_chunks::<8>();
        for w in words {
            crc = __crc32cd(crc, u64::from_le_bytes(*w));
        }
        for &b in tail {
            crc = __crc32cb(crc, b);
        }
        crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c_portable(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn zeros_operator_appends_zeros() {
        let data: Vec<u8> = (0..100u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in [0usize, 1, 7, 8, 168, 1000] {
            let mut with_zeros = data.clone();
            with_zeros.resize(data.len() + n, 0);
            // Raw registers: no initial value, no final XOR.
            let raw = |b: &[u8]| !crc32c_append_portable(!0, b);
            let m = zeros_operator(n);
            assert_eq!(apply(&m, raw(&data)), raw(&with_zeros), "{n} zeros");
        }
    }

    #[test]
    fn hardware_and_portable_agree_on_every_tier() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [
            0usize, 1, 7, 8, 9, 503, 504, 505, 4080, 4096, 4104, 24_575, 24_576, 24_577, 70_000,
        ] {
            for start in [0usize, 1, 3] {
                let s = &data[start..start + len.min(data.len() - start)];
                assert_eq!(
                    crc32c(s),
                    crc32c_portable(s),
                    "len {} start {start}",
                    s.len()
                );
            }
        }
    }

    #[test]
    fn append_equals_whole() {
        let data: Vec<u8> = (0..9000u32).map(|i| (i ^ (i >> 5)) as u8).collect();
        let whole = crc32c(&data);
        for cut in [0usize, 1, 100, 4096, 8999, 9000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc32c_append(crc32c(a), b), whole, "cut {cut}");
            assert_eq!(
                crc32c_append_portable(crc32c_portable(a), b),
                whole,
                "cut {cut}"
            );
            let mut d = Crc32c::new();
            d.update(a);
            d.update(b);
            assert_eq!(d.finalize(), whole);
        }
    }
}
