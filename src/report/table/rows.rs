//! The connection table's rows, kept until the end of the input (the
//! columns' widths depend on every row): the first `--limit` by id, every
//! one with `--limit 0`, each as its cells' text in a spool
//! (`report::spool`: memory up to [`ROWS_MEMORY`], then a temporary file)
//! and 24 bytes of index. At the end they are read back in id order twice:
//! once for the shapes that decide the widths, once to draw them
//! (`layout.rs`), 1 024 rows at a time on the analysis' threads
//! (`report::ordered`). Memory therefore follows the rows' index, not their
//! records: a table of a million connections holds 24 MB of index where
//! it held every record (about 5 KiB each).
//!
//! Does not decide what a cell says (`table.rs`) or how it is drawn.

use std::io::{self, Write};

use super::layout::{Arrange, Drawer, Shapes, CHUNK_ROWS};
use super::{cells, write_summary, COLUMNS};
use crate::analyze::RecordSink;
use crate::least::{Keyed, Least};
use crate::record::{ConnectionRecord, Summary};
use crate::report::ordered::in_order;
use crate::report::spool::{put_text, take_text, Purpose, Spool, Spooled};
use crate::report::Opts;

/// Row text kept in memory before the spool moves to a temporary file.
pub const ROWS_MEMORY: usize = 8 << 20;

/// For the one line an error with the spool gives.
static PURPOSE: Purpose = Purpose {
    output: "the table",
    holds: "its rows until their columns' widths are known",
    instead: "show fewer with --limit, or use -T csv or -T jsonl",
};

/// Keeps the table's rows and draws them at the end: see the module's
/// comment.
pub struct TableSink {
    /// Where each kept row's text is, by connection id.
    first: Least<Keyed<Spooled>>,
    spool: Spool,
    /// One row's text at a time (it keeps its room).
    text: Vec<u8>,
    /// Threads that draw the rows at the end.
    threads: usize,
}

impl TableSink {
    /// Keeps the first `limit` rows by id (0: all).
    pub fn new(limit: usize) -> TableSink {
        TableSink::with_memory(limit, ROWS_MEMORY)
    }

    /// With `memory` bytes of row text kept in memory (tests use a small
    /// one to reach the file).
    pub fn with_memory(limit: usize, memory: usize) -> TableSink {
        TableSink {
            first: Least::new(if limit == 0 { usize::MAX } else { limit }),
            spool: Spool::new(memory, &PURPOSE),
            text: Vec::new(),
            threads: 1,
        }
    }

    /// With the rows drawn on `threads` threads at the end (the output is
    /// the same for any number).
    pub fn on_threads(mut self, threads: usize) -> TableSink {
        self.threads = threads.max(1);
        self
    }

    /// Keeps `rec`'s row if it is among the first so far.
    pub fn add(&mut self, rec: &ConnectionRecord) -> io::Result<()> {
        if !self.first.wants(|last| rec.id < last.key) {
            return Ok(());
        }
        self.text.clear();
        for cell in cells(rec) {
            put_text(&mut self.text, &cell)
                .ok_or_else(|| io::Error::other("the table: a cell of 4 GiB or more"))?;
        }
        let at = self.spool.append(&[&self.text])?;
        self.first.offer(Keyed {
            key: rec.id,
            item: at,
        });
        Ok(())
    }

    /// Writes the summary block, then the table and, when `summary` counts
    /// more connections than it shows, a line saying so; then the QUIC
    /// connections.
    pub fn finish(self, summary: &Summary, out: &mut dyn Write, opts: &Opts) -> io::Result<()> {
        write_summary(summary, out)?;
        self.write_rows(summary, out, opts)?;
        match &summary.quic {
            Some(q) => super::quic::write_connections(q, opts.limit, out),
            None => Ok(()),
        }
    }

    /// The TCP table, and a line for the connections it does not show.
    fn write_rows(self, summary: &Summary, out: &mut dyn Write, opts: &Opts) -> io::Result<()> {
        let rows = self.first.into_sorted();
        if rows.is_empty() {
            return Ok(());
        }
        writeln!(out)?;
        let mut buf = Vec::new();
        let mut shapes = Shapes::default();
        for row in &rows {
            let text = self.spool.get(&row.item, &mut buf)?;
            for (column, cell) in decode(text)?.iter().enumerate() {
                shapes.note(column, cell);
            }
        }
        let arrange = Arrange {
            dynamic: opts.fit_terminal,
            width: opts.width,
        };
        let drawer = Drawer::new(&shapes, arrange)?;
        let chunks = rows.len().div_ceil(CHUNK_ROWS);
        let spool = &self.spool;
        let draw = |c: usize, lines: &mut Vec<u8>| {
            let mut chunk = drawer.start();
            let mut text = Vec::new();
            for row in rows.iter().skip(c * CHUNK_ROWS).take(CHUNK_ROWS) {
                chunk.add(&decode(spool.get(&row.item, &mut text)?)?);
            }
            drawer.write(chunk, c == 0, c + 1 == chunks, lines)
        };
        in_order(chunks, self.threads, draw, out)?;
        if let Some(note) = drawer.note() {
            writeln!(out, "{note}")?;
        }
        let more = summary.connections.saturating_sub(rows.len() as u64);
        if more > 0 {
            writeln!(
                out,
                "… {more} more connection{} not shown (--limit 0 shows all; --format json has every one)",
                crate::report::plural(more)
            )?;
        }
        Ok(())
    }
}

impl RecordSink for TableSink {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.add(&rec)
    }
}

/// A row's cells from its text: each a 4-byte length, then its bytes.
fn decode(mut text: &[u8]) -> io::Result<[&str; COLUMNS]> {
    let broken = || io::Error::other("the table: a row's text is broken in its spool");
    let mut cells = [""; COLUMNS];
    for cell in &mut cells {
        *cell = take_text(&mut text).ok_or_else(broken)?;
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of `records` given in `order`, its rows' text spooled with
    /// `memory` bytes in memory, drawn on `threads` threads.
    fn table_of(
        summary: &Summary,
        records: &[&ConnectionRecord],
        limit: usize,
        (memory, threads): (usize, usize),
    ) -> String {
        let mut sink = TableSink::with_memory(limit, memory).on_threads(threads);
        for rec in records {
            sink.add(rec).unwrap();
        }
        let mut out = Vec::new();
        sink.finish(summary, &mut out, &Opts::default()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_first_rows_by_id_in_any_order_from_memory_or_file() {
        let path = std::path::Path::new("captures/java-urlconnection-keepalive-off-10.pcap");
        let (summary, records) = crate::testutil::records_of(path).unwrap();
        assert!(records.len() >= 10);
        let mut sorted: Vec<&ConnectionRecord> = records.iter().collect();
        sorted.sort_by_key(|r| r.id);
        let reversed: Vec<&ConnectionRecord> = sorted.iter().rev().copied().collect();
        for limit in [0, 1, 3, records.len()] {
            let want = table_of(&summary, &sorted, limit, (ROWS_MEMORY, 1));
            let shown = if limit == 0 { records.len() } else { limit };
            let ids: Vec<u64> = want
                .lines()
                .filter_map(|l| l.strip_prefix('│')?.split('┆').next()?.trim().parse().ok())
                .collect();
            let first: Vec<u64> = sorted.iter().take(shown).map(|r| r.id).collect();
            assert_eq!(ids, first, "limit {limit}");
            assert_eq!(
                want.contains("more connections not shown"),
                shown < records.len(),
                "limit {limit}"
            );
            for memory in [0, 300, ROWS_MEMORY] {
                assert_eq!(
                    table_of(&summary, &reversed, limit, (memory, 2)),
                    want,
                    "limit {limit}, memory {memory}"
                );
            }
        }
    }

    /// Thousands of rows, several chunks of them, the same on any number of
    /// threads and whether the spool is in memory or in its file.
    #[test]
    fn many_rows_are_drawn_the_same_on_any_number_of_threads() {
        let path = std::path::Path::new("captures/tls13-curl-keepalive-5.pcap");
        let (mut summary, records) = crate::testutil::records_of(path).unwrap();
        let many: Vec<ConnectionRecord> = (0..3 * CHUNK_ROWS + 5)
            .map(|k| {
                let mut rec = records[k % records.len()].clone();
                rec.id = k as u64 + 1;
                rec
            })
            .collect();
        summary.connections = many.len() as u64;
        let all: Vec<&ConnectionRecord> = many.iter().rev().collect();
        let want = table_of(&summary, &all, 0, (ROWS_MEMORY, 1));
        // One table: a header and every row between one top and one bottom.
        let count = |start: char| want.lines().filter(|l| l.starts_with(start)).count();
        assert_eq!(count('│'), many.len() + 1);
        assert_eq!((count('┌'), count('╞'), count('└')), (1, 1, 1));
        for (memory, threads) in [(ROWS_MEMORY, 2), (0, 3), (1 << 16, 8)] {
            let got = table_of(&summary, &all, 0, (memory, threads));
            assert!(got == want, "memory {memory}, {threads} threads");
        }
    }

    #[test]
    fn a_broken_row_is_an_error_not_a_panic() {
        let mut rng = crate::testutil::Xorshift(7);
        for len in 0..200 {
            let _ = decode(&rng.bytes(len));
        }
        assert!(decode(&[1, 0, 0]).is_err());
        assert!(decode(&[9, 0, 0, 0, b'x']).is_err());
        assert!(decode(&[0; 4 * COLUMNS]).is_ok());
    }
}
