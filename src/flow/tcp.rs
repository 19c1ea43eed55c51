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

/// TCP state of one connection.
#[derive(Clone, Debug, Default)]
pub struct TcpConn {
    client: Direction,
    server: Direction,
    syn: Option<(Timestamp, Seq)>,
    syn_retransmissions: u32,
    synack: Option<(Timestamp, Seq)>,
    synack_retransmissions: u32,
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
    /// last FIN still unacknowledged, with no RST seen.
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

    /// Both sides sent a FIN and had it acknowledged, and neither sent an
    /// RST: the four-way close is over, and nothing but a retransmission
    /// (of a FIN whose ACK was lost past the capture point) can follow.
    pub fn is_finished(&self) -> bool {
        let done = |d: &Direction| d.fin_acked && !d.rst;
        done(&self.client) && done(&self.server)
    }

    pub fn syn_seen(&self) -> bool {
        self.syn.is_some()
    }

    /// The client's ISN (from its SYN) and the server's (from its latest SYN-ACK).
    pub fn isns(&self) -> (Option<Seq>, Option<Seq>) {
        (self.syn.map(|(_, isn)| isn), self.server_isn)
    }

    /// When the client's first SYN was seen.
    pub fn syn_time(&self) -> Option<Timestamp> {
        self.syn.map(|(t, _)| t)
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
            Some((_, first)) => !(side == Side::Client && first == isn && !self.is_closed()),
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
        let seq_ok = self.syn.is_none_or(|(_, isn)| {
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
                    None => self.syn = Some((ts, seq)),
                    Some((_, isn)) if isn == seq => self.syn_retransmissions += 1,
                    Some(_) => {}
                }
            }
        } else if flags.syn() && flags.ack() {
            self.history.push('H', side);
            if side == Side::Server {
                match self.synack {
                    None => {
                        self.synack = Some((ts, seq));
                        self.synack_ack = Some(Seq(seg.ack));
                    }
                    Some((_, isn)) if isn == seq => self.synack_retransmissions += 1,
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
        let syn = self.syn.map(|(t, _)| t);
        let synack = self.synack.map(|(t, _)| t);
        let between = |a: Option<Timestamp>, b: Option<Timestamp>| match (a, b) {
            (Some(a), Some(b)) => Some(b.secs_since(a)),
            _ => None,
        };
        TcpHandshake {
            syn: syn.map(&at),
            syn_retransmissions: self.syn_retransmissions,
            synack: synack.map(&at),
            synack_retransmissions: self.synack_retransmissions,
            ack: self.ack.map(&at),
            syn_to_synack: between(syn, synack),
            synack_to_ack: between(synack, self.ack),
            connect: between(syn, self.ack),
            complete: syn.is_some() && synack.is_some() && self.ack.is_some(),
        }
    }

    /// How the connection ended; `unclosed` is the kind to report when no FIN
    /// or RST was seen (open at end of capture, idle, evicted).
    pub fn close(&self, unclosed: CloseKind, at: impl Fn(Timestamp) -> Instant) -> Close {
        let fin_both = self.client.fin && self.server.fin;
        match self.first_close {
            Some((kind, by, ts)) => Close {
                kind,
                by: Some(by),
                time: Some(at(ts)),
                fin_both,
            },
            None => Close {
                kind: unclosed,
                by: None,
                time: None,
                fin_both,
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
mod tests {
    use super::*;
    use crate::decode::TcpFlags;

    const C: &str = "10.0.0.1:40000";
    const S: &str = "10.0.0.2:80";

    fn seg(side: Side, flags: u8, seq: u32, ack: u32, len: u32) -> TcpSegment<'static> {
        let (src, dst) = match side {
            Side::Client => (C, S),
            Side::Server => (S, C),
        };
        TcpSegment {
            src: src.parse().expect("addr"),
            dst: dst.parse().expect("addr"),
            seq,
            ack,
            flags: TcpFlags(flags),
            window: 1000,
            payload: &[],
            payload_len: len,
            overlay: None,
        }
    }

    const SYN: u8 = TcpFlags::SYN;
    const SYNACK: u8 = TcpFlags::SYN | TcpFlags::ACK;
    const ACK: u8 = TcpFlags::ACK;
    const FINACK: u8 = TcpFlags::FIN | TcpFlags::ACK;
    const RST: u8 = TcpFlags::RST;

    fn ms(n: i64) -> Timestamp {
        Timestamp(n * 1_000_000)
    }

    fn instant(t: Timestamp) -> Instant {
        Instant {
            ts: t.as_secs_f64(),
            at: t.as_secs_f64(),
        }
    }

    fn full_connection() -> TcpConn {
        let mut t = TcpConn::new();
        t.on_segment(Side::Client, ms(0), &seg(Side::Client, SYN, 100, 0, 0));
        t.on_segment(Side::Server, ms(2), &seg(Side::Server, SYNACK, 500, 101, 0));
        t.on_segment(Side::Client, ms(3), &seg(Side::Client, ACK, 101, 501, 0));
        t.on_segment(
            Side::Client,
            ms(4),
            &seg(Side::Client, ACK | TcpFlags::PSH, 101, 501, 10),
        );
        t.on_segment(Side::Server, ms(5), &seg(Side::Server, ACK, 501, 111, 20));
        t.on_segment(Side::Client, ms(6), &seg(Side::Client, FINACK, 111, 521, 0));
        let n = t.on_segment(Side::Server, ms(7), &seg(Side::Server, FINACK, 521, 112, 0));
        assert!(n.closed_now);
        t
    }

    #[test]
    fn the_close_is_finished_when_each_fin_is_acknowledged() {
        // The server's FIN (seq 521) ends at 522: an ACK below that, or an
        // RST, does not finish it; the ACK of 522 does, once.
        let mut t = full_connection();
        assert!(!t.is_finished());
        let short = t.on_segment(Side::Client, ms(8), &seg(Side::Client, ACK, 112, 521, 0));
        assert!(!short.finished_now && !t.is_finished());
        let last = t.on_segment(Side::Client, ms(9), &seg(Side::Client, ACK, 112, 522, 0));
        assert!(last.finished_now && t.is_finished());
        let again = t.on_segment(Side::Client, ms(10), &seg(Side::Client, ACK, 112, 522, 0));
        assert!(!again.finished_now && t.is_finished());

        let mut t = full_connection();
        t.on_segment(Side::Server, ms(8), &seg(Side::Server, RST, 522, 0, 0));
        let n = t.on_segment(Side::Client, ms(9), &seg(Side::Client, ACK, 112, 522, 0));
        assert!(!n.finished_now && !t.is_finished());

        // A FIN not yet acknowledged by the other side: the client's FIN
        // (111, ends at 112) unacknowledged when the server's ACK says 111.
        let mut t = TcpConn::new();
        t.on_segment(Side::Client, ms(0), &seg(Side::Client, FINACK, 111, 521, 0));
        t.on_segment(Side::Server, ms(1), &seg(Side::Server, FINACK, 521, 111, 0));
        let n = t.on_segment(Side::Client, ms(2), &seg(Side::Client, ACK, 112, 522, 0));
        assert!(t.is_closed() && !n.finished_now && !t.is_finished());
        let n = t.on_segment(Side::Server, ms(3), &seg(Side::Server, ACK, 522, 112, 0));
        assert!(n.finished_now);
    }

    #[test]
    fn handshake_timing_and_clean_close() {
        let t = full_connection();
        let h = t.handshake(instant);
        assert!(h.complete);
        assert_eq!(h.syn_to_synack, Some(0.002));
        assert_eq!(h.synack_to_ack, Some(0.001));
        assert_eq!(h.connect, Some(0.003));
        let close = t.close(CloseKind::Open, instant);
        assert_eq!(close.kind, CloseKind::Fin);
        assert_eq!(close.by, Some(Side::Client));
        assert!(close.fin_both);
        assert_eq!(t.state(), "SF");
        assert_eq!(t.history(false), "ShADdFf");
        assert_eq!(
            t.bytes,
            PerSide {
                client: 10,
                server: 20
            }
        );
        assert_eq!(t.retransmissions.total(), 0);
    }

    #[test]
    fn syn_retransmission_is_not_a_new_connection() {
        let mut t = TcpConn::new();
        let syn = seg(Side::Client, SYN, 100, 0, 0);
        t.on_segment(Side::Client, ms(0), &syn);
        assert!(!t.starts_new(Side::Client, &syn));
        t.on_segment(Side::Client, ms(1000), &syn);
        assert_eq!(t.handshake(instant).syn_retransmissions, 1);
        assert!(t.starts_new(Side::Client, &seg(Side::Client, SYN, 9999, 0, 0)));
        assert_eq!(t.state(), "S0");
    }

    #[test]
    fn syn_after_close_starts_new_connection() {
        let t = full_connection();
        assert!(t.starts_new(Side::Client, &seg(Side::Client, SYN, 100, 0, 0)));
    }

    #[test]
    fn reordered_syn_after_synack_belongs_here() {
        let mut t = TcpConn::new();
        t.on_segment(Side::Server, ms(1), &seg(Side::Server, SYNACK, 500, 101, 0));
        assert!(!t.starts_new(Side::Client, &seg(Side::Client, SYN, 100, 0, 0)));
        assert!(t.starts_new(Side::Client, &seg(Side::Client, SYN, 7, 0, 0)));
    }

    #[test]
    fn rejected_and_reset_states() {
        let mut t = TcpConn::new();
        t.on_segment(Side::Client, ms(0), &seg(Side::Client, SYN, 100, 0, 0));
        t.on_segment(
            Side::Server,
            ms(1),
            &seg(Side::Server, RST | ACK, 0, 101, 0),
        );
        assert_eq!(t.state(), "REJ");
        let close = t.close(CloseKind::Open, instant);
        assert_eq!((close.kind, close.by), (CloseKind::Rst, Some(Side::Server)));

        let mut t = full_connection_open();
        t.on_segment(Side::Client, ms(9), &seg(Side::Client, RST, 111, 0, 0));
        assert_eq!(t.state(), "RSTO");
    }

    fn full_connection_open() -> TcpConn {
        let mut t = TcpConn::new();
        t.on_segment(Side::Client, ms(0), &seg(Side::Client, SYN, 100, 0, 0));
        t.on_segment(Side::Server, ms(2), &seg(Side::Server, SYNACK, 500, 101, 0));
        t.on_segment(Side::Client, ms(3), &seg(Side::Client, ACK, 101, 501, 0));
        assert_eq!(t.state(), "S1");
        t
    }

    #[test]
    fn payload_retransmission_counted_across_wraparound() {
        let mut t = TcpConn::new();
        let isn = u32::MAX - 5;
        t.on_segment(Side::Client, ms(0), &seg(Side::Client, SYN, isn, 0, 0));
        t.on_segment(
            Side::Client,
            ms(1),
            &seg(Side::Client, ACK, isn.wrapping_add(1), 0, 100),
        );
        t.on_segment(
            Side::Client,
            ms(2),
            &seg(Side::Client, ACK, isn.wrapping_add(101), 0, 100),
        );
        assert_eq!(t.retransmissions.client, 0);
        t.on_segment(
            Side::Client,
            ms(3),
            &seg(Side::Client, ACK, isn.wrapping_add(1), 0, 100),
        );
        assert_eq!(t.retransmissions.client, 1);
        assert!(t.history(false).contains('T'));
    }

    #[test]
    fn history_keeps_each_letter_and_side_once_in_first_order() {
        // Against the plain definition: append unless already present.
        let letters = ['S', 'H', 'A', 'D', 'F', 'R', 'T', 'W', 'Q', 'x', 's'];
        let mut h = History::default();
        let mut expected = String::new();
        let mut state = 12_345u32;
        for _ in 0..2000 {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let letter = letters[(state >> 16) as usize % letters.len()];
            let side = if state & 0x100 == 0 {
                Side::Client
            } else {
                Side::Server
            };
            h.push(letter, side);
            if "SHADFRTWQ".contains(letter) {
                let c = match side {
                    Side::Client => letter,
                    Side::Server => letter.to_ascii_lowercase(),
                };
                if !expected.contains(c) {
                    expected.push(c);
                }
            }
            assert_eq!(h.as_str(), expected);
        }
        assert_eq!(h.as_str().len(), History::MAX, "every letter, both sides");
    }

    #[test]
    fn history_is_flipped_with_a_caret() {
        let mut t = TcpConn::new();
        t.on_segment(Side::Server, ms(1), &seg(Side::Server, SYNACK, 500, 101, 0));
        t.on_segment(Side::Client, ms(2), &seg(Side::Client, ACK, 101, 501, 0));
        assert_eq!(t.history(true), "^hA");
        assert_eq!(t.history(false), "hA");
    }
}
