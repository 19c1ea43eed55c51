//! Initial keys against the RFCs' vectors, packets sealed here and opened
//! back, and the frame walk on good and hostile bytes.

use super::*;
use crate::decode::{long_packets, PacketKind};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn initial_keys_are_those_of_rfc_9001_appendix_a() {
    let [client, server] = key_material(1, &hex("8394c8f03e515708")).unwrap();
    assert_eq!(client[0], hex("1f369613dd76d5467730efcbe3b1a22d"));
    assert_eq!(client[1], hex("fa044b2f42a3fd3b46fb255c"));
    assert_eq!(client[2], hex("9f50449e04a0e810283a1e9933adedd2"));
    assert_eq!(server[0], hex("cf3a5331653c364c88f0f379b6067e37"));
    assert_eq!(server[1], hex("0ac1493ca1905853b0bba03e"));
    assert_eq!(server[2], hex("c206b8d9b9f0f37644430b490eeaa314"));
}

#[test]
fn version_2_keys_are_those_of_rfc_9369_appendix_a() {
    let [client, server] = key_material(0x6b33_43cf, &hex("8394c8f03e515708")).unwrap();
    assert_eq!(client[0], hex("8b1a0bc121284290a29e0971b5cd045d"));
    assert_eq!(client[1], hex("91f73e2351d8fa91660e909f"));
    assert_eq!(client[2], hex("45b95e15235d6f45a6b19cbcb0294ba9"));
    assert_eq!(server[0], hex("82db637861d55e1d011f19ea71d5d2a7"));
    assert_eq!(server[1], hex("dd13c276499c0249d3310652"));
    assert_eq!(server[2], hex("edf6d05c83121201b436e16877593c3a"));
}

#[test]
fn a_chacha20_packet_opens_as_rfc_9001_a5_shows() {
    // RFC 9001 A.5: a short-header packet, one PING, sealed with
    // ChaCha20-Poly1305 and its header protected with ChaCha20.
    let secret = hex("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b");
    let suite = (Hash::Sha256, Cipher::ChaCha20Poly1305);
    let keys = Keys::from_secret(1, suite, &secret, None).unwrap();
    let sample = hex("5e5cd55c41f69080575d7999c25a5bfb");
    let mask = keys.hp().mask(sample.first_chunk().unwrap());
    assert_eq!(mask.to_vec(), hex("aefefe7d03"));
    let packet = hex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb");
    let mut scratch = Vec::new();
    let header = unprotect(
        keys.hp(),
        &packet,
        1,
        false,
        Some(654_360_563),
        &mut scratch,
    );
    let header = header.unwrap();
    assert_eq!(
        (header.first, header.pn, header.len),
        (0x42, 654_360_564, 4)
    );
    assert_eq!(unseal(&keys, &header, &mut scratch), Some(&[1u8][..]));
}

#[test]
fn every_quic_suite_seals_and_opens_a_short_header_packet() {
    // A 1-RTT packet under each suite QUIC allows, AES-128-CCM among them
    // (its header protected with AES, as GCM's): sealed here, opened back;
    // another key, or a flipped bit, does not open it.
    let secret = [0x5au8; 48];
    for suite in [
        (Hash::Sha256, Cipher::Aes128Gcm),
        (Hash::Sha384, Cipher::Aes256Gcm),
        (Hash::Sha256, Cipher::ChaCha20Poly1305),
        (Hash::Sha256, Cipher::Aes128Ccm),
    ] {
        let secret = &secret[..suite.0.output_len()];
        let keys = Keys::from_secret(1, suite, secret, None).unwrap();
        let (dcid, pn) = ([7u8; 8], 0x1234u64);
        let mut p = vec![0x41];
        p.extend_from_slice(&dcid);
        p.extend_from_slice(&(pn as u16).to_be_bytes());
        let mut nonce = keys.iv;
        for (n, b) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= b;
        }
        let frames = [0x01, 0x00, 0x00, 0x00, 0x00, 0x00]; // PING, PADDING
        let mut body = frames.to_vec();
        assert!(keys.aead.seal(&nonce, &p, &mut body));
        p.extend_from_slice(&body);
        let sample: [u8; 16] = p[9 + 4..9 + 20].try_into().unwrap();
        let mask = keys.hp().mask(&sample);
        p[0] ^= mask[0] & 0x1f;
        p[9] ^= mask[1];
        p[10] ^= mask[2];
        let mut scratch = Vec::new();
        let header = unprotect(keys.hp(), &p, 9, false, Some(0x1200), &mut scratch).unwrap();
        assert_eq!((header.first, header.pn, header.len), (0x41, pn, 11));
        assert_eq!(
            unseal(&keys, &header, &mut scratch),
            Some(&frames[..]),
            "{suite:?}"
        );
        let other = Keys::from_secret(1, suite, &[0x5b; 48][..secret.len()], None).unwrap();
        let header = unprotect(keys.hp(), &p, 9, false, Some(0x1200), &mut scratch).unwrap();
        assert!(unseal(&other, &header, &mut scratch).is_none(), "{suite:?}");
        *p.last_mut().unwrap() ^= 1;
        let header = unprotect(keys.hp(), &p, 9, false, Some(0x1200), &mut scratch).unwrap();
        assert!(unseal(&keys, &header, &mut scratch).is_none(), "{suite:?}");
    }
}

#[test]
fn unknown_versions_have_no_keys() {
    assert!(keys(0x0a0a_0a0a, &[1; 8]).is_none());
    assert!(keys(0xff00_0015, &[1; 8]).is_none(), "draft 21");
    for v in [
        1,
        0x6b33_43cf,
        0xff00_0016,
        0xff00_001c,
        0xff00_001d,
        0xff00_0022,
    ] {
        assert!(keys(v, &[1; 8]).is_some(), "{v:#x}");
    }
}

#[test]
fn packet_numbers_are_recovered_as_rfc_9000_a3_says() {
    assert_eq!(full_packet_number(Some(0xa82f30ea), 0x9b32, 16), 0xa82f9b32);
    assert_eq!(full_packet_number(None, 0, 8), 0);
    assert_eq!(full_packet_number(Some(0), 1, 8), 1);
    assert_eq!(full_packet_number(Some(254), 1, 8), 257, "past a wrap");
    assert_eq!(full_packet_number(Some(300), 250, 8), 250, "one before");
    assert_eq!(full_packet_number(Some(u64::MAX), 5, 8), !0xff | 5);
}

/// An Initial packet of `version` to `dcid` with packet number `pn` (two
/// bytes on the wire), carrying `frames`, sealed and header-protected with
/// the client's keys: what a client would send first.
pub(crate) fn sealed_initial(version: u32, dcid: &[u8], pn: u64, frames: &[u8]) -> Vec<u8> {
    sealed(version, dcid, 0, (dcid, &[]), pn, frames)
}

/// An Initial packet of `version` from `side` (0: the client) of the
/// connection whose keys come from `key_id`, with connection IDs `ids`
/// (destination, source), packet number `pn`, carrying `frames`.
pub(crate) fn sealed(
    version: u32,
    key_id: &[u8],
    side: usize,
    ids: (&[u8], &[u8]),
    pn: u64,
    frames: &[u8],
) -> Vec<u8> {
    let keys = &keys(version, key_id).unwrap()[side];
    // Type bits: Initial is 0 in version 1, 1 in version 2.
    let kind = if version == 0x6b33_43cf { 0x10 } else { 0x00 };
    let mut p = vec![0xc0 | kind | 0x01];
    p.extend_from_slice(&version.to_be_bytes());
    for id in [ids.0, ids.1] {
        p.push(id.len() as u8);
        p.extend_from_slice(id);
    }
    p.push(0); // no token
    let len = 2 + frames.len() + 16;
    p.extend_from_slice(&(0x4000 | len as u16).to_be_bytes());
    let pn_offset = p.len();
    p.extend_from_slice(&(pn as u16).to_be_bytes());
    let mut nonce = keys.iv;
    for (n, b) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
        *n ^= b;
    }
    let mut body = frames.to_vec();
    assert!(keys.aead.seal(&nonce, &p, &mut body));
    p.extend_from_slice(&body);
    let sample: [u8; 16] = p[pn_offset + 4..pn_offset + 20].try_into().unwrap();
    let mask = keys.hp.mask(&sample);
    p[0] ^= mask[0] & 0x0f;
    p[pn_offset] ^= mask[1];
    p[pn_offset + 1] ^= mask[2];
    p
}

/// A CRYPTO frame.
pub(crate) fn crypto_frame(offset: u64, data: &[u8]) -> Vec<u8> {
    let mut f = vec![0x06, 0x40 | (offset >> 8) as u8, offset as u8];
    f.extend_from_slice(&(0x4000 | data.len() as u16).to_be_bytes());
    f.extend_from_slice(data);
    f
}

#[test]
fn a_sealed_initial_opens_to_its_frames() {
    for version in [1, 0x6b33_43cf, 0xff00_001d] {
        let dcid = [0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];
        let mut frames = crypto_frame(0, b"hello");
        frames.extend_from_slice(&[0x02, 0x05, 0x00, 0x00, 0x01]); // ACK
        frames.extend_from_slice(&crypto_frame(5, b" world"));
        frames.extend_from_slice(&[0x01, 0x00, 0x00, 0x00]); // PING, PADDING
        let bytes = sealed_initial(version, &dcid, 7, &frames);
        let packet = long_packets(&bytes).next().unwrap();
        assert_eq!(packet.kind, PacketKind::Initial);
        let [client, server] = keys(version, &dcid).unwrap();
        let mut scratch = Vec::new();
        let (pn, plain) = open(&client, &packet, Some(6), &mut scratch).unwrap();
        assert_eq!(pn, 7);
        let got: Vec<Frame<'_>> = frames_of(plain).collect();
        assert_eq!(
            got,
            [
                Frame::Crypto {
                    offset: 0,
                    data: b"hello"
                },
                Frame::Crypto {
                    offset: 5,
                    data: b" world"
                }
            ]
        );
        assert!(
            open(&server, &packet, None, &mut scratch).is_none(),
            "the other side's keys"
        );
        let mut damaged = bytes.clone();
        *damaged.last_mut().unwrap() ^= 1;
        let packet = long_packets(&damaged).next().unwrap();
        assert!(
            open(&client, &packet, None, &mut scratch).is_none(),
            "{version:#x}"
        );
    }
}

fn frames_of(plain: &[u8]) -> impl Iterator<Item = Frame<'_>> {
    frames(plain)
}

#[test]
fn frames_stop_at_what_an_initial_cannot_hold() {
    let mut plain = vec![0x1c, 0x41, 0x00, 0x06, 0x00];
    plain.extend_from_slice(&crypto_frame(0, b"x"));
    let got: Vec<Frame<'_>> = frames(&plain).collect();
    assert_eq!(
        got,
        [Frame::Close { error: 0x100 }],
        "nothing after a close"
    );
    // A STREAM frame (not allowed in an Initial) ends the walk.
    let mut plain = vec![0x08, 0x00, 0x01, 0x61];
    plain.extend_from_slice(&crypto_frame(0, b"x"));
    assert_eq!(frames(&plain).count(), 0);
    // A CRYPTO frame longer than the packet, an ACK with more ranges than
    // bytes: nothing, no panic.
    assert_eq!(frames(&[0x06, 0x00, 0x50, 0x01]).count(), 0);
    assert_eq!(
        frames(&[0x02, 0x00, 0x00, 0xbf, 0xff, 0xff, 0xff, 0x00]).count(),
        0
    );
    assert_eq!(
        frames(&[0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]).count(),
        0
    );
}

#[test]
fn cut_or_damaged_packets_do_not_open() {
    let bytes = sealed_initial(1, &[1; 8], 0, &crypto_frame(0, &[0; 40]));
    let [client, _] = keys(1, &[1; 8]).unwrap();
    let mut scratch = Vec::new();
    for cut in 0..bytes.len() {
        if let Some(packet) = long_packets(&bytes[..cut]).next() {
            assert!(
                open(&client, &packet, None, &mut scratch).is_none(),
                "{cut}"
            );
        }
    }
}
