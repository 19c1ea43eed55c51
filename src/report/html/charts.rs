//! The HTML report's pictures: the waterfall of connections (time axis,
//! one row per connection — TCP, then QUIC — a segment per phase with its
//! tooltip; marks where the summary counted a connection at its SYN, and
//! over an HTTP/2 connection's bar its stretches at the server's stream
//! limit and its GOAWAY) and the histograms of connect and TLS handshake times, as
//! inline SVG.
//!
//! Does not compute statistics beyond binning; every string from a capture
//! goes through `esc`.

use std::fmt::Write as _;

use super::super::timeline::{
    at_limit_text, close_text, goaway_text, quic_requests_text, quic_segments, requests_text,
    segments, tls_kind, Phase, Segment,
};
use super::super::{human_duration, server_text};
use super::{color, esc, rect, text, MAX_ROWS};
use crate::record::{
    CertificateInfo, CloseKind, ConnectionRecord, Http2Limits, HttpRequest, OpenedBeside,
    QuicRecord, Summary,
};

/// Tick step of about `span / 8`, rounded to 1, 2 or 5 × 10^k.
fn nice_step(span: f64) -> f64 {
    let raw = (span / 8.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let f = match raw / mag {
        n if n < 1.5 => 1.0,
        n if n < 3.5 => 2.0,
        n if n < 7.5 => 5.0,
        _ => 10.0,
    };
    f * mag
}

/// An axis label: the unit fits the span, the decimals fit the step.
fn tick_label(v: f64, step: f64, span: f64) -> String {
    let (scale, unit) = if span >= 1.0 {
        (1.0, "s")
    } else if span >= 1e-3 {
        (1e3, "ms")
    } else {
        (1e6, "µs")
    };
    let s = step * scale;
    let decimals = if s >= 1.0 {
        0
    } else {
        (-s.log10().floor()).max(0.0) as usize
    };
    format!("{:.*}{unit}", decimals, v * scale)
}

fn ms(origin: f64, t: f64) -> String {
    format!("+{:.3} ms", (t - origin) * 1000.0)
}

/// The tooltip of one segment.
fn segment_title(rec: &ConnectionRecord, seg: &Segment, origin: f64) -> String {
    let hs = &rec.tcp.handshake;
    let span = format!("{} → {}", ms(origin, seg.from), ms(origin, seg.to));
    match seg.phase {
        Phase::Tcp => {
            let mut t = format!("TCP handshake: SYN {}", ms(origin, seg.from));
            if let Some(sa) = hs.synack {
                let _ = write!(t, " → SYN-ACK {}", ms(origin, sa.at));
            }
            match (hs.ack, hs.connect) {
                (Some(a), Some(c)) => {
                    let _ = write!(
                        t,
                        " → ACK {} (connect {})",
                        ms(origin, a.at),
                        human_duration(c)
                    );
                }
                _ => t.push_str(" (not completed)"),
            }
            if hs.syn_retransmissions > 0 {
                let _ = write!(t, "\nSYN sent {} more times", hs.syn_retransmissions);
            }
            t
        }
        Phase::Hello => format!(
            "client before its ClientHello: {} ({span}): nothing on the wire between the TCP handshake's ACK and the ClientHello",
            human_duration(seg.to - seg.from)
        ),
        Phase::Tls => {
            let Some(tls) = &rec.tls else {
                return String::new();
            };
            let took = tls.handshake.map_or("not completed".into(), human_duration);
            let mut lines = vec![
                format!("TLS handshake {took}: ClientHello {span}"),
                format!("{} {}", tls_kind(rec), tls.cipher.as_deref().unwrap_or("")),
                format!("SNI {}", tls.sni.as_deref().unwrap_or("-")),
            ];
            if let Some(r) = &tls.resumption {
                lines.push(format!("resumed by {r}"));
            }
            match (&tls.alpn, &tls.alpn_by_size, tls.alpn_offered.is_empty()) {
                (Some(a), ..) => lines.push(format!("ALPN {a}")),
                (None, Some(a), _) => lines.push(format!(
                    "ALPN {a} (told by the size of the EncryptedExtensions; offered {})",
                    tls.alpn_offered.join(", ")
                )),
                (None, None, false) => {
                    lines.push(format!("ALPN offered {}", tls.alpn_offered.join(", ")))
                }
                (None, None, true) => {}
            }
            if let Some(a) = &tls.alert {
                let side = a.side.as_str();
                lines.push(format!("alert from {side}: {} {}", a.level, a.description));
            }
            lines.join("\n")
        }
        Phase::Wait | Phase::Transfer => {
            request_title(seg, &rec.http.list, rec.http.estimated, origin)
        }
        Phase::Idle => format!(
            "connection {}: open {} ({})",
            rec.id,
            human_duration(rec.duration),
            format_args!("{} → {}", ms(origin, rec.start.at), ms(origin, rec.end.at))
        ),
        Phase::Close => format!("{} at {}", close_text(rec), ms(origin, seg.from)),
    }
}

/// The tooltip of a request's wait or transfer, request `seg.request` of
/// `list`.
fn request_title(seg: &Segment, list: &[HttpRequest], estimated: bool, origin: f64) -> String {
    let span = format!("{} → {}", ms(origin, seg.from), ms(origin, seg.to));
    let took = human_duration(seg.to - seg.from);
    let n = seg.request.unwrap_or(0);
    let req = n.checked_sub(1).and_then(|i| list.get(i));
    let what = match req.map(|r| (&r.method, &r.target, r.status)) {
        Some((Some(m), Some(tg), Some(st))) => format!("\n{m} {tg} → {st}"),
        Some((Some(m), Some(tg), None)) => format!("\n{m} {tg}"),
        _ if estimated => "\n(estimated from TLS records)".to_string(),
        _ => String::new(),
    };
    if seg.phase == Phase::Wait {
        format!("request {n}: waiting {took} (sent → first byte: {span}){what}")
    } else {
        format!("response {n}: {took} (first → last byte: {span}){what}")
    }
}

/// The tooltip of one segment of a QUIC connection.
fn quic_title(q: &QuicRecord, seg: &Segment) -> String {
    let origin = q.start.at;
    let span = format!("{} → {}", ms(origin, seg.from), ms(origin, seg.to));
    let t = &q.tls;
    match seg.phase {
        Phase::Tls => {
            let took = q
                .handshake
                .duration
                .map_or("not completed".into(), human_duration);
            let kind = match t.resumed {
                Some(true) => "resumed",
                Some(false) => "full",
                None => "?",
            };
            let mut lines = vec![
                format!("QUIC handshake {took}: first Initial → the client's Finished {span}"),
                format!(
                    "QUIC {} · {} {kind} {}",
                    q.version,
                    t.version.as_deref().unwrap_or("TLS ?"),
                    t.cipher.as_deref().unwrap_or("")
                ),
                format!("SNI {}", t.sni.as_deref().unwrap_or("-")),
            ];
            if !t.alpn_offered.is_empty() {
                lines.push(format!("ALPN offered {}", t.alpn_offered.join(", ")));
            }
            if q.handshake.packets.zero_rtt > 0 {
                lines.push(format!("{} 0-RTT packets", q.handshake.packets.zero_rtt));
            }
            if q.handshake.retry {
                lines.push("after a Retry".into());
            }
            lines.join("\n")
        }
        Phase::Wait | Phase::Transfer => {
            let list = q.http.as_ref().map_or(&[][..], |h| &h.list);
            request_title(seg, list, false, origin)
        }
        _ => format!(
            "QUIC connection q{}: open {} ({span})",
            q.id,
            human_duration(q.duration)
        ),
    }
}

/// One row of the waterfall: its labels, its tooltip, and its segments
/// each with its own.
struct Lane {
    /// `#3`, or `q3` for a QUIC connection.
    id: String,
    port: String,
    requests: String,
    summary: String,
    segments: Vec<(Segment, String)>,
    rst: bool,
}

/// A tooltip's words on a server's certificate chain.
fn certificate_text(c: &CertificateInfo) -> String {
    let subject = c
        .subject
        .as_deref()
        .map_or(String::new(), |s| format!(" {s}"));
    let packed = c.compression.map_or(String::new(), |a| format!(", {a}"));
    format!(
        " · certificate{subject} ({} in the chain, {} B{packed})",
        c.chain, c.bytes
    )
}

impl Lane {
    fn of(rec: &ConnectionRecord) -> Lane {
        let origin = rec.tcp.handshake.syn.map_or(rec.start.at, |s| s.at);
        let sni = rec
            .asked_name()
            .map_or(String::new(), |(what, name)| format!(" · {what} {name}"));
        let cert = rec
            .tls
            .as_ref()
            .and_then(|t| t.certificate.as_ref())
            .map_or(String::new(), certificate_text);
        let summary = format!(
            "connection {} · {} → {} · {} requests · {}{sni}{cert} · open {} · {}",
            rec.id,
            rec.client,
            server_text(rec),
            requests_text(rec),
            tls_kind(rec),
            human_duration(rec.duration),
            close_text(rec)
        );
        let segments = segments(rec).into_iter();
        Lane {
            id: format!("#{}", rec.id),
            port: port_of(&rec.client),
            requests: requests_text(rec),
            summary,
            segments: segments
                .map(|seg| {
                    let title = segment_title(rec, &seg, origin);
                    (seg, title)
                })
                .collect(),
            rst: rec.close.kind == CloseKind::Rst,
        }
    }

    fn of_quic(q: &QuicRecord) -> Lane {
        let sni = q
            .tls
            .sni
            .as_deref()
            .map_or(String::new(), |s| format!(" · SNI {s}"));
        // With a key log: the protocol the server chose, and how it closed.
        let alpn = q
            .tls
            .alpn
            .as_deref()
            .map_or(String::new(), |a| format!(" · ALPN {a}"));
        let close = q.close.as_ref().map_or(String::new(), |c| {
            format!(
                " · closed by the {} ({} error {:#x})",
                c.by.as_str(),
                c.kind,
                c.error_code
            )
        });
        let cert = q
            .tls
            .certificate
            .as_ref()
            .map_or(String::new(), certificate_text);
        let summary = format!(
            "QUIC connection q{} · {} → {} · {} HTTP/3 requests · version {}{sni}{alpn}{cert} · open {}{close}",
            q.id,
            q.client,
            q.server,
            quic_requests_text(q),
            q.version,
            human_duration(q.duration),
        );
        Lane {
            id: format!("q{}", q.id),
            port: port_of(&q.client),
            requests: quic_requests_text(q),
            summary,
            segments: quic_segments(q)
                .into_iter()
                .map(|seg| {
                    let title = quic_title(q, &seg);
                    (seg, title)
                })
                .collect(),
            rst: false,
        }
    }
}

fn port_of(client: &str) -> String {
    client
        .rsplit_once(':')
        .map_or(client, |(_, p)| p)
        .to_string()
}

/// The colour of the mark on a connection opened while another to its
/// server sat idle.
pub(super) const PASSED_OVER: &str = "#bf3989";

/// The colour of the mark on a connection opened beside an HTTP/2
/// connection to its server.
pub(super) const BESIDE_HTTP2: &str = "#8250df";

/// The colour of the line over a connection's bar while its HTTP/2
/// client streams were at the server's limit, and of its GOAWAY's tick.
pub(super) const AT_LIMIT: &str = "#d4a72c";
pub(super) const GOAWAY: &str = "#24292f";

/// The waterfall of `records` (the first `MAX_ROWS` of `total` TCP
/// connections), then of the QUIC connections `quic` (the first
/// `MAX_ROWS` of `quic_total`); a connection `summary` counted at its SYN
/// (opened while another sat idle, or beside an HTTP/2 connection) marked
/// there.
pub(super) fn waterfall(
    h: &mut String,
    records: &[ConnectionRecord],
    total: u64,
    quic: &[QuicRecord],
    quic_total: u64,
    summary: &Summary,
) {
    let records = records.get(..MAX_ROWS).unwrap_or(records);
    let quic = quic.get(..MAX_ROWS).unwrap_or(quic);
    let beside: Vec<Option<Beside>> = records.iter().map(|r| mark_of(r, summary)).collect();
    let lanes: Vec<Lane> = records
        .iter()
        .zip(&beside)
        .map(|(r, b)| {
            let mut lane = Lane::of(r);
            if let Some(b) = b {
                lane.summary.push_str(&format!(" · {}", b.said));
            }
            lane
        })
        .chain(quic.iter().map(Lane::of_quic))
        .collect();
    let starts = records
        .iter()
        .map(|r| r.start.at)
        .chain(quic.iter().map(|q| q.start.at));
    let ends = records
        .iter()
        .map(|r| r.end.at)
        .chain(quic.iter().map(|q| q.end.at));
    let (Some(t0), Some(t1)) = (starts.min_by(f64::total_cmp), ends.max_by(f64::total_cmp)) else {
        h.push_str("<p class=\"note\">No connections.</p>\n");
        return;
    };
    let (width, label_w, axis_h, row_h) = (1220.0, 170.0, 24.0, 20.0);
    let chart_w = width - label_w - 40.0;
    let span = (t1 - t0).max(1e-6);
    let x = |t: f64| label_w + (t - t0) / span * chart_w;
    let height = axis_h + row_h * lanes.len() as f64 + 6.0;
    let _ = writeln!(
        h,
        "<svg class=\"waterfall\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"waterfall of connections\">"
    );
    let step = nice_step(span);
    let mut i = 0u32;
    while f64::from(i) * step <= span * 1.0001 {
        let tick = f64::from(i) * step;
        let tx = label_w + tick / span * chart_w;
        let _ = write!(
            h,
            "<line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{height:.1}\" stroke=\"#eaeef2\"/>",
            axis_h - 5.0
        );
        let anchor = if i == 0 { "start" } else { "middle" };
        text(h, tx, 14.0, anchor, "muted", &tick_label(tick, step, span));
        i += 1;
    }
    text(h, 6.0, 14.0, "start", "muted", "conn · client port · reqs");
    h.push('\n');
    for (row, lane) in lanes.iter().enumerate() {
        let y = axis_h + row_h * row as f64;
        let base = y + row_h / 2.0 + 4.0;
        let _ = write!(
            h,
            "<g class=\"conn\" data-id=\"{}\"><title>{}</title>",
            esc(lane.id.trim_start_matches('#')),
            esc(&lane.summary)
        );
        let fill = if row % 2 == 0 { "#ffffff" } else { "#f6f8fa" };
        let _ = write!(
            h,
            "<rect class=\"bg\" x=\"0\" y=\"{y:.1}\" width=\"{width}\" height=\"{row_h}\" fill=\"{fill}\"/>"
        );
        text(h, 6.0, base, "start", "", &lane.id);
        text(h, 56.0, base, "start", "", &format!(":{}", lane.port));
        text(h, label_w - 12.0, base, "end", "muted", &lane.requests);
        h.push('\n');
        for (seg, title) in &lane.segments {
            let (x0, x1) = (x(seg.from), x(seg.to));
            let (geometry, extra) = match seg.phase {
                Phase::Idle => ([x0, y + 9.0, (x1 - x0).max(1.0), 2.0], ""),
                Phase::Close => {
                    let w = if lane.rst { 3.0 } else { 2.0 };
                    ([x0 - w / 2.0, y + 3.0, w, row_h - 6.0], "")
                }
                _ => (
                    [x0, y + 4.0, (x1 - x0).max(2.0), row_h - 8.0],
                    " rx=\"1.5\"",
                ),
            };
            rect(h, geometry, color(seg.phase), extra, title);
        }
        if let (Some(Some(b)), Some(r)) = (beside.get(row), records.get(row)) {
            let sx = x(r.start.at);
            let _ = write!(
                h,
                "<path class=\"{}\" d=\"M{:.1} {:.1}L{:.1} {:.1}L{sx:.1} {:.1}Z\" fill=\"{}\"><title>{}</title></path>",
                b.class,
                sx - 4.0,
                y + 1.0,
                sx + 4.0,
                y + 1.0,
                y + 7.0,
                b.color,
                esc(&b.title)
            );
        }
        if let Some(h2) = records.get(row).and_then(|r| r.http.http2.as_deref()) {
            http2_marks(h, h2, y, &x);
        }
        h.push_str("</g>\n");
    }
    h.push_str("</svg>\n");
    if total > records.len() as u64 {
        let _ = writeln!(
            h,
            "<p class=\"note\">Showing the first {} of {total} connections.</p>",
            records.len(),
        );
    }
    if quic_total > quic.len() as u64 {
        let _ = writeln!(
            h,
            "<p class=\"note\">Showing the first {} of {quic_total} QUIC connections.</p>",
            quic.len(),
        );
    }
}

/// What bounded an HTTP/2 connection's new requests, over its bar in the
/// row at `y`: a line while its client streams were at the server's
/// limit, a tick at its first GOAWAY.
fn http2_marks(h: &mut String, h2: &Http2Limits, y: f64, x: &dyn Fn(f64) -> f64) {
    for (from, until) in &h2.at_limit_spans {
        let (x0, x1) = (x(from.at), x(until.at));
        let title = format!(
            "{}, for {}",
            at_limit_text(h2),
            human_duration(until.at - from.at)
        );
        rect(
            h,
            [x0, y + 1.0, (x1 - x0).max(1.0), 2.0],
            AT_LIMIT,
            " class=\"at-limit\"",
            &title,
        );
    }
    if let Some(g) = &h2.goaway {
        let title = format!("GOAWAY from the {} ({})", g.from.as_str(), goaway_text(g));
        rect(
            h,
            [x(g.at.at) - 1.0, y + 1.0, 2.0, 18.0],
            GOAWAY,
            " class=\"goaway\"",
            &title,
        );
    }
}

/// A connection's mark at its SYN: opened while another sat idle, or
/// beside an HTTP/2 connection (never both).
struct Beside {
    class: &'static str,
    color: &'static str,
    /// The mark's tooltip, and what the lane's says.
    title: String,
    said: String,
}

/// The mark of `r`, where `summary` counted it at its SYN.
fn mark_of(r: &ConnectionRecord, summary: &Summary) -> Option<Beside> {
    match summary.opened_beside(r.id)? {
        OpenedBeside::Idle(p) => Some(Beside {
            class: "passed",
            color: PASSED_OVER,
            title: format!("opened while connection {} sat idle", p.idle_connection),
            said: format!(
                "opened while connection {} to the same server sat idle (for {})",
                p.idle_connection,
                human_duration(p.idle)
            ),
        }),
        OpenedBeside::Http2(b) => {
            let when = if b.raced {
                ", still in its handshake"
            } else {
                ""
            };
            Some(Beside {
                class: "beside-h2",
                color: BESIDE_HTTP2,
                title: format!(
                    "opened beside HTTP/2 connection {}{when}",
                    b.http2_connection
                ),
                said: format!(
                    "opened beside HTTP/2 connection {} to the same server{when}",
                    b.http2_connection
                ),
            })
        }
    }
}
