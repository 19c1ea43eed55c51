//! The HTTP/3 a key log opens: requests counted once, lower streams
//! opened too, and heads read once the entries they refer to come.

use super::*;

#[test]
fn requests_count_once_and_lower_streams_are_opened_too() {
    let mut app = App::new(1, 0x1301, None, 2);
    assert_eq!(app.http.decryption, DecryptionOutcome::NoSecrets);
    let t = |ms: i64| Timestamp(ms * 1_000_000);
    // A request on stream 0 in two frames (HEADERS: GET, static 17, and
    // :path "/", static 1), its response; then stream 8 (stream 4's
    // frames were lost), answered.
    app.frames(0, &[0x0a, 0x00, 0x06, 0x01, 0x04, 0, 0, 0xd1, 0xc1], t(0));
    app.frames(0, &[0x0f, 0x00, 0x06, 0x01, b'b'], t(1));
    // The responses: HEADERS with :status 200 (static 25), sent twice
    // (counted once), then the FIN; a 429 (literal) on stream 8.
    let ok = [0x0a, 0x00, 0x05, 0x01, 0x03, 0x00, 0x00, 0xd9];
    app.frames(1, &ok, t(4));
    app.frames(1, &ok, t(5));
    app.frames(1, &[0x0f, 0x00, 0x05, 0x01, b'z'], t(6));
    app.frames(0, &[0x0b, 0x08, 0x01, b'd'], t(6));
    let literal_429 = [
        0x0b, 0x08, 0x0a, 0x01, 0x08, 0x00, 0x00, 0x5f, 9, 3, b'4', b'2', b'9',
    ];
    app.frames(1, &literal_429, t(9));
    // Server-initiated and unidirectional streams carry no requests.
    app.frames(0, &[0x0a, 0x02, 0x01, b'f'], t(10));
    app.frames(1, &[0x0a, 0x03, 0x01, b'g'], t(10));
    assert_eq!((app.http.requests, app.http.responses), (3, 2));
    let codes: Vec<(u16, u64)> = app
        .http
        .status_codes
        .iter()
        .map(|(&c, &n)| (c, n))
        .collect();
    assert_eq!(codes, [(200, 1), (429, 1)]);
    assert_eq!(app.latency.len(), 2);
    // Listed: stream 0 (with its method and path) and stream 8; the
    // list is full, stream 4 was never seen.
    let got: Vec<_> = app
        .list
        .iter()
        .map(|e| {
            (
                &*e.method,
                &*e.target,
                e.start,
                e.status,
                e.response_first,
                e.response_last,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("GET", "/", t(0), Some(200), Some(t(4)), Some(t(6))),
            ("", "", t(6), Some(429), Some(t(9)), Some(t(9))),
        ]
    );
    assert!(!app.http.list_truncated);
    app.frames(0, &[0x0b, 0x0c, 0x01, b'e'], t(11));
    assert!(app.http.list_truncated && app.list.len() == 2);
    // AES-128-CCM_8 is not QUIC's (RFC 9001 §5.3); ChaCha20-Poly1305
    // and AES-128-CCM are opened, with secrets.
    assert!(App::new(1, 0x1305, None, 2).http.decryption == DecryptionOutcome::Unsupported);
    assert!(App::new(1, 0x1303, None, 2).http.decryption == DecryptionOutcome::NoSecrets);
    assert!(App::new(1, 0x1304, None, 2).http.decryption == DecryptionOutcome::NoSecrets);
}

#[test]
fn heads_that_refer_to_entries_not_yet_shown_are_read_when_they_come() {
    let mut app = App::new(1, 0x1301, None, 2);
    let t = |ms: i64| Timestamp(ms * 1_000_000);
    // A request (stream 0, with its FIN) whose HEADERS — Required
    // Insert Count 1 (encoded 2), Base 1 — are :method GET (static 17)
    // and the dynamic entry before the base, before the client's
    // encoder stream (stream 2) has shown it: blocked.
    app.frames(0, &[0x0b, 0x00, 6, 0x01, 4, 0x02, 0x00, 0xd1, 0x80], t(0));
    assert_eq!((&*app.list[0].method, &*app.list[0].target), ("", ""));
    // The response (stream 0, with its FIN) refers to the server's
    // first entry too, and ends before the server's encoder stream
    // (stream 3) shows it.
    app.frames(1, &[0x0b, 0x00, 5, 0x01, 3, 0x02, 0x00, 0x80], t(1));
    assert_eq!((app.http.responses, app.list[0].status), (1, None));
    // The client's encoder stream: its type, a capacity of 4 096, and
    // :path "/x" (a static name reference, 1): the request is read.
    let encoder = [0x0a, 0x02, 8, 0x02, 0x3f, 0xe1, 0x1f, 0xc1, 2, b'/', b'x'];
    app.frames(0, &encoder, t(2));
    assert_eq!((&*app.list[0].method, &*app.list[0].target), ("GET", "/x"));
    // The server's: :status 429 (static name 24): counted once.
    let encoder = [
        0x0a, 0x03, 9, 0x02, 0x3f, 0xe1, 0x1f, 0xd8, 3, b'4', b'2', b'9',
    ];
    app.frames(1, &encoder, t(3));
    app.frames(1, &encoder, t(4));
    assert_eq!(app.list[0].status, Some(429));
    assert_eq!(app.http.status_codes.get(&429), Some(&1));
    assert!(app.blocked.is_empty());
}
