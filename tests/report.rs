//! Tests of the compare, timeline and table reports, called through the
//! library on the real captures in captures/ (the CLI wiring is tested
//! elsewhere); the HTML report's tests are in `html`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use handshakes::report::compare::{self, CompareOpts, Labeled};
use handshakes::report::drawn::Drawn;
use handshakes::report::timeline::{self, ConnId, TimelineOpts};
use handshakes::{ConnectionRecord, Summary};

use crate::tools::analyze_path;

mod html;

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

fn load(name: &str) -> (Summary, Vec<ConnectionRecord>) {
    analyze_path(&capture(name))
}

fn labeled<'a>(label: &str, d: &'a (Summary, Vec<ConnectionRecord>)) -> Labeled<'a> {
    Labeled {
        label: label.to_string(),
        summary: &d.0,
        drawn: Cow::Owned(Drawn::of(&d.1)),
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn compare_text(color: bool) -> String {
    let off = load("java-urlconnection-keepalive-off-10.pcap");
    let pooled = load("java-httpclient-pooled-10.pcap");
    let mut out = Vec::new();
    compare::write(
        &labeled("keepalive-off", &off),
        &labeled("pooled", &pooled),
        &mut out,
        &CompareOpts { color },
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn compare_table_shows_both_sides_and_the_ratio() {
    let text = compare_text(false);
    assert!(
        text.contains("keepalive-off") && text.contains("pooled"),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "no colour when color is false");
    let row = text
        .lines()
        .find(|l| l.starts_with("│ TCP handshakes per request"))
        .unwrap_or_else(|| panic!("no per-request row:\n{text}"));
    let cells: Vec<&str> = row.split(['│', '┆']).map(str::trim).collect();
    assert_eq!(&cells[2..5], ["1.00", "0.10", "0.10"], "{row}");
    // The labels name A and B above the table, and in its header when
    // they are short.
    assert!(text.starts_with("A             keepalive-off\nB             pooled\n"));
    let header = text.lines().find(|l| l.starts_with("│ metric")).unwrap();
    let header: Vec<&str> = header.split(['│', '┆']).map(str::trim).collect();
    assert_eq!(
        &header[1..5],
        ["metric", "A: keepalive-off", "B: pooled", "B/A"],
        "{text}"
    );
    let verdict = text.lines().find(|l| l.starts_with("verdict")).unwrap();
    assert!(
        verdict.contains("10× fewer TCP handshakes per request"),
        "{verdict}"
    );
    assert!(verdict.contains("(0.10 vs 1.00)"), "{verdict}");
    assert!(
        verdict.contains("as many full TLS handshakes per request"),
        "{verdict}"
    );
    // The colour version marks B's better ratio green.
    let colored = compare_text(true);
    assert!(colored.contains("\x1b["), "colour codes when color is true");
}

#[test]
fn compare_json_has_the_documented_keys() {
    let off = load("java-urlconnection-keepalive-off-10.pcap");
    let pooled = load("java-httpclient-pooled-10.pcap");
    let mut out = Vec::new();
    compare::write_json(&labeled("off", &off), &labeled("pooled", &pooled), &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["a"]["label"], "off");
    assert_eq!(v["b"]["label"], "pooled");
    assert_eq!(v["a"]["summary"]["requests"], 10);
    assert!(v["verdict"]
        .as_str()
        .unwrap()
        .contains("fewer TCP handshakes"));
    let keys = [
        "connections",
        "connections_unused",
        "quic_connections",
        "quic_handshakes_full",
        "quic_handshakes_resumed",
        "quic_handshake_median",
        "quic_requests",
        "quic_handshakes_per_request",
        "quic_status_429",
        "quic_requests_in_retry_window",
        "tcp_handshakes",
        "tls_full",
        "tls_resumed",
        "tls_failed",
        "requests",
        "requests_exact",
        "requests_estimated",
        "tcp_handshakes_per_request",
        "tls_full_per_request",
        "tcp_handshakes_per_request_all",
        "tls_full_per_request_all",
        "requests_per_connection_mean",
        "requests_per_connection_max",
        "handshake_time_total",
        "handshake_time_median",
        "setup_connect_total",
        "setup_before_client_hello_total",
        "setup_tls_handshake_total",
        "setup_to_request_total",
        "connect_median",
        "connect_p90",
        "connect_p95",
        "connect_max",
        "tls_handshake_median",
        "tls_handshake_p90",
        "tls_handshake_p95",
        "tls_handshake_max",
        "latency_avg",
        "latency_min",
        "latency_median",
        "latency_p90",
        "latency_p95",
        "latency_max",
        "status_2xx",
        "status_4xx",
        "status_429",
        "status_5xx",
        "status_429_share",
        "requests_in_retry_window",
        "wait_after_429_median",
        "requests_in_retry_window_any_connection",
        "connections_opened_in_retry_window",
        "wait_after_429_any_connection_median",
        "connections_closed_after_429",
        "closed_by_server_after_response",
        "server_close_after_response_median",
        "requests_after_close",
        "opened_while_idle",
        "opened_while_idle_setup_total",
        "redialed",
        "beside_http2",
        "beside_http2_handshake_total",
        "beside_http2_at_limit",
        "beside_http2_after_goaway",
        "requests_refused",
        "tls_not_offered",
        "tls_refused",
        "peak_concurrent_connections",
        "requests_per_second",
        "handshake_events",
        "handshake_events_per_request",
    ];
    let ratios = v["ratios"].as_object().unwrap();
    let metrics = v["metrics"].as_object().unwrap();
    assert_eq!(ratios.len(), keys.len());
    for k in keys {
        assert!(ratios.contains_key(k), "ratio {k} missing");
        assert!(
            metrics[k].get("a").is_some() && metrics[k].get("b").is_some(),
            "{k}"
        );
    }
    let r = ratios["tcp_handshakes_per_request"].as_f64().unwrap();
    assert!((r - 0.1).abs() < 1e-9, "{r}");
    // 10 connections × (SYN, SYN-ACK, ACK) plus their TLS messages.
    let a_events = metrics["handshake_events"]["a"].as_f64().unwrap();
    let b_events = metrics["handshake_events"]["b"].as_f64().unwrap();
    assert!(a_events >= 30.0 + 10.0 && b_events >= 3.0 + 1.0 && b_events < a_events);
    // Both have TLS: no null in the TLS ratios; failed is 0/0: null.
    assert!(ratios["tls_handshake_median"].is_f64());
    assert!(ratios["tls_failed"].is_null());
}

fn timeline_text(d: &(Summary, Vec<ConnectionRecord>), opts: &TimelineOpts) -> String {
    let mut out = Vec::new();
    timeline::write(&d.1, &d.0, &mut out, opts).unwrap();
    String::from_utf8(out).unwrap()
}

fn is_connection_line(line: &str) -> bool {
    let t = line.trim_start();
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && t[digits..].starts_with(" :")
}

#[test]
fn timeline_has_one_line_per_connection_within_the_width() {
    let d = load("java-httpclient-pooled-10x10.pcap");
    for width in [60, 100, 200] {
        for color in [false, true] {
            let opts = TimelineOpts {
                width,
                color,
                conn: None,
                top: None,
            };
            let text = timeline_text(&d, &opts);
            assert_eq!(text.contains('\x1b'), color, "colour codes only with color");
            let plain = strip_ansi(&text);
            for line in plain.lines() {
                assert!(line.chars().count() <= width, "{width}: {line:?}");
            }
            let rows: Vec<&str> = plain.lines().filter(|l| is_connection_line(l)).collect();
            assert_eq!(rows.len(), d.1.len(), "{plain}");
            if !color {
                assert!(plain.is_ascii(), "plain output is ASCII:\n{plain}");
                // Every phase of a pooled TLS connection shows up.
                for glyph in ['>', '#', '=', '.', '|'] {
                    assert!(rows.iter().any(|r| r.contains(glyph)), "{glyph}:\n{plain}");
                }
            }
        }
    }
    // Narrow terminals still never overflow (and never panic).
    for width in [0, 1, 5, 12, 30] {
        for color in [false, true] {
            let opts = TimelineOpts {
                width,
                color,
                conn: Some(ConnId::Tcp(1)),
                top: None,
            };
            for line in strip_ansi(&timeline_text(&d, &opts)).lines() {
                assert!(line.chars().count() <= width, "{width}: {line:?}");
            }
        }
    }
    let top = timeline_text(
        &d,
        &TimelineOpts {
            width: 80,
            color: false,
            conn: None,
            top: Some(3),
        },
    );
    assert_eq!(top.lines().filter(|l| is_connection_line(l)).count(), 3);
}

#[test]
fn timeline_of_one_connection_lists_its_events() {
    let d = load("java-httpclient-pooled-10x10.pcap");
    let opts = TimelineOpts {
        width: 100,
        color: false,
        conn: Some(ConnId::Tcp(1)),
        top: None,
    };
    let text = timeline_text(&d, &opts);
    assert_eq!(text.lines().filter(|l| is_connection_line(l)).count(), 1);
    for want in [
        "TCP SYN",
        "TCP SYN-ACK",
        "TCP ACK",
        "TLS client_hello",
        "TLS server_hello",
        "TLS handshake complete",
        "request 1 sent",
        "FIN",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    let tls = d.1[0].tls.as_ref().unwrap();
    let listed = text
        .lines()
        .filter(|l| l.contains("TLS ") && !l.contains("complete"))
        .count();
    assert!(listed >= tls.events.len(), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100));
    let missing = timeline_text(
        &d,
        &TimelineOpts {
            conn: Some(ConnId::Tcp(999)),
            ..opts
        },
    );
    assert!(missing.contains("no connection with id 999"), "{missing}");
}

#[test]
fn table_replaces_control_characters_from_the_capture() {
    // A server name, protocol and file name are the capture's (or the
    // user's) bytes: an escape sequence or a bidirectional override in them
    // must not reach the terminal through the table.
    let (mut summary, mut records) = load("java-httpclient-pooled-10.pcap");
    records.push(records[0].clone());
    let tls = records[0].tls.as_mut().unwrap();
    tls.sni = Some("evil\u{1b}]0;pwned\u{7}.example".into());
    tls.alpn = Some("h2\u{202e}1.1/ptth".into());
    records[1].tls.as_mut().unwrap().alpn = None;
    records[1].tls.as_mut().unwrap().alpn_offered = vec!["x\u{1b}[2J".into()];
    // A cleartext connection's Host stands in the SNI/Host column.
    let mut clear = records[0].clone();
    clear.tls = None;
    clear.http.host = Some("a\u{1b}[2Jb.test".into());
    records.push(clear);
    summary.alpn.insert("\u{1b}[31mh3".into(), 1);
    summary.file = "cap\u{1b}[1m.pcap".into();
    let opts = handshakes::report::Opts {
        limit: 0,
        fit_terminal: false,
        width: None,
    };
    let mut out = Vec::new();
    handshakes::report::table::write(&summary, &records, &mut out, &opts).unwrap();
    let text = String::from_utf8(out).unwrap();
    for bad in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!text.contains(bad), "{bad:?} in the table:\n{text}");
    }
    for shown in [
        "evil?]0;pwned?.example",
        "h2?1.1/ptth",
        "(x?[2J)",
        "a?[2Jb.test",
        "?[31mh3 ×1",
        "cap?[1m.pcap",
    ] {
        assert!(text.contains(shown), "{shown} not in the table:\n{text}");
    }
}

/// `timeline` and `compare` (through the real binary) work on every real capture.
#[test]
fn timeline_and_compare_run_on_every_capture() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .expect("captures/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    files.sort();
    let baseline = dir.join("http-curl-5-keepalive.pcap");
    for f in &files {
        let out = crate::support::bin()
            .args(["timeline", "--width", "80"])
            .arg(f)
            .output()
            .expect("run timeline");
        assert_eq!(out.status.code(), Some(0), "timeline {}", f.display());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.lines().all(|l| l.chars().count() <= 80),
            "timeline wider than 80 on {}",
            f.display()
        );
        let out = crate::support::bin()
            .args(["compare", "-T", "json"])
            .arg(&baseline)
            .arg(f)
            .output()
            .expect("run compare");
        assert_eq!(out.status.code(), Some(0), "compare {}", f.display());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("compare JSON");
        assert!(
            v["verdict"].is_string() && v["ratios"].is_object(),
            "{}",
            f.display()
        );
        // Read with read() instead of memory maps: the same report.
        let read = crate::support::bin()
            .args(["compare", "-T", "json", "--no-mmap"])
            .arg(&baseline)
            .arg(f)
            .output()
            .expect("run compare --no-mmap");
        assert_eq!(read.stdout, out.stdout, "compare --no-mmap {}", f.display());
    }
}
