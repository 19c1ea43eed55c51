//! Synthetic TLS conversations run through the real binary: TLS records
//! built around the real hello fixtures (tests/data/hello) and hand-made
//! messages, carried in scripted TCP segments at exact times. Checks the
//! handshake timeline to the microsecond, completion rules (TLS ≤ 1.2: the
//! later Finished; TLS 1.3: the client's Finished-sized record), messages
//! split across segments and records, HelloRetryRequest, the three kinds of
//! resumption, alerts, incomplete, mid-stream and non-TLS connections,
//! resynchronisation after capture loss, the SSLv2-compatible ClientHello,
//! and the request estimate from record flights.

use serde_json::Value;

use crate::support::tls::*;
use crate::support::*;

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

/// After the server's first flight: ClientKeyExchange, CCS and Finished
/// from the client at 2 ms; NewSessionTicket, CCS and Finished from the
/// server at 3 ms; a 300-byte request at 4 ms, a 1400-byte response at 5 ms,
/// and the client's FIN at 6 ms.
fn finish_12(c: &mut Conv) {
    let key_exchange = handshake(CLIENT_KEY_EXCHANGE, &[0x41; 66]);
    let ticket = handshake(NEW_SESSION_TICKET, &[0x54; 170]);
    c.send(
        Side::Client,
        T0 + ms(2),
        &[key_exchange, ccs_finished()].concat(),
    )
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
    let key_exchange = handshake(CLIENT_KEY_EXCHANGE, &[0x41; 66]);
    c.send(
        Side::Client,
        T0 + ms(2),
        &[key_exchange, ccs_finished()].concat(),
    )
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

/// An abbreviated TLS 1.2 handshake: `hello` at 200 µs; ServerHello with
/// `server_id`, CCS and Finished at 1 ms; the client's CCS and Finished at
/// 2 ms; a request at 3 ms and a response at 4 ms.
fn abbreviated_12(hello: &[u8], server_id: &[u8]) -> Value {
    let mut c = opened();
    let sh = handshake(SERVER_HELLO, &server_hello(server_id, 0xc02f, &[]));
    c.send(Side::Client, T0 + us(200), hello)
        .send(Side::Server, T0 + ms(1), &[sh, ccs_finished()].concat())
        .send(Side::Client, T0 + ms(2), &ccs_finished())
        .send(Side::Client, T0 + ms(3), &opaque(APPLICATION_DATA, 300))
        .send(Side::Server, T0 + ms(4), &opaque(APPLICATION_DATA, 900));
    report(&[&c])
}

/// Asserts an abbreviated TLS 1.2 handshake resumed by `how`.
fn assert_abbreviated(v: &Value, how: &str) {
    let c = conn(v, 0);
    assert_bool(c, "/tls/resumed", true);
    assert_str(c, "/tls/resumption", how);
    assert_str(c, "/tls/outcome", "complete");
    assert_secs(c, "/tls/complete/at", ms(2));
    assert_secs(c, "/tls/handshake", ms(2) - us(200));
    assert_secs(c, "/tls/syn_to_app_data", ms(3));
    assert_eq!(
        events(c),
        expect_events(&[
            ("client_hello", "client", us(200)),
            ("server_hello", "server", ms(1)),
            ("change_cipher_spec", "server", ms(1)),
            ("finished", "server", ms(1)),
            ("change_cipher_spec", "client", ms(2)),
            ("finished", "client", ms(2)),
            ("encrypted_record", "client", ms(3)),
            ("encrypted_record", "server", ms(4)),
        ])
    );
    assert_u64(v, "/summary/tls_handshakes_resumed", 1);
    assert_u64(v, "/summary/tls_handshakes_full", 0);
}

#[test]
fn tls12_session_id_resumption() {
    let body = fixture("chrome-kyber-client-hello-1.bin");
    let v = abbreviated_12(&chrome_hello(), &session_id_of(&body));
    assert_abbreviated(&v, "session_id");
    assert!(at(&v, "/summary/verdict")
        .as_str()
        .expect("verdict")
        .ends_with(", 1 resumed TLS session"));
}

#[test]
fn tls12_ticket_resumption() {
    let id = [0x66; 32];
    let hello = handshake(
        CLIENT_HELLO,
        &client_hello(&id, &[sni("example.com"), ext(35, &[0x77; 160])]),
    );
    // The server echoes the client's fresh session id to accept the ticket,
    // or sends none and goes straight to ChangeCipherSpec.
    for server_id in [&id[..], &[]] {
        assert_abbreviated(&abbreviated_12(&hello, server_id), "ticket");
    }
    // An empty session_ticket extension is no resumption attempt, and a
    // session id the server does not echo starts a full handshake.
    let fresh = handshake(CLIENT_HELLO, &client_hello(&id, &[ext(35, &[])]));
    let c = only(&tls12(
        |c| {
            c.send(Side::Client, T0 + us(200), &fresh);
        },
        flight_records,
    ));
    assert_bool(&c, "/tls/resumed", false);
    assert_null(&c, "/tls/resumption");
}

/// A TLS 1.3 handshake after Chrome's ClientHello: a hand-made ServerHello
/// with `extra` extensions, an encrypted flight without a certificate at
/// 1 ms, the client's Finished (53 bytes) at 2 ms.
fn tls13_resumed(extra: &[Vec<u8>]) -> Value {
    let body = fixture("chrome-kyber-client-hello-1.bin");
    let key_share = [&[0, 0x1d, 0, 32][..], &[0x4b; 32]].concat();
    let mut exts = vec![ext(43, &[3, 4]), ext(51, &key_share)];
    exts.extend_from_slice(extra);
    let sh = handshake(
        SERVER_HELLO,
        &server_hello(&session_id_of(&body), 0x1301, &exts),
    );
    let mut c = opened();
    c.send(Side::Client, T0 + us(200), &chrome_hello())
        .send(
            Side::Server,
            T0 + ms(1),
            &[sh, change_cipher_spec(), opaque(APPLICATION_DATA, 90)].concat(),
        )
        .send(
            Side::Client,
            T0 + ms(2),
            &[change_cipher_spec(), opaque(APPLICATION_DATA, 53)].concat(),
        );
    only(&c)
}

#[test]
fn tls13_psk_resumption() {
    let c = tls13_resumed(&[ext(41, &[0, 0])]);
    assert_str(&c, "/tls/version", "TLS 1.3");
    assert_str(&c, "/tls/cipher", "TLS_AES_128_GCM_SHA256");
    assert_bool(&c, "/tls/resumed", true);
    assert_str(&c, "/tls/resumption", "psk");
    assert_str(&c, "/tls/outcome", "complete");
    assert_secs(&c, "/tls/complete/at", ms(2));
    // Without pre_shared_key: a full handshake, even with no certificate visible.
    let c = tls13_resumed(&[]);
    assert_bool(&c, "/tls/resumed", false);
    assert_null(&c, "/tls/resumption");
    assert_str(&c, "/tls/outcome", "complete");
}

/// A TLS 1.3 handshake after Chrome's ClientHello: the real ServerHello
/// and the server's encrypted flight at 1 ms, then the client's records
/// `client` (time in µs, length), and a 900-byte server record at 3 ms.
fn tls13_client_flight(client: &[(i64, usize)]) -> Value {
    let sh = handshake(SERVER_HELLO, &fixture("chrome-kyber-server-hello-1.bin"));
    let mut c = opened();
    hello_whole(&mut c);
    c.send(
        Side::Server,
        T0 + ms(1),
        &[sh, opaque(APPLICATION_DATA, 2500)].concat(),
    );
    for &(t, len) in client {
        c.send(Side::Client, T0 + us(t), &opaque(APPLICATION_DATA, len));
    }
    c.send(Side::Server, T0 + ms(3), &opaque(APPLICATION_DATA, 900));
    only(&c)
}

#[test]
fn tls13_completion_prefers_the_finished_sized_record() {
    // A client certificate: Certificate, CertificateVerify, Finished (53
    // bytes), then the request.
    let c = tls13_client_flight(&[(2000, 1500), (2010, 280), (2020, 53), (2100, 300)]);
    assert_secs(&c, "/tls/complete/at", us(2020));
    assert_secs(&c, "/tls/syn_to_app_data", us(2100));
    assert_u64(&c, "/http/requests", 1);
    assert_secs(&c, "/http/list/0/start/at", us(2100));
    assert_secs(&c, "/http/list/0/response_first/at", ms(3));
    // No Finished-sized record: the flight's first record completes the
    // handshake and its second is the first request.
    let c = tls13_client_flight(&[(2000, 74), (2010, 300)]);
    assert_secs(&c, "/tls/complete/at", ms(2));
    assert_secs(&c, "/tls/handshake", ms(2) - us(200));
    assert_secs(&c, "/tls/syn_to_app_data", us(2010));
    assert_u64(&c, "/http/requests", 1);
    assert_secs(&c, "/http/list/0/start/at", us(2010));
    assert_secs(&c, "/http/list/0/response_first/at", ms(3));
    assert_str(&c, "/tls/outcome", "complete");
}

#[test]
fn fatal_alert_after_client_hello_fails_the_handshake() {
    let mut c = opened();
    hello_whole(&mut c);
    c.send(Side::Server, T0 + ms(1), &alert(2, 40)).close(
        Side::Server,
        T0 + ms(1) + us(10),
        T0 + ms(2),
        T0 + ms(2) + us(10),
    );
    let v = report(&[&c]);
    let c = conn(&v, 0);
    assert_str(c, "/tls/outcome", "failed");
    assert_str(c, "/tls/alert/side", "server");
    assert_str(c, "/tls/alert/level", "fatal");
    assert_str(c, "/tls/alert/description", "handshake_failure");
    assert_secs(c, "/tls/alert/time/at", ms(1));
    assert_eq!(
        events(c),
        expect_events(&[
            ("client_hello", "client", us(200)),
            ("alert", "server", ms(1)),
        ])
    );
    assert_str(c, "/tls/events/1/detail", "fatal handshake_failure");
    for field in ["version", "cipher", "server_hello", "complete", "handshake"] {
        assert_null(c, &format!("/tls/{field}"));
    }
    assert_str(c, "/tls/offered_version", "TLS 1.3");
    assert_u64(&v, "/summary/tls_handshakes_failed", 1);
    assert_u64(&v, "/summary/tls_handshakes_full", 0);
}

#[test]
fn capture_ending_after_the_server_hello_is_incomplete() {
    let mut c = opened();
    hello_whole(&mut c);
    flight_records(&mut c);
    let c = only(&c);
    assert_str(&c, "/tls/outcome", "incomplete");
    assert_str(&c, "/tls/version", "TLS 1.2");
    assert_secs(&c, "/tls/hello_to_hello", us(800));
    for field in ["complete", "handshake", "syn_to_app_data", "alert"] {
        assert_null(&c, &format!("/tls/{field}"));
    }
    assert_str(&c, "/http/method", "tls-flights");
    assert_u64(&c, "/http/requests", 0);
}

#[test]
fn only_application_data_is_midstream() {
    let mut c = Conv::new(CLIENT, SERVER, 1_000, 5_000);
    c.send(Side::Client, T0, &opaque(APPLICATION_DATA, 300))
        .send(Side::Server, T0 + ms(1), &opaque(APPLICATION_DATA, 1400))
        .send(Side::Client, T0 + ms(2), &opaque(APPLICATION_DATA, 300));
    let c = only(&c);
    assert_bool(&c, "/partial", true);
    assert_str(&c, "/tls/outcome", "midstream");
    for field in [
        "version",
        "offered_version",
        "client_hello",
        "ja4",
        "complete",
    ] {
        assert_null(&c, &format!("/tls/{field}"));
    }
    assert_eq!(
        events(&c),
        expect_events(&[
            ("encrypted_record", "client", 0),
            ("encrypted_record", "server", ms(1)),
        ])
    );
}

#[test]
fn a_record_header_followed_by_garbage_is_not_tls() {
    let mut c = opened();
    let start = [HANDSHAKE, 3, 1, 0, 5, 1, 2, 3, 4, 5];
    c.send(Side::Client, T0 + us(200), &start).send(
        Side::Client,
        T0 + us(300),
        b"garbage, not a record",
    );
    let c = only(&c);
    assert_str(&c, "/tls/outcome", "not_tls");
    assert_null(&c, "/tls/client_hello");
    assert_u64(&c, "/anomalies/malformed_tls", 1);
}

#[test]
fn http_on_port_443_is_not_tls() {
    let mut c = opened();
    c.send(
        Side::Client,
        T0 + us(200),
        b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
    )
    .send(
        Side::Server,
        T0 + ms(1),
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    );
    let c = only(&c);
    assert_null(&c, "/tls");
    assert_str(&c, "/http/method", "http1");
    assert_u64(&c, "/http/requests", 1);
    assert_u64(&c, "/http/list/0/status", 200);
}

#[test]
fn gap_in_the_certificate_resynchronises_on_the_next_record() {
    let mut c = opened();
    hello_whole(&mut c);
    let [sh, cert, key_exchange, done] = flight_12();
    let cert = record(HANDSHAKE, &[cert, vec![0xab; 1800]].concat());
    assert_eq!(cert.len(), 3009);
    c.send(Side::Server, T0 + ms(1), &record(HANDSHAKE, &sh))
        .send_split(
            Side::Server,
            &cert,
            &[1000, 2000],
            &[ms(1) + us(10), ms(1) + us(20), ms(1) + us(30)].map(|t| T0 + t),
        );
    // The capture lost the middle segment; the client acknowledges past it.
    c.segs.remove(6);
    c.ack_from(Side::Client, T0 + ms(1) + us(35)).send(
        Side::Server,
        T0 + ms(1) + us(40),
        &record(HANDSHAKE, &[key_exchange, done].concat()),
    );
    finish_12(&mut c);
    let c = only(&c);
    assert_u64(&c, "/tls/gap_bytes", 1000);
    assert_u64(&c, "/anomalies/stream_gap", 1);
    // The Certificate is lost; the records after it are found again.
    let want = events_12(&[
        ("client_hello", "client", us(200)),
        ("server_hello", "server", ms(1)),
        ("server_key_exchange", "server", ms(1) + us(40)),
        ("server_hello_done", "server", ms(1) + us(40)),
    ]);
    assert_eq!(events(&c), want);
    assert_str(&c, "/tls/outcome", "complete");
    assert_secs(&c, "/tls/complete/at", ms(3));
    assert_u64(&c, "/http/requests", 1);
}

#[test]
fn gap_inside_an_encrypted_record_keeps_the_record_boundaries() {
    let mut c = opened();
    hello_whole(&mut c);
    flight_records(&mut c);
    let key_exchange = handshake(CLIENT_KEY_EXCHANGE, &[0x41; 66]);
    c.send(
        Side::Client,
        T0 + ms(2),
        &[key_exchange, ccs_finished()].concat(),
    )
    .send(Side::Server, T0 + ms(3), &ccs_finished())
    .send(Side::Client, T0 + ms(4), &opaque(APPLICATION_DATA, 300))
    .send_split(
        Side::Server,
        &opaque(APPLICATION_DATA, 3000),
        &[1000, 2000],
        &[ms(5), ms(5) + us(10), ms(5) + us(20)].map(|t| T0 + t),
    );
    c.segs.remove(c.segs.len() - 2);
    c.ack_from(Side::Client, T0 + ms(5) + us(30))
        .send(Side::Client, T0 + ms(6), &opaque(APPLICATION_DATA, 300))
        .send(Side::Server, T0 + ms(7), &opaque(APPLICATION_DATA, 500));
    let c = only(&c);
    assert_u64(&c, "/tls/gap_bytes", 1000);
    assert_str(&c, "/tls/outcome", "complete");
    assert_u64(&c, "/http/requests", 2);
    assert_u64(&c, "/http/responses", 2);
    assert_secs(&c, "/http/list/0/response_last/at", ms(5) + us(20));
    assert_secs(&c, "/http/list/1/response_first/at", ms(7));
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

/// A TLS 1.3 keep-alive connection like curl's: `hello` at 200 µs; the
/// real ServerHello (TLS 1.3, AES-128-GCM) and the encrypted flight at
/// 1 ms; the client's 53-byte Finished and first 106-byte request in one
/// segment at 2 ms; two 282-byte tickets, then responses, to three requests;
/// a 19-byte encrypted alert at 6 ms.
fn tls13_keepalive(hello: &[u8]) -> Conv {
    let sh = handshake(SERVER_HELLO, &fixture("chrome-kyber-server-hello-1.bin"));
    let mut c = opened();
    let app = |len| opaque(APPLICATION_DATA, len);
    c.send(Side::Client, T0 + us(200), hello)
        .send(
            Side::Server,
            T0 + ms(1),
            &[sh, change_cipher_spec(), app(2500)].concat(),
        )
        .send(
            Side::Client,
            T0 + ms(2),
            &[change_cipher_spec(), app(53), app(106)].concat(),
        );
    let rest = [
        (Side::Server, 3000, 282),
        (Side::Server, 3100, 282),
        (Side::Server, 3200, 1598),
        (Side::Client, 4000, 106),
        (Side::Server, 4500, 1598),
        (Side::Client, 5000, 106),
        (Side::Server, 5500, 1598),
        (Side::Server, 5600, 500),
        (Side::Client, 6000, 19),
    ];
    for (side, t, len) in rest {
        c.send(side, T0 + us(t), &app(len));
    }
    c.close(
        Side::Client,
        T0 + ms(7),
        T0 + ms(7) + us(10),
        T0 + ms(7) + us(20),
    );
    c
}

#[test]
fn tls13_flights_estimate_requests() {
    let hello = client_hello(
        &[0x66; 32],
        &[sni("example.com"), alpn(&["http/1.1"]), ext(43, &[2, 3, 4])],
    );
    let c = only(&tls13_keepalive(&handshake(CLIENT_HELLO, &hello)));
    assert_str(&c, "/tls/version", "TLS 1.3");
    assert_str(&c, "/tls/outcome", "complete");
    assert_secs(&c, "/tls/complete/at", ms(2));
    assert_secs(&c, "/tls/handshake", ms(2) - us(200));
    assert_secs(&c, "/tls/syn_to_app_data", ms(2));
    assert_eq!(
        events(&c),
        expect_events(&[
            ("client_hello", "client", us(200)),
            ("server_hello", "server", ms(1)),
            ("change_cipher_spec", "server", ms(1)),
            ("encrypted_record", "server", ms(1)),
            ("change_cipher_spec", "client", ms(2)),
            ("encrypted_record", "client", ms(2)),
            ("finished", "client", ms(2)),
        ])
    );
    assert_str(&c, "/http/method", "tls-flights");
    assert_bool(&c, "/http/estimated", true);
    assert_str(&c, "/http/confidence", "estimate");
    assert_u64(&c, "/http/requests", 3);
    assert_u64(&c, "/http/responses", 3);
    let want: [(i64, i64, i64); 3] = [
        (ms(2), us(3200), us(3200)),
        (ms(4), us(4500), us(4500)),
        (ms(5), us(5500), us(5600)),
    ];
    let list = at(&c, "/http/list").as_array().expect("list");
    assert_eq!(list.len(), 3, "the 19-byte alert is not a request");
    for (r, (start, first, last)) in list.iter().zip(want) {
        assert_eq!(nanos(&r["start"]), start, "{r}");
        // The tickets at 3 ms and 3.1 ms are not the first response.
        assert_eq!(nanos(&r["response_first"]), first, "{r}");
        assert_eq!(nanos(&r["response_last"]), last, "{r}");
        assert_eq!(nanos(&r["ttfb"]), first - start, "{r}");
        assert_eq!(nanos(&r["duration"]), last - start, "{r}");
        assert_eq!((&r["method"], &r["status"]), (&Value::Null, &Value::Null));
    }
    // Offering h2 with the selection hidden (TLS 1.3): flights are not
    // requests with confidence.
    let c = only(&tls13_keepalive(&chrome_hello()));
    assert_str(&c, "/http/confidence", "low");
    assert_u64(&c, "/http/requests", 3);
}
