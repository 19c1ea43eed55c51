//! Sealed records opened with a key log's secrets, handed on: application
//! data to the receiver of plaintext (the HTTP parsers), the handshake
//! messages and alerts inside to the handshake analysis — so that with keys
//! TLS 1.3's EncryptedExtensions (the ALPN chosen, 0-RTT accepted),
//! certificates, Finished messages, tickets and KeyUpdates, and alerts of
//! either version, are read as plaintext ones are.
//!
//! 0-RTT data is held until the ServerHello names the suite that opens it,
//! and its plaintext until the server's EncryptedExtensions say whether it
//! was accepted: a refused client sends its requests again.
//!
//! Does not hold keys or open records itself (`decrypt` does).

use super::decrypt::Opened;
use super::records::APPLICATION_DATA;
use super::{Plaintext, TlsAnalyzer};
use crate::record::Side;
use crate::time::Timestamp;

/// 0-RTT data held, at most (servers accept 16 KiB or less: nginx's
/// `max_early_data` is 16 KiB).
const EARLY_CAP: usize = 64 * 1024;

/// A client's 0-RTT data: its sealed records, sent before the ServerHello
/// names the suite that opens them, and then their plaintext, until the
/// server's EncryptedExtensions say whether it was accepted (a refused
/// client sends its requests again, after the handshake).
#[derive(Debug, Default)]
pub(super) struct Early {
    /// Sealed: capture time, content type, version, body.
    sealed: Vec<(Timestamp, u8, u16, Vec<u8>)>,
    /// Opened: capture time, plaintext.
    plain: Vec<(Timestamp, Vec<u8>)>,
    /// Bytes held of both.
    held: usize,
}

impl Early {
    fn room(&mut self, len: usize) -> bool {
        let fits = self.held + len <= EARLY_CAP;
        if fits {
            self.held += len;
        }
        fits
    }
}

impl TlsAnalyzer {
    /// Whether `side`'s sealed records are to be kept: they are opened, or
    /// may be (0-RTT data before the ServerHello).
    pub(super) fn wants_sealed(&self, side: Side) -> bool {
        let Some(decrypter) = self.decrypter.as_ref() else {
            return false;
        };
        decrypter.active() || (side == Side::Client && self.early_possible())
    }

    /// The client offered 0-RTT and the ServerHello has not come yet.
    fn early_possible(&self) -> bool {
        self.server_hello.is_none()
            && self
                .client_hello
                .as_ref()
                .is_some_and(|(_, ch)| ch.early_data)
    }

    /// After each record: 0-RTT records held for the keys are opened once
    /// the ServerHello brought them, and their plaintext handed on once the
    /// server accepted it (dropped once it refused it).
    pub(super) fn after_record(&mut self, plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>)) {
        if !self.early.sealed.is_empty() && self.server_hello.is_some() {
            for (ts, content_type, version, mut body) in std::mem::take(&mut self.early.sealed) {
                let opened = self.open(Side::Client, content_type, version, &mut body, ts, plain);
                // An EndOfEarlyData (or an alert) among them, read as the
                // record loop reads one.
                let (alert, range) = match opened {
                    Opened::Handshake(range) => (false, range),
                    Opened::Alert(range) => (true, range),
                    _ => continue,
                };
                let text = body.get(range).unwrap_or_default();
                self.opened(Side::Client, content_type, alert, text, ts);
            }
        }
        let Some(accepted) = self.early_data_accepted else {
            return;
        };
        for (ts, text) in std::mem::take(&mut self.early.plain) {
            if accepted {
                plain(Side::Client, ts, Plaintext::Data(&text));
            }
        }
    }

    /// Opens a sealed record's `body` in place; hands application data on
    /// to `plain` (and a record that would not open, as lost bytes).
    pub(super) fn open(
        &mut self,
        side: Side,
        content_type: u8,
        version: u16,
        body: &mut [u8],
        ts: Timestamp,
        plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>),
    ) -> Opened {
        if side == Side::Client && self.early_possible() {
            // 0-RTT data: opened when the ServerHello names the suite.
            if self.early.room(body.len()) {
                self.early
                    .sealed
                    .push((ts, content_type, version, body.to_vec()));
            }
            return Opened::Closed;
        }
        let Some(decrypter) = self.decrypter.as_mut() else {
            return Opened::Closed;
        };
        let opened = decrypter.open(side, content_type, version, body);
        match &opened {
            Opened::Data(range) => {
                if let Some(text) = body.get(range.clone()) {
                    plain(side, ts, Plaintext::Data(text));
                }
            }
            Opened::Early(range) => {
                let text = body.get(range.clone()).unwrap_or_default();
                if self.early.room(text.len()) {
                    self.early.plain.push((ts, text.to_vec()));
                }
            }
            Opened::Lost => plain(side, ts, Plaintext::Lost(body.len() as u64)),
            Opened::Handshake(_) | Opened::Alert(_) | Opened::Closed => {}
        }
        opened
    }

    /// The plaintext of an opened record that held handshake messages or
    /// (`alert`) an alert, sent as `content_type` (TLS 1.3: application
    /// data).
    pub(super) fn opened(
        &mut self,
        side: Side,
        content_type: u8,
        alert: bool,
        text: &[u8],
        ts: Timestamp,
    ) {
        if content_type == APPLICATION_DATA {
            // TLS 1.3: a sealed record, whatever it held; the server's
            // encrypted flight has begun.
            self.first_sealed(side, ts);
            if side == Side::Server {
                self.server_flight = true;
            }
        }
        if alert {
            self.alert_seen(side, Some(text), ts);
        } else {
            self.handshake_bytes(side, text, ts);
        }
    }
}
