//! The lax path of `decode`: every frame the fast path leaves (other link
//! types, VLAN stacks, MPLS, extension headers, fragments, cut or odd
//! headers, tunnels) decoded through `etherparse`'s lax slicing, which keeps
//! whatever outer layers a snaplen-cut frame still has; tunnels are opened
//! (`tunnel`) and the packet inside decoded the same way. Also the
//! reference the fast path is tested against (`differential`).
//!
//! Never panics: every failure is an [`AnomalyKind`]. Keeps no state.

use std::net::{IpAddr, SocketAddr};

use etherparse::err::packet::SliceError;
use etherparse::err::{Layer, LenError};
use etherparse::{EtherType, IpNumber, LaxNetSlice, LaxSlicedPacket, TransportSlice};

use super::quic;
use super::tunnel::{self, Inner, Tunnel, UdpTunnels};
use super::{Decoded, TcpFlags, TcpSegment};
use crate::record::{AnomalyKind, Overlay};
use crate::source::{LinkType, RawPacket};

/// How deep in tunnels a packet lies, in which overlay network, and the
/// UDP ports tunnels are opened on.
#[derive(Clone, Copy)]
struct Within<'u> {
    depth: u8,
    overlay: Option<Overlay>,
    udp: &'u UdpTunnels,
}

impl Within<'_> {
    /// Not in a tunnel.
    fn outer(udp: &UdpTunnels) -> Within<'_> {
        Within {
            depth: 0,
            overlay: None,
            udp,
        }
    }

    /// One tunnel deeper; in the overlay that tunnel names, if it names one.
    fn inside(self, overlay: Option<Overlay>) -> Self {
        Within {
            depth: self.depth + 1,
            overlay: overlay.or(self.overlay),
            ..self
        }
    }
}

/// [`decode`] through `etherparse`'s lax slicing, for every frame: the
/// fallback of the fast path, and the reference it is tested against.
#[inline(never)]
pub(super) fn decode_lax<'a>(packet: &RawPacket<'a>, udp: &UdpTunnels) -> Decoded<'a> {
    let outer = Within::outer(udp);
    let data = packet.data;
    let sliced = match packet.link {
        LinkType::ETHERNET => return ethernet(data, packet, outer),
        LinkType::RAW | LinkType::RAW_12 | LinkType::RAW_14 | LinkType::IPV4 | LinkType::IPV6 => {
            return from_ip(data, packet, outer);
        }
        LinkType::NULL | LinkType::LOOP => {
            let Some((family, rest)) = data.split_first_chunk::<4>() else {
                return Decoded::Bad(AnomalyKind::TruncatedLink);
            };
            if !loopback_ip(family) {
                return Decoded::NotIp;
            }
            return from_ip(rest, packet, outer);
        }
        LinkType::LINUX_SLL => {
            // SLL: packet type (2), hardware type (2), address length (2),
            // address (8), protocol (2): 16 bytes. The protocol is an
            // EtherType on every interface an IP packet comes in on —
            // Ethernet, loopback, tun (`ARPHRD_NONE`), PPP, GRE — as
            // Wireshark reads it (etherparse refuses all but Ethernet,
            // which made `tcpdump -i any` captures of loopback traffic
            // all `truncated_link`).
            let (Some(header), Some(rest)) = (data.first_chunk::<16>(), data.get(16..)) else {
                return Decoded::Bad(AnomalyKind::TruncatedLink);
            };
            match sll_protocol(header) {
                Some(protocol) => LaxSlicedPacket::from_ether_type(EtherType(protocol), rest),
                None => return Decoded::NotIp,
            }
        }
        LinkType::LINUX_SLL2 => {
            // SLL2: protocol (2), reserved (2), ifindex (4), hatype (2),
            // pkttype (1), addr len (1), address (8): 20 bytes.
            let (Some((proto, _)), Some(rest)) = (data.split_first_chunk::<2>(), data.get(20..))
            else {
                return Decoded::Bad(AnomalyKind::TruncatedLink);
            };
            let et = EtherType(u16::from_be_bytes(*proto));
            LaxSlicedPacket::from_ether_type(et, rest)
        }
        LinkType::PPP => return ppp(data, packet, outer),
        LinkType::NFLOG => return nflog(data, packet, outer),
        _ => return Decoded::Bad(AnomalyKind::UnsupportedLinkType),
    };
    classify(sliced, packet, outer)
}

/// The EtherType in a Linux cooked (SLL) header, unless the header's
/// hardware type gives its protocol field another meaning (netlink,
/// radiotap, frame relay) or the value is one of Linux's own protocol
/// numbers below 0x0600 (802.2, 802.3, CAN, …): neither is ever IP.
pub(super) fn sll_protocol(header: &[u8; 16]) -> Option<u16> {
    const ARPHRD_FRAD: u16 = 770;
    const ARPHRD_IEEE80211_RADIOTAP: u16 = 803;
    const ARPHRD_NETLINK: u16 = 824;
    let [_, _, h0, h1, .., p0, p1] = *header;
    let hardware = u16::from_be_bytes([h0, h1]);
    let protocol = u16::from_be_bytes([p0, p1]);
    let other = matches!(
        hardware,
        ARPHRD_FRAD | ARPHRD_IEEE80211_RADIOTAP | ARPHRD_NETLINK
    );
    (!other && protocol >= 0x0600).then_some(protocol)
}

/// An Ethernet frame, the outermost or one a tunnel carried.
fn ethernet<'a>(frame: &'a [u8], packet: &RawPacket<'a>, within: Within<'_>) -> Decoded<'a> {
    match LaxSlicedPacket::from_ethernet(frame) {
        Ok(s) => classify(s, packet, within),
        Err(_) => Decoded::Bad(AnomalyKind::TruncatedLink),
    }
}

/// The packet a tunnel carries.
fn inner<'a>(inner: Inner<'a>, packet: &RawPacket<'a>, within: Within<'_>) -> Decoded<'a> {
    match inner {
        Inner::Ethernet(frame) => ethernet(frame, packet, within),
        Inner::Ip(ip) => from_ip(ip, packet, within),
        Inner::Mpls(stack) => mpls(stack, packet, within),
    }
}

const ETHERTYPE_MPLS: [EtherType; 2] = [EtherType(0x8847), EtherType(0x8848)];
/// At most this many MPLS labels are skipped before giving up.
const MAX_MPLS_LABELS: usize = 16;

/// IP (or, with a pseudowire control word, Ethernet) under an MPLS label stack.
fn mpls<'a>(mut data: &'a [u8], packet: &RawPacket<'a>, within: Within<'_>) -> Decoded<'a> {
    for _ in 0..MAX_MPLS_LABELS {
        let Some((label, rest)) = data.split_first_chunk::<4>() else {
            return Decoded::Bad(AnomalyKind::TruncatedLink);
        };
        data = rest;
        if label[2] & 0x01 != 0 {
            // Bottom of stack: IPv4/IPv6 by version nibble, 0 = control word + Ethernet.
            return match data.first().map(|b| b >> 4) {
                Some(4) | Some(6) => from_ip(data, packet, within),
                Some(0) => match data.get(4..) {
                    Some(frame) => ethernet(frame, packet, within),
                    None => Decoded::Bad(AnomalyKind::TruncatedLink),
                },
                _ => Decoded::NotIp,
            };
        }
    }
    Decoded::Bad(AnomalyKind::TruncatedLink)
}

/// PPP: optional HDLC address/control (FF 03), then a 2-byte protocol.
fn ppp<'a>(data: &'a [u8], packet: &RawPacket<'a>, outer: Within<'_>) -> Decoded<'a> {
    let data = data.strip_prefix(&[0xff, 0x03]).unwrap_or(data);
    match data.split_first_chunk::<2>() {
        Some(([0x00, 0x21], ip)) | Some(([0x00, 0x57], ip)) => from_ip(ip, packet, outer),
        Some(_) => Decoded::NotIp,
        None => Decoded::Bad(AnomalyKind::TruncatedLink),
    }
}

/// NFLOG: a 4-byte header, then TLVs (length and type in host byte order,
/// values padded to 4 bytes); type 9 holds the packet from its IP header on.
fn nflog<'a>(data: &'a [u8], packet: &RawPacket<'a>, outer: Within<'_>) -> Decoded<'a> {
    const NFULA_PAYLOAD: u16 = 9;
    let Some(mut tlvs) = data.get(4..) else {
        return Decoded::Bad(AnomalyKind::TruncatedLink);
    };
    while let Some((head, _)) = tlvs.split_first_chunk::<4>() {
        let len = usize::from(u16::from_le_bytes([head[0], head[1]]));
        let kind = u16::from_le_bytes([head[2], head[3]]);
        if len < 4 {
            break;
        }
        if kind == NFULA_PAYLOAD {
            return match tlvs.get(4..len) {
                Some(ip) => from_ip(ip, packet, outer),
                None => from_ip(tlvs.get(4..).unwrap_or(&[]), packet, outer),
            };
        }
        let padded = len.div_ceil(4) * 4;
        match tlvs.get(padded..) {
            Some(rest) => tlvs = rest,
            None => break,
        }
    }
    Decoded::Bad(AnomalyKind::TruncatedLink)
}

/// Whether a BSD (NULL) or OpenBSD (LOOP) loopback header's address
/// family is IPv4 or IPv6: NULL is in the capturing host's byte order, LOOP
/// in network order, so either is taken.
pub(super) fn loopback_ip(family: &[u8; 4]) -> bool {
    is_af_inet(u32::from_le_bytes(*family)) || is_af_inet(u32::from_be_bytes(*family))
}

fn is_af_inet(family: u32) -> bool {
    // AF_INET everywhere; AF_INET6 on Linux (10), NetBSD/OpenBSD (24),
    // FreeBSD (28) and macOS (30).
    matches!(family, 2 | 10 | 24 | 28 | 30)
}

fn from_ip<'a>(data: &'a [u8], packet: &RawPacket<'a>, within: Within<'_>) -> Decoded<'a> {
    match LaxSlicedPacket::from_ip(data) {
        Ok(s) => classify(s, packet, within),
        Err(etherparse::err::ip::LaxHeaderSliceError::Len(_)) => {
            Decoded::Bad(AnomalyKind::TruncatedIp)
        }
        Err(etherparse::err::ip::LaxHeaderSliceError::Content(_)) => {
            // Version nibble neither 4 nor 6 is not IP at all; anything else is malformed.
            match data.first().map(|b| b >> 4) {
                Some(4) | Some(6) => Decoded::Bad(AnomalyKind::MalformedIp),
                _ => Decoded::NotIp,
            }
        }
    }
}

/// The segment in a sliced frame (or packet).
fn classify<'a>(
    sliced: LaxSlicedPacket<'a>,
    packet: &RawPacket<'a>,
    within: Within,
) -> Decoded<'a> {
    // (source, destination, payload, where the IP header starts, the IP
    // packet's length according to its header)
    let (src_ip, dst_ip, payload, ip_start, ip_len) = match &sliced.net {
        Some(LaxNetSlice::Ipv4(v4)) => (
            IpAddr::V4(v4.header().source_addr()),
            IpAddr::V4(v4.header().destination_addr()),
            v4.payload(),
            v4.header().slice().as_ptr() as usize,
            u64::from(v4.header().total_len()),
        ),
        Some(LaxNetSlice::Ipv6(v6)) => (
            IpAddr::V6(v6.header().source_addr()),
            IpAddr::V6(v6.header().destination_addr()),
            v6.payload(),
            v6.header().slice().as_ptr() as usize,
            40 + u64::from(v6.header().payload_length()),
        ),
        Some(LaxNetSlice::Arp(_)) => return Decoded::NotIp,
        None => {
            if let Some(ether) = sliced.ether_payload() {
                if ETHERTYPE_MPLS.contains(&ether.ether_type) {
                    return mpls(ether.payload, packet, within);
                }
            }
            return match sliced.stop_err {
                Some((err, layer)) => Decoded::Bad(anomaly_for(&err, layer)),
                None => Decoded::NotIp,
            };
        }
    };
    if let Some(LaxNetSlice::Ipv4(v4)) = &sliced.net {
        // A total length shorter than the header cannot be (0 is segmentation
        // offload, where the capture saw the packet before the length was set).
        let total = v4.header().total_len();
        if total != 0 && usize::from(total) < v4.header().slice().len() {
            return Decoded::Bad(AnomalyKind::MalformedIp);
        }
    }
    if payload.ip_number != IpNumber::TCP {
        if payload.fragmented {
            return Decoded::OtherIp;
        }
        return match tunnel::open(payload.ip_number.0, payload.payload, within.udp) {
            Tunnel::No => {
                let ips = (src_ip, dst_ip);
                match quic::datagram(payload.ip_number.0, payload.payload, ips, within.overlay) {
                    Some(q) => Decoded::Quic(q),
                    None => Decoded::OtherIp,
                }
            }
            Tunnel::Inner(..) | Tunnel::Broken if within.depth >= tunnel::MAX_DEPTH => {
                Decoded::Bad(AnomalyKind::MalformedTunnel)
            }
            Tunnel::Inner(carried, overlay) => inner(carried, packet, within.inside(overlay)),
            Tunnel::Broken => Decoded::Bad(AnomalyKind::MalformedTunnel),
        };
    }
    if payload.fragmented {
        return Decoded::Bad(if src_ip.is_ipv4() {
            AnomalyKind::Ipv4Fragment
        } else {
            AnomalyKind::Ipv6Fragment
        });
    }
    let tcp = match sliced.transport {
        Some(TransportSlice::Tcp(tcp)) => tcp,
        _ => {
            let kind = match sliced.stop_err {
                Some((err, layer)) => anomaly_for(&err, layer),
                None => AnomalyKind::TruncatedTcp,
            };
            if kind == AnomalyKind::TruncatedTcp {
                // The options were cut, but the fixed header may be whole: keep
                // what it says (flags, sequence numbers) rather than the packet.
                let missing = u64::from(packet.orig_len).saturating_sub(packet.data.len() as u64);
                if let Some(seg) = fixed_header_only(src_ip, dst_ip, payload.payload, missing) {
                    let seg = TcpSegment {
                        overlay: within.overlay,
                        ..seg
                    };
                    return Decoded::Tcp(seg, Some(kind));
                }
            }
            return Decoded::Bad(kind);
        }
    };
    let captured = tcp.payload();
    let mut payload_len = captured.len() as u64;
    let mut anomaly = None;
    if payload.incomplete {
        // The frame was cut. The IP header says how long the packet was; the
        // TCP payload is that minus the headers in front of it. (A zero length,
        // as with segmentation offload, falls back to the frame's wire length.)
        let headers = (captured.as_ptr() as usize).saturating_sub(ip_start) as u64;
        let from_ip = ip_len.checked_sub(headers).filter(|_| ip_len > 0);
        let missing = u64::from(packet.orig_len).saturating_sub(packet.data.len() as u64);
        payload_len = from_ip
            .unwrap_or(payload_len.saturating_add(missing))
            .max(payload_len);
        if payload_len > captured.len() as u64 {
            anomaly = Some(AnomalyKind::SnaplenCut);
        }
    }
    let flags = tcp.header_slice().get(13).copied().unwrap_or(0);
    Decoded::Tcp(
        TcpSegment {
            src: SocketAddr::new(src_ip, tcp.source_port()),
            dst: SocketAddr::new(dst_ip, tcp.destination_port()),
            seq: tcp.sequence_number(),
            ack: tcp.acknowledgment_number(),
            flags: TcpFlags(flags),
            window: tcp.window_size(),
            payload: captured,
            payload_len: u32::try_from(payload_len).unwrap_or(u32::MAX),
            overlay: within.overlay,
        },
        anomaly,
    )
}

/// A segment from the 20-byte fixed TCP header alone, when the options that
/// follow were cut by the snap length. `None` if even that is missing or the
/// data offset is impossible.
fn fixed_header_only<'a>(
    src: IpAddr,
    dst: IpAddr,
    tcp: &'a [u8],
    missing: u64,
) -> Option<TcpSegment<'a>> {
    let h: &[u8; 20] = tcp.first_chunk()?;
    let header_len = u64::from(h[12] >> 4) * 4;
    if header_len < 20 {
        return None;
    }
    let on_wire = (tcp.len() as u64).saturating_add(missing);
    Some(TcpSegment {
        src: SocketAddr::new(src, u16::from_be_bytes([h[0], h[1]])),
        dst: SocketAddr::new(dst, u16::from_be_bytes([h[2], h[3]])),
        seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        ack: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        flags: TcpFlags(h[13]),
        window: u16::from_be_bytes([h[14], h[15]]),
        payload: &[],
        payload_len: u32::try_from(on_wire.saturating_sub(header_len)).unwrap_or(u32::MAX),
        overlay: None,
    })
}

fn anomaly_for(err: &SliceError, layer: Layer) -> AnomalyKind {
    let layer = match err {
        SliceError::Len(LenError { layer, .. }) => *layer,
        _ => layer,
    };
    let truncated = matches!(err, SliceError::Len(_));
    match layer {
        Layer::TcpHeader => {
            if truncated {
                AnomalyKind::TruncatedTcp
            } else {
                AnomalyKind::MalformedTcp
            }
        }
        Layer::LinuxSllHeader
        | Layer::Ethernet2Header
        | Layer::EtherPayload
        | Layer::VlanHeader
        | Layer::MacsecHeader
        | Layer::MacsecPacket => AnomalyKind::TruncatedLink,
        _ => {
            if truncated {
                AnomalyKind::TruncatedIp
            } else {
                AnomalyKind::MalformedIp
            }
        }
    }
}
