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

use super::marks::UNTIL_THE_END;
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
/// whether it is going away, and, until it is up, how many more
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
    /// here, one to look beside), `requested`: its first request will be
    /// checked for idle connections.
    pub(super) fn opened(
        &mut self,
        (server, site): (u64, Option<u64>),
        conn: u64,
        at: i64,
        (ready, streams): (u32, u16),
        (offered, speaks, requested): (bool, bool, bool),
    ) {
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
        let one = |other, raced| {
            Beside::One(BesideOne {
                connection: 0,
                http2_connection: other,
                raced,
                carried_none: false,
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
                _ => return Some(one(other, false)),
            }
        }
        let mut not_up = s.opened.iter().take(LOOK).filter(|(_, &up)| up > at);
        let waited = not_up.find_map(|(&(_, other), _)| {
            let o = self.open.get(&other)?;
            limit = Some(limit.map_or(o.limit, |l| l.min(o.limit)));
            (o.room > 0).then_some(other)
        });
        if let Some(other) = waited {
            if let Some(o) = self.open.get_mut(&other) {
                o.room = o.room.saturating_sub(u32::from(o.room != u32::MAX));
            }
            return Some(one(other, true));
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
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;
    /// Offered and spoke HTTP/2; carried a request.
    const H2: (bool, bool, bool) = (true, true, true);
    /// No stream limit.
    const U: u16 = u16::MAX;

    /// The count after connections 1 to `last` had their first request's
    /// check (none counted there), and those counted: each (connection,
    /// the HTTP/2 one beside it, raced).
    fn finished(mut m: Multiplex, last: u64) -> (BesideHttp2, Vec<(u64, u64, bool)>) {
        for conn in 1..=last {
            m.first_request(conn, false);
        }
        let r = m.finish().0.expect("checked");
        let beside = r.first.iter();
        let beside = beside.map(|f| (f.connection, f.http2_connection, f.raced));
        let beside = beside.collect();
        (r, beside)
    }

    /// 1 opens at 0 and is up at 10 ms; 2 opens at 5 ms (raced), 3 at 20
    /// ms (beside one up), 4 to another server; 1 closes at 30 ms, and 5
    /// opens at 40 ms beside 2 and 3, up since 15 and 25 ms.
    #[test]
    fn raced_and_up_beside_an_open_http2_connection() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, (10_000, U), H2);
        m.opened((7, None), 2, 5 * MS, (10_000, U), H2);
        m.opened((7, None), 3, 20 * MS, (5_000, U), H2);
        m.opened((8, None), 4, 20 * MS, (5_000, U), H2);
        m.closed(1);
        m.opened((7, None), 5, 40 * MS, (5_000, U), H2);
        for conn in 1..=5 {
            m.first_request(conn, false);
        }
        let r = m.finish().0.expect("checked");
        assert_eq!((r.checked, r.connections, r.raced), (5, 3, 1));
        let beside: Vec<_> = r
            .first
            .iter()
            .map(|f| (f.connection, f.http2_connection, f.raced))
            .collect();
        assert_eq!(beside, [(2, 1, true), (3, 1, false), (5, 2, false)]);
        assert!((r.handshake_total - 0.020).abs() < 1e-12);
    }

    /// Counted as opened while another sat idle, not again here; one that
    /// carries no request counts at its opening.
    #[test]
    fn not_counted_twice_and_unused_ones_count_at_once() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, (1_000, U), H2);
        m.opened((7, None), 2, 5 * MS, (1_000, U), H2);
        m.first_request(2, true);
        m.opened(
            (7, None),
            3,
            6 * MS,
            (UNTIL_THE_END, U),
            (true, false, false),
        );
        let r = m.finish().0.expect("checked");
        assert_eq!((r.connections, r.carried_none), (1, 1));
        assert_eq!(r.first[0].handshake, None);
        assert_eq!(r.handshake.count, 0);
    }

    /// Only one that speaks HTTP/2 is looked beside; only one that offered
    /// it is looked at; one whose first request's check never came counts.
    #[test]
    fn offered_and_spoken_apart() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, (1_000, U), (true, false, true));
        m.opened((7, None), 2, MS, (1_000, U), (false, true, true));
        m.opened((7, None), 3, 2 * MS, (1_000, U), (true, false, true));
        let r = m.finish().0.expect("checked");
        assert_eq!((r.checked, r.connections), (2, 1));
        assert_eq!(r.first[0].http2_connection, 2);
        assert_eq!(r.first[0].connection, 3);
    }

    /// Through the sweep: a connection that finished first waits for the
    /// HTTP/2 connection opened before it, still open, to finish too; and
    /// one opened after that connection's close is not beside it.
    #[test]
    fn the_sweep_orders_connections_that_finish_out_of_order() {
        use super::super::across::{Across, Marks};
        use super::super::marks::{H2How, Kind};
        let h2 = |conn: u64, at: i64, speaks: bool, closed: Option<i64>| Marks {
            server: 7,
            pool: 7,
            conn,
            opened: at,
            h2: Some((
                Kind::H2 {
                    ready: 10_000,
                    streams: U,
                    how: H2How::new(true, speaks, false),
                },
                closed,
            )),
            ..Marks::default()
        };
        let mut a = Across::default();
        a.add(&mut h2(2, 5 * MS, false, None), 0);
        a.add(&mut h2(3, 2_000 * MS, false, None), 0);
        a.add(&mut h2(1, 0, true, Some(1_000 * MS)), i64::MAX);
        let r = a.finish().beside_http2.expect("checked");
        assert_eq!((r.checked, r.connections, r.raced), (3, 1, 1));
        assert_eq!(r.first[0].http2_connection, 1);
        assert_eq!(r.out_of_order, 0);
    }

    /// 1 is up at 1 ms and at its limit of 2 from 10 to 20 ms: 2, opened
    /// at 15 ms, was needed (not counted), 3 at 25 ms was not; 4 opens at
    /// 30 ms while 1 goes away (GOAWAY at 28 ms) and 2 and 3 are at
    /// their limit; 5 at 40 ms, when only 1, going away, is open, was
    /// needed; 6, at 60 ms once 1 closed, has nothing beside it.
    #[test]
    fn needed_at_the_stream_limit_and_after_goaway() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, (1_000, U), H2);
        m.full(1, 10 * MS, 10_000, 2);
        m.opened((7, None), 2, 15 * MS, (1_000, U), H2);
        m.opened((7, None), 3, 25 * MS, (1_000, U), H2);
        m.goaway(1);
        m.full(2, 26 * MS, 100_000, 3);
        m.full(3, 27 * MS, 100_000, 2);
        m.opened((7, None), 4, 30 * MS, (1_000, U), (true, false, false));
        m.closed(2);
        m.closed(3);
        m.opened((7, None), 5, 40 * MS, (1_000, U), (true, false, false));
        m.goaway(1);
        m.closed(1);
        assert!(m.servers.is_empty() && m.open.is_empty());
        m.opened((7, None), 6, 60 * MS, (1_000, U), (true, false, false));
        for conn in 1..=6 {
            m.first_request(conn, false);
        }
        let r = m.finish().0.expect("checked");
        assert_eq!((r.checked, r.connections), (6, 1));
        assert_eq!(
            (r.at_limit, r.stream_limit, r.after_goaway),
            (2, Some(2), 1)
        );
        assert_eq!((r.first[0].connection, r.first[0].http2_connection), (3, 1));
    }

    /// One at its limit does not hide one up beside it that is not, nor
    /// one still in its handshake (raced).
    #[test]
    fn at_the_limit_only_when_every_one_is() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, (1_000, U), H2);
        m.opened((7, None), 2, MS / 2, (1_000, U), H2);
        m.full(1, 5 * MS, 100_000, 1);
        m.opened((7, None), 3, 10 * MS, (1_000, U), H2);
        m.full(2, 11 * MS, 100_000, 1);
        m.full(3, 12 * MS, 100_000, 1);
        m.opened((7, None), 4, 20 * MS, (50_000, U), H2);
        m.opened((7, None), 5, 21 * MS, (1_000, U), H2);
        let (r, beside) = finished(m, 5);
        assert_eq!(beside, [(2, 1, true), (3, 2, false), (5, 4, true)]);
        assert_eq!(r.at_limit, 1);
    }

    /// curl with 10 transfers to a server allowing 2 streams: 1 is up and
    /// full; 2–9 open 0.1 ms apart, each in its handshake for 5 ms. 2 is
    /// needed; 3 could have waited for 2 (room for one more request); 4
    /// is needed (2 has no room left, 3 was not needed), and so on: 5
    /// connections carry the 10, so 4 of the 8 were needed.
    #[test]
    fn room_on_connections_in_their_handshake() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, (1_000, 2), H2);
        m.full(1, 2 * MS, 1_000_000, 2);
        for conn in 2..=9 {
            let at = 10 * MS + conn as i64 * MS / 10;
            m.opened((7, None), conn, at, (5_000, 2), H2);
        }
        let (r, beside) = finished(m, 9);
        assert_eq!((r.at_limit, r.stream_limit, r.raced), (4, Some(2), 4));
        let raced = [(3, 2, true), (5, 4, true), (7, 6, true), (9, 8, true)];
        assert_eq!(beside, raced);
    }

    /// Without a limit a connection in its handshake takes any number, the
    /// one itself found beside another too: 3, opened after 1 (up) closed
    /// while 2 (found beside 1) is in its handshake, is raced beside 2.
    #[test]
    fn without_a_limit_any_one_in_its_handshake_has_room() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, (1_000, U), H2);
        m.opened((7, None), 2, 2 * MS, (50_000, U), H2);
        m.closed(1);
        m.opened((7, None), 3, 3 * MS, (1_000, U), H2);
        let (r, beside) = finished(m, 3);
        assert_eq!(beside, [(2, 1, false), (3, 2, true)]);
        assert_eq!(r.at_limit, 0);
    }

    /// Closed connections are forgotten; those open at once are bounded.
    #[test]
    fn bounded_and_forgotten() {
        let mut m = Multiplex::default();
        for conn in 0..1_000 {
            m.opened(
                (7, None),
                conn,
                conn as i64 * MS,
                (1, U),
                (false, true, false),
            );
            m.closed(conn);
        }
        assert!(m.servers.is_empty() && m.open.is_empty());
        for conn in 0..MAX_OPEN as u64 + 3 {
            m.opened((7, None), conn, 0, (1, U), (false, true, false));
        }
        assert_eq!(m.open.len(), MAX_OPEN);
        assert_eq!(m.out_of_order, 3);
        assert_eq!(m.finish().0, None);
    }
}
