//! Full TLS handshakes a client could have spared by resuming: once a
//! handshake with a server (client address, server address and port,
//! overlay, SNI) has completed, the client holds a session it may offer
//! the next time (a TLS 1.3 ticket, a TLS 1.2 ticket or session id) and
//! skip the certificate and the key exchange. A full handshake whose
//! ClientHello offered nothing after such a one — python's `ssl` keeps no
//! session across connections unless it is given one, separate curl
//! processes share none — pays it again; one whose offered session the
//! server refused (a ticket from another server behind a balancer, an
//! expired one) too.
//!
//! The sweep in [`super::across`] gives this module, in time order, each
//! handshake's completion and each full handshake's ClientHello.
//!
//! Does not read records: only the marks [`super::marks`] makes of them.

use std::collections::HashMap;

use super::marks::UNTIL_THE_END;
use crate::analyze::stats::Samples;
use crate::record::{NotResumed, NotResumedOne};

/// Connections listed in `first`, the earliest counted (24 bytes each).
const LISTED: usize = 1024;
/// Servers whose first completed handshake is kept (32 bytes each: 8
/// MiB); past them, a server's full handshakes are not checked (counted
/// in `not_followed`).
const MAX_SERVERS: usize = 1 << 18;

/// The full handshakes of every server, as of the sweep.
#[derive(Debug, Default)]
pub(super) struct Resume {
    /// Each server's first completed handshake.
    done: HashMap<u64, Done>,
    full: u64,
    not_offered: Samples,
    refused: Samples,
    /// Full handshakes of servers past [`MAX_SERVERS`], and marks taken
    /// behind the sweep.
    pub(super) out_of_order: u64,
    first: Vec<NotResumedOne>,
    /// The counts (not offered, refused) of each server (`ServerId::key`)
    /// whose pool is known.
    by_site: HashMap<u64, (u64, u64)>,
    /// The ClientHellos of those counted since the summary last took them
    /// (for the series over time).
    pub(super) hellos: Vec<i64>,
}

/// A server's first completed handshake: when, its connection, whether
/// it is unknown that the server issues sessions (its tickets sealed, no
/// sign of one since), and the full handshakes counted after it.
#[derive(Debug)]
struct Done {
    at: i64,
    conn: u64,
    sealed: bool,
    counted: u32,
}

impl Resume {
    /// Connection `conn` to `server` completed a TLS handshake at `at`
    /// (nanoseconds into the capture); `sealed`: whether the server issued
    /// a session is unknown (a full TLS 1.3 handshake read without keys).
    /// One that is not sealed (resumed, or one the server is seen to have
    /// given a session) shows the server issues them.
    pub(super) fn done(&mut self, server: u64, conn: u64, at: i64, sealed: bool) {
        if self.done.len() < MAX_SERVERS || self.done.contains_key(&server) {
            self.done.entry(server).or_insert(Done {
                at,
                conn,
                sealed,
                counted: 0,
            });
            if !sealed {
                self.issues(server);
            }
        }
    }

    /// `server` is seen to issue sessions: those counted after its first
    /// handshake, whose tickets were sealed, are no longer in doubt.
    fn issues(&mut self, server: u64) {
        if let Some(d) = self.done.get_mut(&server) {
            d.sealed = false;
        }
    }

    /// Connection `conn` to `server` (of `site`, where known) sent the
    /// ClientHello of a full handshake at `at`, which took `micros`
    /// microseconds to complete; `offered`: it offered a session, which
    /// the server refused.
    pub(super) fn full(
        &mut self,
        (server, site): (u64, Option<u64>),
        conn: u64,
        at: i64,
        micros: u32,
        offered: bool,
    ) {
        self.full += 1;
        let took = (micros != UNTIL_THE_END - 1).then(|| f64::from(micros) / 1e6);
        if offered {
            // The client held a session with the server: it issues them.
            self.issues(server);
            self.refused.push(took.unwrap_or(0.0));
            self.counted(site, at, (0, 1));
            return;
        }
        let earlier = match self.done.get_mut(&server) {
            Some(d) if d.at <= at && d.conn != conn => {
                d.counted = d.counted.saturating_add(1);
                d.conn
            }
            Some(_) => return,
            None => {
                self.out_of_order += u64::from(self.done.len() >= MAX_SERVERS);
                return;
            }
        };
        self.not_offered.push(took.unwrap_or(0.0));
        self.counted(site, at, (1, 0));
        if self.first.len() < LISTED {
            self.first.push(NotResumedOne {
                connection: conn,
                earlier_connection: earlier,
                handshake: took,
            });
        }
    }

    /// A full handshake of `site` counted, its ClientHello at `at`.
    fn counted(&mut self, site: Option<u64>, at: i64, (not_offered, refused): (u64, u64)) {
        self.hellos.push(at);
        if let Some(site) = site {
            let c = self.by_site.entry(site).or_default();
            *c = (c.0 + not_offered, c.1 + refused);
        }
    }

    /// The count and its details (`None` when no full handshake was seen),
    /// and the counts (not offered, refused) by server.
    pub(super) fn finish(mut self) -> (Option<NotResumed>, HashMap<u64, (u64, u64)>) {
        self.first.sort_by_key(|f| f.connection);
        let by_site = std::mem::take(&mut self.by_site);
        // Those after a server still in doubt at the end.
        let sealed = self.done.values().filter(|d| d.sealed);
        let after_sealed = sealed.map(|d| u64::from(d.counted)).sum();
        let found = (self.full > 0).then(|| NotResumed {
            full: self.full,
            not_offered: self.not_offered.len(),
            not_offered_handshake_total: self.not_offered.sum(),
            not_offered_after_sealed: after_sealed,
            refused: self.refused.len(),
            refused_handshake_total: self.refused.sum(),
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

    /// 1's handshake completes at 10 ms; 2's full ClientHello at 5 ms
    /// (before it: not), 3's at 20 ms (counted), 4's at 20 ms offering a
    /// session (refused), 5's to another server (not).
    #[test]
    fn a_full_handshake_after_one_completed_counts() {
        let mut r = Resume::default();
        r.full((7, None), 1, 0, 10_000, false);
        r.full((7, None), 2, 5 * MS, 10_000, false);
        r.done(7, 1, 10 * MS, false);
        r.done(7, 2, 15 * MS, true);
        r.full((7, None), 3, 20 * MS, 4_000, false);
        r.full((7, None), 4, 20 * MS, 6_000, true);
        r.full((8, None), 5, 20 * MS, 4_000, false);
        let n = r.finish().0.expect("full handshakes");
        assert_eq!((n.full, n.not_offered, n.refused), (5, 1, 1));
        assert_eq!(n.not_offered_after_sealed, 0);
        assert_eq!(
            n.first,
            [NotResumedOne {
                connection: 3,
                earlier_connection: 1,
                handshake: Some(0.004)
            }]
        );
        assert!((n.refused_handshake_total - 0.006).abs() < 1e-12);
    }

    /// Servers past the bound are not followed, and say so.
    #[test]
    fn servers_are_bounded() {
        let mut r = Resume::default();
        for server in 0..MAX_SERVERS as u64 + 2 {
            r.done(server, server, 0, false);
        }
        assert_eq!(r.done.len(), MAX_SERVERS);
        r.full((u64::MAX, None), 1, MS, 1, false);
        let n = r.finish().0.expect("one");
        assert_eq!((n.not_offered, n.out_of_order), (0, 1));
    }

    #[test]
    fn no_full_handshake_is_none() {
        let mut r = Resume::default();
        r.done(7, 1, 0, true);
        assert_eq!(r.finish().0, None);
    }

    /// After a server whose sessions are unknown (TLS 1.3 read without
    /// keys), a full handshake counts, and says so — until the server is
    /// seen to issue sessions (a resumed handshake, one offered), before
    /// or after.
    #[test]
    fn after_a_sealed_handshake_counts_and_says_so() {
        let mut r = Resume::default();
        r.done(7, 1, 0, true);
        r.done(7, 2, MS, true);
        r.full((7, None), 3, 2 * MS, 1_000, false);
        r.full((7, None), 4, 3 * MS, 1_000, false);
        r.done(8, 5, 0, true);
        r.full((8, None), 6, 2 * MS, 1_000, false);
        let n = r.finish().0.expect("counted");
        assert_eq!((n.not_offered, n.not_offered_after_sealed), (3, 3));
        let mut r = Resume::default();
        r.done(7, 1, 0, true);
        r.full((7, None), 3, 2 * MS, 1_000, false);
        r.full((7, None), 4, 3 * MS, 1_000, true);
        r.full((7, None), 5, 4 * MS, 1_000, false);
        r.done(8, 6, 0, true);
        r.full((8, None), 7, 2 * MS, 1_000, false);
        r.done(8, 8, 3 * MS, false);
        r.done(9, 9, 0, true);
        r.full((9, None), 10, 2 * MS, 1_000, false);
        let n = r.finish().0.expect("counted");
        assert_eq!((n.not_offered, n.not_offered_after_sealed), (4, 1));
    }
}
