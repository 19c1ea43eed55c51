//! A malformed-input corpus, generated here (nothing stored on disk): each
//! case puts something broken — a frame cut inside one of its headers, an
//! impossible length, a corrupt capture block, a hostile TLS or HTTP stream —
//! between two good connections and runs the real binary. Each case checks
//! (a) the exit code (0; 2 only for inputs that are not captures at all),
//! (b) the anomaly counted for it in `summary.anomalies` (or
//! `summary.truncated` and a warning on stderr), and (c) that the good
//! connection before it (cleartext HTTP/1.1) and the one after it (TLS 1.2)
//! are reported exactly as in the same capture without the bad part.
//!
//! Here: the setup, and frames cut inside their headers or with impossible
//! headers. Broken capture files and hostile stream contents are in the
//! submodules, which share the setup here.

use std::process::Output;

use serde_json::{json, Value};

use crate::support::tls::*;
use crate::support::*;

mod files;
mod streams;

const BEFORE: &str = "10.0.0.1:41000";
const AFTER: &str = "10.0.0.1:42000";
/// The client of the bad connection, when the bad part is a connection.
const BAD: &str = "10.0.0.1:43000";
/// When the bad packets are sent: after the first good connection closed,
/// well before the second one opens (at 100 ms).
const BAD_AT: i64 = T0 + ms(50);

// ------------------------------------------------------------------ setup

/// The good connection before: GET / answered with a 1000-byte body,
/// closed by the client.
fn good_before() -> Conv {
    let mut c = opened_at(BEFORE, "10.0.0.2:80", T0);
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{}",
        "x".repeat(1000)
    );
    c.send(
        Side::Client,
        T0 + us(200),
        b"GET /before HTTP/1.1\r\nHost: example.com\r\n\r\n",
    )
    .send(Side::Server, T0 + ms(1), response.as_bytes())
    .close(
        Side::Client,
        T0 + ms(2),
        T0 + ms(2) + us(10),
        T0 + ms(2) + us(20),
    );
    c
}

/// A TLS 1.2 full handshake from `client` to `server` opened at `t`, one
/// request and its response, closed by the client 6 ms after `t`.
fn tls12_at(client: &str, server: &str, t: i64) -> Conv {
    let hello = handshake(
        CLIENT_HELLO,
        &client_hello(&[], &[sni("after.example"), alpn(&["http/1.1"])]),
    );
    let flight = [
        handshake(
            SERVER_HELLO,
            &server_hello(&[0x22; 32], 0xc02f, &[alpn(&["http/1.1"])]),
        ),
        handshake(CERTIFICATE, &[0xab; 1200]),
        handshake(SERVER_KEY_EXCHANGE, &[0xcd; 300]),
        handshake(SERVER_HELLO_DONE, &[]),
    ]
    .concat();
    let ccs_finished = [change_cipher_spec(), opaque(HANDSHAKE, 40)].concat();
    let mut c = opened_at(client, server, t);
    c.send(Side::Client, t + us(200), &hello)
        .send(Side::Server, t + ms(1), &flight)
        .send(
            Side::Client,
            t + ms(2),
            &[
                handshake(CLIENT_KEY_EXCHANGE, &[0x41; 66]),
                ccs_finished.clone(),
            ]
            .concat(),
        )
        .send(Side::Server, t + ms(3), &ccs_finished)
        .send(Side::Client, t + ms(4), &opaque(APPLICATION_DATA, 300))
        .send(Side::Server, t + ms(5), &opaque(APPLICATION_DATA, 1400))
        .close(
            Side::Client,
            t + ms(6),
            t + ms(6) + us(10),
            t + ms(6) + us(20),
        );
    c
}

/// The good connection after: TLS 1.2 at 100 ms.
fn good_after() -> Conv {
    tls12_at(AFTER, "10.0.0.3:443", T0 + ms(100))
}

fn before_packets() -> Vec<Packet> {
    good_before().packets(Link::Ethernet)
}

fn after_packets() -> Vec<Packet> {
    good_after().packets(Link::Ethernet)
}

/// A classic Ethernet pcap: the good connection, `bad`, the other good one.
fn around(bad: Vec<Packet>) -> Vec<u8> {
    around_in(Pcap::new(1), bad)
}

fn around_in(pcap: Pcap, bad: Vec<Packet>) -> Vec<u8> {
    let mut packets = before_packets();
    packets.extend(bad);
    packets.extend(after_packets());
    pcap.write(&packets)
}

/// `handshakes analyze -T json` on `bytes`.
fn run_on(bytes: &[u8]) -> Output {
    analyze_with(bytes, &["-T", "json"])
}

/// The connection whose client is `client`, if reported.
fn by_client<'a>(v: &'a Value, client: &str) -> Option<&'a Value> {
    at(v, "/connections")
        .as_array()
        .expect("connections")
        .iter()
        .find(|c| c["client"] == client)
}

/// A connection without its id (which depends on what came before it).
fn without_id(c: &Value) -> Value {
    let mut c = c.clone();
    c.as_object_mut().expect("object").remove("id");
    c
}

/// The good connections as reported with nothing bad between them.
fn reference() -> (Value, Value) {
    use std::sync::OnceLock;
    static REFERENCE: OnceLock<(Value, Value)> = OnceLock::new();
    REFERENCE
        .get_or_init(|| {
            let v = json_of(&run_on(&around(Vec::new())));
            assert_eq!(connections(&v), 2, "{v:#}");
            assert_eq!(at(&v, "/summary/anomalies"), &json!({}), "{v:#}");
            let before = without_id(by_client(&v, BEFORE).expect("before"));
            let after = without_id(by_client(&v, AFTER).expect("after"));
            // They are what they should be.
            assert_eq!(before["http"]["requests"], 1);
            assert_eq!(before["http"]["list"][0]["status"], 200);
            assert_eq!(before["tcp"]["state"], "SF");
            assert_eq!(after["tls"]["version"], "TLS 1.2");
            assert_eq!(after["tls"]["sni"], "after.example");
            assert_eq!(after["tls"]["outcome"], "complete");
            assert_eq!(after["http"]["requests"], 1);
            (before, after)
        })
        .clone()
}

/// Asserts that the good connection before the bad part is reported as
/// without it, and the one after it too unless `after` is false (reading
/// stopped at the bad part).
fn assert_good(v: &Value, after: bool) {
    let (want_before, want_after) = reference();
    let got = by_client(v, BEFORE).unwrap_or_else(|| panic!("no {BEFORE} in {v:#}"));
    assert_eq!(without_id(got), want_before, "the connection before");
    match by_client(v, AFTER) {
        Some(got) if after => assert_eq!(without_id(got), want_after, "the connection after"),
        None if !after => {}
        got => panic!("the connection after: {got:?}"),
    }
}

/// Runs the capture, which must succeed, and checks the good connections
/// and that the summary's anomalies are exactly `anomalies`.
fn check(bytes: &[u8], anomalies: Value) -> Value {
    let out = run_on(bytes);
    let v = json_of(&out);
    assert_eq!(at(&v, "/summary/anomalies"), &anomalies, "{v:#}");
    assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(false));
    assert_good(&v, true);
    v
}

/// A segment from a third host to the first good server, with a payload.
fn stray_seg() -> Seg {
    let mut seg = Seg::new(addr("10.0.0.9:5555"), addr("10.0.0.2:80"), 7_000);
    seg.ack = Some(9_000);
    seg.psh = true;
    seg.payload = b"stray payload".to_vec();
    seg
}

/// An IPv6 segment.
fn stray_seg6() -> Seg {
    let mut seg = stray_seg();
    seg.src = addr("[2001:db8::9]:5555");
    seg.dst = addr("[2001:db8::2]:80");
    seg
}

/// `frame` captured at BAD_AT.
fn at_bad(frame: Vec<u8>) -> Packet {
    Packet::new(BAD_AT, frame)
}

/// Ethernet + IPv4 + TCP without options.
const HEADERS: usize = 14 + 20 + 20;

// ------------------------------------------------------- truncated frames

/// A frame whose capture ends `keep` bytes in (its wire length intact).
fn cut_frame(link: Link, seg: &Seg, keep: usize) -> Vec<u8> {
    let frame = link.frame(seg);
    let orig = frame.len();
    assert!(keep < orig, "cut inside the frame");
    let mut p = at_bad(frame).cut(keep);
    p.orig_len = u32::try_from(orig).expect("frame length");
    around(vec![p])
}

/// A skipped frame counted as `kind`, with one packet skipped.
fn assert_skipped_as(bytes: &[u8], kind: &str) {
    let v = check(bytes, json!({ kind: 1 }));
    assert_u64(&v, "/summary/packets/skipped", 1);
    assert_eq!(connections(&v), 2, "the bad frame makes no connection");
}

#[test]
fn frame_cut_inside_the_ethernet_header() {
    for keep in [1, 6, 13] {
        assert_skipped_as(
            &cut_frame(Link::Ethernet, &stray_seg(), keep),
            "truncated_link",
        );
    }
}

#[test]
fn frame_cut_inside_the_vlan_tag() {
    for keep in [15, 16, 17] {
        assert_skipped_as(
            &cut_frame(Link::Vlan(100), &stray_seg(), keep),
            "truncated_link",
        );
    }
    // Inside the inner tag of QinQ.
    assert_skipped_as(
        &cut_frame(Link::QinQ(100, 200), &stray_seg(), 20),
        "truncated_link",
    );
}

#[test]
fn frame_cut_inside_the_ipv4_header() {
    for keep in [15, 24, 33] {
        assert_skipped_as(
            &cut_frame(Link::Ethernet, &stray_seg(), keep),
            "truncated_ip",
        );
    }
}

#[test]
fn frame_cut_inside_the_ipv6_header() {
    for keep in [15, 30, 53] {
        assert_skipped_as(
            &cut_frame(Link::Ethernet, &stray_seg6(), keep),
            "truncated_ip",
        );
    }
}

#[test]
fn frame_cut_inside_the_tcp_header() {
    for keep in [14 + 20 + 1, 14 + 20 + 10, 14 + 20 + 19] {
        assert_skipped_as(
            &cut_frame(Link::Ethernet, &stray_seg(), keep),
            "truncated_tcp",
        );
    }
    // IPv6 too.
    assert_skipped_as(
        &cut_frame(Link::Ethernet, &stray_seg6(), 14 + 40 + 12),
        "truncated_tcp",
    );
}

#[test]
fn zero_length_frame_is_skipped_as_truncated_link() {
    let mut p = at_bad(Vec::new());
    p.orig_len = 60;
    assert_skipped_as(&around(vec![p]), "truncated_link");
    // And with a wire length of 0 too.
    assert_skipped_as(&around(vec![at_bad(Vec::new())]), "truncated_link");
}

// ------------------------------------------------------ impossible headers

/// A stray Ethernet/IPv4/TCP frame changed by `edit`.
fn edited(edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut frame = Link::Ethernet.frame(&stray_seg());
    edit(&mut frame);
    around(vec![at_bad(frame)])
}

#[test]
fn ipv4_ihl_below_5_is_malformed_ip() {
    for ihl in [0u8, 1, 4] {
        assert_skipped_as(&edited(|f| f[14] = 0x40 | ihl), "malformed_ip");
    }
}

#[test]
fn ipv4_total_length_below_the_header_is_malformed_ip() {
    for total in [1u16, 10, 19] {
        assert_skipped_as(
            &edited(|f| f[16..18].copy_from_slice(&total.to_be_bytes())),
            "malformed_ip",
        );
    }
}

#[test]
fn ipv4_total_length_zero_is_segmentation_offload_not_malformed() {
    // TSO captures carry total length 0: the frame's length is used.
    let v = check(&edited(|f| f[16..18].copy_from_slice(&[0, 0])), json!({}));
    let good = before_packets().len() + after_packets().len();
    assert_u64(&v, "/summary/packets/tcp", good as u64 + 1);
    let stray = by_client(&v, "10.0.0.9:5555").expect("the stray segment's connection");
    assert_u64(stray, "/tcp/bytes/client", b"stray payload".len() as u64);
}

#[test]
fn tcp_data_offset_below_5_is_malformed_tcp() {
    for offset in [0u8, 1, 4] {
        assert_skipped_as(
            &edited(|f| f[46] = (offset << 4) | (f[46] & 0x0f)),
            "malformed_tcp",
        );
    }
}
