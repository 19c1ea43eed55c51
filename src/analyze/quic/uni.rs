//! Which of a peer's unidirectional streams is its QPACK encoder stream
//! (RFC 9204 §4.2: the stream whose first byte, its type, is 0x02), and
//! that stream's bytes put in order — pieces may come in any order, the
//! stream's start among them — for the decoder to read.
//!
//! Owns the pieces held while a stream's type or an earlier piece is
//! missing. Does not read instructions (`qpack`) or other streams' bytes
//! (a control stream's SETTINGS are not read).

use super::reorder::{Bounds, Refused, Reorder};
use crate::decode::varint;

/// The encoder stream's type.
const ENCODER: u64 = 0x02;
/// Streams whose type has not come yet, followed at once (a peer opens
/// three: control, encoder and decoder, RFC 9114 §6.2).
const MAX_UNTYPED: usize = 4;
/// Streams known to be of another type, remembered (the oldest
/// forgotten).
const MAX_OTHERS: usize = 8;
/// Pieces of a stream held ahead of its bytes in order.
const BOUNDS: Bounds = Bounds {
    pieces: 16,
    reach: u64::MAX,
};

/// A peer's unidirectional streams, as far as finding its encoder stream.
#[derive(Debug, Default)]
pub struct EncoderStream {
    /// The encoder stream, once its type was read.
    found: Option<(u64, Reorder)>,
    /// Streams whose first byte has not come yet.
    untyped: Vec<(u64, Reorder)>,
    /// Streams of another type.
    others: Vec<u64>,
}

impl EncoderStream {
    /// Bytes held ahead of their turn.
    pub fn held(&self) -> usize {
        let found = self.found.as_ref().map_or(0, |(_, r)| r.held());
        found + self.untyped.iter().map(|(_, r)| r.held()).sum::<usize>()
    }

    /// Takes a STREAM frame of the unidirectional stream `id` at `offset`,
    /// holding at most `budget` more bytes; appends to `out` the encoder
    /// stream's bytes (after its type) it puts in order. `Err` when a
    /// piece of the encoder stream could not be held: its later bytes
    /// are not in order any more. A piece of a stream not known yet that
    /// cannot be held forgets that stream.
    pub fn add(
        &mut self,
        id: u64,
        offset: u64,
        data: &[u8],
        budget: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Refused> {
        if let Some((found, order)) = &mut self.found {
            if *found == id {
                order.add(offset, data, BOUNDS, budget, |b| out.extend_from_slice(b))?;
            }
            return Ok(());
        }
        if self.others.contains(&id) {
            return Ok(());
        }
        let at = match self.untyped.iter().position(|(s, _)| *s == id) {
            Some(at) => at,
            None if self.untyped.len() < MAX_UNTYPED => {
                self.untyped.push((id, Reorder::default()));
                self.untyped.len() - 1
            }
            None => return Ok(()),
        };
        let mut first = Vec::new();
        let Some((_, order)) = self.untyped.get_mut(at) else {
            return Ok(());
        };
        let added = order.add(offset, data, BOUNDS, budget, |b| first.extend_from_slice(b));
        if added.is_err() {
            self.untyped.remove(at);
            return Ok(());
        }
        if first.is_empty() {
            return Ok(());
        }
        let (_, order) = self.untyped.remove(at);
        match varint(&first) {
            Some((ENCODER, rest)) => {
                out.extend_from_slice(rest);
                self.found = Some((id, order));
                self.untyped = Vec::new();
                self.others = Vec::new();
            }
            // Another type (a type's varint cut short is never 0x02).
            _ => {
                if self.others.len() >= MAX_OTHERS {
                    self.others.remove(0);
                }
                self.others.push(id);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoder_stream_is_found_and_read_in_order_whatever_comes_first() {
        let mut e = EncoderStream::default();
        let mut out = Vec::new();
        // The control stream (type 0) and the decoder stream (3) pass.
        e.add(3, 0, &[0x00, 0x04, 0x00], 1 << 14, &mut out).unwrap();
        e.add(11, 0, &[0x03], 1 << 14, &mut out).unwrap();
        // The encoder stream's second and third pieces before its first.
        e.add(7, 4, b"efgh", 1 << 14, &mut out).unwrap();
        e.add(7, 8, b"ij", 1 << 14, &mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(e.held(), 6);
        e.add(7, 0, &[0x02, b'b', b'c', b'd'], 1 << 14, &mut out)
            .unwrap();
        assert_eq!(out, b"bcdefghij");
        assert_eq!(e.held(), 0);
        // Later frames of other streams pass; the encoder's go on.
        e.add(3, 3, &[9; 30], 1 << 14, &mut out).unwrap();
        e.add(7, 10, b"k", 1 << 14, &mut out).unwrap();
        assert_eq!(out, b"bcdefghijk");
    }

    #[test]
    fn what_cannot_be_held_is_refused_or_forgotten() {
        let mut e = EncoderStream::default();
        let mut out = Vec::new();
        // Streams beyond the four followed at once are not.
        for s in 0..6u64 {
            e.add(4 * s + 2, 5, &[1; 10], 1 << 14, &mut out).unwrap();
        }
        assert_eq!(e.held(), 40);
        // A piece over the budget forgets an untyped stream …
        e.add(2, 100, &[1; 100], 10, &mut out).unwrap();
        assert_eq!(e.held(), 30);
        // … and is refused on the encoder stream.
        e.add(6, 0, &[0x02, 1, 1, 1, 1], 1 << 14, &mut out).unwrap();
        assert_eq!(out.len(), 14);
        assert_eq!(e.add(6, 100, &[1; 100], 10, &mut out), Err(Refused));
    }
}
