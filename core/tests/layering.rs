//! The engine's layers depend downwards only: `format ← raid ← log ← volume ← pool`. This test
//! reads the sources and fails when a lower layer names a higher one (in code or in doc links),
//! so a maintainer can tell what a component may touch from where it lives.

use std::fs;
use std::path::{Path, PathBuf};

/// Source files under `core/src/<rel>` (a file or a folder).
fn sources(rel: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(rel);
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            for e in fs::read_dir(&p).expect("a source folder") {
                todo.push(e.expect("an entry").path());
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    assert!(!out.is_empty(), "no sources under {rel}");
    out
}

/// Every line of the files of `layer` that names one of `higher` as a module path.
fn violations(layer: &[&str], higher: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for rel in layer {
        for f in sources(rel) {
            let text = fs::read_to_string(&f).expect("a source file");
            for (i, line) in text.lines().enumerate() {
                for h in higher {
                    // `log::` alone is also the `log` crate's macros.
                    let bare = (*h != "log").then(|| format!("{h}::"));
                    let pats = [
                        Some(format!("crate::{h}")),
                        Some(format!("super::{h}")),
                        bare,
                    ];
                    if pats.iter().flatten().any(|p| line.contains(p.as_str())) {
                        let at = format!("{}:{}", f.display(), i + 1);
                        found.push(format!("{at}: names `{h}`: {}", line.trim()));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn lower_layers_never_name_higher_ones() {
    let mut bad = Vec::new();
    bad.extend(violations(
        &[
            "format.rs",
            "raid",
            "parity",
            "gf256.rs",
            "checksum",
            "event.rs",
            "error.rs",
        ],
        &["log", "volume", "pool"],
    ));
    bad.extend(violations(&["log"], &["volume", "pool"]));
    bad.extend(violations(&["volume"], &["pool"]));
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
}

#[test]
fn the_check_sees_a_violation() {
    // The test can fail: the pool names the volume layer, which a check of the pool against
    // the volume's rule (as if the pool were below it) must report.
    assert!(!violations(&["pool"], &["volume"]).is_empty());
}
