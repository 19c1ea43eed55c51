//! HTTP/2 over TLS without keys: requests counted a record each from the
//! records' sizes (and, in TLS 1.3, the ALPN told by the size of the
//! EncryptedExtensions), checked connection by connection against what
//! the server logged (nginx's access log beside each capture, which names
//! the client's port) and against the requests read with the key log where
//! the client wrote one. The captures are real: Java 17's HttpClient
//! (HTTP/2 as it negotiates by default, one thread and ten threads
//! multiplexing), curl with ten streams at once, curl POSTing small and
//! large bodies, and headless Chromium loading a page of twenty images
//! over TLS 1.2 and TLS 1.3 (scripts/record-h2-captures.sh;
//! captures/README.md, section z); and Java's HttpClient, python httpx and
//! curl POSTing to a rate-limited API behind nginx, which answers 429
//! before it reads a body, and the non-blocking clients (Java's sendAsync,
//! Apache HttpAsyncClient 5) POSTing fifty at once
//! (scripts/record-ratelimit-captures.sh; sections aa and ad).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use handshakes::record::HttpMethod;
use handshakes::ConnectionRecord;

use crate::keylog::analyze_file;

pub(crate) fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

pub(crate) fn records(name: &str, keylog: Option<&str>) -> Vec<ConnectionRecord> {
    analyze_file(&capture(name), keylog.map(capture).as_deref(), 1)
}

/// Requests by client port, from nginx's access log in the `conn` format
/// (`127.0.0.1:PORT conn=N conn_req=M "GET …" 200 …`).
pub(crate) fn nginx_requests(log: &str) -> BTreeMap<u16, u64> {
    let text = std::fs::read_to_string(capture(log)).unwrap_or_else(|e| panic!("{log}: {e}"));
    let mut by_port = BTreeMap::new();
    for line in text.lines() {
        let client = line.split_whitespace().next().expect("a client");
        let port = client.rsplit(':').next().expect("a port");
        *by_port.entry(port.parse().expect("a port")).or_default() += 1;
    }
    by_port
}

pub(crate) fn client_port(r: &ConnectionRecord) -> u16 {
    r.client.rsplit(':').next().unwrap().parse().unwrap()
}

/// The captures and their key logs.
const CAPTURES: [(&str, Option<&str>); 14] = [
    ("java-httpclient-h2-10", None),
    ("java-httpclient-h2-10x10", None),
    ("h2-curl-parallel-20", Some("h2-curl-parallel-20.keylog")),
    ("h2-curl-post-5", Some("h2-curl-post-5.keylog")),
    (
        "h2-chromium-page-2x21",
        Some("h2-chromium-page-2x21.keylog"),
    ),
    ("java-httpclient-h2-post-429-30", None),
    ("java-httpclient-h2-post-429-10x10", None),
    ("httpx-h2-post-429-20", Some("httpx-h2-post-429-20.keylog")),
    ("h2-curl-post-429-12", Some("h2-curl-post-429-12.keylog")),
    // The non-blocking clients, 50 POSTs outstanding (section ad): Java's
    // sendAsync (50 connections, one carries 51) and Apache
    // HttpAsyncClient 5 (one connection; a body's DATA and the empty DATA
    // ending its stream in two records).
    ("java-async-h2-post-429-100x50", None),
    ("java-async-warm-h2-post-429-100x50", None),
    ("apache-async-h2-post-429-100x50", None),
    // Netty 4.1 (section ae): every request one record sealed with its
    // body, the first with the preface; streams closed in runs of
    // RST_STREAM frames, up to fifty in a record.
    ("netty-h2-post-429-100x50", None),
    // curl over a lossy link (section ar): sequential GETs whose HEADERS
    // for a path HPACK does not index are 26 bytes, as two WINDOW_UPDATEs.
    ("tls-lossy-h2-20", Some("tls-lossy-h2-20.keylog")),
];

/// Statuses by client port, from the same log.
pub(crate) fn nginx_statuses(log: &str) -> BTreeMap<u16, BTreeMap<u16, u64>> {
    let text = std::fs::read_to_string(capture(log)).unwrap_or_else(|e| panic!("{log}: {e}"));
    let mut by_port: BTreeMap<u16, BTreeMap<u16, u64>> = BTreeMap::new();
    for line in text.lines() {
        let port = line
            .split_whitespace()
            .next()
            .and_then(|c| c.rsplit(':').next());
        let status = line
            .split('"')
            .nth(2)
            .and_then(|rest| rest.split_whitespace().next());
        let (Some(port), Some(status)) = (port, status) else {
            panic!("{log}: {line}");
        };
        let port = port.parse().expect("a port");
        *by_port
            .entry(port)
            .or_default()
            .entry(status.parse().expect("a status"))
            .or_default() += 1;
    }
    by_port
}

#[test]
fn h2_requests_from_record_sizes_match_the_server_log_connection_by_connection() {
    for (name, keylog) in CAPTURES {
        let logged = nginx_requests(&format!("{name}.nginx-access.log"));
        let estimated = records(&format!("{name}.pcap"), None);
        let mut seen = BTreeMap::new();
        for r in &estimated {
            let Some(tls) = &r.tls else { continue };
            let h = &r.http;
            let port = client_port(r);
            assert_eq!(h.method, HttpMethod::TlsFlights, "{name} #{}", r.id);
            assert!(h.estimated, "{name} #{}", r.id);
            // Counted a record each: an estimate, not a low-confidence one.
            assert_eq!(h.confidence, "estimate", "{name} #{}", r.id);
            assert_eq!(
                h.requests,
                logged.get(&port).copied().unwrap_or(0),
                "{name} #{} (port {port}): nginx logged {logged:?}",
                r.id
            );
            // Responses are matched to requests in order once requests are
            // seen multiplexed, so some may go unmatched; never more.
            assert!(h.responses <= h.requests, "{name} #{}", r.id);
            // TLS 1.3 hides the ALPN choice; its EncryptedExtensions'
            // length tells it.
            if tls.version.as_deref() == Some("TLS 1.3") {
                assert_eq!(tls.alpn, None, "{name} #{}", r.id);
                assert_eq!(tls.alpn_by_size.as_deref(), Some("h2"), "{name} #{}", r.id);
            } else {
                assert_eq!(tls.alpn.as_deref(), Some("h2"), "{name} #{}", r.id);
                assert_eq!(tls.alpn_by_size, None, "{name} #{}", r.id);
            }
            seen.insert(port, h.requests);
        }
        // Every connection nginx logged was found.
        for (port, n) in &logged {
            assert_eq!(seen.get(port), Some(n), "{name}: port {port}");
        }
        // With the key log, the requests read equal the estimate.
        if let Some(keylog) = keylog {
            let exact = records(&format!("{name}.pcap"), Some(keylog));
            let read: Vec<u64> = exact.iter().map(|r| r.http.requests).collect();
            let guessed: Vec<u64> = estimated.iter().map(|r| r.http.requests).collect();
            assert_eq!(read, guessed, "{name}");
            assert!(exact
                .iter()
                .filter(|r| r.http.requests > 0)
                .all(|r| r.http.method == HttpMethod::TlsH2 && !r.http.estimated));
        }
    }
}

#[test]
fn h2_curl_sequential_estimate_equals_the_key_log() {
    // The older capture with a key log and no server log: 10 requests.
    let estimated = records("h2-curl-10.pcap", None);
    let exact = records("h2-curl-10.pcap", Some("h2-curl-10.keylog"));
    assert_eq!(estimated[0].http.requests, 10);
    assert_eq!(exact[0].http.requests, 10);
    let tls = estimated[0].tls.as_ref().unwrap();
    assert_eq!(tls.alpn_by_size.as_deref(), Some("h2"));
    // With the key log the EncryptedExtensions are read: the ALPN is
    // known, not told by size.
    let tls = exact[0].tls.as_ref().unwrap();
    assert_eq!(
        (tls.alpn.as_deref(), tls.alpn_by_size.as_deref()),
        (Some("h2"), None)
    );
}

#[test]
fn http1_over_tls13_is_told_apart_by_size() {
    // curl offered only http/1.1; python requests too: the size says
    // http/1.1, and the HTTP/1 flight estimate stays.
    for name in [
        "tls13-curl-keepalive-5.pcap",
        "tls-python-requests-session-5.pcap",
    ] {
        let r = &records(name, None)[0];
        let tls = r.tls.as_ref().unwrap();
        assert_eq!(tls.alpn_by_size.as_deref(), Some("http/1.1"), "{name}");
        assert_eq!(r.http.requests, 5, "{name}");
        assert_eq!(r.http.confidence, "estimate", "{name}");
    }
}

#[test]
fn the_alpn_told_by_size_is_the_one_the_key_log_reads() {
    // Every TLS 1.3 connection of every capture with a key log.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("keylog") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let keylog = format!("{stem}.keylog");
        let by_size = records(&format!("{stem}.pcap"), None);
        let read = records(&format!("{stem}.pcap"), Some(&keylog));
        for (s, r) in by_size.iter().zip(&read) {
            let (Some(s), Some(r)) = (&s.tls, &r.tls) else {
                continue;
            };
            if r.version.as_deref() != Some("TLS 1.3") {
                continue;
            }
            assert_eq!(s.alpn, None, "{stem}");
            assert_eq!(s.alpn_by_size, r.alpn, "{stem}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} TLS 1.3 connections checked");
}

#[test]
fn rate_limited_posts_read_with_keys_have_the_servers_statuses() {
    // The 429s a rate limiter sent (early, before the body; or after it,
    // from the application) and the 200s, connection by connection.
    for name in [
        "httpx-h2-post-429-20",
        "httpx-h2-post-429-10x10",
        "h2-curl-post-429-12",
    ] {
        let logged = nginx_statuses(&format!("{name}.nginx-access.log"));
        let exact = records(&format!("{name}.pcap"), Some(&format!("{name}.keylog")));
        let mut seen = 0;
        for r in &exact {
            let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
            for request in &r.http.list {
                *statuses
                    .entry(request.status.expect("a status"))
                    .or_default() += 1;
            }
            assert_eq!(
                Some(&statuses),
                logged.get(&client_port(r)),
                "{name} #{}",
                r.id
            );
            assert!(statuses.contains_key(&429), "{name} #{}", r.id);
            seen += 1;
        }
        assert_eq!(seen, logged.len(), "{name}");
    }
}

#[test]
fn frames_of_several_streams_sealed_together_are_a_low_estimate() {
    // python httpx (its h2 stack) POSTing from ten tasks on one
    // connection seals whatever frames are pending in one record: HEADERS
    // of one stream with the DATA of another and WINDOW_UPDATEs. A record
    // is not a request, and the estimate says so. (Its bodies are told by
    // the empty DATA frame after them; two requests' HEADERS in one
    // record count once: 93 for 100 here, 86–97 over seventeen runs.)
    let name = "httpx-h2-post-429-10x10";
    let logged = nginx_requests(&format!("{name}.nginx-access.log"));
    let estimated = records(&format!("{name}.pcap"), None);
    let exact = records(&format!("{name}.pcap"), Some(&format!("{name}.keylog")));
    assert_eq!(estimated.len(), 1);
    let (guess, read) = (&estimated[0].http, &exact[0].http);
    assert_eq!(Some(&read.requests), logged.get(&client_port(&exact[0])));
    assert_eq!(read.requests, 100);
    assert_eq!(guess.confidence, "low");
    assert!(guess.requests < read.requests, "{}", guess.requests);
    assert!(
        guess.requests >= read.requests * 4 / 5,
        "{}",
        guess.requests
    );
}

#[test]
fn okhttp_sealing_frames_of_several_streams_is_a_low_estimate() {
    // OkHttp 3's enqueue, 100 POSTs, five at once, over HTTP/2: its
    // records seal HEADERS and bodies of several streams (two HEADERS and
    // a body in one, a body alone in another), so a record is not a
    // request; its requests' and bodies' sizes differ by an indexed
    // HEADERS frame, and the estimate says it is doubtful. Four of its
    // five connections (raced open) carry nothing.
    let name = "okhttp-async-h2-post-429-100x50";
    let logged = nginx_requests(&format!("{name}.nginx-access.log"));
    let estimated = records(&format!("{name}.pcap"), None);
    assert_eq!(estimated.len(), 5);
    for r in &estimated {
        let truth = logged.get(&client_port(r)).copied().unwrap_or(0);
        if truth == 0 {
            assert_eq!(r.http.requests, 0, "{name} #{}", r.id);
            continue;
        }
        assert_eq!(truth, 100);
        assert_eq!(r.http.confidence, "low", "{name} #{}", r.id);
        assert!(r.http.requests.abs_diff(truth) <= 5, "{}", r.http.requests);
    }
}
