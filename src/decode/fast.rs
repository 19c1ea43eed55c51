//! The fast path of `decode`, and the 4-tuple hash behind `shard_hash`.
//!
//! Reads the frames most captures are made of straight from the bytes, with
//! no `etherparse` types in between: Ethernet II (with at most one 802.1Q
//! tag), Linux cooked (SLL, SLL2: `tcpdump -i any`), BSD loopback (macOS
//! `lo0`) or raw IP; then IPv4 (options allowed) that is no fragment and
//! whose IHL and total length make sense, or IPv6 whose next header is
//! TCP; then a whole TCP header with a data offset of at least 5. IP
//! carrying UDP or another protocol without TCP behind it is answered too
//! (`OtherIp`, or `Quic` for a QUIC handshake packet).
//! Anything else — VLAN stacks, MPLS, IPv4 AH, IPv6 extension headers,
//! fragments, a cut or impossible header, a zero length, other link types —
//! is [`Fast::Fallback`], and the caller decodes it the lax way. For every
//! frame it accepts the answer is the lax path's, field for field (the
//! `differential` tests check this on every captured frame and on changed
//! and cut ones).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::lax::{loopback_ip, sll_protocol};
use super::quic::{self, QuicDatagram};
use super::tunnel::{self, UdpTunnels};
use super::{Decoded, TcpFlags, TcpSegment};
use crate::record::{AnomalyKind, Overlay};
use crate::source::{LinkType, RawPacket};

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
const ETHERTYPE_VLAN: [u8; 2] = [0x81, 0x00];

const IP_TCP: u8 = 6;
const IP_UDP: u8 = 17;
const IP_AUTH: u8 = 51;
const IP_ICMPV6: u8 = 58;

/// What the fast path made of a frame.
pub(super) enum Fast<'a> {
    /// A TCP segment whose headers are all there.
    Tcp(Parts<'a>),
    /// IP carrying something other than TCP (the lax path says the same).
    OtherIp,
    /// UDP carrying a QUIC handshake packet (the lax path says the same).
    Quic(QuicDatagram<'a>),
    /// Not a frame the fast path reads: decode it the lax way.
    Fallback,
}

#[derive(Clone, Copy)]
enum Addrs {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

/// The pieces of a TCP segment, still in the frame's bytes.
pub(super) struct Parts<'a> {
    addrs: Addrs,
    /// The fixed part of the TCP header.
    tcp: &'a [u8; 20],
    /// The TCP payload present in the frame.
    payload: &'a [u8],
    /// When the frame ends before the IP packet does: the IP packet's length
    /// by its header, and the length of the IP and TCP headers.
    cut: Option<(u64, u64)>,
    /// The VXLAN network it came in, if it came in one.
    overlay: Option<Overlay>,
}

/// Reads `packet` if it is one of the common frames, without building
/// anything.
#[inline]
pub(super) fn parse<'a>(packet: &RawPacket<'a>, udp: &UdpTunnels) -> Fast<'a> {
    let ip = match packet.link {
        LinkType::ETHERNET => match ethernet(packet.data) {
            Some(ip) => ip,
            None => return Fast::Fallback,
        },
        LinkType::RAW | LinkType::RAW_12 | LinkType::RAW_14 | LinkType::IPV4 | LinkType::IPV6 => {
            packet.data
        }
        LinkType::LINUX_SLL => match sll(packet.data) {
            Some(ip) => ip,
            None => return Fast::Fallback,
        },
        LinkType::LINUX_SLL2 => match sll2(packet.data) {
            Some(ip) => ip,
            None => return Fast::Fallback,
        },
        LinkType::NULL | LinkType::LOOP => match packet.data.split_first_chunk::<4>() {
            Some((family, ip)) if loopback_ip(family) => ip,
            _ => return Fast::Fallback,
        },
        _ => return Fast::Fallback,
    };
    ip_packet(ip, true, udp)
}

/// The IP packet after a Linux cooked (SLL) header (`tcpdump -i any`)
/// whose protocol is IPv4 or IPv6.
#[inline(always)]
fn sll(data: &[u8]) -> Option<&[u8]> {
    let (header, rest) = data.split_first_chunk::<16>()?;
    let protocol = sll_protocol(header)?.to_be_bytes();
    matches!(protocol, ETHERTYPE_IPV4 | ETHERTYPE_IPV6).then_some(rest)
}

/// The IP packet after a Linux cooked v2 (SLL2) header (`tcpdump -i any`
/// since libpcap 1.10) whose protocol is IPv4 or IPv6.
#[inline(always)]
fn sll2(data: &[u8]) -> Option<&[u8]> {
    let (header, rest) = data.split_first_chunk::<20>()?;
    matches!([header[0], header[1]], ETHERTYPE_IPV4 | ETHERTYPE_IPV6).then_some(rest)
}

/// The IP packet `ip`; `outer` when it is not inside a tunnel (the fast
/// path opens one VXLAN tunnel, not two).
#[inline(always)]
fn ip_packet<'a>(ip: &'a [u8], outer: bool, udp: &UdpTunnels) -> Fast<'a> {
    // Like the lax path, the version nibble decides, whatever the EtherType
    // or link type said.
    match ip.first().map(|b| b >> 4) {
        Some(4) => ipv4(ip, outer, udp),
        Some(6) => ipv6(ip, outer, udp),
        _ => Fast::Fallback,
    }
}

/// The IP packet after an Ethernet II header and at most one 802.1Q tag.
#[inline(always)]
pub(super) fn ethernet(data: &[u8]) -> Option<&[u8]> {
    let (header, rest) = data.split_first_chunk::<14>()?;
    let ether_type = [header[12], header[13]];
    match ether_type {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Some(rest),
        ETHERTYPE_VLAN => {
            let (tag, rest) = rest.split_first_chunk::<4>()?;
            matches!([tag[2], tag[3]], ETHERTYPE_IPV4 | ETHERTYPE_IPV6).then_some(rest)
        }
        _ => None,
    }
}

#[inline(always)]
fn ipv4<'a>(data: &'a [u8], outer: bool, udp: &UdpTunnels) -> Fast<'a> {
    let Some(h) = data.first_chunk::<20>() else {
        return Fast::Fallback;
    };
    let header_len = usize::from(h[0] & 0x0f) * 4;
    let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    // IHL below 5, a header longer than the frame, or a total length shorter
    // than the header (but not 0) are the lax path's anomalies.
    if header_len < 20 || (total_len != 0 && total_len < header_len) {
        return Fast::Fallback;
    }
    let Some(after_header) = data.get(header_len..) else {
        return Fast::Fallback;
    };
    if h[9] != IP_TCP {
        // A tunnel is opened only in a whole packet (the lax path's rule),
        // up to the packet's end (Ethernet padding follows).
        let fragment = h[6] & 0x3f != 0 || h[7] != 0;
        let whole = total_len != 0 && !fragment;
        let payload = data.get(header_len..total_len).unwrap_or(after_header);
        let addrs = Addrs::V4([h[12], h[13], h[14], h[15]], [h[16], h[17], h[18], h[19]]);
        return not_tcp(h[9], payload, addrs, outer && whole, fragment, udp);
    }
    // A total length of 0 (segmentation offload: the capture saw the packet
    // before the length was set), more fragments, or a fragment offset.
    if total_len == 0 || h[6] & 0x3f != 0 || h[7] != 0 {
        return Fast::Fallback;
    }
    // The packet ends at its total length (Ethernet padding and trailers
    // follow), or with the frame if that comes first.
    let (ip_payload, cut) = match data.get(header_len..total_len) {
        Some(p) => (p, false),
        None => (after_header, true),
    };
    let addrs = Addrs::V4([h[12], h[13], h[14], h[15]], [h[16], h[17], h[18], h[19]]);
    tcp(addrs, ip_payload, cut, total_len as u64, header_len as u64)
}

/// An IPv4 packet of protocol `proto`, not TCP: out of the hot path, so
/// that the TCP path stays small enough to inline.
#[cold]
#[inline(never)]
fn not_tcp<'a>(
    proto: u8,
    payload: &'a [u8],
    addrs: Addrs,
    outer: bool,
    fragment: bool,
    udp: &UdpTunnels,
) -> Fast<'a> {
    if proto == IP_UDP && outer {
        if let Some((frame, vni)) = tunnel::vxlan_frame(payload, udp) {
            return vxlan(frame, vni, udp);
        }
    }
    // AH may carry TCP after it, and a tunnel a whole packet.
    if proto == IP_AUTH || tunnel::maybe(proto, payload, udp) {
        Fast::Fallback
    } else if fragment {
        Fast::OtherIp
    } else {
        match quic::datagram(proto, payload, addrs.ips(), None) {
            Some(q) => Fast::Quic(q),
            None => Fast::OtherIp,
        }
    }
}

/// The Ethernet frame inside a VXLAN header (mirrored cloud traffic is all
/// VXLAN: the common case gets the fast path too).
#[inline(never)]
fn vxlan<'a>(frame: &'a [u8], vni: Option<Overlay>, udp: &UdpTunnels) -> Fast<'a> {
    match ethernet(frame).map(|ip| ip_packet(ip, false, udp)) {
        Some(Fast::Tcp(parts)) => Fast::Tcp(Parts {
            overlay: vni,
            ..parts
        }),
        Some(Fast::Quic(q)) => Fast::Quic(QuicDatagram { overlay: vni, ..q }),
        Some(other) => other,
        None => Fast::Fallback,
    }
}

#[inline(always)]
fn ipv6<'a>(data: &'a [u8], outer: bool, udp: &UdpTunnels) -> Fast<'a> {
    let Some((h, rest)) = data.split_first_chunk::<8>() else {
        return Fast::Fallback;
    };
    let Some((src, rest)) = rest.split_first_chunk::<16>() else {
        return Fast::Fallback;
    };
    let Some((dst, rest)) = rest.split_first_chunk::<16>() else {
        return Fast::Fallback;
    };
    let payload_len = usize::from(u16::from_be_bytes([h[4], h[5]]));
    match h[6] {
        // With a payload length of 0 (jumbograms, segmentation offload) the
        // lax path has its own rules.
        IP_TCP if payload_len > 0 => {}
        // A tunnel carries a whole packet.
        IP_UDP if tunnel::maybe(IP_UDP, rest, udp) => {
            return match tunnel::vxlan_frame(rest.get(..payload_len).unwrap_or(rest), udp) {
                Some((frame, vni)) if outer => vxlan(frame, vni, udp),
                _ => Fast::Fallback,
            };
        }
        // Neither is an extension header, so the lax path stops there too
        // (with a payload length of 0 it reads on to the frame's end: a
        // datagram may then be QUIC to it, and is left to it).
        IP_UDP | IP_ICMPV6 if payload_len > 0 => {
            let datagram = rest.get(..payload_len).unwrap_or(rest);
            let addrs = Addrs::V6(*src, *dst);
            return match quic::datagram(h[6], datagram, addrs.ips(), None) {
                Some(q) => Fast::Quic(q),
                None => Fast::OtherIp,
            };
        }
        _ => return Fast::Fallback,
    }
    let (ip_payload, cut) = match rest.get(..payload_len) {
        Some(p) => (p, false),
        None => (rest, true),
    };
    let ip_len = 40 + payload_len as u64;
    tcp(Addrs::V6(*src, *dst), ip_payload, cut, ip_len, 40)
}

/// The TCP header at the start of `ip_payload`, if whole and possible.
#[inline(always)]
fn tcp(addrs: Addrs, ip_payload: &[u8], cut: bool, ip_len: u64, ip_header: u64) -> Fast<'_> {
    let Some(header) = ip_payload.first_chunk::<20>() else {
        return Fast::Fallback;
    };
    let header_len = usize::from(header[12] >> 4) * 4;
    if header_len < 20 {
        return Fast::Fallback;
    }
    let Some(payload) = ip_payload.get(header_len..) else {
        return Fast::Fallback;
    };
    Fast::Tcp(Parts {
        addrs,
        tcp: header,
        payload,
        cut: cut.then_some((ip_len, ip_header + header_len as u64)),
        overlay: None,
    })
}

impl Addrs {
    /// The source and destination addresses.
    fn ips(self) -> (IpAddr, IpAddr) {
        match self {
            Addrs::V4(s, d) => (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(d))),
            Addrs::V6(s, d) => (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d))),
        }
    }
}

impl<'a> Parts<'a> {
    fn ports(&self) -> (u16, u16) {
        let t = self.tcp;
        (
            u16::from_be_bytes([t[0], t[1]]),
            u16::from_be_bytes([t[2], t[3]]),
        )
    }

    /// The segment, as the lax path would build it.
    #[inline]
    pub(super) fn decoded(&self, packet: &RawPacket<'a>) -> Decoded<'a> {
        let (src_ip, dst_ip) = self.addrs.ips();
        let (src_port, dst_port) = self.ports();
        let t = self.tcp;
        let captured = self.payload.len() as u64;
        let mut payload_len = captured;
        let mut anomaly = None;
        if let Some((ip_len, headers)) = self.cut {
            // The frame was cut: the IP header says how long the packet was
            // (the lax path's rule, down to its fallbacks).
            let from_ip = ip_len.checked_sub(headers).filter(|_| ip_len > 0);
            let missing = u64::from(packet.orig_len).saturating_sub(packet.data.len() as u64);
            payload_len = from_ip
                .unwrap_or(captured.saturating_add(missing))
                .max(captured);
            if payload_len > captured {
                anomaly = Some(AnomalyKind::SnaplenCut);
            }
        }
        Decoded::Tcp(
            TcpSegment {
                src: SocketAddr::new(src_ip, src_port),
                dst: SocketAddr::new(dst_ip, dst_port),
                seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
                ack: u32::from_be_bytes([t[8], t[9], t[10], t[11]]),
                flags: TcpFlags(t[13]),
                window: u16::from_be_bytes([t[14], t[15]]),
                payload: self.payload,
                payload_len: u32::try_from(payload_len).unwrap_or(u32::MAX),
                overlay: self.overlay,
            },
            anomaly,
        )
    }

    /// [`hash_endpoints`] of the segment's endpoints, read in place.
    #[inline]
    pub(super) fn shard_hash(&self) -> u64 {
        let (src_port, dst_port) = self.ports();
        match self.addrs {
            Addrs::V4(s, d) => hash_v4(
                u32::from_be_bytes(s),
                src_port,
                u32::from_be_bytes(d),
                dst_port,
            ),
            Addrs::V6(s, d) => hash_v6(
                u128::from_be_bytes(s),
                src_port,
                u128::from_be_bytes(d),
                dst_port,
            ),
        }
    }
}

/// The shard hash of a connection between `a` and `b`, in either order.
pub(super) fn hash_endpoints(a: SocketAddr, b: SocketAddr) -> u64 {
    match (a.ip(), b.ip()) {
        (IpAddr::V4(x), IpAddr::V4(y)) => hash_v4(u32::from(x), a.port(), u32::from(y), b.port()),
        (x, y) => hash_v6(u128::from(v6(x)), a.port(), u128::from(v6(y)), b.port()),
    }
}

/// IPv4 as IPv4-mapped IPv6, for the (never decoded) mixed pair.
fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

// Fixed seeds, one per address family: part of the hash's definition.
const SEED_V4: u64 = 0x6861_6e64_7368_6134; // "handsha4"
const SEED_V6: u64 = 0x6861_6e64_7368_6136; // "handsha6"

/// Endpoints ordered by (address, port), each packed into one word, then
/// mixed.
fn hash_v4(a: u32, a_port: u16, b: u32, b_port: u16) -> u64 {
    let x = (u64::from(a) << 16) | u64::from(a_port);
    let y = (u64::from(b) << 16) | u64::from(b_port);
    let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
    mix(mix(SEED_V4 ^ lo) ^ hi)
}

/// Endpoints ordered by (address, port), then their words mixed in turn.
fn hash_v6(a: u128, a_port: u16, b: u128, b_port: u16) -> u64 {
    let ((lo, lo_port), (hi, hi_port)) = if (a, a_port) <= (b, b_port) {
        ((a, a_port), (b, b_port))
    } else {
        ((b, b_port), (a, a_port))
    };
    let mut h = mix(SEED_V6 ^ (lo >> 64) as u64);
    h = mix(h ^ lo as u64);
    h = mix(h ^ (hi >> 64) as u64);
    h = mix(h ^ hi as u64);
    mix(h ^ ((u64::from(lo_port) << 16) | u64::from(hi_port)))
}

/// The SplitMix64 finaliser: a bijection whose every output bit depends on
/// every input bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
