//! The `tls_sealed` fuzz target's body: TLS records that really open. A
//! fixed ClientHello and ServerHello (the suite chosen by the input), then
//! records the input describes — sealed here with the keys of fixed
//! secrets that a key log gives the analyzer, with their right sequence
//! numbers, so that hostile plaintext (handshake messages, alerts,
//! application data) reaches what reads it; or raw bytes, corrupted
//! records, gaps and key changes. Random bytes alone would never
//! authenticate, and the code behind decryption would go unfuzzed.
//!
//! Shared, like `harness`, by the fuzz binary and the regression tests.

use std::sync::Arc;

use handshakes::analyze::tls::crypto::{expand_label, prf12, Aead, Cipher, Hash};
use handshakes::analyze::tls::{Plaintext, TlsAnalyzer};
use handshakes::record::{Decryption, Side};
use handshakes::time::Timestamp;
use handshakes::KeyLog;

use super::harness::Bytes;
use cbc::{cbc_sealers, CbcSealer, CBC_SUITES};

#[path = "sealed_cbc.rs"]
mod cbc;

const CLIENT_RANDOM: [u8; 32] = [0x5a; 32];
const SERVER_RANDOM: [u8; 32] = [0xa5; 32];

/// The AEAD suites the input chooses from: id, TLS 1.3, cipher, hash.
const SUITES: [(u16, bool, Cipher, Hash); 10] = [
    (0x1301, true, Cipher::Aes128Gcm, Hash::Sha256),
    (0x1302, true, Cipher::Aes256Gcm, Hash::Sha384),
    (0x1303, true, Cipher::ChaCha20Poly1305, Hash::Sha256),
    (0xc02f, false, Cipher::Aes128Gcm, Hash::Sha256),
    (0xc030, false, Cipher::Aes256Gcm, Hash::Sha384),
    (0xcca8, false, Cipher::ChaCha20Poly1305, Hash::Sha256),
    (0x1304, true, Cipher::Aes128Ccm, Hash::Sha256),
    (0x1305, true, Cipher::Aes128Ccm8, Hash::Sha256),
    (0xc0ac, false, Cipher::Aes128Ccm, Hash::Sha256),
    (0xc0af, false, Cipher::Aes256Ccm8, Hash::Sha256),
];

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn record(content_type: u8, body: &[u8]) -> Vec<u8> {
    let len = u16::try_from(body.len()).unwrap_or(u16::MAX).to_be_bytes();
    [&[content_type, 3, 3][..], &len, body].concat()
}

fn handshake(kind: u8, body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(body.len()).unwrap_or(0).to_be_bytes();
    [&[kind][..], &len[1..], body].concat()
}

/// A minimal hello: `version`, random, empty session id, then `middle`
/// (the suites and compression methods, or the suite and method), then
/// the `extensions` block unless it is empty.
fn hello(kind: u8, random: &[u8; 32], middle: &[u8], version: u16, extensions: &[u8]) -> Vec<u8> {
    let mut body = [&version.to_be_bytes()[..], random, &[0], middle].concat();
    if !extensions.is_empty() {
        body.extend(u16::try_from(extensions.len()).unwrap_or(0).to_be_bytes());
        body.extend(extensions);
    }
    record(22, &handshake(kind, &body))
}

/// The supported_versions extension listing `versions` (TLS 1.3's
/// ClientHello: a length byte first; its ServerHello: the one chosen).
fn supported_versions(versions: &[u8]) -> Vec<u8> {
    [&[0, 43][..], &[0, versions.len() as u8], versions].concat()
}

/// `client_hello` (a record built by [`hello`] with extensions) with the
/// empty early_data extension (42) added, its lengths mended.
fn with_early_data(client_hello: &[u8]) -> Vec<u8> {
    let mut r = client_hello.to_vec();
    r.extend([0, 42, 0, 0]);
    let add = |r: &mut Vec<u8>, at: usize, width: usize| {
        let mut n = 0usize;
        for b in r.iter().skip(at).take(width) {
            n = n << 8 | usize::from(*b);
        }
        let bytes = (n + 4).to_be_bytes();
        for (k, slot) in r.iter_mut().skip(at).take(width).enumerate() {
            *slot = bytes[bytes.len() - width + k];
        }
    };
    // Record length (bytes 3–4), handshake length (6–8), extensions block
    // length: after the header (5), type and length (4), version (2),
    // random (32), session id (1), suites (4), compression (2).
    add(&mut r, 3, 2);
    add(&mut r, 6, 3);
    add(&mut r, 5 + 4 + 2 + 32 + 1 + 4 + 2, 2);
    r
}

/// One direction's sealing key and sequence number.
struct Sealer {
    aead: Aead,
    iv: [u8; 12],
    seq: u64,
    /// TLS 1.3: the traffic secret (for the next key), and the next
    /// stage's secret while in the handshake.
    secret: Vec<u8>,
    next: Option<Vec<u8>>,
    /// The secret after `next` (0-RTT: early → handshake → application).
    after: Option<Vec<u8>>,
}

impl Sealer {
    fn tls13(cipher: Cipher, hash: Hash, secret: Vec<u8>, next: Option<Vec<u8>>) -> Option<Sealer> {
        let key = expand_label(hash, &secret, "key", cipher.key_len())?;
        let iv = expand_label(hash, &secret, "iv", 12)?;
        Some(Sealer {
            aead: Aead::new(cipher, &key)?,
            iv: iv.try_into().ok()?,
            seq: 0,
            secret,
            next,
            after: None,
        })
    }

    fn nonce(&self) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, s) in nonce.iter_mut().skip(4).zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }
}

/// The conversation's keys, both ways.
struct Keys {
    tls13: bool,
    cipher: Cipher,
    hash: Hash,
    sealers: [Sealer; 2],
}

impl Keys {
    /// The keys, and the key log that gives them; `early`: the client
    /// begins with 0-RTT data (TLS 1.3).
    fn new(suite: (u16, bool, Cipher, Hash), early: bool) -> Option<(Keys, String)> {
        let (_, tls13, cipher, hash) = suite;
        let len = hash.output_len();
        let secret = |b: u8| vec![b; len];
        let random = hex(&CLIENT_RANDOM);
        if tls13 {
            let mut log = String::new();
            for (label, b) in [
                ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", 1),
                ("SERVER_HANDSHAKE_TRAFFIC_SECRET", 2),
                ("CLIENT_TRAFFIC_SECRET_0", 3),
                ("SERVER_TRAFFIC_SECRET_0", 4),
            ] {
                log += &format!("{label} {random} {}\n", hex(&secret(b)));
            }
            let mut client = Sealer::tls13(cipher, hash, secret(1), Some(secret(3)))?;
            if early {
                log += &format!("CLIENT_EARLY_TRAFFIC_SECRET {random} {}\n", hex(&secret(6)));
                // Early key, then the handshake's (the application's after).
                let mut first = Sealer::tls13(cipher, hash, secret(6), Some(secret(1)))?;
                first.after = Some(secret(3));
                client = first;
            }
            let server = Sealer::tls13(cipher, hash, secret(2), Some(secret(4)))?;
            let keys = Keys {
                tls13,
                cipher,
                hash,
                sealers: [client, server],
            };
            return Some((keys, log));
        }
        let master = [5u8; 48];
        let log = format!("CLIENT_RANDOM {random} {}\n", hex(&master));
        let (key_len, iv_len) = match cipher {
            Cipher::ChaCha20Poly1305 => (32, 12),
            other => (other.key_len(), 4),
        };
        let seed = [&SERVER_RANDOM[..], &CLIENT_RANDOM].concat();
        let block = prf12(
            hash,
            &master,
            b"key expansion",
            &seed,
            2 * (key_len + iv_len),
        )?;
        let sealer = |k: usize| -> Option<Sealer> {
            let key = block.get(k * key_len..(k + 1) * key_len)?;
            let salt = block.get(2 * key_len + k * iv_len..2 * key_len + (k + 1) * iv_len)?;
            let mut iv = [0u8; 12];
            iv.get_mut(..iv_len)?.copy_from_slice(salt);
            Some(Sealer {
                aead: Aead::new(cipher, key)?,
                iv,
                seq: 0,
                secret: Vec::new(),
                next: None,
                after: None,
            })
        };
        let keys = Keys {
            tls13,
            cipher,
            hash,
            sealers: [sealer(0)?, sealer(1)?],
        };
        Some((keys, log))
    }

    /// `text` of `inner` type sealed as the next record from `side`.
    fn seal(&mut self, side: usize, inner: u8, text: &[u8]) -> Option<Vec<u8>> {
        let tls13 = self.tls13;
        let s = self.sealers.get_mut(side)?;
        let sealed = if tls13 {
            let mut plain = [text, &[inner]].concat();
            let len = u16::try_from(plain.len() + s.aead.tag_len())
                .ok()?
                .to_be_bytes();
            let header = [23, 3, 3, len[0], len[1]];
            s.aead.seal(&s.nonce(), &header, &mut plain).then_some(())?;
            record(23, &plain)
        } else {
            let mut aad = s.seq.to_be_bytes().to_vec();
            aad.extend([inner, 3, 3]);
            aad.extend(u16::try_from(text.len()).ok()?.to_be_bytes());
            let mut plain = text.to_vec();
            if self.cipher == Cipher::ChaCha20Poly1305 {
                s.aead.seal(&s.nonce(), &aad, &mut plain).then_some(())?;
                record(inner, &plain)
            } else {
                let explicit = s.seq.to_be_bytes();
                let mut nonce = s.iv;
                nonce.get_mut(4..)?.copy_from_slice(&explicit);
                s.aead.seal(&nonce, &aad, &mut plain).then_some(())?;
                record(inner, &[&explicit[..], &plain].concat())
            }
        };
        s.seq += 1;
        Some(sealed)
    }

    /// TLS 1.3: `side` moves to its next key (handshake → application →
    /// each KeyUpdate's).
    fn advance(&mut self, side: usize) {
        let (tls13, cipher, hash) = (self.tls13, self.cipher, self.hash);
        let Some(s) = self.sealers.get_mut(side) else {
            return;
        };
        if !tls13 {
            return;
        }
        let next = match s.next.take() {
            Some(next) => next,
            None => match expand_label(hash, &s.secret, "traffic upd", s.secret.len()) {
                Some(next) => next,
                None => return,
            },
        };
        let after = s.after.take();
        if let Some(sealer) = Sealer::tls13(cipher, hash, next, after) {
            *s = sealer;
        }
    }
}

/// The sealing of one conversation: AEAD keys, or CBC ones.
enum Sealing {
    Aead(Box<Keys>),
    Cbc(Box<[CbcSealer; 2]>),
}

impl Sealing {
    fn seal(&mut self, side: usize, inner: u8, text: &[u8]) -> Option<Vec<u8>> {
        match self {
            Sealing::Aead(keys) => keys.seal(side, inner, text),
            Sealing::Cbc(sealers) => {
                Some(record(inner, &sealers.get_mut(side)?.seal(inner, text)?))
            }
        }
    }

    fn advance(&mut self, side: usize) {
        if let Sealing::Aead(keys) = self {
            keys.advance(side);
        }
    }
}

/// The conversation a selector byte chooses.
struct Conversation {
    sealing: Sealing,
    /// The key log that opens it.
    log: String,
    client_hello: Vec<u8>,
    server_hello: Vec<u8>,
    tls13: bool,
    /// It begins with 0-RTT data.
    early: bool,
}

fn conversation(selector: u8) -> Option<Conversation> {
    if selector & 0x40 != 0 {
        let suite = CBC_SUITES[usize::from(selector & 0x3f) % CBC_SUITES.len()];
        let (id, version, .., etm) = suite;
        let master = [5u8; 48];
        let log = format!("CLIENT_RANDOM {} {}\n", hex(&CLIENT_RANDOM), hex(&master));
        let sealers = cbc_sealers(suite, &master, &SERVER_RANDOM, &CLIENT_RANDOM)?;
        // encrypt_then_mac (22), empty, in both hellos when agreed.
        let ext: &[u8] = if etm { &[0, 22, 0, 0] } else { &[] };
        let [hi, lo] = id.to_be_bytes();
        let client_hello = hello(1, &CLIENT_RANDOM, &[0, 2, hi, lo, 1, 0], 0x0303, ext);
        let server_hello = hello(2, &SERVER_RANDOM, &[hi, lo, 0], version, ext);
        return Some(Conversation {
            sealing: Sealing::Cbc(Box::new(sealers)),
            log,
            client_hello,
            server_hello,
            tls13: false,
            early: false,
        });
    }
    let suite = SUITES[usize::from(selector & 0x3f) % SUITES.len()];
    let (id, tls13, ..) = suite;
    let early = tls13 && selector & 0x80 != 0;
    let (keys, log) = Keys::new(suite, early)?;
    let [hi, lo] = id.to_be_bytes();
    let (client_ext, server_ext) = match tls13 {
        true => (supported_versions(&[2, 3, 4]), supported_versions(&[3, 4])),
        false => (Vec::new(), Vec::new()),
    };
    let mut client_hello = hello(
        1,
        &CLIENT_RANDOM,
        &[0, 2, hi, lo, 1, 0],
        0x0303,
        &client_ext,
    );
    if early {
        // The early_data extension, appended to the extension block.
        client_hello = with_early_data(&client_hello);
    }
    let server_hello = hello(2, &SERVER_RANDOM, &[hi, lo, 0], 0x0303, &server_ext);
    Some(Conversation {
        sealing: Sealing::Aead(Box::new(keys)),
        log,
        client_hello,
        server_hello,
        tls13,
        early,
    })
}

/// Suite selector (1 byte: with bit 6 set, a CBC suite of TLS 1.0–1.2 by
/// the low six bits' value mod 6; otherwise an AEAD suite so; with bit 7
/// set and a TLS 1.3 suite, the client offers 0-RTT, its key log has the
/// early secret, its first key is the early one, and the ServerHello waits
/// for the first server step), then steps. Each step: a control byte `c` —
/// bit 0 the side; bits 1–2 the kind: 0 a record sealed with the side's
/// key (its inner type 20 + `c >> 4`, e.g. 21 alert, 22 handshake, 23
/// data; bit 3 flips a byte of it), 1 raw bytes, 2 the side's next key
/// (TLS 1.3), 3 a gap (1 length byte); the time advances a millisecond
/// a step; data steps' length is 2 bytes little-endian, then the bytes.
/// Returns the TLS section's decryption account and the plaintext bytes
/// handed on.
pub fn tls_sealed(data: &[u8]) -> (Option<Decryption>, u64) {
    let mut b = Bytes::new(data);
    let Some(Conversation {
        sealing: mut keys,
        log,
        client_hello,
        server_hello,
        tls13,
        early,
    }) = conversation(b.u8())
    else {
        return (None, 0);
    };
    let mut tls = TlsAnalyzer::new(16 * 1024, 8).decrypting(Arc::new(KeyLog::from_text(&log)));
    let mut plain = 0u64;
    let mut ts = 1_700_000_000_000_000_000i64;
    let mut feed = |tls: &mut TlsAnalyzer, side: Side, ts: i64, bytes: &[u8]| {
        tls.data_to(side, Timestamp(ts), bytes, &mut |_, _, p| {
            if let Plaintext::Data(text) = p {
                plain += text.len() as u64;
            }
        });
    };
    feed(&mut tls, Side::Client, ts, &client_hello);
    let mut server_hello = Some(server_hello);
    if !early {
        if let Some(sh) = server_hello.take() {
            feed(&mut tls, Side::Server, ts, &sh);
        }
    }
    if !tls13 {
        // TLS 1.0–1.2 records are sealed after each side's ChangeCipherSpec.
        feed(&mut tls, Side::Client, ts, &record(20, &[1]));
        feed(&mut tls, Side::Server, ts, &record(20, &[1]));
    }
    while !b.is_empty() {
        let c = b.u8();
        let (side, index) = if c & 1 == 0 {
            (Side::Client, 0)
        } else {
            (Side::Server, 1)
        };
        ts += 1_000_000;
        if side == Side::Server {
            if let Some(sh) = server_hello.take() {
                feed(&mut tls, Side::Server, ts, &sh);
            }
        }
        match (c >> 1) & 3 {
            0 => {
                let len = usize::from(b.u16());
                let text = b.take(len);
                if let Some(mut sealed) = keys.seal(index, 20 + (c >> 4), text) {
                    if c & 8 != 0 {
                        let at = usize::from(b.u8()) % sealed.len().max(1);
                        if let Some(byte) = sealed.get_mut(at) {
                            *byte ^= 0x40;
                        }
                    }
                    feed(&mut tls, side, ts, &sealed);
                }
            }
            1 => {
                let len = usize::from(b.u16());
                feed(&mut tls, side, ts, b.take(len));
            }
            2 => keys.advance(index),
            _ => tls.gap(side, u64::from(b.u8())),
        }
    }
    tls.end_of_streams();
    let _ = tls.flights();
    let decryption = tls.decryption();
    let info = tls.take_findings(Timestamp(0));
    let _ = format!("{info:?}");
    (decryption, plain)
}
