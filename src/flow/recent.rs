//! What reassembly remembers of the bytes it already delivered, so that a
//! retransmission carrying different bytes can be counted as a conflict.
//!
//! It keeps, for each of the last [`CHUNKS`] delivered chunks (one chunk per
//! segment, or per the fresh part of a segment), its length and copies of its
//! first and last [`SAMPLE`] bytes: a few dozen bytes inline, no heap, and
//! at most 16 bytes copied per delivered chunk however long it is. The
//! chunks are contiguous and end at the delivery point; a gap forgets them.
//!
//! What this misses, compared with the previous design (every byte of the
//! last 4096 delivered bytes in a 4 KiB heap ring per direction, also
//! forgotten at a gap): a retransmission is compared only at the remembered
//! byte positions it covers. So:
//!
//! * a chunk of at most `2 × SAMPLE` (16) bytes is remembered whole: any
//!   difference within it is found, as before;
//! * in a longer chunk, a difference is found only when it touches the
//!   chunk's first or last `SAMPLE` bytes: a retransmission whose bytes
//!   differ only in the middle of a long segment (from byte 8 to byte
//!   len − 9 of it), or that covers only that middle, is not counted;
//! * the reach is the last [`CHUNKS`] chunks, not the last 4096 bytes:
//!   further back through full-size segments (4 × 1460 bytes), less far
//!   through small ones (4 × 100 bytes, say). So a difference at the ends
//!   of a segment delivered 4 KiB to 5.7 KiB ago is now counted where it
//!   was not.
//!
//! Never a false conflict: bytes are compared only with the bytes actually
//! delivered at the same stream offset.
//!
//! Does not decide what is delivered: `reassembly` does, and calls
//! [`Recent::delivered`] and [`Recent::differs`].

/// Chunks remembered.
pub const CHUNKS: usize = 4;
/// Bytes remembered at each end of a chunk.
pub const SAMPLE: usize = 8;

#[derive(Clone, Copy, Debug, Default)]
struct Chunk {
    len: u32,
    /// The first `min(len, SAMPLE)` bytes.
    head: [u8; SAMPLE],
    /// The last `min(len, SAMPLE)` bytes, from index 0.
    tail: [u8; SAMPLE],
}

impl Chunk {
    fn sampled(&self) -> usize {
        (self.len as usize).min(SAMPLE)
    }
}

/// The last delivered chunks, newest at `newest`, in a ring.
#[derive(Clone, Debug, Default)]
pub struct Recent {
    chunks: [Chunk; CHUNKS],
    /// How many of `chunks` hold a chunk.
    count: u8,
    newest: u8,
}

impl Recent {
    /// `bytes` were delivered, right after the chunks remembered so far.
    #[inline]
    pub fn delivered(&mut self, bytes: &[u8]) {
        let Ok(len) = u32::try_from(bytes.len()) else {
            // Cannot come from a packet; simply remember nothing.
            self.forget();
            return;
        };
        let mut chunk = Chunk {
            len,
            ..Chunk::default()
        };
        let ends = bytes
            .first_chunk::<SAMPLE>()
            .zip(bytes.last_chunk::<SAMPLE>());
        if let Some((head, tail)) = ends {
            // The usual case, in two fixed-size loads (a copy of a length
            // known only at run time is a call to `memcpy`).
            (chunk.head, chunk.tail) = (*head, *tail);
        } else {
            let n = bytes.len();
            if let (Some(head), Some(tail)) = (chunk.head.get_mut(..n), chunk.tail.get_mut(..n)) {
                head.copy_from_slice(bytes);
                tail.copy_from_slice(bytes);
            }
        }
        self.newest = (self.newest + 1) % CHUNKS as u8;
        if let Some(slot) = self.chunks.get_mut(usize::from(self.newest)) {
            *slot = chunk;
        }
        self.count = (self.count + 1).min(CHUNKS as u8);
    }

    /// The bytes before the delivery point are no longer contiguous with
    /// what comes next (a gap).
    pub fn forget(&mut self) {
        self.count = 0;
    }

    /// Whether `payload`, starting at stream offset `start`, differs from a
    /// remembered byte; `end` is the delivery point (where the newest
    /// remembered chunk ends).
    #[inline]
    pub fn differs(&self, end: u64, start: u64, payload: &[u8]) -> bool {
        let stop = start + payload.len() as u64;
        let mut chunk_end = end;
        for back in 0..usize::from(self.count) {
            let i = (usize::from(self.newest) + CHUNKS - back) % CHUNKS;
            let Some(chunk) = self.chunks.get(i) else {
                break;
            };
            if chunk_end <= start {
                break;
            }
            let chunk_start = chunk_end.saturating_sub(u64::from(chunk.len));
            let n = chunk.sampled() as u64;
            let tail_at = chunk_end.saturating_sub(n);
            if Self::mismatch(&chunk.head, chunk_start, n, start, stop, payload)
                || Self::mismatch(&chunk.tail, tail_at, n, start, stop, payload)
            {
                return true;
            }
            chunk_end = chunk_start;
        }
        false
    }

    /// Whether the `n` remembered bytes `sample`, at stream offset `at`,
    /// differ from `payload` (offsets `start..stop`) where they overlap.
    fn mismatch(sample: &[u8], at: u64, n: u64, start: u64, stop: u64, payload: &[u8]) -> bool {
        let from = at.max(start);
        let to = (at + n).min(stop);
        if from >= to {
            return false;
        }
        let old = sample.get((from - at) as usize..(to - at) as usize);
        let new = payload.get((from - start) as usize..(to - start) as usize);
        old != new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Delivers `stream` in chunks of the given lengths.
    fn remember(stream: &[u8], lens: &[usize]) -> Recent {
        let mut r = Recent::default();
        let mut at = 0;
        for &len in lens {
            r.delivered(&stream[at..at + len]);
            at += len;
        }
        assert_eq!(at, stream.len());
        r
    }

    fn stream(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn identical_bytes_never_differ() {
        let s = stream(3000);
        let r = remember(&s, &[1000, 5, 1460, 3, 532]);
        let end = s.len() as u64;
        for start in (0..s.len()).step_by(37) {
            for len in [1, 2, 9, 16, 17, 100, 1460, 3000] {
                let stop = (start + len).min(s.len());
                assert!(!r.differs(end, start as u64, &s[start..stop]));
            }
        }
    }

    #[test]
    fn short_chunks_are_remembered_whole() {
        let s = stream(64);
        let r = remember(&s, &[16, 16, 16, 16]);
        for i in 0..64 {
            let mut copy = s.clone();
            copy[i] ^= 1;
            assert!(r.differs(64, 0, &copy), "byte {i}");
            // A retransmission covering only that byte.
            assert!(r.differs(64, i as u64, &copy[i..=i]), "byte {i} alone");
        }
    }

    #[test]
    fn long_chunks_are_checked_at_their_ends() {
        let s = stream(1460 * 2);
        let r = remember(&s, &[1460, 1460]);
        let changed = |i: usize| {
            let mut copy = s.clone();
            copy[i] ^= 0xff;
            r.differs(s.len() as u64, 0, &copy)
        };
        for i in [0, 7, 1452, 1459, 1460, 1467, 2912, 2919] {
            assert!(changed(i), "byte {i}");
        }
        // The documented blind spot: the middle of a long chunk.
        for i in [8, 700, 1451, 1468, 2911] {
            assert!(!changed(i), "byte {i}");
        }
    }

    #[test]
    fn only_the_last_chunks_are_remembered_and_a_gap_forgets() {
        let s = stream(10);
        let mut r = remember(&s, &[1; 10]);
        let mut copy = s.clone();
        copy[9 - CHUNKS] ^= 1;
        assert!(!r.differs(10, 0, &copy), "older than the remembered chunks");
        copy[10 - CHUNKS] ^= 1;
        assert!(r.differs(10, 0, &copy));
        r.forget();
        assert!(!r.differs(10, 0, &copy));
        // After a gap of 5, new chunks start at 15.
        r.delivered(b"xy");
        assert!(r.differs(17, 15, b"xz"));
        assert!(!r.differs(17, 15, b"xy"));
        assert!(!r.differs(17, 10, b"?????xy"));
    }

    #[test]
    fn payload_past_the_delivery_point_is_not_compared() {
        let r = remember(b"abcd", &[4]);
        assert!(!r.differs(4, 2, b"cdEFG"));
        assert!(r.differs(4, 2, b"cXEFG"));
    }
}
