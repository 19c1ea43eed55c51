//! Every hash and cipher the TLS analysis uses, and the only module that
//! names their crates: MD5 and SHA-256 for the JA3/JA4 fingerprints;
//! HKDF-Expand-Label (RFC 8446 §7.1), the TLS 1.2 PRF (RFC 5246 §5) and the
//! AEAD ciphers (AES-128/256-GCM, ChaCha20-Poly1305) that open records with
//! a key log's secrets.
//!
//! Does not know about records, handshakes or key logs: `hello` and
//! `decrypt` do. Public for the benchmarks, which seal records with it.

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use chacha20poly1305::ChaCha20Poly1305;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use sha2::{Sha256, Sha384};

/// The MD5 digest of `bytes` (JA3, JA3S).
pub fn md5(bytes: &[u8]) -> [u8; 16] {
    Md5::digest(bytes).into()
}

/// The SHA-256 digest of `bytes` (JA4).
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The hash of a cipher suite's key schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    Sha256,
    Sha384,
}

impl Hash {
    /// Its output length in bytes: the length of a TLS 1.3 traffic secret.
    pub fn output_len(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
        }
    }
}

/// HKDF-Expand-Label(`secret`, `label`, "", `len`) of TLS 1.3; `None` if
/// `secret` is shorter than the hash or `len` too long for HKDF.
pub fn expand_label(hash: Hash, secret: &[u8], label: &str, len: usize) -> Option<Vec<u8>> {
    let full = b"tls13 ".len() + label.len();
    let mut info = Vec::with_capacity(4 + full);
    info.extend_from_slice(&u16::try_from(len).ok()?.to_be_bytes());
    info.push(u8::try_from(full).ok()?);
    info.extend_from_slice(b"tls13 ");
    info.extend_from_slice(label.as_bytes());
    // An empty context.
    info.push(0);
    let mut out = vec![0; len];
    match hash {
        Hash::Sha256 => Hkdf::<Sha256>::from_prk(secret)
            .ok()?
            .expand(&info, &mut out)
            .ok()?,
        Hash::Sha384 => Hkdf::<Sha384>::from_prk(secret)
            .ok()?
            .expand(&info, &mut out)
            .ok()?,
    }
    Some(out)
}

/// HMAC of the concatenated `parts` under `key`.
fn hmac(hash: Hash, key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
    fn run<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
        let mut mac = <M as Mac>::new_from_slice(key).ok()?;
        for part in parts {
            mac.update(part);
        }
        Some(mac.finalize().into_bytes().to_vec())
    }
    match hash {
        Hash::Sha256 => run::<Hmac<Sha256>>(key, parts),
        Hash::Sha384 => run::<Hmac<Sha384>>(key, parts),
    }
}

/// The TLS 1.2 PRF: `len` bytes of P_hash(`secret`, `label` + `seed`).
pub fn prf12(hash: Hash, secret: &[u8], label: &[u8], seed: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len + hash.output_len());
    // A(1) = HMAC(secret, label + seed); A(i) = HMAC(secret, A(i-1)).
    let mut a = hmac(hash, secret, &[label, seed])?;
    while out.len() < len {
        out.extend_from_slice(&hmac(hash, secret, &[&a, label, seed])?);
        a = hmac(hash, secret, &[&a])?;
    }
    out.truncate(len);
    Some(out)
}

/// An AEAD cipher of the record layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl Cipher {
    pub fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Gcm => 16,
            Cipher::Aes256Gcm | Cipher::ChaCha20Poly1305 => 32,
        }
    }
}

/// The authentication tag's length, for every cipher here.
pub const TAG: usize = 16;

/// A record-layer key, ready to open records.
pub enum Aead {
    Aes128Gcm(Box<Aes128Gcm>),
    Aes256Gcm(Box<Aes256Gcm>),
    ChaCha20Poly1305(Box<ChaCha20Poly1305>),
}

impl std::fmt::Debug for Aead {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Aead")
    }
}

impl Aead {
    /// `key` for `cipher`; `None` if its length is wrong.
    pub fn new(cipher: Cipher, key: &[u8]) -> Option<Aead> {
        Some(match cipher {
            Cipher::Aes128Gcm => Aead::Aes128Gcm(Box::new(Aes128Gcm::new_from_slice(key).ok()?)),
            Cipher::Aes256Gcm => Aead::Aes256Gcm(Box::new(Aes256Gcm::new_from_slice(key).ok()?)),
            Cipher::ChaCha20Poly1305 => {
                Aead::ChaCha20Poly1305(Box::new(ChaCha20Poly1305::new_from_slice(key).ok()?))
            }
        })
    }

    /// Opens `sealed` (ciphertext, then the tag) in place under `nonce`
    /// and `aad`: the plaintext's length (at the front of `sealed`), or
    /// `None` if it does not authenticate.
    pub fn open(&self, nonce: &[u8; 12], aad: &[u8], sealed: &mut [u8]) -> Option<usize> {
        let len = sealed.len().checked_sub(TAG)?;
        let (text, tag) = sealed.split_at_mut_checked(len)?;
        let tag = &*tag;
        let opened = match self {
            Aead::Aes128Gcm(k) => k.decrypt_in_place_detached(nonce.into(), aad, text, tag.into()),
            Aead::Aes256Gcm(k) => k.decrypt_in_place_detached(nonce.into(), aad, text, tag.into()),
            Aead::ChaCha20Poly1305(k) => {
                k.decrypt_in_place_detached(nonce.into(), aad, text, tag.into())
            }
        };
        opened.ok().map(|()| len)
    }

    /// Seals `text` in place and appends the tag (tests and benchmarks
    /// build records so); `false` if the text is too long for the cipher.
    pub fn seal(&self, nonce: &[u8; 12], aad: &[u8], text: &mut Vec<u8>) -> bool {
        let tag = match self {
            Aead::Aes128Gcm(k) => k.encrypt_in_place_detached(nonce.into(), aad, text),
            Aead::Aes256Gcm(k) => k.encrypt_in_place_detached(nonce.into(), aad, text),
            Aead::ChaCha20Poly1305(k) => k.encrypt_in_place_detached(nonce.into(), aad, text),
        };
        match tag {
            Ok(tag) => {
                text.extend_from_slice(&tag);
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // The server handshake traffic secret of RFC 8448's simple 1-RTT
    // handshake; its key and IV agree with the RFC's as well as OpenSSL's.
    const OPENSSL_KEY: &str = "3fce516009c21727d0f2e4e86ee403bc";
    const OPENSSL_IV: &str = "5d313eb2671276ee13000b30";
    const PRF_SECRET: &str = "414141414141414141414141414141414141414141414141414141414141414141414141414141414141414141414141";
    const PRF_SEED: &str = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f40";
    const OPENSSL_PRF_256: &str = "c3a8a109d060d7fb37129ea3e5bfcb4f9ae91d8e1b08321b8e9d133d773ab7db5d6c97e53c441356286a6a177550c1407df444c207ad24b5653dd02132a5225b3a1f1e608294db2a";
    const OPENSSL_PRF_384: &str = "019586b192db46d0add28c93340630c4fb1b845bc804b1900ddc07022ec04d04a44d76ac43d2060bcc9d5a449c8463fd1401b01a08af32706513db16ff5499814c9ae10be5240a2e";

    /// Reference values computed with OpenSSL 3's own implementations
    /// (`openssl kdf … HKDF` / `TLS1-PRF`), an independent oracle.
    #[test]
    fn expand_label_matches_openssl() {
        let secret = unhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38");
        let key = expand_label(Hash::Sha256, &secret, "key", 16).unwrap();
        let iv = expand_label(Hash::Sha256, &secret, "iv", 12).unwrap();
        assert_eq!(key, unhex(OPENSSL_KEY));
        assert_eq!(iv, unhex(OPENSSL_IV));
        // A secret shorter than the hash is refused, not padded.
        assert!(expand_label(Hash::Sha384, &secret, "key", 32).is_none());
    }

    #[test]
    fn prf12_matches_openssl() {
        let secret = unhex(PRF_SECRET);
        let seed = unhex(PRF_SEED);
        let out = prf12(Hash::Sha256, &secret, b"key expansion", &seed, 72).unwrap();
        assert_eq!(out, unhex(OPENSSL_PRF_256));
        let out = prf12(Hash::Sha384, &secret, b"key expansion", &seed, 72).unwrap();
        assert_eq!(out, unhex(OPENSSL_PRF_384));
    }

    #[test]
    fn open_takes_back_what_seal_made_and_nothing_else() {
        for cipher in [
            Cipher::Aes128Gcm,
            Cipher::Aes256Gcm,
            Cipher::ChaCha20Poly1305,
        ] {
            let key = vec![7u8; cipher.key_len()];
            let aead = Aead::new(cipher, &key).unwrap();
            let nonce = [3u8; 12];
            let mut sealed = b"GET / HTTP/1.1\r\n\r\n".to_vec();
            assert!(aead.seal(&nonce, b"aad", &mut sealed));
            let mut copy = sealed.clone();
            let n = aead.open(&nonce, b"aad", &mut copy).unwrap();
            assert_eq!(&copy[..n], b"GET / HTTP/1.1\r\n\r\n");
            // Another nonce, other associated data, a flipped bit: refused.
            let mut copy = sealed.clone();
            assert!(aead.open(&[4u8; 12], b"aad", &mut copy).is_none());
            let mut copy = sealed.clone();
            assert!(aead.open(&nonce, b"aae", &mut copy).is_none());
            let mut copy = sealed.clone();
            copy[0] ^= 1;
            assert!(aead.open(&nonce, b"aad", &mut copy).is_none());
            // Shorter than a tag: refused, no panic.
            assert!(aead.open(&nonce, b"aad", &mut [0u8; 5]).is_none());
            // A key of the wrong length is refused.
            assert!(Aead::new(cipher, &key[1..]).is_none());
        }
    }
}
