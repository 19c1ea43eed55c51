//! `compare`'s tables as cells before they are drawn: the metrics, a
//! column a capture (and B/A with two), and the servers. One grid is drawn
//! for the terminal (comfy-table, figures right-aligned, coloured by
//! whether the capture did better than A) and for Markdown (`-T markdown`:
//! a GitHub table, figures right-aligned, its text escaped), so that what
//! the two show cannot drift apart.
//!
//! Does not choose the rows or word the cells (`compare`, `many` and
//! `servers` do); the HTML report lays out its own tables.

use std::io::{self, Write};

use comfy_table::{presets, Attribute, Cell, CellAlignment, Color, ContentArrangement, Table};

use super::CompareOpts;
use crate::report::sanitize;

/// A cell: its text, whether it is a figure (aligned to the right), and
/// whether it shows a capture doing better (`Some(true)`) or worse than
/// A, to colour on a terminal.
#[derive(Clone, Debug)]
pub(crate) struct Field {
    pub text: String,
    pub number: bool,
    pub better: Option<bool>,
}

impl Field {
    /// A label: text, on the left.
    pub fn text(text: impl Into<String>) -> Field {
        Field {
            text: text.into(),
            number: false,
            better: None,
        }
    }

    /// A figure, on the right.
    pub fn number(text: String) -> Field {
        Field {
            text,
            number: true,
            better: None,
        }
    }

    /// A figure judged against A's.
    pub fn judged(text: String, better: Option<bool>) -> Field {
        Field {
            better,
            ..Field::number(text)
        }
    }
}

/// A table: its header and its rows (each as wide as the header).
#[derive(Clone, Debug, Default)]
pub(crate) struct Grid {
    pub head: Vec<String>,
    pub rows: Vec<Vec<Field>>,
}

impl Grid {
    pub fn new(head: Vec<String>) -> Grid {
        Grid {
            head,
            rows: Vec::new(),
        }
    }

    /// For the terminal: box-drawn, the header in bold and the judged
    /// figures in green or red when `opts.color`; never wrapped.
    pub fn table(&self, opts: &CompareOpts) -> Table {
        let mut table = Table::new();
        table.load_style(presets::UTF8_FULL_CONDENSED);
        table.set_content_arrangement(ContentArrangement::Disabled);
        if opts.color {
            table.enforce_styling();
        }
        table.set_header(self.head.iter().map(|s| {
            let c = Cell::new(s);
            if opts.color {
                c.add_attribute(Attribute::Bold)
            } else {
                c
            }
        }));
        for row in &self.rows {
            table.add_row(row.iter().map(|f| {
                let cell = Cell::new(&f.text);
                let cell = if f.number {
                    cell.set_alignment(CellAlignment::Right)
                } else {
                    cell
                };
                match (opts.color, f.better) {
                    (true, Some(true)) => cell.fg(Color::Green),
                    (true, Some(false)) => cell.fg(Color::Red),
                    _ => cell,
                }
            }));
        }
        table
    }

    /// As a GitHub-flavoured Markdown table: a column of figures aligned
    /// to the right (`--:`), every cell's text escaped.
    pub fn markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        let line = |cells: Vec<String>| format!("| {} |", cells.join(" | "));
        writeln!(out, "{}", line(self.head.iter().map(|h| md(h)).collect()))?;
        let right = |i: usize| {
            let column = self.rows.iter().filter_map(|r| r.get(i));
            let mut column = column.peekable();
            column.peek().is_some() && column.all(|f| f.number)
        };
        let rule = (0..self.head.len()).map(|i| if right(i) { "--:" } else { ":--" }.to_owned());
        writeln!(out, "{}", line(rule.collect()))?;
        for row in &self.rows {
            writeln!(out, "{}", line(row.iter().map(|f| md(&f.text)).collect()))?;
        }
        Ok(())
    }
}

/// Text for Markdown: the capture's bytes sanitised (a line break too, so
/// a cell stays on its line), and the characters
/// that would make a table cell, a link, code, emphasis or HTML escaped
/// with a backslash (CommonMark lets any ASCII punctuation be).
pub(crate) fn md(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in sanitize(text).chars() {
        if matches!(
            c,
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '~' | '!' | '&'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{md, Field, Grid};

    #[test]
    fn markdown_escapes_cells_and_aligns_figures() {
        let mut grid = Grid::new(vec!["metric".into(), "A: a|b.pcap".into()]);
        grid.rows.push(vec![
            Field::text("connections *opened*"),
            Field::number("19".into()),
        ]);
        grid.rows.push(vec![
            Field::text("<b>"),
            Field::judged("1.5".into(), Some(true)),
        ]);
        let mut out = Vec::new();
        grid.markdown(&mut out).expect("written");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "| metric | A: a\\|b.pcap |\n\
             | :-- | --: |\n\
             | connections \\*opened\\* | 19 |\n\
             | \\<b\\> | 1.5 |\n"
        );
    }

    #[test]
    fn markdown_text_is_one_line_without_control_characters() {
        assert_eq!(md("a\nb"), "a?b");
        assert_eq!(md("x\u{1b}[2J"), "x?\\[2J");
        assert_eq!(md("`rm`"), "\\`rm\\`");
    }
}
