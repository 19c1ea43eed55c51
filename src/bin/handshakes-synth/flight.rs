//! Flights: what one side sends before the other speaks, held as literal
//! pieces and lazily-copied filler so that large responses cost no memory.
//!
//! Owns: [`Flight`] (building and taking MSS-sized payloads), [`Fills`] (the
//! random and text filler buffers), `FILL_LEN` and `MAX_PLAIN`.
//! Does not own: what goes into a flight (`plan.rs`) or when its segments
//! are written (`conn.rs`).

use std::collections::VecDeque;

use crate::rng::Rng;
use crate::tls::Buf;

/// Size of the filler buffers that payload bytes are copied from.
const FILL_LEN: usize = 1 << 20;
/// Largest TLS plaintext per record.
const MAX_PLAIN: usize = 16384;

// ---------------------------------------------------------------------------
// Flights: what one side sends before the other speaks, produced lazily.

pub(crate) enum Piece {
    Lit(Vec<u8>),
    /// `left` bytes copied from a filler buffer, from `pos` on.
    Fill {
        random: bool,
        pos: usize,
        left: usize,
    },
}

#[derive(Default)]
pub(crate) struct Flight {
    pub(crate) pieces: VecDeque<Piece>,
    /// Bytes of the front `Lit` already taken.
    lit_pos: usize,
}

impl Flight {
    pub(crate) fn lit(&mut self, bytes: Vec<u8>) {
        self.pieces.push_back(Piece::Lit(bytes));
    }

    pub(crate) fn fill(&mut self, rng: &mut Rng, random: bool, n: usize) {
        if n > 0 {
            self.pieces.push_back(Piece::Fill {
                random,
                pos: rng.below(FILL_LEN as u64) as usize,
                left: n,
            });
        }
    }

    /// Application-data records carrying `plain` bytes of plaintext.
    pub(crate) fn app_data(&mut self, rng: &mut Rng, plain: usize, overhead: usize) {
        let mut left = plain.max(1);
        while left > 0 {
            let n = left.min(MAX_PLAIN);
            left -= n;
            let mut header = Buf::default();
            header.u8(23);
            header.u16(0x0303);
            header.u16((n + overhead) as u16);
            self.lit(header.0);
            self.fill(rng, true, n + overhead);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Moves up to `max` bytes into `out`.
    pub(crate) fn take(&mut self, max: usize, out: &mut Vec<u8>, fills: &Fills) {
        out.clear();
        while out.len() < max {
            let need = max - out.len();
            match self.pieces.front_mut() {
                None => break,
                Some(Piece::Lit(bytes)) => {
                    let rest = &bytes[self.lit_pos..];
                    let n = rest.len().min(need);
                    out.extend_from_slice(&rest[..n]);
                    self.lit_pos += n;
                    if self.lit_pos == bytes.len() {
                        self.lit_pos = 0;
                        self.pieces.pop_front();
                    }
                }
                Some(Piece::Fill { random, pos, left }) => {
                    let n = (*left).min(need);
                    let src = if *random { &fills.random } else { &fills.text };
                    let from = *pos;
                    out.extend_from_slice(&src[from..from + n]);
                    *pos = (from + n) % FILL_LEN;
                    *left -= n;
                    if *left == 0 {
                        self.pieces.pop_front();
                    }
                }
            }
        }
    }
}

/// Payload sources: random bytes (ciphertext) and text (HTTP bodies), with
/// a tail so any `pos < FILL_LEN` can be followed by a whole segment.
pub(crate) struct Fills {
    pub(crate) random: Vec<u8>,
    pub(crate) text: Vec<u8>,
}

impl Fills {
    pub(crate) fn new(rng: &mut Rng) -> Fills {
        let len = FILL_LEN + 64 * 1024;
        let random = rng.bytes(len);
        const WORDS: [&str; 16] = [
            "<div class=\"item\">",
            "</div>\n",
            "lorem ",
            "ipsum ",
            "{\"id\":",
            "\"name\":\"",
            "\"},",
            "connection ",
            "handshake ",
            "request ",
            "<span>",
            "</span>",
            "0123456789",
            "function(a,b){return a+b}",
            ";\n",
            "    ",
        ];
        let mut text = Vec::with_capacity(len + 64);
        while text.len() < len {
            text.extend_from_slice(rng.pick(&WORDS).as_bytes());
        }
        text.truncate(len);
        Fills { random, text }
    }
}
