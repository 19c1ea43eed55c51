//! `summary.servers`: the figures per server (address and port, SNI,
//! overlay). Checked three ways: against the records themselves, grouped
//! here by docs/json.md's definition, on every capture in captures/ and the
//! peer corpus (the summary's streaming counters never see a record); against
//! tshark's own connections and ClientHellos grouped the same way; and on
//! real captures of one client talking to several servers
//! (scripts/record-server-captures.sh), against what curl and nginx's log
//! say. That they do not depend on `--threads` is tests/threads.rs's: the
//! whole summary, on every capture and on generated traffic.

use std::collections::BTreeMap;
use std::path::Path;

use handshakes::record::{ServerSummary, TlsOutcome};
use handshakes::{ConnectionRecord, Summary};

use crate::h2_sizes::capture;
use crate::tools::{all_captures, analyze_path, tshark_present};

type Key = (String, Option<String>, Option<String>);
/// A server without its overlay: address and port, and SNI.
type Named = (String, Option<String>);
/// Per conn= of nginx's log: requests, a full and a resumed TLS handshake.
type Conns = BTreeMap<String, (u64, bool, bool)>;

/// A server's name: its SNI, or in cleartext the host its first request
/// named (docs/json.md, `servers`).
fn key_of(rec: &ConnectionRecord) -> Key {
    let name = match &rec.tls {
        Some(t) => t.sni.clone(),
        None => rec
            .http
            .host
            .as_deref()
            .and_then(|h| host_name(h, &rec.server)),
    };
    (rec.server.clone(), name, rec.overlay.map(|o| o.label()))
}

fn key(s: &ServerSummary) -> Key {
    (
        s.server.clone(),
        s.sni.clone().or(s.host.clone()),
        s.overlay.map(|o| o.label()),
    )
}

/// A request's host as a server's name: lower-cased, without its port,
/// none where it is the server's own address.
pub(crate) fn host_name(host: &str, server: &str) -> Option<String> {
    let host = host.to_ascii_lowercase();
    let name = match host.rfind(':') {
        Some(i) if !host[..i].contains(':') || host.starts_with('[') => &host[..i],
        _ => &host,
    };
    let address = &server[..server.rfind(':').unwrap_or(server.len())];
    let strip = |s: &str| s.replace(['[', ']'], "");
    (strip(name) != strip(&address.to_ascii_lowercase())).then(|| name.to_owned())
}

/// What docs/json.md says a server's counts are, from its records.
#[derive(Debug, Default, PartialEq)]
struct Want {
    connections: u64,
    unused: u64,
    tcp_handshakes: u64,
    tls: [u64; 3],
    requests: u64,
    estimated: u64,
    max_requests: u64,
    busy_tcp: u64,
    busy_tls_full: u64,
    responses_429: u64,
    classes: BTreeMap<String, u64>,
    close: BTreeMap<String, u64>,
    tls_handshakes: u64,
    /// Connections the server closed after a response; requests after a close.
    closed_by_server: u64,
    requests_after_close: u64,
}

fn want_of(records: &[ConnectionRecord]) -> BTreeMap<Key, Want> {
    let mut servers: BTreeMap<Key, Want> = BTreeMap::new();
    for r in records {
        let w = servers.entry(key_of(r)).or_default();
        w.connections += 1;
        w.tcp_handshakes += u64::from(r.tcp.handshake.complete);
        let mut full = false;
        if let Some(t) = &r.tls {
            match t.outcome {
                TlsOutcome::Complete if t.resumed => w.tls[1] += 1,
                TlsOutcome::Complete => {
                    w.tls[0] += 1;
                    full = true;
                }
                TlsOutcome::Failed => w.tls[2] += 1,
                _ => {}
            }
            w.tls_handshakes += u64::from(t.handshake.is_some());
        }
        // Served: those sent after the connection's close never were.
        let n = r.http.requests - r.close.requests_after;
        w.requests += n;
        if r.http.estimated {
            w.estimated += n;
        }
        w.max_requests = w.max_requests.max(n);
        if n == 0 {
            w.unused += 1;
        } else {
            w.busy_tcp += u64::from(r.tcp.handshake.syn.is_some());
            w.busy_tls_full += u64::from(full);
        }
        for (&code, &k) in &r.http.status_codes {
            let class = match code {
                100..=599 => format!("{}xx", code / 100),
                _ => "other".to_owned(),
            };
            *w.classes.entry(class).or_default() += k;
            if code == 429 {
                w.responses_429 += k;
            }
        }
        *w.close.entry(r.close.kind.as_str().to_owned()).or_default() += 1;
        let by_server = r.close.by == Some(handshakes::record::Side::Server);
        w.closed_by_server += u64::from(by_server && r.close.idle.is_some());
        w.requests_after_close += r.close.requests_after;
    }
    servers
}

fn got_of(s: &ServerSummary) -> Want {
    let per = |n: u64| (s.requests > 0).then(|| n as f64 / s.requests as f64);
    let back = |ratio: Option<f64>| ratio.map_or(0, |r| (r * s.requests as f64).round() as u64);
    assert_eq!(s.handshakes_per_request.tcp.is_some(), s.requests > 0);
    let got = Want {
        connections: s.connections,
        unused: s.connections_unused,
        tcp_handshakes: s.tcp_handshakes,
        tls: [
            s.tls_handshakes_full,
            s.tls_handshakes_resumed,
            s.tls_handshakes_failed,
        ],
        requests: s.requests,
        estimated: s.requests_estimated,
        max_requests: s.requests_per_connection.max.unwrap_or(0),
        busy_tcp: back(s.handshakes_per_request.tcp),
        busy_tls_full: back(s.handshakes_per_request.tls_full),
        responses_429: s.responses_429,
        classes: s.status_classes.clone(),
        close: s.close.clone(),
        tls_handshakes: s.tls_handshake.connections,
        closed_by_server: s.closed_by_server.connections,
        requests_after_close: s.requests_after_close,
    };
    assert_eq!(
        per(got.busy_tcp),
        s.handshakes_per_request.tcp,
        "{}",
        s.server
    );
    got
}

/// Every count of `summary.servers` is that of its records grouped by
/// server, the servers come most connections first, and they add up to
/// the summary's totals: on every capture here and in the peer corpus.
#[test]
fn servers_are_their_records_grouped_on_every_capture() {
    let files = all_captures();
    assert!(files.len() > 100, "the captures are there");
    let mut several = 0;
    for (name, path) in files {
        let (summary, records) = analyze_path(&path);
        let want = want_of(&records);
        assert!(summary.servers_not_listed.is_none(), "{name}");
        assert_eq!(summary.servers.len(), want.len(), "{name}: servers");
        for s in &summary.servers {
            let w = want
                .get(&key(s))
                .unwrap_or_else(|| panic!("{name}: {:?} has no records", key(s)));
            assert_eq!(&got_of(s), w, "{name}: {:?}", key(s));
        }
        let order: Vec<(u64, u64)> = summary
            .servers
            .iter()
            .map(|s| (s.connections, s.requests))
            .collect();
        let mut sorted = order.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(order, sorted, "{name}: most connections first");
        adds_up(&name, &summary);
        several += usize::from(summary.servers.len() > 1);
    }
    assert!(several >= 10, "captures with several servers: {several}");
}

/// The servers' counts added up are the summary's.
fn adds_up(name: &str, s: &Summary) {
    let sum = |f: fn(&ServerSummary) -> u64| s.servers.iter().map(f).sum::<u64>();
    let limited = s.status_codes.get("429").copied().unwrap_or(0);
    let counts = [
        ("connections", sum(|v| v.connections), s.connections),
        (
            "unused",
            sum(|v| v.connections_unused),
            s.connections_unused,
        ),
        ("TCP", sum(|v| v.tcp_handshakes), s.tcp_handshakes),
        (
            "TLS full",
            sum(|v| v.tls_handshakes_full),
            s.tls_handshakes_full,
        ),
        (
            "resumed",
            sum(|v| v.tls_handshakes_resumed),
            s.tls_handshakes_resumed,
        ),
        (
            "failed",
            sum(|v| v.tls_handshakes_failed),
            s.tls_handshakes_failed,
        ),
        ("requests", sum(|v| v.requests), s.requests),
        (
            "estimated",
            sum(|v| v.requests_estimated),
            s.requests_estimated,
        ),
        ("429", sum(|v| v.responses_429), limited),
    ];
    for (what, servers, summary) in counts {
        assert_eq!(servers, summary, "{name}: {what}");
    }
    let mut close = BTreeMap::new();
    for v in &s.servers {
        for (k, n) in &v.close {
            *close.entry(k.clone()).or_insert(0) += n;
        }
    }
    assert_eq!(close, s.close, "{name}");
    // The setup time: the summary's sum in seconds, the servers' each
    // in whole nanoseconds.
    let total: f64 = s.servers.iter().map(|v| v.handshake_time.total).sum();
    let n: u64 = sum(|v| v.handshake_time.connections);
    assert_eq!(n, s.handshake_time.connections, "{name}");
    assert!(
        (total - s.handshake_time.total).abs() <= 1e-9 * (n as f64 + 1.0) + 1e-9 * total,
        "{name}: {total} against {}",
        s.handshake_time.total
    );
    // The setup's steps: each server's, added up, are the summary's.
    let phases: Vec<_> = s
        .servers
        .iter()
        .filter_map(|v| v.setup_phases.as_ref())
        .collect();
    match &s.handshake_time.phases {
        Some(p) => {
            let n: u64 = phases.iter().map(|q| q.connections).sum();
            assert_eq!(n, p.connections, "{name}");
            let steps: [fn(&handshakes::record::SetupPhases) -> f64; 4] = [
                |q| q.connect,
                |q| q.before_client_hello,
                |q| q.tls_handshake,
                |q| q.to_request,
            ];
            for step in steps {
                let total: f64 = phases.iter().map(|q| step(q)).sum();
                assert!((total - step(p)).abs() <= 1e-9 * (n as f64 + 1.0), "{name}");
            }
        }
        None => assert!(phases.is_empty(), "{name}"),
    }
    let tls: u64 = sum(|v| v.tls_handshake.connections);
    assert_eq!(tls, s.tls_handshake.count, "{name}");
}

/// tshark's TCP streams that began with a SYN, grouped by the SYN's
/// destination and the SNI of the stream's first ClientHello: how many
/// streams each, and how many of them sent a ClientHello.
/// tshark's streams grouped by server: address and port, and the SNI of
/// its ClientHello, or in cleartext the host of its first request (HTTP
/// decoded on `http_ports`).
fn tshark_servers(path: &Path, http_ports: &[String]) -> Option<BTreeMap<Named, (u64, u64)>> {
    let fields = |filter: &str, fields: &[&str]| -> Option<Vec<Vec<String>>> {
        let mut first = vec!["-E".to_owned(), "occurrence=f".to_owned()];
        for port in http_ports {
            first.extend(["-d".to_owned(), format!("tcp.port=={port},http")]);
        }
        let text = crate::tools::tshark_fields(path, &first, filter, fields)?;
        Some(
            text.lines()
                .map(|l| l.split('\t').map(str::to_owned).collect())
                .collect(),
        )
    };
    let syn = "tcp.flags.syn == 1 && tcp.flags.ack == 0";
    let mut servers: BTreeMap<u64, String> = BTreeMap::new();
    for f in fields(syn, &["tcp.stream", "ip.dst", "ipv6.dst", "tcp.dstport"])? {
        let (stream, v4, v6, port) = (&f[0], &f[1], &f[2], &f[3]);
        let server = if v6.is_empty() {
            format!("{v4}:{port}")
        } else {
            format!("[{v6}]:{port}")
        };
        servers.entry(stream.parse().ok()?).or_insert(server);
    }
    let hello = "tls.handshake.type == 1";
    let mut snis: BTreeMap<u64, Option<String>> = BTreeMap::new();
    for f in fields(
        hello,
        &["tcp.stream", "tls.handshake.extensions_server_name"],
    )? {
        let sni = f.get(1).filter(|s| !s.is_empty()).cloned();
        snis.entry(f[0].parse().ok()?).or_insert(sni);
    }
    let mut hosts: BTreeMap<u64, String> = BTreeMap::new();
    let request = "http.request && !(http.request.uri contains \"://\")";
    for f in fields(request, &["tcp.stream", "http.host"])? {
        if let Some(host) = f.get(1).filter(|h| !h.is_empty()) {
            hosts.entry(f[0].parse().ok()?).or_insert(host.clone());
        }
    }
    let mut grouped = BTreeMap::new();
    for (stream, server) in servers {
        let sni = snis.get(&stream);
        let host = hosts.get(&stream).filter(|_| sni.is_none());
        let name = match host {
            Some(host) => host_name(host, &server),
            None => sni.cloned().flatten(),
        };
        let e = grouped.entry((server, name)).or_insert((0, 0));
        e.0 += 1;
        e.1 += u64::from(sni.is_some());
    }
    Some(grouped)
}

/// Where every connection began with a SYN, our servers and tshark's
/// streams grouped the same way have the same connections, and as many
/// of them carried TLS.
#[test]
fn servers_match_tsharks_streams_grouped_by_server_and_sni() {
    if !tshark_present() {
        return;
    }
    let mut compared = 0;
    for (name, path) in all_captures() {
        if name.ends_with(".gz") {
            continue;
        }
        let (summary, records) = analyze_path(&path);
        let plain = summary.overlays.is_empty()
            && records.iter().all(|r| r.tcp.handshake.syn.is_some())
            && summary.servers.len() > 1;
        if !plain {
            continue;
        }
        let cleartext = records.iter().filter(|r| r.tls.is_none());
        let ports = cleartext.filter_map(|r| r.server.rsplit(':').next().map(str::to_owned));
        let ports: Vec<String> = ports
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let Some(theirs) = tshark_servers(&path, &ports) else {
            panic!("{name}: tshark fails");
        };
        let mut tls = BTreeMap::new();
        for r in &records {
            let (server, sni, _) = key_of(r);
            *tls.entry((server, sni)).or_insert(0u64) += u64::from(r.tls.is_some());
        }
        let ours: BTreeMap<Named, (u64, u64)> = summary
            .servers
            .iter()
            .map(|s| {
                let k = (s.server.clone(), s.sni.clone().or(s.host.clone()));
                (k.clone(), (s.connections, tls[&k]))
            })
            .collect();
        assert_eq!(ours, theirs, "{name}");
        compared += 1;
    }
    assert!(compared >= 5, "captures compared: {compared}");
}

/// Per server, from nginx's log of a run (`server=`, `sni=`, `conn=`,
/// `tls=`, `reused=`): (connections, requests, full and resumed TLS
/// handshakes).
fn nginx_servers(log: &str) -> BTreeMap<Named, (u64, u64, u64, u64)> {
    let text = std::fs::read_to_string(capture(log)).expect("the log");
    let mut conns: BTreeMap<Named, Conns> = BTreeMap::new();
    for line in text.lines() {
        let field = |name: &str| {
            line.split(' ')
                .find_map(|w| w.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} in {line}"))
                .to_owned()
        };
        let server = field("server=");
        // nginx writes `::1:18080`; a record, `[::1]:18080`.
        let server = match server.rsplit_once(':') {
            Some((addr, port)) if addr.contains(':') => format!("[{addr}]:{port}"),
            _ => server,
        };
        let sni = Some(field("sni=")).filter(|s| s != "-");
        let tls = field("tls=") != "-";
        let conn = conns.entry((server, sni)).or_default();
        let e = conn.entry(field("conn=")).or_insert((0, false, false));
        e.0 += 1;
        e.1 = tls && field("reused=") == ".";
        e.2 = tls && field("reused=") == "r";
    }
    conns
        .into_iter()
        .map(|(k, c)| {
            let n = |f: fn(&(u64, bool, bool)) -> bool| c.values().filter(|v| f(v)).count() as u64;
            let requests = c.values().map(|v| v.0).sum();
            (k, (c.len() as u64, requests, n(|v| v.1), n(|v| v.2)))
        })
        .collect()
}

/// One curl keeping a connection per host, and python `requests` with a
/// Session for one name and `requests.get` (a connection each) for another
/// served at the same address: each server's connections, requests and
/// TLS handshakes are nginx's, and the server a client does not reuse
/// connections to comes first in the table.
#[test]
fn several_servers_of_real_clients_are_the_servers_log() {
    for (name, first, unreused) in [
        ("multi-server-curl", "127.0.0.1:18443 (a.test)", None),
        (
            "multi-server-requests",
            "127.0.0.1:18443 (b.test)",
            Some("; but no reuse to 127.0.0.1:18443 (b.test): 5 requests on 5 connections"),
        ),
    ] {
        let pcap = capture(&format!("{name}.pcap"));
        let keylog = capture(&format!("{name}.keylog"));
        let logged = nginx_servers(&format!("{name}.nginx-access.log"));
        let run = |keys: bool| {
            let mut cmd = crate::support::bin();
            cmd.args(["analyze", "-q", "-T", "json"]).arg(&pcap);
            if keys {
                cmd.arg("--keylog").arg(&keylog);
            }
            crate::support::json_of(&cmd.output().unwrap())
        };
        let v = run(true);
        let ours: BTreeMap<Named, (u64, u64, u64, u64)> = v["summary"]["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .map(|s| {
                let n = |k: &str| s[k].as_u64().unwrap();
                let sni = s["sni"].as_str().map(str::to_owned);
                let key = (s["server"].as_str().unwrap().to_owned(), sni);
                let counts = (
                    n("connections"),
                    n("requests"),
                    n("tls_handshakes_full"),
                    n("tls_handshakes_resumed"),
                );
                (key, counts)
            })
            .collect();
        assert_eq!(ours, logged, "{name}");
        let verdict = v["summary"]["verdict"].as_str().unwrap();
        match unreused {
            // The clause ends the verdict, or comes before the next one.
            Some(clause) => assert!(
                verdict.ends_with(clause) || verdict.contains(&format!("{clause}; ")),
                "{name}: {verdict}"
            ),
            None => assert!(!verdict.contains("no reuse"), "{name}: {verdict}"),
        }
        assert!(ours.len() >= 3, "{name}: several servers");
        // Without the key log, the same connections and handshakes; the
        // requests over TLS estimated from its records (here, right).
        let sealed = run(false);
        assert_eq!(
            sealed["summary"]["servers"].as_array().map(Vec::len),
            Some(ours.len())
        );
        let mut cmd = crate::support::bin();
        cmd.args(["analyze", "-q"]).arg(&pcap);
        let table = crate::support::stdout(&cmd.output().unwrap());
        let rows: Vec<&str> = table
            .lines()
            .skip_while(|l| !l.starts_with("servers "))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(rows.len(), ours.len(), "{name}: {table}");
        assert!(rows[0].ends_with(first), "{name}: {}", rows[0]);
        // The HTML report's table: the same servers, in the same order.
        let html = crate::support::analyze_html(&pcap, &[]).1;
        let table = html
            .split("<h3>Servers</h3>")
            .nth(1)
            .and_then(|t| t.split("</table>").next())
            .unwrap_or_else(|| panic!("{name}: a Servers table"));
        let cells: Vec<&str> = table
            .split("<td>")
            .skip(1)
            .filter_map(|c| c.split("</td>").next())
            .collect();
        let names: Vec<&str> = rows
            .iter()
            .map(|r| r.rsplit("  ").next().unwrap())
            .collect();
        assert_eq!(cells, names, "{name}");
    }
}

/// With one server the summary is that server's: no block, no table.
#[test]
fn one_server_has_no_servers_block() {
    let pcap = capture("java-urlconnection-noka-retry-now.pcap");
    let (table, html) = crate::support::analyze_html(&pcap, &[]);
    assert!(table.contains("verdict "), "{table}");
    assert!(!table.contains("servers "), "{table}");
    assert!(!html.contains("<h3>Servers</h3>"));
    let v = crate::support::run_json(&pcap);
    assert_eq!(v["summary"]["servers"].as_array().map(Vec::len), Some(1));
}

/// `compare`'s servers table: each capture's servers matched by SNI and
/// port (or address and port), the one with most connections first, a `-`
/// where a capture has no connection to it; none when every capture went
/// to one server.
#[test]
fn compare_puts_the_servers_side_by_side() {
    let curl = capture("multi-server-curl.pcap");
    let requests = capture("multi-server-requests.pcap");
    let run = |files: &[&Path], html: Option<&Path>| {
        let mut cmd = crate::support::bin();
        cmd.args(["compare", "-q"]).args(files);
        if let Some(h) = html {
            cmd.arg("--html").arg(h);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", crate::support::stderr(&out));
        crate::support::stdout(&out)
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("compare.html");
    let text = run(&[&curl, &requests], Some(&html));
    let verdict = text.lines().find(|l| l.starts_with("verdict ")).unwrap();
    assert!(
        verdict.contains(
            "; by server, 127.0.0.1:18443 (b.test): 1.00 vs 0.33 TCP handshakes per request;"
        ),
        "{verdict}"
    );
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("servers "))
        .filter(|l| l.starts_with('│'))
        .collect();
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_owned())
            .collect()
    };
    let rows: Vec<Vec<String>> = block.iter().skip(1).map(|l| cells(l)).collect();
    assert_eq!(
        rows,
        [
            // python's requests.get for b.test: each connection opened
            // while the one before sat idle.
            [
                "127.0.0.1:18443 (b.test)",
                "1 / 3 · 0.33",
                "5 / 5 · 1.00 · 4 missed"
            ],
            ["127.0.0.1:18443 (a.test)", "1 / 3 · 0.33", "1 / 5 · 0.20"],
            ["127.0.0.1:18080", "1 / 2 · 0.50", "1 / 4 · 0.25"],
            ["[::1]:18080", "1 / 2 · 0.50", "-"],
        ],
        "{text}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    let table = html
        .split("<h3>Servers</h3>")
        .nth(1)
        .expect("a Servers table");
    assert!(table.contains("<td>127.0.0.1:18443 (b.test)</td><td class=\"n\">1 / 3 · 0.33</td><td class=\"n\">5 / 5 · 1.00 · 4 missed</td>"), "{table}");
    // Three captures: a column each; two of one server: no table.
    let three = run(&[&curl, &requests, &curl], None);
    let head = three
        .lines()
        .skip_while(|l| !l.starts_with("servers "))
        .nth(2)
        .unwrap_or_default();
    assert_eq!(cells(head).len(), 4, "{three}");
    let single = capture("java-urlconnection-noka-retry-now.pcap");
    let one = run(&[&single, &single], None);
    assert!(!one.contains("servers "), "{one}");
    assert!(!one.contains("by server"), "{one}");
    // The same capture twice: no server differs.
    let same = run(&[&requests, &requests], None);
    assert!(!same.contains("by server"), "{same}");
}
