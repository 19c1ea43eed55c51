//! `-T json`: one document per input, `{"summary": …, "connections": […]}`
//! with the connections in `id` order — byte for byte what serde_json's
//! pretty printer writes for it — without holding the records until the
//! end. Each record is encoded when it is finalised, compactly (JSON
//! Lines' text, on the shards when there are threads), into a *spool*
//! (`report::spool`): memory up to [`SPOOL_MEMORY`] bytes, then an unnamed
//! temporary file. What stays in memory per record is an index entry of
//! 24 bytes. At the end the summary is written, then the records are
//! read back in `id` order and laid out for their place in the array
//! (`format::reindent`), 32 at a time on the analysis' threads
//! (`report::ordered`; 100 000 short connections 1.68 → 1.50 s, two
//! threads). Compact text is half the printed bytes: on a
//! million connections 2.5 GB instead of 4.7 GB go through the page cache
//! twice (22.6–29.0 → 15.7–17.8 s, docs/performance.md); the re-indenting
//! costs about 0.3 s per 100 000 records, which is what 100 000 short
//! connections lose (a spool of that size costs the kernel little either
//! way).
//!
//! Does not decide what a record says, only where its text waits.

use std::io::{self, Write};

use serde::Serialize;

use super::format::{reindent, Pretty};
use crate::analyze::{Encoder, RecordSink};
use crate::record::{ConnectionRecord, Summary};
use crate::report::ordered::in_order;
use crate::report::spool::{Purpose, Spool, Spooled};

/// Record text kept in memory before the spool moves to a temporary file:
/// captures of up to a few thousand connections never touch the disk.
pub const SPOOL_MEMORY: usize = 8 << 20;

/// For the one line an error with the spool gives.
static PURPOSE: Purpose = Purpose {
    output: "-T json",
    holds: "the connections until the summary is written",
    instead: "use -T jsonl",
};

/// A record's depth in the document: inside `connections`, inside the
/// top-level object.
const ITEM_DEPTH: usize = 2;
/// The summary's depth: inside the top-level object.
const SUMMARY_DEPTH: usize = 1;
/// Records laid out at a time for the document (by any thread).
const CHUNK: usize = 32;

/// Streams `-T json`: see the module's comment.
pub struct DocumentSink<'w> {
    out: &'w mut dyn Write,
    spool: Spool,
    index: Vec<Entry>,
    /// One record's text at a time (it keeps its room).
    text: Vec<u8>,
    /// Threads that lay the records out at the end.
    threads: usize,
}

/// Where a record's text is in the spool.
struct Entry {
    id: u64,
    at: Spooled,
}

impl<'w> DocumentSink<'w> {
    pub fn new(out: &'w mut dyn Write) -> DocumentSink<'w> {
        DocumentSink::with_memory(out, SPOOL_MEMORY)
    }

    /// With `memory` bytes of record text kept in memory (tests use a
    /// small one to reach the file).
    pub fn with_memory(out: &'w mut dyn Write, memory: usize) -> DocumentSink<'w> {
        DocumentSink {
            out,
            spool: Spool::new(memory, &PURPOSE),
            index: Vec::new(),
            text: Vec::new(),
            threads: 1,
        }
    }

    /// With the records laid out on `threads` threads at the end (the
    /// output is the same for any number).
    pub fn on_threads(mut self, threads: usize) -> DocumentSink<'w> {
        self.threads = threads.max(1);
        self
    }

    fn keep(&mut self, id: u64, pieces: &[&[u8]]) -> io::Result<()> {
        let at = self.spool.append(pieces)?;
        self.index.push(Entry { id, at });
        Ok(())
    }

    /// Writes the document: the summary, then every record in `id` order,
    /// then a newline.
    pub fn finish(mut self, summary: &Summary) -> io::Result<()> {
        self.text.clear();
        encode_nested(&mut self.text, summary, SUMMARY_DEPTH)?;
        let out = &mut *self.out;
        out.write_all(b"{\n  \"summary\": ")?;
        out.write_all(&self.text)?;
        out.write_all(b",\n  \"connections\": ")?;
        if self.index.is_empty() {
            out.write_all(b"[]")?;
        } else {
            self.index.sort_unstable_by_key(|e| e.id);
            let (spool, index) = (&self.spool, &self.index);
            let lay_out = |chunk: usize, pretty: &mut Vec<u8>| {
                let mut text = Vec::new();
                let first = chunk * CHUNK;
                for (k, entry) in index.iter().enumerate().skip(first).take(CHUNK) {
                    pretty.extend_from_slice(if k == 0 { b"[\n    " } else { b",\n    " });
                    reindent(spool.get(&entry.at, &mut text)?, ITEM_DEPTH, pretty);
                }
                Ok(())
            };
            let chunks = index.len().div_ceil(CHUNK);
            in_order(chunks, self.threads, lay_out, out)?;
            out.write_all(b"\n  ]")?;
        }
        out.write_all(b"\n}\n")
    }
}

impl RecordSink for DocumentSink<'_> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        let kept = super::to_writer(&mut text, &rec).and_then(|()| self.keep(rec.id, &[&text]));
        self.text = text;
        kept
    }

    /// JSON Lines' encoder: the spool keeps a record's compact text.
    fn encoder(&self) -> Option<Encoder> {
        Some(super::encode_line)
    }

    /// Keeps the record as [`super::encode_line`] made it, with the
    /// connection number the gatherer gave.
    fn record_encoded(&mut self, id: u64, encoded: &[u8]) -> io::Result<()> {
        let Some(rest) = super::after_id(encoded) else {
            return Err(io::Error::other("an encoded record without its number"));
        };
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(id).as_bytes();
        self.keep(id, &[super::LINE_START, digits, rest])
    }
}

/// `value` pretty-printed into `text` as it reads nested `depth` levels
/// deep: the same bytes serde_json writes for it there.
fn encode_nested<T: Serialize + ?Sized>(
    text: &mut Vec<u8>,
    value: &T,
    depth: usize,
) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(text, Pretty::nested(depth));
    value.serialize(&mut ser).map_err(io::Error::from)
}

#[cfg(test)]
mod tests;
