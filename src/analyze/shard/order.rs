//! Where a shard's events fall in the single-table order: the capture-wide
//! clock a shard reads timers against ([`Clock`]), the order key of every
//! event ([`Order`], [`Phase`]) and the events themselves ([`Event`]), which
//! the gatherer sorts back into the order one table would have produced.
//!
//! Does not run timers or hold connections: that is the shard's.

use crate::analyze::summary::Tally;
use crate::record::{ConnectionRecord, QuicRecord};
use crate::time::Timestamp;

/// The capture-wide clock for a run of packets: `nows[k]` is the latest
/// timestamp seen up to and including packet `base + k` (never decreasing).
#[derive(Clone, Copy, Debug)]
pub struct Clock<'a> {
    pub base: u64,
    pub nows: &'a [Timestamp],
    /// The first packet's timestamp: the origin of every `at` offset.
    pub origin: Timestamp,
}

impl Clock<'_> {
    /// The first packet position at or before `upto` whose clock has reached
    /// `due`, with that clock reading.
    pub(super) fn first_due(&self, due: Timestamp, upto: u64) -> Option<(u64, Timestamp)> {
        let last = usize::try_from(upto.checked_sub(self.base)?).ok()?;
        let nows = self.nows.get(..=last)?;
        if nows.last().is_none_or(|now| *now < due) {
            // The usual answer, without a search.
            return None;
        }
        let k = nows.partition_point(|now| *now < due);
        let now = *nows.get(k)?;
        Some((self.base + k as u64, now))
    }

    pub(super) fn now_at(&self, index: u64) -> Option<Timestamp> {
        let k = usize::try_from(index.checked_sub(self.base)?).ok()?;
        self.nows.get(k).copied()
    }
}

/// Where an event falls in the single-table order: the packet position,
/// then the step within that packet (`Phase`), then a tie-break.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Order {
    pub at: u64,
    pub phase: Phase,
    pub k1: i64,
    pub k2: u64,
}

/// The steps a single table takes for one packet, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// A closed connection's linger ran out (tie-break: deadline, close position).
    Lingered,
    /// An idle scan finalised it (tie-break: first packet position).
    Idle,
    /// This packet reopened its tuple (port reuse) or found it idle.
    Replaced,
    /// Finalised to make room under `--max-connections` (tie-break: order of eviction).
    Evicted,
    /// This packet opened a connection.
    Opened,
    /// This packet closed its connection (FIN/FIN or RST).
    Closed,
    /// Still open at the end of the input (tie-break: first packet position).
    End,
    /// A QUIC connection ended (tie-break: its QUIC number); QUIC's table
    /// is the first shard's alone.
    Quic,
}

/// What a shard reports.
#[derive(Debug)]
pub enum Event {
    /// A connection opened at `order.at`, at capture time `ts`.
    Opened { order: Order, ts: Timestamp },
    /// An open connection closed.
    Closed { order: Order },
    /// A connection was finalised. `was_open`: it still counted among the
    /// open connections.
    Finished {
        order: Order,
        was_open: bool,
        done: Done,
    },
    /// A QUIC connection ended (silent past its idle timeout, pushed out,
    /// or at the end of the input).
    Quic {
        order: Order,
        record: Box<QuicRecord>,
    },
}

/// A finalised connection, as the gatherer gets it. Its connection number
/// is still the position of its first packet: the gatherer renumbers it.
#[derive(Debug)]
pub enum Done {
    /// The record, and what the summary reads of it.
    Record(Box<(ConnectionRecord, Tally)>),
    /// The record as the sink's encoder wrote it, and what the summary
    /// reads of it; the record itself was dropped where it was made.
    Encoded(Box<Encoded>),
}

/// A record's text and what the summary reads of it.
#[derive(Debug)]
pub struct Encoded {
    /// The position of its first packet.
    pub id: u64,
    pub text: Vec<u8>,
    pub tally: Tally,
}

impl Event {
    pub fn order(&self) -> Order {
        match self {
            Event::Opened { order, .. }
            | Event::Closed { order }
            | Event::Finished { order, .. }
            | Event::Quic { order, .. } => *order,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Clock, Order, Phase};
    use crate::time::Timestamp;

    fn clock(nows: &[i64]) -> Vec<Timestamp> {
        nows.iter().map(|&n| Timestamp(n)).collect()
    }

    #[test]
    fn a_timer_fires_at_the_first_position_whose_clock_reaches_it() {
        let nows = clock(&[10, 10, 20, 20, 30]);
        let c = Clock {
            base: 100,
            nows: &nows,
            origin: Timestamp(0),
        };
        let due = |d: i64, upto: u64| c.first_due(Timestamp(d), upto);
        assert_eq!(due(5, 104), Some((100, Timestamp(10))));
        assert_eq!(due(10, 104), Some((100, Timestamp(10))));
        assert_eq!(due(11, 104), Some((102, Timestamp(20))));
        assert_eq!(due(20, 104), Some((102, Timestamp(20))));
        assert_eq!(due(25, 104), Some((104, Timestamp(30))));
        // Not yet by `upto`, or never in this run of packets.
        assert_eq!(due(25, 103), None);
        assert_eq!(due(31, 104), None);
        // Positions outside the clock's run.
        assert_eq!(due(5, 99), None);
        assert_eq!(due(5, 200), None);
        assert_eq!(c.now_at(103), Some(Timestamp(20)));
        assert_eq!(c.now_at(105), None);
    }

    #[test]
    fn events_order_by_position_then_step_then_tie_break() {
        let at = |at, phase, k1, k2| Order { at, phase, k1, k2 };
        let mut v = [
            at(7, Phase::Opened, 0, 0),
            at(7, Phase::Lingered, 5, 3),
            at(6, Phase::Closed, 0, 0),
            at(7, Phase::Lingered, 5, 2),
            at(7, Phase::Idle, 0, 1),
            at(u64::MAX, Phase::End, 0, 4),
            at(7, Phase::Replaced, 0, 0),
        ];
        v.sort();
        let phases: Vec<(u64, Phase, u64)> = v.iter().map(|o| (o.at, o.phase, o.k2)).collect();
        assert_eq!(
            phases,
            vec![
                (6, Phase::Closed, 0),
                (7, Phase::Lingered, 2),
                (7, Phase::Lingered, 3),
                (7, Phase::Idle, 1),
                (7, Phase::Replaced, 0),
                (7, Phase::Opened, 0),
                (u64::MAX, Phase::End, 4),
            ]
        );
    }
}
