//! tshark as a live differential oracle: for every capture in captures/ and
//! in ../shared/corpus, run tshark and compare, connection by connection
//! (tshark's `tcp.stream` order is ours; inside a tunnel, the innermost
//! addresses), the number of TCP connections, the
//! SYN / SYN-ACK / ACK times, the sequence of plaintext TLS handshake message
//! types each way (and the sealed ones where the capture carries its
//! secrets), SNI, negotiated version and cipher, the HTTP/1 request
//! count on cleartext, and the `:method` and `:path` of every h2c request
//! and the final `:status` values of its responses (prior knowledge;
//! HPACK-decoded on both sides). Every difference fails
//! unless it is listed, with its
//! reason, in tests/tshark-known-differences.toml — and a listed difference
//! that no longer occurs fails too, so the list stays true.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use handshakes::analyze::tls::hello::{cipher_name, version_name};
use handshakes::record::ConnectionRecord;

use crate::tools::{all_captures, analyze_path, tshark_present};

#[derive(Deserialize)]
struct Known {
    difference: Vec<KnownDifference>,
}

#[derive(Deserialize)]
struct KnownDifference {
    /// Path relative to the corpus or captures/ (as printed by the test).
    file: String,
    /// The kind of fact: `connections`, `handshake`, `tls_types`, `sni`,
    /// `version`, `cipher`, `http_requests`, `h2_requests`, `host`.
    what: String,
    reason: String,
}

/// Per tshark stream, what we compare.
#[derive(Debug, Default)]
struct Stream {
    syn: Option<f64>,
    synack: Option<f64>,
    ack: Option<f64>,
    /// Some of its times are finer than a microsecond (tshark prints nine
    /// digits: at microsecond resolution the last three are zeros).
    nanos: bool,
    client: Option<(String, u16)>,
    /// Plaintext handshake message types by sender (address, port).
    types: BTreeMap<(String, u16), Vec<u8>>,
    sni: Option<String>,
    version: Option<u16>,
    cipher: Option<u16>,
    http_requests: u64,
    /// h2c request header blocks: `:method` and `:path`, in frame order.
    h2_methods: Vec<String>,
    h2_paths: Vec<String>,
    /// h2c responses to the client's requests (odd streams; not pushed
    /// ones): `:status`, in frame order…
    h2_statuses: Vec<u16>,
    /// …unless a packet's statuses could not be matched with its HEADERS
    /// frames (a trailer block among them): then statuses are not compared.
    h2_statuses_unmatched: bool,
    /// The host the first request that named one named (`http.host` of
    /// one whose target is not absolute — not to a proxy — or
    /// `http2.headers.authority`).
    host: Option<String>,
}

fn hex(v: &str) -> Option<u16> {
    u16::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

/// Runs tshark on `path`, decoding TLS and HTTP on the server ports where we found them.
fn tshark(path: &Path, records: &[ConnectionRecord]) -> Option<Vec<Stream>> {
    let mut args: Vec<String> = vec![
        "-n".into(),
        "-r".into(),
        path.display().to_string(),
        "-o".into(),
        "tcp.reassemble_out_of_order:TRUE".into(),
    ];
    let mut ports = BTreeSet::new();
    for r in records {
        let port = r
            .server
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok());
        if let Some(p) = port {
            if r.tls.is_some() && p != 443 {
                ports.insert((p, "tls"));
            } else if r.http.method == handshakes::record::HttpMethod::Http1 && p != 80 {
                ports.insert((p, "http"));
            } else if prior_knowledge_h2c(r) {
                ports.insert((p, "http2"));
            }
        }
    }
    for (p, proto) in ports {
        args.push("-d".into());
        args.push(format!("tcp.port=={p},{proto}"));
    }
    let fields = [
        "tcp.stream",
        "frame.time_epoch",
        "tcp.flags",
        "ip.src",
        "ipv6.src",
        "tcp.srcport",
        "tls.handshake.type",
        "tls.handshake.extensions_server_name",
        "tls.handshake.ciphersuite",
        "tls.handshake.extensions.supported_version",
        "tls.handshake.version",
        "http.request.method",
        "http2.headers.method",
        "http2.headers.path",
        "http2.headers.status",
        "http2.type",
        "http2.streamid",
        "frame.protocols",
        "http.host",
        "http.request.uri",
        "http2.headers.authority",
    ];
    args.extend([
        "-Y".into(),
        "tcp".into(),
        "-T".into(),
        "fields".into(),
        "-E".into(),
        "separator=|".into(),
        "-E".into(),
        "occurrence=a".into(),
        "-E".into(),
        "aggregator=,".into(),
    ]);
    for f in fields {
        args.push("-e".into());
        args.push(f.into());
    }
    let out = Command::new("tshark").args(&args).output().ok()?;
    if !out.status.success() && out.stdout.is_empty() {
        return Some(Vec::new());
    }
    let mut streams: Vec<Stream> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('|').collect();
        let (Some(stream), Some(ts), Some(flags)) = (f.first(), f.get(1), f.get(2)) else {
            continue;
        };
        let Ok(stream) = stream.parse::<usize>() else {
            continue;
        };
        while streams.len() <= stream {
            streams.push(Stream::default());
        }
        let Some(s) = streams.get_mut(stream) else {
            continue;
        };
        s.nanos |= !ts.ends_with("000");
        let ts: f64 = ts.parse().unwrap_or(0.0);
        let flags = hex(flags).unwrap_or(0);
        // The innermost IP header's source (a tunnelled frame has several):
        // the last of its kind, the kind that comes last in the frame.
        let inner_v6 = f.get(17).is_some_and(|stack| {
            let stack = format!(":{stack}:");
            stack.rfind(":ipv6:").map(|i| i as isize).unwrap_or(-1)
                > stack.rfind(":ip:").map(|i| i as isize).unwrap_or(-1)
        });
        let src = f
            .get(if inner_v6 { 4 } else { 3 })
            .and_then(|a| a.rsplit(',').next())
            .filter(|a| !a.is_empty())
            .map(|a| a.to_string());
        let port: Option<u16> = f.get(5).and_then(|p| p.parse().ok());
        let me = src.zip(port);
        if s.client.is_none() && flags & 0x12 == 0x02 {
            s.client = me.clone();
        }
        let from_client = s.client.is_none() || s.client == me;
        if flags & 0x12 == 0x02 && s.syn.is_none() {
            s.syn = Some(ts);
        }
        if flags & 0x12 == 0x12 && s.synack.is_none() {
            s.synack = Some(ts);
        }
        if flags & 0x17 == 0x10 && s.synack.is_some() && s.ack.is_none() && from_client {
            s.ack = Some(ts);
        }
        let types: Vec<u8> = f
            .get(6)
            .into_iter()
            .flat_map(|t| t.split(','))
            .filter_map(|t| t.parse().ok())
            .collect();
        if let Some(sender) = me.clone() {
            s.types.entry(sender).or_default().extend(&types);
        }
        if let Some(sni) = f.get(7).filter(|v| !v.is_empty()) {
            s.sni
                .get_or_insert_with(|| sni.split(',').next().unwrap_or_default().to_string());
        }
        if !from_client && types.contains(&2) {
            // The ServerHello's chosen suite and version (the last ServerHello wins: after a HelloRetryRequest).
            s.cipher = f
                .get(8)
                .and_then(|c| c.split(',').next_back())
                .and_then(hex);
            let supported = f
                .get(9)
                .and_then(|v| v.split(',').next_back())
                .and_then(hex);
            let legacy = f
                .get(10)
                .and_then(|v| {
                    v.split(',')
                        .nth(types.iter().position(|t| *t == 2).unwrap_or(0))
                })
                .and_then(hex);
            s.version = supported.or(legacy);
        }
        s.http_requests += f
            .get(11)
            .map_or(0, |m| m.split(',').filter(|m| !m.is_empty()).count() as u64);
        let values = |k: usize| {
            let v = f.get(k).filter(|v| !v.is_empty());
            v.into_iter().flat_map(|v| v.split(',').map(str::to_string))
        };
        if from_client {
            s.h2_methods.extend(values(12));
            s.h2_paths.extend(values(13));
            // Pipelined requests: a host and a target each, in order.
            let origin = values(18)
                .zip(values(19))
                .find(|(_, uri)| !uri.contains("://"));
            let host = origin.map(|(host, _)| host).or(values(20).next());
            if s.host.is_none() {
                s.host = host;
            }
        } else {
            // One type and one stream id per HTTP/2 frame in the packet, one
            // status per HEADERS frame that has one.
            let statuses: Vec<u16> = values(14).filter_map(|v| v.parse().ok()).collect();
            let types: Vec<String> = values(15).collect();
            let ids: Vec<u32> = values(16).filter_map(|v| v.parse().ok()).collect();
            let headers: Vec<u32> = types
                .iter()
                .zip(&ids)
                .filter(|(t, _)| *t == "1")
                .map(|(_, id)| *id)
                .collect();
            if types.len() != ids.len() || headers.len() != statuses.len() {
                s.h2_statuses_unmatched = true;
            }
            s.h2_statuses.extend(
                headers
                    .iter()
                    .zip(statuses)
                    .filter(|(id, _)| *id % 2 == 1)
                    .map(|(_, status)| status),
            );
        }
    }
    Some(streams)
}

/// An h2c connection started with the preface (not upgraded from HTTP/1).
fn prior_knowledge_h2c(r: &ConnectionRecord) -> bool {
    r.tls.is_none()
        && r.http.method == handshakes::record::HttpMethod::H2c
        && r.http.upgrade.is_none()
}

/// Our plaintext handshake message types, as tshark numbers them; with
/// `sealed`, also those read only when records were opened with a key log
/// (Finished, KeyUpdate, EndOfEarlyData).
pub(crate) fn our_types(r: &ConnectionRecord, client: bool, sealed: bool) -> Vec<u8> {
    let Some(tls) = &r.tls else {
        return Vec::new();
    };
    let side = if client {
        handshakes::record::Side::Client
    } else {
        handshakes::record::Side::Server
    };
    tls.events
        .iter()
        .filter(|e| e.side == side)
        .filter_map(|e| match e.name {
            "client_hello" | "client_hello_sslv2" => Some(1),
            "server_hello" | "hello_retry_request" => Some(2),
            "server_hello_sslv2" => Some(4),
            "new_session_ticket" => Some(4),
            "encrypted_extensions" => Some(8),
            "certificate" => Some(11),
            "compressed_certificate" if sealed => Some(25),
            "server_key_exchange" => Some(12),
            "certificate_request" => Some(13),
            "server_hello_done" => Some(14),
            "certificate_verify" => Some(15),
            "client_key_exchange" => Some(16),
            "certificate_status" => Some(22),
            "finished" if sealed => Some(20),
            "key_update" if sealed => Some(24),
            "end_of_early_data" if sealed => Some(5),
            _ => None,
        })
        .collect()
}

/// Whether our time `b` is tshark's `a`: at microsecond resolution the
/// very float tshark's digits parse to (so that ours print as those
/// digits), finer than that within a unit in the last place.
fn close(a: Option<f64>, b: Option<f64>, nanos: bool) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if nanos => (a - b).abs() <= a.abs() * f64::EPSILON,
        (Some(a), Some(b)) => a == b,
        (None, None) => true,
        _ => false,
    }
}

/// Every difference between our records and tshark's streams, as (what, detail).
fn differences(records: &[ConnectionRecord], streams: &[Stream]) -> Vec<(String, String)> {
    let mut d = Vec::new();
    if records.len() != streams.len() {
        d.push((
            "connections".into(),
            format!("{} vs tshark {}", records.len(), streams.len()),
        ));
        return d;
    }
    for (r, s) in records.iter().zip(streams) {
        let hs = &r.tcp.handshake;
        let id = r.id;
        if !close(s.syn, hs.syn.map(|i| i.ts), s.nanos)
            || !close(s.synack, hs.synack.map(|i| i.ts), s.nanos)
            || !close(s.ack, hs.ack.map(|i| i.ts), s.nanos)
        {
            d.push((
                "handshake".into(),
                format!(
                    "connection {id}: SYN/SYN-ACK/ACK {:?} vs tshark {:?}",
                    (
                        hs.syn.map(|i| i.ts),
                        hs.synack.map(|i| i.ts),
                        hs.ack.map(|i| i.ts)
                    ),
                    (s.syn, s.synack, s.ack)
                ),
            ));
        }
        // A capture that carries its secrets (a pcapng Decryption Secrets
        // Block) is opened by tshark and by us: the sealed messages count.
        let opened = r
            .tls
            .as_ref()
            .and_then(|t| t.decryption)
            .is_some_and(|d| d.records_opened > 0);
        for client in [true, false] {
            let endpoint = if client { &r.client } else { &r.server };
            let (addr, port) = endpoint.rsplit_once(':').unwrap_or((endpoint, "0"));
            let key = (addr.replace(['[', ']'], ""), port.parse().unwrap_or(0));
            let theirs = s.types.get(&key).cloned().unwrap_or_default();
            let ours = our_types(r, client, opened);
            if theirs != ours {
                d.push((
                    "tls_types".into(),
                    format!(
                        "connection {id} {}: {ours:?} vs tshark {theirs:?}",
                        if client { "client" } else { "server" }
                    ),
                ));
            }
        }
        let tls = r.tls.as_ref();
        if s.sni.is_some() && tls.and_then(|t| t.sni.clone()) != s.sni {
            d.push((
                "sni".into(),
                format!(
                    "connection {id}: {:?} vs tshark {:?}",
                    tls.and_then(|t| t.sni.clone()),
                    s.sni
                ),
            ));
        }
        if let Some(v) = s.version {
            if tls.and_then(|t| t.version.clone()) != Some(version_name(v)) {
                d.push((
                    "version".into(),
                    format!(
                        "connection {id}: {:?} vs tshark {}",
                        tls.and_then(|t| t.version.clone()),
                        version_name(v)
                    ),
                ));
            }
        }
        if let Some(c) = s.cipher {
            if tls.and_then(|t| t.cipher.clone()) != Some(cipher_name(c)) {
                d.push((
                    "cipher".into(),
                    format!(
                        "connection {id}: {:?} vs tshark {}",
                        tls.and_then(|t| t.cipher.clone()),
                        cipher_name(c)
                    ),
                ));
            }
        }
        if prior_knowledge_h2c(r) && !r.http.list_truncated {
            let ours = |f: fn(&handshakes::record::HttpRequest) -> Option<String>| {
                r.http.list.iter().map(f).collect::<Vec<_>>()
            };
            let theirs = |v: &[String], cut: usize| {
                v.iter()
                    .map(|x| Some(x.chars().take(cut).collect::<String>()))
                    .collect::<Vec<_>>()
            };
            let (methods, paths) = (ours(|q| q.method.clone()), ours(|q| q.target.clone()));
            // Responses may come in another order than their requests, and
            // an interim (1xx) response is not the request's status: the
            // final statuses are compared as a multiset.
            let mut statuses: Vec<u16> = r.http.list.iter().filter_map(|q| q.status).collect();
            let mut their_statuses: Vec<u16> = s
                .h2_statuses
                .iter()
                .copied()
                .filter(|c| *c >= 200)
                .collect();
            statuses.sort_unstable();
            their_statuses.sort_unstable();
            if methods != theirs(&s.h2_methods, usize::MAX)
                || paths != theirs(&s.h2_paths, 200)
                || (statuses != their_statuses && !s.h2_statuses_unmatched)
            {
                d.push((
                    "h2_requests".into(),
                    format!(
                        "connection {id}: {methods:?} {paths:?} {statuses:?} vs tshark {:?} {:?} {their_statuses:?}",
                        s.h2_methods, s.h2_paths
                    ),
                ));
            }
        }
        let cleartext = r.tls.is_none() && r.http.method != handshakes::record::HttpMethod::None;
        if cleartext && r.http.host.as_deref() != s.host.as_deref() && s.host.is_some() {
            d.push((
                "host".into(),
                format!("connection {id}: {:?} vs tshark {:?}", r.http.host, s.host),
            ));
        }
        if r.tls.is_none()
            && r.http.method == handshakes::record::HttpMethod::Http1
            && r.http.requests != s.http_requests
        {
            d.push((
                "http_requests".into(),
                format!(
                    "connection {id}: {} vs tshark {}",
                    r.http.requests, s.http_requests
                ),
            ));
        }
    }
    d
}

#[test]
fn every_capture_matches_tshark_or_the_difference_is_known() {
    if !tshark_present() {
        return;
    }
    let known: Known = toml::from_str(include_str!("tshark-known-differences.toml"))
        .expect("known differences parse");
    let files = all_captures();
    assert!(files.len() >= 100, "found only {} captures", files.len());
    let results: Vec<(String, Vec<(String, String)>)> = std::thread::scope(|scope| {
        let chunks: Vec<&[(String, PathBuf)]> = files.chunks(files.len().div_ceil(2)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|(name, path)| {
                            let mut src = handshakes::source::file::FileSource::open(path).ok()?;
                            let mut records = Vec::new();
                            // The secrets a capture carries, as tshark uses them.
                            let config =
                                handshakes::Config::default().with_secrets(src.secrets_at_head());
                            handshakes::analyze(&mut src, &config, &mut records).ok()?;
                            records.sort_by_key(|r| r.id);
                            let _ = analyze_path;
                            let streams = tshark(path, &records)?;
                            Some((name.clone(), differences(&records, &streams)))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker"))
            .collect()
    });
    let mut unexplained = Vec::new();
    let mut used = BTreeSet::new();
    let mut compared = 0;
    for (file, diffs) in &results {
        compared += 1;
        for (what, detail) in diffs {
            match known
                .difference
                .iter()
                .position(|k| &k.file == file && (k.what == *what || k.what == "*"))
            {
                Some(i) => {
                    used.insert(i);
                }
                None => unexplained.push(format!("{file}: {what}: {detail}")),
            }
        }
    }
    let stale: Vec<String> = known
        .difference
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, k)| format!("{} {} ({})", k.file, k.what, k.reason))
        .collect();
    eprintln!(
        "tshark differential: {compared} captures, {} known differences",
        used.len()
    );
    assert!(
        unexplained.is_empty(),
        "differences from tshark not in tests/tshark-known-differences.toml:\n{}",
        unexplained.join("\n")
    );
    assert!(
        stale.is_empty(),
        "listed differences that no longer occur:\n{}",
        stale.join("\n")
    );
}

/// Over a lossy link (captures/README.md, section ar) the retransmitted
/// segments, side by side, are the ones tshark 4.0 marks
/// `tcp.analysis.retransmission` or `fast_retransmission`.
#[test]
fn over_a_lossy_link_the_retransmissions_are_tsharks() {
    if !tshark_present() {
        return;
    }
    for name in ["tls-lossy-h2-20", "tls-lossy-h1-20"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("captures")
            .join(format!("{name}.pcap"));
        let (_, records) = analyze_path(&path);
        let [r] = records.as_slice() else {
            panic!("{name}: one connection");
        };
        let filter = "tcp.analysis.retransmission || tcp.analysis.fast_retransmission";
        let out = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(&path)
            .args(["-Y", filter, "-T", "fields", "-e", "tcp.srcport"])
            .output()
            .expect("tshark runs");
        let client_port = r.client.rsplit(':').next().unwrap_or_default();
        let text = String::from_utf8_lossy(&out.stdout);
        let from_client = text.lines().filter(|p| *p == client_port).count() as u64;
        let from_server = text.lines().count() as u64 - from_client;
        let ours = &r.tcp.retransmissions;
        assert_eq!(
            (ours.client, ours.server),
            (from_client, from_server),
            "{name}"
        );
        assert!(from_client + from_server > 0, "{name}: no loss shows");
    }
}
