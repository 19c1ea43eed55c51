//! The summary's status codes and request latency, and each connection's
//! `status_codes`, cover every request, not only the ones listed
//! (`--max-requests-listed`): real captures of pooled clients that send
//! many requests a connection — two of them more than the default list
//! holds (captures/README.md, section af) — analysed with lists of 0, 3
//! and the default, checked against each other and against nginx's
//! access log.

use std::path::Path;

use handshakes::source::file::FileSource;
use handshakes::{analyze, Config, ConnectionRecord, Summary};

use crate::h2_sizes::{capture, client_port, nginx_statuses};

fn analysed(
    name: &str,
    keylog: Option<&str>,
    listed: Option<usize>,
    threads: usize,
) -> (Summary, Vec<ConnectionRecord>) {
    let mut source = FileSource::open(&capture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let config = Config {
        threads,
        keylog: keylog.map(|k| crate::tools::keylog(&capture(k))),
        max_requests_listed: listed,
        ..Config::default()
    };
    let mut records = Vec::new();
    let summary =
        analyze(&mut source, &config, &mut records).unwrap_or_else(|e| panic!("{name}: {e}"));
    records.sort_by_key(|r| r.id);
    (summary, records)
}

/// (capture, key log): opened with the key log, HTTP/2 (250 requests on
/// one connection; 100) and HTTP/1.1 (200; 12); HTTP/1.1 on cleartext;
/// and estimates from record sizes, HTTP/1.1 (Apache, 10 to 25 a
/// connection) and HTTP/2 (100 on one connection, 51 on another).
const CAPTURES: [(&str, Option<&str>); 9] = [
    (
        "httpx-h2-post-429-250",
        Some("httpx-h2-post-429-250.keylog"),
    ),
    ("curl-h1-post-429-200", Some("curl-h1-post-429-200.keylog")),
    (
        "httpx-h2-post-429-10x10",
        Some("httpx-h2-post-429-10x10.keylog"),
    ),
    ("curl-h1-post-429-12", Some("curl-h1-post-429-12.keylog")),
    ("http-429-ratelimit", None),
    ("apache-httpclient5-post-429-10x10", None),
    ("java-async-warm-h2-post-429-100x50", None),
    ("java-async-h2-post-429-100x50", None),
    // Section af without keys: Java's sendAsync, 300 POSTs with 50
    // outstanding multiplexed on one HTTP/2 connection.
    ("java-async-warm-h2-post-429-300x50", None),
];

#[test]
fn status_codes_and_latency_cover_every_request_however_few_are_listed() {
    for (name, keylog) in CAPTURES {
        let file = format!("{name}.pcap");
        let (all, records) = analysed(&file, keylog, None, 1);
        let requests: u64 = records.iter().map(|r| r.http.requests).sum();
        let answered: u64 = records.iter().map(|r| r.http.responses).sum();
        assert!(requests >= 10, "{name}: {requests} requests");
        // Every response with a response byte has a duration.
        assert_eq!(all.request_latency.count, answered, "{name}");
        for (listed, threads) in [(0, 1), (3, 1), (3, 2)] {
            let (few, records) = analysed(&file, keylog, Some(listed), threads);
            assert_eq!(
                few.status_codes, all.status_codes,
                "{name} listing {listed}"
            );
            let (a, b) = (&few.request_latency, &all.request_latency);
            assert_eq!(
                (a.count, a.min, a.median, a.p90, a.p95, a.max),
                (b.count, b.min, b.median, b.p90, b.p95, b.max),
                "{name} listing {listed}"
            );
            let (x, y) = (a.avg.unwrap_or(0.0), b.avg.unwrap_or(0.0));
            assert!(
                (x - y).abs() <= 1e-12 * y.abs(),
                "{name}: avg {x} against {y}"
            );
            assert!(
                records.iter().all(|r| r.http.list.len() <= listed),
                "{name}"
            );
            let truncated = records.iter().any(|r| r.http.list_truncated);
            assert!(truncated, "{name}: a list of {listed} holds fewer");
        }
    }
}

#[test]
fn each_connection_counts_every_status_nginx_logged() {
    // Opened with the key log, listing the default 100 or only three of
    // each connection's requests: the statuses are still all of them.
    let opened = CAPTURES.into_iter().take(4);
    for ((name, keylog), listed) in opened.flat_map(|c| [(c, None), (c, Some(3))]) {
        let (summary, records) = analysed(&format!("{name}.pcap"), keylog, listed, 2);
        let logged = nginx_statuses(&format!("{name}.nginx-access.log"));
        let mut total = std::collections::BTreeMap::new();
        for r in &records {
            let expected = logged.get(&client_port(r)).cloned().unwrap_or_default();
            assert_eq!(r.http.status_codes, expected, "{name} #{}", r.id);
            for (status, n) in expected {
                *total.entry(status.to_string()).or_insert(0) += n;
            }
        }
        assert_eq!(summary.status_codes, total, "{name}");
    }
}

#[test]
fn without_keys_every_request_past_the_list_is_answered_and_timed() {
    // Estimated from record sizes (section af): as many requests as nginx
    // logged, each answered, and the same latencies as the key log reads
    // where there is one.
    let java = CAPTURES.into_iter().last();
    for (name, keylog) in CAPTURES.into_iter().take(2).chain(java) {
        let file = format!("{name}.pcap");
        let (guessed, estimated) = analysed(&file, None, None, 1);
        let logged = crate::h2_sizes::nginx_requests(&format!("{name}.nginx-access.log"));
        let [r] = estimated.as_slice() else {
            panic!("{name}: one connection");
        };
        assert_eq!(
            Some(&r.http.requests),
            logged.get(&client_port(r)),
            "{name}"
        );
        assert!(r.http.requests > 100 && r.http.list_truncated, "{name}");
        assert_eq!(r.http.responses, r.http.requests, "{name}");
        assert_eq!(guessed.request_latency.count, r.http.requests, "{name}");
        let Some(keylog) = keylog else { continue };
        let (read, _) = analysed(&file, Some(keylog), None, 1);
        let (a, b) = (&guessed.request_latency, &read.request_latency);
        assert_eq!(
            (a.count, a.median, a.p95, a.max),
            (b.count, b.median, b.p95, b.max),
            "{name}"
        );
    }
}

#[test]
fn a_capture_without_http_has_no_status_codes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures/tls13-openssl-keyupdate.pcap");
    let (summary, records) = crate::tools::analyze_path(&path);
    assert!(summary.status_codes.is_empty());
    assert!(records.iter().all(|r| r.http.status_codes.is_empty()));
}

/// `compare` with `args`: its standard output.
fn compare(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .arg("compare")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn compare_counts_the_429s_each_client_got() {
    let (httpx, curl) = ("httpx-h2-post-429-250", "curl-h1-post-429-200");
    let pcap = |n: &str| format!("captures/{n}.pcap");
    let keylog = |n: &str| format!("captures/{n}.keylog");
    let text = compare(&[
        &pcap(httpx),
        &pcap(curl),
        "--keylog",
        &keylog(httpx),
        "--keylog",
        &keylog(curl),
    ]);
    let row = |label: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with('│') && l.contains(label))
            .unwrap_or_else(|| panic!("{label}: {text}"));
        line.trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_string())
            .collect()
    };
    // nginx logged 138 and 191 of 250 and 200 (section af).
    assert_eq!(row("responses 429")[1..3], ["138", "191"]);
    assert_eq!(row("responses 2xx")[1..3], ["112", "9"]);
    assert_eq!(row("429 share")[1..3], ["0.55", "0.95"]);
    assert!(
        text.contains("191 vs 138 responses 429 (rate limited)"),
        "{text}"
    );
    // Estimated from encrypted records, no status is read: the rows are
    // left out of the table (JSON has them, null).
    let keyless = compare(&[&pcap(httpx), &pcap(curl)]);
    assert!(!keyless.contains("responses 429"), "{keyless}");
    let json = compare(&["-T", "json", &pcap(httpx), &pcap(curl)]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert!(v["metrics"]["status_429"]["a"].is_null(), "{json}");
}

#[test]
fn the_html_report_shows_the_status_codes_where_they_were_read() {
    let name = "httpx-h2-post-429-250";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let html = dir.path().join("report.html");
    let run = |keylog: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_handshakes"));
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["analyze", "-q", "--html"])
            .arg(&html)
            .arg(format!("captures/{name}.pcap"));
        if keylog {
            cmd.args(["--keylog", &format!("captures/{name}.keylog")]);
        }
        assert!(cmd.output().expect("runs").status.success());
        std::fs::read_to_string(&html).expect("the report")
    };
    let page = run(true);
    assert!(page.contains("responses with a status"), "no status card");
    assert!(
        page.contains("429 ×138, 200 ×112"),
        "the codes nginx logged"
    );
    assert!(!run(false).contains("responses with a status"), "none read");
}

#[test]
fn three_thousand_pipelined_requests_are_all_counted_in_bounded_windows() {
    use crate::support::tls::{opened_at, report, SendBytes};
    use crate::support::{ms, Side, T0};
    // One HTTP/1.1 connection: 60 batches of 50 pipelined requests, each
    // batch answered 1 ms later, 200 and 429 in turn: past the 100 listed,
    // 2 900 requests, more than the 1 024 held for their responses.
    let request = b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n";
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let limited = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n";
    let mut c = opened_at("10.0.0.1:40000", "10.0.0.2:80", T0);
    for batch in 0..60i64 {
        let t = T0 + ms(10 + 5 * batch);
        let answers: Vec<u8> = (0..50)
            .flat_map(|i| {
                if i % 2 == 0 {
                    ok.to_vec()
                } else {
                    limited.to_vec()
                }
            })
            .collect();
        c.send(Side::Client, t, &request.repeat(50))
            .send(Side::Server, t + ms(1), &answers);
    }
    let v = report(&[&c]);
    let summary = &v["summary"];
    assert_eq!(summary["requests"], 3000);
    assert_eq!(
        summary["status_codes"],
        serde_json::json!({"200": 1500, "429": 1500})
    );
    let latency = &summary["request_latency"];
    assert_eq!(latency["count"], 3000);
    for key in ["min", "median", "p95", "max"] {
        assert_eq!(latency[key].as_f64(), Some(0.001), "{key}: {latency}");
    }
    let http = &v["connections"][0]["http"];
    assert_eq!(http["status_codes"], summary["status_codes"]);
    assert_eq!(http["list"].as_array().map(Vec::len), Some(100));
    assert_eq!(
        (http["requests"].as_u64(), http["responses"].as_u64()),
        (Some(3000), Some(3000))
    );
}

#[test]
fn in_cleartext_every_connection_has_the_statuses_nginx_logged() {
    // Section ag: the blocking client and the non-blocking one on plain
    // HTTP/1.1, every request and status read from the messages.
    for name in [
        "java-urlconnection-clear-post-429-10x10",
        "java-async-clear-h1-post-429-100x50",
    ] {
        let (summary, records) = analysed(&format!("{name}.pcap"), None, Some(1), 2);
        let logged = nginx_statuses(&format!("{name}.nginx-access.log"));
        let requests = crate::h2_sizes::nginx_requests(&format!("{name}.nginx-access.log"));
        assert_eq!(records.len(), logged.len(), "{name}: connections");
        for r in &records {
            let port = client_port(r);
            assert_eq!(
                r.http.method,
                handshakes::record::HttpMethod::Http1,
                "{name}"
            );
            assert_eq!(
                Some(&r.http.requests),
                requests.get(&port),
                "{name} #{}",
                r.id
            );
            assert_eq!(
                Some(&r.http.status_codes),
                logged.get(&port),
                "{name} #{}",
                r.id
            );
        }
        assert_eq!(summary.requests, 100, "{name}");
        assert_eq!(summary.request_latency.count, 100, "{name}");
    }
}
