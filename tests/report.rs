//! Tests of the compare, timeline and HTML reports, called through the
//! library on the real captures in captures/ (the CLI wiring is tested
//! elsewhere). The HTML report is also rendered by headless Chromium when it
//! is installed, and the screenshot checked for content.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handshakes::report::compare::{self, CompareOpts, Labeled};
use handshakes::report::drawn::Drawn;
use handshakes::report::html;
use handshakes::report::timeline::{self, TimelineOpts};
use handshakes::{ConnectionRecord, Summary};

use crate::tools::{analyze_path, skip_or_fail};

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
        "tcp_handshakes",
        "tls_full",
        "tls_resumed",
        "tls_failed",
        "requests",
        "requests_exact",
        "requests_estimated",
        "tcp_handshakes_per_request",
        "tls_full_per_request",
        "requests_per_connection_mean",
        "requests_per_connection_max",
        "handshake_time_total",
        "handshake_time_median",
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
                conn: Some(1),
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
        conn: Some(1),
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
            conn: Some(999),
            ..opts
        },
    );
    assert!(missing.contains("no connection with id 999"), "{missing}");
}

fn html_of(docs: &[Labeled]) -> String {
    let mut out = Vec::new();
    html::write(docs, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// No reference to the network: an http(s) URL may appear only inside text.
fn assert_self_contained(html: &str) {
    assert!(!html.contains("<script"), "no scripts");
    for pat in [
        "src=\"", "href=\"", "src='", "href='", "url(", "@import", "<link",
    ] {
        assert!(!html.contains(pat), "{pat} found");
    }
    for scheme in ["http://", "https://"] {
        for (i, _) in html.match_indices(scheme) {
            let before = html[..i].chars().last();
            assert!(
                !matches!(before, Some('"' | '\'' | '(' | '=')),
                "{scheme} reference at {i}"
            );
        }
    }
}

#[test]
fn html_for_every_capture_is_self_contained_with_a_row_per_connection() {
    let mut names: Vec<PathBuf> = std::fs::read_dir(capture(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    names.sort();
    assert!(names.len() > 10);
    for path in names {
        let d = analyze_path(&path);
        let label = path.file_name().unwrap().to_string_lossy().to_string();
        let html = html_of(&[labeled(&label, &d)]);
        assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
        if d.1.is_empty() {
            // Nothing to draw (tunnel-vxlan-8472.pcap without `-d`).
            assert!(html.contains("No connections."), "{label}");
        } else {
            assert!(html.contains("<svg"), "{label}");
        }
        let rows = html.matches("<g class=\"conn\"").count();
        assert_eq!(rows, d.1.len(), "{label}");
        for r in &d.1 {
            assert!(
                html.contains(&format!("data-id=\"{}\"", r.id)),
                "{label} {}",
                r.id
            );
        }
        assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
        assert_eq!(html.matches("<g ").count(), html.matches("</g>").count());
        assert_self_contained(&html);
    }
}

#[test]
fn html_escapes_hostile_strings() {
    let d = load("java-httpclient-pooled-10.pcap");
    let mut records = d.1.clone();
    let rec = &mut records[0];
    rec.tls.as_mut().unwrap().sni = Some("<script>alert('x')</script>\u{1b}[31m".into());
    rec.client = "\"><img src=x onerror=alert(1)>:1".into();
    let hostile = (d.0.clone(), records);
    let html = html_of(&[labeled("<b>label</b> & http://example.com/", &hostile)]);
    assert!(
        html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
        "SNI escaped"
    );
    assert!(!html.contains("<img") && !html.contains("<b>label"));
    assert!(!html.contains('\u{1b}'), "control characters replaced");
    assert_self_contained(&html);
    // Two documents: a comparison section, then both captures.
    let off = load("java-urlconnection-keepalive-off-10.pcap");
    let two = html_of(&[labeled("off", &off), labeled("<pooled>", &hostile)]);
    assert!(two.contains("Comparison"));
    assert!(two.contains("fewer TCP handshakes per request"));
    assert_eq!(
        two.matches("<g class=\"conn\"").count(),
        off.1.len() + hostile.1.len()
    );
    assert!(!two.contains("<pooled>"));
    assert_self_contained(&two);
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
        "?[31mh3 ×1",
        "cap?[1m.pcap",
    ] {
        assert!(text.contains(shown), "{shown} not in the table:\n{text}");
    }
}

#[test]
fn html_caps_the_waterfall() {
    let d = load("java-httpclient-pooled-10.pcap");
    let one = d.1[0].clone();
    let records: Vec<ConnectionRecord> = (1..=2100u64)
        .map(|id| {
            let mut r = one.clone();
            r.id = id;
            r
        })
        .collect();
    let big = (d.0.clone(), records);
    let html = html_of(&[labeled("big", &big)]);
    assert_eq!(html.matches("<g class=\"conn\"").count(), html::MAX_ROWS);
    assert!(html.contains("Showing the first 2000 of 2100 connections"));
}

/// Distinct RGB(A) colours of an 8-bit non-interlaced PNG (up to `cap`).
fn png_colours(png: &[u8], cap: usize) -> usize {
    use std::io::Read;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (mut pos, mut idat, mut w, mut h, mut channels) = (8, Vec::new(), 0, 0, 0);
    while pos + 8 <= png.len() {
        let len = u32::from_be_bytes(png[pos..pos + 4].try_into().unwrap()) as usize;
        let kind = &png[pos + 4..pos + 8];
        let data = &png[pos + 8..pos + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                h = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                assert_eq!(data[8], 8, "8-bit depth");
                assert_eq!(data[12], 0, "not interlaced");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    t => panic!("colour type {t}"),
                };
            }
            b"IDAT" => idat.extend_from_slice(data),
            _ => {}
        }
        pos += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = w * channels;
    assert_eq!(raw.len(), h * (stride + 1));
    let mut prev = vec![0u8; stride];
    let mut colours = std::collections::HashSet::new();
    for row in raw.chunks(stride + 1) {
        let (filter, line) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for i in 0..stride {
            let a = if i >= channels {
                cur[i - channels] as i16
            } else {
                0
            };
            let b = prev[i] as i16;
            let c = if i >= channels {
                prev[i - channels] as i16
            } else {
                0
            };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("filter {f}"),
            };
            cur[i] = line[i].wrapping_add(pred as u8);
        }
        for px in cur.chunks(channels) {
            colours.insert(px.to_vec());
            if colours.len() >= cap {
                return cap;
            }
        }
        prev = cur;
    }
    colours.len()
}

#[test]
fn html_renders_in_chromium() {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.exists() {
        skip_or_fail(
            "chromium",
            "/usr/bin/chromium not found (apt-get install chromium)",
        );
        return;
    }
    let off = load("java-urlconnection-keepalive-off-10x10.pcap");
    let pooled = load("java-httpclient-pooled-10x10.pcap");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let shot = dir.path().join("shot.png");
    let html = html_of(&[
        labeled("keepalive-off-10x10", &off),
        labeled("pooled-10x10", &pooled),
    ]);
    std::fs::write(&page, html).unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1400,1000")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium took longer than 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot: {e}"));
    assert!(png.len() > 10_000, "screenshot only {} bytes", png.len());
    let colours = png_colours(&png, 64);
    assert!(
        colours >= 16,
        "screenshot has {colours} colours: blank page?"
    );
    if let Ok(keep) = std::env::var("HANDSHAKES_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
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
