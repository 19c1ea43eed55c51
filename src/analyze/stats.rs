//! Streaming statistics for the summary: a set of durations kept exactly up
//! to a bound, then folded into an HDR histogram, so a day-long live capture
//! holds constant memory while a normal capture gets exact percentiles. The
//! only module that names `hdrhistogram`.
//!
//! Does not know what the durations are.

use hdrhistogram::Histogram;

use crate::record::{Distribution, Totals};

/// Samples kept exactly before switching to the histogram.
pub const EXACT_SAMPLES: usize = 100_000;
/// Histogram range: 1 ns to one day, 3 significant digits (0.1 %).
const HIST_MAX_NANOS: u64 = 86_400 * 1_000_000_000;

/// Durations in seconds.
#[derive(Debug)]
pub struct Samples {
    /// Samples kept exactly before switching to the histogram.
    exact_cap: usize,
    exact: Vec<f64>,
    hist: Option<Histogram<u64>>,
    count: u64,
    sum: f64,
    min: Option<f64>,
    max: Option<f64>,
}

fn nanos(v: f64) -> u64 {
    (v.max(0.0) * 1e9).round().clamp(1.0, HIST_MAX_NANOS as f64) as u64
}

impl Default for Samples {
    fn default() -> Samples {
        Samples::with_exact_cap(EXACT_SAMPLES)
    }
}

impl Samples {
    /// Keeps `cap` samples exactly before switching to the histogram
    /// (which takes some 300 KiB).
    pub fn with_exact_cap(cap: usize) -> Samples {
        Samples {
            exact_cap: cap,
            exact: Vec::new(),
            hist: None,
            count: 0,
            sum: 0.0,
            min: None,
            max: None,
        }
    }

    pub fn push(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.count += 1;
        self.sum += v;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
        self.keep(v);
    }

    /// Adds what `other` holds, as if each of its samples were pushed
    /// (its histogram's to within its 0.1 %).
    pub fn merge(&mut self, other: &Samples) {
        if other.count == 0 {
            return;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = match (self.min, other.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = match (self.max, other.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        for &v in &other.exact {
            self.keep(v);
        }
        if let Some(theirs) = &other.hist {
            self.spill();
            if let Some(h) = self.hist.as_mut() {
                // Same bounds and precision: adding cannot fail.
                let _ = h.add(theirs);
            }
        }
    }

    /// Holds `v` among the exact samples, or in the histogram.
    fn keep(&mut self, v: f64) {
        if self.hist.is_none() && self.exact.len() < self.exact_cap {
            self.exact.push(v);
            return;
        }
        self.spill();
        if let Some(h) = self.hist.as_mut() {
            h.saturating_record(nanos(v));
        }
    }

    /// Moves the exact samples into the histogram.
    fn spill(&mut self) {
        if self.hist.is_none() {
            self.hist = Histogram::new_with_bounds(1, HIST_MAX_NANOS, 3).ok();
            let spilled = std::mem::take(&mut self.exact);
            if let Some(h) = self.hist.as_mut() {
                for s in spilled {
                    h.saturating_record(nanos(s));
                }
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Count, min, median, p90, p95, max and mean. Exact while at most
    /// [`EXACT_SAMPLES`] were pushed; beyond, percentiles are within 0.1 %.
    pub fn distribution(&mut self) -> Distribution {
        let Some(h) = &self.hist else {
            let mut d = distribution(&mut self.exact);
            d.count = self.count;
            return d;
        };
        // A bucket's value is the highest it stands for: kept within the
        // exact minimum and maximum, so no percentile passes the maximum.
        let (lo, hi) = (self.min.unwrap_or(0.0), self.max.unwrap_or(f64::MAX));
        let q = |p: f64| Some((h.value_at_quantile(p) as f64 / 1e9).clamp(lo, hi.max(lo)));
        Distribution {
            count: self.count,
            min: self.min,
            median: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            max: self.max,
            avg: (self.count > 0).then(|| self.sum / self.count as f64),
        }
    }
}

/// A sum of durations kept in whole nanoseconds, so that it does not depend
/// on the order they are added in (`--threads` finishes connections in
/// another order than one thread), with their count and maximum.
#[derive(Clone, Debug, Default)]
pub struct NanoSum {
    n: u64,
    total: u64,
    max: u64,
}

impl NanoSum {
    /// Adds `secs`, if it is a finite duration (negative counts as 0).
    pub fn add(&mut self, secs: Option<f64>) {
        let Some(v) = secs.filter(|v| v.is_finite()) else {
            return;
        };
        let v = (v.max(0.0) * 1e9).round() as u64;
        self.n += 1;
        self.total = self.total.saturating_add(v);
        self.max = self.max.max(v);
    }

    /// Adds `other`'s durations.
    pub fn merge(&mut self, other: &NanoSum) {
        self.n += other.n;
        self.total = self.total.saturating_add(other.total);
        self.max = self.max.max(other.max);
    }

    /// The sum in seconds.
    pub fn total(&self) -> f64 {
        self.total as f64 / 1e9
    }

    pub fn totals(&self) -> Totals {
        Totals {
            connections: self.n,
            total: self.total(),
            mean: (self.n > 0).then(|| self.total() / self.n as f64),
            max: (self.n > 0).then(|| self.max as f64 / 1e9),
        }
    }
}

/// Percentile by linear interpolation between closest ranks (numpy's
/// default): `q` in 0..=1 over sorted `values`.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = q.clamp(0.0, 1.0) * last as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let (a, b) = (*sorted.get(lo)?, *sorted.get(hi)?);
    Some(a + (b - a) * (rank - lo as f64))
}

/// Count, min, median, p90, p95, max and mean of `values` (sorted in place).
pub fn distribution(values: &mut [f64]) -> Distribution {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Distribution {
        count: n as u64,
        min: values.first().copied(),
        median: percentile(values, 0.5),
        p90: percentile(values, 0.9),
        p95: percentile(values, 0.95),
        max: values.last().copied(),
        avg: (n > 0).then(|| values.iter().sum::<f64>() / n as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.5), Some(2.5));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 1.0), Some(4.0));
        assert!((percentile(&v, 0.9).expect("some") - 3.7).abs() < 1e-12);
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn percentiles_from_the_histogram_stay_within_min_and_max() {
        // 100 µs, a million times: the histogram's bucket reads 100.031 µs.
        let mut s = Samples::default();
        for _ in 0..(EXACT_SAMPLES * 2) {
            s.push(0.0001);
        }
        let d = s.distribution();
        assert_eq!(
            (d.median, d.p95, d.max),
            (Some(0.0001), Some(0.0001), Some(0.0001))
        );
    }

    #[test]
    fn merging_is_pushing_each_sample() {
        let values: Vec<f64> = (1..=50).map(|i| f64::from(i) / 1000.0).collect();
        let mut all = Samples::default();
        values.iter().for_each(|&v| all.push(v));
        // Exact into exact, and a histogram (a small cap spills) into exact.
        for cap in [1000, 7] {
            let mut merged = Samples::default();
            let mut part = Samples::with_exact_cap(cap);
            values[..20].iter().for_each(|&v| merged.push(v));
            values[20..].iter().for_each(|&v| part.push(v));
            assert_eq!(part.hist.is_some(), cap < 30);
            merged.merge(&part);
            let (a, b) = (merged.distribution(), all.distribution());
            assert_eq!(
                (a.count, a.min, a.max),
                (b.count, b.min, b.max),
                "cap {cap}"
            );
            // The histogram reads a rank's value (to 0.1 %) where the
            // exact samples interpolate between ranks: one rank apart.
            let close = |x: Option<f64>, y: Option<f64>| {
                (x.unwrap_or(f64::NAN) - y.unwrap_or(f64::NAN)).abs() <= 0.0011
            };
            assert!(
                close(a.median, b.median) && close(a.p95, b.p95),
                "cap {cap}: {a:?} {b:?}"
            );
            assert!(close(a.avg, b.avg), "cap {cap}");
        }
        let mut empty = Samples::default();
        empty.merge(&Samples::default());
        assert!(empty.is_empty() && empty.min.is_none());
    }

    #[test]
    fn exact_then_histogram_with_bounded_memory() {
        let mut s = Samples::default();
        for i in 0..3 {
            s.push(f64::from(i + 1) / 10.0);
        }
        let d = s.distribution();
        assert_eq!(
            (d.count, d.min, d.median, d.max),
            (3, Some(0.1), Some(0.2), Some(0.3))
        );
        let mut big = Samples::default();
        for i in 0..(EXACT_SAMPLES as u64 * 3) {
            big.push((i % 1000) as f64 / 1000.0 + 0.001);
        }
        assert!(
            big.exact.capacity() == 0 && big.hist.is_some(),
            "spilled to the histogram"
        );
        let d = big.distribution();
        assert_eq!(d.count, EXACT_SAMPLES as u64 * 3);
        assert!(
            d.p95 <= d.max && d.min <= d.median,
            "within min and max: {d:?}"
        );
        let median = d.median.expect("median");
        assert!((median - 0.5).abs() < 0.002, "{median}");
        assert_eq!(d.max, Some(1.0));
    }
}
