//! Tests of `TcpConn`: the handshake and its timing, retransmissions,
//! how connections close (and when a close is over), state and history.

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
    // The server's FIN (seq 521) ends at 522: an ACK below that does not
    // finish the close; the ACK of 522 does, once.
    let mut t = full_connection();
    assert!(!t.is_finished());
    let short = t.on_segment(Side::Client, ms(8), &seg(Side::Client, ACK, 112, 521, 0));
    assert!(!short.finished_now && !t.is_finished());
    let last = t.on_segment(Side::Client, ms(9), &seg(Side::Client, ACK, 112, 522, 0));
    assert!(last.finished_now && t.is_finished());
    let again = t.on_segment(Side::Client, ms(10), &seg(Side::Client, ACK, 112, 522, 0));
    assert!(!again.finished_now && t.is_finished());

    // An RST ends it at once, with or without FINs before it.
    let mut t = full_connection();
    let n = t.on_segment(Side::Server, ms(8), &seg(Side::Server, RST, 522, 0, 0));
    assert!(n.finished_now && t.is_finished());
    let n = t.on_segment(Side::Client, ms(9), &seg(Side::Client, ACK, 112, 522, 0));
    assert!(!n.finished_now && t.is_finished());
    let mut t = TcpConn::new();
    t.on_segment(Side::Client, ms(0), &seg(Side::Client, SYN, 100, 0, 0));
    let n = t.on_segment(
        Side::Server,
        ms(1),
        &seg(Side::Server, RST | ACK, 0, 101, 0),
    );
    assert!(n.closed_now && n.finished_now);

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
