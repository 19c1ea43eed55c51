//! `FileSource::fill` against `next_packet`: every capture in captures/ and
//! the shared corpus, and the made-up captures of `tests` (tiny buffers,
//! trickling input, cut and over-large records, read errors), read through
//! batches of many limits, alone and mixed with `next_packet`, must give the
//! same frames, the same end, warnings and error, and the same bytes read.
//!
//! Does not test what the frames mean; only that both ways agree.

use super::*;
use crate::source::{FrameBatch, RawPacket};
use crate::testutil::captures_under;

/// A frame as both ways give it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Got {
    ts: Timestamp,
    link: LinkType,
    orig_len: u32,
    data: Vec<u8>,
}

impl Got {
    pub(super) fn of(p: &RawPacket<'_>) -> Got {
        Got {
            ts: p.ts,
            link: p.link,
            orig_len: p.orig_len,
            data: p.data.to_vec(),
        }
    }
}

/// Everything one way of reading a whole capture gives.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) frames: Vec<Got>,
    pub(super) error: Option<String>,
    pub(super) warnings: Vec<String>,
    pub(super) truncated: bool,
    pub(super) format: String,
    pub(super) progress: (u64, Option<u64>),
}

/// One call: `fill` with these limits (bytes, frames), or `next_packet`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    Fill(usize, usize),
    Next,
}
use Step::{Fill, Next};

/// Ways to read a capture, each repeated until its end.
pub(super) const PLANS: &[&[Step]] = &[
    &[Fill(1, usize::MAX)],
    &[Fill(usize::MAX, 1)],
    &[Fill(1, 1)],
    &[Fill(100, 4096)],
    &[Fill(64 << 10, 4096)],
    &[Fill(1 << 20, 4096)],
    &[Fill(1 << 20, 3)],
    &[Fill(5000, 7), Fill(1 << 20, 4096), Fill(200, 1000)],
    &[Next, Fill(100, 2), Next, Next, Fill(1 << 20, 4096)],
    &[Fill(3000, 5), Next],
];

fn finish(src: &FileSource, frames: Vec<Got>, error: Option<String>) -> Run {
    Run {
        frames,
        error,
        warnings: src.info().warnings.clone(),
        truncated: src.info().truncated,
        format: src.info().format.clone(),
        progress: src.progress(),
    }
}

/// Reads with `next_packet` only.
pub(super) fn by_next(src: FileSource) -> Run {
    by_next_after(src, Vec::new())
}

/// Reads on with `next_packet` after `frames` were read otherwise.
pub(super) fn by_next_after(mut src: FileSource, mut frames: Vec<Got>) -> Run {
    let error = loop {
        match src.next_packet() {
            Ok(Some(p)) => {
                assert_eq!(p.index, frames.len() as u64 + 1);
                frames.push(Got::of(&p));
            }
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    assert!(src.next_packet().expect("ended").is_none());
    finish(&src, frames, error)
}

/// Reads following `plan` over and over; with `append`, a batch is only
/// cleared once it has reached the next call's limits. Checks that every
/// batch but the last makes progress and stays within its limit.
pub(super) fn by_fill(mut src: FileSource, plan: &[Step], append: bool) -> Run {
    let mut frames = Vec::new();
    let mut batch = FrameBatch::default();
    let mut error = None;
    'reading: for step in plan.iter().cycle() {
        match *step {
            Next => match src.next_packet() {
                Ok(Some(p)) => {
                    assert_eq!(p.index, frames.len() as u64 + 1);
                    frames.push(Got::of(&p));
                }
                Ok(None) => break 'reading,
                Err(e) => {
                    error = Some(e.to_string());
                    break 'reading;
                }
            },
            Fill(bytes, most) => {
                if !append || batch.data.len() >= bytes || batch.frames.len() >= most {
                    batch.clear();
                }
                let (data_before, frames_before) = (batch.data.len(), batch.frames.len());
                let more = src.fill(&mut batch, bytes, most);
                let new = batch.frames.get(frames_before..).unwrap_or_default();
                for frame in new {
                    assert!(frame.start <= frame.end);
                    assert!(frame.start >= data_before || batch.is_mapped());
                    frames.push(Got::of(&batch.packet(frame, 0)));
                }
                // A batch of a mapped file holds no bytes of its own.
                let copied = new.first().zip(new.last()).filter(|_| !batch.is_mapped());
                if let Some((first, last)) = copied {
                    // Never past the limit, but for one whole first record
                    // (copied packets — pcapng, a mapped file's frames
                    // added to a batch from elsewhere — may end one past it).
                    assert!(
                        batch.data.len() <= bytes.max(first.end) || src.classic_buffer().is_none(),
                        "{} bytes for a limit of {bytes}",
                        batch.data.len()
                    );
                    assert!(batch.data.len() >= last.end);
                }
                match more {
                    Ok(true) => assert!(!new.is_empty(), "a full batch without a frame"),
                    Ok(false) => break 'reading,
                    Err(e) => {
                        error = Some(e.to_string());
                        break 'reading;
                    }
                }
            }
        }
    }
    // Once ended, it stays ended.
    batch.clear();
    assert!(!src.fill(&mut batch, 1 << 20, 4096).expect("ended"));
    assert!(batch.frames.is_empty());
    assert!(src.next_packet().expect("ended").is_none());
    finish(&src, frames, error)
}

/// Checks every plan against `next_packet` on sources `open` makes.
pub(super) fn agree(what: &str, open: &dyn Fn() -> FileSource) -> Run {
    let expected = by_next(open());
    for plan in PLANS {
        for append in [false, true] {
            let got = by_fill(open(), plan, append);
            assert!(
                got == expected,
                "{what}: {plan:?} append {append}: {} frames {:?} {:?}, expected {} {:?} {:?}",
                got.frames.len(),
                got.error,
                got.warnings,
                expected.frames.len(),
                expected.error,
                expected.warnings,
            );
        }
    }
    expected
}

#[test]
fn fill_agrees_with_next_packet_on_every_capture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("../shared/corpus");
    let mut files = Vec::new();
    captures_under(&root.join("captures"), &mut files);
    let ours = files.len();
    assert!(ours > 0, "no captures in captures/");
    if corpus.is_dir() {
        captures_under(&corpus, &mut files);
    } else {
        eprintln!(
            "\n*** SKIPPED: {} is missing; fill was checked on captures/ only ***\n",
            corpus.display()
        );
        assert!(
            std::env::var_os("HANDSHAKES_REQUIRE_ALL").is_none(),
            "HANDSHAKES_REQUIRE_ALL is set and the corpus is missing"
        );
    }
    let mut classic = 0;
    for path in &files {
        let Ok(src) = FileSource::open(path) else {
            continue;
        };
        drop(src);
        let open = || FileSource::open(path).expect("opened before");
        let run = agree(&path.display().to_string(), &open);
        if run.format == "pcap" {
            classic += 1;
            // Everything was read, and counted.
            if run.progress.1.is_some() && !run.truncated {
                assert_eq!(Some(run.progress.0), run.progress.1, "{}", path.display());
            }
        }
    }
    assert!(
        classic > 20,
        "only {classic} classic captures among {files:?}"
    );
}

#[test]
fn varied_captures_through_small_buffers_and_short_reads() {
    for &(magic, big_endian) in FORMATS {
        let (bytes, expected) = varied(magic, big_endian);
        for buffer in [1, 16, 24, 25, 31, 40, 64, 100, 117, 128, 1000, BUFFER] {
            let what = format!("magic {magic:x} big-endian {big_endian} buffer {buffer}");
            let run = agree(&what, &|| open(cursor(bytes.clone()), buffer));
            assert_eq!(run.frames.len(), expected.len());
            agree(&what, &|| open(trickle(bytes.clone()), buffer));
        }
    }
}

#[test]
fn gzip_capture_through_fill() {
    use std::io::Write;
    let (bytes, expected) = varied(MAGIC_MICROS, false);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).expect("compresses");
    let gz = gz.finish().expect("compresses");
    for buffer in [33, BUFFER] {
        let run = agree("gzip", &|| open(trickle(gz.clone()), buffer));
        assert_eq!(run.frames.len(), expected.len());
    }
}

#[test]
fn truncated_final_header_or_body_through_fill() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    let whole = w.bytes.len();
    w.record(3, 4, 6, &[5, 6, 7, 8, 9, 10]);
    for cut in [
        whole,
        whole + 1,
        whole + 10,
        whole + 15,
        whole + 16,
        whole + 19,
    ] {
        for buffer in [24, 30, BUFFER] {
            let mut bytes = w.bytes.clone();
            bytes.truncate(cut);
            let run = agree("cut", &|| open(cursor(bytes.clone()), buffer));
            agree("cut, trickling", &|| open(trickle(bytes.clone()), buffer));
            assert_eq!(run.frames.len(), 1);
            assert_eq!(run.truncated, cut != whole);
        }
    }
}

#[test]
fn zero_length_records_through_fill() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 0, 60, &[]);
    w.record(2, 0, 3, &[1, 2, 3]);
    w.record(3, 0, 0, &[]);
    w.record(4, 0, 0, &[]);
    let run = agree("zero-length", &|| open(cursor(w.bytes.clone()), 20));
    assert_eq!(run.frames.len(), 4);
    agree("zero-length", &|| open(trickle(w.bytes.clone()), BUFFER));
}

#[test]
fn records_over_and_at_the_limit_through_fill() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    w.record(2, 2, 0, &vec![7; MAX_RECORD - 16]);
    w.record(3, 2, 3, &[4, 5, 6]);
    let at = w.bytes.len();
    w.record(4, 4, 0, &vec![0; MAX_RECORD + 1 - 16]);
    w.record(5, 2, 3, &[1, 2, 3]);
    for plan in [
        &[Fill(1 << 20, 4096)][..],
        &[Fill(1, 1)],
        &[Next, Fill(100, 2)],
    ] {
        let run = by_fill(open(cursor(w.bytes.clone()), BUFFER), plan, false);
        assert_eq!(run.frames.len(), 3);
        assert_eq!(run.frames[1].data.len(), MAX_RECORD - 16);
        assert!(run.truncated);
        assert_eq!(
            run.warnings,
            vec![format!(
                "t.pcap: a block at byte {at} is larger than 64 MiB; stopped reading there"
            )]
        );
    }
}

#[test]
fn a_short_input_claiming_a_huge_record_grows_nothing_through_fill() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    w.record(3, 4, 3, &[5, 6, 7]);
    let at = w.bytes.len() - 19;
    w.bytes[at + 8..at + 12].copy_from_slice(&(48u32 << 20).to_le_bytes());
    let run = agree("huge claim", &|| open(cursor(w.bytes.clone()), BUFFER));
    assert_eq!(run.frames.len(), 1);
    assert!(run.truncated);
    for (bytes, frames) in [(1 << 20, 4096), (1, 1), (100, 1)] {
        let mut src = open(cursor(w.bytes.clone()), BUFFER);
        let mut batch = FrameBatch::default();
        while src.fill(&mut batch, bytes, frames).expect("reads") {
            batch.clear();
        }
        assert!(batch.data.capacity() <= 2 * BUFFER);
        assert_eq!(src.classic_buffer(), Some(BUFFER));
        assert!(src.info().warnings[0].contains("cut short"));
    }
}

#[test]
fn batches_stay_within_their_limits() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    for i in 0..200u32 {
        w.record(i, 0, 9000, &vec![i as u8; (i as usize * 997) % 9001]);
    }
    for (bytes, frames) in [(1, 1), (5000, 4096), (20_000, 4096), (1 << 20, 4096)] {
        let mut src = open(trickle(w.bytes.clone()), BUFFER);
        loop {
            let mut batch = FrameBatch::default();
            let more = src.fill(&mut batch, bytes, frames).expect("reads");
            let first = batch.frames.first().map_or(0, |f| f.end);
            assert!(
                first == 0 || batch.data.capacity() <= bytes.max(first),
                "{bytes}: capacity {} first {first} len {} frames {}",
                batch.data.capacity(),
                batch.data.len(),
                batch.frames.len()
            );
            if !more {
                break;
            }
        }
    }
}

/// Hands out a capture `chunk` bytes per read, then fails.
struct Failing {
    bytes: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl Read for Failing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let rest = &self.bytes[self.at..];
        if rest.is_empty() {
            return Err(io::Error::other("disk on fire"));
        }
        let n = rest.len().min(buf.len()).min(self.chunk);
        buf[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn read_errors_through_fill() {
    let (bytes, expected) = varied(MAGIC_MICROS, false);
    for cut in [24, 30, 500, 1000, bytes.len()] {
        for chunk in [5, 100, 1 << 20] {
            for buffer in [40, BUFFER] {
                let failing = || Failing {
                    bytes: bytes[..cut].to_vec(),
                    at: 0,
                    chunk,
                };
                let run = agree("read error", &|| open(Box::new(failing()), buffer));
                assert!(run.error.expect("fails").contains("disk on fire"));
                assert!(run.frames.len() <= expected.len());
            }
        }
    }
}

#[test]
fn unsupported_link_type_through_fill() {
    let mut w = Writer::new(MAGIC_MICROS, false, 147);
    w.record(1, 2, 3, &[1, 2, 3]);
    let run = agree("link 147", &|| open(cursor(w.bytes.clone()), BUFFER));
    assert!(run.frames.is_empty());
    assert!(run
        .error
        .expect("an error")
        .contains("unsupported link type 147"));
    let w = Writer::new(MAGIC_MICROS, true, 1);
    let run = agree("header only", &|| open(cursor(w.bytes.clone()), BUFFER));
    assert!(run.frames.is_empty() && run.error.is_none());
    assert_eq!(run.format, "pcap");
}

#[test]
fn progress_counts_the_input_read_through_fill() {
    use std::io::Write;
    let (bytes, expected) = varied(MAGIC_NANOS, false);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).expect("compresses");
    for content in [bytes, gz.finish().expect("compresses")] {
        let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
        file.write_all(&content).expect("writes");
        let size = content.len() as u64;
        for plan in PLANS {
            let run = by_fill(FileSource::open(file.path()).expect("opens"), plan, false);
            assert_eq!(run.frames.len(), expected.len());
            assert_eq!(run.progress, (size, Some(size)), "{plan:?}");
        }
        let mut src = FileSource::open(file.path()).expect("opens");
        let mut batch = FrameBatch::default();
        let mut last = 0;
        while src.fill(&mut batch, 100, 4096).expect("reads") {
            let (read, total) = src.progress();
            assert!(read >= last && read <= size && total == Some(size));
            last = read;
            batch.clear();
        }
        assert_eq!(src.progress().0, size);
    }
}
