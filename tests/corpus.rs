//! Differential tests against the peer corpus in ../shared/corpus: every
//! capture's TCP connections compared with tshark 4.0's facts (connections per
//! 4-tuple, packets, SYN/SYN-ACK/ACK seen and their timestamps), Zeek's
//! conn.log (`conn_state`, `history`) and Arkime's `tcpSynAckValidated`.
//! Known, deliberate differences are listed with their reason.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use handshakes::record::{AnomalyKind, ConnectionRecord};
use handshakes::source::file::FileSource;
use handshakes::{analyze, Config};

use crate::tools::{analyze_path as run, skip_or_fail};

/// Captures whose tshark facts we knowingly do not reproduce, and why.
const TSHARK_EXCEPTIONS: &[(&str, &str)] = &[(
    "suricata-verify/tests/tcp-split-handshake-01-4whs/split-handshake-4whs.pcap",
    "split handshake: the SYN-ACK comes from the client; only server SYN-ACKs count",
)];

fn corpus_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("HANDSHAKES_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
    };
    dir.join("expected.json").is_file().then_some(dir)
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
        let Some(expected) = entry
            .pointer("/facts/tshark_4_0/tcp_connections")
            .and_then(Value::as_array)
        else {
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
    assert!(
        failures.is_empty(),
        "differences from tshark:\n{}",
        failures.join("\n")
    );
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
            if row["conn_state"] != r.tcp.state.as_str() || row["history"] != r.tcp.history.as_str()
            {
                failures.push(format!(
                    "{file} {conn}: {} {} but Zeek {} {}",
                    r.tcp.state, r.tcp.history, row["conn_state"], row["history"]
                ));
            }
        }
    }
    eprintln!("corpus vs zeek conn.log: {compared} connections");
    assert!(
        failures.is_empty(),
        "differences from Zeek:\n{}",
        failures.join("\n")
    );
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

/// tshark's and Zeek's version spelling for ours.
fn peer_version(ours: &str) -> String {
    if let Some(draft) = ours.strip_prefix("TLS 1.3 draft ") {
        return format!("TLSv1.3-draft{draft}");
    }
    match ours {
        "TLS 1.3" => "TLSv1.3",
        "TLS 1.2" => "TLSv1.2",
        "TLS 1.1" => "TLSv1.1",
        "TLS 1.0" => "TLSv1.0",
        "SSL 3.0" => "SSLv3",
        "SSL 2.0" => "SSLv2",
        "TLS 1.3 (Fizz)" => "0xfb1a",
        other => other,
    }
    .to_string()
}

#[test]
fn tls_handshakes_match_tshark() {
    let Some((dir, entries)) = load_expected() else {
        return;
    };
    let (mut checks, mut failures) = (0, Vec::new());
    for entry in &entries {
        let file = entry["file"].as_str().expect("file name");
        let Some(expected) = entry
            .pointer("/facts/tshark_4_0/tcp_connections")
            .and_then(Value::as_array)
        else {
            continue;
        };
        if !expected.iter().any(|c| c.get("tls").is_some()) {
            continue;
        }
        let (_, records) = run(&dir.join(file));
        for (key, c, ours) in pair_up(expected, &records) {
            let Some(x) = c.get("tls") else {
                continue;
            };
            let Some(tls) = ours.and_then(|r| r.tls.as_ref()) else {
                failures.push(format!("{file} {key:?}: no TLS section"));
                continue;
            };
            let mut check = |name: &str, expected: Value, got: Value| {
                checks += 1;
                if expected != got {
                    failures.push(format!(
                        "{file} {key:?} {name}: tshark {expected}, ours {got}"
                    ));
                }
            };
            if let Some(v) = x.get("version") {
                check(
                    "version",
                    v.clone(),
                    tls.version.as_deref().map(peer_version).into(),
                );
            }
            if let Some(v) = x.get("cipher") {
                check("cipher", v.clone(), tls.cipher.clone().into());
            }
            if let Some(v) = x.get("sni") {
                check("sni", v.clone(), tls.sni.clone().into());
            }
            if let Some(v) = x.get("alpn_offered") {
                check("alpn_offered", v.clone(), tls.alpn_offered.clone().into());
            }
            if let Some(v) = x.get("alpn_selected_in_server_hello") {
                check("alpn", v.clone(), tls.alpn.clone().into());
            }
            if let Some(v) = x.get("resumed") {
                check("resumed", v.clone(), tls.resumed.into());
            }
            if let Some(v) = x.get("hello_retry_request") {
                check("hello_retry", v.clone(), tls.hello_retry.into());
            }
            for (name, field, ours) in [
                ("client_hello", "client_hello_ts", tls.client_hello),
                ("server_hello", "server_hello_ts", tls.server_hello),
            ] {
                if let Some(v) = x.get(field).and_then(Value::as_f64) {
                    check(
                        name,
                        true.into(),
                        close_to(Some(v), ours.map(|i| i.ts)).into(),
                    );
                }
            }
        }
    }
    eprintln!(
        "corpus TLS vs tshark: {checks} checks, {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "differences from tshark:\n{}",
        failures.join("\n")
    );
    assert!(checks >= 900, "only {checks} TLS facts compared");
}

#[test]
fn tls_handshakes_match_zeek_ssl_log() {
    let Some((dir, entries)) = load_expected() else {
        return;
    };
    let (mut compared, mut failures) = (0, Vec::new());
    for entry in &entries {
        let file = entry["file"].as_str().expect("file name");
        let rows = zeek_rows(entry, "ssl");
        // QUIC is UDP: out of scope.
        if rows.is_empty() || file.contains("/quic/") {
            continue;
        }
        let (_, records) = run(&dir.join(file));
        for row in rows {
            let conn = row["connection"].as_str().unwrap_or_default();
            let Some((client, server)) = conn.split_once(" -> ") else {
                continue;
            };
            let tls = records
                .iter()
                .find(|r| plain(&r.client) == client && plain(&r.server) == server)
                .and_then(|r| r.tls.as_ref());
            let Some(tls) = tls else {
                failures.push(format!("{file}: no TLS on {conn}"));
                continue;
            };
            compared += 1;
            let dash = |v: &Value| v.as_str().filter(|s| *s != "-").map(str::to_string);
            let zeek_version = dash(&row["version"]).map(|v| match v.as_str() {
                "TLSv10" => "TLSv1.0".to_string(),
                "TLSv11" => "TLSv1.1".to_string(),
                "TLSv12" => "TLSv1.2".to_string(),
                "TLSv13" => "TLSv1.3".to_string(),
                _ => v,
            });
            let facts = [
                (
                    "version",
                    zeek_version,
                    tls.version.as_deref().map(peer_version),
                ),
                ("cipher", dash(&row["cipher"]), tls.cipher.clone()),
                ("server_name", dash(&row["server_name"]), tls.sni.clone()),
                (
                    "resumed",
                    Some((row["resumed"] == "T").to_string()),
                    Some(tls.resumed.to_string()),
                ),
                (
                    "established",
                    Some((row["established"] == "T").to_string()),
                    Some((tls.outcome == handshakes::record::TlsOutcome::Complete).to_string()),
                ),
            ];
            for (name, zeek, ours) in facts {
                if zeek != ours {
                    failures.push(format!(
                        "{file} {conn} {name}: Zeek {zeek:?}, ours {ours:?}"
                    ));
                }
            }
        }
    }
    eprintln!("corpus TLS vs zeek ssl.log: {compared} connections");
    assert!(
        failures.is_empty(),
        "differences from Zeek:\n{}",
        failures.join("\n")
    );
    assert!(compared >= 15, "compared only {compared} Zeek ssl.log rows");
}

/// Each tshark connection with ours: the n-th connection on a 4-tuple in
/// tshark's list is the n-th on that tuple in ours (port reuse).
fn pair_up<'a>(
    expected: &'a [Value],
    records: &'a [ConnectionRecord],
) -> Vec<((String, String), &'a Value, Option<&'a ConnectionRecord>)> {
    let mut ours: BTreeMap<(String, String), Vec<&ConnectionRecord>> = BTreeMap::new();
    for r in records {
        ours.entry(tuple(&r.client, &r.server)).or_default().push(r);
    }
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    expected
        .iter()
        .map(|c| {
            let key = tuple(
                c["client"].as_str().unwrap_or(""),
                c["server"].as_str().unwrap_or(""),
            );
            let n = seen.entry(key.clone()).or_insert(0);
            let rec = ours.get(&key).and_then(|v| v.get(*n)).copied();
            *n += 1;
            (key, c, rec)
        })
        .collect()
}

/// Our record for the connection between `client` and `server` (either way round).
fn find<'a>(
    records: &'a [ConnectionRecord],
    client: &str,
    server: &str,
) -> Option<&'a ConnectionRecord> {
    let key = tuple(client, server);
    records.iter().find(|r| tuple(&r.client, &r.server) == key)
}

#[test]
fn http_requests_match_tshark() {
    let Some((dir, entries)) = load_expected() else {
        return;
    };
    let (mut compared, mut failures) = (0, Vec::new());
    for entry in &entries {
        let file = entry["file"].as_str().expect("file name");
        let Some(expected) = entry
            .pointer("/facts/tshark_4_0/tcp_connections")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let counted = |c: &&Value| {
            c.get("http_request_count").is_some() || c.get("http2_request_methods").is_some()
        };
        if !expected.iter().any(|c| counted(&c))
            || TSHARK_EXCEPTIONS.iter().any(|(f, _)| *f == file)
        {
            continue;
        }
        let (_, records) = run(&dir.join(file));
        for (key, c, ours) in pair_up(expected, &records) {
            if !counted(&c) {
                continue;
            }
            let Some(http) = ours.map(|r| &r.http) else {
                failures.push(format!("{file} {key:?}: connection missing"));
                continue;
            };
            if http.estimated {
                // Inside TLS (tshark had the keys): our count is an estimate, checked elsewhere.
                continue;
            }
            compared += 1;
            let h2 = c["http2_request_methods"].as_array().map_or(0, Vec::len) as u64;
            let requests = c["http_request_count"].as_u64().unwrap_or(0) + h2;
            if http.requests != requests {
                failures.push(format!(
                    "{file} {key:?}: {} requests, tshark {requests}",
                    http.requests
                ));
            }
            if let Some(responses) = c["http_response_count"].as_u64() {
                if http.responses != responses {
                    failures.push(format!(
                        "{file} {key:?}: {} responses, tshark {responses}",
                        http.responses
                    ));
                }
            }
        }
    }
    eprintln!("corpus HTTP vs tshark: {compared} connections");
    assert!(
        failures.is_empty(),
        "differences from tshark:\n{}",
        failures.join("\n")
    );
    assert!(compared >= 90, "compared only {compared} connections");
}

/// FoxIO's tools print `99` for a non-alphanumeric ALPN; the JA4 specification
/// (which we follow, as Suricata does) gives the hex digits.
fn ja4_equivalent(ours: &str, reference: &str) -> bool {
    ours == reference
        || (reference.get(8..10) == Some("99")
            && ours.get(..8) == reference.get(..8)
            && ours.get(10..) == reference.get(10..))
}

#[test]
fn fingerprints_match_peers_end_to_end() {
    let Some((dir, entries)) = load_expected() else {
        return;
    };
    let (mut compared, mut failures) = (0, Vec::new());
    for entry in &entries {
        let file = entry["file"].as_str().expect("file name");
        let peer = &entry["facts"]["peer"];
        // FoxIO's ja4 output per TCP stream, and Arkime's sessions.
        let mut refs: Vec<(String, String, &str, String)> = Vec::new();
        for s in peer["streams"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["transport"] == "tcp")
        {
            if let (Some(c), Some(sv), Some(ja4)) = (
                s["client"].as_str(),
                s["server"].as_str(),
                s["ja4"].as_str(),
            ) {
                refs.push((c.into(), sv.into(), "ja4", ja4.into()));
            }
        }
        for s in peer["sessions"].as_array().into_iter().flatten() {
            let (Some(c), Some(sv)) = (s["src"].as_str(), s["dst"].as_str()) else {
                continue;
            };
            for kind in ["ja4", "ja3", "ja3s"] {
                for v in s["tls"][kind]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    refs.push((c.into(), sv.into(), kind, v.into()));
                }
            }
        }
        if refs.is_empty() || file.contains("quic") {
            continue;
        }
        let (_, records) = run(&dir.join(file));
        for (client, server, kind, reference) in refs {
            let tls = find(&records, &client, &server).and_then(|r| r.tls.as_ref());
            let ours = tls.and_then(|t| match kind {
                "ja4" => t.ja4.clone(),
                "ja3" => t.ja3.clone(),
                _ => t.ja3s.clone(),
            });
            compared += 1;
            let ok = ours.as_deref().is_some_and(|o| {
                if kind == "ja4" {
                    ja4_equivalent(o, &reference)
                } else {
                    o == reference
                }
            });
            if !ok {
                failures.push(format!(
                    "{file} {client} {kind}: ours {ours:?}, reference {reference}"
                ));
            }
        }
    }
    eprintln!("corpus fingerprints end to end: {compared} compared");
    assert!(
        failures.is_empty(),
        "fingerprint differences:\n{}",
        failures.join("\n")
    );
    assert!(compared >= 100, "compared only {compared} fingerprints");
}
