//! CRC-32C (Castagnoli): the checksum of every extent and superblock.
//!
//! Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value and final XOR 0xFFFFFFFF, input and
//! output reflected: `crc::CRC_32_ISCSI`, the CRC of iSCSI, SCTP, ext4 metadata and Btrfs, and of
//! ISA-L `crc32_iscsi`. `crc32c(b"123456789") == 0xE306_9283`.
//!
//! ## Paths
//! A [`Crc32cPath`] is one implementation; all give identical values. [`crc32c`] and
//! [`crc32c_append`] use [`Crc32cPath::selected`], the best the build target guarantees or, with
//! feature `std`, the best this CPU has (detected once, then cached).
//! - x86-64 with AVX-512 and VPCLMULQDQ (`vpclmulqdq`): buffers of 256 bytes or more are folded
//!   with carry-less multiplication, 256 bytes per step in four zmm registers (see the `x86`
//!   module for the math); shorter ones take the `sse4.2` path.
//! - x86-64 with AVX2 and VPCLMULQDQ but no AVX-512, such as AMD Zen 3 and Intel Alder Lake
//!   (`vpclmulqdq-avx2`): buffers of 576 bytes or more are folded on four ymm registers while
//!   three `crc32` instruction streams run alongside on another part of the buffer, as the two
//!   use different execution units; the streams are merged in at the end. On Zen 3, where
//!   folding on ymm registers alone is no faster than `sse4.2` (both about 26 GB/s on 64 KiB),
//!   the two together reach about 36 GB/s. Shorter buffers take the `sse4.2` path.
//! - x86-64 with SSE4.2 (`sse4.2`): the `crc32` instruction eight bytes at a time on three
//!   independent streams, so its 3-cycle latency is hidden; the three stream CRCs are merged by
//!   "appending zeros" operators (the linearity of CRC: crc(A‖B) = shift_{|B|}(crc(A)) ⊕
//!   crc₀(B)), as in Mark Adler's crc32c.c. The operators for the four fixed stream lengths are
//!   4×256-entry tables built at compile time (16 KiB of read-only data, x86-64 only). Each stream
//!   is prefetched ahead in software.
//! - aarch64 with the CRC extension (`crc`): `crc32cx` eight bytes at a time.
//! - Everywhere else, and for short tails: the `crc` crate (`portable`). On 32-bit Arm and RISC-V
//!   (the microcontroller targets, thumbv6m/thumbv7em) with its 1 KiB byte-wise table, because
//!   flash is scarce there and a Cortex-M has no cache for a larger table to help; elsewhere with
//!   its 16 KiB slice-by-16 table, several times faster per byte.
//!
//! `--cfg raidcore_force_portable` (see [`crate::parity`]) leaves out the hardware paths.
//!
//! The `crc-fast` crate was considered for the folding path and does not fit: with its default
//! features off (which a firmware needs, as they bring a `#[panic_handler]`) version 1.10 builds
//! neither for x86-64 without `std` nor for the microcontroller targets (its `cdylib` and
//! `staticlib` crate types then need a panic handler).

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
    crc32c_append_with(Crc32cPath::selected(), crc, data)
}

/// [`crc32c_append`] on an explicit path (for tests and benchmarks).
#[inline]
#[must_use]
pub fn crc32c_append_with(path: Crc32cPath, crc: u32, data: &[u8]) -> u32 {
    match path.0 {
        PathId::Portable => crc32c_append_portable(crc, data),
        #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
        // SAFETY: a path of this kind exists only if the CPU has SSE4.2 (see `Crc32cPath`).
        PathId::Sse42 => !unsafe { x86::update(!crc, data) },
        #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
        // SAFETY: a path of this kind exists only if the CPU has what it needs.
        PathId::Vpclmulqdq => !unsafe { x86::update_folded(!crc, data) },
        #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
        // SAFETY: a path of this kind exists only if the CPU has what it needs.
        PathId::VpclmulqdqAvx2 => !unsafe { x86::update_folded_avx2(!crc, data) },
        #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
        // SAFETY: a path of this kind exists only if the CPU has the CRC extension.
        PathId::Crc => !unsafe { aarch64::update(!crc, data) },
    }
}

/// One implementation of CRC-32C. Only paths this CPU can run can be obtained (from
/// [`Crc32cPath::supported`], [`Crc32cPath::selected`] or [`Crc32cPath::PORTABLE`]), so every
/// call with one is sound.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Crc32cPath(PathId);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathId {
    Portable,
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    Sse42,
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    Vpclmulqdq,
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    VpclmulqdqAvx2,
    #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
    Crc,
}

impl core::fmt::Debug for Crc32cPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl Crc32cPath {
    /// The `crc` crate's table, available on every target.
    pub const PORTABLE: Crc32cPath = Crc32cPath(PathId::Portable);

    /// Short name: `portable`, `sse4.2`, `vpclmulqdq-avx2` (ymm folding), `vpclmulqdq` (zmm
    /// folding, AVX-512) or `crc` (aarch64).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self.0 {
            PathId::Portable => "portable",
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            PathId::Sse42 => "sse4.2",
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            PathId::Vpclmulqdq => "vpclmulqdq",
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            PathId::VpclmulqdqAvx2 => "vpclmulqdq-avx2",
            #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
            PathId::Crc => "crc",
        }
    }

    /// Every path this CPU runs, slowest first (portable first, the one
    /// [`Crc32cPath::selected`] picks last). Without feature `std` only what the build target
    /// guarantees.
    #[inline]
    pub fn supported() -> impl Iterator<Item = Crc32cPath> {
        [
            Some(Crc32cPath::PORTABLE),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            x86::has_sse42().then_some(Crc32cPath(PathId::Sse42)),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            x86::has_vpclmulqdq_avx2().then_some(Crc32cPath(PathId::VpclmulqdqAvx2)),
            #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
            x86::has_vpclmulqdq().then_some(Crc32cPath(PathId::Vpclmulqdq)),
            #[cfg(all(target_arch = "aarch64", not(raidcore_force_portable)))]
            aarch64::has_crc().then_some(Crc32cPath(PathId::Crc)),
        ]
        .into_iter()
        .flatten()
    }

    /// The path [`crc32c`] and [`crc32c_append`] use: the last of [`Crc32cPath::supported`]. With
    /// feature `std` on x86-64 it is detected at the first call and cached in an atomic;
    /// otherwise it is fixed at compile time.
    #[inline]
    #[must_use]
    pub fn selected() -> Crc32cPath {
        #[cfg(all(
            all(target_arch = "x86_64", not(raidcore_force_portable)),
            any(feature = "std", test)
        ))]
        {
            use core::sync::atomic::AtomicU8;
            const ALL: [PathId; 4] = [
                PathId::Portable,
                PathId::Sse42,
                PathId::VpclmulqdqAvx2,
                PathId::Vpclmulqdq,
            ];
            static CACHE: AtomicU8 = AtomicU8::new(0);
            Crc32cPath(crate::parity::cached_choice(&CACHE, &ALL, || {
                Self::checked_best().0
            }))
        }
        #[cfg(not(all(
            all(target_arch = "x86_64", not(raidcore_force_portable)),
            any(feature = "std", test)
        )))]
        Self::best()
    }

    #[cfg(not(all(
        all(target_arch = "x86_64", not(raidcore_force_portable)),
        any(feature = "std", test)
    )))]
    #[inline]
    fn best() -> Crc32cPath {
        Self::supported().last().unwrap_or(Crc32cPath::PORTABLE)
    }

    /// The best supported path that agrees with the portable one on a built-in message at
    /// lengths that reach every path's main loop, checked once when the choice is cached: a
    /// kernel that is wrong on a CPU no test ran on (the AVX-512 path is tested only where a
    /// machine has it) is passed over instead of trusted with every checksum.
    #[cfg(all(
        target_arch = "x86_64",
        not(raidcore_force_portable),
        any(feature = "std", test)
    ))]
    fn checked_best() -> Crc32cPath {
        let mut msg = [0u8; 4711];
        let mut x = 0x9e37_79b9u32;
        for b in &mut msg {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        let mut paths: heapless::Vec<Crc32cPath, 4> = heapless::Vec::new();
        for p in Self::supported() {
            let _ = paths.push(p);
        }
        while let Some(p) = paths.pop() {
            let agrees = [msg.len(), 1000, 300, 40].iter().all(|&n| {
                let m = msg.get(..n).unwrap_or(&[]);
                crc32c_append_with(p, 0, m) == crc32c_portable(m)
            });
            if agrees {
                return p;
            }
        }
        Crc32cPath::PORTABLE
    }
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

/// CRC-32C of `A ‖ B` from `crc_a` = CRC-32C of `A` and `crc_b` = CRC-32C of a `B` of exactly
/// 4096 bytes, without reading either: `shift(crc_a) ⊕ crc_b`, where `shift` appends 4096 zero
/// bytes to the register (a 32 × 32 GF(2) matrix, 128 bytes, built at compile time; zlib's
/// `crc32_combine` does the same for any length). Lets an extent's payload CRC come from its
/// blocks' CRCs instead of a second pass over the data.
#[must_use]
pub fn crc32c_concat_4k(crc_a: u32, crc_b: u32) -> u32 {
    // Column i of the matrix is the image of bit i: XOR the columns of the bits set in `crc_a`
    // (a loop that ends with the bits: unrolled, it cost 456 bytes of Cortex-M flash).
    let (mut r, mut bits) = (crc_b, crc_a);
    for col in &SHIFT_4K {
        if bits == 0 {
            break;
        }
        if bits & 1 != 0 {
            r ^= col;
        }
        bits >>= 1;
    }
    r
}

/// The operator of [`crc32c_concat_4k`].
static SHIFT_4K: Matrix = zeros_operator(4096);

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
mod x86;

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
        // Around the folding paths' steps (16 bytes; 32 and 64 bytes per register; 128 and
        // 256 bytes per group; the AVX2 path's 296-byte steps and 576-byte minimum, see also
        // its own test; the AVX-512 path's 256-byte minimum) and the three-stream lengths of
        // the `crc32` path.
        let lens = [
            0usize, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 143, 144, 159,
            160, 161, 191, 192, 223, 224, 255, 256, 257, 271, 272, 287, 288, 289, 319, 320, 383,
            384, 479, 480, 495, 496, 497, 503, 504, 505, 511, 512, 513, 543, 544, 575, 576, 577,
            591, 592, 720, 767, 768, 1023, 1024, 1279, 1280, 1535, 1536, 4080, 4095, 4096, 4097,
            4104, 4111, 24_575, 24_576, 24_577, 65_535, 65_536, 70_000,
        ];
        let paths: Vec<Crc32cPath> = Crc32cPath::supported().collect();
        for len in lens {
            for start in [0usize, 1, 3, 8, 17, 63] {
                let s = &data[start..start + len.min(data.len() - start)];
                let want = crc32c_portable(s);
                assert_eq!(crc32c(s), want, "len {} start {start}", s.len());
                for &p in &paths {
                    assert_eq!(
                        crc32c_append_with(p, 0, s),
                        want,
                        "{p:?} len {} start {start}",
                        s.len()
                    );
                    // A non-zero register entering the first block.
                    let (a, b) = s.split_at(s.len() / 3);
                    assert_eq!(
                        crc32c_append_with(p, crc32c_portable(a), b),
                        want,
                        "{p:?} len {} start {start} appended",
                        s.len()
                    );
                }
            }
        }
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    fn every_path_this_cpu_has_is_offered() {
        let names: Vec<&str> = Crc32cPath::supported().map(Crc32cPath::name).collect();
        assert_eq!(names[0], "portable");
        assert_eq!(
            names.contains(&"sse4.2"),
            std::is_x86_feature_detected!("sse4.2")
        );
        let folding = std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("sse4.2");
        assert_eq!(names.contains(&"vpclmulqdq"), folding);
        if !folding {
            std::println!(
                "skipped: this CPU lacks AVX-512F/VPCLMULQDQ, the zmm folding CRC-32C path"
            );
        }
        let folding_ymm = std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("sse4.2");
        assert_eq!(names.contains(&"vpclmulqdq-avx2"), folding_ymm);
        if !folding_ymm {
            std::println!("skipped: this CPU lacks AVX2/VPCLMULQDQ, the ymm folding CRC-32C path");
        }
        // Slowest first: an AVX-512 CPU, which has both folding paths, selects the zmm one.
        let order: Vec<&str> = ["portable", "sse4.2", "vpclmulqdq-avx2", "vpclmulqdq"]
            .into_iter()
            .filter(|n| names.contains(n))
            .collect();
        assert_eq!(names, order);
        assert_eq!(Some(Crc32cPath::selected()), Crc32cPath::supported().last());
    }

    #[test]
    fn concatenated_blocks_have_the_crc_of_the_whole() {
        let data: Vec<u8> = (0..5 * 4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for prefix in [0usize, 1, 4096, 5000] {
            let (a, rest) = data.split_at(prefix);
            let mut crc = crc32c(a);
            for (k, block) in rest.chunks_exact(4096).enumerate() {
                crc = crc32c_concat_4k(crc, crc32c(block));
                let upto = prefix + (k + 1) * 4096;
                assert_eq!(crc, crc32c(&data[..upto]), "prefix {prefix}, block {k}");
            }
        }
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", not(raidcore_force_portable)))]
    fn the_self_checked_choice_is_the_best_path_this_cpu_has() {
        assert_eq!(
            Some(Crc32cPath::checked_best()),
            Crc32cPath::supported().last()
        );
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
