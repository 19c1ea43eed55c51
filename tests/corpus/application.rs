//! The peer corpus above TCP: TLS handshakes against tshark and Zeek's
//! ssl.log, HTTP request counts against tshark, and JA3, JA3S and JA4
//! fingerprints against FoxIO's ja4 and Arkime.

use super::*;

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
        let Some(expected) = tshark_connections(entry) else {
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
    assert_none_differ("tshark", &failures);
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
                (
                    "cipher",
                    dash(&row["cipher"]),
                    tls.cipher.as_deref().map(str::to_string),
                ),
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
    assert_none_differ("Zeek", &failures);
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
        let Some(expected) = tshark_connections(entry) else {
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
    assert_none_differ("tshark", &failures);
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
                "ja4" => t.ja4.as_deref().map(str::to_string),
                "ja3" => t.ja3.as_deref().map(str::to_string),
                _ => t.ja3s.as_deref().map(str::to_string),
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
    assert_none_differ("the peers' fingerprints", &failures);
    assert!(compared >= 100, "compared only {compared} fingerprints");
}
