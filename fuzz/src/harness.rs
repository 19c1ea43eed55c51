//! The fuzz targets' bodies, shared by the `cargo fuzz` binaries
//! (fuzz/fuzz_targets/*.rs) and the regression tests in the main crate
//! (tests/fuzz_regressions.rs includes this file with `#[path]`), so a
//! crash input found by a fuzzer replays through exactly the same code.
//!
//! Depends on nothing but `handshakes` and std. Input formats are documented
//! in docs/fuzzing.md.

#![allow(dead_code)]

use std::io::{self, Cursor};
use std::path::Path;

use handshakes::analyze::h2::H2;
use handshakes::analyze::http::{Exchange, Http1};
use handshakes::analyze::tls::TlsAnalyzer;
use handshakes::decode::{TcpFlags, TcpSegment};
use handshakes::flow::reassembly::{Reassembler, StreamSink};
use handshakes::record::{Instant, Side, TlsInfo};
use handshakes::source::file::{Access, FileSource};
use handshakes::source::merge::MergedSource;
use handshakes::source::{FrameBatch, PacketSource, Piece, Split};
use handshakes::time::Timestamp;
use handshakes::RecordSink;

/// Reads little-endian numbers and slices off the front of the input;
/// past the end everything reads as zero / empty.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }
}

// ------------------------------------------------------------------- split

/// What reading a capture gave: each frame (timestamp, link type,
/// original length, bytes), then the warnings, whether it was cut, and the
/// error that ended it.
type Read = (Vec<Got>, Vec<String>, bool, Option<String>);

/// A frame as [`Read`] holds it: timestamp, link type, original length,
/// bytes.
type Got = (i64, u32, u32, Vec<u8>);

fn got(p: &handshakes::source::RawPacket<'_>) -> Got {
    (p.ts.0, p.link.0, p.orig_len, p.data.to_vec())
}

/// What `src` says, after `frames` read and the `error` that ended them.
fn read_of(src: &dyn PacketSource, frames: Vec<Got>, error: Option<String>) -> Read {
    let info = src.info();
    (frames, info.warnings.clone(), info.truncated, error)
}

/// Reads on with `next_packet` after `frames`.
fn read_on(src: &mut dyn PacketSource, mut frames: Vec<Got>) -> Read {
    let error = loop {
        match src.next_packet() {
            Ok(Some(p)) => {
                assert_eq!(
                    p.index,
                    frames.len() as u64 + 1,
                    "packets numbered in order"
                );
                frames.push(got(&p));
            }
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    read_of(src, frames, error)
}

/// The capture at `path` read in pieces of `piece` bytes through memory
/// maps, stitched back as `--threads` does.
fn by_pieces(path: &Path, piece: usize) -> Result<Read, String> {
    let mut src =
        FileSource::open_with(path, Access::Map(Some(4096))).map_err(|e| e.to_string())?;
    Ok(stitched(&mut src, piece))
}

/// `src` read in pieces of `piece` bytes, stitched back as `--threads`
/// does (a piece is kept if it starts where the last ended, walked again
/// from there if not; the source reads on after the first that stops
/// early), or read on as it is if it cannot be split.
fn stitched(src: &mut dyn PacketSource, piece: usize) -> Read {
    let mut frames = Vec::new();
    if let Some(split) = src.split(piece) {
        if split.is_side_by_side() {
            return interleaved(src, &split);
        }
        let mut at = split.first();
        let mut batch = FrameBatch::default();
        for k in 0..split.pieces() {
            let (p, _) = piece_at(&split, k, at, &mut batch);
            for f in &batch.frames {
                let raw = batch.packet(f, 0);
                frames.push(got(&raw));
            }
            if !p.complete {
                at = p.end;
                break;
            }
            at = split.next_start(k, p.end);
        }
        let n = frames.len() as u64;
        src.resume(at, n);
    }
    read_on(src, frames)
}

/// Piece `k` walked into `batch` as `--threads` walks it, starting where
/// the last one ended at `at`: from its guessed first record, and again
/// from `at` if the guess was not that; its records' offsets.
fn piece_at(split: &Split, k: u64, at: u64, batch: &mut FrameBatch) -> (Piece, Vec<u64>) {
    let mut records = Vec::new();
    let mut p = split.walk(k, None, batch, |_, r, _| records.push(r));
    if p.start != at {
        records.clear();
        p = split.walk(k, Some(at), batch, |_, r, _| records.push(r));
    }
    assert!(p.end >= at, "a piece ends before it starts");
    (p, records)
}

/// `src` split side by side: each file's pieces walked in order (a piece
/// kept if it starts where the last ended, walked again from there if
/// not) up to the first that stops early, the files' frames then taken
/// one at a time, the earliest first (ties: the file given first), until
/// a file whose pieces stopped early has none left; then every file reads
/// on from its next record, and the merge from there.
fn interleaved(src: &mut dyn PacketSource, split: &Split) -> Read {
    // Per file: its frames with their records' offsets, where its pieces
    // ended, and whether they stopped early.
    let mut lanes = Vec::new();
    let mut batch = FrameBatch::default();
    for lane in split.lanes() {
        let (mut at, mut walked, mut stopped) = (lane.start, Vec::new(), false);
        for k in lane.first..lane.end {
            let (p, records) = piece_at(split, k, at, &mut batch);
            for (f, r) in batch.frames.iter().zip(records) {
                walked.push((got(&batch.packet(f, 0)), r));
            }
            at = p.end;
            if !p.complete {
                stopped = true;
                break;
            }
        }
        lanes.push((walked.into_iter().peekable(), at, stopped));
    }
    let mut frames = Vec::new();
    loop {
        if lanes
            .iter_mut()
            .any(|(w, _, stopped)| *stopped && w.peek().is_none())
        {
            break;
        }
        let earliest = lanes
            .iter_mut()
            .enumerate()
            .filter_map(|(l, (w, _, _))| w.peek().map(|(g, _)| (g.0, l)))
            .min();
        let Some((_, l)) = earliest else {
            break;
        };
        frames.extend(lanes.get_mut(l).and_then(|(w, _, _)| w.next()).map(|f| f.0));
    }
    let at: Vec<u64> = lanes
        .iter_mut()
        .map(|(w, end, _)| w.peek().map_or(*end, |f| f.1))
        .collect();
    src.resume_parts(&at, frames.len() as u64);
    read_on(src, frames)
}

/// A capture (after one byte that picks the piece size) read in memory-
/// mapped pieces, as several threads read it, must give exactly what
/// reading it with `read()` gives. Returns the number of frames.
pub fn split(data: &[u8]) -> usize {
    let Some((&size, capture)) = data.split_first() else {
        return 0;
    };
    let piece = piece_of(size, capture.len());
    let name = format!(
        "handshakes-fuzz-split-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    );
    let path = std::env::temp_dir().join(name.replace(['(', ')'], ""));
    if std::fs::write(&path, capture).is_err() {
        return 0;
    }
    let expected = FileSource::open_with(&path, Access::Read)
        .map_err(|e| e.to_string())
        .map(|mut src| {
            // The key logs at a pcapng file's head, read again from the file.
            let _ = src.secrets_at_head();
            read_on(&mut src, Vec::new())
        });
    let got = by_pieces(&path, piece);
    let _ = std::fs::remove_file(&path);
    same_reads(&got, &expected, &format!("pieces of {piece}"))
}

/// The piece size a fuzz input's byte picks — from one byte up, so that
/// guesses go wrong and records straddle pieces — but at least 1/256 of
/// the input: each piece's guess may scan the rest of a small file, and
/// with one-byte pieces those scans made a round quadratic in its input
/// (a few inputs a second once the corpus drifted there).
fn piece_of(byte: u8, input: usize) -> usize {
    (1 + usize::from(byte) * 37).max(input / 256)
}

/// Panics, saying where, unless `got` (read as `how`) is `expected` (read
/// with `read()`); the number of frames.
fn same_reads(got: &Result<Read, String>, expected: &Result<Read, String>, how: &str) -> usize {
    if got != expected {
        let brief = |r: &Result<Read, String>| match r {
            Ok((frames, warnings, cut, error)) => format!(
                "{} frames, warnings {warnings:?}, cut {cut}, error {error:?}",
                frames.len()
            ),
            Err(e) => format!("cannot open: {e}"),
        };
        let first = match (got, expected) {
            (Ok(g), Ok(e)) => g.0.iter().zip(&e.0).position(|(a, b)| a != b),
            _ => None,
        };
        panic!(
            "{how}: {}\nread():    {}\nfirst different frame: {first:?}",
            brief(got),
            brief(expected)
        );
    }
    expected.as_ref().map_or(0, |r| r.0.len())
}

// ------------------------------------------------------------------- merge

/// Two captures merged (`--merge`): after one byte that picks the piece
/// size and two (little-endian) that say how long the first capture is,
/// the two files. Walked in chained pieces as several threads walk them,
/// the merge reading on where the pieces stop, they must give exactly
/// what the merge gives reading both files with `read()`. Returns the
/// number of frames.
pub fn merge(data: &[u8]) -> usize {
    let mut input = Bytes::new(data);
    let piece = piece_of(input.u8(), data.len());
    let first = usize::from(input.u16());
    let (a, b) = (input.take(first), input.take(usize::MAX));
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id());
    let tag = tag.replace(['(', ')'], "");
    let paths = [("a", a), ("b", b)].map(|(side, bytes)| {
        let name = format!("handshakes-fuzz-merge-{tag}-{side}");
        (std::env::temp_dir().join(name), bytes)
    });
    if paths
        .iter()
        .any(|(p, bytes)| std::fs::write(p, bytes).is_err())
    {
        return 0;
    }
    let open = |access: Access| -> Result<MergedSource<FileSource>, String> {
        let sources: Result<Vec<_>, _> = paths
            .iter()
            .map(|(p, _)| FileSource::open_with(p, access))
            .collect();
        sources.map(MergedSource::new).map_err(|e| e.to_string())
    };
    let files = || -> Result<Vec<FileSource>, String> {
        let sources = paths
            .iter()
            .map(|(p, _)| FileSource::open_with(p, Access::Read));
        sources.collect::<Result<_, _>>().map_err(|e| e.to_string())
    };
    let by_hand = files().map(|mut inputs| merged_by_hand(&mut inputs));
    let expected = open(Access::Read).map(|mut src| read_on(&mut src, Vec::new()));
    let got = open(Access::Map(Some(4096))).map(|mut src| stitched(&mut src, piece));
    let filled = open(Access::Map(Some(4096))).map(|mut src| filled(&mut src, piece));
    for (p, _) in &paths {
        let _ = std::fs::remove_file(p);
    }
    same_merge(&expected, &by_hand, "merged a packet at a time");
    same_merge(
        &filled,
        &by_hand,
        &format!("merged into batches of {piece} bytes"),
    );
    same_merge(&got, &expected, &format!("merged in pieces of {piece}"))
}

/// Panics, saying where, unless two merges of the same files give the
/// same frames, warnings, cut and error — but for one difference that is
/// not one: when an input's error ends both alike (the same frames, the
/// same error), each may have read the other inputs further on than the
/// other before it (the merge reads each input dozens of frames ahead,
/// the hand-written one a packet, the pieces as far as they reach), and
/// found their warnings (and their cut) there: one's warnings must then
/// hold the other's, and be the ones with the cut if only one has it.
/// Every warning a true fact, none of those inputs' frames handed out.
fn same_merge(got: &Result<Read, String>, expected: &Result<Read, String>, how: &str) -> usize {
    if let (Ok(g), Ok(e)) = (got, expected) {
        let ended_alike = e.3.is_some() && g.0 == e.0 && g.3 == e.3;
        let holds = |more: &Read, less: &Read| {
            less.1.iter().all(|w| more.1.contains(w)) && (more.2 || !less.2)
        };
        if ended_alike && (holds(g, e) || holds(e, g)) {
            return e.0.len();
        }
    }
    same_reads(got, expected, how)
}

/// The merge's order as it is defined, by the simplest code: one packet
/// copied ahead per input, the earliest taken (ties: the earlier input);
/// an input's error ends the merge when its next packet is wanted.
fn merged_by_hand(inputs: &mut [FileSource]) -> Read {
    let mut heads: Vec<Option<Got>> = inputs.iter().map(|_| None).collect();
    let mut done = vec![false; inputs.len()];
    let mut frames = Vec::new();
    let error = 'merge: loop {
        for ((input, head), done) in inputs.iter_mut().zip(&mut heads).zip(&mut done) {
            if head.is_some() || *done {
                continue;
            }
            match input.next_packet() {
                Ok(Some(p)) => *head = Some(got(&p)),
                Ok(None) => *done = true,
                Err(e) => break 'merge Some(e.to_string()),
            }
        }
        let earliest = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|p| (p.0, i)))
            .min();
        let Some((_, i)) = earliest else {
            break None;
        };
        frames.extend(heads.get_mut(i).and_then(Option::take));
    };
    let warnings = inputs
        .iter()
        .flat_map(|s| s.info().warnings.clone())
        .collect();
    let cut = inputs.iter().any(|s| s.info().truncated);
    (frames, warnings, cut, error)
}

/// `src` read with `fill` into batches of about `bytes` bytes (and at most
/// seven frames), as several threads read what they cannot walk in pieces.
fn filled(src: &mut dyn PacketSource, bytes: usize) -> Read {
    let mut frames = Vec::new();
    let mut batch = FrameBatch::default();
    let error = loop {
        batch.clear();
        let more = src.fill(&mut batch, bytes, 7);
        for f in &batch.frames {
            let raw = batch.packet(f, 0);
            frames.push(got(&raw));
        }
        match more {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    read_of(src, frames, error)
}

// ---------------------------------------------------------------- pipeline

/// Arbitrary bytes as a capture file, through the whole pipeline and every
/// report (JSON, table, CSV, timeline, HTML); on several threads, and with
/// shards that pause after every record or two, the same records in the
/// same order and the same summary as on one thread.
pub fn pipeline(data: &[u8]) {
    let run = |threads: usize, slice: Option<usize>| {
        let input = Box::new(Cursor::new(data.to_vec()));
        let mut src = FileSource::from_reader(Path::new("fuzz"), input).ok()?;
        let config = handshakes::Config {
            threads,
            slice,
            ..handshakes::Config::default()
        };
        let mut records = Vec::new();
        let summary = handshakes::analyze(&mut src, &config, &mut records);
        Some(summary.map(|summary| (summary, records)))
    };
    let Some(Ok((summary, records))) = run(1, None) else {
        return;
    };
    let text = |summary: &handshakes::Summary, records: &[handshakes::ConnectionRecord]| {
        serde_json::to_string(&(summary, records)).expect("records as JSON")
    };
    let one = text(&summary, &records);
    for (threads, slice) in [(2, None), (1, Some(1)), (2, Some(1)), (3, Some(2))] {
        let Some(Ok((s, r))) = run(threads, slice) else {
            panic!("{threads} threads, slices of {slice:?}: the analysis failed where one thread's did not");
        };
        assert!(
            text(&s, &r) == one,
            "{threads} threads, slices of {slice:?}: not one thread's records and summary"
        );
    }
    assert_eq!(summary.connections, records.len() as u64, "connections");
    let p = &summary.packets;
    assert_eq!(
        p.total,
        p.tcp + p.skipped + p.filtered_out + p.fragments,
        "every frame counted once: TCP, skipped, filtered out or a held fragment"
    );
    assert_eq!(
        summary.requests,
        records.iter().map(|r| r.requests_served()).sum::<u64>(),
        "requests in the summary and the records (less those sent after their close)"
    );
    assert_eq!(
        summary.requests,
        summary.requests_exact + summary.requests_estimated,
        "exact + estimated requests"
    );
    if let Some(n) = &summary.not_resumed {
        assert!(n.not_offered + n.refused <= n.full, "not resumed: parts");
        assert!(n.full <= summary.tls_handshakes_full, "not resumed: full");
        assert_eq!(
            n.first.len() as u64,
            n.not_offered.min(1024),
            "not resumed: listed"
        );
        let by_server: u64 = summary.servers.iter().map(|s| s.tls_not_offered).sum();
        assert!(by_server <= n.not_offered, "not resumed: by server");
    }
    if let Some(b) = &summary.beside_http2 {
        assert!(
            b.connections <= b.checked,
            "beside HTTP/2: more than checked"
        );
        assert!(
            b.raced.max(b.carried_none) <= b.connections,
            "beside HTTP/2: parts"
        );
        assert!(
            b.connections + b.at_limit + b.after_goaway <= b.checked,
            "beside HTTP/2: counted and needed past those checked"
        );
        assert_eq!(
            b.stream_limit.is_some(),
            b.stream_limit.is_some() && b.at_limit > 0,
            "beside HTTP/2: a stream limit without a connection at it"
        );
        assert!(b.checked <= summary.connections, "beside HTTP/2: checked");
        let by_server: u64 = summary.servers.iter().map(|s| s.beside_http2).sum();
        assert!(by_server <= b.connections, "beside HTTP/2: by server");
        let listed = b.first.iter().map(|f| (f.connection, f.http2_connection));
        let ids: std::collections::HashSet<u64> = records.iter().map(|r| r.id).collect();
        for (c, h) in listed {
            assert!(
                c != h && ids.contains(&c) && ids.contains(&h),
                "beside HTTP/2: ids"
            );
        }
    }
    let mut json = Vec::new();
    let mut document = handshakes::report::json::DocumentSink::new(&mut json);
    for rec in &records {
        document.record(rec.clone()).expect("json record");
    }
    document.finish(&summary).expect("json report");
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(&json) {
        panic!("the JSON report does not parse: {e}");
    }
    // As wide as its content, and wrapped to a narrow terminal.
    for (fit_terminal, width) in [(false, None), (true, Some(70))] {
        let opts = handshakes::report::Opts {
            limit: 0,
            fit_terminal,
            width,
        };
        handshakes::report::table::write(&summary, &records, &mut io::sink(), &opts)
            .expect("table report");
    }
    other_reports(&summary, &records);
}

/// The CSV rows, the timeline (every connection, the longest, one) and
/// the HTML report of `records`: none may fail or panic, whatever the
/// records hold.
fn other_reports(summary: &handshakes::Summary, records: &[handshakes::ConnectionRecord]) {
    use handshakes::report::{compare::Labeled, csv::CsvReport, drawn::DrawnSink, html, timeline};
    let mut csv = CsvReport::new();
    let mut out = io::sink();
    let mut rows = csv.sink("fuzz", &mut out).expect("csv header");
    for rec in records {
        rows.record(rec.clone()).expect("csv row");
    }
    rows.finish().expect("csv report");
    use timeline::ConnId::{Quic, Tcp};
    let one = [(Some(Tcp(1)), None), (Some(Quic(1)), None)];
    for (conn, top) in [(None, None), (None, Some(3))].into_iter().chain(one) {
        let opts = timeline::TimelineOpts {
            width: 80,
            color: conn.is_some(),
            conn,
            top,
        };
        timeline::write(records, summary, &mut io::sink(), &opts).expect("timeline");
    }
    let mut drawn = DrawnSink::new();
    for rec in records {
        drawn.note(rec);
    }
    let doc = Labeled {
        label: "fuzz".into(),
        summary,
        drawn: std::borrow::Cow::Owned(drawn.finish()),
    };
    html::write(&[doc.clone(), doc], &mut io::sink()).expect("html report");
}

// -------------------------------------------------------------- reassembly

/// Counts what a reassembler hands out.
#[derive(Default)]
struct Tally {
    data: u64,
    gaps: u64,
}

impl StreamSink for Tally {
    fn data(&mut self, _ts: Timestamp, bytes: &[u8]) {
        assert!(!bytes.is_empty(), "empty data chunk delivered");
        self.data += bytes.len() as u64;
    }
    fn gap(&mut self, len: u64) {
        assert!(len > 0, "empty gap reported");
        self.gaps += len;
    }
}

/// Operations on one `Reassembler`:
///
/// * header: cap selector (1 byte), initial sequence number (4 bytes);
/// * then ops, each starting with an op byte:
///   * `0..=0xbf` — a segment: flags (1), seq (2 relative to the ISN, or 4
///     absolute when op bit 0x20 is set), payload length (1, times 1 or 16
///     when op bit 0x10 is set), extra wire length (1, or 4 when op bit
///     0x08 is set), then the payload bytes;
///   * `0xc0..=0xef` — an ack (2 relative, or 4 absolute when bit 0x08);
///   * `0xf0..` — finish.
///
/// Invariants: no panic; the sink never receives more data bytes than the
/// segments carried; `delivered()` is exactly data + gaps and never goes
/// back; `buffered()` stays within the cap (and is 0 after `finish`).
pub fn reassembly(data: &[u8]) {
    let mut b = Bytes::new(data);
    let cap = match b.u8() % 4 {
        0 => 0,
        1 => 16,
        2 => 1024,
        _ => 256 * 1024,
    };
    let isn = b.u32();
    let mut r = Reassembler::new(cap);
    let mut sink = Tally::default();
    let mut given: u64 = 0;
    let mut last_delivered = 0;
    let mut ts = 0i64;
    let mut scratch = Vec::new();
    while !b.is_empty() {
        let op = b.u8();
        ts += 1;
        match op {
            0..=0xbf => {
                let flags = b.u8();
                let seq = if op & 0x20 != 0 {
                    b.u32()
                } else {
                    isn.wrapping_add(u32::from(b.u16()))
                };
                let mut len = usize::from(b.u8());
                if op & 0x10 != 0 {
                    len *= 16;
                }
                let extra = if op & 0x08 != 0 {
                    b.u32()
                } else {
                    u32::from(b.u8())
                };
                let payload = b.take(len);
                // Repeat the available bytes when the input ran short, so
                // long segments need not be spelled out.
                scratch.clear();
                scratch.extend(payload.iter().copied().cycle().take(len));
                let payload: &[u8] = if payload.is_empty() { &[] } else { &scratch };
                let seg = TcpSegment {
                    src: "10.0.0.1:1".parse().expect("addr"),
                    dst: "10.0.0.2:2".parse().expect("addr"),
                    seq,
                    ack: 0,
                    flags: TcpFlags(flags),
                    window: 100,
                    payload,
                    payload_len: (payload.len() as u32).saturating_add(extra),
                    overlay: None,
                };
                given += payload.len() as u64;
                r.segment(&seg, Timestamp(ts), &mut sink);
            }
            0xc0..=0xef => {
                let ack = if op & 0x08 != 0 {
                    b.u32()
                } else {
                    isn.wrapping_add(u32::from(b.u16()))
                };
                r.acked(ack, &mut sink);
            }
            _ => {
                r.finish(&mut sink);
                assert_eq!(r.buffered(), 0, "bytes left buffered after finish");
            }
        }
        assert!(
            sink.data <= given,
            "delivered {} data bytes but only {given} were given",
            sink.data
        );
        assert_eq!(
            r.delivered(),
            sink.data + sink.gaps,
            "delivered() is not data + gaps"
        );
        assert!(r.delivered() >= last_delivered, "delivered() went back");
        last_delivered = r.delivered();
        assert!(r.buffered() <= cap, "buffered {} > cap {cap}", r.buffered());
        assert_eq!(r.stats.gap_bytes, sink.gaps, "gap statistics disagree");
    }
    r.finish(&mut sink);
    assert_eq!(r.buffered(), 0, "bytes left buffered after finish");
    assert_eq!(r.delivered(), sink.data + sink.gaps);
}

// ------------------------------------------------------- stream analyzers

/// One step of a two-sided stream conversation.
pub enum Step<'a> {
    Data(Side, Timestamp, &'a [u8]),
    Gap(Side, u64),
}

/// Splits input into conversation steps. Each step starts with a control
/// byte `c`: bit 0 is the side (0 client, 1 server); the time advances by
/// `c >> 2` milliseconds; bit 1 set means a gap whose length follows (1
/// byte, or 4 when bit 7 is set as well: `c & 0x82 == 0x82`), otherwise
/// data whose length follows as 2 bytes little-endian, then the bytes.
pub fn steps(b: &mut Bytes<'_>, mut f: impl FnMut(Step<'_>)) {
    let mut ts = 1_700_000_000_000_000_000i64;
    while !b.is_empty() {
        let c = b.u8();
        let side = if c & 1 == 0 {
            Side::Client
        } else {
            Side::Server
        };
        ts += i64::from(c >> 2) * 1_000_000;
        if c & 2 != 0 {
            let len = if c & 0x80 != 0 {
                u64::from(b.u32())
            } else {
                u64::from(b.u8())
            };
            f(Step::Gap(side, len));
        } else {
            let len = usize::from(b.u16());
            f(Step::Data(side, Timestamp(ts), b.take(len)));
        }
    }
}

fn instant(ts: Timestamp) -> Instant {
    Instant {
        ts: ts.as_secs_f64(),
        at: ts.as_secs_f64(),
    }
}

/// TLS analysis of a conversation: header cap selector (1 byte) and keep
/// (1 byte), then [`steps`]. Returns the TLS section, as a record would
/// have it.
pub fn tls_stream(data: &[u8]) -> Option<TlsInfo> {
    let mut b = Bytes::new(data);
    let cap = match b.u8() % 4 {
        0 => 64,
        1 => 1024,
        2 => 16 * 1024,
        _ => 256 * 1024,
    };
    let keep = usize::from(b.u8() % 8);
    let mut tls = TlsAnalyzer::new(cap, keep);
    steps(&mut b, |step| match step {
        Step::Data(side, ts, bytes) => {
            if tls.wants_data() {
                tls.data(side, ts, bytes)
            }
        }
        Step::Gap(side, len) => tls.gap(side, len),
    });
    let _ = tls.malformed();
    let _ = tls.alpn_h2();
    let _ = tls.is_tls();
    tls.end_of_streams();
    let flights = tls.flights();
    let _ = format!("{flights:?}");
    let info = tls
        .take_findings(Timestamp(0))
        .map(|findings| findings.into_info(&instant));
    let _ = format!("{info:?}");
    info
}

/// Which cleartext HTTP parser a `http` input drives.
enum Proto {
    Http1(Http1),
    H2(H2),
}

/// HTTP/1.x or h2c on a conversation: a selector byte (0 HTTP/1.x, which
/// hands over to HTTP/2 after `101` to `Upgrade: h2c` as the connection
/// driver does; 1 HTTP/2 with prior knowledge; 2 HTTP/2 after an upgrade),
/// keep (1 byte), then [`steps`]. Returns whether it ended as HTTP/2, and
/// the requests and responses counted.
pub fn http(data: &[u8]) -> (bool, u64, u64) {
    let mut b = Bytes::new(data);
    let selector = b.u8() % 3;
    let keep = usize::from(b.u8() % 8);
    let mut proto = match selector {
        0 => Proto::Http1(Http1::new(keep)),
        1 => Proto::H2(H2::prior_knowledge(keep)),
        _ => Proto::H2(H2::after_upgrade(
            keep,
            Some(Exchange::started(Timestamp(1))),
        )),
    };
    let mut last_server = None;
    steps(&mut b, |step| match step {
        Step::Data(side, ts, bytes) => {
            if side == Side::Server {
                last_server = Some(ts);
            }
            match &mut proto {
                Proto::Http1(h) => {
                    let used = h.data(side, ts, bytes);
                    assert!(used <= bytes.len(), "used more bytes than given");
                    if h.switched()
                        && h.upgrade
                            .as_deref()
                            .is_some_and(|u| u.eq_ignore_ascii_case("h2c"))
                    {
                        let upgraded = h.exchanges.last_mut().map(|e| e.clone());
                        let mut h2 = H2::after_upgrade(keep, upgraded);
                        h2.data(side, ts, bytes.get(used..).unwrap_or(&[]));
                        proto = Proto::H2(h2);
                    }
                }
                Proto::H2(h) => h.data(side, ts, bytes),
            }
        }
        Step::Gap(side, len) => match &mut proto {
            Proto::Http1(h) => h.gap(side, len),
            Proto::H2(h) => h.gap(side, len),
        },
    });
    match &mut proto {
        Proto::Http1(h) => {
            h.finish(last_server);
            assert!(
                h.exchanges.len() as u64 == h.requests
                    && h.exchanges.listed().len() as u64 <= h.requests,
                "exchanges and requests disagree"
            );
            let _ = h.wants_data();
            (false, h.requests, h.responses)
        }
        Proto::H2(h) => {
            let _ = h.wants_data();
            let _ = format!("{h:?}");
            let end = last_server.unwrap_or(Timestamp(0));
            let at = |t: Timestamp| handshakes::record::Instant {
                ts: t.as_secs_f64(),
                at: t.as_secs_f64(),
            };
            if let Some(l) = (*std::mem::take(&mut h.limit)).into_record(end, &at) {
                assert!(l.at_limit_spans.len() <= 16, "spans at the limit unbounded");
                assert!(
                    l.at_limit_spans.len() as u64 <= u64::from(l.at_limit),
                    "more spans than times at the limit"
                );
                assert!(
                    l.at_limit_spans.iter().all(|(a, b)| a.at <= b.at),
                    "a span at the limit ends before it starts"
                );
                assert!(l.at_limit_seconds >= 0.0, "negative seconds at the limit");
            }
            (true, h.requests, h.responses)
        }
    }
}

/// `certificate`: byte 0 chooses how the rest is read — 0 as TLS 1.2's
/// Certificate body, 1 as TLS 1.3's, anything else as a
/// CompressedCertificate body (RFC 8879: zlib, brotli or zstd, opened by
/// `handshakes::inflate`). Returns the chain's length and bytes.
pub fn certificate(data: &[u8]) -> Option<(u64, u64)> {
    use handshakes::analyze::tls::certificate::{
        certificate_message, compressed_certificate_message,
    };
    let (&mode, body) = data.split_first()?;
    let info = match mode {
        0 | 1 => certificate_message(body, mode == 1),
        _ => compressed_certificate_message(body),
    }?;
    Some((info.chain, info.bytes))
}
