//! The demo's tables (voice, then the branch office) on synthetic data, compared with the
//! snapshot committed in `tests/snapshots/`, so a change in IOPS, latency, write
//! amplification, compression or rebuild figures shows up as a diff (as smoltcp's netsim
//! snapshots do). Every figure is virtual time from the device models, so the table is the
//! same on any machine, in any build profile.
//!
//! After a change that moves the figures on purpose:
//! `RAIDCORE_UPDATE_SNAPSHOTS=1 cargo test -p raidcore-tests --test demo_snapshot`, then review
//! and commit the snapshot's diff.

use std::path::Path;

use clap::Parser;
use raidcore_sim::cli::{Cli, Cmd, sim_options};
use raidcore_sim::workload::WorkloadKind;
use raidcore_sim::{branch, demo};

/// The demo's command line (after `raidcore-sim`): the demo's setup, small, on synthetic data
/// 50 % compressible (real data would depend on this machine's files).
const ARGS: [&str; 9] = [
    "demo",
    "--data",
    "synthetic:50",
    "--seconds",
    "0.5",
    "--disk-size",
    "64M",
    "--lun-size",
    "2M",
];

/// The snapshot, relative to this crate (`tests/` of the workspace).
const SNAPSHOT: &str = "snapshots/demo_synthetic50.txt";

/// Set to `1` to write the fresh table over the snapshot instead of comparing.
const UPDATE_VAR: &str = "RAIDCORE_UPDATE_SNAPSHOTS";

/// What `raidcore-sim <ARGS>` prints on stdout, after a line naming the command.
fn fresh_table() -> String {
    let cli = Cli::try_parse_from(std::iter::once("raidcore-sim").chain(ARGS))
        .unwrap_or_else(|e| panic!("{e}"));
    let Cmd::Demo(a) = cli.cmd else {
        panic!("not a demo command line: {ARGS:?}")
    };
    let opts = sim_options(&a.run, WorkloadKind::Voice).unwrap_or_else(|e| panic!("{e:?}"));
    let out = demo::run(&opts, &mut |_, _, _| {}).unwrap_or_else(|e| panic!("demo: {e}"));
    let branch = branch::run(&branch::options(&opts), &mut |_, _, _| {})
        .unwrap_or_else(|e| panic!("branch office: {e}"));
    format!(
        "# raidcore-sim {}\n{}\n{}",
        ARGS.join(" "),
        out.report.to_text(),
        branch.to_text()
    )
}

#[test]
fn demo_table_matches_the_snapshot() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    let fresh = fresh_table();
    if std::env::var(UPDATE_VAR).is_ok_and(|v| v == "1") {
        std::fs::write(&path, &fresh).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("wrote {}", path.display());
        return;
    }
    let update = format!(
        "if the change is intended: {UPDATE_VAR}=1 cargo test -p raidcore-tests --test \
         demo_snapshot, then commit tests/{SNAPSHOT}"
    );
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}\n{update}", path.display()));
    if committed != fresh {
        let diff = similar::TextDiff::from_lines(&committed, &fresh)
            .unified_diff()
            .header(&format!("tests/{SNAPSHOT} (committed)"), "fresh run")
            .to_string();
        panic!("the demo's table differs from its snapshot:\n{diff}\n{update}");
    }
}
