//! The fields of an HTTP/3 request or response this tool reads — a
//! request's `:method` and `:path`, a response's `:status`, `retry-after`
//! and `date` — from the first
//! bytes of its stream (RFC 9114 §7.2.2: a HEADERS frame; RFC 9204 §4.5:
//! its field lines): from the static table, a literal (plain or
//! Huffman-coded), or the dynamic table, which a [`Decoder`] builds from
//! its peer's encoder stream (RFC 9204 §4.3) — keeping of each entry only
//! its name, as far as those fields go, a status's code, and the text of
//! the latest few methods, paths, Retry-Afters and dates.
//!
//! Does not read any other field, nor a HEADERS frame that does not start
//! the bytes it is given (another frame first is passed over); a field
//! line that refers to an entry not yet seen on the encoder stream tells
//! nothing.

use std::collections::VecDeque;

use super::uni::EncoderStream;
use crate::analyze::h2::huffman;
use crate::analyze::http::MAX_TARGET;
use crate::decode::varint;

/// Dynamic table entries remembered (the oldest are forgotten first).
const MAX_ENTRIES: usize = 4_096;
/// Texts of dynamic `:method`, `:path`, `retry-after` and `date` entries
/// kept (the latest ones).
const MAX_TEXTS: usize = 32;
/// Encoder stream bytes held while an instruction is incomplete.
const MAX_PENDING: usize = 16 * 1024;
/// Field lines read before giving up: pseudo-header fields come first, a
/// response's `retry-after` and `date` among the rest.
const MAX_LINES: usize = 32;
/// Frames passed over before a stream's HEADERS (reserved types, RFC 9114
/// §7.2.8).
const MAX_SKIPPED_FRAMES: usize = 4;

/// A field's name, as far as this tool reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Name {
    Status,
    Method,
    Path,
    RetryAfter,
    Date,
    Other,
}

impl Name {
    fn of(name: &[u8]) -> Name {
        match name {
            b":status" => Name::Status,
            b":method" => Name::Method,
            b":path" => Name::Path,
            b"retry-after" => Name::RetryAfter,
            b"date" => Name::Date,
            _ => Name::Other,
        }
    }
}

/// A dynamic table entry: its name, and a status's code when it is three
/// digits (a method's or path's text is in [`Decoder::texts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    name: Name,
    code: Option<u16>,
}

/// What a field section says of a request or its response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub status: Option<u16>,
    pub method: Option<Box<str>>,
    pub path: Option<Box<str>>,
    pub retry_after: Option<Box<str>>,
    pub date: Option<Box<str>>,
}

impl Fields {
    /// Sets a field from its value's octets, unless it is set already.
    fn put(&mut self, name: Name, value: &[u8]) {
        let text = || -> Box<str> {
            String::from_utf8_lossy(value)
                .chars()
                .take(MAX_TARGET)
                .collect()
        };
        match name {
            Name::Status => self.status = self.status.or_else(|| digits(value)),
            Name::Method => self.method = self.method.take().or_else(|| Some(text())),
            Name::Path => self.path = self.path.take().or_else(|| Some(text())),
            Name::RetryAfter => self.retry_after = self.retry_after.take().or_else(|| Some(text())),
            Name::Date => self.date = self.date.take().or_else(|| Some(text())),
            Name::Other => {}
        }
    }

    /// Whether nothing more is wanted: a method and a path, or a status
    /// with a Retry-After and a date.
    fn complete(&self) -> bool {
        let response = self.status.is_some() && self.retry_after.is_some() && self.date.is_some();
        response || (self.method.is_some() && self.path.is_some())
    }

    /// The text a dynamic table entry keeps of this field's value.
    fn text(self) -> Option<Box<str>> {
        self.method.or(self.path).or(self.retry_after).or(self.date)
    }
}

/// The dynamic table of one side's encoder, from its encoder stream.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Entries by absolute index: `entries[i]` is entry `first + i`.
    entries: VecDeque<Entry>,
    first: u64,
    /// The texts of the latest `:method` and `:path` entries, by absolute
    /// index (in order).
    texts: VecDeque<(u64, Box<str>)>,
    /// Entries inserted so far (the next absolute index).
    inserted: u64,
    /// The largest capacity the encoder set: the decoder's maximum, as far
    /// as a capture shows it (RFC 9204 §4.5.1.1 needs it).
    max_capacity: u64,
    /// The encoder stream, found among the peer's unidirectional streams
    /// and put in order, and the bytes of an incomplete instruction.
    encoder: EncoderStream,
    pending: Vec<u8>,
    /// A piece of the encoder stream that could not be held, or too much
    /// pending: the table is no longer known.
    lost: bool,
}

/// The static table's entries this tool reads (RFC 9204 Appendix A); every
/// other index names another field.
const STATIC: [(u64, Name, &str); 23] = [
    (1, Name::Path, "/"),
    (6, Name::Date, ""),
    (15, Name::Method, "CONNECT"),
    (16, Name::Method, "DELETE"),
    (17, Name::Method, "GET"),
    (18, Name::Method, "HEAD"),
    (19, Name::Method, "OPTIONS"),
    (20, Name::Method, "POST"),
    (21, Name::Method, "PUT"),
    (24, Name::Status, "103"),
    (25, Name::Status, "200"),
    (26, Name::Status, "304"),
    (27, Name::Status, "404"),
    (28, Name::Status, "503"),
    (63, Name::Status, "100"),
    (64, Name::Status, "204"),
    (65, Name::Status, "206"),
    (66, Name::Status, "302"),
    (67, Name::Status, "400"),
    (68, Name::Status, "403"),
    (69, Name::Status, "421"),
    (70, Name::Status, "425"),
    (71, Name::Status, "500"),
];

/// A static entry's name and value.
fn static_entry(index: u64) -> (Name, &'static [u8]) {
    STATIC
        .iter()
        .find(|e| e.0 == index)
        .map_or((Name::Other, &[][..]), |e| (e.1, e.2.as_bytes()))
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1), and the bytes after it.
fn prefixed(b: &[u8], n: u32) -> Option<(u64, &[u8])> {
    let (&first, mut rest) = b.split_first()?;
    let max = (1u64 << n) - 1;
    let mut value = u64::from(first) & max;
    if value < max {
        return Some((value, rest));
    }
    let mut shift = 0u32;
    loop {
        let (&byte, after) = rest.split_first()?;
        rest = after;
        value = value.checked_add(u64::from(byte & 0x7f).checked_shl(shift)?)?;
        if byte & 0x80 == 0 {
            return Some((value, rest));
        }
        shift += 7;
        if shift > 56 {
            return None;
        }
    }
}

/// A string with an H bit and an `n`-bit length prefix, as sent.
#[derive(Clone, Copy)]
struct Coded<'a> {
    huffman: bool,
    octets: &'a [u8],
}

impl Coded<'_> {
    /// The string's octets; `None` if its Huffman code is invalid or too
    /// long to decode.
    fn text(self) -> Option<Vec<u8>> {
        match self.huffman {
            true => huffman(self.octets),
            false => Some(self.octets.to_vec()),
        }
    }
}

fn string(b: &[u8], n: u32) -> Option<(Coded<'_>, &[u8])> {
    let huffman = b.first()? & (1 << n) != 0;
    let (len, rest) = prefixed(b, n)?;
    let (octets, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
    Some((Coded { huffman, octets }, rest))
}

/// A status's three digits.
fn digits(value: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(value).ok()?;
    (text.len() == 3).then(|| text.parse().ok()).flatten()
}

/// Where a request stream's first HEADERS frame is, past any frames of
/// other types before it.
enum Located {
    /// Its field section starts at `start` and is `len` bytes long (which
    /// the bytes at hand may not hold yet).
    Headers { start: usize, len: usize },
    /// The bytes end before its frame header: at least `needed` are.
    Short { needed: usize },
    /// A DATA frame first, or too many others: it has none.
    NotHeaders,
}

fn locate(b: &[u8]) -> Located {
    let mut at = 0usize;
    for _ in 0..=MAX_SKIPPED_FRAMES {
        let rest = b.get(at..).unwrap_or_default();
        let short = Located::Short {
            needed: b.len() + 1,
        };
        let Some((ty, after)) = varint(rest) else {
            return short;
        };
        let Some((len, after)) = varint(after) else {
            return short;
        };
        let Ok(len) = usize::try_from(len) else {
            return Located::NotHeaders;
        };
        let start = at + (rest.len() - after.len());
        match ty {
            0x01 => return Located::Headers { start, len },
            0x00 => return Located::NotHeaders,
            _ => at = start.saturating_add(len),
        }
        if at > b.len() {
            return Located::Short { needed: at };
        }
    }
    Located::NotHeaders
}

/// The field section of the HEADERS frame a request stream begins with
/// (past any frames of other types before it; a DATA frame first means
/// none): what `b` holds of it, the fields read coming first.
fn field_section(b: &[u8]) -> Option<&[u8]> {
    match locate(b) {
        Located::Headers { start, len } => {
            let rest = b.get(start..)?;
            Some(rest.get(..len).unwrap_or(rest))
        }
        _ => None,
    }
}

/// How much of a stream's first bytes its head needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// The first HEADERS frame ends `n` bytes in, within the bytes given.
    Whole(usize),
    /// At least `n` bytes are needed.
    More(usize),
    /// The stream does not begin with HEADERS.
    NotHeaders,
}

/// What `b`, a stream's first bytes, holds of its first HEADERS frame.
pub fn head_needed(b: &[u8]) -> Need {
    match locate(b) {
        Located::Headers { start, len } => match start.saturating_add(len) {
            end if end <= b.len() => Need::Whole(end),
            end => Need::More(end),
        },
        Located::Short { needed } => Need::More(needed),
        Located::NotHeaders => Need::NotHeaders,
    }
}

/// The `:status` of the response whose request stream begins with `b`,
/// with no dynamic table.
#[cfg(test)]
pub fn status(b: &[u8]) -> Option<u16> {
    Decoder::default().fields(b).status
}

impl Decoder {
    /// Reads a STREAM frame of the peer's unidirectional stream `id` at
    /// `offset`: the encoder stream's instructions, in order (pieces ahead
    /// of their turn held, within [`MAX_PENDING`] bytes; one that cannot
    /// be ends the table's knowledge).
    pub fn uni_stream(&mut self, id: u64, offset: u64, data: &[u8]) {
        if self.lost {
            return;
        }
        let before = self.pending.len();
        let budget = MAX_PENDING.saturating_sub(self.encoder.held() + before);
        let added = self
            .encoder
            .add(id, offset, data, budget, &mut self.pending);
        if added.is_err() {
            self.lost = true;
            self.pending = Vec::new();
            self.encoder = EncoderStream::default();
            return;
        }
        if self.pending.len() == before {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let mut at = 0;
        while let Some(used) = pending.get(at..).and_then(|rest| self.instruction(rest)) {
            at += used;
        }
        self.pending = pending.get(at..).unwrap_or_default().to_vec();
        if self.pending.len() > MAX_PENDING {
            self.lost = true;
            self.pending = Vec::new();
        }
    }

    /// Applies the encoder instruction `b` begins with; the bytes it took,
    /// or `None` if it is incomplete.
    fn instruction(&mut self, b: &[u8]) -> Option<usize> {
        let first = *b.first()?;
        let rest = if first & 0x80 != 0 {
            // Insert with a name reference (static if T).
            let (index, rest) = prefixed(b, 6)?;
            let (value, rest) = string(rest, 7)?;
            let name = if first & 0x40 != 0 {
                static_entry(index).0
            } else {
                let absolute = self.inserted.checked_sub(1 + index)?;
                self.entry(absolute).map_or(Name::Other, |e| e.name)
            };
            self.insert(name, value);
            rest
        } else if first & 0x40 != 0 {
            // Insert with a literal name.
            let (name, rest) = string(b, 5)?;
            let (value, rest) = string(rest, 7)?;
            let name = name.text().map_or(Name::Other, |n| Name::of(&n));
            self.insert(name, value);
            rest
        } else if first & 0x20 != 0 {
            // Set the dynamic table's capacity.
            let (capacity, rest) = prefixed(b, 5)?;
            self.max_capacity = self.max_capacity.max(capacity);
            rest
        } else {
            // Duplicate.
            let (index, rest) = prefixed(b, 5)?;
            let absolute = self.inserted.checked_sub(1 + index)?;
            let entry = self.entry(absolute).unwrap_or(Entry {
                name: Name::Other,
                code: None,
            });
            let text = self.text(absolute).map(Box::from);
            self.push(entry, text);
            rest
        };
        Some(b.len() - rest.len())
    }

    fn insert(&mut self, name: Name, value: Coded<'_>) {
        let value = match name {
            Name::Other => None,
            _ => value.text(),
        };
        let mut fields = Fields::default();
        if let Some(value) = &value {
            fields.put(name, value);
        }
        let code = fields.status;
        self.push(Entry { name, code }, fields.text());
    }

    fn push(&mut self, entry: Entry, text: Option<Box<str>>) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.pop_front();
            self.first += 1;
        }
        self.entries.push_back(entry);
        if let Some(text) = text {
            if self.texts.len() >= MAX_TEXTS {
                self.texts.pop_front();
            }
            self.texts.push_back((self.inserted, text));
        }
        self.inserted += 1;
    }

    fn entry(&self, absolute: u64) -> Option<Entry> {
        let i = usize::try_from(absolute.checked_sub(self.first)?).ok()?;
        self.entries.get(i).copied()
    }

    fn text(&self, absolute: u64) -> Option<&str> {
        let i = self.texts.binary_search_by_key(&absolute, |t| t.0).ok()?;
        self.texts.get(i).map(|t| &*t.1)
    }

    /// The Required Insert Count an encoded one stands for (RFC 9204
    /// §4.5.1.1).
    fn required_insert_count(&self, encoded: u64) -> Option<u64> {
        if encoded == 0 {
            return Some(0);
        }
        let max_entries = self.max_capacity / 32;
        let full_range = 2 * max_entries;
        if encoded > full_range {
            return None;
        }
        let max_value = self.inserted + max_entries;
        let max_wrapped = (max_value / full_range) * full_range;
        let ric = max_wrapped + encoded - 1;
        if ric > max_value {
            ric.checked_sub(full_range).filter(|&r| r != 0)
        } else {
            Some(ric)
        }
    }

    /// Whether the field section `b` begins with refers to entries the
    /// encoder stream has not shown yet (RFC 9204 §2.1.2, a blocked
    /// stream): its Required Insert Count is past the entries inserted, or
    /// the table's capacity has not come. Never once the table is lost:
    /// what is missing will not come.
    pub fn blocked(&self, b: &[u8]) -> bool {
        let encoded = field_section(b).and_then(|section| prefixed(section, 8));
        match encoded {
            Some((0, _)) | None => false,
            _ if self.lost => false,
            Some((encoded, _)) => match self.required_insert_count(encoded) {
                Some(ric) => ric > self.inserted,
                None => self.max_capacity == 0,
            },
        }
    }

    /// The fields this tool reads of the request or response whose
    /// stream begins with `b` (none when it does not begin with HEADERS).
    pub fn fields(&self, b: &[u8]) -> Fields {
        let mut fields = Fields::default();
        let Some(section) = field_section(b) else {
            return fields;
        };
        let Some((encoded, section)) = prefixed(section, 8) else {
            return fields;
        };
        let Some(ric) = self.required_insert_count(encoded) else {
            return fields;
        };
        let sign = section.first().is_some_and(|b| b & 0x80 != 0);
        let Some((delta, mut lines)) = prefixed(section, 7) else {
            return fields;
        };
        let base = match sign {
            true => delta.checked_add(1).and_then(|d| ric.checked_sub(d)),
            false => ric.checked_add(delta),
        };
        for _ in 0..MAX_LINES {
            if fields.complete() {
                break;
            }
            match self.line(lines, base, &mut fields) {
                Some(rest) => lines = rest,
                None => break,
            }
        }
        fields
    }

    /// Reads the field line `b` begins with into `fields`; the bytes after
    /// it. `base` is the section's Base (`None`: it did not compute).
    fn line<'a>(&self, b: &'a [u8], base: Option<u64>, fields: &mut Fields) -> Option<&'a [u8]> {
        let first = *b.first()?;
        let before = |index: u64| base?.checked_sub(index.checked_add(1)?);
        let post = |index: u64| base?.checked_add(index);
        let rest = if first & 0x80 != 0 {
            // Indexed field line: static (T) or dynamic.
            let (index, rest) = prefixed(b, 6)?;
            match first & 0x40 != 0 {
                true => static_line(index, None, fields),
                false => self.dynamic_line(before(index), None, fields),
            }
            rest
        } else if first & 0x40 != 0 {
            // Literal with a name reference (static if T).
            let (index, rest) = prefixed(b, 4)?;
            let (value, rest) = string(rest, 7)?;
            match first & 0x10 != 0 {
                true => static_line(index, Some(value), fields),
                false => self.dynamic_line(before(index), Some(value), fields),
            }
            rest
        } else if first & 0x20 != 0 {
            // Literal with a literal name.
            let (name, rest) = string(b, 3)?;
            let (value, rest) = string(rest, 7)?;
            let name = name.text().map_or(Name::Other, |n| Name::of(&n));
            put(fields, name, value);
            rest
        } else if first & 0x10 != 0 {
            // Indexed with a post-base index.
            let (index, rest) = prefixed(b, 4)?;
            self.dynamic_line(post(index), None, fields);
            rest
        } else {
            // Literal with a post-base name reference.
            let (index, rest) = prefixed(b, 3)?;
            let (value, rest) = string(rest, 7)?;
            self.dynamic_line(post(index), Some(value), fields);
            rest
        };
        Some(rest)
    }

    /// A field line naming dynamic entry `absolute`, with its own `value`
    /// or the entry's (as far as it was kept).
    fn dynamic_line(&self, absolute: Option<u64>, value: Option<Coded<'_>>, fields: &mut Fields) {
        let Some((absolute, entry)) = absolute.and_then(|a| Some((a, self.entry(a)?))) else {
            return;
        };
        match (value, entry.name) {
            (Some(value), name) => put(fields, name, value),
            (None, Name::Status) => fields.status = fields.status.or(entry.code),
            (None, name) => {
                if let Some(text) = self.text(absolute) {
                    fields.put(name, text.as_bytes());
                }
            }
        }
    }
}

/// A field line naming static entry `index`, with its own `value` or the
/// entry's.
fn static_line(index: u64, value: Option<Coded<'_>>, fields: &mut Fields) {
    let (name, static_value) = static_entry(index);
    match value {
        Some(value) => put(fields, name, value),
        None => fields.put(name, static_value),
    }
}

/// Sets a field from a coded value, decoding it only for a field read.
fn put(fields: &mut Fields, name: Name, value: Coded<'_>) {
    if name != Name::Other {
        if let Some(value) = value.text() {
            fields.put(name, &value);
        }
    }
}

#[cfg(test)]
mod tests;
