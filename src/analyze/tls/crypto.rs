//! Every hash and cipher the TLS analysis uses, and the only module that
//! names their crates: MD5 and SHA-256 for the JA3/JA4 fingerprints;
//! HKDF-Expand-Label (RFC 8446 §7.1), the PRFs of TLS 1.2 (RFC 5246 §5) and
//! of TLS 1.0 and 1.1 (RFC 2246 §5), the AEAD ciphers (AES-128/256-GCM,
//! AES-128/256-CCM with 16- and 8-byte tags, ChaCha20-Poly1305), and
//! AES-CBC with the HMACs of the CBC suites, that open records with a key
//! log's secrets; HKDF-Extract and one AES block for QUIC's Initial packets
//! (RFC 9001 §5.2, §5.4.3), which need no key log, and ChaCha20 for the
//! header protection of its other packets when a connection chose
//! ChaCha20-Poly1305 (§5.4.4).
//!
//! Does not know about records, handshakes or key logs: `hello` and
//! `decrypt` do. Public for the benchmarks, which seal records with it.

use aes::{Aes128, Aes256};
use aes_gcm::aead::{AeadCore, AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use cbc::cipher::block_padding::NoPadding;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, InnerIvInit};
use ccm::consts::{U12, U16, U8};
use ccm::Ccm;
use chacha20poly1305::ChaCha20Poly1305;
use hkdf::Hkdf;
use hmac::Hmac;
use md5::{Digest, Md5};
use sha1::Sha1;
use sha2::{Sha256, Sha384};

/// The MD5 digest of `bytes` (JA3, JA3S).
pub fn md5(bytes: &[u8]) -> [u8; 16] {
    Md5::digest(bytes).into()
}

/// The SHA-256 digest of `bytes` (JA4).
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The hash of a cipher suite's key schedule, or of a CBC suite's HMAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    Sha1,
    Sha256,
    Sha384,
}

impl Hash {
    /// Its output length in bytes: the length of a TLS 1.3 traffic secret,
    /// or of a CBC record's MAC.
    pub fn output_len(self) -> usize {
        match self {
            Hash::Sha1 => 20,
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
        }
    }
}

/// HKDF-Extract(`salt`, `ikm`) with SHA-256: QUIC's initial secret from a
/// version's salt and the client's first destination connection ID.
pub fn extract_sha256(salt: &[u8], ikm: &[u8]) -> [u8; 32] {
    Hkdf::<Sha256>::extract(Some(salt), ikm).0.into()
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
        Hash::Sha1 => Hkdf::<Sha1>::from_prk(secret)
            .ok()?
            .expand(&info, &mut out)
            .ok()?,
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

/// P_hash(`secret`, `label` + `seed`) of RFC 5246 §5, `len` bytes.
fn p_hash<M: hmac::Mac + KeyInit + Clone>(
    secret: &[u8],
    label: &[u8],
    seed: &[u8],
    len: usize,
) -> Option<Vec<u8>> {
    let keyed = <M as KeyInit>::new_from_slice(secret).ok()?;
    let mut out = Vec::with_capacity(len + 64);
    // A(1) = HMAC(secret, label + seed); A(i) = HMAC(secret, A(i-1)).
    let mut mac = keyed.clone();
    mac.update(label);
    mac.update(seed);
    let mut a = mac.finalize().into_bytes();
    while out.len() < len {
        let mut mac = keyed.clone();
        mac.update(&a);
        mac.update(label);
        mac.update(seed);
        out.extend_from_slice(&mac.finalize().into_bytes());
        let mut mac = keyed.clone();
        mac.update(&a);
        a = mac.finalize().into_bytes();
    }
    out.truncate(len);
    Some(out)
}

/// The TLS 1.2 PRF: `len` bytes of P_hash(`secret`, `label` + `seed`).
pub fn prf12(hash: Hash, secret: &[u8], label: &[u8], seed: &[u8], len: usize) -> Option<Vec<u8>> {
    match hash {
        Hash::Sha1 => p_hash::<Hmac<Sha1>>(secret, label, seed, len),
        Hash::Sha256 => p_hash::<Hmac<Sha256>>(secret, label, seed, len),
        Hash::Sha384 => p_hash::<Hmac<Sha384>>(secret, label, seed, len),
    }
}

/// The PRF of TLS 1.0 and 1.1 (RFC 2246 §5): P_MD5 over the secret's first
/// half XOR P_SHA-1 over its second (the halves share the middle byte
/// when the length is odd).
pub fn prf10(secret: &[u8], label: &[u8], seed: &[u8], len: usize) -> Option<Vec<u8>> {
    let half = secret.len().div_ceil(2);
    let first = secret.get(..half)?;
    let second = secret.get(secret.len() - half..)?;
    let mut out = p_hash::<Hmac<Md5>>(first, label, seed, len)?;
    let sha = p_hash::<Hmac<Sha1>>(second, label, seed, len)?;
    for (o, s) in out.iter_mut().zip(sha) {
        *o ^= s;
    }
    Some(out)
}

/// A CBC suite's record MAC key (HMAC-SHA-1, -SHA-256 or -SHA-384), keyed
/// once, cloned for each record.
#[derive(Clone)]
pub enum Mac {
    Sha1(Hmac<Sha1>),
    Sha256(Hmac<Sha256>),
    Sha384(Hmac<Sha384>),
}

impl std::fmt::Debug for Mac {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mac")
    }
}

impl Mac {
    pub fn new(hash: Hash, key: &[u8]) -> Option<Mac> {
        Some(match hash {
            Hash::Sha1 => Mac::Sha1(<Hmac<Sha1> as KeyInit>::new_from_slice(key).ok()?),
            Hash::Sha256 => Mac::Sha256(<Hmac<Sha256> as KeyInit>::new_from_slice(key).ok()?),
            Hash::Sha384 => Mac::Sha384(<Hmac<Sha384> as KeyInit>::new_from_slice(key).ok()?),
        })
    }

    /// The MAC's length in bytes.
    pub fn tag_len(&self) -> usize {
        match self {
            Mac::Sha1(_) => 20,
            Mac::Sha256(_) => 32,
            Mac::Sha384(_) => 48,
        }
    }

    /// The MAC of the concatenated `parts`.
    pub fn tag(&self, parts: &[&[u8]]) -> Vec<u8> {
        fn run<M: hmac::Mac + Clone>(mac: &M, parts: &[&[u8]]) -> Vec<u8> {
            let mut mac = mac.clone();
            for part in parts {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Mac::Sha1(m) => run(m, parts),
            Mac::Sha256(m) => run(m, parts),
            Mac::Sha384(m) => run(m, parts),
        }
    }

    /// Whether `tag` is the MAC of the concatenated `parts` (compared
    /// plainly: a capture's analysis has no timing to hide).
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.tag(parts) == tag
    }
}

/// AES's block size: a CBC record's IV and the unit of its ciphertext.
pub const BLOCK: usize = 16;

/// An AES key for CBC records.
#[derive(Clone)]
pub enum Block {
    Aes128(Box<Aes128>),
    Aes256(Box<Aes256>),
}

impl std::fmt::Debug for Block {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Block")
    }
}

impl Block {
    /// An AES-128 or AES-256 key, by its length.
    pub fn new(key: &[u8]) -> Option<Block> {
        Some(match key.len() {
            16 => Block::Aes128(Box::new(Aes128::new_from_slice(key).ok()?)),
            32 => Block::Aes256(Box::new(Aes256::new_from_slice(key).ok()?)),
            _ => return None,
        })
    }

    /// Encrypts one block (AES in ECB mode): QUIC's header-protection
    /// mask from a sample of the packet (RFC 9001 §5.4.3).
    pub fn encrypt_one(&self, block: &[u8; BLOCK]) -> [u8; BLOCK] {
        use aes::cipher::BlockEncrypt;
        let mut b = aes::Block::from(*block);
        match self {
            Block::Aes128(k) => k.encrypt_block(&mut b),
            Block::Aes256(k) => k.encrypt_block(&mut b),
        }
        b.into()
    }

    /// Decrypts `data` (whole blocks) in place in CBC mode from `iv`;
    /// `None` if it is not whole blocks.
    pub fn decrypt(&self, iv: &[u8; BLOCK], data: &mut [u8]) -> Option<()> {
        fn run<C>(cipher: &C, iv: &[u8; BLOCK], data: &mut [u8]) -> Option<()>
        where
            C: Clone + cbc::cipher::BlockDecrypt + cbc::cipher::BlockCipher,
            C: cbc::cipher::BlockSizeUser<BlockSize = cbc::cipher::consts::U16>,
        {
            cbc::Decryptor::<C>::inner_iv_init(cipher.clone(), iv.into())
                .decrypt_padded_mut::<NoPadding>(data)
                .ok()
                .map(|_| ())
        }
        match self {
            Block::Aes128(k) => run(k.as_ref(), iv, data),
            Block::Aes256(k) => run(k.as_ref(), iv, data),
        }
    }

    /// Encrypts `data` (whole blocks) in place in CBC mode from `iv`
    /// (tests, benchmarks and fuzzing build records so); `None` if it is
    /// not whole blocks.
    pub fn encrypt(&self, iv: &[u8; BLOCK], data: &mut [u8]) -> Option<()> {
        fn run<C>(cipher: &C, iv: &[u8; BLOCK], data: &mut [u8]) -> Option<()>
        where
            C: Clone + cbc::cipher::BlockEncrypt + cbc::cipher::BlockCipher,
            C: cbc::cipher::BlockSizeUser<BlockSize = cbc::cipher::consts::U16>,
        {
            let len = data.len();
            cbc::Encryptor::<C>::inner_iv_init(cipher.clone(), iv.into())
                .encrypt_padded_mut::<NoPadding>(data, len)
                .ok()
                .map(|_| ())
        }
        match self {
            Block::Aes128(k) => run(k.as_ref(), iv, data),
            Block::Aes256(k) => run(k.as_ref(), iv, data),
        }
    }
}

/// A QUIC header-protection key (RFC 9001 §5.4): an AES block key for the
/// AES-GCM and AES-CCM suites, a ChaCha20 key for ChaCha20-Poly1305.
#[derive(Clone)]
pub enum HeaderKey {
    Aes(Block),
    ChaCha20(Box<[u8; 32]>),
}

impl std::fmt::Debug for HeaderKey {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderKey")
    }
}

impl HeaderKey {
    /// The header-protection key `key` of a suite whose AEAD is `cipher`;
    /// `None` if its length is not the cipher's.
    pub fn new(cipher: Cipher, key: &[u8]) -> Option<HeaderKey> {
        match cipher {
            Cipher::ChaCha20Poly1305 => Some(HeaderKey::ChaCha20(Box::new(key.try_into().ok()?))),
            _ => Some(HeaderKey::Aes(Block::new(key)?)),
        }
    }

    /// The mask a packet's `sample` gives (§5.4.3: one AES block; §5.4.4:
    /// ChaCha20 keyed with the sample's first four bytes as the block
    /// counter, little-endian, and the other twelve as the nonce, over five
    /// zero bytes). The first five bytes are the mask; AES's other eleven
    /// are unused.
    pub fn mask(&self, sample: &[u8; BLOCK]) -> [u8; 5] {
        let mut mask = [0u8; 5];
        match self {
            HeaderKey::Aes(block) => {
                let out = block.encrypt_one(sample);
                mask.copy_from_slice(out.first_chunk::<5>().unwrap_or(&[0; 5]));
            }
            HeaderKey::ChaCha20(key) => {
                use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
                let (counter, nonce) = sample.split_at(4);
                let counter = u32::from_le_bytes(counter.try_into().unwrap_or_default());
                let mut c = chacha20::ChaCha20::new(key.as_ref().into(), nonce.into());
                c.seek(u64::from(counter) * 64);
                c.apply_keystream(&mut mask);
            }
        }
        mask
    }
}

/// An AEAD cipher of the record layer. The CCM ones (RFC 6655, 7251,
/// 8446) take a 12-byte nonce, as every cipher here does; `…Ccm8` has an
/// 8-byte tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Aes128Ccm,
    Aes256Ccm,
    Aes128Ccm8,
    Aes256Ccm8,
    ChaCha20Poly1305,
}

impl Cipher {
    pub fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Gcm | Cipher::Aes128Ccm | Cipher::Aes128Ccm8 => 16,
            Cipher::Aes256Gcm
            | Cipher::Aes256Ccm
            | Cipher::Aes256Ccm8
            | Cipher::ChaCha20Poly1305 => 32,
        }
    }

    /// The authentication tag's length: 16 bytes, CCM_8's 8.
    pub fn tag_len(self) -> usize {
        match self {
            Cipher::Aes128Ccm8 | Cipher::Aes256Ccm8 => 8,
            _ => 16,
        }
    }
}

type Aes128Ccm = Ccm<Aes128, U16, U12>;
type Aes256Ccm = Ccm<Aes256, U16, U12>;
type Aes128Ccm8 = Ccm<Aes128, U8, U12>;
type Aes256Ccm8 = Ccm<Aes256, U8, U12>;

/// A record-layer key, ready to open records.
pub enum Aead {
    Aes128Gcm(Box<Aes128Gcm>),
    Aes256Gcm(Box<Aes256Gcm>),
    Aes128Ccm(Box<Aes128Ccm>),
    Aes256Ccm(Box<Aes256Ccm>),
    Aes128Ccm8(Box<Aes128Ccm8>),
    Aes256Ccm8(Box<Aes256Ccm8>),
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
        fn boxed<K: KeyInit>(key: &[u8]) -> Option<Box<K>> {
            K::new_from_slice(key).ok().map(Box::new)
        }
        Some(match cipher {
            Cipher::Aes128Gcm => Aead::Aes128Gcm(boxed(key)?),
            Cipher::Aes256Gcm => Aead::Aes256Gcm(boxed(key)?),
            Cipher::Aes128Ccm => Aead::Aes128Ccm(boxed(key)?),
            Cipher::Aes256Ccm => Aead::Aes256Ccm(boxed(key)?),
            Cipher::Aes128Ccm8 => Aead::Aes128Ccm8(boxed(key)?),
            Cipher::Aes256Ccm8 => Aead::Aes256Ccm8(boxed(key)?),
            Cipher::ChaCha20Poly1305 => Aead::ChaCha20Poly1305(boxed(key)?),
        })
    }

    /// The authentication tag's length (`Cipher::tag_len`).
    pub fn tag_len(&self) -> usize {
        match self {
            Aead::Aes128Ccm8(_) | Aead::Aes256Ccm8(_) => 8,
            _ => 16,
        }
    }

    /// Opens `sealed` (ciphertext, then the tag) in place under `nonce`
    /// and `aad`: the plaintext's length (at the front of `sealed`), or
    /// `None` if it does not authenticate — and then `sealed` is as it
    /// was, for the caller to try another key or sequence number.
    pub fn open(&self, nonce: &[u8; 12], aad: &[u8], sealed: &mut [u8]) -> Option<usize> {
        fn run<A>(k: &A, n: &[u8; 12], aad: &[u8], text: &mut [u8], tag: &[u8]) -> bool
        where
            A: AeadInPlace + AeadCore<NonceSize = U12>,
        {
            // The tag's length is the cipher's: `open` split it so.
            let tag = aes_gcm::aead::Tag::<A>::from_slice(tag);
            k.decrypt_in_place_detached(n.into(), aad, text, tag)
                .is_ok()
        }
        // CCM's MAC is over the plaintext, so it deciphers before it
        // checks, and wipes the buffer when the check fails: it opens a
        // copy. GCM and ChaCha20-Poly1305 check first and leave a
        // failure's buffer untouched.
        fn copied<A>(k: &A, n: &[u8; 12], aad: &[u8], text: &mut [u8], tag: &[u8]) -> bool
        where
            A: AeadInPlace + AeadCore<NonceSize = U12>,
        {
            let mut copy = text.to_vec();
            let opened = run(k, n, aad, &mut copy, tag);
            if opened {
                text.copy_from_slice(&copy);
            }
            opened
        }
        let len = sealed.len().checked_sub(self.tag_len())?;
        let (text, tag) = sealed.split_at_mut_checked(len)?;
        let opened = match self {
            Aead::Aes128Gcm(k) => run(k.as_ref(), nonce, aad, text, tag),
            Aead::Aes256Gcm(k) => run(k.as_ref(), nonce, aad, text, tag),
            Aead::Aes128Ccm(k) => copied(k.as_ref(), nonce, aad, text, tag),
            Aead::Aes256Ccm(k) => copied(k.as_ref(), nonce, aad, text, tag),
            Aead::Aes128Ccm8(k) => copied(k.as_ref(), nonce, aad, text, tag),
            Aead::Aes256Ccm8(k) => copied(k.as_ref(), nonce, aad, text, tag),
            Aead::ChaCha20Poly1305(k) => run(k.as_ref(), nonce, aad, text, tag),
        };
        opened.then_some(len)
    }

    /// Seals `text` in place and appends the tag (tests and benchmarks
    /// build records so); `false` if the text is too long for the cipher.
    pub fn seal(&self, nonce: &[u8; 12], aad: &[u8], text: &mut Vec<u8>) -> bool {
        fn run<A>(k: &A, n: &[u8; 12], aad: &[u8], text: &mut Vec<u8>) -> bool
        where
            A: AeadInPlace + AeadCore<NonceSize = U12>,
        {
            match k.encrypt_in_place_detached(n.into(), aad, text) {
                Ok(tag) => {
                    text.extend_from_slice(&tag);
                    true
                }
                Err(_) => false,
            }
        }
        match self {
            Aead::Aes128Gcm(k) => run(k.as_ref(), nonce, aad, text),
            Aead::Aes256Gcm(k) => run(k.as_ref(), nonce, aad, text),
            Aead::Aes128Ccm(k) => run(k.as_ref(), nonce, aad, text),
            Aead::Aes256Ccm(k) => run(k.as_ref(), nonce, aad, text),
            Aead::Aes128Ccm8(k) => run(k.as_ref(), nonce, aad, text),
            Aead::Aes256Ccm8(k) => run(k.as_ref(), nonce, aad, text),
            Aead::ChaCha20Poly1305(k) => run(k.as_ref(), nonce, aad, text),
        }
    }
}

#[cfg(test)]
mod tests;
