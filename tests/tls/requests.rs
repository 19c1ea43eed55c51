//! Synthetic TLS: requests estimated from TLS 1.3 record flights on a
//! keep-alive connection, and the confidence of that estimate. (TLS 1.2's
//! estimate is checked with the full handshake in the parent.)

use super::*;

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
    for (side, t, len) in TLS13_KEEPALIVE_REST {
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
