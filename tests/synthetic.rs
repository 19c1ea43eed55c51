//! Synthetic captures with exact timestamps, run through the real binary:
//! handshake timing to the micro- and nanosecond, connection splitting on
//! port reuse, SYN retransmission and reordering, resets and Zeek states,
//! mid-stream starts. Inputs (link types, capture formats, compression,
//! stdin, truncation, `--merge`), outputs (filters, formats, exit codes,
//! broken pipes) and the anomaly counters are in the submodules, which
//! share the helpers here.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::Value;

use crate::support::*;

mod anomalies;
mod inputs;
mod outputs;

const CLIENT: &str = "10.0.0.1:40000";
const SERVER: &str = "10.0.0.2:80";
const ISNS: (u32, u32) = (1_000, 5_000);
const V6_CLIENT: &str = "[2001:db8::1]:40000";
const V6_SERVER: &str = "[2001:db8::2]:443";

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

/// The first connection of `v` kept `packets` client packets carrying
/// `bytes` bytes and ended at `end`; the packets the linger did not take
/// are the summary's `late` late packets.
fn assert_lingered(v: &Value, packets: u64, bytes: u64, end: i64, late: u64) {
    let first = conn(v, 0);
    assert_u64(first, "/tcp/packets/client", packets);
    assert_u64(first, "/tcp/bytes/client", bytes);
    assert_secs(first, "/end/at", end);
    assert_u64(v, "/summary/anomalies/late_packet", late);
}

#[test]
fn a_finished_close_lingers_one_second() {
    let mut c = basic();
    let last_ack = c.segs.len() - 1;
    // Each FIN was acknowledged by 2.02 ms: an ACK sent again at 0.5 s
    // (a delayed one) still belongs to the connection, one at 4 s and data
    // at 10 s are late packets (the full linger would have taken the first).
    c.resend(last_ack, T0 + ms(500))
        .resend(last_ack, T0 + secs(4))
        .data(Side::Client, T0 + secs(10), 5);
    let next = Script::starting(T0 + secs(11)).conv(CLIENT, SERVER, (777_777, 888_888));
    let v = analyze(&pcap_of(Link::Ethernet, &[&c, &next]));
    assert_eq!(connections(&v), 2, "{v:#}");
    assert_lingered(&v, 6, 120, ms(500), 2);
    assert_handshake(conn(&v, 1), us(100), us(50), secs(11));
    assert_u64(&v, "/summary/packets/total", 19);
}

#[test]
fn a_reset_connection_lingers_one_second() {
    // Reset by the server at 2 ms: client data still in flight at 0.5 s
    // belongs to the connection, data at 2 s is a late packet.
    let mut c = opened();
    c.data(Side::Client, T0 + ms(1), 120)
        .rst(Side::Server, T0 + ms(2))
        .data(Side::Client, T0 + ms(500), 10)
        .data(Side::Client, T0 + secs(2), 10);
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_eq!(connections(&v), 1, "{v:#}");
    assert_str(conn(&v, 0), "/close/kind", "rst");
    assert_lingered(&v, 4, 130, ms(500), 1);
}

#[test]
fn a_close_waiting_for_its_last_ack_lingers_five_seconds() {
    // Both FINs by 2 ms, the client's FIN acknowledged, the server's not
    // yet: its ACK at 4 s still belongs to the connection, data at 10 s
    // does not.
    let mut c = opened();
    c.data(Side::Client, T0 + ms(1), 120)
        .data(Side::Server, T0 + ms(1) + us(500), 300)
        .fin(Side::Client, T0 + ms(2))
        .fin(Side::Server, T0 + ms(2) + us(10))
        .ack_from(Side::Client, T0 + secs(4))
        .data(Side::Client, T0 + secs(10), 5);
    let v = analyze(&pcap_of(Link::Ethernet, &[&c]));
    assert_eq!(connections(&v), 1, "{v:#}");
    assert_lingered(&v, 5, 120, secs(4), 1);
}

#[test]
fn a_close_acknowledged_late_still_ends_five_seconds_after_it_began() {
    // As above, but the server's FIN is acknowledged only at 4.5 s: its 1 s
    // linger would run to 5.5 s, the 5 s one ends at 5.002 s and comes
    // first, so client data at 5.2 s is a late packet. Meanwhile 1 500
    // other connections close (between 4.6 and 4.9 s), so that the close
    // queue is trimmed of entries that can no longer fire while this one's
    // must stay.
    let mut c = opened();
    c.data(Side::Client, T0 + ms(1), 120)
        .data(Side::Server, T0 + ms(1) + us(500), 300)
        .fin(Side::Client, T0 + ms(2))
        .fin(Side::Server, T0 + ms(2) + us(10))
        .ack_from(Side::Client, T0 + secs(4) + ms(500))
        .data(Side::Client, T0 + secs(5) + ms(200), 5);
    let others: Vec<Conv> = (0..1_500u16)
        .map(|i| {
            Script::starting(T0 + secs(4) + ms(600) + us(200 * i64::from(i))).conv(
                &format!("10.0.0.9:{}", 20_000 + i),
                SERVER,
                ISNS,
            )
        })
        .collect();
    let mut all = vec![&c];
    all.extend(others.iter());
    let scratch = Scratch::new();
    let path = scratch.file("closes.pcap", &pcap_of(Link::Ethernet, &all));
    // One thread: one table, whose close queue sees every close.
    let v = json_of(&run_analyze(&["-T", "json", "-j", "1"], &[&path]));
    assert_eq!(connections(&v), 1_501);
    assert_lingered(&v, 5, 120, secs(4) + ms(500), 1);
}

#[test]
fn a_closed_tuple_is_remembered_for_two_minutes() {
    // Closed by 2.02 ms and finalised when another connection's packet at
    // 2 s moves the clock past its 1 s linger: the tuple is remembered
    // until 122 s. Client data at 121.9 s is a late packet of it, data at
    // 122.1 s a connection of its own.
    let mut c = basic();
    c.data(Side::Client, T0 + secs(121) + ms(900), 5).data(
        Side::Client,
        T0 + secs(122) + ms(100),
        7,
    );
    let other = Script::starting(T0 + secs(2)).conv("10.0.0.3:40001", SERVER, (777_777, 888_888));
    let v = analyze(&pcap_of(Link::Ethernet, &[&c, &other]));
    assert_eq!(connections(&v), 3, "{v:#}");
    assert_lingered(&v, 5, 120, ms(2) + us(20), 1);
    let late = conn(&v, 2);
    assert_eq!(at(late, "/partial"), &Value::Bool(true), "{late:#}");
    assert_secs(late, "/start/at", secs(122) + ms(100));
    assert_u64(late, "/tcp/bytes/client", 7);
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
