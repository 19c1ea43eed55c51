//! Sealed records opened with a key log's secrets, handed on: application
//! data to the receiver of plaintext (the HTTP parsers), the handshake
//! messages and alerts inside to the handshake analysis — so that with keys
//! TLS 1.3's EncryptedExtensions (the ALPN chosen, 0-RTT accepted),
//! certificates, Finished messages, tickets and KeyUpdates, and alerts of
//! either version, are read as plaintext ones are.
//!
//! Does not hold keys or open records itself (`decrypt` does).

use super::decrypt::Opened;
use super::records::APPLICATION_DATA;
use super::{Plaintext, TlsAnalyzer};
use crate::record::Side;
use crate::time::Timestamp;

impl TlsAnalyzer {
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
