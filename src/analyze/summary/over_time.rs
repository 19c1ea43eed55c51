//! The summary's time series (`summary.over_time`): each finished
//! connection's moments — its first packet, its SYN, its ClientHello, its
//! requests, its 429s, its first FIN or RST; a QUIC connection's first
//! packet and its HTTP/3 requests and 429s — counted in the interval of
//! the capture they fall in.
//!
//! Bounded and exact whatever order connections finish in: intervals are
//! counted at one width from the first packet, and when the moments span
//! more than [`MAX_INTERVALS`] (without `--interval`, [`AUTO_KEPT`]) the
//! width is multiplied and neighbouring counts added up. The width reached
//! depends only on the earliest and latest moment, so `--threads` gives
//! the same series as one thread.
//! Without `--interval` the series starts at a millisecond and is widened
//! along a ladder of round widths to at most [`AUTO_INTERVALS`].
//!
//! Does not see packets, nor TCP connections' records: only what their
//! tallies carry (a QUIC connection's record is read whole).

use std::collections::VecDeque;
use std::time::Duration;

use smallvec::SmallVec;

use super::marks::nanos;
use crate::analyze::stats::NanoSum;
use crate::record::{ConnectionRecord, HttpRequest, Interval, OverTime, QuicRecord, TlsOutcome};

/// Intervals kept at most, at any width.
pub const MAX_INTERVALS: usize = 10_000;
/// Intervals kept at most without `--interval`, before they are widened to
/// [`AUTO_INTERVALS`] at the end (96 KiB: the series is in every run).
pub const AUTO_KEPT: usize = 1024;
/// Intervals left without `--interval`: a line of a terminal.
pub const AUTO_INTERVALS: usize = 60;

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;
/// The widths chosen without `--interval`, each a multiple of the one
/// before (so that counts add up), in nanoseconds; past the last, doubled.
const LADDER: [u64; 17] = [
    MS,
    5 * MS,
    10 * MS,
    50 * MS,
    100 * MS,
    500 * MS,
    S,
    5 * S,
    10 * S,
    30 * S,
    60 * S,
    300 * S,
    600 * S,
    1800 * S,
    3600 * S,
    6 * 3600 * S,
    24 * 3600 * S,
];

/// The widths a series without `--interval` ends at, narrowest first.
const ROUND: [u64; 34] = [
    MS,
    2 * MS,
    5 * MS,
    10 * MS,
    20 * MS,
    50 * MS,
    100 * MS,
    200 * MS,
    250 * MS,
    500 * MS,
    S,
    2 * S,
    5 * S,
    10 * S,
    15 * S,
    30 * S,
    60 * S,
    120 * S,
    300 * S,
    600 * S,
    900 * S,
    1800 * S,
    3600 * S,
    2 * 3600 * S,
    3 * 3600 * S,
    6 * 3600 * S,
    12 * 3600 * S,
    24 * 3600 * S,
    2 * 24 * 3600 * S,
    7 * 24 * 3600 * S,
    14 * 24 * 3600 * S,
    28 * 24 * 3600 * S,
    91 * 24 * 3600 * S,
    364 * 24 * 3600 * S,
];

/// How a connection's TLS handshake ended, for the interval of its ClientHello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tls {
    Full,
    Resumed,
    Failed,
    Unfinished,
}

/// A connection's moments, in nanoseconds into the capture: what the
/// series reads of its record. Requests inline up to two, so that a short
/// connection's tally allocates nothing for it.
#[derive(Debug, Default)]
pub struct Moments {
    opened: i64,
    /// The SYN of a complete TCP handshake, and SYN → first request.
    syn: Option<(i64, Option<f64>)>,
    hello: Option<(i64, Tls)>,
    closed: Option<i64>,
    requests: SmallVec<[i64; 2]>,
    too_many: SmallVec<[i64; 1]>,
    /// Requests counted whose start was not kept.
    untimed: u64,
}

impl Moments {
    /// The moments of `rec`, with `past` the starts (seconds into the
    /// capture) of its requests past the list and the ends of their
    /// responses that were a 429 or carried a Retry-After (`Some((429?, _))`).
    pub fn of(rec: &ConnectionRecord, past: &[(f64, Option<(bool, u32)>)]) -> Moments {
        let hs = &rec.tcp.handshake;
        let http = &rec.http;
        let syn = hs.syn.filter(|_| hs.complete).map(|syn| {
            let first = http.list.first().map(|r| r.start.at - syn.at);
            (nanos(syn.at), first)
        });
        let hello = rec.tls.as_ref().map(|tls| {
            let kind = match (tls.outcome, tls.resumed) {
                (TlsOutcome::Complete, false) => Tls::Full,
                (TlsOutcome::Complete, true) => Tls::Resumed,
                (TlsOutcome::Failed, _) => Tls::Failed,
                _ => Tls::Unfinished,
            };
            // Where the ClientHello was not captured, at the first packet.
            let at = tls.client_hello.map_or(rec.start.at, |h| h.at);
            (nanos(at), kind)
        });
        // Those sent after the connection's close were never served, nor
        // those the server refused.
        let close = rec.close.time.map_or(f64::INFINITY, |t| t.at);
        let served = |at: f64| at <= close;
        let mut requests: SmallVec<[i64; 2]> = http
            .list
            .iter()
            .filter(|r| served(r.start.at) && !r.refused)
            .map(|r| nanos(r.start.at))
            .collect();
        let mut too_many: SmallVec<[i64; 1]> = too_many_ends(&http.list).collect();
        for &(at, end) in past {
            match end {
                None if served(at) => requests.push(nanos(at)),
                None => {}
                Some((true, _)) => too_many.push(nanos(at)),
                Some((false, _)) => {}
            }
        }
        Moments {
            opened: nanos(rec.start.at),
            syn,
            hello,
            closed: rec.close.time.map(|t| nanos(t.at)),
            untimed: rec.requests_served().saturating_sub(requests.len() as u64),
            requests,
            too_many,
        }
    }
}

/// When each listed response 429 ended (its last byte, or its first where
/// that is all), in nanoseconds into the capture: TCP's and HTTP/3's alike.
fn too_many_ends(list: &[HttpRequest]) -> impl Iterator<Item = i64> + '_ {
    list.iter()
        .filter(|r| r.status == Some(crate::analyze::http::limits::TOO_MANY_REQUESTS))
        .filter_map(|r| r.response_last.or(r.response_first).map(|t| nanos(t.at)))
}

/// One interval's counts.
#[derive(Clone, Debug, Default)]
struct Bucket {
    connections: u64,
    tcp_handshakes: u64,
    tls_full: u64,
    tls_resumed: u64,
    tls_failed: u64,
    requests: u64,
    responses_429: u64,
    closed: u64,
    opened_while_idle: u64,
    beside_http2: u64,
    not_resumed: u64,
    setup: NanoSum,
    quic: u64,
    quic_full: u64,
    quic_resumed: u64,
    http3_requests: u64,
    http3_429: u64,
}

impl Bucket {
    fn merge(&mut self, o: &Bucket) {
        self.connections += o.connections;
        self.tcp_handshakes += o.tcp_handshakes;
        self.tls_full += o.tls_full;
        self.tls_resumed += o.tls_resumed;
        self.tls_failed += o.tls_failed;
        self.requests += o.requests;
        self.responses_429 += o.responses_429;
        self.closed += o.closed;
        self.opened_while_idle += o.opened_while_idle;
        self.beside_http2 += o.beside_http2;
        self.not_resumed += o.not_resumed;
        self.setup.merge(&o.setup);
        self.quic += o.quic;
        self.quic_full += o.quic_full;
        self.quic_resumed += o.quic_resumed;
        self.http3_requests += o.http3_requests;
        self.http3_429 += o.http3_429;
    }
}

/// The series being built.
#[derive(Debug)]
pub struct Series {
    /// `--interval`, in nanoseconds.
    asked: Option<u64>,
    /// The width counted at now, in nanoseconds.
    width: u64,
    /// The interval of `buckets[0]` (from the first packet, in widths).
    lo: i64,
    buckets: VecDeque<Bucket>,
    untimed: u64,
}

impl Default for Series {
    fn default() -> Series {
        Series::new(None)
    }
}

impl Series {
    /// A series of `interval`s, or of a width chosen to fit (`None`).
    pub fn new(interval: Option<Duration>) -> Series {
        let asked = interval.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1));
        Series {
            asked,
            width: asked.unwrap_or(MS),
            lo: 0,
            buckets: VecDeque::new(),
            untimed: 0,
        }
    }

    /// The width after `width`: the ladder's next; or `--interval`'s
    /// 2, 10, 20, 100, 200, … times (each a multiple of the one before,
    /// and as round as the width asked).
    fn wider(&self) -> u64 {
        match self.asked {
            Some(asked) => {
                let times = self.width / asked.max(1);
                let decade = times
                    .checked_ilog10()
                    .is_some_and(|k| 10u64.pow(k) == times);
                self.width.saturating_mul(if decade { 2 } else { 5 })
            }
            None => LADDER
                .iter()
                .copied()
                .find(|&w| w > self.width)
                .unwrap_or(self.width.saturating_mul(2)),
        }
    }

    /// Widens the intervals once, adding neighbours' counts together.
    fn widen(&mut self) {
        // Each step is a multiple of the one before.
        let factor = (self.wider() / self.width.max(1)).max(2);
        self.widen_by(factor);
    }

    /// Makes the intervals `factor` times as wide.
    fn widen_by(&mut self, factor: u64) {
        let factor = i64::try_from(factor.max(1)).unwrap_or(i64::MAX);
        let lo = self.lo.div_euclid(factor);
        let mut merged: VecDeque<Bucket> = VecDeque::new();
        for (i, b) in (self.lo..).zip(self.buckets.drain(..)) {
            let at = usize::try_from(i.div_euclid(factor) - lo).unwrap_or(0);
            if merged.len() <= at {
                merged.resize(at + 1, Bucket::default());
            }
            if let Some(m) = merged.get_mut(at) {
                m.merge(&b);
            }
        }
        self.buckets = merged;
        self.lo = lo;
        self.width = self.width.saturating_mul(factor as u64);
    }

    /// Widens to the narrowest round width (a multiple of the width now)
    /// that leaves at most [`AUTO_INTERVALS`].
    fn fit(&mut self) {
        let n = self.buckets.len() as u64;
        if n <= AUTO_INTERVALS as u64 {
            return;
        }
        let (w, lo) = (self.width, self.lo);
        // Whether `factor` times the width leaves few enough intervals.
        let fits = |factor: u64| {
            let (Ok(factor), Ok(n)) = (i64::try_from(factor), i64::try_from(n)) else {
                return false;
            };
            let last = lo + n - 1;
            last.div_euclid(factor) - lo.div_euclid(factor) < AUTO_INTERVALS as i64
        };
        let round = ROUND.iter().map(|&r| r / w.max(1));
        let factor = ROUND
            .iter()
            .zip(round)
            .find(|&(&r, f)| r >= w && r % w.max(1) == 0 && fits(f))
            .map(|(_, f)| f);
        match factor {
            Some(f) => self.widen_by(f),
            None => {
                while self.buckets.len() > AUTO_INTERVALS {
                    self.widen();
                }
            }
        }
    }

    /// Counts in the interval of `at` nanoseconds into the capture, made
    /// if need be (widening to keep at most [`MAX_INTERVALS`], or
    /// [`AUTO_KEPT`]).
    fn count(&mut self, at: i64, f: impl FnOnce(&mut Bucket)) {
        let i = loop {
            let i = at.div_euclid(i64::try_from(self.width).unwrap_or(i64::MAX));
            let (lo, hi) = match self.buckets.len() {
                0 => (i.min(0), i.max(0)),
                n => (self.lo.min(i), (self.lo + n as i64 - 1).max(i)),
            };
            let kept = if self.asked.is_some() {
                MAX_INTERVALS
            } else {
                AUTO_KEPT
            };
            if i128::from(hi) - i128::from(lo) < kept as i128 {
                if self.buckets.is_empty() {
                    self.lo = lo;
                }
                break i;
            }
            self.widen();
        };
        while self.lo > i {
            self.buckets.push_front(Bucket::default());
            self.lo -= 1;
        }
        let k = usize::try_from(i - self.lo).unwrap_or(0);
        if self.buckets.len() <= k {
            self.buckets.resize(k + 1, Bucket::default());
        }
        if let Some(b) = self.buckets.get_mut(k) {
            f(b);
        }
    }

    /// Counts one connection's moments.
    pub fn add(&mut self, m: &Moments) {
        self.count(m.opened, |b| b.connections += 1);
        if let Some((syn, setup)) = m.syn {
            self.count(syn, |b| {
                b.tcp_handshakes += 1;
                b.setup.add(setup);
            });
        }
        if let Some((at, tls)) = m.hello {
            self.count(at, |b| match tls {
                Tls::Full => b.tls_full += 1,
                Tls::Resumed => b.tls_resumed += 1,
                Tls::Failed => b.tls_failed += 1,
                Tls::Unfinished => {}
            });
        }
        for &at in &m.requests {
            self.count(at, |b| b.requests += 1);
        }
        for &at in &m.too_many {
            self.count(at, |b| b.responses_429 += 1);
        }
        if let Some(at) = m.closed {
            self.count(at, |b| b.closed += 1);
        }
        self.untimed += m.untimed;
    }

    /// Counts a QUIC connection: at its first packet (the client's first
    /// Initial), by how its handshake went, and its listed HTTP/3 requests
    /// and their 429s.
    pub fn add_quic(&mut self, q: &QuicRecord) {
        self.count(nanos(q.start.at), |b| {
            b.quic += 1;
            match q.tls.resumed {
                Some(true) => b.quic_resumed += 1,
                Some(false) => b.quic_full += 1,
                None => {}
            }
        });
        let list = q.http.as_ref().map_or(&[][..], |h| &h.list[..]);
        for r in list {
            self.count(nanos(r.start.at), |b| b.http3_requests += 1);
        }
        for end in too_many_ends(list) {
            self.count(end, |b| b.http3_429 += 1);
        }
    }

    /// A connection whose SYN came `syn` nanoseconds into the capture
    /// was opened while another to its server sat idle.
    pub fn opened_while_idle(&mut self, syn: i64) {
        self.count(syn, |b| b.opened_while_idle += 1);
    }

    /// A connection whose SYN came `syn` nanoseconds into the capture
    /// was opened beside an HTTP/2 connection to its server.
    pub fn beside_http2(&mut self, syn: i64) {
        self.count(syn, |b| b.beside_http2 += 1);
    }

    /// A full TLS handshake whose ClientHello came `hello` nanoseconds
    /// into the capture could have resumed (`summary.not_resumed`).
    pub fn not_resumed(&mut self, hello: i64) {
        self.count(hello, |b| b.not_resumed += 1);
    }

    /// The series from the first packet to `last` seconds into the
    /// capture, and without `--interval` widened to fit [`AUTO_INTERVALS`].
    pub fn finish(mut self, last: Option<f64>) -> OverTime {
        if let Some(last) = last {
            self.count(nanos(last.max(0.0)), |_| {});
        }
        if self.asked.is_none() {
            self.fit();
        }
        let width = self.width;
        let mut open = 0u64;
        let intervals = (self.lo..)
            .zip(&self.buckets)
            .map(|(i, b)| {
                open = (open + b.connections).saturating_sub(b.closed);
                Interval {
                    // From whole nanoseconds, so that 3 × 100 ms is 0.3.
                    start: (i128::from(i) * i128::from(width)) as f64 / 1e9,
                    connections: b.connections,
                    tcp_handshakes: b.tcp_handshakes,
                    tls_full: b.tls_full,
                    tls_resumed: b.tls_resumed,
                    tls_failed: b.tls_failed,
                    requests: b.requests,
                    responses_429: b.responses_429,
                    closed: b.closed,
                    opened_while_idle: b.opened_while_idle,
                    beside_http2: b.beside_http2,
                    tls_not_resumed: b.not_resumed,
                    quic_connections: b.quic,
                    quic_full: b.quic_full,
                    quic_resumed: b.quic_resumed,
                    http3_requests: b.http3_requests,
                    http3_responses_429: b.http3_429,
                    open,
                    setup_mean: b.setup.totals().mean,
                }
            })
            .collect();
        OverTime {
            interval: width as f64 / 1e9,
            interval_chosen: match self.asked {
                None => "auto",
                Some(w) if w == self.width => "asked",
                Some(_) => "widened",
            },
            requests_untimed: self.untimed,
            intervals,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(opened: i64, requests: &[i64]) -> Moments {
        Moments {
            opened,
            syn: Some((opened, Some(0.001))),
            hello: Some((opened + 1, Tls::Full)),
            closed: Some(opened + 10),
            requests: requests.iter().copied().collect(),
            ..Moments::default()
        }
    }

    #[test]
    fn counts_land_in_their_interval_at_the_width_asked() {
        let mut s = Series::new(Some(Duration::from_secs(1)));
        s.add(&moments(0, &[5, 1_500_000_000]));
        s.add(&moments(2_100_000_000, &[2_200_000_000]));
        let o = s.finish(Some(3.5));
        assert_eq!(o.interval, 1.0);
        assert_eq!(o.interval_chosen, "asked");
        let reqs: Vec<u64> = o.intervals.iter().map(|i| i.requests).collect();
        assert_eq!(reqs, [1, 1, 1, 0]);
        let conns: Vec<u64> = o.intervals.iter().map(|i| i.connections).collect();
        assert_eq!(conns, [1, 0, 1, 0]);
        let open: Vec<u64> = o.intervals.iter().map(|i| i.open).collect();
        assert_eq!(open, [0, 0, 0, 0]);
        assert_eq!(o.intervals.first().and_then(|i| i.setup_mean), Some(0.001));
        assert_eq!(o.intervals.get(1).and_then(|i| i.setup_mean), None);
    }

    #[test]
    fn the_series_is_the_same_whatever_order_connections_finish_in() {
        let conns: Vec<Moments> = (0..500)
            .map(|i| moments(i * 37_000_000, &[i * 37_000_000 + 9, i * 91_000_000]))
            .collect();
        let mut a = Series::new(None);
        conns.iter().for_each(|m| a.add(m));
        let mut b = Series::new(None);
        conns.iter().rev().for_each(|m| b.add(m));
        let (a, b) = (a.finish(Some(50.0)), b.finish(Some(50.0)));
        assert_eq!(a, b);
        assert!(a.intervals.len() <= AUTO_INTERVALS, "{}", a.intervals.len());
        assert_eq!(a.interval, 1.0);
        let total: u64 = a.intervals.iter().map(|i| i.requests).sum();
        assert_eq!(total, 1000);
    }

    #[test]
    fn a_long_capture_widens_the_interval_asked_and_stays_bounded() {
        let mut s = Series::new(Some(Duration::from_millis(1)));
        s.add(&moments(0, &[]));
        s.add(&moments(3_600 * 1_000_000_000, &[]));
        s.add(&moments(i64::MAX / 2, &[]));
        let o = s.finish(None);
        assert_eq!(o.interval_chosen, "widened");
        // 1 ms × 10^k or 2 × 10^k: as round as the width asked.
        let times = (o.interval * 1e3).round() as u64;
        let ones = times / 10u64.pow(times.ilog10());
        assert!(ones == 1 || ones == 2, "{}", o.interval);
        assert!(o.intervals.len() <= MAX_INTERVALS);
        assert_eq!(o.intervals.iter().map(|i| i.connections).sum::<u64>(), 3);
    }

    #[test]
    fn moments_before_the_first_packet_get_intervals_of_their_own() {
        let mut s = Series::new(Some(Duration::from_secs(1)));
        s.add(&moments(-1_500_000_000, &[]));
        let o = s.finish(Some(0.5));
        let starts: Vec<f64> = o.intervals.iter().map(|i| i.start).collect();
        assert_eq!(starts, [-2.0, -1.0, 0.0]);
        assert_eq!(o.intervals.first().map(|i| i.connections), Some(1));
    }
}
