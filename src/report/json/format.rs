//! serde_json's compact and pretty output (the pretty one able to start at
//! a depth: [`Pretty`]) with one shortcut: a number that is a whole count
//! of microseconds — nearly every number in a record: capture times,
//! offsets into the capture, durations — is written from that count with
//! `itoa`, not through the general shortest-digits float formatting (a
//! fifth of the time JSON Lines took to encode a short connection's record).
//! The text is the same, byte for byte: [`micros`] says where that holds
//! and why, and anything else goes to serde_json's own formatting. Also
//! [`reindent`], compact text laid out as the pretty printer would.
//!
//! Does not decide what is written, only how a float is spelled and where
//! the lines break.

use std::io;

use serde_json::ser::{CompactFormatter, Formatter};

/// [`CompactFormatter`], writing microsecond counts directly.
#[derive(Clone, Copy, Debug, Default)]
pub struct Compact;

impl Formatter for Compact {
    #[inline]
    fn write_f64<W>(&mut self, writer: &mut W, value: f64) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let mut text = [0u8; 32];
        match micros(value, &mut text) {
            Some(len) => writer.write_all(text.get(..len).unwrap_or_default()),
            None => CompactFormatter.write_f64(writer, value),
        }
    }
}

/// serde_json's [`PrettyFormatter`] layout (two-space indents), for a
/// value printed where it reads nested `depth` levels deep — the
/// formatter has no such start, and a value printed at depth 0 and then
/// re-indented took a fifth of `-T json`'s time — and writing microsecond
/// counts directly like [`Compact`]. The same bytes as serde_json's
/// (`json/document/tests.rs` compares whole documents on every capture).
#[derive(Clone, Copy, Debug)]
pub struct Pretty {
    depth: usize,
    has_value: bool,
}

/// Spaces, written a slice at a time.
const SPACES: &[u8; 64] = b"                                                                ";

/// A line break and the indentation of `depth` levels (two spaces each):
/// how [`Pretty`] and [`reindent`] both start a line.
fn line_break<W>(writer: &mut W, depth: usize) -> io::Result<()>
where
    W: ?Sized + io::Write,
{
    writer.write_all(b"\n")?;
    let mut left = depth * 2;
    while left > 0 {
        let now = left.min(SPACES.len());
        writer.write_all(SPACES.get(..now).unwrap_or_default())?;
        left -= now;
    }
    Ok(())
}

impl Pretty {
    /// For a value whose enclosing lines are indented `depth` levels.
    pub fn nested(depth: usize) -> Pretty {
        Pretty {
            depth,
            has_value: false,
        }
    }

    /// A newline (after `before`: "" or ",") and this depth's indentation.
    fn newline<W>(&self, writer: &mut W, before: &[u8]) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        writer.write_all(before)?;
        line_break(writer, self.depth)
    }

    fn begin<W>(&mut self, writer: &mut W, open: &[u8]) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        self.depth += 1;
        self.has_value = false;
        writer.write_all(open)
    }

    fn end<W>(&mut self, writer: &mut W, close: &[u8]) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        self.depth = self.depth.saturating_sub(1);
        if self.has_value {
            self.newline(writer, b"")?;
        }
        writer.write_all(close)
    }

    fn item<W>(&mut self, writer: &mut W, first: bool) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        self.newline(writer, if first { b"" } else { b"," })
    }
}

/// A container's four layout calls (arrays and objects are laid out alike:
/// an object's keys begin its items, and its values end them).
macro_rules! container {
    ($begin:ident, $end:ident, $begin_item:ident, $end_item:ident, $open:literal, $close:literal) => {
        #[inline]
        fn $begin<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
            self.begin(writer, $open)
        }

        #[inline]
        fn $end<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
            self.end(writer, $close)
        }

        #[inline]
        fn $begin_item<W: ?Sized + io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> io::Result<()> {
            self.item(writer, first)
        }

        #[inline]
        fn $end_item<W: ?Sized + io::Write>(&mut self, _writer: &mut W) -> io::Result<()> {
            self.has_value = true;
            Ok(())
        }
    };
}

impl Formatter for Pretty {
    container!(
        begin_array,
        end_array,
        begin_array_value,
        end_array_value,
        b"[",
        b"]"
    );
    container!(
        begin_object,
        end_object,
        begin_object_key,
        end_object_value,
        b"{",
        b"}"
    );

    #[inline]
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    #[inline]
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        Compact.write_f64(writer, value)
    }
}

/// Below this the float formatting writes an exponent (`1e-6`).
const SMALLEST: f64 = 1e-5;
/// 2^33 seconds (the year 2242): below it one microsecond is more than an
/// f64's spacing, so no two counts of microseconds share a float.
const LARGEST: f64 = 8_589_934_592.0;

/// Writes `value` into `out` as serde_json writes it, and returns the
/// length, when `value` is the float nearest to a whole count N of
/// microseconds with 10 µs ≤ |value| < 2^33 s; `None` otherwise.
///
/// Why the text is the same: serde_json writes the shortest decimal that
/// reads back as `value`, in fixed notation between 1e-5 and 1e16. Every
/// decimal with at most six fractional digits is a count of microseconds,
/// and below 2^33 two counts never round to the same float (its spacing
/// there is at most 2^-20 s < 1 µs), so N / 10^6 is the only such decimal
/// that reads back as `value`; one with fewer digits would be a count too,
/// so it is the shortest: N's digits, with trailing zeros after the point
/// dropped (and `.0` for a whole number). Whether `value` is the float
/// nearest to N / 10^6 is checked by computing that float (a correctly
/// rounded division), not assumed.
fn micros(value: f64, out: &mut [u8; 32]) -> Option<usize> {
    let magnitude = value.abs();
    if !(SMALLEST..LARGEST).contains(&magnitude) {
        return None;
    }
    let count = (magnitude * 1e6).round();
    if count / 1e6 != magnitude {
        return None;
    }
    // Below 2^33 × 10^6 < 2^53: exact as an integer. Its digits, with the
    // point put in six from the end.
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(count as u64).as_bytes();
    let (whole, six): (&[u8], [u8; 6]) = match digits.len().checked_sub(6) {
        Some(split) if split > 0 => {
            let (whole, low) = digits.split_at(split);
            (whole, low.try_into().unwrap_or([b'0'; 6]))
        }
        _ => {
            let mut six = [b'0'; 6];
            if let Some(tail) = six.get_mut(6 - digits.len()..) {
                tail.copy_from_slice(digits);
            }
            (b"0", six)
        }
    };
    let kept = 6 - six.iter().rev().take_while(|&&d| d == b'0').count();
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        if let Some(slot) = out.get_mut(len..len + bytes.len()) {
            slot.copy_from_slice(bytes);
            len += bytes.len();
        }
    };
    if value < 0.0 {
        put(b"-");
    }
    put(whole);
    put(b".");
    put(six.get(..kept.max(1)).unwrap_or_default());
    Some(len)
}

/// Writes `compact` — a value as [`Compact`] (serde_json's compact layout)
/// wrote it — into `out` as [`Pretty::nested`]`(depth)` writes the same
/// value: a line and two spaces a level after each `{`, `[` and `,` and
/// before each `}` and `]`, `{}` and `[]` when empty, `": "` between a key
/// and its value; strings and numbers copied as they are. So `-T json`
/// can keep its records' text compact (about half the bytes) until it
/// prints them (`json/document/tests.rs` holds the result to serde_json's
/// whole document on every capture).
pub fn reindent(compact: &[u8], depth: usize, out: &mut Vec<u8>) {
    // Writing to a `Vec` does not fail.
    let line = |out: &mut Vec<u8>, level: usize| {
        let _ = line_break(out, level);
    };
    // The pretty text is about twice the compact one.
    out.reserve(2 * compact.len());
    let mut level = depth;
    let mut rest = compact;
    while let Some((&b, after)) = rest.split_first() {
        match b {
            b'"' => {
                // Through the closing quote: the first not escaped.
                let mut end = 1;
                while let Some(k) = rest
                    .get(end..)
                    .and_then(|r| r.iter().position(|&c| c == b'"' || c == b'\\'))
                {
                    if rest.get(end + k) == Some(&b'"') {
                        end += k + 1;
                        break;
                    }
                    end += k + 2;
                }
                let (string, tail) = rest.split_at(end.min(rest.len()));
                out.extend_from_slice(string);
                rest = tail;
                continue;
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                if after.first() == Some(&close) {
                    out.extend_from_slice(&[b, close]);
                    rest = after.get(1..).unwrap_or_default();
                    continue;
                }
                out.push(b);
                level += 1;
                line(out, level);
            }
            b'}' | b']' => {
                level = level.saturating_sub(1);
                line(out, level);
                out.push(b);
            }
            b',' => {
                out.push(b',');
                line(out, level);
            }
            b':' => out.extend_from_slice(b": "),
            _ => {
                // A number, `true`, `false` or `null`: up to what ends it.
                let end = rest
                    .iter()
                    .position(|c| matches!(c, b',' | b'}' | b']'))
                    .unwrap_or(rest.len());
                let (scalar, tail) = rest.split_at(end);
                out.extend_from_slice(scalar);
                rest = tail;
                continue;
            }
        }
        rest = after;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What serde_json writes for `value`, and what [`Compact`] writes.
    fn both(value: f64) -> (String, String) {
        let plain = serde_json::to_string(&value).unwrap_or_default();
        let mut ours = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut ours, Compact);
        serde::Serialize::serialize(&value, &mut ser).unwrap_or_else(|e| panic!("{e}"));
        (plain, String::from_utf8(ours).unwrap_or_default())
    }

    fn check(value: f64) {
        let (plain, ours) = both(value);
        assert_eq!(plain, ours, "{value:e} (bits {:#x})", value.to_bits());
    }

    #[test]
    fn every_count_of_microseconds_under_two_seconds_is_written_the_same() {
        let mut fast = 0u64;
        for n in 0..2_000_000i64 {
            for v in [n as f64 / 1e6, -(n as f64) / 1e6] {
                check(v);
                fast += u64::from(micros(v, &mut [0; 32]).is_some());
            }
        }
        // All but 0..9 µs (exponent notation) took the shortcut.
        assert_eq!(fast, 2 * (2_000_000 - 10));
    }

    #[test]
    fn timestamps_and_their_neighbours_are_written_the_same() {
        // Capture times (seconds since 1970) from 1990 to past 2^33 s, with
        // microseconds, and the floats next to each (not counts: the
        // general formatting writes them).
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut fast = 0;
        for _ in 0..300_000 {
            let secs = 631_152_000 + next() % 8_100_000_000;
            let v = (secs * 1_000_000 + next() % 1_000_000) as f64 / 1e6;
            for w in [
                v,
                f64::from_bits(v.to_bits() + 1),
                f64::from_bits(v.to_bits() - 1),
            ] {
                check(w);
                fast += usize::from(micros(w, &mut [0; 32]).is_some());
            }
            // Nanosecond captures: the general formatting.
            let ns = (secs as f64) + (next() % 1_000_000_000) as f64 / 1e9;
            check(ns);
        }
        assert!(fast >= 300_000, "the shortcut took only {fast}");
    }

    #[test]
    fn edges_and_arbitrary_floats_are_written_the_same() {
        for v in [
            0.0,
            -0.0,
            1e-6,
            9e-6,
            1e-5,
            1e-5 + 1e-6,
            0.5,
            1.0,
            1e15,
            1e16,
            LARGEST,
            LARGEST - 1e-6,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::EPSILON,
        ] {
            check(v);
            check(-v);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let v = f64::from_bits(state);
            if v.is_finite() {
                check(v);
            }
        }
    }
}
