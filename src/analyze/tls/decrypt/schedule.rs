//! The key schedule of the suites `decrypt` opens: which suites those are,
//! a record key and its IV from a TLS 1.3 traffic secret (and the next one
//! after a KeyUpdate), the key block of TLS 1.0–1.2 from the master
//! secret, and the per-record nonce.
//!
//! Does not open records or track sequence numbers (`decrypt` does).

use super::super::crypto::{expand_label, prf10, prf12, Aead, Cipher, Hash, BLOCK};

/// How a suite protects its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Protection {
    Aead(Cipher),
    /// AES-CBC with an HMAC (`key_len` 16 or 32).
    Cbc {
        key_len: usize,
        mac: Hash,
    },
}

/// A cipher suite this module can open.
#[derive(Clone, Copy, Debug)]
pub(super) struct Suite {
    pub(super) protection: Protection,
    /// The key schedule's hash: HKDF's in TLS 1.3, the PRF's in TLS 1.2
    /// (TLS 1.0 and 1.1 use MD5 and SHA-1 whatever the suite).
    pub(super) hash: Hash,
}

impl Suite {
    /// The AEAD cipher (every TLS 1.3 suite has one).
    pub(super) fn aead(self) -> Option<Cipher> {
        match self.protection {
            Protection::Aead(cipher) => Some(cipher),
            Protection::Cbc { .. } => None,
        }
    }
}

/// The suites opened, by their id: the AEAD suites — TLS 1.3's five, and
/// TLS 1.2's GCM, CCM and ChaCha20-Poly1305 ones (RFC 5288, 5289, 6655,
/// 7251, 7905, 8442) — and
/// the AES-CBC suites with HMAC-SHA-1, -SHA-256 and -SHA-384 (RFC 3268,
/// 4279, 4492, 5246, 5289, 5487, 5489) of every key exchange.
pub(super) fn suite(id: u16) -> Option<Suite> {
    let aead = |cipher, hash| (Protection::Aead(cipher), hash);
    let cbc = |key_len, mac, hash| (Protection::Cbc { key_len, mac }, hash);
    let (protection, hash) = match id {
        0x1301 | 0x009c | 0x009e | 0xc02b | 0xc02f => aead(Cipher::Aes128Gcm, Hash::Sha256),
        0x1302 | 0x009d | 0x009f | 0xc02c | 0xc030 => aead(Cipher::Aes256Gcm, Hash::Sha384),
        0x1303 | 0xcca8 | 0xcca9 | 0xccaa => aead(Cipher::ChaCha20Poly1305, Hash::Sha256),
        // RSA, DHE-RSA, PSK, DHE-PSK, ECDHE-ECDSA, ECDHE-PSK.
        0x1304 | 0xc09c | 0xc09e | 0xc0a4 | 0xc0a6 | 0xc0ac | 0xd005 => {
            aead(Cipher::Aes128Ccm, Hash::Sha256)
        }
        0xc09d | 0xc09f | 0xc0a5 | 0xc0a7 | 0xc0ad => aead(Cipher::Aes256Ccm, Hash::Sha256),
        0x1305 | 0xc0a0 | 0xc0a2 | 0xc0a8 | 0xc0aa | 0xc0ae | 0xd003 => {
            aead(Cipher::Aes128Ccm8, Hash::Sha256)
        }
        0xc0a1 | 0xc0a3 | 0xc0a9 | 0xc0ab | 0xc0af => aead(Cipher::Aes256Ccm8, Hash::Sha256),
        0x002f..=0x0034
        | 0xc004
        | 0xc009
        | 0xc00e
        | 0xc013
        | 0xc018
        | 0x008c
        | 0x0090
        | 0x0094
        | 0xc035 => cbc(16, Hash::Sha1, Hash::Sha256),
        0x0035..=0x003a
        | 0xc005
        | 0xc00a
        | 0xc00f
        | 0xc014
        | 0xc019
        | 0x008d
        | 0x0091
        | 0x0095
        | 0xc036 => cbc(32, Hash::Sha1, Hash::Sha256),
        0x003c
        | 0x003e..=0x0040
        | 0x0067
        | 0x006c
        | 0xc023
        | 0xc025
        | 0xc027
        | 0xc029
        | 0x00ae
        | 0x00b2
        | 0x00b6
        | 0xc037 => cbc(16, Hash::Sha256, Hash::Sha256),
        0x003d | 0x0068..=0x006b | 0x006d => cbc(32, Hash::Sha256, Hash::Sha256),
        0xc024 | 0xc026 | 0xc028 | 0xc02a | 0x00af | 0x00b3 | 0x00b7 | 0xc038 => {
            cbc(32, Hash::Sha384, Hash::Sha384)
        }
        _ => return None,
    };
    Some(Suite { protection, hash })
}

/// A key and its IV (TLS 1.2 GCM: the 4-byte salt, zero-padded).
pub(super) struct Key {
    pub(super) aead: Aead,
    pub(super) iv: [u8; 12],
    /// TLS 1.3: the traffic secret it came from (the next KeyUpdate's input).
    pub(super) secret: Option<Box<[u8]>>,
}

impl Key {
    /// TLS 1.3: the key and IV of a traffic secret (RFC 8446 §7.3).
    pub(super) fn from_secret(suite: Suite, secret: &[u8]) -> Option<Key> {
        if secret.len() != suite.hash.output_len() {
            return None;
        }
        let cipher = suite.aead()?;
        let key = expand_label(suite.hash, secret, "key", cipher.key_len())?;
        let iv = expand_label(suite.hash, secret, "iv", 12)?;
        Some(Key {
            aead: Aead::new(cipher, &key)?,
            iv: iv.try_into().ok()?,
            secret: Some(secret.into()),
        })
    }

    /// TLS 1.3: the key after a KeyUpdate (RFC 8446 §7.2).
    pub(super) fn updated(&self, suite: Suite) -> Option<Key> {
        let secret = self.secret.as_deref()?;
        let next = expand_label(suite.hash, secret, "traffic upd", suite.hash.output_len())?;
        Key::from_secret(suite, &next)
    }

    /// The per-record nonce: the IV XOR the sequence number.
    pub(super) fn nonce(&self, seq: u64) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, s) in nonce.iter_mut().skip(4).zip(seq.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }
}

/// The associated data of a TLS 1.0–1.2 record (RFC 5246 §6.2.3.3), which
/// the MAC of a CBC suite covers too: its sequence number, content type,
/// version and the `len` the suite measures; `None` if `len` does not fit.
pub(super) fn associated_data(
    seq: u64,
    content_type: u8,
    version: u16,
    len: usize,
) -> Option<[u8; 13]> {
    let mut aad = [0u8; 13];
    aad.get_mut(..8)?.copy_from_slice(&seq.to_be_bytes());
    *aad.get_mut(8)? = content_type;
    aad.get_mut(9..11)?.copy_from_slice(&version.to_be_bytes());
    aad.get_mut(11..)?
        .copy_from_slice(&u16::try_from(len).ok()?.to_be_bytes());
    Some(aad)
}

/// One side's share of the key block: its MAC key (empty for AEAD
/// suites), its write key, and its IV (GCM and CCM: the 4-byte salt; ChaCha20: 12
/// bytes; CBC: TLS 1.0's first record IV, which later versions send with
/// each record).
pub(super) struct Share {
    pub(super) mac: Vec<u8>,
    pub(super) key: Vec<u8>,
    pub(super) iv: Vec<u8>,
}

/// The key block of TLS 1.0–1.2 (`version` 0x0301–0x0303; RFC 5246 §6.3):
/// the client's MAC key, the server's, the client's write key, the
/// server's, the client's IV, the server's — each side's share. The seed
/// is the server random, then the client's.
pub(super) fn key_block(
    suite: Suite,
    version: u16,
    master: &[u8],
    server_random: &[u8],
    client_random: &[u8],
) -> Option<[Share; 2]> {
    let (mac_len, key_len, iv_len) = match suite.protection {
        Protection::Aead(Cipher::ChaCha20Poly1305) => (0, 32, 12),
        Protection::Aead(cipher) => (0, cipher.key_len(), 4),
        Protection::Cbc { key_len, mac } => (mac.output_len(), key_len, BLOCK),
    };
    let seed = [server_random, client_random].concat();
    let len = 2 * (mac_len + key_len + iv_len);
    let block = match version {
        0x0303 => prf12(suite.hash, master, b"key expansion", &seed, len)?,
        // AEAD suites exist from TLS 1.2 only.
        0x0301 | 0x0302 if suite.aead().is_none() => prf10(master, b"key expansion", &seed, len)?,
        _ => return None,
    };
    let (macs, rest) = block.split_at_checked(2 * mac_len)?;
    let (keys, ivs) = rest.split_at_checked(2 * key_len)?;
    let (client_mac, server_mac) = macs.split_at_checked(mac_len)?;
    let (client_key, server_key) = keys.split_at_checked(key_len)?;
    let (client_iv, server_iv) = ivs.split_at_checked(iv_len)?;
    let share = |mac: &[u8], key: &[u8], iv: &[u8]| Share {
        mac: mac.to_vec(),
        key: key.to_vec(),
        iv: iv.to_vec(),
    };
    Some([
        share(client_mac, client_key, client_iv),
        share(server_mac, server_key, server_iv),
    ])
}
