//! `--merge` on several threads: files whose times follow each other are
//! walked in pieces, file after file, and the merge takes over from the
//! first packet that does not follow; a few files that overlap are walked
//! side by side, their pieces interleaved, and the merge takes over where
//! one stops. The records and summary must be those of one thread merging
//! packet by packet, however the files are cut, ordered, overlapped or
//! tied — and through the binary on the real captures merged all at once.
//!
//! Does not check the merge's own order (tests/synthetic.rs does).

use std::path::{Path, PathBuf};
use std::process::Command;

use handshakes::source::file::FileSource;
use handshakes::source::merge::MergedSource;
use handshakes::source::{FrameBatch, Split};
use handshakes::{analyze, Config, PacketSource};

use crate::tools::all_captures;

/// A classic pcap's header and its records, whole.
fn records(path: &Path) -> (Vec<u8>, Vec<Vec<u8>>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{e}"));
    let (header, mut rest) = bytes.split_at(24);
    let mut out = Vec::new();
    while rest.len() >= 16 {
        let incl = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]) as usize;
        let (record, tail) = rest.split_at(16 + incl);
        out.push(record.to_vec());
        rest = tail;
    }
    (header.to_vec(), out)
}

/// Writes `header` and `records` to `dir/name`.
fn write(dir: &Path, name: &str, header: &[u8], records: &[Vec<u8>]) -> PathBuf {
    let path = dir.join(name);
    let mut bytes = header.to_vec();
    for r in records {
        bytes.extend_from_slice(r);
    }
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// The record's timestamp set to `from`'s.
fn same_time(record: &[u8], from: &[u8]) -> Vec<u8> {
    let mut r = record.to_vec();
    r[..8].copy_from_slice(&from[..8]);
    r
}

/// Records (as JSON, in the order they came) and summary of `paths` merged
/// on `threads` threads, in pieces of `piece` bytes.
fn merged(paths: &[PathBuf], threads: usize, piece: usize) -> (Vec<String>, String) {
    let sources = paths
        .iter()
        .map(|p| FileSource::open(p).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut source = MergedSource::new(sources);
    let config = Config {
        threads,
        split_piece: Some(piece),
        ..Config::default()
    };
    let mut records = Vec::new();
    let summary = analyze(&mut source, &config, &mut records).unwrap_or_else(|e| panic!("{e}"));
    (records.iter().map(json).collect(), json(&summary))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| panic!("{e}"))
}

/// `paths` merged and split as several threads split them, if they are.
fn split_of(paths: &[PathBuf]) -> Option<Split> {
    let sources = paths
        .iter()
        .map(|p| FileSource::open(p).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    MergedSource::new(sources).split(20_000)
}

/// The records `paths`' split gives when its pieces are taken in order, as
/// the calling thread takes a chain's, until one ends early: their
/// timestamps in nanoseconds. `None` if they are not split; it must be a
/// chain.
fn walked(paths: &[PathBuf]) -> Option<Vec<i64>> {
    let split = split_of(paths)?;
    assert!(!split.is_side_by_side(), "split side by side");
    let (mut at, mut frames, mut out) = (split.first(), FrameBatch::default(), Vec::new());
    for k in 0..split.pieces() {
        let piece = split.walk(k, Some(at), &mut frames, |_, _, raw| out.push(raw.ts.0));
        assert_eq!(piece.start, at);
        if !piece.complete {
            break;
        }
        at = split.next_start(k, piece.end);
    }
    Some(out)
}

/// The timestamps of microsecond `records`, as [`walked`] gives them.
fn times(records: &[Vec<u8>]) -> Vec<i64> {
    let word = |r: &[u8], at: usize| {
        i64::from(u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]))
    };
    records
        .iter()
        .map(|r| word(r, 0) * 1_000_000_000 + word(r, 4) * 1_000)
        .collect()
}

/// Whether `paths` are split side by side.
fn side_by_side(paths: &[PathBuf]) -> bool {
    split_of(paths).is_some_and(|s| s.is_side_by_side())
}

fn same_on_threads(name: &str, paths: &[PathBuf]) -> usize {
    // Pieces far smaller than the files: many per file, records
    // straddling them.
    same_in_pieces(name, paths, 20_000)
}

/// [`same_on_threads`] with pieces of `piece` bytes.
fn same_in_pieces(name: &str, paths: &[PathBuf], piece: usize) -> usize {
    let one = merged(paths, 1, piece);
    for threads in [2, 3] {
        let many = merged(paths, threads, piece);
        assert_eq!(one.0.len(), many.0.len(), "{name}: -j {threads}: records");
        for (k, (a, b)) in one.0.iter().zip(&many.0).enumerate() {
            assert_eq!(a, b, "{name}: -j {threads}: record #{k}");
        }
        assert_eq!(one.1, many.1, "{name}: -j {threads}: summary");
    }
    one.0.len()
}

#[test]
fn merged_files_give_the_same_output_on_any_number_of_threads() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let whole = dir.path().join("synth.pcap");
    let args = ["--size", "6MiB", "--seed", "11", "--concurrency", "100"];
    crate::support::synth(&whole, &args);
    let (header, recs) = records(&whole);
    assert_eq!(header[..4], [0xd4, 0xc3, 0xb2, 0xa1], "a microsecond pcap");
    let n = recs.len();
    assert!(n > 3_000, "only {n} records");
    let (a, b, c) = (n / 3, n / 2, 2 * n / 3);
    let d = dir.path();
    let first = write(d, "first.pcap", &header, &recs[..a]);
    let middle = write(d, "middle.pcap", &header, &recs[a..c]);
    let last = write(d, "last.pcap", &header, &recs[c..]);

    // A capture rotated in three: in order, and given in any order.
    let rotated = [first.clone(), middle.clone(), last.clone()];
    // The pieces go through the three files whole, in time order.
    assert!(
        walked(&rotated) == Some(times(&recs)),
        "rotated: not walked whole"
    );
    let shuffled = [last.clone(), first.clone(), middle.clone()];
    assert!(
        walked(&shuffled) == Some(times(&recs)),
        "shuffled: not walked whole"
    );
    assert!(same_on_threads("rotated", &rotated) > 50);
    same_on_threads("rotated, reversed", &[last.clone(), first.clone(), middle]);

    // Overlapping: the second half of the first file is also in the
    // second. Walked side by side, in the order given.
    let early = write(d, "early.pcap", &header, &recs[..c]);
    let late = write(d, "late.pcap", &header, &recs[a..]);
    let overlapping = [early.clone(), late.clone()];
    assert!(side_by_side(&overlapping), "overlapping: not side by side");
    same_on_threads("overlapping", &overlapping);
    same_on_threads("overlapping, reversed", &[late.clone(), early.clone()]);

    // Interleaved from the first packets: every other record in each; and
    // three files, every third record in each.
    let odd: Vec<_> = recs.iter().skip(1).step_by(2).cloned().collect();
    let even: Vec<_> = recs.iter().step_by(2).cloned().collect();
    let odd = write(d, "odd.pcap", &header, &odd);
    let even = write(d, "even.pcap", &header, &even);
    assert!(side_by_side(&[odd.clone(), even.clone()]), "interleaved");
    same_on_threads("interleaved", &[odd, even]);
    let thirds: Vec<PathBuf> = (0..3)
        .map(|k| {
            let some: Vec<_> = recs.iter().skip(k).step_by(3).cloned().collect();
            write(d, &format!("third{k}.pcap"), &header, &some)
        })
        .collect();
    same_on_threads("interleaved in three", &thirds);

    // The same file twice: every packet ties, and goes to the file given
    // first.
    same_on_threads("twice", &[early.clone(), early.clone()]);

    // One file cut inside its last record: its pieces stop there, and
    // every file reads on from the frame after the last one taken from it
    // (the other one from the middle of a piece).
    let mut cut_bytes = std::fs::read(&early).unwrap_or_else(|e| panic!("{e}"));
    cut_bytes.truncate(cut_bytes.len() - 40);
    let cut = d.join("cut.pcap");
    std::fs::write(&cut, cut_bytes).unwrap_or_else(|e| panic!("{e}"));
    assert!(side_by_side(&[cut.clone(), late.clone()]), "cut");
    same_on_threads("one file cut", &[cut.clone(), late.clone()]);
    same_on_threads("one file cut, reversed", &[late, cut]);

    // The second file's first packet at the time of the first file's last:
    // the tie goes to the file given first, either way round.
    let mut tail = recs[b..].to_vec();
    tail[0] = same_time(&tail[0], &recs[b - 1]);
    let head = write(d, "head.pcap", &header, &recs[..b]);
    let tail = write(d, "tail.pcap", &header, &tail);
    let tied = [head.clone(), tail.clone()];
    assert_eq!(walked(&tied).map(|w| w.len()), Some(n), "tied");
    // Given the other way round, the tie goes to the second file's first
    // packet: the first's last does not come before it.
    let reversed = [tail, head];
    assert!(side_by_side(&reversed), "tied, reversed");
    same_on_threads("tied", &tied);
    same_on_threads("tied, reversed", &reversed);

    // A file without packets among them: no pieces, the merge throughout.
    let empty = write(d, "empty.pcap", &header, &[]);
    let with_empty = [first.clone(), empty, last.clone()];
    assert!(
        walked(&with_empty).is_none(),
        "a file without packets split"
    );
    same_on_threads("with an empty file", &with_empty);

    // A compressed file among them: no pieces, the merge throughout.
    let gz = d.join("last.pcap.gz");
    let mut zipped = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let plain = std::fs::read(&last).unwrap_or_else(|e| panic!("{e}"));
    std::io::Write::write_all(&mut zipped, &plain).unwrap_or_else(|e| panic!("{e}"));
    let zipped = zipped.finish().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&gz, zipped).unwrap_or_else(|e| panic!("{e}"));
    let with_gz = [first, gz];
    assert!(walked(&with_gz).is_none(), "a compressed file split");
    same_on_threads("with a compressed file", &with_gz);
}

/// JSON Lines from the binary, `analyze --merge` of `paths` with `args`.
fn merged_jsonl(paths: &[PathBuf], args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(["analyze", "-q", "-T", "jsonl", "--merge"])
        .args(args)
        .args(paths)
        .output()
        .unwrap_or_else(|e| panic!("handshakes: {e}"));
    assert!(out.status.success(), "{out:?}");
    out.stdout
}

#[test]
fn every_capture_merged_at_once_is_the_same_on_any_number_of_threads() {
    // Recorded at different times, mostly one after another: a chain that
    // the merge takes over wherever two overlap.
    let files: Vec<PathBuf> = all_captures()
        .into_iter()
        .filter(|(name, _)| name.starts_with("captures/"))
        .map(|(_, p)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    assert!(files.len() > 20, "{} captures", files.len());
    let one = merged_jsonl(&files, &["-j", "1"]);
    assert!(one.iter().filter(|&&b| b == b'\n').count() > 100);
    for threads in ["2", "3"] {
        assert!(
            one == merged_jsonl(&files, &["-j", threads]),
            "every capture merged: JSON Lines differ with -j {threads}"
        );
    }
}

#[test]
fn every_capture_merged_with_itself_side_by_side_is_the_same_on_any_number_of_threads() {
    // Every packet of one file ties with the other's: walked side by side
    // (pcap and pcapng, with the blocks the pieces pass over), in pieces
    // of 1 500 bytes so that guesses go wrong and records straddle them.
    let mut side = 0;
    for (name, path) in all_captures() {
        if path.extension().is_some_and(|e| e == "gz") {
            continue;
        }
        let twice = [path.clone(), path];
        side += usize::from(side_by_side(&twice));
        same_in_pieces(&name, &twice, 1_500);
    }
    assert!(side > 60, "only {side} captures split side by side");
}
