//! The record types of what a client did that it did not need to: the
//! connections it opened while another to the same server sat idle or
//! while an HTTP/2 connection to it was open, and the full TLS
//! handshakes it could have spared by resuming. Parts of [`Summary`].
//!
//! Computes nothing: `analyze::summary` fills them.

use serde::Serialize;

use super::{Distribution, Summary};

/// Connections opened while another to the same server sat idle: the
/// pool did not reuse it (`summary.opened_while_idle`). A server is a
/// client address with a server address and port, overlay and SNI. A
/// connection counts when another had no request outstanding from before
/// its SYN until past its first request.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpenedWhileIdle {
    /// Connections opened while another sat idle…
    pub connections: u64,
    /// …of the connections whose SYN and first request were seen.
    pub checked: u64,
    /// Their setup times (SYN → first request), seconds: in total, and…
    pub setup_total: f64,
    /// …one by one: what reusing the idle connection would have saved.
    pub setup: Distribution,
    /// How long the connection idle longest had been idle at their SYN.
    pub idle: Distribution,
    /// Of them, those whose idle connection carried no request after that
    /// idle time (it closed, or the capture ended): a connection a client
    /// did not give back, rather than one its pool took again later.
    pub idle_never_used_again: u64,
    /// Marks taken out of time order (more than 65,536 waiting at once
    /// behind a connection open since long before): the count may be
    /// short.
    pub out_of_order: u64,
    /// The first 1,024 counted, in the order of their first requests.
    pub first: Vec<PassedOver>,
}

impl Summary {
    /// The connections listed as opened while another to their server sat
    /// idle (`opened_while_idle.first`; none when it is null).
    pub fn passed_over(&self) -> &[PassedOver] {
        self.opened_while_idle
            .as_ref()
            .map_or(&[][..], |o| &o.first[..])
    }
}

/// A connection opened while another sat idle, by their `id`s.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PassedOver {
    pub connection: u64,
    /// The connection to the same server idle longest at its SYN…
    pub idle_connection: u64,
    /// …and for how long, seconds.
    pub idle: f64,
    /// Its setup time (SYN → first request byte), seconds.
    pub setup: f64,
    /// The idle connection carried a request after that idle time.
    pub idle_connection_used_again: bool,
}

/// Connections opened after the client itself closed another to the same
/// server (as for [`OpenedWhileIdle`]) that it could have kept
/// (`summary.redialed`): the client sent the first FIN or RST, with no
/// request outstanding, its handshakes complete, no `Connection: close`
/// asked by either side, and at most [`REDIAL_WINDOW`] seconds before
/// their SYN — a pool that keeps too few idle connections (Go's
/// `MaxIdleConnsPerHost`, 2 by default), or one per call (python's
/// `requests.get`, a curl process a request). A close spares one
/// connection: each is taken by one at most. Those counted in
/// `opened_while_idle` are not counted again.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Redialed {
    /// Connections opened so…
    pub connections: u64,
    /// …of the connections whose SYN was seen (and whose first request,
    /// where they carried one, was seen).
    pub checked: u64,
    /// Of them, those that carried no request: dialed, closed or left,
    /// never used (Go dials for a request that finds no idle connection
    /// while it waits for one to come back).
    pub carried_none: u64,
    /// From the latest such close to their SYN, seconds.
    pub after_close: Distribution,
    /// Marks taken out of time order, and closes past 262,144 within the
    /// window at once: the count may be short.
    pub out_of_order: u64,
    /// The first 1,024 counted, in the order they were looked at (a
    /// connection at its first request, one that carried none at its SYN).
    pub first: Vec<Redial>,
}

/// How long after a close a new connection counts in [`Redialed`],
/// seconds: within the idle timeout of common servers (Apache httpd's and
/// Node.js's 5 s; nginx's 75 s), so that the closed one would still have
/// been open.
pub const REDIAL_WINDOW: f64 = 5.0;

/// A connection opened after the client closed another, by their `id`s.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Redial {
    pub connection: u64,
    /// The connection the client closed latest before its SYN…
    pub closed_connection: u64,
    /// …and how long before it, seconds.
    pub after_close: f64,
    /// It carried no request.
    pub carried_none: bool,
}

/// Connections opened while an HTTP/2 connection to the same server (as
/// for [`OpenedWhileIdle`]) was open or opening (`summary.beside_http2`):
/// HTTP/2 carries every request to a server on one connection, so each
/// paid a TCP and a TLS handshake a client that waited for it, or sent on
/// it, would not have. Those counted in `opened_while_idle` are not
/// counted again.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BesideHttp2 {
    /// Connections opened while another to their server that spoke
    /// HTTP/2 was open (its SYN earlier, no FIN or RST yet)…
    pub connections: u64,
    /// …of the connections that offered HTTP/2 (ALPN `h2`, or h2c) and
    /// whose SYN was seen.
    pub checked: u64,
    /// Of them, those opened before the HTTP/2 connection's handshake was
    /// complete: a client sending requests at once before its first
    /// connection is up (Java's HttpClient opens one per request until
    /// then), rather than one that passed over a connection that was up.
    pub raced: u64,
    /// Of them, those that carried no request (a client that raced
    /// several open and kept one: OkHttp, Chromium's spare).
    pub carried_none: u64,
    /// Of them, those beside an HTTP/2 connection whose frames were not
    /// read (TLS without `--keylog`): its stream limit and any GOAWAY
    /// unknown, the client may have needed them.
    pub sealed: u64,
    /// Their handshakes (SYN → TLS handshake complete; the TCP handshake
    /// in cleartext), seconds: in total, and one by one — what waiting for
    /// the HTTP/2 connection would have saved.
    pub handshake_total: f64,
    pub handshake: Distribution,
    /// Not counted: connections opened while every HTTP/2 connection to
    /// their server that was up had as many streams open as the server
    /// allowed (SETTINGS_MAX_CONCURRENT_STREAMS, read where the frames
    /// were: h2c, or TLS with `--keylog`) — the client needed them…
    pub at_limit: u64,
    /// …and the lowest of those limits (null when none was)…
    pub stream_limit: Option<u32>,
    /// …and those opened while every HTTP/2 connection to their server
    /// still open had sent or received a GOAWAY (no new stream starts on it).
    pub after_goaway: u64,
    /// Marks taken out of time order, and HTTP/2 connections past the
    /// 262,144 followed at once: the count may be short.
    pub out_of_order: u64,
    /// The first 1,024 counted (those that carried a request when their
    /// first request was, the others at their SYN), by `id`.
    pub first: Vec<BesideOne>,
}

/// A connection opened beside an HTTP/2 connection, by their `id`s.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BesideOne {
    pub connection: u64,
    /// The HTTP/2 connection to the same server: one whose handshake was
    /// complete at its SYN if any was, else the earliest opened.
    pub http2_connection: u64,
    /// That connection's handshake was not yet complete at its SYN.
    pub raced: bool,
    /// It carried no request.
    pub carried_none: bool,
    /// The HTTP/2 connection's frames were not read (TLS without keys).
    pub sealed: bool,
    /// Its handshake, seconds; null where it did not complete.
    pub handshake: Option<f64>,
}

impl BesideHttp2 {
    /// How many of `connections` were opened while the HTTP/2 connection
    /// was still in its handshake (`raced`), in words for the verdict and
    /// the table: `all while it was still in its handshake`, `3 while …`,
    /// `while …` (the one); `None` when none was.
    pub fn raced_words(connections: u64, raced: u64) -> Option<String> {
        const WHILE: &str = "while it was still in its handshake";
        match raced {
            0 => None,
            r if r == connections && r == 1 => Some(WHILE.to_owned()),
            r if r == connections => Some(format!("all {WHILE}")),
            r => Some(format!("{r} {WHILE}")),
        }
    }
}

impl Summary {
    /// The connections listed as opened beside an HTTP/2 connection
    /// (`beside_http2.first`; none when it is null).
    pub fn beside_http2(&self) -> &[BesideOne] {
        self.beside_http2.as_ref().map_or(&[][..], |o| &o.first[..])
    }

    /// How connection `id` was counted at its SYN, where it is listed:
    /// opened while another sat idle, or beside an HTTP/2 connection
    /// (never both).
    pub fn opened_beside(&self, id: u64) -> Option<OpenedBeside<'_>> {
        let idle = self.passed_over().iter().find(|p| p.connection == id);
        idle.map(OpenedBeside::Idle).or_else(|| {
            let h2 = self.beside_http2().iter().find(|b| b.connection == id);
            h2.map(OpenedBeside::Http2)
        })
    }
}

/// A connection the summary counted at its SYN ([`Summary::opened_beside`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OpenedBeside<'a> {
    Idle(&'a PassedOver),
    Http2(&'a BesideOne),
}

/// Full TLS handshakes a client could have spared by resuming
/// (`summary.not_resumed`): a server is as for [`OpenedWhileIdle`]. Over
/// the full handshakes that completed and whose ClientHello was seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NotResumed {
    /// Full handshakes looked at…
    pub full: u64,
    /// …of them, those whose ClientHello offered no session to resume
    /// though a handshake with the same server had completed before it,
    /// and their handshakes (ClientHello → complete), seconds in total…
    pub not_offered: u64,
    pub not_offered_handshake_total: f64,
    /// …of them, those whose earlier handshake was a full TLS 1.3 one
    /// read without keys: its tickets sealed, whether the server issued
    /// any is unknown (with `--keylog`, a handshake that gave none is
    /// followed by none counted)…
    pub not_offered_after_sealed: u64,
    /// …of `not_offered`, those whose earlier handshake was a full TLS
    /// 1.3 one read without keys: its tickets sealed, whether the server
    /// issued any is unknown (with `--keylog`, one that issued none is
    /// not followed by any counted)…
    /// …and those whose ClientHello offered a session the server did not
    /// resume, and their handshakes.
    pub refused: u64,
    pub refused_handshake_total: f64,
    /// Full handshakes to servers past the 262,144 followed, and marks
    /// taken out of time order: `not_offered` may be short.
    pub out_of_order: u64,
    /// The first 1,024 of `not_offered`, by `id`.
    pub first: Vec<NotResumedOne>,
}

/// A full TLS handshake that offered no session, by `id`s.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NotResumedOne {
    pub connection: u64,
    /// The connection whose handshake with the same server completed
    /// first, before its ClientHello.
    pub earlier_connection: u64,
    /// Its handshake (ClientHello → complete), seconds.
    pub handshake: Option<f64>,
}
