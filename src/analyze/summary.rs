//! Folding finished connection records and packet counts into the capture's
//! [`Summary`]: counts, close kinds, and distributions of durations.
//!
//! Does not see packets' contents or the connection table; it is fed records
//! as they are finalised, so it works the same for files and live capture.

pub(crate) mod across;
mod marks;
mod multiplex;
mod over_time;
mod pool;
pub(crate) mod rate_limit;
mod resume;
mod servers;
mod setup;
mod tally;
mod verdict;

use std::collections::BTreeMap;

use crate::record::QuicSummary;

use super::stats::{NanoSum, Samples};
use crate::record::{
    Anomalies, HandshakeTime, IdleCloses, MeanMax, PacketCounts, Peak, PerRequest, Side, Summary,
};
use crate::source::{LinkType, SourceInfo};
use crate::time::Timestamp;
use across::{Across, Marks};
use over_time::Series;
use rate_limit::RateLimitBuilder;
use servers::Servers;
pub use setup::handshake_events;
use setup::{add_phases, phases_of};
pub use tally::Tally;
use tally::TlsHandshakes;
use verdict::{server_timeout, verdict, Counts, Unreused};

/// Overlay networks counted one by one in the summary; connections in more
/// are counted together.
const MAX_OVERLAYS: usize = 1024;

/// Adds one to `key`'s count, making a `String` of it only the first time
/// (this runs for every record, on the thread that writes the output).
fn count(counts: &mut BTreeMap<String, u64>, key: &str) {
    count_n(counts, key, 1);
}

/// Adds `n` to `key`'s count.
fn count_n(counts: &mut BTreeMap<String, u64>, key: &str, n: u64) {
    match counts.get_mut(key) {
        Some(c) => *c += n,
        None => {
            counts.insert(key.to_owned(), n);
        }
    }
}

#[derive(Debug, Default)]
pub struct SummaryBuilder {
    pub packets: PacketCounts,
    /// The first packet read: the origin of every `at` offset.
    pub origin: Option<Timestamp>,
    /// The earliest and latest timestamps.
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
    /// Anomalies not attached to any connection.
    pub anomalies: Anomalies,
    /// QUIC connections opened, and their handshakes.
    pub quic_connections: u64,
    pub quic: Option<QuicSummary>,
    /// Frames `-f` could not judge, by link type (its expression does not
    /// compile for them): left out.
    pub unfilterable: BTreeMap<u32, u64>,
    connections: u64,
    tcp_handshakes: u64,
    without_handshake: u64,
    overlays: BTreeMap<String, u64>,
    connect: Samples,
    close: BTreeMap<String, u64>,
    syn_retransmissions: u64,
    connection_anomalies: Anomalies,
    tls_connections: u64,
    tls_handshakes: TlsHandshakes,
    tls_versions: BTreeMap<String, u64>,
    alpn: BTreeMap<String, u64>,
    tls_decryption: BTreeMap<String, u64>,
    tls_handshake: Samples,
    requests_exact: u64,
    requests_estimated: u64,
    max_requests: u64,
    /// Connections that carried at least one request, and their TCP and full TLS handshakes.
    busy_connections: u64,
    busy_tcp_handshakes: u64,
    busy_tls_full: u64,
    busy_tls_resumed: u64,
    to_first_request: Samples,
    /// Setup's steps over the connections whose every step was seen.
    setup_phases: [NanoSum; 4],
    /// Requests estimated with low confidence (TLS flights on HTTP/2).
    low_confidence: u64,
    latency: Samples,
    status: BTreeMap<String, u64>,
    rate_limit: RateLimitBuilder,
    across: Across,
    servers: Servers,
    over_time: Series,
    idle_by_client: Samples,
    idle_by_server: Samples,
    requests_after_close: u64,
    connections_with_requests_after_close: u64,
    requests_refused: u64,
    handshake_events: u64,
    /// The most connections open at once, tracked by the analyzer.
    pub peak: Peak,
}

impl SummaryBuilder {
    /// A builder whose `over_time` counts intervals of `interval` (`None`:
    /// a width chosen to fit).
    pub fn with_interval(interval: Option<std::time::Duration>) -> SummaryBuilder {
        SummaryBuilder {
            over_time: Series::new(interval),
            ..SummaryBuilder::default()
        }
    }

    /// Notes a packet's timestamp.
    pub fn saw_time(&mut self, ts: Timestamp) {
        self.origin.get_or_insert(ts);
        if self.first.is_none_or(|first| ts < first) {
            self.first = Some(ts);
        }
        if self.last.is_none_or(|last| ts > last) {
            self.last = Some(ts);
        }
    }

    /// Running totals for a status line: (connections finished, requests, TCP handshakes).
    pub fn progress(&self) -> (u64, u64, u64) {
        (
            self.connections,
            self.requests_exact + self.requests_estimated,
            self.tcp_handshakes,
        )
    }

    /// Folds in one finished connection, from what the summary reads of it.
    pub fn add(&mut self, t: &Tally) {
        self.connections += 1;
        self.handshake_events += t.handshake_events;
        if t.complete {
            self.tcp_handshakes += 1;
        }
        if !t.syn {
            self.without_handshake += 1;
        }
        if let Some(c) = t.connect {
            self.connect.push(c);
        }
        if let Some(overlay) = t.overlay {
            // Bounded: a crafted capture may carry a million VNIs.
            let label = overlay.label();
            let key = if self.overlays.len() < MAX_OVERLAYS || self.overlays.contains_key(&label) {
                label.as_str()
            } else {
                "other"
            };
            count(&mut self.overlays, key);
        }
        count(&mut self.close, t.close.as_str());
        self.syn_retransmissions += u64::from(t.syn_retransmissions);
        self.connection_anomalies.merge(&t.anomalies);
        let tls_full = t.tls_full();
        self.tls_handshakes.add(t);
        if let Some(tls) = &t.tls {
            self.tls_connections += 1;
            if let Some(v) = &tls.version {
                count(&mut self.tls_versions, v);
            }
            if let Some(a) = &tls.alpn {
                count(&mut self.alpn, a);
            }
            if let Some(h) = tls.handshake {
                self.tls_handshake.push(h);
            }
            if let Some(d) = tls.decryption {
                count(&mut self.tls_decryption, d.as_str());
            }
        }
        if t.estimated {
            self.requests_estimated += t.requests;
            if t.low_confidence {
                self.low_confidence += t.requests;
            }
        } else {
            self.requests_exact += t.requests;
        }
        self.max_requests = self.max_requests.max(t.requests);
        if t.requests > 0 {
            self.busy_connections += 1;
            if t.syn {
                self.busy_tcp_handshakes += 1;
            }
            if tls_full {
                self.busy_tls_full += 1;
            }
            if t.tls.as_ref().is_some_and(|t| t.resumed) {
                self.busy_tls_resumed += 1;
            }
            if let Some(d) = t.to_first_request {
                self.to_first_request.push(d);
            }
            add_phases(&mut self.setup_phases, t.setup_phases);
        }
        for &d in &t.durations {
            self.latency.push(d);
        }
        if let Some(past) = &t.unlisted_durations {
            self.latency.merge(past);
        }
        for &(code, n) in &t.status_codes {
            count_n(&mut self.status, itoa::Buffer::new().format(code), n);
        }
        if let Some(limits) = &t.limits {
            self.rate_limit.add(limits);
        }
        self.servers.add(t);
        self.over_time.add(&t.moments);
        match t.idle_close {
            Some((Side::Client, idle)) => self.idle_by_client.push(idle),
            Some((Side::Server, idle)) => self.idle_by_server.push(idle),
            None => {}
        }
        self.requests_after_close += t.requests_after_close;
        self.connections_with_requests_after_close += u64::from(t.requests_after_close > 0);
        self.requests_refused += u64::from(t.requests_refused);
    }

    /// A finished connection's marks, and the first packet of the oldest
    /// connection still open (nanoseconds into the capture; `i64::MAX`
    /// when none is).
    pub fn marks(&mut self, marks: &mut Marks, horizon: i64) {
        self.across.add(marks, horizon);
        self.count_opened_while_idle();
    }

    /// Counts a QUIC connection's record, as it ends, in `over_time` (its
    /// other figures are the QUIC table's).
    pub fn add_quic(&mut self, rec: &crate::record::QuicRecord) {
        self.over_time.add_quic(rec);
    }

    /// Counts in `over_time` the connections the sweep found opened while
    /// another sat idle and beside an HTTP/2 connection, and the full TLS
    /// handshakes not resumed, since it last did.
    fn count_opened_while_idle(&mut self) {
        let [idle, beside, hellos] = self.across.take_counted();
        for syn in idle {
            self.over_time.opened_while_idle(syn);
        }
        for syn in beside {
            self.over_time.beside_http2(syn);
        }
        for hello in hellos {
            self.over_time.not_resumed(hello);
        }
    }

    pub fn finish(mut self, info: &SourceInfo) -> Summary {
        self.across.sweep_all();
        self.count_opened_while_idle();
        let swept = std::mem::take(&mut self.across).finish();
        let (across, opened_while_idle) = (swept.across, swept.opened_while_idle);
        let redialed = swept.redialed;
        let (beside_http2, not_resumed) = (swept.beside_http2, swept.not_resumed);
        let phases = phases_of(&self.setup_phases);
        let mut anomalies = self.anomalies;
        anomalies.merge(&self.connection_anomalies);
        anomalies.add(
            crate::record::AnomalyKind::UnknownInterface,
            info.packets_unknown_interface,
        );
        let span: f64 = match (self.first, self.last) {
            (Some(a), Some(b)) => b.secs_since(a),
            _ => 0.0,
        };
        let requests = self.requests_exact + self.requests_estimated;
        let per = |n: u64| (requests > 0).then(|| n as f64 / requests as f64);
        let handshake_time = HandshakeTime {
            total: self.to_first_request.sum(),
            median: self.to_first_request.distribution().median,
            connections: self.to_first_request.len(),
            phases,
        };
        let unused = self.connections.saturating_sub(self.busy_connections);
        let unused_tls_full = self.tls_handshakes.full.saturating_sub(self.busy_tls_full);
        let (servers, servers_not_listed) = self.servers.finish(
            &swept.opened_by_site,
            &swept.beside_by_site,
            &swept.not_resumed_by_site,
        );
        let idle_closes = IdleCloses {
            by_client: self.idle_by_client.distribution(),
            by_server: self.idle_by_server.distribution(),
            requests_after_close: self.requests_after_close,
            connections_with_requests_after_close: self.connections_with_requests_after_close,
        };
        let verdict = verdict(&Counts {
            requests,
            estimated: self.requests_estimated,
            low_confidence: self.low_confidence,
            connections: self.busy_connections,
            tcp: self.busy_tcp_handshakes,
            tls: self.tls_connections > 0,
            tls_full: self.busy_tls_full,
            tls_resumed: self.busy_tls_resumed,
            idle: unused,
            idle_tls_full: unused_tls_full,
            quic: self.packets.quic,
            quic_connections: self.quic_connections,
            quic_full: self.quic.as_ref().map_or(0, |q| q.handshakes_full),
            quic_resumed: self.quic.as_ref().map_or(0, |q| q.handshakes_resumed),
            quic_decrypted: self.quic.as_ref().map_or(0, |q| q.decrypted),
            quic_requests: self.quic.as_ref().map_or(0, |q| q.requests),
            unreused: servers.iter().filter_map(Unreused::of).collect(),
            server_timeout: server_timeout(&idle_closes.by_server, self.busy_connections),
            after_close: self.requests_after_close,
            after_close_connections: self.connections_with_requests_after_close,
            opened_while_idle: opened_while_idle.as_ref().map_or(0, |o| o.connections),
            redialed: redialed
                .as_ref()
                .map_or((0, 0), |r| (r.connections, r.carried_none)),
            beside_http2: beside_http2
                .as_ref()
                .map_or((0, 0), |b| (b.connections, b.raced)),
            http2_needed: beside_http2.as_ref().map_or((0, None, 0), |b| {
                (b.at_limit, b.stream_limit, b.after_goaway)
            }),
            refused: self.requests_refused,
            not_resumed: not_resumed
                .as_ref()
                .map_or((0, 0), |n| (n.not_offered, n.refused)),
        });
        let mut warnings = info.warnings.clone();
        let tried: u64 = self.tls_decryption.values().sum();
        let no_secrets = self.tls_decryption.get("no_secrets").copied();
        if tried > 0 && no_secrets == Some(tried) {
            warnings.push(format!(
                "the key log has no secrets for any of the {tried} TLS sessions here; was it written by this capture's client, while it was captured?"
            ));
        }
        let decrypted = self.quic.as_ref().map_or(0, |q| q.decrypted);
        if self.packets.quic > 0 && decrypted < self.quic_connections {
            let n = self.quic_connections;
            let sealed = match (
                decrypted,
                self.quic
                    .iter()
                    .any(|q| q.list.iter().any(|r| r.http.is_some())),
            ) {
                (0, false) => {
                    "HTTP/3 requests are sealed and not counted (--keylog opens them)".to_owned()
                }
                (0, true) => {
                    "the key log has no secrets for them, so their HTTP/3 requests are not counted"
                        .to_owned()
                }
                (d, _) => format!(
                    "the key log opened {d}, the requests on the other {} are not counted",
                    n - d
                ),
            };
            warnings.push(format!(
                "{n} QUIC connection{} ({} UDP datagrams with handshake packets): {} read from the Initial packets; {sealed}",
                if n == 1 { "" } else { "s" },
                self.packets.quic,
                if n == 1 { "its handshake is" } else { "their handshakes are" },
            ));
        }
        if !self.unfilterable.is_empty() {
            let frames: u64 = self.unfilterable.values().sum();
            let links: Vec<String> = self
                .unfilterable
                .keys()
                .map(|&l| LinkType(l).name())
                .collect();
            warnings.push(format!(
                "-f's filter does not compile for the link type of {frames} frames ({}): they were left out (counted in filtered_out)",
                links.join(", ")
            ));
        }
        if let Some(q) = self.quic.as_ref().filter(|q| q.not_listed > 0) {
            warnings.push(format!(
                "{} QUIC connections past the first {} are in the figures, JSON Lines and CSV, but not in the table or summary.quic.list",
                q.not_listed,
                q.list.len()
            ));
        }
        Summary {
            tls_connections: self.tls_connections,
            tls_decryption: self.tls_decryption,
            tls_handshakes_full: self.tls_handshakes.full,
            tls_handshakes_resumed: self.tls_handshakes.resumed,
            tls_handshakes_failed: self.tls_handshakes.failed,
            tls_versions: self.tls_versions,
            alpn: self.alpn,
            tls_handshake: self.tls_handshake.distribution(),
            requests,
            requests_exact: self.requests_exact,
            requests_estimated: self.requests_estimated,
            requests_refused: self.requests_refused,
            requests_per_connection: MeanMax {
                mean: (self.connections > 0).then(|| requests as f64 / self.connections as f64),
                max: (self.connections > 0).then_some(self.max_requests),
            },
            handshakes_per_request: PerRequest {
                tcp: per(self.busy_tcp_handshakes),
                tls_full: per(self.busy_tls_full),
            },
            handshake_time,
            handshake_events: self.handshake_events,
            request_latency: self.latency.distribution(),
            peak_concurrent_connections: self.peak.clone(),
            status_codes: self.status,
            rate_limit: self.rate_limit.finish(across),
            opened_while_idle,
            redialed,
            beside_http2,
            not_resumed,
            requests_per_second: (span > 0.0 && requests > 0).then(|| requests as f64 / span),
            servers,
            servers_not_listed,
            over_time: self
                .over_time
                .finish(self.last.zip(self.origin).map(|(l, o)| l.secs_since(o))),
            verdict,
            file: info.name.clone(),
            format: info.format.clone(),
            compression: info.compression.clone(),
            first_packet: self.first.map(Timestamp::as_secs_f64),
            last_packet: self.last.map(Timestamp::as_secs_f64),
            span,
            packets: self.packets,
            connections: self.connections,
            quic_connections: self.quic_connections,
            quic: self.quic,
            tcp_handshakes: self.tcp_handshakes,
            connections_without_handshake: self.without_handshake,
            connections_unused: unused,
            tls_handshakes_full_unused: unused_tls_full,
            overlays: self.overlays,
            connect: self.connect.distribution(),
            close: self.close,
            idle_closes,
            syn_retransmissions: self.syn_retransmissions,
            anomalies,
            truncated: info.truncated,
            warnings,
            capture_drops: None,
            selection: None,
        }
    }
}
