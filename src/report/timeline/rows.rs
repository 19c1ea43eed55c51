//! What the waterfall keeps of each connection while a capture is read:
//! a [`Row`] (its times, label and phases, about a tenth of its record),
//! for every connection, or only the `--top` N longest, or only the
//! `--conn` one (whose whole record its event list needs). Every row is
//! kept as bytes in a spool (`report::spool`: 8 MiB in memory, then a
//! temporary file) with 24 bytes of index, the time axis and label widths
//! they need counted as they come ([`Extent`]); `--top`'s and `--conn`'s
//! few in memory. So `timeline` holds neither records nor rows.
//!
//! Does not draw anything; `timeline` does.

use std::cmp::Ordering;
use std::io;

use super::events::Windows;
use super::{
    client_port, quic_requests_text, quic_segments, requests_text, sanitize, segments, ConnId,
    Phase, Segment, TimelineOpts,
};
use crate::analyze::RecordSink;
use crate::least::{Keyed, Least};
use crate::record::{CloseKind, ConnectionRecord, QuicRecord};
use crate::report::spool::{put_text, take_text, Purpose, Spool, Spooled};

/// Row bytes kept in memory before the spool moves to a temporary file.
const ROWS_MEMORY: usize = 8 << 20;

/// For the one line an error with the spool gives.
static PURPOSE: Purpose = Purpose {
    output: "timeline",
    holds: "its lines until the time axis is known",
    instead: "draw fewer with --top N or --conn ID",
};

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
    /// A QUIC connection's (never spooled: they come with the summary).
    pub quic: bool,
}

impl Row {
    fn of(rec: &ConnectionRecord) -> Row {
        Row {
            id: rec.id,
            start: rec.start.at,
            end: rec.end.at,
            duration: rec.duration,
            port: client_port(&rec.client),
            requests: requests_text(rec),
            segments: segments(rec),
            rst: rec.close.kind == CloseKind::Rst,
            quic: false,
        }
    }

    pub(super) fn of_quic(q: &QuicRecord) -> Row {
        Row {
            id: q.id,
            start: q.start.at,
            end: q.end.at,
            duration: q.duration,
            port: client_port(&q.client),
            requests: quic_requests_text(q),
            segments: quic_segments(q),
            rst: false,
            quic: true,
        }
    }

    /// The id column: `12`, or `q3` for a QUIC connection.
    pub(super) fn label(&self) -> String {
        match self.quic {
            true => format!("q{}", self.id),
            false => self.id.to_string(),
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
    /// Every row, as bytes: where each is, by id.
    All {
        spool: Spool,
        index: Vec<Keyed<Spooled>>,
        extent: Extent,
        /// One row's bytes at a time (it keeps its room).
        bytes: Vec<u8>,
    },
    Longest(Least<Longest>),
    /// `--conn`: the TCP connection named (none when it names a QUIC
    /// one), its record once seen, and the Retry-After windows every
    /// connection was given, for its requests sent inside another's.
    One(Option<u64>, Option<Box<ConnectionRecord>>, Windows),
}

/// The rows a `timeline` draws, gathered as records go by.
pub struct Rows {
    keep: Keep,
    total: u64,
}

/// What the time axis and the label columns need of the rows drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Extent {
    pub count: usize,
    /// The earliest start and the latest end.
    pub span: Option<(f64, f64)>,
    /// The widest id, client port and request count (at least 2, 4, 4).
    pub id_w: usize,
    pub port_w: usize,
    pub req_w: usize,
}

impl Default for Extent {
    fn default() -> Extent {
        Extent {
            count: 0,
            span: None,
            id_w: 2,
            port_w: 4,
            req_w: 4,
        }
    }
}

impl Extent {
    pub(super) fn add(&mut self, row: &Row) {
        self.count += 1;
        self.span = Some(match self.span {
            None => (row.start, row.end),
            Some((t0, t1)) => (
                std::cmp::min_by(t0, row.start, f64::total_cmp),
                std::cmp::max_by(t1, row.end, f64::total_cmp),
            ),
        });
        self.id_w = self.id_w.max(row.label().len());
        self.port_w = self.port_w.max(sanitize(&row.port).chars().count());
        self.req_w = self.req_w.max(row.requests.chars().count());
    }

    fn of(rows: &[Row]) -> Extent {
        let mut extent = Extent::default();
        for row in rows {
            extent.add(row);
        }
        extent
    }
}

/// What [`Rows`] kept, ready to draw.
pub(super) struct Kept {
    pub extent: Extent,
    rows: KeptRows,
    /// Connections in the capture.
    pub total: u64,
    /// `--conn`'s record, and the windows of every connection.
    pub record: Option<(Box<ConnectionRecord>, Windows)>,
}

enum KeptRows {
    Held(Vec<Row>),
    Spooled(Spool, Vec<Keyed<Spooled>>),
}

impl Kept {
    /// Calls `f` with each row, in id order.
    pub fn each(&self, mut f: impl FnMut(&Row) -> io::Result<()>) -> io::Result<()> {
        match &self.rows {
            KeptRows::Held(rows) => rows.iter().try_for_each(f),
            KeptRows::Spooled(spool, index) => {
                let mut buf = Vec::new();
                for entry in index {
                    let row = decode(spool.get(&entry.item, &mut buf)?).ok_or_else(|| {
                        io::Error::other("timeline: a row is broken in its spool")
                    })?;
                    f(&row)?;
                }
                Ok(())
            }
        }
    }
}

impl Rows {
    pub fn new(opts: &TimelineOpts) -> Rows {
        Rows::with_memory(opts, ROWS_MEMORY)
    }

    /// With `memory` bytes of rows kept in memory before the spool moves
    /// to a file (tests use a small one to reach the file).
    fn with_memory(opts: &TimelineOpts, memory: usize) -> Rows {
        let keep = match (opts.conn, opts.top) {
            // A QUIC connection named: no TCP row.
            (Some(ConnId::Tcp(id)), _) => Keep::One(Some(id), None, Windows::default()),
            (Some(ConnId::Quic(_)), _) => Keep::One(None, None, Windows::default()),
            (None, Some(n)) => Keep::Longest(Least::new(n)),
            (None, None) => Keep::All {
                spool: Spool::new(memory, &PURPOSE),
                index: Vec::new(),
                extent: Extent::default(),
                bytes: Vec::new(),
            },
        };
        Rows { keep, total: 0 }
    }

    /// Takes what is drawn of `rec`.
    pub fn note(&mut self, rec: &ConnectionRecord) -> io::Result<()> {
        self.total += 1;
        match &mut self.keep {
            Keep::All {
                spool,
                index,
                extent,
                bytes,
            } => {
                let row = Row::of(rec);
                extent.add(&row);
                bytes.clear();
                encode(&row, bytes)
                    .ok_or_else(|| io::Error::other("timeline: a label of 4 GiB or more"))?;
                index.push(Keyed {
                    key: row.id,
                    item: spool.append(&[bytes])?,
                });
            }
            Keep::Longest(longest) => longest.offer_with(
                |last| longest_first((rec.duration, rec.id), (last.0.duration, last.0.id)).is_lt(),
                || Longest(Row::of(rec)),
            ),
            Keep::One(id, kept, windows) => {
                windows.note(rec);
                if *id == Some(rec.id) {
                    *kept = Some(Box::new(rec.clone()));
                }
            }
        }
        Ok(())
    }

    pub(super) fn finish(self) -> Kept {
        let held = |mut rows: Vec<Row>| {
            rows.sort_by_key(|r| r.id);
            (Extent::of(&rows), KeptRows::Held(rows))
        };
        let ((extent, rows), record) = match self.keep {
            Keep::All {
                spool,
                mut index,
                extent,
                ..
            } => {
                index.sort_unstable();
                ((extent, KeptRows::Spooled(spool, index)), None)
            }
            Keep::Longest(longest) => (
                held(longest.into_sorted().into_iter().map(|l| l.0).collect()),
                None,
            ),
            Keep::One(_, record, windows) => {
                let rows = held(record.iter().map(|r| Row::of(r)).collect());
                (rows, record.map(|r| (r, windows)))
            }
        };
        Kept {
            extent,
            rows,
            total: self.total,
            record,
        }
    }
}

/// Every phase, in the order of their codes in a row's bytes.
const PHASES: [Phase; 7] = [
    Phase::Idle,
    Phase::Wait,
    Phase::Transfer,
    Phase::Tls,
    Phase::Tcp,
    Phase::Close,
    Phase::Hello,
];

/// `row` as bytes: id, start, end, duration, RST (one byte), port and
/// requests (each a spool text field, `put_text`), then each segment
/// (phase code, from, to, request number plus one or 0), little-endian.
fn encode(row: &Row, out: &mut Vec<u8>) -> Option<()> {
    out.extend_from_slice(&row.id.to_le_bytes());
    for t in [row.start, row.end, row.duration] {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.push(u8::from(row.rst));
    put_text(out, &row.port)?;
    put_text(out, &row.requests)?;
    for seg in &row.segments {
        let phase = PHASES.iter().position(|p| *p == seg.phase).unwrap_or(0);
        out.push(phase as u8);
        out.extend_from_slice(&seg.from.to_le_bytes());
        out.extend_from_slice(&seg.to.to_le_bytes());
        let request = seg.request.map_or(0, |n| (n as u64).saturating_add(1));
        out.extend_from_slice(&request.to_le_bytes());
    }
    Some(())
}

/// A row from [`encode`]'s bytes; `None` if they are not such bytes.
fn decode(mut bytes: &[u8]) -> Option<Row> {
    fn take<const N: usize>(bytes: &mut &[u8]) -> Option<[u8; N]> {
        let (head, rest) = bytes.split_first_chunk::<N>()?;
        *bytes = rest;
        Some(*head)
    }
    let f64_of = |b: [u8; 8]| f64::from_le_bytes(b);
    let id = u64::from_le_bytes(take(&mut bytes)?);
    let start = f64_of(take(&mut bytes)?);
    let end = f64_of(take(&mut bytes)?);
    let duration = f64_of(take(&mut bytes)?);
    let rst = take::<1>(&mut bytes)? != [0];
    let port = take_text(&mut bytes)?.to_string();
    let requests = take_text(&mut bytes)?.to_string();
    let mut segments = Vec::new();
    while !bytes.is_empty() {
        let [phase] = take::<1>(&mut bytes)?;
        let from = f64_of(take(&mut bytes)?);
        let to = f64_of(take(&mut bytes)?);
        let request = u64::from_le_bytes(take(&mut bytes)?);
        segments.push(Segment {
            phase: *PHASES.get(usize::from(phase))?,
            from,
            to,
            request: request.checked_sub(1).and_then(|n| usize::try_from(n).ok()),
        });
    }
    Some(Row {
        id,
        start,
        end,
        duration,
        port,
        requests,
        segments,
        rst,
        quic: false,
    })
}

/// `--top`'s order of connections by (duration, id): longest first, then
/// by id.
pub(super) fn longest_first(a: (f64, u64), b: (f64, u64)) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

impl RecordSink for Rows {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.note(&rec)
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
            rows.note(rec).unwrap();
        }
        let kept = rows.finish();
        assert_eq!(kept.total, records.len() as u64);
        let mut ids = Vec::new();
        kept.each(|r| {
            ids.push(r.id);
            Ok(())
        })
        .unwrap();
        assert_eq!(kept.extent.count, ids.len());
        (ids, kept.record.map(|r| r.0.id))
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

    /// Every row `rows` gives, as text.
    fn drawn(rows: Rows) -> (Extent, Vec<String>) {
        let kept = rows.finish();
        let mut texts = Vec::new();
        kept.each(|r| {
            texts.push(format!("{r:?}"));
            Ok(())
        })
        .unwrap();
        (kept.extent, texts)
    }

    #[test]
    fn spooled_rows_come_back_as_they_went_in() {
        let mut records = records();
        // Every phase, requests numbered and not, an odd client port text.
        records[0].client = "[fe80::1%ẹth0]:6\u{7}".into();
        let mut reversed = records.clone();
        reversed.reverse();
        let all = records.len();
        // The rows held in memory (every one of `--top`) are the oracle.
        let mut held = Rows::new(&TimelineOpts {
            top: Some(all),
            ..TimelineOpts::default()
        });
        for rec in &records {
            held.note(rec).unwrap();
        }
        let want = drawn(held);
        assert_eq!(want.1.len(), all);
        let phases: std::collections::HashSet<String> = want
            .1
            .iter()
            .flat_map(|t| {
                PHASES
                    .iter()
                    .filter(|p| t.contains(&format!("phase: {p:?}")))
            })
            .map(|p| format!("{p:?}"))
            .collect();
        assert!(phases.len() >= 5, "{phases:?}");
        for memory in [0, 1000, ROWS_MEMORY] {
            let mut spooled = Rows::with_memory(&TimelineOpts::default(), memory);
            for rec in &reversed {
                spooled.note(rec).unwrap();
            }
            assert_eq!(drawn(spooled), want, "memory {memory}");
        }
    }

    #[test]
    fn broken_row_bytes_are_none_not_a_panic() {
        let row = Row::of(&records()[0]);
        let mut bytes = Vec::new();
        encode(&row, &mut bytes).unwrap();
        assert_eq!(format!("{:?}", decode(&bytes)), format!("{:?}", Some(row)));
        for cut in 0..bytes.len() {
            let _ = decode(&bytes[..cut]);
        }
        let mut rng = crate::testutil::Xorshift(3);
        for len in 0..300 {
            let _ = decode(&rng.bytes(len));
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
            conn: Some(ConnId::Tcp(3)),
            ..TimelineOpts::default()
        };
        assert_eq!(kept(&reversed, &one), (vec![3], Some(3)));
        let none = TimelineOpts {
            conn: Some(ConnId::Tcp(100_000)),
            ..TimelineOpts::default()
        };
        assert_eq!(kept(&records, &none), (vec![], None));
    }
}
