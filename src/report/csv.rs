//! CSV report: one row per connection with flat, stable column names (the
//! JSON names joined by `_`), written as each connection is finalised (as
//! JSON Lines are), so a capture of millions of connections is never held
//! in memory. The only module that names the `csv` crate.
//!
//! Does not compute anything; it flattens `ConnectionRecord`s, and after a
//! file's TCP rows its QUIC connections (`summary.quic.list`, the same
//! columns where they mean the same, `transport` telling the two apart).
//! The lists (TLS events, HTTP requests) stay in JSON.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::analyze::RecordSink;
use crate::record::{
    CertificateInfo, ConnectionRecord, Http2Limits, HttpInfo, QuicRecord, RateLimit, TlsInfo,
};

/// Column names, in order.
pub const COLUMNS: &[&str] = &[
    "file",
    "id",
    "client",
    "server",
    "client_by",
    "partial",
    "start_ts",
    "start_at",
    "end_ts",
    "duration",
    "syn_ts",
    "synack_ts",
    "ack_ts",
    "syn_to_synack",
    "synack_to_ack",
    "connect",
    "syn_retransmissions",
    "handshake_complete",
    "packets_client",
    "packets_server",
    "bytes_client",
    "bytes_server",
    "retransmissions_client",
    "retransmissions_server",
    "state",
    "history",
    "close_kind",
    "close_by",
    "close_ts",
    "anomalies",
    "overlay_kind",
    "overlay_id",
    "tls_version",
    "tls_offered_version",
    "tls_cipher",
    "tls_sni",
    "tls_alpn",
    "tls_alpn_offered",
    "tls_resumed",
    "tls_resumption",
    "tls_resumption_offered",
    "tls_hello_retry",
    "tls_early_data_offered",
    "tls_client_certificate_requested",
    "tls_outcome",
    "tls_alert_side",
    "tls_alert_level",
    "tls_alert_description",
    "tls_client_hello_ts",
    "tls_hello_to_hello",
    "tls_handshake",
    "tls_syn_to_app_data",
    "tls_ja4",
    "tls_ja3",
    "tls_ja3s",
    "tls_gap_bytes",
    "http_method",
    "http_requests",
    "http_responses",
    "http_estimated",
    "http_confidence",
    "http_lost_sync",
    "http_connection_close",
    "http_upgrade",
    "http_resets",
    "http_goaway",
    "tls_decryption",
    "tls_records_opened",
    "tls_records_failed",
    "tls_alpn_by_size",
    "http_status_codes",
    "tls_cert_chain",
    "tls_cert_bytes",
    "tls_cert_subject",
    "tls_cert_issuer",
    "tls_cert_not_after",
    "transport",
    "quic_version",
    "quic_retry",
    "tls_early_data_accepted",
    "close_error",
    "close_reason",
    "quic_idle_timeout",
    "quic_server_idle_timeout",
    RATE_LIMIT_COLUMNS[0],
    RATE_LIMIT_COLUMNS[1],
    RATE_LIMIT_COLUMNS[2],
    RATE_LIMIT_COLUMNS[3],
    RATE_LIMIT_COLUMNS[4],
    "close_idle",
    "close_requests_after",
    "http2_max_concurrent_streams",
    "http2_peak_streams",
    "http2_at_limit",
    "http2_at_limit_seconds",
    "http2_goaway_from",
    "http2_goaway_error",
    "http2_refused",
    "tls_session_issued",
    "http_host",
];

/// The `http_rate_limit_…` columns, in the order of [`rate_limit_cells`].
const RATE_LIMIT_COLUMNS: [&str; 5] = [
    "http_rate_limit_responses_429",
    "http_rate_limit_retry_after",
    "http_rate_limit_requests_in_window",
    "http_rate_limit_wait_after_429_median",
    "http_rate_limit_ended_on_429",
];

/// Writes the header once: several files make one table, told apart by
/// the `file` column.
pub struct CsvReport {
    header_written: bool,
}

/// `e` as an I/O error: the writer's own error when it was one (so a
/// closed pipe stays a `BrokenPipe`, which exits quietly; the `csv`
/// crate's conversion makes every error `Other`).
fn io_error(e: csv::Error) -> io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn text(v: Option<&str>) -> String {
    v.unwrap_or_default().to_string()
}

/// `key=count` pairs joined by `;`: responses by status, `200=97;429=3`;
/// Retry-After seconds, `1=8`.
fn pairs<K: std::fmt::Display>(counts: &BTreeMap<K, u64>) -> String {
    let pairs: Vec<String> = counts.iter().map(|(k, n)| format!("{k}={n}")).collect();
    pairs.join(";")
}

fn flag(v: Option<bool>) -> String {
    v.map(|b| b.to_string()).unwrap_or_default()
}

impl CsvReport {
    pub fn new() -> CsvReport {
        CsvReport {
            header_written: false,
        }
    }

    /// A sink writing the rows of `file`'s connections to `out` as they
    /// come; the header first, if no file has written it yet.
    pub fn sink<'w>(&mut self, file: &str, out: &'w mut dyn Write) -> io::Result<CsvSink<'w>> {
        let mut writer = csv::Writer::from_writer(out);
        if !self.header_written {
            writer.write_record(COLUMNS).map_err(io_error)?;
            self.header_written = true;
        }
        Ok(CsvSink {
            writer,
            file: file.to_string(),
        })
    }
}

/// Writes one CSV row per record, as the analysis finalises them.
pub struct CsvSink<'w> {
    writer: csv::Writer<&'w mut dyn Write>,
    file: String,
}

impl CsvSink<'_> {
    /// Writes out what is buffered.
    pub fn finish(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

impl RecordSink for CsvSink<'_> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.writer
            .write_record(row(&self.file, &rec))
            .map_err(io_error)
    }

    /// A QUIC connection's row, as it ends: every one, listed in the
    /// summary or not.
    fn quic(&mut self, rec: &QuicRecord) -> io::Result<()> {
        let row = COLUMNS
            .iter()
            .map(|column| quic_cell(&self.file, column, rec));
        self.writer.write_record(row).map_err(io_error)
    }
}

/// `r`'s row, in [`COLUMNS`]' order.
fn row(file: &str, r: &ConnectionRecord) -> Vec<String> {
    let hs = &r.tcp.handshake;
    let anomalies: Vec<String> = r
        .anomalies
        .0
        .iter()
        .map(|(k, n)| format!("{}={n}", k.as_str()))
        .collect();
    let mut row = vec![
        file.to_string(),
        r.id.to_string(),
        r.client.clone(),
        r.server.clone(),
        serde_plain(&r.client_by),
        r.partial.to_string(),
        r.start.ts.to_string(),
        r.start.at.to_string(),
        r.end.ts.to_string(),
        r.duration.to_string(),
        opt(hs.syn.map(|i| i.ts)),
        opt(hs.synack.map(|i| i.ts)),
        opt(hs.ack.map(|i| i.ts)),
        opt(hs.syn_to_synack),
        opt(hs.synack_to_ack),
        opt(hs.connect),
        hs.syn_retransmissions.to_string(),
        hs.complete.to_string(),
        r.tcp.packets.client.to_string(),
        r.tcp.packets.server.to_string(),
        r.tcp.bytes.client.to_string(),
        r.tcp.bytes.server.to_string(),
        r.tcp.retransmissions.client.to_string(),
        r.tcp.retransmissions.server.to_string(),
        r.tcp.state.to_string(),
        r.tcp.history.clone(),
        r.close.kind.as_str().to_string(),
        r.close
            .by
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        opt(r.close.time.map(|i| i.ts)),
        anomalies.join(";"),
        r.overlay
            .map_or(String::new(), |o| o.kind.name().to_string()),
        r.overlay.map_or(String::new(), |o| o.id.to_string()),
    ];
    row.extend(tls_cells(r.tls.as_ref()));
    row.extend(http_cells(&r.http));
    // Added later: at the end, where new columns go.
    let decryption = r.tls.as_ref().and_then(|t| t.decryption);
    row.extend([
        decryption.map_or(String::new(), |d| d.outcome.as_str().to_string()),
        decryption.map_or(String::new(), |d| d.records_opened.to_string()),
        decryption.map_or(String::new(), |d| d.records_failed.to_string()),
        r.tls
            .as_ref()
            .and_then(|t| t.alpn_by_size.clone())
            .unwrap_or_default(),
        pairs(&r.http.status_codes),
    ]);
    let cert = r.tls.as_ref().and_then(|t| t.certificate.as_ref());
    row.extend(["chain", "bytes", "subject", "issuer", "not_after"].map(|f| cert_cell(f, cert)));
    row.extend([
        "tcp".to_string(),
        String::new(),
        String::new(),
        flag(r.tls.as_ref().and_then(|t| t.early_data.accepted)),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]);
    row.extend(rate_limit_cells(r.http.rate_limit.as_ref()));
    row.extend([opt(r.close.idle), r.close.requests_after.to_string()]);
    row.extend(http2_cells(r.http.http2.as_deref()));
    row.push(
        r.tls
            .as_ref()
            .map_or(String::new(), |t| flag(t.session_issued)),
    );
    row.push(text(r.http.host.as_deref()));
    row
}

/// The `http2_…` cells, empty where HTTP/2's frames were not read.
fn http2_cells(h: Option<&Http2Limits>) -> [String; 7] {
    let Some(h) = h else {
        return Default::default();
    };
    let goaway = h.goaway.as_ref();
    [
        h.max_concurrent_streams
            .map_or(String::new(), |m| m.to_string()),
        h.peak_streams.to_string(),
        h.at_limit.to_string(),
        h.at_limit_seconds.to_string(),
        goaway.map_or(String::new(), |g| g.from.as_str().to_string()),
        text(goaway.map(|g| g.error)),
        h.refused.to_string(),
    ]
}

/// The `http_rate_limit_…` cells, empty where there is no `rate_limit`.
fn rate_limit_cells(r: Option<&RateLimit>) -> [String; 5] {
    let Some(r) = r else {
        return Default::default();
    };
    [
        r.responses_429.to_string(),
        pairs(&r.retry_after),
        r.requests_in_window.to_string(),
        opt(r.wait_after_429.median),
        r.ended_on_429.to_string(),
    ]
}

/// A QUIC connection's cell in `column`: the field that means what the
/// column means for a TCP connection, or empty where QUIC has none (the
/// TCP handshake, retransmissions, anomalies, the HTTP estimate).
fn quic_cell(file: &str, column: &str, q: &QuicRecord) -> String {
    let t = &q.tls;
    let http = q.http.as_ref();
    let close = q.close.as_ref();
    let cert = t.certificate.as_ref();
    match column {
        "file" => file.to_string(),
        "id" => q.id.to_string(),
        "client" => q.client.clone(),
        "server" => q.server.clone(),
        "start_ts" => q.start.ts.to_string(),
        "start_at" => q.start.at.to_string(),
        "end_ts" => q.end.ts.to_string(),
        "duration" => q.duration.to_string(),
        "packets_client" => q.datagrams.client.to_string(),
        "packets_server" => q.datagrams.server.to_string(),
        "bytes_client" => q.bytes.client.to_string(),
        "bytes_server" => q.bytes.server.to_string(),
        "close_kind" => text(close.map(|c| &*c.kind)),
        "close_by" => close.map_or(String::new(), |c| c.by.as_str().to_string()),
        "close_ts" => opt(close.map(|c| c.time.ts)),
        "close_error" => close.map_or(String::new(), |c| c.error_code.to_string()),
        "close_reason" => text(close.and_then(|c| c.reason.as_deref())),
        "overlay_kind" => q
            .overlay
            .map_or(String::new(), |o| o.kind.name().to_string()),
        "overlay_id" => q.overlay.map_or(String::new(), |o| o.id.to_string()),
        "tls_version" => text(t.version.as_deref()),
        "tls_cipher" => text(t.cipher.as_deref()),
        "tls_sni" => text(t.sni.as_deref()),
        "tls_alpn" => text(t.alpn.as_deref()),
        "tls_alpn_offered" => t.alpn_offered.join(";"),
        "tls_resumed" => flag(t.resumed),
        "tls_early_data_offered" => t.early_data_offered.to_string(),
        "tls_early_data_accepted" => flag(t.early_data_accepted),
        "tls_client_hello_ts" => opt(t.client_hello.map(|i| i.ts)),
        "tls_hello_to_hello" => opt(t.hello_to_hello),
        "tls_handshake" => opt(q.handshake.duration),
        "tls_ja4" => text(t.ja4.as_deref()),
        _ if column.starts_with("tls_cert_") => {
            cert_cell(column.trim_start_matches("tls_cert_"), cert)
        }
        "tls_decryption" => http.map_or(String::new(), |h| h.decryption.as_str().to_string()),
        "tls_records_opened" => http.map_or(String::new(), |h| h.packets_opened.to_string()),
        "tls_records_failed" => http.map_or(String::new(), |h| h.packets_failed.to_string()),
        "http_requests" => http.map_or(String::new(), |h| h.requests.to_string()),
        "http_responses" => http.map_or(String::new(), |h| h.responses.to_string()),
        "http_status_codes" => http.map_or(String::new(), |h| pairs(&h.status_codes)),
        "transport" => "quic".to_string(),
        "quic_version" => q.version.to_string(),
        "quic_retry" => q.handshake.retry.to_string(),
        "quic_idle_timeout" => opt(q.handshake.idle_timeout),
        "quic_server_idle_timeout" => opt(q.handshake.server_idle_timeout),
        "state" => q.ended.to_string(),
        _ if column.starts_with("http_rate_limit_") => {
            let cells = rate_limit_cells(http.and_then(|h| h.rate_limit.as_ref()));
            let at = RATE_LIMIT_COLUMNS.iter().position(|c| *c == column);
            at.and_then(|i| cells.into_iter().nth(i))
                .unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// The `tls_cert_…` cell `field` (`chain`, `bytes`, `subject`, `issuer`,
/// `not_after`) of a server certificate: empty without one.
fn cert_cell(field: &str, cert: Option<&CertificateInfo>) -> String {
    let Some(c) = cert else {
        return String::new();
    };
    match field {
        "chain" => c.chain.to_string(),
        "bytes" => c.bytes.to_string(),
        "subject" => text(c.subject.as_deref()),
        "issuer" => text(c.issuer.as_deref()),
        "not_after" => text(c.not_after.as_deref()),
        _ => String::new(),
    }
}

/// The `tls_*` cells: all empty for a connection that was not TLS.
fn tls_cells(tls: Option<&TlsInfo>) -> [String; 24] {
    let Some(t) = tls else {
        return Default::default();
    };
    let alert = t.alert.as_ref();
    [
        text(t.version.as_deref()),
        text(t.offered_version.as_deref()),
        text(t.cipher.as_deref()),
        text(t.sni.as_deref()),
        text(t.alpn.as_deref()),
        t.alpn_offered.join(";"),
        t.resumed.to_string(),
        text(t.resumption.as_deref()),
        text(t.resumption_offered.as_deref()),
        t.hello_retry.to_string(),
        t.early_data.offered.to_string(),
        flag(t.client_certificate_requested),
        serde_plain(&t.outcome),
        alert.map_or(String::new(), |a| a.side.as_str().to_string()),
        text(alert.map(|a| &*a.level)),
        text(alert.map(|a| &*a.description)),
        opt(t.client_hello.map(|i| i.ts)),
        opt(t.hello_to_hello),
        opt(t.handshake),
        opt(t.syn_to_app_data),
        text(t.ja4.as_deref()),
        text(t.ja3.as_deref()),
        text(t.ja3s.as_deref()),
        t.gap_bytes.to_string(),
    ]
}

/// The `http_*` cells.
fn http_cells(h: &HttpInfo) -> [String; 10] {
    [
        serde_plain(&h.method),
        h.requests.to_string(),
        h.responses.to_string(),
        h.estimated.to_string(),
        h.confidence.to_string(),
        h.lost_sync.to_string(),
        h.connection_close.to_string(),
        text(h.upgrade.as_deref()),
        h.resets.to_string(),
        h.goaway.to_string(),
    ]
}

impl Default for CsvReport {
    fn default() -> Self {
        Self::new()
    }
}

/// The JSON spelling of a unit enum variant, without quotes.
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
