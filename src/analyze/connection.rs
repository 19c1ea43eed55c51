//! One tracked TCP connection: its endpoints, TCP state, and the stream
//! analyzers made with its first payload byte; what it becomes when it
//! closes (its findings, without the analyzers) and when it is finalised
//! (a [`ConnectionRecord`]).
//!
//! Does not know about the table, timers or other connections: that is
//! `shard`.

use std::net::SocketAddr;

use super::streams::{Analyzers, HttpFacts, Streams};
use super::tls::Findings;
use super::{instant, Config};
use crate::decode::TcpSegment;
use crate::flow::tcp::{SegmentNotes, TcpConn};
use crate::flow::FlowKey;
use crate::record::{Anomalies, AnomalyKind, ClientBy, CloseKind, ConnectionRecord, Side, TcpInfo};
use crate::time::Timestamp;

/// One TCP connection being tracked.
pub(super) struct Connection {
    /// The position of its first packet (the gatherer numbers connections).
    pub(super) id: u64,
    pub(super) client_by: ClientBy,
    /// Its tuple and overlay network: the connection table's key, kept
    /// here rather than beside it in the table (`shard::table`), and the
    /// only copy of its endpoints (72 bytes a connection less than
    /// keeping them beside it as addresses).
    key: FlowKey,
    /// The client is the key's first endpoint.
    client_first: bool,
    /// The first packet came from the server.
    pub(super) flipped: bool,
    pub(super) start: Timestamp,
    pub(super) last: Timestamp,
    pub(super) tcp: TcpConn,
    /// Reassembly and stream analyzers: made with the first payload byte
    /// (so half-open connections stay small), dropped once none wants more.
    pub(super) streams: Option<Box<Streams>>,
    /// Kept when `streams` is dropped early (boxed: most connections never need one).
    pub(super) analyzers: Option<Box<Analyzers>>,
    /// What the analyzers found, taken when the connection closed so the
    /// analyzers need not linger with it.
    pub(super) facts: Option<Box<Facts>>,
    /// Counted among the open connections (until it closes or is finalised).
    pub(super) counted_open: bool,
    pub(super) anomalies: Anomalies,
}

impl Connection {
    /// Opened by `seg` at `ts`, on tuple `key` (the table's key for `seg`,
    /// whose first endpoint is `seg`'s source if `src_first`).
    pub(super) fn new(
        id: u64,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        (key, src_first): (FlowKey, bool),
    ) -> Connection {
        // Whether the client is the packet's destination, and how that was decided.
        let (to_client, client_by) = if seg.flags.syn() && !seg.flags.ack() {
            (false, ClientBy::Syn)
        } else if seg.flags.syn() && seg.flags.ack() {
            (true, ClientBy::SynAck)
        } else if seg.dst.port() > seg.src.port() {
            // Mid-stream: servers listen on the lower port, clients get ephemeral ones.
            (true, ClientBy::Guess)
        } else {
            (false, ClientBy::Guess)
        };
        // When both ends are the same address and port, the source is the
        // client and the key's first endpoint (`ordered`), for every packet.
        let flipped = to_client && seg.dst != seg.src;
        let client_first = if flipped { !src_first } else { src_first };
        Connection {
            id,
            client_by,
            key,
            client_first,
            flipped,
            start: ts,
            last: ts,
            tcp: TcpConn::new(),
            streams: None,
            analyzers: None,
            facts: None,
            counted_open: true,
            anomalies: Anomalies::default(),
        }
    }

    /// Takes a packet of this connection captured at `ts`: its TCP state,
    /// its streams, its anomalies; at the close, drops the analyzers
    /// (keeping their findings, with `origin` the capture's first packet).
    pub(super) fn packet(
        &mut self,
        ts: Timestamp,
        (seg, src_first): (&TcpSegment<'_>, bool),
        anomaly: Option<AnomalyKind>,
        config: &Config,
        origin: Option<Timestamp>,
    ) -> Touched {
        self.last = self.last.max(ts);
        self.start = self.start.min(ts);
        let side = self.side(src_first);
        if side == Side::Client
            && seg.flags.syn()
            && !seg.flags.ack()
            && self.client_by == ClientBy::SynAck
        {
            // The SYN was captured after its SYN-ACK.
            self.client_by = ClientBy::Syn;
        }
        let notes = self.tcp.on_segment(side, ts, seg);
        self.stream(side, ts, seg, config);
        if let Some(kind) = anomaly {
            self.anomalies.add(kind, 1);
        }
        if notes.invalid_flags {
            self.anomalies.add(AnomalyKind::InvalidTcpFlags, 1);
        }
        let closed_now = notes.closed_now && self.counted_open;
        if closed_now {
            self.counted_open = false;
        }
        if notes.closed_now {
            // The buffers and analyzers can go now rather than after the linger.
            self.settle(origin.unwrap_or(self.start));
        }
        Touched {
            id: self.id,
            notes,
            closed_now,
        }
    }

    /// Feeds the stream analyzers; stops reassembling when none wants more.
    pub(super) fn stream(
        &mut self,
        side: Side,
        ts: Timestamp,
        seg: &TcpSegment<'_>,
        config: &Config,
    ) {
        if self.facts.is_some() {
            return;
        }
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

    pub(super) fn stop_streams(&mut self) {
        if let Some(streams) = self.streams.take() {
            self.analyzers = Some(streams.finish(&mut self.anomalies));
        }
    }

    /// Its tuple (the table's key).
    pub(super) fn key(&self) -> &FlowKey {
        &self.key
    }

    /// The side that sent a packet whose source is the key's first
    /// endpoint if `src_first`.
    pub(super) fn side(&self, src_first: bool) -> Side {
        if src_first == self.client_first {
            Side::Client
        } else {
            Side::Server
        }
    }

    /// The analyzers' findings, final once their streams have ended.
    pub(super) fn facts(&mut self, capture_start: Timestamp) -> Facts {
        if let Some(facts) = self.facts.take() {
            return *facts;
        }
        self.stop_streams();
        let origin = self.tcp.syn_time().unwrap_or(self.start);
        let tls = self
            .analyzers
            .as_mut()
            .and_then(|a| a.tls_findings(origin))
            .map(Box::new);
        let http = match self.analyzers.as_mut() {
            Some(a) => a.http_facts(),
            None => Analyzers::new(0, 0).http_facts(),
        };
        Facts {
            tls,
            http,
            capture_start,
        }
    }

    /// Closed with nothing left to put in order: keeps the findings and
    /// drops the analyzers, so a connection waiting out its linger is small.
    pub(super) fn settle(&mut self, capture_start: Timestamp) {
        if self.facts.is_none() && self.streams.as_ref().is_none_or(|s| s.settled()) {
            let facts = self.facts(capture_start);
            self.analyzers = None;
            self.facts = Some(Box::new(facts));
        }
    }

    pub(super) fn into_record(
        mut self,
        capture_start: Timestamp,
        unclosed: CloseKind,
    ) -> ConnectionRecord {
        let at = |t: Timestamp| instant(t, capture_start);
        let facts = self.facts(capture_start);
        // The clock the findings' times count from (the capture's start
        // when they were taken).
        let found_at = |t: Timestamp| instant(t, facts.capture_start);
        let tcp = &self.tcp;
        let (first, second) = self.key.endpoints();
        let (client, server) = if self.client_first {
            (first, second)
        } else {
            (second, first)
        };
        ConnectionRecord {
            id: self.id,
            client: addr_text(client),
            server: addr_text(server),
            client_by: self.client_by,
            overlay: self.key.overlay(),
            partial: !tcp.syn_seen(),
            start: at(self.start),
            end: at(self.last),
            duration: self.last.secs_since(self.start),
            tcp: TcpInfo {
                handshake: tcp.handshake(at),
                packets: tcp.packets,
                bytes: tcp.bytes,
                retransmissions: tcp.retransmissions,
                state: tcp.state().into(),
                history: tcp.history(self.flipped),
            },
            tls: facts.tls.map(|findings| findings.into_info(&found_at)),
            http: facts.http.into_info(&found_at),
            close: tcp.close(unclosed, at),
            anomalies: self.anomalies,
        }
    }
}

/// What a packet did to its connection, for the table's timers and events.
pub(super) struct Touched {
    pub(super) id: u64,
    pub(super) notes: SegmentNotes,
    /// It closed the connection, which counted among the open ones until now.
    pub(super) closed_now: bool,
}

/// A connection's TLS and HTTP findings.
pub(super) struct Facts {
    /// Boxed: a connection without TLS (a third of those in a busy capture
    /// of short ones) then lingers with 8 bytes for it, not 256.
    tls: Option<Box<Findings>>,
    http: HttpFacts,
    /// The capture's start, which their times count from.
    capture_start: Timestamp,
}

/// `addr` as text, in one allocation: `to_string` grew an empty string two
/// or three times on the way (five allocations per record for the two
/// endpoints). Room for the longest text decoding makes: 21 bytes for
/// IPv4 (`255.255.255.255:65535`), 47 for IPv6 (no scope id).
fn addr_text(addr: SocketAddr) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(if addr.is_ipv4() { 21 } else { 47 });
    // Writing to a `String` cannot fail.
    let _ = write!(text, "{addr}");
    text
}
