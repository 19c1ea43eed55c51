//! `--keylog` against tshark decrypting the same records with the same
//! key log: the requests (methods, targets, statuses) and the handshake
//! messages it reads, connection by connection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{analyze_with, corpus, recorded, RECORDED};
use crate::tools::tshark_present;

/// tshark's `fields` of the packets that match `filter`, `|`-separated,
/// every occurrence, decrypting `capture` with `keylog` (TLS on `port`).
fn tshark_fields(
    capture: &Path,
    keylog: &Path,
    port: &str,
    filter: &str,
    fields: &[&str],
) -> Option<String> {
    let options = [
        "-o",
        &format!("tls.keylog_file:{}", keylog.display()),
        "-o",
        "tcp.reassemble_out_of_order:TRUE",
        "-d",
        &format!("tcp.port=={port},tls"),
        "-E",
        "separator=|",
        "-E",
        "occurrence=a",
    ]
    .map(str::to_owned);
    crate::tools::tshark_fields(capture, &options, filter, fields)
}

/// Per `tcp.stream`, the request methods and final response statuses.
type Requests = BTreeMap<usize, (Vec<String>, Vec<u16>)>;

/// tshark's decrypted requests per `tcp.stream`: the `:method` or request
/// method of each, and the response statuses.
pub(super) fn tshark_requests(capture: &Path, keylog: &Path, port: &str) -> Option<Requests> {
    let filter = "http.request || http.response || http2.headers.method || http2.headers.status";
    let fields = [
        "tcp.stream",
        "http.request.method",
        "http2.headers.method",
        "http.response.code",
        "http2.headers.status",
    ];
    let out = tshark_fields(capture, keylog, port, filter, &fields)?;
    let mut streams = Requests::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let Some(Ok(stream)) = f.first().map(|s| s.parse::<usize>()) else {
            continue;
        };
        let entry = streams.entry(stream).or_default();
        for cell in [f.get(1), f.get(2)].into_iter().flatten() {
            entry
                .0
                .extend(cell.split(',').filter(|m| !m.is_empty()).map(String::from));
        }
        for cell in [f.get(3), f.get(4)].into_iter().flatten() {
            entry.1.extend(
                cell.split(',')
                    .filter_map(|s| s.parse::<u16>().ok())
                    .filter(|s| *s >= 200),
            );
        }
    }
    Some(streams)
}

/// Captures whose responses tshark does not report: `openssl s_server
/// -WWW` answers HTTP/1.0 without a Content-Length, so the body runs to
/// the close, and tshark's HTTP dissector never completes such a response
/// inside TLS (it shows the request only). We read the status line.
const TSHARK_NO_RESPONSE: [&str; 2] = ["tls12-openssl-resumption", "tls13-openssl-resumption"];

#[test]
fn tshark_decrypting_with_the_same_key_log_reads_the_same_requests() {
    if !tshark_present() {
        return;
    }
    let mut cases: Vec<(String, PathBuf, PathBuf)> = RECORDED
        .iter()
        .map(|(name, _)| {
            let (capture, keylog) = recorded(name);
            (name.to_string(), capture, keylog)
        })
        .collect();
    // Over a lossy link (section ar): other targets than RECORDED's.
    for name in ["tls-lossy-h2-20", "tls-lossy-h1-20"] {
        let (capture, keylog) = recorded(name);
        cases.push((name.to_string(), capture, keylog));
    }
    let dir = corpus();
    for name in ["tls12-decryption", "tls-1.2-stream-keylog"] {
        let capture = dir.join(format!("Traces/tls/{name}.pcap"));
        if capture.is_file() {
            let keylog = dir.join(format!("derived-keylogs/{name}.nss-keylog.txt"));
            cases.push((name.to_string(), capture, keylog));
        }
    }
    for (name, capture, keylog) in cases {
        let records = analyze_with(&capture, &keylog, 1);
        let port = records[0].server.rsplit(':').next().unwrap().to_string();
        let theirs = tshark_requests(&capture, &keylog, &port).expect("tshark runs");
        assert_eq!(
            theirs.len(),
            records.len(),
            "{name}: connections with requests"
        );
        for (r, (stream, (methods, statuses))) in records.iter().zip(&theirs) {
            let ours: Vec<String> = r
                .http
                .list
                .iter()
                .filter_map(|q| q.method.clone())
                .collect();
            assert_eq!(&ours, methods, "{name}: tcp.stream {stream}");
            assert_eq!(
                r.http.requests,
                methods.len() as u64,
                "{name}: tcp.stream {stream}"
            );
            let ours: Vec<u16> = r.http.list.iter().filter_map(|q| q.status).collect();
            if TSHARK_NO_RESPONSE.contains(&name.as_str()) {
                // The exception stays true, or fails to be removed.
                assert!(
                    statuses.is_empty(),
                    "{name}: tshark now reports {statuses:?}"
                );
                assert_eq!(ours, [200], "{name}");
            } else {
                assert_eq!(&ours, statuses, "{name}: tcp.stream {stream}");
            }
        }
    }
}

/// tshark's handshake message types per `tcp.stream` and sender port, and
/// the alerts each side sent, decrypting with `keylog`.
type Handshakes = BTreeMap<(usize, u16), (Vec<u8>, usize)>;

pub(super) fn tshark_handshakes(capture: &Path, keylog: &Path, port: &str) -> Option<Handshakes> {
    let filter = "tls.handshake.type || tls.alert_message";
    let fields = [
        "tcp.stream",
        "tcp.srcport",
        "tls.handshake.type",
        "tls.alert_message.desc",
    ];
    let out = tshark_fields(capture, keylog, port, filter, &fields)?;
    let mut found = Handshakes::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let (Some(Ok(stream)), Some(Ok(port))) = (
            f.first().map(|s| s.parse::<usize>()),
            f.get(1).map(|s| s.parse::<u16>()),
        ) else {
            continue;
        };
        let entry = found.entry((stream, port)).or_default();
        let types = f.get(2).copied().unwrap_or_default();
        entry
            .0
            .extend(types.split(',').filter_map(|t| t.parse::<u8>().ok()));
        let alerts = f.get(3).copied().unwrap_or_default();
        entry.1 += alerts.split(',').filter(|a| !a.is_empty()).count();
    }
    Some(found)
}

#[test]
fn with_the_key_log_the_handshake_reads_as_tshark_reads_it() {
    if !tshark_present() {
        return;
    }
    for (name, _) in RECORDED {
        let (capture, keylog) = recorded(name);
        let records = analyze_with(&capture, &keylog, 1);
        let port = records[0].server.rsplit(':').next().unwrap().to_string();
        let theirs = tshark_handshakes(&capture, &keylog, &port).expect("tshark runs");
        for (stream, r) in records.iter().enumerate() {
            let tls = r.tls.as_ref().unwrap();
            for (client, end) in [(true, &r.client), (false, &r.server)] {
                let port: u16 = end.rsplit(':').next().unwrap().parse().unwrap();
                let (types, alerts) = theirs.get(&(stream, port)).cloned().unwrap_or_default();
                let ours = crate::tshark::our_types(r, client, true);
                assert_eq!(ours, types, "{name} #{} client {client}", r.id);
                let side = if client { "client" } else { "server" };
                let our_alerts = tls
                    .events
                    .iter()
                    .filter(|e| e.name == "alert" && e.side.as_str() == side);
                assert_eq!(
                    our_alerts.count(),
                    alerts,
                    "{name} #{} {side}'s alerts",
                    r.id
                );
            }
            // What TLS 1.3 hides without keys is known with them.
            if tls.version.as_deref() == Some("TLS 1.3") {
                let offered = !tls.alpn_offered.is_empty();
                assert_eq!(
                    tls.alpn.is_some(),
                    offered,
                    "{name}: ALPN from EncryptedExtensions"
                );
                assert_eq!(tls.early_data.accepted, Some(false), "{name}");
                assert_eq!(tls.client_certificate_requested, Some(false), "{name}");
            }
        }
        // The handshake's timing is the same with keys as without.
        let (_, without) = crate::tools::analyze_path_on(&capture, 1);
        for (a, b) in records.iter().zip(&without) {
            let (a, b) = (a.tls.as_ref().unwrap(), b.tls.as_ref().unwrap());
            assert_eq!(
                (a.complete, a.handshake, a.outcome),
                (b.complete, b.handshake, b.outcome),
                "{name}"
            );
        }
    }
    let (capture, keylog) = recorded("h2-curl-10");
    let r = &analyze_with(&capture, &keylog, 1)[0];
    assert_eq!(r.tls.as_ref().unwrap().alpn.as_deref(), Some("h2"));
}
