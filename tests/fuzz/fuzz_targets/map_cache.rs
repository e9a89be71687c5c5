//! Arbitrary bytes as a map cache size, up to four LUN sizes and a sequence of map operations,
//! run against the core's map cache over an in-memory page store and against a `HashMap` model
//! (`raidcore_tests::map_fuzz::check_map_cache`, which a seeded stable test also runs). A failed
//! check panics with the step that failed it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = raidcore_tests::map_fuzz::check_map_cache(data) {
        panic!("{e}");
    }
});
