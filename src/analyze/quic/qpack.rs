//! The `:status` of an HTTP/3 response, from the first bytes of its request
//! stream (RFC 9114 §7.2.2: a HEADERS frame; RFC 9204 §4.5: its field
//! lines): from the static table, a literal (plain or Huffman-coded), or
//! the dynamic table, which [`Decoder`] builds from the server's encoder
//! stream (RFC 9204 §4.3) — keeping of each entry only whether it is a
//! `:status` and which.
//!
//! Does not read any other field, nor a HEADERS frame that does not start
//! the bytes it is given; a field section that refers to entries not yet
//! seen on the encoder stream gives no status.

use std::collections::VecDeque;

use crate::analyze::h2::huffman;
use crate::decode::varint;

/// Dynamic table entries remembered (the oldest are forgotten first).
const MAX_ENTRIES: usize = 4_096;
/// Encoder stream bytes held while an instruction is incomplete.
const MAX_PENDING: usize = 16 * 1024;

/// A dynamic table entry, as far as a status needs it: a `:status` name,
/// and its value when that is three digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Status(Option<u16>),
    Other,
}

/// The dynamic table of the server's encoder, from its encoder stream.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Entries by absolute index: `entries[i]` is entry `first + i`.
    entries: VecDeque<Entry>,
    first: u64,
    /// Entries inserted so far (the next absolute index).
    inserted: u64,
    /// The largest capacity the encoder set: the decoder's maximum, as far
    /// as a capture shows it (RFC 9204 §4.5.1.1 needs it).
    max_capacity: u64,
    /// The encoder stream: its ID once its type was read, the next offset
    /// wanted, and the bytes of an incomplete instruction.
    stream: Option<u64>,
    next: u64,
    pending: Vec<u8>,
    /// A gap, or too much pending: the table is no longer known.
    lost: bool,
}

/// The static table's `:status` entries (RFC 9204 Appendix A).
const STATIC_STATUS: [(u64, u16); 14] = [
    (24, 103),
    (25, 200),
    (26, 304),
    (27, 404),
    (28, 503),
    (63, 100),
    (64, 204),
    (65, 206),
    (66, 302),
    (67, 400),
    (68, 403),
    (69, 421),
    (70, 425),
    (71, 500),
];

/// Field lines read before giving up: `:status` comes first.
const MAX_LINES: usize = 8;

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

/// A string with an H bit and an `n`-bit length prefix: its octets.
fn string(b: &[u8], n: u32) -> Option<(Vec<u8>, &[u8])> {
    let coded = b.first()? & (1 << n) != 0;
    let (len, rest) = prefixed(b, n)?;
    let (text, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
    let text = if coded { huffman(text)? } else { text.to_vec() };
    Some((text, rest))
}

/// A status's three digits.
fn digits(value: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(value).ok()?;
    (text.len() == 3).then(|| text.parse().ok()).flatten()
}

/// The `:status` of the response whose request stream begins with `b`,
/// with no dynamic table.
#[cfg(test)]
pub fn status(b: &[u8]) -> Option<u16> {
    Decoder::default().status(b)
}

impl Decoder {
    /// Reads a STREAM frame of the server's unidirectional stream `id` at
    /// `offset`: the encoder stream's type, then its instructions, in
    /// order (a frame that leaves a gap ends the table's knowledge).
    pub fn uni_stream(&mut self, id: u64, offset: u64, data: &[u8]) {
        let data = match self.stream {
            None if offset == 0 => match varint(data) {
                Some((0x02, rest)) => {
                    self.stream = Some(id);
                    self.next = (data.len() - rest.len()) as u64;
                    rest
                }
                _ => return,
            },
            Some(s) if s == id => {
                let Some(skip) = self.next.checked_sub(offset) else {
                    self.lost = true; // a gap
                    return;
                };
                data.get(usize::try_from(skip).unwrap_or(usize::MAX)..)
                    .unwrap_or_default()
            }
            _ => return,
        };
        if self.lost || data.is_empty() {
            return;
        }
        self.next += data.len() as u64;
        self.pending.extend_from_slice(data);
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
            let status_name = if first & 0x40 != 0 {
                STATIC_STATUS.iter().any(|e| e.0 == index)
            } else {
                let absolute = self.inserted.checked_sub(1 + index)?;
                matches!(self.entry(absolute), Some(Entry::Status(_)))
            };
            self.insert(status_name, &value);
            rest
        } else if first & 0x40 != 0 {
            // Insert with a literal name.
            let (name, rest) = string(b, 5)?;
            let (value, rest) = string(rest, 7)?;
            self.insert(name == b":status", &value);
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
            let entry = self.entry(absolute).unwrap_or(Entry::Other);
            self.push(entry);
            rest
        };
        Some(b.len() - rest.len())
    }

    fn insert(&mut self, status_name: bool, value: &[u8]) {
        let entry = match status_name {
            true => Entry::Status(digits(value)),
            false => Entry::Other,
        };
        self.push(entry);
    }

    fn push(&mut self, entry: Entry) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.pop_front();
            self.first += 1;
        }
        self.entries.push_back(entry);
        self.inserted += 1;
    }

    fn entry(&self, absolute: u64) -> Option<Entry> {
        let i = usize::try_from(absolute.checked_sub(self.first)?).ok()?;
        self.entries.get(i).copied()
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

    /// The `:status` of the response whose request stream begins with `b`.
    pub fn status(&self, b: &[u8]) -> Option<u16> {
        let (ty, rest) = varint(b)?;
        if ty != 0x01 {
            return None; // not HEADERS
        }
        let (len, rest) = varint(rest)?;
        let block = rest.get(..usize::try_from(len).ok()?).unwrap_or(rest);
        let (encoded, block) = prefixed(block, 8)?;
        let ric = self.required_insert_count(encoded)?;
        let sign = block.first()? & 0x80 != 0;
        let (delta, mut line) = prefixed(block, 7)?;
        let base = if sign {
            ric.checked_sub(delta + 1)?
        } else {
            ric.checked_add(delta)?
        };
        let static_status = |i: u64| STATIC_STATUS.iter().find(|e| e.0 == i).map(|e| e.1);
        // What a dynamic entry says of the status: Some(code) for a
        // `:status` entry (code unknown if not yet seen), None for another.
        let dynamic = |absolute: Option<u64>| match absolute.and_then(|a| self.entry(a)) {
            Some(Entry::Status(code)) => Some(code),
            Some(Entry::Other) => None,
            None => Some(None),
        };
        for _ in 0..MAX_LINES {
            let first = *line.first()?;
            let found = if first & 0x80 != 0 {
                // Indexed field line: static (T) or dynamic.
                let (index, rest) = prefixed(line, 6)?;
                line = rest;
                if first & 0x40 != 0 {
                    static_status(index).map(Some)
                } else {
                    dynamic(base.checked_sub(index + 1))
                }
            } else if first & 0x40 != 0 {
                // Literal with a name reference.
                let (index, rest) = prefixed(line, 4)?;
                let (value, rest) = string(rest, 7)?;
                line = rest;
                let status_name = if first & 0x10 != 0 {
                    static_status(index).is_some()
                } else {
                    dynamic(base.checked_sub(index + 1)).is_some()
                };
                status_name.then(|| digits(&value))
            } else if first & 0x20 != 0 {
                // Literal with a literal name.
                let (name, rest) = string(line, 3)?;
                let (value, rest) = string(rest, 7)?;
                line = rest;
                (name == b":status").then(|| digits(&value))
            } else if first & 0x10 != 0 {
                // Indexed with a post-base index.
                let (index, rest) = prefixed(line, 4)?;
                line = rest;
                dynamic(base.checked_add(index))
            } else {
                // Literal with a post-base name reference.
                let (index, rest) = prefixed(line, 3)?;
                let (value, rest) = string(rest, 7)?;
                line = rest;
                dynamic(base.checked_add(index)).map(|_| digits(&value))
            };
            if let Some(code) = found {
                return code;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A HEADERS frame with the field section prefix 0, 0 and `lines`.
    fn headers(lines: &[u8]) -> Vec<u8> {
        [&[0x01, 2 + lines.len() as u8, 0, 0][..], lines].concat()
    }

    #[test]
    fn statuses_static_literal_and_huffman_coded() {
        // Indexed static 25 (:status 200).
        assert_eq!(status(&headers(&[0xc0 | 25])), Some(200));
        // Indexed static 71 (:status 500), index past the 6-bit prefix.
        assert_eq!(status(&headers(&[0xff, 71 - 63])), Some(500));
        // Literal with static name reference 24 (:status), value "429".
        assert_eq!(
            status(&headers(&[0x5f, 24 - 15, 3, b'4', b'2', b'9'])),
            Some(429)
        );
        // The same, Huffman-coded: '4' 011010, '2' 00010, '9' 011111, EOS
        // padding: 0110 1000 0100 1111 11 + 111111 = 0x68 0x4f 0xff.
        assert_eq!(
            status(&headers(&[0x5f, 24 - 15, 0x83, 0x68, 0x4f, 0xff])),
            Some(429)
        );
        // A literal name ":status".
        let mut lines = vec![0x27, 0x00];
        lines.extend_from_slice(b":status");
        lines.extend_from_slice(&[3, b'2', b'0', b'4']);
        assert_eq!(status(&headers(&lines)), Some(204));
        // After another static field.
        assert_eq!(status(&headers(&[0xc0 | 31, 0xc0 | 27])), Some(404));
    }

    #[test]
    fn statuses_from_the_dynamic_table() {
        let mut d = Decoder::default();
        // The encoder stream: its type (0x02), a capacity of 4 096, then
        // :status 429 inserted with a static name reference (24), and a
        // literal `x-a: b`; split over two frames.
        let stream = [
            0x02,
            0x3f,
            0xe1,
            0x1f,
            0xc0 | 24,
            3,
            b'4',
            b'2',
            b'9',
            0x43,
            b'x',
            b'-',
            b'a',
            1,
            b'b',
        ];
        d.uni_stream(3, 0, &stream[..6]);
        d.uni_stream(3, 6, &stream[6..]);
        assert_eq!((d.inserted, d.max_capacity), (2, 4096));
        // A field section with Required Insert Count 2 (encoded 3), Base 2:
        // the entry before the base twice removed is :status 429 …
        assert_eq!(d.status(&headers_with(3, 0x00, &[0x81])), Some(429));
        // … so is the post-base index 0 with Base 0 (S set, delta 1: 2 − 1 − 1).
        assert_eq!(d.status(&headers_with(3, 0x81, &[0x10])), Some(429));
        // The other entry is no status; an entry not seen yet tells none.
        assert_eq!(d.status(&headers_with(3, 0x00, &[0x80])), None);
        assert_eq!(d.status(&headers_with(3, 0x00, &[0x11])), None);
        // A gap on the encoder stream: nothing more is learned.
        d.uni_stream(3, 40, &[0xc0 | 25, 0]);
        assert_eq!(d.inserted, 2);
    }

    /// A HEADERS frame with Required Insert Count `ric` (encoded), the
    /// delta-base byte `base` and `lines`.
    fn headers_with(ric: u8, base: u8, lines: &[u8]) -> Vec<u8> {
        [&[0x01, 2 + lines.len() as u8, ric, base][..], lines].concat()
    }

    #[test]
    fn anything_else_is_no_status() {
        assert_eq!(status(&[0x00, 0x03, 1, 2, 3]), None, "a DATA frame");
        assert_eq!(status(&headers(&[0x80 | 5])), None, "a dynamic entry");
        assert_eq!(status(&headers(&[0x5f, 9, 5, b'4', b'2'])), None, "cut");
        assert_eq!(
            status(&headers(&[0x5f, 9, 0x83, 0xff, 0xff, 0xff])),
            None,
            "EOS"
        );
        assert_eq!(
            status(&headers(&[0x5f, 9, 2, b'4', b'2'])),
            None,
            "two digits"
        );
        assert_eq!(
            status(&[0x01, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        assert_eq!(status(&[]), None);
    }
}
