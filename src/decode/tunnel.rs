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
//! 4-tuple, in the overlay network the tunnel names (its VNI, GRE key or
//! ERSPAN session), if it names one. Nothing else of the outer headers is
//! kept. Does not reassemble fragmented tunnel packets: the caller opens
//! only unfragmented ones.

use crate::record::{Overlay, OverlayKind};

const IP_IPV4: u8 = 4;
const IP_UDP: u8 = 17;
const IP_IPV6: u8 = 41;
const IP_GRE: u8 = 47;

pub const VXLAN_PORT: u16 = 4789;
pub const GENEVE_PORT: u16 = 6081;

/// A tunnel carried in UDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpTunnel {
    Vxlan,
    Geneve,
}

/// The UDP destination ports whose datagrams are opened as tunnels: VXLAN
/// on 4789 and Geneve on 6081 (IANA's ports, tshark's defaults), and more
/// as asked (`-d udp.port==8472,vxlan`, as with tshark: Linux's and
/// flannel's VXLAN port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpTunnels {
    vxlan: [u16; UdpTunnels::PORTS_EACH],
    geneve: [u16; UdpTunnels::PORTS_EACH],
}

impl UdpTunnels {
    /// Ports of each kind, at most (0 marks a free slot: no datagram goes
    /// to port 0).
    pub const PORTS_EACH: usize = 8;

    pub const STANDARD: UdpTunnels = UdpTunnels {
        vxlan: [VXLAN_PORT, 0, 0, 0, 0, 0, 0, 0],
        geneve: [GENEVE_PORT, 0, 0, 0, 0, 0, 0, 0],
    };

    /// Opens datagrams to `port` as `kind` (and no longer as the other
    /// kind); false if `port` is 0 or `kind` has all its ports already.
    pub fn add(&mut self, port: u16, kind: UdpTunnel) -> bool {
        let (mine, other) = match kind {
            UdpTunnel::Vxlan => (&mut self.vxlan, &mut self.geneve),
            UdpTunnel::Geneve => (&mut self.geneve, &mut self.vxlan),
        };
        if port == 0 {
            return false;
        }
        for p in other.iter_mut().filter(|p| **p == port) {
            *p = 0;
        }
        if mine.contains(&port) {
            return true;
        }
        match mine.iter_mut().find(|p| **p == 0) {
            Some(free) => {
                *free = port;
                true
            }
            None => false,
        }
    }

    /// The tunnel a datagram to `port` carries, if any.
    #[inline]
    fn at(&self, port: u16) -> Option<UdpTunnel> {
        if port == 0 {
            None
        } else if self.vxlan.contains(&port) {
            Some(UdpTunnel::Vxlan)
        } else if self.geneve.contains(&port) {
            Some(UdpTunnel::Geneve)
        } else {
            None
        }
    }
}

impl Default for UdpTunnels {
    fn default() -> UdpTunnels {
        UdpTunnels::STANDARD
    }
}

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
    /// A tunnel, what it carries, and the overlay network it names.
    Inner(Inner<'a>, Option<Overlay>),
    /// A tunnel whose header is cut short or impossible.
    Broken,
}

/// Whether an IP payload of protocol `proto` may be a tunnel (the fast
/// path then leaves the frame to the full decoder).
#[inline]
pub fn maybe(proto: u8, payload: &[u8], udp: &UdpTunnels) -> bool {
    match proto {
        IP_IPV4 | IP_IPV6 | IP_GRE => true,
        IP_UDP => udp_ports(payload).is_some_and(|(_, dst)| udp.at(dst).is_some()),
        _ => false,
    }
}

/// The Ethernet frame in a UDP datagram (`udp`, from its header on) to the
/// VXLAN port with a valid VXLAN header, and its VNI; `None` for anything
/// else.
#[inline]
pub fn vxlan_frame<'a>(
    datagram: &'a [u8],
    udp: &UdpTunnels,
) -> Option<(&'a [u8], Option<Overlay>)> {
    let (_, dst) = udp_ports(datagram)?;
    match (udp.at(dst), datagram.get(8..)) {
        (Some(UdpTunnel::Vxlan), Some(body)) => match vxlan(body) {
            Tunnel::Inner(Inner::Ethernet(frame), vni) => Some((frame, vni)),
            _ => None,
        },
        _ => None,
    }
}

/// Opens the (unfragmented) IP payload `payload` of protocol `proto`.
pub fn open<'a>(proto: u8, payload: &'a [u8], udp: &UdpTunnels) -> Tunnel<'a> {
    match proto {
        IP_IPV4 | IP_IPV6 => Tunnel::Inner(Inner::Ip(payload), None),
        IP_GRE => gre(payload),
        IP_UDP => match (
            udp_ports(payload).and_then(|(_, dst)| udp.at(dst)),
            payload.get(8..),
        ) {
            (Some(UdpTunnel::Vxlan), Some(body)) => vxlan(body),
            (Some(UdpTunnel::Geneve), Some(body)) => geneve(body),
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
    Tunnel::Inner(Inner::Ethernet(frame), Some(vni(OverlayKind::Vxlan, h)))
}

/// The 24-bit VNI in bytes 4–6 of a VXLAN or Geneve header.
fn vni(kind: OverlayKind, h: &[u8; 8]) -> Overlay {
    Overlay {
        kind,
        id: u32::from_be_bytes([0, h[4], h[5], h[6]]),
    }
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
    let id = Some(vni(OverlayKind::Geneve, h));
    carried(u16::from_be_bytes([h[2], h[3]]), inner, id)
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
    // The key, after the checksum word when there is one.
    let at = 4 + 4 * usize::from(checksum);
    let id = match payload.get(at..at + 4) {
        Some(&[a, b, c, d]) if key => Some(Overlay {
            kind: OverlayKind::Gre,
            id: u32::from_be_bytes([a, b, c, d]),
        }),
        _ => None,
    };
    match u16::from_be_bytes([h[2], h[3]]) {
        // ERSPAN type II has a sequence number and its own 8-byte header;
        // type I has neither (nor a session ID).
        ETHERTYPE_ERSPAN_1_2 if sequence => erspan(inner, 1, 8),
        ETHERTYPE_ERSPAN_1_2 => Tunnel::Inner(Inner::Ethernet(inner), id),
        ETHERTYPE_ERSPAN_3 => erspan(inner, 2, 12),
        proto => carried(proto, inner, id),
    }
}

/// ERSPAN type II (`version` 1, 8-byte header) or III (`version` 2,
/// 12 bytes, then an 8-byte platform-specific subheader when the O flag,
/// the last bit of the header, is set), then the mirrored Ethernet frame.
/// Both carry the mirror session's 10-bit ID in bytes 2–3.
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
    let Some(&[hi, lo]) = body.get(2..4) else {
        return Tunnel::Broken;
    };
    let session = Overlay {
        kind: OverlayKind::Erspan,
        id: u32::from(u16::from_be_bytes([hi, lo]) & 0x03ff),
    };
    match body.get(len..) {
        Some(frame) => Tunnel::Inner(Inner::Ethernet(frame), Some(session)),
        None => Tunnel::Broken,
    }
}

/// What an EtherType-numbered tunnel payload is, in overlay `id`.
fn carried(proto: u16, inner: &[u8], id: Option<Overlay>) -> Tunnel<'_> {
    match proto {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Tunnel::Inner(Inner::Ip(inner), id),
        ETHERTYPE_BRIDGING => Tunnel::Inner(Inner::Ethernet(inner), id),
        p if ETHERTYPE_MPLS.contains(&p) => Tunnel::Inner(Inner::Mpls(inner), id),
        _ => Tunnel::No,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The functions under test with the standard ports (these shadow the
    // glob import).
    fn open(proto: u8, payload: &[u8]) -> Tunnel<'_> {
        super::open(proto, payload, &UdpTunnels::STANDARD)
    }
    fn maybe(proto: u8, payload: &[u8]) -> bool {
        super::maybe(proto, payload, &UdpTunnels::STANDARD)
    }
    fn vxlan_frame(datagram: &[u8]) -> Option<(&[u8], Option<Overlay>)> {
        super::vxlan_frame(datagram, &UdpTunnels::STANDARD)
    }

    #[test]
    fn ports_are_added_moved_and_bounded() {
        let body = [0x08, 0, 0, 0, 0, 0, 42, 0, 0xaa];
        let mut udp_ports = UdpTunnels::STANDARD;
        assert_eq!(
            super::open(IP_UDP, &udp(8472, &body), &udp_ports),
            Tunnel::No
        );
        assert!(udp_ports.add(8472, UdpTunnel::Vxlan));
        assert!(matches!(
            super::open(IP_UDP, &udp(8472, &body), &udp_ports),
            Tunnel::Inner(Inner::Ethernet(_), _)
        ));
        assert!(super::maybe(IP_UDP, &udp(8472, &body), &udp_ports));
        // Given as Geneve, 4789 is no longer VXLAN.
        assert!(udp_ports.add(VXLAN_PORT, UdpTunnel::Geneve));
        assert_eq!(udp_ports.at(VXLAN_PORT), Some(UdpTunnel::Geneve));
        assert!(!udp_ports.add(0, UdpTunnel::Vxlan));
        let mut full = UdpTunnels::STANDARD;
        let added = (1..=20).filter(|&p| full.add(p, UdpTunnel::Vxlan)).count();
        assert_eq!(added, UdpTunnels::PORTS_EACH - 1);
        assert!(full.add(1, UdpTunnel::Vxlan), "a port given twice");
    }

    fn net(kind: OverlayKind, id: u32) -> Option<Overlay> {
        Some(Overlay { kind, id })
    }

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
            Tunnel::Inner(Inner::Ethernet(&frame), net(OverlayKind::Vxlan, 42))
        );
        assert_eq!(
            vxlan_frame(&udp(VXLAN_PORT, &body)),
            Some((&frame[..], net(OverlayKind::Vxlan, 42)))
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
            Tunnel::Inner(Inner::Ip(&ip), net(OverlayKind::Geneve, 7))
        );
        assert_eq!(open(IP_UDP, &udp(GENEVE_PORT, &body[..12])), Tunnel::Broken);
        body[0] |= 0x40; // version 1
        assert_eq!(open(IP_UDP, &udp(GENEVE_PORT, &body)), Tunnel::No);
    }

    #[test]
    fn gre_fields_and_payloads() {
        let inner = [0x60; 40];
        // Checksum, key and sequence present: 16 bytes of header; the key
        // names the overlay.
        let mut p = vec![0xb0, 0x00, 0x86, 0xdd, 0, 0, 0, 0, 0x80, 0, 1, 2];
        p.extend_from_slice(&[0; 4]);
        p.extend_from_slice(&inner);
        let key = net(OverlayKind::Gre, 0x8000_0102);
        assert_eq!(open(IP_GRE, &p), Tunnel::Inner(Inner::Ip(&inner), key));
        assert_eq!(open(IP_GRE, &p[..10]), Tunnel::Broken);
        // Without the checksum the key comes first.
        let mut p = vec![0x20, 0x00, 0x86, 0xdd, 0, 0, 0, 9];
        p.extend_from_slice(&inner);
        let key = net(OverlayKind::Gre, 9);
        assert_eq!(open(IP_GRE, &p), Tunnel::Inner(Inner::Ip(&inner), key));
        // Transparent Ethernet bridging, MPLS, an unknown protocol.
        for (proto, want) in [
            (0x6558u16, Tunnel::Inner(Inner::Ethernet(&inner), None)),
            (0x8847, Tunnel::Inner(Inner::Mpls(&inner), None)),
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
        // Type I: no sequence number, no ERSPAN header, no session.
        let mut p = vec![0x00, 0x00, 0x88, 0xbe];
        p.extend_from_slice(&frame);
        assert_eq!(
            open(IP_GRE, &p),
            Tunnel::Inner(Inner::Ethernet(&frame), None)
        );
        // Type II: sequence number, 8-byte header of version 1; session
        // 0x305 (its top six bits are COS, encapsulation and truncation).
        let session = net(OverlayKind::Erspan, 0x305);
        let mut p = vec![0x10, 0x00, 0x88, 0xbe, 0, 0, 0, 9];
        p.extend_from_slice(&[0x10, 0x01, 0xff, 0x05, 0, 0, 0, 0]);
        p.extend_from_slice(&frame);
        assert_eq!(
            open(IP_GRE, &p),
            Tunnel::Inner(Inner::Ethernet(&frame), session)
        );
        p[8] = 0x20;
        assert_eq!(open(IP_GRE, &p), Tunnel::Broken);
        // Type III, with and without the platform-specific subheader.
        for o in [0u8, 1] {
            let mut p = vec![0x10, 0x00, 0x22, 0xeb, 0, 0, 0, 9];
            p.extend_from_slice(&[0x20, 0x01, 0xff, 0x05, 0, 0, 0, 0, 0, 0, 0, o]);
            if o == 1 {
                p.extend_from_slice(&[0x77; 8]);
            }
            p.extend_from_slice(&frame);
            assert_eq!(
                open(IP_GRE, &p),
                Tunnel::Inner(Inner::Ethernet(&frame), session)
            );
            assert_eq!(open(IP_GRE, &p[..14]), Tunnel::Broken);
        }
    }

    #[test]
    fn ip_in_ip_and_other_protocols() {
        let ip = [0x45; 20];
        assert_eq!(open(IP_IPV4, &ip), Tunnel::Inner(Inner::Ip(&ip), None));
        assert_eq!(open(IP_IPV6, &ip), Tunnel::Inner(Inner::Ip(&ip), None));
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
