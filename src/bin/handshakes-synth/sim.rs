//! The discrete-event simulation: the client and server population, the
//! event heap that interleaves connections packet by packet, opening new
//! connections (port reuse, resumable sessions) until the size target is
//! near, and the statistics printed at the end.
//!
//! Owns: [`Sim`] (construction, `run`, `spawn`, `finished`) and [`Stats`].
//! Does not own: a connection's packets (`conn.rs`) or its conversation
//! (`plan.rs`), both further `impl Sim` blocks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::conn::{App, CloseKind, Conn, Host, Server, State, Tls, Tuple};
use crate::flight::Fills;
use crate::pcap::Out;
use crate::rng::Rng;
use crate::tls::CIPHERS_13;

// ---------------------------------------------------------------------------
// The simulation.

#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) connections: u64,
    pub(crate) ipv6: u64,
    pub(crate) cleartext: u64,
    pub(crate) tls: u64,
    pub(crate) tls13_full: u64,
    pub(crate) tls13_resumed: u64,
    pub(crate) tls12_full: u64,
    pub(crate) tls12_resumed: u64,
    pub(crate) h2: u64,
    pub(crate) requests_cleartext: u64,
    pub(crate) requests_tls_http1: u64,
    pub(crate) requests_tls_h2: u64,
    pub(crate) chunked_responses: u64,
    pub(crate) closes: [u64; 4],
    pub(crate) port_reuses: u64,
    pub(crate) reordered: u64,
    pub(crate) retransmitted: u64,
    pub(crate) max_concurrent: u64,
    pub(crate) close_notify_replies: u64,
}

pub(crate) struct Sim {
    pub(crate) rng: Rng,
    pub(crate) fills: Fills,
    pub(crate) out: Out,
    target: u64,
    pub(crate) concurrency: usize,
    pub(crate) clients: Vec<Host>,
    /// Index of the first IPv6 client.
    clients_v6: usize,
    pub(crate) servers: Vec<Server>,
    /// Per client: the next ephemeral port.
    ports: Vec<u16>,
    /// Sessions a client can resume: (client, server) → TLS 1.3, session id.
    pub(crate) sessions: HashMap<(usize, usize), (bool, Vec<u8>)>,
    active: HashSet<Tuple>,
    /// Tuples closed lately, for deliberate port reuse.
    recently_closed: VecDeque<(Tuple, usize, usize)>,
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    pub(crate) order: u64,
    live: usize,
    pub(crate) winding_down: bool,
    pub(crate) stats: Stats,
}

const SNI_V4: [&str; 6] = [
    "www.example.com",
    "api.example.com",
    "cdn.example.net",
    "static.example.org",
    "login.example.com",
    "img.example.net",
];

impl Sim {
    pub(crate) fn new(
        seed: u64,
        target: u64,
        concurrency: usize,
        w: Box<dyn Write>,
    ) -> io::Result<Sim> {
        let mut rng = Rng::new(seed);
        let fills = Fills::new(&mut rng);
        let mut clients = Vec::new();
        for i in 0..2000usize {
            let ip = Ipv4Addr::new(
                10,
                1 + (i / 250) as u8,
                (i % 250) as u8 + 1,
                10 + (i % 7) as u8,
            );
            clients.push(Host::new(IpAddr::V4(ip), 0x10, i));
        }
        let clients_v6 = clients.len();
        for i in 0..200usize {
            let ip = Ipv6Addr::new(
                0x2001,
                0xdb8,
                0x100,
                (i / 200) as u16,
                0,
                0,
                0x1000,
                i as u16 + 1,
            );
            clients.push(Host::new(IpAddr::V6(ip), 0x16, i));
        }
        let mut servers = Vec::new();
        for (i, sni) in SNI_V4.iter().enumerate() {
            let ip = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10 + i as u8));
            servers.push(Server {
                host: Host::new(ip, 0x20, i),
                port: 443,
                sni,
                tls13: i != 3 && i != 5,
            });
        }
        for (i, sni) in ["www.example.com", "api.example.com"].iter().enumerate() {
            let ip = IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0x443,
                0,
                0,
                0,
                0,
                i as u16 + 1,
            ));
            servers.push(Server {
                host: Host::new(ip, 0x26, i),
                port: 443,
                sni,
                tls13: true,
            });
        }
        for i in 0..2u8 {
            let ip = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 80 + i));
            servers.push(Server {
                host: Host::new(ip, 0x28, usize::from(i)),
                port: 80,
                sni: "",
                tls13: false,
            });
        }
        let ip = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x80, 0, 0, 0, 0, 1));
        servers.push(Server {
            host: Host::new(ip, 0x29, 0),
            port: 80,
            sni: "",
            tls13: false,
        });
        let ports = (0..clients.len())
            .map(|_| rng.range(32768, 60999) as u16)
            .collect();
        Ok(Sim {
            rng,
            fills,
            out: Out::new(w)?,
            target,
            concurrency,
            clients,
            clients_v6,
            servers,
            ports,
            sessions: HashMap::new(),
            active: HashSet::new(),
            recently_closed: VecDeque::new(),
            slots: Vec::new(),
            free: Vec::new(),
            heap: BinaryHeap::new(),
            order: 0,
            live: 0,
            winding_down: false,
            stats: Stats::default(),
        })
    }

    fn schedule(&mut self, t: u64, slot: usize) {
        self.order += 1;
        self.heap.push(Reverse((t, self.order, slot)));
    }

    pub(crate) fn run(&mut self) -> io::Result<()> {
        for _ in 0..self.concurrency {
            let t = self.rng.below(200_000_000);
            self.spawn(t);
        }
        while let Some(Reverse((t, _, slot))) = self.heap.pop() {
            let Some(mut conn) = self.slots[slot].take() else {
                continue;
            };
            match self.wake(t, &mut conn)? {
                Some(next) => {
                    self.slots[slot] = Some(conn);
                    self.schedule(next, slot);
                }
                None => {
                    self.finished(conn);
                    self.free.push(slot);
                }
            }
        }
        self.out.w.flush()
    }

    /// Bytes that the open connections will probably still write.
    fn wind_down_margin(&self) -> u64 {
        self.live as u64 * 24 * 1024
    }

    pub(crate) fn finished(&mut self, conn: Conn) {
        self.live -= 1;
        let tuple = conn.tuple();
        self.active.remove(&tuple);
        self.recently_closed
            .push_back((tuple, conn.client_idx, conn.server_idx));
        if self.recently_closed.len() > 256 {
            self.recently_closed.pop_front();
        }
        if !self.winding_down && self.out.bytes + self.wind_down_margin() >= self.target {
            self.winding_down = true;
        }
        if !self.winding_down {
            let gap = self.rng.log_uniform(10_000, 20_000_000);
            let t = self.out.clock + gap;
            self.spawn(t);
        }
    }

    /// Opens a new connection at time `t`.
    fn spawn(&mut self, t: u64) {
        let rng = &mut self.rng;
        // Port reuse: a tuple that closed lately, opened again with a new ISN.
        let reuse = if rng.chance(0.03) && !self.recently_closed.is_empty() {
            let i = rng.below(self.recently_closed.len() as u64) as usize;
            let (tuple, ci, si) = self.recently_closed[i];
            (!self.active.contains(&tuple)).then_some((tuple.1, ci, si))
        } else {
            None
        };
        let (client_idx, server_idx, cport) = match reuse {
            Some((port, ci, si)) => {
                self.stats.port_reuses += 1;
                (ci, si, port)
            }
            None => {
                // A few busy clients, a long tail of quiet ones.
                let v6 = rng.chance(0.1);
                let ci = if v6 {
                    let n = self.clients.len() - self.clients_v6;
                    self.clients_v6 + (n as f64 * rng.unit().powf(3.0)) as usize
                } else {
                    (self.clients_v6 as f64 * rng.unit().powf(3.0)) as usize
                };
                let clear = rng.chance(0.15);
                let candidates: Vec<usize> = self
                    .servers
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.host.ip.is_ipv6() == v6 && (s.port == 80) == clear)
                    .map(|(i, _)| i)
                    .collect();
                let si = *rng.pick(&candidates);
                let server = &self.servers[si];
                let mut port;
                loop {
                    port = self.ports[ci];
                    self.ports[ci] = if port >= 60999 { 32768 } else { port + 1 };
                    let tuple = (self.clients[ci].ip, port, server.host.ip, server.port);
                    if !self.active.contains(&tuple) {
                        break;
                    }
                }
                (ci, si, port)
            }
        };
        let client = self.clients[client_idx];
        let server = &self.servers[server_idx];
        let rng = &mut self.rng;
        let v6 = client.ip.is_ipv6();
        let requests = match rng.below(100) {
            0..45 => 1,
            45..75 => rng.range(2, 10),
            _ => rng.range(11, 50),
        } as u32;
        let close = match rng.below(100) {
            0..45 => CloseKind::FinClient,
            45..80 => CloseKind::FinServer,
            80..92 => CloseKind::RstClient,
            _ => CloseKind::RstServer,
        };
        let (app, tls) = if server.port == 80 {
            (App::Http, None)
        } else {
            let offer13 = rng.chance(0.9);
            let v13_possible = offer13 && server.tls13;
            let session = self.sessions.get(&(client_idx, server_idx));
            let resume = session.filter(|(v13, _)| *v13 == v13_possible && rng.chance(0.7));
            let (resumed, session_id) = match resume {
                Some((_, id)) => (true, id.clone()),
                None => (false, rng.bytes(32)),
            };
            let alpn_offer: &'static [&'static str] = match rng.below(10) {
                0..6 => &["h2", "http/1.1"],
                6..9 => &["http/1.1"],
                _ => &[],
            };
            let h2 = alpn_offer.first() == Some(&"h2") && rng.chance(0.85);
            let cipher = if v13_possible {
                *rng.pick(&CIPHERS_13)
            } else {
                *rng.pick(&[0xc02f, 0xc030, 0xc02b])
            };
            let tls = Tls {
                v13: v13_possible,
                resumed,
                session_id,
                cipher,
                alpn_offer,
            };
            (if h2 { App::TlsH2 } else { App::TlsHttp1 }, Some(tls))
        };
        let conn = Conn {
            client,
            cport,
            server: server.host,
            sport: server.port,
            client_idx,
            server_idx,
            seq: [rng.u32(), rng.u32()],
            ip_id: [rng.u32() as u16, rng.u32() as u16],
            rtt: rng.log_uniform(300_000, 120_000_000),
            burst: rng.range(6, 40) as usize,
            mss: if v6 { 1440 } else { 1460 },
            app,
            tls,
            requests_left: requests,
            requests_done: 0,
            handshake_done: false,
            close,
            script: VecDeque::new(),
            current: None,
            state: State::Syn,
        };
        let s = &mut self.stats;
        s.connections += 1;
        s.ipv6 += u64::from(v6);
        match &conn.tls {
            None => s.cleartext += 1,
            Some(t) => {
                s.tls += 1;
                match (t.v13, t.resumed) {
                    (true, false) => s.tls13_full += 1,
                    (true, true) => s.tls13_resumed += 1,
                    (false, false) => s.tls12_full += 1,
                    (false, true) => s.tls12_resumed += 1,
                }
                s.h2 += u64::from(conn.app == App::TlsH2);
                if !t.resumed {
                    self.sessions
                        .insert((client_idx, server_idx), (t.v13, t.session_id.clone()));
                }
            }
        }
        self.active.insert(conn.tuple());
        self.live += 1;
        self.stats.max_concurrent = self.stats.max_concurrent.max(self.live as u64);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(conn);
                slot
            }
            None => {
                self.slots.push(Some(conn));
                self.slots.len() - 1
            }
        };
        self.schedule(t, slot);
    }
}
