//! Rate limiting read from real captures (`http.rate_limit`,
//! `summary.rate_limit`): clients that wait as a 429's `Retry-After` asks
//! and one that does not (scripts/record-retry-captures.sh), and the
//! rate-limited API's captures over HTTP/1.1 and HTTP/2, cleartext and
//! opened with a key log — each response's Retry-After and status against
//! tshark's, and the windows and waits against those tshark's message
//! times give.

use std::collections::BTreeMap;
use std::process::Command;

use handshakes::record::ConnectionRecord;

use crate::h2_sizes::{capture, records};
use crate::tools::tshark_present;

/// Six GETs on one connection to scripts/ratelimit_server.py, which
/// answers every third request 429 with `Retry-After: 1`: curl `--retry`
/// and urllib3's `Retry` wait the second before they retry; the loop
/// retries at once.
#[test]
fn clients_that_wait_as_asked_and_one_that_does_not() {
    for (name, waits) in [
        ("http-curl-retry-after", true),
        ("http-requests-retry-after", true),
        ("http-requests-retry-now", false),
    ] {
        let recs = records(&format!("{name}.pcap"), None);
        assert_eq!(recs.len(), 1, "{name}");
        let h = &recs[0].http;
        let statuses: Vec<(Option<u16>, Option<u32>)> =
            h.list.iter().map(|r| (r.status, r.retry_after)).collect();
        let (ok, limited) = ((Some(200), None), (Some(429), Some(1)));
        assert_eq!(
            statuses,
            [ok, ok, limited, ok, ok, limited, ok, ok],
            "{name}: the server's log"
        );
        let r = h.rate_limit.as_ref().expect("a rate_limit section");
        assert_eq!(r.responses_429, 2, "{name}");
        assert_eq!(r.retry_after, BTreeMap::from([(1, 2)]), "{name}");
        assert!(!r.ended_on_429, "{name}");
        let w = &r.wait_after_429;
        assert_eq!(w.count, 2, "{name}");
        let (min, max) = (w.min.unwrap(), w.max.unwrap());
        if waits {
            assert_eq!(r.requests_in_window, 0, "{name}");
            assert!((1.0..1.01).contains(&min) && max < 1.01, "{name}: {w:?}");
        } else {
            // The retry, and the two GETs after each 429 until the
            // second ran out (all within 0.3 s): 3 + 2.
            assert_eq!(r.requests_in_window, 5, "{name}");
            assert!(max < 0.05, "{name}: {w:?}");
        }
    }
}

/// One `tshark` message: its frame's time, connection, status (0 for a
/// request) and Retry-After value.
#[derive(Debug)]
pub struct Message {
    pub time: f64,
    pub stream: usize,
    pub status: u16,
    pub retry_after: Option<u32>,
}

/// tshark's HTTP/1.x messages in `name` (its `.keylog` opening TLS on
/// `tls_port` when given): requests and final responses, each at the
/// frame that completed it.
pub fn tshark_http1(name: &str, tls_port: Option<u16>) -> Vec<Message> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(capture(&format!("{name}.pcap")));
    if let Some(port) = tls_port {
        let keylog = capture(&format!("{name}.keylog"));
        cmd.args(["-o", &format!("tls.keylog_file:{}", keylog.display())]);
        cmd.args(["-d", &format!("tcp.port=={port},tls")]);
    }
    cmd.args(["-Y", "http.request || http.response", "-T", "fields"]);
    for f in [
        "frame.time_epoch",
        "tcp.stream",
        "http.response.code",
        "http.response.line",
    ] {
        cmd.args(["-e", f]);
    }
    cmd.args(["-E", "aggregator=;", "-E", "occurrence=a"]);
    let out = cmd.output().expect("tshark runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut messages = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let status: u16 = f[2].split(';').next().unwrap_or("").parse().unwrap_or(0);
        if (100..200).contains(&status) {
            continue;
        }
        let retry_after = f[3]
            .split(';')
            .find_map(|h| h.strip_prefix("Retry-After: "))
            .map(|v| v.trim_end_matches("\\r\\n").parse().expect("delay-seconds"));
        messages.push(Message {
            time: f[0].parse().expect("a time"),
            stream: f[1].parse().expect("a stream"),
            status,
            retry_after,
        });
    }
    messages
}

/// What a connection's messages give, by the definitions of
/// docs/json.md's `http.rate_limit`, worked out here from tshark's times
/// alone: (429s, Retry-After values, requests in a window, waits).
fn expected(messages: &[&Message]) -> (u64, BTreeMap<u32, u64>, u64, Vec<f64>) {
    let (mut limited, mut values, mut in_window, mut waits) = (0, BTreeMap::new(), 0, Vec::new());
    let mut windows: Vec<(f64, f64)> = Vec::new();
    let mut unfollowed: Option<f64> = None;
    for m in messages {
        if m.status == 0 {
            if windows
                .iter()
                .any(|&(from, to)| from <= m.time && m.time < to)
            {
                in_window += 1;
            }
            if let Some(t) = unfollowed.take() {
                waits.push(m.time - t);
            }
            continue;
        }
        if m.status == 429 {
            limited += 1;
            unfollowed = Some(m.time);
        }
        if let Some(secs) = m.retry_after {
            *values.entry(secs).or_default() += 1;
            windows.push((m.time, m.time + f64::from(secs)));
        }
    }
    (limited, values, in_window, waits)
}

/// Cleartext HTTP/1.1 GETs, where tshark puts each message at the frame
/// that completed it: a request's one segment is its first byte, a
/// response's last segment its end. (Over TLS, and for a POST, tshark's
/// frame is the one that completed the body.)
#[test]
fn windows_and_waits_are_what_tsharks_message_times_give() {
    if !tshark_present() {
        return;
    }
    for name in [
        "http-curl-retry-after",
        "http-requests-retry-after",
        "http-requests-retry-now",
        "http-429-ratelimit",
    ] {
        let messages = tshark_http1(name, None);
        let recs = records(&format!("{name}.pcap"), None);
        assert_eq!(
            recs.len(),
            messages.iter().map(|m| m.stream).max().unwrap() + 1,
            "{name}"
        );
        for (stream, r) in recs.iter().enumerate() {
            let mine: Vec<&Message> = messages.iter().filter(|m| m.stream == stream).collect();
            let (limited, values, in_window, waits) = expected(&mine);
            let got = r.http.rate_limit.as_ref();
            let ctx = format!("{name} #{}", r.id);
            if limited == 0 && values.is_empty() {
                assert!(got.is_none(), "{ctx}");
                continue;
            }
            let got = got.unwrap_or_else(|| panic!("{ctx}: a rate_limit section"));
            assert_eq!(got.responses_429, limited, "{ctx}");
            assert_eq!(got.retry_after, values, "{ctx}");
            assert_eq!(got.requests_in_window, in_window, "{ctx}");
            let w = &got.wait_after_429;
            assert_eq!(w.count, waits.len() as u64, "{ctx}");
            let lo = waits.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = waits.iter().copied().fold(0.0, f64::max);
            // tshark's times are microseconds printed as decimals.
            let near = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 2e-6);
            assert!(
                waits.is_empty() || near(w.min, lo) && near(w.max, hi),
                "{ctx}: {w:?} vs {waits:?}"
            );
        }
    }
}

/// Per connection (tshark's `tcp.stream`): (status, Retry-After) → responses.
type ByStatus = BTreeMap<usize, BTreeMap<(u16, Option<u32>), u64>>;

/// The statuses and Retry-After values tshark decrypts, per connection,
/// over HTTP/2 (`http2.headers.retry_after`) and HTTP/1.1.
#[test]
fn retry_after_through_the_key_log_is_tsharks() {
    if !tshark_present() {
        return;
    }
    for (name, h2) in [
        ("h2-curl-post-429-12", true),
        ("httpx-h2-post-429-20", true),
        ("httpx-h2-post-429-10x10", true),
        ("curl-h1-post-429-12", false),
    ] {
        let keylog = format!("{name}.keylog");
        let recs = records(&format!("{name}.pcap"), Some(&keylog));
        let port: u16 = recs[0].server.rsplit(':').next().unwrap().parse().unwrap();
        let theirs = match h2 {
            true => tshark_h2_responses(name, port),
            false => {
                let mut theirs = ByStatus::new();
                for m in tshark_http1(name, Some(port)) {
                    if m.status != 0 {
                        let key = (m.status, m.retry_after);
                        *theirs.entry(m.stream).or_default().entry(key).or_default() += 1;
                    }
                }
                theirs
            }
        };
        let ours: ByStatus = recs
            .iter()
            .enumerate()
            .map(|(i, r)| (i, by_status(r)))
            .filter(|(_, m)| !m.is_empty())
            .collect();
        assert_eq!(ours, theirs, "{name}");
        let limited = ours.values().flat_map(|m| m.keys()).any(|k| k.1.is_some());
        assert!(limited, "{name}: some Retry-After");
    }
}

/// tshark's HTTP/2 responses in `name`, decrypted with its key log (TLS
/// on `port`), per connection.
fn tshark_h2_responses(name: &str, port: u16) -> ByStatus {
    let keylog = capture(&format!("{name}.keylog"));
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(capture(&format!("{name}.pcap")))
        .args(["-o", &format!("tls.keylog_file:{}", keylog.display())])
        .args(["-d", &format!("tcp.port=={port},tls")])
        .args(["-Y", "http2.headers.status", "-T", "fields"])
        .args(["-e", "tcp.stream", "-e", "http2.headers.status"])
        .args(["-e", "http2.headers.retry_after", "-E", "occurrence=a"])
        .output()
        .expect("tshark runs");
    let mut theirs = ByStatus::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let statuses: Vec<u16> = f[1].split(',').filter_map(|s| s.parse().ok()).collect();
        let mut values = f[2].split(',').filter(|v| !v.is_empty());
        // A packet's HEADERS frames in order; nginx sends `retry-after`
        // on 429s only.
        for status in statuses {
            let ra = (status == 429).then(|| values.next()).flatten();
            let ra = ra.map(|v| v.parse().expect("delay-seconds"));
            let stream = f[0].parse().unwrap();
            *theirs
                .entry(stream)
                .or_default()
                .entry((status, ra))
                .or_default() += 1;
        }
        assert!(values.next().is_none(), "{name}: {line}");
    }
    theirs
}

/// A connection's listed responses by (status, Retry-After).
fn by_status(r: &ConnectionRecord) -> BTreeMap<(u16, Option<u32>), u64> {
    let mut m = BTreeMap::new();
    for q in &r.http.list {
        if let Some(s) = q.status {
            *m.entry((s, q.retry_after)).or_default() += 1;
        }
    }
    m
}

/// `timeline --conn` says which requests went out inside a Retry-After,
/// and what each 429 asked for.
#[test]
fn the_timeline_marks_requests_sent_inside_a_retry_after() {
    for (name, inside) in [("http-requests-retry-now", 5), ("http-curl-retry-after", 0)] {
        let file = capture(&format!("{name}.pcap"));
        let out = crate::support::run([
            "timeline".as_ref(),
            file.as_os_str(),
            "--conn".as_ref(),
            "1".as_ref(),
        ]);
        assert!(out.status.success(), "{name}");
        let text = crate::support::stdout(&out);
        let asked = text.matches("first byte 429 Retry-After 1s").count();
        assert_eq!(asked, 2, "{name}:\n{text}");
        let sent = text.lines().filter(|l| l.contains("Retry-After)")).count();
        assert_eq!(sent, inside, "{name}:\n{text}");
    }
}

/// HTTP/3 through the key log: aioquic's server (scripts/quic_server.py)
/// answers each POST 429 with `retry-after: 1`, read with QPACK (across
/// STREAM frames, on a lossy link too); the 429s are the server's log,
/// and the windows and waits are what the listed requests' own times give
/// by docs/json.md's definitions (the streaming figures against the list).
#[test]
fn http3_responses_carry_their_retry_after() {
    use handshakes::analyze::http::limits::TOO_MANY_REQUESTS;
    for name in [
        "quic-aioquic-h3-post-429",
        "quic-aioquic-h3-chacha20",
        "quic-aioquic-h3-big-headers",
        "quic-aioquic-h3-lossy",
    ] {
        let log = std::fs::read_to_string(capture(&format!("{name}.server.log"))).unwrap();
        let logged = log
            .lines()
            .filter(|l| l.split(' ').nth(5) == Some("429"))
            .count() as u64;
        let mut cmd = crate::support::bin();
        cmd.args(["analyze", "-q", "-T", "json", "--keylog"]);
        cmd.arg(capture(&format!("{name}.keylog")));
        let v =
            crate::support::json_of(&cmd.arg(capture(&format!("{name}.pcap"))).output().unwrap());
        let quic = &v["summary"]["quic"];
        let r = &quic["rate_limit"];
        assert_eq!(r["responses_429"], logged, "{name}");
        assert_eq!(r["retry_after"]["1"], logged, "{name}");
        let http = &quic["list"][0]["http"];
        let list = http["list"].as_array().unwrap();
        let (mut windows, mut in_window) = (Vec::<f64>::new(), 0);
        for q in list {
            let status = q["status"].as_u64();
            let ra = q["retry_after"].as_u64();
            let limited = status == Some(u64::from(TOO_MANY_REQUESTS));
            assert_eq!(ra, limited.then_some(1), "{name}: {q}");
            let start = q["start"]["ts"].as_f64().unwrap();
            if windows.iter().any(|&end| end - 1.0 <= start && start < end) {
                in_window += 1;
            }
            if limited {
                windows.push(q["response_last"]["ts"].as_f64().unwrap() + 1.0);
            }
        }
        assert_eq!(
            http["rate_limit"]["requests_in_window"], in_window,
            "{name}"
        );
        assert_eq!(r["requests_in_window"], in_window, "{name}");
    }
}

/// Retry-After as an HTTP-date (`ratelimit_server.py --retry-after-date
/// 2`): the seconds between it and the response's own `Date`, as tshark
/// shows both; curl waits until then.
#[test]
fn an_http_date_retry_after_counts_from_the_responses_date() {
    let name = "http-curl-retry-after-date";
    let recs = records(&format!("{name}.pcap"), None);
    let limited: Vec<Option<u32>> = recs[0]
        .http
        .list
        .iter()
        .filter(|q| q.status == Some(429))
        .map(|q| q.retry_after)
        .collect();
    assert_eq!(limited, [Some(2)], "{name}");
    let r = recs[0].http.rate_limit.as_ref().expect("rate_limit");
    assert_eq!(r.requests_in_window, 0, "{name}: curl waited");
    assert!(
        r.wait_after_429.min.is_some_and(|w| w >= 1.9),
        "{name}: {r:?}"
    );
    if !tshark_present() {
        return;
    }
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(capture(&format!("{name}.pcap")))
        .args(["-Y", "http.response.code == 429", "-T", "fields"])
        .args([
            "-e",
            "http.date",
            "-e",
            "http.response.line",
            "-E",
            "aggregator=;",
        ])
        .output()
        .expect("tshark runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().expect("tshark shows the 429");
    let header = |name: &str| -> std::time::SystemTime {
        let value = line
            .split(';')
            .find_map(|h| h.split_once(&format!("{name}: ")).map(|(_, v)| v))
            .unwrap_or_else(|| panic!("{name} in {line}"));
        httpdate::parse_http_date(value.trim_end_matches("\\r\\n")).expect("an HTTP-date")
    };
    let secs = header("Retry-After")
        .duration_since(header("Date"))
        .unwrap();
    assert_eq!(secs.as_secs(), 2, "{line}");
}

/// The HTML report's cards: the 429s and the requests inside a
/// Retry-After, over TCP and over HTTP/3.
#[test]
fn the_html_report_has_rate_limit_cards() {
    let dir = std::env::temp_dir().join(format!("hs-rl-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, Option<&str>, &str, &str); 3] = [
        (
            "http-requests-newconn-retry-now",
            None,
            "requests while a Retry-After ran, any connection",
            "5 on another connection · 5 connections opened during one",
        ),
        (
            "http-requests-retry-now",
            None,
            "responses 429",
            "5 requests while a Retry-After ran",
        ),
        (
            "quic-aioquic-h3-post-429",
            Some("quic-aioquic-h3-post-429.keylog"),
            "HTTP/3 responses 429",
            "9 requests while a Retry-After ran",
        ),
    ];
    for (name, keylog, card, sub) in cases {
        let html = dir.join(format!("{name}.html"));
        let mut cmd = crate::support::bin();
        cmd.args(["analyze", "-q", "--html"]).arg(&html);
        if let Some(k) = keylog {
            cmd.arg("--keylog").arg(capture(k));
        }
        assert!(cmd
            .arg(capture(&format!("{name}.pcap")))
            .output()
            .unwrap()
            .status
            .success());
        let text = std::fs::read_to_string(&html).unwrap();
        let at = text
            .find(&format!(">{card}</div>"))
            .unwrap_or_else(|| panic!("{name}: {card}"));
        let after = text.get(at..at + 300).unwrap_or_default();
        assert!(after.contains(sub), "{name}: {after}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
