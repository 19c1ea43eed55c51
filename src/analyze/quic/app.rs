//! With a key log: a QUIC connection's 0-RTT and 1-RTT packets opened with
//! the secrets logged for its ClientHello's random, and the HTTP/3
//! requests on them counted and listed. A request is a client-initiated
//! bidirectional stream (RFC 9114 §4.1: stream IDs 0, 4, 8, …): its first
//! STREAM frame from the client starts it, the server's first one on it
//! starts its response, and the server's FIN ends it.
//!
//! Owns the keys of both directions (with key updates, RFC 9001 §6), what
//! the frames (`frames`) of 0-RTT and 1-RTT packets say — the requests in
//! flight (at most [`MAX_OPEN_STREAMS`]; a stream's request counts once),
//! the first requests listed (`--max-requests-listed`), each side's QPACK
//! table (`qpack`: a request's method and path from its stream's head,
//! gathered by `heads` across STREAM frames, a response's status and
//! Retry-After from its, and what they say of rate limiting, `Limits`),
//! the tickets after the handshake (CRYPTO, read in order) and the
//! first CONNECTION_CLOSE. Does not keep a stream's bytes past its first
//! HEADERS frame.

use std::collections::BTreeMap;

use super::frames::{app_frames, stream_frames, AppFrame, StreamFrame};
use super::handshake::Flight;
use super::heads::{Gathered, Heads};
use super::initial::{self, Keys};
use super::qpack;
use crate::analyze::http::{count_status, limits, Exchange, Limits};
use crate::analyze::stats::Samples;
use crate::analyze::tls::crypto::{Cipher, Hash};
use crate::analyze::tls::keylog::Secrets;
use crate::decode::LongPacket;
use crate::record::{DecryptionOutcome, QuicHttp};
use crate::time::Timestamp;

/// Requests waiting for their responses; past it the oldest is dropped
/// (counted, never timed).
pub const MAX_OPEN_STREAMS: usize = 1_024;
/// Handshake messages after the handshake waiting to be noted (the
/// connection's events keep 64 at most).
const MAX_MESSAGES: usize = 64;
/// Heads waiting for the dynamic table entries they refer to, over both
/// sides; past it the oldest is read as it is.
const MAX_BLOCKED: usize = 16;

/// The hash and AEAD of a TLS 1.3 suite QUIC packets are opened with: the
/// four QUIC allows (RFC 9001 §5.3 forbids TLS_AES_128_CCM_8_SHA256).
pub fn suite(id: u16) -> Option<(Hash, Cipher)> {
    match id {
        0x1301 => Some((Hash::Sha256, Cipher::Aes128Gcm)),
        0x1302 => Some((Hash::Sha384, Cipher::Aes256Gcm)),
        0x1303 => Some((Hash::Sha256, Cipher::ChaCha20Poly1305)),
        0x1304 => Some((Hash::Sha256, Cipher::Aes128Ccm)),
        _ => None,
    }
}

/// One direction's 1-RTT keys: the current generation's, its secret (for
/// the next), and its key phase.
struct Direction {
    secret: Vec<u8>,
    keys: Keys,
    phase: bool,
    largest: Option<u64>,
}

impl Direction {
    fn new(version: u32, suite: (Hash, Cipher), secret: &[u8]) -> Option<Direction> {
        Some(Direction {
            secret: secret.to_vec(),
            keys: Keys::from_secret(version, suite, secret, None)?,
            phase: false,
            largest: None,
        })
    }
}

/// What a key log opens of a connection.
pub struct App {
    version: u32,
    suite: (Hash, Cipher),
    /// 1-RTT keys, client then server.
    one_rtt: [Option<Direction>; 2],
    /// The client's 0-RTT keys, and its largest 0-RTT packet number.
    early: Option<Keys>,
    early_largest: Option<u64>,
    /// Requests waiting for their responses, by stream ID.
    open: BTreeMap<u64, Open>,
    /// Client bidirectional streams seen: the next ID not yet seen.
    next_stream: u64,
    pub http: QuicHttp,
    /// The first requests, at most `keep`.
    pub list: Vec<Exchange>,
    keep: usize,
    /// The client's and the server's QPACK dynamic tables, for requests'
    /// methods and paths and responses' statuses.
    qpack: [qpack::Decoder; 2],
    /// Each side's request and response heads being gathered.
    heads: [Heads; 2],
    /// Heads whose field sections refer to entries their side's encoder
    /// stream has not shown yet (blocked streams, RFC 9204 §2.1.2: the
    /// encoder's instructions were lost and are sent again, or come in a
    /// later packet), read once they come.
    blocked: Vec<Blocked>,
    /// Request → response end, of every request answered.
    pub latency: Samples,
    /// Made by the first response that speaks of rate limiting.
    pub limits: Option<Box<Limits>>,
    /// Each side's CRYPTO stream after the handshake, read in order only
    /// (a piece ahead of its turn ends it), and the messages it completed
    /// (NewSessionTicket), by side, for the connection's events.
    crypto: [Flight; 2],
    pub messages: Vec<(usize, u8, Timestamp)>,
    /// The first CONNECTION_CLOSE read.
    pub close: Option<Closed>,
    /// Short-header packets that came while their side had no keys.
    skipped: u64,
}

/// A head read once its side's dynamic table has the entries it refers
/// to.
#[derive(Debug)]
struct Blocked {
    side: usize,
    stream: u64,
    /// The request's place in the list, if listed.
    listed: Option<usize>,
    head: Vec<u8>,
    /// When its last piece came.
    at: Timestamp,
}

/// A request waiting for its response.
#[derive(Clone, Copy, Debug)]
struct Open {
    start: Timestamp,
    /// Its place in the list, if listed.
    listed: Option<usize>,
    /// Its response's status, once read (a frame sent again is not), and
    /// the seconds of its Retry-After.
    status: Option<u16>,
    retry_after: Option<u32>,
}

impl std::fmt::Debug for App {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("App")
    }
}

impl App {
    /// The keys `secrets` give a connection of `version` that chose the
    /// suite `cipher`; the outcome says why there are none. The first
    /// `keep` requests are listed.
    pub fn new(version: u32, cipher: u16, secrets: Option<Secrets>, keep: usize) -> App {
        let suite = suite(cipher);
        let secrets = secrets.unwrap_or_default();
        let direction = |s: &Option<Box<[u8]>>| {
            let (suite, s) = (suite?, s.as_deref()?);
            Direction::new(version, suite, s)
        };
        let one_rtt = [
            direction(&secrets.client_traffic),
            direction(&secrets.server_traffic),
        ];
        let early = suite.zip(secrets.client_early.as_deref());
        let early = early.and_then(|(suite, s)| Keys::from_secret(version, suite, s, None));
        let outcome = match (suite, &one_rtt) {
            (None, _) => DecryptionOutcome::Unsupported,
            (_, [None, None]) => DecryptionOutcome::NoSecrets,
            _ => DecryptionOutcome::Complete,
        };
        App {
            version,
            suite: suite.unwrap_or((Hash::Sha256, Cipher::Aes128Gcm)),
            one_rtt,
            early,
            early_largest: None,
            open: BTreeMap::new(),
            next_stream: 0,
            http: QuicHttp {
                decryption: outcome,
                ..QuicHttp::default()
            },
            list: Vec::new(),
            keep,
            latency: Samples::default(),
            limits: None,
            qpack: Default::default(),
            heads: Default::default(),
            blocked: Vec::new(),
            crypto: Default::default(),
            messages: Vec::new(),
            close: None,
            skipped: 0,
        }
    }

    /// Whether `side`'s 1-RTT packets can be opened.
    pub fn opens(&self, side: usize) -> bool {
        self.one_rtt.get(side).is_some_and(Option::is_some)
    }

    /// Takes the 1-RTT secrets a followed key log gave after the
    /// ServerHello (a live capture's client writes them as it derives
    /// them): the directions without keys get them; packets that came
    /// before make the outcome `partial`.
    pub fn add_secrets(&mut self, secrets: &Secrets) {
        if self.http.decryption == DecryptionOutcome::Unsupported {
            return;
        }
        let (version, suite) = (self.version, self.suite);
        let given = [&secrets.client_traffic, &secrets.server_traffic];
        for (dir, secret) in self.one_rtt.iter_mut().zip(given) {
            if dir.is_none() {
                *dir = secret
                    .as_deref()
                    .and_then(|s| Direction::new(version, suite, s));
            }
        }
        if self.http.decryption == DecryptionOutcome::NoSecrets
            && self.one_rtt.iter().any(Option::is_some)
        {
            self.http.decryption = match self.skipped {
                0 => DecryptionOutcome::Complete,
                _ => DecryptionOutcome::Partial,
            };
        }
    }

    /// Opens a client's 0-RTT packet and reads its frames.
    pub fn zero_rtt(&mut self, packet: &LongPacket<'_>, ts: Timestamp, scratch: &mut Vec<u8>) {
        let Some(keys) = &self.early else {
            return;
        };
        match initial::open(keys, packet, self.early_largest, scratch) {
            Some((pn, plain)) => {
                self.early_largest = Some(self.early_largest.map_or(pn, |l| l.max(pn)));
                self.counted(1, 0);
                let plain = plain.to_vec();
                self.frames(0, &plain, ts);
            }
            None => self.failed(),
        }
    }

    /// Opens a short-header packet (`bytes`, to the end of the datagram)
    /// from `side` (0: the client) whose destination ID is `cid_len`
    /// bytes, and reads its frames.
    pub fn one_rtt(
        &mut self,
        side: usize,
        bytes: &[u8],
        cid_len: usize,
        ts: Timestamp,
        scratch: &mut Vec<u8>,
    ) {
        let (version, hash) = (self.version, self.suite.0);
        let Some(Some(dir)) = self.one_rtt.get_mut(side) else {
            self.skipped += 1;
            return;
        };
        let pn_offset = 1 + cid_len;
        let header =
            initial::unprotect(dir.keys.hp(), bytes, pn_offset, false, dir.largest, scratch);
        let Some(header) = header else {
            self.failed();
            return;
        };
        let phase = header.first & 0x04 != 0;
        let opened = if phase == dir.phase {
            initial::unseal(&dir.keys, &header, scratch).map(<[u8]>::to_vec)
        } else {
            // A key update (RFC 9001 §6): the next generation's keys,
            // kept only if they open the packet.
            let secret = initial::next_secret(version, hash, &dir.secret);
            let keys = secret
                .as_deref()
                .and_then(|s| Keys::from_secret(version, self.suite, s, Some(dir.keys.hp())));
            match (keys, secret) {
                (Some(keys), Some(secret)) => {
                    let plain = initial::unseal(&keys, &header, scratch).map(<[u8]>::to_vec);
                    if plain.is_some() {
                        *dir = Direction {
                            secret,
                            keys,
                            phase,
                            largest: dir.largest,
                        };
                    }
                    plain
                }
                _ => None,
            }
        };
        let Some(plain) = opened else {
            self.failed();
            return;
        };
        if let Some(Some(dir)) = self.one_rtt.get_mut(side) {
            dir.largest = Some(dir.largest.map_or(header.pn, |l| l.max(header.pn)));
        }
        self.counted(1, 0);
        self.frames(side, &plain, ts);
    }

    /// Counts the status `code` read from a response's HEADERS, with the
    /// seconds of its Retry-After, and notes them on its request if
    /// listed: once for a request waiting for its response.
    fn status(&mut self, stream: u64, code: Option<u16>, retry_after: Option<u32>) {
        let Some(open) = self.open.get_mut(&stream).filter(|o| o.status.is_none()) else {
            return;
        };
        let Some(code) = code else {
            return;
        };
        open.status = Some(code);
        open.retry_after = retry_after;
        self.count(code, retry_after);
        if let Some(e) = self.listed(stream) {
            e.answer(code, retry_after);
        }
    }

    /// Counts a final response's status, and what it says of rate limiting.
    fn count(&mut self, code: u16, retry_after: Option<u32>) {
        count_status(&mut self.http.status_codes, code, 1);
        Limits::note(&mut self.limits, code, retry_after);
    }

    /// Reads the head of `stream` from `side` (a request's method and
    /// path, a response's status), whose last piece came at `at`, now, or
    /// once the entries of the dynamic table it refers to have come.
    fn head(&mut self, side: usize, stream: u64, head: &[u8], at: Timestamp) {
        let listed = self.open.get(&stream).and_then(|o| o.listed);
        let Some(qpack) = self.qpack.get(side) else {
            return;
        };
        if qpack.blocked(head) {
            if self.blocked.len() >= MAX_BLOCKED {
                let b = self.blocked.remove(0);
                self.read(b.side, b.stream, b.listed, &b.head, b.at);
            }
            let head = head.to_vec();
            self.blocked.push(Blocked {
                side,
                stream,
                listed,
                head,
                at,
            });
            return;
        }
        self.read(side, stream, listed, head, at);
    }

    /// Reads the heads of `side` that were waiting for entries its
    /// encoder stream has now shown.
    fn unblock(&mut self, side: usize) {
        let Some(qpack) = self.qpack.get(side).filter(|_| !self.blocked.is_empty()) else {
            return;
        };
        let (ready, waiting): (Vec<_>, _) = std::mem::take(&mut self.blocked)
            .into_iter()
            .partition(|b| b.side == side && !qpack.blocked(&b.head));
        self.blocked = waiting;
        for b in ready {
            self.read(b.side, b.stream, b.listed, &b.head, b.at);
        }
    }

    /// Reads a head: a request's method and path into its place in the
    /// list, a response's status and Retry-After (counted once, also when
    /// the response ended before its head could be read; an HTTP-date
    /// without a `date` counts from `at`).
    fn read(
        &mut self,
        side: usize,
        stream: u64,
        listed: Option<usize>,
        head: &[u8],
        at: Timestamp,
    ) {
        let Some(qpack) = self.qpack.get(side) else {
            return;
        };
        let fields = qpack.fields(head);
        if side == 0 {
            if let Some(e) = listed.and_then(|i| self.list.get_mut(i)) {
                e.method = fields.method.unwrap_or_default();
                e.target = fields.path.unwrap_or_default();
            }
            return;
        }
        let date = fields.date.as_deref().map(str::as_bytes);
        let retry_after = fields.retry_after.as_deref();
        let retry_after = retry_after.and_then(|v| limits::retry_after(v.as_bytes(), date, at));
        if self.open.contains_key(&stream) {
            self.status(stream, fields.status, retry_after);
        } else if let Some(code) = fields.status {
            self.count(code, retry_after);
            if let Some(e) = listed.and_then(|i| self.list.get_mut(i)) {
                e.answer(code, retry_after);
            }
        }
    }

    /// The listed request on `stream`, while it waits for its response.
    fn listed(&mut self, stream: u64) -> Option<&mut Exchange> {
        let i = self.open.get(&stream)?.listed?;
        self.list.get_mut(i)
    }

    /// Counts the request a client's new `stream` starts at `ts`.
    fn request(&mut self, stream: u64, ts: Timestamp) {
        // Opening stream N opens the lower ones of its kind too
        // (RFC 9000 §2.1); those not seen count, never timed.
        let skipped = (stream - self.next_stream) / 4;
        self.http.requests += skipped + 1;
        self.next_stream = stream + 4;
        if self.open.len() >= MAX_OPEN_STREAMS {
            self.open.pop_first();
        }
        let listed = (self.list.len() < self.keep).then(|| {
            self.list.push(Exchange::started(ts));
            self.list.len() - 1
        });
        self.http.list_truncated |= listed.is_none();
        if let Some(limits) = self.limits.as_mut() {
            limits.request(ts);
        }
        self.open.insert(
            stream,
            Open {
                start: ts,
                listed,
                status: None,
                retry_after: None,
            },
        );
    }

    fn failed(&mut self) {
        self.counted(0, 1);
    }

    /// Counts `opened` packets and `failed` ones (those opened elsewhere
    /// too: the Handshake packets); one that failed makes the decryption
    /// partial.
    pub fn counted(&mut self, opened: u64, failed: u64) {
        self.http.packets_opened += opened;
        self.http.packets_failed += failed;
        if failed > 0 && self.http.decryption == DecryptionOutcome::Complete {
            self.http.decryption = DecryptionOutcome::Partial;
        }
    }

    /// Notes the STREAM and CRYPTO frames of a plaintext from `side`.
    fn frames(&mut self, side: usize, plain: &[u8], ts: Timestamp) {
        if let Some(flight) = self.crypto.get_mut(side) {
            let mut done = Vec::new();
            for f in app_frames(plain) {
                match f {
                    AppFrame::Crypto { offset, data } => flight.add(offset, data, 0, &mut done),
                    AppFrame::Close {
                        application,
                        error,
                        reason,
                    } if self.close.is_none() => {
                        let reason = reason.get(..MAX_REASON).unwrap_or(reason);
                        self.close = Some(Closed {
                            side,
                            at: ts,
                            application,
                            error,
                            reason: String::from_utf8_lossy(reason).into_owned(),
                        });
                    }
                    _ => {}
                }
            }
            for m in done {
                if self.messages.len() < MAX_MESSAGES {
                    self.messages.push((side, m.kind, ts));
                }
            }
        }
        // The unidirectional streams first: the QPACK encoder stream may
        // insert, in the same packet, what a request or response refers to.
        if let Some(qpack) = self.qpack.get_mut(side) {
            let uni = 0x02 | side as u64;
            for f in stream_frames(plain).filter(|f| f.id & 0x03 == uni) {
                qpack.uni_stream(f.id, f.offset, f.data);
            }
            self.unblock(side);
        }
        for StreamFrame {
            id: stream,
            offset,
            fin,
            data,
        } in stream_frames(plain)
        {
            // Client-initiated bidirectional streams carry requests.
            if stream & 0x03 != 0 {
                continue;
            }
            if side == 0 {
                if stream >= self.next_stream {
                    self.request(stream, ts);
                }
                if let Gathered::Whole(head) = self.heads[0].add(stream, offset, data) {
                    self.head(0, stream, &head, ts);
                }
                if fin {
                    self.heads[0].end(stream);
                }
                continue;
            }
            if stream >= self.next_stream {
                continue; // no request seen on it
            }
            if let Some(e) = self.listed(stream) {
                e.response_first.get_or_insert(ts);
                e.response_last = Some(ts);
            }
            if self.open.contains_key(&stream) {
                if let Gathered::Whole(head) = self.heads[1].add(stream, offset, data) {
                    self.head(1, stream, &head, ts);
                }
            }
            if fin {
                self.heads[1].end(stream);
                if let Some(open) = self.open.remove(&stream) {
                    self.http.responses += 1;
                    self.latency.push(ts.secs_since(open.start));
                    if let Some((limits, code)) = self.limits.as_mut().zip(open.status) {
                        limits.response_end(code, open.retry_after, ts);
                    }
                }
            }
        }
    }
}

/// A CONNECTION_CLOSE read: who sent it, when, and what it said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closed {
    pub side: usize,
    pub at: Timestamp,
    pub application: bool,
    pub error: u64,
    /// The reason phrase, its first [`MAX_REASON`] bytes as text.
    pub reason: String,
}

/// Bytes of a reason phrase kept.
pub const MAX_REASON: usize = 100;

#[cfg(test)]
mod tests;
