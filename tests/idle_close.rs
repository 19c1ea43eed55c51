//! `close.idle`, `close.requests_after` and `summary.idle_closes`: who
//! closed a connection and how long after its last response, and the
//! requests a client sent on a connection the server had already closed —
//! on synthetic traffic with exact times here, and on real captures of a
//! server closing idle keep-alive connections (captures/README.md,
//! *Servers closing idle connections*).

use serde_json::Value;

use crate::support::tls::{opened_at, report, SendBytes};
use crate::support::{at, ms, Side, T0};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

#[test]
fn a_server_closing_an_idle_connection_and_a_request_sent_after_it() {
    // Two requests answered; the server closes 1 s after the second answer
    // ends (nginx's keepalive_timeout 1s); 1 s later the client, whose pool
    // still holds the connection, sends a third request on it and the
    // server answers with an RST.
    let mut stale = opened_at("10.0.0.1:40000", "10.0.0.2:80", T0);
    stale
        .send(Side::Client, T0 + ms(1), GET)
        .send(Side::Server, T0 + ms(2), OK)
        .send(Side::Client, T0 + ms(10), GET)
        .send(Side::Server, T0 + ms(12), OK)
        .fin(Side::Server, T0 + ms(1012))
        .ack(T0 + ms(1013))
        .send(Side::Client, T0 + ms(2012), GET)
        .rst(Side::Server, T0 + ms(2013));
    // The client closes its own after 5 ms.
    let mut own = opened_at("10.0.0.1:40001", "10.0.0.2:80", T0 + ms(3000));
    own.send(Side::Client, T0 + ms(3001), GET)
        .send(Side::Server, T0 + ms(3002), OK)
        .close(Side::Client, T0 + ms(3007), T0 + ms(3008), T0 + ms(3009));
    let v = report(&[&stale, &own]);
    let close = |i: usize| at(&v, &format!("/connections/{i}/close")).clone();
    let first = close(0);
    assert_eq!(first["by"], "server");
    assert_eq!(first["idle"].as_f64(), Some(1.0), "{first}");
    assert_eq!(first["requests_after"], 1);
    assert_eq!(at(&v, "/connections/0/http/requests"), 3);
    let second = close(1);
    assert_eq!(second["by"], "client");
    assert_eq!(second["idle"].as_f64(), Some(0.005), "{second}");
    assert_eq!(second["requests_after"], 0);
    let idle = at(&v, "/summary/idle_closes");
    assert_eq!(idle["by_server"]["count"], 1);
    assert_eq!(idle["by_server"]["median"].as_f64(), Some(1.0));
    assert_eq!(idle["by_client"]["median"].as_f64(), Some(0.005));
    assert_eq!(idle["requests_after_close"], 1);
    // The request sent on the closed connection was never served: the
    // summary counts the three that were.
    assert_eq!(at(&v, "/summary/requests"), 3);
    assert_eq!(at(&v, "/summary/requests_per_connection/max"), 2);
    assert_eq!(idle["connections_with_requests_after_close"], 1);
}

#[test]
fn no_response_no_idle_and_an_answer_after_a_half_close_is_not_idle() {
    // A connection closed by the client before any answer; and one whose
    // client half-closes after its request (HTTP/1.0 style), answered after.
    let mut unanswered = opened_at("10.0.0.1:40000", "10.0.0.2:80", T0);
    unanswered
        .send(Side::Client, T0 + ms(1), GET)
        .rst(Side::Client, T0 + ms(500));
    let mut half = opened_at("10.0.0.1:40001", "10.0.0.2:80", T0);
    half.send(Side::Client, T0 + ms(1), GET)
        .fin(Side::Client, T0 + ms(2))
        .send(Side::Server, T0 + ms(3), OK)
        .fin(Side::Server, T0 + ms(4))
        .ack(T0 + ms(5));
    let v = report(&[&unanswered, &half]);
    for i in 0..2 {
        let close = at(&v, &format!("/connections/{i}/close"));
        assert_eq!(close["idle"], Value::Null, "{close}");
        assert_eq!(close["requests_after"], 0, "{close}");
    }
    assert_eq!(at(&v, "/summary/idle_closes/by_client/count"), 0);
}

/// What tshark sees of each TCP stream of `pcap` (server port `port`):
/// who sent the first FIN or RST, the seconds from the server's last
/// payload before it to it, and the client's segments with payload after it.
fn tshark_closes(pcap: &std::path::Path, port: u16) -> Vec<(&'static str, Option<f64>, u64)> {
    let fields = [
        "tcp.stream",
        "frame.time_relative",
        "tcp.srcport",
        "tcp.flags.fin",
        "tcp.flags.reset",
        "tcp.len",
        "tls.record.content_type",
        "tls.record.opaque_type",
        "tls.record.length",
    ];
    let options = [
        "-d".to_owned(),
        format!("tcp.port=={port},tls"),
        "-E".to_owned(),
        "aggregator=;".to_owned(),
    ];
    let text = crate::tools::tshark_fields(pcap, &options, "tcp", &fields)
        .unwrap_or_else(|| panic!("tshark fails on {}", pcap.display()));
    // Per stream: the server's last payload, the first close, the client's
    // payload after it.
    type Stream = (Option<f64>, Option<(&'static str, f64)>, u64);
    let mut streams: std::collections::BTreeMap<u64, Stream> = Default::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (Some(Ok(stream)), Some(Ok(t))) = (
            f.first().map(|v| v.parse::<u64>()),
            f.get(1).map(|v| v.parse::<f64>()),
        ) else {
            continue;
        };
        let from_server = f.get(2).is_some_and(|p| *p == port.to_string());
        let set = |k: usize| f.get(k).is_some_and(|v| *v == "1" || *v == "True");
        let payload = f.get(5).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) > 0;
        // Over TLS a response is application data (23); nginx's
        // close_notify alert (21) before its FIN is not one — sealed (no
        // key log), it is a record of 19 bytes (2 + its type + the AEAD's
        // 16-byte tag), as every response record here is longer.
        let field = |k: usize| f.get(k).copied().unwrap_or_default();
        let (inner, outer, lengths) = (field(6), field(7), field(8));
        let response = payload
            && match (inner.is_empty(), outer.is_empty()) {
                (false, _) => inner.split(';').any(|t| t == "23"),
                (true, false) => lengths.split(';').any(|n| n != "19"),
                (true, true) => true,
            };
        let s = streams.entry(stream).or_default();
        match s.1 {
            None if response && from_server => s.0 = Some(t),
            Some(_) if payload && !from_server => s.2 += 1,
            _ => {}
        }
        if s.1.is_none() && (set(3) || set(4)) {
            s.1 = Some((if from_server { "server" } else { "client" }, t));
        }
    }
    streams
        .into_values()
        .map(|(last, close, after)| {
            let (by, at) = close.unwrap_or(("", f64::NAN));
            (by, last.map(|l| at - l), after)
        })
        .collect()
}

#[test]
fn real_clients_against_a_server_closing_idle_connections_as_tshark_and_nginx_see_them() {
    use crate::h2_sizes::capture;
    use crate::tools::tshark_present;
    if !tshark_present() {
        return;
    }
    // nginx with keepalive_timeout 1s; each client sends 5 GETs, 2 s apart
    // (0.5 s in the control): captures/README.md, au–az — in cleartext on
    // port 18470, over TLS 1.3 on 18471 (HttpsURLConnection's requests
    // estimated from the records, python's read with its key log).
    for (name, port, connections, stale) in [
        ("idle-urlconnection-keepalive", 18470, 5, 4),
        ("idle-httpclient", 18470, 5, 0),
        ("idle-requests-session", 18470, 5, 0),
        ("idle-urlconnection-keepalive-05", 18470, 1, 0),
        ("idle-urlconnection-tls", 18471, 5, 4),
        ("idle-requests-tls", 18471, 5, 0),
    ] {
        let pcap = capture(&format!("{name}.pcap"));
        // The key log rides beside its capture, where there is one.
        let keylog = capture(&format!("{name}.keylog"));
        let keylog = keylog.exists().then_some(keylog);
        let records = crate::keylog::analyze_file(&pcap, keylog.as_deref(), 1);
        let s = crate::over_time::summary_of(&pcap, keylog.as_deref());
        assert_eq!(records.len(), connections, "{name}");
        // The requests nginx logged: those sent after a close never reached it.
        let logged = crate::h2_sizes::nginx_requests(&format!("{name}.nginx-access.log"));
        let logged: u64 = logged.values().sum();
        assert_eq!(s.requests, logged, "{name}");
        assert_eq!(s.requests, 5, "{name}");
        assert_eq!(s.idle_closes.requests_after_close, stale, "{name}");
        let theirs = tshark_closes(&pcap, port);
        assert_eq!(theirs.len(), records.len(), "{name}");
        for (r, (by, idle, after)) in records.iter().zip(&theirs) {
            assert_eq!(
                r.close.by.map(|s| s.as_str()),
                Some(*by),
                "{name} #{}",
                r.id
            );
            assert_eq!(r.close.requests_after, *after, "{name} #{}", r.id);
            let ours = r.close.idle.unwrap_or(f64::NAN);
            let theirs = idle.unwrap_or(f64::NAN);
            assert!(
                (ours - theirs).abs() < 2e-6,
                "{name} #{}: {ours} vs {theirs}",
                r.id
            );
        }
        // The verdict names the keep-alive timeout where it cost handshakes.
        let timeout = "; the server closed 4 of them after 1.00s idle (its keep-alive timeout)";
        assert_eq!(
            s.verdict.contains(timeout),
            connections == 5,
            "{name}: {}",
            s.verdict
        );
        // nginx's keepalive_timeout: every server close a second after the response.
        let by_server = &s.idle_closes.by_server;
        if by_server.count > 0 {
            let (min, max) = (by_server.min.unwrap_or(0.0), by_server.max.unwrap_or(0.0));
            assert!(
                (1.0..1.01).contains(&min) && (1.0..1.01).contains(&max),
                "{name}: {by_server:?}"
            );
        }
    }
}

#[test]
fn compare_names_the_requests_sent_on_closed_connections() {
    use crate::support::{run, stdout};
    let out = run([
        "compare",
        "captures/idle-httpclient.pcap",
        "captures/idle-urlconnection-keepalive.pcap",
    ]);
    assert!(out.status.success());
    let text = stdout(&out);
    // Both paid a TCP handshake per request; HttpURLConnection lost four
    // round trips on the connections nginx had closed.
    assert!(
        text.contains("B used as many TCP handshakes per request as A (1.00 each)"),
        "{text}"
    );
    assert!(
        text.contains("; 4 vs 0 requests sent on connections the server had closed;"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("requests sent after their connection's close"))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split('┆').map(str::trim).collect();
    assert_eq!(cells.get(1..3), Some(&["0", "4"][..]), "{row}");
}

#[test]
fn the_servers_block_shows_which_server_closes_idle_connections() {
    use crate::support::{analyze_with, pcap_of, stdout, Link};
    // Two backends: one closes each connection 1 s after its answer (its
    // keep-alive timeout), the other's connections the client closes.
    let mut convs = Vec::new();
    for (i, (server, by)) in [
        ("10.0.0.2:80", Side::Server),
        ("10.0.0.2:80", Side::Server),
        ("10.0.0.3:80", Side::Client),
    ]
    .into_iter()
    .enumerate()
    {
        let t = T0 + ms(3000 * i as i64);
        let mut c = opened_at(&format!("10.0.0.1:{}", 40000 + i), server, t);
        c.send(Side::Client, t + ms(1), GET)
            .send(Side::Server, t + ms(2), OK);
        let close = if by == Side::Server { 1002 } else { 7 };
        c.close(by, t + ms(close), t + ms(close + 1), t + ms(close + 2));
        convs.push(c);
    }
    let refs: Vec<&crate::support::Conv> = convs.iter().collect();
    let out = analyze_with(&pcap_of(Link::Ethernet, &refs), &[]);
    let text = stdout(&out);
    let row = |server: &str| {
        text.lines()
            .find(|l| l.starts_with("              ") && l.ends_with(server))
            .unwrap_or_else(|| panic!("no row for {server}: {text}"))
            .split_whitespace()
            .nth(8)
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(row("10.0.0.2:80 (x)"), "1.00s", "{text}");
    assert_eq!(row("10.0.0.3:80 (x)"), "-", "{text}");
    let v = report(&refs);
    let first = at(&v, "/summary/servers/0");
    assert_eq!(first["server"], "10.0.0.2:80");
    assert_eq!(first["closed_by_server"]["connections"], 2);
    assert_eq!(first["closed_by_server"]["mean"].as_f64(), Some(1.0));
}
