//! A shard's clocks: the close lingers and the idle scan that finalise
//! TCP connections at the packet position where the capture-wide clock
//! reaches them, and the QUIC connections the QUIC table ends (at a QUIC
//! datagram, a live capture's tick, or the end), each as an event in the
//! single-table order.
//!
//! Does not read packets or build records: the shard does.

use std::collections::VecDeque;

use super::table::Handle;
use super::{Clock, Event, Order, Phase, Shard};
use crate::record::CloseKind;
use crate::time::Timestamp;

impl Shard {
    /// Runs every timer (close lingers, idle scan) that fires at
    /// or before position `upto`, each at the exact position where the
    /// capture-wide clock reached it; false if the shard paused before
    /// all had fired ([`Shard::paused`]: the rest fire, at the same
    /// positions, when it is advanced again after its events are taken).
    #[inline]
    pub fn advance(&mut self, upto: u64, clock: &Clock<'_>) -> bool {
        self.origin.get_or_insert(clock.origin);
        // The usual answer, from the clock at `upto` alone: nothing is due.
        let never = Timestamp(i64::MAX);
        let mut first = self.closing.front().map_or(never, |c| c.0);
        if let Some(&(deadline, ..)) = self.finishing.front() {
            first = first.min(deadline);
        }
        if self.config.idle_timeout.is_some() {
            first = first.min(self.next_idle_scan.unwrap_or(Timestamp(i64::MIN)));
        }
        if clock.now_at(upto).is_some_and(|now| now >= first) {
            self.run_timers(upto, clock);
        }
        !self.paused()
    }

    /// [`Shard::advance`]'s work when a timer may be due.
    #[inline(never)]
    fn run_timers(&mut self, upto: u64, clock: &Clock<'_>) {
        loop {
            let mut next: Option<(u64, Timestamp)> = None;
            let mut consider = |due: Option<(u64, Timestamp)>| {
                if let Some(d) = due {
                    if next.is_none_or(|n| d.0 < n.0) {
                        next = Some(d);
                    }
                }
            };
            for queue in [&self.closing, &self.finishing] {
                if let Some(&(deadline, ..)) = queue.front() {
                    consider(clock.first_due(deadline, upto));
                }
            }
            if self.config.idle_timeout.is_some() {
                let due = self.next_idle_scan.unwrap_or(Timestamp(i64::MIN));
                consider(clock.first_due(due, upto));
            }
            let Some((at, now)) = next else {
                return;
            };
            self.expire(at, now);
            if self.paused() {
                return;
            }
        }
    }

    /// Finalises, at position `at` (clock reading `now`), connections whose
    /// linger or idle time has passed — until the shard pauses: the
    /// entries left are due at the same position, and taken in the same
    /// order, when it is advanced again.
    fn expire(&mut self, at: u64, now: Timestamp) {
        // The two lingers' queues, due entries taken in (deadline, close
        // position) order.
        loop {
            if self.paused() {
                return;
            }
            let due = |q: &VecDeque<(Timestamp, Handle, u64)>| {
                q.front()
                    .filter(|e| e.0 <= now)
                    .map(|&(deadline, _, closed_at)| (deadline, closed_at))
            };
            let entry = match (due(&self.closing), due(&self.finishing)) {
                (Some(c), Some(f)) if f < c => self.finishing.pop_front(),
                (Some(_), _) => self.closing.pop_front(),
                (None, Some(_)) => self.finishing.pop_front(),
                (None, None) => break,
            };
            let Some((deadline, handle, closed_at)) = entry else {
                break;
            };
            if let Some(conn) = self.table.take(handle) {
                let key = *conn.key();
                let order = Order {
                    at,
                    phase: Phase::Lingered,
                    k1: deadline.0,
                    k2: closed_at,
                };
                self.finalize(conn, CloseKind::Open, order);
                self.tombstones.bury(&key, now);
            }
        }
        let Some(idle_ns) = self.idle_ns() else {
            return;
        };
        // A scan is not cut short; it waits for the next slice if there is
        // no room left in this one.
        if self.paused() || self.next_idle_scan.is_some_and(|t| now < t) {
            return;
        }
        self.next_idle_scan = Some(Timestamp(
            now.0.saturating_add((idle_ns / 4).max(1_000_000_000)),
        ));
        let mut expired = self.table.handles(|c| now.nanos_since(c.last) >= idle_ns);
        expired.sort_unstable_by_key(|h| h.id);
        for handle in expired {
            if let Some(conn) = self.table.take(handle) {
                let order = Order {
                    at,
                    phase: Phase::Idle,
                    k1: 0,
                    k2: handle.id,
                };
                self.finalize(conn, CloseKind::Idle, order);
            }
        }
    }

    /// Ends the QUIC connections silent past their idle timeout at `now`
    /// (a live capture's clock, when no packet comes), at position `at`.
    pub fn quic_tick(&mut self, at: u64, now: Timestamp) {
        self.quic.expire(now);
        self.quic_ended(at);
    }

    /// Hands over, at position `at`, the records of the QUIC connections
    /// ended since the last time.
    pub(super) fn quic_ended(&mut self, at: u64) {
        self.events
            .extend(self.quic.take_done().map(|record| Event::Quic {
                order: Order {
                    at,
                    phase: Phase::Quic,
                    k1: 0,
                    k2: record.id,
                },
                record: Box::new(record),
            }));
    }

    /// `--idle-timeout` in nanoseconds, if set.
    pub(super) fn idle_ns(&self) -> Option<i64> {
        let idle = self.config.idle_timeout?;
        Some(i64::try_from(idle.as_nanos()).unwrap_or(i64::MAX))
    }
}
