//! A TLS handshake's steps as the analyzer saw them — the message's name,
//! its side, the capture time of the packet that completed it, and an
//! alert's two bytes — kept as a few bytes each until the connection's
//! record is made: a closed connection waits out its close linger holding
//! its findings, and a record's [`TlsEvent`] (72 bytes: two clocks, a time
//! since the start, an optional string) is made only then, from the same
//! times, so the record is the same. A step is a byte for its name, side
//! and kind of alert, the alert's two bytes if it has them, and its time as
//! a signed LEB128 difference from the step before (the `leb128` crate):
//! a TLS 1.3 handshake's nine steps in about 45 bytes, where they took 144
//! as 16-byte structs.
//!
//! Does not decide what a step is (the analyzer does) nor what the rest of
//! the TLS section says.

use super::alerts::Alert;
use crate::record::{Instant, Side, TlsEvent};
use crate::time::Timestamp;

/// What a step was: a handshake message (by its type), a
/// ChangeCipherSpec, an alert, a side's first encrypted record. One byte;
/// [`StepName::as_str`] is the record's event name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepName {
    HelloRequest,
    ClientHello,
    ClientHelloSslV2,
    ServerHello,
    ServerHelloSslV2,
    HelloRetryRequest,
    NewSessionTicket,
    EndOfEarlyData,
    EncryptedExtensions,
    Certificate,
    ServerKeyExchange,
    CertificateRequest,
    ServerHelloDone,
    CertificateVerify,
    ClientKeyExchange,
    Finished,
    CertificateStatus,
    KeyUpdate,
    NextProtocol,
    CompressedCertificate,
    UnknownHandshake,
    ChangeCipherSpec,
    Alert,
    EncryptedRecord,
}

impl StepName {
    /// Every name, in declaration order (the length follows the last
    /// variant, so a name added without listing it here does not compile):
    /// a step's code is its place here.
    const ALL: [StepName; StepName::EncryptedRecord as usize + 1] = [
        StepName::HelloRequest,
        StepName::ClientHello,
        StepName::ClientHelloSslV2,
        StepName::ServerHello,
        StepName::ServerHelloSslV2,
        StepName::HelloRetryRequest,
        StepName::NewSessionTicket,
        StepName::EndOfEarlyData,
        StepName::EncryptedExtensions,
        StepName::Certificate,
        StepName::ServerKeyExchange,
        StepName::CertificateRequest,
        StepName::ServerHelloDone,
        StepName::CertificateVerify,
        StepName::ClientKeyExchange,
        StepName::Finished,
        StepName::CertificateStatus,
        StepName::KeyUpdate,
        StepName::NextProtocol,
        StepName::CompressedCertificate,
        StepName::UnknownHandshake,
        StepName::ChangeCipherSpec,
        StepName::Alert,
        StepName::EncryptedRecord,
    ];

    /// The step a handshake message of type `kind` is (RFC 8446 §4, RFC
    /// 5246 §7.4, RFC 8879 for a compressed certificate); a ServerHello that is a HelloRetryRequest is told by
    /// its random, not its type, so the caller decides that one.
    pub fn handshake(kind: u8) -> StepName {
        match kind {
            0 => StepName::HelloRequest,
            1 => StepName::ClientHello,
            2 => StepName::ServerHello,
            4 => StepName::NewSessionTicket,
            5 => StepName::EndOfEarlyData,
            6 => StepName::HelloRetryRequest,
            8 => StepName::EncryptedExtensions,
            11 => StepName::Certificate,
            12 => StepName::ServerKeyExchange,
            13 => StepName::CertificateRequest,
            14 => StepName::ServerHelloDone,
            15 => StepName::CertificateVerify,
            16 => StepName::ClientKeyExchange,
            20 => StepName::Finished,
            22 => StepName::CertificateStatus,
            24 => StepName::KeyUpdate,
            25 => StepName::CompressedCertificate,
            67 => StepName::NextProtocol,
            _ => StepName::UnknownHandshake,
        }
    }

    /// The event's name in the record.
    pub fn as_str(self) -> &'static str {
        match self {
            StepName::HelloRequest => "hello_request",
            StepName::ClientHello => "client_hello",
            StepName::ClientHelloSslV2 => "client_hello_sslv2",
            StepName::ServerHello => "server_hello",
            StepName::ServerHelloSslV2 => "server_hello_sslv2",
            StepName::HelloRetryRequest => "hello_retry_request",
            StepName::NewSessionTicket => "new_session_ticket",
            StepName::EndOfEarlyData => "end_of_early_data",
            StepName::EncryptedExtensions => "encrypted_extensions",
            StepName::Certificate => "certificate",
            StepName::ServerKeyExchange => "server_key_exchange",
            StepName::CertificateRequest => "certificate_request",
            StepName::ServerHelloDone => "server_hello_done",
            StepName::CertificateVerify => "certificate_verify",
            StepName::ClientKeyExchange => "client_key_exchange",
            StepName::Finished => "finished",
            StepName::CertificateStatus => "certificate_status",
            StepName::KeyUpdate => "key_update",
            StepName::NextProtocol => "next_protocol",
            StepName::CompressedCertificate => "compressed_certificate",
            StepName::UnknownHandshake => "unknown_handshake",
            StepName::ChangeCipherSpec => "change_cipher_spec",
            StepName::Alert => "alert",
            StepName::EncryptedRecord => "encrypted_record",
        }
    }
}

/// Steps a handshake keeps at most (a handshake that never ends, or
/// hostile records, stop adding here).
pub const MAX_STEPS: usize = 64;

/// Bytes a handshake's list has room for from its first step: a short
/// handshake whole (a resumed one, or TLS 1.3's, has 6–9 steps of about
/// five bytes; growing from nothing took two or three allocations).
const ROOM: usize = 64;

/// A step's first byte: its name's code in the low five bits, then its
/// side, then whether it is an alert with (`ALERT_BYTES`) or without
/// (`ALERT_NONE`: encrypted) its two bytes.
const SERVER: u8 = 1 << 5;
const ALERT_NONE: u8 = 1 << 6;
const ALERT_BYTES: u8 = 1 << 7;
const NAME: u8 = SERVER - 1;
// Every name's code fits in the bits for it.
const _: () = assert!(StepName::ALL.len() <= NAME as usize + 1);

/// The steps of one connection's handshake, in the order seen: their count
/// (a byte), the last one's time (eight bytes, which the next one's is
/// written from), then each step (the module's documentation). Only the
/// list, so that the findings holding it stay in their size class.
#[derive(Clone, Debug, Default)]
pub struct Steps {
    bytes: Vec<u8>,
}

/// The count and the last time, before the steps.
const HEADER: usize = 9;

impl Steps {
    pub fn len(&self) -> usize {
        usize::from(self.bytes.first().copied().unwrap_or(0))
    }

    /// The last step's time (zero before the first).
    fn last(&self) -> i64 {
        self.bytes
            .get(1..HEADER)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, i64::from_le_bytes)
    }

    /// Adds a step, unless [`MAX_STEPS`] are kept already.
    pub fn push(&mut self, name: StepName, side: Side, ts: Timestamp, alert: Option<Alert>) {
        let count = self.len();
        if count >= MAX_STEPS {
            return;
        }
        let last = self.last();
        if self.bytes.is_empty() {
            self.bytes.reserve_exact(ROOM);
            self.bytes.resize(HEADER, 0);
        }
        let mut head = name as u8 & NAME;
        if side == Side::Server {
            head |= SERVER;
        }
        match alert {
            None => {}
            Some(Alert(None)) => head |= ALERT_NONE,
            Some(Alert(Some(_))) => head |= ALERT_BYTES,
        }
        self.bytes.push(head);
        if let Some(Alert(Some(pair))) = alert {
            self.bytes.extend_from_slice(&pair);
        }
        // Writing to a `Vec` cannot fail.
        let _ = leb128::write::signed(&mut self.bytes, ts.0.wrapping_sub(last));
        if let Some((n, time)) = self
            .bytes
            .get_mut(..HEADER)
            .and_then(|header| header.split_first_mut())
        {
            *n = u8::try_from(count + 1).unwrap_or(u8::MAX);
            time.copy_from_slice(&ts.0.to_le_bytes());
        }
    }

    /// Gives back the room not in use (once the handshake is over).
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// The record's events: times through `at`, and since `start` (the
    /// connection's SYN, or its first packet).
    pub fn into_events(self, start: Timestamp, at: &dyn Fn(Timestamp) -> Instant) -> Vec<TlsEvent> {
        let mut events = Vec::with_capacity(self.len());
        let mut rest = self.bytes.get(HEADER..).unwrap_or_default();
        let mut ts = Timestamp(0);
        while let Some((&head, after)) = rest.split_first() {
            rest = after;
            let alert = if head & ALERT_BYTES != 0 {
                let Some((pair, after)) = rest.split_first_chunk::<2>() else {
                    break;
                };
                rest = after;
                Some(Alert(Some(*pair)))
            } else if head & ALERT_NONE != 0 {
                Some(Alert(None))
            } else {
                None
            };
            let Ok(delta) = leb128::read::signed(&mut rest) else {
                break;
            };
            ts = Timestamp(ts.0.wrapping_add(delta));
            let Some(name) = StepName::ALL.get(usize::from(head & NAME)) else {
                break;
            };
            let side = if head & SERVER != 0 {
                Side::Server
            } else {
                Side::Client
            };
            events.push(TlsEvent {
                name: name.as_str(),
                side,
                time: at(ts),
                since_start: ts.secs_since(start),
                detail: alert.map(Alert::detail),
            });
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_become_the_events_with_their_details_in_place() {
        let mut steps = Steps::default();
        steps.push(StepName::ClientHello, Side::Client, Timestamp(1_000), None);
        steps.push(
            StepName::Alert,
            Side::Server,
            Timestamp(3_000),
            Some(Alert(Some([2, 40]))),
        );
        steps.push(StepName::Finished, Side::Client, Timestamp(4_000), None);
        steps.push(
            StepName::Alert,
            Side::Client,
            Timestamp(5_000),
            Some(Alert(None)),
        );
        assert_eq!(steps.len(), 4);
        // The list alone: the findings holding it keep their size class.
        assert_eq!(std::mem::size_of::<Steps>(), 24);
        let at = |t: Timestamp| Instant {
            ts: t.0 as f64,
            at: (t.0 - 500) as f64,
        };
        let events = steps.into_events(Timestamp(0), &at);
        let got: Vec<_> = events
            .iter()
            .map(|e| (e.name, e.side, e.time.at, e.detail.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("client_hello", Side::Client, 500.0, None),
                (
                    "alert",
                    Side::Server,
                    2_500.0,
                    Some("fatal handshake_failure")
                ),
                ("finished", Side::Client, 3_500.0, None),
                ("alert", Side::Client, 4_500.0, Some("encrypted encrypted")),
            ]
        );
        assert_eq!(events[1].since_start, 3e-6);
    }

    /// Every name, side and kind of alert, and times that go back, jump
    /// across the whole range or repeat, come back as they went in; past
    /// the cap nothing is kept; a TLS 1.3 handshake takes a few bytes a step.
    #[test]
    fn steps_come_back_as_they_went_in() {
        let times = [
            1_700_000_000_123_456_789,
            1_700_000_000_123_456_789,
            1_700_000_000_123_400_000,
            0,
            -5,
            i64::MIN,
            i64::MAX,
            1_700_000_100_000_000_000,
        ];
        let mut steps = Steps::default();
        let mut want = Vec::new();
        for (i, name) in StepName::ALL.iter().cycle().take(70).enumerate() {
            let side = if i % 3 == 0 {
                Side::Server
            } else {
                Side::Client
            };
            let alert = match i % 4 {
                0 => None,
                1 => Some(Alert(None)),
                _ => Some(Alert(Some([(i % 3) as u8, i as u8]))),
            };
            let ts = Timestamp(times[i % times.len()]);
            steps.push(*name, side, ts, alert);
            if i < MAX_STEPS {
                want.push((name.as_str(), side, ts.0 as f64, alert.map(Alert::detail)));
            }
        }
        assert_eq!(steps.len(), MAX_STEPS);
        let at = |t: Timestamp| Instant {
            ts: t.0 as f64,
            at: t.0 as f64,
        };
        let got: Vec<_> = steps
            .into_events(Timestamp(0), &at)
            .into_iter()
            .map(|e| (e.name, e.side, e.time.at, e.detail))
            .collect();
        assert_eq!(got, want);

        let mut short = Steps::default();
        let start = 1_700_000_000_000_000_000;
        for (k, name) in [
            StepName::ClientHello,
            StepName::ServerHello,
            StepName::ChangeCipherSpec,
            StepName::EncryptedExtensions,
            StepName::Certificate,
            StepName::CertificateVerify,
            StepName::Finished,
            StepName::ChangeCipherSpec,
            StepName::Finished,
        ]
        .into_iter()
        .enumerate()
        {
            let side = if (1..=6).contains(&k) {
                Side::Server
            } else {
                Side::Client
            };
            short.push(name, side, Timestamp(start + k as i64 * 150_000), None);
        }
        short.shrink_to_fit();
        assert!(
            short.bytes.len() <= 9 + 10 + 8 * 4,
            "{} bytes",
            short.bytes.len()
        );
    }

    /// docs/json.md lists every event name a record can carry, and no two
    /// steps share one.
    #[test]
    fn every_step_name_is_documented_once() {
        let doc = include_str!("../../../docs/json.md");
        let row = doc
            .lines()
            .find(|l| l.starts_with("| `events` |"))
            .expect("the events row of docs/json.md");
        let mut seen = std::collections::HashSet::new();
        for name in StepName::ALL {
            let text = name.as_str();
            assert!(
                row.contains(&format!("`{text}`")),
                "{text} not in docs/json.md"
            );
            assert!(seen.insert(text), "{text} twice");
        }
    }
}
