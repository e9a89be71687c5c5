//! The body of the `volume_ops` fuzz target (`tests/fuzz`), shared with the seeded stable test
//! below so both run the same checks.
//!
//! The input bytes are the fault campaign's choice source (`raidcore_sim::campaign::run_bytes`):
//! they pick a small pool shape (RAID-0/1/10/5/6, a few members and spares, small strips) and up
//! to `FUZZ_MAX_OPS` steps — writes, reads, trims, flushes, FUA, LUN creation and deletion,
//! maintenance, scrubs, member failures and returns, replacements, spares, latent sector errors,
//! bit rot, lost and misdirected writes, transient errors and power cuts — run with every check
//! of the campaign against its reference model: reads return what was written (or, after a
//! power cut, a version allowed since the last flush), nothing fails within the level's
//! tolerance, nothing panics. A failed check comes back as `Err` with the history that caused
//! it (which `raidcore_sim::campaign::replay` runs again).

use raidcore_sim::campaign;

/// Runs one input; `Err` describes the failed check and the history.
pub fn check_volume_ops(input: &[u8]) -> Result<(), String> {
    campaign::run_bytes(input).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Runs seeded random inputs (`RC_FUZZ_CASES`, default 2000); prints the seed on failure.
    /// Ignored while the core bugs the campaign found are open (the ignored histories in
    /// `tests/tests/regressions/main.rs`): run with `cargo test -p raidcore-tests --lib -- --ignored`.
    #[test]
    #[ignore = "fails on open core bugs found by the campaign (ignored regressions); un-ignore when fixed"]
    fn seeded_inputs_pass_every_check() {
        let n = std::env::var("RC_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000u64);
        let mut failures = Vec::new();
        for seed in 0..n {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let len = rng.random_range(16..768);
            let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            match std::panic::catch_unwind(|| check_volume_ops(&data)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("volume_ops seed {seed}: {e}")),
                Err(_) => failures.push(format!("volume_ops seed {seed}: panicked")),
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {n} inputs failed; first: {}",
            failures.len(),
            failures[0]
        );
    }

    /// A fixed input that must always pass (and exercise writes, reads and a power cut).
    #[test]
    fn empty_and_tiny_inputs_pass() {
        check_volume_ops(&[]).unwrap();
        check_volume_ops(&[0; 8]).unwrap();
    }
}
