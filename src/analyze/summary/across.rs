//! Rate limiting across connections: a `Retry-After` given on one
//! connection asks the client to wait before its next request to that
//! server, on any connection. A client that opens a new connection per
//! request (Java's HttpURLConnection without keep-alive, python's
//! `requests.get`) or keeps several pooled connections sending retries on
//! another one, where the per-connection figures (`http.rate_limit`) cannot
//! see it. This module puts the requests, the 429s and the connections
//! opened of every connection to one server (client address, server
//! address and port, overlay) back in time order and counts what the
//! client did while a window ran, and how long it waited after a 429 on
//! any connection.
//!
//! Records finish in an order that is not time order, so each finished
//! connection's marks wait in a bounded heap until no connection still
//! open can add an earlier one: the horizon is the first packet of the
//! oldest connection still open (the gatherer knows it). A heap over its
//! bound is swept early; a mark that then comes behind the sweep is
//! counted in `out_of_order` and taken as it comes.
//!
//! The same sweep gives [`super::pool`] each connection's idle times and
//! its first request's setup, in time order, to count the connections
//! opened while another to their server sat idle; [`super::multiplex`]
//! the openings and closes of HTTP/2 connections, to count those opened
//! beside one; and [`super::resume`] the ClientHellos of full TLS
//! handshakes and when each handshake completed, to count those that
//! could have resumed.
//!
//! Does not read packets or HTTP: the marks come from the connection
//! records' request lists and the times the HTTP analyzers kept of the
//! requests past them (up to 4,096 a connection; the rest are counted in
//! `requests_not_seen`). QUIC's table keeps an [`Across`] of its own, fed
//! its records' listed HTTP/3 requests.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

pub use super::marks::Marks;
use super::marks::{Counter, Kind, Mark, Sites};
use super::multiplex::Multiplex;
use super::pool::Pool;
use super::resume::Resume;
use crate::analyze::http::NO_RETRY_AFTER;
use crate::analyze::stats::Samples;
use crate::record::{AcrossConnections, BesideHttp2, NotResumed, OpenedWhileIdle, Redialed};

/// Marks held at once waiting for the horizon (32 bytes each: 2 MiB).
const MAX_PENDING: usize = 1 << 16;
/// Servers whose window or unanswered 429 is followed at once; a server
/// past these is not followed (its marks are counted in `out_of_order`).
const MAX_SERVERS: usize = 1 << 16;

/// A mark waiting for the horizon. Marks at one instant of one rank are
/// taken in order of their connection (those of one connection are
/// alike in effect whatever their order): the same order in every run.
#[derive(Debug)]
struct Pending {
    mark: Mark,
    server: u64,
    conn: u64,
}

impl Pending {
    fn cmp_key(&self, other: &Pending) -> Ordering {
        self.mark
            .at
            .cmp(&other.mark.at)
            .then(self.mark.kind.rank().cmp(&other.mark.kind.rank()))
            .then(self.conn.cmp(&other.conn))
    }
}

impl PartialEq for Pending {
    fn eq(&self, other: &Pending) -> bool {
        self.cmp_key(other) == Ordering::Equal
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Pending) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Pending) -> Ordering {
        self.cmp_key(other)
    }
}

/// One server's window and unanswered 429, as of the sweep.
#[derive(Debug, Default)]
struct Server {
    /// The Retry-After windows given by the server so far, joined where
    /// they overlap: the latest runs from `from` until `until`, extended
    /// last by a response on connection `by`.
    from: i64,
    until: Option<i64>,
    by: u64,
    /// The end of the latest 429 no request has followed yet, and its connection.
    unfollowed: Option<(i64, u64)>,
}

impl Server {
    fn in_window(&self, at: i64) -> bool {
        self.until
            .is_some_and(|until| self.from <= at && at < until)
    }

    /// Nothing the server said still bears on what comes at `at` or later.
    fn spent(&self, at: i64) -> bool {
        self.unfollowed.is_none() && self.until.is_none_or(|until| until <= at)
    }
}

/// The capture's marks, swept in time order.
#[derive(Debug, Default)]
pub struct Across {
    /// At most [`MAX_PENDING`]: the earliest is taken to make room.
    pending: BinaryHeap<Reverse<Pending>>,
    /// The time of the latest mark swept.
    swept: i64,
    servers: HashMap<u64, Server>,
    in_window: u64,
    in_window_elsewhere: u64,
    opened_in_window: u64,
    waits: Samples,
    retried_elsewhere: u64,
    not_seen: u64,
    out_of_order: u64,
    /// Any connection told of rate limiting.
    told: bool,
    /// Servers not followed for want of room.
    refused: u64,
    /// The idle connections each server had.
    pool: Pool,
    /// The HTTP/2 connections open to each server.
    multiplex: Multiplex,
    /// The server of each pool.
    sites: Sites,
    /// The full TLS handshakes each server saw.
    resume: Resume,
}

impl Across {
    /// A finished connection's marks; then sweeps those before `horizon`,
    /// the first packet of the oldest connection still open (nanoseconds
    /// into the capture; `i64::MAX` when none is).
    pub fn add(&mut self, marks: &mut Marks, horizon: i64) {
        self.not_seen += marks.not_listed;
        let opened = Mark {
            at: marks.opened,
            kind: Kind::Opened,
        };
        if marks.h2.is_some()
            || marks.tls.0.is_some()
            || marks
                .marks
                .iter()
                .any(|m| matches!(m.kind, Kind::Setup { .. }))
        {
            self.sites.add(marks);
        }
        let (h2_opened, h2_closed) = match marks.h2.take() {
            Some((kind, closed)) => (
                Some(Mark {
                    at: marks.opened,
                    kind,
                }),
                closed.map(|at| Mark {
                    at,
                    kind: Kind::H2Closed,
                }),
            ),
            None => (None, None),
        };
        let h2 = h2_opened.into_iter().chain(h2_closed);
        let (full_hello, tls_done) = std::mem::take(&mut marks.tls);
        let tls = full_hello.into_iter().chain(tls_done);
        let (unused, closed) = std::mem::take(&mut marks.pool_ends);
        let pool = unused.into_iter().chain(closed);
        let all = std::iter::once(opened).chain(h2).chain(tls).chain(pool);
        for mark in all.chain(marks.marks.drain(..)) {
            self.told |= matches!(mark.kind, Kind::Ended { .. });
            let p = Pending {
                mark,
                server: match mark.kind.counter() {
                    Counter::RateLimit => marks.server,
                    _ => marks.pool,
                },
                conn: marks.conn,
            };
            if mark.at < self.swept {
                *match mark.kind.counter() {
                    Counter::RateLimit => &mut self.out_of_order,
                    Counter::Pool => &mut self.pool.out_of_order,
                    Counter::Multiplex => &mut self.multiplex.out_of_order,
                    Counter::Resume => &mut self.resume.out_of_order,
                } += 1;
                self.apply(&p);
                continue;
            }
            if self.pending.len() >= MAX_PENDING {
                self.take_first();
            }
            self.pending.push(Reverse(p));
        }
        self.sweep(horizon);
    }

    /// Takes the marks before `horizon`, in time order.
    fn sweep(&mut self, horizon: i64) {
        while self
            .pending
            .peek()
            .is_some_and(|Reverse(first)| first.mark.at < horizon)
        {
            self.take_first();
        }
    }

    /// Takes the earliest mark waiting.
    fn take_first(&mut self) {
        if let Some(Reverse(p)) = self.pending.pop() {
            self.swept = self.swept.max(p.mark.at);
            self.apply(&p);
        }
    }

    fn apply(&mut self, p: &Pending) {
        let at = p.mark.at;
        match p.mark.kind {
            Kind::Idle { micros, used_again } => {
                return self.pool.idle(p.server, p.conn, at, micros, used_again)
            }
            Kind::Closed => return self.pool.closed(p.server, p.conn, at),
            Kind::Unused => return self.pool.unused(p.server, p.conn, at),
            Kind::Setup { micros } => {
                let site = self.sites.of(p.server);
                let while_idle = self.pool.setup(p.server, site, p.conn, at, micros);
                return self.multiplex.first_request(p.conn, while_idle);
            }
            Kind::H2 {
                ready,
                streams,
                how,
            } => {
                let site = self.sites.of(p.server);
                let ready = (ready, streams);
                return self
                    .multiplex
                    .opened((p.server, site), p.conn, at, ready, how);
            }
            Kind::H2Closed => return self.multiplex.closed(p.conn),
            Kind::H2GoAway => return self.multiplex.goaway(p.conn),
            Kind::H2Full { micros, streams } => {
                return self.multiplex.full(p.conn, at, micros, streams)
            }
            Kind::TlsDone { sealed } => return self.resume.done(p.server, p.conn, at, sealed),
            Kind::FullHello { micros, offered } => {
                let server = (p.server, self.sites.of(p.server));
                return self.resume.full(server, p.conn, at, micros, offered);
            }
            _ => {}
        }
        if let Kind::Ended {
            too_many,
            retry_after,
        } = p.mark.kind
        {
            if self.servers.len() >= MAX_SERVERS && !self.servers.contains_key(&p.server) {
                // Servers whose windows ran out with no mark of theirs
                // since stay until here: dropped, one pass per 1,024
                // refused (never a pass per mark).
                if self.refused % 1024 == 0 {
                    let now = self.swept;
                    self.servers.retain(|_, s| !s.spent(now));
                }
                if self.servers.len() >= MAX_SERVERS {
                    self.refused += 1;
                    self.out_of_order += 1;
                    return;
                }
            }
            let server = self.servers.entry(p.server).or_default();
            if too_many && server.unfollowed.is_none_or(|(u, _)| u <= at) {
                server.unfollowed = Some((at, p.conn));
            }
            if retry_after != NO_RETRY_AFTER {
                let end = at.saturating_add(i64::from(retry_after) * 1_000_000_000);
                match server.until {
                    Some(until) if at < until => server.until = Some(until.max(end)),
                    _ => {
                        server.from = at;
                        server.until = Some(end);
                    }
                }
                server.by = p.conn;
            }
            return;
        }
        let Some(server) = self.servers.get_mut(&p.server) else {
            return;
        };
        let window = server.in_window(at);
        match p.mark.kind {
            Kind::Opened => self.opened_in_window += u64::from(window),
            _ => {
                if window {
                    self.in_window += 1;
                    self.in_window_elsewhere += u64::from(server.by != p.conn);
                }
                if let Some((after, conn)) = server.unfollowed.filter(|&(t, _)| t <= at) {
                    self.waits.push((at - after) as f64 / 1e9);
                    self.retried_elsewhere += u64::from(conn != p.conn);
                    server.unfollowed = None;
                }
            }
        }
        if server.spent(at) {
            self.servers.remove(&p.server);
        }
    }

    /// Sweeps every mark still waiting: no connection is open any more.
    pub fn sweep_all(&mut self) {
        self.sweep(i64::MAX);
    }

    /// The SYNs of the connections counted as opened while another sat
    /// idle, and beside an HTTP/2 connection, and the ClientHellos of the
    /// full TLS handshakes counted as not resumed, since the last call.
    pub fn take_counted(&mut self) -> [std::vec::Drain<'_, i64>; 3] {
        [
            self.pool.syns.drain(..),
            self.multiplex.syns.drain(..),
            self.resume.hellos.drain(..),
        ]
    }

    /// Everything swept.
    pub fn finish(mut self) -> Swept {
        self.sweep_all();
        let (opened_while_idle, redialed, opened_by_site) = std::mem::take(&mut self.pool).finish();
        let (beside_http2, beside_by_site) = std::mem::take(&mut self.multiplex).finish();
        let (not_resumed, not_resumed_by_site) = std::mem::take(&mut self.resume).finish();
        let across = self.told.then(|| AcrossConnections {
            requests_in_window: self.in_window,
            requests_in_window_elsewhere: self.in_window_elsewhere,
            connections_opened_in_window: self.opened_in_window,
            wait_after_429: self.waits.distribution(),
            retried_elsewhere: self.retried_elsewhere,
            requests_not_seen: self.not_seen,
            out_of_order: self.out_of_order,
        });
        Swept {
            across,
            opened_while_idle,
            redialed,
            opened_by_site,
            beside_http2,
            beside_by_site,
            not_resumed,
            not_resumed_by_site,
        }
    }
}

/// What the sweep found.
#[derive(Debug)]
pub struct Swept {
    /// The figures across connections; `None` when no connection was told
    /// of rate limiting.
    pub across: Option<AcrossConnections>,
    /// The connections opened while another sat idle; `None` when no
    /// first request was seen…
    pub opened_while_idle: Option<OpenedWhileIdle>,
    /// The connections opened after the client closed another it could
    /// have kept; `None` likewise.
    pub redialed: Option<Redialed>,
    /// …and the count opened while another sat idle by server
    /// (`ServerId::key`).
    pub opened_by_site: HashMap<u64, u64>,
    /// The connections opened beside an HTTP/2 connection; `None` when
    /// none that offered HTTP/2 was seen from its SYN.
    pub beside_http2: Option<BesideHttp2>,
    /// …and their count by server.
    pub beside_by_site: HashMap<u64, u64>,
    /// The full TLS handshakes a client could have spared by resuming;
    /// `None` when none was seen.
    pub not_resumed: Option<NotResumed>,
    /// …and their counts (not offered, refused) by server.
    pub not_resumed_by_site: HashMap<u64, (u64, u64)>,
}

#[cfg(test)]
mod tests;
