//! QUIC (HTTP/3's transport): UDP datagrams carrying a QUIC long-header
//! packet are counted (`packets.quic`), and the connections they open
//! (`quic_connections`); each connection's handshake is read from its
//! Initial packets (`summary.quic`): SNI, ALPN offered, cipher, full or
//! resumed, the hellos' and the handshake's times. HTTP/3 requests are
//! sealed and not counted; the verdict and a warning say so. Checked
//! against tshark 4.0's facts in the peer corpus (Chrome, curl, quic-go,
//! QUIC v2, drafts, Retry, 0-RTT, greased fixed bits), and against tshark
//! itself on the captures recorded here (aioquic and Chromium).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::{
    addr, analyze_with, bin, json_of, ms, stderr, stdout, udp_frame, Packet, Pcap, T0,
};
use crate::tools::{all_captures, analyze_path, skip_or_fail, tshark_present};

mod ended;
mod followed;
mod handshake;
mod http3;

/// tshark's `fields` (tab-separated, a line a packet) of the packets of
/// `pcap` that match `filter`, opening QUIC with `keylog` (or with a
/// pcapng's own secrets when there is none).
fn tshark_keyed(pcap: &Path, keylog: Option<&Path>, filter: &str, fields: &[&str]) -> String {
    let keylog = keylog.map_or(String::new(), |k| k.display().to_string());
    let options = ["-o".to_owned(), format!("tls.keylog_file:{keylog}")];
    crate::tools::tshark_fields(pcap, &options, filter, fields).expect("tshark runs")
}

/// tshark's count of frames with a QUIC long header.
fn tshark_long_headers(path: &Path) -> u64 {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args([
            "-Y",
            "quic.header_form == 1",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .expect("tshark runs");
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

#[test]
fn quic_handshake_datagrams_are_counted_as_tshark_counts_them() {
    // Every capture we count QUIC in (a false one would show), and every
    // one named for QUIC (a miss would show), against tshark.
    let mut checked = 0;
    let mut tshark = None;
    for (name, path) in all_captures() {
        let (summary, _) = analyze_path(&path);
        let quic = summary.packets.quic;
        assert!(quic <= summary.packets.skipped, "{name}");
        // Every connection's datagrams, listed or not, are summed (and
        // are among the frames that are not TCP).
        if let Some(q) = &summary.quic {
            let listed: u64 = q
                .list
                .iter()
                .map(|c| c.datagrams.client + c.datagrams.server)
                .sum();
            assert!(
                q.datagrams >= listed && q.datagrams <= summary.packets.skipped,
                "{name}"
            );
            assert_eq!(q.datagrams == listed, q.not_listed == 0, "{name}");
        }
        assert_eq!(summary.verdict.contains("QUIC"), quic > 0, "{name}");
        let named = name.starts_with("corpus/") && name.to_lowercase().contains("quic");
        if quic == 0 && !named {
            continue;
        }
        if !*tshark.get_or_insert_with(tshark_present) {
            return;
        }
        let want = tshark_long_headers(&path);
        assert!(want > 0, "{name}: tshark sees no QUIC");
        assert_eq!(quic, want, "{name}");
        checked += 1;
    }
    if checked < 5 {
        skip_or_fail(
            "peer corpus",
            "its QUIC captures were not found in ../shared/corpus",
        );
    }
}

#[test]
fn a_capture_of_http3_reads_its_handshake_and_says_requests_are_not_counted() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/zeek/Traces/quic/chromium-115.0.5790.110-api-cirrus-com.pcap");
    if !path.is_file() {
        skip_or_fail("peer corpus", "zeek's chromium QUIC capture not found");
        return;
    }
    let (summary, records) = analyze_path(&path);
    assert!(records.is_empty());
    // One connection: Chromium's Initial, the server's Initial and
    // Handshake, and its Handshake: three datagrams with long headers
    // (tshark 4.0 says so).
    assert_eq!((summary.quic_connections, summary.packets.quic), (1, 3));
    assert_eq!(
        summary.verdict,
        "no HTTP requests seen over TCP; QUIC: 1 connection, 1 resumed (HTTP/3 requests not counted)"
    );
    let warning =
        "1 QUIC connection (3 UDP datagrams with handshake packets): its handshake is read";
    assert!(
        summary.warnings.iter().any(|w| w.starts_with(warning)),
        "{:?}",
        summary.warnings
    );
    let quic = summary.quic.expect("QUIC figures");
    assert_eq!((quic.handshakes_full, quic.handshakes_resumed), (0, 1));
    let rec = &quic.list[0];
    let h = &rec.handshake;
    // Zeek's quic.log: history ISishoHOOooOoO — the client's Initial, the
    // server's Initial and Handshake coalesced, then the client's Handshake.
    assert_eq!((h.packets.initial, h.packets.handshake), (2, 2));
    let ms =
        |i: &Option<handshakes::record::Instant>| i.as_ref().map(|i| (i.at * 1e6).round() as i64);
    assert_eq!(ms(&h.server_initial), Some(31_064));
    assert_eq!(ms(&h.client_handshake), Some(32_206));
    assert_eq!(rec.tls.sni.as_deref(), Some("api.cirrus-ci.com"));
}

/// The corpus's QUIC connections as tshark 4.0 gave them (expected.json),
/// by file.
fn expected_quic() -> Option<Vec<(String, Vec<Value>)>> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let text = std::fs::read_to_string(corpus.join("expected.json")).ok()?;
    let expected: Value = serde_json::from_str(&text).expect("expected.json parses");
    let entries = expected.as_array().expect("a list of captures");
    let quic = entries.iter().filter_map(|entry| {
        let quic = entry
            .pointer("/facts/tshark_4_0/quic_connections")?
            .as_array()?;
        let file = entry["file"].as_str().expect("a file name");
        Some((file.to_owned(), quic.clone()))
    });
    Some(quic.collect())
}

/// `address:port` without IPv6's brackets, as the corpus's facts write it.
fn bare(endpoint: &str) -> String {
    endpoint.replace(['[', ']'], "")
}

#[test]
fn every_quic_handshake_in_the_corpus_reads_as_tshark_read_it() {
    let Some(expected) = expected_quic() else {
        skip_or_fail("peer corpus", "../shared/corpus/expected.json not found");
        return;
    };
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let mut facts = 0;
    for (file, want) in expected.iter().filter(|(_, q)| !q.is_empty()) {
        let (summary, _) = analyze_path(&corpus.join(file));
        let list = summary.quic.map(|q| q.list).unwrap_or_default();
        assert_eq!(list.len(), want.len(), "{file}");
        for (rec, want) in list.iter().zip(want) {
            let at = format!("{file} #{}", rec.id);
            let tls = &want["tls"];
            assert_eq!(bare(&rec.client), want["client"], "{at}");
            assert_eq!(bare(&rec.server), want["server"], "{at}");
            assert_eq!(rec.tls.sni.as_deref(), tls["sni"].as_str(), "{at}");
            let alpn: Vec<&str> = tls["alpn_offered"]
                .as_array()
                .map_or(vec![], |a| a.iter().filter_map(Value::as_str).collect());
            assert_eq!(rec.tls.alpn_offered, alpn, "{at}");
            assert_eq!(rec.tls.cipher.as_deref(), tls["cipher"].as_str(), "{at}");
            assert_eq!(rec.tls.resumed, tls["resumed"].as_bool(), "{at}");
            let tls13 = tls["version"].as_str().map(|v| v.replace("TLSv", "TLS "));
            assert_eq!(rec.tls.version.as_deref(), tls13.as_deref(), "{at}");
            let ts = |i: &Option<handshakes::record::Instant>| i.as_ref().map(|i| i.ts);
            for (ours, theirs) in [
                (ts(&rec.tls.client_hello), tls["client_hello_ts"].as_f64()),
                (ts(&rec.tls.server_hello), tls["server_hello_ts"].as_f64()),
            ] {
                match (ours, theirs) {
                    (Some(a), Some(b)) => assert!((a - b).abs() < 2e-6, "{at}: {a} {b}"),
                    (a, b) => assert_eq!(a, b, "{at}"),
                }
            }
            // Every datagram of the connection, as tshark numbers them but
            // where tshark loses track: quic-go's client after its Retry
            // (tshark 15, all 22 on the connection's ports are QUIC), and
            // two 0-RTT packets captured before their Initial (tshark 13,
            // which gives them no connection).
            let datagrams = rec.datagrams.client + rec.datagrams.server;
            let tshark = want["packets"].as_u64().expect("packets");
            let known = match (file.as_str(), rec.id) {
                ("zeek/Traces/quic/interop/quic-go_quic-go/retry.pcap", 1) => Some((15, 22)),
                ("ndpi/tests/cfgs/default/pcap/quic_0RTT.pcap", 2) => Some((13, 15)),
                _ => None,
            };
            assert_eq!(
                known.map_or((tshark, tshark), |k| k),
                (tshark, datagrams),
                "{at}"
            );
            facts += 10;
        }
    }
    // 49 connections in 10 captures.
    assert!(facts >= 450, "{facts} facts checked");
}

/// JA4 of every QUIC ClientHello FoxIO's own tools fingerprint in the
/// corpus (their expected outputs, `facts.peer.streams`: those over UDP
/// with a `q` fingerprint; their JA4S is not implemented here).
#[test]
fn quic_ja4_is_foxios() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let Ok(text) = std::fs::read_to_string(corpus.join("expected.json")) else {
        skip_or_fail("peer corpus", "../shared/corpus/expected.json not found");
        return;
    };
    let expected: Value = serde_json::from_str(&text).expect("expected.json parses");
    let mut checked = 0;
    for entry in expected.as_array().expect("a list of captures") {
        let Some(streams) = entry
            .pointer("/facts/peer/streams")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let is_quic = |s: &&Value| {
            s["transport"] == "udp" && s["ja4"].as_str().is_some_and(|j| j.starts_with('q'))
        };
        let quic: Vec<&Value> = streams.iter().filter(is_quic).collect();
        if quic.is_empty() {
            continue;
        }
        let file = entry["file"].as_str().expect("a file name");
        let (summary, _) = analyze_path(&corpus.join(file));
        let list = summary.quic.map(|q| q.list).unwrap_or_default();
        for stream in quic {
            let client = stream["client"].as_str().expect("a client");
            let rec = list.iter().find(|r| bare(&r.client) == client);
            let rec = rec.unwrap_or_else(|| panic!("{file}: no QUIC connection from {client}"));
            assert_eq!(
                rec.tls.ja4.as_deref(),
                stream["ja4"].as_str(),
                "{file} {client}"
            );
            checked += 1;
        }
    }
    // ja4's tls-handshake, tls-sni and chrome-cloudflare captures.
    assert!(checked >= 20, "{checked} JA4s checked");
}

#[test]
fn quic_connections_are_the_ones_tshark_numbers() {
    let Some(expected) = expected_quic() else {
        skip_or_fail("peer corpus", "../shared/corpus/expected.json not found");
        return;
    };
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    for (file, quic) in &expected {
        let (summary, _) = analyze_path(&corpus.join(file));
        assert_eq!(summary.quic_connections, quic.len() as u64, "{file}");
    }
    // 97 captures, 10 of them with QUIC (20 connections in two of ja4's).
    let with_quic = expected.iter().filter(|(_, q)| !q.is_empty()).count();
    assert!(
        expected.len() >= 90 && with_quic >= 8,
        "{} checked, {with_quic} with QUIC",
        expected.len()
    );
}

/// Per QUIC connection (tshark's `quic.connection.number`), from tshark:
/// the first ClientHello's and ServerHello's times, the client's Finished
/// (read with the key log), the SNI, the cipher suite the server chose,
/// and whether its ServerHello has pre_shared_key.
#[derive(Debug, Default, PartialEq)]
struct TsharkQuic {
    client_hello: Option<f64>,
    server_hello: Option<f64>,
    client_finished: Option<f64>,
    client_port: String,
    sni: Option<String>,
    cipher: Option<u16>,
    resumed: Option<bool>,
}

fn tshark_quic(path: &Path) -> std::collections::BTreeMap<u64, TsharkQuic> {
    let keylog = format!(
        "tls.keylog_file:{}",
        path.with_extension("keylog").display()
    );
    let fields = [
        "quic.connection.number",
        "frame.time_epoch",
        "tls.handshake.type",
        "tls.handshake.extensions_server_name",
        "tls.handshake.ciphersuite",
        "tls.handshake.extension.type",
        "udp.srcport",
    ];
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args([
            "-o",
            &keylog,
            "-Y",
            "tls.handshake.type == 1 || tls.handshake.type == 2 || tls.handshake.type == 20",
        ])
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(fields.iter().flat_map(|f| ["-e", f]))
        .output()
        .expect("tshark runs");
    let mut conns = std::collections::BTreeMap::<u64, TsharkQuic>::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let Some(Ok(n)) = f.first().and_then(|n| n.split(',').next()).map(str::parse) else {
            continue; // TLS over TCP
        };
        let c = conns.entry(n).or_default();
        let ts: f64 = f[1].parse().expect("a time");
        let types: Vec<&str> = f[2].split(',').collect();
        if types.contains(&"1") && c.client_hello.is_none() {
            c.client_hello = Some(ts);
            c.client_port = f[6].to_owned();
            c.sni = Some(f[3].to_owned()).filter(|s| !s.is_empty());
        }
        if types.contains(&"2") && c.server_hello.is_none() {
            c.server_hello = Some(ts);
            let hex = f[4].trim_start_matches("0x");
            c.cipher = u16::from_str_radix(hex, 16).ok();
            c.resumed = Some(f[5].split(',').any(|t| t == "41"));
        }
        if types.contains(&"20") && f[6] == c.client_port && c.client_finished.is_none() {
            c.client_finished = Some(ts);
        }
    }
    conns
}

#[test]
fn the_quic_captures_recorded_here_read_as_tshark_reads_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("captures/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.starts_with("quic-") && name.ends_with(".pcap")
        })
        .collect();
    names.sort();
    assert!(names.len() >= 4, "the QUIC captures of section ah–al");
    let mut tshark = None;
    for path in names {
        let (summary, records) = analyze_path(&path);
        assert!(records.is_empty(), "{path:?}: UDP only");
        let quic = summary.quic.expect("QUIC figures");
        let full = quic
            .list
            .iter()
            .filter(|r| r.tls.resumed == Some(false))
            .count();
        assert_eq!(quic.handshakes_full, full as u64);
        for rec in &quic.list {
            assert_eq!(rec.tls.alpn_offered, ["h3"], "{path:?}");
            assert!(rec.handshake.duration.is_some_and(|d| d > 0.0), "{path:?}");
            assert_eq!(rec.handshake.packets.undecryptable, 0, "{path:?}");
        }
        if !*tshark.get_or_insert_with(tshark_present) {
            continue; // tshark_present said so, loudly (or failed under CI)
        }
        let want = tshark_quic(&path);
        assert_eq!(want.len(), quic.list.len(), "{path:?}");
        for (rec, (n, want)) in quic.list.iter().zip(want) {
            let ours = TsharkQuic {
                client_hello: rec.tls.client_hello.as_ref().map(|i| i.ts),
                server_hello: rec.tls.server_hello.as_ref().map(|i| i.ts),
                // Told without keys, by its packet's size.
                client_finished: rec.handshake.client_handshake.as_ref().map(|i| i.ts),
                client_port: want.client_port.clone(),
                sni: rec.tls.sni.clone(),
                cipher: want.cipher.filter(|&c| {
                    rec.tls.cipher.as_deref()
                        == Some(handshakes::analyze::tls::hello::cipher_name(c).as_ref())
                }),
                resumed: rec.tls.resumed,
            };
            let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => (a - b).abs() < 2e-6,
                (a, b) => a == b,
            };
            assert!(
                close(ours.client_hello, want.client_hello),
                "{path:?} {n}: {ours:?} {want:?}"
            );
            assert!(
                close(ours.server_hello, want.server_hello),
                "{path:?} {n}: {ours:?} {want:?}"
            );
            let finished = (ours.client_finished, want.client_finished);
            assert!(close(finished.0, finished.1), "{path:?} {n}: {finished:?}");
            assert!(
                finished.1.is_some(),
                "{path:?} {n}: the key log opened nothing"
            );
            assert_eq!(
                (&ours.sni, ours.cipher, ours.resumed),
                (&want.sni, want.cipher, want.resumed),
                "{path:?} {n}"
            );
        }
    }
}

#[test]
fn the_filters_keep_quic_as_they_keep_tcp() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/ja4/pcap/tls-handshake.pcapng");
    if !path.is_file() {
        skip_or_fail("peer corpus", "ja4's tls-handshake.pcapng not found");
        return;
    }
    let summary = |args: &[&str]| -> Value {
        let out = bin()
            .args(["analyze", "-q", "-T", "json"])
            .args(args)
            .arg(&path)
            .output()
            .expect("runs");
        let v = json_of(&out);
        v["summary"].clone()
    };
    let quic = |s: &Value| {
        (
            s["quic_connections"].as_u64(),
            s["packets"]["quic"].as_u64(),
        )
    };
    // Twenty Google and Facebook connections, two datagrams each.
    assert_eq!(quic(&summary(&[])), (Some(20), Some(40)));
    assert_eq!(quic(&summary(&["--port", "443"])), (Some(20), Some(40)));
    // www.google.com's alone; none on another port.
    assert_eq!(
        quic(&summary(&["--host", "142.251.163.147"])),
        (Some(1), Some(2))
    );
    let other = summary(&["--port", "8443"]);
    assert_eq!(quic(&other), (Some(0), Some(0)));
    assert_eq!(other["verdict"], "no HTTP requests seen");
}

#[test]
fn the_html_report_names_the_quic_connections() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/ja4/pcap/tls-sni.pcapng");
    if !path.is_file() {
        skip_or_fail("peer corpus", "ja4's tls-sni.pcapng not found");
        return;
    }
    let page = crate::support::analyze_html(&path, &[]).1;
    assert!(
        page.contains("QUIC connections</div><div class=\"v\">20</div>"),
        "no QUIC card"
    );
    // The QUIC table: a row per connection, its ALPN offered h3.
    assert!(page.contains("<h3>QUIC connections (handshakes read from their Initial packets)</h3>"));
    assert_eq!(page.matches("<td>h3</td>").count(), 20);
}

#[test]
fn compare_sets_quic_handshakes_side_by_side() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let out = bin()
        .args(["compare", "-q", "-T", "json"])
        .arg(dir.join("quic-aioquic-h3-resumed.pcap"))
        .arg(dir.join("quic-chromium-h3-2.pcap"))
        .output()
        .expect("runs");
    let v = json_of(&out);
    let m = &v["metrics"];
    assert_eq!(m["quic_connections"]["a"], 2.0);
    assert_eq!(m["quic_handshakes_full"]["b"], 1.0);
    assert_eq!(m["quic_handshakes_resumed"]["a"], 1.0);
    assert!(m["quic_handshake_median"]["b"]
        .as_f64()
        .is_some_and(|s| s > 0.03));
    let verdict = v["verdict"].as_str().expect("a verdict");
    assert!(
        verdict.contains("neither carried requests")
            && verdict.contains("1 vs 2 QUIC connections (1 vs 1 full handshakes)"),
        "{verdict}"
    );
}

/// A capture of `n` QUIC connections: each one client Initial packet (a
/// long header with a new 8-byte destination ID, no packet behind it that
/// opens) from its own port, 1 ms apart.
fn many_quic_connections(n: u32) -> Vec<u8> {
    let packets: Vec<Packet> = (0..n)
        .map(|i| {
            let mut initial = vec![0xc0, 0, 0, 0, 1, 8];
            initial.extend(i.to_be_bytes().repeat(2));
            initial.extend([0, 0, 0x40, 0x20]);
            initial.resize(64, 0xaa);
            let client = addr(&format!("10.0.0.1:{}", 10_000 + i % 50_000));
            let frame = udp_frame(client, addr("10.0.0.2:443"), &initial);
            Packet::new(T0 + ms(i64::from(i)), frame)
        })
        .collect();
    Pcap::new(1).write(&packets)
}

#[test]
fn csv_has_a_row_for_each_quic_connection_and_the_list_a_warning_for_the_rest() {
    let capture = many_quic_connections(4_100);
    let out = analyze_with(&capture, &["-q", "-T", "csv"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().expect("a header").clone();
    let at = |name: &str| header.iter().position(|c| c == name).expect(name);
    let (transport, id, client) = (at("transport"), at("id"), at("client"));
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a row")).collect();
    // Every one, as each ended: the first four pushed out by the 4 097th
    // to 4 100th (4 096 are followed at once), the rest at the end.
    assert_eq!(rows.len(), 4_100);
    for (n, row) in rows.iter().enumerate() {
        assert_eq!(&row[transport], "quic");
        assert_eq!(row[id].parse::<usize>(), Ok(n + 1), "in id order");
    }
    assert_eq!(&rows[0][client], "10.0.0.1:10000");
    let err = stderr(&out);
    assert!(
        err.contains("4 QUIC connections past the first 4096 are in the figures, JSON Lines and CSV, but not in the table or summary.quic.list"),
        "{err}"
    );
    // The same warning in JSON, whose list holds the same 4 096.
    let v = json_of(&analyze_with(&capture, &["-q", "-T", "json"]));
    assert_eq!(v["summary"]["quic"]["not_listed"], 4);
    assert_eq!(v["summary"]["quic_connections"], 4_100);
    let warned = v["summary"]["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .any(|w| {
            w.as_str()
                .is_some_and(|w| w.starts_with("4 QUIC connections past"))
        });
    assert!(warned, "{}", v["summary"]["warnings"]);
}
