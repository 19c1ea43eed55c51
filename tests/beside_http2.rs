//! `summary.beside_http2`: connections opened while an HTTP/2 connection to
//! the same server was open — on synthetic h2c traffic with exact times,
//! and on the real captures against tshark (each stream's SYN, ClientHello
//! ALPN, first FIN or RST, and handshake's end) and nginx's access log
//! (which connections spoke HTTP/2 and carried requests).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use crate::http::{frame, END_HEADERS, END_STREAM, HEADERS, PREFACE, SETTINGS};
use crate::support::tls::{opened_at, report, SendBytes};
use crate::support::{at, us, Conv, Side, T0};

/// An h2c (prior knowledge) connection from `client` to `server` opened at
/// `opened` µs (its handshake's ACK 150 µs later), a request sent and
/// answered at each pair of µs, closed by the client at `close` µs.
fn h2c(
    client: &str,
    server: &str,
    opened: i64,
    requests: &[(i64, i64)],
    close: Option<i64>,
) -> Conv {
    let mut c = opened_at(client, server, T0 + us(opened));
    c.send(
        Side::Client,
        T0 + us(opened + 200),
        &[PREFACE, &frame(SETTINGS, 0, 0, 6)].concat(),
    )
    .send(
        Side::Server,
        T0 + us(opened + 250),
        &frame(SETTINGS, 0, 0, 0),
    );
    for (i, &(sent, answered)) in requests.iter().enumerate() {
        let stream = 2 * i as u32 + 1;
        let head = frame(HEADERS, END_STREAM | END_HEADERS, stream, 20);
        c.send(Side::Client, T0 + us(sent), &head)
            .send(Side::Server, T0 + us(answered), &head);
    }
    if let Some(t) = close {
        c.close(Side::Client, T0 + us(t), T0 + us(t + 1), T0 + us(t + 2));
    }
    c
}

#[test]
fn connections_opened_beside_an_open_http2_connection_count() {
    // 1 (id 1) is up at 150 µs and busy with a request from 1 ms to 400
    // ms, then idle until its close at 500 ms. 2 (id 2) opens at 100 µs,
    // before 1 is up: raced. 3 (id 3) opens at 10 ms beside 1, up and
    // busy. To port 8080 (id 4) and HTTP/1 (id 5, offering no HTTP/2):
    // not. 7 (id 6) opens at 410 ms while 1 sits idle: counted in
    // `opened_while_idle`, not here. 4 (id 7) opens at 600 ms, when every
    // HTTP/2 connection to the server has closed: not.
    let server = "10.0.0.2:80";
    let one = h2c(
        "10.0.0.1:40000",
        server,
        0,
        &[(1_000, 400_000)],
        Some(500_000),
    );
    let two = h2c(
        "10.0.0.1:40001",
        server,
        100,
        &[(1_000, 350_000)],
        Some(360_000),
    );
    let three = h2c(
        "10.0.0.1:40002",
        server,
        10_000,
        &[(11_000, 12_000)],
        Some(20_000),
    );
    let four = h2c(
        "10.0.0.1:40003",
        server,
        600_000,
        &[(601_000, 602_000)],
        None,
    );
    let other = h2c(
        "10.0.0.1:40004",
        "10.0.0.2:8080",
        10_050,
        &[(11_000, 12_000)],
        None,
    );
    let mut http1 = opened_at("10.0.0.1:40005", server, T0 + us(10_100));
    http1
        .send(
            Side::Client,
            T0 + us(11_000),
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .send(
            Side::Server,
            T0 + us(12_000),
            b"HTTP/1.1 204 No Content\r\n\r\n",
        )
        .close(
            Side::Client,
            T0 + us(13_000),
            T0 + us(13_001),
            T0 + us(13_002),
        );
    let seven = h2c(
        "10.0.0.1:40006",
        server,
        410_000,
        &[(420_000, 421_000)],
        Some(450_000),
    );
    let all = [&one, &two, &three, &four, &other, &http1, &seven];
    let v = report(&all);
    let b = at(&v, "/summary/beside_http2");
    assert_eq!(
        ["checked", "connections", "raced", "carried_none", "sealed"].map(|k| b[k].as_u64()),
        [6, 2, 1, 0, 0].map(Some),
        "{b}"
    );
    assert_eq!(
        b["first"],
        serde_json::json!([
            {"connection": 2, "http2_connection": 1, "raced": true, "carried_none": false,
             "sealed": false, "handshake": 0.00015},
            {"connection": 3, "http2_connection": 1, "raced": false, "carried_none": false,
             "sealed": false, "handshake": 0.00015}
        ])
    );
    assert_eq!(b["handshake_total"].as_f64(), Some(0.0003), "{b}");
    assert_eq!(b["out_of_order"], 0);
    assert_eq!(at(&v, "/summary/opened_while_idle/connections"), 1);
    assert_eq!(
        at(&v, "/summary/opened_while_idle/first/0/connection"),
        6,
        "an idle HTTP/2 connection passed over is counted once, there"
    );
    let verdict = at(&v, "/summary/verdict").as_str().unwrap_or_default();
    assert!(
        verdict.contains("; 2 connections were opened beside an HTTP/2 connection to the same server (1 while it was still in its handshake)"),
        "{verdict}"
    );
    let scratch = crate::support::Scratch::new();
    let bytes = crate::support::pcap_of(crate::support::Link::Ethernet, &all);
    let (table, page) = crate::support::analyze_html(&scratch.file("c.pcap", &bytes), &[]);
    assert!(
        table.contains("\nbeside HTTP/2 2 of 6 connections that offered HTTP/2 opened while an HTTP/2 connection to the same server was open, 1 while it was still in its handshake · their handshakes 300µs in total · connections 2 beside 1, 3 beside 1\n"),
        "{table}"
    );
    assert!(page.contains("opened beside an HTTP/2 connection"));
    // The waterfall marks the two at their SYN; the timeline says so on
    // the SYN's line.
    assert_eq!(page.matches("<path class=\"beside-h2\"").count(), 2);
    assert!(page.contains("opened beside HTTP/2 connection 1, still in its handshake"));
    let file = scratch.file("c.pcap", &bytes);
    let timeline = |conn: &str| {
        let args = ["timeline", "--conn", conn].map(std::ffi::OsStr::new);
        let args = args.into_iter().chain([file.as_os_str()]);
        crate::support::stdout(&crate::support::run(args))
    };
    let second = timeline("2");
    assert!(
        second.contains("  TCP SYN (beside HTTP/2 connection 1, still in its handshake)\n"),
        "{second}"
    );
    assert!(timeline("3").contains("  TCP SYN (beside HTTP/2 connection 1)\n"));
    assert!(timeline("7").contains("  TCP SYN\n"));
}

#[test]
fn one_http2_connection_at_a_time_counts_none() {
    // Each opened after the one before closed; and HTTP/1 connections
    // side by side, which offer no HTTP/2.
    let server = "10.0.0.2:80";
    let first = h2c("10.0.0.1:40000", server, 0, &[(1_000, 2_000)], Some(3_000));
    let second = h2c("10.0.0.1:40001", server, 3_001, &[(4_000, 5_000)], None);
    let v = report(&[&first, &second]);
    let b = at(&v, "/summary/beside_http2");
    assert_eq!(
        ["checked", "connections"].map(|k| b[k].as_u64()),
        [Some(2), Some(0)],
        "{b}"
    );
    let (scratch, bytes) = (
        crate::support::Scratch::new(),
        crate::support::pcap_of(crate::support::Link::Ethernet, &[&first, &second]),
    );
    let (table, page) = crate::support::analyze_html(&scratch.file("c.pcap", &bytes), &[]);
    assert!(!table.contains("beside HTTP/2"), "{table}");
    assert!(!page.contains("opened beside an HTTP/2 connection"));
    let mut a = opened_at("10.0.0.1:40002", server, T0);
    a.send(
        Side::Client,
        T0 + us(1_000),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let mut b = opened_at("10.0.0.1:40003", server, T0 + us(10));
    b.send(
        Side::Client,
        T0 + us(1_000),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let v = report(&[&a, &b]);
    assert_eq!(at(&v, "/summary/beside_http2"), &serde_json::Value::Null);
}

/// One TCP stream as tshark and nginx's log see it.
#[derive(Debug, Default)]
struct Stream {
    pool: String,
    client_port: String,
    syn: Option<f64>,
    first: f64,
    offered_h2: bool,
    /// The ALPN the server chose, where tshark sees it (TLS 1.2, or 1.3
    /// with the key log).
    chosen: Option<String>,
    /// TLS 1.3 without keys: the length of the server's first sealed
    /// record (its EncryptedExtensions, whose size tells the ALPN).
    sealed_first: Option<u64>,
    /// The handshake's end: its second Finished read with the key log, or
    /// without it the client's first sealed record after the ServerHello
    /// (its Finished, TLS 1.3).
    up: Option<f64>,
    closed: Option<f64>,
}

fn tshark_streams(pcap: &Path, keylog: Option<&Path>) -> Vec<Stream> {
    let more = [
        "tls.handshake.type",
        "tls.handshake.extensions_alpn_str",
        "tls.record.content_type",
        "tls.record.length",
        "tls.handshake.extensions_server_name",
        "tls.record.opaque_type",
    ];
    let text = crate::tools::tshark_streams_fields(pcap, Vec::new(), keylog, &more);
    let mut streams: BTreeMap<u64, (Stream, String, bool, usize)> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |k: usize| f.get(k).copied().unwrap_or_default();
        let (Ok(stream), Ok(t)) = (field(0).parse::<u64>(), field(1).parse::<f64>()) else {
            continue;
        };
        let set = |k: usize| field(k) == "1" || field(k) == "True";
        let (st, sni, server_hello_seen, finished) = streams.entry(stream).or_insert_with(|| {
            let s = Stream {
                first: t,
                ..Stream::default()
            };
            (s, String::new(), false, 0)
        });
        let syn_only = set(6) && !set(7);
        if syn_only {
            st.syn.get_or_insert(t);
        }
        // The client: the SYN's sender, else the higher port.
        let from_client = if syn_only || st.client_port.is_empty() {
            syn_only || field(2).parse::<u32>().ok() > field(3).parse::<u32>().ok()
        } else {
            field(2) == st.client_port
        };
        if st.client_port.is_empty() || syn_only {
            let (client, server, port, cport) = if from_client {
                (field(4), field(5), field(3), field(2))
            } else {
                (field(5), field(4), field(2), field(3))
            };
            st.client_port = cport.to_owned();
            st.pool = format!("{client} {server}:{port}");
        }
        if !field(14).is_empty() {
            *sni = field(14).to_owned();
        }
        let types: Vec<&str> = field(10).split(';').collect();
        let alpn = field(11);
        if from_client && types.contains(&"1") {
            st.offered_h2 = alpn.split(';').any(|a| a == "h2");
        }
        if !from_client && (types.contains(&"2") || types.contains(&"8")) {
            *server_hello_seen = true;
            if !alpn.is_empty() {
                st.chosen = Some(alpn.split(';').next().unwrap_or_default().to_owned());
            }
        }
        // A frame's records, in order: those tshark gives a type, then
        // the sealed ones (TLS 1.3's opaque type 23), with their lengths.
        let typed = field(12).split(';').filter(|t| !t.is_empty()).count();
        let sealed = field(15).split(';').any(|t| t == "23");
        if !from_client && sealed && *server_hello_seen && st.sealed_first.is_none() {
            st.sealed_first = field(13).split(';').nth(typed).and_then(|l| l.parse().ok());
        }
        // Up: with the key log, at the handshake's second Finished (the
        // server's in a full TLS 1.2 handshake, the client's in a resumed
        // one and in TLS 1.3); without, TLS 1.3's client Finished, its
        // first sealed record.
        if keylog.is_some() {
            *finished += types.iter().filter(|&&t| t == "20").count();
            if *finished >= 2 {
                st.up.get_or_insert(t);
            }
        } else if from_client && *server_hello_seen && sealed {
            st.up.get_or_insert(t);
        }
        if (set(8) || set(9)) && st.closed.is_none() {
            st.closed = Some(t);
        }
    }
    streams
        .into_values()
        .map(|(mut st, sni, _, _)| {
            st.pool = format!("{} {sni}", st.pool);
            st
        })
        .collect()
}

/// nginx's log: the client ports of the connections that carried a
/// request, and of those that spoke HTTP/2.
fn logged(log: &Path) -> (HashSet<String>, HashSet<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let (mut any, mut h2) = (HashSet::new(), HashSet::new());
    for line in text.lines() {
        let Some(port) = line
            .split_whitespace()
            .next()
            .and_then(|a| a.rsplit(':').next())
        else {
            continue;
        };
        any.insert(port.to_owned());
        if line.contains("proto=HTTP/2.0") {
            h2.insert(port.to_owned());
        }
    }
    (any, h2)
}

/// What tshark and nginx's log say: the connections that offered HTTP/2
/// from their SYN, those opened while another to their pool that spoke
/// HTTP/2 was open (its first packet earlier, no FIN or RST yet), of them
/// those that raced its handshake and those that carried no request, and
/// their handshakes in total. A connection speaks HTTP/2 when nginx logged
/// it so, tshark read the ALPN chosen as `h2`, or (carrying nothing)
/// its sealed EncryptedExtensions is as long as one that nginx logged.
fn expected(streams: &[Stream], log: Option<&Path>) -> (u64, u64, u64, u64, f64) {
    let (carried, logged_h2) = log.map(logged).unwrap_or_default();
    let sizes: HashSet<u64> = streams
        .iter()
        .filter(|s| logged_h2.contains(&s.client_port))
        .filter_map(|s| s.sealed_first)
        .collect();
    let speaks = |s: &Stream| {
        logged_h2.contains(&s.client_port)
            || s.chosen.as_deref() == Some("h2")
            || (s.chosen.is_none() && s.sealed_first.is_some_and(|l| sizes.contains(&l)))
    };
    let (mut checked, mut n, mut raced, mut none, mut handshakes) = (0, 0, 0, 0, 0.0);
    for (i, c) in streams.iter().enumerate() {
        let Some(syn) = c.syn.filter(|_| c.offered_h2) else {
            continue;
        };
        checked += 1;
        let open: Vec<&Stream> = streams
            .iter()
            .enumerate()
            .filter(|&(j, p)| j != i && p.pool == c.pool && speaks(p))
            .filter(|&(j, p)| (p.first, j) < (syn, i) && p.closed.is_none_or(|t| t > syn))
            .map(|(_, p)| p)
            .collect();
        if open.is_empty() {
            continue;
        }
        n += 1;
        raced += u64::from(!open.iter().any(|p| p.up.is_some_and(|u| u <= syn)));
        none += u64::from(log.is_some() && !carried.contains(&c.client_port));
        handshakes += c.up.map_or(0.0, |u| u - syn);
    }
    (checked, n, raced, none, handshakes)
}

#[test]
fn real_clients_as_tshark_and_nginx_see_them() {
    use crate::h2_sizes::capture;
    if !crate::tools::tshark_present() {
        return;
    }
    // (capture, connections, raced, carried none) as recorded
    // (captures/README.md): Java's HttpClient opening a connection per
    // request until its first HTTP/2 connection is up (ten threads; fifty
    // sendAsync), OkHttp racing five or ten and keeping one, Chromium
    // opening a spare beside each page's connection, curl; and clients
    // that put everything on one.
    let cases: [(&str, u64, u64, u64); 15] = [
        ("java-httpclient-h2-10x10", 9, 9, 0),
        ("java-httpclient-h2-post-429-10x10", 9, 9, 0),
        ("java-async-h2-post-429-100x50", 49, 49, 0),
        ("okhttp-async-h2-post-429-100x50", 4, 4, 3),
        ("okhttp-post-429-10x10", 9, 9, 8),
        ("h2-chromium-page-2x21", 2, 2, 2),
        // curl --parallel-immediate: five connections at once, four beside
        // the first in its handshake, each carrying one request; then three
        // curl processes GETting while another downloads slowly on an
        // HTTP/2 connection that is up (captures/README.md, be and bf).
        ("h2-curl-parallel-immediate", 4, 4, 0),
        ("h2-curl-beside-up", 3, 0, 0),
        ("java-async-warm-h2-post-429-100x50", 0, 0, 0),
        ("java-httpclient-h2-post-429-30", 0, 0, 0),
        ("apache-async-h2-post-429-100x50", 0, 0, 0),
        ("netty-h2-post-429-100x50", 0, 0, 0),
        ("httpx-h2-post-429-10x10", 0, 0, 0),
        ("h2-curl-parallel-20", 0, 0, 0),
        ("h2-curl-post-429-12", 0, 0, 0),
    ];
    let mut seen = HashMap::new();
    for (name, connections, raced, none) in cases {
        let pcap = capture(&format!("{name}.pcap"));
        let keylog = pcap.with_extension("keylog");
        let keylog = keylog.exists().then_some(keylog);
        let log = pcap.with_extension("nginx-access.log");
        let log = log.exists().then_some(log);
        let s = crate::over_time::summary_of(&pcap, keylog.as_deref());
        let ours = s.beside_http2.clone().unwrap_or_else(|| panic!("{name}"));
        let (checked, n, r, c, handshakes) =
            expected(&tshark_streams(&pcap, keylog.as_deref()), log.as_deref());
        let got = (
            ours.checked,
            ours.connections,
            ours.raced,
            ours.carried_none,
        );
        assert_eq!(
            got,
            (checked, n, r, c),
            "{name}: ours against tshark and nginx"
        );
        assert_eq!((n, r, c), (connections, raced, none), "{name}");
        assert!(
            (ours.handshake_total - handshakes).abs() < 2e-6 * (n as f64 + 1.0),
            "{name}: {} vs {handshakes}",
            ours.handshake_total
        );
        assert_eq!(ours.out_of_order, 0, "{name}");
        // Interval by interval, and server by server, they add up.
        let by_interval: u64 = s.over_time.intervals.iter().map(|i| i.beside_http2).sum();
        assert_eq!(by_interval, n, "{name}");
        let by_server: u64 = s.servers.iter().map(|x| x.beside_http2).sum();
        assert_eq!(by_server, n, "{name}");
        // Disjoint from the connections opened while another sat idle.
        let idle = s.opened_while_idle.as_ref().map_or(0, |o| o.connections);
        assert_eq!(idle, 0, "{name}");
        seen.insert(name, ours.connections);
    }
    assert_eq!(seen.len(), 15);
}
