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

use crate::analyze::http::Exchange;
use crate::record::Side;
use crate::time::Timestamp;
use h2::{H2Record, H2};

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

#[derive(Debug, Default)]
pub struct Flights {
    keep: usize,
    pub requests: u64,
    pub exchanges: Vec<Exchange>,
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
}

impl Flights {
    pub fn new(keep: usize) -> Flights {
        Flights {
            keep,
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

    /// An application-data record after the handshake completed.
    pub fn record(&mut self, side: Side, len: usize, ts: Timestamp, tls13: bool) {
        self.tls13 = tls13;
        match side {
            Side::Client => {
                if len <= control_size(tls13) {
                    return;
                }
                self.client_records += 1;
                if let Some(overhead) = self.overhead.filter(|_| self.h2) {
                    let plain = len.saturating_sub(overhead);
                    let new_flight = self.last != Some(Side::Client);
                    let first = self.client_records == 1;
                    match self.h2s().client(plain, ts, first, new_flight) {
                        H2Record::Control => return,
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
                if self.last == Some(Side::Client) {
                    self.flight_max = self.flight_max.max(len);
                } else {
                    self.flight_max = len;
                    self.start_request(ts);
                }
                self.last = Some(Side::Client);
            }
            Side::Server => {
                if self.per_record() {
                    let early = self.requests == 0 && tls13;
                    self.h2s().server_spoke(early, len);
                    // Control frames and tickets answer nothing, and the
                    // client's flight goes on across them.
                    let plain = len.saturating_sub(self.base_overhead);
                    if self.requests == 0 || !self.h2s().answers(plain, len) {
                        return;
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
        if self.exchanges.len() < self.keep {
            let at = self.exchanges.partition_point(|e| e.start <= ts);
            self.exchanges.insert(at, Exchange::started(ts));
        }
    }

    /// Multiplexed from now on: the next response answers the first
    /// request not answered yet.
    fn next_answer_from_exchanges(&mut self) {
        self.settle_first_response();
        let answered = self
            .exchanges
            .iter()
            .take_while(|e| e.response_first.is_some());
        let next = answered.count();
        self.h2s().next_answer = next;
    }

    /// HTTP/2 multiplexed: a server record answers the oldest request not
    /// yet answered, or goes on with the latest answer.
    fn answer_in_order(&mut self, ts: Timestamp) {
        self.answered = true;
        self.last = Some(Side::Server);
        let next = self.h2s().next_answer;
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
            let closing = !self.answered && self.flight_max <= MAX_CLOSING_FLIGHT;
            if self.last == Some(Side::Client) && closing {
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
        if self.exchanges.len() as u64 == self.requests {
            self.exchanges.pop();
        }
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
mod tests {
    use super::*;

    fn t(n: i64) -> Timestamp {
        Timestamp(n)
    }

    #[test]
    fn alternating_flights_are_requests() {
        // The TLS 1.3 curl conversation from captures/tls13-curl-keepalive.pcap.
        let mut f = Flights::new(10);
        let records = [
            (Side::Client, 106, 7419),
            (Side::Server, 282, 7731),
            (Side::Server, 282, 7959),
            (Side::Server, 1598, 8210),
            (Side::Client, 106, 8543),
            (Side::Server, 1598, 8680),
            (Side::Client, 106, 9023),
            (Side::Server, 1598, 9130),
            (Side::Client, 19, 9328),
        ];
        for (side, len, ts) in records {
            f.record(side, len, t(ts), true);
        }
        f.finish();
        assert_eq!(f.requests, 3);
        assert_eq!(
            f.exchanges[0].response_first,
            Some(t(8210)),
            "tickets are not the response"
        );
        assert_eq!(f.exchanges[0].response_last, Some(t(8210)));
        assert_eq!(f.exchanges[2].start, t(9023));
    }

    #[test]
    fn closing_alerts_after_the_last_response_are_not_a_request() {
        // JSSE with keep-alive off: request, response, then two 35-byte records.
        let mut f = Flights::new(10);
        for (side, len, ts) in [
            (Side::Client, 183, 1),
            (Side::Server, 1593, 2),
            (Side::Client, 35, 3),
            (Side::Client, 35, 4),
            (Side::Server, 19, 5),
        ] {
            f.record(side, len, t(ts), true);
        }
        f.finish();
        assert_eq!((f.requests, f.exchanges.len()), (1, 1));
    }

    #[test]
    fn h2_preface_and_settings_ack_are_not_requests() {
        let mut f = Flights::new(10);
        f.h2 = true;
        for (side, len, ts) in [
            (Side::Client, 81, 1),
            (Side::Server, 150, 2),
            (Side::Client, 57, 3),
            (Side::Server, 60, 4),
            (Side::Client, 25, 5),
            (Side::Server, 1368, 6),
            (Side::Client, 49, 7),
            (Side::Server, 1486, 8),
        ] {
            f.record(side, len, t(ts), false);
        }
        f.finish();
        assert_eq!(f.requests, 2);
    }

    #[test]
    fn tickets_before_the_first_request_and_multi_record_requests() {
        let mut f = Flights::new(10);
        f.record(Side::Server, 250, t(1), true);
        f.record(Side::Client, 500, t(2), true);
        f.record(Side::Client, 16000, t(3), true);
        f.record(Side::Server, 90, t(4), true);
        f.finish();
        assert_eq!(f.requests, 1);
        assert_eq!(f.exchanges[0].response_first, Some(t(4)));
    }

    use Side::{Client as C, Server as S};

    /// A TLS 1.3 HTTP/2 conversation with the client's lengths known
    /// (`pad` bytes of padding on each of its records): `(side,
    /// plaintext)`, a millisecond apart.
    fn h2(pad: usize, records: &[(Side, usize)]) -> Flights {
        conversation(true, pad, records)
    }

    /// The same in TLS 1.2 with AES-GCM (24 bytes a record).
    fn h2_12(records: &[(Side, usize)]) -> Flights {
        conversation(false, 0, records)
    }

    fn conversation(tls13: bool, pad: usize, records: &[(Side, usize)]) -> Flights {
        let base = if tls13 { 17 } else { 24 };
        let mut f = Flights::new(100);
        f.h2 = true;
        f.set_overhead(base + pad, base);
        for (i, &(side, plain)) in records.iter().enumerate() {
            let pad = if side == C { pad } else { 0 };
            f.record(side, plain + base + pad, t(i as i64), tls13);
        }
        f.finish();
        f
    }

    fn starts(f: &Flights) -> Vec<i64> {
        f.exchanges.iter().map(|e| e.start.0).collect()
    }

    #[test]
    fn h2_multiplexed_requests_are_the_records_of_one_size() {
        // Java's HttpClient, ten threads (captures/java-httpclient-h2-10x10,
        // 16 bytes of padding a record): tickets and the server's SETTINGS
        // before the first request, which shares a record with the preface;
        // SETTINGS ACK; four requests at once, then their responses; a
        // GOAWAY after the server's last record.
        let f = h2(
            16,
            &[
                (S, 248),
                (S, 248),
                (S, 40),
                (C, 128),
                (S, 127),
                (S, 1351),
                (C, 9),
                (C, 45),
                (C, 45),
                (C, 45),
                (C, 45),
                (S, 1468),
                (S, 1468),
                (S, 1468),
                (S, 1468),
                (C, 34),
            ],
        );
        assert_eq!(f.requests, 5);
        assert_eq!(starts(&f), [3, 7, 8, 9, 10]);
        // Answered in order once they are seen to be multiplexed.
        let firsts: Vec<_> = f.exchanges.iter().map(|e| e.response_first).collect();
        assert_eq!(firsts, [4, 11, 12, 13, 14].map(|n| Some(t(n))));
        assert_eq!(f.exchanges[0].response_last, Some(t(5)));
    }

    #[test]
    fn h2_bodies_are_not_requests() {
        // curl POSTing a small body three times (captures/h2-curl-post-5):
        // HEADERS then DATA, a ticket and the server's SETTINGS in between.
        let f = h2(
            0,
            &[
                (S, 248),
                (C, 64),
                (S, 248),
                (C, 71),
                (S, 49),
                (C, 9),
                (C, 50),
                (S, 229),
                (S, 13),
                (C, 21),
                (C, 50),
                (S, 229),
                (C, 21),
                (C, 50),
                (S, 229),
            ],
        );
        assert_eq!(f.requests, 3);
        assert_eq!(starts(&f), [3, 9, 12]);
        // Two uploads of 40 000 bytes, the server answering before each
        // body: the body's records, long and its last, are not requests.
        let f = h2(
            0,
            &[
                (C, 64),
                (S, 40),
                (C, 73),
                (C, 9),
                (S, 229),
                (C, 16384),
                (S, 13),
                (C, 16384),
                (C, 7241),
                (C, 23),
                (C, 16384),
                (C, 16384),
                (C, 7241),
                (S, 229),
            ],
        );
        assert_eq!(f.requests, 2);
        assert_eq!(starts(&f), [2, 9]);
    }

    #[test]
    fn h2_a_record_taken_for_a_body_is_a_request_when_its_size_comes_again() {
        // Chromium (captures/h2-chromium-page-2x21, TLS 1.2): the page,
        // then two image requests in one flight — the second could be the
        // first's body until a request of its size follows.
        let f = h2_12(&[
            (C, 70),
            (C, 455),
            (S, 149),
            (S, 566),
            (C, 9),
            (C, 152),
            (C, 39),
            (S, 708),
            (S, 808),
            (C, 39),
            (S, 908),
        ]);
        assert_eq!(f.requests, 4);
        assert_eq!(starts(&f), [1, 5, 6, 9]);
    }

    #[test]
    fn h2_two_records_of_one_size_in_a_flight_are_requests() {
        // Chromium sending the images' requests at once, with PRIORITY
        // frames (14) among them, before any response.
        let f = h2(
            0,
            &[
                (C, 70),
                (C, 455),
                (S, 126),
                (S, 584),
                (C, 152),
                (C, 39),
                (C, 41),
                (C, 14),
                (C, 14),
                (C, 39),
                (S, 725),
                (S, 825),
                (S, 925),
                (S, 1025),
            ],
        );
        assert_eq!(f.requests, 5);
        assert_eq!(starts(&f), [1, 4, 5, 6, 9]);
    }

    #[test]
    fn h2_preface_alone_then_settings_in_a_record_of_their_own() {
        // Chrome in the peer corpus (TLS 1.2): preface, SETTINGS and
        // WINDOW_UPDATE each sealed alone, one request; the server PINGs.
        let f = h2_12(&[
            (C, 24),
            (C, 27),
            (C, 13),
            (C, 40),
            (S, 40),
            (C, 9),
            (S, 736),
            (S, 17),
            (C, 17),
        ]);
        assert_eq!(f.requests, 1);
        assert_eq!(starts(&f), [3]);
    }

    #[test]
    fn h2_without_known_lengths_counts_flights() {
        // A CBC suite hides the lengths: flights, as before.
        let mut f = Flights::new(10);
        f.h2 = true;
        let records = [(C, 100), (C, 80), (C, 80), (S, 500), (C, 80), (S, 500)];
        for (i, (side, len)) in records.into_iter().enumerate() {
            f.record(side, len, t(i as i64), false);
        }
        f.finish();
        assert!(!f.per_record());
        assert_eq!(f.requests, 2);
    }
}
