//! TCP conversations at exact timestamps. A [`Conv`] keeps both ends'
//! sequence numbers and appends segments in the order they are called, so a
//! test can script any exchange (retransmissions, resets, reordering); the
//! [`Script`] makes a whole request/response connection in one call.

use std::net::SocketAddr;

use super::capture::{Packet, Pcap};
use super::frames::{Ipv6Ext, Link, Seg};

/// Nanoseconds since the epoch of the first packet in most tests:
/// 2023-11-14T22:13:20Z.
pub const T0: i64 = 1_700_000_000 * 1_000_000_000;

/// Microseconds as nanoseconds.
pub const fn us(n: i64) -> i64 {
    n * 1_000
}

/// Milliseconds as nanoseconds.
pub const fn ms(n: i64) -> i64 {
    n * 1_000_000
}

/// Seconds as nanoseconds.
pub const fn secs(n: i64) -> i64 {
    n * 1_000_000_000
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// A segment with its capture timestamp (ns).
#[derive(Clone, Debug)]
pub struct Timed {
    pub ts: i64,
    pub seg: Seg,
}

/// One TCP connection being scripted.
#[derive(Clone, Debug)]
pub struct Conv {
    pub client: SocketAddr,
    pub server: SocketAddr,
    client_isn: u32,
    server_isn: u32,
    client_next: u32,
    server_next: u32,
    ipv6_ext: Option<Ipv6Ext>,
    pub segs: Vec<Timed>,
}

impl Conv {
    pub fn new(client: &str, server: &str, client_isn: u32, server_isn: u32) -> Conv {
        Conv {
            client: addr(client),
            server: addr(server),
            client_isn,
            server_isn,
            client_next: client_isn.wrapping_add(1),
            server_next: server_isn.wrapping_add(1),
            ipv6_ext: None,
            segs: Vec::new(),
        }
    }

    /// Every later segment carries this IPv6 extension header.
    pub fn with_ipv6_ext(mut self, ext: Ipv6Ext) -> Conv {
        self.ipv6_ext = Some(ext);
        self
    }

    fn ends(&self, side: Side) -> (SocketAddr, SocketAddr) {
        match side {
            Side::Client => (self.client, self.server),
            Side::Server => (self.server, self.client),
        }
    }

    fn next_mut(&mut self, side: Side) -> &mut u32 {
        match side {
            Side::Client => &mut self.client_next,
            Side::Server => &mut self.server_next,
        }
    }

    fn next(&self, side: Side) -> u32 {
        match side {
            Side::Client => self.client_next,
            Side::Server => self.server_next,
        }
    }

    fn other(side: Side) -> Side {
        match side {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }

    /// Appends any segment at `ts` (for hand-made segments).
    pub fn push(&mut self, ts: i64, mut seg: Seg) -> &mut Conv {
        seg.ipv6_ext = self.ipv6_ext;
        self.segs.push(Timed { ts, seg });
        self
    }

    /// A segment from `side` at its next sequence number, acknowledging the other side.
    fn segment_from(&self, side: Side) -> Seg {
        let (src, dst) = self.ends(side);
        let mut seg = Seg::new(src, dst, self.next(side));
        seg.ack = Some(self.next(Self::other(side)));
        seg
    }

    /// The client's SYN (always with the client's ISN: call again to retransmit).
    pub fn syn(&mut self, ts: i64) -> &mut Conv {
        let mut seg = Seg::new(self.client, self.server, self.client_isn);
        seg.syn = true;
        self.push(ts, seg)
    }

    /// The server's SYN-ACK.
    pub fn synack(&mut self, ts: i64) -> &mut Conv {
        let mut seg = Seg::new(self.server, self.client, self.server_isn);
        seg.syn = true;
        seg.ack = Some(self.client_isn.wrapping_add(1));
        self.push(ts, seg)
    }

    /// A pure ACK from `side`.
    pub fn ack_from(&mut self, side: Side, ts: i64) -> &mut Conv {
        let seg = self.segment_from(side);
        self.push(ts, seg)
    }

    /// The client's handshake ACK.
    pub fn ack(&mut self, ts: i64) -> &mut Conv {
        self.ack_from(Side::Client, ts)
    }

    pub fn handshake(&mut self, syn: i64, synack: i64, ack: i64) -> &mut Conv {
        self.syn(syn).synack(synack).ack(ack)
    }

    /// `len` bytes of data (PSH, ACK) from `side`.
    pub fn data(&mut self, side: Side, ts: i64, len: usize) -> &mut Conv {
        let mut seg = self.segment_from(side);
        seg.psh = true;
        seg.payload = vec![if side == Side::Client { b'q' } else { b'r' }; len];
        *self.next_mut(side) = self.next(side).wrapping_add(len as u32);
        self.push(ts, seg)
    }

    /// A FIN (with ACK) from `side`.
    pub fn fin(&mut self, side: Side, ts: i64) -> &mut Conv {
        let mut seg = self.segment_from(side);
        seg.fin = true;
        *self.next_mut(side) = self.next(side).wrapping_add(1);
        self.push(ts, seg)
    }

    /// An RST (with ACK) from `side`.
    pub fn rst(&mut self, side: Side, ts: i64) -> &mut Conv {
        let mut seg = self.segment_from(side);
        seg.rst = true;
        self.push(ts, seg)
    }

    /// A graceful close: FIN from `by`, FIN from the other side, last ACK from `by`.
    pub fn close(&mut self, by: Side, first: i64, second: i64, last: i64) -> &mut Conv {
        self.fin(by, first)
            .fin(Self::other(by), second)
            .ack_from(by, last)
    }

    /// Sends segment `index` again at `ts` (a retransmission).
    pub fn resend(&mut self, index: usize, ts: i64) -> &mut Conv {
        let seg = self.segs[index].seg.clone();
        self.push(ts, seg)
    }

    /// Frames in the order they were scripted.
    pub fn packets(&self, link: Link) -> Vec<Packet> {
        frames(link, self.segs.iter())
    }
}

/// Frames the segments with `link`, in the order given.
pub fn frames<'a>(link: Link, segs: impl IntoIterator<Item = &'a Timed>) -> Vec<Packet> {
    segs.into_iter()
        .map(|t| Packet::new(t.ts, link.frame(&t.seg)))
        .collect()
}

/// All segments of several conversations, ordered by timestamp (stable).
pub fn interleave(convs: &[&Conv]) -> Vec<Timed> {
    let mut all: Vec<Timed> = convs.iter().flat_map(|c| c.segs.iter().cloned()).collect();
    all.sort_by_key(|t| t.ts);
    all
}

/// A little-endian microsecond pcap of the conversations, in time order.
pub fn pcap_of(link: Link, convs: &[&Conv]) -> Vec<u8> {
    Pcap::new(link.linktype()).write(&frames(link, &interleave(convs)))
}

/// How a scripted connection ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// FIN from this side at `close`, the other FIN 10 µs later, last ACK 20 µs later.
    Fin(Side),
    /// RST from this side at `close`.
    Rst(Side),
    /// No FIN or RST.
    Open,
}

/// A whole request/response connection at exact times (ns since the epoch).
#[derive(Clone, Copy, Debug)]
pub struct Script {
    pub syn: i64,
    pub synack: i64,
    pub ack: i64,
    pub request: i64,
    pub request_len: usize,
    pub response: i64,
    pub response_len: usize,
    pub close: i64,
    pub ending: Ending,
}

impl Script {
    /// SYN at `t0`, SYN-ACK +100 µs, ACK +150 µs, 120-byte request +200 µs,
    /// 900-byte response +1 ms, client FIN +2 ms.
    pub fn starting(t0: i64) -> Script {
        Script {
            syn: t0,
            synack: t0 + us(100),
            ack: t0 + us(150),
            request: t0 + us(200),
            request_len: 120,
            response: t0 + ms(1),
            response_len: 900,
            close: t0 + ms(2),
            ending: Ending::Fin(Side::Client),
        }
    }

    pub fn ending(self, ending: Ending) -> Script {
        Script { ending, ..self }
    }

    /// The connection between `client` and `server` with these ISNs.
    pub fn conv(&self, client: &str, server: &str, isns: (u32, u32)) -> Conv {
        let mut c = Conv::new(client, server, isns.0, isns.1);
        self.play(&mut c);
        c
    }

    /// Appends the whole connection to `c`.
    pub fn play(&self, c: &mut Conv) {
        c.handshake(self.syn, self.synack, self.ack)
            .data(Side::Client, self.request, self.request_len)
            .data(Side::Server, self.response, self.response_len);
        match self.ending {
            Ending::Fin(by) => {
                c.close(by, self.close, self.close + us(10), self.close + us(20));
            }
            Ending::Rst(by) => {
                c.rst(by, self.close);
            }
            Ending::Open => {}
        }
    }
}
