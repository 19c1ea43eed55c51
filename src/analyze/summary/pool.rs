//! Connections opened while another sat idle: a client that pools its
//! connections takes an idle one for its next request to the server; one
//! that opens a new connection while another to the same server (client
//! address, server address and port, overlay, SNI) has no request
//! outstanding pays a TCP (and TLS) handshake the pool could have saved —
//! a response not read to its end or not closed (the connection never
//! goes back to the pool), a pool smaller than the client's threads, or a
//! pool per call (python's `requests.get`).
//!
//! The sweep in [`super::across`] gives this module, in time order, each
//! connection's idle times and its first request's setup; a connection
//! counts when another was idle from before its SYN until past its first
//! request, the whole time it took to set up, so that one the server was
//! about to close (a `Connection: close` answered, the close not yet on
//! the wire) does not.
//!
//! It also counts the connections opened after the client closed another
//! to the same server that it could have kept (`summary.redialed`): a
//! close [`super::marks`] marked as one, at most [`REDIAL_WINDOW`] before
//! the SYN — a connection that counts as opened while another sat idle
//! does not count again.
//!
//! Does not read records: only the marks [`super::marks`] makes of them.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use super::marks::UNTIL_THE_END;
use crate::analyze::stats::Samples;
use crate::record::{OpenedWhileIdle, PassedOver, Redial, Redialed, REDIAL_WINDOW};

/// Connections listed in `first`, the earliest counted (32 bytes each).
const LISTED: usize = 1024;
/// Idle times followed at once (about 100 bytes each: 25 MiB). Each
/// ends by the time the sweep passes it; only timestamps that jump
/// forward and back can leave many waiting, and past this bound the
/// newest are not followed (counted in `out_of_order`).
const MAX_IDLE: usize = 1 << 18;

/// An idle time: when it began, the connection, and whether a request of
/// the connection's ended it (else its close or the capture's end).
type Idle = (i64, u64, bool);

/// The idle connections of every server, as of the sweep.
#[derive(Debug, Default)]
pub(super) struct Pool {
    /// Each server's idle connections, by when they became idle: (start,
    /// connection, whether a request of its own ended the idle time).
    idle: HashMap<u64, BTreeSet<Idle>>,
    /// When each idle time ends, the earliest first.
    ends: BinaryHeap<Reverse<(i64, u64, Idle)>>,
    /// First requests looked at: of connections with a SYN.
    checked: u64,
    /// Setup times (SYN → first request) of those opened while another
    /// was idle, and how long the idle one had been idle at their SYN.
    setups: Samples,
    idle_for: Samples,
    /// Of those counted, the ones whose idle connection carried no request
    /// after that idle time.
    never_used_again: u64,
    /// Marks taken behind the sweep, and idle times past [`MAX_IDLE`]:
    /// the count may be short.
    pub(super) out_of_order: u64,
    /// The first counted, and the connection idle longest beside each.
    first: Vec<PassedOver>,
    /// The count of each server (`ServerId::key`) whose pool is known.
    by_site: HashMap<u64, u64>,
    /// The SYNs of those counted since the summary last took them (for
    /// the series over time; taken after every connection's marks).
    pub(super) syns: Vec<i64>,
    /// Each server's connections the client closed though it could have
    /// kept them, within the window: (close, connection)…
    closed: HashMap<u64, BTreeSet<(i64, u64)>>,
    /// …and in the order they were marked, to forget them past the window.
    closed_order: VecDeque<(i64, u64, u64)>,
    /// Connections that carried no request looked at (at their SYN).
    unused_checked: u64,
    /// Of those looked at, the ones opened after such a close: how long
    /// after it their SYN came, and how many carried no request.
    after_close: Samples,
    redial_unused: u64,
    redial_first: Vec<Redial>,
}

/// [`REDIAL_WINDOW`] in nanoseconds.
const WINDOW: i64 = (REDIAL_WINDOW * 1e9) as i64;
/// How long a close is kept: the window, and as long again for the
/// connections whose SYN came within it but whose first request (when
/// they are looked at) later — one set up for longer than that may miss
/// a close and go uncounted. (At 26,000 closes a second the 262,144 kept
/// at most are reached, and those past them counted in `out_of_order`.)
const KEEP_CLOSED: i64 = 2 * WINDOW;

impl Pool {
    /// Connection `conn` to `server` had no request outstanding from `at`
    /// (nanoseconds into the capture) for `micros` microseconds, then sent
    /// one (`used_again`) or closed.
    pub(super) fn idle(&mut self, server: u64, conn: u64, at: i64, micros: u32, used_again: bool) {
        self.expire(at);
        if self.ends.len() >= MAX_IDLE {
            self.out_of_order += 1;
            return;
        }
        let end = if micros == UNTIL_THE_END {
            i64::MAX
        } else {
            at.saturating_add(i64::from(micros) * 1_000)
        };
        let idle = (at, conn, used_again);
        self.idle.entry(server).or_default().insert(idle);
        self.ends.push(Reverse((end, server, idle)));
    }

    /// The client closed connection `conn` to `server` at `at`, though it
    /// could have kept it.
    pub(super) fn closed(&mut self, server: u64, conn: u64, at: i64) {
        self.forget_closed(at);
        if self.closed_order.len() >= MAX_IDLE {
            self.out_of_order += 1;
            return;
        }
        self.closed.entry(server).or_default().insert((at, conn));
        self.closed_order.push_back((at, server, conn));
    }

    /// Forgets the closes more than [`KEEP_CLOSED`] before `now` (those
    /// marked out of order wait behind later ones: they are forgotten as
    /// late).
    fn forget_closed(&mut self, now: i64) {
        while let Some(&(at, server, conn)) = self.closed_order.front() {
            if now.saturating_sub(at) <= KEEP_CLOSED {
                break;
            }
            self.closed_order.pop_front();
            if let Some(set) = self.closed.get_mut(&server) {
                set.remove(&(at, conn));
                if set.is_empty() {
                    self.closed.remove(&server);
                }
            }
        }
    }

    /// Connection `conn` to `server`, opened at `syn` and looked at `now`
    /// nanoseconds into the capture: whether it came after the client
    /// closed another to the server that it could have kept — the latest
    /// such close at or before its SYN, within the window, not yet taken
    /// by another (a connection kept would have served one).
    fn redial(&mut self, server: u64, conn: u64, (syn, now): (i64, i64), carried_none: bool) {
        self.forget_closed(now);
        let latest = self.closed.get(&server).and_then(|set| {
            let mut before = set.range(..=(syn, u64::MAX)).rev();
            before.find(|&&(_, other)| other != conn)
        });
        let Some(&(close, other)) = latest.filter(|&&(close, _)| syn - close <= WINDOW) else {
            return;
        };
        // A close spares one connection: it is taken.
        if let Some(set) = self.closed.get_mut(&server) {
            set.remove(&(close, other));
        }
        let after = (syn - close) as f64 / 1e9;
        if self.redial_first.len() < LISTED {
            self.redial_first.push(Redial {
                connection: conn,
                closed_connection: other,
                after_close: after,
                carried_none,
            });
        }
        self.after_close.push(after);
        self.redial_unused += u64::from(carried_none);
    }

    /// Connection `conn` to `server`, opened at `at`, carried no request.
    pub(super) fn unused(&mut self, server: u64, conn: u64, at: i64) {
        self.unused_checked += 1;
        self.redial(server, conn, (at, at), true);
    }

    /// Connection `conn` to `server` (of `site`, where known) sent its
    /// first request at `at`, `micros` microseconds after its SYN; whether
    /// it counts.
    pub(super) fn setup(
        &mut self,
        server: u64,
        site: Option<u64>,
        conn: u64,
        at: i64,
        micros: u32,
    ) -> bool {
        self.expire(at);
        self.checked += 1;
        let syn = at.saturating_sub(i64::from(micros) * 1_000);
        // Another's: the connection itself is idle before its first
        // request only where timestamps tie (a response stamped with its
        // request); it has one idle time at a time, so two looks at most.
        let oldest = self.idle.get(&server).and_then(|s| {
            s.iter()
                .take_while(|&&(since, _, _)| since <= syn)
                .find(|&&(_, other, _)| other != conn)
        });
        if let Some(&(since, other, used_again)) = oldest {
            let (setup, idle) = (f64::from(micros) / 1e6, (syn - since) as f64 / 1e9);
            if self.first.len() < LISTED {
                self.first.push(PassedOver {
                    connection: conn,
                    idle_connection: other,
                    idle,
                    setup,
                    idle_connection_used_again: used_again,
                });
            }
            self.setups.push(setup);
            self.idle_for.push(idle);
            self.syns.push(syn);
            self.never_used_again += u64::from(!used_again);
            if let Some(site) = site {
                *self.by_site.entry(site).or_default() += 1;
            }
            return true;
        }
        self.redial(server, conn, (syn, at), false);
        false
    }

    /// Forgets the idle times that ended by `now` (one that ends as a
    /// request starts did not last past it).
    fn expire(&mut self, now: i64) {
        while let Some(&Reverse((end, server, idle))) = self.ends.peek() {
            if end > now {
                break;
            }
            self.ends.pop();
            if let Some(set) = self.idle.get_mut(&server) {
                set.remove(&idle);
                if set.is_empty() {
                    self.idle.remove(&server);
                }
            }
        }
    }

    /// The count and its details (`None` when no first request was looked
    /// at), those opened after a close the client could have spared (as
    /// `None`), and the count while idle by server.
    pub(super) fn finish(
        mut self,
    ) -> (Option<OpenedWhileIdle>, Option<Redialed>, HashMap<u64, u64>) {
        let by_site = std::mem::take(&mut self.by_site);
        let checked = self.checked + self.unused_checked;
        let redialed = (checked > 0).then(|| Redialed {
            connections: self.after_close.len(),
            checked,
            carried_none: self.redial_unused,
            after_close: self.after_close.distribution(),
            out_of_order: self.out_of_order,
            first: std::mem::take(&mut self.redial_first),
        });
        let found = (self.checked > 0).then(|| OpenedWhileIdle {
            connections: self.setups.len(),
            checked: self.checked,
            setup_total: self.setups.sum(),
            setup: self.setups.distribution(),
            idle: self.idle_for.distribution(),
            idle_never_used_again: self.never_used_again,
            out_of_order: self.out_of_order,
            first: self.first,
        });
        (found, redialed, by_site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// Connection 1 idle from 10 ms to 50 ms; 2 set up from 12 ms to 20
    /// ms (counted), 3 from 5 ms to 20 ms (its SYN before the idle time:
    /// not), 4 from 45 ms to 60 ms (past it: not), 5 to another server.
    #[test]
    fn only_a_setup_inside_an_idle_time_counts() {
        let mut p = Pool::default();
        p.idle(7, 1, 10 * MS, 40_000, true);
        p.setup(7, None, 2, 20 * MS, 8_000);
        p.setup(7, None, 3, 20 * MS, 15_000);
        p.setup(8, None, 5, 20 * MS, 8_000);
        p.setup(7, None, 4, 60 * MS, 15_000);
        let r = p.finish().0.expect("checked");
        assert_eq!(r.checked, 4);
        assert_eq!(r.connections, 1);
        let named = PassedOver {
            connection: 2,
            idle_connection: 1,
            idle: 0.002,
            setup: 0.008,
            idle_connection_used_again: true,
        };
        assert_eq!(r.first, [named]);
        assert_eq!(r.idle_never_used_again, 0);
        assert!((r.setup_total - 0.008).abs() < 1e-12);
        assert!((r.idle.max.unwrap_or(0.0) - 0.002).abs() < 1e-12);
    }

    /// An idle time to the capture's end never expires; the oldest of
    /// several idle connections is the one measured.
    #[test]
    fn the_oldest_idle_connection_is_measured() {
        let mut p = Pool::default();
        p.idle(7, 1, 10 * MS, UNTIL_THE_END, false);
        p.idle(7, 2, 30 * MS, 1_000, false);
        p.setup(7, None, 3, 3_600_000 * MS, 1_000);
        let r = p.finish().0.expect("checked");
        assert_eq!((r.connections, r.idle_never_used_again), (1, 1));
        let idle = r.idle.max.unwrap_or(0.0);
        assert!((idle - (3_600.0 - 0.001 - 0.010)).abs() < 1e-9, "{idle}");
    }

    /// Idle times that ended are forgotten: the maps shrink back.
    #[test]
    fn idle_times_that_ended_are_forgotten() {
        let mut p = Pool::default();
        for conn in 0..1_000 {
            p.idle(7, conn, conn as i64 * MS, 500, false);
        }
        assert!(p.ends.len() <= 1);
        p.expire(2_000 * MS);
        assert!(p.idle.is_empty() && p.ends.is_empty());
    }

    /// Idle times that never end (timestamps far ahead) are bounded.
    #[test]
    fn idle_times_are_bounded() {
        let mut p = Pool::default();
        for conn in 0..MAX_IDLE as u64 + 10 {
            p.idle(7, conn, 0, UNTIL_THE_END, false);
        }
        assert_eq!(p.ends.len(), MAX_IDLE);
        p.setup(7, None, u64::MAX, MS, 1);
        let r = p.finish().0.expect("checked");
        assert_eq!((r.connections, r.out_of_order), (1, 10));
    }

    /// Counted by server, where the pool's server is known; a pool whose
    /// server is not known counts in the whole only.
    #[test]
    fn counts_go_to_the_pools_server() {
        let mut p = Pool::default();
        p.idle(7, 1, 0, UNTIL_THE_END, false);
        p.idle(8, 2, 0, UNTIL_THE_END, false);
        p.idle(9, 3, 0, UNTIL_THE_END, false);
        p.setup(7, Some(70), 4, 10 * MS, 1_000);
        p.setup(8, Some(70), 5, 10 * MS, 1_000);
        p.setup(9, None, 6, 10 * MS, 1_000);
        let (found, _, by_site) = p.finish();
        assert_eq!(found.map(|f| f.connections), Some(3));
        assert_eq!(by_site, HashMap::from([(70, 2)]));
    }

    /// Timestamps that tie (a capture's clock stepping coarsely): a
    /// connection idle from its own SYN is not another.
    #[test]
    fn a_connection_is_not_idle_beside_itself() {
        let mut p = Pool::default();
        p.idle(7, 1, 0, 990_000, false);
        p.setup(7, None, 1, 0, 0);
        assert_eq!(p.finish().0.map(|r| r.connections), Some(0));
    }

    /// Closes the client could have spared: connection 1 closed at 10 ms;
    /// 2 set up from 12 ms (counted, 2 ms after), 3 from 5 ms (its SYN
    /// before the close: not), 4 from 5.02 s (past the window: not), 5
    /// to another server; 6 opened beside 7 idle counts there, not here.
    #[test]
    fn a_setup_after_a_close_within_the_window_counts() {
        let mut p = Pool::default();
        p.closed(7, 1, 10 * MS);
        p.setup(7, None, 2, 20 * MS, 8_000);
        p.setup(7, None, 3, 20 * MS, 15_000);
        p.setup(8, None, 5, 20 * MS, 8_000);
        p.setup(7, None, 4, 5_030 * MS, 10_000);
        p.idle(9, 7, 30 * MS, 1_000_000, false);
        p.closed(9, 8, 31 * MS);
        assert!(p.setup(9, None, 6, 40 * MS, 5_000));
        let (idle, redialed, _) = p.finish();
        let r = redialed.expect("checked");
        assert_eq!((r.connections, r.checked), (1, 5));
        let named = Redial {
            connection: 2,
            closed_connection: 1,
            after_close: 0.002,
            carried_none: false,
        };
        assert_eq!(r.first, [named]);
        assert_eq!(idle.map(|o| o.connections), Some(1));
    }

    /// A connection that carried no request is looked at by its SYN.
    #[test]
    fn an_unused_connection_counts_at_its_syn() {
        let mut p = Pool::default();
        p.closed(7, 1, 10 * MS);
        p.unused(7, 2, 11 * MS);
        p.unused(7, 3, 9 * MS);
        p.unused(8, 4, 11 * MS);
        // The close was taken by 2: 5 after it does not count.
        p.unused(7, 5, 12 * MS);
        let r = p.finish().1.expect("checked");
        assert_eq!((r.connections, r.checked, r.carried_none), (1, 4, 1));
        assert_eq!(r.first.first().map(|f| f.connection), Some(2));
    }

    /// The latest close before the SYN is the one measured, even when
    /// another came between the SYN and the first request; closes older
    /// than twice the window are forgotten.
    #[test]
    fn the_latest_close_before_the_syn_is_measured() {
        let mut p = Pool::default();
        p.closed(7, 1, 0);
        p.closed(7, 2, 4 * MS);
        p.closed(7, 3, 7 * MS);
        p.setup(7, None, 4, 9 * MS, 4_000);
        let r = p.finish().1.expect("checked");
        assert_eq!(r.first.first().map(|f| f.closed_connection), Some(2));
        assert!((r.after_close.max.unwrap_or(0.0) - 0.001).abs() < 1e-12);
        let mut p = Pool::default();
        for conn in 0..1_000 {
            p.closed(7, conn, conn as i64 * 1_000 * MS);
        }
        assert!(p.closed_order.len() <= 11);
        assert!(p.closed.get(&7).is_some_and(|s| s.len() <= 11));
    }

    #[test]
    fn nothing_looked_at_is_none() {
        let mut p = Pool::default();
        p.idle(7, 1, 0, 10, false);
        assert_eq!(p.finish().0, None);
    }
}
