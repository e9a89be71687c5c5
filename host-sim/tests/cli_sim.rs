//! `raidcore-sim sim`: the fault campaign from the command line (summary, JSON, exit status,
//! the `--mutate` switch).

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_raidcore-sim"))
        .arg("sim")
        .args(args)
        .output()
        .expect("run raidcore-sim")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_few_seeds_pass_and_print_the_summary() {
    let out = sim(&["--seeds", "4", "--from", "1", "--ops", "40", "--jobs", "2"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        out.status
    );
    for want in [
        "fault campaign: 4 seeds from 1 (40 steps each): 4 passed, 0 failed",
        "operations ",
        "faults injected: ",
        "power cuts ",
        "rebuilds ",
        "verified ",
        "reads refused with an error ",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("FAIL"), "{stdout}");
}

#[test]
fn json_summary_counts_the_seeds_run() {
    let out = sim(&["--seeds", "2", "--from", "1", "--ops", "30", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["seeds_run"], 2);
    assert_eq!(v["seeds_passed"], 2);
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0));
    assert!(v["totals"]["steps"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn a_bad_mutation_name_is_refused() {
    let out = sim(&["--seeds", "1", "--mutate", "no-such-bug"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("recon-flip"),
        "{}",
        text(&out.stderr)
    );
}

#[cfg(not(feature = "mutate"))]
#[test]
fn mutations_need_the_feature() {
    let out = sim(&["--seeds", "1", "--mutate", "recon-flip"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("feature `mutate`"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// A mutation makes seeds fail: exit 1, each failure with its seed and replay command.
#[cfg(feature = "mutate")]
#[test]
fn a_caught_mutation_fails_with_a_replay_command() {
    let out = sim(&["--seeds", "20", "--mutate", "recon-flip"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL seed "), "{stdout}");
    assert!(
        stdout.contains("replay: cargo run --release -p raidcore-sim --features mutate -- sim"),
        "{stdout}"
    );
}
