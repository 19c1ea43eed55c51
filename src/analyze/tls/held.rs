//! Each TLS record the stream reader found, handled in order: opened with
//! the key log's keys where sealed, its handshake messages, alert or
//! plaintext handed on, or read as without keys. And in a live capture,
//! whose key log is followed as the client writes it, the records that
//! come before the client has logged their secrets: held (a few, for a
//! short while) and handled once the secrets come. On loopback the
//! server's whole TLS 1.3 flight (EncryptedExtensions, certificate,
//! Finished) rides in the ServerHello's own segment, before any client
//! can have logged the keys that open it; without holding it the chosen
//! ALPN, the certificate and the handshake's end would be lost, and the
//! Finished timed by record size.
//!
//! Owns the held records and their bounds. Does not read records from the
//! stream (`records`) or open them (`decrypt`, `sealed`).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::decrypt::Opened;
use super::records::{ALERT, APPLICATION_DATA, HANDSHAKE};
use super::{give_back, Plaintext, TlsAnalyzer};
use crate::record::Side;
use crate::time::Timestamp;

/// Records held per connection, their bytes, and for how long (capture
/// time, from the first): a client that logs its secrets does so within
/// milliseconds; one that does not is read as without a key log once a
/// bound is reached. A TLS 1.3 server's flight is a few kilobytes (its
/// certificate chain the most of it).
const MAX_RECORDS: usize = 64;
const MAX_BYTES: usize = 128 * 1024;
const HOLD_FOR: i64 = 2_000_000_000;
/// Bytes held over all connections of the process (clients that never
/// log their secrets, opening connections faster than 2 s lets them go).
const BUDGET: usize = 64 << 20;
static HELD_BYTES: AtomicUsize = AtomicUsize::new(0);

/// A record as the reader found it: its body if kept.
#[derive(Debug)]
pub(super) struct Record {
    pub side: Side,
    pub content_type: u8,
    pub version: u16,
    pub len: usize,
    pub body: Option<Vec<u8>>,
    pub ts: Timestamp,
}

/// Records waiting for the secrets that open them, in the order they came.
#[derive(Debug, Default)]
pub(super) struct Held {
    records: Vec<Record>,
    bytes: usize,
}

impl Held {
    /// Keeps `record` if the bounds allow; whether kept.
    fn keep(&mut self, record: Record) -> Result<(), Record> {
        let size = record.body.as_ref().map_or(0, Vec::len);
        let fresh = self
            .records
            .first()
            .is_none_or(|h| record.ts.0.saturating_sub(h.ts.0) < HOLD_FOR);
        let room = self.records.len() < MAX_RECORDS && self.bytes + size <= MAX_BYTES;
        if !(fresh && room) {
            return Err(record);
        }
        let taken = HELD_BYTES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |all| {
            all.checked_add(size).filter(|&after| after <= BUDGET)
        });
        if taken.is_err() {
            return Err(record);
        }
        self.bytes += size;
        self.records.push(record);
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes > 0 {
            HELD_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

impl TlsAnalyzer {
    /// A record from the stream: held while a followed key log may still
    /// give the secrets it (or one held before it) needs, else handled —
    /// after those held, once the secrets came or the bounds were reached.
    pub(super) fn take_record(
        &mut self,
        record: Record,
        plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>),
    ) {
        // Without a key log (most analyses) or one read once, nothing waits.
        let follows = self.decrypter.as_ref().is_some_and(|d| d.awaits_secrets());
        if self.held.records.is_empty() && !(follows && self.sealed(&record)) {
            return self.handle(record, plain);
        }
        let Some(decrypter) = self.decrypter.as_mut() else {
            return self.handle(record, plain);
        };
        let record = match decrypter.look_again() || !decrypter.awaits_secrets() {
            true => record,
            false => match self.held.keep(record) {
                Ok(()) => return,
                Err(record) => record,
            },
        };
        self.replay(plain);
        self.handle(record, plain);
    }

    /// The streams ended: a last look for the secrets, and the records
    /// still held handled with what there is.
    pub(super) fn release(&mut self, plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>)) {
        if self.held.records.is_empty() {
            return;
        }
        if let Some(decrypter) = self.decrypter.as_mut() {
            decrypter.look_again();
        }
        self.replay(plain);
    }

    /// Handles the held records, in the order they came.
    fn replay(&mut self, plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>)) {
        let records = std::mem::take(&mut self.held.records);
        // Their bytes go back to the budget.
        self.held = Held::default();
        for record in records {
            self.handle(record, plain);
        }
    }

    /// Whether `record` is sealed: application data, or a handshake
    /// message or alert after its side's ChangeCipherSpec.
    fn sealed(&self, record: &Record) -> bool {
        let encrypted = self.dir_ref(record.side).encrypted;
        record.content_type == APPLICATION_DATA
            || (encrypted && matches!(record.content_type, HANDSHAKE | ALERT))
    }

    /// Opens `record` if sealed and reads what it holds.
    fn handle(&mut self, record: Record, plain: &mut dyn FnMut(Side, Timestamp, Plaintext<'_>)) {
        let sealed = self.sealed(&record);
        let Record {
            side,
            content_type,
            version,
            len,
            mut body,
            ts,
        } = record;
        let opened = match (sealed, body.as_mut()) {
            (true, Some(body)) => self.open(side, content_type, version, body, ts, plain),
            _ => Opened::Closed,
        };
        match (opened, body.as_deref()) {
            (Opened::Handshake(r), Some(body)) => {
                let text = body.get(r).unwrap_or_default();
                self.opened(side, content_type, false, text, ts);
            }
            (Opened::Alert(r), Some(body)) => {
                let text = body.get(r).unwrap_or_default();
                self.opened(side, content_type, true, text, ts);
            }
            (_, body) => {
                // A sealed body that did not open is not read, as without
                // keys (an alert's body is kept: it shows only when in the
                // clear).
                let seen = body.filter(|_| !sealed || content_type == ALERT);
                self.record(side, content_type, len, seen, ts);
            }
        }
        if let Some(body) = body {
            give_back(body);
        }
        self.after_record(plain);
    }
}
