//! Comparing two captures (`compare A B`): the headline metrics of each side
//! by side with a B/A ratio column (drawn by `grid`), and a verdict sentence
//! derived from the numbers; or the same as one JSON document, or as
//! Markdown (`-T markdown`, its tables `grid`'s); or as the
//! comparison section of the HTML report (`write_html`, which `html` calls).
//! More than two captures are `many`'s: a column each, and each against
//! the first. The rows themselves, and their values, are `metrics`'.
//!
//! Every figure comes from `Summary` (handshake events too, since
//! 1 December: `compare` no longer needs the records, so it holds none).
//!
//! Does not analyze captures or define the summary figures. Does not lay
//! out the HTML page (that is `html`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Map, Value};

use super::drawn::Drawn;
use super::html::{card, esc};
use super::sanitize;
use crate::record::Summary;

mod grid;
pub mod many;
mod metrics;
mod over_time;
mod servers;

pub(crate) use grid::{md, Field, Grid};
pub(crate) use metrics::{format_value, metrics, values, Metric};

/// One analysed capture and the name to show for it.
#[derive(Clone, Debug)]
pub struct Labeled<'a> {
    pub label: String,
    pub summary: &'a Summary,
    /// What the HTML report draws of it (empty where nothing is drawn).
    pub drawn: Cow<'a, Drawn>,
}

/// How to draw the comparison table.
#[derive(Clone, Debug, Default)]
pub struct CompareOpts {
    /// Colour the ratio column: green where B is better, red where worse.
    pub color: bool,
}

fn find<'m>(ms: &'m [Metric], key: &str) -> Option<&'m Metric> {
    ms.iter().find(|m| m.key == key)
}

/// How B compares with A: `None` when they are equal, else "10× fewer",
/// "35% fewer", "2.5× more", or plain "more" when A's is zero.
fn how_many(a: f64, b: f64) -> Option<String> {
    if (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) {
        return None;
    }
    if a <= 0.0 {
        return Some("more".to_string());
    }
    if b <= 0.0 {
        return Some("100% fewer".to_string());
    }
    let (factor, word) = if b < a {
        (a / b, "fewer")
    } else {
        (b / a, "more")
    };
    Some(if factor >= 10.0 {
        format!("{factor:.0}× {word}")
    } else if factor >= 2.0 {
        let f = format!("{factor:.1}");
        format!("{}× {word}", f.trim_end_matches(".0"))
    } else {
        // Fewer: the share of A's saved; more: the share of A's added.
        let pct = if b < a { 1.0 - b / a } else { b / a - 1.0 };
        format!("{:.0}% {word}", pct * 100.0)
    })
}

/// The verdict: one sentence comparing B with A, from the numbers. Values
/// are written "B vs A".
pub(crate) fn verdict(a: &Labeled, b: &Labeled, ms: &[Metric]) -> String {
    sentence(&verdict_clauses(a, b, ms, ('A', 'B')))
}

/// A verdict's clauses as one sentence.
pub(crate) fn sentence(clauses: &[String]) -> String {
    let mut sentence = clauses.join("; ");
    sentence.push('.');
    sentence
}

/// The verdict comparing `b` with `a`, the two named by their letters,
/// in clauses: the headline (handshakes per request) first, then each
/// figure that differs, "B vs A".
pub(crate) fn verdict_clauses(
    a: &Labeled,
    b: &Labeled,
    ms: &[Metric],
    names: (char, char),
) -> Vec<String> {
    let pair = |key: &str| find(ms, key).and_then(|m| Some((m.a?, m.b?)));
    let fmt = |key: &str, v: f64| {
        find(ms, key).map_or_else(|| format!("{v}"), |m| format_value(Some(v), m.unit))
    };
    let (a_name, b_name) = names;
    let mut parts = vec![format!("{b_name} ")];
    match pair("tcp_handshakes_per_request") {
        Some((x, y)) => {
            if let Some(first) = parts.first_mut() {
                first.push_str(&match how_many(x, y) {
                    None => {
                        format!("used as many TCP handshakes per request as {a_name} ({x:.2} each)")
                    }
                    Some(s) => format!(
                        "used {s} TCP handshakes per request than {a_name} ({y:.2} vs {x:.2})"
                    ),
                });
            }
        }
        // No request over TCP on either side, HTTP/3 ones on both: theirs
        // is the headline.
        None if pair("requests") == Some((0.0, 0.0))
            && pair("quic_handshakes_per_request").is_some() =>
        {
            let (x, y) = pair("quic_handshakes_per_request").unwrap_or_default();
            if let Some(first) = parts.first_mut() {
                first.push_str(&match how_many(x, y) {
                    None => format!(
                        "used as many QUIC handshakes per HTTP/3 request as {a_name} ({x:.2} each), and no request over TCP"
                    ),
                    Some(s) => format!(
                        "used {s} QUIC handshakes per HTTP/3 request than {a_name} ({y:.2} vs {x:.2}), and no request over TCP"
                    ),
                });
            }
        }
        None => {
            let (x, y) = pair("tcp_handshakes").unwrap_or((0.0, 0.0));
            let (ra, rb) = pair("requests").unwrap_or((0.0, 0.0));
            let quic = a.summary.quic.is_some() || b.summary.quic.is_some();
            let over = if quic { " over TCP" } else { "" };
            let which = match (ra > 0.0, rb > 0.0) {
                (false, false) => format!("neither carried requests{over}"),
                (true, _) => format!("{b_name} carried no request{over} ({a_name} {ra:.0})"),
                (false, true) => format!("{a_name} carried no request{over} ({b_name} {rb:.0})"),
            };
            if let Some(first) = parts.first_mut() {
                first.push_str(&format!(
                    "completed {y:.0} TCP handshakes, {a_name} {x:.0}, and {which} to divide them by"
                ));
            }
        }
    }
    let tls_any = a.summary.tls_connections > 0 || b.summary.tls_connections > 0;
    if let (true, Some((x, y))) = (tls_any, pair("tls_full_per_request")) {
        parts.push(match how_many(x, y) {
            None => format!("as many full TLS handshakes per request ({x:.2} each)"),
            Some(s) => format!("{s} full TLS handshakes per request ({y:.2} vs {x:.2})"),
        });
    }
    let mut tail = Vec::new();
    // A side with none (no HTTP/2 offered; no QUIC) counts 0 (its rows
    // are null).
    let either = |key: &str| find(ms, key).map(|m| (m.a.unwrap_or(0.0), m.b.unwrap_or(0.0)));
    // Where either dialed connections that carried no request, the same
    // counting them: what the client paid in all.
    let unused = either("connections_unused").filter(|&(x, y)| x + y > 0.0);
    if let (Some(_), Some((x, y))) = (unused, pair("tcp_handshakes_per_request_all")) {
        tail.push(match how_many(x, y) {
            None => format!("counting the connections that carried no request, as many TCP handshakes per request ({x:.2} each)"),
            Some(s) => format!("counting the connections that carried no request, {s} TCP handshakes per request ({y:.2} vs {x:.2})"),
        });
    }
    let (ra, rb) = (
        a.summary.tls_handshakes_resumed,
        b.summary.tls_handshakes_resumed,
    );
    if ra != rb {
        tail.push(format!("{rb} vs {ra} resumed TLS sessions"));
    }
    if let Some((x, y)) = pair("requests_per_connection_mean") {
        tail.push(format!("{y:.1} vs {x:.1} requests per connection"));
    }
    if let Some((x, y)) = pair("latency_median") {
        tail.push(format!(
            "median request latency {} vs {}",
            fmt("latency_median", y),
            fmt("latency_median", x)
        ));
    }
    if let Some((x, y)) = pair("status_429").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!("{y:.0} vs {x:.0} responses 429 (rate limited)"));
    }
    let same = pair("requests_in_retry_window");
    let any = pair("requests_in_retry_window_any_connection");
    match (same, any) {
        (Some((x, y)), Some((ax, ay))) if (ax, ay) != (x, y) => tail.push(format!(
            "{y:.0} vs {x:.0} requests sent while a Retry-After ran on its connection, {ay:.0} vs {ax:.0} on any connection to the server"
        )),
        (Some((x, y)), _) if x + y > 0.0 => tail.push(format!(
            "{y:.0} vs {x:.0} requests sent while a Retry-After ran"
        )),
        _ => {}
    }
    if let Some((x, y)) = pair("requests_after_close").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!(
            "{y:.0} vs {x:.0} requests sent on connections the server had closed"
        ));
    }
    if let Some((x, y)) = pair("opened_while_idle").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!(
            "{y:.0} vs {x:.0} connections opened while another to the same server sat idle"
        ));
    }
    if let Some((x, y)) = either("redialed").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!(
            "{y:.0} vs {x:.0} connections opened after the client closed another to the same server that it could have kept"
        ));
    }
    if let Some((x, y)) = either("beside_http2").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!(
            "{y:.0} vs {x:.0} connections opened beside an HTTP/2 connection to the same server"
        ));
    }
    let at_limit = either("beside_http2_at_limit").filter(|&(x, y)| x + y > 0.0);
    let after_goaway = either("beside_http2_after_goaway").filter(|&(x, y)| x + y > 0.0);
    match (at_limit, after_goaway) {
        (Some((x, y)), Some((gx, gy))) => tail.push(format!(
            "{y:.0} vs {x:.0} connections needed at the server's HTTP/2 stream limit, {gy:.0} vs {gx:.0} after a GOAWAY"
        )),
        (Some((x, y)), None) => tail.push(format!(
            "{y:.0} vs {x:.0} connections needed at the server's HTTP/2 stream limit"
        )),
        (None, Some((x, y))) => tail.push(format!(
            "{y:.0} vs {x:.0} connections needed after an HTTP/2 GOAWAY"
        )),
        (None, None) => {}
    }
    if let Some((x, y)) = either("requests_refused").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!(
            "{y:.0} vs {x:.0} HTTP/2 requests refused unprocessed by the server"
        ));
    }
    if let Some((x, y)) = either("tls_not_offered").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!(
            "{y:.0} vs {x:.0} full TLS handshakes offering no session to resume after one with the same server"
        ));
    }
    if let Some((x, y)) = either("quic_connections").filter(|&(x, y)| x + y > 0.0) {
        let (fx, fy) = either("quic_handshakes_full").unwrap_or((0.0, 0.0));
        tail.push(format!(
            "{y:.0} vs {x:.0} QUIC connections ({fy:.0} vs {fx:.0} full handshakes)"
        ));
    }
    // HTTP/3 requests where a key log opened either side's QUIC.
    let opened = find(ms, "quic_requests").is_some_and(|m| m.a.is_some() || m.b.is_some());
    if let (true, Some((x, y))) = (opened, either("quic_requests")) {
        tail.push(format!("{y:.0} vs {x:.0} HTTP/3 requests"));
    }
    if let Some((x, y)) = either("quic_status_429").filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!("{y:.0} vs {x:.0} HTTP/3 responses 429"));
    }
    let too_soon = either("quic_requests_in_retry_window");
    if let Some((x, y)) = too_soon.filter(|&(x, y)| x + y > 0.0) {
        tail.push(format!(
            "{y:.0} vs {x:.0} HTTP/3 requests sent while a Retry-After ran"
        ));
    }
    if let Some((x, y)) = pair("quic_handshake_median") {
        tail.push(format!(
            "median QUIC handshake {} vs {}",
            fmt("quic_handshake_median", y),
            fmt("quic_handshake_median", x)
        ));
    }
    tail.extend(servers::verdict_clause(a, b));
    if let Some((x, y)) = pair("handshake_time_total") {
        tail.push(format!(
            "setup time {} vs {} in total (SYN → first request byte)",
            fmt("handshake_time_total", y),
            fmt("handshake_time_total", x)
        ));
    }
    let mut clauses = vec![parts.join(" and ")];
    clauses.extend(tail);
    clauses
}

/// Labels longer than this are not repeated in the table's header (they
/// are on the lines above it): a capture's file name there made the table
/// twice as wide as its figures.
const HEADER_LABEL: usize = 24;

/// A side's column header: `A: label`, or `A` alone for a long label.
pub(crate) fn side_header(side: &str, label: &str) -> String {
    if label.chars().count() <= HEADER_LABEL {
        format!("{side}: {label}")
    } else {
        side.to_string()
    }
}

/// The metrics table: each shown metric's A, B and B/A (judged).
fn grid(ms: &[Metric], la: &str, lb: &str) -> Grid {
    let mut grid = Grid::new(vec![
        "metric".to_string(),
        side_header("A", la),
        side_header("B", lb),
        "B/A".to_string(),
    ]);
    for m in ms.iter().filter(|m| m.shown()) {
        let ratio = m.ratio().map_or("-".to_string(), |r| format!("{r:.2}"));
        grid.rows.push(vec![
            Field::text(m.label),
            Field::number(format_value(m.a, m.unit)),
            Field::number(format_value(m.b, m.unit)),
            Field::judged(ratio, m.b_better()),
        ]);
    }
    grid
}

/// Writes the comparison table and the verdict.
pub fn write(a: &Labeled, b: &Labeled, out: &mut dyn Write, opts: &CompareOpts) -> io::Result<()> {
    let ms = metrics(a, b);
    let (la, lb) = (sanitize(&a.label), sanitize(&b.label));
    writeln!(out, "A             {la}")?;
    writeln!(out, "B             {lb}")?;
    write_selection(&[a, b], out)?;
    writeln!(out, "verdict       {}", sanitize(&verdict(a, b, &ms)))?;
    writeln!(out)?;
    writeln!(out, "{}", grid(&ms, &la, &lb).table(opts))?;
    writeln!(out, "{FOOTNOTE}")?;
    servers::write(&[a, b], out, opts)?;
    over_time::write(&[a, b], out)
}

/// The same as [`write`] in Markdown (`-T markdown`), to paste into an
/// issue or a pull request: the captures, the verdict, the metrics and
/// servers as tables, the counts over time in a code block.
pub fn write_markdown(a: &Labeled, b: &Labeled, out: &mut dyn Write) -> io::Result<()> {
    let ms = metrics(a, b);
    let verdict = (verdict_clauses(a, b, &ms, ('A', 'B')), 'B');
    markdown_head(&[a, b], &[verdict], out)?;
    grid(&ms, &a.label, &b.label).markdown(out)?;
    markdown_tail(&[a, b], out)
}

/// Markdown: each capture by its letter, the selection, and the
/// verdicts, each its headline and then a clause a line (of the capture
/// lettered, against A).
pub(crate) fn markdown_head(
    docs: &[&Labeled],
    verdicts: &[(Vec<String>, char)],
    out: &mut dyn Write,
) -> io::Result<()> {
    for (i, d) in docs.iter().enumerate() {
        writeln!(out, "- **{}**: {}", many::letter(i), md(&d.label))?;
    }
    if let Some(sel) = docs.iter().find_map(|d| d.summary.selection.as_ref()) {
        writeln!(out, "- **only**: {}", md(&sel.describe()))?;
    }
    writeln!(out)?;
    for (clauses, letter) in verdicts {
        let mut clauses = clauses.iter();
        let head = clauses.next().map_or(String::new(), |c| md(c));
        writeln!(out, "**Verdict** (figures {letter} vs A): {head}")?;
        for clause in clauses {
            writeln!(out, "- {}", md(clause))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Markdown: the footnote, the servers' table and the counts over time.
pub(crate) fn markdown_tail(docs: &[&Labeled], out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "_{}_", md(FOOTNOTE))?;
    servers::write_markdown(docs, out)?;
    let mut drawn = Vec::new();
    over_time::write(docs, &mut drawn)?;
    let drawn = String::from_utf8_lossy(&drawn);
    let drawn = drawn.trim_start_matches('\n');
    if !drawn.is_empty() {
        writeln!(out)?;
        writeln!(out, "```text\n{drawn}```")?;
    }
    Ok(())
}

/// The line naming the connections kept, when a selection was given
/// (the same for every capture compared).
pub(crate) fn write_selection(docs: &[&Labeled], out: &mut dyn Write) -> io::Result<()> {
    match docs.iter().find_map(|d| d.summary.selection.as_ref()) {
        Some(sel) => writeln!(out, "only          {}", sanitize(&sel.describe())),
        None => Ok(()),
    }
}

/// What the tables' last line says of handshake events.
const FOOTNOTE: &str = "handshake events: SYN, SYN-ACK and ACK packets seen (retransmissions included) plus TLS handshake messages up to completion";

/// The HTML class of a B value or ratio: `good` where B is better than
/// A, `bad` where worse.
pub(crate) fn html_class(m: &Metric) -> &'static str {
    match m.b_better() {
        Some(true) => "good",
        Some(false) => "bad",
        None => "",
    }
}

#[derive(Serialize)]
struct Side<'a> {
    label: &'a str,
    summary: &'a Summary,
}

#[derive(Serialize)]
struct Pair {
    a: Option<f64>,
    b: Option<f64>,
}

#[derive(Serialize)]
struct Document<'a> {
    a: Side<'a>,
    b: Side<'a>,
    metrics: Map<String, Value>,
    ratios: Map<String, Value>,
    verdict: String,
}

fn json_number(v: Option<f64>) -> Value {
    v.and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

/// Writes one pretty-printed JSON document and a newline:
/// `{"a": {"label", "summary"}, "b": {…}, "metrics": {key: {"a", "b"}},
/// "ratios": {key: b/a or null}, "verdict": "…"}`, with the keys of
/// [`metrics`]. A ratio is null when either value is null or A's is zero.
pub fn write_json(a: &Labeled, b: &Labeled, out: &mut dyn Write) -> io::Result<()> {
    let ms = metrics(a, b);
    let mut metrics_map = Map::new();
    let mut ratios = Map::new();
    for m in &ms {
        let pair = serde_json::to_value(Pair { a: m.a, b: m.b }).map_err(io::Error::from)?;
        metrics_map.insert(m.key.to_string(), pair);
        ratios.insert(m.key.to_string(), json_number(m.ratio()));
    }
    let doc = Document {
        a: Side {
            label: &a.label,
            summary: a.summary,
        },
        b: Side {
            label: &b.label,
            summary: b.summary,
        },
        metrics: metrics_map,
        ratios,
        verdict: verdict(a, b, &ms),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// The metrics shown as cards above the comparison table.
const HEADLINE: [&str; 6] = [
    "tcp_handshakes_per_request",
    "tls_full_per_request",
    "requests_per_connection_mean",
    "handshake_time_total",
    "latency_median",
    "handshake_events_per_request",
];

/// The comparison section of the HTML report: the verdict, the headline
/// metrics as cards, and every metric in a folded table.
pub(crate) fn write_html(h: &mut String, a: &Labeled, b: &Labeled) {
    let ms = metrics(a, b);
    let _ = writeln!(
        h,
        "<section class=\"compare\">\n<h2>Comparison<span class=\"tag\">A</span>{}\
         <span class=\"tag\">B</span>{}</h2>\n<p class=\"verdict\">{}</p>\n<div class=\"cards\">",
        esc(&a.label),
        esc(&b.label),
        esc(&verdict(a, b, &ms))
    );
    let class = html_class;
    let ratio = |m: &Metric| m.ratio().map_or("-".to_string(), |r| format!("{r:.2}"));
    for m in ms.iter().filter(|m| HEADLINE.contains(&m.key)) {
        let v = format!(
            "{} → {}",
            format_value(m.a, m.unit),
            format_value(m.b, m.unit)
        );
        card(
            h,
            m.label,
            &v,
            &format!("A → B · B/A {}", ratio(m)),
            class(m),
        );
    }
    let _ = writeln!(
        h,
        "</div>\n<details><summary>All {} metrics</summary>\n<div class=\"box cmp\"><table>\n\
         <thead><tr><th>metric</th><th>A</th><th>B</th><th>B/A</th></tr></thead>\n<tbody>",
        ms.iter().filter(|m| m.shown()).count()
    );
    for m in ms.iter().filter(|m| m.shown()) {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n {}\">{}</td></tr>",
            esc(m.label),
            esc(&format_value(m.a, m.unit)),
            esc(&format_value(m.b, m.unit)),
            class(m),
            ratio(m)
        );
    }
    h.push_str("</tbody></table></div>\n</details>\n");
    servers::write_html(h, &[a, b]);
    over_time::write_html(h, &[a, b]);
    h.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::{how_many, side_header};

    #[test]
    fn a_long_label_is_not_repeated_in_the_header() {
        assert_eq!(
            side_header("A", "HttpURLConnection"),
            "A: HttpURLConnection"
        );
        assert_eq!(
            side_header("B", "ünïcödé-24-characters-xx"),
            "B: ünïcödé-24-characters-xx"
        );
        assert_eq!(side_header("B", "java-httpclient-pooled-10.pcap"), "B");
    }

    #[test]
    fn changes_in_words() {
        assert_eq!(how_many(1.0, 1.0), None);
        assert_eq!(how_many(1.0, 0.1).as_deref(), Some("10× fewer"));
        assert_eq!(how_many(0.63, 0.1).as_deref(), Some("6.3× fewer"));
        assert_eq!(how_many(1.0, 0.5).as_deref(), Some("2× fewer"));
        assert_eq!(how_many(1.0, 0.65).as_deref(), Some("35% fewer"));
        assert_eq!(how_many(1.0, 1.5).as_deref(), Some("50% more"));
        assert_eq!(how_many(0.1, 1.0).as_deref(), Some("10× more"));
        assert_eq!(how_many(0.0, 1.0).as_deref(), Some("more"));
        assert_eq!(how_many(1.0, 0.0).as_deref(), Some("100% fewer"));
    }
}
