//! What the summary reads of a connection's setup: its steps (SYN → ACK →
//! ClientHello → handshake complete → first request byte), added up in
//! whole nanoseconds for `summary.handshake_time.phases` and each server's
//! `setup_phases`; and its handshake events.
//!
//! Does not see packets: only the finished record.

use crate::analyze::stats::NanoSum;
use crate::record::{ConnectionRecord, SetupPhases};

/// A connection's setup cut at each step, as `summary.handshake_time.phases`
/// adds them up: SYN → ACK, ACK → ClientHello, ClientHello → handshake
/// complete, → first request byte (without TLS: SYN → ACK → first request
/// byte). `None` unless every step was seen, in that order.
pub(super) fn setup_phases(rec: &ConnectionRecord) -> Option<[f64; 4]> {
    let hs = &rec.tcp.handshake;
    let (syn, ack) = (hs.syn?.at, hs.ack?.at);
    let request = rec.http.list.first()?.start.at;
    let (hello, done) = match &rec.tls {
        Some(tls) => (tls.client_hello?.at, tls.complete?.at),
        None => (ack, ack),
    };
    let steps = [syn, ack, hello, done, request];
    // Each finite (so that the four sums count alike), and in order.
    if steps.iter().any(|v| !v.is_finite()) || steps.windows(2).any(|w| w.first() > w.last()) {
        return None;
    }
    Some([ack - syn, hello - ack, done - hello, request - done])
}

/// A connection's setup steps added to `sums` (none if not all were seen).
pub(super) fn add_phases(sums: &mut [NanoSum; 4], phases: Option<[f64; 4]>) {
    for (sum, v) in sums.iter_mut().zip(phases.into_iter().flatten()) {
        sum.add(Some(v));
    }
}

/// The setup's steps added up, if any connection's were all seen.
pub(super) fn phases_of(sums: &[NanoSum; 4]) -> Option<SetupPhases> {
    let [connect, hello, tls, request] = sums;
    let n = connect.totals().connections;
    (n > 0).then(|| SetupPhases {
        connections: n,
        connect: connect.total(),
        before_client_hello: hello.total(),
        tls_handshake: tls.total(),
        to_request: request.total(),
    })
}

/// A connection's handshake events: the TCP handshake packets seen (the
/// SYN and its retransmissions, the SYN-ACK and its retransmissions, the
/// ACK) plus the TLS handshake messages in `tls.events` up to the
/// handshake's completion (all of them when it did not complete). Exact
/// from the record, unlike bytes spent on handshakes, which it does not
/// hold.
pub fn handshake_events(rec: &ConnectionRecord) -> u64 {
    let hs = &rec.tcp.handshake;
    let mut n = 0u64;
    if hs.syn.is_some() {
        n += 1 + u64::from(hs.syn_retransmissions);
    }
    if hs.synack.is_some() {
        n += 1 + u64::from(hs.synack_retransmissions);
    }
    if hs.ack.is_some() {
        n += 1;
    }
    if let Some(tls) = &rec.tls {
        n += match tls.complete {
            Some(done) => tls.events.iter().filter(|e| e.time.at <= done.at).count(),
            None => tls.events.len(),
        } as u64;
    }
    n
}
