//! The product never uses the simulator: `raidcore-sim` depends on `raidcore-host`, never the
//! reverse. Cargo enforces the boundary once the manifest is right; this test keeps the manifest
//! right (Cargo would allow a dev-dependency on raidcore-sim, which would let tests blur the line).

/// Every dependency of a manifest, in every table (`[dependencies]`, `[dev-dependencies]`,
/// `[build-dependencies]`, `[target.….dependencies]`, `[dependencies.NAME]`), as (key, what
/// follows `=`, or the table header).
fn dependencies(manifest: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_table = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_table = header.ends_with("dependencies");
            if let Some((_, name)) = header.rsplit_once("dependencies.") {
                in_table = true;
                out.push((name.to_string(), line.to_string()));
            }
        } else if in_table && let Some((key, value)) = line.split_once('=') {
            out.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    out
}

/// Whether a dependency is the simulator: by name, by package name, or by path (the simulator's
/// folder is this crate's parent).
fn is_simulator((key, value): &(String, String)) -> bool {
    let names = |s: &str| s.contains("raidcore-sim") || s.contains("raidcore_sim");
    names(key)
        || names(value)
        || value.contains("path = \"..\"")
        || value.contains("path = \"../\"")
}

#[test]
fn the_product_does_not_depend_on_the_simulator() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let deps = dependencies(&std::fs::read_to_string(path).unwrap());
    assert!(
        deps.iter().any(|(k, _)| k == "raidcore"),
        "the check found no dependencies in {path}: {deps:?}"
    );
    for dep in &deps {
        assert!(
            !is_simulator(dep),
            "{path}: `{} = {}` makes the product depend on the simulator",
            dep.0,
            dep.1
        );
    }
}

/// The check itself fails on each way of writing the dependency.
#[test]
fn the_check_finds_a_simulator_dependency_however_written() {
    for bad in [
        "[dependencies]\nraidcore = \"1\"\nraidcore-sim.workspace = true\n",
        "[dev-dependencies]\nsim = { path = \"..\" }\n",
        "[dependencies.raidcore-sim]\npath = \"..\"\n",
        "[target.'cfg(unix)'.dependencies]\nx = { package = \"raidcore-sim\", path = \"../x\" }\n",
    ] {
        let deps = dependencies(bad);
        assert!(deps.iter().any(is_simulator), "{bad:?}: {deps:?}");
    }
    let good = dependencies("[dependencies]\nraidcore-hal = { path = \"../../hal\" }\n");
    assert!(!good.iter().any(is_simulator), "{good:?}");
}
