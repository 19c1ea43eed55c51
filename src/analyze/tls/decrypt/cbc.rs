//! Opening one direction's records under a CBC suite of TLS 1.0–1.2: AES
//! in CBC mode with an HMAC, either MAC-then-encrypt (RFC 5246 §6.2.3.2)
//! or encrypt-then-MAC when both hellos agreed on it (RFC 7366); the IV
//! sent with each record (TLS 1.1 and 1.2) or carried over from the last
//! record's ciphertext (TLS 1.0).
//!
//! Does not derive the keys (`schedule`) or count sequence numbers and
//! failures (`decrypt`).

use std::ops::Range;

use super::super::crypto::{Block, Mac, BLOCK};
use super::schedule::associated_data;

/// One direction's CBC key.
pub(super) struct CbcKey {
    block: Block,
    mac: Mac,
    /// TLS 1.0: the IV of the next record (the key block's, then the last
    /// ciphertext block of the record before); `None` when each record
    /// sends its own.
    chained: Option<[u8; BLOCK]>,
    /// Encrypt-then-MAC.
    etm: bool,
}

impl CbcKey {
    /// The key of one side's share of the key block; `iv` is used only
    /// when `chained` (TLS 1.0).
    pub(super) fn new(
        block: Block,
        mac: Mac,
        iv: &[u8],
        chained: bool,
        etm: bool,
    ) -> Option<CbcKey> {
        let chained = match chained {
            true => Some(<[u8; BLOCK]>::try_from(iv).ok()?),
            false => None,
        };
        Some(CbcKey {
            block,
            mac,
            chained,
            etm,
        })
    }

    /// Opens `body` as record `seq` of type `content_type` sent with
    /// record `version`: the plaintext's range in `body`, or `None` if the
    /// MAC or the padding is wrong or the body cannot be a record.
    pub(super) fn open(
        &mut self,
        seq: u64,
        content_type: u8,
        version: u16,
        body: &mut [u8],
    ) -> Option<Range<usize>> {
        let mac_len = self.mac.tag_len();
        let header = |len| associated_data(seq, content_type, version, len);
        // Encrypt-then-MAC: the MAC covers the IV and ciphertext.
        let sealed_len = match self.etm {
            true => {
                let len = body.len().checked_sub(mac_len)?;
                let (sealed, tag) = body.split_at_checked(len)?;
                if !self.mac.verify(&[&header(len)?, sealed], tag) {
                    return None;
                }
                len
            }
            false => body.len(),
        };
        let sealed = body.get_mut(..sealed_len)?;
        let (iv, start) = match self.chained {
            Some(iv) => (iv, 0),
            None => (<[u8; BLOCK]>::try_from(sealed.get(..BLOCK)?).ok()?, BLOCK),
        };
        let data = sealed.get_mut(start..)?;
        if data.is_empty() || data.len() % BLOCK != 0 {
            return None;
        }
        if let Some(next) = self.chained.as_mut() {
            // The next record's IV is this one's last ciphertext block,
            // whether or not this one opens.
            let last = data.len().checked_sub(BLOCK)?;
            next.copy_from_slice(data.get(last..)?);
        }
        self.block.decrypt(&iv, data)?;
        // The padding: `pad` bytes, then their count, each of value `pad`.
        let pad = usize::from(*data.last()?);
        let padded = data.len().checked_sub(pad + 1)?;
        if data.get(padded..)?.iter().any(|&b| usize::from(b) != pad) {
            return None;
        }
        let text_len = match self.etm {
            true => padded,
            false => {
                // MAC-then-encrypt: the MAC follows the text, inside.
                let text_len = padded.checked_sub(mac_len)?;
                let (text, tag) = data.get(..padded)?.split_at_checked(text_len)?;
                if !self.mac.verify(&[&header(text_len)?, text], tag) {
                    return None;
                }
                text_len
            }
        };
        Some(start..start + text_len)
    }
}

/// Seals `text` as record `seq` of type `ty` under `block` and `mac` —
/// what a TLS 1.0–1.2 peer sends: the explicit IV `iv` first unless
/// `chained` (TLS 1.0, where `iv` is the previous ciphertext's last block
/// and is updated), `extra` blocks of padding beyond the least.
#[cfg(test)]
pub(super) fn seal(
    (block, mac): (&Block, &Mac),
    (seq, ty, version): (u64, u8, u16),
    (iv, chained, etm): (&mut [u8; BLOCK], bool, bool),
    text: &[u8],
    extra: usize,
) -> Vec<u8> {
    let header = |len: usize| {
        let mut h = seq.to_be_bytes().to_vec();
        h.push(ty);
        h.extend(version.to_be_bytes());
        h.extend(u16::try_from(len).unwrap().to_be_bytes());
        h
    };
    let mut data = text.to_vec();
    if !etm {
        data.extend(mac.tag(&[&header(text.len()), text]));
    }
    let pad = BLOCK - 1 - data.len() % BLOCK + extra * BLOCK;
    data.extend(std::iter::repeat_n(u8::try_from(pad).unwrap(), pad + 1));
    block.encrypt(iv, &mut data).unwrap();
    let mut body = if chained { Vec::new() } else { iv.to_vec() };
    if chained {
        iv.copy_from_slice(&data[data.len() - BLOCK..]);
    } else {
        // The next explicit IV: anything will do.
        iv.iter_mut().for_each(|b| *b = b.wrapping_add(1));
    }
    body.extend(data);
    if etm {
        let tag = mac.tag(&[&header(body.len()), &body]);
        body.extend(tag);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::super::super::crypto::Hash;
    use super::*;

    fn keys(key_len: usize, hash: Hash) -> (Block, Mac) {
        let block = Block::new(&vec![0x11; key_len]).unwrap();
        (block, Mac::new(hash, &[0x22; 20]).unwrap())
    }

    #[test]
    fn records_open_in_every_mode_and_nothing_else_does() {
        for (key_len, hash) in [(16, Hash::Sha1), (32, Hash::Sha256), (32, Hash::Sha384)] {
            for chained in [false, true] {
                for etm in [false, true] {
                    let (block, mac) = keys(key_len, hash);
                    let start = [0x33; BLOCK];
                    let mut key = CbcKey::new(block, mac, &start, chained, etm).unwrap();
                    let (block, mac) = keys(key_len, hash);
                    let mut iv = start;
                    let case = format!("{key_len} {hash:?} chained {chained} etm {etm}");
                    for (seq, text, extra) in [
                        (0, &b"finished"[..], 0),
                        (1, b"GET / HTTP/1.1\r\n\r\n", 2),
                        (2, b"", 0),
                        (3, &[0x0f; 15][..], 15),
                    ] {
                        let ivs = (&mut iv, chained, etm);
                        let ids = (seq, 23, 0x0303);
                        let mut body = seal((&block, &mac), ids, ivs, text, extra);
                        let range = key.open(seq, 23, 0x0303, &mut body);
                        let range = range.unwrap_or_else(|| panic!("{case} #{seq}"));
                        assert_eq!(&body[range], text, "{case} #{seq}");
                    }
                    if chained {
                        continue;
                    }
                    // Another sequence number, type or version; a flipped
                    // bit anywhere: refused (TLS 1.1 and 1.2, where a fresh
                    // key opens any record of the right number).
                    let ivs = (&mut iv, false, etm);
                    let sealed = seal((&block, &mac), (4, 23, 0x0303), ivs, b"x", 0);
                    let fresh = || {
                        let (block, mac) = keys(key_len, hash);
                        CbcKey::new(block, mac, &start, false, etm).unwrap()
                    };
                    assert!(fresh().open(4, 23, 0x0303, &mut sealed.clone()).is_some());
                    for (seq, ty, version) in [(5, 23, 0x0303), (4, 22, 0x0303), (4, 23, 0x0302)] {
                        let mut body = sealed.clone();
                        assert!(
                            fresh().open(seq, ty, version, &mut body).is_none(),
                            "{case}"
                        );
                    }
                    for at in 0..sealed.len() {
                        let mut body = sealed.clone();
                        body[at] ^= 0x40;
                        let opened = fresh().open(4, 23, 0x0303, &mut body);
                        assert!(opened.is_none(), "{case} bit at {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_padding_and_short_bodies_are_refused_not_panics() {
        for etm in [false, true] {
            for chained in [false, true] {
                let (block, mac) = keys(16, Hash::Sha1);
                let mut key = CbcKey::new(block, mac, &[0; BLOCK], chained, etm).unwrap();
                for len in [0, 1, 15, 16, 17, 20, 32, 36, 48, 52, 70_000] {
                    let mut body = vec![0xee; len];
                    assert!(key.open(0, 23, 0x0303, &mut body).is_none(), "{len}");
                }
            }
        }
        // Padding bytes that disagree with the count, under a good MAC
        // (encrypt-then-MAC checks the MAC first, so this reaches the
        // padding).
        let (block, mac) = keys(16, Hash::Sha1);
        let mut data = [0u8; 32];
        data[31] = 3;
        data[30] = 3;
        data[29] = 2;
        data[28] = 3;
        let iv = [0x44; BLOCK];
        block.encrypt(&iv, &mut data).unwrap();
        let mut body = [&iv[..], &data].concat();
        let header = [&0u64.to_be_bytes()[..], &[23, 3, 3], &48u16.to_be_bytes()].concat();
        body.extend(mac.tag(&[&header, &body]));
        let mut key = CbcKey::new(block, mac, &iv, false, true).unwrap();
        assert!(key.open(0, 23, 0x0303, &mut body.clone()).is_none());
        // The same with its padding right opens.
        let mut data = [3u8; 32];
        data[..28].fill(b'a');
        let (block, mac) = keys(16, Hash::Sha1);
        block.encrypt(&iv, &mut data).unwrap();
        let mut body = [&iv[..], &data].concat();
        body.extend(mac.tag(&[&header, &body]));
        assert_eq!(key.open(0, 23, 0x0303, &mut body), Some(16..44));
    }
}
