//! How the connection table is drawn (comfy-table) without holding all its
//! rows: the column widths are decided once, on a stand-in table that holds
//! each column's distinct *shapes* — a cell of printable ASCII with every
//! character but the space as `x`, which comfy-table measures and wraps
//! exactly as the cell itself; any other cell as it is — and the rows are
//! then drawn a chunk at a time with those widths fixed, the chunks' lines
//! joined into one table. The result is byte for byte the table comfy-table
//! draws with every row at once (tests below hold it to that), at the cost
//! of the distinct shapes: a few dozen per column in real captures. A
//! column with more than [`MAX_SHAPES`] keeps only its cells' widths from
//! then on: the widths without wrapping are still exact, and wrapped to a
//! terminal it is laid out as if its words could not be broken at spaces,
//! which may make it a little wider than comfy-table would have.
//!
//! Does not decide what a cell says (`table.rs`) or which rows are drawn
//! (`rows.rs`).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};
use std::io::{self, Write};

use comfy_table::{
    presets, Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width,
};
use unicode_width::UnicodeWidthStr;

use super::{COLUMNS, HEADER, RIGHT};

/// Distinct shapes kept per column before it keeps only widths.
pub const MAX_SHAPES: usize = 4096;
/// Rows drawn at a time.
pub const CHUNK_ROWS: usize = 1024;

/// How the table is fitted.
#[derive(Clone, Copy, Debug)]
pub struct Arrange {
    /// Wrapped to a width (comfy-table's dynamic arrangement) rather than
    /// as wide as its content.
    pub dynamic: bool,
    /// That width; `None`: the terminal's.
    pub width: Option<u16>,
}

/// Each column's distinct shapes (see the module's comment).
pub struct Shapes {
    columns: Vec<Shape>,
    /// One cell's shape at a time.
    scratch: String,
}

enum Shape {
    Exact(HashSet<Box<str>>),
    Widths(BTreeSet<usize>),
}

impl Default for Shapes {
    fn default() -> Shapes {
        Shapes {
            columns: (0..COLUMNS).map(|_| Shape::Exact(HashSet::new())).collect(),
            scratch: String::new(),
        }
    }
}

/// `cell` as comfy-table sees it when it measures and wraps: printable
/// ASCII is one column per character, wrapped at spaces or anywhere in a
/// word, so only where the spaces are matters.
fn shape<'a>(cell: &'a str, scratch: &'a mut String) -> &'a str {
    if !cell.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return cell;
    }
    scratch.clear();
    scratch.extend(cell.bytes().map(|b| if b == b' ' { ' ' } else { 'x' }));
    scratch
}

impl Shapes {
    /// Notes a cell of `column`.
    pub fn note(&mut self, column: usize, cell: &str) {
        let Some(col) = self.columns.get_mut(column) else {
            return;
        };
        match col {
            Shape::Exact(set) => {
                let shape = shape(cell, &mut self.scratch);
                if set.contains(shape) {
                    return;
                }
                if set.len() < MAX_SHAPES {
                    set.insert(shape.into());
                    return;
                }
                let mut widths: BTreeSet<usize> = set.iter().map(|s| s.width()).collect();
                widths.insert(cell.width());
                *col = Shape::Widths(widths);
            }
            Shape::Widths(widths) => {
                widths.insert(cell.width());
            }
        }
    }

    /// Each column's shapes, in order.
    fn texts(&self) -> Vec<Vec<Cow<'_, str>>> {
        self.columns
            .iter()
            .map(|col| {
                let mut texts: Vec<Cow<'_, str>> = match col {
                    Shape::Exact(set) => set.iter().map(|s| Cow::Borrowed(&**s)).collect(),
                    Shape::Widths(widths) => widths.iter().map(|&w| "x".repeat(w).into()).collect(),
                };
                texts.sort_unstable();
                texts
            })
            .collect()
    }
}

/// A table in the report's style, with `arrange`.
fn styled(arrange: Arrange) -> Table {
    let mut table = Table::new();
    table.load_style(presets::UTF8_FULL_CONDENSED);
    table.set_content_arrangement(if arrange.dynamic {
        ContentArrangement::Dynamic
    } else {
        ContentArrangement::Disabled
    });
    if let Some(width) = arrange.width {
        table.set_width(width);
    }
    table
}

/// A chunk's table: the widths are fixed, nothing to arrange.
fn empty_chunk() -> Table {
    styled(Arrange {
        dynamic: false,
        width: None,
    })
}

/// A row of cells, aligned as their columns are.
fn row<S: AsRef<str>>(cells: &[S]) -> Vec<Cell> {
    cells
        .iter()
        .zip(RIGHT)
        .map(|(text, right)| {
            let cell = Cell::new(text.as_ref());
            if right {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        })
        .collect()
}

/// Draws the table's rows a chunk at a time with the widths the whole
/// table would have.
pub struct Drawer {
    /// Each column's width, padding included.
    widths: Vec<u16>,
    chunk: Table,
    rows: usize,
    /// Rows per chunk ([`CHUNK_ROWS`]; tests use fewer).
    chunk_rows: usize,
    /// No chunk written yet (the next one has the header).
    first: bool,
}

impl Drawer {
    /// The widths comfy-table gives a table with these shapes, `arrange`d.
    pub fn new(shapes: &Shapes, arrange: Arrange) -> io::Result<Drawer> {
        let columns = shapes.texts();
        let mut stand_in = styled(arrange);
        stand_in.set_header(HEADER.to_vec());
        let height = columns.iter().map(Vec::len).max().unwrap_or(0);
        for k in 0..height {
            let cells: Vec<&str> = columns
                .iter()
                .map(|texts| texts.get(k).map_or("", |t| &**t))
                .collect();
            stand_in.add_row(cells);
        }
        let top = stand_in.lines().next().unwrap_or_default();
        let widths = border_widths(&top).ok_or_else(|| {
            io::Error::other(format!("the table: cannot read column widths from {top:?}"))
        })?;
        Ok(Drawer {
            widths,
            chunk: empty_chunk(),
            rows: 0,
            chunk_rows: CHUNK_ROWS,
            first: true,
        })
    }

    /// Adds a row, writing the chunk before it when that is full.
    pub fn add<S: AsRef<str>>(&mut self, cells: &[S], out: &mut dyn Write) -> io::Result<()> {
        if self.rows >= self.chunk_rows {
            self.write(out, false)?;
        }
        self.chunk.add_row(row(cells));
        self.rows += 1;
        Ok(())
    }

    /// Writes the last chunk and the table's bottom border.
    pub fn finish(mut self, out: &mut dyn Write) -> io::Result<()> {
        self.write(out, true)
    }

    /// Writes the chunk's lines: the top border and header only in the
    /// first, the bottom border only in the last.
    fn write(&mut self, out: &mut dyn Write, last: bool) -> io::Result<()> {
        let mut chunk = std::mem::replace(&mut self.chunk, empty_chunk());
        let first = std::mem::replace(&mut self.first, false);
        if first {
            chunk.set_header(HEADER.to_vec());
        }
        // Columns exist once there are cells: fix their widths (padding
        // included) now.
        chunk.set_constraints(
            self.widths
                .iter()
                .map(|&w| ColumnConstraint::Absolute(Width::Fixed(w))),
        );
        let mut lines = chunk.lines().peekable();
        if !first {
            lines.next();
        }
        while let Some(line) = lines.next() {
            if lines.peek().is_none() && !last {
                break;
            }
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        self.rows = 0;
        Ok(())
    }
}

/// The width of each column in a top border (`┌───┬──┐`), padding included.
fn border_widths(top: &str) -> Option<Vec<u16>> {
    let inner = top.strip_prefix('┌')?.strip_suffix('┐')?;
    let widths: Option<Vec<u16>> = inner
        .split('┬')
        .map(|run| {
            let n = run.chars().count();
            (run.chars().all(|c| c == '─')).then(|| u16::try_from(n).ok())?
        })
        .collect();
    widths.filter(|w| w.len() == COLUMNS)
}

#[cfg(test)]
mod tests;
