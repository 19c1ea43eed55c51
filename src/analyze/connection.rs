//! One tracked TCP connection: its endpoints, TCP state, and the stream
//! analyzers made with its first payload byte; what it becomes when it
//! closes (its findings, without the analyzers) and when it is finalised
//! (a [`ConnectionRecord`]).
//!
//! Does not know about the table, timers or other connections: that is
//! `shard`.

use std::net::SocketAddr;

use super::streams::{Analyzers, Aside, HttpFacts, Streams};
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
    /// What its payload has been given to, if it had any.
    stage: Stage,
    /// Counted among the open connections (until it closes or is finalised).
    pub(super) counted_open: bool,
    /// Boxed, made with the first: most connections have none, and a
    /// connection is then 16 bytes smaller (352 → 320 bytes with `stage`
    /// and the handshake's packed stamps: an allocation size class less).
    anomalies: Option<Box<Anomalies>>,
}

/// Where a connection's payload goes, each boxed so that a connection
/// without payload (half-open, a SYN flood) stays small.
enum Stage {
    /// No payload yet.
    Quiet,
    /// Closed without payload: nothing to analyse, and nothing boxed for
    /// the linger (a rejected or scanned port's SYN and RST).
    Silent,
    /// Reassembly and stream analyzers: made with the first payload byte,
    /// dropped once none wants more.
    Streams(Box<Streams>),
    /// The analyzers alone, once their streams were dropped early.
    Analyzers(Box<Analyzers>),
    /// What the analyzers found, taken when the connection closed so that
    /// the analyzers need not linger with it.
    Facts(Box<Facts>),
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
            stage: Stage::Quiet,
            counted_open: true,
            anomalies: None,
        }
    }

    /// Takes a packet of this connection captured at `ts`: its TCP state,
    /// its streams, its anomalies; at the close, drops the analyzers
    /// (keeping their findings).
    pub(super) fn packet(
        &mut self,
        ts: Timestamp,
        (seg, src_first): (&TcpSegment<'_>, bool),
        anomaly: Option<AnomalyKind>,
        config: &Config,
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
            self.note(kind);
        }
        if notes.invalid_flags {
            self.note(AnomalyKind::InvalidTcpFlags);
        }
        let closed_now = notes.closed_now && self.counted_open;
        if closed_now {
            self.counted_open = false;
        }
        if notes.closed_now {
            // The buffers and analyzers can go now rather than after the linger.
            self.settle();
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
        if matches!(self.stage, Stage::Quiet) && seg.payload_len > 0 {
            let mut streams = Streams::new(
                config.stream_cap(),
                config.requests_listed(),
                config.keylog.as_ref(),
            );
            let (client_isn, server_isn) = self.tcp.isns();
            streams.start_at(client_isn, server_isn);
            self.stage = Stage::Streams(Box::new(streams));
        }
        let Stage::Streams(streams) = &mut self.stage else {
            return;
        };
        streams.segment(side, ts, seg);
        if !streams.analyzers.wants_data() {
            self.stop_streams();
        }
    }

    /// Drops the streams, keeping their analyzers.
    fn stop_streams(&mut self) {
        match std::mem::replace(&mut self.stage, Stage::Quiet) {
            Stage::Streams(streams) => {
                let mut found = Anomalies::default();
                self.stage = Stage::Analyzers(streams.finish(&mut found));
                if !found.is_empty() {
                    self.anomalies_mut().merge(&found);
                }
            }
            other => self.stage = other,
        }
    }

    /// Counts one anomaly of `kind`.
    fn note(&mut self, kind: AnomalyKind) {
        self.anomalies_mut().add(kind, 1);
    }

    fn anomalies_mut(&mut self) -> &mut Anomalies {
        self.anomalies.get_or_insert_with(Box::default)
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
    fn facts(&mut self) -> Facts {
        self.stop_streams();
        let analyzers = match std::mem::replace(&mut self.stage, Stage::Quiet) {
            Stage::Facts(facts) => return *facts,
            Stage::Analyzers(analyzers) => Some(analyzers),
            Stage::Quiet | Stage::Silent | Stage::Streams(_) => None,
        };
        let origin = self.tcp.syn_time().unwrap_or(self.start);
        match analyzers {
            Some(mut a) => Facts {
                tls: a.tls_findings(origin).map(Box::new),
                http: a.http_facts(),
            },
            None => Facts {
                tls: None,
                http: HttpFacts::none(),
            },
        }
    }

    /// Closed with nothing left to put in order: keeps the findings and
    /// drops the analyzers, so a connection waiting out its linger is small.
    pub(super) fn settle(&mut self) {
        match &self.stage {
            Stage::Quiet => self.stage = Stage::Silent,
            Stage::Streams(streams) if !streams.settled() => {}
            Stage::Streams(_) | Stage::Analyzers(_) => {
                let facts = self.facts();
                self.stage = Stage::Facts(Box::new(facts));
            }
            Stage::Silent | Stage::Facts(_) => {}
        }
    }

    /// The connection's record, and what the summary needs that it does
    /// not hold.
    pub(super) fn into_record(
        mut self,
        capture_start: Timestamp,
        unclosed: CloseKind,
    ) -> (ConnectionRecord, Aside) {
        let at = |t: Timestamp| instant(t, capture_start);
        let facts = self.facts();
        let tcp = &self.tcp;
        let close_at = tcp.first_close_at();
        let (last_response, requests_after) =
            close_at.map_or((None, 0), |c| facts.http.around_close(c));
        let mut close = tcp.close(unclosed, at);
        close.idle = close_at
            .zip(last_response)
            .filter(|(c, last)| last <= c)
            .map(|(c, last)| c.secs_since(last));
        close.requests_after = requests_after;
        let (http, aside) = facts.http.into_info(&at, self.last);
        let (first, second) = self.key.endpoints();
        let (client, server) = if self.client_first {
            (first, second)
        } else {
            (second, first)
        };
        let record = ConnectionRecord {
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
            tls: facts.tls.map(|findings| findings.into_info(&at)),
            http,
            close,
            anomalies: self.anomalies.map(|a| *a).unwrap_or_default(),
        };
        (record, aside)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::TcpFlags;

    fn seg<'a>(
        from_client: bool,
        flags: u8,
        seq: u32,
        ack: u32,
        payload: &'a [u8],
    ) -> TcpSegment<'a> {
        let client = "10.0.0.1:40000".parse().expect("addr");
        let server = "10.0.0.2:443".parse().expect("addr");
        let (src, dst) = if from_client {
            (client, server)
        } else {
            (server, client)
        };
        TcpSegment {
            src,
            dst,
            seq,
            ack,
            flags: TcpFlags(flags),
            window: 100,
            payload,
            payload_len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
            overlay: None,
        }
    }

    /// What a closed connection keeps while it lingers fits mimalloc's
    /// 80-byte class (the HTTP section without its empty list, a TLS box).
    #[test]
    fn findings_kept_through_the_linger_are_small() {
        let size = std::mem::size_of::<Facts>();
        assert!(size <= 80, "Facts is {size} bytes");
        let http = std::mem::size_of::<HttpFacts>();
        assert!(http <= 64, "HttpFacts is {http} bytes");
    }

    /// A connection refused (SYN, then RST) lingers with nothing boxed,
    /// and payload after its close starts no analysis.
    #[test]
    fn a_connection_closed_without_payload_lingers_with_nothing_boxed() {
        let config = Config::default();
        let syn = seg(true, TcpFlags::SYN, 1000, 0, &[]);
        let key = FlowKey::ordered(syn.src, syn.dst);
        let mut conn = Connection::new(1, Timestamp(0), &syn, key);
        conn.packet(Timestamp(0), (&syn, key.1), None, &config);
        assert!(matches!(conn.stage, Stage::Quiet));
        let rst = seg(false, TcpFlags::RST | TcpFlags::ACK, 0, 1001, &[]);
        let touched = conn.packet(Timestamp(1_000), (&rst, !key.1), None, &config);
        assert!(touched.notes.closed_now);
        assert!(matches!(conn.stage, Stage::Silent));
        let late = seg(
            true,
            TcpFlags::ACK | TcpFlags::PSH,
            1001,
            1,
            b"GET / HTTP/1.1\r\n\r\n",
        );
        conn.packet(Timestamp(2_000), (&late, key.1), None, &config);
        assert!(matches!(conn.stage, Stage::Silent));
        let (rec, _) = conn.into_record(Timestamp(0), CloseKind::Open);
        assert!(rec.tls.is_none());
        assert_eq!(rec.http.requests, 0);
        assert_eq!(rec.tcp.packets.client, 2);
    }
}
