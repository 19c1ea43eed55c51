//! `compare` with more than two captures, through the real binary: a
//! column a capture and a verdict for each against the first, the JSON
//! document of docs/json.md (each capture's values, in order, the same as
//! comparing it with the first alone), the HTML section, and one clear line
//! for a label naming no capture. Two captures keep their own shape
//! (report.rs).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::h2_sizes::capture;

/// The non-blocking clients' captures: HttpClient's sendAsync cold and
/// warmed, Apache HttpAsyncClient 5 and OkHttp, all over HTTP/2.
const CLIENTS: [&str; 4] = [
    "java-async-h2-post-429-100x50.pcap",
    "java-async-warm-h2-post-429-100x50.pcap",
    "apache-async-h2-post-429-100x50.pcap",
    "okhttp-async-h2-post-429-100x50.pcap",
];

fn compare(files: &[&str], extra: &[&str]) -> Output {
    let paths: Vec<PathBuf> = files.iter().map(|f| capture(f)).collect();
    Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .arg("compare")
        .args(&paths)
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .expect("run compare")
}

fn json(files: &[&str]) -> Value {
    let out = compare(files, &["-T", "json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("compare JSON")
}

#[test]
fn a_column_a_capture_and_a_verdict_for_each_against_the_first() {
    let out = compare(&CLIENTS, &["--label", "C=apache", "--label", "d=okhttp"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("A             {}", CLIENTS[0]));
    assert_eq!(lines[2], "C             apache");
    assert_eq!(lines[3], "D             okhttp");
    let verdicts: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("verdict       "))
        .collect();
    assert_eq!(verdicts.len(), 3, "{text}");
    for (v, letter) in verdicts.iter().zip(["B ", "C ", "D "]) {
        assert!(v.starts_with(letter), "{v}");
        assert!(v.contains("than A"), "{v}");
    }
    // The warmed client: one connection for the hundred.
    assert!(
        verdicts[0].contains("50× fewer TCP handshakes"),
        "{}",
        verdicts[0]
    );
    let header = lines
        .iter()
        .find(|l| l.contains("metric"))
        .expect("a header");
    for column in ["A", "B", "C: apache", "D: okhttp"] {
        assert!(header.contains(column), "{header}");
    }
    let row = lines
        .iter()
        .find(|l| l.starts_with('│') && l.contains("TCP handshakes per request"))
        .expect("a row");
    let cells: Vec<&str> = row.trim_matches('│').split('┆').map(str::trim).collect();
    assert_eq!(cells[1..], ["0.50", "0.01", "0.01", "0.01"], "{row}");
}

#[test]
fn json_holds_each_captures_values_as_the_pairs_do() {
    let many = json(&CLIENTS[..3]);
    let captures = many["captures"].as_array().expect("captures");
    assert_eq!(captures.len(), 3);
    assert_eq!(captures[1]["label"], CLIENTS[1]);
    assert_eq!(captures[2]["summary"]["connections"], 1);
    assert_eq!(many["verdicts"].as_array().map(Vec::len), Some(2));
    let metrics = many["metrics"].as_object().expect("metrics");
    assert_eq!(metrics.len(), 71);
    for (i, file) in CLIENTS[1..3].iter().enumerate() {
        let pair = json(&[CLIENTS[0], file]);
        for (key, values) in metrics {
            assert_eq!(values.as_array().map(Vec::len), Some(3), "{key}");
            assert_eq!(values[0], pair["metrics"][key]["a"], "{key}");
            assert_eq!(values[i + 1], pair["metrics"][key]["b"], "{key}");
            assert_eq!(many["ratios"][key][i], pair["ratios"][key], "{key}");
        }
        let verdict = many["verdicts"][i].as_str().expect("a verdict");
        let letter = ["B", "C"][i];
        assert_eq!(
            verdict.strip_prefix(letter),
            pair["verdict"].as_str().and_then(|v| v.strip_prefix('B')),
            "{verdict}"
        );
    }
}

#[test]
fn the_html_report_compares_them_all() {
    let dir = std::env::temp_dir().join(format!("hs-compare-many-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    let out = compare(&CLIENTS[..3], &["--html", html.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let start = page
        .find("<section class=\"compare\">")
        .expect("a comparison");
    let section = &page[start..];
    let section = &section[..section.find("</section>").expect("its end")];
    for tag in ["A", "B", "C"] {
        assert!(
            section.contains(&format!("<span class=\"tag\">{tag}</span>")),
            "{tag}"
        );
    }
    // A verdict for each capture after the first, and a column each.
    assert_eq!(section.matches("<p class=\"verdict\">").count(), 2);
    assert!(section.contains("<th>metric</th><th>A</th><th>B</th><th>C</th>"));
}

#[test]
fn a_label_for_no_capture_is_one_clear_line() {
    let out = compare(&CLIENTS[..3], &["--label", "D=okhttp"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "handshakes: --label D=okhttp: there is no capture D (the 3 given are A to C)\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn more_than_26_captures_are_one_clear_line() {
    let files = [CLIENTS[0]; 27];
    let out = compare(&files, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "handshakes: compare: 27 captures given; at most 26 (A to Z)\n"
    );
    assert!(out.stdout.is_empty());
}
