//! What bounds new requests on one HTTP/2 connection: the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §6.5.2) against the client's
//! streams open at once, and the first GOAWAY (§6.8), after which no new
//! stream starts on it. A client that opens another connection while its
//! HTTP/2 connection is at the server's limit, or going away, needed it;
//! the summary's `beside_http2` reads these facts not to count it.
//!
//! Owns decoding SETTINGS and GOAWAY payloads (given whole, at most
//! [`MAX_PAYLOAD`] bytes, by [`super::H2`]) and the spans at the limit;
//! does not read frames off the wire nor count requests.

use crate::record::{Http2Limits, Instant, Side};
use crate::time::Timestamp;

/// Most payload bytes taken of a SETTINGS frame (170 settings; a larger
/// one is skipped, its settings unread).
pub const MAX_PAYLOAD: usize = 1024;
/// The GOAWAY bytes read: the last stream id and the error code (the
/// debug data after them is skipped).
pub const GOAWAY_READ: usize = 8;
/// Spans at the limit kept a connection; past these the last one is
/// stretched to the end of the next (it may then cover time below the
/// limit: the sweep then takes the connection as full a little longer).
pub const MAX_SPANS: usize = 16;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// The first GOAWAY: who sent it, when, the last stream it says was
/// processed and its error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoAway {
    pub from: Side,
    pub at: Timestamp,
    pub last_stream: u32,
    pub error: u32,
}

/// The limit and GOAWAY facts of one connection.
#[derive(Debug, Default)]
pub struct Limit {
    /// The server's latest SETTINGS_MAX_CONCURRENT_STREAMS (`None`: none
    /// sent, unlimited).
    max: Option<u32>,
    /// Client streams open now, and most at once.
    open: u32,
    peak: u32,
    /// Times at the limit (spans begun, counting those stretched).
    times: u32,
    /// The spans at the limit (the last one open while `since` is set).
    spans: Vec<(Timestamp, Timestamp)>,
    since: Option<Timestamp>,
    goaway: Option<GoAway>,
    /// Client streams the server refused unprocessed.
    pub refused: u32,
    /// Any SETTINGS or GOAWAY payload, or stream, was seen: the frames were read.
    seen: bool,
}

impl Limit {
    /// A frame said something of streams, settings or GOAWAY.
    pub fn seen(&self) -> bool {
        self.seen
    }

    /// The client's streams open changed to `open` at `ts`.
    pub fn streams(&mut self, open: usize, ts: Timestamp) {
        self.open = u32::try_from(open).unwrap_or(u32::MAX);
        self.peak = self.peak.max(self.open);
        self.seen = true;
        self.check(ts);
    }

    /// A SETTINGS frame's payload from `side` at `ts` (not an ACK: those
    /// are empty). Only the server's limit bounds the client's streams.
    pub fn settings(&mut self, side: Side, payload: &[u8], ts: Timestamp) {
        self.seen = true;
        if side != Side::Server || payload.len() % 6 != 0 {
            return;
        }
        for entry in payload.chunks_exact(6) {
            if let [a, b, v0, v1, v2, v3] = *entry {
                if u16::from_be_bytes([a, b]) == MAX_CONCURRENT_STREAMS {
                    self.max = Some(u32::from_be_bytes([v0, v1, v2, v3]));
                }
            }
        }
        self.check(ts);
    }

    /// A GOAWAY's first [`GOAWAY_READ`] payload bytes from `side` at `ts`;
    /// the last stream id it says was processed (`None`: too short to read).
    pub fn goaway(&mut self, side: Side, payload: &[u8], ts: Timestamp) -> Option<u32> {
        self.seen = true;
        let [l0, l1, l2, l3, e0, e1, e2, e3] = *payload else {
            return None;
        };
        let last_stream = u32::from_be_bytes([l0, l1, l2, l3]) & 0x7fff_ffff;
        self.goaway.get_or_insert(GoAway {
            from: side,
            at: ts,
            last_stream,
            error: u32::from_be_bytes([e0, e1, e2, e3]),
        });
        Some(last_stream)
    }

    /// Starts or ends a span at the limit as the streams open now stand.
    fn check(&mut self, ts: Timestamp) {
        let full = self.max.is_some_and(|max| self.open >= max);
        match (full, self.since) {
            (true, None) => {
                self.since = Some(ts);
                self.times = self.times.saturating_add(1);
            }
            (false, Some(from)) => {
                self.since = None;
                self.close_span(from, ts);
            }
            _ => {}
        }
    }

    fn close_span(&mut self, from: Timestamp, to: Timestamp) {
        let full = self.spans.len() >= MAX_SPANS;
        match self.spans.last_mut() {
            Some(last) if full => last.1 = to,
            _ => self.spans.push((from, to)),
        }
    }

    /// The record's `http2` section, times made with `at`, the connection
    /// ending at `end` (a span still open ends there); `None` when no
    /// frame said anything of streams, settings or GOAWAY.
    pub fn into_record(
        mut self,
        end: Timestamp,
        at: &dyn Fn(Timestamp) -> Instant,
    ) -> Option<Http2Limits> {
        if !self.seen() {
            return None;
        }
        if let Some(from) = self.since.take() {
            self.close_span(from, end.max(from));
        }
        // (A fold from +0.0: an empty `sum` of floats is −0.0.)
        let seconds = self
            .spans
            .iter()
            .fold(0.0, |s, (a, b)| s + b.secs_since(*a));
        Some(Http2Limits {
            max_concurrent_streams: self.max,
            peak_streams: self.peak,
            at_limit: self.times,
            at_limit_seconds: seconds,
            at_limit_spans: self.spans.iter().map(|&(a, b)| (at(a), at(b))).collect(),
            goaway: self.goaway.map(|g| crate::record::GoAway {
                from: g.from,
                at: at(g.at),
                last_stream: g.last_stream,
                error_code: g.error,
                error: error_name(g.error),
            }),
            refused: self.refused,
        })
    }
}

/// The name of an HTTP/2 error code (RFC 9113 §7), or `"unknown"`.
pub fn error_name(code: u32) -> &'static str {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn at(ts: Timestamp) -> Instant {
        Instant {
            ts: ts.0 as f64 / 1e9,
            at: ts.0 as f64 / 1e9,
        }
    }

    /// A limit of 2: the client reaches it twice; the second span is
    /// still open at the end.
    #[test]
    fn spans_at_the_servers_limit() {
        let mut l = Limit::default();
        l.streams(1, Timestamp(0));
        l.settings(
            Side::Server,
            &[0, 4, 0, 1, 0, 0, 0, 3, 0, 0, 0, 2],
            Timestamp(MS),
        );
        l.streams(2, Timestamp(2 * MS));
        l.streams(3, Timestamp(3 * MS));
        l.streams(1, Timestamp(5 * MS));
        l.streams(2, Timestamp(9 * MS));
        let r = l.into_record(Timestamp(10 * MS), &at).expect("seen");
        assert_eq!(r.max_concurrent_streams, Some(2));
        assert_eq!((r.peak_streams, r.at_limit), (3, 2));
        assert!((r.at_limit_seconds - 0.004).abs() < 1e-12);
        assert_eq!(r.at_limit_spans.len(), 2);
        assert_eq!(r.goaway, None);
    }

    /// The client's own SETTINGS say nothing of its streams; a limit
    /// raised ends a span; a payload not of whole settings is unread.
    #[test]
    fn only_the_servers_whole_settings() {
        let mut l = Limit::default();
        l.settings(Side::Client, &[0, 3, 0, 0, 0, 1], Timestamp(0));
        l.streams(1, Timestamp(MS));
        assert_eq!(l.since, None);
        l.settings(Side::Server, &[0, 3, 0, 0, 0, 1, 0], Timestamp(MS));
        assert_eq!(l.max, None);
        l.settings(Side::Server, &[0, 3, 0, 0, 0, 1], Timestamp(2 * MS));
        assert_eq!(l.since, Some(Timestamp(2 * MS)));
        l.settings(Side::Server, &[0, 3, 0, 0, 0, 100], Timestamp(4 * MS));
        let r = l.into_record(Timestamp(5 * MS), &at).expect("seen");
        assert_eq!((r.max_concurrent_streams, r.at_limit), (Some(100), 1));
        assert!((r.at_limit_seconds - 0.002).abs() < 1e-12);
    }

    /// Past [`MAX_SPANS`], the last span stretches; the times go on.
    #[test]
    fn spans_bounded() {
        let mut l = Limit::default();
        l.settings(Side::Server, &[0, 3, 0, 0, 0, 1], Timestamp(0));
        for i in 0..100 {
            l.streams(1, Timestamp(i * 10 * MS));
            l.streams(0, Timestamp((i * 10 + 1) * MS));
        }
        let r = l.into_record(Timestamp(2_000 * MS), &at).expect("seen");
        assert_eq!((r.at_limit, r.at_limit_spans.len()), (100, MAX_SPANS));
        let last = r.at_limit_spans.last().expect("spans");
        assert!((last.1.at - 0.991).abs() < 1e-12);
    }

    /// The first GOAWAY is kept, its stream id without the reserved bit;
    /// one too short is not read.
    #[test]
    fn first_goaway() {
        let mut l = Limit::default();
        l.goaway(Side::Server, &[0, 0, 0], Timestamp(0));
        l.goaway(Side::Server, &[0x80, 0, 0, 7, 0, 0, 0, 0xb], Timestamp(MS));
        l.goaway(Side::Client, &[0, 0, 0, 9, 0, 0, 0, 0], Timestamp(2 * MS));
        let r = l.into_record(Timestamp(3 * MS), &at).expect("seen");
        let g = r.goaway.expect("goaway");
        assert_eq!((g.from, g.last_stream, g.error_code), (Side::Server, 7, 11));
        assert_eq!(g.error, "ENHANCE_YOUR_CALM");
        assert_eq!(error_name(0x1234), "unknown");
        assert!((g.at.at - 0.001).abs() < 1e-12);
    }

    #[test]
    fn nothing_seen_is_none() {
        assert_eq!(Limit::default().into_record(Timestamp(0), &at), None);
    }
}
