//! Synthetic TLS conversations run through the real binary: TLS records
//! built around the real hello fixtures (tests/data/hello) and hand-made
//! messages, carried in scripted TCP segments at exact times. Here: the TLS
//! 1.2 handshake timeline to the microsecond (complete at the later
//! Finished), false start, certificate requests, messages split across
//! segments and records, HelloRetryRequest and the SSLv2-compatible
//! ClientHello. The three kinds of resumption, how handshakes end (TLS 1.3
//! completion at the client's Finished-sized record, alerts, incomplete,
//! mid-stream and non-TLS connections, resynchronisation after capture loss)
//! and the request estimate from record flights are in the submodules, which
//! share the helpers here.

use serde_json::Value;

use crate::support::tls::*;
use crate::support::*;

mod outcomes;
mod requests;
mod resumption;

const CLIENT: &str = "10.0.0.1:40000";
const SERVER: &str = "10.0.0.2:443";

const CHROME_JA4: &str = "t13d1516h2_8daaf6152771_02713d6af862";
const CHROME_JA3: &str = "9d33d8206d4fec4c8b1423c728f4cd3c";
/// MD5 of "771,49199,65281-16": the ServerHello of [`server_hello_12`].
const JA3S_12: &str = "7bee5c1d424b7e5f943b06983bb11422";

/// CLIENT → SERVER after a TCP handshake at 0, 100 µs and 150 µs.
fn opened() -> Conv {
    opened_at(CLIENT, SERVER, T0)
}

/// Chrome 125's ClientHello (1747-byte body: more than one MSS) in one record.
fn chrome_hello() -> Vec<u8> {
    handshake(CLIENT_HELLO, &fixture("chrome-kyber-client-hello-1.bin"))
}

/// Sends Chrome's ClientHello in one segment at 200 µs.
fn hello_whole(c: &mut Conv) {
    c.send(Side::Client, T0 + us(200), &chrome_hello());
}

/// A TLS 1.2 ServerHello body: a new session id, ECDHE-RSA with
/// AES-128-GCM, renegotiation_info and ALPN http/1.1.
fn server_hello_12() -> Vec<u8> {
    server_hello(
        &[0x22; 32],
        0xc02f,
        &[ext(0xff01, &[0]), alpn(&["http/1.1"])],
    )
}

/// The server's first TLS 1.2 flight as messages: ServerHello, Certificate,
/// ServerKeyExchange, ServerHelloDone.
fn flight_12() -> [Vec<u8>; 4] {
    [
        message(SERVER_HELLO, &server_hello_12()),
        message(CERTIFICATE, &[0xab; 1200]),
        message(SERVER_KEY_EXCHANGE, &[0xcd; 300]),
        message(SERVER_HELLO_DONE, &[]),
    ]
}

/// The flight, one record per message, in one segment at 1 ms.
fn flight_records(c: &mut Conv) {
    let records: Vec<u8> = flight_12()
        .iter()
        .flat_map(|m| record(HANDSHAKE, m))
        .collect();
    c.send(Side::Server, T0 + ms(1), &records);
}

/// ChangeCipherSpec and the encrypted Finished (an opaque handshake record).
fn ccs_finished() -> Vec<u8> {
    [change_cipher_spec(), opaque(HANDSHAKE, 40)].concat()
}

/// The client's ClientKeyExchange, ChangeCipherSpec and Finished of a TLS
/// 1.2 full handshake, in one segment at 2 ms.
fn client_finishes_12(c: &mut Conv) -> &mut Conv {
    let key_exchange = handshake(CLIENT_KEY_EXCHANGE, &[0x41; 66]);
    c.send(
        Side::Client,
        T0 + ms(2),
        &[key_exchange, ccs_finished()].concat(),
    )
}

/// After the server's first flight: ClientKeyExchange, CCS and Finished
/// from the client at 2 ms; NewSessionTicket, CCS and Finished from the
/// server at 3 ms; a 300-byte request at 4 ms, a 1400-byte response at 5 ms,
/// and the client's FIN at 6 ms.
fn finish_12(c: &mut Conv) {
    let ticket = handshake(NEW_SESSION_TICKET, &[0x54; 170]);
    client_finishes_12(c)
        .send(Side::Server, T0 + ms(3), &[ticket, ccs_finished()].concat())
        .send(Side::Client, T0 + ms(4), &opaque(APPLICATION_DATA, 300))
        .send(Side::Server, T0 + ms(5), &opaque(APPLICATION_DATA, 1400))
        .close(
            Side::Client,
            T0 + ms(6),
            T0 + ms(6) + us(10),
            T0 + ms(6) + us(20),
        );
}

/// A full TLS 1.2 handshake: the ClientHello as `hello` sends it, the
/// server's first flight as `flight` sends it, then [`finish_12`].
fn tls12(hello: impl FnOnce(&mut Conv), flight: impl FnOnce(&mut Conv)) -> Conv {
    let mut c = opened();
    hello(&mut c);
    flight(&mut c);
    finish_12(&mut c);
    c
}

/// The events of [`tls12`] after the server's first flight.
const AFTER_FLIGHT_12: [(&str, &str, i64); 8] = [
    ("client_key_exchange", "client", ms(2)),
    ("change_cipher_spec", "client", ms(2)),
    ("finished", "client", ms(2)),
    ("new_session_ticket", "server", ms(3)),
    ("change_cipher_spec", "server", ms(3)),
    ("finished", "server", ms(3)),
    ("encrypted_record", "client", ms(4)),
    ("encrypted_record", "server", ms(5)),
];

/// `head` followed by [`AFTER_FLIGHT_12`].
fn events_12(head: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
    expect_events(&[head, &AFTER_FLIGHT_12[..]].concat())
}

/// The events of the server's first flight, all at `t`.
fn flight_events(t: i64) -> [(&'static str, &'static str, i64); 4] {
    [
        ("server_hello", "server", t),
        ("certificate", "server", t),
        ("server_key_exchange", "server", t),
        ("server_hello_done", "server", t),
    ]
}

/// The `tls` section of the baseline TLS 1.2 connection.
fn baseline_12() -> Value {
    at(&only(&tls12(hello_whole, flight_records)), "/tls").clone()
}

#[test]
fn tls12_full_handshake_timeline() {
    let v = report(&[&tls12(hello_whole, flight_records)]);
    let c = conn(&v, 0);
    let mut want = vec![("client_hello", "client", us(200))];
    want.extend(flight_events(ms(1)));
    assert_eq!(events(c), events_12(&want));
    for e in at(c, "/tls/events").as_array().expect("events") {
        // The SYN is the capture's first packet: since_start = at.
        assert_eq!(e["since_start"], e["time"]["at"], "{e}");
        assert_eq!(e["detail"], Value::Null);
    }
    assert_str(c, "/tls/version", "TLS 1.2");
    assert_str(c, "/tls/offered_version", "TLS 1.3");
    assert_str(c, "/tls/cipher", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
    assert_str(c, "/tls/sni", "lh3.google.com");
    assert_str(c, "/tls/alpn", "http/1.1");
    assert_eq!(
        at(c, "/tls/alpn_offered"),
        &serde_json::json!(["h2", "http/1.1"])
    );
    assert_bool(c, "/tls/resumed", false);
    assert_null(c, "/tls/resumption");
    assert_bool(c, "/tls/hello_retry", false);
    assert_bool(c, "/tls/early_data/offered", false);
    assert_null(c, "/tls/early_data/accepted");
    assert_bool(c, "/tls/client_certificate_requested", false);
    assert_str(c, "/tls/outcome", "complete");
    assert_null(c, "/tls/alert");
    assert_secs(c, "/tls/client_hello/at", us(200));
    assert_secs(c, "/tls/client_hello/ts", T0 + us(200));
    assert_secs(c, "/tls/server_hello/at", ms(1));
    assert_secs(c, "/tls/complete/at", ms(3));
    assert_secs(c, "/tls/hello_to_hello", us(800));
    assert_secs(c, "/tls/handshake", ms(3) - us(200));
    assert_secs(c, "/tls/syn_to_app_data", ms(4));
    assert_str(c, "/tls/ja4", CHROME_JA4);
    assert_str(c, "/tls/ja3", CHROME_JA3);
    assert_str(c, "/tls/ja3s", JA3S_12);
    assert_u64(c, "/tls/gap_bytes", 0);

    // One request and its response, estimated from the records.
    assert_str(c, "/http/method", "tls-flights");
    assert_u64(c, "/http/requests", 1);
    assert_u64(c, "/http/responses", 1);
    assert_bool(c, "/http/estimated", true);
    assert_str(c, "/http/confidence", "estimate");
    assert_secs(c, "/http/list/0/start/at", ms(4));
    assert_secs(c, "/http/list/0/response_first/at", ms(5));
    assert_secs(c, "/http/list/0/ttfb", ms(1));
    assert_null(c, "/http/list/0/method");
    assert_null(c, "/http/list/0/status");

    assert_u64(&v, "/summary/tls_connections", 1);
    assert_u64(&v, "/summary/tls_handshakes_full", 1);
    assert_u64(&v, "/summary/tls_handshakes_resumed", 0);
    assert_u64(&v, "/summary/tls_versions/TLS 1.2", 1);
    assert_u64(&v, "/summary/alpn/http~11.1", 1);
    assert_secs(&v, "/summary/tls_handshake/median", ms(3) - us(200));
    assert_u64(&v, "/summary/requests_estimated", 1);
    assert_secs(&v, "/summary/handshakes_per_request/tls_full", secs(1));
}

#[test]
fn tls12_false_start_request_before_the_server_finished() {
    let mut c = opened();
    hello_whole(&mut c);
    flight_records(&mut c);
    client_finishes_12(&mut c)
        .send(Side::Client, T0 + us(2100), &opaque(APPLICATION_DATA, 300))
        .send(Side::Server, T0 + ms(3), &ccs_finished())
        .send(Side::Server, T0 + ms(4), &opaque(APPLICATION_DATA, 1400));
    let c = only(&c);
    assert_secs(&c, "/tls/complete/at", ms(3));
    assert_secs(&c, "/tls/syn_to_app_data", us(2100));
    assert_u64(&c, "/http/requests", 1);
    assert_secs(&c, "/http/list/0/start/at", us(2100));
    assert_secs(&c, "/http/list/0/response_first/at", ms(4));
}

#[test]
fn certificate_request_is_reported_in_tls12() {
    let c = only(&tls12(hello_whole, |c| {
        let [sh, cert, key_exchange, done] = flight_12();
        let request = message(13, &[1, 1, 0, 2, 4, 1, 0, 0]);
        let flight = [sh, cert, key_exchange, request, done].concat();
        c.send(Side::Server, T0 + ms(1), &record(HANDSHAKE, &flight));
    }));
    assert_bool(&c, "/tls/client_certificate_requested", true);
    let names: Vec<String> = events(&c).into_iter().map(|e| e.0).take(6).collect();
    let want = [
        "client_hello",
        "server_hello",
        "certificate",
        "server_key_exchange",
        "certificate_request",
        "server_hello_done",
    ];
    assert_eq!(names, want);
}

/// Chrome's ClientHello cut at `cuts`, the pieces sent at `times` (µs).
fn hello_split(cuts: &'static [usize], times: &'static [i64]) -> impl FnOnce(&mut Conv) {
    move |c: &mut Conv| {
        let times: Vec<i64> = times.iter().map(|&t| T0 + us(t)).collect();
        c.send_split(Side::Client, &chrome_hello(), cuts, &times);
    }
}

#[test]
fn client_hello_split_across_segments_gives_the_same_facts() {
    let base = baseline_12();
    assert_str(&base, "/ja4", CHROME_JA4);
    // The last piece arrives at 200 µs, like the unsplit hello: everything,
    // times included, is the same.
    let two = tls12(hello_split(&[1400], &[180, 200]), flight_records);
    assert_eq!(at(&only(&two), "/tls"), &base, "2 segments");
    let three = tls12(hello_split(&[600, 1200], &[170, 185, 200]), flight_records);
    assert_eq!(at(&only(&three), "/tls"), &base, "3 segments");
    // The first piece retransmitted (same bytes) before the rest.
    let mut again = opened();
    hello_split(&[600, 1200], &[170, 185, 200])(&mut again);
    again.resend(3, T0 + us(180));
    flight_records(&mut again);
    finish_12(&mut again);
    let c = only(&again);
    assert_eq!(at(&c, "/tls"), &base, "retransmitted piece");
    assert_u64(&c, "/tcp/retransmissions/client", 1);
}

#[test]
fn client_hello_out_of_order_is_timed_by_the_packet_completing_it() {
    let base = baseline_12();
    // Pieces A (170 µs), C (180 µs), A again (190 µs), B (200 µs): B completes it.
    let mut c = opened();
    hello_split(&[600, 1200], &[170, 200, 180])(&mut c);
    c.resend(3, T0 + us(190));
    flight_records(&mut c);
    finish_12(&mut c);
    let c = only(&c);
    assert_secs(&c, "/tls/client_hello/at", us(200));
    assert_eq!(at(&c, "/tls"), &base);
}

#[test]
fn several_messages_in_one_record_and_one_message_across_records() {
    let base = baseline_12();
    // The whole flight in a single record.
    let one_record = tls12(hello_whole, |c| {
        c.send(
            Side::Server,
            T0 + ms(1),
            &record(HANDSHAKE, &flight_12().concat()),
        );
    });
    assert_eq!(at(&only(&one_record), "/tls"), &base);

    // The Certificate spans two records, and the ServerKeyExchange's 4-byte
    // header is cut between the second and third: each record in its own
    // segment, at 1 ms, 1.05 ms and 1.08 ms.
    let flight = flight_12().concat();
    let sh_len = flight_12()[0].len();
    let cert_end = sh_len + flight_12()[1].len();
    let records = [
        record(HANDSHAKE, &flight[..sh_len + 500]),
        record(HANDSHAKE, &flight[sh_len + 500..cert_end + 2]),
        record(HANDSHAKE, &flight[cert_end + 2..]),
    ];
    let spanning = tls12(hello_whole, |c| {
        for (r, t) in records.iter().zip([ms(1), ms(1) + us(50), ms(1) + us(80)]) {
            c.send(Side::Server, T0 + t, r);
        }
    });
    let c = only(&spanning);
    let want = events_12(&[
        ("client_hello", "client", us(200)),
        ("server_hello", "server", ms(1)),
        ("certificate", "server", ms(1) + us(50)),
        ("server_key_exchange", "server", ms(1) + us(80)),
        ("server_hello_done", "server", ms(1) + us(80)),
    ]);
    assert_eq!(events(&c), want);
    let mut same = base.clone();
    same["events"] = at(&c, "/tls/events").clone();
    assert_eq!(at(&c, "/tls"), &same);
    assert_eq!(at(&c, "/anomalies"), &serde_json::json!({}));
}

#[test]
fn hello_retry_request_then_the_real_server_hello() {
    let mut c = opened();
    let ch1 = handshake(CLIENT_HELLO, &fixture("hrr-client-hello-1.bin"));
    let hrr = handshake(SERVER_HELLO, &fixture("hrr-server-hello-1.bin"));
    let ch2 = handshake(CLIENT_HELLO, &fixture("hrr-client-hello-2.bin"));
    let sh2 = handshake(SERVER_HELLO, &fixture("hrr-server-hello-2.bin"));
    let ccs = change_cipher_spec();
    c.send(Side::Client, T0 + us(200), &ch1)
        .send(Side::Server, T0 + ms(1), &[hrr, ccs.clone()].concat())
        .send(Side::Client, T0 + ms(2), &[ccs.clone(), ch2].concat())
        .send(
            Side::Server,
            T0 + ms(3),
            &[sh2, ccs, opaque(APPLICATION_DATA, 2500)].concat(),
        )
        // The encrypted Finished with SHA-384: 4 + 48 + 1 + 16 bytes.
        .send(Side::Client, T0 + ms(4), &opaque(APPLICATION_DATA, 69))
        .send(
            Side::Client,
            T0 + ms(4) + us(10),
            &opaque(APPLICATION_DATA, 300),
        )
        .send(Side::Server, T0 + ms(5), &opaque(APPLICATION_DATA, 800))
        .close(
            Side::Client,
            T0 + ms(6),
            T0 + ms(6) + us(10),
            T0 + ms(6) + us(20),
        );
    let c = only(&c);
    assert_eq!(
        events(&c),
        expect_events(&[
            ("client_hello", "client", us(200)),
            ("hello_retry_request", "server", ms(1)),
            ("change_cipher_spec", "server", ms(1)),
            ("change_cipher_spec", "client", ms(2)),
            ("client_hello", "client", ms(2)),
            ("server_hello", "server", ms(3)),
            ("change_cipher_spec", "server", ms(3)),
            ("encrypted_record", "server", ms(3)),
            ("encrypted_record", "client", ms(4)),
            ("finished", "client", ms(4)),
        ])
    );
    assert_bool(&c, "/tls/hello_retry", true);
    assert_str(&c, "/tls/version", "TLS 1.3");
    assert_str(&c, "/tls/offered_version", "TLS 1.3");
    assert_str(&c, "/tls/cipher", "TLS_AES_256_GCM_SHA384");
    assert_str(&c, "/tls/outcome", "complete");
    assert_bool(&c, "/tls/resumed", false);
    assert_null(&c, "/tls/sni");
    assert_null(&c, "/tls/client_certificate_requested");
    // Times run from the first ClientHello.
    assert_secs(&c, "/tls/client_hello/at", us(200));
    assert_secs(&c, "/tls/server_hello/at", ms(3));
    assert_secs(&c, "/tls/complete/at", ms(4));
    assert_secs(&c, "/tls/hello_to_hello", ms(3) - us(200));
    assert_secs(&c, "/tls/handshake", ms(4) - us(200));
    assert_secs(&c, "/tls/syn_to_app_data", ms(4) + us(10));
    // Fingerprints of the first ClientHello and of the real ServerHello.
    assert_str(&c, "/tls/ja4", "t13i040900_16476d049b0b_78f1d400d464");
    assert_str(&c, "/tls/ja3", "0f14b679807628ec7f9c02cada3ee941");
    assert_str(&c, "/tls/ja3s", "907bf3ecef1c987c889946b737b43de8");
    assert_u64(&c, "/http/requests", 1);
}

#[test]
fn sslv2_compatible_client_hello() {
    // SSLv2 CLIENT-HELLO: type 1, version 3.1, 6 bytes of cipher specs, no
    // session id, a 16-byte challenge; the 2-byte header has the top bit set.
    let body = [
        &[1, 3, 1, 0, 6, 0, 0, 0, 16][..],
        &[0, 0, 0x2f, 0x01, 0x00, 0x80],
        &[0x5a; 16],
    ]
    .concat();
    let hello = [&[0x80, body.len() as u8][..], &body].concat();
    let mut sh = server_hello(&[], 0x002f, &[]);
    sh[..2].copy_from_slice(&[3, 1]);
    let flight = [
        handshake(SERVER_HELLO, &sh),
        handshake(CERTIFICATE, &[0xab; 900]),
        handshake(SERVER_HELLO_DONE, &[]),
    ]
    .concat();
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), &hello)
        .send(Side::Server, T0 + ms(1), &flight);
    finish_12(&mut c);
    let c = only(&c);
    let want = events_12(&[
        ("client_hello_sslv2", "client", us(200)),
        ("server_hello", "server", ms(1)),
        ("certificate", "server", ms(1)),
        ("server_hello_done", "server", ms(1)),
    ]);
    assert_eq!(events(&c), want);
    assert_str(&c, "/tls/offered_version", "TLS 1.0");
    assert_str(&c, "/tls/version", "TLS 1.0");
    assert_str(&c, "/tls/cipher", "TLS_RSA_WITH_AES_128_CBC_SHA");
    assert_str(&c, "/tls/outcome", "complete");
    assert_secs(&c, "/tls/client_hello/at", us(200));
    assert_secs(&c, "/tls/handshake", ms(3) - us(200));
    assert_null(&c, "/tls/ja4");
    assert_null(&c, "/tls/sni");
    assert_str(&c, "/tls/ja3s", "18e962e106761869a61045bed0e81c2c");
}
