//! The handshake layer of the TLS analyzer: plaintext handshake bytes put
//! together into messages across records, each message turned into an event
//! and, for the hellos, parsed (`hello`); the SSLv2-compatible hellos.
//!
//! Does not read records (`records`) or decide completion (`mod.rs`).

use super::certificate;
use super::hello::{self, ClientHelloFacts, ServerHelloFacts};
use super::steps::StepName;
use super::{is_tls13, TlsAnalyzer};
use crate::record::Side;
use crate::time::Timestamp;

/// The longest Certificate message read (a chain of four 4 KiB
/// certificates is 16 KiB), compressed or not; a longer one is counted,
/// not read.
const MAX_CERTIFICATE: usize = certificate::MAX_UNCOMPRESSED;

/// Handshake messages of `len` bytes whose bodies are read: the hellos,
/// TLS 1.3's EncryptedExtensions (with a key log) and a Certificate or
/// CompressedCertificate. Others are skipped by length.
fn kept(kind: u8, len: usize) -> bool {
    matches!(kind, 1 | 2 | 8) || (matches!(kind, 11 | 25) && len <= MAX_CERTIFICATE)
}

impl TlsAnalyzer {
    pub(super) fn sslv2(&mut self, side: Side, body: &[u8], ts: Timestamp) {
        // SSLv2 CLIENT-HELLO: type 1, version (2 bytes); SERVER-HELLO: type 4.
        match (side, body.first()) {
            (Side::Client, Some(1)) => {
                if let Some(v) = body.get(1..3).and_then(|v| v.first_chunk::<2>()) {
                    self.sslv2_version = Some(u16::from_be_bytes(*v));
                }
                self.client_hellos += 1;
                self.first_hello.get_or_insert(ts);
                self.event(StepName::ClientHelloSslV2, side, ts, None);
            }
            (Side::Server, Some(4)) => self.event(StepName::ServerHelloSslV2, side, ts, None),
            _ => self.malformed += 1,
        }
    }

    /// Plaintext handshake bytes: split into messages, which may span
    /// records. Only the hellos (and EncryptedExtensions) are kept whole
    /// (to parse them); the bodies of
    /// other messages (a Certificate chain can be hundreds of kilobytes) are
    /// skipped by their length. Messages inside `body` are read in place;
    /// only a message split across records is copied, and only its own
    /// bytes, so every byte is copied at most once.
    pub(super) fn handshake_bytes(&mut self, side: Side, body: &[u8], ts: Timestamp) {
        let cap = self.cap;
        let dir = self.dir(side);
        if dir.overflowed {
            return;
        }
        dir.pending_ts = dir.pending_ts.max(ts);
        let ts = dir.pending_ts;
        let mut input = body;
        loop {
            let dir = self.dir(side);
            if let Some((kind, remaining)) = dir.skipping {
                let n = remaining.min(input.len());
                input = input.get(n..).unwrap_or(&[]);
                if n < remaining {
                    dir.skipping = Some((kind, remaining - n));
                    return;
                }
                dir.skipping = None;
                self.message(side, kind, &[], ts);
                continue;
            }
            if dir.pending.is_empty() {
                // Whole messages straight from the input.
                let Some((&[kind, a, b, c], rest)) = input.split_first_chunk::<4>() else {
                    if input.is_empty() {
                        return;
                    }
                    dir.pending.extend_from_slice(input);
                    return;
                };
                let len = u32::from_be_bytes([0, a, b, c]) as usize;
                if !kept(kind, len) {
                    // Not kept: skip the body, here or as it arrives.
                    let here = len.min(rest.len());
                    input = rest.get(here..).unwrap_or(&[]);
                    if here < len {
                        dir.skipping = Some((kind, len - here));
                        return;
                    }
                    self.message(side, kind, &[], ts);
                    continue;
                }
                if len > cap {
                    self.overflow(side);
                    return;
                }
                if let Some(msg) = rest.get(..len) {
                    input = rest.get(len..).unwrap_or(&[]);
                    if input.is_empty() {
                        dir.pending_ts = Timestamp::default();
                    }
                    self.message(side, kind, msg, ts);
                    continue;
                }
            }
            // A message split across records: buffer just its own bytes.
            let dir = self.dir(side);
            let need = match dir.pending.split_first_chunk::<4>() {
                Some((&[_, a, b, c], rest)) => {
                    (u32::from_be_bytes([0, a, b, c]) as usize).saturating_sub(rest.len())
                }
                None => 4 - dir.pending.len(),
            };
            let take = need.min(input.len());
            if dir.pending.len() + take > cap {
                self.overflow(side);
                return;
            }
            dir.pending
                .extend_from_slice(input.get(..take).unwrap_or_default());
            input = input.get(take..).unwrap_or(&[]);
            let Some((&[kind, a, b, c], rest)) = dir.pending.split_first_chunk::<4>() else {
                return;
            };
            let len = u32::from_be_bytes([0, a, b, c]) as usize;
            if !kept(kind, len) {
                let here = len.min(rest.len());
                dir.pending.clear();
                if here < len {
                    dir.skipping = Some((kind, len - here));
                } else {
                    self.message(side, kind, &[], ts);
                }
                continue;
            }
            if len > cap {
                self.overflow(side);
                return;
            }
            if rest.len() < len {
                if input.is_empty() {
                    return;
                }
                continue;
            }
            let mut msg = std::mem::take(&mut dir.pending);
            if input.is_empty() {
                dir.pending_ts = Timestamp::default();
            }
            self.message(side, kind, msg.get(4..4 + len).unwrap_or_default(), ts);
            msg.clear();
            self.dir(side).pending = msg;
        }
    }

    /// A handshake message larger than the buffer cap: that direction's
    /// handshake parsing stops.
    fn overflow(&mut self, side: Side) {
        let dir = self.dir(side);
        dir.overflowed = true;
        dir.pending = Vec::new();
        self.malformed += 1;
    }

    fn message(&mut self, side: Side, kind: u8, body: &[u8], ts: Timestamp) {
        let name = match kind {
            1 => {
                self.client_hellos += 1;
                self.first_hello.get_or_insert(ts);
                if let Some(decrypter) = self.decrypter.as_mut() {
                    decrypter.client_hello(body);
                }
                match ClientHelloFacts::parse(body) {
                    Some(facts) => {
                        if self.client_hello.is_none() {
                            self.client_hello = Some((ts, facts));
                        }
                    }
                    None => self.malformed += 1,
                }
                StepName::ClientHello
            }
            2 => match ServerHelloFacts::parse(body) {
                Some(facts) if facts.is_hello_retry_request() => {
                    self.hello_retry = true;
                    StepName::HelloRetryRequest
                }
                Some(facts) => {
                    if self.server_hello.is_none() {
                        self.flights.h2 = facts.alpn.as_deref() == Some("h2");
                        if !is_tls13(facts.version()) {
                            if let Some(overhead) = hello::aead_overhead_12(facts.cipher) {
                                self.flights.set_overhead(overhead, overhead);
                            }
                        }
                        if let Some(decrypter) = self.decrypter.as_mut() {
                            decrypter.server_hello(&facts, is_tls13(facts.version()));
                        }
                        self.server_hello = Some((ts, facts));
                    }
                    StepName::ServerHello
                }
                None => {
                    self.malformed += 1;
                    StepName::ServerHello
                }
            },
            6 => {
                self.hello_retry = true;
                StepName::HelloRetryRequest
            }
            8 => {
                // Readable only with a key log (TLS 1.3).
                match hello::encrypted_extensions(body) {
                    Some(ee) => {
                        if let Some((_, sh)) = self.server_hello.as_mut() {
                            if sh.alpn.is_none() {
                                self.flights.h2 = ee.alpn.as_deref() == Some("h2");
                                sh.alpn = ee.alpn;
                            }
                        }
                        self.early_data_accepted = Some(ee.early_data);
                    }
                    None => self.malformed += 1,
                }
                StepName::EncryptedExtensions
            }
            11 | 25 => {
                if side == Side::Server {
                    self.certificate_from_server = true;
                    let tls13 = self
                        .server_hello
                        .as_ref()
                        .is_some_and(|(_, s)| is_tls13(s.version()));
                    if self.certificate.is_none() {
                        self.certificate = certificate::of_message(kind, body, tls13).map(Box::new);
                    }
                }
                StepName::handshake(kind)
            }
            13 => {
                self.certificate_requested = true;
                StepName::CertificateRequest
            }
            20 => {
                let dir = self.dir(side);
                dir.finished.get_or_insert(ts);
                self.check_complete_12();
                StepName::Finished
            }
            _ => StepName::handshake(kind),
        };
        self.event(name, side, ts, None);
    }
}
