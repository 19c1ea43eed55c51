//! `cargo +nightly fuzz run tls_sealed`: see docs/fuzzing.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = handshakes_fuzz::sealed::tls_sealed(data);
});
