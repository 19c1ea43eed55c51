//! Opening one connection's encrypted TLS records with the secrets of a key
//! log: the keys of each direction (TLS 1.0–1.2 from the master secret's
//! key block; TLS 1.3 from the traffic secrets, through the handshake, the
//! application keys and each KeyUpdate), the record sequence numbers, and
//! how far the opening got.
//!
//! The key schedule itself (suites, keys, IVs, nonces) is `schedule`'s;
//! CBC records are opened by `cbc`.
//!
//! Does not read records from the stream (`records`), parse handshake
//! messages, or interpret the plaintext (the HTTP parsers do). AEAD suites
//! (AES-GCM, ChaCha20-Poly1305: every TLS 1.3 suite, with TLS 1.3's 0-RTT
//! data) and AES-CBC suites are opened; RC4, 3DES, SSL 3.0 and
//! renegotiation are not.

use std::ops::Range;
use std::sync::Arc;

use super::crypto::{Aead, Block, Cipher, Mac};
use super::hello::ServerHelloFacts;
use super::keylog::{KeyLog, Secrets};
use super::records::{ALERT, APPLICATION_DATA, HANDSHAKE};
use crate::record::{Decryption, DecryptionOutcome, Side};
use cbc::CbcKey;
use schedule::{associated_data, key_block, suite, Key, Protection, Share, Suite};

mod cbc;
mod schedule;

/// The extension that asks for encrypt-then-MAC (RFC 7366).
const ENCRYPT_THEN_MAC: u16 = 22;

/// Sequence numbers tried for the next key's first record after records
/// went by without keys.
const MAX_SKIPPED: u64 = 16;

/// Failures in a row after which a direction stops trying (wrong secrets
/// must not cost two cipher passes per record for the rest of a capture).
const GIVE_UP: u32 = 8;

/// One direction's keys and sequence number.
#[derive(Default)]
struct Direction {
    current: Option<Key>,
    /// TLS 1.0–1.2 CBC suites: the key (`current` is then `None`).
    cbc: Option<CbcKey>,
    /// TLS 1.3: the key tried when `current` fails (the application key
    /// during the handshake, then the next KeyUpdate's)…
    next: Option<Key>,
    /// …and the one after it, when the client begins with 0-RTT data (its
    /// keys: early, handshake, application).
    after_next: Option<Key>,
    /// TLS 1.3: still under the handshake keys (or the early ones).
    handshake: bool,
    /// TLS 1.3: under the early (0-RTT) key.
    early: bool,
    seq: u64,
    /// Records that went by before the keys came (a followed key log):
    /// some may have been under the next key already, so its first record
    /// is looked for at sequence numbers up to this many.
    skipped: u64,
    /// Records that went by before the keys came, not opened: the
    /// outcome is partial.
    went_by: u64,
    /// TLS 1.2: ChangeCipherSpec seen (a second one is renegotiation).
    changed: bool,
    opened: u64,
    failed: u64,
    in_a_row: u32,
    /// A gap, renegotiation or too many failures: no more opening.
    lost: bool,
}

impl Direction {
    fn failed(&mut self) {
        self.failed += 1;
        self.in_a_row += 1;
        if self.in_a_row >= GIVE_UP {
            self.lost = true;
        }
    }

    fn opened(&mut self) {
        self.opened += 1;
        self.in_a_row = 0;
    }

    /// TLS 1.3: opens `body` (after its 5-byte `header`) with the current
    /// key or, failing that, the next: the inner content type, the
    /// plaintext's length, and whether it was 0-RTT data. `Err(true)` is
    /// a record that should have opened; `Err(false)` one of the
    /// handshake's when the log has no handshake secrets (the
    /// application's are what count).
    fn open13(
        &mut self,
        suite: Suite,
        header: &[u8; 5],
        body: &mut [u8],
    ) -> Result<(u8, usize, bool), bool> {
        let seq = self.seq;
        let current = self.current.as_ref();
        let mut len = current.and_then(|k| k.aead.open(&k.nonce(seq), header, body));
        if len.is_none() {
            if self.next.is_none() && !self.handshake {
                self.next = self.current.as_ref().and_then(|k| k.updated(suite));
            }
            if let Some(next) = &self.next {
                for seq in 0..=self.skipped.min(MAX_SKIPPED) {
                    len = next.aead.open(&next.nonce(seq), header, body);
                    if len.is_some() {
                        self.seq = seq;
                        break;
                    }
                }
            }
            if len.is_some() {
                self.current = self.next.take();
                self.next = self.after_next.take();
                self.handshake = self.next.is_some();
                self.early = false;
            }
        }
        let Some(len) = len else {
            let counts = !(self.handshake && self.current.is_none());
            if counts {
                self.failed();
            }
            return Err(counts);
        };
        self.seq += 1;
        self.skipped = 0;
        self.opened();
        // TLSInnerPlaintext: content, the type, then zero padding.
        let text = body.get(..len).unwrap_or_default();
        match text.iter().rposition(|&b| b != 0) {
            Some(end) => Ok((text.get(end).copied().unwrap_or_default(), end, self.early)),
            // All padding: no content type (RFC 8446 §5.4 makes it an
            // error); nothing to hand on.
            None => Ok((0, 0, self.early)),
        }
    }

    /// TLS 1.0–1.2: opens `body` as record `seq` of this direction.
    fn open12(
        &mut self,
        suite: Suite,
        content_type: u8,
        version: u16,
        body: &mut [u8],
    ) -> Option<Range<usize>> {
        let seq = self.seq;
        self.seq += 1;
        if let Some(cbc) = self.cbc.as_mut() {
            return cbc.open(seq, content_type, version, body);
        }
        let key = self.current.as_ref()?;
        // GCM and CCM carry an 8-byte explicit nonce before the ciphertext
        // (RFC 5288 §3, RFC 6655 §3); ChaCha20-Poly1305 XORs the sequence
        // number into its IV.
        let (nonce, skip) = match suite.aead()? {
            Cipher::ChaCha20Poly1305 => (key.nonce(seq), 0),
            _ => {
                let explicit = body.get(..8)?;
                let mut nonce = key.iv;
                nonce.get_mut(4..)?.copy_from_slice(explicit);
                (nonce, 8)
            }
        };
        let sealed = body.get_mut(skip..)?;
        let text_len = sealed.len().checked_sub(key.aead.tag_len())?;
        let aad = associated_data(seq, content_type, version, text_len)?;
        let len = key.aead.open(&nonce, &aad, sealed)?;
        Some(skip..skip + len)
    }
}

/// A connection's keys once its ServerHello is known.
struct Keys {
    suite: Suite,
    tls13: bool,
    client: Direction,
    server: Direction,
}

impl Keys {
    /// The keys of both directions, if the log has the secrets this
    /// version and hash need.
    fn derive(secrets: &Secrets, client_random: &[u8; 32], chosen: &Chosen) -> Option<Keys> {
        let (suite, tls13) = (chosen.suite, chosen.tls13);
        let (client, server) = if tls13 {
            let dir = |handshake: Option<&[u8]>, traffic: Option<&[u8]>| Direction {
                current: handshake.and_then(|s| Key::from_secret(suite, s)),
                next: traffic.and_then(|s| Key::from_secret(suite, s)),
                handshake: true,
                ..Direction::default()
            };
            let mut client = dir(
                secrets.client_handshake.as_deref(),
                secrets.client_traffic.as_deref(),
            );
            let server = dir(
                secrets.server_handshake.as_deref(),
                secrets.server_traffic.as_deref(),
            );
            // Without the application secrets (or with secrets of another
            // hash's length) there is nothing to read.
            if client.next.is_none() || server.next.is_none() {
                return None;
            }
            // 0-RTT: the client's first records are under the early key.
            let early = secrets.client_early.as_deref();
            if let Some(key) = early.and_then(|s| Key::from_secret(suite, s)) {
                client.after_next = client.next.take();
                client.next = client.current.replace(key);
                client.early = true;
            }
            (client, server)
        } else {
            let master = secrets.master.as_deref()?;
            let [client, server] = key_block(
                suite,
                chosen.version,
                master,
                &chosen.server_random,
                client_random,
            )?;
            let dir = |share: Share| -> Option<Direction> {
                let (current, cbc) = match suite.protection {
                    Protection::Aead(cipher) => {
                        let mut iv = [0u8; 12];
                        iv.get_mut(..share.iv.len())?.copy_from_slice(&share.iv);
                        let aead = Aead::new(cipher, &share.key)?;
                        let key = Key {
                            aead,
                            iv,
                            secret: None,
                        };
                        (Some(key), None)
                    }
                    Protection::Cbc { mac, .. } => {
                        let key = CbcKey::new(
                            Block::new(&share.key)?,
                            Mac::new(mac, &share.mac)?,
                            &share.iv,
                            chosen.version == TLS10,
                            chosen.etm,
                        )?;
                        (None, Some(key))
                    }
                };
                Some(Direction {
                    current,
                    cbc,
                    ..Direction::default()
                })
            };
            (dir(client)?, dir(server)?)
        };
        Some(Keys {
            suite,
            tls13,
            client,
            server,
        })
    }

    fn dir(&mut self, side: Side) -> &mut Direction {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }
}

/// What was opened of a record: the plaintext's range in the body, by
/// its content type.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    Data(Range<usize>),
    /// TLS 1.3 0-RTT application data: requests the server may yet refuse.
    Early(Range<usize>),
    /// Handshake messages (TLS 1.3's after the ServerHello, TLS 1.2's
    /// Finished and renegotiation).
    Handshake(Range<usize>),
    Alert(Range<usize>),
    /// Not opened, and not to be: TLS 1.3's handshake records when the log
    /// has no handshake secrets; or opened and of no other type here.
    Closed,
    /// Not opened; the record carried application data, or might have.
    Lost,
}

impl Opened {
    fn of(content_type: u8, range: Range<usize>) -> Opened {
        match content_type {
            APPLICATION_DATA => Opened::Data(range),
            HANDSHAKE => Opened::Handshake(range),
            ALERT => Opened::Alert(range),
            _ => Opened::Closed,
        }
    }
}

/// What the ServerHello chose, as far as the keys need it.
struct Chosen {
    suite: Suite,
    server_random: Vec<u8>,
    tls13: bool,
    /// The negotiated version (TLS 1.0–1.2 derive their keys by it).
    version: u16,
    /// Encrypt-then-MAC (CBC suites).
    etm: bool,
}

const TLS10: u16 = 0x0301;

/// A ClientHello whose secrets are not (yet) in the log.
struct Looking {
    log: Arc<KeyLog>,
    random: [u8; 32],
    chosen: Option<Chosen>,
    /// Sealed records gone by each way (client, server) meanwhile, and
    /// whether a gap came among them: a live capture sees the server's
    /// first sealed records before the client has logged their secrets.
    waited: [(u64, bool); 2],
}

/// Sealed records a connection may wait for its secrets before it is
/// taken to have none (a followed log only).
const LOOK_LIMIT: u64 = 64;

/// Where a connection's decryption stands.
enum State {
    /// A key log, and no ClientHello yet.
    Waiting(Arc<KeyLog>),
    Looking(Box<Looking>),
    NoSecrets,
    Unsupported,
    Keys(Box<Keys>),
    /// The streams ended: the account, the keys gone.
    Done(Decryption),
}

/// A connection's decryption, from its ClientHello on.
pub struct Decrypter {
    state: State,
}

impl std::fmt::Debug for Decrypter {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decrypter")
    }
}

fn index(side: Side) -> usize {
    match side {
        Side::Client => 0,
        Side::Server => 1,
    }
}

impl Decrypter {
    pub fn new(keylog: Arc<KeyLog>) -> Decrypter {
        Decrypter {
            state: State::Waiting(keylog),
        }
    }

    /// The first ClientHello's body (after the handshake header).
    pub fn client_hello(&mut self, body: &[u8]) {
        let State::Waiting(log) = &self.state else {
            return;
        };
        let random = body.get(2..34).and_then(|r| <[u8; 32]>::try_from(r).ok());
        self.state = match random {
            Some(random) => State::Looking(Box::new(Looking {
                log: Arc::clone(log),
                random,
                chosen: None,
                waited: [(0, false); 2],
            })),
            None => State::NoSecrets,
        };
    }

    /// The ServerHello (not a HelloRetryRequest) chose `server`'s suite.
    pub fn server_hello(&mut self, server: &ServerHelloFacts, tls13: bool) {
        let State::Looking(looking) = &mut self.state else {
            return;
        };
        if looking.chosen.is_some() {
            return;
        }
        let version = server.version();
        // SSL 3.0 has a key schedule and MAC of its own; AEAD suites need
        // TLS 1.2 at least, CBC ones come before TLS 1.3.
        let suite = suite(server.cipher).filter(|s| match s.protection {
            Protection::Aead(_) => tls13 || version == 0x0303,
            Protection::Cbc { .. } => !tls13 && (TLS10..=0x0303).contains(&version),
        });
        let Some(suite) = suite else {
            self.state = State::Unsupported;
            return;
        };
        looking.chosen = Some(Chosen {
            suite,
            server_random: server.random.clone(),
            tls13,
            version,
            etm: server.extensions.contains(&ENCRYPT_THEN_MAC),
        });
        self.look();
    }

    /// Looks the secrets up (again): keys when they are there; no secrets
    /// when they are not and will not come.
    fn look(&mut self) {
        let State::Looking(looking) = &self.state else {
            return;
        };
        let Some(chosen) = &looking.chosen else {
            return;
        };
        // A followed log may hold a session's handshake secrets before its
        // application secrets: the session waits for all it needs.
        let keys = looking
            .log
            .get(&looking.random)
            .and_then(|secrets| Keys::derive(&secrets, &looking.random, chosen));
        match keys {
            Some(mut keys) => {
                for (side, (waited, gap)) in [Side::Client, Side::Server].iter().zip(looking.waited)
                {
                    let dir = keys.dir(*side);
                    dir.seq = waited;
                    dir.skipped = waited;
                    dir.went_by = waited;
                    dir.lost = gap;
                }
                self.state = State::Keys(Box::new(keys));
            }
            None if looking.log.follows() => {}
            None => self.state = State::NoSecrets,
        }
    }

    /// Whether the suite is chosen and a followed key log may still give
    /// its secrets (a live capture): records may wait for them.
    pub fn awaits_secrets(&self) -> bool {
        matches!(&self.state, State::Looking(l) if l.chosen.is_some() && l.log.follows())
    }

    /// Looks the secrets up again; whether the keys are here now.
    pub fn look_again(&mut self) -> bool {
        self.look();
        matches!(self.state, State::Keys(_))
    }

    /// Whether records are being opened, or may be once the secrets come
    /// (their bodies are wanted).
    pub fn active(&self) -> bool {
        match &self.state {
            State::Keys(k) => !(k.client.lost && k.server.lost),
            State::Looking(l) => l.chosen.is_some(),
            _ => false,
        }
    }

    /// A TLS 1.2 ChangeCipherSpec from `side`: a second one would bring
    /// keys this log does not have (renegotiation).
    pub fn change_cipher_spec(&mut self, side: Side) {
        if let State::Keys(k) = &mut self.state {
            if !k.tls13 {
                let dir = k.dir(side);
                dir.lost |= dir.changed;
                dir.changed = true;
            }
        }
    }

    /// Bytes of `side`'s stream went missing: records, and with them the
    /// sequence numbers, are lost.
    pub fn gap(&mut self, side: Side) {
        match &mut self.state {
            State::Keys(k) => k.dir(side).lost = true,
            State::Looking(l) => {
                if let Some(waited) = l.waited.get_mut(index(side)) {
                    waited.1 = true;
                }
            }
            _ => {}
        }
    }

    /// Opens a sealed record from `side` in place.
    pub fn open(&mut self, side: Side, content_type: u8, version: u16, body: &mut [u8]) -> Opened {
        if matches!(self.state, State::Looking(_)) {
            self.look();
            if let State::Looking(l) = &mut self.state {
                // Still without secrets: the record goes by, counted.
                if let Some(waited) = l.waited.get_mut(index(side)) {
                    waited.0 += 1;
                }
                if l.waited.iter().map(|(n, _)| n).sum::<u64>() >= LOOK_LIMIT {
                    self.state = State::NoSecrets;
                }
                return Opened::Closed;
            }
        }
        let State::Keys(keys) = &mut self.state else {
            return Opened::Closed;
        };
        let suite = keys.suite;
        let tls13 = keys.tls13;
        let dir = keys.dir(side);
        if dir.lost {
            return Opened::Lost;
        }
        if tls13 {
            let Ok(len) = u16::try_from(body.len()) else {
                dir.failed();
                return Opened::Lost;
            };
            let [hi, lo] = len.to_be_bytes();
            let [vhi, vlo] = version.to_be_bytes();
            let header = [content_type, vhi, vlo, hi, lo];
            return match dir.open13(suite, &header, body) {
                Ok((APPLICATION_DATA, end, true)) => Opened::Early(0..end),
                Ok((inner, end, _)) => Opened::of(inner, 0..end),
                Err(false) => Opened::Closed,
                Err(true) => Opened::Lost,
            };
        }
        match dir.open12(suite, content_type, version, body) {
            Some(range) => {
                dir.opened();
                Opened::of(content_type, range)
            }
            None => {
                dir.failed();
                Opened::Lost
            }
        }
    }

    /// The streams ended: the keys are dropped (their memory, and the key
    /// material, go at once), the account stays.
    pub fn finish(&mut self) {
        if let Some(done) = self.outcome() {
            self.state = State::Done(done);
        }
    }

    /// The record's account of it: `None` without a ServerHello.
    pub fn outcome(&self) -> Option<Decryption> {
        let (outcome, opened, failed) = match &self.state {
            State::Done(done) => return Some(*done),
            State::Waiting(_) => return None,
            State::Looking(l) if l.chosen.is_none() => return None,
            State::Looking(_) => (DecryptionOutcome::NoSecrets, 0, 0),
            State::NoSecrets => (DecryptionOutcome::NoSecrets, 0, 0),
            State::Unsupported => (DecryptionOutcome::Unsupported, 0, 0),
            State::Keys(k) => {
                let whole = |d: &Direction| !d.lost && d.failed == 0 && d.went_by == 0;
                let outcome = if whole(&k.client) && whole(&k.server) {
                    DecryptionOutcome::Complete
                } else {
                    DecryptionOutcome::Partial
                };
                (
                    outcome,
                    k.client.opened + k.server.opened,
                    k.client.failed + k.server.failed,
                )
            }
        };
        Some(Decryption {
            outcome,
            records_opened: opened,
            records_failed: failed,
        })
    }
}

#[cfg(test)]
mod tests;
