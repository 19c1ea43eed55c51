//! Folding finished connection records and packet counts into the capture's
//! [`Summary`]: counts, close kinds, and distributions of durations.
//!
//! Does not see packets' contents or the connection table; it is fed records
//! as they are finalised, so it works the same for files and live capture.

use std::collections::BTreeMap;

use crate::record::{Anomalies, ConnectionRecord, Distribution, PacketCounts, Summary};
use crate::source::SourceInfo;
use crate::time::Timestamp;

#[derive(Debug, Default)]
pub struct SummaryBuilder {
    pub packets: PacketCounts,
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
    /// Anomalies not attached to any connection.
    pub anomalies: Anomalies,
    connections: u64,
    tcp_handshakes: u64,
    without_handshake: u64,
    connect: Vec<f64>,
    close: BTreeMap<String, u64>,
    syn_retransmissions: u64,
    connection_anomalies: Anomalies,
}

impl SummaryBuilder {
    /// Notes a packet's timestamp.
    pub fn saw_time(&mut self, ts: Timestamp) {
        self.first.get_or_insert(ts);
        if self.last.is_none_or(|last| ts > last) {
            self.last = Some(ts);
        }
    }

    /// Folds in one finished connection.
    pub fn add_record(&mut self, rec: &ConnectionRecord) {
        self.connections += 1;
        let hs = &rec.tcp.handshake;
        if hs.complete {
            self.tcp_handshakes += 1;
        }
        if hs.syn.is_none() {
            self.without_handshake += 1;
        }
        if let Some(c) = hs.connect {
            self.connect.push(c);
        }
        *self
            .close
            .entry(rec.close.kind.as_str().to_string())
            .or_insert(0) += 1;
        self.syn_retransmissions += u64::from(hs.syn_retransmissions);
        self.connection_anomalies.merge(&rec.anomalies);
    }

    pub fn finish(mut self, info: &SourceInfo) -> Summary {
        let mut anomalies = self.anomalies;
        anomalies.merge(&self.connection_anomalies);
        anomalies.add(
            crate::record::AnomalyKind::UnknownInterface,
            info.packets_unknown_interface,
        );
        let span = match (self.first, self.last) {
            (Some(a), Some(b)) => b.secs_since(a),
            _ => 0.0,
        };
        Summary {
            file: info.name.clone(),
            format: info.format.clone(),
            compression: info.compression.clone(),
            first_packet: self.first.map(Timestamp::as_secs_f64),
            last_packet: self.last.map(Timestamp::as_secs_f64),
            span,
            packets: self.packets,
            connections: self.connections,
            tcp_handshakes: self.tcp_handshakes,
            connections_without_handshake: self.without_handshake,
            connect: distribution(&mut self.connect),
            close: self.close,
            syn_retransmissions: self.syn_retransmissions,
            anomalies,
            truncated: info.truncated,
            warnings: info.warnings.clone(),
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

/// Count, min, median, p90, max and mean of `values` (sorted in place).
pub fn distribution(values: &mut [f64]) -> Distribution {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Distribution {
        count: n as u64,
        min: values.first().copied(),
        median: percentile(values, 0.5),
        p90: percentile(values, 0.9),
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
    fn distribution_of_unsorted_values() {
        let mut v = vec![0.3, 0.1, 0.2];
        let d = distribution(&mut v);
        assert_eq!(d.count, 3);
        assert_eq!(d.min, Some(0.1));
        assert_eq!(d.median, Some(0.2));
        assert_eq!(d.max, Some(0.3));
        assert!((d.avg.expect("some") - 0.2).abs() < 1e-12);
    }
}
