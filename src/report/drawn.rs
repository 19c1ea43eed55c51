//! What the HTML report draws of one capture, gathered as the records
//! stream by: the first [`MAX_ROWS`] connections by id (the waterfall and
//! the table), how many there were, and every connect and TLS handshake
//! time (the histograms). So `--html` holds 2 000 records and two numbers
//! per connection, not every record of a capture of millions.
//!
//! Does not draw anything (that is `html`).

use std::io;

use crate::analyze::RecordSink;
use crate::least::{Keyed, Least};
use crate::record::ConnectionRecord;

/// Connections the waterfall and the table show, at most.
pub const MAX_ROWS: usize = 2000;

/// One capture as the HTML report draws it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Drawn {
    /// The first [`MAX_ROWS`] connections by id, in id order.
    pub first: Vec<ConnectionRecord>,
    /// Connections in all.
    pub total: u64,
    /// Every connect time (SYN → ACK) and every TLS handshake time
    /// (ClientHello → complete), in no particular order.
    pub connects: Vec<f64>,
    pub tls: Vec<f64>,
}

impl Drawn {
    /// From every record of a capture.
    pub fn of(records: &[ConnectionRecord]) -> Drawn {
        let mut sink = DrawnSink::new();
        for rec in records {
            sink.note(rec);
        }
        sink.finish()
    }
}

/// Gathers a [`Drawn`] from records as they come.
pub struct DrawnSink {
    /// The first connections by id so far.
    first: Least<Keyed<ConnectionRecord>>,
    connects: Vec<f64>,
    tls: Vec<f64>,
}

impl Default for DrawnSink {
    fn default() -> Self {
        DrawnSink::new()
    }
}

impl DrawnSink {
    pub fn new() -> DrawnSink {
        DrawnSink {
            first: Least::new(MAX_ROWS),
            connects: Vec::new(),
            tls: Vec::new(),
        }
    }

    /// Takes what is drawn of `rec`; copies it only if it is among the
    /// first connections so far.
    pub fn note(&mut self, rec: &ConnectionRecord) {
        self.times(rec);
        self.first.offer_with(
            |last| rec.id < last.key,
            || Keyed {
                key: rec.id,
                item: rec.clone(),
            },
        );
    }

    fn times(&mut self, rec: &ConnectionRecord) {
        self.connects.extend(rec.tcp.handshake.connect);
        self.tls.extend(rec.tls.as_ref().and_then(|t| t.handshake));
    }

    pub fn finish(self) -> Drawn {
        let total = self.first.total;
        Drawn {
            first: self
                .first
                .into_sorted()
                .into_iter()
                .map(|k| k.item)
                .collect(),
            total,
            connects: self.connects,
            tls: self.tls,
        }
    }
}

impl RecordSink for DrawnSink {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.times(&rec);
        self.first.offer(Keyed {
            key: rec.id,
            item: rec,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::records_of;

    /// 2 100 connections made from a real record, ids 1…2100, each with
    /// its own connect time.
    fn many() -> Vec<ConnectionRecord> {
        let path = std::path::Path::new("captures/java-httpclient-pooled-10.pcap");
        let (_, records) = records_of(path).expect("a capture, analysed");
        let one = records.first().expect("a connection").clone();
        assert!(one.tls.as_ref().and_then(|t| t.handshake).is_some());
        (1..=2100u64)
            .map(|id| {
                let mut r = one.clone();
                r.id = id;
                r.tcp.handshake.connect = Some(id as f64 * 1e-6);
                r
            })
            .collect()
    }

    fn sorted(mut v: Vec<f64>) -> Vec<f64> {
        v.sort_by(f64::total_cmp);
        v
    }

    /// Records noted (or given) in the order connections finish draw what
    /// every record in id order draws: the first 2 000 by id, the total,
    /// every time.
    #[test]
    fn records_as_they_come_draw_what_all_of_them_draw() {
        let mut all = many();
        let whole = Drawn::of(&all);
        let ids: Vec<u64> = whole.first.iter().map(|r| r.id).collect();
        assert_eq!(ids, (1..=MAX_ROWS as u64).collect::<Vec<_>>());
        assert_eq!(
            (whole.total, whole.connects.len(), whole.tls.len()),
            (2100, 2100, 2100)
        );
        // A fixed shuffle: the order connections finish in.
        all.sort_by_key(|r| (r.id * 7919) % 2101);
        let mut noted = DrawnSink::new();
        let mut given = DrawnSink::new();
        for r in &all {
            noted.note(r);
            given.record(r.clone()).expect("kept");
        }
        for got in [noted.finish(), given.finish()] {
            assert_eq!(got.first, whole.first);
            assert_eq!(got.total, whole.total);
            assert_eq!(sorted(got.connects), sorted(whole.connects.clone()));
            assert_eq!(sorted(got.tls), sorted(whole.tls.clone()));
        }
    }
}
