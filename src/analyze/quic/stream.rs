//! One direction's CRYPTO stream of a QUIC connection, gathered from
//! CRYPTO frames that may come in any order, split over packets and
//! repeated (Chrome scatters its ClientHello over several frames on
//! purpose), until its first TLS handshake message is whole.
//!
//! Owns the message's bytes within a fixed cap and a budget shared by
//! every stream of the table (`reorder` puts the pieces in order). Does
//! not parse the message (`tls::hello` does) or follow the stream past
//! it: the ServerHello and ClientHello are all an Initial packet carries
//! that this tool reads.

use super::reorder::{Bounds, Reorder};

/// The longest first message kept: a ClientHello with a post-quantum key
/// share and many ALPN protocols is about 2 KiB.
pub const CAP: usize = 16 * 1024;

/// Pieces held ahead at most: more pieces than that is not a
/// ClientHello, it is noise.
const MAX_AHEAD: usize = 64;

/// The stream's first bytes as they arrive.
#[derive(Debug, Default)]
pub struct CryptoStream {
    /// The stream's bytes from offset 0, in order, up to [`CAP`].
    bytes: Vec<u8>,
    order: Reorder,
    /// The message was handed out, or will never be whole.
    done: bool,
}

impl CryptoStream {
    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.bytes.capacity() + self.order.held()
    }

    /// Whether the stream wants no more bytes.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Gives up on the message and frees what was held.
    pub fn give_up(&mut self) {
        self.done = true;
        self.bytes = Vec::new();
        self.order = Reorder::default();
    }

    /// Adds `data` at stream offset `offset`, growing by at most `budget`
    /// bytes; the first handshake message (its 4-byte header and body),
    /// once, when it is whole. A piece from past [`CAP`] or over the
    /// budget, or one piece ahead too many, gives the message up.
    pub fn add(&mut self, offset: u64, data: &[u8], budget: usize) -> Option<Vec<u8>> {
        if self.done || data.is_empty() {
            return None;
        }
        let bounds = Bounds {
            pieces: MAX_AHEAD,
            reach: CAP as u64,
        };
        let (bytes, mut over) = (&mut self.bytes, false);
        let start = bytes.len();
        let added = self.order.add(offset, data, bounds, budget, |new| {
            let room = CAP.saturating_sub(bytes.len());
            let new = new.get(..room).unwrap_or(new);
            over |= bytes.len() + new.len() - start > budget;
            if !over {
                bytes.extend_from_slice(new);
            }
        });
        if added.is_err() || over {
            self.give_up();
            return None;
        }
        let &[_, a, b, c] = self.bytes.first_chunk::<4>()?;
        let len = 4 + (usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c));
        if len > CAP {
            self.give_up();
            return None;
        }
        if self.bytes.len() < len {
            return None;
        }
        let mut message = std::mem::take(&mut self.bytes);
        message.truncate(len);
        self.give_up();
        Some(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handshake message of type 1 with `body_len` bytes of body.
    fn message(body_len: usize) -> Vec<u8> {
        let mut m = vec![1, 0, (body_len >> 8) as u8, body_len as u8];
        m.extend((0..body_len).map(|i| i as u8));
        m
    }

    #[test]
    fn pieces_in_any_order_and_repeated_make_the_message_once() {
        let m = message(1000);
        let mut s = CryptoStream::default();
        assert_eq!(s.add(600, &m[600..], CAP), None);
        assert_eq!(s.add(2, &m[2..300], CAP), None);
        assert_eq!(s.add(250, &m[250..700], CAP), None, "overlapping");
        assert_eq!(s.add(0, &m[..2], CAP), Some(m.clone()));
        assert!(s.is_done());
        assert_eq!(s.add(0, &m, CAP), None, "handed out once");
        assert_eq!(s.held(), 0);
    }

    #[test]
    fn bytes_after_the_message_are_left_out() {
        let mut m = message(10);
        let whole = m.clone();
        m.extend_from_slice(&[2, 0, 0, 5, 9, 9]);
        let mut s = CryptoStream::default();
        assert_eq!(s.add(0, &m, CAP), Some(whole));
    }

    #[test]
    fn too_long_too_far_or_too_scattered_gives_up() {
        let mut s = CryptoStream::default();
        assert_eq!(s.add(0, &[1, 0x01, 0, 0], CAP), None, "64 KiB announced");
        assert!(s.is_done());
        let mut s = CryptoStream::default();
        assert_eq!(s.add(u64::MAX, &[1], CAP), None);
        assert!(s.is_done());
        let mut s = CryptoStream::default();
        assert_eq!(s.add(100, &[1; 100], 50), None, "over the budget");
        assert!(s.is_done());
        let mut s = CryptoStream::default();
        for i in 0..MAX_AHEAD as u64 {
            assert_eq!(s.add(10 + 2 * i, &[0], CAP), None);
        }
        assert!(!s.is_done());
        assert_eq!(s.add(9, &[0], CAP), None);
        assert!(s.is_done(), "a piece ahead too many");
        assert_eq!(s.held(), 0);
    }

    #[test]
    fn a_piece_running_past_the_cap_is_cut_there() {
        // A message of exactly CAP bytes, its last piece running past it.
        let mut m = message(CAP - 4);
        let mut s = CryptoStream::default();
        assert_eq!(s.add(CAP as u64 - 2, &[0xee; 10], CAP), None);
        assert!(!s.is_done());
        m.truncate(CAP - 2);
        let got = s.add(0, &m, CAP).expect("whole");
        assert_eq!(
            (got.len(), &got[..CAP - 2], &got[CAP - 2..]),
            (CAP, &m[..], &[0xee; 2][..])
        );
    }
}
