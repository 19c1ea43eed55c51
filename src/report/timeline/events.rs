//! The event list of one connection under `timeline --conn ID`: its TCP,
//! TLS and HTTP events and its close, in time order, with offsets in ms
//! from its SYN (or first packet).
//!
//! Does not draw the waterfall (`timeline`) or choose the connection.

use std::io::{self, Write};

use super::super::{sanitize, server_text};
use super::{close_text, dur, requests_text, tls_kind, truncate};
use crate::record::{CloseKind, ConnectionRecord, Side};

/// One connection's events, offsets in ms from its SYN (or first packet).
pub(super) fn write_events(
    rec: &ConnectionRecord,
    out: &mut dyn Write,
    width: usize,
    color: bool,
) -> io::Result<()> {
    let hs = &rec.tcp.handshake;
    let origin = hs.syn.map_or(rec.start.at, |s| s.at);
    let mut events: Vec<(f64, Option<Side>, String)> = Vec::new();
    if let Some(t) = hs.syn {
        let resent = match hs.syn_retransmissions {
            0 => String::new(),
            n => format!(" (sent {} more times)", n),
        };
        events.push((t.at, Some(Side::Client), format!("TCP SYN{resent}")));
    }
    if let Some(t) = hs.synack {
        events.push((t.at, Some(Side::Server), "TCP SYN-ACK".to_string()));
    }
    if let Some(t) = hs.ack {
        let connect = hs
            .connect
            .map_or(String::new(), |c| format!(" (connect {})", dur(c, color)));
        events.push((t.at, Some(Side::Client), format!("TCP ACK{connect}")));
    }
    if let Some(tls) = &rec.tls {
        for e in &tls.events {
            let detail = e
                .detail
                .as_deref()
                .map_or(String::new(), |d| format!(" ({})", sanitize(d)));
            events.push((e.time.at, Some(e.side), format!("TLS {}{detail}", e.name)));
        }
        if let Some(c) = tls.complete {
            let kind = if tls.resumed { "resumed" } else { "full" };
            let version = tls.version.as_deref().map_or("?".to_string(), sanitize);
            let took = tls
                .handshake
                .map_or(String::new(), |h| format!(", {}", dur(h, color)));
            events.push((
                c.at,
                None,
                format!("TLS handshake complete ({version} {kind}{took})"),
            ));
        }
    }
    for (i, req) in rec.http.list.iter().enumerate() {
        let n = i + 1;
        let what = match (&req.method, &req.target) {
            (Some(m), Some(t)) => format!(" {} {}", sanitize(m), sanitize(t)),
            _ => String::new(),
        };
        events.push((
            req.start.at,
            Some(Side::Client),
            format!("request {n} sent{what}"),
        ));
        let status = req.status.map_or(String::new(), |s| format!(" {s}"));
        let ttfb = req
            .ttfb
            .map_or(String::new(), |t| format!(" (ttfb {})", dur(t, color)));
        match (req.response_first, req.response_last) {
            (Some(f), Some(l)) if l.at > f.at => {
                events.push((
                    f.at,
                    Some(Side::Server),
                    format!("response {n} first byte{status}{ttfb}"),
                ));
                let took = req.duration.map_or(String::new(), |d| {
                    format!(" (request took {})", dur(d, color))
                });
                events.push((
                    l.at,
                    Some(Side::Server),
                    format!("response {n} last byte{took}"),
                ));
            }
            (Some(f), _) => {
                events.push((
                    f.at,
                    Some(Side::Server),
                    format!("response {n} first and last byte{status}{ttfb}"),
                ));
            }
            (None, _) => {}
        }
    }
    if let (CloseKind::Fin | CloseKind::Rst, Some(t)) = (rec.close.kind, rec.close.time) {
        let both = if rec.close.fin_both {
            ", FIN from both sides"
        } else {
            ""
        };
        events.push((
            t.at,
            rec.close.by,
            format!("{}{both}", rec.close.kind.as_str().to_uppercase()),
        ));
    }
    events.push((rec.end.at, None, "last packet".to_string()));
    events.sort_by(|a, b| a.0.total_cmp(&b.0));

    let title = format!(
        "connection {}  {} -> {}  ({} requests, {}, {}, {})",
        rec.id,
        sanitize(&rec.client),
        sanitize(&server_text(rec)),
        requests_text(rec),
        sanitize(&tls_kind(rec)),
        dur(rec.duration, color),
        close_text(rec)
    );
    writeln!(out, "{}", truncate(&title, width))?;
    writeln!(
        out,
        "{}",
        truncate(
            "      offset ms  side    event (offsets from the SYN)",
            width
        )
    )?;
    for (at, side, what) in &events {
        let line = format!(
            "{:>15.3}  {:<6}  {what}",
            (at - origin) * 1000.0,
            side.map_or("", |s| s.as_str())
        );
        writeln!(out, "{}", truncate(&line, width))?;
    }
    if rec.http.list_truncated {
        let more = rec.http.requests.saturating_sub(rec.http.list.len() as u64);
        let line = format!("{:>15}  {:<6}  ... {more} more requests not listed", "", "");
        writeln!(out, "{}", truncate(&line, width))?;
    }
    Ok(())
}
