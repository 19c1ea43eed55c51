//! Differential tests against the peer corpus in ../shared/corpus: every
//! capture's TCP connections compared with tshark 4.0's facts (connections per
//! 4-tuple, packets, SYN/SYN-ACK/ACK seen and their timestamps), Zeek's
//! conn.log (`conn_state`, `history`) and Arkime's `tcpSynAckValidated`, and
//! every capture read without error. Known, deliberate differences are listed
//! with their reason. The TLS, HTTP and fingerprint comparisons are in the
//! submodule, which shares the corpus loading and matching helpers here.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use handshakes::record::{AnomalyKind, ConnectionRecord};
use handshakes::source::file::FileSource;
use handshakes::{analyze, Config};

use crate::tools::{analyze_path as run, skip_or_fail};

mod application;

/// Captures whose tshark facts we knowingly do not reproduce, and why.
const TSHARK_EXCEPTIONS: &[(&str, &str)] = &[(
    "suricata-verify/tests/tcp-split-handshake-01-4whs/split-handshake-4whs.pcap",
    "split handshake: the SYN-ACK comes from the client; only server SYN-ACKs count",
)];

pub(crate) fn corpus_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("HANDSHAKES_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    };
    dir.join("expected.json").is_file().then_some(dir)
}

/// Fails listing every difference found from `peer`, if any.
fn assert_none_differ(peer: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "differences from {peer}:\n{}",
        failures.join("\n")
    );
}

/// tshark 4.0's TCP connections in a capture's expected facts, if it has them.
fn tshark_connections(entry: &Value) -> Option<&Vec<Value>> {
    entry
        .pointer("/facts/tshark_4_0/tcp_connections")
        .and_then(Value::as_array)
}

fn load_expected() -> Option<(PathBuf, Vec<Value>)> {
    let Some(dir) = corpus_dir() else {
        skip_or_fail(
            "peer corpus",
            "../shared/corpus/expected.json not found (set HANDSHAKES_CORPUS)",
        );
        return None;
    };
    let text =
        std::fs::read_to_string(dir.join("expected.json")).expect("expected.json is readable");
    let entries: Vec<Value> = serde_json::from_str(&text).expect("expected.json is JSON");
    Some((dir, entries))
}

/// tshark writes IPv6 endpoints without brackets.
fn plain(endpoint: &str) -> String {
    endpoint.replace(['[', ']'], "")
}

fn tuple(a: &str, b: &str) -> (String, String) {
    let (a, b) = (plain(a), plain(b));
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

fn close_to(expected: Option<f64>, got: Option<f64>) -> bool {
    match (expected, got) {
        (Some(e), Some(g)) => (e - g).abs() < 2e-6,
        (None, None) => true,
        _ => false,
    }
}

/// The rows of one Zeek log (`conn`, `ssl`, `http`) recorded for a capture.
fn zeek_rows<'a>(entry: &'a Value, log: &str) -> Vec<&'a Value> {
    entry
        .pointer("/facts/peer/items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|i| i["log"] == log)
        .filter_map(|i| i["rows"].as_array())
        .flatten()
        .collect()
}

/// Arkime's verdict on whether the handshake's ACK was valid, by client port.
fn arkime_validated(entry: &Value) -> HashMap<String, bool> {
    let mut out = HashMap::new();
    if let Some(sessions) = entry
        .pointer("/facts/peer/sessions")
        .and_then(Value::as_array)
    {
        for s in sessions {
            if let (Some(src), Some(v)) = (s["src"].as_str(), s["tcpSynAckValidated"].as_bool()) {
                out.insert(plain(src), v);
            }
        }
    }
    out
}

#[test]
fn tcp_connections_match_tshark() {
    let Some((dir, entries)) = load_expected() else {
        return;
    };
    let mut failures = Vec::new();
    let (mut files, mut connections, mut checks) = (0, 0, 0);
    for entry in &entries {
        let file = entry["file"].as_str().expect("file name");
        let Some(expected) = tshark_connections(entry) else {
            continue;
        };
        if TSHARK_EXCEPTIONS.iter().any(|(f, _)| *f == file) {
            continue;
        }
        files += 1;
        let (summary, records) = run(&dir.join(file));
        let validated = arkime_validated(entry);
        let mut ours: BTreeMap<(String, String), Vec<&ConnectionRecord>> = BTreeMap::new();
        for r in &records {
            ours.entry(tuple(&r.client, &r.server)).or_default().push(r);
        }
        let mut theirs: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
        for c in expected {
            let (Some(cl), Some(sv)) = (c["client"].as_str(), c["server"].as_str()) else {
                continue;
            };
            theirs.entry(tuple(cl, sv)).or_default().push(c);
        }
        if records.len() != expected.len() {
            failures.push(format!(
                "{file}: {} connections, tshark {}",
                records.len(),
                expected.len()
            ));
        }
        let mut missing_packets = 0u64;
        for (key, exp) in &theirs {
            let got = ours.get(key).map(Vec::as_slice).unwrap_or(&[]);
            if got.len() != exp.len() {
                failures.push(format!(
                    "{file} {key:?}: {} connections, tshark {}",
                    got.len(),
                    exp.len()
                ));
                continue;
            }
            for (e, g) in exp.iter().zip(got) {
                connections += 1;
                checks += 6;
                let hs = &g.tcp.handshake;
                let ours_packets = g.tcp.packets.total();
                let tshark_packets = e["packets"].as_u64().unwrap_or(0);
                if ours_packets > tshark_packets {
                    failures.push(format!(
                        "{file} {key:?}: {ours_packets} packets, tshark {tshark_packets}"
                    ));
                }
                missing_packets += tshark_packets.saturating_sub(ours_packets);
                if e["syn_seen"].as_bool() != Some(hs.syn.is_some()) {
                    failures.push(format!("{file} {key:?}: SYN seen {}", hs.syn.is_some()));
                }
                if e["synack_seen"].as_bool() != Some(hs.synack.is_some()) {
                    failures.push(format!(
                        "{file} {key:?}: SYN-ACK seen {}",
                        hs.synack.is_some()
                    ));
                }
                if e["syn_seen"].as_bool() == Some(true)
                    && e["client"].as_str().map(plain) != Some(plain(&g.client))
                {
                    failures.push(format!(
                        "{file} {key:?}: client {} but tshark {}",
                        g.client, e["client"]
                    ));
                }
                if !close_to(e["syn_ts"].as_f64(), hs.syn.map(|i| i.ts)) {
                    failures.push(format!(
                        "{file} {key:?}: syn {:?} vs {}",
                        hs.syn, e["syn_ts"]
                    ));
                }
                if !close_to(e["synack_ts"].as_f64(), hs.synack.map(|i| i.ts)) {
                    failures.push(format!(
                        "{file} {key:?}: synack {:?} vs {}",
                        hs.synack, e["synack_ts"]
                    ));
                }
                let ack_matches = close_to(e["ack_ts"].as_f64(), hs.ack.map(|i| i.ts));
                // tshark takes any ACK after the SYN-ACK; we require it to
                // acknowledge the SYN-ACK, as Arkime does.
                let arkime_says_invalid = validated.get(&plain(&g.client)) == Some(&false);
                let explained = hs.ack.is_none() && arkime_says_invalid;
                if !ack_matches && !explained {
                    failures.push(format!(
                        "{file} {key:?}: ack {:?} vs {}",
                        hs.ack, e["ack_ts"]
                    ));
                }
            }
        }
        // Packets after a connection was closed and reported are counted,
        // not attached: they must account for every packet tshark has more.
        let late = summary
            .anomalies
            .0
            .get(&AnomalyKind::LatePacket)
            .copied()
            .unwrap_or(0);
        if missing_packets != late {
            failures.push(format!(
                "{file}: {missing_packets} packets fewer than tshark, {late} counted late"
            ));
        }
    }
    eprintln!("corpus vs tshark: {files} captures, {connections} connections, {checks} checks, {} failures", failures.len());
    assert_none_differ("tshark", &failures);
    assert!(
        files >= 80 && connections >= 300,
        "the corpus comparison covered too little"
    );
}

#[test]
fn conn_state_and_history_match_zeek() {
    let Some((dir, entries)) = load_expected() else {
        return;
    };
    let mut compared = 0;
    let mut failures = Vec::new();
    for entry in &entries {
        let file = entry["file"].as_str().expect("file name");
        let rows: Vec<&Value> = zeek_rows(entry, "conn")
            .into_iter()
            .filter(|r| r["proto"] == "tcp" && r["conn_state"].is_string())
            .collect();
        if rows.is_empty() || TSHARK_EXCEPTIONS.iter().any(|(f, _)| *f == file) {
            continue;
        }
        let (_, records) = run(&dir.join(file));
        for row in rows {
            let conn = row["connection"].as_str().unwrap_or_default();
            let Some((client, server)) = conn.split_once(" -> ") else {
                continue;
            };
            let Some(r) = records
                .iter()
                .find(|r| plain(&r.client) == client && plain(&r.server) == server)
            else {
                failures.push(format!("{file}: no connection {conn}"));
                continue;
            };
            compared += 1;
            if row["conn_state"] != *r.tcp.state || row["history"] != r.tcp.history.as_str() {
                failures.push(format!(
                    "{file} {conn}: {} {} but Zeek {} {}",
                    r.tcp.state, r.tcp.history, row["conn_state"], row["history"]
                ));
            }
        }
    }
    eprintln!("corpus vs zeek conn.log: {compared} connections");
    assert_none_differ("Zeek", &failures);
    assert!(compared >= 15, "compared only {compared} Zeek rows");
}

#[test]
fn every_corpus_capture_is_read_without_error() {
    let Some((dir, entries)) = load_expected() else {
        return;
    };
    for entry in &entries {
        let file = entry["file"].as_str().expect("file name");
        let expected_packets = entry
            .pointer("/facts/format/packets")
            .and_then(Value::as_u64);
        let path = dir.join(file);
        match FileSource::open(&path) {
            Ok(mut source) => {
                let mut records = Vec::new();
                let summary = analyze(&mut source, &Config::default(), &mut records)
                    .unwrap_or_else(|e| panic!("{file}: {e}"));
                if let (Some(n), false) = (expected_packets, summary.truncated) {
                    assert_eq!(summary.packets.total, n, "{file}: packets read vs capinfos");
                }
            }
            // Files that are not captures at all must say so, not panic.
            Err(e) => eprintln!("{file}: {e}"),
        }
    }
}

/// Linux cooked captures from every interface: PcapPlusPlus's `sll.pcap`
/// (`tcpdump -i any`, SLL v1) has ten frames from the loopback interface
/// (hardware type 772: DNS to the local resolver). They are IP, as tshark
/// reads them — they were `truncated_link` while only Ethernet's hardware
/// type was read.
/// Three Zeek traces whose peers send a last ACK or window update after the
/// close is over (each FIN acknowledged): 0.2, 15 and 30 ms later. Those
/// packets belong to their connection (as tshark counts them), not to
/// `late_packet` — which a connection finalised at its last ACK gave.
#[test]
fn packets_after_a_finished_close_stay_with_their_connection() {
    let Some(dir) = corpus_dir() else {
        skip_or_fail("peer corpus", "../shared/corpus not found");
        return;
    };
    for (name, packets) in [
        ("tls13draft16-chrome55.0.2879.0-canary-aborted.pcap", 24),
        ("tls1_1.pcap", 23),
        ("tls-1.2-stream-keylog.pcap", 237),
    ] {
        let path = dir.join("zeek/Traces/tls").join(name);
        let mut source = FileSource::open(&path).expect("trace opens");
        let mut records = Vec::new();
        let summary = analyze(&mut source, &Config::default(), &mut records).expect("reads");
        assert!(
            summary.anomalies.0.is_empty(),
            "{name}: {:?}",
            summary.anomalies
        );
        let counted: u64 = records.iter().map(|r| r.tcp.packets.total()).sum();
        assert_eq!((summary.packets.tcp, counted), (packets, packets), "{name}");
    }
}

#[test]
fn cooked_frames_from_the_loopback_interface_are_ip() {
    let Some(dir) = corpus_dir() else {
        skip_or_fail("peer corpus", "../shared/corpus not found");
        return;
    };
    let path = dir.join("pcapplusplus/Tests/Pcap++Test/PcapExamples/sll.pcap");
    let mut source = FileSource::open(&path).expect("sll.pcap opens");
    let mut records = Vec::new();
    let summary = analyze(&mut source, &Config::default(), &mut records).expect("reads");
    assert_eq!(summary.packets.total, 518, "{path:?}");
    assert!(summary.anomalies.0.is_empty(), "{:?}", summary.anomalies);
    assert_eq!(
        (summary.packets.tcp, summary.packets.skipped),
        (483, 35),
        "TCP, and the DNS and other frames skipped as not TCP"
    );
}
