//! QUIC (HTTP/3's transport) is not analyzed, but a capture of it must say
//! so instead of looking empty: UDP datagrams carrying a QUIC long-header
//! packet are counted (`packets.quic`), and the connections they open
//! (`quic_connections`); the verdict and a warning name them. Checked
//! against tshark on the peer corpus's QUIC captures (Chrome, curl,
//! quic-go, QUIC v2, drafts, Retry, 0-RTT, greased fixed bits), and for
//! none elsewhere; the connections against tshark 4.0's in the corpus's
//! expected facts.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::tools::{all_captures, analyze_path, skip_or_fail, tshark_present};

/// tshark's count of frames with a QUIC long header.
fn tshark_long_headers(path: &Path) -> u64 {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args([
            "-Y",
            "quic.header_form == 1",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .expect("tshark runs");
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

#[test]
fn quic_handshake_datagrams_are_counted_as_tshark_counts_them() {
    // Every capture we count QUIC in (a false one would show), and every
    // one named for QUIC (a miss would show), against tshark.
    let mut checked = 0;
    let mut tshark = None;
    for (name, path) in all_captures() {
        let (summary, _) = analyze_path(&path);
        let quic = summary.packets.quic;
        assert!(quic <= summary.packets.skipped, "{name}");
        assert_eq!(summary.verdict.contains("QUIC"), quic > 0, "{name}");
        let named = name.starts_with("corpus/") && name.to_lowercase().contains("quic");
        if quic == 0 && !named {
            continue;
        }
        if !*tshark.get_or_insert_with(tshark_present) {
            return;
        }
        let want = tshark_long_headers(&path);
        assert!(want > 0, "{name}: tshark sees no QUIC");
        assert_eq!(quic, want, "{name}");
        checked += 1;
    }
    if checked < 5 {
        skip_or_fail(
            "peer corpus",
            "its QUIC captures were not found in ../shared/corpus",
        );
    }
}

#[test]
fn a_capture_of_http3_says_it_was_not_analyzed() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/zeek/Traces/quic/chromium-115.0.5790.110-api-cirrus-com.pcap");
    if !path.is_file() {
        skip_or_fail("peer corpus", "zeek's chromium QUIC capture not found");
        return;
    }
    let (summary, records) = analyze_path(&path);
    assert!(records.is_empty());
    // One connection: Chromium's Initial, the server's Initial and
    // Handshake, and its Handshake: three datagrams with long headers
    // (tshark 4.0 says so).
    assert_eq!((summary.quic_connections, summary.packets.quic), (1, 3));
    assert_eq!(
        summary.verdict,
        "no HTTP requests seen; QUIC (HTTP/3) not analyzed: 1 connection"
    );
    let warning = "1 QUIC connection (3 UDP datagrams";
    assert!(
        summary.warnings.iter().any(|w| w.starts_with(warning)),
        "{:?}",
        summary.warnings
    );
}

#[test]
fn quic_connections_are_the_ones_tshark_numbers() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let Ok(text) = std::fs::read_to_string(corpus.join("expected.json")) else {
        skip_or_fail("peer corpus", "../shared/corpus/expected.json not found");
        return;
    };
    let expected: Value = serde_json::from_str(&text).expect("expected.json parses");
    let entries = expected.as_array().expect("a list of captures");
    let (mut checked, mut with_quic) = (0, 0);
    for entry in entries {
        let Some(quic) = entry
            .pointer("/facts/tshark_4_0/quic_connections")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let file = entry["file"].as_str().expect("a file name");
        let (summary, _) = analyze_path(&corpus.join(file));
        assert_eq!(summary.quic_connections, quic.len() as u64, "{file}");
        checked += 1;
        with_quic += usize::from(!quic.is_empty());
    }
    // 97 captures, 10 of them with QUIC (20 connections in two of ja4's).
    assert!(
        checked >= 90 && with_quic >= 8,
        "{checked} checked, {with_quic} with QUIC"
    );
}

#[test]
fn the_filters_keep_quic_as_they_keep_tcp() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/ja4/pcap/tls-handshake.pcapng");
    if !path.is_file() {
        skip_or_fail("peer corpus", "ja4's tls-handshake.pcapng not found");
        return;
    }
    let summary = |args: &[&str]| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
            .args(["analyze", "-q", "-T", "json"])
            .args(args)
            .arg(&path)
            .output()
            .expect("runs");
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        v["summary"].clone()
    };
    let quic = |s: &Value| {
        (
            s["quic_connections"].as_u64(),
            s["packets"]["quic"].as_u64(),
        )
    };
    // Twenty Google and Facebook connections, two datagrams each.
    assert_eq!(quic(&summary(&[])), (Some(20), Some(40)));
    assert_eq!(quic(&summary(&["--port", "443"])), (Some(20), Some(40)));
    // www.google.com's alone; none on another port.
    assert_eq!(
        quic(&summary(&["--host", "142.251.163.147"])),
        (Some(1), Some(2))
    );
    let other = summary(&["--port", "8443"]);
    assert_eq!(quic(&other), (Some(0), Some(0)));
    assert_eq!(other["verdict"], "no HTTP requests seen");
}

#[test]
fn the_html_report_names_the_quic_connections() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/ja4/pcap/tls-sni.pcapng");
    if !path.is_file() {
        skip_or_fail("peer corpus", "ja4's tls-sni.pcapng not found");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let html = dir.path().join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(["analyze", "-q", "--html"])
        .arg(&html)
        .arg(&path)
        .output()
        .expect("runs");
    assert!(out.status.success());
    let page = std::fs::read_to_string(&html).expect("the report");
    assert!(
        page.contains("QUIC connections</div><div class=\"v\">20</div>"),
        "no QUIC card"
    );
}
