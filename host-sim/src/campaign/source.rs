//! Where the campaign's random choices come from: a seeded ChaCha8 generator (the campaign and
//! its seeded tests) or a byte string (the `volume_ops` fuzz target, where the fuzzer's input
//! is the choice sequence).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A stream of random choices. Every draw is total: a byte source that runs dry answers 0 and
/// remembers that it did ([`Source::exhausted`]), so generation can stop.
#[derive(Debug)]
pub enum Source<'a> {
    /// Draws from a seeded ChaCha8 generator (never runs dry).
    Rng(Box<ChaCha8Rng>),
    /// Draws from bytes, little-endian, as many bytes as the draw's range needs.
    Bytes {
        /// The input.
        data: &'a [u8],
        /// Bytes consumed.
        pos: usize,
        /// A draw went past the end.
        dry: bool,
    },
}

impl<'a> Source<'a> {
    /// A seeded generator.
    #[must_use]
    pub fn seeded(seed: u64) -> Self {
        Source::Rng(Box::new(ChaCha8Rng::seed_from_u64(seed)))
    }

    /// Choices read from `data`.
    #[must_use]
    pub fn bytes(data: &'a [u8]) -> Self {
        Source::Bytes {
            data,
            pos: 0,
            dry: false,
        }
    }

    /// Whether a byte source has run dry (always false for a generator).
    #[must_use]
    pub fn exhausted(&self) -> bool {
        matches!(self, Source::Bytes { dry: true, .. })
    }

    /// A uniform-ish number in `0..n` (0 when `n` is 0). A byte source reads one byte for
    /// `n <= 256`, two for `n <= 65536`, else eight.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        match self {
            Source::Rng(r) => r.random_range(0..n),
            Source::Bytes { data, pos, dry } => {
                let width = if n <= 256 {
                    1
                } else if n <= 65536 {
                    2
                } else {
                    8
                };
                let mut v = 0u64;
                for i in 0..width {
                    let b = if let Some(&b) = data.get(*pos) {
                        *pos += 1;
                        b
                    } else {
                        *dry = true;
                        0
                    };
                    v |= u64::from(b) << (8 * i);
                }
                v % n
            }
        }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// A full 32-bit value (a "pick" resolved against the state at execution time).
    pub fn pick(&mut self) -> u32 {
        match self {
            Source::Rng(r) => r.random(),
            Source::Bytes { .. } => self.below(65536) as u32,
        }
    }

    /// Index of the entry chosen from `weights` (each weight its share of the sum).
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < u64::from(w) {
                return i;
            }
            x -= u64::from(w);
        }
        weights.len().saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_source_reads_little_endian_and_runs_dry() {
        let mut s = Source::bytes(&[5, 1, 2]);
        assert_eq!(s.below(10), 5);
        assert_eq!(s.below(1000), 0x0201);
        assert!(!s.exhausted());
        assert_eq!(s.below(10), 0);
        assert!(s.exhausted());
    }

    #[test]
    fn weighted_follows_weights() {
        let mut s = Source::bytes(&[0, 2, 3, 9]);
        // total 10: [0,2) -> 0, [2,3) -> 1, [3,10) -> 2
        assert_eq!(s.weighted(&[2, 1, 7]), 0);
        assert_eq!(s.weighted(&[2, 1, 7]), 1);
        assert_eq!(s.weighted(&[2, 1, 7]), 2);
        assert_eq!(s.weighted(&[2, 1, 7]), 2);
    }
}
