//! The heads of HTTP/3 request and response streams: the bytes from a
//! stream's start to the end of its first HEADERS frame, gathered across
//! STREAM frames — in any order, sent again or not — so the fields of a
//! request whose headers do not fit in one packet (a browser's cookies)
//! are read as those of a short one.
//!
//! Owns the held bytes and their bounds. Does not decode a field section
//! (`qpack`) nor decide what a stream is (`app`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use super::app::MAX_OPEN_STREAMS;
use super::qpack::{head_needed, Need};
use super::reorder::{Bounds, Reorder};

/// The longest head gathered; past it, what was gathered is read as it
/// is (a field section's pseudo-header fields come first).
const MAX_HEAD: usize = 16 * 1024;
/// Pieces of a stream held ahead of the bytes gathered.
const MAX_AHEAD: usize = 8;
/// Bytes held for all heads of a side of a connection; past it (or past
/// [`MAX_OPEN_STREAMS`] heads) the lowest stream's (the oldest) are
/// forgotten.
const MAX_HELD: usize = 256 * 1024;

/// One stream's head as far as it came.
#[derive(Debug, Default)]
struct Head {
    /// The stream's bytes from offset 0, in order.
    bytes: Vec<u8>,
    /// Its pieces put in order.
    order: Reorder,
}

impl Head {
    fn held(&self) -> usize {
        self.bytes.len() + self.order.held()
    }

    /// Adds the stream bytes `data` at `offset`, up to [`MAX_HEAD`]: a
    /// piece ahead of the bytes gathered is held (at most [`MAX_AHEAD`]
    /// pieces, none from past [`MAX_HEAD`]) or, when it cannot be, ignored —
    /// a head that never completes is forgotten with the oldest.
    fn add(&mut self, offset: u64, data: &[u8]) {
        let bounds = Bounds {
            pieces: MAX_AHEAD,
            reach: MAX_HEAD as u64,
        };
        let bytes = &mut self.bytes;
        let _ignored = self.order.add(offset, data, bounds, usize::MAX, |new| {
            let room = MAX_HEAD.saturating_sub(bytes.len());
            bytes.extend_from_slice(new.get(..room).unwrap_or(new));
        });
    }
}

/// What a STREAM frame did for its stream's head.
#[derive(Debug, PartialEq, Eq)]
pub enum Gathered<'a> {
    /// The head is whole (or as whole as it will be): read it — in place
    /// when one frame held it, else the bytes gathered.
    Whole(Cow<'a, [u8]>),
    /// More is to come.
    Waiting,
    /// The stream does not begin with HEADERS, or its head was read
    /// already, or forgotten: nothing to read.
    Nothing,
}

/// The heads of one side's streams.
#[derive(Debug, Default)]
pub struct Heads {
    /// Streams whose heads are being gathered.
    open: BTreeMap<u64, Head>,
    /// Streams whose heads were read or given up: their later frames pass.
    done: BTreeSet<u64>,
    held: usize,
}

impl Heads {
    /// Notes the STREAM frame of `stream` at `offset`. A frame at offset 0
    /// holding the whole head is read in place, nothing copied.
    pub fn add<'a>(&mut self, stream: u64, offset: u64, data: &'a [u8]) -> Gathered<'a> {
        if self.done.contains(&stream) {
            return Gathered::Nothing;
        }
        if offset == 0 && !self.open.contains_key(&stream) {
            match head_needed(data) {
                Need::Whole(n) => {
                    self.finish(stream);
                    return Gathered::Whole(Cow::Borrowed(data.get(..n).unwrap_or(data)));
                }
                Need::NotHeaders => {
                    self.finish(stream);
                    return Gathered::Nothing;
                }
                Need::More(_) => {}
            }
        }
        let head = self.open.entry(stream).or_default();
        let before = head.held();
        head.add(offset, data);
        let after = head.held();
        let need = head_needed(&head.bytes);
        self.held = (self.held + after).saturating_sub(before);
        let whole = match need {
            Need::Whole(n) => Some(n),
            Need::More(n) if n > MAX_HEAD && head.bytes.len() >= MAX_HEAD => Some(MAX_HEAD),
            Need::NotHeaders => {
                self.forget(stream);
                self.finish(stream);
                return Gathered::Nothing;
            }
            Need::More(_) => None,
        };
        if let Some(n) = whole {
            let mut bytes = self.forget(stream).map(|h| h.bytes).unwrap_or_default();
            self.finish(stream);
            bytes.truncate(n);
            return Gathered::Whole(Cow::Owned(bytes));
        }
        while self.held > MAX_HELD || self.open.len() > MAX_OPEN_STREAMS {
            let Some((&oldest, _)) = self.open.first_key_value() else {
                break;
            };
            self.forget(oldest);
            self.finish(oldest);
        }
        Gathered::Waiting
    }

    /// Its side ended `stream` (a FIN): the head stops being gathered,
    /// and what was held is given back — unless pieces are held ahead of
    /// a gap, which the FIN may have overtaken (the bytes sent again fill
    /// it; a head that never completes is forgotten with the oldest).
    pub fn end(&mut self, stream: u64) {
        if self.open.get(&stream).is_some_and(|h| h.order.held() == 0) {
            self.forget(stream);
        }
    }

    fn forget(&mut self, stream: u64) -> Option<Head> {
        let head = self.open.remove(&stream)?;
        self.held = self.held.saturating_sub(head.held());
        Some(head)
    }

    /// Marks `stream`'s head as read; the marks kept are bounded by the
    /// streams open at once (the lowest are dropped: those streams' later
    /// frames are past their heads' bytes anyway, or start a head that
    /// never completes and is forgotten with the oldest).
    fn finish(&mut self, stream: u64) {
        self.done.insert(stream);
        if self.done.len() > 2 * MAX_OPEN_STREAMS {
            self.done.pop_first();
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A HEADERS frame with a field section of `len` bytes of `fill`.
    fn headers(len: usize, fill: u8) -> Vec<u8> {
        let mut f = vec![0x01];
        match len {
            0..=63 => f.push(len as u8),
            _ => f.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]),
        }
        f.extend(std::iter::repeat_n(fill, len));
        f
    }

    #[test]
    fn a_head_in_one_frame_is_read_in_place_once() {
        let mut heads = Heads::default();
        let mut frame = headers(20, 7);
        frame.extend_from_slice(&[0x00, 0x02, 9, 9]); // DATA after it
        assert!(matches!(heads.add(0, 0, &frame), Gathered::Whole(b) if b.len() == 22));
        assert_eq!(heads.add(0, 0, &frame), Gathered::Nothing, "sent again");
        assert_eq!(heads.add(0, 26, &[1]), Gathered::Nothing);
        assert_eq!(heads.held(), 0);
    }

    #[test]
    fn a_head_over_several_frames_in_any_order_is_whole_at_its_last() {
        let head = headers(3000, 5);
        let (a, rest) = head.split_at(1200);
        let (b, c) = rest.split_at(1200);
        let mut heads = Heads::default();
        // The third piece first, the first twice, then the second.
        assert_eq!(heads.add(4, 2400, c), Gathered::Waiting);
        assert_eq!(heads.add(4, 0, a), Gathered::Waiting);
        assert_eq!(heads.add(4, 0, a), Gathered::Waiting);
        assert_eq!(heads.held(), 1200 + c.len());
        match heads.add(4, 1200, b) {
            Gathered::Whole(got) => assert_eq!(got, &head[..]),
            other => panic!("{other:?}"),
        }
        assert_eq!(heads.held(), 0);
        // A piece overlapping what came before adds only what is new.
        let mut heads = Heads::default();
        assert_eq!(heads.add(8, 0, &head[..100]), Gathered::Waiting);
        assert_eq!(heads.add(8, 50, &head[50..2000]), Gathered::Waiting);
        assert!(matches!(heads.add(8, 1990, &head[1990..]), Gathered::Whole(g) if g == &head[..]));
    }

    #[test]
    fn a_fin_that_overtakes_the_start_keeps_the_head_until_the_gap_fills() {
        let head = headers(2000, 3);
        let mut heads = Heads::default();
        // The last piece, with the FIN, before the first.
        assert_eq!(heads.add(0, 1000, &head[1000..]), Gathered::Waiting);
        heads.end(0);
        assert!(matches!(heads.add(0, 0, &head[..1000]), Gathered::Whole(g) if g == &head[..]));
        // With nothing held ahead, a FIN gives the bytes back.
        assert_eq!(heads.add(4, 0, &head[..1000]), Gathered::Waiting);
        heads.end(4);
        assert_eq!(heads.held(), 0);
    }

    #[test]
    fn streams_that_start_otherwise_give_nothing() {
        let mut heads = Heads::default();
        assert_eq!(
            heads.add(0, 0, &[0x00, 0x03, 1, 2, 3]),
            Gathered::Nothing,
            "DATA"
        );
        // A DATA frame known only once the second piece comes.
        assert_eq!(heads.add(4, 1, &[0x03, 1]), Gathered::Waiting);
        assert_eq!(heads.add(4, 0, &[0x00]), Gathered::Nothing);
        assert_eq!(heads.held(), 0);
    }

    #[test]
    fn held_bytes_are_bounded() {
        let mut heads = Heads::default();
        // An endless head is read as far as the bound.
        let big = headers(40_000, 1);
        let mut got = None;
        for (i, piece) in big.chunks(1000).enumerate() {
            if let Gathered::Whole(b) = heads.add(0, i as u64 * 1000, piece) {
                got = Some(b.len());
                break;
            }
        }
        assert_eq!(got, Some(MAX_HEAD));
        // Many heads that never complete: the oldest are forgotten.
        for s in 0..1000u64 {
            let _ = heads.add(4 * s + 4, 0, &headers(5000, 2)[..1000]);
            assert!(heads.held() <= MAX_HELD);
        }
        // Pieces far ahead are not held, nor more heads than streams open.
        let before = heads.held();
        for s in 0..3000u64 {
            assert_eq!(heads.add(9999 + s, 1 << 40, &[1; 10]), Gathered::Waiting);
        }
        assert!(heads.held() <= before);
        assert_eq!(heads.open.len(), MAX_OPEN_STREAMS);
    }
}
