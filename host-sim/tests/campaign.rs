//! The fault campaign's own tests: histories round-trip and replay exactly, seeds pass, a
//! shrunk failure still fails, and (feature `mutate`) each deliberate core bug is caught within
//! 20 seeds while the same seeds pass without it:
//! `cargo test -p raidcore-sim --features mutate --test campaign`.

use raidcore_sim::campaign::{self, History};

#[test]
fn a_history_replays_exactly_and_round_trips_as_text() {
    let out = campaign::run_seed(11, 60);
    assert!(out.failure.is_none(), "seed 11: {:?}", out.failure);
    let text = out.history.to_string();
    let parsed: History = text.parse().unwrap();
    assert_eq!(parsed, out.history);
    let again = campaign::replay(&parsed);
    assert!(again.failure.is_none());
    assert_eq!(
        again.stats, out.stats,
        "a replay must do exactly what the run did"
    );
}

/// A seed with a local fault (the exact-loss oracle) replays exactly too: the generator's
/// look at whether the pool is quiet changes nothing the replay would not do.
#[test]
fn a_history_with_a_local_fault_replays_exactly() {
    let out = (0..40)
        .map(|s| campaign::run_seed(s, 120))
        .find(|o| o.stats.local_faults > 0)
        .expect("a local fault in the first 40 seeds");
    assert!(
        out.failure.is_none(),
        "seed {}: {:?}",
        out.seed,
        out.failure
    );
    assert!(out.history.to_string().contains("\nlocal "));
    let again = campaign::replay(&out.history);
    assert_eq!(again.stats, out.stats, "seed {}", out.seed);
}

/// Seeds that pass without any mutation and, between them, catch each mutation (chosen after
/// 9c6e299 added the stale_copy step: recon-flip and early-flush are caught by seed 0;
/// rebuild-skip, which needs a rebuild over the skipped stripe and a scrub after it, by 52, 98
/// and 110 of the first 400; loss-over-declared, which needs a local fault under an extent
/// partly rewritten before it, by 17, 18 and 26 of the first 30).
#[cfg(feature = "mutate")]
const MUTATION_SEEDS: [u64; 20] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17, 52, 98, 110,
];

/// Each deliberate bug makes the campaign fail within 20 seeds; the same seeds pass without it.
#[cfg(feature = "mutate")]
#[test]
fn each_mutation_is_caught_within_20_seeds() {
    use campaign::MutationKind;
    let base = campaign::CampaignOptions {
        seed_list: MUTATION_SEEDS.to_vec(),
        ops: campaign::DEFAULT_OPS,
        ..campaign::CampaignOptions::default()
    };
    let clean = campaign::run(&base).unwrap();
    assert!(
        clean.passed(),
        "the mutation seeds must pass without a mutation:\n{}",
        clean.render()
    );
    for m in MutationKind::ALL {
        let sum = campaign::run(&campaign::CampaignOptions {
            mutate: Some(m),
            max_failures: Some(1),
            ..base.clone()
        })
        .unwrap();
        assert!(
            !sum.passed(),
            "mutation {m} was not caught by {} seeds:\n{}",
            sum.seeds_run,
            sum.render()
        );
        println!(
            "{m}: caught by seed {} ({})",
            sum.failures[0].seed, sum.failures[0].failure
        );
    }
}
