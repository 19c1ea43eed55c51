//! Opens QUIC Initial packets, whose keys anyone can derive from the
//! client's first destination connection ID (RFC 9001 §5.2; RFC 9369 §3.3
//! for version 2; the drafts' own salts), and reads their frames: the
//! CRYPTO data that carries the ClientHello and ServerHello, and a
//! CONNECTION_CLOSE.
//!
//! The same packet protection (header protection, then the AEAD) opens
//! 0-RTT and 1-RTT packets with keys from a key log's secrets
//! ([`Keys::from_secret`]); `app` reads those. Does not know about
//! connections or TLS messages (`super` does). Bytes are hostile: any input
//! gives `None` or frames, never a panic; nothing grows beyond the packet.

use crate::analyze::tls::crypto::{self, Aead, Cipher, Hash, HeaderKey, BLOCK};
use crate::decode::{varint, LongPacket};

/// Initial salts by version (RFC 9001 §5.2, RFC 9369 §3.3.1, and the
/// drafts that browsers and servers shipped).
const SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
const SALT_V2: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb,
    0xf9, 0xbd, 0x2e, 0xd9,
];
const SALT_DRAFT_29: [u8; 20] = [
    0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97, 0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0,
    0x43, 0x90, 0xa8, 0x99,
];
const SALT_DRAFT_23: [u8; 20] = [
    0xc3, 0xee, 0xf7, 0x12, 0xc7, 0x2e, 0xbb, 0x5a, 0x11, 0xa7, 0xd2, 0x43, 0x2b, 0xb4, 0x63, 0x65,
    0xbe, 0xf9, 0xf5, 0x02,
];
const SALT_DRAFT_22: [u8; 20] = [
    0x7f, 0xbc, 0xdb, 0x0e, 0x7c, 0x66, 0xbb, 0xe9, 0x19, 0x3a, 0x96, 0xcd, 0x21, 0x51, 0x9e, 0xbd,
    0x7a, 0x02, 0x64, 0x4a,
];

/// The salt and the key-derivation labels of `version`; `None` for one
/// this tool does not know.
fn schedule(version: u32) -> Option<(&'static [u8; 20], [&'static str; 3])> {
    const V1_LABELS: [&str; 3] = ["quic key", "quic iv", "quic hp"];
    Some(match version {
        1 | 0xff00_0021..=0xff00_0022 => (&SALT_V1, V1_LABELS),
        0x6b33_43cf => (&SALT_V2, ["quicv2 key", "quicv2 iv", "quicv2 hp"]),
        0xff00_001d..=0xff00_0020 => (&SALT_DRAFT_29, V1_LABELS),
        0xff00_0017..=0xff00_001c => (&SALT_DRAFT_23, V1_LABELS),
        0xff00_0016 => (&SALT_DRAFT_22, V1_LABELS),
        _ => return None,
    })
}

/// One direction's packet protection keys: the AEAD (AES-128-GCM for
/// Initial packets), its IV, and the header-protection key.
pub struct Keys {
    aead: Aead,
    iv: [u8; 12],
    hp: HeaderKey,
}

impl std::fmt::Debug for Keys {
    // Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys")
    }
}

impl Keys {
    /// The packet protection keys of a TLS traffic `secret` (RFC 9001
    /// §5.1) for a cipher suite of `hash` and `cipher`, with `version`'s
    /// labels; the header-protection key given, when it is kept (a key
    /// update changes the others only, §6).
    pub fn from_secret(
        version: u32,
        (hash, cipher): (Hash, Cipher),
        secret: &[u8],
        hp: Option<&HeaderKey>,
    ) -> Option<Keys> {
        let (_, [key, iv, hp_label]) = schedule(version)?;
        let iv = crypto::expand_label(hash, secret, iv, 12)?;
        let hp = match hp {
            Some(hp) => hp.clone(),
            None => HeaderKey::new(
                cipher,
                &crypto::expand_label(hash, secret, hp_label, cipher.key_len())?,
            )?,
        };
        Some(Keys {
            aead: Aead::new(
                cipher,
                &crypto::expand_label(hash, secret, key, cipher.key_len())?,
            )?,
            iv: iv.try_into().ok()?,
            hp,
        })
    }

    /// The header-protection key.
    pub fn hp(&self) -> &HeaderKey {
        &self.hp
    }
}

/// The next secret of a key update (RFC 9001 §6.1: "quic ku", "quicv2 ku"
/// in version 2).
pub fn next_secret(version: u32, hash: Hash, secret: &[u8]) -> Option<Vec<u8>> {
    let label = if version == 0x6b33_43cf {
        "quicv2 ku"
    } else {
        "quic ku"
    };
    crypto::expand_label(hash, secret, label, hash.output_len())
}

/// The client's and the server's Initial keys of a connection whose client
/// sent its first Initial to `dcid` (or, after a Retry, to the ID the Retry
/// gave), in `version`.
pub fn keys(version: u32, dcid: &[u8]) -> Option<[Keys; 2]> {
    let [client, server] = key_material(version, dcid)?;
    let side = |[key, iv, hp]: [Vec<u8>; 3]| -> Option<Keys> {
        Some(Keys {
            aead: Aead::new(Cipher::Aes128Gcm, &key)?,
            iv: iv.try_into().ok()?,
            hp: HeaderKey::new(Cipher::Aes128Gcm, &hp)?,
        })
    };
    Some([side(client)?, side(server)?])
}

/// The key, IV and header-protection key of the client's and the server's
/// Initial packets (RFC 9001 §5.2).
fn key_material(version: u32, dcid: &[u8]) -> Option<[[Vec<u8>; 3]; 2]> {
    let (salt, [key, iv, hp]) = schedule(version)?;
    let initial = crypto::extract_sha256(salt, dcid);
    let side = |label: &str| -> Option<[Vec<u8>; 3]> {
        let secret = crypto::expand_label(Hash::Sha256, &initial, label, 32)?;
        Some([
            crypto::expand_label(Hash::Sha256, &secret, key, 16)?,
            crypto::expand_label(Hash::Sha256, &secret, iv, 12)?,
            crypto::expand_label(Hash::Sha256, &secret, hp, 16)?,
        ])
    };
    Some([side("client in")?, side("server in")?])
}

/// The full packet number nearest to the next expected one, from the
/// `bits`-bit truncated `truncated` (RFC 9000 §A.3).
fn full_packet_number(largest: Option<u64>, truncated: u64, bits: u32) -> u64 {
    let expected = largest.map_or(0, |l| l.saturating_add(1));
    let window = 1u64 << bits;
    let half = window / 2;
    let candidate = (expected & !(window - 1)) | truncated;
    if candidate.saturating_add(half) <= expected && candidate < (1 << 62) - window {
        candidate + window
    } else if candidate > expected.saturating_add(half) && candidate >= window {
        candidate - window
    } else {
        candidate
    }
}

/// Opens the Initial packet `packet` with `keys`, given the largest packet
/// number opened before in its direction: its packet number and plaintext
/// (in `scratch`), or `None` if it does not authenticate.
pub fn open<'s>(
    keys: &Keys,
    packet: &LongPacket<'_>,
    largest: Option<u64>,
    scratch: &'s mut Vec<u8>,
) -> Option<(u64, &'s [u8])> {
    let header = unprotect(
        &keys.hp,
        packet.bytes,
        packet.pn_offset,
        true,
        largest,
        scratch,
    )?;
    let plain = unseal(keys, &header, scratch)?;
    Some((header.pn, plain))
}

/// A packet's header with its protection removed (the packet is in the
/// scratch buffer `unprotect` was given).
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// The first byte, unmasked (a short header's key phase is bit 2).
    pub first: u8,
    pub pn: u64,
    /// The header's length: where the sealed payload starts.
    pub len: usize,
}

/// Copies `bytes` (a packet whose packet number starts at `pn_offset`)
/// into `scratch` and removes its header protection with `hp` (RFC 9001
/// §5.4; `long`: a long header, whose first byte keeps 4 bits clear, a
/// short one 5); `None` if it is too short to sample.
pub fn unprotect(
    hp: &HeaderKey,
    bytes: &[u8],
    pn_offset: usize,
    long: bool,
    largest: Option<u64>,
    scratch: &mut Vec<u8>,
) -> Option<Header> {
    let sample = bytes
        .get(pn_offset + 4..pn_offset + 4 + BLOCK)?
        .first_chunk::<BLOCK>()?;
    let mask = hp.mask(sample);
    scratch.clear();
    scratch.extend_from_slice(bytes);
    let first = scratch.first_mut()?;
    *first ^= mask[0] & if long { 0x0f } else { 0x1f };
    let first = *first;
    let pn_len = usize::from(first & 0x03) + 1;
    let mut truncated = 0u64;
    for (i, m) in mask.get(1..=pn_len)?.iter().enumerate() {
        let byte = scratch.get_mut(pn_offset + i)?;
        *byte ^= m;
        truncated = (truncated << 8) | u64::from(*byte);
    }
    Some(Header {
        first,
        pn: full_packet_number(largest, truncated, 8 * pn_len as u32),
        len: pn_offset + pn_len,
    })
}

/// Opens the payload of the packet in `scratch` (its header unprotected
/// into `header`) with `keys`' AEAD key and IV; the plaintext, in place.
pub fn unseal<'s>(keys: &Keys, header: &Header, scratch: &'s mut [u8]) -> Option<&'s [u8]> {
    let mut nonce = keys.iv;
    for (n, p) in nonce[4..].iter_mut().zip(header.pn.to_be_bytes()) {
        *n ^= p;
    }
    let (aad, sealed) = scratch.split_at_mut_checked(header.len)?;
    let len = keys.aead.open(&nonce, aad, sealed)?;
    scratch.get(header.len..header.len + len)
}

/// A frame of an Initial packet that the handshake's record needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// CRYPTO: handshake bytes at `offset` of the direction's stream.
    Crypto { offset: u64, data: &'a [u8] },
    /// CONNECTION_CLOSE, with its error code.
    Close { error: u64 },
}

/// The CRYPTO and CONNECTION_CLOSE frames of a plaintext, in order, past
/// PADDING, PING and ACK; it stops at the first frame of another type (not
/// allowed in an Initial packet) or that does not fit.
pub fn frames(plain: &[u8]) -> impl Iterator<Item = Frame<'_>> {
    let mut rest = plain;
    std::iter::from_fn(move || loop {
        let (ty, after) = varint(rest)?;
        rest = after;
        match ty {
            0x00 | 0x01 => {}
            0x02 | 0x03 => rest = skip_ack(rest, ty == 0x03)?,
            0x06 => {
                let (offset, after) = varint(rest)?;
                let (len, after) = varint(after)?;
                let (data, after) = after.split_at_checked(usize::try_from(len).ok()?)?;
                rest = after;
                return Some(Frame::Crypto { offset, data });
            }
            0x1c | 0x1d => {
                let (error, after) = varint(rest)?;
                rest = &[];
                let _ = after;
                return Some(Frame::Close { error });
            }
            _ => return None,
        }
    })
}

/// The bytes after an ACK frame's body (`ecn`: with its three counts).
pub fn skip_ack(b: &[u8], ecn: bool) -> Option<&[u8]> {
    let (_largest, b) = varint(b)?;
    let (_delay, b) = varint(b)?;
    let (ranges, b) = varint(b)?;
    let (_first, mut b) = varint(b)?;
    // Each range takes at least two bytes, so this ends within the packet.
    let mut left = ranges;
    while left > 0 {
        b = varint(varint(b)?.1)?.1;
        left -= 1;
    }
    if ecn {
        for _ in 0..3 {
            b = varint(b)?.1;
        }
    }
    Some(b)
}

#[cfg(test)]
pub(super) mod tests;
