//! The TLS analyzer's application-data records: the first sealed record of
//! each side, TLS 1.3's completion told from record sizes (the client's
//! Finished, or its flight's first record), the records handed to the
//! request estimate (`flights`) once the handshake is over, and what the
//! sizes of sealed records say when the keys are not there: the ALPN the
//! server chose (TLS 1.3's EncryptedExtensions) and the padding a client
//! adds to every record.
//!
//! Does not read record bodies (`records`, `messages`, `sealed` do) or
//! count requests itself (`flights` does).

use super::*;

/// Padding beyond this is not taken for a client's habit.
const MAX_PADDING: usize = 255;
/// Records of the client's TLS 1.3 flight after its first, kept until the
/// flight ends and tells which was the Finished; later ones go unseen.
const MAX_FLIGHT_REST: usize = 16;

impl TlsAnalyzer {
    /// The first application-data record (sealed) of `side`.
    pub(super) fn first_sealed(&mut self, side: Side, ts: Timestamp) {
        if self.dir(side).first_encrypted.is_none() {
            self.dir(side).first_encrypted = Some(ts);
            self.event(StepName::EncryptedRecord, side, ts, None);
        }
    }

    pub(super) fn application_data(&mut self, side: Side, len: usize, ts: Timestamp) {
        self.first_sealed(side, ts);
        if self.negotiated_13() {
            match side {
                Side::Server => {
                    if !self.server_flight {
                        self.encrypted_extensions_sized(len);
                    }
                    self.server_flight = true;
                    if self.client_flight_first.is_some() && self.complete.is_none() {
                        // The server spoke again: the client's flight is over.
                        self.complete_from_flight();
                    }
                }
                Side::Client if self.server_flight && self.complete.is_none() => {
                    if FINISHED_13_LENS.contains(&len) {
                        self.complete = Some(ts);
                        self.client.finished = Some(ts);
                        self.event(StepName::Finished, side, ts, None);
                        self.client_finished_sized(len);
                    } else if self.client_flight_first.is_none() {
                        self.client_flight_first = Some((ts, len));
                    } else if self.client_flight_rest.len() < MAX_FLIGHT_REST {
                        self.client_flight_rest.push((ts, len));
                    }
                    return;
                }
                Side::Client => {}
            }
        }
        // Application data proper: in TLS 1.3 after the handshake completed;
        // in TLS ≤ 1.2 once the client sent its Finished (False Start sends
        // the request before the server's Finished).
        let tls13 = self.negotiated_13();
        let started = if tls13 {
            self.complete.is_some_and(|c| c <= ts)
        } else {
            self.client.finished.is_some_and(|c| c <= ts)
        };
        if started {
            if side == Side::Client && self.first_app_data.is_none() {
                self.first_app_data = Some(ts);
            }
            self.flights.record(side, len, ts, tls13);
        }
    }

    /// TLS 1.3 without a Finished-sized record: the flight's first record
    /// completed the handshake and the rest, if any, were application data.
    pub(super) fn complete_from_flight(&mut self) {
        self.complete = self.client_flight_first.map(|(ts, _)| ts);
        if let Some((_, len)) = self.client_flight_first {
            self.client_finished_sized(len);
        }
        for (ts, len) in std::mem::take(&mut self.client_flight_rest) {
            self.first_app_data.get_or_insert(ts);
            self.flights.record(Side::Client, len, ts, true);
        }
    }

    pub(super) fn check_complete_12(&mut self) {
        if let (Some(c), Some(s)) = (self.client.finished, self.server.finished) {
            if self.complete.is_none() {
                self.complete = Some(c.max(s));
            }
        }
    }

    /// TLS 1.3: the server's first sealed record, `len` bytes, is usually
    /// its EncryptedExtensions alone, whose size may tell the ALPN it chose.
    fn encrypted_extensions_sized(&mut self, len: usize) {
        let Some((_, hello)) = &self.client_hello else {
            return;
        };
        let cipher = self.server_hello.as_ref().map(|(_, server)| server.cipher);
        let overhead = hello::record_overhead_13(cipher.unwrap_or_default());
        let Some(message) = len.checked_sub(overhead) else {
            return;
        };
        if let Some(chosen) = sizes::alpn_from_encrypted_extensions(hello, message) {
            let protocol = chosen.and_then(|i| hello.alpn.get(i));
            self.flights.h2 = protocol.is_some_and(|p| p == "h2");
            self.alpn_sized = Some(chosen.and_then(|i| u8::try_from(i).ok()));
        }
    }

    /// TLS 1.3: the client's Finished was sealed in a record of `len`
    /// bytes; beyond the suite's Finished, the type and the tag, that is
    /// the padding the client adds (JSSE adds 16 bytes to every record).
    fn client_finished_sized(&mut self, len: usize) {
        let Some((_, server)) = &self.server_hello else {
            return;
        };
        let Some(finished) = hello::finished_len_13(server.cipher) else {
            return;
        };
        let overhead = hello::record_overhead_13(server.cipher);
        if let Some(padding) = len.checked_sub(overhead + finished) {
            if padding <= MAX_PADDING {
                self.flights.set_overhead(overhead + padding, overhead);
            }
        }
    }

    /// Whether ALPN says HTTP/2: selected (TLS ≤ 1.2), read or told by its
    /// size (TLS 1.3), or else offered when the selection is encrypted.
    pub fn alpn_h2(&self) -> bool {
        match (&self.server_hello, &self.alpn_sized) {
            (Some((_, sh)), _) if sh.alpn.is_some() => sh.alpn.as_deref() == Some("h2"),
            (_, Some(sized)) => self.alpn_sized_protocol(*sized) == Some("h2"),
            _ => self
                .client_hello
                .as_ref()
                .is_some_and(|(_, ch)| ch.alpn.iter().any(|p| p == "h2")),
        }
    }

    /// The protocol offered at `index`, if any.
    fn alpn_sized_protocol(&self, index: Option<u8>) -> Option<&str> {
        let (_, hello) = self.client_hello.as_ref()?;
        hello.alpn.get(usize::from(index?)).map(String::as_str)
    }
}
