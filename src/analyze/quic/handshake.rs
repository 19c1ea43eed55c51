//! What a key log opens of a QUIC connection's Handshake packets: both
//! sides' CRYPTO streams read message by message — the server's
//! EncryptedExtensions (the ALPN it chose, whether it took 0-RTT),
//! Certificate, CertificateVerify and Finished, the client's Finished —
//! each with the time of the packet that completed it.
//!
//! Owns the handshake keys (`CLIENT_HANDSHAKE_TRAFFIC_SECRET`,
//! `SERVER_HANDSHAKE_TRAFFIC_SECRET`) and the walk of each stream, within a
//! budget of held bytes the connection table shares: only the bytes of
//! pieces that come ahead of their turn and an EncryptedExtensions' body
//! are kept, never a certificate. Does not read the Initial packets
//! (`initial`, `mod`) or the 0-RTT and 1-RTT ones (`app`).

use super::app::suite;
use super::initial::{self, Frame, Keys};
use super::reorder::{Bounds, Reorder};
use crate::analyze::tls::keylog::Secrets;
use crate::analyze::tls::{certificate, hello};
use crate::decode::LongPacket;
use crate::record::CertificateInfo;

/// Pieces of a stream held ahead of the bytes read so far.
const MAX_AHEAD: usize = 32;
/// The longest EncryptedExtensions read (its ALPN and early_data are a
/// few bytes; transport parameters are about 100).
const MAX_KEPT: usize = 4 * 1024;
/// The longest Certificate (or CompressedCertificate) read (within the
/// table's budget too).
const MAX_CERTIFICATE: usize = 16 * 1024;
/// The messages whose bodies are kept: EncryptedExtensions, Certificate,
/// CompressedCertificate (RFC 8879).
const ENCRYPTED_EXTENSIONS: u8 = 8;
const CERTIFICATE: u8 = 11;
const COMPRESSED_CERTIFICATE: u8 = 25;
/// Finished.
pub const FINISHED: u8 = 20;

/// A handshake message a stream completed: its type, and its body when it
/// is an EncryptedExtensions or a Certificate (empty otherwise).
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    pub kind: u8,
    pub body: Vec<u8>,
}

/// One direction's CRYPTO stream (of Handshake packets, or of 1-RTT ones
/// after the handshake), walked in order.
#[derive(Debug, Default)]
pub struct Flight {
    /// The stream's pieces put in order.
    order: Reorder,
    walk: Walk,
    /// A piece was dropped (too far ahead, over the budget): the rest of
    /// the stream is not read.
    lost: bool,
}

/// The walk of a stream's bytes, message by message.
#[derive(Debug, Default)]
struct Walk {
    /// The current message's header, as far as it came.
    header: [u8; 4],
    header_len: usize,
    /// Body bytes of the current message still to come.
    remaining: usize,
    /// The current message's body, if it is kept: an EncryptedExtensions
    /// of at most [`MAX_KEPT`] bytes, a Certificate of at most
    /// [`MAX_CERTIFICATE`] within the budget.
    keep: bool,
    body: Vec<u8>,
}

impl Flight {
    /// Bytes held.
    fn held(&self) -> usize {
        self.order.held() + self.walk.body.capacity()
    }

    /// Adds `data` at stream offset `offset`, growing by at most `budget`
    /// bytes; the messages it completes go to `out`.
    pub fn add(&mut self, offset: u64, data: &[u8], budget: usize, out: &mut Vec<Message>) {
        if self.lost {
            return;
        }
        let bounds = Bounds {
            pieces: MAX_AHEAD,
            reach: u64::MAX,
        };
        let walk = &mut self.walk;
        let added = self.order.add(offset, data, bounds, budget, |bytes| {
            walk.walk(bytes, budget, out)
        });
        if added.is_err() {
            self.lost = true;
            self.order = Reorder::default();
            self.walk.body = Vec::new();
        }
    }
}

impl Walk {
    /// Walks stream bytes that follow the ones walked before; a body kept
    /// grows by at most `budget` bytes.
    fn walk(&mut self, mut data: &[u8], budget: usize, out: &mut Vec<Message>) {
        while !data.is_empty() {
            if self.header_len < 4 {
                let take = (4 - self.header_len).min(data.len());
                let (head, rest) = data.split_at(take);
                if let Some(to) = self.header.get_mut(self.header_len..self.header_len + take) {
                    to.copy_from_slice(head);
                }
                self.header_len += take;
                data = rest;
                if self.header_len == 4 {
                    let [_, a, b, c] = self.header;
                    self.remaining = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                    self.keep = match self.header[0] {
                        ENCRYPTED_EXTENSIONS => self.remaining <= MAX_KEPT,
                        CERTIFICATE | COMPRESSED_CERTIFICATE => {
                            self.remaining <= MAX_CERTIFICATE.min(budget)
                        }
                        _ => false,
                    };
                    self.body = Vec::new();
                    if self.remaining == 0 {
                        self.finish(out);
                    }
                }
                continue;
            }
            let take = self.remaining.min(data.len());
            let (part, rest) = data.split_at(take);
            if self.keep {
                self.body.extend_from_slice(part);
            }
            self.remaining -= take;
            data = rest;
            if self.remaining == 0 {
                self.finish(out);
            }
        }
    }

    /// The current message is whole.
    fn finish(&mut self, out: &mut Vec<Message>) {
        out.push(Message {
            kind: self.header[0],
            body: std::mem::take(&mut self.body),
        });
        self.header_len = 0;
    }
}

/// The Handshake packets of one connection, with the key log's secrets.
pub struct Handshake {
    /// Keys, client then server, and the largest packet number opened.
    keys: [Option<Keys>; 2],
    largest: [Option<u64>; 2],
    flights: [Flight; 2],
    /// From the server's EncryptedExtensions: the ALPN it chose, whether
    /// it accepted 0-RTT, its max_idle_timeout (ms); its certificate
    /// chain.
    pub alpn: Option<String>,
    pub early_data_accepted: Option<bool>,
    pub idle_timeout_ms: Option<u64>,
    pub certificate: Option<CertificateInfo>,
    pub opened: u64,
    pub failed: u64,
    /// The error code of a CONNECTION_CLOSE the latest packet carried (a
    /// handshake given up), until taken.
    pub close: Option<u64>,
}

impl std::fmt::Debug for Handshake {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handshake")
    }
}

impl Handshake {
    /// The Handshake keys `secrets` give a connection of `version` that
    /// chose the suite `cipher`; `None` if there are none for either side.
    pub fn new(version: u32, cipher: u16, secrets: &Secrets) -> Option<Handshake> {
        let suite = suite(cipher)?;
        let keys = |s: &Option<Box<[u8]>>| Keys::from_secret(version, suite, s.as_deref()?, None);
        let keys = [
            keys(&secrets.client_handshake),
            keys(&secrets.server_handshake),
        ];
        keys.iter().any(Option::is_some).then(|| Handshake {
            keys,
            largest: [None; 2],
            flights: Default::default(),
            alpn: None,
            early_data_accepted: None,
            idle_timeout_ms: None,
            certificate: None,
            opened: 0,
            failed: 0,
            close: None,
        })
    }

    /// The keys a followed key log gave later, for the sides without.
    pub fn add_secrets(&mut self, version: u32, cipher: u16, secrets: &Secrets) {
        let Some(suite) = suite(cipher) else {
            return;
        };
        let given = [&secrets.client_handshake, &secrets.server_handshake];
        for (keys, secret) in self.keys.iter_mut().zip(given) {
            if keys.is_none() {
                *keys = secret
                    .as_deref()
                    .and_then(|s| Keys::from_secret(version, suite, s, None));
            }
        }
    }

    /// Whether `side`'s Handshake packets can be opened.
    pub fn opens(&self, side: usize) -> bool {
        self.keys.get(side).is_some_and(Option::is_some)
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.flights.iter().map(Flight::held).sum()
    }

    /// Opens a Handshake packet from `side` and walks its CRYPTO frames,
    /// growing by at most `budget` bytes; the messages it completed.
    pub fn packet(
        &mut self,
        side: usize,
        packet: &LongPacket<'_>,
        budget: usize,
        scratch: &mut Vec<u8>,
    ) -> Vec<Message> {
        let mut out = Vec::new();
        let (Some(Some(keys)), Some(largest), Some(flight)) = (
            self.keys.get(side),
            self.largest.get_mut(side),
            self.flights.get_mut(side),
        ) else {
            return out;
        };
        let Some((pn, plain)) = initial::open(keys, packet, *largest, scratch) else {
            self.failed += 1;
            return out;
        };
        *largest = Some(largest.map_or(pn, |l| l.max(pn)));
        self.opened += 1;
        let mut budget = budget;
        for frame in initial::frames(plain) {
            match frame {
                Frame::Crypto { offset, data } => {
                    let before = flight.held();
                    flight.add(offset, data, budget, &mut out);
                    budget = budget.saturating_sub(flight.held().saturating_sub(before));
                }
                Frame::Close { error } => {
                    self.close.get_or_insert(error);
                }
            }
        }
        for m in out.iter().filter(|_| side == 1) {
            match m.kind {
                ENCRYPTED_EXTENSIONS => {
                    if let Some(ee) = hello::encrypted_extensions(&m.body) {
                        self.alpn = ee.alpn;
                        self.early_data_accepted = Some(ee.early_data);
                        self.idle_timeout_ms = ee.quic_idle_timeout_ms;
                    }
                }
                CERTIFICATE | COMPRESSED_CERTIFICATE if self.certificate.is_none() => {
                    self.certificate = certificate::of_message(m.kind, &m.body, true);
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let len = body.len();
        let mut m = vec![kind, (len >> 16) as u8, (len >> 8) as u8, len as u8];
        m.extend_from_slice(body);
        m
    }

    fn kinds(out: &[Message]) -> Vec<u8> {
        out.iter().map(|m| m.kind).collect()
    }

    #[test]
    fn messages_come_out_whole_in_order_from_pieces_in_any_order() {
        let ee = message(8, &[0, 5, 0, 16, 0, 1, 0]);
        let stream = [
            ee.clone(),
            message(11, &[7; 3000]),
            message(15, &[1; 70]),
            message(20, &[2; 32]),
        ]
        .concat();
        let mut f = Flight::default();
        let mut out = Vec::new();
        // The certificate's tail first, then the start, repeated, then the
        // middle: nothing comes out until the bytes meet.
        f.add(2000, &stream[2000..], 1 << 20, &mut out);
        assert!(out.is_empty() && f.held() == stream.len() - 2000);
        f.add(0, &stream[..1000], 1 << 20, &mut out);
        assert_eq!(kinds(&out), [8]);
        assert_eq!(out[0].body, ee[4..]);
        f.add(0, &stream[..500], 1 << 20, &mut out);
        f.add(900, &stream[900..2100], 1 << 20, &mut out);
        assert_eq!(kinds(&out), [8, 11, 15, 20]);
        assert_eq!(out[1].body.len(), 3000, "a certificate is kept");
        assert_eq!(f.held(), 0);
        f.add(0, &stream, 1 << 20, &mut out);
        assert_eq!(out.len(), 4, "sent again: nothing new");
    }

    #[test]
    fn header_split_byte_by_byte_and_empty_messages() {
        let stream = [message(20, &[]), message(15, &[9; 5])].concat();
        let mut f = Flight::default();
        let mut out = Vec::new();
        for (i, b) in stream.iter().enumerate() {
            f.add(i as u64, &[*b], 0, &mut out);
        }
        assert_eq!(kinds(&out), [20, 15]);
    }

    #[test]
    fn too_many_pieces_ahead_or_over_the_budget_stop_the_stream() {
        let mut f = Flight::default();
        let mut out = Vec::new();
        for i in 0..=MAX_AHEAD as u64 {
            f.add(10 + 2 * i, &[0], 1 << 20, &mut out);
        }
        assert!(f.lost && f.held() == 0);
        f.add(0, &message(20, &[]), 1 << 20, &mut out);
        assert!(out.is_empty());
        let mut f = Flight::default();
        f.add(10, &[0; 100], 50, &mut out);
        assert!(f.lost);
        let mut f = Flight::default();
        f.add(u64::MAX, &[0; 2], 50, &mut out);
        assert!(f.lost, "an offset past the end of the stream");
    }

    #[test]
    fn a_long_encrypted_extensions_is_not_kept_past_its_cap() {
        let ee = message(8, &vec![0; MAX_KEPT + 1]);
        let mut f = Flight::default();
        let mut out = Vec::new();
        f.add(0, &ee, 1 << 20, &mut out);
        assert_eq!(kinds(&out), [8]);
        assert!(out[0].body.is_empty(), "not read");
    }
}
