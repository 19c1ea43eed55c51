//! What the waterfall keeps of each connection while a capture is read:
//! a [`Row`] (its times, label and phases, about a tenth of its record),
//! for every connection, or only the `--top` N longest, or only the
//! `--conn` one (whose whole record its event list needs). So `timeline`
//! holds rows, not records, and with `--top` or `--conn` a bounded number
//! of them.
//!
//! Does not draw anything; `timeline` does.

use std::cmp::Ordering;
use std::io;

use super::{client_port, requests_text, segments, Segment, TimelineOpts};
use crate::analyze::RecordSink;
use crate::least::Least;
use crate::record::{CloseKind, ConnectionRecord};

/// What one connection's line shows.
#[derive(Clone, Debug)]
pub(super) struct Row {
    pub id: u64,
    pub start: f64,
    pub end: f64,
    pub duration: f64,
    /// The client's port (its whole address if it has none).
    pub port: String,
    pub requests: String,
    pub segments: Vec<Segment>,
    pub rst: bool,
}

impl Row {
    fn of(rec: &ConnectionRecord) -> Row {
        Row {
            id: rec.id,
            start: rec.start.at,
            end: rec.end.at,
            duration: rec.duration,
            port: client_port(rec),
            requests: requests_text(rec),
            segments: segments(rec),
            rst: rec.close.kind == CloseKind::Rst,
        }
    }
}

/// A row ordered longest first, then by id: `--top`'s order.
struct Longest(Row);

impl PartialEq for Longest {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Longest {}
impl PartialOrd for Longest {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Longest {
    fn cmp(&self, other: &Self) -> Ordering {
        longest_first((self.0.duration, self.0.id), (other.0.duration, other.0.id))
    }
}

enum Keep {
    All(Vec<Row>),
    Longest(Least<Longest>),
    One(u64, Option<Box<ConnectionRecord>>),
}

/// The rows a `timeline` draws, gathered as records go by.
pub struct Rows {
    keep: Keep,
    total: u64,
}

/// What [`Rows`] kept, ready to draw.
pub(super) struct Kept {
    /// In id order.
    pub rows: Vec<Row>,
    /// Connections in the capture.
    pub total: u64,
    /// `--conn`'s record.
    pub record: Option<Box<ConnectionRecord>>,
}

impl Rows {
    pub fn new(opts: &TimelineOpts) -> Rows {
        let keep = match (opts.conn, opts.top) {
            (Some(id), _) => Keep::One(id, None),
            (None, Some(n)) => Keep::Longest(Least::new(n)),
            (None, None) => Keep::All(Vec::new()),
        };
        Rows { keep, total: 0 }
    }

    /// Takes what is drawn of `rec`.
    pub fn note(&mut self, rec: &ConnectionRecord) {
        self.total += 1;
        match &mut self.keep {
            Keep::All(rows) => rows.push(Row::of(rec)),
            Keep::Longest(longest) => longest.offer_with(
                |last| longest_first((rec.duration, rec.id), (last.0.duration, last.0.id)).is_lt(),
                || Longest(Row::of(rec)),
            ),
            Keep::One(id, kept) if rec.id == *id => *kept = Some(Box::new(rec.clone())),
            Keep::One(..) => {}
        }
    }

    pub(super) fn finish(self) -> Kept {
        let (mut rows, record) = match self.keep {
            Keep::All(rows) => (rows, None),
            Keep::Longest(longest) => (
                longest.into_sorted().into_iter().map(|l| l.0).collect(),
                None,
            ),
            Keep::One(_, record) => (record.iter().map(|r| Row::of(r)).collect(), record),
        };
        rows.sort_by_key(|r| r.id);
        Kept {
            rows,
            total: self.total,
            record,
        }
    }
}

/// `--top`'s order of connections by (duration, id): longest first, then
/// by id.
fn longest_first(a: (f64, u64), b: (f64, u64)) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

impl RecordSink for Rows {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.note(&rec);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::records_of;

    /// The records of a real capture of many short connections.
    fn records() -> Vec<ConnectionRecord> {
        let path = std::path::Path::new("captures/java-urlconnection-keepalive-off-10x10.pcap");
        let (_, records) = records_of(path).expect("the capture is analysed");
        assert!(records.len() >= 50, "{} connections", records.len());
        records
    }

    fn kept(records: &[ConnectionRecord], opts: &TimelineOpts) -> (Vec<u64>, Option<u64>) {
        let mut rows = Rows::new(opts);
        for rec in records {
            rows.note(rec);
        }
        let kept = rows.finish();
        assert_eq!(kept.total, records.len() as u64);
        let ids = kept.rows.iter().map(|r| r.id).collect();
        (ids, kept.record.map(|r| r.id))
    }

    #[test]
    fn top_keeps_the_longest_whatever_the_order_of_arrival() {
        let mut records = records();
        // Ties in duration are decided by id: make some.
        for rec in records.iter_mut().step_by(7) {
            rec.duration = 0.5;
        }
        let mut by_length = records.clone();
        by_length.sort_by(|a, b| b.duration.total_cmp(&a.duration).then(a.id.cmp(&b.id)));
        let mut reversed = records.clone();
        reversed.reverse();
        for n in [0, 1, 2, 5, 13, records.len(), records.len() + 3] {
            let mut want: Vec<u64> = by_length.iter().take(n).map(|r| r.id).collect();
            want.sort_unstable();
            let opts = TimelineOpts {
                top: Some(n),
                ..TimelineOpts::default()
            };
            assert_eq!(kept(&records, &opts), (want.clone(), None), "top {n}");
            assert_eq!(kept(&reversed, &opts), (want, None), "top {n}, reversed");
        }
    }

    #[test]
    fn conn_keeps_its_record_and_all_keeps_every_row_in_id_order() {
        let records = records();
        let mut reversed = records.clone();
        reversed.reverse();
        let mut all: Vec<u64> = records.iter().map(|r| r.id).collect();
        all.sort_unstable();
        assert_eq!(kept(&reversed, &TimelineOpts::default()), (all, None));
        let one = TimelineOpts {
            conn: Some(3),
            ..TimelineOpts::default()
        };
        assert_eq!(kept(&reversed, &one), (vec![3], Some(3)));
        let none = TimelineOpts {
            conn: Some(100_000),
            ..TimelineOpts::default()
        };
        assert_eq!(kept(&records, &none), (vec![], None));
    }
}
