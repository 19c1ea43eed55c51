//! TCP segments and the link-layer frames that carry them: Ethernet (plain,
//! 802.1Q, QinQ), raw IPv4/IPv6 (optionally with an IPv6 extension header),
//! Linux SLL and SLL2, BSD NULL and OpenBSD LOOP. Built with etherparse's
//! `PacketBuilder`; the headers it does not know (SLL2, NULL, LOOP) are
//! prefixed by hand.

use std::net::{IpAddr, SocketAddr};

use etherparse::{
    ArpHardwareId, ArpOperation, ArpPacket, EtherType, IpFragOffset, IpHeaders, IpNumber,
    Ipv4Header, Ipv6Extensions, Ipv6FragmentHeader, Ipv6Header, Ipv6RawExtHeader,
    LinuxSllPacketType, PacketBuilder, TcpHeader, VlanId,
};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// An IPv6 extension header to put between the IPv6 header and TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipv6Ext {
    HopByHop,
    DestinationOptions,
    /// A fragment header: the first fragment, more to follow.
    Fragment,
}

/// One TCP segment, before it is framed.
#[derive(Clone, Debug)]
pub struct Seg {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    /// The acknowledgment number; `Some` sets the ACK flag.
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
    pub window: u16,
    pub payload: Vec<u8>,
    pub ipv6_ext: Option<Ipv6Ext>,
}

impl Seg {
    pub fn new(src: SocketAddr, dst: SocketAddr, seq: u32) -> Seg {
        Seg {
            src,
            dst,
            seq,
            ack: None,
            syn: false,
            fin: false,
            rst: false,
            psh: false,
            window: 64240,
            payload: Vec::new(),
            ipv6_ext: None,
        }
    }

    pub fn tcp_header(&self) -> TcpHeader {
        let mut h = TcpHeader::new(self.src.port(), self.dst.port(), self.seq, self.window);
        h.syn = self.syn;
        h.fin = self.fin;
        h.rst = self.rst;
        h.psh = self.psh;
        if let Some(ack) = self.ack {
            h.ack = true;
            h.acknowledgment_number = ack;
        }
        h
    }

    /// The IP header(s) for this segment's addresses (lengths, protocol and
    /// checksum are filled in by `PacketBuilder`).
    pub fn ip_headers(&self) -> IpHeaders {
        ip_headers(self.src.ip(), self.dst.ip(), self.ipv6_ext)
    }
}

/// IP headers between two addresses of the same family.
pub fn ip_headers(src: IpAddr, dst: IpAddr, ext: Option<Ipv6Ext>) -> IpHeaders {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => IpHeaders::Ipv4(
            Ipv4Header::new(0, 64, IpNumber::TCP, s.octets(), d.octets()).expect("ipv4 header"),
            Default::default(),
        ),
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut exts = Ipv6Extensions::default();
            // PadN option filling the 6 bytes after next-header and length.
            let padn = Ipv6RawExtHeader::new_raw(IpNumber::TCP, &[1, 4, 0, 0, 0, 0])
                .expect("ipv6 ext header");
            match ext {
                Some(Ipv6Ext::HopByHop) => exts.hop_by_hop_options = Some(padn),
                Some(Ipv6Ext::DestinationOptions) => exts.destination_options = Some(padn),
                Some(Ipv6Ext::Fragment) => {
                    exts.fragment = Some(Ipv6FragmentHeader::new(
                        IpNumber::TCP,
                        IpFragOffset::ZERO,
                        true,
                        0x1234,
                    ))
                }
                None => {}
            }
            let header = Ipv6Header {
                hop_limit: 64,
                source: s.octets(),
                destination: d.octets(),
                ..Default::default()
            };
            IpHeaders::Ipv6(header, exts)
        }
        _ => panic!("mixed address families: {src} and {dst}"),
    }
}

/// A link-layer encapsulation with its LINKTYPE_ number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Ethernet,
    /// One 802.1Q tag.
    Vlan(u16),
    /// Two tags (outer, inner).
    QinQ(u16, u16),
    /// Raw IP with LINKTYPE_RAW (101) or the DLT value 12 (or 228/229).
    Raw(u32),
    /// Linux cooked capture v1 (16-byte header).
    Sll,
    /// Linux cooked capture v2 (20-byte header).
    Sll2,
    /// BSD loopback: 4-byte address family in host (here: little-endian) order.
    Null,
    /// OpenBSD loopback: 4-byte address family in network order.
    Loop,
}

impl Link {
    pub fn linktype(self) -> u32 {
        match self {
            Link::Ethernet | Link::Vlan(_) | Link::QinQ(..) => 1,
            Link::Raw(n) => n,
            Link::Sll => 113,
            Link::Sll2 => 276,
            Link::Null => 0,
            Link::Loop => 108,
        }
    }

    /// The whole frame carrying `seg`.
    pub fn frame(self, seg: &Seg) -> Vec<u8> {
        let ip = seg.ip_headers();
        let is_v6 = matches!(ip, IpHeaders::Ipv6(..));
        let step = match self {
            Link::Ethernet => PacketBuilder::ethernet2(MAC_A, MAC_B).ip(ip),
            Link::Vlan(id) => PacketBuilder::ethernet2(MAC_A, MAC_B)
                .single_vlan(vlan_id(id))
                .ip(ip),
            Link::QinQ(outer, inner) => PacketBuilder::ethernet2(MAC_A, MAC_B)
                .double_vlan(vlan_id(outer), vlan_id(inner))
                .ip(ip),
            Link::Sll => {
                let mut addr = [0u8; 8];
                addr[..6].copy_from_slice(&MAC_A);
                PacketBuilder::linux_sll(LinuxSllPacketType::OUTGOING, 6, addr).ip(ip)
            }
            Link::Raw(_) | Link::Sll2 | Link::Null | Link::Loop => PacketBuilder::ip(ip),
        };
        let mut out = self.prefix(is_v6);
        step.tcp_header(seg.tcp_header())
            .write(&mut out, &seg.payload)
            .expect("build frame");
        out
    }

    /// The hand-made link header of the types `PacketBuilder` cannot write.
    fn prefix(self, is_v6: bool) -> Vec<u8> {
        match self {
            Link::Sll2 => {
                let ether_type: u16 = if is_v6 { 0x86dd } else { 0x0800 };
                let mut h = ether_type.to_be_bytes().to_vec();
                h.extend_from_slice(&[0, 0]); // reserved
                h.extend_from_slice(&3u32.to_be_bytes()); // interface index
                h.extend_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
                h.push(4); // outgoing
                h.push(6); // address length
                h.extend_from_slice(&MAC_A);
                h.extend_from_slice(&[0, 0]);
                assert_eq!(h.len(), 20);
                h
            }
            // AF_INET6 is 30 on macOS (NULL) and 24 on OpenBSD (LOOP).
            Link::Null => (if is_v6 { 30u32 } else { 2 }).to_le_bytes().to_vec(),
            Link::Loop => (if is_v6 { 24u32 } else { 2 }).to_be_bytes().to_vec(),
            _ => Vec::new(),
        }
    }

    /// The length of the link header in front of the IP header.
    pub fn header_len(self) -> usize {
        match self {
            Link::Ethernet => 14,
            Link::Vlan(_) => 18,
            Link::QinQ(..) => 22,
            Link::Raw(_) => 0,
            Link::Sll => 16,
            Link::Sll2 => 20,
            Link::Null | Link::Loop => 4,
        }
    }
}

fn vlan_id(id: u16) -> VlanId {
    VlanId::try_new(id).expect("vlan id below 4096")
}

/// An Ethernet frame carrying a UDP datagram.
pub fn udp_frame(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let (IpAddr::V4(s), IpAddr::V4(d)) = (src.ip(), dst.ip()) else {
        panic!("udp_frame takes IPv4 addresses");
    };
    PacketBuilder::ethernet2(MAC_A, MAC_B)
        .ipv4(s.octets(), d.octets(), 64)
        .udp(src.port(), dst.port())
        .write(&mut out, payload)
        .expect("build UDP frame");
    out
}

/// An Ethernet frame carrying an ARP request.
pub fn arp_frame() -> Vec<u8> {
    let arp = ArpPacket::new(
        ArpHardwareId::ETHERNET,
        EtherType::IPV4,
        ArpOperation::REQUEST,
        &MAC_A,
        &[10, 0, 0, 1],
        &[0; 6],
        &[10, 0, 0, 2],
    )
    .expect("arp packet");
    let mut out = Vec::new();
    PacketBuilder::ethernet2(MAC_A, [0xff; 6])
        .arp(arp)
        .write(&mut out)
        .expect("build ARP frame");
    out
}

/// An Ethernet frame carrying `seg` as an IPv4 fragment (`offset` in 8-byte
/// units, `more` = more-fragments flag).
pub fn ipv4_fragment_frame(seg: &Seg, offset: u16, more: bool) -> Vec<u8> {
    let IpHeaders::Ipv4(mut header, exts) = seg.ip_headers() else {
        panic!("ipv4_fragment_frame takes an IPv4 segment");
    };
    header.identification = 0x1234;
    header.more_fragments = more;
    header.fragment_offset = offset.try_into().expect("fragment offset");
    let mut out = Vec::new();
    PacketBuilder::ethernet2(MAC_A, MAC_B)
        .ip(IpHeaders::Ipv4(header, exts))
        .tcp_header(seg.tcp_header())
        .write(&mut out, &seg.payload)
        .expect("build fragment");
    out
}
