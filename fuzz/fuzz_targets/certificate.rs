//! `cargo +nightly fuzz run certificate`: see docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = handshakes_fuzz::harness::certificate(data);
});
