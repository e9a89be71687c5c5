//! Arbitrary stripe geometry (data strips, P or PQ, strip length), data, erasures and one
//! corrupted byte: reconstruction must give the original back with every kernel, `check` must
//! flag the corruption, and erasure sets beyond the tolerance must be refused. The checks are
//! `raidcore_tests::parity_fuzz::check_parity_reconstruct`, which a seeded stable test also runs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = raidcore_tests::parity_fuzz::check_parity_reconstruct(data) {
        panic!("{e}");
    }
});
