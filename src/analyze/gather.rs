//! The gatherer: takes the [`Event`]s of one or more shards in the order a
//! single connection table would have produced them, numbers connections in
//! order of their first packets, tracks how many are open at once, folds
//! finished records into the summary and hands them to the sink. It also
//! keeps the capture-wide clock and packet counts, which it sees for every
//! packet read.
//!
//! Does not decode packets or keep per-connection state beyond the mapping
//! from a connection's first packet to its number and time while it is
//! open.

use std::collections::BTreeMap;
use std::io;

use super::shard::{Done, Event, ShardCounts};
use super::summary::SummaryBuilder;
use super::{instant, Progress, Reading, RecordSink};
use crate::record::{AnomalyKind, Peak, Selection, Summary};
use crate::source::{PacketSource, RawPacket, SourceInfo};
use crate::time::Timestamp;

#[derive(Default)]
pub struct Gather {
    pub summary: SummaryBuilder,
    next_id: u64,
    /// Open connections: position of the first packet → connection number
    /// and the time of that packet. In order of position, so the first is
    /// the oldest, which bounds the marks the summary may sweep across
    /// connections (one map, where a hash map and a set by time held some
    /// 3 MiB more at 300 000 short connections, 50 000 a second).
    ids: BTreeMap<u64, (u64, Timestamp)>,
    /// Connections opened and not yet closed or finalised.
    open_now: u64,
    /// The latest timestamp seen (never goes backwards).
    now: Option<Timestamp>,
    /// Packets read so far: the position of the latest one.
    seen: u64,
    /// What the run keeps, for the summary.
    selection: Option<Selection>,
}

impl Gather {
    /// A gatherer whose summary says what `selection` kept, and counts
    /// its series in intervals of `interval` (`None`: chosen to fit).
    pub fn new(selection: Option<Selection>, interval: Option<std::time::Duration>) -> Gather {
        Gather {
            next_id: 1,
            selection,
            summary: SummaryBuilder::with_interval(interval),
            ..Gather::default()
        }
    }

    /// Notes a packet read from the input; returns its position (1-based)
    /// and the capture-wide clock after it.
    pub fn saw_packet(&mut self, raw: &RawPacket<'_>) -> (u64, Timestamp) {
        let ts = raw.ts;
        self.seen += 1;
        self.summary.packets.total += 1;
        self.summary.packets.bytes += u64::from(raw.orig_len);
        if self.now.is_some_and(|now| ts < now) {
            self.summary
                .anomalies
                .add(AnomalyKind::TimestampBackwards, 1);
        }
        self.summary.saw_time(ts);
        let now = self.now.map_or(ts, |n| n.max(ts));
        self.now = Some(now);
        (self.seen, now)
    }

    /// Packets read so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Lets time pass without packets; returns the latest packet's position
    /// and the clock.
    pub fn tick(&mut self, now: Timestamp) -> (u64, Timestamp) {
        let now = self.now.map_or(now, |n| n.max(now));
        self.now = Some(now);
        (self.seen, now)
    }

    /// The first packet's timestamp (or `fallback` before any packet).
    pub fn origin(&self, fallback: Timestamp) -> Timestamp {
        self.summary.origin.unwrap_or(fallback)
    }

    /// Applies one event; events must come in their [`super::shard::Order`].
    pub fn apply(&mut self, event: Event, sink: &mut dyn RecordSink) -> io::Result<()> {
        match event {
            Event::Opened { order, ts } => {
                let id = self.next_id;
                self.next_id += 1;
                self.ids.insert(order.at, (id, ts));
                self.open_now += 1;
                if self.open_now > self.summary.peak.connections {
                    let origin = self.origin(ts);
                    self.summary.peak = Peak {
                        connections: self.open_now,
                        at: Some(instant(ts, origin)),
                    };
                }
                Ok(())
            }
            Event::Closed { .. } => {
                self.open_now = self.open_now.saturating_sub(1);
                Ok(())
            }
            Event::Quic { record, .. } => {
                self.summary.add_quic(&record);
                sink.quic(&record)
            }
            Event::Finished { was_open, done, .. } => {
                if was_open {
                    self.open_now = self.open_now.saturating_sub(1);
                }
                match done {
                    Done::Record(done) => {
                        let (mut rec, mut tally) = *done;
                        rec.id = self.number(rec.id);
                        self.tally(&mut tally, rec.id);
                        sink.record(rec)
                    }
                    Done::Encoded(mut encoded) => {
                        let id = self.number(encoded.id);
                        self.tally(&mut encoded.tally, id);
                        sink.record_encoded(id, &encoded.text)
                    }
                }
            }
        }
    }

    /// Folds finished connection `id` into the summary, its marks swept
    /// up to the first packet of the oldest connection still open.
    fn tally(&mut self, tally: &mut super::summary::Tally, id: u64) {
        self.summary.add(tally);
        tally.marks.numbered(id);
        // Timestamps going backwards can leave an older one behind the
        // first: the summary counts the marks that then come late.
        let horizon = match self.ids.first_key_value() {
            Some((_, &(_, ts))) => ts.0.saturating_sub(self.origin(ts).0),
            None => i64::MAX,
        };
        self.summary.marks(&mut tally.marks, horizon);
    }

    /// The connection number of the connection whose first packet was at
    /// position `first`.
    fn number(&mut self, first: u64) -> u64 {
        match self.ids.remove(&first) {
            Some((id, _)) => id,
            None => {
                // Not reachable: every connection opens before it finishes.
                let id = self.next_id;
                self.next_id += 1;
                id
            }
        }
    }

    /// Applies a run of events already in order.
    pub fn apply_all(
        &mut self,
        events: impl IntoIterator<Item = Event>,
        sink: &mut dyn RecordSink,
    ) -> io::Result<()> {
        for event in events {
            self.apply(event, sink)?;
        }
        Ok(())
    }

    /// Running totals for a status line (`open`: numbered and not yet
    /// finished — open, or waiting out the linger after their close).
    pub fn progress(&self) -> Progress {
        let (finished, requests, tcp_handshakes) = self.summary.progress();
        Progress {
            open: self.ids.len() as u64,
            finished,
            requests,
            tcp_handshakes,
        }
    }

    /// How far `source` has been read, and [`Gather::progress`].
    pub fn reading(&self, source: &dyn PacketSource) -> Reading {
        let (read, size) = source.progress();
        Reading {
            read,
            size,
            so_far: self.progress(),
        }
    }

    /// The summary, with the shards' counts added.
    pub fn finish(mut self, counts: &ShardCounts, info: &SourceInfo) -> Summary {
        self.summary.packets.tcp += counts.tcp;
        self.summary.packets.skipped += counts.skipped;
        self.summary.packets.quic += counts.quic;
        self.summary.quic_connections += counts.quic_connections;
        self.summary.quic = counts.quic_result.as_deref().cloned();
        self.summary.packets.filtered_out += counts.filtered_out;
        self.summary.unfilterable.clone_from(&counts.unfilterable);
        self.summary.packets.fragments += counts.fragments;
        self.summary.anomalies.merge(&counts.anomalies);
        let mut summary = self.summary.finish(info);
        if let Some(sel) = &self.selection {
            let left_out = summary.packets.filtered_out;
            if summary.connections == 0 && summary.quic_connections == 0 && left_out > 0 {
                summary.warnings.push(format!(
                    "only {} kept no connection ({left_out} frames left out): is that the port, host or filter meant?",
                    sel.describe()
                ));
            }
        }
        summary.selection = self.selection;
        summary
    }
}
