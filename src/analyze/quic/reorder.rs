//! A QUIC stream's bytes put back in order: pieces (CRYPTO or STREAM
//! frames' data) come in any order, split over packets and sent again;
//! each byte is handed on once, in stream order, as soon as everything
//! before it came. Pieces that come ahead of their turn are held, within
//! the bounds the caller gives.
//!
//! Owns the held pieces and the stream offset reached. Does not read the
//! bytes it hands on (the Initial's first message, the Handshake flights'
//! messages, an HTTP/3 head: `stream`, `handshake`, `heads`) or decide what
//! a refused piece means for the stream.

use std::collections::BTreeMap;

/// What a stream holds ahead of its turn at most.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Pieces held ahead.
    pub pieces: usize,
    /// No piece held that starts at or past this stream offset.
    pub reach: u64,
}

/// A piece that could not be held (too many ahead, too far, over the
/// budget, or its end past any offset).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused;

/// One stream's order.
#[derive(Debug, Default)]
pub struct Reorder {
    /// Stream bytes handed on so far.
    next: u64,
    /// Pieces past `next`, by offset.
    ahead: BTreeMap<u64, Vec<u8>>,
    ahead_bytes: usize,
}

impl Reorder {
    /// Bytes held ahead.
    pub fn held(&self) -> usize {
        self.ahead_bytes
    }

    /// Takes the piece `data` at stream offset `offset`: hands `deliver`
    /// what of it is new, if it meets the bytes handed on, and then the
    /// pieces held that now follow; holds it if it is ahead, growing the
    /// bytes held by at most `budget`. A piece already handed on is
    /// dropped; a piece ahead that cannot be held is refused and nothing
    /// changes.
    pub fn add(
        &mut self,
        offset: u64,
        data: &[u8],
        bounds: Bounds,
        budget: usize,
        mut deliver: impl FnMut(&[u8]),
    ) -> Result<(), Refused> {
        let end = offset.checked_add(data.len() as u64).ok_or(Refused)?;
        if end <= self.next {
            return Ok(()); // sent again
        }
        if offset > self.next {
            let known = self.ahead.get(&offset).map_or(0, Vec::len);
            if data.len() <= known {
                return Ok(());
            }
            let grows = data.len() - known;
            let full = known == 0 && self.ahead.len() >= bounds.pieces;
            if full || offset >= bounds.reach || grows > budget {
                return Err(Refused);
            }
            self.ahead.insert(offset, data.to_vec());
            self.ahead_bytes += grows;
            return Ok(());
        }
        self.pass(offset, data, &mut deliver);
        while let Some(entry) = self.ahead.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (at, piece) = entry.remove_entry();
            self.ahead_bytes -= piece.len();
            self.pass(at, &piece, &mut deliver);
        }
        Ok(())
    }

    /// Hands on what of `data` at `offset` (not past `next`) is new.
    fn pass(&mut self, offset: u64, data: &[u8], deliver: &mut impl FnMut(&[u8])) {
        let skip = usize::try_from(self.next - offset).unwrap_or(usize::MAX);
        if let Some(new) = data.get(skip..).filter(|new| !new.is_empty()) {
            deliver(new);
            self.next += new.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDE: Bounds = Bounds {
        pieces: 4,
        reach: 1 << 20,
    };

    fn add(r: &mut Reorder, offset: u64, data: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
        r.add(offset, data, WIDE, usize::MAX, |b| out.extend_from_slice(b))
    }

    #[test]
    fn pieces_in_any_order_and_repeated_come_out_once_in_order() {
        let stream: Vec<u8> = (0..=255).collect();
        let (mut r, mut out) = (Reorder::default(), Vec::new());
        add(&mut r, 200, &stream[200..], &mut out).unwrap();
        add(&mut r, 10, &stream[10..100], &mut out).unwrap();
        add(&mut r, 10, &stream[10..120], &mut out).unwrap(); // longer: kept
        assert!(out.is_empty());
        assert_eq!(r.held(), 56 + 110);
        add(&mut r, 0, &stream[..20], &mut out).unwrap();
        assert_eq!(out, &stream[..120]);
        add(&mut r, 50, &stream[50..210], &mut out).unwrap(); // overlaps both sides
        assert_eq!(out, stream);
        assert_eq!(r.held(), 0);
        add(&mut r, 0, &stream, &mut out).unwrap(); // sent again
        assert_eq!(out, stream);
    }

    #[test]
    fn pieces_that_cannot_be_held_are_refused_and_change_nothing() {
        let (mut r, mut out) = (Reorder::default(), Vec::new());
        for i in 0..4 {
            add(&mut r, 10 + 10 * i, &[1], &mut out).unwrap();
        }
        assert_eq!(
            add(&mut r, 100, &[1], &mut out),
            Err(Refused),
            "a fifth piece"
        );
        add(&mut r, 10, &[1, 1], &mut out).unwrap(); // a known one grows
        assert_eq!(
            add(&mut r, 1 << 20, &[1], &mut out),
            Err(Refused),
            "too far"
        );
        assert_eq!(add(&mut r, u64::MAX, &[1, 2], &mut out), Err(Refused));
        let mut small = Reorder::default();
        let over = small.add(5, &[0; 10], WIDE, 9, |_| {});
        assert_eq!((over, small.held()), (Err(Refused), 0), "over the budget");
        assert_eq!(r.held(), 5);
        assert!(out.is_empty());
    }
}
