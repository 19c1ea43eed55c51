//! Traffic mixes: who talks to whom and what a connection looks like.
//!
//! * `web` (the default): browsers and keep-alive clients, 2 200 client
//!   addresses with a few busy ones, six HTTPS, two IPv6 HTTPS and three
//!   HTTP servers, 1–50 requests per connection, responses of 1 KB to
//!   200 KB.
//! * `short`: clients without connection pooling (Java `HttpURLConnection`
//!   with keep-alive off) against a rate-limited API: 64 application hosts
//!   (48 IPv4, 16 IPv6), a few API addresses on 443, 80 and 8080, one
//!   request per connection (a fifth have two), responses of a few hundred
//!   bytes to a few KB (a tenth of the cleartext ones 429 with
//!   Retry-After), `Connection: close`, mostly no ALPN, FIN closes with
//!   some RSTs, and port reuse both right after a close that left the
//!   client no TIME_WAIT and as the busiest clients' ephemeral ports (in
//!   even steps) wrap around.
//!
//! Owns: [`Mix`], each mix's population and the random choices that differ
//! between mixes (requests, close, TLS options, timing, body sizes).
//! Does not own: how the choices are used (`sim.rs`, `plan.rs`, `http.rs`).
//! The `web` arms draw from the RNG exactly as the generator always did, so
//! `--mix web` captures stay identical byte for byte for a seed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::conn::{CloseKind, Host, Server};
use crate::rng::Rng;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mix {
    Web,
    Short,
}

/// Clients (IPv4 first, then IPv6), the index of the first IPv6 client, and
/// the servers.
pub(crate) struct Population {
    pub(crate) clients: Vec<Host>,
    pub(crate) clients_v6: usize,
    pub(crate) servers: Vec<Server>,
}

const SNI_V4: [&str; 6] = [
    "www.example.com",
    "api.example.com",
    "cdn.example.net",
    "static.example.org",
    "login.example.com",
    "img.example.net",
];

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn v6(c: u16, h: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, c, 0, 0, 0, 0, h))
}

fn server(ip: IpAddr, tag: u8, i: usize, port: u16, sni: &'static str, tls13: bool) -> Server {
    Server {
        host: Host::new(ip, tag, i),
        port,
        sni,
        tls13,
    }
}

impl Mix {
    pub(crate) fn parse(s: &str) -> Option<Mix> {
        match s {
            "web" => Some(Mix::Web),
            "short" => Some(Mix::Short),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mix::Web => "web",
            Mix::Short => "short",
        }
    }

    pub(crate) fn population(self) -> Population {
        match self {
            Mix::Web => web_population(),
            Mix::Short => short_population(),
        }
    }

    /// The share of connections from IPv6 clients, and the skew of the
    /// client choice (index = n · unit^skew: higher is busier at the top).
    pub(crate) fn client_choice(self) -> (f64, f64) {
        match self {
            Mix::Web => (0.1, 3.0),
            Mix::Short => (0.1, 2.0),
        }
    }

    /// The share of cleartext HTTP connections.
    pub(crate) fn cleartext(self) -> f64 {
        match self {
            Mix::Web => 0.15,
            Mix::Short => 0.3,
        }
    }

    pub(crate) fn requests(self, rng: &mut Rng) -> u32 {
        match self {
            Mix::Web => match rng.below(100) {
                0..45 => 1,
                45..75 => rng.range(2, 10) as u32,
                _ => rng.range(11, 50) as u32,
            },
            Mix::Short => 1 + u32::from(rng.chance(0.2)),
        }
    }

    pub(crate) fn close(self, rng: &mut Rng) -> CloseKind {
        let shares = match self {
            Mix::Web => [45, 80, 92],
            // The client closes once it has read the response; the server
            // when told `Connection: close`; RSTs from aborts and SO_LINGER 0.
            Mix::Short => [50, 85, 95],
        };
        match rng.below(100) {
            n if n < shares[0] => CloseKind::FinClient,
            n if n < shares[1] => CloseKind::FinServer,
            n if n < shares[2] => CloseKind::RstClient,
            _ => CloseKind::RstServer,
        }
    }

    /// Whether a closed connection's tuple may be reused right away: in the
    /// short mix only when the client kept no TIME_WAIT (the server closed
    /// first, or a RST).
    pub(crate) fn reusable(self, close: CloseKind) -> bool {
        self == Mix::Web || close != CloseKind::FinClient
    }

    /// How far a client's next ephemeral port is from its last: Linux
    /// hands `connect()` even steps, and other sockets take some in between.
    pub(crate) fn port_step(self, rng: &mut Rng) -> u32 {
        match self {
            Mix::Web => 1,
            Mix::Short => 2 * rng.range(1, 3) as u32,
        }
    }

    /// TLS: the chance the client offers 1.3, and of resuming a session it has.
    pub(crate) fn tls_chances(self) -> (f64, f64) {
        match self {
            Mix::Web => (0.9, 0.7),
            Mix::Short => (0.85, 0.8),
        }
    }

    /// The ALPN protocols a TLS client offers.
    pub(crate) fn alpn(self, rng: &mut Rng) -> &'static [&'static str] {
        let (both, http1) = match self {
            Mix::Web => (6, 9),
            // Mostly HttpURLConnection, which offers no ALPN.
            Mix::Short => (2, 5),
        };
        match rng.below(10) {
            n if n < both => &["h2", "http/1.1"],
            n if n < http1 => &["http/1.1"],
            _ => &[],
        }
    }

    /// Round-trip time, ns.
    pub(crate) fn rtt(self, rng: &mut Rng) -> u64 {
        match self {
            Mix::Web => rng.log_uniform(300_000, 120_000_000),
            Mix::Short => rng.log_uniform(200_000, 30_000_000),
        }
    }

    /// The pause between a connection's end and the next one's SYN, ns.
    pub(crate) fn spawn_gap(self, rng: &mut Rng) -> u64 {
        match self {
            Mix::Web => rng.log_uniform(10_000, 20_000_000),
            Mix::Short => rng.log_uniform(10_000, 5_000_000),
        }
    }

    /// For one exchange: the delay before the request, before the response
    /// (after half a round trip `half`), and the response body's size.
    pub(crate) fn exchange(self, rng: &mut Rng, first: bool, half: u64) -> (u64, u64, usize) {
        match self {
            Mix::Web => {
                let request = if first {
                    rng.log_uniform(20_000, 300_000)
                } else {
                    rng.log_uniform(50_000, 400_000_000)
                };
                let response = half + rng.log_uniform(100_000, 40_000_000);
                // The body: mostly small, some medium, a few large.
                let body = match rng.below(100) {
                    0..60 => rng.log_uniform(1024, 16 * 1024),
                    60..90 => rng.log_uniform(16 * 1024, 64 * 1024),
                    _ => rng.log_uniform(64 * 1024, 200 * 1024),
                } as usize;
                (request, response, body)
            }
            Mix::Short => {
                let request = if first {
                    rng.log_uniform(20_000, 300_000)
                } else {
                    rng.log_uniform(50_000, 20_000_000)
                };
                let response = half + rng.log_uniform(300_000, 50_000_000);
                // Hundreds of bytes to a few KB, now and then more.
                let body = match rng.below(100) {
                    0..85 => rng.log_uniform(100, 2048),
                    85..98 => rng.log_uniform(2048, 8192),
                    _ => rng.log_uniform(8192, 32 * 1024),
                } as usize;
                (request, response, body)
            }
        }
    }
}

fn web_population() -> Population {
    let mut clients = Vec::new();
    for i in 0..2000usize {
        let ip = v4(
            10,
            1 + (i / 250) as u8,
            (i % 250) as u8 + 1,
            10 + (i % 7) as u8,
        );
        clients.push(Host::new(ip, 0x10, i));
    }
    let clients_v6 = clients.len();
    for i in 0..200usize {
        let ip = IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            0x100,
            (i / 200) as u16,
            0,
            0,
            0x1000,
            i as u16 + 1,
        ));
        clients.push(Host::new(ip, 0x16, i));
    }
    let mut servers = Vec::new();
    for (i, sni) in SNI_V4.iter().enumerate() {
        let ip = v4(198, 51, 100, 10 + i as u8);
        servers.push(server(ip, 0x20, i, 443, sni, i != 3 && i != 5));
    }
    for (i, sni) in ["www.example.com", "api.example.com"].iter().enumerate() {
        servers.push(server(v6(0x443, i as u16 + 1), 0x26, i, 443, sni, true));
    }
    for i in 0..2u8 {
        let ip = v4(203, 0, 113, 80 + i);
        servers.push(server(ip, 0x28, usize::from(i), 80, "", false));
    }
    servers.push(server(v6(0x80, 1), 0x29, 0, 80, "", false));
    Population {
        clients,
        clients_v6,
        servers,
    }
}

fn short_population() -> Population {
    let mut clients = Vec::new();
    for i in 0..48usize {
        clients.push(Host::new(v4(10, 20, (i / 16) as u8, 11 + i as u8), 0x30, i));
    }
    let clients_v6 = clients.len();
    for i in 0..16usize {
        let ip = IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            0x200,
            0,
            0,
            0,
            0x20,
            i as u16 + 1,
        ));
        clients.push(Host::new(ip, 0x36, i));
    }
    let servers = vec![
        // Two addresses of the API, one of its auth service (TLS 1.2 only).
        server(v4(198, 51, 100, 20), 0x40, 0, 443, "api.example.com", true),
        server(v4(198, 51, 100, 21), 0x40, 1, 443, "api.example.com", true),
        server(
            v4(198, 51, 100, 22),
            0x40,
            2,
            443,
            "auth.example.com",
            false,
        ),
        server(v6(0x443, 0x20), 0x46, 0, 443, "api.example.com", true),
        // Internal cleartext endpoints.
        server(v4(203, 0, 113, 90), 0x48, 0, 80, "", false),
        server(v4(203, 0, 113, 91), 0x48, 1, 8080, "", false),
        server(v6(0x80, 0x20), 0x49, 0, 80, "", false),
    ];
    Population {
        clients,
        clients_v6,
        servers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mix_has_a_server_for_each_family_and_protocol() {
        for mix in [Mix::Web, Mix::Short] {
            let p = mix.population();
            assert!(p.clients_v6 > 0 && p.clients_v6 < p.clients.len());
            assert!(p.clients[..p.clients_v6].iter().all(|h| h.ip.is_ipv4()));
            assert!(p.clients[p.clients_v6..].iter().all(|h| h.ip.is_ipv6()));
            for v6 in [false, true] {
                for clear in [false, true] {
                    let n = p
                        .servers
                        .iter()
                        .filter(|s| s.host.ip.is_ipv6() == v6 && s.cleartext() == clear)
                        .count();
                    assert!(n > 0, "{} v6 {v6} cleartext {clear}", mix.name());
                }
            }
        }
    }

    #[test]
    fn short_connections_have_one_or_two_small_exchanges() {
        let mut rng = Rng::new(9);
        for _ in 0..1000 {
            assert!((1..=2).contains(&Mix::Short.requests(&mut rng)));
            let (_, _, body) = Mix::Short.exchange(&mut rng, true, 0);
            assert!(body <= 32 * 1024);
        }
        assert_eq!(Mix::parse("short"), Some(Mix::Short));
        assert_eq!(Mix::parse(Mix::Web.name()), Some(Mix::Web));
    }
}
