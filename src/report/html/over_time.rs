//! The HTML report's *What began when* charts: `summary.over_time` as bar
//! charts, one per count (connections, requests, TLS handshakes full and
//! resumed, 429s, QUIC handshakes and HTTP/3 requests and 429s,
//! connections open), on the capture's time axis.
//!
//! Does not compute anything beyond folding intervals to fit the width
//! (the table's fold); every string goes through `esc`.

use std::fmt::Write as _;

use super::super::table::{fold, fold_start, Take};
use super::super::width_text;
use super::bars::frame;
use super::{esc, rect, text};
use crate::record::OverTime;

/// Bars drawn at most per chart.
const BARS: usize = 300;

/// A chart: caption, fill, what to take, whether a level (folded
/// intervals take its most) rather than a count.
pub(crate) type Chart = (&'static str, &'static str, Take, bool);

/// The charts, in order.
pub(crate) const CHARTS: [Chart; 13] = [
    ("Connections opened", "#f0883e", |i| i.connections, false),
    ("Requests started", "#218bff", |i| i.requests, false),
    ("Full TLS handshakes", "#a371f7", |i| i.tls_full, false),
    (
        "Resumed TLS handshakes",
        "#d8b9ff",
        |i| i.tls_resumed,
        false,
    ),
    ("429 responses", "#cf222e", |i| i.responses_429, false),
    (
        "Connections opened while another sat idle",
        super::charts::PASSED_OVER,
        |i| i.opened_while_idle,
        false,
    ),
    (
        "Connections opened beside an HTTP/2 connection",
        super::charts::BESIDE_HTTP2,
        |i| i.beside_http2,
        false,
    ),
    (
        "Full TLS handshakes that could have resumed",
        "#9a6700",
        |i| i.tls_not_resumed,
        false,
    ),
    ("Full QUIC handshakes", "#a371f7", |i| i.quic_full, false),
    (
        "Resumed QUIC handshakes",
        "#d8b9ff",
        |i| i.quic_resumed,
        false,
    ),
    (
        "HTTP/3 requests started",
        "#218bff",
        |i| i.http3_requests,
        false,
    ),
    (
        "HTTP/3 429 responses",
        "#cf222e",
        |i| i.http3_responses_429,
        false,
    ),
    ("Connections open", "#afb8c1", |i| i.open, true),
];

/// Writes the charts whose counts are not all zero, when the table would
/// draw its `over time` block.
pub(super) fn over_time(h: &mut String, o: &OverTime) {
    if !super::super::table::over_time_shown(o) {
        return;
    }
    let n = o.intervals.len().div_ceil(BARS).max(1) as u64;
    let width = o.interval * n as f64;
    let origin = fold_start(o, n);
    let untimed = if o.requests_untimed > 0 {
        format!(
            "; {} requests whose times were not kept are in no bar",
            o.requests_untimed
        )
    } else {
        String::new()
    };
    open_charts(
        h,
        &format!(
            "A bar per {}, from +{origin:.3}s{untimed}.",
            width_text(width)
        ),
    );
    for chart in CHARTS {
        let values = fold(o, chart.2, chart.3, n);
        let top = values.iter().copied().max().unwrap_or(0);
        if top > 0 {
            figure(h, &chart, &values, top, [origin, width], None);
        }
    }
    h.push_str("</div>\n");
}

/// The charts' heading and `note` (escaped here), and their grid opened
/// (the caller closes it).
pub(crate) fn open_charts(h: &mut String, note: &str) {
    let _ = writeln!(
        h,
        "<h3>What began when</h3>\n<p class=\"note\" style=\"color:#656d76\">{}</p>\n<div class=\"hists\">",
        esc(note)
    );
}

/// One chart's figure: its caption — with `tag`, the letter of a capture
/// compared — and a bar per value, scaled to `top` (the most of the charts
/// of one count, when compared); `[origin, width]`: the first bar's start
/// and each bar's width, in seconds.
pub(crate) fn figure(
    h: &mut String,
    &(caption, fill, _, level): &Chart,
    values: &[u64],
    top: u64,
    [origin, width]: [f64; 2],
    tag: Option<char>,
) {
    let per = if level {
        "at each bar's end".to_owned()
    } else {
        format!("per {}", width_text(width))
    };
    let most = values.iter().copied().max().unwrap_or(0);
    let tag = tag.map_or(String::new(), |t| format!("<span class=\"tag\">{t}</span>"));
    let _ = writeln!(
        h,
        "<figure><figcaption>{tag}{} {} · most {most}</figcaption>",
        esc(caption),
        esc(&per)
    );
    bars(h, caption, values, top, fill, origin, width);
    h.push_str("</figure>\n");
}

/// One chart: a bar per value, its tooltip the interval and the count.
fn bars(
    h: &mut String,
    caption: &str,
    values: &[u64],
    top: u64,
    fill: &str,
    origin: f64,
    width: f64,
) {
    let (w, ht, left, bottom) = (600.0, 150.0, 40.0, 26.0);
    let (plot_w, plot_h) = frame(h, caption, [w, ht, left, bottom], top as f64);
    let bw = plot_w / values.len().max(1) as f64;
    for (k, &v) in values.iter().enumerate() {
        if v == 0 {
            continue;
        }
        let bh = v as f64 / top as f64 * plot_h;
        let from = origin + k as f64 * width;
        let title = format!("+{from:.3}s – +{:.3}s: {v}", from + width);
        let geometry = [
            left + bw * k as f64,
            ht - bottom - bh,
            (bw - 0.5).max(0.5),
            bh,
        ];
        rect(h, geometry, fill, "", &title);
    }
    let y = ht - bottom + 15.0;
    let end = origin + width * values.len() as f64;
    text(h, left, y, "start", "muted", &format!("+{origin:.3}s"));
    text(h, w - 12.0, y, "end", "muted", &format!("+{end:.3}s"));
    h.push_str("</svg>\n");
}
