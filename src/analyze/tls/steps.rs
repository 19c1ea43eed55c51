//! A TLS handshake's steps as the analyzer saw them — the message's name,
//! its side, the capture time of the packet that completed it, and an
//! alert's two bytes — 16 bytes each, and kept that way until the
//! connection's record is made: a closed connection waits out its close
//! linger holding its findings, and a record's [`TlsEvent`] (72 bytes: two
//! clocks, a time since the start, an optional string) is made only then,
//! from the same times, so the record is the same.
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
    UnknownHandshake,
    ChangeCipherSpec,
    Alert,
    EncryptedRecord,
}

impl StepName {
    /// Every name, in declaration order (the length follows the last
    /// variant, so a name added without listing it here does not compile).
    #[cfg(test)]
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
        StepName::UnknownHandshake,
        StepName::ChangeCipherSpec,
        StepName::Alert,
        StepName::EncryptedRecord,
    ];

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
            StepName::UnknownHandshake => "unknown_handshake",
            StepName::ChangeCipherSpec => "change_cipher_spec",
            StepName::Alert => "alert",
            StepName::EncryptedRecord => "encrypted_record",
        }
    }
}

/// One step: a handshake message, a ChangeCipherSpec, an alert, the first
/// encrypted record of a side.
#[derive(Clone, Copy, Debug)]
struct Step {
    ts: Timestamp,
    name: StepName,
    side: Side,
    /// An alert's bytes, the event's detail.
    alert: Option<Alert>,
}

/// Steps a handshake's list has room for from its first one.
const STEPS: usize = 8;

/// The steps of one connection's handshake, in the order seen.
#[derive(Clone, Debug, Default)]
pub struct Steps {
    list: Vec<Step>,
}

impl Steps {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn push(&mut self, name: StepName, side: Side, ts: Timestamp, alert: Option<Alert>) {
        if self.list.capacity() == 0 {
            // Room for a whole short handshake at once (a resumed one, or
            // TLS 1.3's, has 6–9 steps; growing from nothing took two or
            // three allocations).
            self.list.reserve_exact(STEPS);
        }
        self.list.push(Step {
            ts,
            name,
            side,
            alert,
        });
    }

    /// Gives back the room not in use (once the handshake is over).
    pub fn shrink_to_fit(&mut self) {
        self.list.shrink_to_fit();
    }

    /// The record's events: times through `at`, and since `start` (the
    /// connection's SYN, or its first packet).
    pub fn into_events(self, start: Timestamp, at: &dyn Fn(Timestamp) -> Instant) -> Vec<TlsEvent> {
        self.list
            .into_iter()
            .map(|step| TlsEvent {
                name: step.name.as_str(),
                side: step.side,
                time: at(step.ts),
                since_start: step.ts.secs_since(start),
                detail: step.alert.map(Alert::detail),
            })
            .collect()
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
        assert_eq!(std::mem::size_of::<Step>(), 16);
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
