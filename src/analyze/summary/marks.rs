//! What one connection did, as the sweep across connections reads it off
//! the connection's record: marks in time (nanoseconds into the capture),
//! each told to the rate-limit windows ([`super::across`]), to the idle
//! connections each server had ([`super::pool`]), to the HTTP/2
//! connections open to it ([`super::multiplex`]) or to the TLS handshakes
//! it completed ([`super::resume`]).
//!
//! Owns turning a record into marks; does not order them (the sweep in
//! `across` does) nor count anything.

use std::collections::HashMap;

use smallvec::SmallVec;

use crate::analyze::http::limits::TOO_MANY_REQUESTS;
use crate::analyze::http::NO_RETRY_AFTER;
use crate::record::{
    CloseKind, ConnectionRecord, DecryptionOutcome, HttpMethod, HttpRequest, QuicHttp, QuicRecord,
    Side, TlsOutcome,
};

/// One thing a connection did, at `at` nanoseconds into the capture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Mark {
    pub(super) at: i64,
    pub(super) kind: Kind,
}

/// At one instant, a response's end comes first (the window and the wait
/// run from it, as on one connection), then a connection becoming idle,
/// then a connection's opening, then a first request's check for idle
/// connections, then a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    /// A response with a status ended: a 429, or one with a Retry-After
    /// of so many seconds ([`NO_RETRY_AFTER`]: none; not an `Option`, so
    /// that a mark is 16 bytes).
    Ended {
        too_many: bool,
        retry_after: u32,
    },
    /// The connection had no request outstanding from here for so many
    /// microseconds ([`UNTIL_THE_END`]: until the capture's end): the
    /// end of a response with no other waiting, to the next request or
    /// the close.
    /// `used_again`: a request of its own ended it (not its close nor the
    /// capture's end).
    Idle {
        micros: u32,
        used_again: bool,
    },
    Opened,
    /// A TLS handshake completed: from here the client may hold a session
    /// with the connection's server to resume; `sealed`: whether the server
    /// issued one is unknown (a full TLS 1.3 handshake read without keys,
    /// its tickets sealed).
    TlsDone {
        sealed: bool,
    },
    /// A full TLS handshake's ClientHello, the handshake taking so many
    /// microseconds to complete; `offered`: the ClientHello offered a
    /// session to resume (the server refused it).
    FullHello {
        micros: u32,
        offered: bool,
    },
    /// An HTTP/2 connection's first FIN or RST (its last packet, one
    /// dropped from the table): from here it carries no new request.
    H2Closed,
    /// An HTTP/2 connection's first GOAWAY: from here it starts no new
    /// stream, though it stays open until [`Kind::H2Closed`].
    H2GoAway,
    /// An HTTP/2 connection's client streams reached the server's limit
    /// of `streams` (saturated at `u16::MAX`) and stayed at it so many
    /// microseconds: the client could start no request on it meanwhile.
    H2Full {
        micros: u32,
        streams: u16,
    },
    /// The opening of a connection that offered or spoke HTTP/2 ([`H2How`]),
    /// its handshake complete so many microseconds after
    /// ([`UNTIL_THE_END`]: never), its server allowing it so many streams
    /// at once (saturated at `u16::MAX`, as when it set no limit).
    H2 {
        ready: u32,
        streams: u16,
        how: H2How,
    },
    /// The connection's first request, so many microseconds after its SYN.
    Setup {
        micros: u32,
    },
    /// The client closed the connection (its first FIN or RST) with no
    /// request outstanding, its handshakes complete and no `Connection:
    /// close` asked: one it could have kept.
    Closed,
    /// The SYN of a connection that carried no request (one that did is
    /// looked at by its [`Kind::Setup`]).
    Unused,
    Request,
}

/// How a connection took part in HTTP/2, in a byte (four `bool`s would
/// make a [`Mark`] 24 bytes, not 16): `offered`, with a SYN seen, so that
/// its opening is known; `speaks` it; `requested`: it has a
/// [`Kind::Setup`] to come; `sealed`: it speaks HTTP/2 but its frames
/// were not read (TLS without keys), so its stream limit and GOAWAY are
/// unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct H2How(u8);

impl H2How {
    pub(super) const fn new(offered: bool, speaks: bool, requested: bool) -> H2How {
        H2How(offered as u8 | (speaks as u8) << 1 | (requested as u8) << 2)
    }

    /// The same, its frames not read.
    pub(super) fn sealed(self) -> H2How {
        H2How(self.0 | 8)
    }

    /// (`offered`, `speaks`, `requested`).
    pub(super) fn parts(self) -> (bool, bool, bool) {
        (self.0 & 1 != 0, self.0 & 2 != 0, self.0 & 4 != 0)
    }

    /// Whether its frames were not read.
    pub(super) fn is_sealed(self) -> bool {
        self.0 & 8 != 0
    }
}

/// An idle time that lasted as long as the capture.
pub(super) const UNTIL_THE_END: u32 = u32::MAX;

impl Kind {
    pub(super) fn rank(self) -> u8 {
        match self {
            Kind::Ended { .. } => 0,
            Kind::Idle { .. }
            | Kind::Closed
            | Kind::H2Closed
            | Kind::H2GoAway
            | Kind::H2Full { .. }
            | Kind::TlsDone { .. } => 1,
            Kind::Opened | Kind::H2 { .. } => 2,
            Kind::FullHello { .. } | Kind::Setup { .. } | Kind::Unused => 3,
            Kind::Request => 4,
        }
    }

    /// What counts the mark: the rate limiting across connections, keyed
    /// by the server, or [`super::pool`], [`super::multiplex`] or
    /// [`super::resume`], keyed by the pool's.
    pub(super) fn counter(self) -> Counter {
        match self {
            Kind::Ended { .. } | Kind::Opened | Kind::Request => Counter::RateLimit,
            Kind::Idle { .. } | Kind::Setup { .. } | Kind::Closed | Kind::Unused => Counter::Pool,
            Kind::H2 { .. } | Kind::H2Closed | Kind::H2GoAway | Kind::H2Full { .. } => {
                Counter::Multiplex
            }
            Kind::TlsDone { .. } | Kind::FullHello { .. } => Counter::Resume,
        }
    }
}

/// What counts a [`Kind`] of mark (and its marks taken out of time order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Counter {
    RateLimit,
    Pool,
    Multiplex,
    Resume,
}

/// What one connection did, as the summary reads it off its record.
/// Kept in the connection's tally, not boxed: with `--threads` it is made
/// on a shard and dropped on the thread that writes, and an allocation
/// for every connection freed on another thread held memory there (about
/// 10 MiB at 300 000 short connections, 50 000 a second, on two threads).
#[derive(Debug, Default)]
pub struct Marks {
    /// The server as a hash of client address, server address and port,
    /// and overlay.
    pub(super) server: u64,
    /// The server as `summary.servers` has it (address and port, SNI,
    /// overlay: `ServerId::key`), whatever the client…
    pub(super) site: u64,
    /// …and as a pool keys it: the client address too ([`Marks::server`]
    /// and [`Marks::site`] together; a client pools by host name).
    pub(super) pool: u64,
    /// The connection: the position of its first packet, its `id` once
    /// the gatherer numbered it ([`Marks::numbered`]).
    pub(super) conn: u64,
    /// Its first packet.
    pub(super) opened: i64,
    /// Its requests and the ends of its responses that spoke of rate
    /// limiting, its first request's setup and its idle times: the first
    /// four inline, so that a connection of one request (its setup, the
    /// request, its 429 and the idle time before the close) allocates
    /// nothing on the shard that the writing thread would free.
    pub(super) marks: SmallVec<[Mark; 4]>,
    /// Requests the record does not list.
    pub(super) not_listed: u64,
    /// Its HTTP/2 opening and close (not in `marks`, whose four inline
    /// a connection of one request fills): `None` for one that neither
    /// offered nor spoke HTTP/2.
    /// (What bounded its new requests, its spans at the server's stream
    /// limit and its first GOAWAY, are in `marks`: only a connection whose
    /// HTTP/2 frames were read has them.)
    pub(super) h2: Option<(Kind, Option<i64>)>,
    /// Its TLS handshake's: a full one's ClientHello ([`Kind::FullHello`])
    /// and its completion ([`Kind::TlsDone`]; likewise outside `marks`).
    pub(super) tls: (Option<Mark>, Option<Mark>),
    /// Its SYN where it carried no request ([`Kind::Unused`]) and its
    /// close by the client, where it could have kept it
    /// ([`Kind::Closed`]; likewise outside `marks`).
    pub(super) pool_ends: (Option<Mark>, Option<Mark>),
}

impl Marks {
    /// The marks of `rec`: its opening, and for HTTP read from messages
    /// (not estimated from TLS records) its listed requests and the ends
    /// of their 429s and of responses with a Retry-After, then `past`,
    /// those of the requests past the list (seconds into the capture;
    /// a response's: whether a 429, and its Retry-After or
    /// [`NO_RETRY_AFTER`]), with `unmarked` more not kept; and for the
    /// pool, its first request's setup and its idle times ([`Marks::at_site`]
    /// names their server).
    pub fn of(rec: &ConnectionRecord, past: &[(f64, Option<(bool, u32)>)], unmarked: u64) -> Marks {
        let read = matches!(
            rec.http.method,
            HttpMethod::Http1 | HttpMethod::H2c | HttpMethod::TlsHttp1 | HttpMethod::TlsH2
        );
        let mut marks = Marks::opened(rec.server_key(), rec.id, rec.start.at);
        if read {
            marks.requests(&rec.http.list, past, unmarked);
        }
        let unused = (rec.http.requests == 0).then_some(rec.tcp.handshake.syn);
        let unused = unused.flatten().map(|syn| Mark {
            at: nanos(syn.at),
            kind: Kind::Unused,
        });
        let closed = kept_closed(rec).map(|at| Mark {
            at: nanos(at),
            kind: Kind::Closed,
        });
        marks.pool_ends = (unused, closed);
        marks.idle(rec);
        marks.h2 = h2(rec, &marks.marks);
        if marks.h2.is_some() {
            marks.marks.extend(h2_bounds(rec));
        }
        marks.tls = tls(rec);
        marks
    }

    /// The marks of a QUIC connection: its opening, and with the key log
    /// its listed HTTP/3 requests and their responses' ends (those past
    /// the list are counted in `requests_not_seen`).
    pub fn of_quic(q: &QuicRecord) -> Marks {
        let mut marks = Marks::opened(q.server_key(), q.id, q.start.at);
        let opened = |h: &&QuicHttp| {
            matches!(
                h.decryption,
                DecryptionOutcome::Complete | DecryptionOutcome::Partial
            )
        };
        if let Some(http) = q.http.as_ref().filter(opened) {
            let past = http.requests.saturating_sub(http.list.len() as u64);
            marks.requests(&http.list, &[], past);
        }
        marks
    }

    fn opened(server: u64, conn: u64, at: f64) -> Marks {
        Marks {
            server,
            pool: server,
            site: 0,
            conn,
            opened: nanos(at),
            marks: SmallVec::new(),
            not_listed: 0,
            h2: None,
            tls: (None, None),
            pool_ends: (None, None),
        }
    }

    /// The marks of a connection to `site` (`ServerId::key`).
    pub fn at_site(self, site: u64) -> Marks {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (self.server, site).hash(&mut h);
        Marks {
            site,
            pool: h.finish(),
            ..self
        }
    }

    /// The connection's number (`id`) once the gatherer gave it one:
    /// the shard made the marks under the position of its first packet.
    pub fn numbered(&mut self, id: u64) {
        self.conn = id;
    }

    /// The first request's setup (SYN → its first byte) and the times the
    /// connection had no request outstanding: from the end of a response
    /// with no other waiting to the next request, and from the latest
    /// response to the first FIN or RST (to the last packet of a
    /// connection dropped from the table; to the capture's end, one still
    /// open). Requests read and estimated alike count. A request left
    /// unanswered keeps the connection busy to its end; past a truncated
    /// list only the last idle time is known (from `close.idle`); requests
    /// sent after the close are not the connection's.
    fn idle(&mut self, rec: &ConnectionRecord) {
        let list = &rec.http.list;
        let Some(first) = list.first() else {
            return;
        };
        let close = match rec.close.kind {
            CloseKind::Fin | CloseKind::Rst => rec.close.time.map(|t| t.at),
            CloseKind::Idle | CloseKind::Evicted => Some(rec.end.at),
            CloseKind::Open => None,
        };
        let syn = rec.tcp.handshake.syn;
        if let Some(micros) = syn.and_then(|syn| micros(syn.at, first.start.at, true)) {
            self.push(first.start.at, Kind::Setup { micros });
        }
        let mut busy_until: Option<f64> = None;
        for r in list {
            if close.is_some_and(|c| r.start.at > c) {
                break;
            }
            if let Some(end) = busy_until.filter(|&end| end < r.start.at) {
                self.idle_span(end, r.start.at, true);
            }
            let Some(last) = r.response_last else {
                return;
            };
            busy_until = Some(busy_until.map_or(last.at, |b| b.max(last.at)));
        }
        let last = if rec.http.list_truncated {
            close.zip(rec.close.idle).map(|(c, idle)| c - idle)
        } else {
            busy_until
        };
        match (last, close) {
            (Some(from), Some(to)) if from < to => self.idle_span(from, to, false),
            (Some(from), None) => self.push(
                from,
                Kind::Idle {
                    micros: UNTIL_THE_END,
                    used_again: false,
                },
            ),
            _ => {}
        }
    }

    /// No request outstanding from `from` to `to` (seconds into the
    /// capture; a time past 71 minutes told as 71), then a request of the
    /// connection's (`used_again`) or its close.
    fn idle_span(&mut self, from: f64, to: f64, used_again: bool) {
        let micros = micros(from, to, false).unwrap_or(UNTIL_THE_END - 1);
        self.push(from, Kind::Idle { micros, used_again });
    }

    fn push(&mut self, at: f64, kind: Kind) {
        self.marks.push(Mark {
            at: nanos(at),
            kind,
        });
    }

    /// The requests of `list`, then `past`, and `unmarked` more.
    fn requests(
        &mut self,
        list: &[HttpRequest],
        past: &[(f64, Option<(bool, u32)>)],
        unmarked: u64,
    ) {
        for r in list {
            self.push(r.start.at, Kind::Request);
            let too_many = r.status == Some(TOO_MANY_REQUESTS);
            if let (true, Some(end)) = (too_many || r.retry_after.is_some(), r.response_last) {
                let retry_after = r.retry_after.unwrap_or(NO_RETRY_AFTER);
                self.push(
                    end.at,
                    Kind::Ended {
                        too_many,
                        retry_after,
                    },
                );
            }
        }
        self.marks.extend(past.iter().map(|&(at, end)| Mark {
            at: nanos(at),
            kind: end.map_or(Kind::Request, |(too_many, retry_after)| Kind::Ended {
                too_many,
                retry_after,
            }),
        }));
        self.not_listed = unmarked;
    }
}

/// When the client closed `rec` though it could have kept it: its first
/// FIN or RST was the client's, its TCP and TLS handshakes complete, no
/// request outstanding (every listed one answered before the close, and
/// none sent after it), and neither side asked for the close with
/// `Connection: close` (HTTP/1 read from messages; over TLS without keys
/// it is not seen).
fn kept_closed(rec: &ConnectionRecord) -> Option<f64> {
    let c = &rec.close;
    let by_client = matches!(c.kind, CloseKind::Fin | CloseKind::Rst) && c.by == Some(Side::Client);
    let at = c.time.map(|t| t.at).filter(|_| by_client)?;
    let up = rec.tcp.handshake.connect.is_some()
        && rec.tls.as_ref().is_none_or(|t| t.handshake.is_some());
    // None sent after the close (`requests_after`), so each listed one
    // began before it.
    let answered = (rec.http.list.iter()).all(|r| r.response_last.is_some_and(|l| l.at <= at));
    // Past a truncated list, the last response's end is the close's idle.
    let answered = answered && (!rec.http.list_truncated || c.idle.is_some());
    let asked = rec.http.connection_close;
    (up && answered && c.requests_after == 0 && !asked).then_some(at)
}

/// Pools whose server is known, to count them by server (those past it
/// count in the whole only).
const MAX_SITES: usize = 1 << 16;

/// The server (`ServerId::key`) of each pool ([`Marks::pool`]), for the
/// counts by server: at most [`MAX_SITES`], the first seen.
#[derive(Debug, Default)]
pub(super) struct Sites(HashMap<u64, u64>);

impl Sites {
    /// The connections of `marks`' pool go to its server.
    pub(super) fn add(&mut self, marks: &Marks) {
        if self.0.len() < MAX_SITES || self.0.contains_key(&marks.pool) {
            self.0.insert(marks.pool, marks.site);
        }
    }

    /// The server of `pool`, where known.
    pub(super) fn of(&self, pool: u64) -> Option<u64> {
        self.0.get(&pool).copied()
    }
}

/// The HTTP/2 marks of `rec` (whose other marks are `marks`): its
/// opening, as [`Kind::H2`], and its first FIN or RST (its last packet,
/// where it was dropped from the table or went idle; none while open).
fn h2(rec: &ConnectionRecord, marks: &[Mark]) -> Option<(Kind, Option<i64>)> {
    let tls = rec.tls.as_ref();
    let speaks = matches!(rec.http.method, HttpMethod::H2c | HttpMethod::TlsH2)
        || tls.is_some_and(|t| {
            let chosen = t.alpn.as_ref().or(t.alpn_by_size.as_ref());
            chosen.is_some_and(|a| a == "h2")
        });
    let syn = rec.tcp.handshake.syn;
    let offered =
        syn.is_some() && (speaks || tls.is_some_and(|t| t.alpn_offered.iter().any(|a| a == "h2")));
    if !speaks && !offered {
        return None;
    }
    // Up: the TLS handshake's end, else (cleartext) the TCP handshake's;
    // a connection first seen after its SYN was up already.
    let up = match (tls, syn) {
        (Some(t), _) => t.complete.map(|c| c.at),
        (None, Some(_)) => rec.tcp.handshake.ack.map(|a| a.at),
        (None, None) => Some(rec.start.at),
    };
    let ready = up
        .and_then(|up| micros(rec.start.at, up, true))
        .unwrap_or(UNTIL_THE_END);
    let closed = match rec.close.kind {
        CloseKind::Fin | CloseKind::Rst => rec.close.time.map(|t| nanos(t.at)),
        CloseKind::Idle | CloseKind::Evicted => Some(nanos(rec.end.at)),
        CloseKind::Open => None,
    };
    let requested = marks.iter().any(|m| matches!(m.kind, Kind::Setup { .. }));
    let how = H2How::new(offered, speaks, requested);
    let kind = Kind::H2 {
        ready,
        streams: stream_limit(rec),
        how: match speaks && rec.http.http2.is_none() {
            true => how.sealed(),
            false => how,
        },
    };
    Some((kind, closed.filter(|_| speaks)))
}

/// The spans `rec`'s client streams were at its server's limit, and its
/// first GOAWAY, where its HTTP/2 frames were read.
fn h2_bounds(rec: &ConnectionRecord) -> impl Iterator<Item = Mark> + '_ {
    let h2 = rec.http.http2.as_ref();
    let streams = stream_limit(rec);
    let spans = h2.into_iter().flat_map(|h| &h.at_limit_spans);
    let full = spans.map(move |(from, to)| Mark {
        at: nanos(from.at),
        kind: Kind::H2Full {
            micros: micros(from.at, to.at, true).unwrap_or(UNTIL_THE_END - 1),
            streams,
        },
    });
    let goaway = h2.and_then(|h| h.goaway.as_ref()).map(|g| Mark {
        at: nanos(g.at.at),
        kind: Kind::H2GoAway,
    });
    full.chain(goaway)
}

/// The streams `rec`'s server allowed at once, saturated at `u16::MAX`
/// (no limit, or its frames not read).
fn stream_limit(rec: &ConnectionRecord) -> u16 {
    let h2 = rec.http.http2.as_ref();
    let streams = h2
        .and_then(|h| h.max_concurrent_streams)
        .unwrap_or(u32::MAX);
    u16::try_from(streams).unwrap_or(u16::MAX)
}

/// The TLS marks of `rec`: a full handshake's ClientHello, and when its
/// handshake (full or resumed) completed — where it left the client a
/// session to resume: not a full one whose server is known to have given
/// none (`tls.session_issued`; a resumed one shows the client held one,
/// which a TLS 1.2 ticket may stay, though no new one came), and whether
/// it is unknown that it gave one.
fn tls(rec: &ConnectionRecord) -> (Option<Mark>, Option<Mark>) {
    let Some(t) = rec.tls.as_ref() else {
        return (None, None);
    };
    let complete = t.complete.filter(|_| t.outcome == TlsOutcome::Complete);
    let full = match (t.client_hello, complete) {
        (Some(hello), Some(done)) if !t.resumed => Some(Mark {
            at: nanos(hello.at),
            kind: Kind::FullHello {
                micros: micros(hello.at, done.at, false).unwrap_or(UNTIL_THE_END - 1),
                offered: t.resumption_offered.is_some(),
            },
        }),
        _ => None,
    };
    let gave = complete.filter(|_| t.resumed || t.session_issued != Some(false));
    let done = gave.map(|c| Mark {
        at: nanos(c.at),
        kind: Kind::TlsDone {
            sealed: !t.resumed && t.session_issued.is_none(),
        },
    });
    (full, done)
}

/// The time from `from` to `to` (seconds into the capture) as whole
/// microseconds below [`UNTIL_THE_END`], counted from the nanoseconds the
/// marks are in: rounded down (an idle time told shorter, never longer)
/// or, `up`, rounded up (a setup told longer, so that an idle time must
/// have begun before the SYN).
fn micros(from: f64, to: f64, up: bool) -> Option<u32> {
    let ns = nanos(to) - nanos(from);
    let us = if up {
        (ns + 999).div_euclid(1_000)
    } else {
        ns.div_euclid(1_000)
    };
    u32::try_from(us).ok().filter(|&us| us < UNTIL_THE_END)
}

/// Seconds into the capture as nanoseconds: a record's offsets are
/// nanoseconds made seconds, exact to the nanosecond for 104 days.
pub fn nanos(secs: f64) -> i64 {
    (secs * 1e9).round() as i64
}
