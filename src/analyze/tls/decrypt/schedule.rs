//! The key schedule of the suites `decrypt` opens: which suites those are,
//! a record key and its IV from a TLS 1.3 traffic secret (and the next one
//! after a KeyUpdate), TLS 1.2's key block from the master secret, and the
//! per-record nonce.
//!
//! Does not open records or track sequence numbers (`decrypt` does).

use super::super::crypto::{expand_label, prf12, Aead, Cipher, Hash};

/// A cipher suite this module can open.
#[derive(Clone, Copy, Debug)]
pub(super) struct Suite {
    pub(super) cipher: Cipher,
    pub(super) hash: Hash,
}

/// The AEAD suites by their id: TLS 1.3's three, and TLS 1.2's GCM and
/// ChaCha20-Poly1305 suites (RFC 5288, 5289, 7905).
pub(super) fn suite(id: u16) -> Option<Suite> {
    let (cipher, hash) = match id {
        0x1301 | 0x009c | 0x009e | 0xc02b | 0xc02f => (Cipher::Aes128Gcm, Hash::Sha256),
        0x1302 | 0x009d | 0x009f | 0xc02c | 0xc030 => (Cipher::Aes256Gcm, Hash::Sha384),
        0x1303 | 0xcca8 | 0xcca9 | 0xccaa => (Cipher::ChaCha20Poly1305, Hash::Sha256),
        _ => return None,
    };
    Some(Suite { cipher, hash })
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
        let key = expand_label(suite.hash, secret, "key", suite.cipher.key_len())?;
        let iv = expand_label(suite.hash, secret, "iv", 12)?;
        Some(Key {
            aead: Aead::new(suite.cipher, &key)?,
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

/// TLS 1.2's key block for an AEAD suite (RFC 5246 §6.3; such suites
/// have no MAC keys): the client's write key and IV (GCM: the 4-byte
/// salt), then the server's. The seed is the server random, then the
/// client's.
pub(super) fn key_block12(
    suite: Suite,
    master: &[u8],
    server_random: &[u8],
    client_random: &[u8],
) -> Option<[(Vec<u8>, Vec<u8>); 2]> {
    let (key_len, iv_len) = match suite.cipher {
        Cipher::ChaCha20Poly1305 => (32, 12),
        cipher => (cipher.key_len(), 4),
    };
    let seed = [server_random, client_random].concat();
    let len = 2 * (key_len + iv_len);
    let block = prf12(suite.hash, master, b"key expansion", &seed, len)?;
    let (keys, ivs) = block.split_at_checked(2 * key_len)?;
    let (client_key, server_key) = keys.split_at_checked(key_len)?;
    let (client_iv, server_iv) = ivs.split_at_checked(iv_len)?;
    Some([
        (client_key.to_vec(), client_iv.to_vec()),
        (server_key.to_vec(), server_iv.to_vec()),
    ])
}
