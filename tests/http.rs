//! Synthetic cleartext HTTP conversations run through the real binary:
//! HTTP/1.1 keep-alive with Content-Length, chunked bodies cut at awkward
//! segment boundaries, pipelining, HEAD, 304 and 429 responses, bodies read
//! until the close, long targets, HTTP/2 with prior knowledge and after an
//! `Upgrade: h2c`, and the summary's reuse figures and verdict.

use serde_json::Value;

use crate::support::tls::{assert_bool, nanos, only, opened_at, report, SendBytes};
use crate::support::*;

const SERVER: &str = "10.0.0.2:80";

/// A connection from 10.0.0.1:`port` to SERVER opened at `t`.
fn from_port(port: u16, t: i64) -> Conv {
    opened_at(&format!("10.0.0.1:{port}"), SERVER, t)
}

/// 10.0.0.1:40000 → SERVER opened at T0.
fn opened() -> Conv {
    from_port(40000, T0)
}

/// `GET target` with a Host header.
fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: example.com\r\n\r\n").into_bytes()
}

/// A response with `status`, extra header lines and a Content-Length body.
fn response(status: &str, headers: &str, body: &str) -> Vec<u8> {
    let len = body.len();
    format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {len}\r\n\r\n{body}").into_bytes()
}

/// One request as listed: method, target, status and its times (ns since
/// the first packet: start, first and last response byte).
type Listed<'a> = (&'a str, &'a str, u64, i64, i64, i64);

/// Asserts the connection's request list, ttfb and duration included.
fn assert_list(c: &Value, want: &[Listed<'_>]) {
    let list = at(c, "/http/list").as_array().expect("list");
    assert_eq!(list.len(), want.len(), "{c:#}");
    for (r, &(method, target, status, start, first, last)) in list.iter().zip(want) {
        assert_eq!(r["method"].as_str(), Some(method), "{r}");
        assert_eq!(r["target"].as_str(), Some(target), "{r}");
        assert_eq!(r["status"].as_u64(), Some(status), "{r}");
        let times = [
            "start",
            "response_first",
            "response_last",
            "ttfb",
            "duration",
        ];
        let got = times.map(|k| nanos(&r[k]));
        assert_eq!(
            got,
            [start, first, last, first - start, last - start],
            "{r}"
        );
    }
}

/// Asserts exact HTTP/1 counts with no loss of sync.
fn assert_http1(c: &Value, requests: u64, responses: u64) {
    assert_str(c, "/http/method", "http1");
    assert_u64(c, "/http/requests", requests);
    assert_u64(c, "/http/responses", responses);
    assert_bool(c, "/http/estimated", false);
    assert_str(c, "/http/confidence", "exact");
    assert_bool(c, "/http/lost_sync", false);
    assert_eq!(at(c, "/tls"), &Value::Null);
}

#[test]
fn keep_alive_with_content_length() {
    let mut c = opened();
    let big = "x".repeat(1000);
    let first = response("200 OK", "", &big);
    let (head, tail) = first.split_at(first.len() - 600);
    let post = b"POST /c HTTP/1.1\r\nHost: example.com\r\nContent-Length: 11\r\n\r\n";
    c.send(Side::Client, T0 + us(200), &get("/a"))
        .send(Side::Server, T0 + ms(1), head)
        .send(Side::Server, T0 + ms(1) + us(100), tail)
        // A request and a response header each cut across two segments.
        .send_split(Side::Client, &get("/b"), &[7], &[T0 + ms(2), T0 + us(2020)])
        .send_split(
            Side::Server,
            &response("200 OK", "", "hello"),
            &[20],
            &[T0 + ms(3), T0 + us(3050)],
        )
        .send(Side::Client, T0 + ms(4), post)
        .send(Side::Client, T0 + ms(4) + us(50), b"hello world")
        .send(Side::Server, T0 + ms(5), &response("201 Created", "", ""))
        .close(
            Side::Client,
            T0 + ms(6),
            T0 + ms(6) + us(10),
            T0 + ms(6) + us(20),
        );
    let c = only(&c);
    assert_http1(&c, 3, 3);
    assert_list(
        &c,
        &[
            ("GET", "/a", 200, us(200), ms(1), ms(1) + us(100)),
            ("GET", "/b", 200, ms(2), ms(3), us(3050)),
            ("POST", "/c", 201, ms(4), ms(5), ms(5)),
        ],
    );
    assert_bool(&c, "/http/connection_close", false);
    assert_bool(&c, "/http/list_truncated", false);
}

#[test]
fn chunked_response_cut_at_awkward_boundaries() {
    let body = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\n{}\r\n10\r\n{}\r\n0\r\n\r\n",
        "a".repeat(26),
        "b".repeat(16)
    );
    let body = body.as_bytes();
    let size_line = body.windows(4).position(|w| w == b"1a\r\n").expect("size") + 1;
    let data_crlf = size_line + 3 + 26 + 1;
    let last = body.len() - 1;
    // Inside the first chunk-size line, inside the CRLF after its data,
    // inside the second size line's CRLF, and before the final LF.
    let cuts = [size_line, data_crlf, data_crlf + 4, last];
    assert_eq!(&body[size_line - 1..size_line + 1], b"1a");
    assert_eq!(&body[data_crlf - 1..data_crlf + 1], b"\r\n");
    assert_eq!(&body[data_crlf + 3..data_crlf + 5], b"\r\n");
    let times = [1000, 1010, 1020, 1030, 1040].map(|t| T0 + us(t));
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), &get("/chunked"))
        .send_split(Side::Server, body, &cuts, &times)
        .send(Side::Client, T0 + ms(2), &get("/next"))
        .send(Side::Server, T0 + ms(3), b"HTTP/1.1 204 No Content\r\n\r\n");
    let c = only(&c);
    assert_http1(&c, 2, 2);
    assert_list(
        &c,
        &[
            ("GET", "/chunked", 200, us(200), ms(1), us(1040)),
            ("GET", "/next", 204, ms(2), ms(3), ms(3)),
        ],
    );
}

#[test]
fn pipelined_requests_head_304_and_429() {
    let pipelined = [get("/1"), get("/2"), b"HEAD /3 HTTP/1.1\r\n\r\n".to_vec()].concat();
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), &pipelined)
        .send(Side::Server, T0 + ms(1), &response("200 OK", "", "abc"))
        .send(
            Side::Server,
            T0 + us(1500),
            &response("429 Too Many Requests", "Retry-After: 2\r\n", ""),
        )
        // The HEAD response announces a body it does not send.
        .send(
            Side::Server,
            T0 + ms(2),
            b"HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n",
        )
        .send(Side::Client, T0 + ms(3), &get("/4"))
        .send(
            Side::Server,
            T0 + ms(4),
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n",
        )
        .send(Side::Client, T0 + ms(5), &get("/5"))
        .send(Side::Server, T0 + ms(6), &response("200 OK", "", "ok"));
    let v = report(&[&c]);
    let c = conn(&v, 0);
    assert_http1(c, 5, 5);
    assert_list(
        c,
        &[
            ("GET", "/1", 200, us(200), ms(1), ms(1)),
            ("GET", "/2", 429, us(200), us(1500), us(1500)),
            ("HEAD", "/3", 200, us(200), ms(2), ms(2)),
            ("GET", "/4", 304, ms(3), ms(4), ms(4)),
            ("GET", "/5", 200, ms(5), ms(6), ms(6)),
        ],
    );
    let codes = serde_json::json!({"200": 3, "304": 1, "429": 1});
    assert_eq!(at(&v, "/summary/status_codes"), &codes);
}

#[test]
fn connection_close_body_runs_until_the_fin() {
    let mut c = opened();
    let head = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
    c.send(Side::Client, T0 + us(200), &get("/stream"))
        .send(
            Side::Server,
            T0 + ms(1),
            &[&head[..], &[b'x'; 100]].concat(),
        )
        .send(Side::Server, T0 + us(1500), &[b'y'; 500])
        .send(Side::Server, T0 + ms(2), &[b'z'; 300])
        .close(Side::Server, T0 + us(2500), T0 + us(2600), T0 + us(2700));
    let c = only(&c);
    assert_http1(&c, 1, 1);
    assert_bool(&c, "/http/connection_close", true);
    // The last byte is the last data segment's, not the FIN's.
    assert_list(&c, &[("GET", "/stream", 200, us(200), ms(1), ms(2))]);
}

#[test]
fn long_target_is_cut_to_200_characters() {
    let target = format!("/{}", "a".repeat(300));
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), &get(&target)).send(
        Side::Server,
        T0 + ms(1),
        &response("200 OK", "", ""),
    );
    let c = only(&c);
    let got = at(&c, "/http/list/0/target").as_str().expect("target");
    assert_eq!(got, &target[..200]);
}

#[test]
fn interim_100_continue_is_not_a_response() {
    let post = b"POST /up HTTP/1.1\r\nHost: example.com\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), post)
        .send(Side::Server, T0 + ms(1), b"HTTP/1.1 100 Continue\r\n\r\n")
        .send(Side::Client, T0 + us(1100), b"data")
        .send(Side::Server, T0 + ms(2), &response("200 OK", "", "done"));
    let c = only(&c);
    assert_http1(&c, 1, 1);
    assert_u64(&c, "/http/list/0/status", 200);
    assert_secs(&c, "/http/list/0/response_last/at", ms(2));
}

/// A response whose 3000-byte body is sent in three segments at 1 ms,
/// 1.01 ms and 1.02 ms after GET /a at 200 µs, the segment holding bytes
/// `lost` of the whole response dropped by the capture (the client
/// acknowledges past it at 1.03 ms); then GET /b at 2 ms answered at 3 ms.
fn lost_segment(lost: std::ops::Range<usize>) -> Value {
    let first = response("200 OK", "", &"x".repeat(3000));
    let cuts = [lost.start, lost.end];
    let times = [ms(1), ms(1) + us(10), ms(1) + us(20)].map(|t| T0 + t);
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), &get("/a"))
        .send_split(Side::Server, &first, &cuts, &times);
    c.segs.remove(c.segs.len() - 2);
    c.ack_from(Side::Client, T0 + ms(1) + us(30))
        .send(Side::Client, T0 + ms(2), &get("/b"))
        .send(Side::Server, T0 + ms(3), &response("200 OK", "", "hello"));
    only(&c)
}

#[test]
fn gap_inside_a_body_keeps_the_count_exact() {
    let c = lost_segment(1000..2000);
    assert_http1(&c, 2, 2);
    assert_list(
        &c,
        &[
            ("GET", "/a", 200, us(200), ms(1), ms(1) + us(20)),
            ("GET", "/b", 200, ms(2), ms(3), ms(3)),
        ],
    );
}

#[test]
fn gap_inside_a_header_loses_sync() {
    let c = lost_segment(10..2000);
    assert_str(&c, "/http/method", "http1");
    assert_bool(&c, "/http/lost_sync", true);
    assert_u64(&c, "/http/requests", 2);
    assert_u64(&c, "/http/responses", 0);
}

/// An HTTP/2 frame: 24-bit length, type, flags, stream id, `len` zero bytes.
pub(crate) fn frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
    let length = (len as u32).to_be_bytes();
    let payload = vec![0; len];
    [
        &length[1..],
        &[kind, flags],
        &stream.to_be_bytes(),
        &payload,
    ]
    .concat()
}

pub(crate) const DATA: u8 = 0;
pub(crate) const HEADERS: u8 = 1;
pub(crate) const SETTINGS: u8 = 4;
pub(crate) const END_STREAM: u8 = 1;
pub(crate) const END_HEADERS: u8 = 4;
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Asserts HTTP/2 counts and each request's start and first/last response
/// byte (ns since the first packet). The frames here carry zero bytes, not
/// real HPACK (tests/captures.rs and `h2`'s unit tests decode real blocks).
fn assert_h2(c: &Value, requests: u64, responses: u64, times: &[(i64, i64, i64)]) {
    assert_str(c, "/http/method", "h2c");
    assert_u64(c, "/http/requests", requests);
    assert_u64(c, "/http/responses", responses);
    assert_str(c, "/http/confidence", "exact");
    assert_bool(c, "/http/lost_sync", false);
    let list = at(c, "/http/list").as_array().expect("list");
    assert_eq!(list.len(), times.len(), "{c:#}");
    for (r, &(start, first, last)) in list.iter().zip(times) {
        let got = ["start", "response_first", "response_last"].map(|k| nanos(&r[k]));
        assert_eq!(got, [start, first, last], "{r}");
    }
}

#[test]
fn h2c_prior_knowledge_counts_streams() {
    let request = |s| frame(HEADERS, END_STREAM | END_HEADERS, s, 20);
    let stream3 = request(3);
    let mut c = opened();
    c.send(
        Side::Client,
        T0 + us(200),
        &[PREFACE, &frame(SETTINGS, 0, 0, 6)].concat(),
    )
    .send(Side::Server, T0 + us(250), &frame(SETTINGS, 0, 0, 0))
    .send(Side::Client, T0 + us(300), &request(1))
    // Stream 3's frame header is cut after 5 of its 9 bytes.
    .send_split(Side::Client, &stream3, &[5], &[T0 + us(305), T0 + us(310)])
    .send(Side::Client, T0 + us(320), &request(5))
    .send(
        Side::Server,
        T0 + us(1100),
        &frame(HEADERS, END_HEADERS, 1, 10),
    )
    .send(
        Side::Server,
        T0 + us(1200),
        &frame(DATA, END_STREAM, 1, 100),
    )
    .send(
        Side::Server,
        T0 + us(1300),
        &frame(HEADERS, END_STREAM | END_HEADERS, 3, 10),
    )
    .send(
        Side::Server,
        T0 + us(1400),
        &frame(HEADERS, END_HEADERS, 5, 10),
    )
    .send(Side::Server, T0 + us(1500), &frame(DATA, END_STREAM, 5, 50));
    let c = only(&c);
    assert_h2(
        &c,
        3,
        3,
        &[
            (us(300), us(1100), us(1200)),
            (us(310), us(1300), us(1300)),
            (us(320), us(1400), us(1500)),
        ],
    );
    assert_eq!(at(&c, "/http/list/0/method"), &Value::Null);
    assert_eq!(at(&c, "/http/list/0/status"), &Value::Null);
}

/// An `Upgrade: h2c` request at 200 µs answered by 101 at 1 ms; the client's
/// preface at 1.1 ms and stream 3 at 1.2 ms; the HTTP/2 response to the
/// upgrade request on stream 1 at 1.5 ms, stream 3's at 2 ms.
fn upgraded() -> Value {
    let upgrade = b"GET / HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";
    let switching =
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), upgrade)
        .send(
            Side::Server,
            T0 + ms(1),
            &[&switching[..], &frame(SETTINGS, 0, 0, 0)].concat(),
        )
        .send(
            Side::Client,
            T0 + us(1100),
            &[
                PREFACE,
                &frame(SETTINGS, 0, 0, 0),
                &frame(SETTINGS, 1, 0, 0),
            ]
            .concat(),
        )
        .send(
            Side::Client,
            T0 + us(1200),
            &frame(HEADERS, END_STREAM | END_HEADERS, 3, 20),
        )
        .send(
            Side::Server,
            T0 + us(1500),
            &[
                frame(HEADERS, END_HEADERS, 1, 10),
                frame(DATA, END_STREAM, 1, 80),
            ]
            .concat(),
        )
        .send(
            Side::Server,
            T0 + ms(2),
            &frame(HEADERS, END_STREAM | END_HEADERS, 3, 10),
        );
    only(&c)
}

#[test]
fn h2c_upgrade_counts_the_upgrade_request_once() {
    let c = upgraded();
    assert_str(&c, "/http/method", "h2c");
    // The upgrade request is stream 1: one request. Its 101 is interim (as
    // 100 Continue is); the response proper is HTTP/2 on stream 1.
    assert_u64(&c, "/http/requests", 2);
    let list = at(&c, "/http/list").as_array().expect("list");
    let times: Vec<[i64; 3]> = list
        .iter()
        .map(|r| ["start", "response_first", "response_last"].map(|k| nanos(&r[k])))
        .collect();
    let want = [[us(200), us(1500), us(1500)], [us(1200), ms(2), ms(2)]];
    assert_eq!(times, want);
    assert_str(&c, "/http/list/0/method", "GET");
    assert_str(&c, "/http/list/0/target", "/");
    // HTTP/2 header blocks are not decoded, so the status is unknown.
    assert!(at(&c, "/http/list/0/status").is_null());
}

#[test]
fn h2c_upgrade_counts_both_responses() {
    assert_u64(&upgraded(), "/http/responses", 2);
}

#[test]
fn h2c_upgrade_is_reported() {
    assert_str(&upgraded(), "/http/upgrade", "h2c");
}

/// A connection from `port` opened at `t` carrying `targets` one after
/// another (a GET every 2 ms from `t` + 200 µs, answered 1 ms later), then
/// closed by the client.
fn browsing(port: u16, t: i64, targets: &[&str]) -> Conv {
    let mut c = from_port(port, t);
    let mut now = t + us(200);
    for target in targets {
        c.send(Side::Client, now, &get(target)).send(
            Side::Server,
            now + ms(1),
            &response("200 OK", "", "hello"),
        );
        now += ms(2);
    }
    c.close(Side::Client, now, now + us(10), now + us(20));
    c
}

/// The summary of the capture holding `convs`.
fn summary(convs: &[&Conv]) -> Value {
    at(&report(convs), "/summary").clone()
}

#[test]
fn summary_without_reuse() {
    let convs = [40001, 40002, 40003].map(|p| {
        let offset = i64::from(p - 40001);
        browsing(p, T0 + ms(offset), &["/"])
    });
    let s = summary(&convs.iter().collect::<Vec<_>>());
    assert_u64(&s, "/requests", 3);
    assert_u64(&s, "/requests_exact", 3);
    assert_u64(&s, "/requests_estimated", 0);
    assert_secs(&s, "/requests_per_connection/mean", secs(1));
    assert_u64(&s, "/requests_per_connection/max", 1);
    assert_secs(&s, "/handshakes_per_request/tcp", secs(1));
    assert_secs(&s, "/handshakes_per_request/tls_full", 0);
    assert_u64(&s, "/peak_concurrent_connections/connections", 3);
    assert_secs(&s, "/peak_concurrent_connections/at/at", ms(2));
    assert_eq!(at(&s, "/status_codes"), &serde_json::json!({"200": 3}));
    assert_str(
        &s,
        "/verdict",
        "3 requests used 3 connections: no reuse — 1.00 TCP handshakes per request",
    );
}

#[test]
fn summary_of_pooled_connections() {
    let a = browsing(40001, T0, &["/1", "/2", "/3"]);
    let b = browsing(40002, T0 + ms(1), &["/4", "/5"]);
    let s = summary(&[&a, &b]);
    assert_u64(&s, "/requests", 5);
    assert_u64(&s, "/requests_exact", 5);
    assert_secs(&s, "/requests_per_connection/mean", ms(2500));
    assert_u64(&s, "/requests_per_connection/max", 3);
    assert_secs(&s, "/handshakes_per_request/tcp", ms(400));
    assert_u64(&s, "/peak_concurrent_connections/connections", 2);
    assert_str(
        &s,
        "/verdict",
        "5 requests used 2 connections: pooled, 2.5 requests per connection",
    );
    let one = browsing(40001, T0, &["/1", "/2"]);
    assert_str(
        &summary(&[&one]),
        "/verdict",
        "2 requests used 1 connection: one connection reused for every request",
    );
    // Connections opened and closed without a request (a client racing
    // several open and using one): the verdict counts them too, while
    // the handshakes per request stay those of the connections used.
    let idle = [40002, 40003].map(|p| browsing(p, T0 + ms(1), &[]));
    let s = summary(&[&one, &idle[0], &idle[1]]);
    assert_str(
        &s,
        "/verdict",
        "2 requests used 1 connection: one connection reused for every request; 2 more connections carried none",
    );
    assert_secs(&s, "/handshakes_per_request/tcp", ms(500));
    assert_u64(&s, "/connections_unused", 2);
    assert_u64(&s, "/tls_handshakes_full_unused", 0);
}
