//! Synthetic TLS: how a handshake ends. TLS 1.3 completion at the client's
//! Finished-sized record, a fatal alert, a capture ending mid-handshake,
//! mid-stream and non-TLS connections, and resynchronisation after capture
//! loss.

use super::*;

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
    client_finishes_12(&mut c)
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
