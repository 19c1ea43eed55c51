//! `summary.handshake_time.phases`: each connection's setup cut at the
//! SYN, the ACK completing the TCP handshake, the ClientHello, the TLS
//! handshake's last Finished and the first request, added up — against
//! the same instants read by tshark (with each capture's key log, so that
//! the Finished messages and the requests inside TLS are its own), on real
//! captures of curl, python requests and Java over TLS 1.2, 1.3 and
//! cleartext.

use std::collections::BTreeMap;
use std::path::Path;

use crate::h2_sizes::capture;
use crate::tools::{analyze_path, tshark_present};

/// A stream's instants, as tshark reads them.
#[derive(Default, Debug)]
struct Steps {
    client_port: Option<String>,
    syn: Option<f64>,
    ack: Option<f64>,
    hello: Option<f64>,
    finished: Option<f64>,
    request: Option<f64>,
}

/// tshark's setup steps per TCP stream of `pcap`, TLS read on `tls_ports`
/// with `keylog`, HTTP on `http_ports`.
fn tshark_steps(
    pcap: &Path,
    keylog: Option<&Path>,
    tls_ports: &[u16],
    http_ports: &[u16],
) -> BTreeMap<u64, Steps> {
    let mut options = Vec::new();
    if let Some(k) = keylog {
        options.extend(["-o".to_owned(), format!("tls.keylog_file:{}", k.display())]);
    }
    for p in tls_ports {
        options.extend(["-d".to_owned(), format!("tcp.port=={p},tls")]);
    }
    for p in http_ports {
        options.extend(["-d".to_owned(), format!("tcp.port=={p},http")]);
    }
    // A request where its headers end, not its body (a POST's body may
    // follow in later records): its first byte, for the one-frame headers
    // of these clients.
    options.extend(["-o", "http.desegment_body:FALSE", "-E", "aggregator=;"].map(str::to_owned));
    let fields = [
        "tcp.stream",
        "frame.time_relative",
        "tcp.srcport",
        "tcp.flags.syn",
        "tcp.flags.ack",
        "tls.handshake.type",
        "http.request",
        "tcp.len",
    ];
    let text = crate::tools::tshark_fields(pcap, &options, "tcp", &fields)
        .unwrap_or_else(|| panic!("tshark fails on {}", pcap.display()));
    let mut streams: BTreeMap<u64, Steps> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (Ok(stream), Ok(t)) = (f[0].parse::<u64>(), f[1].parse::<f64>()) else {
            continue;
        };
        let s = streams.entry(stream).or_default();
        let (syn, ack) = (f[3] == "1", f[4] == "1");
        let from_client = s.client_port.as_deref() == Some(f[2]);
        if syn && !ack {
            s.syn.get_or_insert(t);
            s.client_port.get_or_insert_with(|| f[2].to_owned());
            continue;
        }
        if !from_client {
            // The server's Finished counts: TLS 1.2's full handshake ends on it.
            if f[5].split(';').any(|t| t == "20") {
                s.finished = Some(t);
            }
            continue;
        }
        if ack && !syn && s.ack.is_none() {
            s.ack = Some(t);
        }
        let types: Vec<&str> = f[5].split(';').collect();
        if types.contains(&"1") {
            s.hello.get_or_insert(t);
        }
        let finished = types.contains(&"20");
        if finished && s.request.is_none() {
            s.finished = Some(t);
        }
        // The first request byte: a frame with an HTTP request in it, or
        // the first one with payload after the client's Finished (a TLS
        // 1.0 client splits its first record 1/n-1, and tshark marks the
        // request in the frame that ends its headers).
        let payload = f[7].parse::<u64>().is_ok_and(|n| n > 0);
        let after_handshake = (s.finished.is_some() && !finished) || s.hello.is_none();
        if !f[6].is_empty() || payload && after_handshake {
            s.request.get_or_insert(t);
        }
    }
    streams
}

/// The four steps of every stream whose instants were all seen in order,
/// added up, and how many streams that was.
fn added_up(streams: &BTreeMap<u64, Steps>, tls: bool) -> (u64, [f64; 4]) {
    let mut n = 0;
    let mut sums = [0.0; 4];
    for s in streams.values() {
        let (Some(syn), Some(ack), Some(request)) = (s.syn, s.ack, s.request) else {
            continue;
        };
        let (hello, done) = if tls {
            let (Some(h), Some(d)) = (s.hello, s.finished) else {
                continue;
            };
            (h, d)
        } else {
            (ack, ack)
        };
        let steps = [syn, ack, hello, done, request];
        if steps.windows(2).any(|w| w[0] > w[1]) {
            continue;
        }
        n += 1;
        for (sum, (a, b)) in sums.iter_mut().zip(steps.iter().zip(&steps[1..])) {
            *sum += b - a;
        }
    }
    (n, sums)
}

#[test]
fn setup_phases_are_tsharks_instants_added_up() {
    if !tshark_present() {
        return;
    }
    // (capture, its key log) — every connection of one kind: TLS opened
    // with the key log, or cleartext.
    let tls = [
        "multi-server-requests",
        "tls12-curl-3-new-connections",
        "tls-python-requests-nosession-5",
        "tls-python-requests-session-5",
        "curl-h1-post-429-12",
        "tls-cbc-7",
    ];
    let clear = [
        "http-curl-5-new-connections",
        "java-urlconnection-noka-retry-now",
        "http-requests-newconn-retry-after",
    ];
    let mut compared = 0;
    for (name, is_tls) in tls
        .iter()
        .map(|n| (n, true))
        .chain(clear.iter().map(|n| (n, false)))
    {
        let pcap = capture(&format!("{name}.pcap"));
        let keylog = capture(&format!("{name}.keylog"));
        let mut cmd = crate::support::bin();
        cmd.args(["analyze", "-q", "-T", "json"]).arg(&pcap);
        if is_tls {
            cmd.arg("--keylog").arg(&keylog);
        }
        let v = crate::support::json_of(&cmd.output().unwrap());
        let phases = &v["summary"]["handshake_time"]["phases"];
        // The ports tshark is told to read, from the records' servers.
        let records = analyze_path(&pcap).1;
        let mut tls_ports = Vec::new();
        let mut http_ports = Vec::new();
        for r in &records {
            let port: u16 = r.server.rsplit(':').next().unwrap().parse().unwrap();
            let ports = if r.tls.is_some() {
                &mut tls_ports
            } else {
                &mut http_ports
            };
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let keys = is_tls.then_some(keylog.as_path());
        let mixed = !tls_ports.is_empty() && !http_ports.is_empty();
        let streams = tshark_steps(&pcap, keys, &tls_ports, &http_ports);
        // A capture of both kinds (multi-server-requests): each stream by
        // its own kind.
        let (n, sums) = if mixed {
            let (tls_streams, clear_streams): (BTreeMap<u64, Steps>, BTreeMap<u64, Steps>) =
                streams.into_iter().partition(|(_, s)| s.hello.is_some());
            let (a, x) = added_up(&tls_streams, true);
            let (b, y) = added_up(&clear_streams, false);
            (a + b, [x[0] + y[0], x[1] + y[1], x[2] + y[2], x[3] + y[3]])
        } else {
            added_up(&streams, is_tls)
        };
        assert!(n >= 1, "{name}: no connection split");
        compared += n;
        assert_eq!(phases["connections"], n, "{name}: {phases}");
        let keys = [
            "connect",
            "before_client_hello",
            "tls_handshake",
            "to_request",
        ];
        for (key, theirs) in keys.iter().zip(sums) {
            let ours = phases[key].as_f64().unwrap();
            // Microsecond timestamps, summed over n connections.
            assert!(
                (ours - theirs).abs() <= 2e-6 * n as f64,
                "{name}: {key} {ours} against tshark's {theirs}"
            );
        }
        if !is_tls {
            assert_eq!(phases["before_client_hello"], 0.0, "{name}");
            assert_eq!(phases["tls_handshake"], 0.0, "{name}");
        }
        // Together, the same connections' setup time.
        let total: f64 = keys.iter().map(|k| phases[*k].as_f64().unwrap()).sum();
        let setup = v["summary"]["handshake_time"]["total"].as_f64().unwrap();
        if phases["connections"] == v["summary"]["handshake_time"]["connections"] {
            assert!(
                (total - setup).abs() <= 1e-6 * n as f64,
                "{name}: {total} vs {setup}"
            );
        }
    }
    assert!(compared >= 30, "connections compared: {compared}");
}

/// The timeline and the HTML waterfall draw the client's wait before its
/// ClientHello as a phase of its own, as long as the record's ACK →
/// ClientHello: six TLS connections of python `requests`, 19–21 ms each.
#[test]
fn the_wait_before_the_client_hello_is_drawn() {
    let pcap = capture("multi-server-requests.pcap");
    let records = analyze_path(&pcap).1;
    let waits: Vec<String> = records
        .iter()
        .filter_map(|r| {
            let ack = r.tcp.handshake.ack?.at;
            let hello = r.tls.as_ref()?.client_hello?.at;
            Some(handshakes::report::human_duration(hello - ack))
        })
        .collect();
    assert_eq!(waits.len(), 6);
    let html = crate::support::analyze_html(&pcap, &[]).1;
    let drawn: Vec<&str> = html
        .split("client before its ClientHello: ")
        .skip(1)
        .filter_map(|t| t.split(' ').next())
        .collect();
    assert_eq!(drawn, waits);
    let mut cmd = crate::support::bin();
    cmd.args(["timeline", "--width", "100"])
        .arg(&pcap)
        .env("NO_COLOR", "1");
    let text = crate::support::stdout(&cmd.output().unwrap());
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" :4")).collect();
    assert_eq!(
        rows.iter().filter(|r| r.contains(">::")).count(),
        6,
        "{text}"
    );
}
