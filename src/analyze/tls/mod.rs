//! TLS handshake analysis of one connection, from its two reassembled
//! streams: every handshake message timed, version, cipher, SNI, ALPN, full or
//! resumed, HelloRetryRequest, 0-RTT, alerts, the completion time, and
//! JA4/JA3/JA3S fingerprints. Detection is by the bytes, on any port.
//!
//! Does not decrypt anything and does not count requests; it never sees
//! packets, only stream bytes and gaps.

mod alerts;
mod appdata;
pub mod certificate;
pub mod crypto;
mod decrypt;
mod findings;
pub mod flights;
mod held;
pub mod hello;
pub mod keylog;
mod messages;
pub mod records;
mod sealed;
mod sizes;
pub(crate) mod steps;

use std::cell::Cell;
use std::sync::Arc;

use crate::analyze::http::Exchanges;
use crate::record::{CertificateInfo, Side};
use crate::time::Timestamp;
use alerts::Alert;
use decrypt::Decrypter;
pub use findings::Findings;
use flights::Flights;
use hello::{ClientHelloFacts, ServerHelloFacts};
use keylog::KeyLog;
use records::{
    Item, RecordReader, ALERT, APPLICATION_DATA, CHANGE_CIPHER_SPEC, HANDSHAKE, MAX_RECORD,
};
use steps::{StepName, Steps};

/// Default cap on buffered handshake bytes per direction.
pub const DEFAULT_HANDSHAKE_CAP: usize = 256 * 1024;
/// Client bytes watched for a ClientHello that starts TLS late (STARTTLS,
/// HTTP CONNECT) when the stream did not begin with TLS.
const LATE_START_WATCH: u64 = 64 * 1024;
/// Bytes looked at to decide whether a stream is TLS: a record header.
const PROBE: usize = 5;
const TLS13: u16 = 0x0304;

/// TLS 1.3, its drafts (0x7fxx) and Facebook's Fizz variants (0xfbxx).
fn is_tls13(version: u16) -> bool {
    version == TLS13 || version >> 8 == 0x7f || version >> 8 == 0xfb
}

/// Sizes of an encrypted TLS 1.3 Finished record: header-less length of
/// Finished(4 + 32 or 48) + content type (1) + AEAD tag (16).
const FINISHED_13_LENS: [usize; 2] = [53, 69];

#[derive(Debug, Default)]
struct Direction {
    reader: RecordReader,
    /// Handshake messages being put together across records, and the
    /// latest capture time among their bytes.
    pending: Vec<u8>,
    pending_ts: Timestamp,
    /// A message whose body is being skipped: its type and the bytes still to come.
    skipping: Option<(u8, usize)>,
    /// ChangeCipherSpec seen (TLS ≤ 1.2): later handshake records are encrypted.
    encrypted: bool,
    finished: Option<Timestamp>,
    first_encrypted: Option<Timestamp>,
    overflowed: bool,
}

impl Direction {
    /// Gives back buffer memory no longer in use (after the handshake).
    fn shrink(&mut self) {
        self.reader.shrink();
        if self.pending.is_empty() {
            self.pending = Vec::new();
        }
    }
}

/// The analyzer's state for one connection.
#[derive(Debug)]
pub struct TlsAnalyzer {
    cap: usize,
    /// None until the first bytes decide; Some(false) stops the analysis.
    detected: Option<bool>,
    not_tls_after_all: bool,
    /// The first bytes, held back until there are enough to decide.
    probe: Vec<u8>,
    probe_side: Option<Side>,
    /// Client bytes still watched for a late ClientHello.
    watch_left: u64,
    /// TLS began after other bytes (STARTTLS, a CONNECT tunnel).
    pub late_start: bool,
    /// Buffers were shrunk once the handshake completed.
    shrunk: bool,
    client: Direction,
    server: Direction,
    client_hello: Option<(Timestamp, ClientHelloFacts)>,
    client_hellos: u32,
    /// The first ClientHello of any kind (SSLv2 included).
    first_hello: Option<Timestamp>,
    server_hello: Option<(Timestamp, ServerHelloFacts)>,
    sslv2_version: Option<u16>,
    hello_retry: bool,
    certificate_from_server: bool,
    /// The server's Certificate message, read.
    certificate: Option<Box<CertificateInfo>>,
    certificate_requested: bool,
    /// TLS 1.3: the server's encrypted flight has begun.
    server_flight: bool,
    /// TLS 1.3: the client's first encrypted record after the server
    /// flight (the Finished) and, up to `MAX_FLIGHT_REST`, those after it
    /// before the server speaks (usually the first request; Java's
    /// HttpClient also its body).
    client_flight_first: Option<(Timestamp, usize)>,
    client_flight_rest: Vec<(Timestamp, usize)>,
    flights: Flights,
    /// TLS 1.3 without keys: the ALPN choice the EncryptedExtensions' size
    /// told, an index into the protocols offered (`Some(None)`: none).
    alpn_sized: Option<Option<u8>>,
    complete: Option<Timestamp>,
    first_app_data: Option<Timestamp>,
    alert: Option<(Side, Alert, Timestamp)>,
    events: Steps,
    /// The server sent a NewSessionTicket (read in the clear in TLS ≤ 1.2,
    /// opened with a key log in TLS 1.3; past the steps kept too).
    ticket: bool,
    gap_bytes: u64,
    malformed: u64,
    /// With a key log: opens the sealed records.
    decrypter: Option<Box<Decrypter>>,
    /// TLS 1.3, with a key log: the EncryptedExtensions said whether 0-RTT
    /// data was accepted (and the server's flight could be read).
    early_data_accepted: Option<bool>,
    /// 0-RTT data waiting for the keys, or for the server's verdict.
    early: sealed::Early,
    /// Records waiting for a followed key log's secrets.
    held: held::Held,
}

/// What opening a sealed record gave: application-data plaintext, or
/// the length of a record that would not open.
#[derive(Debug, PartialEq, Eq)]
pub enum Plaintext<'a> {
    Data(&'a [u8]),
    Lost(u64),
}

impl TlsAnalyzer {
    /// `cap` bounds buffered handshake bytes per direction; `keep` bounds the
    /// list of estimated requests.
    pub fn new(cap: usize, keep: usize) -> TlsAnalyzer {
        TlsAnalyzer {
            cap,
            detected: None,
            not_tls_after_all: false,
            probe: Vec::new(),
            probe_side: None,
            watch_left: 0,
            late_start: false,
            shrunk: false,
            client: Direction::default(),
            server: Direction::default(),
            client_hello: None,
            client_hellos: 0,
            first_hello: None,
            server_hello: None,
            sslv2_version: None,
            hello_retry: false,
            certificate_from_server: false,
            certificate: None,
            certificate_requested: false,
            server_flight: false,
            client_flight_first: None,
            client_flight_rest: Vec::new(),
            flights: Flights::new(keep),
            alpn_sized: None,
            complete: None,
            first_app_data: None,
            alert: None,
            events: Steps::default(),
            ticket: false,
            gap_bytes: 0,
            malformed: 0,
            decrypter: None,
            early_data_accepted: None,
            early: sealed::Early::default(),
            held: held::Held::default(),
        }
    }

    /// Opens sealed records with `keylog`'s secrets; their plaintext goes
    /// to [`TlsAnalyzer::data_to`]'s receiver.
    pub fn decrypting(mut self, keylog: Arc<KeyLog>) -> TlsAnalyzer {
        self.decrypter = Some(Box::new(Decrypter::new(keylog)));
        self
    }

    /// Whether more stream bytes are of use.
    pub fn wants_data(&self) -> bool {
        match self.detected {
            Some(false) => self.watch_left > 0,
            _ => !(self.client.reader.dead && self.server.reader.dead),
        }
    }

    /// TLS records or handshake messages that could not be right.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    fn negotiated_13(&self) -> bool {
        self.server_hello
            .as_ref()
            .is_some_and(|(_, sh)| is_tls13(sh.version()))
    }

    fn dir(&mut self, side: Side) -> &mut Direction {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    fn dir_ref(&self, side: Side) -> &Direction {
        match side {
            Side::Client => &self.client,
            Side::Server => &self.server,
        }
    }

    /// A step of the handshake (at most [`steps::MAX_STEPS`] are kept).
    fn event(&mut self, name: StepName, side: Side, ts: Timestamp, alert: Option<Alert>) {
        if name == StepName::NewSessionTicket && side == Side::Server {
            self.ticket = true;
        }
        self.events.push(name, side, ts, alert);
    }

    /// Stream bytes `bytes` from `side`, carried by a packet captured at `ts`.
    pub fn data(&mut self, side: Side, ts: Timestamp, bytes: &[u8]) {
        self.data_to(side, ts, bytes, &mut |_, _, _| {});
    }

    /// [`TlsAnalyzer::data`], handing what sealed records opened to
    /// `plain` (with the time of each record's last byte).
    pub fn data_to(
        &mut self,
        side: Side,
        ts: Timestamp,
        bytes: &[u8],
        plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>),
    ) {
        if self.detected.is_none() {
            // Decide on the first few bytes, however they were segmented: hold
            // them back until there are enough, or the other side speaks.
            let other_side_spoke = self.probe_side.is_some_and(|s| s != side);
            if !other_side_spoke {
                self.probe_side = Some(side);
                self.probe.extend_from_slice(bytes);
                if self.probe.len() < PROBE {
                    return;
                }
            }
            let probe = std::mem::take(&mut self.probe);
            let probe_side = self.probe_side.unwrap_or(side);
            let tls = looks_like_tls(&probe);
            self.detected = Some(tls);
            if tls {
                self.feed(probe_side, ts, &probe, plain);
            } else {
                self.watch_left = LATE_START_WATCH;
                if probe_side == Side::Client {
                    self.watch_left = self.watch_left.saturating_sub(probe.len() as u64);
                }
            }
            if !other_side_spoke {
                return;
            }
        }
        if self.detected == Some(false) {
            if side != Side::Client || self.watch_left == 0 {
                return;
            }
            if !starts_client_hello(bytes) {
                self.watch_left = self.watch_left.saturating_sub(bytes.len() as u64);
                return;
            }
            self.detected = Some(true);
            self.late_start = true;
            self.watch_left = 0;
        }
        self.feed(side, ts, bytes, plain);
    }

    /// Hands stream bytes to the record reader and handles what it finds.
    fn feed(
        &mut self,
        side: Side,
        ts: Timestamp,
        bytes: &[u8],
        plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>),
    ) {
        let mut input = bytes;
        loop {
            let opening = self.wants_sealed(side);
            let dir = match side {
                Side::Client => &mut self.client,
                Side::Server => &mut self.server,
            };
            let encrypted = dir.encrypted;
            let want = |t: u8| match t {
                HANDSHAKE => !encrypted || opening,
                ALERT | CHANGE_CIPHER_SPEC => true,
                APPLICATION_DATA => opening,
                _ => false,
            };
            let item = match dir.reader.next(&mut input, ts, &want) {
                Some(Item::Record {
                    content_type,
                    version,
                    len,
                    body,
                    ts,
                }) => Owned::Record(content_type, version, len, body.map(copied), ts),
                Some(Item::SslV2 { body, ts }) => Owned::SslV2(copied(body), ts),
                Some(Item::NotARecord) => Owned::NotARecord,
                None => break,
            };
            match item {
                Owned::Record(content_type, version, len, body, ts) => {
                    let record = held::Record {
                        side,
                        content_type,
                        version,
                        len,
                        body,
                        ts,
                    };
                    self.take_record(record, plain);
                }
                Owned::SslV2(body, ts) => {
                    self.sslv2(side, &body, ts);
                    give_back(body);
                }
                Owned::NotARecord => {
                    if self.client_hello.is_none() && self.server_hello.is_none() {
                        self.not_tls_after_all = true;
                    }
                    self.malformed += 1;
                }
            }
        }
        if self.complete.is_some() && !self.shrunk {
            // The handshake is over: what follows is skipped by length.
            self.shrunk = true;
            self.client.shrink();
            self.server.shrink();
        }
    }

    /// `len` bytes of `side`'s stream were not captured.
    pub fn gap(&mut self, side: Side, len: u64) {
        self.gap_bytes += len;
        if let Some(decrypter) = self.decrypter.as_mut() {
            decrypter.gap(side);
        }
        if self.detected == Some(true) {
            let dir = self.dir(side);
            dir.reader.gap(len);
            dir.pending.clear();
            dir.skipping = None;
        }
    }

    fn record(
        &mut self,
        side: Side,
        content_type: u8,
        len: usize,
        body: Option<&[u8]>,
        ts: Timestamp,
    ) {
        match content_type {
            HANDSHAKE => match body {
                Some(body) => self.handshake_bytes(side, body, ts),
                None => {
                    // After ChangeCipherSpec: the encrypted Finished.
                    let dir = self.dir(side);
                    if dir.finished.is_none() {
                        dir.finished = Some(ts);
                        self.event(StepName::Finished, side, ts, None);
                        self.check_complete_12();
                    }
                }
            },
            CHANGE_CIPHER_SPEC => {
                self.event(StepName::ChangeCipherSpec, side, ts, None);
                // Only a TLS ≤ 1.2 ServerHello makes ChangeCipherSpec real; in
                // TLS 1.3 (or after a HelloRetryRequest) it is middlebox padding.
                if self.server_hello.is_some() && !self.negotiated_13() {
                    self.dir(side).encrypted = true;
                    if let Some(decrypter) = self.decrypter.as_mut() {
                        decrypter.change_cipher_spec(side);
                    }
                }
            }
            ALERT => {
                let plaintext = !self.dir(side).encrypted;
                self.alert_seen(side, body.filter(|_| plaintext), ts);
            }
            APPLICATION_DATA => self.application_data(side, len, ts),
            _ => {}
        }
    }

    /// An alert; `body` when it can be read (two bytes: level and
    /// description).
    fn alert_seen(&mut self, side: Side, body: Option<&[u8]>, ts: Timestamp) {
        let visible = body.and_then(|b| <[u8; 2]>::try_from(b).ok());
        let alert = Alert(visible);
        self.event(StepName::Alert, side, ts, Some(alert));
        if self.alert.is_none() {
            self.alert = Some((side, alert, ts));
        }
    }

    /// Requests estimated from the record conversation.
    pub fn flights(&self) -> &Flights {
        &self.flights
    }

    /// The requests estimated from flights (to be moved into the record).
    pub fn exchanges_mut(&mut self) -> &mut Exchanges {
        &mut self.flights.exchanges
    }

    /// How far the key log opened the records, if one was given.
    pub fn decryption(&self) -> Option<crate::record::Decryption> {
        self.decrypter.as_ref().and_then(|d| d.outcome())
    }

    /// Whether the connection turned out to be TLS.
    pub fn is_tls(&self) -> bool {
        self.detected == Some(true)
    }

    /// Settles what the end of the streams decides (TLS 1.3 completion
    /// without a Finished-sized record, the first response's start).
    pub fn end_of_streams(&mut self) {
        self.end_of_streams_to(&mut |_, _, _| {});
    }

    /// [`TlsAnalyzer::end_of_streams`], handing what records held for a
    /// followed key log's secrets opened to `plain`.
    pub fn end_of_streams_to(&mut self, plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>)) {
        self.release(plain);
        if self.complete.is_none() && self.negotiated_13() && self.client_flight_first.is_some() {
            self.complete_from_flight();
        }
        self.flights.finish();
        self.client.shrink();
        self.server.shrink();
        self.probe = Vec::new();
        self.events.shrink_to_fit();
        if let Some(decrypter) = self.decrypter.as_mut() {
            decrypter.finish();
        }
        // 0-RTT data whose verdict never came is not counted.
        self.early = sealed::Early::default();
    }
}

thread_local! {
    /// A buffer for the record body being handled, kept for its room: a
    /// new one per handshake record was three allocations per connection.
    static BODY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// `body` copied into this thread's body buffer (an empty one if it is
/// in use).
fn copied(body: &[u8]) -> Vec<u8> {
    let mut buffer = BODY.take();
    buffer.clear();
    buffer.extend_from_slice(body);
    buffer
}

/// Gives a buffer from [`copied`] back, unless it grew past the largest
/// record (then it goes, and so does its room).
fn give_back(buffer: Vec<u8>) {
    if buffer.capacity() <= MAX_RECORD {
        BODY.set(buffer);
    }
}

/// Owned copy of a reader item, so the reader's borrow ends before handling.
enum Owned {
    Record(u8, u16, usize, Option<Vec<u8>>, Timestamp),
    SslV2(Vec<u8>, Timestamp),
    NotARecord,
}

/// Whether the first bytes of a stream look like TLS (or SSLv2's ClientHello).
fn looks_like_tls(bytes: &[u8]) -> bool {
    match bytes {
        [t, 3, minor, ..] => (CHANGE_CIPHER_SPEC..=APPLICATION_DATA).contains(t) && *minor <= 4,
        [hi, _, 1, 0 | 2 | 3, ..] => hi & 0x80 != 0,
        _ => false,
    }
}

/// Whether a chunk begins with a TLS record holding a ClientHello.
fn starts_client_hello(bytes: &[u8]) -> bool {
    matches!(bytes, [22, 3, minor, _, _, 1, ..] if *minor <= 4)
}
