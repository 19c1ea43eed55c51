//! Synthetic TLS: the three kinds of resumption (TLS 1.2 session id and
//! ticket, TLS 1.3 pre-shared key), and the full handshakes that look like
//! them but are not.

use super::*;

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
