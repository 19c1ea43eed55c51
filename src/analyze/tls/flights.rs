//! Estimating HTTP requests on a TLS connection without keys, from the
//! record conversation: after the handshake, each client flight of
//! application-data records that follows server data is one request; the
//! server's records until the next client flight are its response.
//!
//! Excluded by rule: records before the handshake completes (the TLS 1.3
//! client Finished is classified by the caller), server records before the
//! first request (TLS 1.3 NewSessionTicket), tiny client records (encrypted
//! alerts and KeyUpdate in TLS 1.3), and, for the first request of a TLS 1.3
//! connection, the leading ticket-sized server records before its response.
//!
//! HTTP/2 multiplexes: where ALPN says h2 (selected in TLS ≤ 1.2, or told
//! by the size of TLS 1.3's EncryptedExtensions) and the client's
//! plaintext lengths are known (an AEAD suite; in TLS 1.3 also the padding
//! the client adds, measured on its Finished), `h2` reads the records more
//! closely: the preface and control frames are not requests, and once a
//! client flight holds two records of one size (HEADERS of requests sent
//! at once) each record that can hold a HEADERS frame is one request.
//!
//! Does not parse records; `analyze::tls` feeds it their sizes and times.

use crate::analyze::http::{Exchange, Exchanges};
use crate::record::Side;
use crate::time::Timestamp;
use bodies::{Bodies, BodyRecord};
use h2::{H2Record, H2};

mod bodies;
mod h2;

/// Client records whose plaintext is at most 9 bytes cannot carry a request:
/// TLS 1.3 encrypted alerts (19 bytes), KeyUpdate (22), an HTTP/2 SETTINGS
/// ACK (26). TLS 1.3 adds 17 bytes (content type and a 16-byte AEAD tag);
/// TLS 1.2 at least 16 (ChaCha20-Poly1305).
const MAX_CONTROL_RECORD_13: usize = 9 + 17;
const MAX_CONTROL_RECORD_12: usize = 9 + 16;
/// A last client flight of records this small with no answer before the
/// connection ends is closing alerts, not a request (JSSE sends two 35-byte
/// records); the smallest HTTP/1.1 request with a Host header is larger.
const MAX_CLOSING_FLIGHT: usize = 40;
/// With ALPN h2 selected, a first client flight this small is the connection
/// preface and SETTINGS, not yet a request.
const MAX_H2_PREFACE_FLIGHT: usize = 128;
/// NewSessionTicket records are a few hundred bytes.
const TICKET_SIZES: std::ops::RangeInclusive<usize> = 100..=600;
/// At most this many leading records of the first response are looked at.
const MAX_LEADING: usize = 8;
/// A client record this long is a full one: 16 KiB of plaintext and at
/// least the 16 bytes of an AEAD tag.
const FULL_RECORD: usize = (1 << 14) + 16;

#[derive(Debug, Default)]
pub struct Flights {
    pub requests: u64,
    pub exchanges: Exchanges,
    last: Option<Side>,
    /// TLS 1.3: server records answering the first request, while it is open.
    first_response: Vec<(Timestamp, usize)>,
    tls13: bool,
    /// ALPN selected h2 (visible in TLS ≤ 1.2; in TLS 1.3 read with a key
    /// log, or told by the EncryptedExtensions' size).
    pub h2: bool,
    /// What each client record adds to its plaintext, when known (AEAD
    /// suites; TLS 1.3's padding included), and what every record of the
    /// suite adds (the server's padding is not known).
    overhead: Option<usize>,
    base_overhead: usize,
    /// HTTP/2 with the lengths known: what the records' sizes say (boxed,
    /// and only then: most connections are not).
    h2s: Option<Box<H2>>,
    /// The largest record of the current client flight.
    flight_max: usize,
    /// Whether the current request has seen any server data.
    answered: bool,
    /// Client records seen after the handshake.
    client_records: u64,
    /// HTTP/1 (not h2): bodies by their size (`bodies.rs`).
    bodies: Bodies,
    /// The client's last record was a full one (16 KiB of plaintext): its
    /// next continues the same message, whatever the server said between
    /// (TLS 1.3 tickets; an early answer to an upload).
    after_full: bool,
}

impl Flights {
    pub fn new(keep: usize) -> Flights {
        Flights {
            exchanges: Exchanges::new(keep),
            ..Flights::default()
        }
    }

    /// What each of the client's records adds to its plaintext (its
    /// suite's nonce and tag; in TLS 1.3 also the content type and the
    /// padding the client adds), and what each record adds at least.
    pub fn set_overhead(&mut self, client: usize, base: usize) {
        self.overhead = Some(client);
        self.base_overhead = base;
    }

    /// HTTP/2 with the client's plaintext lengths known: its records are
    /// read as frames (the estimate is then an ordinary one).
    pub fn per_record(&self) -> bool {
        self.h2 && self.overhead.is_some()
    }

    /// HTTP/2 read a record each, where the records counted may be bodies
    /// as well as requests (docs/accuracy.md).
    pub fn doubtful(&self) -> bool {
        self.h2s.as_ref().is_some_and(|h| h.doubtful())
    }

    /// An application-data record after the handshake completed.
    pub fn record(&mut self, side: Side, len: usize, ts: Timestamp, tls13: bool) {
        self.tls13 = tls13;
        match side {
            Side::Client => {
                if len <= control_size(tls13) {
                    let new_flight = self.last != Some(Side::Client);
                    if self.per_record() && self.h2s().small(new_flight) {
                        self.drop_last_request();
                    }
                    return;
                }
                self.client_records += 1;
                if let Some(overhead) = self.overhead.filter(|_| self.h2) {
                    let plain = len.saturating_sub(overhead);
                    let new_flight = self.last != Some(Side::Client);
                    let first = self.client_records == 1;
                    match self.h2s().client(plain, ts, first, new_flight) {
                        H2Record::Control => return,
                        H2Record::Retract => {
                            self.drop_last_request();
                            return;
                        }
                        H2Record::Continues => {}
                        H2Record::Request {
                            earlier,
                            multiplexed,
                        } => {
                            for at in earlier {
                                self.add_request(at);
                            }
                            if new_flight {
                                self.flight_max = 0;
                                self.start_request(ts);
                            } else {
                                self.add_request(ts);
                            }
                            if multiplexed {
                                self.next_answer_from_exchanges();
                            }
                        }
                    }
                    self.flight_max = self.flight_max.max(len);
                    self.last = Some(Side::Client);
                    return;
                }
                if self.h2 && self.client_records == 1 && len <= MAX_H2_PREFACE_FLIGHT {
                    return;
                }
                let continues = std::mem::replace(&mut self.after_full, len >= FULL_RECORD);
                let new_flight = self.last != Some(Side::Client) && !continues;
                self.last = Some(Side::Client);
                if !self.h2 {
                    match self
                        .bodies
                        .client(len, new_flight, self.requests, self.overhead)
                    {
                        BodyRecord::Body => return,
                        BodyRecord::Request => {
                            self.flight_max = len;
                            self.start_request(ts);
                            return;
                        }
                        BodyRecord::Retract => {
                            self.drop_last_request();
                            self.flight_max = len;
                            self.start_request(ts);
                            return;
                        }
                        BodyRecord::Flight => {}
                    }
                }
                if new_flight {
                    self.flight_max = len;
                    self.start_request(ts);
                } else {
                    self.flight_max = self.flight_max.max(len);
                }
            }
            Side::Server => {
                if self.per_record() {
                    let early = self.requests == 0 && tls13;
                    // Control frames and tickets answer nothing, and the
                    // client's flight goes on across them.
                    let plain = len.saturating_sub(self.base_overhead);
                    self.h2s().server_spoke(early, tls13, len, plain);
                    if self.requests == 0 {
                        return;
                    }
                    if !self.h2s().answers(plain, len) {
                        return;
                    }
                    if let Some(at) = self.h2s().answered_body() {
                        self.start_request(at);
                    }
                    let late = self.h2s().take_late();
                    if !late.is_empty() {
                        for at in late {
                            self.add_request(at);
                        }
                        self.next_answer_from_exchanges();
                    }
                    if self.h2s().multiplexed() {
                        self.answer_in_order(ts);
                        return;
                    }
                }
                if self.requests == 0 || len <= control_size(tls13) {
                    // Before any request: session tickets; tiny: alerts, not a response.
                    return;
                }
                // (HTTP/2 read a record each knows its tickets by their size.)
                let tickets_unknown = self.tls13 && !self.per_record();
                if tickets_unknown && self.requests == 1 && self.first_response.len() < MAX_LEADING
                {
                    self.first_response.push((ts, len));
                }
                if let Some(ex) = self.current() {
                    ex.response_first.get_or_insert(ts);
                    ex.response_last = Some(ts);
                }
                self.answered = true;
                self.last = Some(Side::Server);
            }
        }
    }

    fn h2s(&mut self) -> &mut H2 {
        self.h2s.get_or_insert_with(Box::default)
    }

    /// A client flight begins a request.
    fn start_request(&mut self, ts: Timestamp) {
        self.answered = false;
        self.settle_first_response();
        self.add_request(ts);
    }

    /// A request at `ts`, listed in order of time (HTTP/2 may find one
    /// after a later one).
    fn add_request(&mut self, ts: Timestamp) {
        self.requests += 1;
        self.exchanges.insert_by_start(Exchange::started(ts));
    }

    /// Multiplexed from now on: the next response answers the first
    /// request not answered yet.
    fn next_answer_from_exchanges(&mut self) {
        self.settle_first_response();
        let next = self.exchanges.first_unanswered(0);
        self.h2s().next_answer = next;
    }

    /// HTTP/2 multiplexed: a server record answers the oldest request not
    /// yet answered, or goes on with the latest answer.
    fn answer_in_order(&mut self, ts: Timestamp) {
        self.answered = true;
        self.last = Some(Side::Server);
        // Requests answered before the connection was seen multiplexed
        // (they may sit among the ones found later) are passed over.
        let from = self.h2s().next_answer;
        let next = self.exchanges.first_unanswered(from);
        self.h2s().next_answer = next;
        match self.exchanges.get_mut(next) {
            Some(ex) => {
                ex.response_first = Some(ts);
                ex.response_last = Some(ts);
                self.h2s().next_answer += 1;
            }
            None => {
                let latest = next.checked_sub(1).and_then(|i| self.exchanges.get_mut(i));
                if let Some(ex) = latest {
                    ex.response_last = Some(ts);
                }
            }
        }
    }

    fn current(&mut self) -> Option<&mut Exchange> {
        let index = usize::try_from(self.requests).ok()?.checked_sub(1)?;
        self.exchanges.get_mut(index)
    }

    /// TLS 1.3: the first response starts after the leading ticket-sized
    /// records, when anything follows them.
    fn settle_first_response(&mut self) {
        if self.first_response.is_empty() {
            return;
        }
        let records = std::mem::take(&mut self.first_response);
        let leading = records
            .iter()
            .take_while(|(_, len)| TICKET_SIZES.contains(len))
            .count();
        let first = match records.get(leading) {
            Some(&(ts, _)) => ts,
            None => match records.last() {
                Some(&(ts, _)) => ts,
                None => return,
            },
        };
        if let Some(ex) = self.exchanges.first_mut() {
            ex.response_first = Some(first);
        }
    }

    /// The connection ended.
    pub fn finish(&mut self) {
        self.settle_first_response();
        if self.per_record() {
            // GOAWAY and the like after the server's last record.
            for _ in 0..self.h2s().closing_requests() {
                self.drop_last_request();
            }
        } else {
            let closing = self.flight_max <= MAX_CLOSING_FLIGHT;
            let body = !self.h2 && self.bodies.completes_sealed();
            if self.last == Some(Side::Client) && !self.answered && (closing || body) {
                self.drop_last_request();
            }
        }
        self.exchanges.shrink_to_fit();
    }

    /// The last request counted was not one.
    fn drop_last_request(&mut self) {
        if self.requests == 0 {
            return;
        }
        self.exchanges.pop();
        self.requests -= 1;
    }
}

fn control_size(tls13: bool) -> usize {
    if tls13 {
        MAX_CONTROL_RECORD_13
    } else {
        MAX_CONTROL_RECORD_12
    }
}

#[cfg(test)]
mod tests;
