//! The comparison's metrics: each row's key, label, unit and better
//! direction, its value read from a capture's `Summary`, and the pairs
//! `compare` shows.
//!
//! Does not lay out tables, JSON or HTML, nor word the verdict (`compare`).

use super::Labeled;
use crate::record::{
    AcrossConnections, BesideHttp2, Distribution, RateLimitSummary, SetupPhases, Summary,
};
use crate::report::human_duration;

/// How a metric's values print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Count,
    Ratio,
    Seconds,
    PerSecond,
}

/// Which direction is an improvement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Better {
    Lower,
    Higher,
    Neither,
}

/// One row of the comparison.
#[derive(Clone, Debug)]
pub(crate) struct Metric {
    /// Stable JSON key.
    pub key: &'static str,
    /// Row label for people.
    pub label: &'static str,
    pub unit: Unit,
    pub better: Better,
    pub a: Option<f64>,
    pub b: Option<f64>,
}

impl Metric {
    /// Shown in the tables for people: either capture has a value (JSON
    /// keeps every key, null where there is none).
    pub fn shown(&self) -> bool {
        self.a.is_some() || self.b.is_some()
    }

    /// b / a, or `None` when either is missing or a is zero.
    pub fn ratio(&self) -> Option<f64> {
        match (self.a, self.b) {
            (Some(a), Some(b)) if a != 0.0 && a.is_finite() && b.is_finite() => Some(b / a),
            _ => None,
        }
    }

    /// Some(true) when B is better than A, Some(false) when worse.
    pub fn b_better(&self) -> Option<bool> {
        let (a, b) = (self.a?, self.b?);
        if (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) {
            return None;
        }
        match self.better {
            Better::Lower => Some(b < a),
            Better::Higher => Some(b > a),
            Better::Neither => None,
        }
    }
}

/// A value for people.
pub(crate) fn format_value(v: Option<f64>, unit: Unit) -> String {
    match (v, unit) {
        (None, _) => "-".to_string(),
        (Some(x), Unit::Count) => format!("{x:.0}"),
        (Some(x), Unit::Ratio) => format!("{x:.2}"),
        (Some(x), Unit::Seconds) => human_duration(x),
        (Some(x), Unit::PerSecond) => format!("{x:.1}/s"),
    }
}

/// Final responses by class, as counted where statuses were read.
#[derive(Clone, Copy)]
struct Statuses {
    all: f64,
    ok: f64,
    client_error: f64,
    rate_limited: f64,
    server_error: f64,
}

impl Statuses {
    fn rate_limited_share(self) -> Option<f64> {
        (self.all > 0.0).then(|| self.rate_limited / self.all)
    }
}

/// `s`'s responses by class; none where no status could be read (every
/// request estimated from encrypted records).
fn statuses(s: &Summary) -> Option<Statuses> {
    if s.status_codes.is_empty() && s.requests_exact == 0 {
        return None;
    }
    let mut st = Statuses {
        all: 0.0,
        ok: 0.0,
        client_error: 0.0,
        rate_limited: 0.0,
        server_error: 0.0,
    };
    for (code, &n) in &s.status_codes {
        let n = n as f64;
        st.all += n;
        match code.as_bytes().first() {
            Some(b'2') => st.ok += n,
            Some(b'4') => st.client_error += n,
            Some(b'5') => st.server_error += n,
            _ => {}
        }
        if code == "429" {
            st.rate_limited += n;
        }
    }
    Some(st)
}

fn per_request(n: f64, requests: u64) -> Option<f64> {
    (requests > 0).then(|| n / requests as f64)
}

/// The values of every metric for one capture, in row order:
/// `(key, label, unit, better, value)`.
pub(crate) fn values(s: &Summary) -> Vec<(&'static str, &'static str, Unit, Better, Option<f64>)> {
    use Better::{Higher, Lower, Neither};
    use Unit::{Count, PerSecond, Ratio, Seconds};
    let c = |n: u64| Some(n as f64);
    let events = s.handshake_events;
    let dist = |d: &Distribution| [d.median, d.p90, d.p95, d.max];
    let [cm, c90, c95, cmax] = dist(&s.connect);
    let [tm, t90, t95, tmax] = dist(&s.tls_handshake);
    let l = &s.request_latency;
    let st = statuses(s);
    // Rate limiting's counts: 0 where statuses were read and none spoke of it.
    let rl = s.rate_limit.as_ref();
    let limit = |f: fn(&RateLimitSummary) -> f64| match rl {
        Some(r) => Some(f(r)),
        None => st.map(|_| 0.0),
    };
    /// A count across connections (0 where they were not followed).
    fn across(r: &RateLimitSummary, f: fn(&AcrossConnections) -> u64) -> f64 {
        r.across_connections.as_ref().map_or(0.0, |a| f(a) as f64)
    }
    let quic = s.quic.as_ref();
    // Handshakes per request over every connection, those that carried
    // none too (the full TLS ones null without TLS).
    let all_per_request = crate::report::per_request_all(s);
    // The setup's steps, summed over the connections whose every step was seen.
    let phase = |f: fn(&SetupPhases) -> f64| s.handshake_time.phases.as_ref().map(f);
    // …those of TLS null without TLS.
    let tls_phase = |f: fn(&SetupPhases) -> f64| phase(f).filter(|_| s.tls_connections > 0);
    let ic = &s.idle_closes;
    // HTTP/2's limits and refusals are read where it was offered and
    // requests were read exactly (from frames); null otherwise, unless
    // some were seen.
    let frames = s.beside_http2.is_some() && s.requests_exact > 0;
    let refused = (frames || s.requests_refused > 0).then_some(s.requests_refused as f64);
    let needed = |f: fn(&BesideHttp2) -> u64| {
        let n = s.beside_http2.as_ref().map_or(0, f);
        (frames || n > 0).then_some(n as f64)
    };
    #[rustfmt::skip]
    let rows = vec![
        ("connections", "connections", Count, Neither, c(s.connections)),
        ("connections_unused", "connections carrying no request", Count, Lower, c(s.connections_unused)),
        ("quic_connections", "QUIC connections", Count, Neither, (s.packets.quic > 0).then_some(s.quic_connections as f64)),
        ("quic_handshakes_full", "full QUIC handshakes", Count, Lower, quic.map(|q| q.handshakes_full as f64)),
        ("quic_handshakes_resumed", "resumed QUIC handshakes", Count, Neither, quic.map(|q| q.handshakes_resumed as f64)),
        ("quic_handshake_median", "QUIC handshake (median)", Seconds, Lower, quic.and_then(|q| q.handshake.median)),
        ("quic_requests", "HTTP/3 requests (with the key log)", Count, Neither, quic.filter(|q| q.decrypted > 0).map(|q| q.requests as f64)),
        ("quic_handshakes_per_request", "QUIC handshakes per HTTP/3 request", Ratio, Lower, quic.and_then(|q| q.handshakes_per_request)),
        ("quic_status_429", "HTTP/3 responses 429 (with the key log)", Count, Lower, quic.filter(|q| q.decrypted > 0).map(|q| q.status_codes.get("429").copied().unwrap_or(0) as f64)),
        ("quic_requests_in_retry_window", "HTTP/3 requests sent while a Retry-After ran", Count, Lower, quic.filter(|q| q.decrypted > 0).map(|q| q.rate_limit.as_ref().map_or(0.0, |r| r.requests_in_window as f64))),
        ("tcp_handshakes", "TCP handshakes", Count, Lower, c(s.tcp_handshakes)),
        ("tls_full", "TLS handshakes: full", Count, Lower, c(s.tls_handshakes_full)),
        ("tls_resumed", "TLS handshakes: resumed", Count, Neither, c(s.tls_handshakes_resumed)),
        ("tls_failed", "TLS handshakes: failed", Count, Lower, c(s.tls_handshakes_failed)),
        ("requests", "requests", Count, Neither, c(s.requests)),
        ("requests_exact", "requests: exact", Count, Neither, c(s.requests_exact)),
        ("requests_estimated", "requests: estimated", Count, Neither, c(s.requests_estimated)),
        ("tcp_handshakes_per_request", "TCP handshakes per request", Ratio, Lower, s.handshakes_per_request.tcp),
        ("tls_full_per_request", "full TLS handshakes per request", Ratio, Lower, s.handshakes_per_request.tls_full),
        ("tcp_handshakes_per_request_all", "TCP handshakes per request, all connections", Ratio, Lower, all_per_request.map(|(tcp, _)| tcp)),
        ("tls_full_per_request_all", "full TLS per request, all connections", Ratio, Lower, all_per_request.and_then(|(_, tls)| tls)),
        ("requests_per_connection_mean", "requests per connection: mean", Ratio, Higher, s.requests_per_connection.mean),
        ("requests_per_connection_max", "requests per connection: max", Count, Higher, s.requests_per_connection.max.map(|m| m as f64)),
        ("handshake_time_total", "setup time (SYN → 1st request byte): total", Seconds, Lower, (s.handshake_time.connections > 0).then_some(s.handshake_time.total)),
        ("handshake_time_median", "setup time: median per connection", Seconds, Lower, s.handshake_time.median),
        ("setup_connect_total", "setup time: TCP connect, total", Seconds, Lower, phase(|p| p.connect)),
        ("setup_before_client_hello_total", "setup time: before ClientHello, total", Seconds, Lower, tls_phase(|p| p.before_client_hello)),
        ("setup_tls_handshake_total", "setup time: TLS handshake, total", Seconds, Lower, tls_phase(|p| p.tls_handshake)),
        ("setup_to_request_total", "setup time: handshake → request, total", Seconds, Lower, phase(|p| p.to_request)),
        ("connect_median", "connect: median", Seconds, Lower, cm),
        ("connect_p90", "connect: p90", Seconds, Lower, c90),
        ("connect_p95", "connect: p95", Seconds, Lower, c95),
        ("connect_max", "connect: max", Seconds, Lower, cmax),
        ("tls_handshake_median", "TLS handshake: median", Seconds, Lower, tm),
        ("tls_handshake_p90", "TLS handshake: p90", Seconds, Lower, t90),
        ("tls_handshake_p95", "TLS handshake: p95", Seconds, Lower, t95),
        ("tls_handshake_max", "TLS handshake: max", Seconds, Lower, tmax),
        ("latency_avg", "request latency: avg", Seconds, Lower, l.avg),
        ("latency_min", "request latency: min", Seconds, Lower, l.min),
        ("latency_median", "request latency: median", Seconds, Lower, l.median),
        ("latency_p90", "request latency: p90", Seconds, Lower, l.p90),
        ("latency_p95", "request latency: p95", Seconds, Lower, l.p95),
        ("latency_max", "request latency: max", Seconds, Lower, l.max),
        ("status_2xx", "responses 2xx", Count, Higher, st.map(|s| s.ok)),
        ("status_4xx", "responses 4xx", Count, Lower, st.map(|s| s.client_error)),
        ("status_429", "responses 429 (rate limited)", Count, Lower, st.map(|s| s.rate_limited)),
        ("status_5xx", "responses 5xx", Count, Lower, st.map(|s| s.server_error)),
        ("status_429_share", "429 share of responses", Ratio, Lower, st.and_then(|s| s.rate_limited_share())),
        ("requests_in_retry_window", "requests sent while a Retry-After ran, same connection", Count, Lower, limit(|r| r.requests_in_window as f64)),
        ("wait_after_429_median", "wait after a 429 (same connection): median", Seconds, Neither, rl.and_then(|r| r.wait_after_429.median)),
        ("requests_in_retry_window_any_connection", "requests sent while a Retry-After ran, any connection", Count, Lower, limit(|r| across(r, |a| a.requests_in_window))),
        ("connections_opened_in_retry_window", "connections opened while a Retry-After ran", Count, Lower, limit(|r| across(r, |a| a.connections_opened_in_window))),
        ("wait_after_429_any_connection_median", "wait after a 429 (any connection): median", Seconds, Neither, rl.and_then(|r| r.across_connections.as_ref()?.wait_after_429.median)),
        ("connections_closed_after_429", "connections closed after a 429", Count, Lower, limit(|r| r.closed_after_429.values().sum::<u64>() as f64)),
        ("closed_by_server_after_response", "connections the server closed after a response", Count, Neither, c(ic.by_server.count)),
        ("server_close_after_response_median", "server's close after the last response: median", Seconds, Neither, ic.by_server.median),
        ("requests_after_close", "requests sent after their connection's close", Count, Lower, (ic.by_client.count + ic.by_server.count > 0 || ic.requests_after_close > 0).then_some(ic.requests_after_close as f64)),
        ("opened_while_idle", "connections opened while another sat idle", Count, Lower, s.opened_while_idle.as_ref().map(|o| o.connections as f64)),
        ("opened_while_idle_setup_total", "their setup (SYN → 1st request): total", Seconds, Lower, s.opened_while_idle.as_ref().map(|o| o.setup_total)),
        ("redialed", "connections opened after the client closed one", Count, Lower, s.redialed.as_ref().map(|r| r.connections as f64)),
        ("beside_http2", "connections opened beside an HTTP/2 connection", Count, Lower, s.beside_http2.as_ref().map(|b| b.connections as f64)),
        ("beside_http2_handshake_total", "their handshakes: total", Seconds, Lower, s.beside_http2.as_ref().map(|b| b.handshake_total)),
        ("beside_http2_at_limit", "connections needed: HTTP/2 at its stream limit", Count, Neither, needed(|b| b.at_limit)),
        ("beside_http2_after_goaway", "connections needed: HTTP/2 going away", Count, Neither, needed(|b| b.after_goaway)),
        ("requests_refused", "HTTP/2 requests refused unprocessed", Count, Lower, refused),
        ("tls_not_offered", "full TLS handshakes offering no session", Count, Lower, s.not_resumed.as_ref().map(|n| n.not_offered as f64)),
        ("tls_refused", "full TLS handshakes: offered session refused", Count, Lower, s.not_resumed.as_ref().map(|n| n.refused as f64)),
        ("peak_concurrent_connections", "peak concurrent connections", Count, Neither, c(s.peak_concurrent_connections.connections)),
        ("requests_per_second", "requests per second", PerSecond, Higher, s.requests_per_second),
        ("handshake_events", "handshake events (TCP packets + TLS messages)", Count, Lower, c(events)),
        ("handshake_events_per_request", "handshake events per request", Ratio, Lower, per_request(events as f64, s.requests)),
    ];
    rows
}

/// Every metric of A and B, in row order. The keys are stable (JSON):
/// `connections`, `connections_unused`, `quic_connections`,
/// `quic_handshakes_full`, `quic_handshakes_resumed`, `quic_handshake_median`,
/// `quic_requests`, `quic_handshakes_per_request`, `quic_status_429`,
/// `quic_requests_in_retry_window`, `tcp_handshakes`, `tls_full`, `tls_resumed`, `tls_failed`,
/// `requests`, `requests_exact`, `requests_estimated`,
/// `tcp_handshakes_per_request`, `tls_full_per_request`,
/// `tcp_handshakes_per_request_all`, `tls_full_per_request_all`, `redialed`,
/// `requests_per_connection_mean`, `requests_per_connection_max`,
/// `handshake_time_total`, `handshake_time_median`, `setup_connect_total`,
/// `setup_before_client_hello_total`, `setup_tls_handshake_total`,
/// `setup_to_request_total`, `connect_median`,
/// `connect_p90`, `connect_p95`, `connect_max`, `tls_handshake_median`,
/// `tls_handshake_p90`, `tls_handshake_p95`, `tls_handshake_max`,
/// `latency_avg`, `latency_min`, `latency_median`, `latency_p90`,
/// `latency_p95`, `latency_max`, `status_2xx`, `status_4xx`, `status_429`,
/// `status_5xx`, `status_429_share`, `requests_in_retry_window`,
/// `wait_after_429_median`, `connections_closed_after_429`,
/// `closed_by_server_after_response`, `server_close_after_response_median`,
/// `requests_after_close`, `opened_while_idle`,
/// `opened_while_idle_setup_total`, `beside_http2`,
/// `beside_http2_handshake_total`, `beside_http2_at_limit`,
/// `beside_http2_after_goaway`, `requests_refused`, `tls_not_offered`, `tls_refused`,
/// `peak_concurrent_connections`,
/// `requests_per_second`, `handshake_events`, `handshake_events_per_request`.
/// Times are seconds.
pub(crate) fn metrics(a: &Labeled, b: &Labeled) -> Vec<Metric> {
    values(a.summary)
        .into_iter()
        .zip(values(b.summary))
        .map(
            |((key, label, unit, better, va), (_, _, _, _, vb))| Metric {
                key,
                label,
                unit,
                better,
                a: va,
                b: vb,
            },
        )
        .collect()
}
