//! A mapped capture read in pieces ([`crate::source::Split`]), stitched
//! back in order as `--threads` does it — keep a piece if it starts where
//! the last one ended, walk it again from there if not, and hand the rest
//! to the source after the first piece that stops early — must give
//! exactly what `read()` gives: every classic and pcapng capture in
//! captures/ and the corpus through pieces of many sizes, captures whose
//! packets carry record headers (so guesses go wrong), records larger than
//! a window's slack, files cut inside a record, and pcapng blocks other
//! than packets in the middle.
//!
//! Does not test the threads; `tests/threads.rs` does, on the same files.

use super::fill::{by_next, by_next_after, Got, Run};
use super::mapped::{assert_same, read, temp_capture};
use super::*;
use crate::source::file::Access;
use crate::source::FrameBatch;
use crate::testutil::every_capture;

/// What stitching the pieces found besides the frames.
#[derive(Debug, Default)]
struct Stitched {
    /// Pieces whose guessed start was wrong (walked again).
    wrong: usize,
    /// Whether a piece stopped early and the source read on.
    stopped: bool,
}

/// Reads `path` through pieces of `piece` bytes, then through the source.
fn by_pieces(path: &Path, piece: usize) -> (Run, Stitched) {
    // Small map windows for the source, so the pieces' windows are their
    // own size (as with the default pieces, larger than the default window).
    let mut src = FileSource::open_with(path, Access::Map(Some(4096))).expect("opens");
    let split = src.split(piece).expect("a mapped classic capture splits");
    let mut frames = Vec::new();
    let mut stitched = Stitched::default();
    let mut at = split.first();
    // One batch for every piece: a walk empties it first.
    let mut batch = FrameBatch::default();
    batch.data.extend_from_slice(b"left over");
    for k in 0..split.pieces() {
        let mut seen = 0;
        let mut records = Vec::new();
        let mut p = split.walk(k, None, &mut batch, |i, record, _| {
            assert_eq!(i, seen);
            seen += 1;
            records.push(record);
        });
        assert_eq!(seen, batch.frames.len(), "each record is handed out once");
        // Each record's offset: the first where the walk started (or after
        // pcapng blocks passed over), then rising, all before where it
        // ended.
        assert!(records.first().is_none_or(|&r| r >= p.start));
        assert!(records.windows(2).all(|w| w[0] < w[1]));
        assert!(records.last().is_none_or(|&r| r < p.end));
        if p.start != at {
            stitched.wrong += 1;
            p = split.walk(k, Some(at), &mut batch, |_, _, _| {});
        }
        assert!(p.end >= at);
        frames.extend(batch.frames.iter().map(|f| Got::of(&batch.packet(f, 0))));
        at = p.end;
        split.taken(at);
        if !p.complete {
            stitched.stopped = true;
            break;
        }
    }
    src.resume(at, frames.len() as u64);
    (by_next_after(src, frames), stitched)
}

fn check(what: &str, path: &Path, piece: usize) -> Stitched {
    let (got, stitched) = by_pieces(path, piece);
    assert_same(
        &format!("{what}, pieces of {piece}"),
        &got,
        &by_next(read(path)),
    );
    stitched
}

#[test]
fn pieces_give_what_read_gives_on_every_capture() {
    let files = every_capture();
    let (mut split, mut wrong) = (0, 0);
    for path in &files {
        let Ok(mut src) = FileSource::open_with(path, Access::Map(None)) else {
            continue;
        };
        if src.split(1 << 20).is_none() {
            // Compressed, or a link type the reader reports.
            continue;
        }
        split += 1;
        // Pieces smaller than most records only on small files: each
        // guess scans to the next record (slow in debug builds).
        let small = std::fs::metadata(path).is_ok_and(|m| m.len() < 64 << 10);
        let pieces: &[usize] = if small {
            &[64, 1000, 4096, 1 << 20]
        } else {
            &[1000, 4096, 1 << 20]
        };
        for &piece in pieces {
            wrong += check(&path.display().to_string(), path, piece).wrong;
        }
    }
    assert!(split > 120, "only {split} captures split");
    // Most guesses are right; that some are not must change nothing.
    eprintln!("split: {split} captures, {wrong} wrong guesses walked again");
}

#[test]
fn made_up_captures_in_every_byte_order_and_cut_at_every_byte() {
    for &(magic, big_endian) in FORMATS {
        let (bytes, expected) = varied(magic, big_endian);
        let file = temp_capture(&bytes);
        for piece in [1, 7, 50, 333, 1 << 20] {
            let (run, _) = by_pieces(file.path(), piece);
            assert_eq!(run.frames.len(), expected.len());
            check("varied", file.path(), piece);
        }
    }
    let (bytes, _) = varied(MAGIC_MICROS, false);
    for cut in FILE_HEADER..bytes.len().min(700) {
        let file = temp_capture(&bytes[..cut]);
        for piece in [13, 100] {
            check(&format!("cut at {cut}"), file.path(), piece);
        }
    }
}

/// Packets that carry record headers of their own (a capture of a pcap
/// file being copied, say): a guess inside them finds a chain of plausible
/// records that is not the file's.
#[test]
fn record_headers_inside_packets_make_wrong_guesses_and_no_wrong_records() {
    let mut inner = Writer::new(MAGIC_MICROS, false, 1);
    for i in 0..40u32 {
        inner.record(1_700_000_000, i, 60, &[0x5a; 20]);
    }
    let payload = &inner.bytes[FILE_HEADER..];
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    for i in 0..200u32 {
        let cut = (i as usize * 97) % 300;
        w.record(1_700_000_100 + i, i, 2000, &payload[cut..cut + 900]);
    }
    let file = temp_capture(&w.bytes);
    let mut wrong = 0;
    for piece in [100, 1000, 5000] {
        wrong += check("nested", file.path(), piece).wrong;
    }
    assert!(wrong > 0, "no guess went wrong: the test proves nothing");
}

/// A record longer than a window's slack straddles its end: the piece
/// stops before it and the source reads on; a file cut inside a record
/// ends with the source's warning.
#[test]
fn records_past_the_slack_and_cut_records_are_left_to_the_source() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    for i in 0..20u32 {
        w.record(1_700_000_000 + i, 0, 100, &[i as u8; 100]);
    }
    w.record(1_700_000_030, 0, 500_000, &vec![0xab; 500_000]);
    for i in 0..20u32 {
        w.record(1_700_000_040 + i, 0, 100, &[i as u8; 100]);
    }
    let file = temp_capture(&w.bytes);
    for piece in [100, 1000] {
        assert!(check("large", file.path(), piece).stopped);
    }
    let cut = temp_capture(&w.bytes[..w.bytes.len() - 50]);
    let (run, stitched) = by_pieces(cut.path(), 1000);
    assert!(stitched.stopped);
    assert!(run
        .warnings
        .first()
        .is_some_and(|w| w.contains("cut short")));
    check("cut", cut.path(), 1000);
}

/// The blocks of a little-endian pcapng file: (offset, type, length).
fn blocks(bytes: &[u8]) -> Vec<(usize, u32, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(head) = bytes.get(at..at + 8) {
        let kind = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        if len < 12 {
            break;
        }
        out.push((at, kind, len));
        at += len;
    }
    out
}

/// pcapng through pieces: a real capture cut at many bytes, and with
/// blocks that only the reader handles in the middle (another interface
/// described, a packet of an interface nobody described): the pieces stop
/// there and the reader reads on, as without pieces.
#[test]
fn pcapng_cut_and_with_other_blocks_in_the_middle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(root.join("captures/http-curl-5-keepalive.pcapng")).expect("reads");
    let all = blocks(&bytes);
    assert!(all.iter().filter(|b| b.1 == 6).count() > 12, "{all:?}");
    for cut in (0..=bytes.len())
        .step_by(97)
        .chain([bytes.len() - 1, bytes.len()])
    {
        let file = temp_capture(&bytes[..cut]);
        let Ok(mut src) = FileSource::open_with(file.path(), Access::Map(Some(4096))) else {
            continue;
        };
        if src.split(100).is_some() {
            for piece in [100, 1000] {
                check(&format!("pcapng cut at {cut}"), file.path(), piece);
            }
        }
    }
    // An interface description (Ethernet, snap length 0) and a packet of
    // interface 9 after the tenth packet block.
    let (at, _, len) = all
        .iter()
        .filter(|b| b.1 == 6)
        .nth(10)
        .copied()
        .expect("blocks");
    let mut idb = Vec::new();
    for word in [1u32, 20, 1, 0, 20] {
        idb.extend_from_slice(&word.to_le_bytes());
    }
    let mut stray = bytes[at..at + len].to_vec();
    stray[8..12].copy_from_slice(&9u32.to_le_bytes());
    for extra in [idb, stray] {
        let mut changed = bytes[..at + len].to_vec();
        changed.extend_from_slice(&extra);
        changed.extend_from_slice(&bytes[at + len..]);
        let file = temp_capture(&changed);
        for piece in [100, 1000, 1 << 20] {
            assert!(check("pcapng with a block in the middle", file.path(), piece).stopped);
        }
    }
}

/// pcapng blocks the reader passes over — name resolution, interface
/// statistics, decryption secrets, a custom block, a block type nobody
/// defined — are passed over by the pieces too: they do not stop them, and
/// the packets come out as `read()` gives them.
#[test]
fn pcapng_blocks_the_reader_passes_over_do_not_stop_the_pieces() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(root.join("captures/http-curl-5-keepalive.pcapng")).expect("reads");
    let packets: Vec<(usize, u32, usize)> =
        blocks(&bytes).into_iter().filter(|b| b.1 == 6).collect();
    let block = |kind: u32, body: &[u8]| {
        let total = (12 + body.len()) as u32;
        let mut out = [kind.to_le_bytes(), total.to_le_bytes()].concat();
        out.extend_from_slice(body);
        out.extend_from_slice(&total.to_le_bytes());
        out
    };
    let passed_over = [
        // Name resolution: only the end-of-records record.
        block(4, &[0; 4]),
        // Interface statistics of interface 0 at time 0, no options.
        block(5, &[0; 12]),
        // Decryption secrets: an empty TLS key log.
        block(0x0a, &[0x4b, 0x53, 0x4c, 0x54, 0, 0, 0, 0]),
        // Custom, copiable: a private enterprise number and 4 bytes.
        block(0xbad, &[0, 0, 0x7f, 0, 1, 2, 3, 4]),
        // A type nobody defined.
        block(0x0101, &[1, 2, 3, 4]),
    ];
    let mut changed = Vec::new();
    let mut from = 0;
    for (n, extra) in passed_over.iter().enumerate() {
        // After packet blocks 2, 4, 6, 8 and 10.
        let (at, _, len) = packets[2 * n + 2];
        changed.extend_from_slice(&bytes[from..at + len]);
        changed.extend_from_slice(extra);
        from = at + len;
    }
    changed.extend_from_slice(&bytes[from..]);
    let file = temp_capture(&changed);
    for piece in [100, 1000, 1 << 20] {
        let stitched = check("pcapng with blocks passed over", file.path(), piece);
        assert!(!stitched.stopped, "pieces of {piece} stopped");
    }
}
