//! A live capture's key log is followed: its client writes each secret as
//! it derives it, often after its ServerHello was captured, and after the
//! server's flight and first 1-RTT packets (on loopback it always is). A
//! QUIC connection whose secrets were not there at its ServerHello looks
//! again at its later packets, and the Handshake and 1-RTT packets that
//! came before their keys are held and read once they come — for a
//! while: a client that writes nothing for 2 s of capture time has its
//! held packets read as without a key log. Chromium's capture, read as
//! `live` reads an interface, its key log written part way.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::keylog::followed::analyze_followed;
use crate::support::{Packet, Pcap};
use crate::tunnels::rewritten;

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

/// The chromium capture's 20 frames.
const FRAMES: usize = 20;

/// `pcap` through a live analysis following a key log, the capture's
/// client's key log appended to it once `before` packets were read
/// (`Some(FRAMES)`: after the last, before the analysis ends; never if
/// `None`): its QUIC connection's record as JSON.
fn read_with_log_written_after(pcap: &Path, before: Option<usize>) -> Value {
    let keys = capture("quic-chromium-h3-2.keylog");
    let (_, summary) = analyze_followed(pcap, &keys, before);
    let quic = summary.quic.expect("QUIC figures");
    let [record] = &quic.list[..] else {
        panic!("one QUIC connection: {:?}", quic.list);
    };
    serde_json::to_value(record).expect("serializes")
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("-")
}

#[test]
fn secrets_written_late_open_every_packet_that_came_before() {
    let pcap = capture("quic-chromium-h3-2.pcap");
    // Written before the capture: read at once, as `analyze --keylog`.
    let at_once = read_with_log_written_after(&pcap, Some(0));
    assert_eq!(str_at(&at_once, "/http/decryption"), "complete");
    assert_eq!(at_once["http"]["requests"], 2);
    assert_eq!(str_at(&at_once, "/tls/alpn"), "h3");
    assert!(at_once["tls"]["certificate"].is_object(), "{at_once}");
    // Written after any packet: after the ServerHello (the sixth frame),
    // after the server's flight (seventh), after the client's Finished
    // (ninth) and the server's first 1-RTT packets, or only after the last
    // packet (read as the connection ends): the same record.
    for before in 1..=FRAMES {
        let late = read_with_log_written_after(&pcap, Some(before));
        assert_eq!(late, at_once, "key log written after {before} packets");
    }
    // Never written.
    let never = read_with_log_written_after(&pcap, None);
    assert_eq!(str_at(&never, "/http/decryption"), "no_secrets");
    assert_eq!(never["http"]["requests"], 0);
    assert!(never["tls"]["alpn"].is_null(), "{never}");
    // Told by their sizes, as without a key log: the client's Finished.
    assert_eq!(
        never["handshake"]["duration"], at_once["handshake"]["duration"],
        "{never}"
    );
}

/// The same capture with a 3 s pause after the client's Finished (frame
/// 9): a key log written after it comes too late for the packets held
/// before it (the server's flight, the client's Finished: read as without
/// a key log, so no ALPN), and opens those after it (the requests).
#[test]
fn packets_held_longer_than_two_seconds_are_read_without_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut n = 0;
    let packets = rewritten(&capture("quic-chromium-h3-2.pcap"), |ts, f| {
        n += 1;
        let ts = if n > 9 { ts + 3_000_000_000 } else { ts };
        vec![Packet::new(ts, f.to_vec())]
    });
    assert_eq!(packets.len(), FRAMES);
    let pcap = dir.path().join("paused.pcap");
    std::fs::write(&pcap, Pcap::new(1).write(&packets)).expect("writes");
    let on_time = read_with_log_written_after(&pcap, Some(9));
    assert_eq!(str_at(&on_time, "/http/decryption"), "complete");
    assert_eq!(str_at(&on_time, "/tls/alpn"), "h3");
    let late = read_with_log_written_after(&pcap, Some(12));
    assert_eq!(str_at(&late, "/http/decryption"), "partial", "{late}");
    assert!(late["tls"]["alpn"].is_null(), "{late}");
    assert!(late["tls"]["certificate"].is_null(), "{late}");
    assert_eq!(late["http"]["requests"], 2, "{late}");
    assert_eq!(
        late["handshake"]["duration"], on_time["handshake"]["duration"],
        "the client's Finished told by its size: {late}"
    );
}
