//! `summary.over_time`: what began in each interval of the capture.
//! Checked three ways: against the records themselves, counted here into
//! intervals by docs/json.md's definition, on every capture in captures/
//! and the peer corpus (the summary's streaming series never sees a
//! record); against tshark's own first packets, SYNs, ClientHellos,
//! requests, 429s and first FINs or RSTs on real captures of Java, curl
//! and python clients, at two widths; and on synthetic traffic whose
//! instants are exact (a connection of 3,000 pipelined requests, most past
//! the list). That the series does not depend on `--threads` is
//! tests/threads.rs's: the whole summary, on every capture.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use handshakes::record::{Interval, OverTime};
use handshakes::source::file::FileSource;
use handshakes::{analyze, Config, ConnectionRecord, Summary};

use crate::h2_sizes::capture;
use crate::tools::{all_captures, tshark_fields, tshark_present};

/// The pipeline on `path` with intervals of `interval` (`None`: auto),
/// every request listed, with the secrets of `keylog`.
fn analysed(
    path: &Path,
    keylog: Option<&Path>,
    interval: Option<Duration>,
) -> (Summary, Vec<ConnectionRecord>) {
    let mut source = FileSource::open(path).unwrap_or_else(|e| panic!("{e}"));
    let config = Config {
        interval,
        keylog: keylog.map(crate::tools::keylog),
        max_requests_listed: Some(1 << 20),
        ..Config::default()
    }
    .with_secrets(source.secrets_at_head());
    let mut records = Vec::new();
    let summary = analyze(&mut source, &config, &mut records).unwrap_or_else(|e| panic!("{e}"));
    records.sort_by_key(|r| r.id);
    (summary, records)
}

/// The summary of `path` analysed with the secrets of `keylog`.
pub(crate) fn summary_of(path: &Path, keylog: Option<&Path>) -> Summary {
    analysed(path, keylog, None).0
}

/// Seconds into the capture as whole nanoseconds, as the series counts them.
fn ns(at: f64) -> i64 {
    (at * 1e9).round() as i64
}

/// The counts of one interval, in the order of [`counts`].
type Counts = [u64; 9];

fn counts(i: &Interval) -> Counts {
    [
        i.connections,
        i.tcp_handshakes,
        i.tls_full,
        i.tls_resumed,
        i.tls_failed,
        i.requests,
        i.responses_429,
        i.closed,
        i.open,
    ]
}

/// The series' intervals by number (start / width), without those where
/// nothing is counted.
fn by_number(o: &OverTime) -> BTreeMap<i64, Counts> {
    let width = ns(o.interval);
    o.intervals
        .iter()
        // Rounded: a start of many widths is off by a few nanoseconds in f64.
        .map(|i| ((i.start * 1e9 / width as f64).round() as i64, counts(i)))
        .filter(|(_, c)| c.iter().any(|&n| n > 0))
        .collect()
}

/// Counts `at` in field `field` of its interval.
fn put(map: &mut BTreeMap<i64, Counts>, width: i64, at: f64, field: usize) {
    let c = map.entry(ns(at).div_euclid(width)).or_default();
    if let Some(n) = c.get_mut(field) {
        *n += 1;
    }
}

/// Fills in `open` (connections opened and not closed at each interval's
/// end) over the intervals from the first to `last`.
fn with_open(mut map: BTreeMap<i64, Counts>, last: i64) -> BTreeMap<i64, Counts> {
    let first = map.keys().next().copied().unwrap_or(0).min(0);
    let mut open = 0u64;
    for k in first..=last {
        let c = map.entry(k).or_default();
        open = (open + c[0]).saturating_sub(c[7]);
        c[8] = open;
    }
    map.retain(|_, c| c.iter().any(|&n| n > 0));
    map
}

/// Fails on the first interval where `ours` and `want` differ (a whole
/// map of thousands of intervals says nothing).
fn assert_same(ours: &BTreeMap<i64, Counts>, want: &BTreeMap<i64, Counts>, what: &str) {
    let keys: std::collections::BTreeSet<&i64> = ours.keys().chain(want.keys()).collect();
    for k in keys {
        let (a, b) = (ours.get(k), want.get(k));
        assert_eq!(a, b, "{what}: interval {k} (ours, want)");
    }
}

/// docs/json.md's definition, counted from the records.
fn from_records(records: &[ConnectionRecord], width: i64, last: i64) -> BTreeMap<i64, Counts> {
    let mut map = BTreeMap::new();
    for r in records {
        put(&mut map, width, r.start.at, 0);
        let hs = &r.tcp.handshake;
        if let (true, Some(syn)) = (hs.complete, hs.syn) {
            put(&mut map, width, syn.at, 1);
        }
        if let Some(tls) = &r.tls {
            let at = tls.client_hello.map_or(r.start.at, |h| h.at);
            match (tls.outcome, tls.resumed) {
                (handshakes::record::TlsOutcome::Complete, false) => put(&mut map, width, at, 2),
                (handshakes::record::TlsOutcome::Complete, true) => put(&mut map, width, at, 3),
                (handshakes::record::TlsOutcome::Failed, _) => put(&mut map, width, at, 4),
                _ => {}
            }
        }
        let close = r.close.time.map_or(f64::INFINITY, |t| t.at);
        for q in &r.http.list {
            // Served: a request sent after the connection's close never was.
            if q.start.at <= close {
                put(&mut map, width, q.start.at, 5);
            }
            if q.status == Some(429) {
                let end = q.response_last.or(q.response_first).map(|t| t.at);
                put(&mut map, width, end.unwrap_or(f64::NAN), 6);
            }
        }
        if let Some(t) = r.close.time {
            put(&mut map, width, t.at, 7);
        }
    }
    with_open(map, last)
}

#[test]
fn the_series_is_the_records_counted_in_intervals_on_every_capture() {
    let mut checked = 0;
    for (name, path) in all_captures() {
        for interval in [None, Some(Duration::from_millis(10))] {
            let (s, records) = analysed(&path, None, interval);
            let o = &s.over_time;
            let width = ns(o.interval);
            assert!(width > 0, "{name}: {o:?}");
            if interval.is_none() {
                assert!(o.intervals.len() <= 60, "{name}: {}", o.intervals.len());
                assert_eq!(o.interval_chosen, "auto", "{name}");
            }
            // Every interval, none left out, from the first packet (or an
            // earlier timestamp) to the last.
            let first = o.intervals.first().map_or(0, |i| ns(i.start));
            assert!(first <= 0, "{name}: starts at {first}");
            for (k, i) in o.intervals.iter().enumerate() {
                // To f64's precision (a corpus capture spans 48 days in ms).
                let want = first + k as i64 * width;
                let off = (ns(i.start) - want).abs();
                assert!(
                    off <= want.abs() / 1_000_000_000_000,
                    "{name}: interval {k}: {off}"
                );
            }
            let end = first + o.intervals.len() as i64 * width;
            assert!(
                ns(s.span) < end || s.packets.total == 0,
                "{name}: span {} past {end}",
                s.span
            );
            assert_eq!(o.requests_untimed, 0, "{name}: every request listed");
            let last = ns(s.span).div_euclid(width);
            let want = from_records(&records, width, last);
            assert_same(&by_number(o), &want, &format!("{name} at {}", o.interval));
            // Added up, the summary's counts.
            let sum = |f: fn(&Interval) -> u64| o.intervals.iter().map(f).sum::<u64>();
            assert_eq!(sum(|i| i.connections), s.connections, "{name}");
            assert_eq!(sum(|i| i.tcp_handshakes), s.tcp_handshakes, "{name}");
            assert_eq!(sum(|i| i.tls_full), s.tls_handshakes_full, "{name}");
            assert_eq!(sum(|i| i.tls_resumed), s.tls_handshakes_resumed, "{name}");
            assert_eq!(sum(|i| i.tls_failed), s.tls_handshakes_failed, "{name}");
            assert_eq!(sum(|i| i.requests), s.requests, "{name}");
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} runs");
}

/// What tshark sees of one TCP stream: (field of [`Counts`], time as
/// nanoseconds into the capture) for its first packet, its SYN, its
/// ClientHello, each request and 429, and its first FIN or RST.
fn tshark_moments(pcap: &Path, keylog: Option<&Path>, tls_port: Option<u16>) -> Vec<(usize, i64)> {
    let mut options = Vec::new();
    if let Some(k) = keylog {
        options.extend(["-o".to_owned(), format!("tls.keylog_file:{}", k.display())]);
    }
    if let Some(p) = tls_port {
        options.extend(["-d".to_owned(), format!("tcp.port=={p},tls")]);
    }
    // A message where its first segment is: HTTP/1 not reassembled.
    options.extend(
        [
            "-o",
            "tcp.desegment_tcp_streams:FALSE",
            "-E",
            "aggregator=;",
        ]
        .map(str::to_owned),
    );
    let fields = [
        "tcp.stream",
        "frame.time_relative",
        "tcp.flags.syn",
        "tcp.flags.ack",
        "tcp.flags.fin",
        "tcp.flags.reset",
        "tls.handshake.type",
        "http.request",
        "http.response.code",
    ];
    let text = tshark_fields(pcap, &options, "tcp", &fields)
        .unwrap_or_else(|| panic!("tshark fails on {}", pcap.display()));
    let mut seen: BTreeMap<u64, [bool; 3]> = BTreeMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (Some(Ok(stream)), Some(t)) = (f.first().map(|s| s.parse::<u64>()), f.get(1)) else {
            continue;
        };
        // Whole nanoseconds from tshark's nine decimals.
        let Some(t) = t.split_once('.').and_then(|(s, n)| {
            let n = format!("{n:0<9}");
            Some(s.parse::<i64>().ok()? * 1_000_000_000 + n.get(..9)?.parse::<i64>().ok()?)
        }) else {
            continue;
        };
        let flag = |k: usize| f.get(k).is_some_and(|v| *v == "1" || *v == "True");
        let [opened, hello, closed] = seen.entry(stream).or_default();
        if !*opened {
            *opened = true;
            out.push((0, t));
        }
        if flag(2) && !flag(3) {
            out.push((1, t));
        }
        if !*hello && f.get(6).is_some_and(|v| v.split(';').any(|t| t == "1")) {
            *hello = true;
            out.push((2, t));
        }
        if f.get(7).is_some_and(|v| !v.is_empty()) {
            out.push((5, t));
        }
        if f.get(8).is_some_and(|v| v.split(';').any(|c| c == "429")) {
            out.push((6, t));
        }
        if !*closed && (flag(4) || flag(5)) {
            *closed = true;
            out.push((7, t));
        }
    }
    out
}

#[test]
fn the_series_counts_what_tshark_sees_in_each_interval() {
    if !tshark_present() {
        return;
    }
    // Each: capture, key log, TLS port, whether tshark reads its requests.
    // Every TCP handshake completes on them, every SYN is sent once, every
    // TLS handshake completes, and every request and 429 fits one segment:
    // what tshark tells apart.
    let cases: [(&str, Option<&str>, Option<u16>, bool); 6] = [
        (
            "java-urlconnection-keepalive-off-10x10.pcap",
            None,
            Some(18443),
            false,
        ),
        (
            "java-urlconnection-clear-post-429-10x10.pcap",
            None,
            None,
            true,
        ),
        ("http-requests-newconn-retry-after.pcap", None, None, true),
        ("tls12-curl-3-new-connections.pcap", None, None, false),
        (
            "curl-h1-post-429-200.pcap",
            Some("curl-h1-post-429-200.keylog"),
            None,
            true,
        ),
        (
            "multi-server-requests.pcap",
            Some("multi-server-requests.keylog"),
            None,
            true,
        ),
    ];
    for (name, keylog, tls_port, read) in cases {
        let keylog = keylog.map(capture);
        let moments = tshark_moments(&capture(name), keylog.as_deref(), tls_port);
        for width in [Duration::from_millis(10), Duration::from_millis(100)] {
            let (s, _) = analysed(&capture(name), keylog.as_deref(), Some(width));
            let o = &s.over_time;
            assert_eq!(o.interval_chosen, "asked", "{name}");
            let w = width.as_nanos() as i64;
            let mut want: BTreeMap<i64, Counts> = BTreeMap::new();
            for &(field, t) in &moments {
                let c = want.entry(t.div_euclid(w)).or_default();
                c[field] += 1;
            }
            // tshark tells a ClientHello, not how its handshake ended; and
            // requests inside TLS only with the keys (ours are estimated).
            let mut ours = by_number(o);
            for c in ours.values_mut() {
                c[2] += c[3] + c[4];
                c[3] = 0;
                c[4] = 0;
                if !read {
                    c[5] = 0;
                }
            }
            ours.retain(|_, c| c.iter().any(|&n| n > 0));
            let want = with_open(want, ns(s.span).div_euclid(w));
            let requests = want.values().any(|c| c[5] > 0);
            assert_eq!(requests, read, "{name}: tshark's requests");
            assert_same(&ours, &want, &format!("{name} at {width:?}"));
        }
    }
}

#[test]
fn requests_past_the_list_are_counted_where_they_began() {
    use crate::support::tls::{opened_at, SendBytes};
    use crate::support::{
        analyze_html, analyze_with, ms, pcap_of, stdout, Link, Scratch, Side, T0,
    };
    // 40 batches of 50 pipelined requests 100 ms apart, answered 1 ms
    // later, 200 and 429 in turn: 1,900 past the 100 listed.
    let request = b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n";
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let limited = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n";
    let answers: Vec<u8> = (0..50)
        .flat_map(|i| if i % 2 == 0 { &ok[..] } else { &limited[..] })
        .copied()
        .collect();
    let mut c = opened_at("10.0.0.1:40000", "10.0.0.2:80", T0);
    for batch in 0..40i64 {
        let t = T0 + ms(10 + 100 * batch);
        c.send(Side::Client, t, &request.repeat(50))
            .send(Side::Server, t + ms(1), &answers);
    }
    c.fin(Side::Client, T0 + ms(4050));
    let pcap = pcap_of(Link::Ethernet, &[&c]);
    let out = analyze_with(&pcap, &["-T", "json", "--interval", "500ms"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let o = &v["summary"]["over_time"];
    assert_eq!(o["interval"], 0.5);
    assert_eq!(o["interval_chosen"], "asked");
    assert_eq!(o["requests_untimed"], 0);
    let intervals = o["intervals"].as_array().expect("intervals");
    // 0 … 4.05 s: 9 intervals; five batches in each but the last.
    assert_eq!(intervals.len(), 9);
    let column = |key: &str| -> Vec<u64> {
        intervals
            .iter()
            .map(|i| i[key].as_u64().unwrap_or(u64::MAX))
            .collect()
    };
    let mut five = vec![250; 8];
    five.push(0);
    assert_eq!(column("requests"), five);
    assert_eq!(
        column("responses_429"),
        five.iter().map(|n| n / 2).collect::<Vec<_>>()
    );
    let mut closed = vec![0; 8];
    closed.push(1);
    assert_eq!(column("closed"), closed);
    assert_eq!(column("open"), [1, 1, 1, 1, 1, 1, 1, 1, 0]);
    assert_eq!(intervals[0]["connections"], 1);
    assert_eq!(intervals[0]["setup_mean"], 0.01);
    // The table lists them, the HTML report draws them.
    let table = analyze_with(&pcap, &["--interval", "500ms"]);
    let text = stdout(&table);
    assert!(
        text.contains("over time     a mark per 500ms from +0.000s to +4.500s"),
        "{text}"
    );
    assert!(text.contains("  429s        ████████  125\n"), "{text}");
    assert!(
        text.contains(
            "\n              +3.500s      0    0   250     0.00  125       0     1        -\n"
        ),
        "{text}"
    );
    let scratch = Scratch::new();
    let file = scratch.file("pipelined.pcap", &pcap);
    let (_, page) = analyze_html(&file, &["--interval", "500ms"]);
    assert!(page.contains("<h3>What began when</h3>"), "no charts");
    assert!(
        page.contains("Requests started per 500ms · most 250"),
        "no requests chart"
    );
    assert!(
        page.contains("<title>+3.500s – +4.000s: 125</title>"),
        "no 429 bar"
    );
    assert!(!page.contains("Full TLS handshakes"), "a chart of zeros");
}

#[test]
fn compare_lines_the_captures_up_at_one_width() {
    use crate::support::{run, stdout};
    // HttpClient's send from ten threads, and sendAsync with 50 at once.
    let (a, b) = (
        "captures/java-httpclient-h2-post-429-10x10.pcap",
        "captures/java-async-h2-post-429-100x50.pcap",
    );
    let out = run(["compare", a, b]);
    assert!(out.status.success());
    let text = stdout(&out);
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("over time"))
        .collect();
    assert_eq!(
        block.first().copied(),
        Some("over time     a mark per 20ms from each capture's first packet; at the right, the most in one")
    );
    // Each capture's most in one 20 ms, as its own series at 20 ms says.
    for (letter, path, first) in [('A', a, "  connections A "), ('B', b, "              B ")] {
        let (s, _) = analysed(
            &capture(path.trim_start_matches("captures/")),
            None,
            Some(Duration::from_millis(20)),
        );
        let most = |f: fn(&Interval) -> u64| s.over_time.intervals.iter().map(f).max().unwrap_or(0);
        let line = block
            .iter()
            .find(|l| l.starts_with(first))
            .unwrap_or_else(|| panic!("no connections line for {letter}: {block:#?}"));
        assert!(
            line.ends_with(&format!(" {}", most(|i| i.connections))),
            "{letter}: {line}"
        );
    }
    // The marks are scaled alike: B's 44 connections in its first 20 ms
    // are a full mark, A's 10 a low one.
    assert!(
        block.iter().any(|l| l.starts_with("  connections A ▂ ")),
        "{block:#?}"
    );
    assert!(
        block.iter().any(|l| l.starts_with("              B █▂")),
        "{block:#?}"
    );
    // The HTML report's comparison draws them side by side, on one scale
    // and one time axis.
    let scratch = crate::support::Scratch::new();
    let html = scratch.path("compare.html");
    let html_arg = html.to_str().expect("a UTF-8 path");
    assert!(run(["compare", a, b, "-q", "--html", html_arg])
        .status
        .success());
    let page = std::fs::read_to_string(&html).expect("the report");
    let compared = page.split("</section>").next().unwrap_or_default();
    assert!(
        compared.contains("A bar per 20ms, each capture from its first packet"),
        "no charts"
    );
    for (tag, most) in [('A', 10), ('B', 44)] {
        let caption = format!(
            "<span class=\"tag\">{tag}</span>Connections opened per 20ms · most {most}</figcaption>"
        );
        let at = compared
            .find(&caption)
            .unwrap_or_else(|| panic!("no {caption}"));
        // Scaled to the most of both, 44, over the longer capture's time.
        let chart = compared
            .get(at..)
            .and_then(|c| c.split("</svg>").next())
            .unwrap_or_default();
        assert!(chart.contains(">44</text>"), "{tag}: {chart}");
        assert!(chart.contains(">+1.100s</text>"), "{tag}: {chart}");
    }
}

/// QUIC's lines of the series (connections, their handshakes by kind,
/// HTTP/3 requests and 429s) are its records counted into intervals, on
/// every capture that holds QUIC — with the key log recorded beside it
/// where there is one, so that HTTP/3 is read — at two widths; added up,
/// the QUIC summary's counts.
#[test]
fn quic_connections_and_http3_requests_are_counted_where_they_began() {
    let mut checked = 0;
    for (name, path) in all_captures() {
        let keylog = path.with_extension("keylog");
        let keylog = keylog.exists().then_some(keylog);
        for interval in [None, Some(Duration::from_millis(10))] {
            let (s, _) = analysed(&path, keylog.as_deref(), interval);
            let Some(q) = &s.quic else {
                continue;
            };
            let o = &s.over_time;
            let width = ns(o.interval);
            // (connections, full, resumed, HTTP/3 requests, 429s) by interval.
            let mut want: BTreeMap<i64, [u64; 5]> = BTreeMap::new();
            let mut put = |at: f64, field: usize| {
                if let Some(n) = want
                    .entry(ns(at).div_euclid(width))
                    .or_default()
                    .get_mut(field)
                {
                    *n += 1;
                }
            };
            assert_eq!(
                q.list.len() as u64,
                q.connections,
                "{name}: every one listed"
            );
            for c in &q.list {
                put(c.start.at, 0);
                match c.tls.resumed {
                    Some(false) => put(c.start.at, 1),
                    Some(true) => put(c.start.at, 2),
                    None => {}
                }
                for r in c.http.as_ref().map_or(&[][..], |h| &h.list[..]) {
                    put(r.start.at, 3);
                    if r.status == Some(429) {
                        put(r.response_last.or(r.response_first).expect("an end").at, 4);
                    }
                }
            }
            let ours: BTreeMap<i64, [u64; 5]> = o
                .intervals
                .iter()
                .map(|i| {
                    let n = [
                        i.quic_connections,
                        i.quic_full,
                        i.quic_resumed,
                        i.http3_requests,
                        i.http3_responses_429,
                    ];
                    (ns(i.start).div_euclid(width), n)
                })
                .filter(|(_, n)| n.iter().any(|&c| c > 0))
                .collect();
            assert_eq!(ours, want, "{name} at {}", o.interval);
            let sum = |f: fn(&Interval) -> u64| o.intervals.iter().map(f).sum::<u64>();
            assert_eq!(sum(|i| i.quic_connections), s.quic_connections, "{name}");
            assert_eq!(sum(|i| i.quic_full), q.handshakes_full, "{name}");
            assert_eq!(sum(|i| i.quic_resumed), q.handshakes_resumed, "{name}");
            assert_eq!(sum(|i| i.http3_requests), q.requests, "{name}");
            let too_many = q.status_codes.get("429").copied().unwrap_or(0);
            assert_eq!(sum(|i| i.http3_responses_429), too_many, "{name}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} runs");
}
