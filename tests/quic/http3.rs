//! HTTP/3 requests on QUIC connections a key log opens (`--keylog`, or a
//! pcapng's own secrets): per connection, the server's log of them and
//! what tshark opens with the same secrets.

use std::path::Path;

use serde_json::Value;

use super::tshark_keyed;
use crate::support::{bin, json_of};
use crate::tools::{analyze_path, skip_or_fail, tshark_present};

/// With the key log, every QUIC connection's HTTP/3 requests are the ones
/// the server logged for its client port — method, path and status, in
/// order — each answered; without it, none are counted and the verdict
/// says so.
#[test]
fn with_the_key_log_http3_requests_are_the_servers_log() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let mut checked = 0;
    for name in [
        "quic-aioquic-h3-5",
        "quic-aioquic-h3-resumed",
        "quic-aioquic-h3-0rtt",
        "quic-aioquic-h3-ipv6-2",
        "quic-chromium-h3-2",
        "quic-aioquic-h3-post-429",
        "quic-aioquic-h3-post-429-4conn",
        "quic-aioquic-h3-chacha20",
        "quic-aioquic-h3-big-headers",
        "quic-aioquic-h3-lossy",
    ] {
        let pcap = dir.join(format!("{name}.pcap"));
        let keylog = dir.join(format!("{name}.keylog"));
        let log = std::fs::read_to_string(dir.join(format!("{name}.server.log"))).expect("log");
        let run = |keys: bool| -> Value {
            let mut cmd = bin();
            cmd.args(["analyze", "-q", "-T", "json"]);
            if keys {
                cmd.arg("--keylog").arg(&keylog);
            }
            let out = cmd.arg(&pcap).output().expect("runs");
            let v = json_of(&out);
            v["summary"].clone()
        };
        let sealed = run(false);
        assert!(sealed["verdict"]
            .as_str()
            .is_some_and(|v| v.ends_with("(HTTP/3 requests not counted)")));
        assert!(sealed["quic"]["list"][0]["http"].is_null());
        let summary = run(true);
        let quic = &summary["quic"];
        let list = quic["list"].as_array().expect("a list");
        let mut total = 0;
        for rec in list {
            let client = rec["client"].as_str().expect("a client");
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.split(' ').nth(1) == Some(client))
                .collect();
            let logged = lines.len() as u64;
            // Each response's status, as the server logged it.
            let mut statuses = std::collections::BTreeMap::<String, u64>::new();
            for line in &lines {
                let status = line.split(' ').nth(5).expect("a status");
                *statuses.entry(status.to_owned()).or_default() += 1;
            }
            let http = &rec["http"];
            // Each request listed, in order: its method, path and status
            // as the server logged them, and its start before the log line.
            let listed = http["list"].as_array().expect("a list");
            assert_eq!(listed.len(), lines.len(), "{name} {client}");
            for (r, line) in listed.iter().zip(&lines) {
                let f: Vec<&str> = line.split(' ').collect();
                let at: f64 = f.first().and_then(|t| t.parse().ok()).expect("a time");
                // The path's first 200 characters (the 3000-byte queries
                // of big-headers: their :path spans STREAM frames).
                let path: Option<String> = f.get(4).map(|p| p.chars().take(200).collect());
                let logged = (f.get(3).copied(), path.as_deref(), f.get(5).copied());
                let status = r["status"].to_string();
                let ours = (r["method"].as_str(), r["target"].as_str(), Some(&*status));
                assert_eq!(ours, logged, "{name} {client}");
                let start = r["start"]["ts"].as_f64().expect("a start");
                assert!(start < at, "{name} {client}: {start} before {at}");
                let ttfb = r["ttfb"].as_f64().expect("answered");
                assert!(ttfb > 0.0 && r["duration"].as_f64() >= Some(ttfb), "{r}");
            }
            assert_eq!(http["list_truncated"], false);
            let ours: std::collections::BTreeMap<String, u64> =
                serde_json::from_value(http["status_codes"].clone()).expect("statuses");
            assert_eq!(ours, statuses, "{name} {client}");
            assert_eq!(http["decryption"], "complete", "{name} {client}");
            // ChaCha20-Poly1305, and ChaCha20's header protection, opened.
            let chacha = rec["tls"]["cipher"] == "TLS_CHACHA20_POLY1305_SHA256";
            assert_eq!(chacha, name.ends_with("chacha20"), "{name} {client}");
            assert_eq!(http["packets_failed"], 0, "{name} {client}");
            assert_eq!(http["requests"], logged, "{name} {client}");
            assert_eq!(http["responses"], logged, "{name} {client}");
            total += logged;
            checked += 1;
        }
        if tshark_present() {
            let theirs = tshark_http3_requests(&pcap, Some(&keylog));
            let ours: Vec<u64> = list
                .iter()
                .map(|r| r["http"]["requests"].as_u64().unwrap_or(0))
                .collect();
            assert_eq!(ours, theirs, "{name}: tshark with the key log");
        }
        assert_eq!(quic["requests"], total, "{name}");
        // Every connection carried requests: one handshake each.
        let per_request = list.len() as f64 / total as f64;
        assert_eq!(quic["handshakes_per_request"].as_f64(), Some(per_request));
        let sealed_quic = &sealed["quic"];
        assert!(sealed_quic["handshakes_per_request"].is_null(), "{name}");
        assert_eq!(quic["request_latency"]["count"], total, "{name}");
        let verdict = summary["verdict"].as_str().expect("a verdict");
        assert!(
            verdict.contains(&format!(", {total} HTTP/3 request")),
            "{verdict}"
        );
    }
    // Fifteen connections: 5, 3 + 3, 3 + 3 (one in 0-RTT), 2, 2, 12
    // requests (4 answered 429, their statuses from QPACK's dynamic
    // table), 3 + 3 + 3 + 3 (each ending on a 429), 4 sealed with
    // ChaCha20-Poly1305, 4 whose HEADERS span packets, and 30 over a lossy
    // link (pieces of the heads and of the encoder stream out of order,
    // heads waiting for the entries they refer to).
    assert_eq!(checked, 15);
}

/// Per QUIC connection, in tshark's order: the client-initiated
/// bidirectional streams (HTTP/3 requests) tshark sees in the client's
/// STREAM frames once it opens them with `keylog`.
fn tshark_http3_requests(pcap: &Path, keylog: Option<&Path>) -> Vec<u64> {
    let fields = [
        "quic.connection.number",
        "udp.srcport",
        "quic.stream.stream_id",
    ];
    let text = tshark_keyed(pcap, keylog, "quic.stream.stream_id", &fields);
    let mut clients = std::collections::BTreeMap::<u64, String>::new();
    let mut streams = std::collections::BTreeMap::<u64, std::collections::BTreeSet<u64>>::new();
    // The client is the first sender of a STREAM frame on a request
    // stream: a client's request comes before its response.
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let Some(Ok(n)) = f
            .first()
            .and_then(|n| n.split(',').next())
            .map(str::parse::<u64>)
        else {
            continue;
        };
        for id in f[2].split(',').filter_map(|i| i.parse::<u64>().ok()) {
            if id % 4 != 0 {
                continue;
            }
            let client = clients.entry(n).or_insert_with(|| f[1].to_owned());
            if *client == f[1] {
                streams.entry(n).or_default().insert(id);
            }
        }
    }
    let last = streams
        .keys()
        .chain(clients.keys())
        .max()
        .copied()
        .unwrap_or(0);
    (0..=last)
        .map(|n| streams.get(&n).map_or(0, |s| s.len() as u64))
        .collect()
}

/// A pcapng that carries its own secrets (a Decryption Secrets Block):
/// they open its QUIC connection as a key log would.
#[test]
fn a_pcapngs_own_secrets_open_its_http3() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/ja4/pcap/chrome-cloudflare-quic-with-secrets.pcapng");
    if !path.is_file() {
        skip_or_fail(
            "peer corpus",
            "ja4's chrome-cloudflare-quic-with-secrets.pcapng not found",
        );
        return;
    }
    let (summary, _) = analyze_path(&path);
    let quic = summary.quic.expect("QUIC figures");
    let http = quic.list[0]
        .http
        .as_ref()
        .expect("opened with the pcapng's secrets");
    assert_eq!(
        http.decryption,
        handshakes::record::DecryptionOutcome::Complete
    );
    assert_eq!(
        (http.requests, http.responses, http.packets_failed),
        (1, 1, 0)
    );
    // Chromium's request, read through QPACK (tshark 4.0 does not decode
    // QPACK, so only the count is checked against it).
    let r = &http.list[0];
    let ours = (r.method.as_deref(), r.target.as_deref(), r.status);
    assert_eq!(ours, (Some("GET"), Some("/"), Some(200)));
    if tshark_present() {
        assert_eq!(tshark_http3_requests(&path, None), [1]);
    }
}

/// `compare` with each capture's key log sets their HTTP/3 requests and
/// 429s side by side.
#[test]
fn compare_sets_http3_requests_and_429s_side_by_side() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let out = bin()
        .args(["compare", "-q", "-T", "json"])
        .arg(dir.join("quic-aioquic-h3-5.pcap"))
        .arg(dir.join("quic-aioquic-h3-post-429.pcap"))
        .arg("--keylog")
        .arg(dir.join("quic-aioquic-h3-5.keylog"))
        .arg("--keylog")
        .arg(dir.join("quic-aioquic-h3-post-429.keylog"))
        .output()
        .expect("runs");
    let v = json_of(&out);
    let m = &v["metrics"];
    assert_eq!(
        (
            m["quic_requests"]["a"].as_f64(),
            m["quic_requests"]["b"].as_f64()
        ),
        (Some(5.0), Some(12.0))
    );
    assert_eq!(m["quic_status_429"]["b"], 4.0);
    // aioquic's client sends on at once: 9 requests inside a Retry-After.
    assert_eq!(m["quic_requests_in_retry_window"]["a"], 0.0);
    assert_eq!(m["quic_requests_in_retry_window"]["b"], 9.0);
    let verdict = v["verdict"].as_str().expect("a verdict");
    assert!(
        verdict.contains("12 vs 5 HTTP/3 requests; 4 vs 0 HTTP/3 responses 429; 9 vs 0 HTTP/3 requests sent while a Retry-After ran"),
        "{verdict}"
    );
    // No request over TCP: HTTP/3's handshakes per request lead, one
    // handshake for 12 requests against one for 5.
    let (a, b) = (1.0 / 5.0, 1.0 / 12.0);
    let per_request = &m["quic_handshakes_per_request"];
    assert_eq!(
        (per_request["a"].as_f64(), per_request["b"].as_f64()),
        (Some(a), Some(b))
    );
    assert!(
        verdict.starts_with("B used 2.4× fewer QUIC handshakes per HTTP/3 request than A (0.08 vs 0.20), and no request over TCP;"),
        "{verdict}"
    );
}

/// `timeline` and `--html` draw QUIC connections after the TCP ones: the
/// handshake, and with the key log each HTTP/3 request with its tooltip.
#[test]
fn the_timeline_and_the_html_report_draw_quic_connections() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let pcap = dir.join("quic-aioquic-h3-post-429.pcap");
    let keylog = dir.join("quic-aioquic-h3-post-429.keylog");
    let timeline = |keys: bool| -> String {
        let mut cmd = bin();
        cmd.args(["timeline", "-q", "--width", "100"]).arg(&pcap);
        if keys {
            cmd.arg("--keylog").arg(&keylog);
        }
        let out = cmd.output().expect("runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let text = timeline(true);
    let row = text
        .lines()
        .find(|l| l.starts_with("q1 "))
        .expect("a QUIC row");
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(fields.get(1..3), Some(&[":43416", "12"][..]), "{text}");
    // The handshake first, then twelve responses apart from each other.
    let bar = fields.get(3..).expect("a bar").concat();
    assert!(bar.starts_with("###"), "{text}");
    let responses = bar
        .split(|c| c != '=')
        .filter(|run| !run.is_empty())
        .count();
    assert_eq!(responses, 12, "{text}");
    assert!(text.contains("(1 QUIC)") && text.contains("TLS or QUIC handshake"));
    // Without the key log: the handshake, no requests.
    let sealed = timeline(false);
    let row = sealed
        .lines()
        .find(|l| l.starts_with("q1 "))
        .expect("a QUIC row");
    assert!(row.contains(" - #") && !row.contains('='), "{sealed}");

    let html = std::env::temp_dir().join(format!("quic-{}.html", std::process::id()));
    let out = bin()
        .args(["analyze", "-q", "--html"])
        .arg(&html)
        .arg("--keylog")
        .arg(&keylog)
        .arg(&pcap)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let page = std::fs::read_to_string(&html).expect("the report");
    let _ = std::fs::remove_file(&html);
    assert!(page.contains("<g class=\"conn\" data-id=\"q1\"><title>QUIC connection q1"));
    // The key log's: the ALPN chosen, and the client's close.
    assert!(
        page.contains("SNI localhost · ALPN h3 · certificate localhost (1 in the chain, 828 B) · open 32.04ms · closed by the client (application error 0x0)</title>"),
        "the connection's tooltip"
    );
    assert!(
        page.contains("<title>QUIC handshake 9.87ms"),
        "the handshake's tooltip"
    );
    assert_eq!(
        page.matches("POST /api → 429</title>").count(),
        8,
        "wait and transfer of four"
    );
    assert!(page.contains("HTTP/3 requests") && page.contains("200 ×8, 429 ×4"));
    // One handshake for twelve requests.
    assert!(page.contains("QUIC handshakes / HTTP/3 request</div><div class=\"v\">0.08<"));
    // QUIC alone: no cards that only TCP fills.
    for card in ["TCP handshakes / request", "setup time", "peak concurrency"] {
        assert!(!page.contains(card), "{card}");
    }
}
