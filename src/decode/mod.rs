//! Decoding one frame down to its TCP segment, and [`shard_hash`], the
//! direction-free hash of its 4-tuple that spreads connections over threads.
//! The only module (with its `lax` part) that names `etherparse`.
//!
//! Two paths give the same answers. `fast` reads the common frames
//! (Ethernet II with at most one 802.1Q tag, or raw IP; IPv4 unfragmented
//! or IPv6 without extension headers; TCP with a whole header) straight
//! from the bytes. Everything else goes to `lax`, where `etherparse`'s lax
//! slicing keeps whatever outer layers a snaplen-cut frame still has. Every failure becomes an [`AnomalyKind`], never a panic.
//! Tunnels (`tunnel`: VXLAN, Geneve, GRE, ERSPAN, IP in IP) are opened and
//! the packet inside decoded the same way: the segment is the inner one.
//!
//! Does not keep state between packets (but for `defrag`, which holds IP
//! fragments until their datagram is whole) and knows nothing of
//! connections.

use std::net::SocketAddr;

use crate::record::{AnomalyKind, Overlay};
use crate::source::RawPacket;

pub mod defrag;
#[cfg(test)]
mod differential;
mod fast;
mod lax;
mod quic;
pub use quic::version_name as quic_version_name;
pub use quic::{
    long_packet, long_packets, varint, LongHeader, LongPacket, PacketKind, QuicDatagram,
};
#[cfg(test)]
mod shard_tests;
mod tunnel;

use fast::Fast;
use lax::decode_lax;
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
    /// UDP carrying a QUIC handshake packet (HTTP/3's transport, which is
    /// not analyzed: counted so that a capture of it does not look empty).
    Quic(QuicDatagram<'a>),
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
        Fast::Quic(header) => Decoded::Quic(header),
        Fast::Fallback => decode_lax(packet, udp),
    }
}

/// A hash of the frame's TCP 4-tuple for picking a shard (`--threads`
/// scales it to the number of shards by a multiply: its high bits).
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
        Fast::OtherIp | Fast::Quic(_) => 0,
        Fast::Fallback => lax_shard_hash(packet, udp),
    }
}

/// [`shard_hash`] of a frame the fast path does not read.
fn lax_shard_hash(packet: &RawPacket<'_>, udp: &UdpTunnels) -> u64 {
    match decode_lax(packet, udp) {
        Decoded::Tcp(seg, _) => fast::hash_endpoints(seg.src, seg.dst),
        _ => 0,
    }
}

/// [`shard_hash`] of a frame that is no IP fragment, or `None` when it
/// may be one ([`defrag::may_be_fragment`]): only the defragmenter, seeing
/// the frames in order, can tell which connection a fragment belongs to.
/// The TCP segments the fast path reads are never fragments, so the common
/// frames are hashed without a second look.
pub fn whole_shard_hash(packet: &RawPacket<'_>, udp: &UdpTunnels) -> Option<u64> {
    match fast::parse(packet, udp) {
        Fast::Tcp(parts) => Some(parts.shard_hash()),
        // A fragment of a UDP datagram may be one of a tunnel's.
        _ if defrag::may_be_fragment(packet) => None,
        Fast::OtherIp | Fast::Quic(_) => Some(0),
        Fast::Fallback => Some(lax_shard_hash(packet, udp)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LinkType;
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

    /// A Linux cooked (SLL) frame from an interface of hardware type
    /// `hardware`, carrying `ip` as `protocol`.
    fn sll(hardware: u16, protocol: u16, ip: &[u8]) -> Vec<u8> {
        let mut frame = vec![0, 0];
        frame.extend_from_slice(&hardware.to_be_bytes());
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        frame.extend_from_slice(&protocol.to_be_bytes());
        frame.extend_from_slice(ip);
        frame
    }

    #[test]
    fn cooked_captures_from_every_kind_of_interface_carry_ip() {
        // `tcpdump -i any` before libpcap 1.10 writes SLL: traffic on `lo`
        // comes with hardware type 772 (loopback), on a tun device 65534
        // (none), on a GRE tunnel 778; all of it used to be
        // `truncated_link`.
        let ip = tcp_ipv4(b"x");
        for hardware in [1, 772, 65534, 512, 778, 776] {
            let frame = sll(hardware, 0x0800, &ip);
            for decoded in [
                decode(&raw(LinkType::LINUX_SLL, &frame)),
                decode_lax(&raw(LinkType::LINUX_SLL, &frame), &UdpTunnels::STANDARD),
            ] {
                let Decoded::Tcp(seg, None) = decoded else {
                    panic!("hardware type {hardware}: {decoded:?}");
                };
                assert_eq!(
                    (seg.src.port(), seg.dst.port(), seg.payload),
                    (40000, 443, &b"x"[..])
                );
            }
        }
        // Netlink, radiotap and frame relay give the field other meanings;
        // Linux's own protocol numbers (here 802.2) are not IP.
        for (hardware, protocol) in [(824, 0x0800), (803, 0x0800), (770, 0x0800), (772, 0x0004)] {
            let frame = sll(hardware, protocol, &ip);
            assert_eq!(
                decode(&raw(LinkType::LINUX_SLL, &frame)),
                Decoded::NotIp,
                "{hardware}"
            );
        }
        let cut = sll(772, 0x0800, &[]);
        assert_eq!(
            decode(&raw(LinkType::LINUX_SLL, &cut[..15])),
            Decoded::Bad(AnomalyKind::TruncatedLink)
        );
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
