//! Arbitrary bytes as the fault campaign's choice source: a small pool of random shape and up to
//! 64 steps of client operations, faults and power cuts, checked against the campaign's reference
//! model (`raidcore_tests::volume_fuzz::check_volume_ops`, which a seeded stable test also runs).
//! A failed check panics with the history that caused it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = raidcore_tests::volume_fuzz::check_volume_ops(data) {
        panic!("{e}");
    }
});
