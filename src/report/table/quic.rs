//! The QUIC lines of the report for people: the summary's QUIC figures,
//! and one aligned line per QUIC connection after the TCP table (the
//! first `--limit` of those the summary lists); the HTML report's QUIC
//! table has the same cells.
//!
//! Does not compute anything: it formats `QuicSummary` and `QuicRecord`.

use std::io::{self, Write};

use super::{dist_line, plural};
use crate::record::{QuicRecord, QuicSummary};
use crate::report::timeline::quic_requests_text;
use crate::report::{counts_text, endpoint_in, human_duration, sanitize};

/// The summary block's QUIC lines: connections and handshakes by kind,
/// versions and ALPN offered, the handshake times.
pub fn write_figures(q: &QuicSummary, out: &mut dyn Write) -> io::Result<()> {
    let mut extra = Vec::new();
    if q.early_data > 0 {
        extra.push(format!("{} with 0-RTT", q.early_data));
    }
    if q.retries > 0 {
        extra.push(format!("{} retried", q.retries));
    }
    let extra = match extra.is_empty() {
        true => String::new(),
        false => format!(" ({})", extra.join(", ")),
    };
    let sealed = match q.decrypted {
        0 => "; HTTP/3 requests are sealed, not counted",
        _ => "",
    };
    writeln!(
        out,
        "QUIC          {} connection{}: {} full handshake{}, {} resumed{extra}{sealed}",
        q.connections,
        plural(q.connections),
        q.handshakes_full,
        plural(q.handshakes_full),
        q.handshakes_resumed,
    )?;
    let alpn = match q.alpn_offered.is_empty() {
        true => String::new(),
        false => format!("; ALPN offered {}", counts_text(&q.alpn_offered)),
    };
    writeln!(out, "QUIC versions {}{alpn}", counts_text(&q.versions))?;
    writeln!(out, "QUIC handshake {}", dist_line(&q.handshake))?;
    if q.decrypted > 0 {
        writeln!(
            out,
            "HTTP/3        {} request{} on the {} connection{} the key log opened ({} answered); latency {}",
            q.requests,
            plural(q.requests),
            q.decrypted,
            plural(q.decrypted),
            q.responses,
            dist_line(&q.request_latency)
        )?;
        if !q.status_codes.is_empty() {
            writeln!(out, "HTTP/3 status {}", counts_text(&q.status_codes))?;
        }
        if let Some(r) = &q.rate_limit {
            let lines = crate::report::rate_limit_lines(r);
            writeln!(out, "HTTP/3 limit  {}", lines.limited)?;
            let mut label = "HTTP/3 backoff";
            for line in [lines.same_connection, lines.across].into_iter().flatten() {
                writeln!(out, "{label:<14} {line}")?;
                label = "";
            }
        }
    }
    Ok(())
}

/// One connection's cells: id, client, server (with the tunnel it came
/// in, as the TCP rows show it), version, SNI, ALPN (the
/// server's choice with a key log, else the client's first offer), how
/// the handshake went, ClientHello → ServerHello, and first packet →
/// the client's Finished, the HTTP/3 requests a key log found (`-`
/// where it opened no packet), and how it closed.
pub(crate) fn cells(r: &QuicRecord) -> [String; 11] {
    let t = &r.tls;
    let h = &r.handshake;
    let mut kind = match t.resumed {
        Some(true) => "resumed".to_owned(),
        Some(false) => "full".to_owned(),
        None => "-".to_owned(),
    };
    if h.packets.zero_rtt > 0 {
        // Whether the server took it is known with a key log only.
        kind.push_str(match t.early_data_accepted {
            Some(false) => ", 0-RTT rejected",
            _ => ", 0-RTT",
        });
    }
    if h.retry {
        kind.push_str(", retry");
    }
    if let Some(code) = h.close_error {
        kind.push_str(&format!(", closed {code:#x}"));
    }
    let hellos = t.hello_to_hello.map_or("-".to_owned(), human_duration);
    [
        r.id.to_string(),
        r.client.clone(),
        endpoint_in(&r.server, r.overlay),
        r.version.to_string(),
        t.sni.as_deref().map_or("-".to_owned(), sanitize),
        t.alpn
            .as_ref()
            .or(t.alpn_offered.first())
            .map_or("-".to_owned(), |a| sanitize(a)),
        kind,
        hellos,
        h.duration.map_or("-".to_owned(), human_duration),
        quic_requests_text(r),
        close_text(r),
    ]
}

/// Who closed the connection, and how: `client app 0x0`, `server
/// transport 0xa`; `-` where no CONNECTION_CLOSE was read (without a key
/// log it is sealed).
pub(crate) fn close_text(r: &QuicRecord) -> String {
    r.close.as_ref().map_or("-".to_owned(), |c| {
        let kind = match c.kind.as_ref() {
            "application" => "app",
            other => other,
        };
        format!("{} {kind} {:#x}", c.by.as_str(), c.error_code)
    })
}

pub(crate) const HEADS: [&str; 11] = [
    "id",
    "client",
    "server",
    "version",
    "SNI",
    "ALPN",
    "handshake",
    "hello→hello",
    "complete",
    "reqs",
    "close",
];

/// The QUIC connections the summary lists, the first `limit` (0: all),
/// one aligned line each, and a line for those not shown.
pub fn write_connections(q: &QuicSummary, limit: usize, out: &mut dyn Write) -> io::Result<()> {
    let limit = if limit == 0 { usize::MAX } else { limit };
    let rows: Vec<[String; 11]> = q.list.iter().take(limit).map(cells).collect();
    if rows.is_empty() {
        return Ok(());
    }
    let width = |i: usize| {
        let cells = rows.iter().filter_map(|r| r.get(i));
        let longest = cells.map(|c| c.chars().count()).max().unwrap_or(0);
        longest.max(HEADS.get(i).map_or(0, |h| h.chars().count()))
    };
    let widths: Vec<usize> = (0..HEADS.len()).map(width).collect();
    let line = |cells: &[&str]| {
        let padded = cells.iter().zip(&widths).map(|(c, &w)| format!("{c:<w$}"));
        padded.collect::<Vec<_>>().join("  ").trim_end().to_owned()
    };
    writeln!(out)?;
    writeln!(
        out,
        "QUIC connections (handshakes read from their Initial packets)"
    )?;
    writeln!(out, "{}", line(&HEADS))?;
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    let hidden = q.list.len().saturating_sub(rows.len());
    if hidden > 0 {
        writeln!(
            out,
            "… {hidden} more QUIC connection{} not shown (--limit 0 shows all)",
            plural(hidden as u64)
        )?;
    }
    if q.not_listed > 0 {
        writeln!(
            out,
            "… and {} more past the first {} listed, counted in the QUIC figures above",
            q.not_listed,
            q.list.len()
        )?;
    }
    Ok(())
}
