//! The report for people: a summary block, then one table row per connection
//! in id order (the rows kept and laid out by `table/rows.rs` and
//! `table/layout.rs`); and the fixed-width lines of live capture.
//!
//! Does not compute statistics; it formats `Summary` and `ConnectionRecord`.

mod layout;
mod missed;
mod over_time;
mod quic;
mod rows;
mod servers;

use std::io::{self, Write};

pub(crate) use missed::{beside_http2_text, not_resumed_text, redialed_text, while_idle_text};
pub(crate) use over_time::{fold, fold_start, marks, shown as over_time_shown, Take, LINES};
pub(crate) use quic::{cells as quic_cells, HEADS as QUIC_HEADS};
pub use rows::TableSink;
pub(crate) use servers::{
    cells as server_cells, name as server_name, HEADS as SERVER_HEADS, SHOWN as SERVERS_SHOWN,
};

use super::timeline::{close_text, quic_requests_text, requests_text};
use super::{
    counts_text, endpoint_in, human_bytes, human_duration, plural, sanitize, server_text, Opts,
};
use crate::record::{ConnectionRecord, Distribution, IdleCloses, QuicRecord, SetupPhases, Summary};

/// Writes the summary block and the connection table of `records` (in any
/// order; the table has the first `opts.limit` by id): what
/// [`TableSink`] writes for them.
pub fn write(
    summary: &Summary,
    records: &[ConnectionRecord],
    out: &mut dyn Write,
    opts: &Opts,
) -> io::Result<()> {
    let mut table = TableSink::new(opts.limit);
    for rec in records {
        table.add(rec)?;
    }
    table.finish(summary, out, opts)
}

fn dist_line(d: &Distribution) -> String {
    match (d.median, d.p90, d.max) {
        (Some(median), Some(p90), Some(max)) => format!(
            "median {}  p90 {}  max {}  (n={})",
            human_duration(median),
            human_duration(p90),
            human_duration(max),
            d.count
        ),
        _ => "-".to_string(),
    }
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.2}"))
}

/// The HTTP/2 requests servers refused unprocessed: `8 more refused
/// unprocessed by the server (HTTP/2), not counted` — sent, never served:
/// the client sends them again, counted there; `None` when none was.
pub(crate) fn refused_text(s: &Summary) -> Option<String> {
    (s.requests_refused > 0).then(|| {
        format!(
            "{} more refused unprocessed by the server (HTTP/2), not counted",
            s.requests_refused
        )
    })
}

/// The headline: requests, connections, handshakes and what they cost.
pub fn write_headline(s: &Summary, out: &mut dyn Write) -> io::Result<()> {
    // It may name a server by its SNI: the capture's text.
    writeln!(out, "verdict       {}", sanitize(&s.verdict))?;
    if s.requests > 0 {
        let rps = s
            .requests_per_second
            .map_or(String::new(), |r| format!(", {r:.1}/s"));
        let refused = refused_text(s).map_or(String::new(), |r| format!(" · {r}"));
        // Over the connections that carried one too (the verdict's), where
        // some carried none.
        let carried = super::per_connection_used(s).map_or(String::new(), |used| {
            format!(", {used:.2} per one that carried any")
        });
        writeln!(
            out,
            "requests      {} ({} exact, {} estimated) — {} per connection{carried} (max {}){rps}{refused}",
            s.requests,
            s.requests_exact,
            s.requests_estimated,
            ratio(s.requests_per_connection.mean),
            s.requests_per_connection.max.unwrap_or(0),
        )?;
    }
    let tls = if s.tls_connections == 0 {
        "no TLS".to_string()
    } else {
        format!(
            "TLS {} full, {} resumed, {} failed",
            s.tls_handshakes_full, s.tls_handshakes_resumed, s.tls_handshakes_failed
        )
    };
    let tls_per_request = if s.tls_connections == 0 {
        String::new()
    } else {
        format!(", TLS full {}", ratio(s.handshakes_per_request.tls_full))
    };
    // HTTP/3's, with a key log: after TCP's, or alone when no request
    // went over TCP.
    let quic_per_request = s.quic.as_ref().and_then(|q| q.handshakes_per_request);
    let per_request = match quic_per_request {
        Some(q) if s.requests == 0 => format!("QUIC {}", ratio(Some(q))),
        q => format!(
            "TCP {}{tls_per_request}{}",
            ratio(s.handshakes_per_request.tcp),
            q.map_or(String::new(), |q| format!(", QUIC {}", ratio(Some(q))))
        ),
    };
    let quic = s.quic.as_ref().map_or(String::new(), |q| {
        format!(
            "QUIC {} full, {} resumed · ",
            q.handshakes_full, q.handshakes_resumed
        )
    });
    // With the connections that carried none, where some did.
    let all = super::per_request_all(s).filter(|_| s.connections_unused > 0);
    let unused = match all {
        Some((tcp, tls_full)) => {
            let tls_full = tls_full.map_or(String::new(), |t| format!(", TLS full {t:.2}"));
            let n = s.connections_unused;
            format!(
                " · with the {n} connection{} that carried none: TCP {tcp:.2}{tls_full}",
                super::plural(n)
            )
        }
        None => String::new(),
    };
    writeln!(
        out,
        "handshakes    TCP {} · {tls} · {quic}per request: {per_request}{unused}",
        s.tcp_handshakes,
    )?;
    if let Some(median) = s.handshake_time.median {
        writeln!(
            out,
            "setup time    {} in total, median {} per connection (SYN → first request byte)",
            human_duration(s.handshake_time.total),
            human_duration(median)
        )?;
        if let Some(p) = &s.handshake_time.phases {
            writeln!(
                out,
                "              {}",
                phases_text(p, s.handshake_time.connections)
            )?;
        }
    }
    let l = &s.request_latency;
    if let (Some(avg), Some(min), Some(med), Some(p90), Some(p95), Some(max)) =
        (l.avg, l.min, l.median, l.p90, l.p95, l.max)
    {
        writeln!(
            out,
            "latency       avg {}  min {}  med {}  p90 {}  p95 {}  max {}  (n={})",
            human_duration(avg),
            human_duration(min),
            human_duration(med),
            human_duration(p90),
            human_duration(p95),
            human_duration(max),
            l.count
        )?;
    }
    if let Some(at) = &s.peak_concurrent_connections.at {
        writeln!(
            out,
            "concurrency   peak {} connection{} at +{:.3}s",
            s.peak_concurrent_connections.connections,
            plural(s.peak_concurrent_connections.connections),
            at.at
        )?;
    }
    if let Some(line) = idle_closes_text(&s.idle_closes) {
        writeln!(out, "closed        {line}")?;
    }
    if let Some(line) = s.opened_while_idle.as_ref().and_then(while_idle_text) {
        writeln!(out, "missed reuse  {line}")?;
    }
    if let Some(line) = s.redialed.as_ref().and_then(redialed_text) {
        writeln!(out, "redialed      {line}")?;
    }
    if let Some(line) = s.beside_http2.as_ref().and_then(beside_http2_text) {
        writeln!(out, "beside HTTP/2 {line}")?;
    }
    if let Some(line) = s.not_resumed.as_ref().and_then(not_resumed_text) {
        writeln!(out, "not resumed   {line}")?;
    }
    if !s.status_codes.is_empty() {
        writeln!(out, "status        {}", counts_text(&s.status_codes))?;
    }
    if let Some(r) = &s.rate_limit {
        let lines = super::rate_limit_lines(r);
        writeln!(out, "rate limit    {}", lines.limited)?;
        let mut label = "backoff";
        for line in [lines.same_connection, lines.across].into_iter().flatten() {
            writeln!(out, "{label:<14}{line}")?;
            label = "";
        }
    }
    Ok(())
}

/// Who closed the connections and how long after their last response:
/// `by server 4, median 1.00s after the last response (max 1.00s) · by
/// client 1, 5.29ms after the last response · 4 requests sent after their
/// connection's close (on 4 connections)`; `None` when no connection
/// closed after a response.
pub(crate) fn idle_closes_text(c: &IdleCloses) -> Option<String> {
    let mut parts = Vec::new();
    for (who, d) in [("server", &c.by_server), ("client", &c.by_client)] {
        let (Some(median), Some(max)) = (d.median, d.max) else {
            continue;
        };
        let after = if d.count == 1 {
            format!("{} after the last response", human_duration(median))
        } else {
            format!(
                "median {} after the last response (max {})",
                human_duration(median),
                human_duration(max)
            )
        };
        parts.push(format!("by {who} {}, {after}", d.count));
    }
    if c.requests_after_close > 0 {
        parts.push(format!(
            "{} request{} sent after their connection's close (on {} connection{})",
            c.requests_after_close,
            plural(c.requests_after_close),
            c.connections_with_requests_after_close,
            plural(c.connections_with_requests_after_close)
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// Where the setup time went: `connect 165µs (0%) · before ClientHello
/// 114.69ms (91%) · TLS handshake 8.74ms (7%) · to the request 2.24ms
/// (2%)`, and over how many of the connections when not all.
pub(crate) fn phases_text(p: &SetupPhases, connections: u64) -> String {
    let total = p.total();
    let tls = p.before_client_hello + p.tls_handshake > 0.0;
    let steps = [
        ("connect", p.connect, true),
        ("before ClientHello", p.before_client_hello, tls),
        ("TLS handshake", p.tls_handshake, tls),
        ("to the request", p.to_request, true),
    ];
    let mut parts = Vec::new();
    for (name, secs, shown) in steps {
        if shown {
            let share = if total > 0.0 {
                secs / total * 100.0
            } else {
                0.0
            };
            parts.push(format!("{name} {} ({share:.0}%)", human_duration(secs)));
        }
    }
    let mut text = parts.join(" · ");
    if p.connections < connections {
        text.push_str(&format!(
            " (the {} of {connections} connections whose every step was seen)",
            p.connections
        ));
    }
    text
}

/// The summary block: the headline, then what was read and the
/// connection-level and TLS totals.
pub fn write_summary(s: &Summary, out: &mut dyn Write) -> io::Result<()> {
    write_headline(s, out)?;
    if s.servers.len() > 1 {
        writeln!(out)?;
        servers::write(s, out)?;
    }
    if over_time::shown(&s.over_time) {
        writeln!(out)?;
        over_time::write(&s.over_time, out)?;
    }
    writeln!(out)?;
    let format = match &s.compression {
        Some(c) => format!("{}, {c}", s.format),
        None => s.format.clone(),
    };
    writeln!(out, "capture       {} ({format})", sanitize(&s.file))?;
    if let Some(sel) = &s.selection {
        writeln!(out, "only          {}", sanitize(&sel.describe()))?;
    }
    writeln!(
        out,
        "span          {} ({} packets, {})",
        human_duration(s.span),
        s.packets.total,
        human_bytes(s.packets.bytes)
    )?;
    let quic = s.quic.as_ref().map_or(0, |q| q.datagrams);
    let mut packets = match (quic, s.packets.quic) {
        (0, 0) => format!(
            "{} TCP, {} skipped (not TCP or undecodable)",
            s.packets.tcp, s.packets.skipped
        ),
        // QUIC datagrams seen, but no connection opened with them.
        (0, handshakes) => format!(
            "{} TCP, {} skipped (not TCP or undecodable; {handshakes} of them QUIC handshake datagrams)",
            s.packets.tcp, s.packets.skipped
        ),
        (quic, handshakes) => format!(
            "{} TCP, {quic} QUIC ({handshakes} of them handshake datagrams), {} skipped (not TCP or QUIC, or undecodable)",
            s.packets.tcp,
            s.packets.skipped.saturating_sub(quic)
        ),
    };
    if s.packets.filtered_out > 0 {
        packets.push_str(&format!(", {} filtered out", s.packets.filtered_out));
    }
    if s.packets.fragments > 0 {
        packets.push_str(&format!(
            ", {} more IP fragments (reassembled or counted as anomalies)",
            s.packets.fragments
        ));
    }
    writeln!(out, "packets       {packets}")?;
    writeln!(
        out,
        "connections   {}  (TCP handshakes complete: {}, without a captured SYN: {})",
        s.connections, s.tcp_handshakes, s.connections_without_handshake
    )?;
    match &s.quic {
        Some(q) => quic::write_figures(q, out)?,
        None if s.packets.quic > 0 => writeln!(
            out,
            "QUIC          no connection opened (their first packets were not captured)"
        )?,
        None => {}
    }
    if !s.overlays.is_empty() {
        writeln!(out, "overlays      {}", counts_text(&s.overlays))?;
    }
    writeln!(out, "connect       {}", dist_line(&s.connect))?;
    if s.tls_connections > 0 {
        writeln!(
            out,
            "TLS           {} connection{}: {}",
            s.tls_connections,
            plural(s.tls_connections),
            counts_text(&s.tls_versions)
        )?;
        writeln!(out, "TLS handshake {}", dist_line(&s.tls_handshake))?;
        if !s.alpn.is_empty() {
            writeln!(out, "ALPN          {}", counts_text(&s.alpn))?;
        }
        if !s.tls_decryption.is_empty() {
            // The outcomes in words.
            let words = s.tls_decryption.iter().map(|(k, n)| {
                let word = match k.as_str() {
                    "complete" => "opened",
                    "partial" => "partly opened",
                    "no_secrets" => "no secrets",
                    "unsupported" => "cipher not opened",
                    other => other,
                };
                (word.to_string(), *n)
            });
            let words = words.collect();
            writeln!(out, "key log       {}", counts_text(&words))?;
        }
    }
    if s.syn_retransmissions > 0 {
        writeln!(out, "SYN resent    {}", s.syn_retransmissions)?;
    }
    if !s.close.is_empty() {
        let closes: Vec<String> = s.close.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(out, "closes        {}", closes.join(", "))?;
    }
    if !s.anomalies.is_empty() {
        let list: Vec<String> = s
            .anomalies
            .0
            .iter()
            .map(|(k, n)| format!("{} {n}", k.as_str()))
            .collect();
        writeln!(out, "anomalies     {}", list.join(", "))?;
    }
    if let Some(d) = &s.capture_drops {
        writeln!(
            out,
            "kernel        {} received, {} dropped, {} dropped by the interface",
            d.received, d.dropped, d.if_dropped
        )?;
    }
    if s.truncated {
        writeln!(
            out,
            "warning       the capture ends early; see the warning on stderr"
        )?;
    }
    Ok(())
}

/// The TLS cells: version and kind, handshake time, the name the client
/// asked for (its SNI; in cleartext, its first request's Host — the name
/// it pools by, as the servers block) and the ALPN.
fn tls_text(rec: &ConnectionRecord) -> (String, String, String, String) {
    // The server name and protocols are the capture's bytes: sanitised.
    let name = rec
        .asked_name()
        .map_or_else(|| "-".into(), |(_, name)| sanitize(name));
    let Some(t) = &rec.tls else {
        return ("-".into(), "-".into(), name, "-".into());
    };
    let version = t
        .version
        .as_deref()
        .unwrap_or("?")
        .trim_start_matches("TLS ");
    let kind = super::handshake_kind(t);
    let alpn = t.alpn_shown().map_or_else(|| "-".into(), |a| sanitize(&a));
    (
        format!("{version} {kind}"),
        t.handshake.map_or("-".into(), human_duration),
        name,
        alpn,
    )
}

/// The connection table's columns.
pub(crate) const HEADER: [&str; COLUMNS] = [
    "id", "client", "server", "start", "connect", "TLS", "TLS hs", "SNI/Host", "ALPN", "reqs",
    "up", "down", "close",
];
/// How many columns the connection table has.
pub(crate) const COLUMNS: usize = 13;
/// Which of them are aligned to the right (numbers and times).
pub(crate) const RIGHT: [bool; COLUMNS] = [
    true, false, false, true, true, false, true, false, false, true, true, true, false,
];

/// A connection's row of the table: the text of each cell.
pub(crate) fn cells(rec: &ConnectionRecord) -> [String; COLUMNS] {
    let connect = match rec.tcp.handshake.connect {
        Some(c) => human_duration(c),
        None if rec.partial => "no SYN".to_string(),
        None => "-".to_string(),
    };
    let (tls, tls_hs, sni, alpn) = tls_text(rec);
    [
        rec.id.to_string(),
        rec.client.clone(),
        server_text(rec),
        format!("{:.6}", rec.start.at),
        connect,
        tls,
        tls_hs,
        sni,
        alpn,
        requests_text(rec),
        human_bytes(rec.tcp.bytes.client),
        human_bytes(rec.tcp.bytes.server),
        close_text(rec),
    ]
}

/// Live capture: one fixed-width line per connection as it finishes, under a
/// header printed with the first one (a table cannot be laid out before all
/// rows are known).
pub struct LiveRows<'w> {
    out: &'w mut dyn Write,
    header: bool,
}

impl<'w> LiveRows<'w> {
    pub fn new(out: &'w mut dyn Write) -> LiveRows<'w> {
        LiveRows { out, header: false }
    }

    /// The writer, to print the summary after the rows.
    pub fn out(&mut self) -> &mut dyn Write {
        &mut *self.out
    }
}

impl LiveRows<'_> {
    /// One row in the live table's columns, the header first.
    fn row(&mut self, cells: [&str; 10]) -> io::Result<()> {
        if !self.header {
            self.header = true;
            writeln!(
                self.out,
                "{:>5}  {:<24} {:<24} {:>8}  {:<12} {:>8}  {:>4}  {:>9} {:>9}  close",
                "id", "client", "server", "connect", "TLS", "TLS hs", "reqs", "up", "down"
            )?;
        }
        let [id, client, server, connect, tls, tls_hs, reqs, up, down, close] = cells;
        writeln!(
            self.out,
            "{id:>5}  {client:<24} {server:<24} {connect:>8}  {tls:<12} {tls_hs:>8}  {reqs:>4}  {up:>9} {down:>9}  {close}",
        )?;
        self.out.flush()
    }
}

impl crate::analyze::RecordSink for LiveRows<'_> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        let (tls, tls_hs, _, _) = tls_text(&rec);
        self.row([
            &rec.id.to_string(),
            &rec.client,
            &server_text(&rec),
            &rec.tcp.handshake.connect.map_or("-".into(), human_duration),
            &tls,
            &tls_hs,
            &requests_text(&rec),
            &human_bytes(rec.tcp.bytes.client),
            &human_bytes(rec.tcp.bytes.server),
            &close_text(&rec),
        ])
    }

    /// A QUIC connection as it ends: `q1`, `QUIC full` or `QUIC resumed`
    /// where TLS goes, its handshake time, HTTP/3 requests (with a key
    /// log), UDP payload bytes, how it ended.
    fn quic(&mut self, rec: &QuicRecord) -> io::Result<()> {
        let tls = match rec.tls.resumed {
            Some(true) => "QUIC resumed",
            Some(false) => "QUIC full",
            None => "QUIC",
        };
        let close = match rec.close {
            Some(_) => format!("{}, {}", quic::close_text(rec), rec.ended),
            None => rec.ended.to_string(),
        };
        self.row([
            &format!("q{}", rec.id),
            &rec.client,
            &endpoint_in(&rec.server, rec.overlay),
            "-",
            tls,
            &rec.handshake.duration.map_or("-".into(), human_duration),
            &quic_requests_text(rec),
            &human_bytes(rec.bytes.client),
            &human_bytes(rec.bytes.server),
            &close,
        ])
    }
}
