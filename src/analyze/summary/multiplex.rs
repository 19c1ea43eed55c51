//! Connections opened beside an HTTP/2 connection: HTTP/2 carries every
//! request to a server on one connection, so a client that opens another
//! to the same server (client address, server address and port, overlay,
//! SNI) while one that speaks HTTP/2 is open pays a TCP and a TLS
//! handshake it did not need — raced open before the first was up (Java's
//! HttpClient opens a connection per request until its first HTTP/2
//! connection is; OkHttp and Chromium race a few and keep one), or
//! opened beside one that was up. Not one the client needed: opened
//! while every HTTP/2 connection up had as many streams open as the
//! server allowed, or while every one open was going away (a GOAWAY).
//!
//! The sweep in [`super::across`] gives this module, in time order, each
//! HTTP/2 connection's opening and close, and each connection that
//! offered HTTP/2 its opening; one that carried a request waits for its
//! first request's check for idle connections ([`super::pool`]): counted
//! there, it is not counted here again.
//!
//! Does not read records: only the marks [`super::marks`] makes of them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::marks::{H2How, UNTIL_THE_END};
use crate::analyze::stats::Samples;
use crate::record::{BesideHttp2, BesideOne};

/// Connections listed in `first`, the earliest counted (40 bytes each).
const LISTED: usize = 1024;
/// HTTP/2 connections followed at once (about 150 bytes each: 40 MiB),
/// and connections waiting for their first request's check. Each ends by
/// the time the sweep passes its close; only a capture of more open at
/// once leaves some not followed (counted in `out_of_order`).
const MAX_OPEN: usize = 1 << 18;

/// Connections up looked at for one not at its stream limit: past these,
/// a connection is taken as opened at the limit.
const LOOK: usize = 64;

/// One server's open HTTP/2 connections not going away: by (opening,
/// connection), when each was up (`i64::MAX`: never); and by (up,
/// connection); and how many open ones are going away.
#[derive(Debug, Default)]
struct Server {
    opened: BTreeMap<(i64, u64), i64>,
    up: BTreeSet<(i64, u64)>,
    going: u64,
}

/// An open HTTP/2 connection: its server, opening and when it was up, the
/// end of its latest span at the server's stream limit and that limit,
/// whether it is going away, whether its frames were sealed (its limit
/// and GOAWAY unknown), and, until it is up, how many more
/// connections' requests it could take: those opened while it was in its
/// handshake, the client waiting for it (the server's limit less its own
/// first request, less those taken so far; none for one that was itself
/// not needed — found beside another — where the server set a limit:
/// without one, any).
#[derive(Debug)]
struct Open {
    server: u64,
    at: i64,
    up: i64,
    full_until: i64,
    limit: u32,
    going: bool,
    sealed: bool,
    room: u32,
}

/// What a connection was opened beside.
#[derive(Debug, PartialEq)]
enum Beside {
    /// An HTTP/2 connection it could have used.
    One(BesideOne),
    /// Only ones at their stream limit (the lowest), or going away.
    AtLimit(u32),
    AfterGoaway,
}

/// The HTTP/2 connections open to every server, as of the sweep.
#[derive(Debug, Default)]
pub(super) struct Multiplex {
    servers: HashMap<u64, Server>,
    /// Each open HTTP/2 connection.
    open: HashMap<u64, Open>,
    /// Connections found beside one, waiting for their first request's
    /// check for idle connections: each with its SYN and its server.
    waiting: HashMap<u64, Found>,
    /// Connections that offered HTTP/2, seen from their SYN.
    checked: u64,
    counted: u64,
    raced: u64,
    carried_none: u64,
    sealed: u64,
    at_limit: u64,
    stream_limit: Option<u32>,
    after_goaway: u64,
    handshakes: Samples,
    /// Marks taken behind the sweep, and connections past [`MAX_OPEN`].
    pub(super) out_of_order: u64,
    first: Vec<BesideOne>,
    /// The count of each server (`ServerId::key`) whose pool is known.
    by_site: HashMap<u64, u64>,
    /// The SYNs of those counted since the summary last took them (for
    /// the series over time).
    pub(super) syns: Vec<i64>,
}

/// A connection found beside an HTTP/2 connection: its SYN and the
/// server (`ServerId::key`) of its pool, where known.
type Found = (BesideOne, i64, Option<u64>);

impl Multiplex {
    /// Connection `conn` to `server` (of `site`, where known) opened at
    /// `at` (nanoseconds into the capture), up `ready` microseconds later ([`UNTIL_THE_END`]: never);
    /// `offered` HTTP/2 with its SYN seen (looked at), `speaks` it (from
    /// here, one to look beside; `sealed`: its frames not read),
    /// `requested`: its first request will be checked for idle connections.
    pub(super) fn opened(
        &mut self,
        (server, site): (u64, Option<u64>),
        conn: u64,
        at: i64,
        (ready, streams): (u32, u16),
        how: H2How,
    ) {
        let (offered, speaks, requested) = how.parts();
        let mut needed = true;
        if offered {
            self.checked += 1;
            let beside = self.beside(server, at, ready);
            needed = !matches!(beside, Some(Beside::One(_)));
            let found = match beside {
                Some(Beside::One(found)) => Some(found),
                Some(Beside::AtLimit(limit)) => {
                    self.at_limit += 1;
                    if limit < u32::from(u16::MAX) {
                        let lowest = self.stream_limit.map_or(limit, |l| l.min(limit));
                        self.stream_limit = Some(lowest);
                    }
                    None
                }
                Some(Beside::AfterGoaway) => {
                    self.after_goaway += 1;
                    None
                }
                None => None,
            };
            if let Some(found) = found {
                let found = BesideOne {
                    connection: conn,
                    carried_none: !requested,
                    ..found
                };
                if !requested {
                    self.count((found, at, site));
                } else if self.waiting.len() < MAX_OPEN {
                    self.waiting.insert(conn, (found, at, site));
                } else {
                    self.out_of_order += 1;
                }
            }
        }
        if !speaks {
            return;
        }
        if self.open.len() >= MAX_OPEN {
            self.out_of_order += 1;
            return;
        }
        let up = if ready == UNTIL_THE_END {
            i64::MAX
        } else {
            at.saturating_add(i64::from(ready) * 1_000)
        };
        let s = self.servers.entry(server).or_default();
        s.opened.insert((at, conn), up);
        s.up.insert((up, conn));
        let (full_until, limit, going) = (i64::MIN, u32::from(streams), false);
        let sealed = how.is_sealed();
        let room = match streams {
            u16::MAX => u32::MAX,
            _ if !needed => 0,
            n => u32::from(n).saturating_sub(1),
        };
        self.open.insert(
            conn,
            Open {
                server,
                at,
                up,
                full_until,
                limit,
                going,
                sealed,
                room,
            },
        );
    }

    /// What a connection to `server` opened at `at`, up `ready`
    /// microseconds later, was opened beside: the earliest HTTP/2
    /// connection up by then and not at its stream limit, else the
    /// earliest opened not yet up with room for its requests (raced; that
    /// room is then taken), else (those up all at their limit, those in
    /// their handshake without room, or all going away) none it could
    /// use; `None` when no HTTP/2 connection to it was open.
    fn beside(&mut self, server: u64, at: i64, ready: u32) -> Option<Beside> {
        let s = self.servers.get(&server)?;
        let one = |other, raced, sealed| {
            Beside::One(BesideOne {
                connection: 0,
                http2_connection: other,
                raced,
                carried_none: false,
                sealed,
                handshake: (ready != UNTIL_THE_END).then(|| f64::from(ready) / 1e6),
            })
        };
        let mut limit = None::<u32>;
        for &(up, other) in s.up.iter().take(LOOK) {
            if up > at {
                break;
            }
            match self.open.get(&other) {
                Some(o) if o.full_until > at => {
                    limit = Some(limit.map_or(o.limit, |l| l.min(o.limit)));
                }
                o => return Some(one(other, false, o.is_some_and(|o| o.sealed))),
            }
        }
        let mut not_up = s.opened.iter().take(LOOK).filter(|(_, &up)| up > at);
        let waited = not_up.find_map(|(&(_, other), _)| {
            let o = self.open.get(&other)?;
            limit = Some(limit.map_or(o.limit, |l| l.min(o.limit)));
            (o.room > 0).then_some(other)
        });
        if let Some(other) = waited {
            let o = self.open.get_mut(&other);
            let sealed = o.is_some_and(|o| {
                o.room = o.room.saturating_sub(u32::from(o.room != u32::MAX));
                o.sealed
            });
            return Some(one(other, true, sealed));
        }
        match limit {
            Some(limit) => Some(Beside::AtLimit(limit)),
            None if s.going > 0 && s.opened.is_empty() => Some(Beside::AfterGoaway),
            None => None,
        }
    }

    /// HTTP/2 connection `conn`'s streams reached the server's limit of
    /// `streams` at `at`, for `micros` microseconds.
    pub(super) fn full(&mut self, conn: u64, at: i64, micros: u32, streams: u16) {
        if let Some(o) = self.open.get_mut(&conn) {
            o.full_until = at.saturating_add(i64::from(micros) * 1_000);
            o.limit = u32::from(streams);
        }
    }

    /// HTTP/2 connection `conn` sent or received a GOAWAY: no new stream
    /// starts on it, though it stays open.
    pub(super) fn goaway(&mut self, conn: u64) {
        let Some(o) = self.open.get_mut(&conn).filter(|o| !o.going) else {
            return;
        };
        o.going = true;
        if let Some(s) = self.servers.get_mut(&o.server) {
            s.opened.remove(&(o.at, conn));
            s.up.remove(&(o.up, conn));
            s.going += 1;
        }
    }

    /// HTTP/2 connection `conn` closed: no new request goes on it.
    pub(super) fn closed(&mut self, conn: u64) {
        let Some(o) = self.open.remove(&conn) else {
            return;
        };
        if let Some(s) = self.servers.get_mut(&o.server) {
            if o.going {
                s.going = s.going.saturating_sub(1);
            } else {
                s.opened.remove(&(o.at, conn));
                s.up.remove(&(o.up, conn));
            }
            if s.opened.is_empty() && s.going == 0 {
                self.servers.remove(&o.server);
            }
        }
    }

    /// Connection `conn`'s first request was checked for idle connections:
    /// counted there (`while_idle`), it is not counted here.
    pub(super) fn first_request(&mut self, conn: u64, while_idle: bool) {
        if let Some(found) = self.waiting.remove(&conn) {
            if !while_idle {
                self.count(found);
            }
        }
    }

    fn count(&mut self, (found, syn, site): Found) {
        self.counted += 1;
        self.syns.push(syn);
        if let Some(site) = site {
            *self.by_site.entry(site).or_default() += 1;
        }
        self.raced += u64::from(found.raced);
        self.carried_none += u64::from(found.carried_none);
        self.sealed += u64::from(found.sealed);
        if let Some(h) = found.handshake {
            self.handshakes.push(h);
        }
        if self.first.len() < LISTED {
            self.first.push(found);
        }
    }

    /// The count and its details (`None` when no connection that offered
    /// HTTP/2 was seen from its SYN), and the count by server. Those still
    /// waiting for a first request's check (whose check never came) count.
    pub(super) fn finish(mut self) -> (Option<BesideHttp2>, HashMap<u64, u64>) {
        let mut waiting: Vec<Found> = self.waiting.drain().map(|(_, f)| f).collect();
        waiting.sort_by_key(|f| f.0.connection);
        for found in waiting {
            self.count(found);
        }
        self.first.sort_by_key(|f| f.connection);
        let by_site = std::mem::take(&mut self.by_site);
        let found = (self.checked > 0).then(|| BesideHttp2 {
            connections: self.counted,
            checked: self.checked,
            raced: self.raced,
            carried_none: self.carried_none,
            sealed: self.sealed,
            handshake_total: self.handshakes.sum(),
            handshake: self.handshakes.distribution(),
            at_limit: self.at_limit,
            stream_limit: self.stream_limit,
            after_goaway: self.after_goaway,
            out_of_order: self.out_of_order,
            first: self.first,
        });
        (found, by_site)
    }
}

#[cfg(test)]
mod tests;
