//! Connections opened beside an HTTP/2 connection: HTTP/2 carries every
//! request to a server on one connection, so a client that opens another
//! to the same server (client address, server address and port, overlay,
//! SNI) while one that speaks HTTP/2 is open pays a TCP and a TLS
//! handshake it did not need — raced open before the first was up (Java's
//! HttpClient opens a connection per request until its first HTTP/2
//! connection is; OkHttp and Chromium race a few and keep one), or
//! opened beside one that was up.
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

/// One server's open HTTP/2 connections: by (opening, connection), when
/// each was up (`i64::MAX`: never); and by (up, connection).
#[derive(Debug, Default)]
struct Server {
    opened: BTreeMap<(i64, u64), i64>,
    up: BTreeSet<(i64, u64)>,
}

/// The HTTP/2 connections open to every server, as of the sweep.
#[derive(Debug, Default)]
pub(super) struct Multiplex {
    servers: HashMap<u64, Server>,
    /// Each open HTTP/2 connection's server and keys.
    open: HashMap<u64, (u64, i64, i64)>,
    /// Connections found beside one, waiting for their first request's
    /// check for idle connections: each with its SYN and its server.
    waiting: HashMap<u64, Found>,
    /// Connections that offered HTTP/2, seen from their SYN.
    checked: u64,
    counted: u64,
    raced: u64,
    carried_none: u64,
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
        ready: u32,
        (offered, speaks, requested): (bool, bool, bool),
    ) {
        if offered {
            self.checked += 1;
            if let Some(found) = self.beside(server, at, ready) {
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
        self.open.insert(conn, (server, at, up));
    }

    /// The HTTP/2 connection beside one opened at `at`, up `ready`
    /// microseconds later: one up by then if any was, else the earliest
    /// opened.
    fn beside(&self, server: u64, at: i64, ready: u32) -> Option<BesideOne> {
        let s = self.servers.get(&server)?;
        let (other, raced) = match s.up.first() {
            Some(&(up, other)) if up <= at => (other, false),
            _ => (s.opened.first_key_value()?.0 .1, true),
        };
        Some(BesideOne {
            connection: 0,
            http2_connection: other,
            raced,
            carried_none: false,
            handshake: (ready != UNTIL_THE_END).then(|| f64::from(ready) / 1e6),
        })
    }

    /// HTTP/2 connection `conn` closed: no new request goes on it.
    pub(super) fn closed(&mut self, conn: u64) {
        let Some((server, at, up)) = self.open.remove(&conn) else {
            return;
        };
        if let Some(s) = self.servers.get_mut(&server) {
            s.opened.remove(&(at, conn));
            s.up.remove(&(up, conn));
            if s.opened.is_empty() {
                self.servers.remove(&server);
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

    /// 1 opens at 0 and is up at 10 ms; 2 opens at 5 ms (raced), 3 at 20
    /// ms (beside one up), 4 to another server; 1 closes at 30 ms, and 5
    /// opens at 40 ms beside 2 and 3, up since 15 and 25 ms.
    #[test]
    fn raced_and_up_beside_an_open_http2_connection() {
        let mut m = Multiplex::default();
        m.opened((7, None), 1, 0, 10_000, H2);
        m.opened((7, None), 2, 5 * MS, 10_000, H2);
        m.opened((7, None), 3, 20 * MS, 5_000, H2);
        m.opened((8, None), 4, 20 * MS, 5_000, H2);
        m.closed(1);
        m.opened((7, None), 5, 40 * MS, 5_000, H2);
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
        m.opened((7, None), 1, 0, 1_000, H2);
        m.opened((7, None), 2, 5 * MS, 1_000, H2);
        m.first_request(2, true);
        m.opened((7, None), 3, 6 * MS, UNTIL_THE_END, (true, false, false));
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
        m.opened((7, None), 1, 0, 1_000, (true, false, true));
        m.opened((7, None), 2, MS, 1_000, (false, true, true));
        m.opened((7, None), 3, 2 * MS, 1_000, (true, false, true));
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
        use super::super::marks::Kind;
        let h2 = |conn: u64, at: i64, speaks: bool, closed: Option<i64>| Marks {
            server: 7,
            pool: 7,
            conn,
            opened: at,
            h2: Some((
                Kind::H2 {
                    ready: 10_000,
                    offered: true,
                    speaks,
                    requested: false,
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

    /// Closed connections are forgotten; those open at once are bounded.
    #[test]
    fn bounded_and_forgotten() {
        let mut m = Multiplex::default();
        for conn in 0..1_000 {
            m.opened((7, None), conn, conn as i64 * MS, 1, (false, true, false));
            m.closed(conn);
        }
        assert!(m.servers.is_empty() && m.open.is_empty());
        for conn in 0..MAX_OPEN as u64 + 3 {
            m.opened((7, None), conn, 0, 1, (false, true, false));
        }
        assert_eq!(m.open.len(), MAX_OPEN);
        assert_eq!(m.out_of_order, 3);
        assert_eq!(m.finish().0, None);
    }
}
