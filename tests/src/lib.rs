//! Shared helpers for raidcore's cross-crate tests (reference vectors, seeded data).
pub mod metadata_fuzz;
pub mod parity_fuzz;
pub mod volume_fuzz;

/// Replays a fault-campaign history (the text `raidcore-sim sim --shrink` prints: a `shape`
/// line, then one step per line) and panics with its seed and the failed check unless every
/// check passes. The body of every `repro_campaign_*` regression test.
///
/// # Panics
/// When the history does not parse or a check fails.
pub fn assert_history_passes(text: &str) {
    let h: raidcore_sim::campaign::History = text.parse().expect("a campaign history");
    if let Some(f) = raidcore_sim::campaign::replay(&h).failure {
        panic!("seed {}: {f}", h.shape.seed);
    }
}
