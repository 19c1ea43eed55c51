//! The table report's `over time` block: `summary.over_time` drawn as one
//! line of marks per count (a mark an interval, folded to fit a terminal
//! line), and with `--interval` its intervals listed as rows.
//!
//! Does not compute anything beyond folding intervals for the drawing: it
//! formats `OverTime`.

use std::io::{self, Write};

use super::ratio;
use crate::record::{Interval, OverTime};
use crate::report::{human_duration, width_text};

/// Marks on a line at most.
pub const WIDTH: usize = 60;

/// Levels of a mark: none, then an eighth to all of the line's highest.
const MARKS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The counts drawn, in order: their label (at most 11 characters: the
/// marks start after it and a space), and how to take them from an
/// interval. `open` is a level, not a count: folded intervals take its most.
pub(crate) type Take = fn(&Interval) -> u64;
pub(crate) const LINES: [(&str, Take, bool); 13] = [
    ("connections", |i| i.connections, false),
    ("requests", |i| i.requests, false),
    ("TLS full", |i| i.tls_full, false),
    ("TLS resumed", |i| i.tls_resumed, false),
    ("429s", |i| i.responses_429, false),
    ("missed", |i| i.opened_while_idle, false),
    ("beside h2", |i| i.beside_http2, false),
    ("not resumed", |i| i.tls_not_resumed, false),
    ("QUIC full", |i| i.quic_full, false),
    ("QUIC resum.", |i| i.quic_resumed, false),
    ("HTTP/3 reqs", |i| i.http3_requests, false),
    ("HTTP/3 429s", |i| i.http3_responses_429, false),
    ("open", |i| i.open, true),
];

/// A line of `values`, each a mark its height against `top`.
pub(crate) fn marks(values: &[u64], top: u64) -> String {
    values.iter().map(|&v| mark(v, top)).collect()
}

/// One mark for `v` of a line whose highest is `top`.
fn mark(v: u64, top: u64) -> char {
    if v == 0 || top == 0 {
        return ' ';
    }
    let level = (v as f64 / top as f64 * 8.0).ceil().clamp(1.0, 8.0) as usize;
    MARKS.get(level).copied().unwrap_or('█')
}

/// The values of one line, `n` intervals to a mark (a bar, in the HTML
/// report), counted from interval 0 at the first packet: the marks of two
/// captures folded to one width line up from their first packets.
pub(crate) fn fold(o: &OverTime, take: Take, level: bool, n: u64) -> Vec<u64> {
    let (n, first) = first_group(o, n);
    let mut values: Vec<u64> = Vec::new();
    for i in &o.intervals {
        let at = usize::try_from(number(o, i).div_euclid(n) - first).unwrap_or(0);
        if values.len() <= at {
            values.resize(at + 1, 0);
        }
        if let Some(v) = values.get_mut(at) {
            *v = if level {
                (*v).max(take(i))
            } else {
                *v + take(i)
            };
        }
    }
    values
}

/// An interval's number, from its start (a whole number of widths).
fn number(o: &OverTime, i: &Interval) -> i64 {
    (i.start / o.interval).round() as i64
}

/// Where the first of [`fold`]'s marks of `n` intervals starts, in
/// seconds into the capture.
pub(crate) fn fold_start(o: &OverTime, n: u64) -> f64 {
    let (n, first) = first_group(o, n);
    first.saturating_mul(n) as f64 * o.interval
}

/// `n` intervals to a mark, as a divisor, and the number of the group of
/// `n` the first interval falls in.
fn first_group(o: &OverTime, n: u64) -> (i64, i64) {
    let n = i64::try_from(n.max(1)).unwrap_or(i64::MAX);
    let first = o
        .intervals
        .first()
        .map_or(0, |i| number(o, i).div_euclid(n));
    (n, first)
}

/// Whether the block is written: when connections (TCP or QUIC) or
/// requests began in more than one interval (with `--interval`, whenever
/// there are connections).
pub fn shown(o: &OverTime) -> bool {
    let connections = o
        .intervals
        .iter()
        .any(|i| i.connections + i.quic_connections > 0);
    let busy = o
        .intervals
        .iter()
        .filter(|i| i.connections + i.requests + i.quic_connections + i.http3_requests > 0)
        .count();
    connections && (busy >= 2 || o.interval_chosen != "auto")
}

/// Writes the block, if [`shown`].
pub fn write(o: &OverTime, out: &mut dyn Write) -> io::Result<()> {
    if !shown(o) {
        return Ok(());
    }
    let asked = o.interval_chosen != "auto";
    let folds = o.intervals.len().div_ceil(WIDTH).max(1) as u64;
    let per = width_text(o.interval * folds as f64);
    let end = o.intervals.last().map_or(0.0, |i| i.start + o.interval);
    writeln!(
        out,
        "over time     a mark per {per} from +{:.3}s to +{end:.3}s; at the right, the most in one",
        o.intervals.first().map_or(0.0, |i| i.start),
    )?;
    for (label, take, level) in LINES {
        let values = fold(o, take, level, folds);
        let top = values.iter().copied().max().unwrap_or(0);
        if top == 0 {
            continue;
        }
        let line = marks(&values, top);
        writeln!(out, "  {label:<12}{line:<w$} {top}", w = values.len())?;
    }
    if o.requests_untimed > 0 {
        writeln!(
            out,
            "              ({} requests past the times kept of their connections are in no interval)",
            o.requests_untimed
        )?;
    }
    if asked {
        rows(o, out)?;
    }
    Ok(())
}

/// What began on QUIC in interval `i`: connections, HTTP/3 requests, 429s.
fn quic_began(i: &Interval) -> u64 {
    i.quic_connections + i.http3_requests + i.http3_responses_429
}

/// The intervals as rows, those in which nothing began or ended left out;
/// the TLS columns only when there was TLS, `missed` (connections opened
/// while another sat idle), `beside h2` (beside an HTTP/2 connection),
/// `not resumed` (full TLS handshakes that could have resumed) and the
/// QUIC ones (connections, HTTP/3 requests and 429s) only when there was
/// one.
fn rows(o: &OverTime, out: &mut dyn Write) -> io::Result<()> {
    let shown: Vec<&Interval> = o
        .intervals
        .iter()
        .filter(|i| {
            i.connections + i.tls_full + i.tls_resumed + i.tls_failed + i.requests + i.closed > 0
                || i.responses_429 > 0
                || quic_began(i) > 0
        })
        .collect();
    let tls = shown
        .iter()
        .any(|i| i.tls_full + i.tls_resumed + i.tls_failed > 0);
    let count =
        |take: Take| -> Vec<String> { shown.iter().map(|&i| take(i).to_string()).collect() };
    let mut columns: Vec<(&str, Vec<String>)> = vec![
        (
            "start",
            shown.iter().map(|i| format!("+{:.3}s", i.start)).collect(),
        ),
        ("conns", count(|i| i.connections)),
        ("TCP", count(|i| i.tcp_handshakes)),
    ];
    if tls {
        columns.push(("TLS full", count(|i| i.tls_full)));
        columns.push(("resumed", count(|i| i.tls_resumed)));
    }
    if shown.iter().any(|i| i.opened_while_idle > 0) {
        columns.push(("missed", count(|i| i.opened_while_idle)));
    }
    if shown.iter().any(|i| i.beside_http2 > 0) {
        columns.push(("beside h2", count(|i| i.beside_http2)));
    }
    if shown.iter().any(|i| i.tls_not_resumed > 0) {
        columns.push(("not resumed", count(|i| i.tls_not_resumed)));
    }
    if shown.iter().any(|&i| quic_began(i) > 0) {
        columns.push(("QUIC", count(|i| i.quic_connections)));
        columns.push(("h3 reqs", count(|i| i.http3_requests)));
        columns.push(("h3 429", count(|i| i.http3_responses_429)));
    }
    columns.extend([
        ("reqs", count(|i| i.requests)),
        (
            "TCP/req",
            shown
                .iter()
                .map(|i| {
                    ratio((i.requests > 0).then(|| i.tcp_handshakes as f64 / i.requests as f64))
                })
                .collect(),
        ),
        ("429", count(|i| i.responses_429)),
        ("closed", count(|i| i.closed)),
        ("open", count(|i| i.open)),
        (
            "setup",
            shown
                .iter()
                .map(|i| i.setup_mean.map_or_else(|| "-".to_owned(), human_duration))
                .collect(),
        ),
    ]);
    let widths: Vec<usize> = columns
        .iter()
        .map(|(head, cells)| {
            let widest = cells.iter().map(|c| c.chars().count()).max().unwrap_or(0);
            widest.max(head.len())
        })
        .collect();
    let line = |k: Option<usize>| {
        let cells = columns.iter().zip(&widths).map(|((head, cells), &w)| {
            let cell = k.map_or(*head, |k| cells.get(k).map_or("", String::as_str));
            format!("{cell:>w$}")
        });
        cells.collect::<Vec<String>>().join("  ")
    };
    writeln!(
        out,
        "intervals     {}  (of {}; setup: mean SYN → first request)",
        line(None),
        width_text(o.interval)
    )?;
    for k in 0..shown.len() {
        writeln!(out, "              {}", line(Some(k)))?;
    }
    let left = o.intervals.len() - shown.len();
    if left > 0 {
        writeln!(
            out,
            "              ({left} interval{} in which nothing began or ended left out)",
            crate::report::plural(left as u64)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(counts: &[u64]) -> OverTime {
        OverTime {
            interval: 0.01,
            interval_chosen: "auto",
            requests_untimed: 0,
            intervals: counts
                .iter()
                .enumerate()
                .map(|(k, &c)| Interval {
                    start: k as f64 * 0.01,
                    connections: c,
                    requests: 2 * c,
                    ..Interval::default()
                })
                .collect(),
        }
    }

    fn text(o: &OverTime) -> String {
        let mut out = Vec::new();
        write(o, &mut out).expect("written");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn marks_rise_with_the_counts_and_zero_is_blank() {
        let t = text(&series(&[0, 1, 4, 8]));
        assert!(t.contains("  connections  ▁▄█ 8\n"), "{t}");
        assert!(t.contains("  requests     ▁▄█ 16\n"), "{t}");
        assert!(!t.contains("429s"), "a line of zeros is left out: {t}");
        assert!(!t.contains("intervals "), "rows only with --interval: {t}");
    }

    #[test]
    fn labels_leave_a_space_before_the_marks() {
        for (label, ..) in LINES {
            assert!(label.chars().count() <= 11, "{label}");
        }
    }

    #[test]
    fn a_long_series_is_folded_to_a_line() {
        let o = series(&[1; 150]);
        let t = text(&o);
        assert!(t.contains("a mark per 30ms"), "{t}");
        let line = t
            .lines()
            .find(|l| l.starts_with("  connections"))
            .unwrap_or("");
        assert_eq!(line, format!("  connections {} 3", "█".repeat(50)));
    }

    #[test]
    fn one_busy_interval_draws_nothing_unless_asked() {
        assert_eq!(text(&series(&[0, 5, 0])), "");
        let mut o = series(&[0, 5, 0]);
        o.interval_chosen = "asked";
        let t = text(&o);
        assert!(t.contains("intervals     "), "{t}");
        assert!(
            t.contains("(2 intervals in which nothing began or ended left out)"),
            "{t}"
        );
    }
}
