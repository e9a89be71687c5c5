//! A C program (`tests/c/raid6_rebuild.c`) compiled with `cc` against `include/raidcore.h` and
//! this crate's static library: a RAID-6 pool over callback disks, the bytes of real files
//! written, a member failed and rebuilt onto the spare, every block verified, an import.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The static library cargo built for this test run: `deps/libraidcore_capi-*.a` beside the
/// test binary (the newest, if several feature sets were built).
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps directory");
    let mut libs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(deps)
        .expect("read deps")
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?;
            (name.starts_with("libraidcore_capi-") && p.extension().is_some_and(|x| x == "a"))
                .then(|| Some((p.metadata().ok()?.modified().ok()?, p)))?
        })
        .collect();
    libs.sort();
    libs.pop()
        .expect("libraidcore_capi-*.a next to the test binary")
        .1
}

fn build() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("raidcore-capi-raid6_rebuild");
    let cc = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(dir.join("include"))
        .arg(dir.join("tests/c/raid6_rebuild.c"))
        .arg(staticlib())
        // What the Rust standard library in a staticlib needs on Linux
        // (`rustc --print native-static-libs`).
        .args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
            "-o",
        ])
        .arg(&out)
        .output()
        .expect("run cc (gcc)");
    assert!(
        cc.status.success(),
        "cc failed ({}):\n{}",
        cc.status,
        String::from_utf8_lossy(&cc.stderr)
    );
    out
}

fn run_on(prog: &Path, file: &Path) {
    let size = std::fs::metadata(file).expect("input file").len();
    let blocks = size.div_ceil(4096).min(1024);
    let out = Command::new(prog)
        .arg(file)
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        file.display(),
        out.status
    );
    for phase in [
        "after writing",
        "degraded",
        "after the rebuild",
        "after import",
    ] {
        let line = format!("verified {blocks} blocks {phase}");
        assert!(stdout.contains(&line), "no '{line}' in:\n{stdout}");
    }
    let rebuilt = stdout
        .lines()
        .find_map(|l| l.strip_prefix("rebuilt "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .expect("a 'rebuilt N stripes' line");
    assert!(rebuilt > 0, "{stdout}");
    // The spare took the failed slot: every member is there.
    assert!(
        stdout.contains("imported: 0 missing, 0 refused"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("PASSED"), "{stdout}");
}

#[cfg(target_os = "linux")]
#[test]
fn c_program_builds_a_raid6_pool_over_callbacks_and_rebuilds_onto_a_spare() {
    let prog = build();
    // A binary of this machine and the C program's own source.
    run_on(&prog, Path::new("/usr/bin/ls"));
    run_on(
        &prog,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/raid6_rebuild.c"),
    );
}
