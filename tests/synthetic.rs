//! Synthetic captures with exact timestamps, run through the real binary:
//! handshake timing to the micro- and nanosecond, connection splitting on
//! port reuse, SYN retransmission and reordering, resets and Zeek states,
//! mid-stream starts, every supported link type and capture format
//! (pcap in both byte orders and resolutions, pcapng with several interfaces
//! and sections, gzip, zstd, stdin), truncated input, `--merge`, filters,
//! output formats, exit codes, broken pipes and the anomaly counters.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::Value;

use crate::support::*;

const CLIENT: &str = "10.0.0.1:40000";
const SERVER: &str = "10.0.0.2:80";
const ISNS: (u32, u32) = (1_000, 5_000);

/// The standard connection: `Script::starting(T0)` from CLIENT to SERVER.
fn basic() -> Conv {
    Script::starting(T0).conv(CLIENT, SERVER, ISNS)
}

/// A fresh CLIENT → SERVER conversation with nothing sent yet.
fn fresh() -> Conv {
    Conv::new(CLIENT, SERVER, ISNS.0, ISNS.1)
}

/// CLIENT → SERVER after a handshake at 0, 100 µs and 150 µs.
fn opened() -> Conv {
    let mut c = fresh();
    c.handshake(T0, T0 + us(100), T0 + us(150));
    c
}

/// Asserts that `c` is exactly the connection of `Script::starting(T0)`.
fn assert_basic(c: &Value, client: &str, server: &str) {
    assert_str(c, "/client", client);
    assert_str(c, "/server", server);
    assert_str(c, "/client_by", "syn");
    assert_eq!(at(c, "/partial"), &Value::Bool(false));
    assert_handshake(c, us(100), us(50), 0);
    assert_secs(c, "/duration", ms(2) + us(20));
    assert_u64(c, "/tcp/packets/client", 5);
    assert_u64(c, "/tcp/packets/server", 3);
    assert_u64(c, "/tcp/bytes/client", 120);
    assert_u64(c, "/tcp/bytes/server", 900);
    assert_str(c, "/tcp/state", "SF");
    assert_str(c, "/tcp/history", "ShADdFf");
    assert_str(c, "/close/kind", "fin");
    assert_str(c, "/close/by", "client");
    assert_secs(c, "/close/time/at", ms(2));
}

/// A report holding just the standard connection.
fn assert_only_basic(v: &Value, client: &str, server: &str) {
    assert_eq!(connections(v), 1, "{v:#}");
    assert_basic(conn(v, 0), client, server);
    assert_u64(v, "/summary/tcp_handshakes", 1);
    assert_u64(v, "/summary/packets/skipped", 0);
}

/// The standard connection between `client` and `server` framed with `link`.
fn check_link(link: Link, client: &str, server: &str) {
    let c = Script::starting(T0).conv(client, server, ISNS);
    assert_only_basic(&analyze(&pcap_of(link, &[&c])), client, server);
}

/// Asserts the history's letters, with or without the leading `^` (which
/// marks a connection whose first packet came from the server).
fn assert_letters(c: &Value, letters: &str) {
    let history = at(c, "/tcp/history").as_str().expect("string");
    assert_eq!(history.trim_start_matches('^'), letters);
}

/// The close kind of every connection of a report, in id order.
fn close_kinds(v: &Value) -> Vec<String> {
    (0..connections(v))
        .map(|i| {
            at(conn(v, i), "/close/kind")
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

// ---------------------------------------------------------------- timing

#[test]
fn handshake_timings_are_exact() {
    let a = Script {
        synack: T0 + us(137),
        ack: T0 + us(180),
        ..Script::starting(T0)
    }
    .conv(CLIENT, SERVER, ISNS);
    let t1 = T0 + ms(5) + us(3);
    let b = Script {
        synack: t1 + ms(2) + us(1),
        ack: t1 + ms(2) + us(250),
        request: t1 + ms(3),
        response: t1 + ms(4),
        close: t1 + ms(5),
        ..Script::starting(t1)
    }
    .conv("10.0.0.1:40001", SERVER, (77, 99));
    let packets = frames(Link::Ethernet, &interleave(&[&a, &b]));
    let wire_bytes: usize = packets.iter().map(|p| p.data.len()).sum();
    let v = analyze(&Pcap::new(1).write(&packets));

    assert_eq!(connections(&v), 2);
    let (ca, cb) = (conn(&v, 0), conn(&v, 1));
    assert_u64(ca, "/id", 1);
    assert_u64(cb, "/id", 2);
    assert_handshake(ca, us(137), us(43), 0);
    assert_handshake(cb, ms(2) + us(1), us(249), ms(5) + us(3));
    assert_secs(ca, "/tcp/handshake/syn/at", 0);
    assert_secs(ca, "/tcp/handshake/synack/at", us(137));
    assert_secs(ca, "/tcp/handshake/ack/at", us(180));
    assert_secs(cb, "/end/at", ms(5) + us(3) + ms(5) + us(20));
    assert_secs(cb, "/duration", ms(5) + us(20));
    assert_eq!(at(ca, "/close/fin_both"), &Value::Bool(true));

    assert_u64(&v, "/summary/connections", 2);
    assert_u64(&v, "/summary/tcp_handshakes", 2);
    assert_u64(&v, "/summary/connections_without_handshake", 0);
    assert_u64(&v, "/summary/packets/total", 16);
    assert_u64(&v, "/summary/packets/tcp", 16);
    assert_u64(&v, "/summary/packets/bytes", wire_bytes as u64);
    assert_u64(&v, "/summary/connect/count", 2);
    assert_secs(&v, "/summary/connect/min", us(180));
    assert_secs(&v, "/summary/connect/max", ms(2) + us(250));
    assert_secs(&v, "/summary/span", ms(10) + us(23));
    assert_u64(&v, "/summary/close/fin", 2);
    assert_str(&v, "/summary/format", "pcap");
    assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(false));
}

#[test]
fn handshake_ack_must_acknowledge_the_server_isn() {
    let mut c = fresh();
    c.syn(T0).synack(T0 + us(100));
    // An ACK acknowledging the wrong sequence number is not the handshake ACK.
    let mut wrong = Seg::new(addr(CLIENT), addr(SERVER), ISNS.0 + 1);
    wrong.ack = Some(ISNS.1);
    c.push(T0 + us(120), wrong).ack(T0 + us(170));
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_handshake(conn(&v, 0), us(100), us(70), 0);
}

#[test]
fn nanosecond_pcap_is_exact_to_the_nanosecond() {
    let mut c = fresh();
    let syn = T0 + 999_999_999;
    c.handshake(syn, syn + 1_001, syn + 1_008)
        .data(Side::Client, syn + 2_000, 10);
    for pcap in [Pcap::new(1).nanos(), Pcap::new(1).nanos().big_endian()] {
        let v = analyze(&pcap.write(&c.packets(Link::Ethernet)));
        assert_handshake(conn(&v, 0), 1_001, 7, 0);
        assert_secs(conn(&v, 0), "/end/at", 2_000);
    }
}

#[test]
fn big_endian_pcap() {
    let bytes = Pcap::new(1)
        .big_endian()
        .write(&basic().packets(Link::Ethernet));
    assert_only_basic(&analyze(&bytes), CLIENT, SERVER);
}

// ---------------------------------------------------------------- connection splitting

#[test]
fn port_reuse_two_connections_closed_by_fin() {
    let a = basic();
    let b = Script::starting(T0 + ms(10)).conv(CLIENT, SERVER, (90_000, 7_000));
    let v = analyze(&pcap_of(Link::Ethernet, &[&a, &b]));
    assert_eq!(connections(&v), 2);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
    assert_handshake(conn(&v, 1), us(100), us(50), ms(10));
    assert_str(conn(&v, 1), "/tcp/state", "SF");
    assert_u64(conn(&v, 1), "/id", 2);
    assert_u64(&v, "/summary/tcp_handshakes", 2);
}

#[test]
fn port_reuse_three_connections_closed_by_fin_and_rst() {
    let a = basic();
    let b = Script::starting(T0 + ms(10))
        .ending(Ending::Rst(Side::Client))
        .conv(CLIENT, SERVER, (90_000, 7_000));
    // The third reuses the first one's ISN: the tuple is closed, so it is new.
    let c = Script::starting(T0 + ms(20))
        .ending(Ending::Rst(Side::Server))
        .conv(CLIENT, SERVER, ISNS);
    let v = analyze(&pcap_of(Link::Ethernet, &[&a, &b, &c]));
    assert_eq!(connections(&v), 3);
    assert_eq!(close_kinds(&v), ["fin", "rst", "rst"]);
    for (i, start) in [0, ms(10), ms(20)].into_iter().enumerate() {
        assert_handshake(conn(&v, i), us(100), us(50), start);
    }
    assert_str(conn(&v, 1), "/tcp/state", "RSTO");
    assert_str(conn(&v, 2), "/tcp/state", "RSTR");
    assert_u64(&v, "/summary/close/rst", 2);
}

#[test]
fn new_isn_on_an_unclosed_tuple_starts_a_new_connection() {
    let a = Script::starting(T0)
        .ending(Ending::Open)
        .conv(CLIENT, SERVER, ISNS);
    let b = Script::starting(T0 + ms(50)).conv(CLIENT, SERVER, (123_456, 654_321));
    let v = analyze(&pcap_of(Link::Ethernet, &[&a, &b]));
    assert_eq!(connections(&v), 2);
    assert_eq!(close_kinds(&v), ["open", "fin"]);
    assert_str(conn(&v, 0), "/tcp/state", "S1");
    assert_u64(conn(&v, 0), "/tcp/packets/client", 3);
    assert_handshake(conn(&v, 1), us(100), us(50), ms(50));
    assert_u64(conn(&v, 1), "/tcp/handshake/syn_retransmissions", 0);
}

#[test]
fn retransmitted_syn_is_one_connection_timed_from_the_first_syn() {
    let mut c = fresh();
    c.syn(T0)
        .syn(T0 + secs(1))
        .synack(T0 + secs(1) + us(100))
        .synack(T0 + secs(1) + us(110))
        .ack(T0 + secs(1) + us(150));
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_eq!(connections(&v), 1);
    let c = conn(&v, 0);
    assert_handshake(c, secs(1) + us(100), us(50), 0);
    assert_u64(c, "/tcp/handshake/syn_retransmissions", 1);
    assert_u64(c, "/tcp/handshake/synack_retransmissions", 1);
    assert_u64(c, "/tcp/packets/client", 3);
    assert_str(c, "/tcp/history", "ShA");
    assert_u64(&v, "/summary/syn_retransmissions", 1);
}

#[test]
fn closed_connection_lingers_five_seconds() {
    let mut c = basic();
    let last_ack = c.segs.len() - 1;
    // Closed at 2.01 ms: an ACK at 4 s still belongs to it, data at 10 s does not.
    c.resend(last_ack, T0 + secs(4))
        .data(Side::Client, T0 + secs(10), 5);
    let next = Script::starting(T0 + secs(11)).conv(CLIENT, SERVER, (777_777, 888_888));
    let v = analyze(&pcap_of(Link::Ethernet, &[&c, &next]));
    assert_eq!(connections(&v), 2, "{v:#}");
    let first = conn(&v, 0);
    assert_u64(first, "/tcp/packets/client", 6);
    assert_u64(first, "/tcp/bytes/client", 120);
    assert_secs(first, "/end/at", secs(4));
    assert_handshake(conn(&v, 1), us(100), us(50), secs(11));
    assert_u64(&v, "/summary/packets/total", 18);
}

#[test]
fn synack_captured_before_syn_is_one_connection() {
    let v = synack_first();
    assert_eq!(connections(&v), 1, "{v:#}");
    let c = conn(&v, 0);
    assert_str(c, "/client", CLIENT);
    assert_eq!(at(c, "/partial"), &Value::Bool(false));
    assert_secs(c, "/tcp/handshake/syn_to_synack", us(100));
    assert_secs(c, "/tcp/handshake/connect", us(150));
    assert_u64(c, "/tcp/handshake/syn_retransmissions", 0);
    assert_u64(&v, "/summary/anomalies/timestamp_backwards", 1);
}

#[test]
fn synack_captured_before_syn_connection_starts_at_the_syn() {
    let v = synack_first();
    let c = conn(&v, 0);
    assert_secs(c, "/duration", us(150));
    let start = at(c, "/start/at").as_f64().expect("number");
    let syn = at(c, "/tcp/handshake/syn/at").as_f64().expect("number");
    assert!(start <= syn, "start.at {start} is after syn.at {syn}");
    assert_secs(&v, "/summary/span", us(150));
}

#[test]
fn synack_captured_before_syn_reports_client_by_syn() {
    let v = synack_first();
    assert_str(conn(&v, 0), "/client_by", "syn");
}

/// The handshake with the SYN-ACK written before the SYN (time order kept).
fn synack_first() -> Value {
    let mut c = opened();
    c.segs.swap(0, 1);
    analyze(&Pcap::new(1).write(&c.packets(Link::Ethernet)))
}

// ---------------------------------------------------------------- resets and states

/// A connection with a request and response, then an RST from `by`.
fn reset_by(by: Side) -> Value {
    let c = Script::starting(T0)
        .ending(Ending::Rst(by))
        .conv(CLIENT, SERVER, ISNS);
    analyze(&pcap_of(Link::Ethernet, &[&c]))
}

#[test]
fn rst_by_client_is_rsto() {
    let v = reset_by(Side::Client);
    let c = conn(&v, 0);
    assert_str(c, "/tcp/state", "RSTO");
    assert_str(c, "/tcp/history", "ShADdR");
    assert_str(c, "/close/kind", "rst");
    assert_str(c, "/close/by", "client");
    assert_secs(c, "/close/time/at", ms(2));
    assert_handshake(c, us(100), us(50), 0);
}

#[test]
fn rst_by_server_is_rstr() {
    let v = reset_by(Side::Server);
    let c = conn(&v, 0);
    assert_str(c, "/tcp/state", "RSTR");
    assert_str(c, "/tcp/history", "ShADdr");
    assert_str(c, "/close/by", "server");
}

#[test]
fn syn_answered_by_rst_is_rej() {
    let mut c = fresh();
    c.syn(T0).rst(Side::Server, T0 + us(30));
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    let c = conn(&v, 0);
    assert_str(c, "/tcp/state", "REJ");
    assert_str(c, "/close/kind", "rst");
    assert_str(c, "/close/by", "server");
    assert_eq!(at(c, "/tcp/handshake/connect"), &Value::Null);
    assert_eq!(at(c, "/tcp/handshake/complete"), &Value::Bool(false));
    assert_u64(&v, "/summary/tcp_handshakes", 0);
}

#[test]
fn unanswered_syn_is_s0() {
    let mut c = fresh();
    c.syn(T0);
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_str(conn(&v, 0), "/tcp/state", "S0");
    assert_str(conn(&v, 0), "/close/kind", "open");
    assert_eq!(at(conn(&v, 0), "/close/by"), &Value::Null);
}

#[test]
fn syn_with_fin_is_an_invalid_flags_anomaly() {
    let mut c = fresh();
    let mut bad = Seg::new(addr(CLIENT), addr(SERVER), ISNS.0);
    bad.syn = true;
    bad.fin = true;
    c.push(T0, bad);
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_u64(&v, "/summary/anomalies/invalid_tcp_flags", 1);
    assert_u64(conn(&v, 0), "/anomalies/invalid_tcp_flags", 1);
}

#[test]
fn mid_stream_start_guesses_the_client_by_port() {
    let mut c = Conv::new("10.0.0.1:50000", "10.0.0.2:443", 10, 20);
    c.data(Side::Server, T0, 900)
        .ack_from(Side::Client, T0 + us(50))
        .data(Side::Client, T0 + ms(1), 40);
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_eq!(connections(&v), 1);
    let c = conn(&v, 0);
    assert_str(c, "/client", "10.0.0.1:50000");
    assert_str(c, "/server", "10.0.0.2:443");
    assert_str(c, "/client_by", "guess");
    assert_eq!(at(c, "/partial"), &Value::Bool(true));
    assert_eq!(at(c, "/tcp/handshake/connect"), &Value::Null);
    assert_str(c, "/tcp/history", "^dAD");
    assert_str(c, "/tcp/state", "OTH");
    assert_u64(&v, "/summary/connections_without_handshake", 1);
    assert_u64(&v, "/summary/tcp_handshakes", 0);
}

#[test]
fn mid_stream_with_equal_ports_takes_the_first_sender_as_client() {
    let mut c = Conv::new("10.0.0.9:5000", "10.0.0.1:5000", 10, 20);
    c.data(Side::Client, T0, 10)
        .data(Side::Server, T0 + us(10), 10);
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_str(conn(&v, 0), "/client", "10.0.0.9:5000");
    assert_letters(conn(&v, 0), "Dd");
}

#[test]
fn synack_without_syn_makes_its_receiver_the_client() {
    // The client has the lower port: only the SYN-ACK tells who it is.
    let mut c = Conv::new("10.0.0.1:1000", "10.0.0.2:8080", ISNS.0, ISNS.1);
    c.synack(T0)
        .ack(T0 + us(40))
        .data(Side::Client, T0 + us(60), 10);
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_eq!(connections(&v), 1);
    let c = conn(&v, 0);
    assert_str(c, "/client", "10.0.0.1:1000");
    assert_str(c, "/client_by", "syn_ack");
    assert_eq!(at(c, "/partial"), &Value::Bool(true));
    assert_eq!(at(c, "/tcp/handshake/connect"), &Value::Null);
    assert_secs(c, "/tcp/handshake/synack_to_ack", us(40));
    assert_letters(c, "hAD");
}

#[test]
fn sequence_numbers_wrapping_around_2_32() {
    let c = Script::starting(T0).conv(CLIENT, SERVER, (u32::MAX - 50, u32::MAX));
    assert_only_basic(&analyze(&pcap_of(Link::Ethernet, &[&c])), CLIENT, SERVER);
}

#[test]
fn payload_retransmissions_are_counted_per_side() {
    let mut c = opened();
    c.data(Side::Client, T0 + us(200), 100);
    c.resend(3, T0 + ms(200))
        .data(Side::Server, T0 + ms(201), 500)
        .resend(5, T0 + ms(400))
        .resend(5, T0 + ms(800));
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_eq!(connections(&v), 1);
    let c = conn(&v, 0);
    assert_u64(c, "/tcp/retransmissions/client", 1);
    assert_u64(c, "/tcp/retransmissions/server", 2);
    assert_str(c, "/tcp/history", "ShADTdt");
    assert_handshake(c, us(100), us(50), 0);
}

// ---------------------------------------------------------------- link types

#[test]
fn ethernet_with_one_vlan_tag() {
    check_link(Link::Vlan(100), CLIENT, SERVER);
    check_link(Link::Vlan(100), V6_CLIENT, V6_SERVER);
}

#[test]
fn ethernet_with_qinq_double_tags() {
    check_link(Link::QinQ(300, 100), CLIENT, SERVER);
    check_link(Link::QinQ(300, 100), V6_CLIENT, V6_SERVER);
}

#[test]
fn ethernet_padding_is_not_payload() {
    let packets: Vec<Packet> = basic()
        .packets(Link::Ethernet)
        .into_iter()
        .map(|mut p| {
            p.data.resize(p.data.len().max(60), 0);
            p.orig_len = p.data.len() as u32;
            p
        })
        .collect();
    assert_only_basic(&analyze(&Pcap::new(1).write(&packets)), CLIENT, SERVER);
}

const V6_CLIENT: &str = "[2001:db8::1]:40000";
const V6_SERVER: &str = "[2001:db8::2]:443";

#[test]
fn ipv6_over_ethernet() {
    check_link(Link::Ethernet, V6_CLIENT, V6_SERVER);
}

#[test]
fn ipv6_with_extension_headers() {
    for ext in [Ipv6Ext::HopByHop, Ipv6Ext::DestinationOptions] {
        let mut c = Conv::new(V6_CLIENT, V6_SERVER, ISNS.0, ISNS.1).with_ipv6_ext(ext);
        Script::starting(T0).play(&mut c);
        let v = analyze(&pcap_of(Link::Raw(101), &[&c]));
        assert_only_basic(&v, V6_CLIENT, V6_SERVER);
    }
}

#[test]
fn linux_sll() {
    check_link(Link::Sll, CLIENT, SERVER);
    check_link(Link::Sll, V6_CLIENT, V6_SERVER);
}

#[test]
fn linux_sll2() {
    check_link(Link::Sll2, CLIENT, SERVER);
    check_link(Link::Sll2, V6_CLIENT, V6_SERVER);
}

#[test]
fn bsd_null_loopback() {
    check_link(Link::Null, CLIENT, SERVER);
    check_link(Link::Null, V6_CLIENT, V6_SERVER);
}

#[test]
fn openbsd_loop() {
    check_link(Link::Loop, CLIENT, SERVER);
    check_link(Link::Loop, V6_CLIENT, V6_SERVER);
}

#[test]
fn raw_ip_linktypes_101_and_12() {
    check_link(Link::Raw(101), CLIENT, SERVER);
    check_link(Link::Raw(12), CLIENT, SERVER);
    check_link(Link::Raw(12), V6_CLIENT, V6_SERVER);
}

#[test]
fn raw_ipv4_and_ipv6_linktypes_228_and_229() {
    check_link(Link::Raw(228), CLIENT, SERVER);
    check_link(Link::Raw(229), V6_CLIENT, V6_SERVER);
}

// ---------------------------------------------------------------- pcapng

/// A handshake plus one request byte at exact times (ns).
fn handshake_conv(client: &str, syn: i64, synack: i64, ack: i64) -> Conv {
    let mut c = Conv::new(client, SERVER, ISNS.0, ISNS.1);
    c.handshake(syn, synack, ack).data(Side::Client, ack, 1);
    c
}

/// Three connections for three pcapng interfaces: microseconds (Script),
/// nanoseconds, and a third whose handshake steps are `unit` and 2 × `unit`
/// (a whole number of that interface's ticks).
fn three_resolutions(unit: i64) -> (Conv, Conv, Conv) {
    let a = Script::starting(T0).conv(CLIENT, SERVER, ISNS);
    let b_syn = T0 + ms(3) + 7;
    let b = handshake_conv(
        "10.0.0.1:40001",
        b_syn,
        b_syn + 123_457,
        b_syn + 123_457 + 77_777,
    );
    let c_syn = T0 + ms(125);
    let c = handshake_conv("10.0.0.1:40002", c_syn, c_syn + unit, c_syn + 3 * unit);
    (a, b, c)
}

fn on(if_id: u32, link: Link, c: &Conv) -> Vec<Packet> {
    c.packets(link).into_iter().map(|p| p.on(if_id)).collect()
}

fn assert_three_resolutions(v: &Value, unit: i64) {
    assert_eq!(connections(v), 3, "{v:#}");
    assert_basic(conn(v, 0), CLIENT, SERVER);
    assert_handshake(conn(v, 1), 123_457, 77_777, ms(3) + 7);
    assert_handshake(conn(v, 2), unit, 2 * unit, ms(125));
    let first = at(v, "/summary/first_packet").as_f64().expect("number");
    assert!(
        (first - T0 as f64 / 1e9).abs() < 1e-6,
        "first_packet {first}"
    );
    assert_str(v, "/summary/format", "pcapng");
    assert_eq!(at(v, "/summary/warnings"), &serde_json::json!([]));
}

/// One section: Ethernet in µs, raw IP in ns, SLL in `third` resolution.
fn one_section(third: TsResol, unit: i64) -> Value {
    let (a, b, c) = three_resolutions(unit);
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .interface(101, TsResol::Dec(9))
        .interface(113, third)
        .packets(&on(0, Link::Ethernet, &a))
        .packets(&on(1, Link::Raw(101), &b))
        .packets(&on(2, Link::Sll, &c))
        .bytes();
    analyze(&bytes)
}

#[test]
fn pcapng_interfaces_with_different_link_types_and_resolutions() {
    // 10^-4 s ticks as the third resolution.
    assert_three_resolutions(&one_section(TsResol::Dec(4), us(300)), us(300));
}

/// 2^-10 s ticks are not whole nanoseconds; two of them are.
const TWO_BINARY_TICKS: i64 = 1_953_125;

#[test]
fn pcapng_binary_if_tsresol() {
    let v = one_section(TsResol::Bin(10), TWO_BINARY_TICKS);
    assert_three_resolutions(&v, TWO_BINARY_TICKS);
}

#[test]
fn pcapng_sections_each_number_their_interfaces() {
    let unit = ms(4);
    let (a, b, c) = three_resolutions(unit);
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Dec(6))
        .packets(&on(0, Link::Ethernet, &a))
        .section()
        .interface(101, TsResol::Dec(9))
        .interface(276, TsResol::Dec(3))
        .packets(&on(0, Link::Raw(101), &b))
        .packets(&on(1, Link::Sll2, &c))
        .bytes();
    assert_three_resolutions(&analyze(&bytes), unit);
}

#[test]
fn pcapng_interface_with_an_unsupported_link_type_is_skipped() {
    let other = Packet::new(T0 + ms(1), vec![0xab; 40]).on(1);
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .interface(147, TsResol::Default)
        .packets(&basic().packets(Link::Ethernet))
        .packet(&other)
        .bytes();
    let out = analyze_with(&bytes, &["-T", "json"]);
    let v = json_of(&out);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
    assert_u64(&v, "/summary/packets/skipped", 1);
    assert_u64(&v, "/summary/anomalies/unsupported_link_type", 1);
    assert_eq!(
        at(&v, "/summary/warnings").as_array().map(Vec::len),
        Some(1)
    );
    assert!(stderr(&out).contains("147"), "{}", stderr(&out));
}

#[test]
fn pcapng_packet_on_an_undefined_interface() {
    let mut stray = Packet::new(T0 + ms(1), Link::Ethernet.frame(&basic().segs[0].seg));
    stray.if_id = 5;
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .packets(&basic().packets(Link::Ethernet))
        .packet(&stray)
        .bytes();
    let v = analyze(&bytes);
    assert_u64(&v, "/summary/anomalies/unknown_interface", 1);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
}

// ---------------------------------------------------------------- inputs

#[test]
fn gzip_input() {
    let v = analyze(&gzip(&pcap_of(Link::Ethernet, &[&basic()])));
    assert_only_basic(&v, CLIENT, SERVER);
    assert_str(&v, "/summary/compression", "gzip");
}

#[test]
fn zstd_input() {
    let raw = pcap_of(Link::Ethernet, &[&basic()]);
    let zst = ruzstd::encoding::compress_to_vec(
        raw.as_slice(),
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let v = analyze(&zst);
    assert_only_basic(&v, CLIENT, SERVER);
    assert_str(&v, "/summary/compression", "zstd");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).expect("gzip");
    gz.finish().expect("gzip")
}

#[test]
fn stdin_input() {
    let plain = pcap_of(Link::Ethernet, &[&basic()]);
    for input in [plain.clone(), gzip(&plain)] {
        let v = json_of(&run_stdin(["analyze", "-T", "json", "-"], &input));
        assert_only_basic(&v, CLIENT, SERVER);
        assert_str(&v, "/summary/file", "-");
    }
}

#[test]
fn read_option_takes_a_file() {
    let scratch = Scratch::new();
    let path = scratch.file("r.pcap", &pcap_of(Link::Ethernet, &[&basic()]));
    let out = run_analyze(&["-T", "json", "-r"], &[&path]);
    assert_only_basic(&json_of(&out), CLIENT, SERVER);
}

/// The standard connection and a second one 10 ms later.
fn two_in_a_row() -> Vec<Packet> {
    let second = Script::starting(T0 + ms(10)).conv("10.0.0.1:40001", SERVER, (5, 6));
    frames(Link::Ethernet, &interleave(&[&basic(), &second]))
}

#[test]
fn truncated_capture_reports_what_it_read() {
    let pcap = Pcap::new(1).write(&two_in_a_row());
    let pcapng = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .packets(&two_in_a_row())
        .bytes();
    for mut bytes in [pcap, pcapng] {
        bytes.truncate(bytes.len() - 10);
        let out = analyze_with(&bytes, &["-T", "json"]);
        let v = json_of(&out);
        assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(true));
        assert!(!at(&v, "/summary/warnings")
            .as_array()
            .expect("array")
            .is_empty());
        let err = stderr(&out);
        assert!(
            err.contains("warning") && err.contains("cut short"),
            "{err}"
        );
        assert_eq!(connections(&v), 2);
        assert_basic(conn(&v, 0), CLIENT, SERVER);
        assert_handshake(conn(&v, 1), us(100), us(50), ms(10));
        assert_u64(conn(&v, 1), "/tcp/packets/client", 4);
        assert_u64(&v, "/summary/packets/total", 15);
    }
}

#[test]
fn merge_interleaves_files_by_timestamp() {
    let a = basic();
    let b = Script::starting(T0 + ms(10)).conv("10.0.0.3:40000", SERVER, (1, 2));
    let c = Script::starting(T0 + ms(20)).conv("10.0.0.1:40001", SERVER, (3, 4));
    let scratch = Scratch::new();
    let first = scratch.file("a.pcap", &pcap_of(Link::Ethernet, &[&a, &c]));
    // The second file has another link type and resolution.
    let second = scratch.file(
        "b.pcap",
        &Pcap::new(101).nanos().write(&b.packets(Link::Raw(101))),
    );
    let out = run_analyze(&["-T", "json", "--merge"], &[&first, &second]);
    let v = json_of(&out);
    assert_eq!(connections(&v), 3);
    for (i, (client, start)) in [
        (CLIENT, 0),
        ("10.0.0.3:40000", ms(10)),
        ("10.0.0.1:40001", ms(20)),
    ]
    .into_iter()
    .enumerate()
    {
        assert_u64(conn(&v, i), "/id", i as u64 + 1);
        assert_str(conn(&v, i), "/client", client);
        assert_handshake(conn(&v, i), us(100), us(50), start);
    }
    assert_str(&v, "/summary/format", "merged");
    assert_u64(&v, "/summary/packets/total", 24);
    // Merged files share the map window; read() gives the same.
    let read = run_analyze(&["-T", "json", "--merge", "--no-mmap"], &[&first, &second]);
    assert_eq!(read, out);
}

// ---------------------------------------------------------------- filters and output formats

/// Connections to port 80 and 443 from two hosts, plus a UDP datagram.
fn two_servers() -> Vec<u8> {
    let a = basic();
    let b = Script::starting(T0 + ms(10)).conv("10.0.0.3:40000", "10.0.0.2:443", (1, 2));
    let mut packets = frames(Link::Ethernet, &interleave(&[&a, &b]));
    packets.push(Packet::new(
        T0 + ms(30),
        udp_frame(addr("10.0.0.3:5353"), addr("10.0.0.2:443"), b"dns"),
    ));
    Pcap::new(1).write(&packets)
}

#[test]
fn port_filter() {
    let v = json_of(&analyze_with(
        &two_servers(),
        &["-T", "json", "--port", "443"],
    ));
    assert_eq!(connections(&v), 1);
    assert_str(conn(&v, 0), "/server", "10.0.0.2:443");
    assert_handshake(conn(&v, 0), us(100), us(50), ms(10));
    assert_u64(&v, "/summary/packets/filtered_out", 8);
    assert_u64(&v, "/summary/packets/tcp", 8);
    assert_u64(&v, "/summary/packets/skipped", 1);
    assert_u64(&v, "/summary/connections", 1);
}

#[test]
fn host_filter() {
    let v = json_of(&analyze_with(
        &two_servers(),
        &["-T", "json", "--host", "10.0.0.1"],
    ));
    assert_eq!(connections(&v), 1);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
    assert_u64(&v, "/summary/packets/filtered_out", 8);
    let both = &["-T", "json", "--port", "80", "--port", "443"];
    assert_eq!(
        connections(&json_of(&analyze_with(&two_servers(), both))),
        2
    );
}

/// `n` standard connections from consecutive client ports, 1 ms apart.
fn many(n: u16) -> Vec<u8> {
    let convs: Vec<Conv> = (0..n)
        .map(|i| {
            Script::starting(T0 + ms(i64::from(i))).conv(
                &format!("10.0.0.1:{}", 20_000 + i),
                SERVER,
                ISNS,
            )
        })
        .collect();
    let refs: Vec<&Conv> = convs.iter().collect();
    pcap_of(Link::Ethernet, &refs)
}

#[test]
fn table_limit_footer() {
    let out = analyze_with(&many(5), &["--limit", "2"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("3 more connections not shown"), "{text}");
    assert!(text.contains("150µs"), "connect column: {text}");
    assert!(text.contains("10.0.0.1:20001") && !text.contains("10.0.0.1:20002"));
    let all = stdout(&analyze_with(&many(5), &["--limit", "0"]));
    assert!(
        all.contains("10.0.0.1:20004") && !all.contains("not shown"),
        "{all}"
    );
}

#[test]
fn jsonl_has_one_line_per_connection_then_the_summary() {
    let out = analyze_with(&many(3), &["-T", "jsonl"]);
    assert!(out.status.success());
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 4);
    let mut ids: Vec<u64> = lines[..3]
        .iter()
        .map(|l| at(l, "/id").as_u64().expect("id"))
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3]);
    for l in &lines[..3] {
        let start = at(l, "/start/at").as_f64().expect("number");
        assert_handshake(l, us(100), us(50), (start * 1e3).round() as i64 * ms(1));
    }
    assert_u64(&lines[3], "/summary/connections", 3);
    assert_eq!(lines[3].as_object().map(|o| o.len()), Some(1));
}

#[test]
fn csv_has_one_header_and_one_row_per_connection_of_every_file() {
    let scratch = Scratch::new();
    let first = scratch.file("c.pcap", &many(2));
    let second = scratch.file("d.pcap", &pcap_of(Link::Ethernet, &[&basic()]));
    let out = run_analyze(&["-T", "csv"], &[&first, &second]);
    assert!(out.status.success());
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4, "{text}");
    let col = |name: &str| rows[0].iter().position(|c| *c == name).expect(name);
    assert_eq!(rows[0][0], "file");
    let expected = [
        (&first, 1, "10.0.0.1:20000"),
        (&first, 2, "10.0.0.1:20001"),
        (&second, 1, CLIENT),
    ];
    for (row, (file, id, client)) in rows[1..].iter().zip(expected) {
        assert_eq!(row.len(), rows[0].len());
        assert_eq!(row[col("file")], file.to_str().expect("utf-8 path"));
        assert_eq!(row[col("id")], id.to_string());
        assert_eq!(row[col("client")], client);
        assert_eq!(row[col("state")], "SF");
        let connect: f64 = row[col("connect")].parse().expect("connect is a number");
        assert!((connect - 150e-6).abs() < 1e-9, "{connect}");
    }
}

// ---------------------------------------------------------------- exit codes

fn assert_exit_2(out: &std::process::Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "stderr: {}", stderr(out));
    assert!(stderr(out).contains(needle), "stderr: {}", stderr(out));
}

#[test]
fn missing_file_exits_2_naming_it() {
    let scratch = Scratch::new();
    let path = scratch.path("does-not-exist.pcap");
    let out = run_analyze(&[], &[&path]);
    assert_exit_2(&out, "does-not-exist.pcap");
    // A good file before it is still reported.
    let good = scratch.file("good.pcap", &pcap_of(Link::Ethernet, &[&basic()]));
    let out = run_analyze(&["-T", "csv"], &[&good, &path]);
    assert_exit_2(&out, "does-not-exist.pcap");
    assert_eq!(stdout(&out).lines().count(), 2);
}

#[test]
fn text_file_exits_2() {
    let out = analyze_with(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", &[]);
    assert_exit_2(&out, "not a pcap");
    assert_exit_2(&analyze_with(b"", &[]), "empty");
    // A pcap header cut short is not a capture either.
    assert_eq!(
        analyze_with(&Pcap::new(1).header()[..10], &[])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn header_only_capture_has_no_connections() {
    let v = analyze(&Pcap::new(1).header());
    assert_eq!(connections(&v), 0);
    assert_u64(&v, "/summary/packets/total", 0);
    assert_eq!(at(&v, "/summary/first_packet"), &Value::Null);
    assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(false));
}

#[test]
fn unsupported_classic_link_type_exits_2() {
    let bytes = Pcap::new(147).write(&[Packet::new(T0, vec![1, 2, 3, 4])]);
    assert_exit_2(&analyze_with(&bytes, &[]), "unsupported link type 147");
}

#[test]
fn no_file_argument_exits_2() {
    assert_exit_2(&run(["analyze"]), "no capture given");
}

#[test]
fn closed_stdout_pipe_exits_quietly() {
    let scratch = Scratch::new();
    let path = scratch.file("big.pcap", &many(2000));
    let mut child = bin()
        .args(["analyze", "--limit", "0"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("read one line");
    assert!(
        line.starts_with("verdict"),
        "the headline comes first: {line}"
    );
    drop(reader);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

// ---------------------------------------------------------------- anomalies

/// The standard connection in Ethernet frames with `extra` frames appended.
fn basic_with(extra: Vec<Vec<u8>>) -> Value {
    let mut packets = basic().packets(Link::Ethernet);
    let mut ts = T0 + ms(3);
    for data in extra {
        packets.push(Packet::new(ts, data));
        ts += us(1);
    }
    analyze(&Pcap::new(1).write(&packets))
}

#[test]
fn non_tcp_frames_are_skipped() {
    let v = basic_with(vec![
        udp_frame(addr("10.0.0.1:5353"), addr("10.0.0.2:53"), b"query"),
        arp_frame(),
    ]);
    assert_eq!(connections(&v), 1);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
    assert_u64(&v, "/summary/packets/total", 10);
    assert_u64(&v, "/summary/packets/tcp", 8);
    assert_u64(&v, "/summary/packets/skipped", 2);
    assert_eq!(at(&v, "/summary/anomalies"), &serde_json::json!({}));
}

#[test]
fn ipv4_fragments_never_whole_are_counted() {
    let mut seg = Seg::new(addr("10.0.0.5:40000"), addr(SERVER), 1);
    seg.payload = vec![0; 64];
    let v = basic_with(vec![
        ipv4_fragment_frame(&seg, 0, true),
        ipv4_fragment_frame(&seg, 100, false),
    ]);
    // Offsets 0 and 800 with a hole between: never whole.
    assert_u64(&v, "/summary/anomalies/ipv4_fragment", 2);
    assert_u64(&v, "/summary/packets/fragments", 2);
    assert_u64(&v, "/summary/packets/skipped", 0);
    assert_eq!(connections(&v), 1);
}

#[test]
fn ipv6_fragments_never_whole_are_counted() {
    let mut seg = Seg::new(addr(V6_CLIENT), addr(V6_SERVER), 1);
    seg.payload = vec![0; 64];
    seg.ipv6_ext = Some(Ipv6Ext::Fragment);
    let v = basic_with(vec![Link::Ethernet.frame(&seg)]);
    // A first fragment whose others never come.
    assert_u64(&v, "/summary/anomalies/ipv6_fragment", 1);
    assert_u64(&v, "/summary/packets/fragments", 1);
    assert_u64(&v, "/summary/packets/skipped", 0);
    assert_eq!(connections(&v), 1);
}

#[test]
fn malformed_ip_and_tcp_headers_are_counted() {
    let frame = || Link::Ethernet.frame(&basic().segs[3].seg);
    let ip = Link::Ethernet.header_len();
    let mut bad_ihl = frame();
    bad_ihl[ip] = 0x44;
    let mut bad_offset = frame();
    bad_offset[ip + 20 + 12] = 0x40;
    let v = basic_with(vec![bad_ihl, bad_offset]);
    assert_u64(&v, "/summary/anomalies/malformed_ip", 1);
    assert_u64(&v, "/summary/anomalies/malformed_tcp", 1);
    assert_u64(&v, "/summary/packets/skipped", 2);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
}

#[test]
fn snaplen_cut_keeps_the_connection_and_wire_bytes() {
    let mut packets = basic().packets(Link::Ethernet);
    // The 900-byte response is captured with only 100 bytes of payload.
    let response = 4;
    let caplen = Link::Ethernet.header_len() + 20 + 20 + 100;
    let cut = packets[response].clone().cut(caplen);
    packets[response] = cut;
    let mut pcap = Pcap::new(1);
    pcap.snaplen = caplen as u32;
    let v = analyze(&pcap.write(&packets));
    assert_only_basic(&v, CLIENT, SERVER);
    assert_u64(&v, "/summary/anomalies/snaplen_cut", 1);
    assert_u64(conn(&v, 0), "/anomalies/snaplen_cut", 1);
}

#[test]
fn snaplen_cut_of_a_padded_frame_counts_only_the_tcp_payload() {
    let mut c = opened();
    c.data(Side::Client, T0 + us(200), 2);
    let mut packets = c.packets(Link::Ethernet);
    // 14 + 20 + 20 + 2 = 56 bytes, padded to the 60-byte Ethernet minimum,
    // captured with a headers-only snaplen of 54.
    let data = packets.pop().expect("data frame");
    let mut padded = data.data.clone();
    padded.resize(60, 0);
    packets.push(Packet::new(data.ts, padded).cut(54));
    let v = analyze(&Pcap::new(1).write(&packets));
    assert_u64(conn(&v, 0), "/tcp/bytes/client", 2);
}

#[test]
fn timestamps_going_backwards_are_counted() {
    let mut packets = basic().packets(Link::Ethernet);
    // The response (1 ms) is written before the request (200 µs).
    packets.swap(3, 4);
    let v = analyze(&Pcap::new(1).write(&packets));
    assert_u64(&v, "/summary/anomalies/timestamp_backwards", 1);
    assert_eq!(connections(&v), 1);
    let c = conn(&v, 0);
    assert_handshake(c, us(100), us(50), 0);
    assert_secs(c, "/duration", ms(2) + us(20));
    assert_u64(c, "/tcp/bytes/client", 120);
    assert_u64(c, "/tcp/bytes/server", 900);
    assert_str(c, "/tcp/state", "SF");
}

// ---------------------------------------------------------------- idle timeout

#[test]
fn idle_timeout_ends_a_quiet_connection() {
    let mut c = opened();
    c.data(Side::Client, T0 + us(200), 10)
        .data(Side::Server, T0 + secs(40), 10);
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &[&c]),
        &["-T", "json", "--idle", "30s"],
    );
    let v = json_of(&out);
    assert_eq!(connections(&v), 2, "{v:#}");
    assert_eq!(close_kinds(&v), ["idle", "open"]);
    assert_handshake(conn(&v, 0), us(100), us(50), 0);
    assert_eq!(at(conn(&v, 1), "/partial"), &Value::Bool(true));
    assert_secs(conn(&v, 1), "/start/at", secs(40));
}

#[test]
fn idle_timeout_applies_to_every_gap_longer_than_the_timeout() {
    let mut a = opened();
    a.data(Side::Client, T0 + secs(31), 10);
    let mut b = Conv::new("10.0.0.3:40000", SERVER, 1, 2);
    b.syn(T0 + secs(25));
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &[&a, &b]),
        &["-T", "json", "--idle", "30s"],
    );
    let v = json_of(&out);
    // a is quiet from 150 µs to 31 s, longer than 30 s: it ends idle and the
    // data at 31 s starts a new (partial) connection.
    assert_eq!(connections(&v), 3, "{v:#}");
    assert_str(conn(&v, 0), "/close/kind", "idle");
}

#[test]
fn connection_cap_evicts_the_least_recently_active() {
    // Five half-open connections on distinct ports; room for three.
    let convs: Vec<Conv> = (0..5u16)
        .map(|i| {
            let mut c = Conv::new(
                &format!("10.0.0.1:{}", 40_000 + i),
                SERVER,
                1000 + u32::from(i),
                9000,
            );
            c.syn(T0 + ms(i64::from(i)));
            c
        })
        .collect();
    let refs: Vec<&Conv> = convs.iter().collect();
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &refs),
        &["-T", "json", "--max-connections", "3", "--threads", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(connections(&v), 5, "evicted connections are still reported");
    assert_u64(&v, "/summary/anomalies/evicted_connection", 2);
    assert_u64(&v, "/summary/close/evicted", 2);
    // The two oldest were evicted.
    assert_str(conn(&v, 0), "/close/kind", "evicted");
    assert_str(conn(&v, 1), "/close/kind", "evicted");
    assert_str(conn(&v, 4), "/close/kind", "open");

    // With two threads each shard holds at most ceil(3 / 2) = 2: still
    // bounded, still every connection reported, evictions counted.
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &refs),
        &["-T", "json", "--max-connections", "3", "--threads", "2"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(connections(&v), 5, "evicted connections are still reported");
    let evicted = v
        .pointer("/summary/anomalies/evicted_connection")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    assert!((1..=3).contains(&evicted), "{evicted} evicted");
    assert_u64(&v, "/summary/close/evicted", evicted);
}
