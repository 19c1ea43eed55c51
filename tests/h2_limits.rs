//! `http.http2` (the server's SETTINGS_MAX_CONCURRENT_STREAMS, the client's
//! streams against it, the first GOAWAY, the streams the server refused)
//! on every real capture whose HTTP/2 frames can be read (h2c, and TLS with
//! the key log recorded beside it), connection by connection against
//! tshark's HTTP/2 dissector; what `summary.beside_http2` makes of them on
//! curl against nginx allowing 2 streams, and against nginx sending a
//! GOAWAY after 4 requests; and `summary.requests` against nginx's count
//! where curl had streams refused and retried them elsewhere
//! (scripts/record-limit-captures.sh; captures/README.md, bg to bj).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use handshakes::ConnectionRecord;

use crate::keylog::analyze_file;

const HEADERS: u32 = 1;
const RST_STREAM: u32 = 3;
const SETTINGS: u32 = 4;
const GOAWAY: u32 = 7;

/// One connection's HTTP/2 as tshark reads it: the server's latest
/// stream limit, the most client streams open at once, the spans at the
/// limit, and the first GOAWAY (from the client, at, last stream, error).
#[derive(Debug, Default)]
struct Facts {
    limit: Option<u32>,
    open: Vec<u32>,
    last_client: u32,
    peak: u32,
    since: Option<f64>,
    spans: Vec<(f64, f64)>,
    goaway: Option<(bool, f64, u32, u32)>,
    /// Streams the server answered (a HEADERS), refused (RST_STREAM
    /// REFUSED_STREAM before that, or past its GOAWAY), and the last
    /// stream id of its latest GOAWAY.
    answered: Vec<u32>,
    refused: u32,
    server_goaway: Option<u32>,
    last: f64,
    client_port: String,
    frames: bool,
}

impl Facts {
    fn check(&mut self, t: f64) {
        let full = self.limit.is_some_and(|l| self.open.len() as u32 >= l);
        match (full, self.since) {
            (true, None) => self.since = Some(t),
            (false, Some(from)) => {
                self.spans.push((from, t));
                self.since = None;
            }
            _ => {}
        }
    }
}

/// tshark's HTTP/2 frames of `pcap`, by client port: every frame's type,
/// flags and stream (fields present on every frame, so the lists of one
/// packet line up), SETTINGS' stream limits and GOAWAYs' fields in order.
/// Cleartext on `h2c_port` is decoded as HTTP/2 (tshark knows no h2c
/// port of its own).
fn tshark_facts(pcap: &Path, keylog: Option<&Path>, h2c_port: &str) -> BTreeMap<u64, Facts> {
    let more = [
        "http2.type",
        "http2.flags",
        "http2.streamid",
        "http2.settings.max_concurrent_streams",
        "http2.goaway.last_stream_id",
        "http2.goaway.error",
        "http2.rst_stream.error",
    ];
    let options = match keylog {
        Some(_) => Vec::new(),
        None => vec!["-d".to_owned(), format!("tcp.port=={h2c_port},http2")],
    };
    let text = crate::tools::tshark_streams_fields(pcap, options, keylog, &more);
    let mut conns: BTreeMap<u64, Facts> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |k: usize| f.get(k).copied().unwrap_or_default();
        let list = |k: usize| -> Vec<u32> {
            let parse = |v: &str| match v.strip_prefix("0x") {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            };
            field(k).split(';').filter_map(parse).collect()
        };
        let (Ok(stream), Ok(t)) = (field(0).parse::<u64>(), field(1).parse::<f64>()) else {
            continue;
        };
        let c = conns.entry(stream).or_default();
        c.last = t;
        let syn_only = field(6) == "1" && field(7) == "0";
        if syn_only || c.client_port.is_empty() {
            c.client_port = field(2).to_owned();
        }
        let from_client = field(2) == c.client_port;
        let (types, flags, ids) = (list(10), list(11), list(12));
        let (mut limits, mut goaways) = (list(13).into_iter(), list(14).into_iter());
        let mut errors = list(15).into_iter();
        let mut resets = list(16).into_iter();
        for (k, &kind) in types.iter().enumerate() {
            c.frames = true;
            let flag = flags.get(k).copied().unwrap_or_default();
            let id = ids.get(k).copied().unwrap_or_default();
            match kind {
                HEADERS if from_client && id % 2 == 1 && id > c.last_client => {
                    c.last_client = id;
                    if c.server_goaway.is_some_and(|last| id > last) {
                        c.refused += 1;
                    } else {
                        c.open.push(id);
                        c.peak = c.peak.max(c.open.len() as u32);
                    }
                }
                HEADERS if !from_client => c.answered.push(id),
                RST_STREAM => {
                    let error = resets.next().unwrap_or_default();
                    if c.open.contains(&id)
                        && !from_client
                        && error == 7
                        && !c.answered.contains(&id)
                    {
                        c.refused += 1;
                    }
                    c.open.retain(|&s| s != id);
                }
                SETTINGS if flag & 1 == 0 => {
                    for limit in limits.by_ref() {
                        if !from_client {
                            c.limit = Some(limit);
                        }
                    }
                }
                GOAWAY => {
                    let last = goaways.next().unwrap_or_default();
                    let error = errors.next().unwrap_or_default();
                    c.goaway.get_or_insert((from_client, t, last, error));
                    let before = c.server_goaway.unwrap_or(u32::MAX);
                    if !from_client && last < before {
                        c.server_goaway = Some(last);
                        let past = |s: &u32| *s > last && *s <= before && !c.answered.contains(s);
                        c.refused += c.open.iter().filter(|s| past(s)).count() as u32;
                        let answered = c.answered.clone();
                        c.open
                            .retain(|s| *s <= last || *s > before || answered.contains(s));
                    }
                }
                _ => {}
            }
            // A server's DATA or HEADERS ending its stream.
            if !from_client && matches!(kind, 0 | HEADERS) && flag & 1 == 1 {
                c.open.retain(|&s| s != id);
            }
            c.check(t);
        }
    }
    for c in conns.values_mut() {
        if let Some(from) = c.since.take() {
            c.spans.push((from, c.last));
        }
    }
    conns
}

/// Every capture in captures/ whose HTTP/2 frames can be read: h2c, or
/// TLS with a key log beside it.
fn readable() -> Vec<(PathBuf, Option<PathBuf>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let mut found: Vec<(PathBuf, Option<PathBuf>)> = std::fs::read_dir(&dir)
        .expect("captures/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .filter_map(|p| {
            let keylog = p.with_extension("keylog");
            match (keylog.exists(), p.display().to_string().contains("h2c")) {
                (true, _) => Some((p, Some(keylog))),
                (false, true) => Some((p, None)),
                _ => None,
            }
        })
        .collect();
    found.sort();
    found
}

#[test]
fn stream_limits_and_goaways_as_tshark_reads_them() {
    if !crate::tools::tshark_present() {
        return;
    }
    let (mut connections, mut at_limit, mut goaways, mut refused) = (0, 0, 0, 0);
    for (pcap, keylog) in readable() {
        let name = pcap.display().to_string();
        let records = analyze_file(&pcap, keylog.as_deref(), 1);
        if records.iter().all(|r| r.http.http2.is_none()) {
            continue;
        }
        let port = records
            .first()
            .map_or("", |r| r.server.rsplit(':').next().unwrap_or(""));
        let theirs = tshark_facts(&pcap, keylog.as_deref(), port);
        let by_port: HashMap<&str, &Facts> = theirs
            .values()
            .map(|f| (f.client_port.as_str(), f))
            .collect();
        for r in &records {
            let port = r.client.rsplit(':').next().unwrap_or_default();
            let Some(t) = by_port.get(port) else {
                continue;
            };
            let what = format!("{name}: connection {} (port {port})", r.id);
            let Some(h) = &r.http.http2 else {
                assert!(
                    !t.frames || r.http.lost_sync,
                    "{what}: tshark reads HTTP/2 frames"
                );
                continue;
            };
            connections += 1;
            assert_eq!(h.max_concurrent_streams, t.limit, "{what}");
            assert_eq!(h.peak_streams, t.peak, "{what}");
            assert_eq!(h.at_limit as usize, t.spans.len(), "{what}");
            let seconds: f64 = t.spans.iter().map(|(a, b)| b - a).sum();
            assert!(
                (h.at_limit_seconds - seconds).abs() < 1e-5 * (t.spans.len() as f64 + 1.0),
                "{what}: {} s at the limit, tshark {seconds}",
                h.at_limit_seconds
            );
            at_limit += t.spans.len();
            let ours = h.goaway.as_ref().map(|g| {
                let client = g.from == handshakes::record::Side::Client;
                (client, g.last_stream, g.error_code)
            });
            let expected = t
                .goaway
                .map(|(client, _, last, error)| (client, last, error));
            assert_eq!(ours, expected, "{what}: GOAWAY");
            assert_eq!(h.refused, t.refused, "{what}: refused");
            refused += t.refused;
            if let (Some(g), Some((_, at, _, _))) = (&h.goaway, t.goaway) {
                assert!((g.at.at - at).abs() < 1e-6, "{what}: GOAWAY at {}", g.at.at);
                goaways += 1;
            }
        }
    }
    // The captures hold a connection at its limit, and GOAWAYs from both
    // sides (nghttp's, nginx's).
    eprintln!(
        "{connections} HTTP/2 connections, {at_limit} spans at a limit, {goaways} GOAWAYs, {refused} refused"
    );
    assert!(connections >= 30, "{connections} connections read");
    assert!(
        at_limit >= 1 && goaways >= 4,
        "{at_limit} spans, {goaways} GOAWAYs"
    );
}

fn summary(name: &str) -> handshakes::record::BesideHttp2 {
    let pcap = crate::h2_sizes::capture(&format!("{name}.pcap"));
    let keylog = pcap.with_extension("keylog");
    let s = crate::over_time::summary_of(&pcap, Some(&keylog));
    s.beside_http2
        .unwrap_or_else(|| panic!("{name}: beside_http2"))
}

/// curl, 10 transfers at once, nginx allowing 2 streams: curl opens 8
/// more connections, one per transfer past the first two, each while the
/// first was at its limit. Five carry the ten: the second is needed, the
/// third could have waited for the second (room for one more), the fourth
/// is needed, and so on.
#[test]
fn at_the_servers_stream_limit() {
    let b = summary("h2-curl-stream-limit");
    assert_eq!((b.checked, b.connections, b.raced), (9, 4, 4));
    assert_eq!(
        (b.at_limit, b.stream_limit, b.after_goaway),
        (4, Some(2), 0)
    );
    let pairs: Vec<(u64, u64)> = b
        .first
        .iter()
        .map(|f| (f.connection, f.http2_connection))
        .collect();
    assert_eq!(pairs, [(3, 2), (5, 4), (7, 6), (9, 8)]);
    // Without keys the limit is unseen: all eight count, beside the first.
    let pcap = crate::h2_sizes::capture("h2-curl-stream-limit.pcap");
    let s = crate::over_time::summary_of(&pcap, None);
    let b = s.beside_http2.expect("beside_http2");
    assert_eq!((b.connections, b.at_limit), (8, 0));
}

/// curl, 3 transfers at once, nginx sending a GOAWAY with its 4th response
/// on a connection: curl opens two connections at once for the two
/// transfers waiting — one needed (after the GOAWAY), one that could have
/// waited for it.
#[test]
fn after_a_goaway() {
    let b = summary("h2-curl-goaway");
    assert_eq!((b.checked, b.connections, b.raced), (3, 1, 1));
    assert_eq!((b.at_limit, b.after_goaway), (0, 1));
    assert_eq!((b.first[0].connection, b.first[0].http2_connection), (3, 2));
    let records: Vec<ConnectionRecord> =
        crate::h2_sizes::records("h2-curl-goaway.pcap", Some("h2-curl-goaway.keylog"));
    let goaways: Vec<(u64, &str, u32)> = records
        .iter()
        .filter_map(|r| {
            let g = r.http.http2.as_ref()?.goaway.as_ref()?;
            Some((r.id, g.from.as_str(), g.last_stream))
        })
        .collect();
    assert_eq!(
        goaways,
        [(1, "server", 7), (2, "server", 7), (3, "server", 7)]
    );
}

/// Requests the server refused unprocessed are sent again, so they count
/// once — where they were served: `summary.requests` is nginx's count
/// (its access log, a line a request served) on curl against a limit of 2
/// streams that sent all ten on its first connection before it read the
/// SETTINGS (8 refused, REFUSED_STREAM) and against a GOAWAY after 4
/// requests that it sent two more past (captures/README.md, bi and bj);
/// and on the clean runs, where nothing was refused.
#[test]
fn refused_requests_count_where_they_were_served() {
    for (name, served, refused) in [
        ("h2-curl-refused", 10, 8),
        ("h2-curl-goaway-ignored", 12, 2),
        ("h2-curl-stream-limit", 10, 0),
        ("h2-curl-goaway", 12, 0),
    ] {
        let pcap = crate::h2_sizes::capture(&format!("{name}.pcap"));
        let log = std::fs::read_to_string(pcap.with_extension("nginx-access.log")).expect("log");
        assert_eq!(log.lines().count() as u64, served, "{name}: nginx's log");
        let s = crate::over_time::summary_of(&pcap, Some(&pcap.with_extension("keylog")));
        assert_eq!(
            (s.requests, s.requests_refused),
            (served, refused),
            "{name}"
        );
        let by_interval: u64 = s.over_time.intervals.iter().map(|i| i.requests).sum();
        assert_eq!(by_interval + s.over_time.requests_untimed, served, "{name}");
        // The verdict says so, and why the client needed more connections.
        let says =
            format!("; {refused} more requests were refused unprocessed by the server (HTTP/2)");
        assert_eq!(
            s.verdict.contains(&says),
            refused > 0,
            "{name}: {}",
            s.verdict
        );
        let needed = match name {
            "h2-curl-refused" | "h2-curl-stream-limit" => {
                "; 4 connections were needed at the server's limit of 2 concurrent HTTP/2 streams;"
            }
            _ => "; 1 connection was needed after a GOAWAY closed the HTTP/2 connection to new streams",
        };
        assert!(s.verdict.contains(needed), "{name}: {}", s.verdict);
    }
}

/// `compare` weighs them too: curl at nginx's limit of 2 streams that
/// waited for the SETTINGS (A) against one that did not (B, 8 refused);
/// without the key logs TLS hides the frames, and the rows are null.
#[test]
fn compare_counts_refusals_and_connections_needed() {
    let [a, b] = ["h2-curl-stream-limit", "h2-curl-refused"]
        .map(|n| crate::h2_sizes::capture(&format!("{n}.pcap")));
    let run = |keys: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_handshakes"));
        cmd.args(["compare", "-T", "json"]).arg(&a).arg(&b);
        if keys {
            for p in [&a, &b] {
                cmd.arg("--keylog").arg(p.with_extension("keylog"));
            }
        }
        let out = cmd.output().expect("run compare");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("compare JSON")
    };
    let with = run(true);
    let pair = |v: &serde_json::Value, key: &str| {
        let m = &v["metrics"][key];
        (m["a"].as_f64(), m["b"].as_f64())
    };
    assert_eq!(pair(&with, "requests_refused"), (Some(0.0), Some(8.0)));
    assert_eq!(pair(&with, "beside_http2_at_limit"), (Some(4.0), Some(4.0)));
    assert_eq!(
        pair(&with, "beside_http2_after_goaway"),
        (Some(0.0), Some(0.0))
    );
    let verdict = with["verdict"].as_str().expect("a verdict");
    for says in [
        "; 4 vs 4 connections needed at the server's HTTP/2 stream limit;",
        "; 8 vs 0 HTTP/2 requests refused unprocessed by the server;",
    ] {
        assert!(verdict.contains(says), "{verdict}");
    }
    let without = run(false);
    for key in [
        "requests_refused",
        "beside_http2_at_limit",
        "beside_http2_after_goaway",
    ] {
        assert_eq!(pair(&without, key), (None, None), "{key}");
    }
}

/// `timeline --conn` lists them among the connection's events: the
/// stretch at the limit, the refused requests, the server's GOAWAY.
#[test]
fn the_timeline_lists_limits_goaways_and_refusals() {
    let timeline = |name: &str, conn: &str| {
        let pcap = crate::h2_sizes::capture(&format!("{name}.pcap"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_handshakes"))
            .args(["timeline", "--width", "200", "--conn", conn])
            .arg(&pcap)
            .arg("--keylog")
            .arg(pcap.with_extension("keylog"))
            .env("NO_COLOR", "1")
            .output()
            .expect("run timeline");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let refused = timeline("h2-curl-refused", "1");
    // Its refused requests wait for nothing: the waterfall row shows no
    // wait once the two served ones are answered.
    let row = refused
        .lines()
        .find(|l| l.starts_with(" 1 :"))
        .expect("its row");
    assert!(!row.contains('~'), "{row}");
    assert!(
        refused.contains("(2 requests, 8 refused, TLS 1.3 full,"),
        "{refused}"
    );
    let lines = |text: &str, what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(
        lines(&refused, " (refused unprocessed by the server)"),
        8,
        "{refused}"
    );
    assert!(
        refused.contains("  HTTP/2 client streams at the server's limit of 2\n"),
        "{refused}"
    );
    assert!(
        refused.contains("  HTTP/2 client streams below the limit again (after 987.73ms)\n"),
        "{refused}"
    );
    let ignored = timeline("h2-curl-goaway-ignored", "1");
    assert!(
        ignored.contains("  server  HTTP/2 GOAWAY (last stream 7, NO_ERROR)\n"),
        "{ignored}"
    );
    assert_eq!(
        lines(&ignored, " (refused unprocessed by the server)"),
        2,
        "{ignored}"
    );
    // Where nothing was refused and no limit reached, no such line.
    let clean = timeline("h2-curl-goaway", "3");
    assert_eq!(lines(&clean, "refused"), 0, "{clean}");
    assert_eq!(lines(&clean, "limit"), 0, "{clean}");
}

/// The HTML report draws them over the connections' bars (a line while at
/// the limit, a tick at the GOAWAY, each with its tooltip, and their
/// legend) and its requests card counts the refused ones.
#[test]
fn the_html_report_marks_limits_and_goaways() {
    let page = |name: &str| {
        let pcap = crate::h2_sizes::capture(&format!("{name}.pcap"));
        let keylog = pcap.with_extension("keylog");
        let keylog = keylog.to_str().expect("a UTF-8 path");
        crate::support::analyze_html(&pcap, &["--keylog", keylog]).1
    };
    let refused = page("h2-curl-refused");
    assert_eq!(refused.matches("class=\"at-limit\"").count(), 1);
    assert!(refused.contains("HTTP/2 client streams at the server&#39;s limit of 2, for 987.73ms"));
    assert!(refused.contains("</i>HTTP/2 streams at the server's limit</span>"));
    assert!(refused
        .contains("10 exact · 8 more refused unprocessed by the server (HTTP/2), not counted"));
    assert!(!refused.contains("class=\"goaway\""));
    let goaway = page("h2-curl-goaway");
    assert_eq!(
        goaway
            .matches("class=\"goaway\"><title>GOAWAY from the server (last stream 7, NO_ERROR)")
            .count(),
        3
    );
    assert!(goaway.contains("</i>HTTP/2 GOAWAY</span>"));
    assert!(!goaway.contains("class=\"at-limit\""));
}
