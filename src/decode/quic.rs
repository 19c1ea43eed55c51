//! Tells a UDP datagram that carries a QUIC long-header packet (RFC 9000
//! §17.2: Initial, 0-RTT, Handshake or Retry — the packets of a QUIC
//! handshake) of a version in use: 1 (RFC 9000), 2 (RFC 9369) or the
//! drafts 22 to 34 that browsers and servers shipped. So a capture of HTTP/3 says it
//! holds traffic this tool does not analyze, instead of looking empty.
//!
//! Reads long headers only: their type, version, connection IDs, token and
//! length, and splits a datagram into the long-header packets it coalesces
//! ([`long_packets`]); no decryption (`analyze::quic` opens Initial
//! packets), no connection state. Short-header (1-RTT) packets carry no
//! version and are not told.

use std::net::{IpAddr, SocketAddr};

use crate::record::Overlay;

const IP_UDP: u8 = 17;
/// QUIC versions 1 and 2.
const VERSIONS: [u32; 2] = [0x0000_0001, V2];
/// QUIC version 2 (its packet types are v1's plus one: Initial 1, 0-RTT 2).
const V2: u32 = 0x6b33_43cf;
/// The IETF drafts deployed (h3-22 … h3-34).
const DRAFTS: std::ops::RangeInclusive<u32> = 0xff00_0016..=0xff00_0022;
/// A connection ID is at most 20 bytes (RFC 9000 §17.2).
const MAX_CID: usize = 20;

/// The first long-header packet of a datagram, as far as it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongHeader<'a> {
    /// An Initial or 0-RTT packet: the types a client opens a connection
    /// with (a server sends Initials too, never 0-RTT).
    pub opening: bool,
    pub dcid: &'a [u8],
    pub scid: &'a [u8],
}

/// A UDP datagram carrying a QUIC long-header packet, or one that may be a
/// short-header (1-RTT) packet (`long` false: the header-form bit clear —
/// the fixed bit may be greased, RFC 9287; only a connection already known
/// on its endpoints makes it one): its endpoints (for `--port`, `--host`, `--overlay`), the
/// first packet's header (empty IDs for a short one), and the UDP payload
/// (every packet the datagram coalesces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicDatagram<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub overlay: Option<Overlay>,
    pub long: bool,
    pub header: LongHeader<'a>,
    pub payload: &'a [u8],
}

/// The fewest bytes a short-header packet takes: its first byte, a packet
/// number and the 16 bytes of header-protection sample after it.
const MIN_SHORT: usize = 1 + 4 + 16;

/// The kinds of long-header packet (RFC 9000 §17.2; version 2 numbers
/// them differently, RFC 9369 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    Initial,
    ZeroRtt,
    Handshake,
    Retry,
}

/// One long-header packet of a datagram, its fields read, its payload
/// (header-protected and sealed) not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongPacket<'a> {
    pub kind: PacketKind,
    pub version: u32,
    pub dcid: &'a [u8],
    pub scid: &'a [u8],
    /// The whole packet, from its first byte to the end of its payload
    /// (for a Retry, to the end of the datagram).
    pub bytes: &'a [u8],
    /// Where its (protected) packet number starts in `bytes`; 0 for a Retry.
    pub pn_offset: usize,
}

/// The version's name as records give it: `1`, `2`, `draft-29`.
pub fn version_name(version: u32) -> String {
    match version {
        1 => "1".to_owned(),
        V2 => "2".to_owned(),
        v if DRAFTS.contains(&v) => format!("draft-{}", v & 0xff),
        v => format!("0x{v:08x}"),
    }
}

/// A variable-length integer (RFC 9000 §16) and what follows it.
pub fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let (&first, _) = b.split_first()?;
    let len = 1usize << (first >> 6);
    let (bytes, rest) = b.split_at_checked(len)?;
    let mut v = u64::from(first & 0x3f);
    for &byte in bytes.iter().skip(1) {
        v = (v << 8) | u64::from(byte);
    }
    Some((v, rest))
}

/// The long-header packets a UDP payload coalesces, in order, up to the
/// first that is not one of a known version or does not fit (a short-header
/// packet, which ends a datagram, or padding).
pub fn long_packets(payload: &[u8]) -> impl Iterator<Item = LongPacket<'_>> {
    let mut rest = payload;
    std::iter::from_fn(move || {
        let (packet, after) = long_packet(rest)?;
        rest = after;
        Some(packet)
    })
}

/// The long-header packet `bytes` begins with, and the bytes after it.
pub fn long_packet(bytes: &[u8]) -> Option<(LongPacket<'_>, &[u8])> {
    let (first, version, dcid, scid, rest) = header_fields(bytes)?;
    let kind = packet_kind(first, version);
    let mut packet = LongPacket {
        kind,
        version,
        dcid,
        scid,
        bytes,
        pn_offset: 0,
    };
    if kind == PacketKind::Retry {
        return Some((packet, &[]));
    }
    let rest = if kind == PacketKind::Initial {
        let (token_len, rest) = varint(rest)?;
        rest.get(usize::try_from(token_len).ok()?..)?
    } else {
        rest
    };
    let (length, rest) = varint(rest)?;
    packet.pn_offset = bytes.len() - rest.len();
    let end = packet
        .pn_offset
        .checked_add(usize::try_from(length).ok()?)?;
    let (whole, after) = bytes.split_at_checked(end)?;
    packet.bytes = whole;
    Some((packet, after))
}

/// The packet kind a long header's first byte gives in `version`.
fn packet_kind(first: u8, version: u32) -> PacketKind {
    let bits = (first >> 4) & 0x03;
    let bits = if version == V2 {
        bits.wrapping_sub(1) & 0x03
    } else {
        bits
    };
    match bits {
        0 => PacketKind::Initial,
        1 => PacketKind::ZeroRtt,
        2 => PacketKind::Handshake,
        _ => PacketKind::Retry,
    }
}

/// The QUIC datagram in IP packet of protocol `proto` from `src` to `dst`
/// whose payload is `udp` (the UDP header and what follows), if it is one.
pub fn datagram(
    proto: u8,
    udp: &[u8],
    (src, dst): (IpAddr, IpAddr),
    overlay: Option<Overlay>,
) -> Option<QuicDatagram<'_>> {
    let payload = udp.get(8..).filter(|_| proto == IP_UDP)?;
    let (long, header) = match in_udp(proto, udp) {
        Some(header) => (true, header),
        None if payload.first().is_some_and(|b| b & 0x80 == 0) && payload.len() >= MIN_SHORT => {
            let header = LongHeader {
                opening: false,
                dcid: &[],
                scid: &[],
            };
            (false, header)
        }
        None => return None,
    };
    let (ports, _) = udp.split_first_chunk::<4>()?;
    Some(QuicDatagram {
        src: SocketAddr::new(src, u16::from_be_bytes([ports[0], ports[1]])),
        dst: SocketAddr::new(dst, u16::from_be_bytes([ports[2], ports[3]])),
        overlay,
        long,
        header,
        payload,
    })
}

/// The QUIC long-header packet `datagram` (a UDP header and what follows)
/// begins with, when `proto` is UDP and it is one of a known version.
fn in_udp(proto: u8, datagram: &[u8]) -> Option<LongHeader<'_>> {
    if proto != IP_UDP {
        return None;
    }
    long_header(datagram.get(8..)?)
}

/// The QUIC long header `packet` begins with, of a known version: the
/// header-form bit set (not the fixed bit, which RFC 9287 lets endpoints
/// grease), the version, and both connection IDs within their bounds and
/// the datagram.
fn long_header(packet: &[u8]) -> Option<LongHeader<'_>> {
    let (first, version, dcid, scid, rest) = header_fields(packet)?;
    if rest.is_empty() {
        return None;
    }
    Some(LongHeader {
        opening: matches!(
            packet_kind(first, version),
            PacketKind::Initial | PacketKind::ZeroRtt
        ),
        dcid,
        scid,
    })
}

/// A long header's first byte, version and connection IDs (within their
/// bounds and `packet`), and the bytes after them; `None` unless the
/// header-form bit is set and the version is one of [`VERSIONS`] or
/// [`DRAFTS`].
type Fields<'a> = (u8, u32, &'a [u8], &'a [u8], &'a [u8]);

fn header_fields(packet: &[u8]) -> Option<Fields<'_>> {
    let (&first, rest) = packet.split_first()?;
    let (version, rest) = rest.split_first_chunk::<4>()?;
    let version = u32::from_be_bytes(*version);
    if first & 0x80 == 0 || !(VERSIONS.contains(&version) || DRAFTS.contains(&version)) {
        return None;
    }
    let (&dcid_len, rest) = rest.split_first()?;
    let (dcid, rest) = rest.split_at_checked(usize::from(dcid_len))?;
    let (&scid_len, rest) = rest.split_first()?;
    let (scid, rest) = rest.split_at_checked(usize::from(scid_len))?;
    if dcid.len() > MAX_CID || scid.len() > MAX_CID {
        return None;
    }
    Some((first, version, dcid, scid, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP header and a QUIC long header: `first` byte, `version`, an
    /// 8-byte destination and a 0-byte source connection ID, then a few
    /// bytes of payload.
    fn datagram(first: u8, version: u32) -> Vec<u8> {
        let mut d = vec![0xc3, 0x50, 0x01, 0xbb, 0, 30, 0, 0];
        d.push(first);
        d.extend_from_slice(&version.to_be_bytes());
        d.push(8);
        d.extend_from_slice(&[7; 8]);
        d.push(0);
        d.extend_from_slice(&[0x40, 0x20, 1, 2, 3]);
        d
    }

    #[test]
    fn handshake_packets_of_known_versions_are_told() {
        // (first byte, version, opening): Initial, 0-RTT and Handshake
        // (v1), Initial (v2: type bits 01), drafts 29 and 28, and greased
        // fixed bits (v2's 0-RTT and Handshake; ndpi's quic-v2.pcapng).
        for (first, version, opening) in [
            (0xc3, 1, true),
            (0xd3, 1, true),
            (0xe1, 1, false),
            (0xd0, V2, true),
            (0xc0, 0xff00_001d, true),
            (0xc0, 0xff00_001c, true),
            (0xa4, V2, true),
            (0xb4, V2, false),
        ] {
            let d = datagram(first, version);
            let header = in_udp(IP_UDP, &d);
            let want = LongHeader {
                opening,
                dcid: &[7; 8],
                scid: &[],
            };
            assert_eq!(header, Some(want), "{first:#x} {version:#x}");
        }
    }

    #[test]
    fn other_datagrams_are_not() {
        let short_header = datagram(0x43, 1);
        let unknown_version = datagram(0xc3, 0x0a0a_0a0a);
        let negotiation = datagram(0xc3, 0);
        let mut long_cid = datagram(0xc3, 1);
        long_cid[13] = 21;
        long_cid.extend_from_slice(&[0; 40]);
        let cut = datagram(0xc3, 1)[..15].to_vec();
        for d in [short_header, unknown_version, negotiation, long_cid, cut] {
            assert!(in_udp(IP_UDP, &d).is_none(), "{d:?}");
        }
        assert!(in_udp(6, &datagram(0xc3, 1)).is_none(), "not UDP");
        assert!(in_udp(IP_UDP, &[]).is_none());
        // A DNS query: its ID and flags are no QUIC header.
        let dns = [
            0x12, 0x34, 0, 53, 0, 20, 0, 0, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
        ];
        assert!(in_udp(IP_UDP, &dns).is_none());
    }
}
