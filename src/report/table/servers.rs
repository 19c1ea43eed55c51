//! The table report's servers block: `summary.servers` as aligned rows,
//! the servers with most connections first, so that the server a client
//! does not reuse connections to stands out.
//!
//! Does not compute anything: it formats `ServerSummary`.

use std::io::{self, Write};

use super::ratio;
use crate::record::{ServerSummary, Summary};
use crate::report::{human_duration, plural, sanitize};

/// Servers shown; JSON has them all.
pub const SHOWN: usize = 10;

/// The columns before the server's name.
pub(crate) const HEADS: [&str; 10] = [
    "conns", "reqs", "per conn", "TCP/req", "TLS full", "resumed", "setup", "429", "closed",
    "missed",
];

/// Writes the block when the connections went to more than one server
/// (with one, the summary above is that server's).
pub fn write(s: &Summary, out: &mut dyn Write) -> io::Result<()> {
    if s.servers.len() < 2 {
        return Ok(());
    }
    let rows: Vec<[String; 10]> = s.servers.iter().take(SHOWN).map(cells).collect();
    let mut widths = HEADS.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str], name: &str| {
        let mut text = String::new();
        for (cell, w) in cells.iter().zip(widths) {
            text.push_str(&format!("{cell:>w$}  "));
        }
        text.push_str(name);
        text
    };
    writeln!(
        out,
        "servers       {}",
        line(
            &HEADS,
            "server (SNI, or host in cleartext; setup: mean SYN → first request; closed: mean idle before the server closed; missed: connections opened while another sat idle, h2: beside an HTTP/2 one)"
        )
    )?;
    for (row, server) in rows.iter().zip(&s.servers) {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "              {}", line(&cells, &name(server)))?;
    }
    let more = s.servers.len().saturating_sub(SHOWN) as u64;
    let not_listed = s.servers_not_listed.as_ref().map_or(0, |n| n.connections);
    if more > 0 || not_listed > 0 {
        let mut text = format!("… {more} more server{}", plural(more));
        if not_listed > 0 {
            text.push_str(&format!(
                " and {not_listed} connection{} to servers past the {} followed",
                plural(not_listed),
                s.servers.len()
            ));
        }
        writeln!(out, "              {text} (JSON lists every one followed)")?;
    }
    Ok(())
}

/// A server for people, safe for a terminal.
pub(crate) fn name(s: &ServerSummary) -> String {
    sanitize(&s.name())
}

pub(crate) fn cells(s: &ServerSummary) -> [String; 10] {
    let tls = s.tls_handshakes_full + s.tls_handshakes_resumed + s.tls_handshakes_failed > 0;
    let dash = || "-".to_owned();
    [
        s.connections.to_string(),
        s.requests.to_string(),
        ratio(s.requests_per_connection.mean),
        ratio(s.handshakes_per_request.tcp),
        if tls {
            ratio(s.handshakes_per_request.tls_full)
        } else {
            dash()
        },
        if tls {
            s.tls_handshakes_resumed.to_string()
        } else {
            dash()
        },
        s.handshake_time.mean.map_or_else(dash, human_duration),
        s.responses_429.to_string(),
        s.closed_by_server.mean.map_or_else(dash, human_duration),
        match (s.opened_while_idle, s.beside_http2) {
            (n, 0) => n.to_string(),
            (0, h2) => format!("{h2} h2"),
            (n, h2) => format!("{n} + {h2} h2"),
        },
    ]
}
