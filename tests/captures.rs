//! The real captures in captures/ (recorded on loopback from curl, python
//! requests, openssl and nginx; see captures/README.md): the facts recorded
//! there, and tshark as a live differential oracle on every file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use handshakes::record::CloseKind;

use crate::tools::{analyze_path as run, skip_or_fail};

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

mod facts;
use facts::FACTS;

#[test]
fn recorded_facts_hold() {
    for f in FACTS {
        let name = f.file;
        let (summary, records) = run(&capture(name));
        assert_eq!(summary.connections, f.connections, "{name}: connections");
        assert_eq!(
            summary.tcp_handshakes, f.connections,
            "{name}: every handshake complete"
        );
        assert_eq!(summary.connections_without_handshake, 0, "{name}");
        let requests = summary.requests;
        assert!(
            requests.abs_diff(f.requests) <= f.tolerance,
            "{name}: {requests} requests, expected {} ± {}",
            f.requests,
            f.tolerance
        );
        match f.tls {
            Some((full, resumed)) => {
                assert_eq!(
                    (summary.tls_handshakes_full, summary.tls_handshakes_resumed),
                    (full, resumed),
                    "{name}: full and resumed TLS handshakes"
                );
            }
            None => assert_eq!(
                summary.tls_handshakes_full + summary.tls_handshakes_resumed,
                f.connections,
                "{name}: every TLS handshake completes"
            ),
        }
        if f.clean {
            assert!(
                summary.anomalies.is_empty(),
                "{name}: anomalies {:?}",
                summary.anomalies
            );
        }
        for r in &records {
            assert!(
                !r.partial && r.client_by == handshakes::record::ClientBy::Syn,
                "{name}: {}",
                r.id
            );
            assert_eq!(
                r.http.method, f.method,
                "{name}: how requests were counted on {}",
                r.id
            );
            let connect = r.tcp.handshake.connect.expect("connect time");
            // Loopback: the handshake takes microseconds, never a second.
            assert!(connect > 0.0 && connect < 0.1, "{name}: connect {connect}");
            if f.clean {
                assert_eq!(
                    r.tcp.retransmissions.total(),
                    0,
                    "{name}: no retransmissions on lo"
                );
            }
            if let Some((kind, by)) = f.close {
                assert_eq!(
                    (r.close.kind, r.close.by),
                    (kind, Some(by)),
                    "{name}: close of {}",
                    r.id
                );
            }
            if r.close.kind == CloseKind::Fin && r.close.fin_both {
                assert_eq!(r.tcp.state, "SF", "{name}");
            }
        }
    }
}

/// Real router fragmentation (scripts/record-fragment-captures.sh): every
/// full-size segment from the server in three IPv4 fragments. tshark
/// (`-z conv,tcp`) counts 42 TCP frames, 20 from the server; the page and
/// the test page make 21.9 kB of response.
#[test]
fn routers_fragments_are_reassembled() {
    let (summary, records) = run(&capture("ip-fragmented-http.pcap"));
    assert_eq!(summary.packets.tcp, 42);
    assert_eq!(summary.packets.fragments, 30);
    assert!(summary.anomalies.0.is_empty(), "{:?}", summary.anomalies);
    let conn = records.first().expect("one connection");
    assert_eq!(conn.tcp.packets.server, 20);
    assert_eq!(
        conn.http
            .list
            .iter()
            .filter(|r| r.status == Some(200))
            .count(),
        2
    );
    assert!(conn.tcp.bytes.server > 20_000, "{}", conn.tcp.bytes.server);
}

#[test]
fn rate_limited_responses_are_counted_by_status() {
    let (summary, _) = run(&capture("http-429-ratelimit.pcap"));
    assert_eq!(summary.status_codes.get("429"), Some(&3));
    assert_eq!(summary.status_codes.get("200"), Some(&7));
}

/// h2c with prior knowledge (nghttp against nginx): the header blocks are
/// HPACK-decoded; tshark (`-d tcp.port==18081,http2`) shows five
/// `GET /index.html` on streams 1–9, each answered `:status 200`.
#[test]
fn h2c_requests_carry_method_target_and_status() {
    let (summary, records) = run(&capture("h2c-nghttp-prior-knowledge-5.pcap"));
    let list = &records.first().expect("one connection").http.list;
    assert_eq!(list.len(), 5);
    for r in list {
        assert_eq!(r.method.as_deref(), Some("GET"));
        assert_eq!(r.target.as_deref(), Some("/index.html"));
        assert_eq!(r.status, Some(200));
    }
    assert_eq!(summary.status_codes.get("200"), Some(&5));
}

#[test]
fn verdicts_tell_reuse_from_no_reuse() {
    let (off, _) = run(&capture("java-urlconnection-keepalive-off-10.pcap"));
    assert!(off.verdict.contains("no reuse"), "{}", off.verdict);
    assert_eq!(off.handshakes_per_request.tcp, Some(1.0));
    let (pooled, _) = run(&capture("java-httpclient-pooled-10x10.pcap"));
    assert!(pooled.verdict.contains("pooled"), "{}", pooled.verdict);
    assert_eq!(pooled.handshakes_per_request.tcp, Some(0.1));
    assert_eq!(pooled.peak_concurrent_connections.connections, 10);
}

#[test]
fn pcap_and_pcapng_copies_agree() {
    let (_, pcap) = run(&capture("http-curl-5-keepalive.pcap"));
    let (_, pcapng) = run(&capture("http-curl-5-keepalive.pcapng"));
    assert_eq!(pcap, pcapng, "editcap -F pcapng must not change anything");
}

/// Per tcp.stream: (packets, first SYN, first SYN-ACK) from tshark.
pub type TsharkStreams = BTreeMap<u64, (u64, Option<f64>, Option<f64>)>;

pub fn tshark_streams(path: &Path) -> Option<TsharkStreams> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args([
            "-Y",
            "tcp",
            "-T",
            "fields",
            "-e",
            "tcp.stream",
            "-e",
            "frame.time_epoch",
            "-e",
            "tcp.flags",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut streams = TsharkStreams::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut f = line.split('\t');
        let (Some(stream), Some(ts), Some(flags)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let stream: u64 = stream.parse().ok()?;
        let ts: f64 = ts.parse().ok()?;
        let flags = u16::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
        let entry = streams.entry(stream).or_insert((0, None, None));
        entry.0 += 1;
        if flags & 0x12 == 0x02 && entry.1.is_none() {
            entry.1 = Some(ts);
        }
        if flags & 0x12 == 0x12 && entry.2.is_none() {
            entry.2 = Some(ts);
        }
    }
    Some(streams)
}

#[test]
fn every_capture_matches_tshark() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("captures/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "captures/ holds the real recordings");
    for path in files {
        let Some(streams) = tshark_streams(&path) else {
            skip_or_fail("tshark", "not installed or failed (apt-get install tshark)");
            return;
        };
        let (_, records) = run(&path);
        let name = path.display();
        assert_eq!(
            records.len(),
            streams.len(),
            "{name}: connections vs tshark streams"
        );
        for (r, (_, (packets, syn, synack))) in records.iter().zip(&streams) {
            assert_eq!(
                r.tcp.packets.total(),
                *packets,
                "{name}: packets of {}",
                r.id
            );
            let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => (a - b).abs() < 1e-6,
                (None, None) => true,
                _ => false,
            };
            assert!(
                same(r.tcp.handshake.syn.map(|i| i.ts), *syn),
                "{name}: SYN of {}",
                r.id
            );
            assert!(
                same(r.tcp.handshake.synack.map(|i| i.ts), *synack),
                "{name}: SYN-ACK of {}",
                r.id
            );
        }
    }
}
