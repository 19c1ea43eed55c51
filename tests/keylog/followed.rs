//! `live --keylog` follows the key log as its clients write it: a TLS
//! session's secrets are often logged after records that need them were
//! captured (on loopback the server's TLS 1.3 flight rides in the
//! ServerHello's own segment, before any client can have logged the keys
//! that open it). Those records are held and read once the secrets come —
//! so real captures, read as `live` reads an interface with their key log
//! written after any packet, give the records `analyze --keylog` gives —
//! within bounds: records held longer than 2 s of capture time are read
//! as without keys, and the session's outcome says `partial`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use handshakes::analyze::Analyzer;
use handshakes::source::file::FileSource;
use handshakes::{Config, ConnectionRecord, KeyLog, PacketSource, Summary};

use crate::support::{Packet, Pcap, Scratch};
use crate::tunnels::rewritten;

fn captures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("captures")
}

/// `pcap` through a live analysis following a key log (empty at first),
/// `keys` appended to it once `before` packets were read (after the last:
/// before the analysis ends; never if `None`): its connections' records
/// in order of id, and the summary.
pub(crate) fn analyze_followed(
    pcap: &Path,
    keys: &Path,
    before: Option<usize>,
) -> (Vec<ConnectionRecord>, Summary) {
    let scratch = Scratch::new();
    let log = scratch.file("client.keylog", b"");
    let keylog = KeyLog::open(std::slice::from_ref(&log), true).expect("a followed key log");
    let mut analyzer = Analyzer::new(Config {
        threads: 1,
        keylog: Some(Arc::new(keylog)),
        ..Config::default()
    });
    let mut source = FileSource::open(pcap).expect("ours");
    let secrets = std::fs::read(keys).expect("ours");
    let write = || {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("the key log");
        file.write_all(&secrets).expect("appended");
    };
    let mut records = Vec::new();
    let mut read = 0;
    while let Some(packet) = source.next_packet().expect("readable") {
        if Some(read) == before {
            write();
        }
        analyzer
            .packet(&packet, &mut records)
            .expect("no output error");
        read += 1;
    }
    if Some(read) == before {
        write();
    }
    let summary = analyzer
        .finish(source.info(), &mut records)
        .expect("finish");
    records.sort_by_key(|r| r.id);
    (records, summary)
}

/// [`analyze_followed`]'s records, as JSON.
fn read_followed(pcap: &Path, keys: &Path, before: Option<usize>) -> Vec<Value> {
    let (records, _) = analyze_followed(pcap, keys, before);
    records
        .iter()
        .map(|r| serde_json::to_value(r).expect("serializes"))
        .collect()
}

/// Each frame's capture time, seconds.
fn frame_times(pcap: &Path) -> Vec<f64> {
    let mut source = FileSource::open(pcap).expect("ours");
    std::iter::from_fn(|| {
        let packet = source.next_packet().expect("readable")?;
        Some(packet.ts.as_secs_f64())
    })
    .collect()
}

/// When the first client Finished was sent: its client had logged the
/// secrets by then (clients write them as they derive them, before they
/// use them).
fn first_client_finished(records: &[Value]) -> f64 {
    let finished = records.iter().flat_map(|r| {
        let events = r["tls"]["events"].as_array().cloned().unwrap_or_default();
        events.into_iter().filter_map(|e| {
            let client_finished = e["name"] == "finished" && e["side"] == "client";
            client_finished.then(|| e["time"]["ts"].as_f64()).flatten()
        })
    });
    finished.fold(f64::INFINITY, f64::min)
}

/// TLS 1.3 and 1.2, HTTP/1.1 and HTTP/2, new, kept-alive and resumed
/// sessions, AEAD and CBC suites, recorded with their clients' key logs.
const CAPTURES: [&str; 6] = [
    "h2-curl-10",
    "tls13-curl-keepalive-5",
    "tls12-curl-3-new-connections",
    "tls-python-requests-session-5",
    "tls12-openssl-resumption",
    "tls-suites-curl-4",
];

#[test]
fn secrets_written_after_any_packet_give_what_analyze_gives() {
    for name in CAPTURES {
        let pcap = captures().join(format!("{name}.pcap"));
        let keys = captures().join(format!("{name}.keylog"));
        let at_once = read_followed(&pcap, &keys, Some(0));
        // The same as `analyze --keylog`, which reads the log once.
        let read: Vec<Value> = crate::keylog::analyze_file(&pcap, Some(&keys), 1)
            .iter()
            .map(|r| serde_json::to_value(r).expect("serializes"))
            .collect();
        assert_eq!(at_once, read, "{name}: followed and read at once");
        for c in &at_once {
            let outcome = c.pointer("/tls/decryption/outcome");
            assert_eq!(outcome, Some(&"complete".into()), "{name}: {c}");
        }
        // Written after any packet captured before the first client
        // Finished (as clients do): the same records. Written later (no
        // client does), its first connections hold more records than the
        // bounds allow: they say so, never `complete`.
        let times = frame_times(&pcap);
        let finished = first_client_finished(&at_once);
        let mut same = 0;
        for before in 1..=times.len() {
            let late = read_followed(&pcap, &keys, Some(before));
            if times.get(before - 1).is_some_and(|&t| t < finished) {
                assert_eq!(
                    late, at_once,
                    "{name}: key log written after {before} packets"
                );
            }
            for (late, at_once) in late.iter().zip(&at_once).filter(|(l, a)| l != a) {
                let outcome = late.pointer("/tls/decryption/outcome");
                assert_ne!(
                    outcome,
                    Some(&"complete".into()),
                    "{name}: written after {before}: {late}\nnot {at_once}"
                );
            }
            same += usize::from(late == at_once);
        }
        let realistic = times.iter().filter(|&&t| t < finished).count();
        assert!(
            realistic >= 4 && same >= realistic,
            "{name}: {same} {realistic}"
        );
    }
}

/// h2-curl-10 with a 3 s pause after its ServerHello's segment (the 6th
/// frame, which carries the server's sealed flight too): secrets logged
/// after the pause come too late for that flight (read as without keys:
/// the ALPN told by size only, no certificate, the outcome `partial`) and
/// open what comes after it (the requests).
#[test]
fn records_held_longer_than_two_seconds_are_read_without_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let original = captures().join("h2-curl-10.pcap");
    let keys = captures().join("h2-curl-10.keylog");
    let mut n = 0;
    let packets = rewritten(&original, |ts, f| {
        n += 1;
        let ts = if n > 6 { ts + 3_000_000_000 } else { ts };
        vec![Packet::new(ts, f.to_vec())]
    });
    let pcap = dir.path().join("paused.pcap");
    std::fs::write(&pcap, Pcap::new(1).write(&packets)).expect("writes");
    let on_time = read_followed(&pcap, &keys, Some(6));
    let [on_time] = &on_time[..] else {
        panic!("one connection: {on_time:?}");
    };
    assert_eq!(on_time["tls"]["alpn"], "h2", "{on_time}");
    assert_eq!(on_time["tls"]["decryption"]["outcome"], "complete");
    let late = read_followed(&pcap, &keys, Some(8));
    let [late] = &late[..] else {
        panic!("one connection: {late:?}");
    };
    assert!(late["tls"]["alpn"].is_null(), "{late}");
    assert_eq!(late["tls"]["alpn_by_size"], "h2", "{late}");
    assert!(late["tls"]["certificate"].is_null(), "{late}");
    assert_eq!(late["tls"]["decryption"]["outcome"], "partial", "{late}");
    assert_eq!(late["http"]["requests"], on_time["http"]["requests"]);
    assert_eq!(late["http"]["list"], on_time["http"]["list"]);
}
