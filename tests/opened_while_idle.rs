//! `summary.opened_while_idle`: connections opened while another to the
//! same server sat idle — on synthetic traffic with exact times, and on the
//! real captures against tshark, which sees each connection's payload,
//! SYN and first FIN or RST (with the key log, its TLS records opened).

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::tls::{opened_at, report, SendBytes};
use crate::support::{at, ms, Conv, Side, T0};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

#[test]
fn a_connection_set_up_while_another_sat_idle_counts() {
    // Connection 1 answers at 2 ms and sits idle until its close at 500
    // ms. 2 opens at 100 ms and sends at 110 ms: counted, 10 ms of setup,
    // 1 idle 98 ms at its SYN. 3 opens at 1 ms, before 1 went idle: not.
    // 4 opens at 495 ms and sends at 505 ms, after 1's close: not. 5, to
    // another server port, opens at 100 ms: not.
    let mut idle = opened_at("10.0.0.1:40000", "10.0.0.2:80", T0);
    idle.send(Side::Client, T0 + ms(1), GET)
        .send(Side::Server, T0 + ms(2), OK)
        .close(Side::Client, T0 + ms(500), T0 + ms(501), T0 + ms(502));
    let during = one_get("10.0.0.1:40001", "10.0.0.2:80", 100, 110);
    let before = one_get("10.0.0.1:40002", "10.0.0.2:80", 1, 3);
    let after = one_get("10.0.0.1:40003", "10.0.0.2:80", 495, 505);
    let other = one_get("10.0.0.1:40004", "10.0.0.2:8080", 100, 110);
    let v = report(&[&idle, &during, &before, &after, &other]);
    let o = at(&v, "/summary/opened_while_idle");
    assert_eq!(o["checked"], 5, "{o}");
    // 2 is counted; 4 opened while 2 and 3 (open to the end) sat idle.
    assert_eq!(o["connections"], 2, "{o}");
    let setup = o["setup_total"].as_f64().unwrap_or(0.0);
    assert!((setup - 0.020).abs() < 1e-9, "{o}");
    assert_eq!(o["idle"]["max"].as_f64(), Some(0.491), "{o}");
    assert_eq!(o["out_of_order"], 0);
    // By id (first packet order): 3 beside 1, and 5 beside 2 — the one
    // idle longest at its SYN.
    assert_eq!(
        o["first"],
        serde_json::json!([
            {"connection": 3, "idle_connection": 1, "idle": 0.098, "setup": 0.01,
             "idle_connection_used_again": false},
            {"connection": 5, "idle_connection": 2, "idle": 0.491, "setup": 0.01,
             "idle_connection_used_again": false}
        ])
    );
    let verdict = at(&v, "/summary/verdict").as_str().unwrap_or_default();
    assert!(
        verdict.ends_with("; 2 connections were opened while another to the same server sat idle"),
        "{verdict}"
    );
    let (table, page) = table_and_page(&[&idle, &during, &before, &after, &other]);
    assert!(
        table.contains("\nmissed reuse  2 of 5 connections opened while another to the same server sat idle, for a median 294.50ms at their SYN (max 491.00ms) · the idle ones never used again · their setup 20.00ms in total · connections 3 beside 1, 5 beside 2\n"),
        "{table}"
    );
    assert!(page.contains("opened while another sat idle"));
    // The waterfall marks the two at their SYN, their tooltips say beside what.
    assert_eq!(page.matches("<path class=\"passed\"").count(), 2);
    assert!(page.contains("opened while connection 1 to the same server sat idle (for 98.00ms)"));
    // The timeline of connection 3 says so on its SYN's line; 2's does not.
    let (_scratch, file) = capture_of(&[&idle, &during, &before, &after, &other]);
    let timeline = |conn: &str| {
        let args = [std::ffi::OsStr::new("timeline"), file.as_os_str()];
        let more = ["--conn", conn].map(std::ffi::OsStr::new);
        crate::support::stdout(&crate::support::run(args.into_iter().chain(more)))
    };
    let third = timeline("3");
    assert!(
        third.contains("  TCP SYN (while connection 1 to the same server sat idle, for 98.00ms)\n"),
        "{third}"
    );
    let second = timeline("2");
    assert!(second.contains("  TCP SYN\n"), "{second}");
}

/// A connection from `client` to `server` opened at `opened` ms, whose
/// one GET at `sent` ms is answered 1 ms later, left open.
fn one_get(client: &str, server: &str, opened: i64, sent: i64) -> Conv {
    let mut c = opened_at(client, server, T0 + ms(opened));
    c.send(Side::Client, T0 + ms(sent), GET)
        .send(Side::Server, T0 + ms(sent + 1), OK);
    c
}

/// A capture holding `convs`, in a scratch directory kept while it lives.
fn capture_of(convs: &[&Conv]) -> (crate::support::Scratch, std::path::PathBuf) {
    let scratch = crate::support::Scratch::new();
    let bytes = crate::support::pcap_of(crate::support::Link::Ethernet, convs);
    let file = scratch.file("capture.pcap", &bytes);
    (scratch, file)
}

/// What `handshakes analyze --html` prints and writes of a capture holding `convs`.
fn table_and_page(convs: &[&Conv]) -> (String, String) {
    let (_scratch, file) = capture_of(convs);
    crate::support::analyze_html(&file, &[])
}

#[test]
fn a_pool_that_reuses_its_idle_connection_counts_none() {
    // One connection, three requests 50 ms apart; a second connection
    // opened while the first is busy with a request (a second thread).
    let mut pooled = opened_at("10.0.0.1:40000", "10.0.0.2:80", T0);
    pooled
        .send(Side::Client, T0 + ms(1), GET)
        .send(Side::Server, T0 + ms(2), OK)
        .send(Side::Client, T0 + ms(50), GET)
        .send(Side::Server, T0 + ms(80), OK)
        .send(Side::Client, T0 + ms(100), GET)
        .send(Side::Server, T0 + ms(101), OK);
    let busy = one_get("10.0.0.1:40001", "10.0.0.2:80", 55, 60);
    let v = report(&[&pooled, &busy]);
    assert_eq!(at(&v, "/summary/opened_while_idle/connections"), 0);
    assert_eq!(at(&v, "/summary/opened_while_idle/checked"), 2);
    // Its SYN came while the first was busy, but it sent after the first
    // went idle at 80 ms: idle must cover the whole setup.
    let late = one_get("10.0.0.1:40002", "10.0.0.2:80", 70, 90);
    let v = report(&[&pooled, &late]);
    assert_eq!(at(&v, "/summary/opened_while_idle/connections"), 0);
    let (table, page) = table_and_page(&[&pooled, &late]);
    assert!(!table.contains("missed reuse"), "{table}");
    assert!(!page.contains("opened while another sat idle"));
    // Set up from 10 to 20 ms, while the pooled one sat idle from 2 ms to
    // its next request at 50 ms: counted, beside one used again.
    let eager = one_get("10.0.0.1:40003", "10.0.0.2:80", 10, 20);
    let v = report(&[&pooled, &eager]);
    let o = at(&v, "/summary/opened_while_idle");
    assert_eq!(
        (&o["connections"], &o["idle_never_used_again"]),
        (&1.into(), &0.into()),
        "{o}"
    );
    assert_eq!(o["first"][0]["idle_connection_used_again"], true, "{o}");
    let (table, _) = table_and_page(&[&pooled, &eager]);
    assert!(
        table.contains("\nmissed reuse  1 of 2 connections opened while another to the same server sat idle, for 8.00ms at its SYN · their setup 10.00ms in total · connection 2 beside 1\n"),
        "{table}"
    );
}

/// What tshark sees of a capture: for each TCP stream, its pool (client
/// address, server address and port, SNI), its SYN, its first request
/// byte, and the times it had no request outstanding — from the last
/// server payload after a client's to the next client payload or the
/// first FIN or RST. Payload is TCP's in cleartext, and TLS application
/// data (opened with `keylog`) over TLS on `port`.
#[derive(Debug, Default)]
struct Stream {
    pool: String,
    syn: Option<f64>,
    first_request: Option<f64>,
    /// (from, to, whether a request of its own ended it).
    idle: Vec<(f64, f64, bool)>,
}

fn tshark_streams(pcap: &Path, port: u16, keylog: Option<&Path>) -> Vec<Stream> {
    let more = [
        "tcp.len",
        "tls.record.content_type",
        "tls.handshake.extensions_server_name",
        "ipv6.src",
        "ipv6.dst",
        "http.host",
        "http.request.uri",
    ];
    // With the key log, the server's port is read as TLS whatever its number.
    let options = match keylog {
        Some(_) => vec!["-d".to_owned(), format!("tcp.port=={port},tls")],
        None => Vec::new(),
    };
    let text = crate::tools::tshark_streams_fields(pcap, options, keylog, &more);
    #[derive(Default)]
    struct State {
        s: Stream,
        /// The end of the server's latest payload after a client's.
        answered: Option<f64>,
        closed: bool,
        sni: String,
        /// The host of the first request to name one (not to a proxy),
        /// where tshark reads HTTP (port 80).
        host: Option<String>,
        server: String,
        client: String,
    }
    let mut streams: BTreeMap<u64, State> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |k: usize| f.get(k).copied().unwrap_or_default();
        let (Ok(stream), Ok(t)) = (field(0).parse::<u64>(), field(1).parse::<f64>()) else {
            continue;
        };
        let set = |k: usize| field(k) == "1" || field(k) == "True";
        let st = streams.entry(stream).or_default();
        if !field(12).is_empty() {
            st.sni = field(12).to_owned();
        }
        if st.host.is_none() && !field(15).is_empty() && !field(16).contains("://") {
            st.host = field(15).split(';').next().map(str::to_owned);
        }
        if st.closed {
            continue;
        }
        if set(6) && !set(7) {
            st.s.syn = Some(t);
        }
        // The endpoints, by the server's port (a connection whose SYN
        // came before the capture is one too).
        let from_server = field(2) == port.to_string();
        let v6 = field(4).is_empty();
        let (src, dst) = (
            field(if v6 { 13 } else { 4 }),
            field(if v6 { 14 } else { 5 }),
        );
        let (client, server, server_port) = if from_server {
            (dst, src, field(2))
        } else {
            (src, dst, field(3))
        };
        st.client = client.to_owned();
        st.server = format!("{server}:{server_port}");
        let payload = field(10).parse::<u64>().unwrap_or(0) > 0
            && (keylog.is_none() || field(11).split(';').any(|t| t == "23"));
        if payload && from_server && st.s.first_request.is_some() {
            st.answered = Some(t);
        }
        if payload && !from_server {
            st.s.first_request.get_or_insert(t);
            if let Some(a) = st.answered.take() {
                st.s.idle.push((a, t, true));
            }
        }
        if set(8) || set(9) {
            st.closed = true;
            if let Some(a) = st.answered.take() {
                st.s.idle.push((a, t, false));
            }
        }
    }
    streams
        .into_values()
        .map(|mut st| {
            if let Some(a) = st.answered {
                st.s.idle.push((a, f64::INFINITY, false));
            }
            // In cleartext, the host its first request named.
            let host = st.host.as_deref().filter(|_| st.sni.is_empty());
            let name = host.and_then(|h| crate::servers::host_name(h, &st.server));
            let name = name.unwrap_or(st.sni);
            st.s.pool = format!("{} {} {name}", st.client, st.server);
            st.s
        })
        .collect()
}

/// The connections tshark's streams say were set up while another to
/// their pool sat idle (from before the SYN to past the first request),
/// their setup times, and how many of them had beside them — the
/// connection idle longest — one that carried no request after.
fn opened_while_idle(streams: &[Stream]) -> (u64, f64, u64) {
    let (mut n, mut setup, mut never) = (0, 0.0, 0);
    for (i, s) in streams.iter().enumerate() {
        let (Some(syn), Some(first)) = (s.syn, s.first_request) else {
            continue;
        };
        let oldest = streams
            .iter()
            .enumerate()
            .filter(|&(j, o)| j != i && o.pool == s.pool)
            .flat_map(|(j, o)| o.idle.iter().map(move |&(a, b, again)| (a, j, b, again)))
            .filter(|&(a, _, b, _)| a <= syn && first < b)
            .min_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        if let Some((_, _, _, again)) = oldest {
            n += 1;
            setup += first - syn;
            never += u64::from(!again);
        }
    }
    (n, setup, never)
}

#[test]
fn real_clients_as_tshark_sees_them() {
    use crate::h2_sizes::capture;
    use crate::tools::tshark_present;
    if !tshark_present() {
        return;
    }
    // Python's requests.get (a pool per call, closed after the next
    // connection's request), HttpURLConnection with ten threads whose
    // keep-alive cache holds five, and pooled clients that count none;
    // with the key log, TLS and two names at one address.
    let corpus = crate::corpus::corpus_dir();
    if corpus.is_none() {
        crate::tools::skip_or_fail("peer corpus", "../shared/corpus not found");
    }
    // From the peer corpus: a browser opening a connection to
    // meta.wikimedia.org while its connection to www.wikipedia.org, at
    // the same address, sat idle (another host: none), four streams to
    // one IPv6 server, and a capture whose clock stamps a request, its
    // answer and the SYN alike.
    let peers = [
        ("zeek/Traces/wikipedia.pcap", 80, 0),
        (
            "pcapplusplus/Tests/Pcap++Test/PcapExamples/four_ipv6_http_streams.pcap",
            80,
            2,
        ),
        ("zeek/Traces/nflog-http.pcap", 80, 0),
    ];
    let peers = corpus
        .iter()
        .flat_map(|dir| peers.map(|(f, p, n)| (dir.join(f), p, n)));
    for (pcap, port, expected) in [
        ("http-python-requests-nosession", 18080, 4),
        ("http-requests-newconn-retry-now", 18429, 7),
        ("http-requests-newconn-retry-after", 18429, 7),
        ("java-urlconnection-clear-post-429-10x10", 18452, 5),
        ("tls-python-requests-nosession-5", 18443, 4),
        ("multi-server-requests", 18443, 4),
        ("http-python-requests-session", 18080, 0),
        ("idle-urlconnection-keepalive", 18470, 0),
        ("java-async-clear-h1-post-429-100x50", 18452, 0),
        ("idle-requests-tls", 18471, 0),
        ("curl-h1-post-429-12", 18451, 0),
        // Clients that never give a connection back (captures/README.md,
        // ba–bd): HttpURLConnection and OkHttp leaving each response
        // unread and open, Apache HttpClient 5 each response unclosed
        // (its sixth request waits for a connection and fails); and the
        // same HttpURLConnection reading its responses.
        ("leak-urlconnection", 18480, 5),
        ("leak-okhttp", 18480, 5),
        ("leak-apache5", 18480, 4),
        ("leak-urlconnection-control", 18480, 0),
    ]
    .map(|(name, port, n)| (capture(&format!("{name}.pcap")), port, n))
    .into_iter()
    .chain(peers)
    {
        let keylog = pcap.with_extension("keylog");
        let keylog = keylog.exists().then_some(keylog);
        let name = pcap.display();
        let s = crate::over_time::summary_of(&pcap, keylog.as_deref());
        let ours = s.opened_while_idle.unwrap_or_else(|| panic!("{name}"));
        let (theirs, setup, never) =
            opened_while_idle(&tshark_streams(&pcap, port, keylog.as_deref()));
        assert_eq!(ours.connections, theirs, "{name}");
        assert_eq!(ours.idle_never_used_again, never, "{name}");
        assert_eq!(ours.connections, expected, "{name}");
        assert!(
            (ours.setup_total - setup).abs() < 2e-6 * (theirs as f64 + 1.0),
            "{name}: {} vs {setup}",
            ours.setup_total
        );
        assert_eq!(ours.out_of_order, 0, "{name}");
        // Interval by interval too.
        let by_interval: u64 = s
            .over_time
            .intervals
            .iter()
            .map(|i| i.opened_while_idle)
            .sum();
        assert_eq!(by_interval, ours.connections, "{name}");
        // Server by server, they add up to the whole.
        let by_server: u64 = s.servers.iter().map(|x| x.opened_while_idle).sum();
        assert_eq!(by_server, ours.connections, "{name}");
    }
}

#[test]
fn estimated_from_tls_records_and_none_where_the_server_closes_at_once() {
    use crate::h2_sizes::capture;
    // HttpsURLConnection, ten threads: nine connections carried one
    // request each (nginx's log) and stayed open to the JVM's exit while
    // nine more were opened. Without keep-alive every connection closes
    // after its answer (the client's FIN 10–20 ms after it): none sat
    // idle through another's setup, though some SYNs came while one had
    // not yet closed.
    for (name, expected) in [
        ("java-urlconnection-post-429-10x10", 9),
        ("java-urlconnection-keepalive-off-10x10", 0),
        ("java-httpclient-pooled-10x10", 0),
        ("okhttp-post-429-10x10", 0),
        ("apache-httpclient5-post-429-10x10", 0),
    ] {
        let s = crate::over_time::summary_of(&capture(&format!("{name}.pcap")), None);
        let o = s.opened_while_idle.unwrap_or_else(|| panic!("{name}"));
        assert_eq!(o.connections, expected, "{name}");
        assert_eq!(o.checked, s.tcp_handshakes - s.connections_unused, "{name}");
    }
}
