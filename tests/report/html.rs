//! Tests of the self-contained HTML report, called through the library on
//! the real captures in captures/: self-contained, escaped, capped, and
//! rendered by headless Chromium when it is installed (the screenshot is
//! checked for content). The compare and timeline reports are tested in
//! the parent module.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handshakes::report::html;
use handshakes::ConnectionRecord;

use super::{capture, labeled, load};
use crate::tools::{analyze_path, skip_or_fail};
use handshakes::report::compare::Labeled;

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
        // A lane per TCP connection, and one per QUIC connection listed.
        let quic = d.0.quic.as_ref().map_or(&[][..], |q| &q.list[..]);
        if d.1.is_empty() && quic.is_empty() {
            // Nothing to draw (tunnel-vxlan-8472.pcap without `-d`).
            assert!(html.contains("No connections."), "{label}");
        } else {
            assert!(html.contains("<svg"), "{label}");
        }
        let rows = html.matches("<g class=\"conn\"").count();
        assert_eq!(rows, d.1.len() + quic.len(), "{label}");
        for q in quic {
            let id = format!("data-id=\"q{}\"", q.id);
            assert!(html.contains(&id), "{label} q{}", q.id);
        }
        for r in &d.1 {
            assert!(
                html.contains(&format!("data-id=\"{}\"", r.id)),
                "{label} {}",
                r.id
            );
        }
        // Each server certificate read is named in its lane's tooltip.
        let certs = d.1.iter().filter(|r| {
            let cert = r.tls.as_ref().and_then(|t| t.certificate.as_ref());
            cert.is_some_and(|c| c.chain > 0)
        });
        let shown = html.matches(" in the chain, ").count();
        assert!(shown >= certs.count().min(2000), "{label}");
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
