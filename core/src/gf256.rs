//! Arithmetic in GF(2^8) with the field polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d) and the
//! generator g = {02}: the field of Linux md RAID-6 and Intel ISA-L.
//!
//! Source: H. Peter Anvin, "The mathematics of RAID-6" (2004, rev. 2011), sections 1–2.
//! All tables are built by `const fn` at compile time (768 bytes of flash in all).

/// The field polynomial, with the x^8 term.
pub const POLY: u16 = 0x11d;

/// `EXP[i]` = g^i for i in 0..255, repeated once more so `EXP[log a + log b]` needs no modulo.
pub static EXP: [u8; 512] = build_exp();

/// `LOG[a]` = i such that g^i = a, for a != 0. `LOG[0]` is 0 and must not be used.
pub static LOG: [u8; 256] = build_log();

// Runs at compile time only: an out-of-range index would fail the build, not the firmware.
#[allow(clippy::indexing_slicing)]
const fn build_exp() -> [u8; 512] {
    let mut t = [0u8; 512];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 512 {
        t[i] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    t
}

#[allow(clippy::indexing_slicing)]
const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        t[exp[i] as usize] = i as u8;
        i += 1;
    }
    t
}

/// Product a·b in GF(2^8).
#[inline]
#[allow(clippy::indexing_slicing)] // u8 indices into 256-entry tables
#[must_use]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    let i = LOG[a as usize] as usize + LOG[b as usize] as usize;
    // i <= 508 < 512
    EXP.get(i).copied().unwrap_or(0)
}

/// g^i for any exponent (reduced mod 255).
#[inline]
#[must_use]
pub fn exp(i: usize) -> u8 {
    EXP.get(i % 255).copied().unwrap_or(0)
}

/// Multiplicative inverse, or `None` for 0.
#[inline]
#[allow(clippy::indexing_slicing)] // u8 index into a 256-entry table
#[must_use]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        return None;
    }
    Some(exp(255 - LOG[a as usize] as usize))
}

/// Quotient a / b, or `None` when b = 0.
#[inline]
#[must_use]
pub fn div(a: u8, b: u8) -> Option<u8> {
    inv(b).map(|ib| mul(a, ib))
}

/// The 256-entry table of x -> c·x, for multiplying a buffer by the constant `c`.
#[must_use]
pub fn mul_table(c: u8) -> [u8; 256] {
    let (lo, hi) = nibble_tables(c);
    let mut t = [0u8; 256];
    // x = 16·h + l, and multiplication by c is linear: c·x = c·(16·h) ⊕ c·l.
    for (row, &h) in t.chunks_exact_mut(16).zip(hi.iter()) {
        for (e, &l) in row.iter_mut().zip(lo.iter()) {
            *e = h ^ l;
        }
    }
    t
}

/// Split-nibble tables of x -> c·x: `lo[i] = c·i` and `hi[i] = c·(16·i)` for i in 0..16, so that
/// c·x = lo\[x & 15\] ⊕ hi\[x >> 4\]. This is the layout the SIMD kernels look up sixteen bytes at a
/// time (`pshufb`, `tbl`). Built from c·2^k by linearity, without the log tables.
#[must_use]
pub fn nibble_tables(c: u8) -> ([u8; 16], [u8; 16]) {
    let mut pw = [0u8; 8];
    let mut v = c;
    for p in &mut pw {
        *p = v;
        v = (v << 1)
            ^ if v & 0x80 != 0 {
                (POLY & 0xff) as u8
            } else {
                0
            };
    }
    let [p0, p1, p2, p3, p4, p5, p6, p7] = pw;
    let pick = |i: u8, bit: u8, val: u8| if (i >> bit) & 1 != 0 { val } else { 0 };
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    for (i, (l, h)) in (0u8..).zip(lo.iter_mut().zip(hi.iter_mut())) {
        *l = pick(i, 0, p0) ^ pick(i, 1, p1) ^ pick(i, 2, p2) ^ pick(i, 3, p3);
        *h = pick(i, 0, p4) ^ pick(i, 1, p5) ^ pick(i, 2, p6) ^ pick(i, 3, p7);
    }
    (lo, hi)
}

/// Multiplies eight field elements packed in a `u64` by g = {02} at once (SWAR "xtime"):
/// shift each byte left and reduce the bytes whose top bit was set by 0x1d.
#[inline]
#[must_use]
pub const fn mul2_u64(v: u64) -> u64 {
    let high = v & 0x8080_8080_8080_8080;
    let shifted = (v << 1) & 0xfefe_fefe_fefe_fefe;
    // (high >> 7) * 0x1d puts 0x1d in every byte whose top bit was set.
    shifted ^ ((high >> 7).wrapping_mul(0x1d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                p ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= 0x1d;
            }
            b >>= 1;
        }
        p
    }

    #[test]
    fn mul_matches_shift_and_add() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a} * {b}");
            }
        }
    }

    #[test]
    fn inverse_and_division() {
        assert_eq!(inv(0), None);
        for a in 1..=255u8 {
            let ia = inv(a).unwrap();
            assert_eq!(mul(a, ia), 1, "inverse of {a}");
            assert_eq!(div(mul(a, 7), 7), Some(a));
        }
        assert_eq!(div(5, 0), None);
    }

    #[test]
    fn generator_has_order_255() {
        assert_eq!(EXP[0], 1);
        assert_eq!(EXP[1], 2);
        assert_eq!(EXP[8], 0x1d);
        assert_eq!(exp(255), 1);
        let mut seen = [false; 256];
        for i in 0..255 {
            assert!(!seen[EXP[i] as usize], "g^{i} repeats");
            seen[EXP[i] as usize] = true;
        }
    }

    #[test]
    fn tables_match_mul() {
        for c in 0..=255u8 {
            let t = mul_table(c);
            let (lo, hi) = nibble_tables(c);
            for x in 0..=255u8 {
                assert_eq!(t[x as usize], mul(c, x), "mul_table({c})[{x}]");
                assert_eq!(lo[(x & 15) as usize] ^ hi[(x >> 4) as usize], mul(c, x));
            }
        }
    }

    #[test]
    fn swar_mul2() {
        let v = u64::from_le_bytes([0x00, 0x01, 0x80, 0xff, 0x7f, 0x8e, 0x40, 0xc3]);
        let r = mul2_u64(v).to_le_bytes();
        for (i, b) in v.to_le_bytes().iter().enumerate() {
            assert_eq!(r[i], mul(*b, 2));
        }
    }
}
