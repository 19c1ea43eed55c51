//! `cargo +nightly fuzz run merge`: see docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    handshakes_fuzz::harness::merge(data);
});
