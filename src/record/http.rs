//! The record's `http` section: the requests that rode on a connection.
//!
//! Plain data for the reports; filled by `analyze`, never parsed here.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Distribution, Instant};

/// One HTTP request and what is known of its response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HttpRequest {
    /// Method and target (path, at most 200 characters); null when encrypted or not decoded.
    pub method: Option<String>,
    pub target: Option<String>,
    /// First byte of the request.
    pub start: Instant,
    /// Response status; null when encrypted, not decoded, or no response.
    pub status: Option<u16>,
    /// The response's `Retry-After`, in seconds (an HTTP-date counted from
    /// the response's `Date`); null when it had none.
    pub retry_after: Option<u32>,
    /// First and last byte of the response.
    pub response_first: Option<Instant>,
    pub response_last: Option<Instant>,
    /// start → first response byte, seconds.
    pub ttfb: Option<f64>,
    /// start → last response byte, seconds.
    pub duration: Option<f64>,
    /// The server refused it unprocessed (HTTP/2: RST_STREAM
    /// REFUSED_STREAM, or a stream past the server's GOAWAY): not served,
    /// the client may send it again.
    pub refused: bool,
}

impl HttpRequest {
    /// The wait its response's Retry-After asked for, in seconds into the
    /// capture: from the response's last byte until so many seconds after.
    pub fn retry_after_window(&self) -> Option<(f64, f64)> {
        let (end, secs) = self.response_last.zip(self.retry_after)?;
        Some((end.at, end.at + f64::from(secs)))
    }
}

/// How requests on a connection were counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum HttpMethod {
    /// HTTP/1.x message framing on cleartext.
    #[serde(rename = "http1")]
    Http1,
    /// HTTP/2 frames on cleartext (prior knowledge or Upgrade).
    #[serde(rename = "h2c")]
    H2c,
    /// Estimated from TLS record flights.
    #[serde(rename = "tls-flights")]
    TlsFlights,
    /// HTTP/1.x read from TLS records opened with `--keylog`.
    #[serde(rename = "tls-http1")]
    TlsHttp1,
    /// HTTP/2 read from TLS records opened with `--keylog`.
    #[serde(rename = "tls-h2")]
    TlsH2,
    /// No HTTP seen.
    #[serde(rename = "none")]
    None,
}

/// The HTTP requests that rode on a connection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HttpInfo {
    pub method: HttpMethod,
    pub requests: u64,
    pub responses: u64,
    /// Counted from encrypted record flights, not read from messages.
    pub estimated: bool,
    /// `exact`, `estimate`, or `low` (flights on HTTP/2, where they are not requests).
    pub confidence: &'static str,
    /// A gap or unparseable bytes: the counts are a lower bound.
    pub lost_sync: bool,
    /// `Connection: close` was sent by either side (HTTP/1).
    pub connection_close: bool,
    /// An `Upgrade` was requested (`h2c`, `websocket`, …).
    pub upgrade: Option<String>,
    /// The host the first request named (HTTP/1's `Host`, HTTP/2's
    /// `:authority`), as sent, at most 259 characters; null when no
    /// request was read (TLS without keys) or none named one (a request
    /// to a forward proxy, `GET http://a.test/`, names none here).
    pub host: Option<String>,
    /// HTTP/2 streams reset, and whether a GOAWAY was sent.
    pub resets: u64,
    pub goaway: bool,
    /// Final responses by status, over every request (not only the
    /// listed ones): `{"200": 97, "429": 3}`.
    pub status_codes: BTreeMap<u16, u64>,
    /// What the responses said of rate limiting and how the client
    /// answered, over every request; null unless a response was a 429 or
    /// carried a `Retry-After`.
    pub rate_limit: Option<RateLimit>,
    /// What bounded new requests on an HTTP/2 connection whose frames
    /// were read (h2c, or TLS opened with `--keylog`): the server's stream
    /// limit against the client's streams, and the first GOAWAY; null
    /// otherwise. (Boxed: a record waiting to be written in order is 8
    /// bytes larger, not 100.)
    pub http2: Option<Box<Http2Limits>>,
    /// The first requests (at most `--max-requests-listed`).
    pub list: Vec<HttpRequest>,
    /// More requests than the list holds.
    pub list_truncated: bool,
}

/// Rate limiting on one connection: what its responses said (`429 Too
/// Many Requests`, `Retry-After`) and what its client did next there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RateLimit {
    /// Final responses with status 429.
    pub responses_429: u64,
    /// Responses carrying a `Retry-After` (of any status), by its seconds:
    /// `{"1": 8}` (at most 64 distinct values).
    pub retry_after: BTreeMap<u32, u64>,
    /// Requests the client started on this connection while a
    /// `Retry-After` given on it had not yet elapsed.
    pub requests_in_window: u64,
    /// For each request that came first after one or more 429s on this
    /// connection: seconds since the latest of them.
    pub wait_after_429: Distribution,
    /// The last response on the connection was a 429 and no request
    /// followed it (the connection was given up, or the capture ended).
    pub ended_on_429: bool,
}

/// The server's limit on concurrent streams and the client's streams
/// against it, and the first GOAWAY, on one HTTP/2 connection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Http2Limits {
    /// The server's latest SETTINGS_MAX_CONCURRENT_STREAMS; null when it
    /// sent none (no limit).
    pub max_concurrent_streams: Option<u32>,
    /// Most client streams open at once (from its HEADERS to the server's
    /// END_STREAM or a RST_STREAM).
    pub peak_streams: u32,
    /// Times the client's open streams reached the limit, and the seconds
    /// they stayed at it in all.
    pub at_limit: u32,
    pub at_limit_seconds: f64,
    /// When they were at it: the first 16 spans, the last stretched over
    /// any later ones.
    pub at_limit_spans: Vec<(Instant, Instant)>,
    /// The first GOAWAY; null when none was sent.
    pub goaway: Option<GoAway>,
    /// Client streams the server refused unprocessed: reset with
    /// REFUSED_STREAM before a response, or above the last stream id of a
    /// GOAWAY it sent (RFC 9113 §8.7: safe to send again). Counted in
    /// `requests`, not served.
    pub refused: u32,
}

/// An HTTP/2 GOAWAY: no new stream starts on the connection after it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoAway {
    pub from: super::Side,
    pub at: Instant,
    /// The highest stream id its sender says it processed.
    pub last_stream: u32,
    /// Its error code, and the code's name (RFC 9113 §7; `unknown` past them).
    pub error_code: u32,
    pub error: &'static str,
}
