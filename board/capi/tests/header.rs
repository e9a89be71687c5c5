//! The committed C header is what cbindgen makes of the sources now. A stale header fails
//! here; `RAIDCORE_BLESS=1 cargo test -p raidcore-capi --test header` rewrites it.

use std::path::Path;

#[test]
fn committed_header_matches_the_sources() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cfg = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut fresh = Vec::new();
    cbindgen::Builder::new()
        .with_config(cfg)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses src/lib.rs")
        .write(&mut fresh);
    let path = dir.join("include/raidcore.h");
    let committed = std::fs::read(&path).unwrap_or_default();
    if fresh == committed {
        return;
    }
    if std::env::var_os("RAIDCORE_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/raidcore.h");
        return;
    }
    panic!(
        "{} is stale (the C ABI in src/lib.rs changed): regenerate it with \
         RAIDCORE_BLESS=1 cargo test -p raidcore-capi --test header and commit it",
        path.display()
    );
}
