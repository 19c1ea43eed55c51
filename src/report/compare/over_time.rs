//! `compare`'s over time: each capture's `summary.over_time` folded to one
//! width, its marks lined up from each capture's own first packet and
//! scaled alike, a line per capture under each count — so that a client
//! that keeps opening connections under load, or whose 429s come early,
//! shows against the other.
//!
//! Does not compute anything beyond choosing the common width and folding
//! (the table's fold).

use std::io::{self, Write};

use super::many::letter;
use super::Labeled;
use crate::record::OverTime;
use crate::report::html::{figure, open_charts, CHARTS};
use crate::report::table::{fold, fold_start, marks, over_time_shown, LINES};
use crate::report::width_text;

/// Marks on a line at most.
const WIDTH: u64 = 60;

/// A width in whole nanoseconds.
fn ns(secs: f64) -> u64 {
    (secs * 1e9).round().max(1.0) as u64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The common width, in nanoseconds: the narrowest multiple of every
/// series' width — times 1, 2, 5, 10, 20, … — that draws the longest
/// capture in at most [`WIDTH`] marks.
fn common_width(series: &[&OverTime]) -> u64 {
    let lcm = series.iter().fold(1u64, |l, o| {
        let w = ns(o.interval);
        (l / gcd(l, w)).saturating_mul(w)
    });
    let longest = series
        .iter()
        .map(|o| ns(o.interval).saturating_mul(o.intervals.len() as u64))
        .max()
        .unwrap_or(0);
    // 1, 2, 5, 10, 20, 50, … as far as u64 goes.
    let scales = (0..20u32).flat_map(|k| [1u64, 2, 5].map(|m| m.saturating_mul(10u64.pow(k))));
    for scale in scales {
        let w = lcm.saturating_mul(scale);
        if longest.div_ceil(w) <= WIDTH || w == u64::MAX {
            return w;
        }
    }
    lcm
}

/// The captures' series and their common width in nanoseconds, when a
/// capture's table would draw its own.
fn series<'a>(docs: &[&'a Labeled]) -> Option<(Vec<&'a OverTime>, u64)> {
    let series: Vec<&OverTime> = docs.iter().map(|d| &d.summary.over_time).collect();
    if !series.iter().any(|o| over_time_shown(o)) {
        return None;
    }
    let width = common_width(&series);
    Some((series, width))
}

/// Writes the block when a capture's table would draw its own.
pub fn write(docs: &[&Labeled], out: &mut dyn Write) -> io::Result<()> {
    let Some((series, width)) = series(docs) else {
        return Ok(());
    };
    writeln!(out)?;
    writeln!(
        out,
        "over time     a mark per {} from each capture's first packet; at the right, the most in one",
        width_text(width as f64 / 1e9)
    )?;
    for (label, take, level) in LINES {
        let lines: Vec<Vec<u64>> = series
            .iter()
            .map(|o| fold(o, take, level, width / ns(o.interval)))
            .collect();
        let top = lines.iter().flatten().copied().max().unwrap_or(0);
        if top == 0 {
            continue;
        }
        let marks_wide = lines.iter().map(Vec::len).max().unwrap_or(0);
        for (i, values) in lines.iter().enumerate() {
            let name = if i == 0 { label } else { "" };
            let most = values.iter().copied().max().unwrap_or(0);
            let line = marks(values, top);
            writeln!(out, "  {name:<12}{} {line:<marks_wide$} {most}", letter(i))?;
        }
    }
    Ok(())
}

/// The same in the HTML report's comparison section: a chart per count and
/// capture, those of one count side by side on one scale.
pub(crate) fn write_html(h: &mut String, docs: &[&Labeled]) {
    let Some((series, width)) = series(docs) else {
        return;
    };
    let secs = width as f64 / 1e9;
    open_charts(
        h,
        &format!(
            "A bar per {}, each capture from its first packet; the charts of one count share their scale.",
            width_text(secs)
        ),
    );
    for chart in CHARTS {
        let mut charts: Vec<(Vec<u64>, f64)> = series
            .iter()
            .map(|o| {
                let n = width / ns(o.interval);
                (fold(o, chart.2, chart.3, n), fold_start(o, n))
            })
            .collect();
        let top = charts.iter().flat_map(|c| &c.0).copied().max().unwrap_or(0);
        if top == 0 {
            continue;
        }
        // One time axis too: each as long as the longest.
        let longest = charts.iter().map(|c| c.0.len()).max().unwrap_or(0);
        for (i, (values, start)) in charts.iter_mut().enumerate() {
            values.resize(longest, 0);
            figure(h, &chart, values, top, [*start, secs], Some(letter(i)));
        }
    }
    h.push_str("</div>\n");
}
