//! QUIC connections and their handshakes, from the long-header packets
//! `decode` splits a datagram into. A connection opens with a client's
//! Initial or 0-RTT packet (a 0-RTT one may be captured first) whose
//! destination connection ID is at least 8 bytes (RFC 9000 §7.2: a
//! client's first one is) and was not seen before as an ID of either side;
//! the server's Initial is addressed to the client's source ID, the
//! client's next ones to the server's, and after a Retry to the ID the
//! Retry gave: all seen already. Its Initial packets are opened with keys
//! derived from that first ID (`initial`), their CRYPTO frames gathered
//! (`stream`) into the ClientHello and ServerHello, which the analysis's
//! `tls::hello` reads (the table's steps for them are in this module's
//! `tls`); the other long-header packets are timed and counted. A datagram
//! that may be a short-header packet belongs to the connection known on
//! its endpoints. With a key log, `handshake` opens the Handshake packets
//! (the server's EncryptedExtensions, certificate and Finished, the
//! client's Finished) and `app` the 0-RTT and 1-RTT packets, and counts the
//! HTTP/3 requests on them; in a live capture, whose client writes its
//! key log as it goes, `follow` looks in it again and holds the packets
//! that came before their keys.
//!
//! Owns the QUIC connection table, bounded in connections, IDs and bytes
//! held, and the records and summary figures it hands over at the end.
//! Does not follow a connection to new endpoints (migration).

mod app;
mod follow;
mod frames;
mod handshake;
mod heads;
mod initial;
mod qpack;
mod reorder;
mod retire;
mod stream;
mod tls;
mod uni;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::analyze::stats::Samples;
use crate::analyze::streams::request;
use crate::analyze::summary::across::{Across, Marks};
use crate::analyze::summary::rate_limit::{LimitTally, RateLimitBuilder};
use crate::analyze::tls::keylog::KeyLog;
use crate::analyze::tls::steps::{StepName, Steps};
use crate::decode::{
    long_packet, long_packets, quic_version_name, LongPacket, PacketKind, QuicDatagram,
};
#[cfg(test)]
use crate::record::QuicPackets;
use crate::record::{
    DecryptionOutcome, Instant, Overlay, PerSide, QuicClose, QuicHandshake, QuicHttp, QuicRecord,
    QuicSummary, QuicTls, Side,
};
use crate::time::Timestamp;

use app::{App, Closed};
use handshake::Handshake;
use retire::{Ended, MIN_IDLE};
use stream::CryptoStream;

/// Connection IDs remembered; when full, forgotten all at once (a client's
/// later Initial of a connection that old would count it again).
const MAX_IDS: usize = 65_536;
/// Connections followed at once; past it the oldest is finished early
/// (its later packets are then not read).
const MAX_OPEN: usize = 4_096;
/// Connections listed in the summary; the rest count in its figures only.
pub const MAX_LISTED: u64 = 4_096;
/// The smallest Handshake packet (its Length: packet number, sealed
/// frames and tag) that can carry a client's Finished: a one-byte packet
/// number, a CRYPTO frame's three bytes of header, the message's 4 and 32
/// (SHA-256; 48 with SHA-384), and the 16-byte tag. A packet that only
/// acknowledges the server's flight (which clients send first when
/// checking the certificate takes a while) is at most about 30.
const MIN_FINISHED: usize = 1 + 3 + 4 + 32 + 16;
/// 0-RTT packets held per connection until the ServerHello names the
/// cipher suite their keys need (with a key log).
const MAX_EARLY_HELD: usize = 8;
/// Bytes of unfinished handshake messages held over all connections.
const CRYPTO_BUDGET: usize = 8 << 20;

/// One connection being followed.
#[derive(Debug)]
struct Conn {
    id: u64,
    client: SocketAddr,
    server: SocketAddr,
    overlay: Option<Overlay>,
    version: u32,
    /// The destination ID the Initial keys come from (the Retry's source
    /// ID after a Retry), and the keys once derived (client, server).
    key_id: Vec<u8>,
    keys: Option<Box<[initial::Keys; 2]>>,
    /// The largest Initial packet number opened, by direction.
    largest: [Option<u64>; 2],
    streams: [CryptoStream; 2],
    /// The length of the destination IDs of short-header packets from
    /// each side: the other side's source ID.
    cid_len: [usize; 2],
    /// The ClientHello's random (the key log's key), and with a key log
    /// what its secrets open; 0-RTT packets wait for them in `early`.
    random: Option<[u8; 32]>,
    app: Option<Box<App>>,
    sealed: Option<Box<Handshake>>,
    early: Vec<(Vec<u8>, Timestamp)>,
    /// When the ClientHello and the ServerHello were whole.
    hellos: [Option<Timestamp>; 2],
    /// The client's first packet, and its first Handshake packet.
    start: Timestamp,
    complete: Option<Timestamp>,
    /// The latest datagram, and datagrams and bytes by sender.
    last: Timestamp,
    datagrams: PerSide,
    bytes: PerSide,
    handshake: QuicHandshake,
    tls: QuicTls,
    steps: Steps,
    /// The first CONNECTION_CLOSE a key log opened.
    close: Option<Closed>,
    /// The suite the ServerHello chose (with a key log), and when to look
    /// in a followed one again for secrets not there yet (after `lookups`
    /// looks).
    cipher: Option<u16>,
    next_lookup: Option<Timestamp>,
    lookups: u32,
    /// Packets that came before the followed key log had their keys.
    held: Vec<follow::Held>,
    /// The max_idle_timeout each side set (ms, 0: none), and how long the
    /// connection may stay silent — the smaller of those set (RFC 9000
    /// §10.1), at least [`MIN_IDLE`] — nanoseconds; `None` when neither
    /// set one.
    idle_ms: [Option<u64>; 2],
    idle_ns: Option<i64>,
}

impl Conn {
    /// Counts a datagram of `len` bytes from `side` at `ts`.
    fn count(&mut self, side: usize, len: usize, ts: Timestamp) {
        let (datagrams, bytes) = match side {
            0 => (&mut self.datagrams.client, &mut self.bytes.client),
            _ => (&mut self.datagrams.server, &mut self.bytes.server),
        };
        *datagrams += 1;
        *bytes += len as u64;
        self.last = self.last.max(ts);
    }

    /// Notes `side`'s max_idle_timeout (ms) and the connection's own.
    fn idle_timeout(&mut self, side: usize, ms: u64) {
        let secs = Some(ms as f64 / 1000.0);
        match side {
            0 => self.handshake.idle_timeout = secs,
            _ => self.handshake.server_idle_timeout = secs,
        }
        if let Some(set) = self.idle_ms.get_mut(side) {
            *set = Some(ms);
        }
        let least = self.idle_ms.iter().flatten().filter(|&&ms| ms > 0).min();
        self.idle_ns = least.map(|&ms| {
            let ns = i64::try_from(ms).map_or(i64::MAX, |ms| ms.saturating_mul(1_000_000));
            ns.max(MIN_IDLE)
        });
    }

    /// Whether the keys and streams can go: both hellos read or given up.
    fn hellos_over(&self) -> bool {
        self.streams.iter().all(CryptoStream::is_done)
    }
}

/// The QUIC connections of a capture.
#[derive(Debug, Default)]
pub struct QuicTable {
    /// Connection IDs seen, each with the connection it names.
    ids: HashMap<Box<[u8]>, u64>,
    /// Connections followed, by number.
    open: BTreeMap<u64, Box<Conn>>,
    /// The latest connection between two endpoints (client, server): how
    /// packets to a zero-length connection ID find theirs.
    by_endpoints: HashMap<(SocketAddr, SocketAddr), u64>,
    opened: u64,
    /// Bytes the connections' CRYPTO streams hold, and the packets held
    /// for their keys (`follow`).
    held: usize,
    waiting: usize,
    scratch: Vec<u8>,
    /// `--keylog`: opens 0-RTT and 1-RTT packets.
    keylog: Option<Arc<KeyLog>>,
    /// HTTP/3 requests listed per connection.
    keep: usize,
    summary: QuicSummary,
    /// Request → response end over every connection a key log opened.
    latency: Samples,
    /// Their rate limiting, on each connection and across the
    /// connections to a server.
    rate_limit: RateLimitBuilder,
    across: Across,
    /// Every handshake time, for the summary's distribution.
    durations: Samples,
    /// Connections a key log opened that carried HTTP/3 requests.
    carried: u64,
    origin: Option<Timestamp>,
    /// `--idle`, nanoseconds: how long a connection whose client set no
    /// idle timeout may stay silent.
    idle_ns: Option<i64>,
    /// When to look for idle connections next.
    next_scan: Option<Timestamp>,
    /// Records of the connections ended, until taken.
    done: Vec<QuicRecord>,
}

impl QuicTable {
    /// A table that opens 0-RTT and 1-RTT packets with `keylog`'s secrets,
    /// lists the first `keep` HTTP/3 requests of each connection, and ends
    /// a connection whose client set no idle timeout after `idle` without
    /// datagrams (if given).
    pub fn new(keylog: Option<Arc<KeyLog>>, keep: usize, idle: Option<Duration>) -> QuicTable {
        QuicTable {
            keylog,
            keep,
            idle_ns: idle.map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
            ..QuicTable::default()
        }
    }

    /// Reads a datagram at `ts` of a capture that began at `origin`; true
    /// when it opens a connection.
    pub fn datagram(&mut self, d: &QuicDatagram<'_>, ts: Timestamp, origin: Timestamp) -> bool {
        self.origin.get_or_insert(origin);
        if !d.long {
            self.short(d, ts);
            return false;
        }
        let header = &d.header;
        let opens = header.opening && header.dcid.len() >= 8 && !self.ids.contains_key(header.dcid);
        let known = if opens {
            None
        } else {
            self.find(header.dcid, header.scid, d.src, d.dst)
        };
        let id = match known {
            Some(id) => id,
            None if opens => self.open_conn(d, ts),
            None => {
                self.remember(&[header.dcid, header.scid], None);
                return false;
            }
        };
        self.remember(&[header.dcid, header.scid], Some(id));
        if let Some(mut conn) = self.open.remove(&id) {
            self.read(&mut conn, d, ts);
            if conn.hellos_over() {
                conn.keys = None;
            }
            self.open.insert(id, conn);
        }
        opens
    }

    /// The connection a packet with these IDs and endpoints belongs to.
    fn find(&self, dcid: &[u8], scid: &[u8], src: SocketAddr, dst: SocketAddr) -> Option<u64> {
        let by_id = |id: &[u8]| (!id.is_empty()).then(|| self.ids.get(id)).flatten();
        by_id(dcid)
            .or_else(|| by_id(scid))
            .or_else(|| self.by_endpoints.get(&(src, dst)))
            .or_else(|| self.by_endpoints.get(&(dst, src)))
            .copied()
    }

    /// Notes connection IDs (those not seen before name `conn`, when
    /// given); when the table of IDs is full it is emptied first.
    fn remember(&mut self, ids: &[&[u8]], conn: Option<u64>) {
        for &id in ids {
            if id.is_empty() || self.ids.contains_key(id) {
                continue;
            }
            if self.ids.len() >= MAX_IDS {
                self.ids.clear();
            }
            self.ids.insert(id.into(), conn.unwrap_or(0));
        }
    }

    /// Opens a connection for the datagram `d` (from its client); its number.
    fn open_conn(&mut self, d: &QuicDatagram<'_>, ts: Timestamp) -> u64 {
        self.opened += 1;
        let id = self.opened;
        if self.open.len() >= MAX_OPEN {
            if let Some((_, oldest)) = self.open.pop_first() {
                self.retire(oldest, Ended::Evicted);
            }
        }
        let first = long_packets(d.payload).next();
        let conn = Conn {
            id,
            client: d.src,
            server: d.dst,
            overlay: d.overlay,
            version: first.map_or(1, |p| p.version),
            key_id: d.header.dcid.to_vec(),
            keys: None,
            largest: [None; 2],
            streams: Default::default(),
            cid_len: [0, d.header.scid.len()],
            random: None,
            app: None,
            sealed: None,
            early: Vec::new(),
            hellos: [None; 2],
            start: ts,
            complete: None,
            last: ts,
            datagrams: PerSide::default(),
            bytes: PerSide::default(),
            handshake: QuicHandshake {
                client_initial: Some(self.instant(ts)),
                ..QuicHandshake::default()
            },
            tls: QuicTls::default(),
            steps: Steps::default(),
            close: None,
            idle_ms: [None; 2],
            idle_ns: None,
            cipher: None,
            next_lookup: None,
            lookups: 0,
            held: Vec::new(),
        };
        self.by_endpoints.insert((d.src, d.dst), id);
        self.open.insert(id, Box::new(conn));
        id
    }

    fn instant(&self, ts: Timestamp) -> Instant {
        super::instant(ts, self.origin.unwrap_or(ts))
    }

    /// A datagram that may be a short-header packet: read into the
    /// connection between its endpoints, if any.
    fn short(&mut self, d: &QuicDatagram<'_>, ts: Timestamp) {
        let id = self.by_endpoints.get(&(d.src, d.dst));
        let Some(id) = id
            .or_else(|| self.by_endpoints.get(&(d.dst, d.src)))
            .copied()
        else {
            return;
        };
        let Some(conn) = self.open.get_mut(&id) else {
            return;
        };
        let side = usize::from(d.src != conn.client);
        conn.count(side, d.payload.len(), ts);
        // Without a key log (its ServerHello made no `app`) it is sealed:
        // counted only.
        if conn.app.is_none() {
            return;
        }
        if let Some(mut conn) = self.open.remove(&id) {
            self.follow(&mut conn, ts);
            self.one_rtt(&mut conn, side, d.payload, ts, true);
            self.open.insert(id, conn);
        }
    }

    /// Reads every packet of `d` into `conn`: its long-header packets, and
    /// a short-header one they end with.
    fn read(&mut self, conn: &mut Conn, d: &QuicDatagram<'_>, ts: Timestamp) {
        let side = usize::from(d.src != conn.client);
        conn.count(side, d.payload.len(), ts);
        self.follow(conn, ts);
        let mut rest = d.payload;
        while let Some((packet, after)) = long_packet(rest) {
            rest = after;
            if side == 1 && conn.cid_len[0] == 0 {
                conn.cid_len[0] = packet.scid.len();
            }
            let h = &mut conn.handshake;
            match packet.kind {
                PacketKind::Initial => {
                    h.packets.initial += 1;
                    if side == 1 && h.server_initial.is_none() {
                        h.server_initial = Some(self.instant(ts));
                    }
                    self.initial(conn, &packet, side, ts);
                }
                PacketKind::ZeroRtt => {
                    h.packets.zero_rtt += 1;
                    self.zero_rtt(conn, &packet, ts);
                }
                PacketKind::Handshake => {
                    h.packets.handshake += 1;
                    self.handshake_in(conn, &packet, side, ts, true);
                }
                PacketKind::Retry => {
                    h.packets.retry += 1;
                    // A client takes one Retry (RFC 9000 §17.2.5.2): the
                    // first; its next Initials go to that Retry's ID, and
                    // both sides' keys come from it.
                    if side == 1 && !h.retry && !packet.scid.is_empty() {
                        h.retry = true;
                        conn.key_id = packet.scid.to_vec();
                        conn.keys = None;
                        conn.largest = [None; 2];
                    }
                }
            }
        }
        self.one_rtt(conn, side, rest, ts, true);
    }

    /// A Handshake packet of `conn` from `side`: opened with the key log's
    /// keys; held for them (if `hold`) while a followed key log may still
    /// give them; else told by its size whether it is the client's
    /// Finished.
    fn handshake_in(
        &mut self,
        conn: &mut Conn,
        packet: &LongPacket<'_>,
        side: usize,
        ts: Timestamp,
        hold: bool,
    ) {
        let opens = conn.sealed.as_ref().is_some_and(|s| s.opens(side));
        if !opens && hold && self.hold(conn, side, true, packet.bytes, ts) {
            return;
        }
        let carries_finished = packet.bytes.len() - packet.pn_offset >= MIN_FINISHED;
        let opened = opens && self.handshake_packet(conn, packet, side, ts);
        let told = side == 0 && carries_finished && conn.complete.is_none();
        if !opened && told {
            conn.handshake.client_handshake = Some(self.instant(ts));
            conn.complete = Some(ts);
        }
    }

    /// A short-header packet (`bytes`, to the end of its datagram, if it
    /// is one) of `conn` from `side`: opened if a key log gave its keys,
    /// held for them (if `hold`) while a followed key log may still.
    fn one_rtt(&mut self, conn: &mut Conn, side: usize, bytes: &[u8], ts: Timestamp, hold: bool) {
        // A short header has its header-form bit clear (its fixed bit may
        // be greased); zeros after a datagram's last packet are padding
        // (RFC 9000 §12.2), not a packet.
        if bytes.first().is_none_or(|b| b & 0x80 != 0) || bytes.iter().all(|&b| b == 0) {
            return;
        }
        let keyless = conn.app.as_ref().is_some_and(|a| !a.opens(side));
        if keyless && hold && self.hold(conn, side, false, bytes, ts) {
            return;
        }
        let cid_len = conn.cid_len.get(side).copied().unwrap_or(0);
        if let Some(app) = &mut conn.app {
            app.one_rtt(side, bytes, cid_len, ts, &mut self.scratch);
            for (side, kind, at) in app.messages.drain(..) {
                conn.steps
                    .push(StepName::handshake(kind), side_of(side), at, None);
            }
            if conn.close.is_none() {
                conn.close = app.close.take();
            }
        }
    }

    /// A client's 0-RTT packet: opened with the key log's secrets, or held
    /// (a few) until the ServerHello says which suite they are for.
    fn zero_rtt(&mut self, conn: &mut Conn, packet: &LongPacket<'_>, ts: Timestamp) {
        match &mut conn.app {
            Some(app) => app.zero_rtt(packet, ts, &mut self.scratch),
            None if self.keylog.is_some() && conn.early.len() < MAX_EARLY_HELD => {
                conn.early.push((packet.bytes.to_vec(), ts));
            }
            None => {}
        }
    }

    /// Every connection's record and the summary's figures; `None` when
    /// no connection opened.
    pub fn finish(&mut self) -> Option<QuicSummary> {
        if self.opened == 0 {
            return None;
        }
        while let Some((_, conn)) = self.open.pop_first() {
            self.retire(conn, Ended::Open);
        }
        let mut summary = std::mem::take(&mut self.summary);
        summary.list.sort_unstable_by_key(|r| r.id);
        summary.connections = self.opened;
        summary.handshake = self.durations.distribution();
        summary.request_latency = self.latency.distribution();
        let across = std::mem::take(&mut self.across).finish().across;
        summary.rate_limit = std::mem::take(&mut self.rate_limit).finish(across);
        summary.handshakes_per_request =
            (summary.requests > 0).then(|| self.carried as f64 / summary.requests as f64);
        Some(summary)
    }
}

/// The side a direction's index names (0: the client).
fn side_of(side: usize) -> Side {
    match side {
        0 => Side::Client,
        _ => Side::Server,
    }
}

#[cfg(test)]
mod tests;
