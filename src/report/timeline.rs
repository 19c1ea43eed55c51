//! The terminal waterfall (`timeline`): one line per connection on a shared
//! time axis, each column showing the most important phase that overlaps it
//! (close marker > TCP handshake > TLS handshake > response transfer >
//! waiting for the first byte > idle), with a legend and axis labels; for one
//! connection (`conn`) also its event list with offsets from the SYN
//! (`timeline/events.rs`), from the rows kept as records went by
//! (`timeline/rows.rs`). QUIC connections (`summary.quic`) follow the TCP
//! ones, labelled `q1`, `q2`, …: their handshake (first Initial → the
//! client's Finished) drawn as a TLS handshake, and with a key log their
//! HTTP/3 requests. Also owns `segments` and `quic_segments` (the phases of
//! a connection, which the HTML waterfall draws too) and the short texts
//! both share (`tls_kind`, `close_text`, `requests_text`,
//! `quic_requests_text`).
//!
//! Does not compute statistics or decide anything about the capture: it only
//! lays out the times already in `ConnectionRecord`. Every line it writes is
//! at most `width` visible characters (ANSI colour codes do not count).

use std::io::{self, Write};

mod events;
pub(crate) use events::{at_limit_text, goaway_text};
mod rows;

pub use rows::Rows;

use super::{human_duration, sanitize};
use crate::record::{
    CloseKind, ConnectionRecord, HttpMethod, HttpRequest, QuicRecord, Summary, TlsOutcome,
};
use rows::Row;

/// How to draw the waterfall.
#[derive(Clone, Debug)]
pub struct TimelineOpts {
    /// Columns per line, label column included.
    pub width: usize,
    /// ANSI colours (and Unicode glyphs); plain ASCII otherwise.
    pub color: bool,
    /// Only this connection, followed by its event list.
    pub conn: Option<ConnId>,
    /// Only the N longest connections (shown in id order).
    pub top: Option<usize>,
}

/// A connection named on the command line: a TCP connection's `id`, or
/// `q` and a QUIC connection's (`summary.quic.list[].id`), as the rows
/// label them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnId {
    Tcp(u64),
    Quic(u64),
}

impl std::str::FromStr for ConnId {
    type Err = String;

    fn from_str(s: &str) -> Result<ConnId, String> {
        let (quic, n) = match s.strip_prefix('q') {
            Some(n) => (true, n),
            None => (false, s),
        };
        match (quic, n.parse::<u64>()) {
            (true, Ok(n)) => Ok(ConnId::Quic(n)),
            (false, Ok(n)) => Ok(ConnId::Tcp(n)),
            _ => Err(format!(
                "`{s}` is not a connection id: give a number (a TCP connection's `id`) or q and a number (a QUIC connection's, as the rows show it: q1)"
            )),
        }
    }
}

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnId::Tcp(n) => write!(f, "{n}"),
            ConnId::Quic(n) => write!(f, "q{n}"),
        }
    }
}

impl Default for TimelineOpts {
    fn default() -> TimelineOpts {
        TimelineOpts {
            width: 100,
            color: false,
            conn: None,
            top: None,
        }
    }
}

/// A phase of a connection's life, in drawing priority order (lowest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Open, with nothing below happening.
    Idle,
    /// A request sent, its first response byte not yet seen.
    Wait,
    /// First to last response byte.
    Transfer,
    /// ClientHello → handshake complete.
    Tls,
    /// The TCP handshake's ACK → the ClientHello: the client's own time
    /// before its TLS handshake (building a TLS context, loading a trust
    /// store), where nothing is on the wire.
    Hello,
    /// SYN → ACK.
    Tcp,
    /// The first FIN or RST.
    Close,
}

impl Phase {
    /// Name for legends and tooltips.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Wait => "waiting (request → first byte)",
            Phase::Transfer => "response transfer",
            Phase::Tls => "TLS handshake",
            Phase::Hello => "client, before its ClientHello",
            Phase::Tcp => "TCP handshake",
            Phase::Close => "close (FIN, RST)",
        }
    }

    fn glyph(self, color: bool, rst: bool) -> char {
        match (self, color) {
            (Phase::Idle, false) => '.',
            (Phase::Idle, true) => '─',
            (Phase::Wait, false) => '~',
            (Phase::Wait, true) => '░',
            (Phase::Transfer, false) => '=',
            (Phase::Transfer, true) => '█',
            (Phase::Tls, false) => '#',
            (Phase::Tls, true) => '▓',
            (Phase::Hello, false) => ':',
            (Phase::Hello, true) => '┄',
            (Phase::Tcp, false) => '>',
            (Phase::Tcp, true) => '▶',
            (Phase::Close, _) if rst => 'X',
            (Phase::Close, _) => '|',
        }
    }

    fn ansi(self) -> &'static str {
        match self {
            Phase::Idle => "\x1b[90m",
            Phase::Wait => "\x1b[32m",
            Phase::Transfer => "\x1b[34m",
            Phase::Tls => "\x1b[35m",
            Phase::Hello => "\x1b[36m",
            Phase::Tcp => "\x1b[33m",
            Phase::Close => "\x1b[31;1m",
        }
    }
}

const RESET: &str = "\x1b[0m";

/// One stretch of a connection's life, in capture seconds (`at`).
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub phase: Phase,
    pub from: f64,
    pub to: f64,
    /// 1-based request number for `Wait` and `Transfer`.
    pub request: Option<usize>,
}

fn seg(phase: Phase, from: f64, to: f64, request: Option<usize>) -> Segment {
    Segment {
        phase,
        from,
        to: to.max(from),
        request,
    }
}

/// The phases of a connection: idle over its whole life first, then the TCP
/// handshake, the client's wait before its ClientHello, the TLS handshake, each listed request's wait and transfer, and
/// the close marker (a zero-length segment).
pub fn segments(rec: &ConnectionRecord) -> Vec<Segment> {
    let (start, end) = (rec.start.at, rec.end.at.max(rec.start.at));
    let mut out = vec![seg(Phase::Idle, start, end, None)];
    let hs = &rec.tcp.handshake;
    if let Some(syn) = hs.syn {
        let to = hs.ack.or(hs.synack).map_or(end, |i| i.at);
        out.push(seg(Phase::Tcp, syn.at, to, None));
    }
    if let Some(tls) = &rec.tls {
        if let Some(ch) = tls.client_hello {
            if let Some(ack) = hs.ack.filter(|a| a.at < ch.at) {
                out.push(seg(Phase::Hello, ack.at, ch.at, None));
            }
            let to = match tls.complete {
                Some(c) => c.at,
                None if tls.outcome == TlsOutcome::Failed => {
                    tls.events.last().map_or(ch.at, |e| e.time.at)
                }
                None => end,
            };
            out.push(seg(Phase::Tls, ch.at, to, None));
        }
    }
    requests(&mut out, &rec.http.list, end);
    if let (CloseKind::Fin | CloseKind::Rst, Some(t)) = (rec.close.kind, rec.close.time) {
        out.push(seg(Phase::Close, t.at, t.at, None));
    }
    out
}

/// Each listed request's wait and transfer, a request without a response
/// waiting until `end` — but one the server refused unprocessed (HTTP/2),
/// which waits for nothing and is not drawn.
fn requests(out: &mut Vec<Segment>, list: &[HttpRequest], end: f64) {
    for (i, req) in list.iter().enumerate() {
        let n = Some(i.saturating_add(1));
        match req.response_first {
            Some(first) => {
                out.push(seg(Phase::Wait, req.start.at, first.at, n));
                let last = req.response_last.map_or(first.at, |l| l.at);
                out.push(seg(Phase::Transfer, first.at, last, n));
            }
            None if req.refused => {}
            None => out.push(seg(Phase::Wait, req.start.at, end, n)),
        }
    }
}

/// The phases of a QUIC connection: idle over its life, its handshake
/// (the client's first Initial → its Finished, drawn as a TLS handshake:
/// QUIC's transport and TLS handshakes are one) and, with a key log, each
/// listed HTTP/3 request. No close marker: a CONNECTION_CLOSE (`close`,
/// with a key log) is not the FIN or RST the marker means; `--conn qN`
/// lists it.
pub fn quic_segments(q: &QuicRecord) -> Vec<Segment> {
    let (start, end) = (q.start.at, q.end.at.max(q.start.at));
    let mut out = vec![seg(Phase::Idle, start, end, None)];
    if let Some(first) = q.handshake.client_initial {
        let to = q.handshake.client_handshake.map_or(end, |c| c.at);
        out.push(seg(Phase::Tls, first.at, to, None));
    }
    if let Some(http) = &q.http {
        requests(&mut out, &http.list, end);
    }
    out
}

/// A duration for the terminal: `human_duration`, with `us` for `µs` in
/// plain (ASCII) mode.
fn dur(secs: f64, color: bool) -> String {
    let s = human_duration(secs);
    if color {
        s
    } else {
        s.replace('µ', "u")
    }
}

fn truncate(s: &str, width: usize) -> String {
    s.chars().take(width).collect()
}

/// The port of an `address:port` (the whole text if it has none).
fn client_port(client: &str) -> String {
    client
        .rsplit_once(':')
        .map_or_else(|| client.to_string(), |(_, p)| p.to_string())
}

/// Requests on a connection: `~9` when estimated, `1+1` when one more was
/// sent after the connection's close (never served), `-` without HTTP.
pub(crate) fn requests_text(rec: &ConnectionRecord) -> String {
    // Those sent after the connection's close, never served: `1+1`.
    let (served, after) = (rec.requests_served(), rec.close.requests_after);
    let count = match after {
        0 => served.to_string(),
        n => format!("{served}+{n}"),
    };
    match rec.http.method {
        HttpMethod::None => "-".to_string(),
        _ if rec.http.estimated => format!("~{count}"),
        _ => count,
    }
}

/// HTTP/3 requests on a QUIC connection: `-` where no key log opened it.
pub(crate) fn quic_requests_text(q: &QuicRecord) -> String {
    match &q.http {
        Some(http) if http.packets_opened > 0 => http.requests.to_string(),
        _ => "-".to_string(),
    }
}

/// `TLS 1.3 full`, `TLS 1.2 resumed`, `TLS ? failed`, or `-` without TLS.
pub(crate) fn tls_kind(rec: &ConnectionRecord) -> String {
    let Some(t) = &rec.tls else {
        return "-".into();
    };
    let kind = super::handshake_kind(t);
    format!("{} {kind}", t.version.as_deref().unwrap_or("TLS ?"))
}

/// `FIN by client`, `RST by server`, `open`, …
pub(crate) fn close_text(rec: &ConnectionRecord) -> String {
    match (rec.close.kind, rec.close.by) {
        (k @ (CloseKind::Fin | CloseKind::Rst), Some(by)) => {
            format!("{} by {}", k.as_str().to_uppercase(), by.as_str())
        }
        (k, _) => k.as_str().to_string(),
    }
}

/// Writes the waterfall (and, with `conn`, that connection's events).
pub fn write(
    records: &[ConnectionRecord],
    summary: &Summary,
    out: &mut dyn Write,
    opts: &TimelineOpts,
) -> io::Result<()> {
    let mut rows = Rows::new(opts);
    for rec in records {
        rows.note(rec)?;
    }
    draw(rows, summary, out, opts)
}

/// Writes the waterfall of what `rows` kept (and, with `conn`, that
/// connection's events).
pub fn draw(
    rows: Rows,
    summary: &Summary,
    out: &mut dyn Write,
    opts: &TimelineOpts,
) -> io::Result<()> {
    let width = opts.width;
    let mut kept = rows.finish();
    let quic = quic_rows(summary, opts);
    for row in &quic {
        kept.extent.add(row);
    }
    let quic_total = summary.quic.as_ref().map_or(0, |q| q.connections);
    let (extent, total) = (kept.extent, kept.total + quic_total);
    let Some((t0, t1)) = extent.span else {
        let msg = match opts.conn {
            Some(id) => format!(
                "no connection with id {id} ({total} connections in {})",
                sanitize(&summary.file)
            ),
            None => format!("no connections in {}", sanitize(&summary.file)),
        };
        return writeln!(out, "{}", truncate(&msg, width));
    };
    let (id_w, port_w, req_w) = (extent.id_w, extent.port_w, extent.req_w);
    // "id :port reqs " then the bar.
    let mut label_w = id_w + 2 + port_w + 1 + req_w + 1;
    if label_w + 10 > width {
        label_w = 0;
    }
    let bar_w = width.saturating_sub(label_w);
    if bar_w == 0 {
        return Ok(());
    }
    let span = (t1 - t0).max(1e-6);
    let dt = span / bar_w as f64;

    let mut header = format!(
        "{}/{} connections  +{:.3}s..+{:.3}s  1 column = {}",
        extent.count,
        total,
        t0,
        t1,
        dur(dt, opts.color)
    );
    if let Some(n) = opts.top {
        header.push_str(&format!("  (the {n} longest)"));
    }
    if !quic.is_empty() {
        header.push_str(&format!("  ({} QUIC)", quic.len()));
    }
    if let Some(sel) = &summary.selection {
        header.push_str(&format!("  only {}", sanitize(&sel.describe())));
    }
    writeln!(out, "{}", truncate(&header, width))?;
    if label_w > 0 {
        let head = format!("{:>id_w$} :{:<port_w$} {:>req_w$} ", "id", "port", "reqs");
        write_axis(out, &truncate(&head, label_w), bar_w, span, opts.color)?;
    } else {
        write_axis(out, "", bar_w, span, opts.color)?;
    }
    let mut line = |row: &Row| {
        let label = if label_w > 0 {
            format!(
                "{:>id_w$} :{:<port_w$} {:>req_w$} ",
                row.label(),
                sanitize(&row.port),
                row.requests
            )
        } else {
            String::new()
        };
        let mut line = truncate(&label, label_w);
        line.push_str(&bar(row, t0, dt, bar_w, opts.color));
        writeln!(out, "{}", line.trim_end())
    };
    kept.each(&mut line)?;
    quic.iter().try_for_each(line)?;
    write_legend(out, width, opts.color, !quic.is_empty())?;
    if let Some((rec, windows)) = &kept.record {
        writeln!(out)?;
        events::write_events(rec, windows, summary, out, width, opts.color)?;
    }
    if let (Some(ConnId::Quic(id)), Some(q)) = (opts.conn, &summary.quic) {
        if let Some(rec) = q.list.iter().find(|r| r.id == id) {
            writeln!(out)?;
            events::write_quic_events(rec, out, width, opts.color)?;
        }
    }
    Ok(())
}

/// The QUIC connections drawn: for `--conn`, the one it names (none for a
/// TCP connection's number); else the longest `--top` N of them, or all
/// listed, in id order.
fn quic_rows(summary: &Summary, opts: &TimelineOpts) -> Vec<Row> {
    let Some(q) = summary.quic.as_ref() else {
        return Vec::new();
    };
    let one = match opts.conn {
        Some(ConnId::Tcp(_)) => return Vec::new(),
        Some(ConnId::Quic(id)) => Some(id),
        None => None,
    };
    let listed = q.list.iter().filter(|r| one.is_none_or(|id| r.id == id));
    let mut rows: Vec<Row> = listed.map(Row::of_quic).collect();
    if let Some(n) = opts.top {
        rows.sort_by(|a, b| rows::longest_first((a.duration, a.id), (b.duration, b.id)));
        rows.truncate(n);
        rows.sort_by_key(|r| r.id);
    }
    rows
}

/// The bar of one connection: `bar_w` cells, each the highest-priority phase
/// overlapping the cell's time interval.
fn bar(row: &Row, t0: f64, dt: f64, bar_w: usize, color: bool) -> String {
    let (segs, rst) = (&row.segments, row.rst);
    let mut cells: Vec<Option<Phase>> = vec![None; bar_w];
    for s in segs {
        let first = (((s.from - t0) / dt).floor().max(0.0) as usize).min(bar_w.saturating_sub(1));
        let last = (((s.to - t0) / dt).floor().max(0.0) as usize).min(bar_w.saturating_sub(1));
        for cell in cells.iter_mut().take(last + 1).skip(first) {
            if cell.is_none_or(|p| p < s.phase) {
                *cell = Some(s.phase);
            }
        }
    }
    let mut line = String::new();
    let mut current: Option<Phase> = None;
    for cell in cells {
        if color && cell != current {
            if current.is_some() {
                line.push_str(RESET);
            }
            if let Some(p) = cell {
                line.push_str(p.ansi());
            }
            current = cell;
        }
        line.push(cell.map_or(' ', |p| p.glyph(color, rst)));
    }
    if color && current.is_some() {
        line.push_str(RESET);
    }
    line
}

/// Tick marks and labels (time since the axis start) above the bars.
fn write_axis(
    out: &mut dyn Write,
    label: &str,
    bar_w: usize,
    span: f64,
    color: bool,
) -> io::Result<()> {
    let mut labels = vec![' '; bar_w];
    let mut marks = vec![if color { '─' } else { '-' }; bar_w];
    let step = (bar_w / 5).max(12);
    let mut free_from = 0usize;
    let mut col = 0usize;
    while col < bar_w {
        let text: Vec<char> = format!("+{}", dur(span * col as f64 / bar_w as f64, color))
            .chars()
            .collect();
        // The last tick stays clear of the end label.
        if col >= free_from && col + text.len() + 2 <= bar_w.saturating_sub(8) || col == 0 {
            for (i, c) in text.iter().enumerate() {
                if let Some(slot) = labels.get_mut(col + i) {
                    *slot = *c;
                }
            }
            if let Some(m) = marks.get_mut(col) {
                *m = if color { '┬' } else { '+' };
            }
            free_from = col + text.len() + 2;
        }
        col += step;
    }
    let end: Vec<char> = format!("+{}", dur(span, color)).chars().collect();
    if bar_w >= free_from + end.len() {
        let at = bar_w - end.len();
        for (i, c) in end.iter().enumerate() {
            if let Some(slot) = labels.get_mut(at + i) {
                *slot = *c;
            }
        }
        if let Some(m) = marks.last_mut() {
            *m = if color { '┐' } else { '+' };
        }
    }
    let pad = " ".repeat(label.chars().count());
    let labels: String = labels.iter().collect();
    writeln!(out, "{}", format!("{label}{labels}").trim_end())?;
    writeln!(out, "{pad}{}", marks.iter().collect::<String>())
}

/// The legend; `quic` when QUIC connections are drawn (their handshake
/// shares the TLS handshake's glyph).
fn write_legend(out: &mut dyn Write, width: usize, color: bool, quic: bool) -> io::Result<()> {
    let tls = match quic {
        true => "TLS or QUIC handshake",
        false => "TLS handshake",
    };
    let items = [
        (Phase::Tcp, false, "TCP handshake"),
        (Phase::Hello, false, "client before ClientHello"),
        (Phase::Tls, false, tls),
        (Phase::Wait, false, "waiting for 1st byte"),
        (Phase::Transfer, false, "response"),
        (Phase::Idle, false, "idle"),
        (Phase::Close, false, "FIN"),
        (Phase::Close, true, "RST"),
    ];
    let mut line = String::new();
    let mut visible = 0usize;
    for (phase, rst, name) in items {
        let glyph = phase.glyph(color, rst);
        let plain = format!("{glyph} {name}");
        let len = plain.chars().count();
        if visible > 0 && visible + 2 + len > width {
            writeln!(out, "{line}")?;
            line.clear();
            visible = 0;
        }
        if visible > 0 {
            line.push_str("  ");
            visible += 2;
        }
        if len > width {
            // Narrower than one item: cut it, without colour codes.
            line.push_str(&truncate(&plain, width));
            visible += width;
        } else if color {
            line.push_str(&format!("{}{glyph}{RESET} {name}", phase.ansi()));
            visible += len;
        } else {
            line.push_str(&plain);
            visible += len;
        }
    }
    if !line.is_empty() {
        writeln!(out, "{line}")?;
    }
    Ok(())
}
