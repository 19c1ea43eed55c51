//! Captures read through memory maps against the same files read with
//! `read()`: every classic and pcapng capture in captures/ and the shared
//! corpus, and
//! made-up ones (every byte order, cut at every byte, zero-length and
//! over-large records), through windows so small that records straddle
//! them, must give the same frames, end, warnings and bytes read — with
//! `next_packet` and through batches.
//!
//! Does not test what the frames mean; only that both ways agree.

use std::io::Write;
use std::path::PathBuf;

use super::fill::{by_fill, by_next, Run, Step, Step::Fill, Step::Next};
use super::*;
use crate::source::file::Access;
use crate::testutil::{captures_under, every_capture};

/// Window sizes to read through: tiny (a record per window or less), a
/// page, and the default.
const WINDOWS: &[usize] = &[1, 17, 100, 4096, crate::source::mapped::WINDOW];

fn mapped(path: &Path, window: usize) -> FileSource {
    let src = FileSource::open_with(path, Access::Map(Some(window))).expect("opens");
    assert_eq!(
        src.classic_buffer(),
        None,
        "{} is not mapped",
        path.display()
    );
    src
}

pub(super) fn read(path: &Path) -> FileSource {
    FileSource::open_with(path, Access::Read).expect("opens")
}

/// The mapped file, through every window, gives what `read()` gives, with
/// `next_packet` and three batch plans (`fill_agrees_with_next_packet_on_every_capture`
/// runs every plan on the mapped files; here the windows vary).
fn same_as_read(path: &Path, windows: &[usize]) -> Run {
    same_as_read_with(
        path,
        windows,
        &[&[Fill(1 << 20, 4096)], &[Fill(100, 3)], &[Next, Fill(1, 1)]],
    )
}

fn same_as_read_with(path: &Path, windows: &[usize], plans: &[&[Step]]) -> Run {
    let expected = by_next(read(path));
    for &window in windows {
        let what = format!("{} window {window}", path.display());
        assert_same(&what, &by_next(mapped(path, window)), &expected);
        for plan in plans {
            let got = by_fill(mapped(path, window), plan, false);
            assert_same(&format!("{what} {plan:?}"), &got, &expected);
        }
    }
    expected
}

pub(super) fn assert_same(what: &str, got: &Run, expected: &Run) {
    assert!(
        got == expected,
        "{what}: {} frames {:?} {:?} progress {:?}, read gives {} {:?} {:?} {:?}",
        got.frames.len(),
        got.error,
        got.warnings,
        got.progress,
        expected.frames.len(),
        expected.error,
        expected.warnings,
        expected.progress,
    );
}

pub(super) fn temp_capture(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(bytes).expect("writes");
    f
}

/// Every classic and pcapng capture, mapped, gives what `read()` gives —
/// frames, end, warnings, bytes read — with `next_packet` and through
/// batches (which share the windows), through windows so small that
/// records and blocks straddle them.
#[test]
fn mapped_agrees_with_read_on_every_capture() {
    let files = every_capture();
    let (mut classic, mut pcapng) = (0, 0);
    for path in &files {
        let Ok(src) = FileSource::open_with(path, Access::Read) else {
            continue;
        };
        if src.info().compression.is_some() {
            continue;
        }
        if src.classic_buffer().is_some() {
            classic += 1;
        } else {
            let src = FileSource::open_with(path, Access::Map(None)).expect("opens");
            assert!(src.pcapng_mapped(), "{} is not mapped", path.display());
            pcapng += 1;
        }
        let small = std::fs::metadata(path).is_ok_and(|m| m.len() < 256 << 10);
        let windows = if small { WINDOWS } else { &WINDOWS[3..] };
        same_as_read(path, windows);
    }
    assert!(classic > 20, "only {classic} classic captures");
    assert!(pcapng >= 5, "only {pcapng} pcapng captures");
}

#[test]
fn made_up_captures_in_every_byte_order() {
    for &(magic, big_endian) in FORMATS {
        let (bytes, expected) = varied(magic, big_endian);
        let file = temp_capture(&bytes);
        let run = same_as_read(file.path(), WINDOWS);
        assert_eq!(run.frames.len(), expected.len());
        assert_eq!(run.progress, (bytes.len() as u64, Some(bytes.len() as u64)));
    }
}

#[test]
fn cut_at_every_byte() {
    let (bytes, expected) = varied(MAGIC_MICROS, false);
    let bytes = &bytes[..bytes.len().min(400)];
    for cut in FILE_HEADER..=bytes.len() {
        let file = temp_capture(&bytes[..cut]);
        let run = same_as_read_with(file.path(), &[1], &[&[Fill(100, 3)]]);
        assert!(run.frames.len() <= expected.len());
    }
}

#[test]
fn zero_length_and_over_large_records() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 0, 60, &[]);
    w.record(2, 0, 3, &[1, 2, 3]);
    w.record(3, 0, 0, &[]);
    let file = temp_capture(&w.bytes);
    assert_eq!(same_as_read(file.path(), WINDOWS).frames.len(), 3);

    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    w.record(2, 2, 0, &vec![7; MAX_RECORD - 16]);
    w.record(3, 2, 3, &[4, 5, 6]);
    w.record(4, 4, 0, &vec![0; MAX_RECORD + 1 - 16]);
    w.record(5, 2, 3, &[1, 2, 3]);
    let file = temp_capture(&w.bytes);
    // How far `read()` read ahead of the record it stopped at is its own.
    let unread = |run: Run| Run {
        progress: (0, None),
        ..run
    };
    let expected = unread(by_next(read(file.path())));
    assert_eq!(expected.frames.len(), 3);
    assert!(expected.truncated);
    for window in [1, crate::source::mapped::WINDOW] {
        for plan in [
            &[Fill(1 << 20, 4096)][..],
            &[Fill(1, 1)],
            &[Next, Fill(100, 2)],
        ] {
            let got = unread(by_fill(mapped(file.path(), window), plan, false));
            assert_same(&format!("window {window} {plan:?}"), &got, &expected);
        }
        assert!(unread(by_next(mapped(file.path(), window))) == expected);
    }
}

#[test]
fn a_short_file_claiming_a_huge_record_is_cut_short() {
    // Under the record limit, and over it (found by the `split` fuzzer:
    // the mapped reader called that one too large, `read()` cut short).
    for claim in [48u32 << 20, 1 << 30] {
        let mut w = Writer::new(MAGIC_MICROS, false, 1);
        w.record(1, 2, 3, &[1, 2, 3]);
        w.record(3, 4, 3, &[5, 6, 7]);
        let at = w.bytes.len() - 19;
        w.bytes[at + 8..at + 12].copy_from_slice(&claim.to_le_bytes());
        let file = temp_capture(&w.bytes);
        let run = same_as_read(file.path(), WINDOWS);
        assert_eq!(run.frames.len(), 1);
        assert!(run.warnings[0].contains("cut short"), "{:?}", run.warnings);
    }
}

#[test]
fn compressed_files_are_read_and_pcapng_files_mapped() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = Vec::new();
    captures_under(&root.join("captures"), &mut files);
    let mut pcapng = 0;
    for path in files
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".pcapng"))
    {
        let src = FileSource::open_with(path, Access::Map(None)).expect("opens");
        assert!(src.pcapng_mapped(), "{}: not mapped", path.display());
        pcapng += 1;
        // The same file gzip-compressed is read, not mapped.
        let bytes = std::fs::read(path).expect("reads");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).expect("compresses");
        let file = temp_capture(&gz.finish().expect("compresses"));
        let src = FileSource::open_with(file.path(), Access::Map(None)).expect("opens");
        assert!(src.info().compression.is_some() && !src.pcapng_mapped());
        let same = by_next(src).frames == by_next(read(path)).frames;
        assert!(same, "{}: compressed, other frames", path.display());
    }
    assert!(pcapng > 0);
}

/// A real pcapng file cut at every byte of its first blocks, and with a
/// block claiming 100 MiB: mapped, the same frames, end and warnings as
/// with `read()`.
#[test]
fn pcapng_cut_at_every_byte_and_claiming_a_huge_block() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(root.join("captures/http-curl-5-keepalive.pcapng")).expect("reads");
    for cut in 0..=bytes.len().min(700) {
        let file = temp_capture(&bytes[..cut]);
        if FileSource::open_with(file.path(), Access::Read).is_err() {
            continue;
        }
        same_as_read_with(file.path(), &[1, 17], &[&[Fill(100, 3)]]);
    }
    // The first block after the section header claims 100 MiB (both
    // length fields, so only the size is wrong).
    let shb = usize::try_from(u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]))
        .expect("fits");
    let mut huge = bytes.clone();
    huge[shb + 4..shb + 8].copy_from_slice(&(100u32 << 20).to_le_bytes());
    let file = temp_capture(&huge);
    let run = same_as_read(file.path(), &[1, 4096]);
    assert!(run.frames.is_empty());
}
