//! A live capture's key log is followed: its client writes each secret as
//! it derives it, often after its ServerHello was captured. A QUIC
//! connection whose secrets were not there at its ServerHello looks again
//! at its later packets, and reads the HTTP/3 requests once they are.
//! Chromium's capture, read as `live` reads an interface, its key log
//! written part way.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use handshakes::analyze::Analyzer;
use handshakes::source::file::FileSource;
use handshakes::{Config, KeyLog, PacketSource};

use crate::support::Scratch;

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

/// Chromium's capture through a live analysis following `log` (empty at
/// first), its client's key log appended to it once `before` packets were
/// read (never if `None`): the connection's HTTP/3 decryption outcome
/// and requests.
fn read_with_log_written_after(before: Option<usize>) -> (String, u64) {
    let scratch = Scratch::new();
    let log = scratch.file("client.keylog", b"");
    let keylog = KeyLog::open(std::slice::from_ref(&log), true).expect("a followed key log");
    let mut analyzer = Analyzer::new(Config {
        threads: 1,
        keylog: Some(Arc::new(keylog)),
        ..Config::default()
    });
    let mut source = FileSource::open(&capture("quic-chromium-h3-2.pcap")).expect("ours");
    let secrets = std::fs::read(capture("quic-chromium-h3-2.keylog")).expect("ours");
    let mut records = Vec::new();
    let mut read = 0;
    while let Some(packet) = source.next_packet().expect("readable") {
        if Some(read) == before {
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&log)
                .expect("the key log");
            file.write_all(&secrets).expect("appended");
        }
        analyzer
            .packet(&packet, &mut records)
            .expect("no output error");
        read += 1;
    }
    let summary = analyzer
        .finish(source.info(), &mut records)
        .expect("finish");
    let quic = summary.quic.expect("QUIC figures");
    let http = quic.list[0].http.as_ref().expect("a ServerHello read");
    (http.decryption.as_str().to_string(), http.requests)
}

#[test]
fn secrets_written_after_the_server_hello_are_looked_for_again() {
    // The ServerHello completes in the sixth datagram (after a Retry and
    // the client's ClientHello again), the requests come later.
    assert_eq!(
        read_with_log_written_after(Some(6)),
        ("complete".to_string(), 2)
    );
    // Written before it: the same, read at once.
    assert_eq!(
        read_with_log_written_after(Some(0)),
        ("complete".to_string(), 2)
    );
    // Never written.
    assert_eq!(
        read_with_log_written_after(None),
        ("no_secrets".to_string(), 0)
    );
}
