//! The summary's `rate_limit` (and `quic.rate_limit`): each connection's
//! `http.rate_limit` folded over the capture — 429s, the Retry-After values given, the requests
//! sent while one ran, the waits after a 429, and the connections closed
//! after one.
//!
//! Does not read HTTP (the analyzers made each connection's figures), nor
//! anything but those figures and who closed the connection.

use std::collections::BTreeMap;

use crate::analyze::stats::Samples;
use crate::record::{
    AcrossConnections, CloseKind, ConnectionRecord, RateLimit, RateLimitSummary, Side,
};

/// Distinct Retry-After values counted over the capture; responses with
/// others are in the other figures, not by value.
const MAX_VALUES: usize = 256;

/// What the summary reads of one connection's `http.rate_limit`.
#[derive(Debug)]
pub struct LimitTally {
    responses_429: u64,
    retry_after: Vec<(u32, u64)>,
    in_window: u64,
    /// The waits after a 429, all of them (the record has their distribution).
    waits: Option<Samples>,
    /// It ended on a 429 and then closed, the first FIN or RST from this side.
    closed_after_429_by: Option<Option<Side>>,
}

impl LimitTally {
    /// `None` for a connection whose responses never spoke of rate limiting.
    pub fn of(rec: &ConnectionRecord, waits: Option<Samples>) -> Option<Box<LimitTally>> {
        let r = rec.http.rate_limit.as_ref()?;
        let closed = matches!(rec.close.kind, CloseKind::Fin | CloseKind::Rst);
        Some(LimitTally::new(r, waits, closed.then_some(rec.close.by)))
    }

    /// A connection's `rate_limit`, its waits, and who closed it (`None`:
    /// it did not close; `Some(None)`: not known who).
    pub fn new(
        r: &RateLimit,
        waits: Option<Samples>,
        closed_by: Option<Option<Side>>,
    ) -> Box<LimitTally> {
        Box::new(LimitTally {
            responses_429: r.responses_429,
            retry_after: r.retry_after.iter().map(|(&s, &n)| (s, n)).collect(),
            in_window: r.requests_in_window,
            waits,
            closed_after_429_by: closed_by.filter(|_| r.ended_on_429),
        })
    }
}

/// The capture's rate limiting so far.
#[derive(Debug, Default)]
pub struct RateLimitBuilder {
    connections: u64,
    limited: u64,
    responses_429: u64,
    retry_after: BTreeMap<u32, u64>,
    in_window: u64,
    waits: Samples,
    closed_after_429: BTreeMap<String, u64>,
}

impl RateLimitBuilder {
    pub fn add(&mut self, t: &LimitTally) {
        self.connections += 1;
        self.limited += u64::from(t.responses_429 > 0);
        self.responses_429 += t.responses_429;
        for &(secs, n) in &t.retry_after {
            if let Some(c) = self.retry_after.get_mut(&secs) {
                *c += n;
            } else if self.retry_after.len() < MAX_VALUES {
                self.retry_after.insert(secs, n);
            }
        }
        self.in_window += t.in_window;
        if let Some(w) = &t.waits {
            self.waits.merge(w);
        }
        if let Some(by) = t.closed_after_429_by {
            let who = by.map_or("unknown", Side::as_str);
            *self.closed_after_429.entry(who.to_owned()).or_default() += 1;
        }
    }

    /// `None` when no connection's responses spoke of rate limiting;
    /// with the figures across connections, where they were taken.
    pub fn finish(mut self, across: Option<AcrossConnections>) -> Option<RateLimitSummary> {
        (self.connections > 0).then(|| RateLimitSummary {
            responses_429: self.responses_429,
            connections_limited: self.limited,
            retry_after: self
                .retry_after
                .iter()
                .map(|(s, &n)| (s.to_string(), n))
                .collect(),
            requests_in_window: self.in_window,
            wait_after_429: self.waits.distribution(),
            closed_after_429: self.closed_after_429,
            across_connections: across,
        })
    }
}
