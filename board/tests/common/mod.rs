//! Test data shared by the board's integration tests.
#![allow(dead_code)] // each test file uses what it needs

/// `len` bytes of real text from this machine (Debian's GPL-3 licence text, repeated), from
/// byte `skip` of the repetition.
pub fn text(skip: usize, len: usize) -> Vec<u8> {
    let src = std::fs::read("/usr/share/common-licenses/GPL-3").expect("GPL-3 text");
    src.iter().copied().cycle().skip(skip).take(len).collect()
}

/// `len` bytes that do not compress: xorshift64 from `seed` (mixed first, so neighbouring
/// seeds give unrelated bytes).
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = (seed ^ 0x2545_F491_4F6C_DD1D).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}
