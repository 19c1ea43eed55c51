//! Known answers for the hashes, KDFs and ciphers of `crypto`, and
//! every AEAD opening what it sealed and nothing else.

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
const OPENSSL_PRF_10: &str = "cdd3b9f7cd5ef9590a455d292d4e1351184de7e15f0de74fb3573b0c9846cce680b884dd8d16f68adb29346b848241b9f056bc851f136537bf409aa798308102e3f24b65c791e559";
const OPENSSL_PRF_10_ODD: &str = "e2318636ade2cc9f974e9fe5a1e06448f0da92f0af73cd19363f294510f77871ba4080e0b27e24b3cc924fc2e4576a7fd9d2000ca344e9347c3d3bdf650b5079850cfeba822a48ee";
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
fn prf10_matches_openssl() {
    let seed = unhex(PRF_SEED);
    let secret = unhex(PRF_SECRET);
    let out = prf10(&secret, b"key expansion", &seed, 72).unwrap();
    assert_eq!(out, unhex(OPENSSL_PRF_10));
    // An odd-length secret: the halves share the middle byte.
    let odd = [secret, vec![0x42]].concat();
    let out = prf10(&odd, b"key expansion", &seed, 72).unwrap();
    assert_eq!(out, unhex(OPENSSL_PRF_10_ODD));
}

#[test]
fn cbc_and_mac_take_back_what_they_made() {
    for len in [16, 32] {
        let block = Block::new(&vec![9u8; len]).unwrap();
        let iv = [5u8; BLOCK];
        let text = *b"0123456789abcdef0123456789abcdef";
        let mut data = text;
        block.encrypt(&iv, &mut data).unwrap();
        assert_ne!(data, text);
        let mut back = data;
        block.decrypt(&iv, &mut back).unwrap();
        assert_eq!(back, text);
        // Not whole blocks: refused, no panic.
        assert!(block.decrypt(&iv, &mut back[..15]).is_none());
    }
    assert!(Block::new(&[0u8; 24]).is_none());
    for (hash, len) in [(Hash::Sha1, 20), (Hash::Sha256, 32), (Hash::Sha384, 48)] {
        let mac = Mac::new(hash, b"key").unwrap();
        assert_eq!(mac.tag_len(), len);
        let tag = mac.tag(&[b"ab", b"c"]);
        assert_eq!(tag.len(), len);
        assert!(mac.verify(&[b"a", b"bc"], &tag));
        assert!(!mac.verify(&[b"a", b"bd"], &tag));
        assert!(!mac.verify(&[b"abc"], &tag[1..]));
    }
    // HMAC-SHA-1 of RFC 2202's second test case.
    let mac = Mac::new(Hash::Sha1, b"Jefe").unwrap();
    let tag = mac.tag(&[b"what do ya want ", b"for nothing?"]);
    assert_eq!(tag, unhex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"));
}

#[test]
fn open_takes_back_what_seal_made_and_nothing_else() {
    for cipher in [
        Cipher::Aes128Gcm,
        Cipher::Aes256Gcm,
        Cipher::Aes128Ccm,
        Cipher::Aes256Ccm,
        Cipher::Aes128Ccm8,
        Cipher::Aes256Ccm8,
        Cipher::ChaCha20Poly1305,
    ] {
        let key = vec![7u8; cipher.key_len()];
        let aead = Aead::new(cipher, &key).unwrap();
        let nonce = [3u8; 12];
        let mut sealed = b"GET / HTTP/1.1\r\n\r\n".to_vec();
        assert!(aead.seal(&nonce, b"aad", &mut sealed));
        assert_eq!(sealed.len(), 18 + cipher.tag_len());
        assert_eq!(aead.tag_len(), cipher.tag_len());
        let mut copy = sealed.clone();
        let n = aead.open(&nonce, b"aad", &mut copy).unwrap();
        assert_eq!(&copy[..n], b"GET / HTTP/1.1\r\n\r\n");
        // Another nonce, other associated data, a flipped bit: refused.
        let mut copy = sealed.clone();
        assert!(aead.open(&[4u8; 12], b"aad", &mut copy).is_none());
        let mut copy = sealed.clone();
        assert!(aead.open(&nonce, b"aae", &mut copy).is_none());
        // A failure leaves the bytes as they were, to be tried again.
        assert_eq!(copy, sealed, "{cipher:?}");
        let mut copy = sealed.clone();
        copy[0] ^= 1;
        assert!(aead.open(&nonce, b"aad", &mut copy).is_none());
        // Shorter than a tag: refused, no panic.
        assert!(aead.open(&nonce, b"aad", &mut [0u8; 5]).is_none());
        // A key of the wrong length is refused.
        assert!(Aead::new(cipher, &key[1..]).is_none());
    }
}
