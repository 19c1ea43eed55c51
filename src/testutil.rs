//! Helpers for the library's own unit tests (compiled only for them): a
//! fixed pseudo-random generator for the "any bytes never panic" tests.

/// xorshift64 from a fixed seed: the same bytes in every run.
pub struct Xorshift(pub u64);

impl Xorshift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `len` bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}
