//! The discrete-event simulation: the event heap that interleaves
//! connections packet by packet, opening new connections (port reuse,
//! resumable sessions) until the size target is near or the connection
//! count is reached, and the statistics printed at the end.
//!
//! Owns: [`Sim`] (construction, `run`, `spawn`, `finished`) and [`Stats`].
//! Does not own: the client and server population or the mix's choices
//! (`mix.rs`), a connection's packets (`conn.rs`) or its conversation
//! (`plan.rs`), both further `impl Sim` blocks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::io::{self, Write};

use crate::conn::{App, Conn, Host, Server, State, Tls, Tuple};
use crate::flight::Fills;
use crate::mix::{Mix, Population};
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
    /// Connections to open in all (`u64::MAX`: as many as `target` allows).
    max_connections: u64,
    pub(crate) mix: Mix,
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

impl Sim {
    /// A simulation of `mix` traffic that opens connections until the
    /// output nears `target` bytes or `max_connections` were opened.
    pub(crate) fn new(
        seed: u64,
        target: u64,
        max_connections: u64,
        mix: Mix,
        concurrency: usize,
        w: Box<dyn Write>,
    ) -> io::Result<Sim> {
        let mut rng = Rng::new(seed);
        let fills = Fills::new(&mut rng);
        let Population {
            clients,
            clients_v6,
            servers,
        } = mix.population();
        let ports = (0..clients.len())
            .map(|_| rng.range(32768, 60999) as u16)
            .collect();
        Ok(Sim {
            rng,
            fills,
            out: Out::new(w)?,
            target,
            max_connections,
            mix,
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
        for _ in 0..(self.concurrency as u64).min(self.max_connections) {
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
        if self.mix.reusable(conn.close) {
            self.recently_closed
                .push_back((tuple, conn.client_idx, conn.server_idx));
            if self.recently_closed.len() > 256 {
                self.recently_closed.pop_front();
            }
        }
        if !self.winding_down && self.out.bytes + self.wind_down_margin() >= self.target {
            self.winding_down = true;
        }
        if !self.winding_down && self.stats.connections < self.max_connections {
            let gap = self.mix.spawn_gap(&mut self.rng);
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
                let (v6_share, skew) = self.mix.client_choice();
                let v6 = rng.chance(v6_share);
                let ci = if v6 {
                    let n = self.clients.len() - self.clients_v6;
                    self.clients_v6 + (n as f64 * rng.unit().powf(skew)) as usize
                } else {
                    (self.clients_v6 as f64 * rng.unit().powf(skew)) as usize
                };
                let clear = rng.chance(self.mix.cleartext());
                let candidates: Vec<usize> = self
                    .servers
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.host.ip.is_ipv6() == v6 && s.cleartext() == clear)
                    .map(|(i, _)| i)
                    .collect();
                let si = *rng.pick(&candidates);
                let server = &self.servers[si];
                let mut port;
                loop {
                    port = self.ports[ci];
                    self.ports[ci] = next_port(port, self.mix.port_step(&mut self.rng));
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
        let mix = self.mix;
        let requests = mix.requests(rng);
        let close = mix.close(rng);
        let (app, tls) = if server.cleartext() {
            (App::Http, None)
        } else {
            let (offer13, resume) = mix.tls_chances();
            let offer13 = rng.chance(offer13);
            let v13_possible = offer13 && server.tls13;
            let session = self.sessions.get(&(client_idx, server_idx));
            let resume = session.filter(|(v13, _)| *v13 == v13_possible && rng.chance(resume));
            let (resumed, session_id) = match resume {
                Some((_, id)) => (true, id.clone()),
                None => (false, rng.bytes(32)),
            };
            let alpn_offer = mix.alpn(rng);
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
            rtt: mix.rtt(rng),
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

/// The ephemeral port `step` after `port`, wrapping within Linux's default
/// range 32768–60999.
fn next_port(port: u16, step: u32) -> u16 {
    let next = u32::from(port) + step;
    if next > 60999 {
        (32768 + (next - 61000)) as u16
    } else {
        next as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A writer whose bytes the test can read afterwards.
    struct Sink(Rc<RefCell<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn generate(size: u64, connections: u64, mix: Mix, concurrency: usize) -> (Sim, Vec<u8>) {
        let bytes = Rc::new(RefCell::new(Vec::new()));
        let w = Box::new(Sink(bytes.clone()));
        let mut sim = Sim::new(3, size, connections, mix, concurrency, w).unwrap();
        sim.run().unwrap();
        let bytes = bytes.take();
        (sim, bytes)
    }

    /// The pcap records' (timestamp in µs, frame) in order.
    fn records(pcap: &[u8]) -> Vec<(u64, &[u8])> {
        assert_eq!(pcap[..4], 0xa1b2_c3d4u32.to_le_bytes());
        let u32_at = |i: usize| u32::from_le_bytes(pcap[i..i + 4].try_into().unwrap());
        let mut out = Vec::new();
        let mut i = 24;
        while i < pcap.len() {
            let ts = u64::from(u32_at(i)) * 1_000_000 + u64::from(u32_at(i + 4));
            let len = u32_at(i + 8) as usize;
            assert_eq!(len, u32_at(i + 12) as usize);
            out.push((ts, &pcap[i + 16..i + 16 + len]));
            i += 16 + len;
        }
        assert_eq!(i, pcap.len());
        out
    }

    /// FNV-1a, 64 bits.
    fn fnv(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
    }

    #[test]
    fn web_mix_is_the_same_capture_as_before_mixes() {
        // `handshakes-synth --size 1MiB --seed 3 --concurrency 20` before
        // `--mix` and `--connections` existed, but for the HTTP/2 requests
        // after a connection's first, one size since 3 December (as
        // HPACK makes real ones): the same draws, so the same traffic.
        let (sim, pcap) = generate(1 << 20, u64::MAX, Mix::Web, 20);
        assert_eq!(pcap.len(), 1_183_158);
        assert_eq!(fnv(&pcap), 0x401f_1146_0feb_2c2a);
        assert_eq!(sim.out.bytes, pcap.len() as u64);
    }

    #[test]
    fn short_mix_opens_exactly_the_connections_asked_for() {
        let (sim, pcap) = generate(u64::MAX, 1500, Mix::Short, 60);
        let s = &sim.stats;
        assert_eq!(s.connections, 1500);
        assert_eq!(s.max_concurrent, 60);
        assert_eq!(s.closes.iter().sum::<u64>(), 1500);
        assert_eq!(s.tls + s.cleartext, 1500);
        assert!(s.tls12_resumed + s.tls13_resumed > 0 && s.tls12_full + s.tls13_full > 0);
        assert!(s.cleartext > 0 && s.h2 > 0 && s.port_reuses > 0);
        assert!(s.closes[2] + s.closes[3] > 0);
        // One or two requests per connection.
        let requests = s.requests_cleartext + s.requests_tls_http1 + s.requests_tls_h2;
        assert!(requests > 1500 && requests <= 3000, "{requests}");
        let recs = records(&pcap);
        assert_eq!(recs.len() as u64, sim.out.packets);
        assert!(recs.windows(2).all(|w| w[0].0 <= w[1].0));
        // Small responses: a short connection is a few KB on the wire.
        let per_connection = pcap.len() / 1500;
        assert!((2000..10_000).contains(&per_connection), "{per_connection}");
    }

    #[test]
    fn size_still_limits_when_connections_are_given() {
        let (sim, _) = generate(2 << 20, 1_000_000, Mix::Short, 50);
        assert!(sim.stats.connections < 1000, "{}", sim.stats.connections);
        // Fewer connections than the concurrency: only those are opened.
        let (sim, _) = generate(u64::MAX, 7, Mix::Web, 300);
        assert_eq!(sim.stats.connections, 7);
    }

    #[test]
    fn ephemeral_ports_wrap_within_the_range() {
        assert_eq!(next_port(40000, 1), 40001);
        assert_eq!(next_port(60999, 1), 32768);
        assert_eq!(next_port(60998, 2), 32768);
        assert_eq!(next_port(60997, 6), 32771);
    }
}
