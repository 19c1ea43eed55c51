//! How the connection table is drawn (comfy-table) without holding all its
//! rows: the column widths are decided once, on a stand-in table that holds
//! each column's distinct *shapes* — a cell of printable ASCII with every
//! character but the space as `x`, which comfy-table measures and wraps
//! exactly as the cell itself; any other cell as it is — and the rows are
//! then drawn a chunk at a time with those widths fixed (on any thread, in
//! any order), the chunks' lines joined into one table. The result is byte for byte the table comfy-table
//! draws with every row at once and the same constraints on its columns
//! (below; tests hold it to that), at the cost
//! of the distinct shapes: a few dozen per column in real captures. A
//! column with more than [`MAX_SHAPES`] (or [`MAX_SHAPE_BYTES`]) keeps
//! only its widest cell's width from then on: the widths without wrapping
//! are still exact, and wrapped to a terminal it is laid out as if its
//! words could not be broken at spaces, which may make it a little wider
//! than comfy-table would have.
//!
//! Fitted to a terminal, no column is narrower than its longest cell (or,
//! in the columns that may wrap, its longest word), so that no address,
//! time or count is broken; when those widths do not fit, the least needed
//! columns are hidden and a line under the table names them.
//!
//! Does not decide what a cell says (`table.rs`) or which rows are drawn
//! (`rows.rs`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{self, Write};

use comfy_table::{
    presets, Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width,
};
use unicode_width::UnicodeWidthStr;

use super::{COLUMNS, HEADER, RIGHT};

/// The columns hidden, in this order, when a terminal is too narrow for
/// the table's words: start, down, up, ALPN, SNI/Host, server, TLS hs, close.
/// Id, client, connect, TLS and requests always stay.
pub const HIDE_ORDER: [usize; 8] = [3, 11, 10, 8, 7, 2, 6, 12];

/// The columns whose cells may wrap at their spaces on a narrow terminal:
/// server (before an overlay), TLS, SNI/Host, ALPN, close. The others — ids,
/// addresses, times, counts with their units — are never broken.
pub const WRAPS: [bool; COLUMNS] = [
    false, false, true, false, false, true, false, true, true, false, false, false, true,
];

/// Distinct shapes kept per column before it keeps only its widest
/// cell's width — and their bytes (a hostile capture's server names may
/// be 64 KiB each).
pub const MAX_SHAPES: usize = 4096;
pub const MAX_SHAPE_BYTES: usize = 1 << 20;
/// The longest word a narrow terminal does not break: an IPv6 address
/// with its port (`[ffff:…:ffff]:65535`). A longer server name or protocol
/// list may break.
pub const MAX_UNBROKEN: usize = 47;
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
    /// The distinct shapes, and their bytes.
    Exact(HashSet<Box<str>>, usize),
    /// The widest cell's width: all a column of unbroken words needs.
    Widest(usize),
}

impl Default for Shapes {
    fn default() -> Shapes {
        Shapes {
            columns: (0..COLUMNS)
                .map(|_| Shape::Exact(HashSet::new(), 0))
                .collect(),
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
            Shape::Exact(set, bytes) => {
                let shape = shape(cell, &mut self.scratch);
                if set.contains(shape) {
                    return;
                }
                if set.len() < MAX_SHAPES && *bytes + shape.len() <= MAX_SHAPE_BYTES {
                    *bytes += shape.len();
                    set.insert(shape.into());
                    return;
                }
                let widest = set.iter().map(|s| s.width()).max().unwrap_or(0);
                *col = Shape::Widest(widest.max(cell.width()));
            }
            Shape::Widest(widest) => {
                *widest = (*widest).max(cell.width());
            }
        }
    }

    /// The width each column needs so that none of its cells is broken —
    /// in the columns that [`WRAPS`], none of its words — nor its header's
    /// words (at most [`MAX_UNBROKEN`]), padding included: comfy-table
    /// wraps a cell at its spaces first, and breaks a word only when the
    /// column is narrower than it.
    fn unbroken(&self) -> [u16; COLUMNS] {
        let mut widths = [0; COLUMNS];
        let columns = widths.iter_mut().zip(&self.columns);
        for ((width, col), (&wraps, header)) in columns.zip(WRAPS.iter().zip(HEADER)) {
            let words = |s: &str| match wraps {
                true => s.split(' ').map(|w| w.width()).max().unwrap_or(0),
                false => s.width(),
            };
            let longest = match col {
                Shape::Exact(set, _) => set.iter().map(|s| words(s)).max(),
                Shape::Widest(widest) => Some(*widest),
            };
            let longest = longest.unwrap_or(0).max(words(header)).min(MAX_UNBROKEN);
            *width = u16::try_from(longest).unwrap_or(u16::MAX).saturating_add(2);
        }
        widths
    }

    /// How the columns of a table `arrange`d to `width` are bounded: none
    /// narrower than its longest word, and when those widths do not fit,
    /// columns hidden in [`HIDE_ORDER`] until they do (the columns that
    /// answer the headline question stay), then shown again, in the
    /// reverse order, where they fit after all.
    pub(super) fn constraints(
        &self,
        arrange: Arrange,
        width: Option<u16>,
    ) -> Vec<ColumnConstraint> {
        if !arrange.dynamic {
            return Vec::new();
        }
        let bounds = self.unbroken();
        let mut hidden = [false; COLUMNS];
        if let Some(width) = width {
            // The shown columns' bounds and their borders.
            let fits = |hidden: &[bool; COLUMNS]| {
                let shown = bounds.iter().zip(hidden).filter(|(_, h)| !**h);
                shown.map(|(b, _)| usize::from(*b) + 1).sum::<usize>() < usize::from(width)
            };
            for &column in &HIDE_ORDER {
                if fits(&hidden) {
                    break;
                }
                if let Some(h) = hidden.get_mut(column) {
                    *h = true;
                }
            }
            // A wide column hidden last may leave room for narrower ones
            // hidden before it: the most important first.
            for &column in HIDE_ORDER.iter().rev() {
                if hidden.get(column) == Some(&true) {
                    let mut shown = hidden;
                    if let Some(h) = shown.get_mut(column) {
                        *h = false;
                    }
                    if fits(&shown) {
                        hidden = shown;
                    }
                }
            }
        }
        bounds
            .iter()
            .zip(hidden)
            .map(|(&bound, hidden)| match hidden {
                true => ColumnConstraint::Hidden,
                false => ColumnConstraint::LowerBoundary(Width::Fixed(bound)),
            })
            .collect()
    }

    /// Each column's shapes, in order.
    fn texts(&self) -> Vec<Vec<Cow<'_, str>>> {
        self.columns
            .iter()
            .map(|col| {
                let mut texts: Vec<Cow<'_, str>> = match col {
                    Shape::Exact(set, _) => set.iter().map(|s| Cow::Borrowed(&**s)).collect(),
                    Shape::Widest(widest) => vec!["x".repeat(*widest).into()],
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
/// table would have; chunks may be drawn on any thread, in any order.
pub struct Drawer {
    /// Each column's constraint on the chunks: its width, padding included,
    /// or hidden.
    fixed: Vec<ColumnConstraint>,
    /// The width the table is fitted to (`None`: as wide as its content,
    /// or no terminal).
    width: Option<u16>,
}

/// Rows of one chunk, added one at a time (their cells are copied).
pub struct Chunk(Table);

impl Chunk {
    pub fn add<S: AsRef<str>>(&mut self, cells: &[S]) {
        self.0.add_row(row(cells));
    }
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
        let width = stand_in.width();
        let constraints = shapes.constraints(arrange, width);
        stand_in.set_constraints(constraints.iter().cloned());
        let top = stand_in.lines().next().unwrap_or_default();
        let cannot =
            || io::Error::other(format!("the table: cannot read column widths from {top:?}"));
        let mut widths = border_widths(&top).ok_or_else(cannot)?.into_iter();
        let hidden = |c: usize| matches!(constraints.get(c), Some(ColumnConstraint::Hidden));
        let mut fixed = Vec::with_capacity(COLUMNS);
        for c in 0..COLUMNS {
            fixed.push(if hidden(c) {
                ColumnConstraint::Hidden
            } else {
                ColumnConstraint::Absolute(Width::Fixed(widths.next().ok_or_else(cannot)?))
            });
        }
        if widths.next().is_some() {
            return Err(cannot());
        }
        Ok(Drawer { fixed, width })
    }

    /// An empty chunk.
    pub fn start(&self) -> Chunk {
        Chunk(empty_chunk())
    }

    /// Writes a chunk's lines: the top border and header only if it is the
    /// `first`, the bottom border only if it is the `last`.
    pub fn write(
        &self,
        chunk: Chunk,
        first: bool,
        last: bool,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut chunk = chunk.0;
        if first {
            chunk.set_header(HEADER.to_vec());
        }
        // Columns exist once there are cells: fix their widths now.
        chunk.set_constraints(self.fixed.iter().cloned());
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
        Ok(())
    }

    /// The line under the table that names the columns hidden to fit the
    /// terminal, if any.
    pub fn note(&self) -> Option<String> {
        hidden_note(self.width, &self.fixed)
    }
}

/// The line under a table fitted to `width` that names the columns
/// `constraints` hide, if any.
fn hidden_note(width: Option<u16>, constraints: &[ColumnConstraint]) -> Option<String> {
    let names: Vec<&str> = (constraints.iter().zip(HEADER))
        .filter(|(c, _)| matches!(c, ColumnConstraint::Hidden))
        .map(|(_, name)| name)
        .collect();
    let width = width.filter(|_| !names.is_empty())?;
    Some(format!(
        "(columns hidden to fit {width}: {})",
        names.join(", ")
    ))
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
    widths.filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests;
