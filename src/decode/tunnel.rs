//! Tunnels opened to reach the TCP connection riding inside: VXLAN (UDP
//! port 4789, RFC 7348) and Geneve (UDP port 6081, RFC 8926), the usual
//! carriers of cloud traffic mirroring; GRE (IP protocol 47, RFC 2784 and
//! 2890) carrying IP, Ethernet (transparent bridging), MPLS, or ERSPAN
//! types I, II and III (a switch's mirrored port); and IP in IP (protocols
//! 4 and 41). The same ports and protocols tshark decodes by default.
//!
//! Reads only the tunnel's own header, from the bytes: the caller decodes
//! the packet inside as it decodes an outer one (so a tunnel in a tunnel
//! is opened too, up to [`MAX_DEPTH`]) and the connection is the inner
//! 4-tuple. Nothing of the outer headers is kept. Does not reassemble
//! fragmented tunnel packets: the caller opens only unfragmented ones.

const IP_IPV4: u8 = 4;
const IP_UDP: u8 = 17;
const IP_IPV6: u8 = 41;
const IP_GRE: u8 = 47;

pub const VXLAN_PORT: u16 = 4789;
pub const GENEVE_PORT: u16 = 6081;

/// At most this many tunnels, one inside another, are opened; a deeper
/// one is an anomaly (no real network nests that far; a crafted packet
/// could otherwise nest hundreds deep).
pub const MAX_DEPTH: u8 = 4;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_BRIDGING: u16 = 0x6558;
const ETHERTYPE_MPLS: [u16; 2] = [0x8847, 0x8848];
const ETHERTYPE_ERSPAN_1_2: u16 = 0x88be;
const ETHERTYPE_ERSPAN_3: u16 = 0x22eb;

/// What a tunnel carries.
#[derive(Debug, PartialEq, Eq)]
pub enum Inner<'a> {
    /// An Ethernet frame.
    Ethernet(&'a [u8]),
    /// An IP packet (version by its first nibble).
    Ip(&'a [u8]),
    /// An MPLS label stack.
    Mpls(&'a [u8]),
}

/// What an IP payload turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Tunnel<'a> {
    /// Not a tunnel opened here: IP traffic of another kind.
    No,
    /// A tunnel, and what it carries.
    Inner(Inner<'a>),
    /// A tunnel whose header is cut short or impossible.
    Broken,
}

/// Whether an IP payload of protocol `proto` may be a tunnel (the fast
/// path then leaves the frame to the full decoder).
#[inline]
pub fn maybe(proto: u8, payload: &[u8]) -> bool {
    match proto {
        IP_IPV4 | IP_IPV6 | IP_GRE => true,
        IP_UDP => matches!(udp_ports(payload), Some((_, VXLAN_PORT | GENEVE_PORT))),
        _ => false,
    }
}

/// The Ethernet frame in a UDP datagram (`udp`, from its header on) to the
/// VXLAN port with a valid VXLAN header; `None` for anything else.
#[inline]
pub fn vxlan_frame(udp: &[u8]) -> Option<&[u8]> {
    match (udp_ports(udp)?, udp.get(8..)) {
        ((_, VXLAN_PORT), Some(body)) => match vxlan(body) {
            Tunnel::Inner(Inner::Ethernet(frame)) => Some(frame),
            _ => None,
        },
        _ => None,
    }
}

/// Opens the (unfragmented) IP payload `payload` of protocol `proto`.
pub fn open(proto: u8, payload: &[u8]) -> Tunnel<'_> {
    match proto {
        IP_IPV4 | IP_IPV6 => Tunnel::Inner(Inner::Ip(payload)),
        IP_GRE => gre(payload),
        IP_UDP => match (udp_ports(payload), payload.get(8..)) {
            (Some((_, VXLAN_PORT)), Some(body)) => vxlan(body),
            (Some((_, GENEVE_PORT)), Some(body)) => geneve(body),
            _ => Tunnel::No,
        },
        _ => Tunnel::No,
    }
}

/// A UDP header's (source, destination) ports, if the header is whole.
fn udp_ports(payload: &[u8]) -> Option<(u16, u16)> {
    let h = payload.first_chunk::<8>()?;
    Some((
        u16::from_be_bytes([h[0], h[1]]),
        u16::from_be_bytes([h[2], h[3]]),
    ))
}

/// VXLAN: flags (the I flag says the VNI is valid), 3 reserved bytes, the
/// VNI and a reserved byte, then an Ethernet frame.
fn vxlan(body: &[u8]) -> Tunnel<'_> {
    let Some((h, frame)) = body.split_first_chunk::<8>() else {
        return Tunnel::Broken;
    };
    if h[0] & 0x08 == 0 {
        // Without the I flag this is not VXLAN traffic (RFC 7348, 5).
        return Tunnel::No;
    }
    Tunnel::Inner(Inner::Ethernet(frame))
}

/// Geneve: version and options length (in 4-byte words), flags, the
/// protocol of the payload (an EtherType), the VNI, then the options.
fn geneve(body: &[u8]) -> Tunnel<'_> {
    let Some(h) = body.first_chunk::<8>() else {
        return Tunnel::Broken;
    };
    if h[0] >> 6 != 0 {
        // A version we do not know: its header may be laid out otherwise.
        return Tunnel::No;
    }
    let options = usize::from(h[0] & 0x3f) * 4;
    let Some(inner) = body.get(8 + options..) else {
        return Tunnel::Broken;
    };
    carried(u16::from_be_bytes([h[2], h[3]]), inner)
}

/// GRE version 0: flags (checksum, routing, key, sequence), the protocol
/// (an EtherType), then the optional fields the flags announce. Version 1
/// (PPTP's) and source routing (RFC 1701, obsolete) are not opened.
fn gre(payload: &[u8]) -> Tunnel<'_> {
    let Some(h) = payload.first_chunk::<4>() else {
        return Tunnel::Broken;
    };
    let (checksum, routing, key, sequence) = (
        h[0] & 0x80 != 0,
        h[0] & 0x40 != 0,
        h[0] & 0x20 != 0,
        h[0] & 0x10 != 0,
    );
    if h[1] & 0x07 != 0 || routing {
        return Tunnel::No;
    }
    let len = 4 + 4 * (usize::from(checksum) + usize::from(key) + usize::from(sequence));
    let Some(inner) = payload.get(len..) else {
        return Tunnel::Broken;
    };
    match u16::from_be_bytes([h[2], h[3]]) {
        // ERSPAN type II has a sequence number and its own 8-byte header;
        // type I has neither.
        ETHERTYPE_ERSPAN_1_2 if sequence => erspan(inner, 1, 8),
        ETHERTYPE_ERSPAN_1_2 => Tunnel::Inner(Inner::Ethernet(inner)),
        ETHERTYPE_ERSPAN_3 => erspan(inner, 2, 12),
        proto => carried(proto, inner),
    }
}

/// ERSPAN type II (`version` 1, 8-byte header) or III (`version` 2,
/// 12 bytes, then an 8-byte platform-specific subheader when the O flag,
/// the last bit of the header, is set), then the mirrored Ethernet frame.
fn erspan(body: &[u8], version: u8, len: usize) -> Tunnel<'_> {
    let (Some(first), Some(last)) = (body.first(), len.checked_sub(1).and_then(|i| body.get(i)))
    else {
        return Tunnel::Broken;
    };
    if first >> 4 != version {
        return Tunnel::Broken;
    }
    let len = if version == 2 && last & 0x01 != 0 {
        len + 8
    } else {
        len
    };
    match body.get(len..) {
        Some(frame) => Tunnel::Inner(Inner::Ethernet(frame)),
        None => Tunnel::Broken,
    }
}

/// What an EtherType-numbered tunnel payload is.
fn carried(proto: u16, inner: &[u8]) -> Tunnel<'_> {
    match proto {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Tunnel::Inner(Inner::Ip(inner)),
        ETHERTYPE_BRIDGING => Tunnel::Inner(Inner::Ethernet(inner)),
        p if ETHERTYPE_MPLS.contains(&p) => Tunnel::Inner(Inner::Mpls(inner)),
        _ => Tunnel::No,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(dst: u16, body: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc3, 0x50];
        p.extend_from_slice(&dst.to_be_bytes());
        p.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(body);
        p
    }

    #[test]
    fn vxlan_needs_its_flag_and_a_whole_header() {
        let frame = [0xaa; 20];
        let mut body = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
        body.extend_from_slice(&frame);
        assert_eq!(
            open(IP_UDP, &udp(VXLAN_PORT, &body)),
            Tunnel::Inner(Inner::Ethernet(&frame))
        );
        body[0] = 0;
        assert_eq!(open(IP_UDP, &udp(VXLAN_PORT, &body)), Tunnel::No);
        assert_eq!(open(IP_UDP, &udp(VXLAN_PORT, &body[..5])), Tunnel::Broken);
        assert_eq!(open(IP_UDP, &udp(53, &body)), Tunnel::No);
        assert!(maybe(IP_UDP, &udp(VXLAN_PORT, &[])));
        assert!(!maybe(IP_UDP, &udp(53, &body)));
    }

    #[test]
    fn geneve_skips_its_options() {
        let ip = [0x45; 20];
        let mut body = vec![0x02, 0, 0x08, 0x00, 0, 0, 7, 0];
        body.extend_from_slice(&[0xee; 8]); // two words of options
        body.extend_from_slice(&ip);
        assert_eq!(
            open(IP_UDP, &udp(GENEVE_PORT, &body)),
            Tunnel::Inner(Inner::Ip(&ip))
        );
        assert_eq!(open(IP_UDP, &udp(GENEVE_PORT, &body[..12])), Tunnel::Broken);
        body[0] |= 0x40; // version 1
        assert_eq!(open(IP_UDP, &udp(GENEVE_PORT, &body)), Tunnel::No);
    }

    #[test]
    fn gre_fields_and_payloads() {
        let inner = [0x60; 40];
        // Checksum, key and sequence present: 16 bytes of header.
        let mut p = vec![0xb0, 0x00, 0x86, 0xdd];
        p.extend_from_slice(&[0; 12]);
        p.extend_from_slice(&inner);
        assert_eq!(open(IP_GRE, &p), Tunnel::Inner(Inner::Ip(&inner)));
        assert_eq!(open(IP_GRE, &p[..10]), Tunnel::Broken);
        // Transparent Ethernet bridging, MPLS, an unknown protocol.
        for (proto, want) in [
            (0x6558u16, Tunnel::Inner(Inner::Ethernet(&inner))),
            (0x8847, Tunnel::Inner(Inner::Mpls(&inner))),
            (0x0806, Tunnel::No),
        ] {
            let mut p = vec![0, 0];
            p.extend_from_slice(&proto.to_be_bytes());
            p.extend_from_slice(&inner);
            assert_eq!(open(IP_GRE, &p), want);
        }
        // Version 1 (PPTP) and source routing are left alone.
        assert_eq!(
            open(IP_GRE, &[0x30, 0x01, 0x88, 0x0b, 0, 0, 0, 0]),
            Tunnel::No
        );
        assert_eq!(
            open(IP_GRE, &[0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0]),
            Tunnel::No
        );
    }

    #[test]
    fn erspan_types() {
        let frame = [0xaa; 60];
        // Type I: no sequence number, no ERSPAN header.
        let mut p = vec![0x00, 0x00, 0x88, 0xbe];
        p.extend_from_slice(&frame);
        assert_eq!(open(IP_GRE, &p), Tunnel::Inner(Inner::Ethernet(&frame)));
        // Type II: sequence number, 8-byte header of version 1.
        let mut p = vec![0x10, 0x00, 0x88, 0xbe, 0, 0, 0, 9];
        p.extend_from_slice(&[0x10, 0x01, 0, 0x05, 0, 0, 0, 0]);
        p.extend_from_slice(&frame);
        assert_eq!(open(IP_GRE, &p), Tunnel::Inner(Inner::Ethernet(&frame)));
        p[8] = 0x20;
        assert_eq!(open(IP_GRE, &p), Tunnel::Broken);
        // Type III, with and without the platform-specific subheader.
        for o in [0u8, 1] {
            let mut p = vec![0x10, 0x00, 0x22, 0xeb, 0, 0, 0, 9];
            p.extend_from_slice(&[0x20, 0x01, 0, 0x05, 0, 0, 0, 0, 0, 0, 0, o]);
            if o == 1 {
                p.extend_from_slice(&[0x77; 8]);
            }
            p.extend_from_slice(&frame);
            assert_eq!(open(IP_GRE, &p), Tunnel::Inner(Inner::Ethernet(&frame)));
            assert_eq!(open(IP_GRE, &p[..14]), Tunnel::Broken);
        }
    }

    #[test]
    fn ip_in_ip_and_other_protocols() {
        let ip = [0x45; 20];
        assert_eq!(open(IP_IPV4, &ip), Tunnel::Inner(Inner::Ip(&ip)));
        assert_eq!(open(IP_IPV6, &ip), Tunnel::Inner(Inner::Ip(&ip)));
        assert_eq!(open(1, &ip), Tunnel::No);
        assert!(maybe(IP_GRE, &[]) && maybe(IP_IPV4, &[]) && !maybe(1, &ip));
    }

    #[test]
    fn any_bytes_open_without_panicking() {
        let mut rng = crate::testutil::Xorshift(0x1234_5678);
        for len in 0..200 {
            for _ in 0..50 {
                let bytes = rng.bytes(len);
                for proto in [IP_IPV4, IP_UDP, IP_IPV6, IP_GRE] {
                    let _ = open(proto, &bytes);
                    let _ = maybe(proto, &bytes);
                }
            }
        }
    }
}
