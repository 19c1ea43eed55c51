//! Decoding one frame down to its TCP segment, and [`shard_hash`], the
//! direction-free hash of its 4-tuple that spreads connections over threads.
//! The only module that names `etherparse`.
//!
//! Two paths give the same answers. `fast` reads the common frames
//! (Ethernet II with at most one 802.1Q tag, or raw IP; IPv4 unfragmented
//! or IPv6 without extension headers; TCP with a whole header) straight
//! from the bytes. Everything else goes to `decode_lax`, where
//! `etherparse`'s lax slicing keeps whatever outer layers a snaplen-cut
//! frame still has. Every failure becomes an [`AnomalyKind`], never a panic.
//! Tunnels (`tunnel`: VXLAN, Geneve, GRE, ERSPAN, IP in IP) are opened and
//! the packet inside decoded the same way: the segment is the inner one.
//!
//! Does not keep state between packets (but for `defrag`, which holds IP
//! fragments until their datagram is whole) and knows nothing of
//! connections.

use std::net::{IpAddr, SocketAddr};

use etherparse::err::packet::SliceError;
use etherparse::err::{Layer, LenError};
use etherparse::{
    EtherType, IpNumber, LaxNetSlice, LaxSlicedPacket, LinuxSllProtocolType, TransportSlice,
};

use crate::record::{AnomalyKind, Overlay};
use crate::source::{LinkType, RawPacket};

pub mod defrag;
#[cfg(test)]
mod differential;
mod fast;
#[cfg(test)]
mod shard_tests;
mod tunnel;

use fast::Fast;
use tunnel::{Inner, Tunnel};
pub use tunnel::{UdpTunnel, UdpTunnels};

/// TCP flag bits as in the header's 13th byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;

    pub fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    pub fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    pub fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
}

/// A TCP segment borrowed from the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    /// The payload bytes present in the capture.
    pub payload: &'a [u8],
    /// The payload length on the wire (larger than `payload.len()` when the
    /// capture's snap length cut the frame).
    pub payload_len: u32,
    /// The overlay network of the innermost tunnel that names one (part
    /// of the connection's identity).
    pub overlay: Option<Overlay>,
}

/// What a frame turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A TCP segment, with an anomaly when its payload was cut short.
    Tcp(TcpSegment<'a>, Option<AnomalyKind>),
    /// IP carrying something other than TCP.
    OtherIp,
    /// Not IP (ARP, LLDP, …).
    NotIp,
    /// Could not be decoded far enough to know; counted as an anomaly.
    Bad(AnomalyKind),
}

/// Decodes one frame, opening UDP tunnels on the standard ports. Never
/// panics, whatever the bytes.
pub fn decode<'a>(packet: &RawPacket<'a>) -> Decoded<'a> {
    decode_with(packet, &UdpTunnels::STANDARD)
}

/// [`decode`], opening UDP tunnels on the ports `udp` names.
#[inline]
pub fn decode_with<'a>(packet: &RawPacket<'a>, udp: &UdpTunnels) -> Decoded<'a> {
    match fast::parse(packet, udp) {
        Fast::Tcp(parts) => parts.decoded(packet),
        Fast::OtherIp => Decoded::OtherIp,
        Fast::Fallback => decode_lax(packet, udp),
    }
}

/// A hash of the frame's TCP 4-tuple for picking a worker thread
/// (`shard_hash(p) % n_threads`).
///
/// * Symmetric: two frames that [`decode`] turns into [`Decoded::Tcp`]
///   segments whose (source, destination) pairs are equal or swapped get the
///   same value, so both directions of a connection land on one shard.
/// * Deterministic: no random seed; the same value in every run, on every
///   machine and with every build.
/// * Well mixed in all 64 bits, the low ones included.
///
/// Frames that do not decode as TCP get 0. Cheap for the frames the fast
/// path reads (the addresses and ports are read in place); the others pay
/// for a full [`decode`].
pub fn shard_hash(packet: &RawPacket<'_>, udp: &UdpTunnels) -> u64 {
    match fast::parse(packet, udp) {
        Fast::Tcp(parts) => parts.shard_hash(),
        Fast::OtherIp => 0,
        Fast::Fallback => match decode_lax(packet, udp) {
            Decoded::Tcp(seg, _) => fast::hash_endpoints(seg.src, seg.dst),
            _ => 0,
        },
    }
}

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
fn decode_lax<'a>(packet: &RawPacket<'a>, udp: &UdpTunnels) -> Decoded<'a> {
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
            // NULL is in the capturing host's byte order, LOOP in network order.
            let le = u32::from_le_bytes(*family);
            let be = u32::from_be_bytes(*family);
            if !is_af_inet(le) && !is_af_inet(be) {
                return Decoded::NotIp;
            }
            return from_ip(rest, packet, outer);
        }
        LinkType::LINUX_SLL => match etherparse::LinuxSllSlice::from_slice(data) {
            Ok(sll) => match sll.protocol_type() {
                LinuxSllProtocolType::EtherType(et) => {
                    LaxSlicedPacket::from_ether_type(et, sll.payload_slice())
                }
                _ => return Decoded::NotIp,
            },
            Err(_) => return Decoded::Bad(AnomalyKind::TruncatedLink),
        },
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
            Tunnel::No => Decoded::OtherIp,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn raw(link: LinkType, data: &[u8]) -> RawPacket<'_> {
        RawPacket {
            index: 1,
            ts: Timestamp(0),
            link,
            orig_len: data.len() as u32,
            data,
        }
    }

    fn tcp_ipv4(payload: &[u8]) -> Vec<u8> {
        let builder = etherparse::PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40000, 443, 1000, 65535)
            .syn();
        let mut out = Vec::new();
        builder.write(&mut out, payload).expect("writes to a Vec");
        out
    }

    #[test]
    fn parses_minimal_raw_ipv4_syn() {
        let bytes = tcp_ipv4(&[]);
        let Decoded::Tcp(seg, None) = decode(&raw(LinkType::RAW, &bytes)) else {
            panic!("expected a TCP segment");
        };
        assert_eq!(seg.src.to_string(), "10.0.0.1:40000");
        assert_eq!(seg.dst.to_string(), "10.0.0.2:443");
        assert!(seg.flags.syn() && !seg.flags.ack());
        assert_eq!(seg.seq, 1000);
    }

    #[test]
    fn null_link_both_byte_orders() {
        let ip = tcp_ipv4(b"hi");
        for family in [2u32.to_le_bytes(), 2u32.to_be_bytes(), 30u32.to_le_bytes()] {
            let mut frame = family.to_vec();
            frame.extend_from_slice(&ip);
            assert!(matches!(
                decode(&raw(LinkType::NULL, &frame)),
                Decoded::Tcp(..)
            ));
        }
        let mut arp = 7u32.to_le_bytes().to_vec();
        arp.extend_from_slice(&ip);
        assert!(matches!(decode(&raw(LinkType::NULL, &arp)), Decoded::NotIp));
    }

    #[test]
    fn snaplen_cut_payload_keeps_wire_length() {
        let bytes = tcp_ipv4(&[7u8; 100]);
        let mut p = raw(LinkType::RAW, &bytes[..bytes.len() - 60]);
        p.orig_len = bytes.len() as u32;
        let Decoded::Tcp(seg, Some(AnomalyKind::SnaplenCut)) = decode(&p) else {
            panic!("expected a cut TCP segment");
        };
        assert_eq!(seg.payload.len(), 40);
        assert_eq!(seg.payload_len, 100);
    }

    #[test]
    fn rejects_truncated_headers_at_every_length() {
        let bytes = tcp_ipv4(b"payload");
        for cut in 0..40 {
            let d = decode(&raw(LinkType::RAW, &bytes[..cut]));
            assert!(
                matches!(d, Decoded::Bad(_) | Decoded::NotIp),
                "cut at {cut}: {d:?}"
            );
        }
    }

    #[test]
    fn malformed_ipv4_ihl_and_tcp_offset() {
        let mut bytes = tcp_ipv4(b"x");
        bytes[0] = 0x44; // IHL 4 < 5
        assert!(matches!(
            decode(&raw(LinkType::RAW, &bytes)),
            Decoded::Bad(AnomalyKind::MalformedIp)
        ));
        let mut bytes = tcp_ipv4(b"x");
        bytes[20 + 12] = 0x40; // data offset 4 < 5
        assert!(matches!(
            decode(&raw(LinkType::RAW, &bytes)),
            Decoded::Bad(AnomalyKind::MalformedTcp)
        ));
    }

    #[test]
    fn ppp_nflog_and_mpls() {
        let ip = tcp_ipv4(b"x");
        let mut ppp = vec![0xff, 0x03, 0x00, 0x21];
        ppp.extend_from_slice(&ip);
        assert!(matches!(
            decode(&raw(LinkType::PPP, &ppp)),
            Decoded::Tcp(..)
        ));
        assert!(matches!(
            decode(&raw(LinkType::PPP, &ppp[2..])),
            Decoded::Tcp(..)
        ));

        let mut nflog = vec![2, 0, 0, 0];
        nflog.extend_from_slice(&[5, 0, 1, 0, 0xaa, 0, 0, 0]); // an unrelated TLV, padded
        nflog.extend_from_slice(&((ip.len() + 4) as u16).to_le_bytes());
        nflog.extend_from_slice(&9u16.to_le_bytes());
        nflog.extend_from_slice(&ip);
        assert!(matches!(
            decode(&raw(LinkType::NFLOG, &nflog)),
            Decoded::Tcp(..)
        ));
        assert!(matches!(
            decode(&raw(LinkType::NFLOG, &nflog[..12])),
            Decoded::Bad(_)
        ));

        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&[0x88, 0x47]);
        eth.extend_from_slice(&[0, 0, 0x10, 64]); // label, not bottom
        eth.extend_from_slice(&[0, 0, 0x21, 64]); // bottom of stack
        eth.extend_from_slice(&ip);
        assert!(matches!(
            decode(&raw(LinkType::ETHERNET, &eth)),
            Decoded::Tcp(..)
        ));
    }

    #[test]
    fn sll2_and_unsupported_link() {
        let ip = tcp_ipv4(&[]);
        let mut frame = vec![0x08, 0x00];
        frame.extend_from_slice(&[0; 18]);
        frame.extend_from_slice(&ip);
        assert!(matches!(
            decode(&raw(LinkType::LINUX_SLL2, &frame)),
            Decoded::Tcp(..)
        ));
        assert!(matches!(
            decode(&raw(LinkType::LINUX_SLL2, &frame[..10])),
            Decoded::Bad(AnomalyKind::TruncatedLink)
        ));
        assert!(matches!(
            decode(&raw(LinkType(147), &frame)),
            Decoded::Bad(AnomalyKind::UnsupportedLinkType)
        ));
    }
}
