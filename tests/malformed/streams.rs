//! Malformed input inside a connection's stream: frames cut inside TLS
//! records and HTTP headers, oversized TLS records and hellos (and a message
//! spanning records, which is fine), an absurd SSLv2 length, a thousand
//! HTTP/1 headers, an overflowing chunk size and the largest HTTP/2 frame.

use super::*;

// ------------------------------------------------- hostile stream contents

/// A connection from BAD to `server` opened at BAD_AT, scripted by `script`.
fn bad_conn(server: &str, script: impl FnOnce(&mut Conv)) -> Conv {
    let mut c = opened_at(BAD, server, BAD_AT);
    script(&mut c);
    c
}

/// The bad connection carrying `hello` from the client, answered by a TLS
/// 1.2 ServerHello.
fn hello_then_server_hello(hello: &[u8]) -> Conv {
    bad_conn("10.0.0.4:443", |c| {
        c.send(Side::Client, BAD_AT + us(200), hello);
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            &handshake(SERVER_HELLO, &server_hello(&[], 0xc02f, &[])),
        );
    })
}

fn with_bad(c: &Conv) -> Vec<u8> {
    around(c.packets(Link::Ethernet))
}

/// The bad connection of a report.
fn the_bad(v: &Value) -> &Value {
    by_client(v, BAD).unwrap_or_else(|| panic!("no {BAD} in {v:#}"))
}

/// A small TLS 1.2 ClientHello (SNI bad.example) in one record.
fn some_client_hello() -> Vec<u8> {
    handshake(CLIENT_HELLO, &client_hello(&[], &[sni("bad.example")]))
}

/// A connection whose `index`-th segment (counting the handshake) is
/// captured only up to `keep` payload bytes.
fn snaplen_cut(c: Conv, index: usize, keep: usize) -> Vec<u8> {
    let mut packets = c.packets(Link::Ethernet);
    let orig = packets[index].data.len();
    packets[index] = packets[index].clone().cut(HEADERS + keep);
    packets[index].orig_len = orig as u32;
    around(packets)
}

#[test]
fn frame_cut_inside_a_tls_record_header() {
    let hello = some_client_hello();
    let c = hello_then_server_hello(&hello);
    // Segment 3 is the ClientHello: 3 of its record header's 5 bytes captured.
    let v = check(
        &snaplen_cut(c, 3, 3),
        json!({"snaplen_cut": 1, "stream_gap": 1}),
    );
    let bad = the_bad(&v);
    assert_u64(bad, "/tls/gap_bytes", hello.len() as u64 - 3);
    assert_eq!(bad["tls"]["client_hello"], Value::Null);
    assert_str(bad, "/tls/version", "TLS 1.2");
    assert_u64(bad, "/tcp/bytes/client", hello.len() as u64);
}

#[test]
fn frame_cut_inside_a_tls_handshake_message() {
    let hello = some_client_hello();
    let c = hello_then_server_hello(&hello);
    // The record header and 2 bytes of the handshake header, then 30 bytes in.
    for keep in [7, 30] {
        let v = check(
            &snaplen_cut(c.clone(), 3, keep),
            json!({"snaplen_cut": 1, "stream_gap": 1}),
        );
        let bad = the_bad(&v);
        assert_u64(bad, "/tls/gap_bytes", (hello.len() - keep) as u64);
        assert_eq!(bad["tls"]["client_hello"], Value::Null, "keep {keep}");
        assert_eq!(bad["tls"]["sni"], Value::Null, "keep {keep}");
        assert_str(bad, "/tls/version", "TLS 1.2");
    }
}

#[test]
fn frame_cut_inside_an_http_header() {
    let request = b"GET /cut/inside/the/header HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let c = bad_conn("10.0.0.4:80", |c| {
        c.send(Side::Client, BAD_AT + us(200), request);
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        );
    });
    let v = check(
        &snaplen_cut(c, 3, 10),
        json!({"snaplen_cut": 1, "stream_gap": 1}),
    );
    let bad = the_bad(&v);
    assert_str(bad, "/http/method", "http1");
    assert_bool(bad, "/http/lost_sync", true);
    assert_u64(bad, "/http/requests", 0);
}

#[test]
fn tls_record_longer_than_2_14_plus_2048_is_malformed_tls() {
    for len in [(1u16 << 14) + 2049, 0xffff] {
        let c = bad_conn("10.0.0.4:443", |c| {
            c.send(Side::Client, BAD_AT + us(200), &some_client_hello());
            let header = [&[HANDSHAKE, 3, 3][..], &len.to_be_bytes()].concat();
            c.send(
                Side::Server,
                BAD_AT + ms(1),
                &[header, vec![2; 200]].concat(),
            );
        });
        let v = check(&with_bad(&c), json!({"malformed_tls": 1}));
        let bad = the_bad(&v);
        assert_u64(bad, "/anomalies/malformed_tls", 1);
        assert_str(bad, "/tls/sni", "bad.example");
        assert_eq!(bad["tls"]["server_hello"], Value::Null);
        assert_str(bad, "/tls/outcome", "incomplete");
    }
}

#[test]
fn handshake_message_spanning_records_is_fine() {
    // A 40000-byte Certificate in three records (each under 2^14).
    let cert = message(CERTIFICATE, &vec![0xab; 40_000]);
    let records: Vec<u8> = cert
        .chunks(16_000)
        .flat_map(|part| record(HANDSHAKE, part))
        .collect();
    let c = bad_conn("10.0.0.4:443", |c| {
        c.send(Side::Client, BAD_AT + us(200), &some_client_hello());
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            &[
                handshake(SERVER_HELLO, &server_hello(&[], 0xc02f, &[])),
                records,
            ]
            .concat(),
        );
    });
    let v = check(&with_bad(&c), json!({}));
    let names: Vec<&str> = at(the_bad(&v), "/tls/events")
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["client_hello", "server_hello", "certificate"]);
}

/// A hello message claiming 0x050000 = 327680 bytes (more than the 256 KiB
/// buffered per direction), in a record of 504 bytes.
fn huge_hello(kind: u8) -> Vec<u8> {
    record(HANDSHAKE, &[&[kind, 0x05, 0, 0][..], &[0xab; 500]].concat())
}

#[test]
fn hello_longer_than_the_256k_cap_is_malformed_tls() {
    // The ServerHello.
    let c = bad_conn("10.0.0.4:443", |c| {
        c.send(Side::Client, BAD_AT + us(200), &some_client_hello());
        c.send(Side::Server, BAD_AT + ms(1), &huge_hello(SERVER_HELLO));
    });
    let v = check(&with_bad(&c), json!({"malformed_tls": 1}));
    let bad = the_bad(&v);
    assert_u64(bad, "/anomalies/malformed_tls", 1);
    assert_str(bad, "/tls/sni", "bad.example");
    assert_eq!(bad["tls"]["version"], Value::Null);
    assert_str(bad, "/tls/outcome", "incomplete");
    // The ClientHello.
    let c = hello_then_server_hello(&huge_hello(CLIENT_HELLO));
    let v = check(&with_bad(&c), json!({"malformed_tls": 1}));
    let bad = the_bad(&v);
    assert_u64(bad, "/anomalies/malformed_tls", 1);
    assert_eq!(bad["tls"]["client_hello"], Value::Null);
    assert_str(bad, "/tls/version", "TLS 1.2");
}

#[test]
fn sslv2_record_with_an_absurd_length() {
    // An SSLv2 CLIENT-HELLO header claiming 0x7fff bytes, followed by 20.
    let c = bad_conn("10.0.0.4:443", |c| {
        let start = [&[0xff, 0xff, 1, 3, 1][..], &[0x5a; 20]].concat();
        c.send(Side::Client, BAD_AT + us(200), &start);
        c.send(Side::Server, BAD_AT + ms(1), &alert(2, 40));
    });
    let v = check(&with_bad(&c), json!({}));
    let bad = the_bad(&v);
    assert_eq!(bad["tls"]["client_hello"], Value::Null);
    assert_str(bad, "/tls/outcome", "failed");
    assert_str(bad, "/tls/alert/description", "handshake_failure");
}

#[test]
fn http_request_with_1000_headers() {
    let headers: String = (0..1000)
        .map(|i| format!("X-Header-{i}: value {i}\r\n"))
        .collect();
    let request = format!("GET /many HTTP/1.1\r\nHost: example.com\r\n{headers}\r\n");
    let c = bad_conn("10.0.0.4:80", |c| {
        c.send(Side::Client, BAD_AT + us(200), request.as_bytes());
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\r\n",
        );
    });
    let v = check(&with_bad(&c), json!({}));
    let bad = the_bad(&v);
    assert_str(bad, "/http/method", "http1");
    // More headers than are parsed on the stack: parsed with room for all.
    assert_bool(bad, "/http/lost_sync", false);
    assert_u64(bad, "/http/requests", 1);
    assert_u64(bad, "/http/list/0/status", 431);
    assert_str(bad, "/http/list/0/target", "/many");
}

#[test]
fn http_chunk_size_overflow_loses_sync() {
    let c = bad_conn("10.0.0.4:80", |c| {
        c.send(
            Side::Client,
            BAD_AT + us(200),
            b"GET /chunked HTTP/1.1\r\nHost: example.com\r\n\r\n",
        );
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
        );
        c.send(
            Side::Client,
            BAD_AT + ms(2),
            b"GET /next HTTP/1.1\r\nHost: example.com\r\n\r\n",
        );
        c.send(
            Side::Server,
            BAD_AT + ms(3),
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        );
    });
    let v = check(&with_bad(&c), json!({}));
    let bad = the_bad(&v);
    assert_bool(bad, "/http/lost_sync", true);
    assert_u64(bad, "/http/requests", 2);
    assert_u64(bad, "/http/responses", 1);
    assert_u64(bad, "/http/list/0/status", 200);
}

/// An HTTP/2 frame header with a 24-bit length, then `payload` bytes.
fn h2_frame(len: u32, kind: u8, flags: u8, stream: u32, payload: usize) -> Vec<u8> {
    [
        &len.to_be_bytes()[1..],
        &[kind, flags],
        &stream.to_be_bytes(),
        &vec![0; payload],
    ]
    .concat()
}

#[test]
fn h2_frame_with_the_largest_length() {
    // 2^24 − 1 is the most the 24-bit length can say ("more than 2^24 − 1"
    // cannot be written); a DATA frame claiming it swallows the rest.
    let c = bad_conn("10.0.0.4:80", |c| {
        let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        c.send(
            Side::Client,
            BAD_AT + us(200),
            &[&preface[..], &h2_frame(0, 4, 0, 0, 0)].concat(),
        );
        c.send(Side::Server, BAD_AT + us(300), &h2_frame(0, 4, 0, 0, 0));
        c.send(Side::Client, BAD_AT + us(400), &h2_frame(20, 1, 5, 1, 20));
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            &[h2_frame(10, 1, 4, 1, 10), h2_frame(0xff_ffff, 0, 0, 1, 100)].concat(),
        );
        c.send(Side::Client, BAD_AT + ms(2), &h2_frame(20, 1, 5, 3, 20));
    });
    let v = check(&with_bad(&c), json!({}));
    let bad = the_bad(&v);
    assert_str(bad, "/http/method", "h2c");
    assert_u64(bad, "/http/requests", 2);
    assert_u64(bad, "/http/responses", 1);
}
