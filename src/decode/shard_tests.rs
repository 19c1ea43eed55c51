//! `shard_hash`: the same value in both directions whatever path decodes
//! the frame, fixed across runs and machines, and spread evenly over shards.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};

use super::differential::packet;
use super::*;
use crate::source::LinkType;

/// The functions under test with the standard tunnel ports (these shadow
/// the glob import).
fn shard_hash(p: &RawPacket<'_>) -> u64 {
    super::shard_hash(p, &UdpTunnels::STANDARD)
}

mod fast {
    pub(super) use super::super::fast::{hash_endpoints, Fast};
    use super::{RawPacket, UdpTunnels};

    pub(super) fn parse<'a>(p: &RawPacket<'a>) -> Fast<'a> {
        super::super::fast::parse(p, &UdpTunnels::STANDARD)
    }
}

fn tcp_frame(src: SocketAddr, dst: SocketAddr, vlan: bool) -> Vec<u8> {
    let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let ip = match (vlan, src.ip(), dst.ip()) {
        (false, IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 64),
        (false, IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), 64),
        (true, IpAddr::V4(s), IpAddr::V4(d)) => eth
            .single_vlan(etherparse::VlanId::try_from(0x64u16).expect("VLAN id"))
            .ipv4(s.octets(), d.octets(), 64),
        (true, IpAddr::V6(s), IpAddr::V6(d)) => eth
            .single_vlan(etherparse::VlanId::try_from(0x64u16).expect("VLAN id"))
            .ipv6(s.octets(), d.octets(), 64),
        _ => panic!("mixed address families"),
    };
    let builder = ip
        .tcp(src.port(), dst.port(), 7, 65535)
        .syn()
        .options(&[etherparse::TcpOptionElement::MaximumSegmentSize(1460)])
        .expect("options fit");
    let mut out = Vec::new();
    builder.write(&mut out, &[]).expect("writes to a Vec");
    out
}

fn eth(data: &[u8]) -> RawPacket<'_> {
    packet(LinkType::ETHERNET, data.len() as u32, data)
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

#[test]
fn shard_hash_is_symmetric_on_every_path() {
    let pairs = [
        ("10.0.0.1:40000", "10.0.0.2:443"),
        ("10.0.0.2:443", "10.0.0.1:443"),
        ("192.0.2.7:80", "192.0.2.7:81"),
        ("[2001:db8::1]:50000", "[2001:db8::2]:443"),
        ("[::1]:8080", "[::1]:8081"),
        ("[fe80::1]:1", "[2001:db8::1]:1"),
    ];
    for (a, b) in pairs {
        let (a, b) = (addr(a), addr(b));
        let forward = tcp_frame(a, b, false);
        let back = tcp_frame(b, a, false);
        let h = shard_hash(&eth(&forward));
        assert!(matches!(fast::parse(&eth(&forward)), Fast::Tcp(_)));
        assert_eq!(h, shard_hash(&eth(&back)), "{a} ↔ {b}");
        assert_eq!(h, fast::hash_endpoints(a, b));
        assert_eq!(h, fast::hash_endpoints(b, a));
        assert_ne!(h, 0);
        // One VLAN tag (fast), raw IP (fast), two tags (lax), the TCP
        // options cut off (lax, fixed header only): the same value.
        let tagged = tcp_frame(b, a, true);
        assert_eq!(h, shard_hash(&eth(&tagged)), "VLAN {a} ↔ {b}");
        let raw = packet(LinkType::RAW, 0, &back[14..]);
        assert_eq!(h, shard_hash(&raw), "raw {a} ↔ {b}");
        let mut qinq = tagged[..12].to_vec();
        qinq.extend_from_slice(&[0x88, 0xa8, 0x00, 0x0a]);
        qinq.extend_from_slice(&tagged[12..]);
        assert!(matches!(fast::parse(&eth(&qinq)), Fast::Fallback));
        assert!(matches!(decode(&eth(&qinq)), Decoded::Tcp(..)));
        assert_eq!(h, shard_hash(&eth(&qinq)), "QinQ {a} ↔ {b}");
        let cut = &forward[..forward.len() - 2];
        let cut = packet(LinkType::ETHERNET, forward.len() as u32, cut);
        assert!(matches!(fast::parse(&cut), Fast::Fallback));
        assert!(matches!(
            decode(&cut),
            Decoded::Tcp(_, Some(AnomalyKind::TruncatedTcp))
        ));
        assert_eq!(h, shard_hash(&cut), "cut options {a} ↔ {b}");
    }
    // Not TCP: 0.
    assert_eq!(shard_hash(&eth(&[0u8; 60])), 0);
}

/// The values are part of the contract: shards must agree between runs and
/// machines, so a change here is a breaking change.
#[test]
fn shard_hash_does_not_change_between_runs_or_machines() {
    let frame = tcp_frame(addr("10.0.0.1:40000"), addr("10.0.0.2:443"), false);
    assert_eq!(shard_hash(&eth(&frame)), 0x497d_6770_3fd9_124c);
    let frame = tcp_frame(
        addr("[2001:db8::1]:50000"),
        addr("[2001:db8::2]:443"),
        false,
    );
    assert_eq!(shard_hash(&eth(&frame)), 0xc224_a2ef_59eb_a45e);
}

/// No collisions, and the count in each bucket of `hash % n` within five
/// standard deviations of an even share (as a uniform hash would be).
fn assert_spread(name: &str, hashes: &[u64]) {
    let distinct: HashSet<u64> = hashes.iter().copied().collect();
    assert_eq!(distinct.len(), hashes.len(), "{name}: collisions");
    // Spread in the low bits (a remainder) and in the high bits (a
    // multiply, as `--threads` picks shards).
    let remainder: fn(u64, u64) -> usize = |h, n| (h % n) as usize;
    let scaled: fn(u64, u64) -> usize = |h, n| ((u128::from(h) * u128::from(n)) >> 64) as usize;
    for (n, pick) in [2u64, 4, 8, 12]
        .into_iter()
        .flat_map(|n| [(n, remainder), (n, scaled)])
    {
        let mut buckets = vec![0usize; n as usize];
        for &h in hashes {
            buckets[pick(h, n)] += 1;
        }
        let p = 1.0 / n as f64;
        let even = hashes.len() as f64 * p;
        let sigma = (even * (1.0 - p)).sqrt();
        for (i, &count) in buckets.iter().enumerate() {
            assert!(
                (count as f64 - even).abs() <= 5.0 * sigma,
                "{name}: {n} buckets: bucket {i} has {count} of {} ({buckets:?})",
                hashes.len()
            );
        }
    }
}

#[test]
fn shard_hash_spreads_connections_over_shards() {
    let server4 = addr("192.0.2.1:443");
    let server6 = addr("[2001:db8::443]:443");
    let hash = |a: SocketAddr, b: SocketAddr| shard_hash(&eth(&tcp_frame(a, b, false)));
    // One client, consecutive ephemeral ports (the usual case).
    let ports4: Vec<u64> = (0..4096u16)
        .map(|i| hash(SocketAddr::new([10, 0, 0, 1].into(), 32768 + i), server4))
        .collect();
    assert_spread("IPv4, one client, consecutive ports", &ports4);
    let ports6: Vec<u64> = (0..4096u16)
        .map(|i| {
            let client: IpAddr = "2001:db8::1".parse().expect("address");
            hash(SocketAddr::new(client, 32768 + i), server6)
        })
        .collect();
    assert_spread("IPv6, one client, consecutive ports", &ports6);
    // Many clients, one port each.
    let clients4: Vec<u64> = (0..4096u16)
        .map(|i| {
            let [hi, lo] = i.to_be_bytes();
            hash(SocketAddr::new([10, 1, hi, lo].into(), 50000), server4)
        })
        .collect();
    assert_spread("IPv4, consecutive clients", &clients4);
    let clients6: Vec<u64> = (0..4096u16)
        .map(|i| {
            let client = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 1, i);
            hash(SocketAddr::new(client.into(), 50000), server6)
        })
        .collect();
    assert_spread("IPv6, consecutive clients", &clients6);
}
