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
//! Does not parse records; `analyze::tls` feeds it their sizes and times.

use crate::analyze::http::Exchange;
use crate::record::Side;
use crate::time::Timestamp;

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
    /// ALPN selected h2 (visible in TLS ≤ 1.2 only).
    pub h2_selected: bool,
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

    /// An application-data record after the handshake completed.
    pub fn record(&mut self, side: Side, len: usize, ts: Timestamp, tls13: bool) {
        self.tls13 = tls13;
        match side {
            Side::Client => {
                if len <= control_size(tls13) {
                    return;
                }
                self.client_records += 1;
                if self.h2_selected && self.client_records == 1 && len <= MAX_H2_PREFACE_FLIGHT {
                    return;
                }
                if self.last == Some(Side::Client) {
                    self.flight_max = self.flight_max.max(len);
                } else {
                    self.flight_max = len;
                    self.answered = false;
                    self.settle_first_response();
                    self.requests += 1;
                    if self.exchanges.len() < self.keep {
                        self.exchanges.push(Exchange::started(ts));
                    }
                }
                self.last = Some(Side::Client);
            }
            Side::Server => {
                if self.requests == 0 || len <= control_size(tls13) {
                    // Before any request: session tickets; tiny: alerts, not a response.
                    return;
                }
                if self.tls13 && self.requests == 1 && self.first_response.len() < MAX_LEADING {
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
        let closing = !self.answered && self.flight_max <= MAX_CLOSING_FLIGHT;
        if self.last == Some(Side::Client) && closing && self.requests > 0 {
            if self.exchanges.len() as u64 == self.requests {
                self.exchanges.pop();
            }
            self.requests -= 1;
        }
        self.exchanges.shrink_to_fit();
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
        f.h2_selected = true;
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
}
