//! Regression tests: one `#[test]` per shrunk fault-campaign history in
//! `tests/regressions/<name>.history`, and (in [`pool_api`]) the reproducers that drive the pool
//! API directly.
//!
//! A history file is what `raidcore-sim sim --seeds 1 --from S --shrink` prints (a `shape` line,
//! then one step per line), preceded by `#` comment lines that say the seed, what went wrong and
//! what fixed it. Each test replays its history with every campaign check
//! (`raidcore_sim::campaign::replay`) and fails with the seed and the failed check.
//!
//! To add one: save the shrunk history as `tests/regressions/<topic>_seed_<S>.history` with its
//! comments, and add `<topic>_seed_<S>,` to the list below
//! ([`every_history_file_has_a_test`] fails until both exist). A history of a bug not fixed
//! yet gets `#[ignore = "known failing: ..."]`.

mod pool_api;

use std::collections::BTreeSet;
use std::path::Path;

use raidcore_sim::campaign::{self, History};

/// One test per history file, named by the file's stem, and [`REGISTERED`], the list of them.
macro_rules! regressions {
    ($($(#[$attr:meta])* $name:ident,)*) => {
        $(
            #[test]
            $(#[$attr])*
            fn $name() {
                assert_history_passes(
                    stringify!($name),
                    include_str!(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/regressions/",
                        stringify!($name),
                        ".history"
                    )),
                );
            }
        )*

        /// The history files with a test above, by stem.
        const REGISTERED: &[&str] = &[$(stringify!($name)),*];
    };
}

regressions! {
    behind_new_member_seed_7801587,
    behind_rotten_ring_seed_342306,
    behind_rotten_root_seed_7821796,
    cleaner_livelock_seed_846,
    degraded_scrub_parity_seed_6035,
    deleted_lun_loss_seed_652,
    departed_disk_label_seed_1001734,
    departed_disk_label_seed_1002481,
    departed_disk_label_seed_103179,
    ditto_log_full_seed_22546,
    ditto_raid0_import_seed_24218,
    failed_delete_seed_8448,
    flush_mark_durable_seed_1003122,
    flush_mark_durable_seed_107230,
    flush_mark_durable_seed_205230,
    flush_mark_durable_seed_208609,
    flush_mark_durable_seed_209166,
    flush_mark_durable_seed_212903,
    flush_mark_durable_seed_213420,
    flush_marks_seed_1180,
    flush_marks_seed_363,
    flush_marks_seed_4007,
    flush_marks_seed_4083,
    flush_marks_seed_8706,
    flushed_record_rotted_seed_637380,
    flushed_write_lost_seed_120,
    flushed_write_lost_seed_73,
    flushed_write_lost_seed_82,
    heal_parity_laundering_seed_597462,
    import_transient_seed_67,
    latent_error_log_header_seed_7201436,
    latent_error_metadata_seed_7100252,
    latent_error_over_bad_parity_seed_794086,
    latent_error_resync_seed_7928334,
    log_stuck_seed_728,
    log_window_full_seed_9915,
    log_wrap_end_seed_7103456,
    log_wrap_seed_875,
    log_wrap_seed_991,
    loss_open_extent_seed_1610,
    lost_within_tolerance_seed_228803018,
    lost_heal_write_seed_2540,
    lost_two_misdirects_seed_905553,
    lost_within_tolerance_seed_438648,
    lost_within_tolerance_seed_515588,
    lun_recreate_seed_167,
    midwrite_checkpoint_lost_list_seed_29424,
    mirror_torn_unreadable_first_copy_seed_306860,
    mirror_torn_with_latent_error_seed_70531,
    mirror_copies_seed_166,
    mirror_heal_range_seed_2912,
    mirror_heal_range_seed_7738,
    mirror_write_hole_seed_885,
    older_labels_after_import_seed_747890,
    older_root_durable_seed_214379,
    older_root_durable_seed_523016947,
    online_lost_writes_seed_1311749,
    online_silent_damage_seed_5125893,
    other_data_past_tolerance_seed_461359,
    other_data_past_tolerance_seed_925588,
    raid0_spare_seed_9112,
    rebuild_cursor_seed_836,
    rebuild_end_flush_seed_6007,
    rebuild_latent_then_misdirect_seed_1324352,
    rebuild_stale_column_seed_695,
    rebuild_target_failed_seed_3001164,
    reopen_at_segment_end_seed_60698,
    replace_rebuild_cursor_seed_304223,
    resurrected_item_seed_5262,
    resync_first_seq_seed_7848886,
    resync_patched_read_seed_108816,
    resync_patched_read_seed_203751,
    resync_stale_majority_seed_6011,
    returned_disk_unlabelled_seed_592982,
    returned_disk_unlabelled_seed_779801,
    rot_rewritten_seed_3007294,
    rot_rewritten_seed_3015370,
    rot_rewritten_seed_3023425,
    rot_rewritten_seed_4100513,
    scrub_damaged_header_seed_999,
    scrub_dead_member_seed_138,
    scrub_latent_sector_seed_478,
    scrub_lost_item_syndrome_seed_13325,
    scrub_lost_item_syndrome_seed_20792,
    scrub_member_dropped_seed_102676,
    scrub_member_left_seed_432064,
    scrub_misdirected_heal_seed_967881,
    scrub_pad_header_seed_6523,
    scrub_parity_medium_seed_17,
    scrub_repaired_clean_seed_898567,
    scrub_rotten_parity_seed_102676,
    scrub_superblock_copy_seed_8516,
    scrub_unreadable_left_seed_379879,
    scrub_unrepairable_resync_seed_880819,
    soak_seed_3017607,
    soak_seed_3030739,
    soak_seed_3048631,
    soak_seed_3049272,
    soak_seed_3084257,
    soak_seed_3095274,
    soak_seed_4315289,
    soak_seed_4319345,
    soak_seed_4320785,
    soak_seed_4323405,
    soak_seed_4502601,
    soak_seed_4512422,
    soak_seed_4518095,
    soak_seed_4601571,
    soak_seed_4619421,
    soak_seed_5011206,
    soak_seed_5011572,
    soak_seed_5106983,
    soak_seed_5125095,
    soak_seed_7862941,
    soak_seed_7869030,
    soak_seed_7870244,
    soak_seed_7874148,
    soak_seed_937623827,
    spare_rebuild_restart_seed_153,
    stale_copy_after_repair_seed_42331,
    sticky_rewrite_count_seed_15009620,
    sticky_rewrite_exclude_seed_11627,
    superblock_copies_seed_1714,
    torn_stripe_crc_seed_10007915,
    torn_stripe_crc_seed_7103141,
    two_lost_columns_seed_710,
    walk_past_lost_header_seed_49370,
    write_hole_seed_102,
    zil_flush_not_durable_seed_216,
    zil_header_past_short_item_seed_43876,
    zil_patch_latent_error_seed_10001711,
}

/// Replays history `name` (its file's text) and panics with its seed and the failed check
/// unless every check passes.
fn assert_history_passes(name: &str, text: &str) {
    let h: History = text
        .parse()
        .unwrap_or_else(|e| panic!("tests/regressions/{name}.history does not parse: {e}"));
    if let Some(f) = campaign::replay(&h).failure {
        panic!(
            "seed {}: {f}\n\
             trace it: RC_HISTORY={}/{name}.history RAIDCORE_CAMPAIGN_TRACE=1 cargo test \
             --release -p raidcore-tests --test campaign_seeds replay_file -- --ignored \
             --nocapture",
            h.shape.seed,
            history_dir().display()
        );
    }
}

fn history_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/regressions"))
}

/// Every `.history` file has a test above and every test its file, so none is forgotten.
#[test]
fn every_history_file_has_a_test() {
    let files: BTreeSet<String> = std::fs::read_dir(history_dir())
        .expect("tests/regressions")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "history"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let registered: BTreeSet<String> = REGISTERED.iter().map(ToString::to_string).collect();
    let untested: Vec<&String> = files.difference(&registered).collect();
    let missing: Vec<&String> = registered.difference(&files).collect();
    assert!(
        untested.is_empty(),
        "history files without a test (add them to `regressions!` in tests/tests/regressions/main.rs): \
         {untested:?}"
    );
    assert!(
        missing.is_empty(),
        "tests without a history file: {missing:?}"
    );
    assert_eq!(
        registered.len(),
        REGISTERED.len(),
        "a history registered twice"
    );
}

/// Every history opens with `#` comments saying what it holds, its other lines are the history
/// exactly as it prints (so a mistyped or unknown key cannot hide), and its name ends in the
/// seed of its shape.
#[test]
fn every_history_file_is_described_and_named_by_its_seed() {
    for name in REGISTERED {
        let path = history_dir().join(format!("{name}.history"));
        let text = std::fs::read_to_string(&path).expect("a history file");
        let comments = text.lines().take_while(|l| l.starts_with('#')).count();
        assert!(
            comments >= 2,
            "{name}: no comment lines before the shape line"
        );
        let h: History = text.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        let bare: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .flat_map(|l| [l, "\n"])
            .collect();
        assert_eq!(bare, h.to_string(), "{name}: not as the history prints");
        assert!(
            name.ends_with(&format!("_seed_{}", h.shape.seed)),
            "{name}: the shape's seed is {}",
            h.shape.seed
        );
    }
}
