//! What the TLS analyzer found in one connection, kept compact until the
//! connection's record is made: versions and the cipher as their numbers,
//! times as capture timestamps, the alert as its two bytes, the
//! fingerprints shared with the memo that made them (and, from there, with
//! the record). A closed connection holds this through its close linger
//! (at 50 000 connections a second, 50 000 of them at once), so its names
//! and clocks — a [`TlsInfo`] is 472 bytes and half a dozen strings — are
//! made only with the record, from the same values, so the record is the
//! same.
//!
//! Does not decide anything: the analyzer (`super`) fills it in.

use std::sync::Arc;

use super::alerts::Alert;
use super::hello::{cipher_name, version_name, ClientHelloFacts, ClientPrints, ServerHelloFacts};
use super::steps::Steps;
use super::{is_tls13, TlsAnalyzer};
use crate::record::{
    CertificateInfo, Decryption, EarlyData, Instant, Name, Side, TlsAlert, TlsInfo, TlsOutcome,
};
use crate::time::Timestamp;

/// A connection's TLS section, before its names and clocks are made.
#[derive(Debug)]
pub struct Findings {
    /// The ServerHello's version (`supported_versions` considered).
    pub(super) version: Option<u16>,
    /// The highest version the client offered.
    pub(super) offered: Option<u16>,
    pub(super) cipher: Option<u16>,
    /// The strings and the list boxed to their length (8 bytes less each
    /// than a `String` or `Vec`, which keeps the findings a size class
    /// smaller while the connection lingers).
    pub(super) sni: Option<Box<str>>,
    pub(super) alpn: Option<Box<str>>,
    pub(super) alpn_offered: Box<[String]>,
    /// TLS 1.3: which of `alpn_offered` the EncryptedExtensions' size told.
    pub(super) alpn_by_size: Option<u8>,
    pub(super) resumed: bool,
    pub(super) resumption: Option<Resumption>,
    /// The session the ClientHello offered to resume, and how.
    pub(super) resumption_offered: Option<Resumption>,
    /// The server gave the client a session to resume later (`None`: not
    /// known).
    pub(super) session_issued: Option<bool>,
    pub(super) hello_retry: bool,
    pub(super) early_data_offered: bool,
    pub(super) early_data_accepted: Option<bool>,
    pub(super) client_certificate_requested: Option<bool>,
    pub(super) outcome: TlsOutcome,
    /// The first alert: its side, bytes and time.
    pub(super) alert: Option<(Side, Alert, Timestamp)>,
    pub(super) client_hello: Option<Timestamp>,
    pub(super) server_hello: Option<Timestamp>,
    pub(super) complete: Option<Timestamp>,
    pub(super) first_app_data: Option<Timestamp>,
    /// JA3 and JA4, as the fingerprint memo keeps them.
    pub(super) ja3_ja4: Option<ClientPrints>,
    pub(super) ja3s: Option<Arc<str>>,
    pub(super) steps: Steps,
    pub(super) gap_bytes: u64,
    /// Boxed together: only runs with a key log have a decryption, only
    /// full handshakes a certificate read, and the findings a closed
    /// connection keeps stay in their size class.
    pub(super) rare: Option<Box<Rare>>,
    /// The connection's SYN (or first packet): the times since the start
    /// count from it.
    pub(super) start: Timestamp,
}

/// The findings few connections have.
#[derive(Debug)]
pub(super) struct Rare {
    decryption: Option<Decryption>,
    certificate: Option<CertificateInfo>,
}

impl Rare {
    /// Both, boxed; `None` when neither is there.
    fn new(
        decryption: Option<Decryption>,
        certificate: Option<Box<CertificateInfo>>,
    ) -> Option<Box<Rare>> {
        let certificate = certificate.map(|c| *c);
        (decryption.is_some() || certificate.is_some()).then(|| {
            Box::new(Rare {
                decryption,
                certificate,
            })
        })
    }
}

/// How a session was resumed: a byte, its name made with the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumption {
    /// TLS 1.3's pre-shared key.
    Psk,
    /// A TLS 1.2 session ticket.
    Ticket,
    /// A TLS 1.2 session id.
    SessionId,
}

impl Resumption {
    pub fn as_str(self) -> &'static str {
        match self {
            Resumption::Psk => "psk",
            Resumption::Ticket => "ticket",
            Resumption::SessionId => "session_id",
        }
    }
}

impl Findings {
    /// The record's TLS section, its clocks made with `at`.
    pub fn into_info(self, at: &dyn Fn(Timestamp) -> Instant) -> TlsInfo {
        let (ja3, ja4) = match self.ja3_ja4.as_deref() {
            Some((ja3, ja4)) => (Some(Arc::clone(ja3)), Some(Arc::clone(ja4))),
            None => (None, None),
        };
        let start = self.start;
        let hello = self.client_hello;
        let (decryption, certificate) = match self.rare {
            Some(r) => (r.decryption, r.certificate),
            None => (None, None),
        };
        TlsInfo {
            version: self.version.map(version_name),
            offered_version: self.offered.map(version_name),
            cipher: self.cipher.map(cipher_name),
            sni: self.sni.map(String::from),
            alpn: self.alpn.map(String::from),
            alpn_by_size: self
                .alpn_by_size
                .and_then(|i| self.alpn_offered.get(usize::from(i)).cloned()),
            alpn_offered: self.alpn_offered.into_vec(),
            resumed: self.resumed,
            resumption: self.resumption.map(|r| Name::Borrowed(r.as_str())),
            resumption_offered: self.resumption_offered.map(|r| Name::Borrowed(r.as_str())),
            session_issued: self.session_issued,
            hello_retry: self.hello_retry,
            early_data: EarlyData {
                offered: self.early_data_offered,
                accepted: self.early_data_accepted,
            },
            client_certificate_requested: self.client_certificate_requested,
            certificate,
            outcome: self.outcome,
            alert: self.alert.map(|(side, alert, ts)| {
                let (level, description) = alert.names();
                TlsAlert {
                    side,
                    level,
                    description,
                    time: at(ts),
                }
            }),
            client_hello: hello.map(at),
            server_hello: self.server_hello.map(at),
            complete: self.complete.map(at),
            hello_to_hello: hello.zip(self.server_hello).map(|(c, s)| s.secs_since(c)),
            handshake: hello.zip(self.complete).map(|(c, d)| d.secs_since(c)),
            syn_to_app_data: self.first_app_data.map(|t| t.secs_since(start)),
            ja4,
            ja3,
            ja3s: self.ja3s,
            events: self.steps.into_events(start, at),
            gap_bytes: self.gap_bytes,
            decryption,
        }
    }
}

impl TlsAnalyzer {
    /// The TLS section, its steps still compact, or `None` when the
    /// connection was not TLS. `start` is the connection's SYN (or first
    /// packet). The steps and the server name are moved out, not copied
    /// (the analyzer goes with the connection's close or record); the
    /// ALPN lists are copied, as [`TlsAnalyzer::alpn_h2`] still reads them
    /// for the HTTP section.
    pub fn take_findings(&mut self, start: Timestamp) -> Option<Findings> {
        if self.detected != Some(true) {
            return None;
        }
        let ch = self.client_hello.as_ref().map(|(_, c)| c);
        let sh = self.server_hello.as_ref();
        let tls13 = sh.is_some_and(|(_, s)| is_tls13(s.version()));
        let (resumed, resumption) = resumption(
            ch,
            sh.map(|(_, s)| s),
            self.certificate_from_server,
            self.server.finished.is_some() || self.server.encrypted,
        );
        let outcome = if self.not_tls_after_all {
            TlsOutcome::NotTls
        } else if self.complete.is_some() {
            TlsOutcome::Complete
        } else if self.alert.is_some() {
            TlsOutcome::Failed
        } else if ch.is_none() && sh.is_none() && self.sslv2_version.is_none() {
            TlsOutcome::Midstream
        } else {
            TlsOutcome::Incomplete
        };
        let mut findings = Findings {
            version: sh.map(|(_, s)| s.version()),
            offered: ch.map(ClientHelloFacts::max_version).or(self.sslv2_version),
            cipher: sh.map(|(_, s)| s.cipher),
            sni: None,
            alpn: sh.and_then(|(_, s)| s.alpn.as_deref()).map(Box::from),
            alpn_offered: ch
                .map(|c| c.alpn.clone().into_boxed_slice())
                .unwrap_or_default(),
            alpn_by_size: match sh.and_then(|(_, s)| s.alpn.as_ref()) {
                Some(_) => None,
                None => self.alpn_sized.flatten(),
            },
            resumed,
            resumption,
            resumption_offered: ch.and_then(offered_resumption),
            session_issued: self.session_issued(),
            hello_retry: self.hello_retry,
            early_data_offered: ch.is_some_and(|c| c.early_data),
            early_data_accepted: self.early_data_accepted,
            // TLS 1.3's request is encrypted: known when a key log opened
            // the server's flight.
            client_certificate_requested: if tls13 {
                self.early_data_accepted.map(|_| self.certificate_requested)
            } else {
                Some(self.certificate_requested)
            },
            outcome,
            alert: self.alert,
            client_hello: self.first_hello,
            server_hello: sh.map(|(t, _)| *t),
            complete: self.complete,
            first_app_data: self.first_app_data,
            ja3_ja4: ch.map(ClientHelloFacts::ja3_ja4),
            ja3s: sh.map(|(_, s)| s.ja3s_remembered()),
            steps: Steps::default(),
            gap_bytes: self.gap_bytes,
            rare: Rare::new(self.decryption(), self.certificate.take()),
            start,
        };
        findings.sni = self
            .client_hello
            .as_mut()
            .and_then(|(_, c)| c.sni.take())
            .map(String::into_boxed_str);
        findings.steps = std::mem::take(&mut self.events);
        Some(findings)
    }
}

impl TlsAnalyzer {
    /// Whether the server gave the client a session it could resume
    /// later: a NewSessionTicket, or in TLS ≤ 1.2 a ServerHello's session
    /// id (empty when the server keeps no session). A TLS 1.3 ticket comes
    /// sealed after the handshake: with every record opened, none seen is
    /// none given; without keys it is not known.
    fn session_issued(&self) -> Option<bool> {
        let (_, sh) = self.server_hello.as_ref()?;
        if self.ticket {
            return Some(true);
        }
        if !is_tls13(sh.version()) {
            return Some(!sh.session_id.is_empty());
        }
        let opened = self.decryption().map(|d| d.outcome);
        (opened == Some(crate::record::DecryptionOutcome::Complete)).then_some(false)
    }
}

/// The session a ClientHello offers to resume: a TLS 1.3 pre-shared key,
/// a TLS 1.2 session ticket, or a TLS 1.2 session id (from a client that
/// does not offer TLS 1.3, whose legacy session id is random).
fn offered_resumption(ch: &ClientHelloFacts) -> Option<Resumption> {
    if ch.psk {
        Some(Resumption::Psk)
    } else if ch.session_ticket {
        Some(Resumption::Ticket)
    } else if !ch.session_id.is_empty() && !ch.supported_versions.contains(&0x0304) {
        Some(Resumption::SessionId)
    } else {
        None
    }
}

/// Full or resumed, and how.
fn resumption(
    ch: Option<&ClientHelloFacts>,
    sh: Option<&ServerHelloFacts>,
    server_certificate: bool,
    server_changed_cipher: bool,
) -> (bool, Option<Resumption>) {
    let Some(sh) = sh else {
        return (false, None);
    };
    if is_tls13(sh.version()) {
        return if sh.psk {
            (true, Some(Resumption::Psk))
        } else {
            (false, None)
        };
    }
    let offered_id = ch.map(|c| c.session_id.as_slice()).unwrap_or(&[]);
    let echoed = !sh.session_id.is_empty() && sh.session_id == offered_id;
    let abbreviated = server_changed_cipher && !server_certificate;
    if (echoed || abbreviated) && !server_certificate {
        // With a ticket offered, the echoed id only signals the ticket's acceptance.
        let ticket = ch.is_some_and(|c| c.session_ticket);
        return (
            true,
            Some(if ticket {
                Resumption::Ticket
            } else {
                Resumption::SessionId
            }),
        );
    }
    (false, None)
}

#[cfg(test)]
mod tests {
    /// A closed connection holds its findings through the linger: they
    /// must stay small (a `TlsInfo` is 472 bytes and its strings).
    #[test]
    fn findings_are_small() {
        let size = std::mem::size_of::<super::Findings>();
        assert!(size <= 224, "Findings is {size} bytes");
    }
}
