//! Tells a UDP datagram that carries a QUIC long-header packet (RFC 9000
//! §17.2: Initial, 0-RTT, Handshake or Retry — the packets of a QUIC
//! handshake) of a version in use: 1 (RFC 9000), 2 (RFC 9369) or the
//! drafts 22 to 34 that browsers and servers shipped. So a capture of HTTP/3 says it
//! holds traffic this tool does not analyze, instead of looking empty.
//!
//! Reads the long header's first bytes only: no decryption, no connection
//! state. Short-header (1-RTT) packets carry no version and are not told.

const IP_UDP: u8 = 17;
/// QUIC versions 1 and 2.
const VERSIONS: [u32; 2] = [0x0000_0001, 0x6b33_43cf];
/// The IETF drafts deployed (h3-22 … h3-34).
const DRAFTS: std::ops::RangeInclusive<u32> = 0xff00_0016..=0xff00_0022;
/// A connection ID is at most 20 bytes (RFC 9000 §17.2).
const MAX_CID: usize = 20;

/// Whether `datagram` (a UDP header and what follows) carries a QUIC
/// long-header packet of a known version, when `proto` is UDP.
pub fn in_udp(proto: u8, datagram: &[u8]) -> bool {
    proto == IP_UDP && datagram.get(8..).is_some_and(long_header)
}

/// Whether `packet` begins with a QUIC long header of a known version: the
/// header-form bit set (not the fixed bit, which RFC 9287 lets endpoints
/// grease), the version, and both connection IDs within their bounds and
/// the datagram.
fn long_header(packet: &[u8]) -> bool {
    let Some((&first, rest)) = packet.split_first() else {
        return false;
    };
    let Some((version, rest)) = rest.split_first_chunk::<4>() else {
        return false;
    };
    let version = u32::from_be_bytes(*version);
    if first & 0x80 == 0 || !(VERSIONS.contains(&version) || DRAFTS.contains(&version)) {
        return false;
    }
    let Some((&dcid_len, rest)) = rest.split_first() else {
        return false;
    };
    let dcid_len = usize::from(dcid_len);
    let Some(&scid_len) = rest.get(dcid_len) else {
        return false;
    };
    let scid_len = usize::from(scid_len);
    dcid_len <= MAX_CID && scid_len <= MAX_CID && rest.len() > dcid_len + scid_len
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
        // Initial (v1), Handshake (v1), Initial (v2: type bits 01), drafts
        // 29 and 28, and a greased fixed bit (v2, ndpi's quic-v2.pcapng).
        for (first, version) in [
            (0xc3, 1),
            (0xe1, 1),
            (0xd0, 0x6b33_43cf),
            (0xc0, 0xff00_001d),
            (0xc0, 0xff00_001c),
            (0x94, 0x6b33_43cf),
        ] {
            assert!(
                in_udp(IP_UDP, &datagram(first, version)),
                "{first:#x} {version:#x}"
            );
        }
    }

    #[test]
    fn other_datagrams_are_not() {
        let short_header = datagram(0x43, 1);
        let unknown_version = datagram(0xc3, 0x0a0a_0a0a);
        let negotiation = datagram(0xc3, 0);
        let mut long_cid = datagram(0xc3, 1);
        long_cid[13] = 21;
        let cut = datagram(0xc3, 1)[..15].to_vec();
        for d in [short_header, unknown_version, negotiation, long_cid, cut] {
            assert!(!in_udp(IP_UDP, &d), "{d:?}");
        }
        assert!(!in_udp(6, &datagram(0xc3, 1)), "not UDP");
        assert!(!in_udp(IP_UDP, &[]));
        // A DNS query: its ID and flags are no QUIC header.
        let dns = [
            0x12, 0x34, 0, 53, 0, 20, 0, 0, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
        ];
        assert!(!in_udp(IP_UDP, &dns));
    }
}
