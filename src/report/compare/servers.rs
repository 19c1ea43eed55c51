//! `compare`'s servers: each capture's `summary.servers` matched by server
//! and put side by side — connections, requests and TCP handshakes per
//! request — so that a client that pools its connections to one backend
//! and not to another shows where. Shown when a capture's connections went
//! to more than one server; JSON has each capture's whole list already.
//!
//! Does not compute anything: it matches and formats `ServerSummary`s.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::{md, side_header, CompareOpts, Field, Grid, Labeled};
use crate::record::ServerSummary;
use crate::report::html::esc;
use crate::report::{plural, sanitize};

/// Servers shown, most connections first.
const SHOWN: usize = 10;

/// What the cells say.
const WHAT: &str =
    "connections / requests · TCP handshakes per request (· opened while another sat idle)";

/// Which servers are the same across captures: the name and port where
/// there is a name — the SNI, or in cleartext the host (the address may
/// differ from one run to the next) — else the address and port; and the
/// overlay.
fn key(s: &ServerSummary) -> String {
    let port = s.server.rsplit(':').next().unwrap_or_default();
    let overlay = s.overlay.map(|o| o.label()).unwrap_or_default();
    match s.server_name() {
        Some(name) => format!("{name}:{port} {overlay}"),
        None => format!("{} {overlay}", s.server),
    }
}

/// A server and its figures in each capture (`None`: no connection to it).
struct Row<'a> {
    name: String,
    cells: Vec<Option<&'a ServerSummary>>,
}

/// The servers of `docs` matched, most connections (in any capture) first,
/// then in the order the captures list them; and how many there are past
/// the [`SHOWN`]. Empty when no capture has more than one server.
fn rows<'a>(docs: &[&'a Labeled]) -> (Vec<Row<'a>>, usize) {
    if docs.iter().all(|d| d.summary.servers.len() < 2) {
        return (Vec::new(), 0);
    }
    // Each key's row: up to 4,096 servers a capture, 26 captures.
    let mut keys: HashMap<String, usize> = HashMap::new();
    let mut rows: Vec<Row> = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        for s in &d.summary.servers {
            let at = *keys.entry(key(s)).or_insert_with(|| {
                rows.push(Row {
                    name: s.name(),
                    cells: vec![None; docs.len()],
                });
                rows.len() - 1
            });
            if let Some(cell) = rows.get_mut(at).and_then(|r| r.cells.get_mut(i)) {
                cell.get_or_insert(s);
            }
        }
    }
    let most = |r: &Row| r.cells.iter().flatten().map(|s| s.connections).max();
    // Stable: equal rows stay in the order the captures list them.
    rows.sort_by_key(|r| std::cmp::Reverse(most(r)));
    let more = rows.len().saturating_sub(SHOWN);
    (rows, more)
}

/// The verdict's clause on servers: of the servers both captures sent two
/// requests or more, the one whose TCP handshakes per request differ most
/// (by half or more), "B vs A": `by server, 127.0.0.1:18443 (b.test): 1.00
/// vs 0.33 TCP handshakes per request`. What the whole hides when a client
/// reuses connections to one backend and not to another.
pub(crate) fn verdict_clause(a: &Labeled, b: &Labeled) -> Option<String> {
    let (rows, _) = rows(&[a, b]);
    let tcp = |s: Option<&ServerSummary>| {
        s.filter(|s| s.requests > 1)
            .and_then(|s| s.handshakes_per_request.tcp)
            .filter(|&r| r > 0.0)
    };
    let apart = |r: &Row| {
        let (x, y) = (tcp(*r.cells.first()?)?, tcp(*r.cells.get(1)?)?);
        Some((x.max(y) / x.min(y), x, y))
    };
    let (row, (_, x, y)) = rows
        .iter()
        .filter_map(|r| Some((r, apart(r)?)))
        .filter(|(_, (by, ..))| *by >= 1.5)
        .max_by(|(_, (p, ..)), (_, (q, ..))| p.total_cmp(q))?;
    Some(format!(
        "by server, {}: {y:.2} vs {x:.2} TCP handshakes per request",
        row.name
    ))
}

/// A capture's cell: `5 / 5 · 1.00`, with ` · 4 missed` where connections
/// were opened while another to the server sat idle and ` · 9 beside h2`
/// where beside an HTTP/2 connection to it, or `-`.
fn cell(s: Option<&ServerSummary>) -> String {
    match s {
        Some(s) => {
            let tcp = s
                .handshakes_per_request
                .tcp
                .map_or("-".to_owned(), |r| format!("{r:.2}"));
            let missed = match s.opened_while_idle {
                0 => String::new(),
                n => format!(" · {n} missed"),
            };
            let beside = match s.beside_http2 {
                0 => String::new(),
                n => format!(" · {n} beside h2"),
            };
            format!("{} / {} · {tcp}{missed}{beside}", s.connections, s.requests)
        }
        None => "-".to_owned(),
    }
}

/// The note under the table when more servers were left out.
fn more_text(more: usize) -> Option<String> {
    (more > 0).then(|| {
        format!(
            "… {more} more server{} (each capture's JSON lists all: summary.servers)",
            plural(more as u64)
        )
    })
}

/// The servers' table: a row a server (the first [`SHOWN`]), a column a
/// capture; and the note on those left out.
fn grid(docs: &[&Labeled], rows: &[Row]) -> Grid {
    let mut head = vec!["server (SNI or host)".to_owned()];
    for (i, d) in docs.iter().enumerate() {
        head.push(side_header(
            &super::many::letter(i).to_string(),
            &sanitize(&d.label),
        ));
    }
    let mut grid = Grid::new(head);
    for row in rows.iter().take(SHOWN) {
        let mut cells = vec![Field::text(sanitize(&row.name))];
        cells.extend(row.cells.iter().map(|s| Field::number(cell(*s))));
        grid.rows.push(cells);
    }
    grid
}

/// Writes the servers' table after `compare`'s, when there is one.
pub(crate) fn write(docs: &[&Labeled], out: &mut dyn Write, opts: &CompareOpts) -> io::Result<()> {
    let (rows, more) = rows(docs);
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "servers       {WHAT}")?;
    writeln!(out, "{}", grid(docs, &rows).table(opts))?;
    if let Some(text) = more_text(more) {
        writeln!(out, "{text}")?;
    }
    Ok(())
}

/// The same in Markdown, under a line that says what the cells say.
pub(crate) fn write_markdown(docs: &[&Labeled], out: &mut dyn Write) -> io::Result<()> {
    let (rows, more) = rows(docs);
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "**Servers**: {}", md(WHAT))?;
    writeln!(out)?;
    grid(docs, &rows).markdown(out)?;
    if let Some(text) = more_text(more) {
        writeln!(out)?;
        writeln!(out, "{}", md(&text))?;
    }
    Ok(())
}

/// The same table in the HTML report's comparison section.
pub(crate) fn write_html(h: &mut String, docs: &[&Labeled]) {
    let (rows, more) = rows(docs);
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h3>Servers</h3>\n<p class=\"note\">{}</p>\n<div class=\"box cmp\"><table>\n<thead><tr><th>server (SNI or host)</th>",
        esc(WHAT)
    );
    for i in 0..docs.len() {
        let _ = write!(h, "<th>{}</th>", super::many::letter(i));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for row in rows.iter().take(SHOWN) {
        let _ = write!(h, "<tr><td>{}</td>", esc(&row.name));
        for s in &row.cells {
            let _ = write!(h, "<td class=\"n\">{}</td>", esc(&cell(*s)));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
    if let Some(text) = more_text(more) {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&text));
    }
}
