//! The HTML report's bar charts: the frame every bar chart is drawn in
//! (the series over time's too) and the histograms of connect and TLS
//! handshake times.
//!
//! Does not compute statistics: it draws the values it is given.

use std::fmt::Write as _;

use super::super::human_duration;
use super::{esc, rect, text};

/// Opens a bar chart's SVG `[w, ht]` wide and high, its plot `left` of
/// the left edge and `bottom` above the bottom, with its base line and the
/// count at the top and at 0 on its axis; returns the plot's width and
/// height.
pub(super) fn frame(
    h: &mut String,
    caption: &str,
    [w, ht, left, bottom]: [f64; 4],
    top: f64,
) -> (f64, f64) {
    let _ = writeln!(
        h,
        "<svg viewBox=\"0 0 {w} {ht}\" role=\"img\" aria-label=\"{}\">",
        esc(caption)
    );
    let _ = write!(
        h,
        "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1:.1}\" y2=\"{0:.1}\" stroke=\"#8c959f\"/>",
        ht - bottom,
        w - 12.0
    );
    text(h, left - 6.0, 18.0, "end", "muted", &format!("{top}"));
    text(h, left - 6.0, ht - bottom, "end", "muted", "0");
    (w - left - 12.0, ht - bottom - 14.0)
}

pub(super) fn histogram(h: &mut String, caption: &str, values: &[f64], fill: &str) {
    let _ = writeln!(
        h,
        "<figure><figcaption>{} · n={}</figcaption>",
        esc(caption),
        values.len()
    );
    let (Some(lo), Some(hi)) = (
        values.iter().copied().min_by(f64::total_cmp),
        values.iter().copied().max_by(f64::total_cmp),
    ) else {
        h.push_str("<p class=\"note\">None in this capture.</p></figure>\n");
        return;
    };
    // Logarithmic bins when the values span more than two decades.
    let log = lo > 0.0 && hi / lo > 100.0;
    let map = |v: f64| if log { v.ln() } else { v };
    let (mlo, mhi) = (map(lo), map(hi));
    let bins = if mhi > mlo {
        values.len().clamp(5, 24)
    } else {
        1
    };
    let mut counts = vec![0u64; bins];
    for &v in values {
        let pos = (map(v) - mlo) / (mhi - mlo).max(f64::MIN_POSITIVE) * bins as f64;
        if let Some(c) = counts.get_mut((pos.max(0.0) as usize).min(bins - 1)) {
            *c += 1;
        }
    }
    let unmap = |m: f64| if log { m.exp() } else { m };
    let edge = |i: usize| unmap(mlo + (mhi - mlo) * i as f64 / bins as f64);
    let (w, ht, left, bottom) = (600.0, 190.0, 40.0, 30.0);
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let (plot_w, plot_h) = frame(h, caption, [w, ht, left, bottom], top);
    // One bin (all values equal) is a narrow bar in the middle.
    let bw = if bins == 1 {
        60.0
    } else {
        plot_w / bins as f64
    };
    let x0 = if bins == 1 {
        left + (plot_w - bw) / 2.0
    } else {
        left
    };
    for (i, &c) in counts.iter().enumerate() {
        let bh = c as f64 / top * plot_h;
        let range = if bins == 1 {
            format!("all {}", human_duration(lo))
        } else {
            let (from, to) = (human_duration(edge(i)), human_duration(edge(i + 1)));
            format!("{from} – {to}")
        };
        let plural = crate::report::plural(c);
        let bx = x0 + bw * i as f64 + 1.0;
        let title = format!("{c} connection{plural}: {range}");
        let geometry = [bx, ht - bottom - bh, (bw - 2.0).max(1.0), bh];
        rect(h, geometry, fill, " rx=\"1\"", &title);
    }
    let half = bins / 2;
    let ticks = if bins == 1 {
        vec![(0.5, "middle", lo)]
    } else {
        vec![
            (0.0, "start", lo),
            (half as f64 / bins as f64, "middle", edge(half)),
            (1.0, "end", hi),
        ]
    };
    let y = ht - bottom + 15.0;
    for (f, anchor, v) in ticks {
        text(h, left + plot_w * f, y, anchor, "muted", &human_duration(v));
    }
    if log {
        text(h, w - 12.0, ht - 2.0, "end", "muted", "log scale");
    }
    h.push_str("</svg></figure>\n");
}
