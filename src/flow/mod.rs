//! The connection table's vocabulary: a direction-free key for a TCP 4-tuple,
//! sequence numbers, and per-connection TCP state (handshake, close,
//! counters).
//!
//! Does not look into payloads: TLS and HTTP belong to `analyze`.

pub mod reassembly;
pub mod seq;
pub mod tcp;

use std::net::SocketAddr;

/// A TCP 4-tuple with its two endpoints in a fixed order, so both directions
/// of a connection find the same entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    lo: SocketAddr,
    hi: SocketAddr,
}

impl FlowKey {
    pub fn new(a: SocketAddr, b: SocketAddr) -> FlowKey {
        if a <= b {
            FlowKey { lo: a, hi: b }
        } else {
            FlowKey { lo: b, hi: a }
        }
    }

    /// Whether `addr` is one of the two endpoints.
    pub fn involves_port(&self, port: u16) -> bool {
        self.lo.port() == port || self.hi.port() == port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_share_a_key() {
        let a: SocketAddr = "10.0.0.1:40000".parse().expect("addr");
        let b: SocketAddr = "[::1]:443".parse().expect("addr");
        assert_eq!(FlowKey::new(a, b), FlowKey::new(b, a));
        assert!(FlowKey::new(a, b).involves_port(443));
    }
}
