//! The `quic` fuzz target's body: QUIC datagrams whose Initial packets
//! really open. The input describes datagrams — which side sends, which
//! coalesced packets (Initial, 0-RTT, Handshake, Retry, or raw bytes), to
//! which connection IDs, with which packet numbers and plaintext frames —
//! and this seals each Initial with the keys the analyzer will derive
//! from the ID the input names (RFC 9001 §5.2: anyone can), so hostile
//! frames, CRYPTO pieces and hellos reach what reads them. Random bytes
//! alone would never authenticate. The datagrams go into a capture run
//! through the whole pipeline (`harness::pipeline`: every report, and
//! several threads against one).
//!
//! With a key log ([`quic_keyed`]): a whole handshake whose secrets the
//! key log gives, then Handshake, 0-RTT and 1-RTT packets the input
//! describes (side, key generation, packet number, plaintext frames),
//! sealed with those secrets, so hostile frames reach the handshake
//! messages' walk, the HTTP/3 request count and key updates; one thread
//! against two.
//!
//! Shared, like `harness`, by the fuzz binary and the regression tests.

use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;

use handshakes::analyze::tls::crypto::{
    expand_label, extract_sha256, Aead, Cipher, Hash, HeaderKey,
};
use handshakes::source::file::FileSource;
use handshakes::KeyLog;

use super::harness::{pipeline, Bytes};

/// Versions the input chooses from: 1, 2, draft 29, draft 22.
const VERSIONS: [u32; 4] = [1, 0x6b33_43cf, 0xff00_001d, 0xff00_0016];
/// Connection IDs the input chooses from: two clients' first destinations,
/// a client's and a server's source IDs, a Retry's, and an empty one.
const IDS: [&[u8]; 6] = [
    &[0xa1; 8],
    &[0xa2; 20],
    &[0xc1; 8],
    &[0x5e; 8],
    &[0x7e; 12],
    &[],
];

/// The Initial salt and labels of `version` (the analyzer's own table,
/// written again from the RFCs so a slip in one shows in the other).
fn schedule(version: u32) -> (&'static str, [u8; 20]) {
    let hex = match version {
        0x6b33_43cf => "0dede3def700a6db819381be6e269dcbf9bd2ed9",
        0xff00_001d => "afbfec289993d24c9e9786f19c6111e04390a899",
        0xff00_0016 => "7fbcdb0e7c66bbe9193a96cd21519ebd7a02644a",
        _ => "38762cf7f55934b34d179ae6a4c80cadccbb7f0a",
    };
    let mut salt = [0; 20];
    for (i, b) in salt.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0);
    }
    let prefix = if version == 0x6b33_43cf {
        "quicv2 "
    } else {
        "quic "
    };
    (prefix, salt)
}

/// Seals an Initial of `version` from `side` (0: client) under the keys of
/// `key_id`, with IDs `dcid`/`scid`, packet number `pn` (its low `pn_len`
/// bytes on the wire) and `frames`.
#[allow(clippy::too_many_arguments)]
fn sealed_initial(
    version: u32,
    key_id: &[u8],
    side: u8,
    dcid: &[u8],
    scid: &[u8],
    pn: u32,
    pn_len: usize,
    frames: &[u8],
) -> Option<Vec<u8>> {
    let (prefix, salt) = schedule(version);
    let initial = extract_sha256(&salt, key_id);
    let label = if side == 0 { "client in" } else { "server in" };
    let secret = expand_label(Hash::Sha256, &initial, label, 32)?;
    let key = expand_label(Hash::Sha256, &secret, &format!("{prefix}key"), 16)?;
    let iv = expand_label(Hash::Sha256, &secret, &format!("{prefix}iv"), 12)?;
    let hp = expand_label(Hash::Sha256, &secret, &format!("{prefix}hp"), 16)?;
    let kind = if version == 0x6b33_43cf { 0x10 } else { 0x00 };
    let mut p = vec![0xc0 | kind | (pn_len as u8 - 1)];
    p.extend_from_slice(&version.to_be_bytes());
    for id in [dcid, scid] {
        p.push(id.len() as u8);
        p.extend_from_slice(id);
    }
    p.push(0); // no token
               // The sample needs at least 4 bytes after the packet number's start
               // and 16 of sample: frames are padded to that.
    let mut body = frames.to_vec();
    body.resize(body.len().max(20), 0);
    let len = pn_len + body.len() + 16;
    p.extend_from_slice(&(0x4000 | len as u16).to_be_bytes());
    let pn_offset = p.len();
    p.extend_from_slice(&pn.to_be_bytes()[4 - pn_len..]);
    let mut nonce: [u8; 12] = iv.try_into().ok()?;
    for (n, b) in nonce[4..].iter_mut().zip(u64::from(pn).to_be_bytes()) {
        *n ^= b;
    }
    let aead = Aead::new(Cipher::Aes128Gcm, &key)?;
    if !aead.seal(&nonce, &p, &mut body) {
        return None;
    }
    p.extend_from_slice(&body);
    let sample: [u8; 16] = p.get(pn_offset + 4..pn_offset + 20)?.try_into().ok()?;
    let mask = HeaderKey::new(Cipher::Aes128Gcm, &hp)?.mask(&sample);
    p[0] ^= mask[0] & 0x0f;
    for i in 0..pn_len {
        p[pn_offset + i] ^= mask[1 + i];
    }
    Some(p)
}

/// A long-header packet of `kind` bits (0-RTT 1, Handshake 2, Retry 3 in
/// version 1's numbering) with `len` bytes after its Length field.
fn plain_packet(version: u32, kind: u8, dcid: &[u8], scid: &[u8], len: usize) -> Vec<u8> {
    let bits = if version == 0x6b33_43cf {
        (kind + 1) & 3
    } else {
        kind
    };
    let mut p = vec![0xc0 | (bits << 4)];
    p.extend_from_slice(&version.to_be_bytes());
    for id in [dcid, scid] {
        p.push(id.len() as u8);
        p.extend_from_slice(id);
    }
    if kind != 3 {
        p.extend_from_slice(&(0x4000 | len as u16).to_be_bytes());
    }
    p.resize(p.len() + len, 0x42);
    p
}

/// One datagram the input describes: its side and its UDP payload.
fn datagram(b: &mut Bytes<'_>) -> (u8, Vec<u8>) {
    let head = b.u8();
    let side = head & 1;
    let version = VERSIONS[usize::from(head >> 1) % VERSIONS.len()];
    let mut payload = Vec::new();
    for _ in 0..=(head >> 6) % 3 {
        let op = b.u8();
        let dcid = IDS[usize::from(op >> 3) % IDS.len()];
        let scid = IDS[usize::from(b.u8()) % IDS.len()];
        let len = usize::from(b.u16() % 1400);
        match op & 7 {
            0 | 1 => {
                let key_id = IDS[usize::from(b.u8()) % IDS.len()];
                let pn = b.u32();
                let pn_len = usize::from(b.u8() % 4) + 1;
                let frames = b.take(len);
                let sealed = sealed_initial(version, key_id, side, dcid, scid, pn, pn_len, frames);
                payload.extend(sealed.unwrap_or_default());
            }
            2 => payload.extend(plain_packet(version, 1, dcid, scid, len)),
            3 => payload.extend(plain_packet(version, 2, dcid, scid, len)),
            4 => payload.extend(plain_packet(version, 3, dcid, scid, len)),
            _ => payload.extend_from_slice(b.take(len)),
        }
    }
    (side, payload)
}

/// A classic pcap of raw IPv4 frames (link type 101): client 10.0.0.1:50000,
/// server 10.0.0.2:443, one datagram a millisecond.
fn capture(datagrams: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&101u32.to_le_bytes());
    for (i, (side, payload)) in datagrams.iter().enumerate() {
        let (src, dst, sport, dport) = match side {
            0 => ([10, 0, 0, 1], [10, 0, 0, 2], 50000u16, 443u16),
            _ => ([10, 0, 0, 2], [10, 0, 0, 1], 443, 50000),
        };
        let udp_len = 8 + payload.len();
        let total = 20 + udp_len;
        let mut frame = vec![0x45, 0];
        frame.extend_from_slice(&(total as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
        frame.extend_from_slice(&src);
        frame.extend_from_slice(&dst);
        frame.extend_from_slice(&sport.to_be_bytes());
        frame.extend_from_slice(&dport.to_be_bytes());
        frame.extend_from_slice(&(udp_len as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(payload);
        let ts = 1_700_000_000u32;
        out.extend_from_slice(&ts.to_le_bytes());
        out.extend_from_slice(&(i as u32 * 1000).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    out
}

/// Runs the datagrams the input describes through the whole pipeline;
/// the capture it made (the regression tests check a seed reaches the
/// hellos).
pub fn quic(data: &[u8]) -> Vec<u8> {
    let mut b = Bytes::new(data);
    let mut datagrams = Vec::new();
    while !b.is_empty() && datagrams.len() < 64 {
        datagrams.push(datagram(&mut b));
    }
    let pcap = capture(&datagrams);
    pipeline(&pcap);
    pcap
}

/// The keyed target's client random and traffic secrets (client 1-RTT,
/// server 1-RTT, client 0-RTT, client and server Handshake), per byte
/// value.
const RANDOM: [u8; 32] = [0x5a; 32];
const SECRETS: [u8; 5] = [0x11, 0x22, 0x33, 0x44, 0x55];

fn v16(d: &[u8]) -> Vec<u8> {
    [&(d.len() as u16).to_be_bytes()[..], d].concat()
}

fn crypto_frame(message: &[u8]) -> Vec<u8> {
    [
        &[
            0x06,
            0x00,
            0x40 | (message.len() >> 8) as u8,
            message.len() as u8,
        ][..],
        message,
    ]
    .concat()
}

/// The ClientHello (random [`RANDOM`], to `fuzz.test`, offering h3, a PSK
/// and 0-RTT) and the ServerHello choosing `suite`, as CRYPTO frames.
pub fn hellos(suite: u16) -> (Vec<u8>, Vec<u8>) {
    let ext = |t: u16, d: &[u8]| [&t.to_be_bytes()[..], &v16(d)].concat();
    let exts = [
        ext(0, &v16(&[&[0][..], &v16(b"fuzz.test")].concat())),
        ext(16, &v16(b"\x02h3")),
        ext(43, &[2, 3, 4]),
        ext(42, &[]),
        ext(41, &[0; 8]),
    ]
    .concat();
    let body = [
        &[3, 3][..],
        &RANDOM,
        &[0],
        &v16(&[0x13, 1, 0x13, 2, 0x13, 3]),
        &[1, 0],
        &v16(&exts),
    ]
    .concat();
    let ch = [
        &[1, 0, (body.len() >> 8) as u8, body.len() as u8][..],
        &body,
    ]
    .concat();
    let exts = [ext(43, &[3, 4]), ext(41, &[0, 0])].concat();
    let body = [
        &[3, 3][..],
        &[9; 32],
        &[0],
        &suite.to_be_bytes(),
        &[0],
        &v16(&exts),
    ]
    .concat();
    let sh = [
        &[2, 0, (body.len() >> 8) as u8, body.len() as u8][..],
        &body,
    ]
    .concat();
    (crypto_frame(&ch), crypto_frame(&sh))
}

/// The key, IV and header-protection key of `secret` after `generation`
/// key updates, for `suite`.
fn traffic_keys(
    suite: (Hash, Cipher),
    secret: &[u8],
    generation: u8,
) -> Option<(Aead, [u8; 12], HeaderKey)> {
    let (hash, cipher) = suite;
    let len = cipher.key_len();
    let hp = HeaderKey::new(cipher, &expand_label(hash, secret, "quic hp", len)?)?;
    let mut secret = secret.to_vec();
    for _ in 0..generation {
        secret = expand_label(hash, &secret, "quic ku", hash.output_len())?;
    }
    let aead = Aead::new(cipher, &expand_label(hash, &secret, "quic key", len)?)?;
    let iv = expand_label(hash, &secret, "quic iv", 12)?
        .try_into()
        .ok()?;
    Some((aead, iv, hp))
}

/// A short-header packet to `dcid`, key phase `generation & 1`, packet
/// number `pn` (two bytes), carrying `frames`, sealed with `keys`.
fn sealed_short(
    keys: &(Aead, [u8; 12], HeaderKey),
    generation: u8,
    dcid: &[u8],
    pn: u16,
    frames: &[u8],
) -> Option<Vec<u8>> {
    let mut header = vec![0x40 | ((generation & 1) << 2) | 0x01];
    header.extend_from_slice(dcid);
    seal(keys, header, pn, frames, 0x1f)
}

/// A Handshake packet (version 1) to `dcid` from `scid`, packet number
/// `pn` (two bytes), carrying `frames`, sealed with `keys`.
fn sealed_handshake(
    keys: &(Aead, [u8; 12], HeaderKey),
    dcid: &[u8],
    scid: &[u8],
    pn: u16,
    frames: &[u8],
) -> Option<Vec<u8>> {
    let mut header = plain_packet(1, 2, dcid, scid, 0);
    header[0] |= 0x01; // a two-byte packet number
    header.truncate(header.len() - 2);
    let len = 2 + frames.len().max(20) + 16;
    header.extend_from_slice(&(0x4000 | len as u16).to_be_bytes());
    seal(keys, header, pn, frames, 0x0f)
}

/// `header` (up to its packet number), then `pn` (two bytes) and `frames`
/// (padded for the sample) sealed with `keys`, the header protected with
/// `first_bits` of the first byte masked (RFC 9001 §5.4.1).
fn seal(
    (aead, iv, hp): &(Aead, [u8; 12], HeaderKey),
    mut p: Vec<u8>,
    pn: u16,
    frames: &[u8],
    first_bits: u8,
) -> Option<Vec<u8>> {
    let pn_offset = p.len();
    p.extend_from_slice(&pn.to_be_bytes());
    let mut nonce = *iv;
    for (n, b) in nonce[4..].iter_mut().zip(u64::from(pn).to_be_bytes()) {
        *n ^= b;
    }
    let mut body = frames.to_vec();
    body.resize(body.len().max(20), 0);
    if !aead.seal(&nonce, &p, &mut body) {
        return None;
    }
    p.extend_from_slice(&body);
    let sample: [u8; 16] = p.get(pn_offset + 4..pn_offset + 20)?.try_into().ok()?;
    let mask = hp.mask(&sample);
    p[0] ^= mask[0] & first_bits;
    p[pn_offset] ^= mask[1];
    p[pn_offset + 1] ^= mask[2];
    Some(p)
}

/// The keyed target: see the module's comment. The QUIC figures (the
/// regression tests check that seeds reach the requests and statuses).
pub fn quic_keyed(data: &[u8]) -> Option<handshakes::record::QuicSummary> {
    let mut b = Bytes::new(data);
    let suite_id = [0x1301, 0x1302, 0x1303, 0x1304][usize::from(b.u8() % 4)];
    let suite = match suite_id {
        0x1302 => (Hash::Sha384, Cipher::Aes256Gcm),
        0x1303 => (Hash::Sha256, Cipher::ChaCha20Poly1305),
        0x1304 => (Hash::Sha256, Cipher::Aes128Ccm),
        _ => (Hash::Sha256, Cipher::Aes128Gcm),
    };
    let secret = |i: usize| vec![SECRETS[i]; suite.0.output_len()];
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let log = [
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
        "CLIENT_EARLY_TRAFFIC_SECRET",
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    ]
    .iter()
    .enumerate()
    .map(|(i, label)| format!("{label} {} {}\n", hex(&RANDOM), hex(&secret(i))))
    .collect::<String>();
    let (ch, sh) = hellos(suite_id);
    let (client_id, server_id) = (IDS[2], IDS[3]);
    let mut datagrams = vec![
        (
            0,
            sealed_initial(1, IDS[0], 0, IDS[0], client_id, 0, 1, &ch).unwrap_or_default(),
        ),
        (
            1,
            sealed_initial(1, IDS[0], 1, client_id, server_id, 0, 1, &sh).unwrap_or_default(),
        ),
    ];
    while !b.is_empty() && datagrams.len() < 64 {
        let head = b.u8();
        let side = head & 1;
        let generation = (head >> 1) & 3;
        let pn = b.u16();
        let len = usize::from(b.u16() % 1400);
        let frames = b.take(len);
        let packet = if head & 0xc0 == 0x40 {
            // Handshake: that side's handshake secret, a long header.
            let keys = traffic_keys(suite, &secret(3 + usize::from(side)), 0);
            let (dcid, scid) = match side {
                0 => (server_id, client_id),
                _ => (client_id, server_id),
            };
            keys.and_then(|k| sealed_handshake(&k, dcid, scid, pn, frames))
        } else if head & 0x80 != 0 {
            // 0-RTT: the early secret, a long header.
            let keys = traffic_keys(suite, &secret(2), 0);
            keys.and_then(|k| {
                let short = sealed_short(&k, 0, server_id, pn, frames)?;
                // The same sealed payload under a 0-RTT long header is
                // not what a sender makes; use the short packet's body
                // behind one so its header protection fails or holds
                // as the input decides.
                let mut p = plain_packet(1, 1, server_id, client_id, 0);
                p.truncate(p.len() - 2);
                let body = short.get(1 + server_id.len()..)?;
                p.extend_from_slice(&(0x4000 | body.len() as u16).to_be_bytes());
                p.extend_from_slice(body);
                Some(p)
            })
        } else {
            let dcid = if side == 0 { server_id } else { client_id };
            let keys = traffic_keys(suite, &secret(usize::from(side)), generation);
            keys.and_then(|k| sealed_short(&k, generation, dcid, pn, frames))
        };
        datagrams.push((side, packet.unwrap_or_default()));
    }
    let pcap = capture(&datagrams);
    let keylog = Arc::new(KeyLog::from_text(&log));
    let run = |threads: usize| {
        let mut src =
            FileSource::from_reader(Path::new("fuzz"), Box::new(Cursor::new(pcap.clone()))).ok()?;
        let config = handshakes::Config {
            threads,
            keylog: Some(keylog.clone()),
            ..handshakes::Config::default()
        };
        let mut records = Vec::new();
        handshakes::analyze(&mut src, &config, &mut records).ok()
    };
    let (Some(one), Some(two)) = (run(1), run(2)) else {
        return None;
    };
    assert!(
        serde_json::to_string(&one.quic).ok() == serde_json::to_string(&two.quic).ok(),
        "two threads: not one thread's QUIC figures"
    );
    one.quic
}
