//! One shard of the connection table: the connections whose 4-tuples hash
//! to it, their TCP state and stream analyzers, close lingers, tombstones,
//! idle scans and eviction. A shard sees only its own packets, but every
//! packet's position and the capture-wide clock, so it can tell exactly at
//! which packet each timer fires; it reports what happened as [`Event`]s
//! keyed by that position, and the gatherer (`gather`) puts the events of
//! all shards back into the one order a single table would have produced.
//!
//! Does not number connections, keep the summary, or write records: that is
//! the gatherer's. Does not read packets or start threads.

use std::collections::VecDeque;

use super::connection::{Connection, Touched};
use super::summary::Tally;
use super::{Config, Encoder};
use crate::decode::{decode_with, Decoded, TcpSegment};
use crate::flow::FlowKey;
use crate::record::{AnomalyKind, CloseKind};
use crate::source::RawPacket;
use crate::time::Timestamp;

use super::{CLOSE_LINGER, FINISHED_LINGER};

mod counts;
mod order;
mod table;
#[cfg(test)]
mod tests;
mod timers;
mod tombstones;
use super::quic::QuicTable;
pub use counts::ShardCounts;
pub use order::{Clock, Done, Encoded, Event, Order, Phase};
use table::{Handle, Table};
use tombstones::Tombstones;

/// The connection table's hasher: fast, with a random seed per process
/// (captures are hostile input, so the seed keeps crafted tuples from
/// colliding on purpose).
pub(crate) type FastHash = foldhash::fast::RandomState;

/// Drops the entries of `queue` (each naming a connection by the handle
/// `entry` reads) whose connection has left the table, once the queue
/// holds more than twice as many entries as the table holds connections —
/// so that the queue follows the table, not every connection seen in its
/// span (amortised: this runs when it has doubled). An entry dropped would
/// have found nothing when taken.
fn forget_gone<T>(queue: &mut VecDeque<T>, table: &Table, entry: impl Fn(&T) -> Handle) {
    if queue.len() > 2 * table.len() + 1024 {
        queue.retain(|e| table.get(entry(e)).is_some());
    }
}

/// What the table held for a packet's tuple.
enum Found {
    /// Its connection, which took the packet.
    Known(Touched),
    /// A connection the packet does not belong to: idle too long, or a new
    /// SYN on a closed one (port reuse).
    Stale(CloseKind),
    Absent,
}

/// One shard's connection table and timers.
pub struct Shard {
    config: Config,
    /// Connections tracked at once in this shard.
    cap: usize,
    /// The connections, boxed, each holding its own tuple: a bucket is one
    /// pointer, so the table a packet's lookup probes (and a resize moves)
    /// stays small while closed connections linger in it.
    table: Table,
    /// Connections with both FINs sent waiting out [`CLOSE_LINGER`] (an RST
    /// finishes the close at once and goes to `finishing` only), by
    /// deadline (taken from the capture-wide clock, so it never
    /// decreases): (deadline, the connection's handle, position of the
    /// closing packet).
    closing: VecDeque<(Timestamp, Handle, u64)>,
    /// Connections whose close is over, waiting out [`FINISHED_LINGER`]
    /// (the same entries, the same order; a connection may be in both
    /// queues: the first deadline finalises it).
    finishing: VecDeque<(Timestamp, Handle, u64)>,
    /// `closing`'s length when it was last trimmed ([`Shard::trim_closing`]).
    closing_trimmed: usize,
    /// Connections in order of (roughly) last activity, oldest first: a lazy
    /// LRU for eviction. Entries are re-queued when found to be stale.
    lru: VecDeque<(Timestamp, Handle)>,
    /// Tuples of closed, finalised connections, remembered for
    /// [`TOMBSTONE`](super::TOMBSTONE).
    tombstones: Tombstones,
    /// When the next idle scan is due (`None`: at the first packet).
    next_idle_scan: Option<Timestamp>,
    evictions: u64,
    origin: Option<Timestamp>,
    pub counts: ShardCounts,
    /// The QUIC connection IDs seen (every QUIC datagram comes to the
    /// first shard: it hashes to 0, like all but TCP).
    quic: QuicTable,
    /// `-f`'s program, compiled for each link type as it comes.
    #[cfg(feature = "live")]
    filter: Option<crate::source::live::PacketFilter>,
    /// What happened since the gatherer last took the events, in order.
    events: Vec<Event>,
    /// At the end of the input: the connections left to finalise.
    ending: Option<Vec<Handle>>,
    /// Encodes each record as it is finalised (on this shard's thread).
    pub encoder: Option<Encoder>,
    /// Records finalised since the events were last taken…
    finished: usize,
    /// …and how many it may hold before its timers stop firing until they
    /// are taken ([`Shard::paused`]): unbounded unless told
    /// ([`Shard::hold_at_most`]).
    slice: usize,
}

impl Shard {
    /// A shard allowed `cap` connections at once.
    pub fn new(config: Config, cap: usize) -> Shard {
        let quic = QuicTable::new(
            config.keylog.clone(),
            config.requests_listed(),
            config.idle_timeout,
        );
        #[cfg(feature = "live")]
        let filter = config
            .filter
            .as_ref()
            .map(crate::source::live::PacketFilter::new);
        Shard {
            config,
            cap: cap.max(1),
            table: Table::default(),
            closing: VecDeque::new(),
            closing_trimmed: 0,
            finishing: VecDeque::new(),
            lru: VecDeque::new(),
            tombstones: Tombstones::new(cap.max(1)),
            next_idle_scan: None,
            evictions: 0,
            origin: None,
            counts: ShardCounts::default(),
            #[cfg(feature = "live")]
            filter,
            quic,
            events: Vec::new(),
            ending: None,
            encoder: None,
            finished: 0,
            slice: usize::MAX,
        }
    }

    /// Lets the shard hold at most about `records` finalised records (more
    /// only by those one packet or one idle scan finalises) before it
    /// pauses — its timers stop firing and [`Shard::packet`] and
    /// [`Shard::advance`] return false — until its events are taken. Several
    /// threads use it so that a shard's records wait for the gatherer a
    /// slice at a time when thousands of lingers run out at one packet.
    pub fn hold_at_most(&mut self, records: usize) {
        self.slice = records.max(1);
    }

    /// Whether the shard holds as many records as it may
    /// ([`Shard::hold_at_most`]): it does nothing more until they are taken.
    pub fn paused(&self) -> bool {
        self.finished >= self.slice
    }

    /// What happened since the events were last taken, in order.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.finished = 0;
        std::mem::take(&mut self.events)
    }

    /// [`Shard::take_events`], moved to the end of `into`: the shard keeps
    /// its buffer's room (one thread takes the events after every packet
    /// that made any, and a new buffer each time was an allocation and a
    /// free for most connections' open, close and end).
    pub fn move_events(&mut self, into: &mut Vec<Event>) {
        self.finished = 0;
        into.append(&mut self.events);
    }

    /// Feeds the packet at position `index` (which `clock` covers); false
    /// if the shard paused first ([`Shard::paused`]): the packet is to be
    /// fed again once the events are taken.
    pub fn packet(&mut self, index: u64, raw: &RawPacket<'_>, clock: &Clock<'_>) -> bool {
        if !self.advance(index, clock) {
            return false;
        }
        #[cfg(feature = "live")]
        if let Some(filter) = &mut self.filter {
            let verdict = filter.matches(raw);
            if verdict.is_none() {
                *self.counts.unfilterable.entry(raw.link.0).or_default() += 1;
            }
            if verdict != Some(true) {
                self.counts.filtered_out += 1;
                return true;
            }
        }
        let now = clock.now_at(index).unwrap_or(raw.ts);
        // Borrowed, not moved out: moving the segment out of the enum
        // copied it through the stack in pieces, and reading those back as
        // wider words stalled (a failed store forward; one thread took 6 %
        // longer on a large capture).
        let decoded = decode_with(raw, &self.config.udp_tunnels);
        let (seg, anomaly) = match &decoded {
            Decoded::Tcp(seg, anomaly) => (seg, *anomaly),
            Decoded::OtherIp | Decoded::NotIp => {
                self.counts.skipped += 1;
                return true;
            }
            Decoded::Quic(q) => {
                self.counts.skipped += 1;
                if self.config.keeps_between(q.src, q.dst, q.overlay) {
                    self.counts.quic += u64::from(q.long);
                    let origin = self.origin.unwrap_or(raw.ts);
                    self.quic.expire(now);
                    if self.quic.datagram(q, raw.ts, origin) {
                        self.counts.quic_connections += 1;
                    }
                    self.quic_ended(index);
                }
                return true;
            }
            Decoded::Bad(kind) => {
                self.counts.skipped += 1;
                self.counts.anomalies.add(*kind, 1);
                return true;
            }
        };
        if !self.config.keeps(seg) {
            self.counts.filtered_out += 1;
            return true;
        }
        self.counts.tcp += 1;
        self.segment(index, raw.ts, now, seg, anomaly);
        true
    }

    /// Opens a connection with the packet at `index` on a tuple with none
    /// (unless a tombstone says the packet is a late one of a finalised
    /// connection) and feeds it the packet.
    fn open(
        &mut self,
        index: u64,
        ts: Timestamp,
        now: Timestamp,
        (key, hash): (FlowKey, u64),
        (seg, src_first): (&TcpSegment<'_>, bool),
        anomaly: Option<AnomalyKind>,
    ) -> Option<Touched> {
        if self.tombstones.holds(&key, now) {
            if seg.flags.syn() && !seg.flags.ack() {
                self.tombstones.dig_up(&key);
            } else {
                self.counts.anomalies.add(AnomalyKind::LatePacket, 1);
                return None;
            }
        }
        self.make_room(index);
        let conn = Box::new(Connection::new(index, ts, seg, (key, src_first)));
        let conn = self.table.insert(hash, conn);
        Some(conn.packet(ts, (seg, src_first), anomaly, &self.config))
    }

    fn segment(
        &mut self,
        index: u64,
        ts: Timestamp,
        now: Timestamp,
        seg: &TcpSegment<'_>,
        anomaly: Option<AnomalyKind>,
    ) {
        let (key, src_first) = FlowKey::ordered(seg.src, seg.dst);
        let key = key.within(seg.overlay);
        let idle_ns = self.idle_ns();
        // One lookup for the usual packet of a known connection.
        let hash = self.table.hash(&key);
        let found = match self.table.get_mut(hash, &key) {
            Some(conn) if idle_ns.is_some_and(|idle| ts.nanos_since(conn.last) >= idle) => {
                Found::Stale(CloseKind::Idle)
            }
            Some(conn) if conn.tcp.starts_new(conn.side(src_first), seg) => {
                Found::Stale(CloseKind::Open)
            }
            Some(conn) => Found::Known(conn.packet(ts, (seg, src_first), anomaly, &self.config)),
            None => Found::Absent,
        };
        let known = match found {
            Found::Known(touched) => Some(touched),
            Found::Stale(kind) => {
                if let Some(old) = self.table.remove(hash, &key) {
                    let order = Order {
                        at: index,
                        phase: Phase::Replaced,
                        k1: 0,
                        k2: 0,
                    };
                    self.finalize(old, kind, order);
                }
                None
            }
            Found::Absent => None,
        };
        let (touched, created) = match known {
            Some(touched) => (touched, false),
            None => match self.open(index, ts, now, (key, hash), (seg, src_first), anomaly) {
                Some(touched) => (touched, true),
                None => return,
            },
        };
        let Touched {
            id,
            notes,
            closed_now,
        } = touched;
        let handle = Table::handle(hash, id);
        if notes.closed_now && !notes.finished_now {
            // (An RST closes and finishes at once: its one timer is the
            // shorter one below.)
            self.closing
                .push_back((now.after(CLOSE_LINGER), handle, index));
            // Most closes are over a moment later (the last FIN
            // acknowledged) and go after 1 s, leaving their 5 s entry here.
            self.trim_closing(now);
        }
        if notes.finished_now {
            // The close is over (each FIN acknowledged, or an RST): the
            // connection waits only for the peers' last delayed ACKs and
            // packets in flight, not for retransmissions, so that a busy
            // capture's closed connections do not pile up for five seconds.
            self.finishing
                .push_back((now.after(FINISHED_LINGER), handle, index));
        }
        let order = |phase| Order {
            at: index,
            phase,
            k1: 0,
            k2: 0,
        };
        if created {
            self.lru.push_back((ts, handle));
            forget_gone(&mut self.lru, &self.table, |e| e.1);
            self.events.push(Event::Opened {
                order: order(Phase::Opened),
                ts,
            });
        }
        if closed_now {
            self.events.push(Event::Closed {
                order: order(Phase::Closed),
            });
        }
    }

    /// Drops the close-queue entries that can no longer fire, once the
    /// queue has doubled since it was last trimmed (so the work is
    /// amortised): their connection is gone, or its close is over — then
    /// its 1 s deadline, at most [`FINISHED_LINGER`] after `now` (the
    /// clock never goes back), comes strictly before the entry's, and
    /// finalises it first. At 50 000 closes a second the queue held five
    /// seconds of entries for connections that had finished after one.
    fn trim_closing(&mut self, now: Timestamp) {
        if self.closing.len() <= 2 * self.closing_trimmed + 1024 {
            return;
        }
        let soon = now.after(FINISHED_LINGER);
        let table = &self.table;
        self.closing.retain(|&(deadline, handle, _)| {
            table
                .get(handle)
                .is_some_and(|c| !(c.tcp.is_finished() && deadline > soon))
        });
        self.closing_trimmed = self.closing.len();
    }

    /// Keeps the table under its cap: finalises the least recently active
    /// connection (half-open ones from a SYN flood are the usual victims).
    fn make_room(&mut self, index: u64) {
        // Each stale entry is re-queued at most once per eviction round.
        let mut budget = self.lru.len() + 1;
        while self.table.len() >= self.cap && budget > 0 {
            budget -= 1;
            let Some((seen, handle)) = self.lru.pop_front() else {
                break;
            };
            let Some(conn) = self.table.get(handle) else {
                continue;
            };
            if conn.last > seen {
                self.lru.push_back((conn.last, handle));
                continue;
            }
            if let Some(conn) = self.table.take(handle) {
                self.counts.anomalies.add(AnomalyKind::EvictedConnection, 1);
                self.evictions += 1;
                let order = Order {
                    at: index,
                    phase: Phase::Evicted,
                    k1: 0,
                    k2: self.evictions,
                };
                self.finalize(conn, CloseKind::Evicted, order);
            }
        }
    }

    fn finalize(&mut self, conn: Box<Connection>, unclosed: CloseKind, order: Order) {
        let was_open = conn.counted_open;
        let origin = self.origin.unwrap_or(conn.start);
        let (rec, aside) = conn.into_record(origin, unclosed);
        let tally = Tally::of(&rec, aside);
        // Encoded here, the record waits for the gatherer as its text (and
        // is dropped on this thread, which allocated it); a shard holds at
        // most a slice of them (`hold_at_most`).
        let done = match self.encoder.and_then(|encode| encode(&rec)) {
            Some(text) => Done::Encoded(Box::new(Encoded {
                id: rec.id,
                tally,
                text,
            })),
            None => Done::Record(Box::new((rec, tally))),
        };
        self.finished += 1;
        self.events.push(Event::Finished {
            order,
            was_open,
            done,
        });
    }

    /// Finalises up to `max` of the connections still open at the end of
    /// the input, in order of their first packets (a few at a time, so the
    /// records of a large table are not all held at once); false when none
    /// is left.
    pub fn finish_some(&mut self, max: usize) -> bool {
        let ending = self.ending.get_or_insert_with(|| {
            let mut rest = self.table.handles(|_| true);
            // Last first: popped from the end.
            rest.sort_unstable_by_key(|h| std::cmp::Reverse(h.id));
            rest
        });
        let mut batch = Vec::with_capacity(max.min(ending.len()));
        while batch.len() < max {
            let Some(handle) = ending.pop() else {
                break;
            };
            batch.push(handle);
        }
        let more = !ending.is_empty();
        for handle in batch {
            if let Some(conn) = self.table.take(handle) {
                let order = Order {
                    at: u64::MAX,
                    phase: Phase::End,
                    k1: 0,
                    k2: conn.id,
                };
                self.finalize(conn, CloseKind::Open, order);
            }
        }
        if !more {
            self.table.release();
            if self.counts.quic_result.is_none() {
                self.counts.quic_result = self.quic.finish().map(Box::new);
                self.quic_ended(u64::MAX);
            }
        }
        more
    }
}
