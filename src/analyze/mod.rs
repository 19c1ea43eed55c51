//! The per-packet driver: decodes each frame, finds or creates its
//! connection in the table, updates the connection's TCP state (and, as they
//! are added, its protocol analyzers), and turns finished connections into
//! [`ConnectionRecord`]s handed to a [`RecordSink`].
//!
//! Does not read files or write output: sources feed it, sinks receive its
//! records.

pub mod h2;
pub mod http;
pub mod stats;
pub mod streams;
pub mod summary;
pub mod tls;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::decode::{decode, Decoded, TcpSegment};
use crate::flow::tcp::TcpConn;
use crate::flow::FlowKey;
use crate::record::{
    Anomalies, AnomalyKind, ClientBy, CloseKind, ConnectionRecord, Instant, Peak, Side, Summary,
    TcpInfo,
};
use crate::source::{RawPacket, SourceInfo};
use crate::time::Timestamp;
use streams::{Analyzers, Streams};
use summary::SummaryBuilder;

/// How long a closed connection (both FINs, or RST) stays in the table to
/// collect its last ACKs before it is finalised. Zeek uses the same delay.
pub const CLOSE_LINGER: Duration = Duration::from_secs(5);

/// How long a finalised closed connection's tuple is remembered, so stray
/// packets after the linger (retransmitted FINs, late ACKs) are counted as
/// `late_packet` instead of opening a phantom connection. Twice Linux's
/// TIME_WAIT.
pub const TOMBSTONE: Duration = Duration::from_secs(120);

/// What to analyze and how.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Keep only connections with one of these ports on either side (empty: all).
    pub ports: Vec<u16>,
    /// Keep only connections with one of these addresses on either side (empty: all).
    pub hosts: Vec<IpAddr>,
    /// Finalise a connection after this long without packets (capture time).
    pub idle_timeout: Option<Duration>,
    /// Per-direction cap on buffered stream bytes (out-of-order data, TLS
    /// handshake messages); 0 means the default, [`DEFAULT_STREAM_BUFFER`].
    pub stream_buffer: usize,
    /// Requests listed per connection; `None` means the default, [`DEFAULT_REQUESTS_LISTED`].
    pub max_requests_listed: Option<usize>,
    /// Connections tracked at once; 0 means the default, [`DEFAULT_MAX_CONNECTIONS`].
    /// Beyond it the least recently active connection is finalised (`evicted`).
    pub max_connections: usize,
}

/// Default cap on connections tracked at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 500_000;

/// Default number of requests listed per connection.
pub const DEFAULT_REQUESTS_LISTED: usize = 100;

/// Default per-direction cap on buffered stream bytes.
pub const DEFAULT_STREAM_BUFFER: usize = 256 * 1024;

impl Config {
    fn max_connections(&self) -> usize {
        if self.max_connections == 0 {
            DEFAULT_MAX_CONNECTIONS
        } else {
            self.max_connections
        }
    }

    fn requests_listed(&self) -> usize {
        self.max_requests_listed.unwrap_or(DEFAULT_REQUESTS_LISTED)
    }

    fn stream_cap(&self) -> usize {
        if self.stream_buffer == 0 {
            DEFAULT_STREAM_BUFFER
        } else {
            self.stream_buffer
        }
    }

    fn keeps(&self, seg: &TcpSegment<'_>) -> bool {
        let port_ok = self.ports.is_empty()
            || self.ports.contains(&seg.src.port())
            || self.ports.contains(&seg.dst.port());
        let host_ok = self.hosts.is_empty()
            || self.hosts.contains(&seg.src.ip())
            || self.hosts.contains(&seg.dst.ip());
        port_ok && host_ok
    }
}

/// Receives each connection record as soon as it is final.
pub trait RecordSink {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()>;
}

impl RecordSink for Vec<ConnectionRecord> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.push(rec);
        Ok(())
    }
}

/// Keeps only the `limit` connections with the smallest ids (the first to
/// start), so a table of the first 50 connections of a huge capture does not
/// hold every record in memory.
pub struct FirstById {
    limit: usize,
    heap: std::collections::BinaryHeap<ById>,
    /// Records seen in all.
    pub total: u64,
}

struct ById(ConnectionRecord);

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}
impl Eq for ById {}
impl PartialOrd for ById {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ById {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.id.cmp(&other.0.id)
    }
}

impl FirstById {
    pub fn new(limit: usize) -> FirstById {
        FirstById {
            limit,
            heap: std::collections::BinaryHeap::new(),
            total: 0,
        }
    }

    /// The kept records in id order.
    pub fn into_sorted(self) -> Vec<ConnectionRecord> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|r| r.0)
            .collect()
    }
}

impl RecordSink for FirstById {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.total += 1;
        if self.heap.len() < self.limit {
            self.heap.push(ById(rec));
        } else if self.heap.peek().is_some_and(|top| rec.id < top.0.id) {
            self.heap.pop();
            self.heap.push(ById(rec));
        }
        Ok(())
    }
}

/// The connection table's hasher: fast, with a random seed per process
/// (captures are hostile input, so the seed keeps crafted tuples from
/// colliding on purpose).
type FastHash = foldhash::fast::RandomState;

/// One TCP connection being tracked.
struct Connection {
    id: u64,
    client: SocketAddr,
    server: SocketAddr,
    client_by: ClientBy,
    /// The first packet came from the server.
    flipped: bool,
    start: Timestamp,
    last: Timestamp,
    tcp: TcpConn,
    /// Reassembly and stream analyzers: made with the first payload byte
    /// (so half-open connections stay small), dropped once none wants more.
    streams: Option<Box<Streams>>,
    /// Kept when `streams` is dropped early (boxed: most connections never need one).
    analyzers: Option<Box<Analyzers>>,
    /// Counted among the open connections (until it closes or is finalised).
    counted_open: bool,
    anomalies: Anomalies,
}

impl Connection {
    fn new(id: u64, ts: Timestamp, seg: &TcpSegment<'_>) -> Connection {
        let (client, server, client_by) = if seg.flags.syn() && !seg.flags.ack() {
            (seg.src, seg.dst, ClientBy::Syn)
        } else if seg.flags.syn() && seg.flags.ack() {
            (seg.dst, seg.src, ClientBy::SynAck)
        } else if seg.dst.port() > seg.src.port() {
            // Mid-stream: servers listen on the lower port, clients get ephemeral ones.
            (seg.dst, seg.src, ClientBy::Guess)
        } else {
            (seg.src, seg.dst, ClientBy::Guess)
        };
        Connection {
            id,
            client,
            server,
            client_by,
            flipped: client != seg.src,
            start: ts,
            last: ts,
            tcp: TcpConn::new(),
            streams: None,
            analyzers: None,
            counted_open: true,
            anomalies: Anomalies::default(),
        }
    }

    /// Feeds the stream analyzers; stops reassembling when none wants more.
    fn stream(&mut self, side: Side, ts: Timestamp, seg: &TcpSegment<'_>, config: &Config) {
        if self.streams.is_none() && self.analyzers.is_none() && seg.payload_len > 0 {
            let mut streams = Streams::new(config.stream_cap(), config.requests_listed());
            let (client_isn, server_isn) = self.tcp.isns();
            streams.start_at(client_isn, server_isn);
            self.streams = Some(Box::new(streams));
        }
        let Some(streams) = self.streams.as_mut() else {
            return;
        };
        streams.segment(side, ts, seg);
        if !streams.analyzers.wants_data() {
            self.stop_streams();
        }
    }

    fn stop_streams(&mut self) {
        if let Some(streams) = self.streams.take() {
            self.analyzers = Some(Box::new(streams.finish(&mut self.anomalies)));
        }
    }

    fn side_of(&self, seg: &TcpSegment<'_>) -> Side {
        if seg.src == self.client {
            Side::Client
        } else {
            Side::Server
        }
    }

    fn into_record(mut self, capture_start: Timestamp, unclosed: CloseKind) -> ConnectionRecord {
        let at = |t: Timestamp| Instant {
            ts: t.as_secs_f64(),
            at: t.secs_since(capture_start),
        };
        self.stop_streams();
        let origin = self.tcp.syn_time().unwrap_or(self.start);
        let tls = self
            .analyzers
            .as_ref()
            .and_then(|a| a.tls_info(origin, &at));
        let http = match &self.analyzers {
            Some(a) => a.http_info(&at),
            None => Analyzers::new(0, 0).http_info(&at),
        };
        let tcp = &self.tcp;
        ConnectionRecord {
            id: self.id,
            client: self.client.to_string(),
            server: self.server.to_string(),
            client_by: self.client_by,
            partial: !tcp.syn_seen(),
            start: at(self.start),
            end: at(self.last),
            duration: self.last.secs_since(self.start),
            tcp: TcpInfo {
                handshake: tcp.handshake(at),
                packets: tcp.packets,
                bytes: tcp.bytes,
                retransmissions: tcp.retransmissions,
                state: tcp.state().to_string(),
                history: tcp.history(self.flipped),
            },
            tls,
            http,
            close: tcp.close(unclosed, at),
            anomalies: self.anomalies,
        }
    }
}

/// Running totals, for a status line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub open: u64,
    pub finished: u64,
    pub requests: u64,
    pub tcp_handshakes: u64,
}

/// The connection table and everything learned so far.
pub struct Analyzer {
    config: Config,
    table: HashMap<FlowKey, Connection, FastHash>,
    /// Closed connections waiting out [`CLOSE_LINGER`], oldest first.
    closing: VecDeque<(Timestamp, FlowKey, u64)>,
    /// Connections in order of (roughly) last activity, oldest first: a lazy
    /// LRU for eviction. Entries are re-queued when found to be stale.
    lru: VecDeque<(Timestamp, FlowKey, u64)>,
    /// Tuples of closed, finalised connections and when to forget them.
    tombstones: HashMap<FlowKey, Timestamp, FastHash>,
    tombstone_order: VecDeque<(Timestamp, FlowKey)>,
    next_id: u64,
    /// The latest timestamp seen (never goes backwards).
    now: Option<Timestamp>,
    next_idle_scan: Option<Timestamp>,
    summary: SummaryBuilder,
    /// Connections opened and not yet closed or finalised.
    open_now: u64,
}

impl Analyzer {
    pub fn new(config: Config) -> Analyzer {
        Analyzer {
            config,
            table: HashMap::default(),
            closing: VecDeque::new(),
            lru: VecDeque::new(),
            tombstones: HashMap::default(),
            tombstone_order: VecDeque::new(),
            next_id: 1,
            now: None,
            next_idle_scan: None,
            summary: SummaryBuilder::default(),
            open_now: 0,
        }
    }

    /// Connections currently in the table.
    pub fn open_connections(&self) -> usize {
        self.table.len()
    }

    /// Feeds one captured frame; finished connections go to `sink`.
    pub fn packet(&mut self, raw: &RawPacket<'_>, sink: &mut dyn RecordSink) -> io::Result<()> {
        let ts = raw.ts;
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
        self.expire(now, sink)?;

        let (seg, anomaly) = match decode(raw) {
            Decoded::Tcp(seg, anomaly) => (seg, anomaly),
            Decoded::OtherIp | Decoded::NotIp => {
                self.summary.packets.skipped += 1;
                return Ok(());
            }
            Decoded::Bad(kind) => {
                self.summary.packets.skipped += 1;
                self.summary.anomalies.add(kind, 1);
                return Ok(());
            }
        };
        if !self.config.keeps(&seg) {
            self.summary.packets.filtered_out += 1;
            return Ok(());
        }
        self.summary.packets.tcp += 1;
        self.segment(ts, &seg, anomaly, sink)
    }

    fn segment(
        &mut self,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        anomaly: Option<AnomalyKind>,
        sink: &mut dyn RecordSink,
    ) -> io::Result<()> {
        let key = FlowKey::new(seg.src, seg.dst);
        let idle_ns = self
            .config
            .idle_timeout
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        // One lookup for the usual packet of a known connection.
        let (exists, replaced) = match self.table.get(&key) {
            Some(conn) if idle_ns.is_some_and(|idle| ts.nanos_since(conn.last) >= idle) => {
                (false, self.table.remove(&key).map(|c| (c, CloseKind::Idle)))
            }
            Some(conn) if conn.tcp.starts_new(conn.side_of(seg), seg) => {
                (false, self.table.remove(&key).map(|c| (c, CloseKind::Open)))
            }
            Some(_) => (true, None),
            None => (false, None),
        };
        if let Some((old, kind)) = replaced {
            self.finalize(old, kind, sink)?;
        }
        let mut created = false;
        if !exists {
            if !self.tombstones.is_empty() && self.tombstones.contains_key(&key) {
                if seg.flags.syn() && !seg.flags.ack() {
                    self.tombstones.remove(&key);
                } else {
                    self.summary.anomalies.add(AnomalyKind::LatePacket, 1);
                    return Ok(());
                }
            }
            self.make_room(sink)?;
            let id = self.next_id;
            self.next_id += 1;
            created = true;
            self.table.insert(key, Connection::new(id, ts, seg));
        }
        let Some(conn) = self.table.get_mut(&key) else {
            return Ok(());
        };
        conn.last = conn.last.max(ts);
        conn.start = conn.start.min(ts);
        let side = conn.side_of(seg);
        if side == Side::Client
            && seg.flags.syn()
            && !seg.flags.ack()
            && conn.client_by == ClientBy::SynAck
        {
            // The SYN was captured after its SYN-ACK.
            conn.client_by = ClientBy::Syn;
        }
        let notes = conn.tcp.on_segment(side, ts, seg);
        conn.stream(side, ts, seg, &self.config);
        if let Some(kind) = anomaly {
            conn.anomalies.add(kind, 1);
        }
        if notes.invalid_flags {
            conn.anomalies.add(AnomalyKind::InvalidTcpFlags, 1);
        }
        let closed_now = notes.closed_now && conn.counted_open;
        if closed_now {
            conn.counted_open = false;
        }
        if notes.closed_now {
            let deadline = Timestamp(ts.0.saturating_add(CLOSE_LINGER.as_nanos() as i64));
            self.closing.push_back((deadline, key, conn.id));
        }
        if created {
            self.lru.push_back((ts, key, conn.id));
            self.open_now += 1;
            if self.open_now > self.summary.peak.connections {
                let origin = self.summary.origin.unwrap_or(ts);
                self.summary.peak = Peak {
                    connections: self.open_now,
                    at: Some(Instant {
                        ts: ts.as_secs_f64(),
                        at: ts.secs_since(origin),
                    }),
                };
            }
        }
        if closed_now {
            self.open_now = self.open_now.saturating_sub(1);
        }
        Ok(())
    }

    /// Keeps the table under its cap: finalises the least recently active
    /// connection (half-open ones from a SYN flood are the usual victims).
    fn make_room(&mut self, sink: &mut dyn RecordSink) -> io::Result<()> {
        let cap = self.config.max_connections();
        // Each stale entry is re-queued at most once per eviction round.
        let mut budget = self.lru.len() + 1;
        while self.table.len() >= cap && budget > 0 {
            budget -= 1;
            let Some((seen, key, id)) = self.lru.pop_front() else {
                break;
            };
            let Some(conn) = self.table.get(&key).filter(|c| c.id == id) else {
                continue;
            };
            if conn.last > seen {
                self.lru.push_back((conn.last, key, id));
                continue;
            }
            if let Some(conn) = self.table.remove(&key) {
                self.summary
                    .anomalies
                    .add(AnomalyKind::EvictedConnection, 1);
                self.finalize(conn, CloseKind::Evicted, sink)?;
            }
        }
        Ok(())
    }

    /// Finalises connections whose linger or idle time has passed by `now`.
    fn expire(&mut self, now: Timestamp, sink: &mut dyn RecordSink) -> io::Result<()> {
        while let Some(&(deadline, key, id)) = self.closing.front() {
            if deadline > now {
                break;
            }
            self.closing.pop_front();
            if self.table.get(&key).is_some_and(|c| c.id == id) {
                if let Some(conn) = self.table.remove(&key) {
                    self.finalize(conn, CloseKind::Open, sink)?;
                    let forget = Timestamp(now.0.saturating_add(TOMBSTONE.as_nanos() as i64));
                    if self.tombstones.len() < self.config.max_connections() {
                        self.tombstones.insert(key, forget);
                        self.tombstone_order.push_back((forget, key));
                    }
                }
            }
        }
        while let Some(&(forget, key)) = self.tombstone_order.front() {
            if forget > now {
                break;
            }
            self.tombstone_order.pop_front();
            if self.tombstones.get(&key) == Some(&forget) {
                self.tombstones.remove(&key);
            }
        }
        let Some(idle) = self.config.idle_timeout else {
            return Ok(());
        };
        let idle_ns = i64::try_from(idle.as_nanos()).unwrap_or(i64::MAX);
        if self.next_idle_scan.is_some_and(|t| now < t) {
            return Ok(());
        }
        self.next_idle_scan = Some(Timestamp(
            now.0.saturating_add((idle_ns / 4).max(1_000_000_000)),
        ));
        let mut expired: Vec<(u64, FlowKey)> = self
            .table
            .iter()
            .filter(|(_, c)| now.nanos_since(c.last) >= idle_ns)
            .map(|(k, c)| (c.id, *k))
            .collect();
        expired.sort_unstable_by_key(|(id, _)| *id);
        for (_, key) in expired {
            if let Some(conn) = self.table.remove(&key) {
                self.finalize(conn, CloseKind::Idle, sink)?;
            }
        }
        Ok(())
    }

    fn finalize(
        &mut self,
        conn: Connection,
        unclosed: CloseKind,
        sink: &mut dyn RecordSink,
    ) -> io::Result<()> {
        if conn.counted_open {
            self.open_now = self.open_now.saturating_sub(1);
        }
        let start = self.summary.origin.unwrap_or(conn.start);
        let rec = conn.into_record(start, unclosed);
        self.summary.add_record(&rec);
        sink.record(rec)
    }

    /// Lets time pass without packets (live capture): finalises connections
    /// whose linger or idle time is over by `now`.
    pub fn tick(&mut self, now: Timestamp, sink: &mut dyn RecordSink) -> io::Result<()> {
        let now = self.now.map_or(now, |n| n.max(now));
        self.now = Some(now);
        self.expire(now, sink)
    }

    /// Connections open now, finished so far, requests and TCP handshakes
    /// in finished connections.
    pub fn progress(&self) -> Progress {
        let (finished, requests, tcp_handshakes) = self.summary.progress();
        Progress {
            open: self.table.len() as u64,
            finished,
            requests,
            tcp_handshakes,
        }
    }

    /// Finalises every connection still open (in id order) and returns the summary.
    pub fn finish(mut self, info: &SourceInfo, sink: &mut dyn RecordSink) -> io::Result<Summary> {
        let mut rest: Vec<Connection> = self.table.drain().map(|(_, c)| c).collect();
        rest.sort_unstable_by_key(|c| c.id);
        for conn in rest {
            self.finalize(conn, CloseKind::Open, sink)?;
        }
        Ok(self.summary.finish(info))
    }
}

#[cfg(test)]
mod size_tests {
    /// A SYN flood fills the table with half-open connections: each must stay
    /// small (streams and analyzers are boxed and made only with payload).
    #[test]
    fn half_open_connections_are_small() {
        let size = std::mem::size_of::<super::Connection>();
        assert!(size <= 400, "Connection is {size} bytes");
    }
}
