//! Comparing more than two captures (`compare A B C …`): every metric of
//! each capture in a column of its own (comfy-table), with a verdict
//! sentence for each capture against the first; or the same as one JSON
//! document; or as the comparison section of the HTML report. Two
//! captures are `compare`'s own (a B/A ratio column, and its JSON shape).
//!
//! Does not analyze captures, define the metrics or word the verdicts
//! (`compare`'s `values` and `verdict_clauses`).

use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Map, Value};

use super::{
    format_value, html_class, json_number, markdown_head, markdown_tail, metrics, sentence,
    side_header, values, verdict_clauses, write_selection, CompareOpts, Field, Grid, Labeled,
    Metric, FOOTNOTE,
};
use crate::report::html::esc;
use crate::report::sanitize;

/// Captures compared at most: one a letter.
pub const MAX_CAPTURES: usize = 26;

/// The letter that names the `i`th capture: A for the first (the
/// baseline), then B, C, … (`?` past Z).
pub fn letter(i: usize) -> char {
    u8::try_from(i)
        .ok()
        .filter(|&i| usize::from(i) < MAX_CAPTURES)
        .map_or('?', |i| char::from(b'A' + i))
}

/// Each capture after the first against it: the metrics of the pair (A's
/// as `a`, its own as `b`), its verdict and the verdict's clauses.
struct Against {
    ms: Vec<Metric>,
    verdict: String,
    clauses: Vec<String>,
    letter: char,
}

fn against(docs: &[Labeled]) -> Vec<Against> {
    let Some(a) = docs.first() else {
        return Vec::new();
    };
    let pair = |(i, d): (usize, &Labeled)| {
        let ms = metrics(a, d);
        let clauses = verdict_clauses(a, d, &ms, ('A', letter(i)));
        Against {
            verdict: sentence(&clauses),
            ms,
            clauses,
            letter: letter(i),
        }
    };
    docs.iter().enumerate().skip(1).map(pair).collect()
}

/// The metrics table: a column a capture, each after the first judged
/// against it; a metric no capture has is left out (JSON has it, as
/// null).
fn grid(docs: &[Labeled], against: &[Against]) -> Grid {
    let mut head = vec!["metric".to_string()];
    for (i, d) in docs.iter().enumerate() {
        head.push(side_header(&letter(i).to_string(), &sanitize(&d.label)));
    }
    let mut grid = Grid::new(head);
    let Some(first) = docs.first() else {
        return grid;
    };
    for (row, (_, label, unit, _, value)) in values(first.summary).into_iter().enumerate() {
        let others: Vec<&Metric> = against.iter().filter_map(|x| x.ms.get(row)).collect();
        if value.is_none() && others.iter().all(|m| !m.shown()) {
            continue;
        }
        let mut cells = vec![Field::text(label), Field::number(format_value(value, unit))];
        for m in others {
            cells.push(Field::judged(format_value(m.b, m.unit), m.b_better()));
        }
        grid.rows.push(cells);
    }
    grid
}

/// Writes the captures' labels, a verdict for each against the first, and
/// the table of every metric, a column a capture. With colour, a value
/// better than A's is green and a worse one red.
pub fn write(docs: &[Labeled], out: &mut dyn Write, opts: &CompareOpts) -> io::Result<()> {
    for (i, d) in docs.iter().enumerate() {
        writeln!(out, "{:<14}{}", letter(i), sanitize(&d.label))?;
    }
    write_selection(&docs.iter().collect::<Vec<_>>(), out)?;
    let against = against(docs);
    for x in &against {
        writeln!(out, "verdict       {}", sanitize(&x.verdict))?;
    }
    writeln!(out)?;
    writeln!(out, "{}", grid(docs, &against).table(opts))?;
    writeln!(out, "{FOOTNOTE}")?;
    let docs: Vec<&Labeled> = docs.iter().collect();
    super::servers::write(&docs, out, opts)?;
    super::over_time::write(&docs, out)
}

/// The same in Markdown (`-T markdown`): the captures, a verdict for each
/// against the first, the tables, the counts over time in a code block.
pub fn write_markdown(docs: &[Labeled], out: &mut dyn Write) -> io::Result<()> {
    let against = against(docs);
    let verdicts: Vec<(Vec<String>, char)> = against
        .iter()
        .map(|x| (x.clauses.clone(), x.letter))
        .collect();
    let refs: Vec<&Labeled> = docs.iter().collect();
    markdown_head(&refs, &verdicts, out)?;
    grid(docs, &against).markdown(out)?;
    markdown_tail(&refs, out)
}

#[derive(Serialize)]
struct Capture<'a> {
    label: &'a str,
    summary: &'a crate::record::Summary,
}

#[derive(Serialize)]
struct Document<'a> {
    captures: Vec<Capture<'a>>,
    metrics: Map<String, Value>,
    ratios: Map<String, Value>,
    verdicts: Vec<String>,
}

/// Writes one pretty-printed JSON document and a newline: `{"captures":
/// [{"label", "summary"}, …], "metrics": {key: [value of each capture]},
/// "ratios": {key: [each capture after the first / the first, or null]},
/// "verdicts": ["B …", "C …"]}`, with `compare`'s metric keys.
pub fn write_json(docs: &[Labeled], out: &mut dyn Write) -> io::Result<()> {
    let mut metrics_map = Map::new();
    let mut ratios = Map::new();
    if let Some(first) = docs.first() {
        for (key, _, _, _, value) in values(first.summary) {
            metrics_map.insert(key.to_string(), Value::Array(vec![json_number(value)]));
            ratios.insert(key.to_string(), Value::Array(Vec::new()));
        }
    }
    let against = against(docs);
    for x in &against {
        for m in &x.ms {
            if let Some(Value::Array(values)) = metrics_map.get_mut(m.key) {
                values.push(json_number(m.b));
            }
            if let Some(Value::Array(r)) = ratios.get_mut(m.key) {
                r.push(json_number(m.ratio()));
            }
        }
    }
    let doc = Document {
        captures: docs
            .iter()
            .map(|d| Capture {
                label: &d.label,
                summary: d.summary,
            })
            .collect(),
        metrics: metrics_map,
        ratios,
        verdicts: against.into_iter().map(|x| x.verdict).collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// The comparison section of the HTML report: the captures by their
/// letters, the verdicts, and every metric in a table, a column a capture
/// (a value better than the first's marked good, a worse one bad).
pub(crate) fn write_html(h: &mut String, docs: &[Labeled]) {
    h.push_str("<section class=\"compare\">\n<h2>Comparison");
    for (i, d) in docs.iter().enumerate() {
        let _ = write!(
            h,
            "<span class=\"tag\">{}</span>{}",
            letter(i),
            esc(&d.label)
        );
    }
    h.push_str("</h2>\n");
    let against = against(docs);
    for x in &against {
        let _ = writeln!(h, "<p class=\"verdict\">{}</p>", esc(&x.verdict));
    }
    let Some(first) = docs.first() else {
        h.push_str("</section>\n");
        return;
    };
    let rows = values(first.summary);
    let _ = write!(
        h,
        "<details open><summary>All {} metrics</summary>\n<div class=\"box cmp\"><table>\n\
         <thead><tr><th>metric</th>",
        rows.len()
    );
    for i in 0..docs.len() {
        let _ = write!(h, "<th>{}</th>", letter(i));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for (row, (_, label, unit, _, value)) in rows.into_iter().enumerate() {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td>",
            esc(label),
            esc(&format_value(value, unit))
        );
        for m in against.iter().filter_map(|x| x.ms.get(row)) {
            let _ = write!(
                h,
                "<td class=\"n {}\">{}</td>",
                html_class(m),
                esc(&format_value(m.b, m.unit))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n</details>\n");
    let docs: Vec<&Labeled> = docs.iter().collect();
    super::servers::write_html(h, &docs);
    super::over_time::write_html(h, &docs);
    h.push_str("</section>\n");
}
