//! Test support: capture writers (classic pcap and pcapng), frame builders
//! for every link type `handshakes` decodes, scripted TCP conversations at
//! exact timestamps, and helpers that run the real binary on captures
//! written into a temporary directory.

pub mod capture;
pub mod conv;
pub mod frames;
pub mod tls;

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tempfile::TempDir;

pub use capture::{Packet, Pcap, Pcapng, TsResol};
pub use conv::{addr, frames, interleave, ms, pcap_of, secs, us, Conv, Ending, Script, Side, T0};
pub use frames::{arp_frame, ipv4_fragment_frame, udp_frame, Ipv6Ext, Link, Seg};

/// The binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_handshakes"))
}

/// Writes a capture to `out` with `handshakes-synth` and `args`, its
/// output silenced; panics when it fails.
pub fn synth(out: &Path, args: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_handshakes-synth"))
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("handshakes-synth: {e}"));
    assert!(status.success(), "handshakes-synth failed");
}

/// Runs `handshakes` with `args`.
pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    bin().args(args).output().expect("run handshakes")
}

/// Runs `handshakes` with `args`, feeding `input` on standard input.
pub fn run_stdin<I, S>(args: I, input: &[u8]) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn handshakes");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("wait for handshakes");
    writer.join().expect("stdin writer").expect("write stdin");
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a zero exit and parses stdout as one JSON document.
pub fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        stderr(out)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// `handshakes analyze -T json FILE`, which must succeed.
pub fn run_json(file: &Path) -> Value {
    json_of(&run_analyze(&["-T", "json"], &[file]))
}

/// A temporary directory for capture files, removed when dropped.
pub struct Scratch {
    dir: TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: TempDir::new().expect("temp dir"),
        }
    }

    /// Writes `bytes` to `name` in the directory and returns its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).expect("write capture");
        path
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Writes `bytes` to a temporary capture file and analyzes it as JSON.
pub fn analyze(bytes: &[u8]) -> Value {
    let scratch = Scratch::new();
    run_json(&scratch.file("capture.pcap", bytes))
}

/// Runs `handshakes analyze ARGS… FILES…`.
pub fn run_analyze(args: &[&str], files: &[&Path]) -> Output {
    let mut all: Vec<&OsStr> = vec![OsStr::new("analyze")];
    all.extend(args.iter().map(OsStr::new));
    all.extend(files.iter().map(|f| f.as_os_str()));
    run(all)
}

/// Runs `handshakes analyze -q --html REPORT ARGS… FILE`, which must
/// succeed: what it prints (the table), and the HTML report.
pub fn analyze_html(file: &Path, args: &[&str]) -> (String, String) {
    let scratch = Scratch::new();
    let html = scratch.path("report.html");
    let mut all: Vec<&OsStr> = vec![OsStr::new("-q"), OsStr::new("--html"), html.as_os_str()];
    all.extend(args.iter().map(OsStr::new));
    let argv: Vec<&str> = all.iter().filter_map(|a| a.to_str()).collect();
    let out = run_analyze(&argv, &[file]);
    assert!(out.status.success(), "{}: {}", file.display(), stderr(&out));
    let page = std::fs::read_to_string(&html).expect("the HTML report");
    (stdout(&out), page)
}

/// Runs `handshakes analyze ARGS… FILE` on `bytes` written to a temporary file.
pub fn analyze_with(bytes: &[u8], args: &[&str]) -> Output {
    let scratch = Scratch::new();
    run_analyze(args, &[&scratch.file("capture.pcap", bytes)])
}

/// The value at a JSON pointer (`/tcp/handshake/connect`), which must exist.
pub fn at<'a>(v: &'a Value, pointer: &str) -> &'a Value {
    v.pointer(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in {v:#}"))
}

/// Connection `i` (0-based) of a JSON report.
pub fn conn(v: &Value, i: usize) -> &Value {
    at(v, &format!("/connections/{i}"))
}

/// Asserts that the number at `pointer` is `nanos` nanoseconds, within 1 ns.
pub fn assert_secs(v: &Value, pointer: &str, nanos: i64) {
    let got = at(v, pointer)
        .as_f64()
        .unwrap_or_else(|| panic!("{pointer} is not a number in {v:#}"));
    let want = nanos as f64 / 1e9;
    assert!(
        (got - want).abs() < 1e-9,
        "{pointer}: got {got}, want {want}"
    );
}

/// Asserts that the integer at `pointer` is `want`.
pub fn assert_u64(v: &Value, pointer: &str, want: u64) {
    assert_eq!(at(v, pointer).as_u64(), Some(want), "{pointer} in {v:#}");
}

/// Asserts that the string at `pointer` is `want`.
pub fn assert_str(v: &Value, pointer: &str, want: &str) {
    assert_eq!(at(v, pointer).as_str(), Some(want), "{pointer} in {v:#}");
}

/// Number of connections in a JSON report.
pub fn connections(v: &Value) -> usize {
    at(v, "/connections").as_array().expect("array").len()
}

/// Asserts that the handshake of connection `c` has exactly these timings
/// (ns) and that `start.at` is `start` ns after the first packet.
pub fn assert_handshake(c: &Value, syn_to_synack: i64, synack_to_ack: i64, start: i64) {
    assert_secs(c, "/tcp/handshake/syn_to_synack", syn_to_synack);
    assert_secs(c, "/tcp/handshake/synack_to_ack", synack_to_ack);
    assert_secs(c, "/tcp/handshake/connect", syn_to_synack + synack_to_ack);
    assert_secs(c, "/start/at", start);
    assert_eq!(at(c, "/tcp/handshake/complete"), &Value::Bool(true));
}
