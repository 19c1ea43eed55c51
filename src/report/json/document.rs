//! `-T json`: one document per input, `{"summary": …, "connections": […]}`
//! with the connections in `id` order — byte for byte what serde_json's
//! pretty printer writes for it — without holding the records until the
//! end. Each record is encoded when it is finalised, exactly as it will be
//! printed (indented for its place in the array), into a *spool*
//! (`report::spool`): memory up to [`SPOOL_MEMORY`] bytes, then an unnamed
//! temporary file. What stays in memory per record is an index entry of
//! 24 bytes. At the end the summary is written, then the records are
//! copied out of the spool in `id` order.
//!
//! Does not decide what a record says, only where its text waits.

use std::io::{self, Write};

use serde::Serialize;

use super::format::Pretty;
use crate::analyze::{Encoder, RecordSink};
use crate::record::{ConnectionRecord, Summary};
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
/// How a record's text begins, up to its connection number.
const ITEM_START: &[u8] = b"{\n      \"id\": ";

/// Streams `-T json`: see the module's comment.
pub struct DocumentSink<'w> {
    out: &'w mut dyn Write,
    spool: Spool,
    index: Vec<Entry>,
    /// One record's text at a time (it keeps its room).
    text: Vec<u8>,
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
        }
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
            for (k, entry) in self.index.iter().enumerate() {
                out.write_all(if k == 0 { b"[\n    " } else { b",\n    " })?;
                self.spool.copy(&entry.at, &mut self.text, out)?;
            }
            out.write_all(b"\n  ]")?;
        }
        out.write_all(b"\n}\n")
    }
}

impl RecordSink for DocumentSink<'_> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        let kept =
            encode_nested(&mut text, &rec, ITEM_DEPTH).and_then(|()| self.keep(rec.id, &[&text]));
        self.text = text;
        kept
    }

    fn encoder(&self) -> Option<Encoder> {
        Some(encode_item)
    }

    /// Keeps the record as [`encode_item`] made it with the connection
    /// number the gatherer gave.
    fn record_encoded(&mut self, id: u64, encoded: &[u8]) -> io::Result<()> {
        let Some(rest) = super::after_number(encoded, ITEM_START) else {
            return Err(io::Error::other("an encoded record without its number"));
        };
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(id).as_bytes();
        self.keep(id, &[ITEM_START, digits, rest])
    }
}

/// A record's text as the document prints it, with a connection number
/// that is not final yet ([`DocumentSink::record_encoded`] writes the
/// final one).
fn encode_item(rec: &ConnectionRecord) -> Option<Vec<u8>> {
    super::encoded(
        |text| encode_nested(text, rec, ITEM_DEPTH),
        |text| super::after_number(text, ITEM_START),
    )
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
