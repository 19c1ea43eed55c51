//! The real captures in captures/ (recorded on loopback from curl, python
//! requests, openssl and nginx; see captures/README.md): the facts recorded
//! there, and tshark as a live differential oracle on every file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use handshakes::record::{CloseKind, HttpMethod, Side};

use crate::tools::{analyze_path as run, skip_or_fail};

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

/// What captures/README.md records about a capture.
struct Fact {
    file: &'static str,
    connections: u64,
    /// Who sends the first FIN or RST, where that is deterministic.
    close: Option<(CloseKind, Side)>,
    /// HTTP requests in the whole capture, and the tolerance when estimated.
    requests: u64,
    tolerance: u64,
    method: HttpMethod,
    /// Full and resumed TLS handshakes; `None` where the run decides.
    tls: Option<(u64, u64)>,
    /// No retransmissions or anomalies (loopback under light load).
    clean: bool,
}

const fn fact(file: &'static str, connections: u64, requests: u64, method: HttpMethod) -> Fact {
    Fact {
        file,
        connections,
        close: None,
        requests,
        tolerance: 0,
        method,
        tls: Some((0, 0)),
        clean: true,
    }
}

const FIN_CLIENT: Option<(CloseKind, Side)> = Some((CloseKind::Fin, Side::Client));
const FIN_SERVER: Option<(CloseKind, Side)> = Some((CloseKind::Fin, Side::Server));
const H1: HttpMethod = HttpMethod::Http1;
const TLS: HttpMethod = HttpMethod::TlsFlights;

const FACTS: &[Fact] = &[
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-new-connections.pcap", 5, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-new-connections-ns.pcap", 5, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-keepalive.pcap", 1, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-keepalive.pcapng", 1, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-python-requests-session.pcap", 1, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-python-requests-nosession.pcap", 5, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-ipv6.pcap", 3, 4, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-429-ratelimit.pcap", 5, 10, H1)
    },
    Fact {
        close: Some((CloseKind::Rst, Side::Server)),
        ..fact("http-curl-rst.pcap", 2, 2, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-pipelined-3.pcap", 1, 3, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-chunked-3.pcap", 1, 3, H1)
    },
    fact("h2c-nghttp-prior-knowledge-5.pcap", 1, 5, HttpMethod::H2c),
    Fact {
        tls: Some((3, 0)),
        ..fact("tls12-curl-3-new-connections.pcap", 3, 3, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("tls13-curl-keepalive.pcap", 1, 3, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("tls13-curl-keepalive-5.pcap", 1, 5, TLS)
    },
    // scripts/record-keylog-captures.sh: other suites, and KeyUpdates.
    Fact {
        tls: Some((4, 0)),
        ..fact("tls-suites-curl-4.pcap", 4, 8, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        close: Some((CloseKind::Rst, Side::Server)),
        ..fact("tls13-openssl-keyupdate.pcap", 1, 3, TLS)
    },
    // scripts/record-cbc-captures.sh: AES-CBC in TLS 1.0, 1.1 and 1.2 (who
    // closes first is racy). Without its key log the record flights
    // estimate every request, TLS 1.0's split records included.
    Fact {
        tls: Some((7, 0)),
        ..fact("tls-cbc-7.pcap", 7, 14, TLS)
    },
    // scripts/record-ccm-captures.sh: AES-CCM in TLS 1.2 and 1.3, one
    // connection over h2; the server closes first in TLS 1.2, the client in
    // TLS 1.3. Without the key log every request is estimated from the
    // record flights, CCM_8's shorter tag included.
    Fact {
        tls: Some((7, 0)),
        ..fact("tls-ccm-7.pcap", 7, 14, TLS)
    },
    // scripts/record-lossy-captures.sh: curl over a link that drops a
    // fifth of the segments each way (retransmissions, dropped ACKs), 20
    // requests over h2 and over HTTP/1.1, estimated without the key log.
    Fact {
        tls: Some((1, 0)),
        clean: false,
        ..fact("tls-lossy-h2-20.pcap", 1, 20, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        clean: false,
        ..fact("tls-lossy-h1-20.pcap", 1, 20, TLS)
    },
    // Inside VXLAN (scripts/record-tunnel-captures.sh): the connections are
    // the inner ones; the outer UDP and the kernel's ICMPv6 inside the
    // tunnel are skipped.
    Fact {
        close: FIN_CLIENT,
        ..fact("tunnel-vxlan-http.pcap", 2, 4, H1)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("tunnel-vxlan-tls13.pcap", 1, 3, TLS)
    },
    // Routers fragment every full-size segment (no DF, a 576-byte link).
    Fact {
        close: FIN_CLIENT,
        ..fact("ip-fragmented-http.pcap", 1, 2, H1)
    },
    // The underlay's MTU below the tunnel's: one VXLAN packet arrives in
    // two IPv4 fragments (reassembled), and the request after it is
    // retransmitted (the classic overlay MTU stall).
    Fact {
        close: FIN_CLIENT,
        clean: false,
        ..fact("tunnel-vxlan-fragmented.pcap", 1, 2, H1)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((1, 1)),
        ..fact("tls13-openssl-resumption.pcap", 2, 2, TLS)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((1, 1)),
        ..fact("tls12-openssl-resumption.pcap", 2, 2, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("tls-python-requests-session-5.pcap", 1, 5, TLS)
    },
    Fact {
        tls: Some((5, 0)),
        ..fact("tls-python-requests-nosession-5.pcap", 5, 5, TLS)
    },
    Fact {
        tls: Some((1, 9)),
        clean: false,
        ..fact("java-urlconnection-keepalive-off-10.pcap", 10, 10, TLS)
    },
    Fact {
        tls: None,
        clean: false,
        ..fact("java-urlconnection-keepalive-off-10x10.pcap", 100, 100, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("java-urlconnection-keepalive-on-10.pcap", 1, 10, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("java-httpclient-pooled-10.pcap", 1, 10, TLS)
    },
    Fact {
        tls: Some((10, 0)),
        clean: false,
        ..fact("java-httpclient-pooled-10x10.pcap", 10, 100, TLS)
    },
    // HTTP/2 over TLS: counted a record each from the records' sizes
    // (tests/h2_sizes.rs checks every connection against nginx's log).
    Fact {
        tls: Some((1, 0)),
        ..fact("h2-curl-10.pcap", 1, 10, TLS)
    },
    // scripts/record-h2-captures.sh: Java's HttpClient with HTTP/2 (ten
    // threads open ten connections at once and then share one: 91 + 9 × 1
    // in nginx's log), curl with ten streams at once, and Chromium over
    // TLS 1.2 and 1.3 (each run also opens a spare connection that carries
    // nothing).
    Fact {
        tls: Some((1, 0)),
        ..fact("java-httpclient-h2-10.pcap", 1, 10, TLS)
    },
    Fact {
        tls: Some((10, 0)),
        // Ten connections opened at once on loopback: a retransmission.
        clean: false,
        ..fact("java-httpclient-h2-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("h2-curl-parallel-20.pcap", 1, 20, TLS)
    },
    // Bodies in DATA records of their own: three small ones, two of 40 000
    // bytes.
    Fact {
        tls: Some((2, 0)),
        ..fact("h2-curl-post-5.pcap", 2, 5, TLS)
    },
    Fact {
        tls: Some((4, 0)),
        // Chromium's loopback traffic has a retransmission.
        clean: false,
        ..fact("h2-chromium-page-2x21.pcap", 4, 42, TLS)
    },
    // scripts/record-ratelimit-captures.sh: POSTs over HTTP/2 to a
    // rate-limited API (nginx answers 429 before it reads a body); Java's
    // HttpClient with one thread and ten, python httpx with one task (ten
    // tasks: a low estimate, tests/h2_sizes.rs), curl.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("java-httpclient-h2-post-429-30.pcap", 1, 30, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((10, 0)),
        ..fact("java-httpclient-h2-post-429-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("httpx-h2-post-429-20.pcap", 1, 20, TLS)
    },
    Fact {
        close: Some((CloseKind::Rst, Side::Client)),
        tls: Some((2, 0)),
        ..fact("h2-curl-post-429-12.pcap", 2, 12, TLS)
    },
    // The same API over HTTP/1.1 (tests/ratelimit.rs checks every
    // connection against nginx's log): HttpURLConnection with one thread
    // and ten (nine of its connections carry one request; the JDK resumed
    // one TLS session), HttpClient with ten, curl.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("java-urlconnection-post-429-30.pcap", 1, 30, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((18, 1)),
        // Nineteen connections at once on loopback: retransmissions.
        clean: false,
        ..fact("java-urlconnection-post-429-10x10.pcap", 19, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((10, 0)),
        ..fact("java-httpclient-h1-post-429-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        tls: Some((2, 0)),
        ..fact("curl-h1-post-429-12.pcap", 2, 12, TLS)
    },
    // The pooled libraries on the same API: OkHttp 3 (ten connections
    // raced open, one carries all 100 requests over HTTP/2) and Apache
    // HttpClient 5 (HTTP/1.1; it retries a 429 once, so nginx saw 175
    // requests for 100 calls). Loopback under ten threads: retransmissions.
    Fact {
        close: FIN_CLIENT,
        tls: Some((10, 0)),
        clean: false,
        ..fact("okhttp-post-429-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        tls: Some((10, 0)),
        clean: false,
        ..fact("apache-httpclient5-post-429-10x10.pcap", 10, 175, TLS)
    },
    // The non-blocking clients under load, 50 of 100 POSTs outstanding:
    // HttpClient's sendAsync opens a connection a request until its first
    // HTTP/2 connection is up (50, one carries 51) and a connection an
    // outstanding request over HTTP/1.1 (50 × 2); Apache HttpAsyncClient 5
    // retries each 429 once (181 and 133 requests for 100 calls).
    Fact {
        close: FIN_CLIENT,
        tls: Some((50, 0)),
        clean: false,
        ..fact("java-async-h2-post-429-100x50.pcap", 50, 100, TLS)
    },
    // The same with its first request answered before the others start:
    // one connection for all.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        clean: false,
        ..fact("java-async-warm-h2-post-429-100x50.pcap", 1, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((50, 0)),
        clean: false,
        ..fact("java-async-h1-post-429-100x50.pcap", 50, 100, TLS)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((50, 0)),
        ..fact("apache-async-h1-post-429-100x50.pcap", 50, 181, TLS)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((1, 0)),
        ..fact("apache-async-h2-post-429-100x50.pcap", 1, 133, TLS)
    },
    // OkHttp 3's enqueue: five calls to a host at once (its dispatcher),
    // five connections; over HTTP/1.1 each carries 13-23, over HTTP/2 one
    // carries all 100 (estimated 98, low: its records seal frames of
    // several streams).
    Fact {
        close: FIN_CLIENT,
        tls: Some((5, 0)),
        ..fact("okhttp-async-h1-post-429-100x50.pcap", 5, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((5, 0)),
        tolerance: 2,
        clean: false,
        ..fact("okhttp-async-h2-post-429-100x50.pcap", 5, 100, TLS)
    },
    // Netty 4.1 (TLS 1.2): over HTTP/2 one connection for all 100, over
    // HTTP/1.1 a pool of 50 connections, two requests each.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        clean: false,
        ..fact("netty-h2-post-429-100x50.pcap", 1, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((50, 0)),
        ..fact("netty-h1-post-429-100x50.pcap", 50, 100, TLS)
    },
];

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
type TsharkStreams = BTreeMap<u64, (u64, Option<f64>, Option<f64>)>;

fn tshark_streams(path: &Path) -> Option<TsharkStreams> {
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
