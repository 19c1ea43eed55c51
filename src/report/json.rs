//! JSON and JSON Lines reports (serde_json). Field names come from the
//! `record` types and are documented in docs/json.md.
//!
//! Does not decide what a field means; it only serialises records.

use std::cell::RefCell;
use std::io::{self, Write};

use serde::Serialize;

mod document;
mod format;

pub use document::DocumentSink;

use format::Compact;

use crate::analyze::{Encoder, RecordSink};
use crate::record::{ConnectionRecord, QuicRecord, Summary};

#[derive(Serialize)]
struct SummaryLine<'a> {
    summary: &'a Summary,
}

/// A QUIC connection's line: `{"quic": {…}}`, its record as in
/// `summary.quic.list` (its `id` numbers QUIC connections, apart from TCP's).
#[derive(Serialize)]
struct QuicLine<'a> {
    quic: &'a QuicRecord,
}

/// Streams one compact JSON object per connection as each one is finalised.
pub struct JsonlSink<'w> {
    out: &'w mut dyn Write,
    /// One line at a time: serde_json writes many small pieces, which cost
    /// a call through `dyn Write` each (measured on the 1 GiB capture: JSON
    /// Lines output took 0.08 s, now 0.05 s, built in memory and written at
    /// once).
    line: Vec<u8>,
}

impl<'w> JsonlSink<'w> {
    pub fn new(out: &'w mut dyn Write) -> JsonlSink<'w> {
        JsonlSink {
            out,
            line: Vec::new(),
        }
    }

    /// Writes the line built in `self.line`, ended.
    fn write_line(&mut self) -> io::Result<()> {
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }

    /// Writes the closing `{"summary": …}` line.
    pub fn summary(&mut self, summary: &Summary) -> io::Result<()> {
        to_writer(&mut *self.out, &SummaryLine { summary })?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

impl RecordSink for JsonlSink<'_> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.line.clear();
        to_writer(&mut self.line, &rec)?;
        self.write_line()
    }

    fn encoder(&self) -> Option<Encoder> {
        Some(encode_line)
    }

    fn quic(&mut self, rec: &QuicRecord) -> io::Result<()> {
        self.line.clear();
        to_writer(&mut self.line, &QuicLine { quic: rec })?;
        self.write_line()
    }

    /// Writes the record as [`encode_line`] made it with the connection
    /// number the gatherer gave (the encoding ran before it was known):
    /// the same bytes as [`JsonlSink::record`], written straight out
    /// rather than copied into a line first.
    fn record_encoded(&mut self, id: u64, encoded: &[u8]) -> io::Result<()> {
        let Some(rest) = after_id(encoded) else {
            // `encode_line` hands over no such text.
            return Err(io::Error::other("an encoded record without its number"));
        };
        self.line.clear();
        self.line.extend_from_slice(b"{\"id\":");
        self.line
            .extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        self.out.write_all(&self.line)?;
        self.out.write_all(rest)?;
        self.out.write_all(b"\n")
    }
}

/// `value` as compact JSON, as `serde_json::to_writer` writes it (the
/// same bytes, microsecond counts written faster: `format`).
fn to_writer<W: Write + ?Sized, T: Serialize + ?Sized>(out: &mut W, value: &T) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, Compact);
    value.serialize(&mut ser).map_err(io::Error::from)
}

/// How a record's JSON Lines text begins, up to its connection number.
const LINE_START: &[u8] = b"{\"id\":";

/// What follows the connection number in a record's JSON Lines text
/// (`,"client":…}`); `None` if the text does not start as expected.
fn after_id(text: &[u8]) -> Option<&[u8]> {
    after_number(text, LINE_START)
}

/// What follows the connection number in a record's text that begins with
/// `start` (its text up to the number); `None` if it does not begin so or
/// no number and comma follow.
fn after_number<'t>(text: &'t [u8], start: &[u8]) -> Option<&'t [u8]> {
    let rest = text.strip_prefix(start)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = rest.get(digits..).filter(|_| digits > 0)?;
    rest.starts_with(b",").then_some(rest)
}

/// A record's JSON text, with a connection number that is not final yet
/// ([`JsonlSink::record_encoded`] writes the final one); `None` if it
/// cannot be encoded so.
fn encode_line(rec: &ConnectionRecord) -> Option<Vec<u8>> {
    encoded(|text| to_writer(text, rec), after_id)
}

/// A record's text as `write` makes it, if `after` finds its connection
/// number. Encoded into this thread's scratch buffer (it keeps its room: a
/// short API call's text is 1.5–3 KB, a web connection's 3–6 KB) and
/// copied out at its exact length: the text waits for the gatherer, and at
/// 50 000 connections per second thousands wait at once (a 4 KiB buffer
/// each was 30 MiB of a two-thread run's peak).
fn encoded(
    write: impl Fn(&mut Vec<u8>) -> io::Result<()>,
    after: fn(&[u8]) -> Option<&[u8]>,
) -> Option<Vec<u8>> {
    thread_local! {
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let numbered = |text: &[u8]| after(text).is_some().then(|| text.to_vec());
    SCRATCH.with(|scratch| {
        let Ok(mut text) = scratch.try_borrow_mut() else {
            // Not re-entered in practice; encode on its own if it were.
            let mut own = Vec::new();
            write(&mut own).ok()?;
            return numbered(&own);
        };
        text.clear();
        write(&mut text).ok()?;
        numbered(&text)
    })
}

#[cfg(test)]
mod tests {
    use super::after_id;

    #[test]
    fn the_text_after_the_connection_number() {
        assert_eq!(
            after_id(b"{\"id\":1234,\"client\":1}"),
            Some(&b",\"client\":1}"[..])
        );
        for text in [
            &b""[..],
            b"{\"id\":",
            b"{\"id\":,\"client\":1}",
            b"{\"id\":12}",
            b"{\"ip\":12,\"client\":1}",
            b"{\"id\":-1,\"client\":1}",
        ] {
            assert_eq!(after_id(text), None, "{}", String::from_utf8_lossy(text));
        }
    }
}
