//! The event list of one connection under `timeline --conn ID`: its TCP,
//! TLS and HTTP events and its close, in time order, with offsets in ms
//! from its SYN (or first packet), its SYN and requests marked when sent
//! inside a Retry-After this or another connection to the server got, and
//! where HTTP/2 frames were read its stretches at the server's stream
//! limit, its GOAWAY and its refused requests; for a QUIC connection (`--conn qID`),
//! its Initial packets, TLS messages, HTTP/3 requests and CONNECTION_CLOSE,
//! from the client's first packet.
//!
//! Does not draw the waterfall (`timeline`) or choose the connection.

use std::io::{self, Write};

use super::super::{sanitize, server_text};
use super::{close_text, dur, quic_requests_text, requests_text, tls_kind, truncate};
use crate::record::{
    CertificateInfo, CloseKind, ConnectionRecord, GoAway, Http2Limits, HttpRequest, OpenedBeside,
    QuicRecord, Side, Summary, TlsEvent,
};

/// An event: its time (seconds from the capture's start), who sent it,
/// and what it was.
type Event = (f64, Option<Side>, String);

/// Windows kept from the whole capture (24 bytes each: 1.5 MiB).
const MAX_WINDOWS: usize = 1 << 16;

/// The Retry-After windows the capture's connections were given (each
/// from the end of its response, as `summary.rate_limit` counts them),
/// for a connection's requests and SYN sent inside another connection's
/// to the same server (`across_connections`). The first [`MAX_WINDOWS`].
#[derive(Debug, Default)]
pub(crate) struct Windows {
    list: Vec<Window>,
}

#[derive(Debug)]
struct Window {
    server: u64,
    from: f64,
    until: f64,
    conn: u64,
}

impl Windows {
    /// Takes the windows `rec`'s listed responses gave.
    pub(super) fn note(&mut self, rec: &ConnectionRecord) {
        let given = rec.http.list.iter();
        let mut server = None;
        for (from, until) in given.filter_map(HttpRequest::retry_after_window) {
            if self.list.len() >= MAX_WINDOWS {
                return;
            }
            self.list.push(Window {
                server: *server.get_or_insert_with(|| rec.server_key()),
                from,
                until,
                conn: rec.id,
            });
        }
    }

    /// The connection, not `rec`, to `rec`'s server whose Retry-After ran
    /// at `at` (the one given last, when several did).
    fn elsewhere(&self, rec: &ConnectionRecord, at: f64) -> Option<u64> {
        let server = rec.server_key();
        self.list
            .iter()
            .filter(|w| w.server == server && w.conn != rec.id && w.from <= at && at < w.until)
            .max_by(|a, b| a.from.total_cmp(&b.from))
            .map(|w| w.conn)
    }
}

/// ` (inside the Retry-After connection 3 got)`, or nothing.
fn inside_elsewhere(windows: &Windows, rec: &ConnectionRecord, at: f64) -> String {
    windows.elsewhere(rec, at).map_or(String::new(), |c| {
        format!(" (inside the Retry-After connection {c} got)")
    })
}

/// ` (while connection 3 to the same server sat idle, for 23.22ms)` where
/// the summary counted `rec` as opened while another sat idle
/// (`summary.opened_while_idle`), ` (beside HTTP/2 connection 1, still in
/// its handshake)` where it counted it beside an HTTP/2 connection
/// (`summary.beside_http2`), or nothing.
fn opened_beside(rec: &ConnectionRecord, summary: &Summary, color: bool) -> String {
    match summary.opened_beside(rec.id) {
        Some(OpenedBeside::Idle(p)) => format!(
            " (while connection {} to the same server sat idle, for {})",
            p.idle_connection,
            dur(p.idle, color)
        ),
        Some(OpenedBeside::Http2(b)) => {
            let when = if b.raced {
                ", still in its handshake"
            } else {
                ""
            };
            format!(" (beside HTTP/2 connection {}{when})", b.http2_connection)
        }
        None => String::new(),
    }
}

/// One connection's events, offsets in ms from its SYN (or first packet);
/// `summary`, which counted some connections at their SYN (opened while
/// another sat idle, or beside an HTTP/2 connection).
pub(super) fn write_events(
    rec: &ConnectionRecord,
    windows: &Windows,
    summary: &Summary,
    out: &mut dyn Write,
    width: usize,
    color: bool,
) -> io::Result<()> {
    let hs = &rec.tcp.handshake;
    let origin = hs.syn.map_or(rec.start.at, |s| s.at);
    let mut events: Vec<Event> = Vec::new();
    if let Some(t) = hs.syn {
        let resent = match hs.syn_retransmissions {
            0 => String::new(),
            n => format!(" (sent {} more times)", n),
        };
        let early = inside_elsewhere(windows, rec, t.at);
        let idle = opened_beside(rec, summary, color);
        events.push((
            t.at,
            Some(Side::Client),
            format!("TCP SYN{resent}{early}{idle}"),
        ));
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
        tls_events(&tls.events, tls.certificate.as_ref(), &mut events);
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
    let elsewhere = |at| inside_elsewhere(windows, rec, at);
    request_events(&rec.http.list, &elsewhere, color, &mut events);
    if let Some(h2) = &rec.http.http2 {
        http2_events(h2, color, &mut events);
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
    let refused = match rec.http.http2.as_ref().map_or(0, |h| h.refused) {
        0 => String::new(),
        n => format!(", {n} refused"),
    };
    // The name the client asked for, on a line of its own under the
    // title: its SNI, in cleartext its Host.
    let name = rec
        .asked_name()
        .map(|(what, name)| format!("{what} {}", sanitize(name)));
    // Those served and those sent after the close, as `requests_text`.
    let sent = rec.requests_served() + rec.close.requests_after;
    let tls = match rec.tls {
        Some(_) => sanitize(&tls_kind(rec)),
        None => "cleartext".to_owned(),
    };
    let title = format!(
        "connection {}  {} -> {}  ({} request{}{refused}, {tls}, {}, {})",
        rec.id,
        sanitize(&rec.client),
        sanitize(&server_text(rec)),
        requests_text(rec),
        super::super::plural(sent),
        dur(rec.duration, color),
        close_text(rec)
    );
    let more = rec.http.requests.saturating_sub(rec.http.list.len() as u64);
    let more = if rec.http.list_truncated { more } else { 0 };
    let from = "the SYN";
    write_list(out, width, (&title, name), from, origin, events, more)
}

/// One QUIC connection's events, offsets in ms from the client's first
/// packet.
pub(super) fn write_quic_events(
    rec: &QuicRecord,
    out: &mut dyn Write,
    width: usize,
    color: bool,
) -> io::Result<()> {
    let (h, tls) = (&rec.handshake, &rec.tls);
    let mut events: Vec<Event> = Vec::new();
    let origin = rec.start.at;
    if let Some(t) = h.client_initial {
        events.push((t.at, Some(Side::Client), "QUIC Initial".to_string()));
    }
    if let Some(t) = h.server_initial {
        let retry = if h.retry { " (after a Retry)" } else { "" };
        events.push((t.at, Some(Side::Server), format!("QUIC Initial{retry}")));
    }
    tls_events(&tls.events, tls.certificate.as_ref(), &mut events);
    let kind = match tls.resumed {
        Some(true) => "resumed",
        Some(false) => "full",
        None => "handshake unread",
    };
    if let Some(c) = h.client_handshake {
        let version = tls.version.as_deref().map_or("?".to_string(), sanitize);
        let took = h
            .duration
            .map_or(String::new(), |d| format!(", {}", dur(d, color)));
        let alpn = tls
            .alpn
            .as_deref()
            .map_or(String::new(), |a| format!(", {}", sanitize(a)));
        events.push((
            c.at,
            None,
            format!("QUIC handshake complete ({version} {kind}{alpn}{took})"),
        ));
    }
    let http = rec.http.as_ref();
    request_events(
        http.map_or(&[], |h| &h.list),
        &|_| String::new(),
        color,
        &mut events,
    );
    if let Some(c) = &rec.close {
        let reason = c
            .reason
            .as_deref()
            .map_or(String::new(), |r| format!(", \"{}\"", sanitize(r)));
        events.push((
            c.time.at,
            Some(c.by),
            format!(
                "CONNECTION_CLOSE ({}, error {:#x}{reason})",
                c.kind, c.error_code
            ),
        ));
    }
    events.push((rec.end.at, None, "last packet".to_string()));
    let requests = match http {
        Some(_) => format!("{} requests", quic_requests_text(rec)),
        None => "requests sealed".to_string(),
    };
    let zero_rtt = match (h.packets.zero_rtt > 0, tls.early_data_accepted) {
        (false, _) => "",
        (true, Some(false)) => " 0-RTT rejected",
        (true, _) => " 0-RTT",
    };
    let title = format!(
        "connection q{}  {} -> {}  ({requests}, QUIC {} {kind}{zero_rtt}, {})",
        rec.id,
        sanitize(&rec.client),
        sanitize(&rec.server),
        sanitize(&rec.version),
        dur(rec.duration, color),
    );
    let more = http
        .filter(|h| h.list_truncated)
        .map_or(0, |h| h.requests.saturating_sub(h.list.len() as u64));
    let from = "its first packet";
    let name = tls.sni.as_deref().map(|s| format!("SNI {}", sanitize(s)));
    write_list(out, width, (&title, name), from, origin, events, more)
}

/// What bounded new requests on an HTTP/2 connection whose frames were
/// read: each stretch its client's streams spent at the server's limit
/// (from when they reached it to when one ended), and the first GOAWAY.
fn http2_events(h2: &Http2Limits, color: bool, events: &mut Vec<Event>) {
    for (from, until) in &h2.at_limit_spans {
        events.push((from.at, None, at_limit_text(h2)));
        events.push((
            until.at,
            None,
            format!(
                "HTTP/2 client streams below the limit again (after {})",
                dur(until.at - from.at, color)
            ),
        ));
    }
    if let Some(g) = &h2.goaway {
        events.push((
            g.at.at,
            Some(g.from),
            format!("HTTP/2 GOAWAY ({})", goaway_text(g)),
        ));
    }
}

/// `HTTP/2 client streams at the server's limit of 2` (without `of N`
/// where the limit is not known): a stretch at the limit, as the event
/// list and the HTML waterfall's tooltip word it.
pub(crate) fn at_limit_text(h2: &Http2Limits) -> String {
    let limit = h2
        .max_concurrent_streams
        .map_or(String::new(), |l| format!(" of {l}"));
    format!("HTTP/2 client streams at the server's limit{limit}")
}

/// `last stream 7, NO_ERROR`: what a GOAWAY said (its error's name is
/// one of RFC 9113's, never the capture's text).
pub(crate) fn goaway_text(g: &GoAway) -> String {
    format!("last stream {}, {}", g.last_stream, g.error)
}

/// The TLS messages (and alerts) of a handshake; the server's first
/// certificate message (compressed or not) says what its chain held.
fn tls_events(list: &[TlsEvent], cert: Option<&CertificateInfo>, events: &mut Vec<Event>) {
    let mut cert = cert;
    for e in list {
        let detail = match (e.detail.as_deref(), e.name, e.side) {
            (Some(d), ..) => format!(" ({})", sanitize(d)),
            (None, "certificate" | "compressed_certificate", Side::Server) => {
                cert.take().map_or(String::new(), |c| {
                    let subject = c
                        .subject
                        .as_deref()
                        .map_or(String::new(), |s| format!(", {}", sanitize(s)));
                    let packed = c.compression.map_or(String::new(), |a| format!(", {a}"));
                    let (n, bytes) = (c.chain, c.bytes);
                    format!(" ({n} in the chain, {bytes} B{packed}{subject})")
                })
            }
            _ => String::new(),
        };
        events.push((e.time.at, Some(e.side), format!("TLS {}{detail}", e.name)));
    }
}

/// Each listed request sent, and its response's first and last bytes.
/// `elsewhere` says whether a time was inside another connection's
/// Retry-After.
fn request_events(
    list: &[HttpRequest],
    elsewhere: &dyn Fn(f64) -> String,
    color: bool,
    events: &mut Vec<Event>,
) {
    for (i, req) in list.iter().enumerate() {
        let n = i + 1;
        let what = match (&req.method, &req.target) {
            (Some(m), Some(t)) => format!(" {} {}", sanitize(m), sanitize(t)),
            _ => String::new(),
        };
        // Sent while an earlier response's Retry-After ran (from its
        // last byte), as `http.rate_limit.requests_in_window` counts it.
        let early = list.iter().take(i).rposition(|r| {
            r.retry_after_window()
                .is_some_and(|(from, until)| from <= req.start.at && req.start.at < until)
        });
        let early = early.map_or_else(
            || elsewhere(req.start.at),
            |j| format!(" (inside response {}'s Retry-After)", j + 1),
        );
        // Refused unprocessed (HTTP/2): no response to come.
        let early = match req.refused {
            true => format!("{early} (refused unprocessed by the server)"),
            false => early,
        };
        events.push((
            req.start.at,
            Some(Side::Client),
            format!("request {n} sent{what}{early}"),
        ));
        let status = match (req.status, req.retry_after) {
            (Some(s), Some(r)) => format!(" {s} Retry-After {r}s"),
            (Some(s), None) => format!(" {s}"),
            (None, _) => String::new(),
        };
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
}

/// The title (and under it the name the client asked for), the column
/// heads, each event in time order with its offset
/// from `origin`, and a line for `more` requests not listed.
fn write_list(
    out: &mut dyn Write,
    width: usize,
    (title, name): (&str, Option<String>),
    from: &str,
    origin: f64,
    mut events: Vec<Event>,
    more: u64,
) -> io::Result<()> {
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    writeln!(out, "{}", truncate(title, width))?;
    if let Some(name) = name {
        writeln!(out, "{}", truncate(&format!("  {name}"), width))?;
    }
    let heads = format!("      offset ms  side    event (offsets from {from})");
    writeln!(out, "{}", truncate(&heads, width))?;
    for (at, side, what) in &events {
        let line = format!(
            "{:>15.3}  {:<6}  {what}",
            (at - origin) * 1000.0,
            side.map_or("", |s| s.as_str())
        );
        writeln!(out, "{}", truncate(&line, width))?;
    }
    if more > 0 {
        let line = format!("{:>15}  {:<6}  ... {more} more requests not listed", "", "");
        writeln!(out, "{}", truncate(&line, width))?;
    }
    Ok(())
}
