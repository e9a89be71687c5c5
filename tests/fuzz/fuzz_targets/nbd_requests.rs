//! Arbitrary client bytes into one NBD session (negotiation and transmission) in memory, against
//! a memory backend that panics on any request the server should have rejected. The same body
//! runs as a stable seeded test: `cargo test -p raidcore-sim --test nbd_session fuzz_body`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    raidcore_sim::nbd::fuzz_session(data);
});
