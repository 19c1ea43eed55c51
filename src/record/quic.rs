//! QUIC connection records and the summary's QUIC figures: part of the
//! record contract. A QUIC connection's handshake is read from its Initial
//! packets, whose keys every observer can derive (RFC 9001 §5.2); what rides
//! on it (HTTP/3) is sealed with keys a capture does not hold, so its
//! requests are there only with the client's key log (`http`).
//!
//! Does not compute anything: `analyze::quic` builds them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    CertificateInfo, DecryptionOutcome, Distribution, HttpRequest, Instant, Name, Overlay, PerSide,
    RateLimit, RateLimitSummary, Side, TlsEvent,
};

/// One QUIC connection: its endpoints, version and handshake.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuicRecord {
    /// 1-based, in order of each QUIC connection's first packet.
    pub id: u64,
    /// `address:port` of the endpoint that sent the first Initial.
    pub client: String,
    pub server: String,
    pub overlay: Option<Overlay>,
    /// The version of the client's first packet: `1`, `2`, `draft-29`, …
    pub version: Name,
    /// The connection's first and last datagram seen, and the span
    /// between (short-header datagrams count once the connection is known
    /// on their endpoints), seconds.
    pub start: Instant,
    pub end: Instant,
    pub duration: f64,
    /// UDP datagrams, and their UDP payload bytes, by sender.
    pub datagrams: PerSide,
    pub bytes: PerSide,
    pub handshake: QuicHandshake,
    pub tls: QuicTls,
    /// With `--keylog`: what its secrets opened, and the HTTP/3 requests
    /// on it; null without a key log, or before a ServerHello.
    pub http: Option<QuicHttp>,
    /// With `--keylog`: the first CONNECTION_CLOSE frame in a Handshake or
    /// 1-RTT packet (sealed without it); null when none was read.
    pub close: Option<QuicClose>,
    /// Why the record was made: `closed` (3 s without datagrams after a
    /// CONNECTION_CLOSE a key log opened), `idle` (no datagram for its
    /// idle timeout: both ends have dropped it), `evicted` (4 096 connections were
    /// followed at once and this was the oldest) or `open` (still going
    /// when the capture ended).
    pub ended: Name,
}

/// How a QUIC connection was closed: its first CONNECTION_CLOSE frame.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuicClose {
    pub by: Side,
    pub time: Instant,
    /// `transport` (frame type 0x1c: the QUIC layer's error codes, RFC
    /// 9000 §20.1) or `application` (0x1d: HTTP/3's, RFC 9114 §8.1).
    pub kind: Name,
    pub error_code: u64,
    /// The reason phrase, if any (at most 100 characters, made printable).
    pub reason: Option<String>,
}

/// The HTTP/3 requests of a QUIC connection whose 0-RTT and 1-RTT packets
/// a key log opened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuicHttp {
    /// `complete`: every packet opened; `partial`: some did not;
    /// `no_secrets`: the key log has none for this ClientHello;
    /// `unsupported`: a cipher suite this tool does not open (AES-CCM).
    pub decryption: DecryptionOutcome,
    pub packets_opened: u64,
    pub packets_failed: u64,
    /// Client-initiated bidirectional streams (one request each, RFC 9114).
    pub requests: u64,
    /// Of those, the ones whose response ended (the server's FIN).
    pub responses: u64,
    /// Responses by `:status`, as far as QPACK gave it (at most 64 codes).
    pub status_codes: BTreeMap<u16, u64>,
    /// What the responses said of rate limiting, as a TCP connection's
    /// `http.rate_limit`; null unless one was a 429 or had a Retry-After.
    pub rate_limit: Option<RateLimit>,
    /// The first requests (at most `--max-requests-listed`), in the order
    /// their streams were first seen, with method and path (from the
    /// request's first STREAM frame), status and times; the same fields
    /// as a TCP connection's `http.list`.
    pub list: Vec<HttpRequest>,
    /// More requests than the list holds.
    pub list_truncated: bool,
}

impl Default for QuicHttp {
    fn default() -> QuicHttp {
        QuicHttp {
            decryption: DecryptionOutcome::NoSecrets,
            packets_opened: 0,
            packets_failed: 0,
            requests: 0,
            responses: 0,
            status_codes: BTreeMap::new(),
            rate_limit: None,
            list: Vec::new(),
            list_truncated: false,
        }
    }
}

/// The packets of a QUIC handshake, as their long headers show them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QuicHandshake {
    /// The client's first Initial (or 0-RTT) packet: the connection's start.
    pub client_initial: Option<Instant>,
    /// The server's first Initial packet.
    pub server_initial: Option<Instant>,
    /// The client's Finished: the handshake is complete for the client.
    /// With a key log that opens its Handshake packets, the packet that
    /// completed the message; without, its first Handshake packet large
    /// enough to carry it (56 bytes or more after the Length field; one
    /// that only acknowledges the server's flight is about half that).
    pub client_handshake: Option<Instant>,
    /// `client_initial` → `client_handshake`, seconds; null when either
    /// was not seen.
    pub duration: Option<f64>,
    /// The server answered the first Initial with a Retry.
    pub retry: bool,
    /// Long-header packets (a datagram may coalesce several) by kind, both
    /// directions.
    pub packets: QuicPackets,
    /// A CONNECTION_CLOSE in an Initial packet: its error code (a
    /// handshake refused before the keys changed); null otherwise.
    pub close_error: Option<u64>,
    /// The client's max_idle_timeout transport parameter (in its
    /// ClientHello), seconds; 0 when it set none, null when not read (no
    /// ClientHello, or a draft version's).
    pub idle_timeout: Option<f64>,
    /// The server's max_idle_timeout (in its EncryptedExtensions, read
    /// with a key log), seconds; 0 when it set none, null when not read.
    /// The connection's own is the smaller of the two set (RFC 9000
    /// §10.1).
    pub server_idle_timeout: Option<f64>,
}

/// Long-header packets of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QuicPackets {
    pub initial: u64,
    pub zero_rtt: u64,
    pub handshake: u64,
    pub retry: u64,
    /// Initial packets that would not open (a key this tool does not know,
    /// or bytes damaged).
    pub undecryptable: u64,
}

/// The TLS handshake inside the Initial packets.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QuicTls {
    /// When the ClientHello was complete (its last CRYPTO bytes arrived).
    pub client_hello: Option<Instant>,
    /// When the ServerHello was complete.
    pub server_hello: Option<Instant>,
    /// ClientHello → ServerHello, seconds (a TCP connection's
    /// `tls.hello_to_hello`); null without both.
    pub hello_to_hello: Option<f64>,
    pub sni: Option<String>,
    pub alpn_offered: Vec<String>,
    /// The protocol the server chose, from its EncryptedExtensions: read
    /// only with a key log (in a Handshake packet); null without.
    pub alpn: Option<String>,
    /// From the ServerHello (`TLS 1.3`); null without one.
    pub version: Option<Name>,
    pub cipher: Option<Name>,
    /// The server accepted a pre-shared key (pre_shared_key in its
    /// ServerHello): a resumed session. Null without a ServerHello.
    pub resumed: Option<bool>,
    /// The client offered a pre-shared key, and early data (0-RTT).
    pub psk_offered: bool,
    pub early_data_offered: bool,
    /// The server accepted the client's 0-RTT data (its
    /// EncryptedExtensions, with a key log); null without.
    pub early_data_accepted: Option<bool>,
    /// JA4 of the ClientHello, `q` for QUIC.
    pub ja4: Option<String>,
    /// With `--keylog`: the server's certificate chain (its Certificate
    /// message, at most 16 KiB; not a compressed one); null without.
    pub certificate: Option<CertificateInfo>,
    /// The handshake's messages with their times, as a TCP connection's
    /// `tls.events`: the two hellos from the Initial packets, and with a
    /// key log the rest from the Handshake packets (at most 64).
    pub events: Vec<TlsEvent>,
}

/// The summary's QUIC figures: every connection counts in them, listed or
/// not.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QuicSummary {
    /// QUIC connections opened (the same as `summary.quic_connections`).
    pub connections: u64,
    /// Their UDP datagrams, both senders (`list[].datagrams`, over every
    /// connection, listed or not).
    pub datagrams: u64,
    /// Handshakes whose ServerHello was read: full and resumed.
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    /// Connections on which the client sent 0-RTT packets.
    pub early_data: u64,
    /// Connections the server answered with a Retry.
    pub retries: u64,
    /// Connections by QUIC version.
    pub versions: BTreeMap<String, u64>,
    /// Connections by the first ALPN protocol offered (`h3`, …).
    pub alpn_offered: BTreeMap<String, u64>,
    /// Handshake times (`handshake.duration`) of every connection that has one.
    pub handshake: Distribution,
    /// With `--keylog`: connections whose 0-RTT or 1-RTT packets its
    /// secrets opened (`http.decryption` complete or partial); the HTTP/3
    /// requests on them, the responses that ended, and request → response
    /// end.
    pub decrypted: u64,
    pub requests: u64,
    pub responses: u64,
    pub request_latency: Distribution,
    /// With `--keylog`: the handshakes of the connections that carried
    /// HTTP/3 requests, per request (1.00: a connection per request, as
    /// TCP's `handshakes_per_request.tcp`); null without requests.
    pub handshakes_per_request: Option<f64>,
    /// With `--keylog`: HTTP/3 responses by status, over every connection.
    pub status_codes: BTreeMap<String, u64>,
    /// With `--keylog`: the connections' `http.rate_limit` added up, as
    /// the summary's `rate_limit` adds up TCP's; null when none has one.
    pub rate_limit: Option<RateLimitSummary>,
    /// The connections, in order of their first packets: the first
    /// 4 096 (`not_listed` counts the rest, which the figures above include).
    pub list: Vec<QuicRecord>,
    pub not_listed: u64,
}
