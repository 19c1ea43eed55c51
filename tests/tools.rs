//! Shared helpers for tests that call the library directly: running the
//! pipeline on a file, and what to do when something outside the crate is
//! missing (the peer corpus, tshark, libpcap, root): skip loudly, or fail
//! when the environment promises it is there (`HANDSHAKES_REQUIRE_ALL=1`,
//! set by CI).

use std::path::Path;

use handshakes::source::file::FileSource;
use handshakes::{analyze, Config, ConnectionRecord, Summary};

/// The whole pipeline on one file: its summary and records in id order.
pub fn analyze_path(path: &Path) -> (Summary, Vec<ConnectionRecord>) {
    let mut source = FileSource::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut records = Vec::new();
    let summary =
        analyze(&mut source, &Config::default(), &mut records).unwrap_or_else(|e| panic!("{e}"));
    records.sort_by_key(|r| r.id);
    (summary, records)
}

/// Reports a skipped test on stderr; panics instead when
/// `HANDSHAKES_REQUIRE_ALL` is set, so CI cannot pass by skipping.
pub fn skip_or_fail(what: &str, why: &str) {
    let required = std::env::var("HANDSHAKES_REQUIRE_ALL").is_ok_and(|v| !v.is_empty() && v != "0");
    if required {
        panic!("{what} is required (HANDSHAKES_REQUIRE_ALL is set) but unavailable: {why}");
    }
    eprintln!();
    eprintln!("!!! SKIPPED: {what} unavailable: {why}");
    eprintln!("!!! (set HANDSHAKES_REQUIRE_ALL=1 to make this a failure)");
    eprintln!();
}
