//! `analyze -f` (the `live` feature's libpcap compiles it): a file read
//! through a BPF filter gives the connections that the same file filtered
//! by tcpdump (`tcpdump -r FILE -w OUT EXPRESSION`) gives read whole, on
//! every link type the corpus has; frames of a link type the expression
//! does not compile for are left out with a warning; a bad expression is
//! one line naming `-f`. Needs no privileges; tcpdump is the oracle (its
//! absence is a loud skip, a failure under `HANDSHAKES_REQUIRE_ALL`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{json_of, run, run_analyze, stderr, stdout, Scratch};
use crate::tools::skip_or_fail;

/// A capture in captures/ (`captures/…`) or the peer corpus (`corpus/…`);
/// `None` when the corpus is not beside the project.
fn capture(name: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = match name.strip_prefix("corpus/") {
        Some(rest) => root.join("../shared/corpus").join(rest),
        None => root.join(name),
    };
    path.exists().then_some(path)
}

fn tcpdump_present() -> bool {
    let present = Command::new("tcpdump").arg("--version").output().is_ok();
    if !present {
        skip_or_fail("tcpdump", "not installed (apt-get install tcpdump)");
    }
    present
}

/// `v` without the `at` offsets (from the capture's first frame, which a
/// filter may leave out, where tcpdump's file starts with the first kept).
fn without_offsets(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("at");
            map.values_mut().for_each(without_offsets);
        }
        Value::Array(items) => items.iter_mut().for_each(without_offsets),
        _ => {}
    }
}

/// The connections (TCP, then QUIC) of an analysis as JSON, offsets
/// dropped; and the frames it read, less those filtered out.
fn connections(v: &Value) -> (Value, u64) {
    let mut both = Value::Array(vec![
        v["connections"].clone(),
        v["summary"]["quic"]["list"].clone(),
    ]);
    without_offsets(&mut both);
    let packets = &v["summary"]["packets"];
    let kept =
        packets["total"].as_u64().unwrap_or(0) - packets["filtered_out"].as_u64().unwrap_or(0);
    (both, kept)
}

#[test]
fn a_filtered_file_reads_as_tcpdumps_filtered_copy_of_it() {
    if !tcpdump_present() {
        return;
    }
    let cases = [
        // The handshakes and closes only: connections without their data.
        (
            "captures/tls13-curl-keepalive-5.pcap",
            "tcp[tcpflags] & (tcp-syn|tcp-fin|tcp-rst) != 0",
        ),
        (
            "captures/http-curl-5-new-connections.pcap",
            "src port 18080",
        ),
        // QUIC's long-header datagrams only.
        ("captures/quic-aioquic-h3-lossy.pcap", "udp[8] & 0x80 != 0"),
        ("captures/tunnel-vxlan-http.pcap", "udp port 4789"),
        // Other link types: BSD loopback, raw IP, Linux cooked v2 and v1.
        (
            "corpus/suricata-verify/tests/http-ipv6/input.pcap",
            "ip6 and tcp",
        ),
        (
            "corpus/suricata-verify/tests/tls-alpn-log-detect-02/input.pcap",
            "tcp port 443",
        ),
        (
            "corpus/suricata-verify/tests/decode-sll2-02/input.pcap",
            "tcp",
        ),
        (
            "corpus/pcapplusplus/Tests/Pcap++Test/PcapExamples/sll.pcap",
            "udp port 53",
        ),
        // Raw IPv6 (link type 229).
        (
            "corpus/pcapplusplus/Tests/Pcap++Test/PcapExamples/linktype_ipv6.pcap",
            "ip6",
        ),
    ];
    let scratch = Scratch::new();
    let mut checked = 0;
    for (n, (name, expression)) in cases.iter().enumerate() {
        let Some(path) = capture(name) else {
            skip_or_fail("the peer corpus", &format!("{name} is not there"));
            continue;
        };
        let copy = scratch.path(&format!("filtered-{n}.pcap"));
        let out = Command::new("tcpdump")
            .args(["--time-stamp-precision", "nano", "-r"])
            .arg(&path)
            .arg("-w")
            .arg(&copy)
            .arg(expression)
            .output()
            .expect("tcpdump runs");
        assert!(out.status.success(), "tcpdump on {name}: {}", stderr(&out));
        let args = ["-q", "-j", "1", "-T", "json"];
        let whole = json_of(&run_analyze(&args, &[&copy]));
        let filtered = json_of(&run_analyze(
            &[&args[..], &["-f", expression]].concat(),
            &[&path],
        ));
        let (want, want_frames) = connections(&whole);
        let (got, got_frames) = connections(&filtered);
        assert_eq!(
            got_frames, want_frames,
            "{name} -f '{expression}': frames kept"
        );
        assert!(want_frames > 0, "{name} -f '{expression}' keeps nothing");
        assert_eq!(got, want, "{name} -f '{expression}'");
        // Each shard compiles its own programs: the same on two threads.
        let two = run_analyze(&["-q", "-j", "2", "-T", "json", "-f", expression], &[&path]);
        assert_eq!(json_of(&two), filtered, "{name} -f '{expression}' -j 2");
        checked += 1;
    }
    assert!(checked >= 4, "{checked} cases checked");
}

#[test]
fn frames_of_a_link_type_the_filter_cannot_compile_for_are_left_out_with_a_warning() {
    // `ether host` means nothing on raw IP frames; libpcap filters no
    // netfilter log frames at all (tcpdump refuses to read them with one).
    let cases = [
        (
            "corpus/suricata-verify/tests/tls-alpn-log-detect-02/input.pcap",
            "ether host 02:00:00:00:00:01",
            "RAW (IP)",
        ),
        (
            "corpus/zeek/Traces/nflog-http.pcap",
            "ip",
            "NFLOG (Linux netfilter log)",
        ),
    ];
    for (name, expression, link) in cases {
        let Some(path) = capture(name) else {
            skip_or_fail("the peer corpus", &format!("{name} is not there"));
            continue;
        };
        let v = json_of(&run_analyze(
            &["-q", "-T", "json", "-f", expression],
            &[&path],
        ));
        let packets = &v["summary"]["packets"];
        assert_eq!(packets["filtered_out"], packets["total"], "{name}");
        assert!(packets["total"].as_u64() > Some(0), "{name}");
        assert_eq!(v["connections"], Value::Array(Vec::new()), "{name}");
        let warnings = v["summary"]["warnings"].to_string();
        assert!(
            warnings.contains(&format!(
                "does not compile for the link type of {} frames ({link})",
                packets["total"]
            )),
            "{name}: {warnings}"
        );
    }
}

/// `compare` and `timeline` read through `-f` as `analyze` does: the same
/// summary (naming the filter), the same connections drawn.
#[test]
fn compare_and_timeline_read_through_the_filter_as_analyze_does() {
    let path = capture("captures/http-curl-5-new-connections.pcap").expect("a capture of ours");
    let file = path.to_str().expect("UTF-8 path");
    let expression = "tcp port 39936 or tcp port 39950";
    let analyzed = json_of(&run_analyze(
        &["-q", "-T", "json", "-f", expression],
        &[&path],
    ));
    assert_eq!(analyzed["summary"]["connections"], 2);
    assert_eq!(analyzed["summary"]["selection"]["filter"], expression);
    let compared = json_of(&run([
        "compare", "-q", "-T", "json", "-f", expression, file, file,
    ]));
    assert_eq!(compared["a"]["summary"], analyzed["summary"]);
    assert_eq!(compared["b"]["summary"], analyzed["summary"]);
    let drawn = stdout(&run([
        "timeline", "-q", "--width", "120", "-f", expression, file,
    ]));
    let header = drawn.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("2/2 connections")
            && header.ends_with(&format!("only -f '{expression}'")),
        "{drawn}"
    );
    let out = run(["compare", "-f", "tcp port 80 or", file, file]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("handshakes: -f 'tcp port 80 or': "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_filter_libpcap_cannot_parse_is_one_line_naming_f() {
    let path = capture("captures/http-curl-5-keepalive.pcap").expect("a capture of ours");
    let out = run_analyze(&["-f", "tcp port 80 or"], &[&path]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("handshakes: -f 'tcp port 80 or': "),
        "{err}"
    );
}
