//! A malformed-input corpus, generated here (nothing stored on disk): each
//! case puts something broken — a frame cut inside one of its headers, an
//! impossible length, a corrupt capture block, a hostile TLS or HTTP stream —
//! between two good connections and runs the real binary. Each case checks
//! (a) the exit code (0; 2 only for inputs that are not captures at all),
//! (b) the anomaly counted for it in `summary.anomalies` (or
//! `summary.truncated` and a warning on stderr), and (c) that the good
//! connection before it (cleartext HTTP/1.1) and the one after it (TLS 1.2)
//! are reported exactly as in the same capture without the bad part.

use std::process::Output;

use serde_json::{json, Value};

use crate::support::tls::*;
use crate::support::*;

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

// ----------------------------------------------------- capture file level

#[test]
fn caplen_larger_than_origlen_uses_the_captured_bytes() {
    let frame = Link::Ethernet.frame(&stray_seg());
    let mut p = at_bad(frame);
    p.orig_len = 40; // less than the 67 bytes captured
    let v = check(&around(vec![p]), json!({}));
    let stray = by_client(&v, "10.0.0.9:5555").expect("the stray segment's connection");
    assert_u64(stray, "/tcp/bytes/client", b"stray payload".len() as u64);
    assert_u64(stray, "/tcp/packets/client", 1);
}

#[test]
fn caplen_larger_than_the_header_snaplen_is_read_whole() {
    // The file header claims a 64-byte snap length, yet every record holds
    // more (the TLS ClientHello frame alone is over 100 bytes).
    let pcap = Pcap {
        snaplen: 64,
        ..Pcap::new(1)
    };
    let frame = Link::Ethernet.frame(&stray_seg());
    let v = check(&around_in(pcap, vec![at_bad(frame)]), json!({}));
    assert_eq!(connections(&v), 3);
}

#[test]
fn timestamps_going_backwards_are_counted() {
    // A UDP datagram stamped 1 ms after the first packet, written after the
    // first connection's last packet (2.02 ms).
    let udp = udp_frame(addr("10.0.0.9:53"), addr("10.0.0.1:53"), b"dns?");
    let v = check(
        &around(vec![Packet::new(T0 + ms(1), udp)]),
        json!({"timestamp_backwards": 1}),
    );
    assert_u64(&v, "/summary/packets/skipped", 1);
    // A TCP segment going back in time is used all the same.
    let tcp = Packet::new(T0 + ms(1), Link::Ethernet.frame(&stray_seg()));
    let v = check(&around(vec![tcp]), json!({"timestamp_backwards": 1}));
    assert!(by_client(&v, "10.0.0.9:5555").is_some(), "{v:#}");
}

/// A pcapng of the good connections on interface 0 (Ethernet) with
/// `blocks` between them.
fn pcapng_around(blocks: &[u8]) -> Vec<u8> {
    let mut out = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .packets(&before_packets())
        .bytes();
    out.extend_from_slice(blocks);
    // Enhanced Packet Blocks without a new section: still interface 0.
    out.extend(Pcapng::new().packets(&after_packets()).bytes());
    out
}

/// One Enhanced Packet Block (as Pcapng writes it) holding a stray frame.
fn stray_epb(if_id: u32) -> Vec<u8> {
    let p = at_bad(Link::Ethernet.frame(&stray_seg())).on(if_id);
    Pcapng::new().packet(&p).bytes()
}

#[test]
fn pcapng_packet_on_an_undefined_interface_is_counted() {
    let v = check(
        &pcapng_around(&stray_epb(7)),
        json!({"unknown_interface": 1}),
    );
    assert_eq!(connections(&v), 2);
    assert_str(&v, "/summary/format", "pcapng");
}

#[test]
fn pcapng_block_lengths_that_disagree_stop_reading_with_a_warning() {
    let good = stray_epb(0);
    let n = good.len();
    // The trailing total length differs from the leading one.
    let mut trailer = good.clone();
    trailer[n - 4..].copy_from_slice(&(n as u32 + 4).to_le_bytes());
    // The leading total length claims 8 more bytes than the block has.
    let mut leader = good.clone();
    leader[4..8].copy_from_slice(&(n as u32 + 8).to_le_bytes());
    for (what, block) in [("trailer", trailer), ("leader", leader)] {
        let out = run_on(&pcapng_around(&block));
        let v = json_of(&out);
        assert_eq!(
            at(&v, "/summary/truncated"),
            &Value::Bool(true),
            "{what}: {v:#}"
        );
        let warnings = at(&v, "/summary/warnings").as_array().expect("warnings");
        assert!(!warnings.is_empty(), "{what}");
        let err = stderr(&out);
        for w in warnings {
            assert!(err.contains(w.as_str().expect("warning")), "{what}: {err}");
        }
        // Everything before the corrupt block is reported.
        assert_good(&v, false);
    }
}

#[test]
fn classic_pcap_cut_inside_the_last_record_reports_what_it_read() {
    let whole = around(Vec::new());
    let cut = &whole[..whole.len() - 30];
    let out = run_on(cut);
    let v = json_of(&out);
    assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(true));
    assert!(stderr(&out).contains("cut short"), "{}", stderr(&out));
    let (want_before, _) = reference();
    let got = by_client(&v, BEFORE).expect("before");
    assert_eq!(without_id(got), want_before);
}

#[test]
fn not_a_capture_exits_2() {
    for bytes in [
        b"GIF89a, certainly not a capture file at all".to_vec(),
        vec![
            0xd4, 0xc3, 0xb2, 0xa2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        vec![0; 64],
    ] {
        let out = run_on(&bytes);
        assert_eq!(out.status.code(), Some(2), "{bytes:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("not a pcap"), "{}", stderr(&out));
    }
}

#[test]
fn capture_cut_inside_its_file_header_exits_2() {
    let pcap = around(Vec::new());
    let pcapng = pcapng_around(&[]);
    for (what, bytes) in [
        ("pcap", &pcap[..10]),
        ("pcap", &pcap[..23]),
        ("pcapng", &pcapng[..12]),
    ] {
        let out = run_on(bytes);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
}

#[test]
fn too_many_threads_is_one_line_and_exit_2() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(["analyze", "--threads", "1000", "-"])
        .output()
        .expect("handshakes runs");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--threads 1000: at most 256"), "{err}");
}

// ------------------------------------------------- hostile stream contents

/// A connection from BAD to `server` opened at BAD_AT, scripted by `script`.
fn bad_conn(server: &str, script: impl FnOnce(&mut Conv)) -> Conv {
    let mut c = opened_at(BAD, server, BAD_AT);
    script(&mut c);
    c
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
    let c = bad_conn("10.0.0.4:443", |c| {
        c.send(Side::Client, BAD_AT + us(200), &hello);
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            &handshake(SERVER_HELLO, &server_hello(&[], 0xc02f, &[])),
        );
    });
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
    let c = bad_conn("10.0.0.4:443", |c| {
        c.send(Side::Client, BAD_AT + us(200), &hello);
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            &handshake(SERVER_HELLO, &server_hello(&[], 0xc02f, &[])),
        );
    });
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
    let c = bad_conn("10.0.0.4:443", |c| {
        c.send(Side::Client, BAD_AT + us(200), &huge_hello(CLIENT_HELLO));
        c.send(
            Side::Server,
            BAD_AT + ms(1),
            &handshake(SERVER_HELLO, &server_hello(&[], 0xc02f, &[])),
        );
    });
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
