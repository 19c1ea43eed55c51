//! The progress display through the real binary on a real pseudo-terminal
//! (util-linux's `script`): it appears on standard error for a large file,
//! for standard input and for each side of `compare`; never on standard
//! output, never with `-q`, never when standard error is not a terminal.
//!
//! The library's progress callback, on one and several threads: bytes
//! and totals that only grow, within the file and the summary.
//!
//! Does not check how indicatif draws (`src/status.rs` has unit tests of
//! what is chosen and written).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use handshakes::source::file::FileSource;
use handshakes::{analyze_with_progress, Config, Reading};

use crate::tools::skip_or_fail;

/// A generated capture just over the size that gets a progress bar.
fn large_capture(dir: &Path) -> PathBuf {
    let path = dir.join("large.pcap");
    crate::support::synth(&path, &["--size", "110MiB", "--seed", "7"]);
    path
}

/// `shell` run by `sh` inside a pseudo-terminal of 40 × 100 (`$HS` is the
/// binary); what the terminal showed. `None` without util-linux's
/// `script` (BSD's takes other arguments).
fn on_terminal(shell: &str) -> Option<String> {
    let version = Command::new("script").arg("-V").output();
    let util_linux = version
        .as_ref()
        .is_ok_and(|v| String::from_utf8_lossy(&v.stdout).contains("util-linux"));
    if !util_linux {
        let why = format!("util-linux's script is needed: {version:?}");
        skip_or_fail("progress display on a terminal", &why);
        return None;
    }
    let inner = format!("stty rows 40 cols 100; {shell}");
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &inner, "/dev/null"])
        .env("HS", env!("CARGO_BIN_EXE_handshakes"))
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(out) => {
            assert!(out.status.success(), "{shell}: {out:?}");
            Some(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        Err(e) => {
            skip_or_fail("progress display on a terminal", &format!("script: {e}"));
            None
        }
    }
}

#[test]
fn progress_shows_on_a_terminal_and_only_there() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = large_capture(dir.path());
    let (f, out) = (file.display(), dir.path().join("out.jsonl"));
    let out = out.display();

    // A large file: the bar, with the totals under it; the records untouched.
    let Some(shown) = on_terminal(&format!("\"$HS\" analyze -T jsonl '{f}' > '{out}'")) else {
        return;
    };
    assert!(shown.contains(" MiB/"), "no bar: {shown:?}");
    assert!(shown.contains("ETA"), "no time left: {shown:?}");
    assert!(shown.contains("large.pcap · open "), "no totals: {shown:?}");
    assert!(shown.contains("TCP handshakes per request"), "{shown:?}");
    let text = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap_or_default();
    assert!(text.lines().count() > 100, "{} lines", text.lines().count());
    assert!(
        !text.contains('\u{1b}'),
        "the display reached standard output"
    );

    // `-q`: nothing.
    let quiet = on_terminal(&format!("\"$HS\" analyze -q -T jsonl '{f}' > /dev/null"));
    assert_eq!(quiet.as_deref(), Some(""));

    // Standard input: no size, so bytes and rate without an end.
    let piped = on_terminal(&format!(
        "cat '{f}' | \"$HS\" analyze -T jsonl - > /dev/null"
    ));
    let piped = piped.unwrap_or_default();
    assert!(piped.contains(" MiB read, "), "{piped:?}");
    assert!(piped.contains("standard input · open "), "{piped:?}");

    // compare and timeline read files too.
    let compared = on_terminal(&format!(
        "\"$HS\" compare --label A=before --label B=after '{f}' '{f}' > /dev/null"
    ))
    .unwrap_or_default();
    assert!(compared.contains("before · open "), "{compared:?}");
    assert!(compared.contains("after · open "), "{compared:?}");
    let drawn = on_terminal(&format!("\"$HS\" timeline --top 3 '{f}' > /dev/null"));
    assert!(drawn.unwrap_or_default().contains(" MiB/"));

    // Standard error not a terminal: nothing on it.
    let plain = Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(["analyze", "-T", "jsonl"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(plain.status.success());
    assert!(
        plain.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&plain.stderr)
    );
}

#[test]
fn progress_readings_only_grow_on_any_number_of_threads() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = large_capture(dir.path());
    let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    for threads in [1, 2] {
        let mut source = FileSource::open(&file).unwrap_or_else(|e| panic!("{e}"));
        let config = Config {
            threads,
            ..Config::default()
        };
        let mut readings: Vec<Reading> = Vec::new();
        let summary = analyze_with_progress(&mut source, &config, &mut Vec::new(), &mut |r| {
            readings.push(*r)
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            readings.len() > 50,
            "-j {threads}: {} readings",
            readings.len()
        );
        for pair in readings.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(a.read <= b.read, "-j {threads}: bytes went back");
            assert!(a.so_far.finished <= b.so_far.finished);
            assert!(a.so_far.requests <= b.so_far.requests);
            let seen = |r: &Reading| r.so_far.open + r.so_far.finished;
            assert!(seen(a) <= seen(b), "-j {threads}: connections went back");
        }
        let last = readings.last().copied().unwrap_or_default();
        assert_eq!(last.size, Some(size));
        assert!(last.read <= size);
        assert!(last.so_far.finished <= summary.connections);
        assert!(last.so_far.open + last.so_far.finished <= summary.connections);
        assert!(
            last.so_far.open > 0,
            "-j {threads}: nothing open at the last reading"
        );
    }
}
