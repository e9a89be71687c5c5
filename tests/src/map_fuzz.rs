//! The body of the `map_cache` fuzz target (`tests/fuzz`), shared with the seeded stable test
//! below so both run the same checks.
//!
//! The input bytes pick a map cache size (2 to 16 pages), up to four LUNs (map trees of depth 1
//! to 3) and a sequence of map operations — sets, gets, unmaps, write-backs, restarts, LUN
//! deletion and re-creation, the cleaner's page lookup and relocation — which
//! `raidcore::map_fuzz::check_bytes` runs against the core's map cache over an in-memory page
//! store and against a `HashMap` model: every answer, every space count, every page written
//! and the trees the store holds after each write-back are checked. A failed check comes back
//! as `Err` naming the step.

/// Runs one input; `Err` describes the failed check.
pub fn check_map_cache(input: &[u8]) -> Result<(), String> {
    raidcore::map_fuzz::check_bytes(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Runs seeded random inputs (`RC_FUZZ_CASES`, default 1000); prints the seed and the input
    /// on failure.
    #[test]
    fn seeded_inputs_pass_every_check() {
        let n = std::env::var("RC_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000u64);
        for seed in 0..n {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let len = rng.random_range(2..1500);
            let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            match std::panic::catch_unwind(|| check_map_cache(&data)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("map_cache seed {seed}: {e}\ninput {data:02x?}"),
                Err(p) => panic!("map_cache seed {seed} panicked: {p:?}\ninput {data:02x?}"),
            }
        }
    }

    #[test]
    fn empty_and_tiny_inputs_pass() {
        check_map_cache(&[]).unwrap();
        check_map_cache(&[0; 8]).unwrap();
    }
}
