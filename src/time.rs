//! Capture timestamps: one integer type (nanoseconds since the Unix epoch) used
//! by every stage, so durations are exact to the nanosecond and never drift
//! through floating point until a report prints them.
//!
//! Does not parse or format dates for people; reports do that.

use std::fmt;
use std::time::Duration;

/// A capture timestamp, nanoseconds since 1970-01-01T00:00:00Z.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// From whole seconds and a fraction expressed in `units_per_sec` units
    /// (1_000_000 for microsecond pcap, 1_000_000_000 for nanosecond).
    /// Saturates instead of overflowing on absurd values.
    pub fn from_parts(secs: i64, frac: u64, units_per_sec: u64) -> Timestamp {
        let units = units_per_sec.max(1);
        let nanos = if units == 1_000_000_000 {
            frac as i128
        } else {
            frac as i128 * 1_000_000_000 / units as i128
        };
        let total = secs as i128 * 1_000_000_000 + nanos;
        Timestamp(total.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
    }

    /// From a 64-bit count of `units_per_sec` ticks since the epoch (pcapng).
    pub fn from_ticks(ticks: u64, units_per_sec: u64, offset_secs: i64) -> Timestamp {
        let units = units_per_sec.max(1);
        // The usual resolutions (micro-, nano-, milliseconds) divide a
        // second exactly: the nanoseconds are one multiply, the same value
        // the division below gives (which, with its 128-bit steps, was 2 %
        // of one thread's time on a pcapng capture).
        let exact = (1_000_000_000 % units == 0)
            .then(|| ticks.checked_mul(1_000_000_000 / units))
            .flatten()
            .and_then(|nanos| i64::try_from(nanos).ok());
        let ts = exact.map_or_else(
            || {
                let secs = (ticks / units) as i64;
                Timestamp::from_parts(secs, ticks % units, units)
            },
            Timestamp,
        );
        Timestamp(ts.0.saturating_add(offset_secs.saturating_mul(1_000_000_000)))
    }

    /// Seconds since the epoch as a float (for JSON): for a whole number of
    /// microseconds (every classic pcap, and pcapng at its default
    /// resolution) the float nearest the exact time, which prints (shortest
    /// round trip) as the capture's own digits, as tshark shows them; finer
    /// times within a unit in the last place (a float this large cannot
    /// tell 100 ns apart anyway).
    pub fn as_secs_f64(self) -> f64 {
        // The count of microseconds is exact in a float (below 2^53: until
        // the year 2255), and one division rounds correctly. Dividing the
        // nanoseconds (above 2^53) rounded twice: 1700000000.059355 came
        // out as 1700000000.0593548.
        let micros = self.0 / 1_000;
        if self.0 % 1_000 == 0 && micros.unsigned_abs() < 1 << 53 {
            return micros as f64 / 1e6;
        }
        let secs = self.0.div_euclid(1_000_000_000);
        let nanos = self.0.rem_euclid(1_000_000_000);
        secs as f64 + nanos as f64 / 1e9
    }

    /// `self - earlier` in seconds; negative when time went backwards.
    /// The difference of nanoseconds is exact (in 128 bits only when 64
    /// overflow: converting those to a float is a slow library call, and
    /// this runs for every time in every record), then rounded once.
    pub fn secs_since(self, earlier: Timestamp) -> f64 {
        match self.0.checked_sub(earlier.0) {
            Some(nanos) => nanos as f64 / 1e9,
            None => (i128::from(self.0) - i128::from(earlier.0)) as f64 / 1e9,
        }
    }

    /// `d` after `self` (a deadline), saturating.
    pub fn after(self, d: Duration) -> Timestamp {
        let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }

    /// `self - earlier` in nanoseconds, saturating.
    pub fn nanos_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Timestamp {
    /// `seconds.nanoseconds` since the epoch, like tshark's `frame.time_epoch`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Before 1970 (a pcapng interface's negative offset) the sign goes
        // in front: -1.5 s is "-1.500000000", not -2 plus a half.
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let (secs, nanos) = (abs / 1_000_000_000, abs % 1_000_000_000);
        write!(f, "{sign}{secs}.{nanos:09}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_and_nano_resolutions_agree() {
        let us = Timestamp::from_parts(1_700_000_000, 123_456, 1_000_000);
        let ns = Timestamp::from_parts(1_700_000_000, 123_456_000, 1_000_000_000);
        assert_eq!(us, ns);
        assert_eq!(us.to_string(), "1700000000.123456000");
    }

    #[test]
    fn seconds_between_are_the_exact_difference_rounded_once() {
        let exact = |a: i64, b: i64| (i128::from(a) - i128::from(b)) as f64 / 1e9;
        let mut rng = crate::testutil::Xorshift(0x5ec5);
        let edges = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
        for &a in &edges {
            for &b in &edges {
                assert_eq!(
                    Timestamp(a).secs_since(Timestamp(b)),
                    exact(a, b),
                    "{a} {b}"
                );
            }
        }
        for _ in 0..100_000 {
            let a = rng.next() as i64;
            let b = (rng.next() as i64) >> (rng.next() % 64);
            assert_eq!(
                Timestamp(a).secs_since(Timestamp(b)),
                exact(a, b),
                "{a} {b}"
            );
            assert_eq!(
                Timestamp(b).secs_since(Timestamp(a)),
                exact(b, a),
                "{b} {a}"
            );
        }
    }

    #[test]
    fn ticks_with_odd_resolution_and_offset() {
        // if_tsresol = 2^-10 (1024 ticks per second), offset 10 s
        let ts = Timestamp::from_ticks(1024 * 5 + 512, 1024, 10);
        assert_eq!(ts.0, 15_500_000_000);
    }

    #[test]
    fn ticks_by_one_multiply_are_the_divisions_answer() {
        // Every resolution a pcapng if_tsresol can name that divides a
        // second, and some that do not; tick counts small, usual and huge.
        let mut rng = crate::testutil::Xorshift(0x7157);
        let units = [
            1,
            10,
            100,
            1_000,
            1_000_000,
            1_000_000_000,
            1024,
            3,
            10_000_000_000,
        ];
        for &u in &units {
            for i in 0..2_000u64 {
                let ticks = match i % 4 {
                    0 => rng.next(),
                    1 => rng.next() >> 20,
                    2 => u64::MAX - i,
                    _ => 1_700_000_000u64.saturating_mul(u) + i,
                };
                let slow = {
                    let secs = (ticks / u) as i64;
                    Timestamp::from_parts(secs, ticks % u, u)
                };
                for offset in [0, -5, 86_400] {
                    let want = Timestamp(slow.0.saturating_add(offset * 1_000_000_000));
                    assert_eq!(
                        Timestamp::from_ticks(ticks, u, offset),
                        want,
                        "{ticks} / {u}"
                    );
                }
            }
        }
    }

    #[test]
    fn epoch_seconds_print_as_the_captures_digits() {
        let mut rng = crate::testutil::Xorshift(0x5ec5);
        for i in 0..20_000u64 {
            let secs = match i % 3 {
                0 => 1_700_000_000 + (rng.next() % 100_000_000) as i64,
                1 => (rng.next() % 4_000_000_000) as i64,
                _ => -((rng.next() % 1_000_000_000) as i64),
            };
            let micros = (rng.next() % 1_000_000) as i64;
            let ts = Timestamp(secs * 1_000_000_000 + micros * 1_000);
            // The float nearest the decimal the capture holds (Rust's
            // parser rounds correctly), so it prints as those digits.
            let decimal = ts.to_string();
            let nearest: f64 = decimal.parse().expect("a decimal");
            assert_eq!(ts.as_secs_f64(), nearest, "{decimal}");
            let nanos = Timestamp(ts.0 + 1 + (rng.next() % 999) as i64);
            let exact: f64 = nanos.to_string().parse().expect("a decimal");
            let off = (nanos.as_secs_f64() - exact).abs();
            assert!(off <= exact.abs().max(1.0) * f64::EPSILON, "{nanos}: {off}");
        }
        let ts = Timestamp(1_700_000_000_059_355_000);
        assert_eq!(
            serde_json::to_string(&ts.as_secs_f64()).ok().as_deref(),
            Some("1700000000.059355")
        );
        assert_eq!(Timestamp(-1_500_000_000).to_string(), "-1.500000000");
        assert_eq!(Timestamp(-1_500_000_000).as_secs_f64(), -1.5);
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        let ts = Timestamp::from_parts(i64::MAX, u64::MAX, 1);
        assert_eq!(ts.0, i64::MAX);
        assert_eq!(Timestamp(7).after(Duration::from_nanos(5)), Timestamp(12));
        assert_eq!(
            Timestamp(i64::MAX - 1).after(Duration::from_secs(5)).0,
            i64::MAX
        );
        assert_eq!(Timestamp(0).after(Duration::MAX).0, i64::MAX);
        assert_eq!(Timestamp(i64::MIN).nanos_since(Timestamp(1)), i64::MIN);
    }

    #[test]
    fn differences_in_seconds() {
        let a = Timestamp(1_000_000_000);
        let b = Timestamp(1_000_250_000);
        assert!((b.secs_since(a) - 0.00025).abs() < 1e-12);
        assert!(a.secs_since(b) < 0.0);
    }
}
