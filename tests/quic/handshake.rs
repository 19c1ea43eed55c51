//! A QUIC connection's TLS handshake message by message (`tls.events`):
//! with the key log, the Handshake packets' messages and the tickets after
//! them, each at the time of the packet that completed it, as tshark reads
//! them with the same secrets; what the server's EncryptedExtensions say
//! (the ALPN chosen, 0-RTT accepted); how each connection was closed; and
//! `timeline --conn q…`, which lists all of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::tshark_keyed;
use crate::support::{bin, json_of};
use crate::tools::{skip_or_fail, tshark_present};

/// A handshake message's type, by the name an event gives it.
fn message_type(name: &str) -> u64 {
    match name {
        "client_hello" => 1,
        "server_hello" => 2,
        "new_session_ticket" => 4,
        "encrypted_extensions" => 8,
        "certificate" => 11,
        "certificate_verify" => 15,
        "finished" => 20,
        "compressed_certificate" => 25,
        other => panic!("an event tshark would not name: {other}"),
    }
}

/// Our QUIC connections, with the key log if there is one.
fn quic_list(pcap: &Path, keylog: Option<&Path>) -> Vec<Value> {
    let mut cmd = bin();
    cmd.args(["analyze", "-q", "-T", "json"]);
    if let Some(k) = keylog {
        cmd.arg("--keylog").arg(k);
    }
    let out = cmd.arg(pcap).output().expect("runs");
    let v = json_of(&out);
    v["summary"]["quic"]["list"]
        .as_array()
        .expect("QUIC connections")
        .clone()
}

/// Per QUIC connection, in tshark's order: each handshake message tshark
/// reads with `keylog` (or a pcapng's own secrets), as (type, sender's
/// UDP port, time).
fn tshark_messages(pcap: &Path, keylog: Option<&Path>) -> Vec<Vec<(u64, String, f64)>> {
    let fields = [
        "quic.connection.number",
        "udp.srcport",
        "frame.time_epoch",
        "tls.handshake.type",
    ];
    let text = tshark_keyed(pcap, keylog, "quic && tls.handshake.type", &fields);
    let mut conns = BTreeMap::<u64, Vec<(u64, String, f64)>>::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let Some(n) = f[0].split(',').next().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let time: f64 = f[2].parse().expect("a time");
        for ty in f[3].split(',').filter_map(|t| t.parse().ok()) {
            conns
                .entry(n)
                .or_default()
                .push((ty, f[1].to_owned(), time));
        }
    }
    conns.into_values().collect()
}

/// Our events as (type, sender's port, time).
fn our_messages(rec: &Value) -> Vec<(u64, String, f64)> {
    let port = |a: &Value| {
        a.as_str()
            .and_then(|a| a.rsplit(':').next())
            .map(str::to_owned)
    };
    let (client, server) = (port(&rec["client"]), port(&rec["server"]));
    rec["tls"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            let side = match e["side"].as_str() {
                Some("client") => client.clone(),
                _ => server.clone(),
            };
            let ts = e["time"]["ts"].as_f64().expect("a time");
            (
                message_type(e["name"].as_str().expect("a name")),
                side.expect("a port"),
                ts,
            )
        })
        .collect()
}

/// Every QUIC capture recorded here with its key log, and ja4's Chromium
/// to Cloudflare pcapng with its own secrets.
fn keyed_captures() -> Vec<(PathBuf, Option<PathBuf>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found: Vec<(PathBuf, Option<PathBuf>)> = std::fs::read_dir(root.join("captures"))
        .expect("captures/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.starts_with("quic-") && name.ends_with(".pcap")
        })
        .map(|p| {
            let keylog = p.with_extension("keylog");
            (p, Some(keylog))
        })
        .collect();
    found.sort();
    let ja4 = root.join("../shared/corpus/ja4/pcap/chrome-cloudflare-quic-with-secrets.pcapng");
    if ja4.is_file() {
        found.push((ja4, None));
    } else {
        skip_or_fail(
            "peer corpus",
            "ja4's chrome-cloudflare-quic-with-secrets.pcapng not found",
        );
    }
    found
}

#[test]
fn with_the_key_log_every_handshake_message_is_timed_as_tshark_reads_it() {
    let captures = keyed_captures();
    assert!(captures.len() >= 7, "the QUIC captures of sections ah–an");
    let tshark = tshark_present();
    let mut messages = 0;
    for (pcap, keylog) in &captures {
        let list = quic_list(pcap, keylog.as_deref());
        for rec in &list {
            // The server's choice, from its EncryptedExtensions.
            assert_eq!(rec["tls"]["alpn"], "h3", "{pcap:?}");
            let events = our_messages(rec);
            let kinds: Vec<u64> = events.iter().map(|e| e.0).collect();
            // A full handshake: the hellos, the server's EncryptedExtensions,
            // certificate (compressed by Cloudflare), CertificateVerify and
            // Finished, the client's Finished; a resumed one without the
            // certificate. Tickets follow.
            let resumed = rec["tls"]["resumed"] == true;
            let flight: &[u64] = if resumed {
                &[1, 2, 8, 20, 20]
            } else if kinds.contains(&25) {
                &[1, 2, 8, 25, 15, 20, 20]
            } else {
                &[1, 2, 8, 11, 15, 20, 20]
            };
            assert!(kinds.starts_with(flight), "{pcap:?}: {kinds:?}");
            assert!(kinds[flight.len()..].iter().all(|&k| k == 4), "{kinds:?}");
            // The client's Finished is the handshake's end.
            let finished = events.iter().rfind(|e| e.0 == 20).map(|e| e.2);
            assert_eq!(
                rec["handshake"]["client_handshake"]["ts"].as_f64(),
                finished,
                "{pcap:?}"
            );
            messages += events.len();
        }
        if !tshark {
            continue; // tshark_present said so, loudly (or failed under CI)
        }
        let theirs = tshark_messages(pcap, keylog.as_deref());
        assert_eq!(theirs.len(), list.len(), "{pcap:?}");
        for (rec, want) in list.iter().zip(theirs) {
            let ours = our_messages(rec);
            assert_eq!(ours.len(), want.len(), "{pcap:?}: {ours:?} {want:?}");
            for (o, w) in ours.iter().zip(&want) {
                assert_eq!((o.0, &o.1), (w.0, &w.1), "{pcap:?}: {ours:?} {want:?}");
                assert!((o.2 - w.2).abs() < 2e-6, "{pcap:?}: {o:?} {w:?}");
            }
        }
    }
    // 119 over the 16 connections (docs/accuracy.md), 9 of them ja4's.
    let ja4 = captures.iter().any(|(_, keylog)| keylog.is_none());
    assert_eq!(messages, if ja4 { 119 } else { 110 });
}

/// The 0-RTT capture's second connection sent a request in 0-RTT; its
/// server's EncryptedExtensions said it took it (the server log: that
/// request answered before the handshake completed).
#[test]
fn the_key_log_tells_whether_the_server_took_0rtt() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let list = quic_list(
        &dir.join("quic-aioquic-h3-0rtt.pcap"),
        Some(&dir.join("quic-aioquic-h3-0rtt.keylog")),
    );
    let accepted: Vec<&Value> = list
        .iter()
        .map(|r| &r["tls"]["early_data_accepted"])
        .collect();
    assert_eq!(accepted, [false, true]);
    // Without the key log neither is known, nor the ALPN chosen; the
    // events are the hellos alone.
    let sealed = quic_list(&dir.join("quic-aioquic-h3-0rtt.pcap"), None);
    for rec in &sealed {
        assert!(rec["tls"]["early_data_accepted"].is_null());
        assert!(rec["tls"]["alpn"].is_null());
        let kinds: Vec<u64> = our_messages(rec).iter().map(|e| e.0).collect();
        assert_eq!(kinds, [1, 2]);
    }
}

/// `timeline --conn q2` draws that QUIC connection alone and lists its
/// events in time order: with the key log, the 0-RTT request sent with
/// the ClientHello and answered before the handshake completed.
#[test]
fn timeline_conn_lists_a_quic_connections_events() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let run = |conn: &str| {
        let out = bin()
            .args(["timeline", "-q", "--width", "120", "--conn", conn])
            .arg("--keylog")
            .arg(dir.join("quic-aioquic-h3-0rtt.keylog"))
            .arg(dir.join("quic-aioquic-h3-0rtt.pcap"))
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = run("q2");
    assert_eq!(code, Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("1/2 connections"), "{text}");
    assert!(lines[3].starts_with("q2 :52870"), "{text}");
    assert!(
        text.contains("connection q2  127.0.0.1:52870 -> 127.0.0.1:18453  (3 requests, QUIC 1 resumed 0-RTT, 12.40ms)"),
        "{text}"
    );
    let at = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what}: {text}"))
    };
    // In time order: the early request, its answer, then the handshake's end.
    assert!(at("client  request 1 sent GET /") < at("response 1 first and last byte 200"));
    assert!(
        at("response 1 first and last byte 200")
            < at("QUIC handshake complete (TLS 1.3 resumed, h3, 8.18ms)")
    );
    assert!(at("QUIC handshake complete") < at("request 2 sent GET /2"));
    assert!(at("server  TLS new_session_ticket") > at("client  TLS finished"));
    // A TCP connection's number draws no QUIC row; a QUIC one not there
    // says so.
    let (code, text) = run("q9");
    assert_eq!(code, Some(0));
    assert!(
        text.starts_with("no connection with id q9 (2 connections in "),
        "{text}"
    );
    let (_, text) = run("1");
    assert!(text.starts_with("no connection with id 1 "), "{text}");
}

/// Per QUIC connection, in tshark's order: its first CONNECTION_CLOSE as
/// tshark reads it with the secrets — (sender's port, time, kind, error
/// code, reason phrase).
fn tshark_closes(
    pcap: &Path,
    keylog: Option<&Path>,
) -> BTreeMap<u64, (String, f64, &'static str, u64, String)> {
    let fields = [
        "quic.connection.number",
        "udp.srcport",
        "frame.time_epoch",
        "quic.frame_type",
        "quic.cc.error_code",
        "quic.cc.error_code.app",
        "quic.cc.reason_phrase",
    ];
    let filter = "quic.frame_type == 0x1c || quic.frame_type == 0x1d";
    let text = tshark_keyed(pcap, keylog, filter, &fields);
    let mut closes = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let Some(n) = f[0].split(',').next().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let types: Vec<&str> = f[3].split(',').collect();
        let kind = if types.contains(&"29") {
            "application"
        } else {
            "transport"
        };
        let code = if kind == "application" { f[5] } else { f[4] };
        let close = (
            f[1].to_owned(),
            f[2].parse().expect("a time"),
            kind,
            code.parse().expect("an error code"),
            f[6].to_owned(),
        );
        closes.entry(n).or_insert(close);
    }
    closes
}

/// With the key log, each connection's CONNECTION_CLOSE is the first
/// tshark reads with the same secrets: sender, time, kind, code, reason.
#[test]
fn with_the_key_log_each_close_is_tshark_s() {
    if !tshark_present() {
        return; // tshark_present said so, loudly (or failed under CI)
    }
    let mut checked = 0;
    for (pcap, keylog) in keyed_captures() {
        let list = quic_list(&pcap, keylog.as_deref());
        let theirs: Vec<_> = tshark_closes(&pcap, keylog.as_deref())
            .into_values()
            .collect();
        assert_eq!(
            theirs.len(),
            list.len(),
            "{pcap:?}: every connection closed"
        );
        for (rec, want) in list.iter().zip(theirs) {
            let c = &rec["close"];
            let by = match c["by"].as_str() {
                Some("client") => &rec["client"],
                _ => &rec["server"],
            };
            let port = by
                .as_str()
                .and_then(|a| a.rsplit(':').next())
                .expect("a port");
            assert_eq!(port, want.0, "{pcap:?}");
            let at = c["time"]["ts"].as_f64().expect("a time");
            assert!((at - want.1).abs() < 2e-6, "{pcap:?}: {at} {}", want.1);
            assert_eq!(c["kind"], want.2, "{pcap:?}");
            assert_eq!(c["error_code"], want.3, "{pcap:?}");
            assert_eq!(c["reason"].as_str().unwrap_or_default(), want.4, "{pcap:?}");
            checked += 1;
        }
        // Sealed without the key log.
        if keylog.is_some() {
            for rec in quic_list(&pcap, None) {
                assert!(rec["close"].is_null(), "{pcap:?}");
            }
        }
    }
    assert!(checked >= 9, "{checked} closes");
}

/// A key log whose client handshake secret is wrong: the client's
/// Handshake packets do not open (counted as failed, the decryption
/// partial), its Finished is then told by its packet's size — at the same
/// time — and the server's messages are still read.
#[test]
fn a_wrong_handshake_secret_falls_back_to_the_finisheds_size() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let pcap = dir.join("quic-aioquic-h3-5.pcap");
    let good = dir.join("quic-aioquic-h3-5.keylog");
    let text = std::fs::read_to_string(&good).expect("the key log");
    let bad: String = text
        .lines()
        .map(
            |l| match l.strip_prefix("CLIENT_HANDSHAKE_TRAFFIC_SECRET ") {
                // The secret's last hex digit changed.
                Some(rest) => {
                    let flipped = if rest.ends_with('0') { '1' } else { '0' };
                    format!(
                        "CLIENT_HANDSHAKE_TRAFFIC_SECRET {}{flipped}\n",
                        &rest[..rest.len() - 1]
                    )
                }
                None => format!("{l}\n"),
            },
        )
        .collect();
    assert_ne!(bad, text);
    let path = std::env::temp_dir().join(format!("handshakes-bad-{}.keylog", std::process::id()));
    std::fs::write(&path, bad).expect("a temporary key log");
    let (ours, right) = (quic_list(&pcap, Some(&path)), quic_list(&pcap, Some(&good)));
    let _ = std::fs::remove_file(&path);
    let (rec, want) = (&ours[0], &right[0]);
    assert_eq!(
        rec["handshake"]["client_handshake"],
        want["handshake"]["client_handshake"]
    );
    assert_eq!(rec["http"]["decryption"], "partial");
    assert!(rec["http"]["packets_failed"].as_u64() > Some(0));
    let kinds: Vec<u64> = our_messages(rec).iter().map(|e| e.0).collect();
    assert_eq!(kinds[..6], [1, 2, 8, 11, 15, 20], "the server's read");
    assert!(
        !our_messages(rec)
            .iter()
            .any(|e| e.0 == 20 && e.1 == "49348"),
        "{kinds:?}"
    );
    assert_eq!(rec["http"]["requests"], 5, "the 1-RTT packets opened");
}

/// With the key log, each full handshake's certificate chain is the one
/// tshark reads with the same secrets (Cloudflare's compressed with
/// brotli, RFC 8879); a resumed handshake sends none.
#[test]
fn with_the_key_log_each_certificate_is_tshark_s() {
    let mut checked = 0;
    for (pcap, keylog) in keyed_captures() {
        let list = quic_list(&pcap, keylog.as_deref());
        let theirs = if tshark_present() {
            let fields = [
                "quic.connection.number",
                "tls.handshake.certificate_length",
                "x509ce.dNSName",
            ];
            let filter = "quic && (tls.handshake.type == 11 || tls.handshake.type == 25)";
            let text = tshark_keyed(&pcap, keylog.as_deref(), filter, &fields);
            let mut found = BTreeMap::new();
            for line in text.lines() {
                let f: Vec<&str> = line.split('\t').collect();
                let n: u64 = f[0]
                    .split(',')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("a number");
                let lengths: Vec<u64> = f[1].split(',').filter_map(|l| l.parse().ok()).collect();
                let names: Vec<String> = f[2].split(',').map(str::to_owned).collect();
                found.insert(
                    n,
                    (lengths.len() as u64, lengths.iter().sum::<u64>(), names),
                );
            }
            Some(found)
        } else {
            None
        };
        for (i, rec) in list.iter().enumerate() {
            let cert = &rec["tls"]["certificate"];
            let resumed = rec["tls"]["resumed"] == true;
            let compressed = our_messages(rec).iter().any(|e| e.0 == 25);
            assert_eq!(cert.is_null(), resumed, "{pcap:?} {i}");
            if cert.is_null() {
                continue;
            }
            if compressed {
                assert_eq!(cert["compression"], "brotli", "{pcap:?}");
                assert_eq!(cert["subject"], "sni.cloudflaressl.com", "{pcap:?}");
                assert_eq!(cert["key"], "EC 256", "{pcap:?}");
            } else {
                assert!(cert["compression"].is_null(), "{pcap:?}");
                assert_eq!(cert["subject"], "localhost", "{pcap:?}");
                assert_eq!(cert["key"], "RSA 2048", "{pcap:?}");
            }
            if let Some(theirs) = &theirs {
                let (chain, bytes, names) = theirs.get(&(i as u64)).expect("tshark's");
                assert_eq!(
                    (cert["chain"].as_u64(), cert["bytes"].as_u64()),
                    (Some(*chain), Some(*bytes))
                );
                assert_eq!(cert["dns_names"], serde_json::json!(names), "{pcap:?}");
            }
            checked += 1;
        }
    }
    // Every full handshake of our ten captures, and Cloudflare's.
    assert_eq!(checked, 11);
}

/// Each side's max_idle_timeout transport parameter: the client's from
/// its ClientHello, the server's from its EncryptedExtensions (with the
/// key log), as tshark reads them with the same secrets — Chromium's 30 s
/// against Cloudflare's 180 s, aioquic's 60 s both ways.
#[test]
fn with_the_key_log_each_sides_idle_timeout_is_tshark_s() {
    if !tshark_present() {
        return;
    }
    let mut checked = 0;
    for (pcap, keylog) in keyed_captures() {
        let list = quic_list(&pcap, keylog.as_deref());
        let fields = [
            "quic.connection.number",
            "tls.handshake.type",
            "tls.quic.parameter.max_idle_timeout",
        ];
        let filter = "tls.quic.parameter.max_idle_timeout";
        let text = tshark_keyed(&pcap, keylog.as_deref(), filter, &fields);
        let mut theirs: BTreeMap<(u64, &str), f64> = BTreeMap::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let first = |i: usize| f.get(i).and_then(|v| v.split(',').next()).unwrap_or("");
            let n: u64 = first(0).parse().expect("a connection number");
            // A frame may carry several messages: the ServerHello before
            // the EncryptedExtensions.
            let types: Vec<&str> = f.get(1).map_or(vec![], |t| t.split(',').collect());
            let side = match (types.contains(&"1"), types.contains(&"8")) {
                (true, false) => "client",
                (false, true) => "server",
                _ => panic!("{pcap:?}: transport parameters in {types:?}"),
            };
            let ms: f64 = first(2).parse().expect("milliseconds");
            // A ClientHello sent again (after a Retry) says it again.
            theirs.entry((n, side)).or_insert(ms / 1000.0);
        }
        for (i, rec) in list.iter().enumerate() {
            let h = &rec["handshake"];
            for (side, ours) in [
                ("client", &h["idle_timeout"]),
                ("server", &h["server_idle_timeout"]),
            ] {
                let theirs = theirs.get(&(i as u64, side));
                assert_eq!(ours.as_f64(), theirs.copied(), "{pcap:?} {i} {side}");
                checked += usize::from(theirs.is_some());
            }
        }
    }
    // Both sides of sixteen connections: the fifteen of our ten captures
    // (two each in the 0-RTT and resumed ones, four in post-429-4conn)
    // and Cloudflare's.
    assert_eq!(checked, 32);
}

/// The QUIC table's `close` column: who closed and how, with the key
/// log; `-` without (the frame is sealed).
#[test]
fn the_quic_table_says_how_each_connection_closed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let table = |keylog: bool| {
        let mut cmd = bin();
        cmd.args(["analyze", "-q"]);
        if keylog {
            cmd.arg("--keylog")
                .arg(dir.join("quic-chromium-h3-2.keylog"));
        }
        let out = cmd
            .arg(dir.join("quic-chromium-h3-2.pcap"))
            .output()
            .expect("runs");
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().last().unwrap_or_default().to_owned()
    };
    assert!(
        table(true).ends_with("  2     client transport 0x0"),
        "{}",
        table(true)
    );
    assert!(table(false).ends_with("  -     -"), "{}", table(false));
}
