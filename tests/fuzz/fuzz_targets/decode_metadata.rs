//! Arbitrary bytes into every on-disk decoder of `raidcore::format` (raw and with valid framing:
//! a decoded value must survive a round trip), then as patches over a small RAID-5 pool's label
//! and data areas: `Pool::import` must return an error or a pool, never panic, and reads must
//! never return data that was not written (`raidcore_tests::metadata_fuzz`, which a seeded
//! stable test also runs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = raidcore_tests::metadata_fuzz::check_decode_metadata(data) {
        panic!("{e}");
    }
});
