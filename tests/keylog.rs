//! `--keylog`: requests over TLS read from records opened with real key
//! logs — those recorded beside the captures (captures/*.keylog, written
//! by curl, python and openssl s_client through SSLKEYLOGFILE) and the
//! corpus's (secrets from Zeek's decryption tests) — checked against what
//! the clients sent, what Zeek logged, and tshark decrypting the same
//! records with the same key log; and what the binary says when a key log
//! cannot be used.

use std::path::{Path, PathBuf};

use handshakes::record::{DecryptionOutcome, HttpMethod};
use handshakes::source::file::FileSource;
use handshakes::{analyze, Config, ConnectionRecord};

use crate::support::{run, stderr, stdout};
use crate::tools::{skip_or_fail, tshark_present};

pub(crate) mod followed;
mod tshark;
use tshark::{tshark_handshakes, tshark_requests};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn corpus() -> PathBuf {
    root().join("../shared/corpus/zeek")
}

/// The pipeline on `capture` with the secrets of `keylog`.
fn analyze_with(capture: &Path, keylog: &Path, threads: usize) -> Vec<ConnectionRecord> {
    analyze_file(capture, Some(keylog), threads)
}

/// The pipeline on `capture`, with the secrets of `keylog` if given: its
/// records in order of `id` (tests/h2_sizes.rs reads captures so too).
pub(crate) fn analyze_file(
    capture: &Path,
    keylog: Option<&Path>,
    threads: usize,
) -> Vec<ConnectionRecord> {
    let mut source = FileSource::open(capture).unwrap_or_else(|e| panic!("{e}"));
    let config = Config {
        threads,
        keylog: keylog.map(crate::tools::keylog),
        ..Config::default()
    };
    let mut records = Vec::new();
    analyze(&mut source, &config, &mut records).unwrap_or_else(|e| panic!("{e}"));
    records.sort_by_key(|r| r.id);
    records
}

/// The captures recorded with a key log, and the requests each connection
/// carried (curl's, python's and s_client's own count: every one a
/// `GET /index.html` answered 200), over HTTP/2 where ALPN chose h2 and
/// HTTP/1.1 otherwise. Together they use every cipher opened: TLS 1.3's
/// five suites, TLS 1.2's AES-128/256-GCM, AES-128/256-CCM(_8) and
/// ChaCha20-Poly1305, and AES-CBC in TLS 1.0, 1.1 and 1.2 with each MAC and
/// either MAC order.
const RECORDED: [(&str, &[u64]); 12] = [
    ("tls13-curl-keepalive", &[3]),
    ("tls13-curl-keepalive-5", &[5]),
    ("tls12-curl-3-new-connections", &[1, 1, 1]),
    ("tls-python-requests-session-5", &[5]),
    ("tls-python-requests-nosession-5", &[1; 5]),
    ("h2-curl-10", &[10]),
    ("tls12-openssl-resumption", &[1, 1]),
    ("tls13-openssl-resumption", &[1, 1]),
    // TLS 1.3 AES-128-GCM and ChaCha20, TLS 1.2 AES-128-GCM and ChaCha20.
    ("tls-suites-curl-4", &[2, 2, 2, 2]),
    // Two KeyUpdates from the client, one from the server.
    ("tls13-openssl-keyupdate", &[3]),
    // AES-CBC: TLS 1.2 with HMAC-SHA-1, -SHA-256 and -SHA-384, TLS 1.1,
    // TLS 1.0 (IVs chained); encrypt-then-MAC, then MAC-then-encrypt.
    ("tls-cbc-7", &[2; 7]),
    // AES-CCM: TLS 1.3's CCM and CCM_8 (HTTP/1.1, then h2), TLS 1.2's
    // ECDHE-ECDSA, DHE-RSA and RSA suites with 16- and 8-byte tags.
    ("tls-ccm-7", &[2; 7]),
];

fn recorded(name: &str) -> (PathBuf, PathBuf) {
    let dir = root().join("captures");
    (
        dir.join(format!("{name}.pcap")),
        dir.join(format!("{name}.keylog")),
    )
}

#[test]
fn recorded_key_logs_make_every_request_exact() {
    for (name, requests) in RECORDED {
        let (capture, keylog) = recorded(name);
        let records = analyze_with(&capture, &keylog, 1);
        let counts: Vec<u64> = records.iter().map(|r| r.http.requests).collect();
        assert_eq!(counts, requests, "{name}");
        for r in &records {
            let tls = r.tls.as_ref().expect("TLS");
            let d = tls.decryption.expect("a decryption section");
            assert_eq!(d.outcome, DecryptionOutcome::Complete, "{name} #{}", r.id);
            assert!(d.records_opened > 0 && d.records_failed == 0, "{name}");
            let h = &r.http;
            let method = match tls.alpn.as_deref() {
                Some("h2") => HttpMethod::TlsH2,
                _ => HttpMethod::TlsHttp1,
            };
            assert_eq!(h.method, method, "{name} #{}", r.id);
            assert!(
                !h.estimated && h.confidence == "exact" && !h.lost_sync,
                "{name}"
            );
            assert_eq!(h.responses, h.requests, "{name}");
            for q in &h.list {
                assert_eq!(q.method.as_deref(), Some("GET"), "{name}");
                assert_eq!(q.target.as_deref(), Some("/index.html"), "{name}");
                assert_eq!(q.status, Some(200), "{name}");
                assert!(q.ttfb.is_some_and(|t| t > 0.0), "{name}");
            }
        }
        // Two threads give the same records.
        let two = analyze_with(&capture, &keylog, 2);
        assert_eq!(
            serde_json::to_value(&records).unwrap(),
            serde_json::to_value(&two).unwrap(),
            "{name}: -j 2"
        );
    }
}

#[test]
fn the_corpus_key_logs_agree_with_zeek_and_tshark() {
    let dir = corpus();
    if !dir.is_dir() {
        skip_or_fail("the peer corpus", "../shared/corpus is not there");
        return;
    }
    let keys = |name: &str| dir.join(format!("derived-keylogs/{name}.nss-keylog.txt"));
    let trace = |name: &str| dir.join(format!("Traces/tls/{name}.pcap"));
    // Zeek's http.log: one request, `GET /` answered 301.
    let records = analyze_with(&trace("tls12-decryption"), &keys("tls12-decryption"), 1);
    let [r] = records.as_slice() else {
        panic!("{} connections", records.len());
    };
    assert_eq!(r.http.method, HttpMethod::TlsHttp1);
    assert_eq!(r.http.requests, 1);
    let q = &r.http.list[0];
    assert_eq!(
        (q.method.as_deref(), q.target.as_deref(), q.status),
        (Some("GET"), Some("/"), Some(301))
    );
    // 16 HTTP/1.1 requests on one TLS 1.2 connection (AES-256-GCM), per
    // tshark with the key log (expected.json).
    let stream = "tls-1.2-stream-keylog";
    let records = analyze_with(&trace(stream), &keys(stream), 1);
    let counts: Vec<u64> = records.iter().map(|r| r.http.requests).collect();
    assert_eq!(counts, [16]);
    let d = records[0].tls.as_ref().and_then(|t| t.decryption).unwrap();
    assert_eq!(d.outcome, DecryptionOutcome::Complete);
}

#[test]
fn another_sessions_key_log_changes_nothing_but_says_so() {
    let (capture, _) = recorded("tls13-curl-keepalive");
    let (_, other) = recorded("tls12-curl-3-new-connections");
    let records = analyze_with(&capture, &other, 1);
    let r = &records[0];
    let d = r.tls.as_ref().and_then(|t| t.decryption).unwrap();
    assert_eq!(d.outcome, DecryptionOutcome::NoSecrets);
    assert_eq!(r.http.method, HttpMethod::TlsFlights);
    assert!(r.http.estimated);
    let (_, without) = crate::tools::analyze_path_on(&capture, 1);
    assert_eq!(r.http, without[0].http);
}

/// `keylog` with the secrets labelled `labels` spoilt (a hex digit
/// changed), written to a file in `dir`.
fn spoil(keylog: &Path, labels: &[&str], dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(keylog).unwrap();
    let spoilt: String = text
        .lines()
        .map(
            |l| match labels.iter().find(|label| l.starts_with(*label)) {
                Some(_) => {
                    let (head, secret) = l.rsplit_once(' ').unwrap();
                    let flipped = if secret.starts_with('0') { "1" } else { "0" };
                    format!("{head} {flipped}{}\n", &secret[1..])
                }
                None => format!("{l}\n"),
            },
        )
        .collect();
    let path = dir.join("spoilt.keylog");
    std::fs::write(&path, spoilt).unwrap();
    path
}

#[test]
fn wrong_application_secrets_fall_back_to_the_estimate_and_say_partial() {
    let (capture, keylog) = recorded("tls13-curl-keepalive");
    let dir = tempfile::tempdir().unwrap();
    // Both application secrets spoilt: the handshake's still open, the
    // requests do not.
    let both = ["CLIENT_TRAFFIC_SECRET_0 ", "SERVER_TRAFFIC_SECRET_0 "];
    let records = analyze_with(&capture, &spoil(&keylog, &both, dir.path()), 1);
    let r = &records[0];
    let d = r.tls.as_ref().and_then(|t| t.decryption).unwrap();
    assert_eq!(d.outcome, DecryptionOutcome::Partial);
    assert!(d.records_opened > 0 && d.records_failed > 0, "{d:?}");
    assert_eq!(r.http.method, HttpMethod::TlsFlights);
    assert_eq!(
        r.http.requests, 3,
        "the flight estimate, which is right here"
    );
    // Only the server's spoilt: the requests are read, the responses are
    // not, and the count says it is a lower bound.
    let server = ["SERVER_TRAFFIC_SECRET_0 "];
    let records = analyze_with(&capture, &spoil(&keylog, &server, dir.path()), 1);
    let r = &records[0];
    assert_eq!(
        r.tls.as_ref().and_then(|t| t.decryption).unwrap().outcome,
        DecryptionOutcome::Partial
    );
    assert_eq!(r.http.method, HttpMethod::TlsHttp1);
    assert_eq!((r.http.requests, r.http.responses), (3, 0));
    assert!(r.http.lost_sync);
}

#[test]
fn the_binary_reads_key_logs_and_names_those_it_cannot_use() {
    let (capture, keylog) = recorded("h2-curl-10");
    let capture = capture.display().to_string();
    let keylog = keylog.display().to_string();
    // The table counts exactly, where it estimates (`~10`, from the
    // sizes of its records) without the log.
    let out = run(["analyze", &capture, "--keylog", &keylog]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("10 (10 exact, 0 estimated)"), "{text}");
    let out = run(["analyze", &capture]);
    let text = stdout(&out);
    assert!(
        text.contains("10 (0 exact, 10 estimated)") && text.contains("~10"),
        "{text}"
    );
    // compare and timeline take it too.
    let out = run([
        "compare", &capture, &capture, "--keylog", &keylog, "-T", "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["a"]["summary"]["requests_exact"], 10, "{json}");
    let out = run(["timeline", &capture, "--keylog", &keylog]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A key log of another run: the summary counts it and warns.
    let (other, other_keys) = recorded("tls13-curl-keepalive");
    let out = run([
        "analyze",
        &other.display().to_string(),
        "--keylog",
        &keylog,
        "-T",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["summary"]["tls_decryption"],
        serde_json::json!({"no_secrets": 1})
    );
    let warning = "the key log has no secrets for any of the 1 TLS sessions here";
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));
    let out = run([
        "analyze",
        &other.display().to_string(),
        "--keylog",
        &keylog,
        "--keylog",
    ]);
    assert_eq!(out.status.code(), Some(2), "--keylog wants a value");
    // Both logs at once: each capture's sessions are found.
    let other_keys = other_keys.display().to_string();
    let both = [
        "--keylog",
        &keylog,
        "--keylog",
        &other_keys,
        "-T",
        "json",
        "--merge",
    ];
    let out = run([
        &["analyze", &capture, &other.display().to_string()][..],
        &both[..],
    ]
    .concat());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["summary"]["tls_decryption"],
        serde_json::json!({"complete": 2})
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    // Malformed lines are skipped, and said so.
    let dir = tempfile::tempdir().unwrap();
    let mixed = dir.path().join("mixed.keylog");
    let text = std::fs::read_to_string(&keylog).unwrap() + "CLIENT_RANDOM 00 11\n";
    std::fs::write(&mixed, text).unwrap();
    let out = run([
        "analyze",
        &capture,
        "--keylog",
        &mixed.display().to_string(),
    ]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("1 line(s) with a known label"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("10 (10 exact, 0 estimated)"));
    // A missing file, and a file without secrets: one line naming it, exit 2.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.keylog");
    let empty = dir.path().join("empty.keylog");
    std::fs::write(&empty, "# SSL/TLS secrets log file, generated by OpenSSL\n").unwrap();
    for (path, says) in [
        (&missing, "cannot open the key log"),
        (&empty, "no TLS secrets found"),
    ] {
        let out = run(["analyze", &capture, "--keylog", &path.display().to_string()]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&path.display().to_string()) && err.contains(says),
            "{err}"
        );
    }
}

/// Secrets a capture carries in a pcapng Decryption Secrets Block are
/// used without `--keylog`, as tshark uses them: our own capture with its
/// key log injected by `editcap --inject-secrets`, and Chrome's HTTP/2 to
/// Cloudflare from FoxIO's ja4 tests (tshark decrypts its one `GET /`).
#[test]
fn secrets_inside_the_capture_are_used_as_tshark_uses_them() {
    let capture = root().join("captures/h2-curl-10-secrets.pcapng");
    let json = crate::support::run_json(&capture);
    let c = &json["connections"][0];
    assert_eq!(c["http"]["method"], "tls-h2");
    assert_eq!(c["http"]["requests"], 10);
    assert_eq!(c["tls"]["decryption"]["outcome"], "complete");
    assert_eq!(c["tls"]["alpn"], "h2");
    // With the same key log given as well, nothing changes.
    let (_, keylog) = recorded("h2-curl-10");
    let both = analyze_with(&capture, &keylog, 1);
    assert_eq!(both[0].http.requests, 10);

    let chrome =
        root().join("../shared/corpus/ja4/pcap/chrome-cloudflare-quic-with-secrets.pcapng");
    if !chrome.is_file() {
        skip_or_fail("the peer corpus", "../shared/corpus is not there");
        return;
    }
    let json = crate::support::run_json(&chrome);
    let tcp: Vec<&serde_json::Value> = json["connections"].as_array().unwrap().iter().collect();
    assert_eq!(
        tcp.len(),
        1,
        "one TCP connection (the QUIC ones are not TCP)"
    );
    let c = tcp[0];
    assert_eq!(c["tls"]["sni"], "cloudflare-quic.com");
    assert_eq!(c["tls"]["decryption"]["outcome"], "complete");
    assert_eq!(c["http"]["method"], "tls-h2");
    assert_eq!(c["http"]["requests"], 1);
    assert_eq!(c["http"]["list"][0]["method"], "GET");
    assert_eq!(c["http"]["list"][0]["target"], "/");
}

/// 0-RTT, recorded against nginx with `ssl_early_data on`: a full
/// handshake; the session resumed with its request as early data, which
/// nginx accepted; and, after nginx restarted, the same refused (the client
/// did not send it again). nginx logged two requests: ours are 1, 1 and 0.
/// tshark decrypts the refused early data too and counts its request,
/// which the server never served.
#[test]
fn zero_rtt_requests_count_when_the_server_took_them() {
    let name = "tls13-openssl-early-data";
    let (capture, keylog) = recorded(name);
    let records = analyze_with(&capture, &keylog, 1);
    let counts: Vec<u64> = records.iter().map(|r| r.http.requests).collect();
    assert_eq!(counts, [1, 1, 0]);
    let early: Vec<(bool, Option<bool>)> = records
        .iter()
        .map(|r| {
            let e = &r.tls.as_ref().unwrap().early_data;
            (e.offered, e.accepted)
        })
        .collect();
    assert_eq!(
        early,
        [
            (false, Some(false)),
            (true, Some(true)),
            (true, Some(false))
        ]
    );
    for r in &records {
        let d = r.tls.as_ref().and_then(|t| t.decryption).unwrap();
        assert_eq!(
            (d.outcome, d.records_failed),
            (DecryptionOutcome::Complete, 0)
        );
    }
    assert_eq!(records[1].http.list[0].status, Some(200));
    assert_eq!(records[2].http.method, HttpMethod::None);
    // The same with two threads.
    let two = analyze_with(&capture, &keylog, 2);
    assert_eq!(
        serde_json::to_value(&records).unwrap(),
        serde_json::to_value(&two).unwrap()
    );
    if !tshark_present() {
        return;
    }
    let theirs = tshark_requests(&capture, &keylog, "18448").expect("tshark runs");
    let methods: Vec<usize> = theirs.values().map(|(m, _)| m.len()).collect();
    assert_eq!(
        methods,
        [1, 1, 1],
        "tshark counts the refused early request too"
    );
    let handshakes = tshark_handshakes(&capture, &keylog, "18448").expect("tshark runs");
    for (stream, r) in records.iter().enumerate() {
        for (client, end) in [(true, &r.client), (false, &r.server)] {
            let port: u16 = end.rsplit(':').next().unwrap().parse().unwrap();
            let (types, _) = handshakes.get(&(stream, port)).cloned().unwrap_or_default();
            let ours = crate::tshark::our_types(r, client, true);
            assert_eq!(ours, types, "#{} client {client}", r.id);
        }
    }
}
