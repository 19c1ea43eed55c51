//! Streaming statistics for the summary: a set of durations kept exactly up
//! to a bound, then folded into an HDR histogram, so a day-long live capture
//! holds constant memory while a normal capture gets exact percentiles. The
//! only module that names `hdrhistogram`.
//!
//! Does not know what the durations are.

use hdrhistogram::Histogram;

use crate::record::Distribution;

/// Samples kept exactly before switching to the histogram.
pub const EXACT_SAMPLES: usize = 100_000;
/// Histogram range: 1 ns to one day, 3 significant digits (0.1 %).
const HIST_MAX_NANOS: u64 = 86_400 * 1_000_000_000;

/// Durations in seconds.
#[derive(Debug, Default)]
pub struct Samples {
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

impl Samples {
    pub fn push(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.count += 1;
        self.sum += v;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
        if self.hist.is_none() && self.exact.len() < EXACT_SAMPLES {
            self.exact.push(v);
            return;
        }
        if self.hist.is_none() {
            self.hist = Histogram::new_with_bounds(1, HIST_MAX_NANOS, 3).ok();
            let spilled = std::mem::take(&mut self.exact);
            if let Some(h) = self.hist.as_mut() {
                for s in spilled {
                    h.saturating_record(nanos(s));
                }
            }
        }
        if let Some(h) = self.hist.as_mut() {
            h.saturating_record(nanos(v));
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
        let q = |p: f64| Some(h.value_at_quantile(p) as f64 / 1e9);
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
        let median = d.median.expect("median");
        assert!((median - 0.5).abs() < 0.002, "{median}");
        assert_eq!(d.max, Some(1.0));
    }
}
