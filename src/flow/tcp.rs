//! Per-connection TCP state: the three-way handshake and its timing, SYN and
//! payload retransmissions, how the connection closed, per-direction
//! counters, and Zeek-style state and history.
//!
//! Does not reassemble payload and does not decide which connection a packet
//! belongs to beyond answering [`TcpConn::starts_new`].

use crate::decode::TcpSegment;
use crate::flow::seq::Seq;
use crate::record::{Close, CloseKind, Instant, PerSide, Side, TcpHandshake};
use crate::time::Timestamp;

#[derive(Clone, Debug, Default)]
struct Direction {
    /// One past the highest sequence number seen (SYN and FIN count one).
    next_seq: Option<Seq>,
    fin: bool,
    rst: bool,
    /// One past its FIN, once it sent one (a retransmitted FIN has the same).
    fin_end: Option<Seq>,
    /// The other side acknowledged that FIN.
    fin_acked: bool,
}

/// Zeek-style history: each (letter, side) at most once, in order of first
/// occurrence. Held inline (at most 9 letters × 2 sides), no allocation.
#[derive(Clone, Debug, Default)]
struct History {
    text: [u8; History::MAX],
    len: u8,
    /// Letters already in `text`, one bit per (letter, side).
    seen: u32,
}

impl History {
    const MAX: usize = 18;

    /// The position of `letter` in "SHADFRTWQ" (constant-folded at call sites).
    #[inline]
    fn index(letter: char) -> Option<u32> {
        Some(match letter {
            'S' => 0,
            'H' => 1,
            'A' => 2,
            'D' => 3,
            'F' => 4,
            'R' => 5,
            'T' => 6,
            'W' => 7,
            'Q' => 8,
            _ => return None,
        })
    }

    #[inline]
    fn push(&mut self, letter: char, side: Side) {
        let Some(pos) = Self::index(letter) else {
            return;
        };
        let bit = 1u32 << (pos * 2 + u32::from(side == Side::Server));
        if self.seen & bit != 0 {
            return;
        }
        self.seen |= bit;
        // Every bit is set at most once, so `len` stays within `MAX`.
        if let Some(slot) = self.text.get_mut(usize::from(self.len)) {
            *slot = match side {
                Side::Client => letter as u8,
                Side::Server => (letter as u8).to_ascii_lowercase(),
            };
            self.len += 1;
        }
    }

    fn as_str(&self) -> &str {
        let text = self.text.get(..usize::from(self.len)).unwrap_or(&[]);
        // Only ASCII letters are ever stored.
        std::str::from_utf8(text).unwrap_or_default()
    }
}

/// A SYN or SYN-ACK: when the first was seen, its sequence number, and how
/// many times it was sent again (with the same number). One struct, not a
/// pair and a count beside it: the count fills the pair's padding.
#[derive(Clone, Copy, Debug)]
struct Opening {
    at: Timestamp,
    isn: Seq,
    again: u32,
}

impl Opening {
    fn at(at: Timestamp, isn: Seq) -> Opening {
        Opening { at, isn, again: 0 }
    }
}

/// TCP state of one connection.
#[derive(Clone, Debug, Default)]
pub struct TcpConn {
    client: Direction,
    server: Direction,
    /// The client's first SYN.
    syn: Option<Opening>,
    /// The server's first SYN-ACK.
    synack: Option<Opening>,
    /// The acknowledgment number of the first SYN-ACK: the client's ISN + 1.
    synack_ack: Option<Seq>,
    /// The sequence number of the latest SYN-ACK.
    server_isn: Option<Seq>,
    ack: Option<Timestamp>,
    /// The first FIN or RST: what kind, from which side, when.
    first_close: Option<(CloseKind, Side, Timestamp)>,
    /// Both FINs were seen before any RST.
    fin_both_before_rst: bool,
    pub packets: PerSide,
    pub bytes: PerSide,
    pub retransmissions: PerSide,
    history: History,
}

/// What a segment did, for counting anomalies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentNotes {
    pub invalid_flags: bool,
    /// This segment closed the connection (both FINs, or an RST).
    pub closed_now: bool,
    /// This segment finished the connection's close: it acknowledged the
    /// last FIN still unacknowledged, or it is the first RST.
    pub finished_now: bool,
}

impl TcpConn {
    pub fn new() -> TcpConn {
        TcpConn::default()
    }

    fn dir(&mut self, side: Side) -> &mut Direction {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    /// FIN seen both ways, or an RST: the tuple is free for a new connection.
    pub fn is_closed(&self) -> bool {
        self.client.rst || self.server.rst || (self.client.fin && self.server.fin)
    }

    /// The close is over: both sides sent a FIN and had it acknowledged, or
    /// one sent an RST. Nothing but the peers' last delayed ACKs, packets
    /// already in flight and retransmissions (of a FIN or data whose ACK or
    /// RST was lost past the capture point) can follow.
    pub fn is_finished(&self) -> bool {
        let rst = self.client.rst || self.server.rst;
        rst || (self.client.fin_acked && self.server.fin_acked)
    }

    pub fn syn_seen(&self) -> bool {
        self.syn.is_some()
    }

    /// The client's ISN (from its SYN) and the server's (from its latest SYN-ACK).
    pub fn isns(&self) -> (Option<Seq>, Option<Seq>) {
        (self.syn.map(|o| o.isn), self.server_isn)
    }

    /// When the client's first SYN was seen.
    pub fn syn_time(&self) -> Option<Timestamp> {
        self.syn.map(|o| o.at)
    }

    /// Whether this segment, arriving on this connection's tuple, opens a new
    /// connection instead: a SYN (without ACK) after the connection closed,
    /// or a SYN whose initial sequence number differs from the one this
    /// connection started with. A SYN with the same ISN is a retransmission;
    /// a SYN arriving after its own SYN-ACK (capture reordering) belongs here.
    pub fn starts_new(&self, side: Side, seg: &TcpSegment<'_>) -> bool {
        if !seg.flags.syn() || seg.flags.ack() {
            return false;
        }
        let isn = Seq(seg.seq);
        if side == Side::Server && !self.is_closed() && self.syn.is_some() {
            // A SYN back from the server: simultaneous open or a split handshake.
            return false;
        }
        match self.syn {
            Some(first) => !(side == Side::Client && first.isn == isn && !self.is_closed()),
            None => match self.synack {
                // The SYN-ACK was captured first; its ACK number names this SYN.
                Some(_) if side == Side::Client && !self.is_closed() => {
                    self.synack_ack != Some(isn.plus(1))
                }
                _ => true,
            },
        }
    }

    /// Whether a client segment validly acknowledges the server's SYN-ACK:
    /// its ACK number is past the server's ISN and not beyond what the server
    /// has sent, and its sequence number is the client's ISN + 1, or further
    /// when the SYN carried data (TCP Fast Open), but not beyond what the
    /// client has sent. Arkime's `tcpSynAckValidated` is the same test.
    fn acks_synack(&self, seg: &TcpSegment<'_>) -> bool {
        let Some(server_isn) = self.server_isn else {
            return false;
        };
        let ack = Seq(seg.ack);
        let server_next = self.server.next_seq.unwrap_or(server_isn.plus(1));
        let ack_ok = ack.is_after(server_isn) && !ack.is_after(server_next);
        // With TCP Fast Open the SYN carried data, so the ACK's sequence
        // number is past ISN + 1; it can never be past what the client sent.
        let seq = Seq(seg.seq);
        let seq_ok = self.syn.is_none_or(|Opening { isn, .. }| {
            let client_next = self.client.next_seq.unwrap_or(isn.plus(1));
            !seq.is_before(isn.plus(1)) && !seq.is_after(client_next)
        });
        ack_ok && seq_ok
    }

    /// Updates the state with one segment from `side`.
    pub fn on_segment(&mut self, side: Side, ts: Timestamp, seg: &TcpSegment<'_>) -> SegmentNotes {
        let mut notes = SegmentNotes::default();
        let flags = seg.flags;
        let was_closed = self.is_closed();
        let was_finished = self.is_finished();
        *self.packets.get_mut(side) += 1;
        *self.bytes.get_mut(side) += u64::from(seg.payload_len);
        if flags.syn() && (flags.rst() || flags.fin()) {
            notes.invalid_flags = true;
            self.history.push('Q', side);
        }
        let seq = Seq(seg.seq);
        if flags.syn() && !flags.ack() {
            self.history.push('S', side);
            if side == Side::Client {
                match self.syn {
                    None => self.syn = Some(Opening::at(ts, seq)),
                    Some(ref mut first) if first.isn == seq => first.again += 1,
                    Some(_) => {}
                }
            }
        } else if flags.syn() && flags.ack() {
            self.history.push('H', side);
            if side == Side::Server {
                match self.synack {
                    None => {
                        self.synack = Some(Opening::at(ts, seq));
                        self.synack_ack = Some(Seq(seg.ack));
                    }
                    Some(ref mut first) if first.isn == seq => first.again += 1,
                    Some(_) => {}
                }
                // The client answers the latest SYN-ACK when they differ.
                self.server_isn = Some(seq);
            }
        } else if flags.ack()
            && side == Side::Client
            && self.ack.is_none()
            && !flags.rst()
            && self.acks_synack(seg)
        {
            self.ack = Some(ts);
        }

        let len = seg.payload_len;
        // Sequence space this segment occupies, SYN and FIN counting one each.
        let data_start = if flags.syn() { seq.plus(1) } else { seq };
        let end = data_start.plus(len).plus(u32::from(flags.fin()));
        if len > 0 {
            self.history.push('D', side);
            let dir = self.dir(side);
            if let Some(next) = dir.next_seq {
                if !data_start.plus(len).is_after(next) {
                    *self.retransmissions.get_mut(side) += 1;
                    self.history.push('T', side);
                }
            }
        } else if flags.ack() && !flags.syn() && !flags.fin() && !flags.rst() {
            self.history.push('A', side);
        }
        if seg.window == 0 && !flags.syn() && !flags.rst() {
            self.history.push('W', side);
        }
        let dir = self.dir(side);
        if dir.next_seq.is_none_or(|next| end.is_after(next)) {
            dir.next_seq = Some(end);
        }

        if flags.ack() && !flags.rst() {
            // An ACK at or past the other side's FIN acknowledges it.
            let other = match side {
                Side::Client => &mut self.server,
                Side::Server => &mut self.client,
            };
            if other
                .fin_end
                .is_some_and(|fin| !Seq(seg.ack).is_before(fin))
            {
                other.fin_acked = true;
            }
        }
        if flags.fin() {
            self.history.push('F', side);
            self.dir(side).fin = true;
            self.dir(side).fin_end.get_or_insert(end);
            self.first_close.get_or_insert((CloseKind::Fin, side, ts));
            if self.client.fin && self.server.fin && !self.client.rst && !self.server.rst {
                self.fin_both_before_rst = true;
            }
        }
        if flags.rst() {
            self.history.push('R', side);
            self.dir(side).rst = true;
            self.first_close.get_or_insert((CloseKind::Rst, side, ts));
        }
        notes.closed_now = !was_closed && self.is_closed();
        notes.finished_now = !was_finished && self.is_finished();
        notes
    }

    /// The handshake section of the record; `at` converts a timestamp.
    pub fn handshake(&self, at: impl Fn(Timestamp) -> Instant) -> TcpHandshake {
        let syn = self.syn.map(|o| o.at);
        let synack = self.synack.map(|o| o.at);
        let between = |a: Option<Timestamp>, b: Option<Timestamp>| match (a, b) {
            (Some(a), Some(b)) => Some(b.secs_since(a)),
            _ => None,
        };
        TcpHandshake {
            syn: syn.map(&at),
            syn_retransmissions: self.syn.map_or(0, |o| o.again),
            synack: synack.map(&at),
            synack_retransmissions: self.synack.map_or(0, |o| o.again),
            ack: self.ack.map(&at),
            syn_to_synack: between(syn, synack),
            synack_to_ack: between(synack, self.ack),
            connect: between(syn, self.ack),
            complete: syn.is_some() && synack.is_some() && self.ack.is_some(),
        }
    }

    /// When the first FIN or RST came, if one did.
    pub fn first_close_at(&self) -> Option<Timestamp> {
        self.first_close.map(|(_, _, ts)| ts)
    }

    /// How the connection ended (its idle time and the requests after it
    /// are HTTP's, filled in by the connection); `unclosed` is the kind to
    /// report when no FIN
    /// or RST was seen (open at end of capture, idle, evicted).
    pub fn close(&self, unclosed: CloseKind, at: impl Fn(Timestamp) -> Instant) -> Close {
        let fin_both = self.client.fin && self.server.fin;
        match self.first_close {
            Some((kind, by, ts)) => Close {
                kind,
                by: Some(by),
                time: Some(at(ts)),
                fin_both,
                idle: None,
                requests_after: 0,
            },
            None => Close {
                kind: unclosed,
                by: None,
                time: None,
                fin_both,
                idle: None,
                requests_after: 0,
            },
        }
    }

    /// Zeek's `conn_state` for this connection.
    pub fn state(&self) -> &'static str {
        let (c, s) = (&self.client, &self.server);
        match (self.syn.is_some(), self.synack.is_some()) {
            (true, true) => self.established_state(),
            (true, false) => {
                if c.rst {
                    "RSTOS0"
                } else if s.rst {
                    "REJ"
                } else if c.fin {
                    "SH"
                } else if self.packets.server == 0 {
                    "S0"
                } else {
                    "OTH"
                }
            }
            // SYN missed but the client acknowledged the SYN-ACK: established.
            (false, true) if self.ack.is_some() => self.established_state(),
            (false, true) => {
                if s.rst {
                    "RSTRH"
                } else if s.fin {
                    "SHR"
                } else {
                    "OTH"
                }
            }
            (false, false) => "OTH",
        }
    }

    fn established_state(&self) -> &'static str {
        let (c, s) = (&self.client, &self.server);
        let first_rst = match self.first_close {
            Some((CloseKind::Rst, by, _)) => Some(by),
            _ if c.rst => Some(Side::Client),
            _ if s.rst => Some(Side::Server),
            _ => None,
        };
        match first_rst {
            Some(_) if self.fin_both_before_rst => "SF",
            Some(Side::Client) => "RSTO",
            Some(Side::Server) => "RSTR",
            None if c.fin && s.fin => "SF",
            None if c.fin => "S2",
            None if s.fin => "S3",
            None => "S1",
        }
    }

    /// Zeek-style history; `flipped` prefixes `^`: the first packet came
    /// from the server, as Zeek marks a connection it turned around.
    pub fn history(&self, flipped: bool) -> String {
        let text = self.history.as_str();
        if flipped {
            format!("^{text}")
        } else {
            text.to_string()
        }
    }
}

#[cfg(test)]
mod tests;
