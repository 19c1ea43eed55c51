//! Tells a UDP datagram that carries a QUIC long-header packet (RFC 9000
//! §17.2: Initial, 0-RTT, Handshake or Retry — the packets of a QUIC
//! handshake) of a version in use: 1 (RFC 9000), 2 (RFC 9369) or the
//! drafts 22 to 34 that browsers and servers shipped. So a capture of HTTP/3 says it
//! holds traffic this tool does not analyze, instead of looking empty.
//!
//! Reads the long header's first bytes only: its type and connection IDs,
//! no decryption, no connection state. Short-header (1-RTT) packets carry
//! no version and are not told.

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

/// A UDP datagram carrying a QUIC long-header packet: its endpoints (for
/// `--port`, `--host`, `--overlay`) and the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicDatagram<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub overlay: Option<Overlay>,
    pub header: LongHeader<'a>,
}

/// The QUIC datagram in IP packet of protocol `proto` from `src` to `dst`
/// whose payload is `udp` (the UDP header and what follows), if it is one.
pub fn datagram(
    proto: u8,
    udp: &[u8],
    (src, dst): (IpAddr, IpAddr),
    overlay: Option<Overlay>,
) -> Option<QuicDatagram<'_>> {
    let header = in_udp(proto, udp)?;
    let (ports, _) = udp.split_first_chunk::<4>()?;
    Some(QuicDatagram {
        src: SocketAddr::new(src, u16::from_be_bytes([ports[0], ports[1]])),
        dst: SocketAddr::new(dst, u16::from_be_bytes([ports[2], ports[3]])),
        overlay,
        header,
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
    if dcid.len() > MAX_CID || scid.len() > MAX_CID || rest.is_empty() {
        return None;
    }
    // Initial and 0-RTT: types 0 and 1, or in version 2, 1 and 2.
    let kind = (first >> 4) & 0x03;
    let kind = if version == V2 {
        kind.wrapping_sub(1) & 0x03
    } else {
        kind
    };
    Some(LongHeader {
        opening: kind <= 1,
        dcid,
        scid,
    })
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
