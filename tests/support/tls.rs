//! Application bytes for synthetic captures: TLS records and handshake
//! messages (around the real hello fixtures in tests/data/hello, or built by
//! hand), [`SendBytes`], which puts chosen bytes into a [`Conv`]'s segments
//! at exact times (TLS records, HTTP/1 text, HTTP/2 frames alike), and the
//! small report helpers the TLS and HTTP tests share (one connection's JSON,
//! events and times in nanoseconds).

use serde_json::Value;

use super::conv::{pcap_of, us, Conv, Side};
use super::frames::Link;
use super::{analyze, at, connections};

pub const CHANGE_CIPHER_SPEC: u8 = 20;
pub const ALERT: u8 = 21;
pub const HANDSHAKE: u8 = 22;
pub const APPLICATION_DATA: u8 = 23;

/// Handshake message types.
pub const CLIENT_HELLO: u8 = 1;
pub const SERVER_HELLO: u8 = 2;
pub const NEW_SESSION_TICKET: u8 = 4;
pub const CERTIFICATE: u8 = 11;
pub const SERVER_KEY_EXCHANGE: u8 = 12;
pub const SERVER_HELLO_DONE: u8 = 14;
pub const CLIENT_KEY_EXCHANGE: u8 = 16;

/// A handshake message body from tests/data/hello (see its README).
/// What follows the client's Finished on a TLS 1.3 keep-alive connection
/// like curl's, as (side, µs after the start, application-data record
/// length): two 282-byte tickets, then three requests answered, and a
/// 19-byte encrypted alert.
pub const TLS13_KEEPALIVE_REST: [(Side, i64, usize); 9] = [
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

pub fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hello")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `body` behind a `width`-byte big-endian length.
fn prefixed(width: usize, body: &[u8]) -> Vec<u8> {
    let len = (body.len() as u32).to_be_bytes();
    [&len[4 - width..], body].concat()
}

/// A handshake message: type, 24-bit length, body.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    [&[kind][..], &prefixed(3, body)].concat()
}

/// A record of `content_type` with version 0x0303.
pub fn record(content_type: u8, body: &[u8]) -> Vec<u8> {
    [&[content_type, 3, 3][..], &prefixed(2, body)].concat()
}

/// A record whose body is `len` opaque bytes (encrypted data).
pub fn opaque(content_type: u8, len: usize) -> Vec<u8> {
    record(content_type, &vec![0xee; len])
}

/// One handshake record holding a single message.
pub fn handshake(kind: u8, body: &[u8]) -> Vec<u8> {
    record(HANDSHAKE, &message(kind, body))
}

/// ChangeCipherSpec: 14 03 03 00 01 01.
pub fn change_cipher_spec() -> Vec<u8> {
    record(CHANGE_CIPHER_SPEC, &[1])
}

/// A plaintext alert.
pub fn alert(level: u8, description: u8) -> Vec<u8> {
    record(ALERT, &[level, description])
}

/// One extension: type, 16-bit length, data.
pub fn ext(kind: u16, data: &[u8]) -> Vec<u8> {
    [&kind.to_be_bytes()[..], &prefixed(2, data)].concat()
}

/// The ALPN extension offering (or, in a ServerHello, selecting) `protocols`.
pub fn alpn(protocols: &[&str]) -> Vec<u8> {
    let list: Vec<u8> = protocols
        .iter()
        .flat_map(|p| prefixed(1, p.as_bytes()))
        .collect();
    ext(16, &prefixed(2, &list))
}

/// A ClientHello body: TLS 1.2 legacy version, `session_id`, three ciphers,
/// null compression and the given extensions (already encoded).
pub fn client_hello(session_id: &[u8], extensions: &[Vec<u8>]) -> Vec<u8> {
    let ciphers = [0x13, 0x01, 0xc0, 0x2f, 0xc0, 0x30];
    [
        &[3, 3][..],
        &[0x44; 32],
        &prefixed(1, session_id),
        &prefixed(2, &ciphers),
        &[1, 0],
        &prefixed(2, &extensions.concat()),
    ]
    .concat()
}

/// A ServerHello body: legacy version 0x0303, `session_id`, `cipher`, null
/// compression and the given extensions (already encoded).
pub fn server_hello(session_id: &[u8], cipher: u16, extensions: &[Vec<u8>]) -> Vec<u8> {
    [
        &[3, 3][..],
        &[0x11; 32],
        &prefixed(1, session_id),
        &cipher.to_be_bytes(),
        &[0],
        &prefixed(2, &extensions.concat()),
    ]
    .concat()
}

/// The session id of a ClientHello or ServerHello body.
pub fn session_id_of(hello: &[u8]) -> Vec<u8> {
    let len = usize::from(hello[34]);
    hello[35..35 + len].to_vec()
}

/// Puts chosen bytes into a conversation's segments.
pub trait SendBytes {
    /// `bytes` in one segment (PSH, ACK) from `side` at `ts`.
    fn send(&mut self, side: Side, ts: i64, bytes: &[u8]) -> &mut Conv;
    /// `bytes` cut at the offsets `cuts`, piece `i` sent at `times[i]` (times
    /// out of order make the pieces arrive out of order).
    fn send_split(&mut self, side: Side, bytes: &[u8], cuts: &[usize], times: &[i64]) -> &mut Conv;
}

impl SendBytes for Conv {
    fn send(&mut self, side: Side, ts: i64, bytes: &[u8]) -> &mut Conv {
        self.data(side, ts, bytes.len());
        let last = self.segs.last_mut().expect("the segment just added");
        last.seg.payload = bytes.to_vec();
        self
    }

    fn send_split(&mut self, side: Side, bytes: &[u8], cuts: &[usize], times: &[i64]) -> &mut Conv {
        assert_eq!(cuts.len() + 1, times.len(), "one time per piece");
        let ends = cuts.iter().copied().chain([bytes.len()]);
        let mut from = 0;
        for (end, &ts) in ends.zip(times) {
            self.send(side, ts, &bytes[from..end]);
            from = end;
        }
        self
    }
}

/// A conversation from `client` to `server` after a TCP handshake at `t`,
/// `t` + 100 µs and `t` + 150 µs.
pub fn opened_at(client: &str, server: &str, t: i64) -> Conv {
    let mut c = Conv::new(client, server, 1_000, 5_000);
    c.handshake(t, t + us(100), t + us(150));
    c
}

/// The report of an Ethernet capture holding `convs`.
pub fn report(convs: &[&Conv]) -> Value {
    analyze(&pcap_of(Link::Ethernet, convs))
}

/// The only connection of the capture holding `c`.
pub fn only(c: &Conv) -> Value {
    let v = report(&[c]);
    assert_eq!(connections(&v), 1, "{v:#}");
    at(&v, "/connections/0").clone()
}

pub fn assert_null(v: &Value, pointer: &str) {
    assert_eq!(at(v, pointer), &Value::Null, "{pointer} in {v:#}");
}

pub fn assert_bool(v: &Value, pointer: &str, want: bool) {
    assert_eq!(at(v, pointer), &Value::Bool(want), "{pointer} in {v:#}");
}

/// Nanoseconds since the first packet of an `{ts, at}` instant (or a
/// duration in seconds), rounded.
pub fn nanos(v: &Value) -> i64 {
    let secs = v
        .as_f64()
        .or_else(|| v.get("at").and_then(Value::as_f64))
        .unwrap_or_else(|| panic!("not a time: {v}"));
    (secs * 1e9).round() as i64
}

/// The TLS events of a connection as (name, side, ns since the first packet).
pub fn events(c: &Value) -> Vec<(String, String, i64)> {
    let list = at(c, "/tls/events").as_array().expect("events array");
    list.iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (text("name"), text("side"), nanos(&e["time"]))
        })
        .collect()
}

/// Owned (name, side, ns) triples, to compare with [`events`].
pub fn expect_events(list: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
    list.iter()
        .map(|&(n, s, t)| (n.to_string(), s.to_string(), t))
        .collect()
}

/// The server_name extension naming `host`.
pub fn sni(host: &str) -> Vec<u8> {
    let entry = [&[0][..], &prefixed(2, host.as_bytes())].concat();
    ext(0, &prefixed(2, &entry))
}
