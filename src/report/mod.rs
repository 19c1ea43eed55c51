//! Reports: turning records and summaries into bytes for people (table) and
//! for scripts (JSON, JSON Lines, CSV). Every report writes into a writer it
//! is given.
//!
//! Does not parse packets or compute statistics: everything comes from
//! `record` types.

pub mod compare;
pub mod csv;
pub mod drawn;
pub mod html;
pub mod json;
pub mod ordered;
pub mod spool;
pub mod table;
pub mod timeline;

use crate::record::ConnectionRecord;

/// A capture's text made safe for a terminal: control characters (escape
/// sequences from a hostile capture would otherwise reach the terminal) and
/// the invisible bidirectional controls (which reorder what is shown after
/// them) become `?`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || is_bidi_control(c) {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// Counts as people read them, the largest first: `429 ×138, 200 ×112`.
pub fn counts_text(map: &std::collections::BTreeMap<String, u64>) -> String {
    let mut items: Vec<(&String, &u64)> = map.iter().collect();
    items.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    items
        .iter()
        .map(|(k, n)| format!("{} ×{n}", sanitize(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Unicode's bidirectional formatting characters (marks, embeddings,
/// overrides, isolates).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The Retry-After values given, the most given first: `1s ×8, 30s ×1`.
pub fn retry_after_text(r: &crate::record::RateLimitSummary) -> String {
    let with_unit: std::collections::BTreeMap<String, u64> = r
        .retry_after
        .iter()
        .map(|(secs, &n)| (format!("{secs}s"), n))
        .collect();
    counts_text(&with_unit)
}

/// What a capture's responses said of rate limiting, for people: the
/// 429s, the Retry-After values (`Retry-After 1s ×8`) and the connections
/// closed after a 429; then, when clients sent anything after one, how
/// they answered it on the same connection, and across the connections
/// to each server where that tells more.
pub fn rate_limit_lines(r: &crate::record::RateLimitSummary) -> RateLimitLines {
    let mut first = format!(
        "{} response{} 429 on {} connection{}",
        r.responses_429,
        plural(r.responses_429),
        r.connections_limited,
        plural(r.connections_limited)
    );
    if !r.retry_after.is_empty() {
        first.push_str(&format!(" · Retry-After {}", retry_after_text(r)));
    }
    let closed: u64 = r.closed_after_429.values().sum();
    if closed > 0 {
        let by: Vec<String> = r
            .closed_after_429
            .iter()
            .map(|(who, n)| format!("{who} {n}"))
            .collect();
        first.push_str(&format!(
            " · {closed} connection{} ended on a 429 (closed by {})",
            plural(closed),
            by.join(", ")
        ));
    }
    let told = !r.retry_after.is_empty();
    let mut same = Vec::new();
    if told {
        same.push(in_window_text(r.requests_in_window));
    }
    same.extend(wait_text(&r.wait_after_429, None));
    // Across connections, where that tells more than each connection did.
    let more = |a: &&crate::record::AcrossConnections| {
        a.requests_in_window != r.requests_in_window
            || a.wait_after_429.count != r.wait_after_429.count
            || a.requests_in_window_elsewhere
                + a.connections_opened_in_window
                + a.retried_elsewhere
                + a.requests_not_seen
                + a.out_of_order
                > 0
    };
    let across = r.across_connections.as_ref().filter(more).and_then(|a| {
        let mut parts = Vec::new();
        if told {
            let mut text = in_window_text(a.requests_in_window);
            if a.requests_in_window_elsewhere > 0 {
                text.push_str(&format!(
                    " ({} on another connection)",
                    a.requests_in_window_elsewhere
                ));
            }
            parts.push(text);
            let n = a.connections_opened_in_window;
            parts.push(format!("{n} connection{} opened during one", plural(n)));
        }
        parts.extend(wait_text(&a.wait_after_429, Some(a.retried_elsewhere)));
        if a.requests_not_seen > 0 {
            parts.push(format!(
                "{} request{} past the 4,096 kept beyond a connection's list not counted",
                a.requests_not_seen,
                plural(a.requests_not_seen)
            ));
        }
        if a.out_of_order > 0 {
            parts.push(format!(
                "approximate: {} taken out of time order",
                a.out_of_order
            ));
        }
        (!parts.is_empty())
            .then(|| format!("across connections to a server: {}", parts.join(" · ")))
    });
    RateLimitLines {
        limited: first,
        same_connection: (!same.is_empty())
            .then(|| format!("on the same connection: {}", same.join(" · "))),
        across,
    }
}

/// A capture's rate limiting in lines for people ([`rate_limit_lines`]).
pub struct RateLimitLines {
    /// The 429s, the Retry-After values and the connections closed after a 429.
    pub limited: String,
    /// How clients answered on the same connection.
    pub same_connection: Option<String>,
    /// How they answered across the connections to each server.
    pub across: Option<String>,
}

/// TCP and full TLS handshakes per request counting every connection,
/// those that carried no request too (`connections_unused`: a client that
/// dials more than it uses, as Go's pool or OkHttp's racing threads),
/// where requests were carried (the TLS one `None` without TLS);
/// `handshakes_per_request` leaves them out.
pub(crate) fn per_request_all(s: &crate::record::Summary) -> Option<(f64, Option<f64>)> {
    (s.requests > 0).then(|| {
        let requests = s.requests as f64;
        let tls = (s.tls_connections > 0).then(|| s.tls_handshakes_full as f64 / requests);
        (s.tcp_handshakes as f64 / requests, tls)
    })
}

/// Requests per connection over those that carried any, where some
/// carried none (the verdict's figure; `requests_per_connection.mean` is
/// over them all).
pub(crate) fn per_connection_used(s: &crate::record::Summary) -> Option<f64> {
    let busy = s.connections.saturating_sub(s.connections_unused);
    (s.connections_unused > 0 && busy > 0).then(|| s.requests as f64 / busy as f64)
}

/// The plural ending of a noun counted `n` times.
pub(crate) fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn in_window_text(n: u64) -> String {
    format!("{n} request{} sent while a Retry-After ran", plural(n))
}

/// `next request median 1.0s after a 429 (min …, max …, n=2)`, with how
/// many of them went on another connection when `elsewhere` is given.
fn wait_text(w: &crate::record::Distribution, elsewhere: Option<u64>) -> Option<String> {
    let (Some(median), Some(min), Some(max)) = (w.median, w.min, w.max) else {
        return None;
    };
    let other = match elsewhere {
        Some(n) => format!(", {n} on another connection"),
        None => String::new(),
    };
    Some(format!(
        "next request median {} after a 429 (min {}, max {}, n={}{other})",
        human_duration(median),
        human_duration(min),
        human_duration(max),
        w.count
    ))
}

/// Output formats of `analyze`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A summary and a per-connection table, for people.
    Table,
    /// One JSON document: `{"summary": …, "connections": […]}`.
    Json,
    /// One JSON object per connection as it finishes, then `{"summary": …}`.
    Jsonl,
    /// One CSV row per connection, with a header line.
    Csv,
}

/// Options shared by the reports.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Table rows to print (0: all). JSON and CSV always have every row.
    pub limit: usize,
    /// Wrap the table to the terminal's width (stdout is a terminal).
    pub fit_terminal: bool,
    /// The width to wrap it to instead of the terminal's.
    pub width: Option<u16>,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            limit: 50,
            fit_terminal: false,
            width: None,
        }
    }
}

/// How a TLS handshake went, in one word: `full`, `resumed`, `failed`,
/// `incomplete`, `midstream` or `not TLS`.
pub fn handshake_kind(t: &crate::record::TlsInfo) -> &'static str {
    use crate::record::TlsOutcome;
    match t.outcome {
        TlsOutcome::Complete if t.resumed => "resumed",
        TlsOutcome::Complete => "full",
        TlsOutcome::Failed => "failed",
        TlsOutcome::Incomplete => "incomplete",
        TlsOutcome::Midstream => "midstream",
        TlsOutcome::NotTls => "not TLS",
    }
}

/// A duration in seconds for people: `83µs`, `1.25ms`, `3.40s`, `2m05s`.
pub fn human_duration(secs: f64) -> String {
    let abs = secs.abs();
    let sign = if secs < 0.0 { "-" } else { "" };
    if abs < 1e-3 {
        format!("{sign}{:.0}µs", abs * 1e6)
    } else if abs < 1.0 {
        format!("{sign}{:.2}ms", abs * 1e3)
    } else if abs < 60.0 {
        format!("{sign}{abs:.2}s")
    } else {
        let total = abs.round() as u64;
        let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
        if h > 0 {
            format!("{sign}{h}h{m:02}m{s:02}s")
        } else {
            format!("{sign}{m}m{s:02}s")
        }
    }
}

/// A width of time as `--interval` takes it: in the largest unit it is a
/// whole number of (`250ms`, `15s`, `5m`, `2h`, `7d`), else as
/// [`human_duration`].
pub fn width_text(secs: f64) -> String {
    let ns = (secs * 1e9).round();
    const UNITS: [(f64, &str); 7] = [
        (86_400e9, "d"),
        (3_600e9, "h"),
        (60e9, "m"),
        (1e9, "s"),
        (1e6, "ms"),
        (1e3, "µs"),
        (1.0, "ns"),
    ];
    for (unit, name) in UNITS {
        if ns >= unit && ns % unit == 0.0 {
            return format!("{}{name}", ns / unit);
        }
    }
    human_duration(secs)
}

pub use crate::record::endpoint_in;

/// The server's `address:port`, and the overlay network when there is one
/// (the same addresses may then stand for several connections at once).
pub fn server_text(rec: &ConnectionRecord) -> String {
    endpoint_in(&rec.server, rec.overlay)
}

/// A byte count for people: `512 B`, `12.3 kB`, `4.5 MB` (SI units, as on the wire).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if n < 10_000 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = "kB";
    for u in UNITS.iter().skip(1) {
        if value < 1000.0 {
            break;
        }
        value /= 1000.0;
        unit = u;
    }
    format!("{value:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_for_people() {
        assert_eq!(human_duration(0.000083), "83µs");
        assert_eq!(human_duration(0.00125), "1.25ms");
        assert_eq!(human_duration(3.4), "3.40s");
        assert_eq!(human_duration(125.0), "2m05s");
        assert_eq!(human_duration(3725.0), "1h02m05s");
        assert_eq!(human_duration(-0.002), "-2.00ms");
    }

    #[test]
    fn bytes_for_people() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(12_345), "12.3 kB");
        assert_eq!(human_bytes(4_500_000), "4.5 MB");
    }
}
