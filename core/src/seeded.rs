//! Seeded property tests for the core's component tests: each property runs a bounded number
//! of cases from a fixed seed (so a run replays exactly), and a failure names the seed, how to
//! rerun it, and the minimal failing input proptest shrank it to.
//!
//! `PROPTEST_RNG_SEED` and `PROPTEST_CASES` in the environment replace a test's seed and case
//! count (a longer soak, or the replay of a seed another run printed).

use core::fmt::Debug;
use std::string::String;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// Runs `test` on `cases` inputs drawn from `strategy` with seed `seed` (see the module docs);
/// panics with the seed and the minimal failing input when a case returns `Err` or panics.
pub(crate) fn check<S>(
    name: &str,
    seed: u64,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), String>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let seed = env_u64("PROPTEST_RNG_SEED").unwrap_or(seed);
    let cases = env_u64("PROPTEST_CASES").map_or(cases, |c| c as u32);
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    match runner.run(&strategy, |v| test(v).map_err(TestCaseError::fail)) {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => panic!(
            "{name} failed with seed {seed} (rerun: PROPTEST_RNG_SEED={seed} cargo test -p \
             raidcore {name}): {why}\nminimal failing input: {input:?}"
        ),
        Err(TestError::Abort(why)) => panic!("{name} aborted with seed {seed}: {why}"),
    }
}
