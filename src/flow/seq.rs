//! TCP sequence numbers: the only place they are compared, always by wrapping
//! difference (RFC 793 §3.3), so a connection that crosses 2^32 stays ordered.
//!
//! Does not know about segments or connections.

/// A 32-bit TCP sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seq(pub u32);

impl Seq {
    /// `self + n`, wrapping.
    pub fn plus(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }

    /// Signed distance `self - other` in sequence space.
    pub fn diff(self, other: Seq) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// Strictly before `other` in sequence space.
    pub fn is_before(self, other: Seq) -> bool {
        self.diff(other) < 0
    }

    /// Strictly after `other` in sequence space.
    pub fn is_after(self, other: Seq) -> bool {
        self.diff(other) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_across_wraparound() {
        let near_top = Seq(u32::MAX - 10);
        let wrapped = near_top.plus(20);
        assert_eq!(wrapped, Seq(9));
        assert!(near_top.is_before(wrapped));
        assert!(wrapped.is_after(near_top));
        assert_eq!(wrapped.diff(near_top), 20);
        assert_eq!(near_top.diff(wrapped), -20);
    }

    #[test]
    fn equal_is_neither_before_nor_after() {
        assert!(!Seq(5).is_before(Seq(5)));
        assert!(!Seq(5).is_after(Seq(5)));
    }
}
