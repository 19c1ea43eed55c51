//! The connection table's vocabulary: a direction-free key for a TCP 4-tuple,
//! sequence numbers, and per-connection TCP state (handshake, close,
//! counters).
//!
//! Does not look into payloads: TLS and HTTP belong to `analyze`.

pub mod reassembly;
mod recent;
pub mod seq;
pub mod tcp;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::record::{Overlay, OverlayKind};

/// A TCP 4-tuple with its two endpoints in a fixed order, so both directions
/// of a connection find the same entry.
///
/// Packed into six words, cheap to compare and to hash (one lookup per
/// packet): words 0–1 and 2–3 are the two addresses as IPv6 (IPv4 mapped
/// to `::ffff:a.b.c.d`), high half first; word 4 holds both ports and, in
/// its low bits, which endpoints are IPv4, so an IPv4 endpoint and its
/// IPv4-mapped IPv6 twin stay distinct; word 5 is the overlay network
/// ([`FlowKey::within`]; 0 outside any), so the same 4-tuple in two
/// overlays is two connections. The IPv6 flow label and scope id are not
/// part of the key (decoding never sets them).
#[derive(Clone, Copy, Eq)]
pub struct FlowKey {
    words: [u64; 6],
}

impl PartialEq for FlowKey {
    /// Word by word, without branches: the derived comparison of the array
    /// calls `memcmp` (measured: 3 % of the time on a large capture).
    #[inline]
    fn eq(&self, other: &FlowKey) -> bool {
        let [a0, a1, a2, a3, a4, a5] = self.words;
        let [b0, b1, b2, b3, b4, b5] = other.words;
        ((a0 ^ b0) | (a1 ^ b1) | (a2 ^ b2) | (a3 ^ b3) | (a4 ^ b4) | (a5 ^ b5)) == 0
    }
}

/// Word 4's low bits: the first (second) endpoint is IPv4.
const LO_V4: u64 = 1;
const HI_V4: u64 = 2;

/// One endpoint as (address as IPv6, port << 1 | is IPv4): ordered by plain
/// integer comparison.
fn endpoint(a: SocketAddr) -> (u128, u32) {
    match a.ip() {
        IpAddr::V4(ip) => (
            u128::from(ip.to_ipv6_mapped()),
            (u32::from(a.port()) << 1) | 1,
        ),
        IpAddr::V6(ip) => (u128::from(ip), u32::from(a.port()) << 1),
    }
}

impl FlowKey {
    #[inline]
    pub fn new(a: SocketAddr, b: SocketAddr) -> FlowKey {
        FlowKey::ordered(a, b).0
    }

    /// The key of `a` and `b`, and whether `a` is its first endpoint
    /// ([`FlowKey::endpoints`]): which side sent a packet, without
    /// comparing addresses again.
    #[inline]
    pub fn ordered(a: SocketAddr, b: SocketAddr) -> (FlowKey, bool) {
        let (a, b) = (endpoint(a), endpoint(b));
        let a_first = a <= b;
        let (lo, hi) = if a_first { (a, b) } else { (b, a) };
        let tags = (u64::from(lo.1 & 1) * LO_V4) | (u64::from(hi.1 & 1) * HI_V4);
        let key = FlowKey {
            words: [
                (lo.0 >> 64) as u64,
                lo.0 as u64,
                (hi.0 >> 64) as u64,
                hi.0 as u64,
                (u64::from(lo.1 >> 1) << 48) | (u64::from(hi.1 >> 1) << 32) | tags,
                0,
            ],
        };
        (key, a_first)
    }

    /// The overlay network [`FlowKey::within`] put the tuple in.
    pub fn overlay(&self) -> Option<Overlay> {
        let word = self.words[5];
        let kind = match word >> 32 {
            1 => OverlayKind::Vxlan,
            2 => OverlayKind::Geneve,
            3 => OverlayKind::Gre,
            4 => OverlayKind::Erspan,
            _ => return None,
        };
        Some(Overlay {
            kind,
            id: word as u32,
        })
    }

    /// The same 4-tuple in overlay network `overlay` (`None`: in none).
    #[inline]
    pub fn within(self, overlay: Option<Overlay>) -> FlowKey {
        let Some(o) = overlay else {
            return self;
        };
        let kind = match o.kind {
            OverlayKind::Vxlan => 1,
            OverlayKind::Geneve => 2,
            OverlayKind::Gre => 3,
            OverlayKind::Erspan => 4,
        };
        let [a0, a1, a2, a3, a4, _] = self.words;
        FlowKey {
            words: [a0, a1, a2, a3, a4, (kind << 32) | u64::from(o.id)],
        }
    }

    fn ports(&self) -> (u16, u16) {
        let [_, _, _, _, w, _] = self.words;
        ((w >> 48) as u16, (w >> 32) as u16)
    }

    /// Whether `port` is the port of one of the two endpoints.
    pub fn involves_port(&self, port: u16) -> bool {
        let (lo, hi) = self.ports();
        lo == port || hi == port
    }

    /// The two endpoints, in the key's order (as decoding made them: an
    /// IPv6 endpoint's flow label and scope id are zero).
    pub fn endpoints(&self) -> (SocketAddr, SocketAddr) {
        let [a0, a1, b0, b1, w, _] = self.words;
        let (lo_port, hi_port) = self.ports();
        let addr = |h: u64, l: u64, port: u16, v4: bool| {
            let ip = Ipv6Addr::from((u128::from(h) << 64) | u128::from(l));
            match ip.to_ipv4_mapped() {
                Some(ip4) if v4 => SocketAddr::new(IpAddr::V4(ip4), port),
                // Never built by `new`: an IPv4 endpoint is always mapped.
                None if v4 => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
                _ => SocketAddr::new(IpAddr::V6(ip), port),
            }
        };
        (
            addr(a0, a1, lo_port, w & LO_V4 != 0),
            addr(b0, b1, hi_port, w & HI_V4 != 0),
        )
    }
}

impl Hash for FlowKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        let [a0, a1, b0, b1, ports, overlay] = self.words;
        // The overlay (at most 35 bits) mixed into the ports' word, clear of
        // the tags: equal keys hash equal, and keys that differ only in
        // overlay hash apart, with no extra write on the usual path.
        let w = ports ^ (overlay << 2);
        if ports & (LO_V4 | HI_V4) == LO_V4 | HI_V4 {
            // Two IPv4 endpoints (the usual case): both addresses, both
            // ports and the tags fit one 128-bit write. The high halves
            // `a0`, `b0` are zero and the low ones `::ffff:` and 32 bits.
            state.write_u128((u128::from((a1 << 32) | (b1 & 0xffff_ffff)) << 64) | u128::from(w));
        } else {
            state.write_u128((u128::from(a0) << 64) | u128::from(a1));
            state.write_u128((u128::from(b0) << 64) | u128::from(b1));
            state.write_u64(w);
        }
    }
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (lo, hi) = self.endpoints();
        f.debug_struct("FlowKey")
            .field("lo", &lo)
            .field("hi", &hi)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn both_directions_share_a_key() {
        let a = addr("10.0.0.1:40000");
        let b = addr("[::1]:443");
        assert_eq!(FlowKey::new(a, b), FlowKey::new(b, a));
        assert!(FlowKey::new(a, b).involves_port(443));
        assert!(FlowKey::new(a, b).involves_port(40000));
        assert!(!FlowKey::new(a, b).involves_port(80));
    }

    #[test]
    fn key_is_small() {
        assert_eq!(std::mem::size_of::<FlowKey>(), 48);
    }

    #[test]
    fn the_same_tuple_in_two_overlays_is_two_keys() {
        let (a, b) = (addr("10.0.0.1:40000"), addr("10.0.0.2:80"));
        let net = |kind, id| Some(Overlay { kind, id });
        let overlays = [
            None,
            net(OverlayKind::Vxlan, 0),
            net(OverlayKind::Vxlan, 1),
            net(OverlayKind::Geneve, 1),
            net(OverlayKind::Gre, u32::MAX),
            net(OverlayKind::Erspan, 1),
        ];
        let keys = overlays.map(|o| FlowKey::new(a, b).within(o));
        for (i, k) in keys.iter().enumerate() {
            for other in &keys[i + 1..] {
                assert_ne!(k, other);
            }
            // And gives its overlay back.
            assert_eq!(k.overlay(), overlays[i]);
        }
        let vni = net(OverlayKind::Vxlan, 7);
        let (ab, ba) = (
            FlowKey::new(a, b).within(vni),
            FlowKey::new(b, a).within(vni),
        );
        assert_eq!(ab, ba);
        assert_eq!(hash_of(&ab), hash_of(&ba));
        assert_eq!(FlowKey::new(a, b).within(None), FlowKey::new(a, b));
    }

    fn hash_of(k: &FlowKey) -> u64 {
        use std::hash::BuildHasher;
        // A fixed state, so equal keys must give equal hashes.
        foldhash::fast::FixedState::with_seed(7).hash_one(k)
    }

    /// Endpoints that differ only in family, in mapping, or slightly.
    fn endpoints() -> Vec<SocketAddr> {
        [
            "10.0.0.1:443",
            "[::ffff:10.0.0.1]:443",
            "[::a00:1]:443",
            "[a00:1::]:443",
            "10.0.0.1:444",
            "10.0.0.2:443",
            "0.0.0.0:0",
            "[::]:0",
            "[::ffff:0.0.0.0]:0",
            "255.255.255.255:65535",
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
            "[::ffff:255.255.255.255]:65535",
            "[2001:db8::1]:1",
            "[2001:db8::1]:256",
            "1.0.0.0:1",
            "0.0.0.1:256",
        ]
        .iter()
        .map(|s| addr(s))
        .collect()
    }

    #[test]
    fn distinct_tuples_give_distinct_keys_and_symmetry_holds() {
        let eps = endpoints();
        let mut keys = HashSet::new();
        let mut tuples = HashSet::new();
        for (i, &a) in eps.iter().enumerate() {
            for &b in &eps[i..] {
                let k = FlowKey::new(a, b);
                assert_eq!(k, FlowKey::new(b, a), "{a} {b}");
                assert_eq!(hash_of(&k), hash_of(&FlowKey::new(b, a)));
                assert!(k.involves_port(a.port()) && k.involves_port(b.port()));
                let (lo, hi) = k.endpoints();
                assert!(
                    (lo, hi) == (a, b) || (lo, hi) == (b, a),
                    "{k:?} from {a} {b}"
                );
                let (ka, a_first) = FlowKey::ordered(a, b);
                let (kb, b_first) = FlowKey::ordered(b, a);
                assert_eq!((ka, kb), (k, k));
                assert_eq!(if a_first { lo } else { hi }, a, "{a} {b}");
                assert_eq!(if b_first { lo } else { hi }, b, "{a} {b}");
                assert!(a_first != b_first || a == b, "{a} {b}");
                keys.insert(k);
                tuples.insert((a, b));
            }
        }
        assert_eq!(keys.len(), tuples.len(), "two tuples share a key");
    }

    #[test]
    fn v4_and_v4_mapped_v6_are_different_keys() {
        let v4 = FlowKey::new(addr("10.0.0.1:40000"), addr("10.0.0.2:80"));
        let mapped = FlowKey::new(
            addr("[::ffff:10.0.0.1]:40000"),
            addr("[::ffff:10.0.0.2]:80"),
        );
        let half = FlowKey::new(addr("10.0.0.1:40000"), addr("[::ffff:10.0.0.2]:80"));
        let compat = FlowKey::new(addr("[::a00:1]:40000"), addr("[::a00:2]:80"));
        let all = [v4, mapped, half, compat];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn endpoints_order_with_the_same_address_or_port() {
        // Same address both sides (loopback to itself), and same port.
        let a = addr("127.0.0.1:5000");
        let b = addr("127.0.0.1:6000");
        assert_eq!(FlowKey::new(a, b), FlowKey::new(b, a));
        let c = addr("127.0.0.2:5000");
        assert_eq!(FlowKey::new(a, c), FlowKey::new(c, a));
        assert_ne!(FlowKey::new(a, b), FlowKey::new(a, c));
        assert_eq!(FlowKey::new(a, a), FlowKey::new(a, a));
    }
}
