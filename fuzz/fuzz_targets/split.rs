//! `cargo +nightly fuzz run split`: see docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    handshakes_fuzz::harness::split(data);
});
