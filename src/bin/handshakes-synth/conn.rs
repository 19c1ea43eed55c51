//! One TCP connection: its hosts, state and script, and the state machine
//! that turns it into packets, one wake-up at a time (three-way handshake,
//! bursts of data acknowledged every second segment with a little reordering
//! and retransmission, FIN/FIN or RST close).
//!
//! Owns: [`Host`], [`Server`], [`Conn`], [`Tls`], [`Side`], [`CloseKind`],
//! [`App`], [`Step`], [`State`], and `Sim::wake` with its helpers.
//! Does not own: what the conversation says (`plan.rs`), the pcap encoding
//! (`pcap.rs`), or which connections exist and when they wake (`sim.rs`).

use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;

use crate::flight::Flight;
use crate::pcap::{Flags, ACK};
use crate::sim::Sim;
use crate::tls::{OVERHEAD_12, OVERHEAD_13};

// ---------------------------------------------------------------------------
// Hosts and connections.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Host {
    pub(crate) ip: IpAddr,
    pub(crate) mac: [u8; 6],
}

impl Host {
    pub(crate) fn new(ip: IpAddr, tag: u8, index: usize) -> Host {
        let i = (index as u32).to_be_bytes();
        Host {
            ip,
            mac: [0x02, tag, i[0], i[1], i[2], i[3]],
        }
    }
}

pub(crate) struct Server {
    pub(crate) host: Host,
    pub(crate) port: u16,
    pub(crate) sni: &'static str,
    /// Negotiates TLS 1.3 with clients that offer it.
    pub(crate) tls13: bool,
}

impl Server {
    /// Speaks cleartext HTTP/1.1 (no SNI), not TLS.
    pub(crate) fn cleartext(&self) -> bool {
        self.sni.is_empty()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    pub(crate) fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CloseKind {
    FinClient,
    FinServer,
    RstClient,
    RstServer,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum App {
    /// Cleartext HTTP/1.1.
    Http,
    /// HTTP/1.1 inside TLS.
    TlsHttp1,
    /// HTTP/2 inside TLS (ALPN h2).
    TlsH2,
}

/// One step of a connection's conversation.
pub(crate) enum Step {
    Send {
        side: Side,
        flight: Flight,
        /// Delay after the previous step ended.
        delay: u64,
    },
    Close {
        kind: CloseKind,
        delay: u64,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    Syn,
    SynAck,
    Ack,
    Run,
    /// Closing: how many close packets were written so far.
    Closing(CloseKind, u8),
}

pub(crate) type Tuple = (IpAddr, u16, IpAddr, u16);

pub(crate) struct Conn {
    pub(crate) client: Host,
    pub(crate) cport: u16,
    pub(crate) server: Host,
    pub(crate) sport: u16,
    pub(crate) client_idx: usize,
    pub(crate) server_idx: usize,
    /// Next sequence number to send, per side.
    pub(crate) seq: [u32; 2],
    pub(crate) ip_id: [u16; 2],
    pub(crate) rtt: u64,
    /// Segments sent per round trip.
    pub(crate) burst: usize,
    pub(crate) mss: usize,
    pub(crate) app: App,
    pub(crate) tls: Option<Tls>,
    pub(crate) requests_left: u32,
    pub(crate) requests_done: u32,
    pub(crate) handshake_done: bool,
    pub(crate) close: CloseKind,
    pub(crate) script: VecDeque<Step>,
    pub(crate) current: Option<(Side, Flight)>,
    pub(crate) state: State,
}

pub(crate) struct Tls {
    pub(crate) v13: bool,
    pub(crate) resumed: bool,
    pub(crate) session_id: Vec<u8>,
    pub(crate) cipher: u16,
    pub(crate) alpn_offer: &'static [&'static str],
}

impl Conn {
    pub(crate) fn tuple(&self) -> Tuple {
        (self.client.ip, self.cport, self.server.ip, self.sport)
    }

    pub(crate) fn endpoints(&self, from: Side) -> (Host, u16, Host, u16) {
        match from {
            Side::Client => (self.client, self.cport, self.server, self.sport),
            Side::Server => (self.server, self.sport, self.client, self.cport),
        }
    }

    pub(crate) fn overhead(&self) -> usize {
        match &self.tls {
            Some(t) if t.v13 => OVERHEAD_13,
            _ => OVERHEAD_12,
        }
    }
}

impl Sim {
    /// Runs one step of `c` at time `t`; the time of its next step, or
    /// `None` when it is over.
    pub(crate) fn wake(&mut self, t: u64, c: &mut Conn) -> io::Result<Option<u64>> {
        let half = c.rtt / 2;
        match c.state {
            State::Syn => {
                let syn = Flags {
                    syn: true,
                    ..Flags::default()
                };
                self.out.control(t, c, Side::Client, syn)?;
                c.state = State::SynAck;
                Ok(Some(self.out.clock + half))
            }
            State::SynAck => {
                let synack = Flags {
                    syn: true,
                    ack: true,
                    ..Flags::default()
                };
                self.out.control(t, c, Side::Server, synack)?;
                c.state = State::Ack;
                Ok(Some(self.out.clock + half))
            }
            State::Ack => {
                self.out.control(t, c, Side::Client, ACK)?;
                c.state = State::Run;
                self.next_step(c)
            }
            State::Run => {
                let done = self.burst(t, c)?;
                if done {
                    self.next_step(c)
                } else {
                    Ok(Some(self.out.clock + c.rtt))
                }
            }
            State::Closing(kind, stage) => self.close(t, c, kind, stage),
        }
    }

    /// Sends one round trip's worth of the current flight, the receiver
    /// acknowledging every second segment. True when the flight is over.
    pub(crate) fn burst(&mut self, t: u64, c: &mut Conn) -> io::Result<bool> {
        let Some((side, mut flight)) = c.current.take() else {
            return Ok(true);
        };
        let mut sent = 0;
        while sent < c.burst && !flight.is_empty() {
            // Two segments, then the receiver's ACK.
            let mut pair: Vec<(u32, Vec<u8>, bool)> = Vec::with_capacity(2);
            for _ in 0..2 {
                if flight.is_empty() {
                    break;
                }
                flight.take(c.mss, &mut self.out.payload, &self.fills);
                let last = flight.is_empty();
                pair.push((c.seq[side as usize], self.out.payload.clone(), last));
                c.seq[side as usize] =
                    c.seq[side as usize].wrapping_add(self.out.payload.len() as u32);
                sent += 1;
            }
            let end = c.seq[side as usize];
            let reorder = pair.len() == 2 && self.rng.chance(0.004);
            if reorder {
                pair.swap(0, 1);
                self.stats.reordered += 1;
            }
            let retransmit = self.rng.chance(0.002);
            for (i, (seq, payload, last)) in pair.iter().enumerate() {
                self.write_data(t, c, side, *seq, payload, *last)?;
                if retransmit && i == 0 {
                    self.write_data(t, c, side, *seq, payload, *last)?;
                    self.stats.retransmitted += 1;
                }
            }
            c.seq[side as usize] = end;
            self.out.control(t, c, side.other(), ACK)?;
        }
        if flight.is_empty() {
            Ok(true)
        } else {
            c.current = Some((side, flight));
            Ok(false)
        }
    }

    fn write_data(
        &mut self,
        t: u64,
        c: &mut Conn,
        side: Side,
        seq: u32,
        payload: &[u8],
        last: bool,
    ) -> io::Result<()> {
        let saved = c.seq[side as usize];
        c.seq[side as usize] = seq;
        self.out.payload.clear();
        self.out.payload.extend_from_slice(payload);
        let flags = Flags { psh: last, ..ACK };
        self.out.segment(t, c, side, flags)?;
        c.seq[side as usize] = saved;
        Ok(())
    }

    /// Starts the next step of the conversation; its time.
    fn next_step(&mut self, c: &mut Conn) -> io::Result<Option<u64>> {
        if c.script.is_empty() {
            self.plan(c);
        }
        match c.script.pop_front() {
            Some(Step::Send {
                side,
                flight,
                delay,
            }) => {
                c.current = Some((side, flight));
                Ok(Some(self.out.clock + delay))
            }
            Some(Step::Close { kind, delay }) => {
                c.state = State::Closing(kind, 0);
                Ok(Some(self.out.clock + delay))
            }
            None => Ok(None),
        }
    }

    /// Writes the close, one side per wake-up.
    pub(crate) fn close(
        &mut self,
        t: u64,
        c: &mut Conn,
        kind: CloseKind,
        stage: u8,
    ) -> io::Result<Option<u64>> {
        let half = c.rtt / 2;
        let fin = Flags { fin: true, ..ACK };
        let rst = Flags { rst: true, ..ACK };
        let (first, second) = match kind {
            CloseKind::FinClient | CloseKind::RstClient => (Side::Client, Side::Server),
            CloseKind::FinServer | CloseKind::RstServer => (Side::Server, Side::Client),
        };
        match (kind, stage) {
            (CloseKind::RstClient | CloseKind::RstServer, _) => {
                self.out.control(t, c, first, rst)?;
                Ok(None)
            }
            (_, 0) => {
                self.out.control(t, c, first, fin)?;
                c.state = State::Closing(kind, 1);
                Ok(Some(self.out.clock + half))
            }
            (_, 1) => {
                self.out.control(t, c, second, fin)?;
                c.state = State::Closing(kind, 2);
                Ok(Some(self.out.clock + half))
            }
            _ => {
                self.out.control(t, c, first, ACK)?;
                Ok(None)
            }
        }
    }
}
