//! Shared helpers for tests that call the library directly: running the
//! pipeline on a file, and what to do when something outside the crate is
//! missing (the peer corpus, tshark, libpcap, root): skip loudly, or fail
//! when the environment promises it is there (`HANDSHAKES_REQUIRE_ALL=1`,
//! set by CI).

use std::path::{Path, PathBuf};

use handshakes::source::file::FileSource;
use handshakes::{analyze, Config, ConnectionRecord, KeyLog, Summary};

/// The whole pipeline on one file: its summary and records in id order.
pub fn analyze_path(path: &Path) -> (Summary, Vec<ConnectionRecord>) {
    analyze_path_on(path, 0)
}

/// [`analyze_path`] on `threads` threads (0: one per core).
pub fn analyze_path_on(path: &Path, threads: usize) -> (Summary, Vec<ConnectionRecord>) {
    let mut source = FileSource::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut records = Vec::new();
    // As the binary does: the secrets a capture carries are used.
    let config = Config {
        threads,
        ..Config::default()
    }
    .with_secrets(source.secrets_at_head());
    let summary = analyze(&mut source, &config, &mut records).unwrap_or_else(|e| panic!("{e}"));
    records.sort_by_key(|r| r.id);
    (summary, records)
}

/// The key log at `path`, which must open, as `Config::keylog` takes it.
pub fn keylog(path: &Path) -> std::sync::Arc<KeyLog> {
    let log = KeyLog::open(&[path.to_path_buf()], false);
    std::sync::Arc::new(log.unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// The summary and the records as JSON values (to compare whole).
pub fn as_json(
    analysed: (Summary, Vec<ConnectionRecord>),
) -> (serde_json::Value, serde_json::Value) {
    (
        serde_json::to_value(analysed.0).expect("summary serialises"),
        serde_json::to_value(analysed.1).expect("records serialise"),
    )
}

/// Reports a skipped test on stderr; panics instead when
/// `HANDSHAKES_REQUIRE_ALL` is set, so CI cannot pass by skipping.
pub fn skip_or_fail(what: &str, why: &str) {
    let required = std::env::var("HANDSHAKES_REQUIRE_ALL").is_ok_and(|v| !v.is_empty() && v != "0");
    if required {
        panic!("{what} is required (HANDSHAKES_REQUIRE_ALL is set) but unavailable: {why}");
    }
    eprintln!();
    eprintln!("!!! SKIPPED: {what} unavailable: {why}");
    eprintln!("!!! (set HANDSHAKES_REQUIRE_ALL=1 to make this a failure)");
    eprintln!();
}

/// Whether tshark runs here; when it does not, the test says it skipped
/// (or fails, with `HANDSHAKES_REQUIRE_ALL`).
pub fn tshark_present() -> bool {
    let present = std::process::Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok();
    if !present {
        skip_or_fail("tshark", "not installed (apt-get install tshark)");
    }
    present
}

/// tshark's `fields` (tab-separated unless `options` say otherwise, a line
/// a packet) of the packets of `pcap` that match `filter`, with `options`
/// (`-o`, `-d`, `-E`) before them; `None` if tshark does not run or fails.
pub fn tshark_fields(
    pcap: &Path,
    options: &[String],
    filter: &str,
    fields: &[&str],
) -> Option<String> {
    let mut tshark = std::process::Command::new("tshark");
    tshark.args(["-n", "-r"]).arg(pcap).args(options);
    tshark.args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        tshark.args(["-e", f]);
    }
    let out = tshark.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The fields a per-stream oracle reads first (its indices 0–9): the
/// stream, the time, the ports, the IPv4 addresses and the SYN, ACK, FIN
/// and RST flags; its own follow.
pub const STREAM_FIELDS: [&str; 10] = [
    "tcp.stream",
    "frame.time_relative",
    "tcp.srcport",
    "tcp.dstport",
    "ip.src",
    "ip.dst",
    "tcp.flags.syn",
    "tcp.flags.ack",
    "tcp.flags.fin",
    "tcp.flags.reset",
];

/// [`tshark_fields`] of every TCP packet of `pcap`: [`STREAM_FIELDS`], then
/// `more`, several values of a field joined with `;`, TLS opened with
/// `keylog`, after `options`.
pub fn tshark_streams_fields(
    pcap: &Path,
    mut options: Vec<String>,
    keylog: Option<&Path>,
    more: &[&str],
) -> String {
    options.extend(["-E".to_owned(), "aggregator=;".to_owned()]);
    if let Some(k) = keylog {
        options.extend(["-o".to_owned(), format!("tls.keylog_file:{}", k.display())]);
    }
    let fields = [&STREAM_FIELDS[..], more].concat();
    tshark_fields(pcap, &options, "tcp", &fields)
        .unwrap_or_else(|| panic!("tshark fails on {}", pcap.display()))
}

/// Every capture in captures/ and the peer corpus (../shared/corpus), named
/// `captures/…` or `corpus/…`, in name order.
pub fn all_captures() -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("../shared/corpus");
    for (prefix, dir) in [("captures", root.join("captures")), ("corpus", corpus)] {
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p
                    .extension()
                    .is_some_and(|x| x == "pcap" || x == "pcapng" || x == "gz")
                {
                    let rel = p
                        .strip_prefix(&dir)
                        .map(|r| r.display().to_string())
                        .unwrap_or_default();
                    files.push((format!("{prefix}/{rel}"), p));
                }
            }
        }
    }
    files.sort();
    files
}
