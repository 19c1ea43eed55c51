//! What the summary reads of one connection's record ([`Tally`]), taken
//! where the record is made, and the TLS handshakes counted by how they
//! ended ([`TlsHandshakes`], the summary's and each server's).
//!
//! Does not fold anything into the summary (`super::SummaryBuilder`).

use super::across::Marks;
use super::over_time::Moments;
use super::rate_limit::LimitTally;
use super::servers::ServerId;
use super::setup::{handshake_events, setup_phases};
use crate::analyze::stats::Samples;
use crate::analyze::streams::Aside;
use crate::record::{
    Anomalies, CloseKind, ConnectionRecord, DecryptionOutcome, Name, Overlay, Side, TlsOutcome,
};

/// What the summary reads of one connection's record. Taken where the
/// record is made: with `--threads` and JSON Lines the shard encodes the
/// record and drops it there, and only its text and this travel to the
/// thread that writes (a record is some forty allocations, freed on the
/// thread that made them).
#[derive(Debug)]
pub struct Tally {
    pub(super) complete: bool,
    /// A SYN was seen.
    pub(super) syn: bool,
    pub(super) connect: Option<f64>,
    pub(super) overlay: Option<Overlay>,
    pub(super) close: CloseKind,
    pub(super) syn_retransmissions: u32,
    pub(super) anomalies: Anomalies,
    pub(super) tls: Option<TlsTally>,
    pub(super) estimated: bool,
    pub(super) low_confidence: bool,
    pub(super) requests: u64,
    /// SYN → first listed request, when both were seen…
    pub(super) to_first_request: Option<f64>,
    /// …and cut at each step ([`setup_phases`]).
    pub(super) setup_phases: Option<[f64; 4]>,
    /// Each listed request's duration.
    pub(super) durations: Vec<f64>,
    /// The durations of the requests past the list.
    pub(super) unlisted_durations: Option<Samples>,
    /// Final responses by status, over every request.
    pub(super) status_codes: Vec<(u16, u64)>,
    /// What the responses said of rate limiting (boxed: most have nothing).
    pub(super) limits: Option<Box<LimitTally>>,
    /// What it did in time, for rate limiting across connections (taken
    /// by the gatherer, which knows when to sweep).
    pub marks: Marks,
    /// [`handshake_events`].
    pub(super) handshake_events: u64,
    /// The server, for `summary.servers`.
    pub(super) server: ServerId,
    /// When things happened, for `summary.over_time`.
    pub(super) moments: Moments,
    /// Who closed the connection and how long after its last response
    /// (`close.idle`), and the requests after the close.
    pub(super) idle_close: Option<(Side, f64)>,
    pub(super) requests_after_close: u64,
    /// HTTP/2 requests the server refused unprocessed.
    pub(super) requests_refused: u32,
}

#[derive(Debug)]
pub(super) struct TlsTally {
    pub(super) outcome: TlsOutcome,
    pub(super) resumed: bool,
    pub(super) version: Option<Name>,
    /// The ALPN protocol selected, or told by size with " (by size)", or
    /// the first offered with " (offered)".
    pub(super) alpn: Option<String>,
    pub(super) handshake: Option<f64>,
    pub(super) decryption: Option<DecryptionOutcome>,
}

impl Tally {
    /// What the summary reads of `rec`, and of what the analyzers kept
    /// aside: the durations of the requests it does not list, and the
    /// waits after 429s.
    pub fn of(rec: &ConnectionRecord, aside: Aside) -> Tally {
        let server = ServerId::of(rec);
        let hs = &rec.tcp.handshake;
        let http = &rec.http;
        Tally {
            complete: hs.complete,
            syn: hs.syn.is_some(),
            connect: hs.connect,
            overlay: rec.overlay,
            close: rec.close.kind,
            syn_retransmissions: hs.syn_retransmissions,
            anomalies: rec.anomalies.clone(),
            tls: rec.tls.as_ref().map(|tls| TlsTally {
                outcome: tls.outcome,
                resumed: tls.resumed,
                version: tls.version.clone(),
                alpn: tls.alpn_chosen().or_else(|| {
                    let first = tls.alpn_offered.first();
                    first.map(|a| format!("{a} (offered)"))
                }),
                handshake: tls.handshake,
                decryption: tls.decryption.map(|d| d.outcome),
            }),
            estimated: http.estimated,
            low_confidence: http.confidence == "low",
            // A request sent after the connection's close was never served
            // (the client sends it again): not one the connection carried.
            requests: rec.requests_served(),
            to_first_request: hs
                .syn
                .zip(http.list.first())
                .map(|(syn, first)| first.start.ts - syn.ts),
            setup_phases: setup_phases(rec),
            moments: Moments::of(rec, &aside.past_marks),
            idle_close: rec.close.by.zip(rec.close.idle),
            requests_after_close: rec.close.requests_after,
            requests_refused: http.http2.as_ref().map_or(0, |h| h.refused),
            durations: http.list.iter().filter_map(|r| r.duration).collect(),
            unlisted_durations: aside.durations,
            status_codes: http.status_codes.iter().map(|(&s, &n)| (s, n)).collect(),
            limits: LimitTally::of(rec, aside.waits_after_429),
            marks: Marks::of(rec, &aside.past_marks, aside.unmarked).at_site(server.key()),
            handshake_events: handshake_events(rec),
            server,
        }
    }

    /// A full TLS handshake completed.
    pub(super) fn tls_full(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|t| t.outcome == TlsOutcome::Complete && !t.resumed)
    }
}

/// TLS handshakes by how they ended: completed full, completed resumed,
/// failed with an alert (the summary's and each server's).
#[derive(Debug, Default)]
pub(super) struct TlsHandshakes {
    pub(super) full: u64,
    pub(super) resumed: u64,
    pub(super) failed: u64,
}

impl TlsHandshakes {
    /// Counts `t`'s handshake, if it had TLS and it ended.
    pub(super) fn add(&mut self, t: &Tally) {
        match t.tls.as_ref().map(|tls| (tls.outcome, tls.resumed)) {
            Some((TlsOutcome::Complete, true)) => self.resumed += 1,
            Some((TlsOutcome::Complete, false)) => self.full += 1,
            Some((TlsOutcome::Failed, _)) => self.failed += 1,
            _ => {}
        }
    }
}
