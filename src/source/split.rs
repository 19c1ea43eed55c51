//! A memory-mapped capture (classic pcap, or a pcapng section's packet
//! blocks) read in pieces that several threads walk at once (`--threads`):
//! the file is cut into pieces of about a batch, and a piece's first record
//! is *guessed* — the first offset from which a few record headers (or
//! blocks) in a row look like ones a capture tool writes — so that pieces
//! can be walked out of order. Whoever puts the pieces back in order keeps
//! a piece only if it starts exactly where the one before it ended, and
//! walks it again from there otherwise: a wrong guess costs time, never a
//! wrong record. Walking a piece from a known start gives exactly the
//! records the format's own reader gives: pcapng blocks that reader passes
//! over are passed over here too, and anything it does not simply read
//! (the end of the file inside a record, a record too large, a new section
//! or interface, a simple packet block, a failed map) ends the piece early,
//! and the reader takes over from there.
//!
//! Does not decide which thread walks what, nor word messages; the formats
//! are `classic` and `pcapng`'s.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::classic::Header;
use super::mapped::{prefetch_ahead, MappedFile, Window};
use super::pcapng::Section;
use super::{Frame, FrameBatch, LinkType, RawPacket};
use crate::time::Timestamp;

/// Bytes of record starts per piece, unless told otherwise: about a batch.
pub const PIECE: usize = 1 << 20;
/// Pieces per map window: six since 1 December, evening — with windows no
/// longer rounded past what they ask for, two threads' peak at 50 000
/// short connections a second 98–102 → 94–97 MiB (the two windows in
/// flight 8.1 → 6.1 MiB each), in the same time on the 1 GiB capture
/// (22 alternating runs).
const PIECES_PER_WINDOW: u64 = 6;
/// Bytes mapped past a window's end, for the record that straddles it: a
/// record of tcpdump's default snap length (262 144 bytes) and more.
const SLACK: u64 = 320 << 10;
/// Windows kept mapped for pieces about to be walked.
const WINDOWS_KEPT: usize = 2;
/// Record headers in a row that must look right where a piece's first
/// record is guessed…
const CHAIN: usize = 8;
/// …with at most this many seconds between successive timestamps.
const GAP: u32 = 3_600;

/// How a file's records are laid out.
pub(super) enum Format {
    Classic(Header),
    /// The packet blocks of a pcapng section whose interfaces are known.
    Pcapng(Section),
}

/// What the front of some bytes holds, for a walk.
pub(super) enum At {
    /// A record with a frame.
    Frame(Found),
    /// A block of this many bytes that the format's reader passes over
    /// (in pcapng: name resolution, interface statistics, decryption
    /// secrets, custom and unknown blocks).
    Skip(usize),
}

/// A record found at the front of some bytes: its frame's data at
/// `start..start + len` of them, `total` bytes in all.
pub(super) struct Found {
    pub ts: Timestamp,
    pub link: LinkType,
    pub orig_len: u32,
    pub start: usize,
    pub len: usize,
    pub total: usize,
}

impl Format {
    /// The whole record (or packet block), or a block to pass over, at the
    /// front of `avail`; `None` for anything the reader must read itself.
    fn found_at(&self, avail: &[u8]) -> Option<At> {
        match self {
            Format::Classic(header) => header.found_at(avail).map(At::Frame),
            Format::Pcapng(section) => section.found_at(avail),
        }
    }

    /// Whether `avail` starts like a record: its whole length, and its
    /// timestamp's seconds when the format puts them in the header.
    fn plausible(&self, avail: &[u8]) -> Option<(usize, Option<u32>)> {
        match self {
            Format::Classic(header) => header.plausible(avail).map(|(n, s)| (n, Some(s))),
            Format::Pcapng(section) => section.plausible(avail).map(|n| (n, None)),
        }
    }
}

/// A capture's records from `first` to the file's end, in pieces — or,
/// for `--merge`, several captures' one after another ([`Split::chain`])
/// or side by side ([`Split::side_by_side`]). Offsets are the file's;
/// with several files, the part's number sits in the top 16 bits
/// ([`PART_SHIFT`]).
pub struct Split {
    parts: Vec<Part>,
    /// The parts are walked each on its own, their records interleaved by
    /// whoever takes the pieces; otherwise one after another.
    side_by_side: bool,
}

/// The pieces of one part of a side-by-side split (or of a whole chain),
/// taken in order one after another: pieces `first..end`, the first
/// starting at the record at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    pub first: u64,
    pub end: u64,
    pub start: u64,
}

/// Where a chained part's number sits in an offset: files up to 256 TiB.
const PART_SHIFT: u32 = 48;

/// One file's records from `first` to its end, in pieces.
struct Part {
    format: Format,
    first: u64,
    end: u64,
    piece: u64,
    windows: Mutex<Windows>,
    /// Counts the bytes read, for progress.
    read: Arc<AtomicU64>,
    /// The number of this part's first piece in the whole split.
    base: u64,
    /// Records from this timestamp on (or after it, when the flag is
    /// false) end the part: in a `--merge`, the next file's first packet
    /// comes before them.
    until: Option<(Timestamp, bool)>,
}

/// The windows mapped lately, by number.
struct Windows {
    file: MappedFile,
    recent: Vec<(u64, Arc<Window>)>,
}

/// Where a piece's walk began and ended.
pub struct Piece {
    /// The offset of the first record walked: the guess, or the start
    /// given; `u64::MAX` when no record was found to start the piece.
    pub start: u64,
    /// The offset after the last record walked.
    pub end: u64,
    /// Whether the walk reached the piece's end; if not, what lies at `end`
    /// is for the reader to read (or to report).
    pub complete: bool,
}

impl Split {
    /// Reads `file` from its record at `first` to its current end, in
    /// pieces of `piece` bytes (at least one).
    pub(super) fn new(
        file: MappedFile,
        format: Format,
        first: u64,
        piece: usize,
        read: Arc<AtomicU64>,
    ) -> Split {
        let part = Part {
            format,
            first,
            end: file.size().max(first),
            piece: (piece.max(1)) as u64,
            windows: Mutex::new(Windows {
                file,
                recent: Vec::new(),
            }),
            read,
            base: 0,
            until: None,
        };
        Split {
            parts: vec![part],
            side_by_side: false,
        }
    }

    /// `splits` one after another, each one's records read only while they
    /// come before `until` (its timestamp, and whether a record at exactly
    /// that time still comes before; `None`: no limit) — the order in which
    /// `--merge` interleaves files whose times do not overlap. Each split
    /// must be of one file, and there must be fewer than 65 536.
    pub(super) fn chain(splits: Vec<(Split, Option<(Timestamp, bool)>)>) -> Option<Split> {
        let mut parts = Vec::with_capacity(splits.len());
        let mut base = 0u64;
        for (split, until) in splits {
            let [mut part]: [Part; 1] = split.parts.try_into().ok()?;
            if part.end >= 1 << PART_SHIFT || parts.len() >= 1 << (64 - PART_SHIFT) {
                return None;
            }
            part.base = base;
            part.until = until;
            base = base.checked_add(part.pieces())?;
            parts.push(part);
        }
        Some(Split {
            parts,
            side_by_side: false,
        })
    }

    /// `splits` side by side, each walked on its own from its first record
    /// to its end: `--merge` of files whose times overlap, the pieces'
    /// records interleaved by timestamp by whoever takes them ([`Lane`]s,
    /// in the order given). Each split must be of one file, and there
    /// must be fewer than 65 536.
    pub(super) fn side_by_side(splits: Vec<Split>) -> Option<Split> {
        let mut split = Split::chain(splits.into_iter().map(|s| (s, None)).collect())?;
        split.side_by_side = true;
        Some(split)
    }

    /// Whether the parts are side by side ([`Split::side_by_side`]).
    pub fn is_side_by_side(&self) -> bool {
        self.side_by_side
    }

    /// The lanes in which the pieces are taken: one per part side by side,
    /// else one for all.
    pub fn lanes(&self) -> Vec<Lane> {
        if !self.side_by_side {
            return vec![Lane {
                first: 0,
                end: self.pieces(),
                start: self.first(),
            }];
        }
        let lane = |(j, p): (usize, &Part)| Lane {
            first: p.base,
            end: p.base + p.pieces(),
            start: Split::offset(j, p.first),
        };
        self.parts.iter().enumerate().map(lane).collect()
    }

    /// The part that piece `k` is in, and the piece's number in it.
    fn part_of(&self, k: u64) -> Option<(usize, &Part)> {
        let j = self.parts.partition_point(|p| p.base <= k).checked_sub(1)?;
        self.parts.get(j).map(|p| (j, p))
    }

    /// Offset `at` of part `j`, as the split gives it.
    fn offset(j: usize, at: u64) -> u64 {
        ((j as u64) << PART_SHIFT) | at
    }

    /// The part an offset is in, and the offset in that part's file.
    pub fn locate(offset: u64) -> (usize, u64) {
        (
            (offset >> PART_SHIFT) as usize,
            offset & ((1 << PART_SHIFT) - 1),
        )
    }

    /// The offset of the first record.
    pub fn first(&self) -> u64 {
        self.parts.first().map_or(0, |p| p.first)
    }

    /// How many pieces there are.
    pub fn pieces(&self) -> u64 {
        self.parts.last().map_or(0, |p| p.base + p.pieces())
    }

    /// The offset where the first part's records end: its file's size when
    /// the split was made.
    pub(super) fn end(&self) -> u64 {
        self.parts.first().map_or(0, |p| p.end)
    }

    /// Where piece `k + 1` starts, when piece `k` ended complete at `end`:
    /// there, or, in a chain, at the next part's first record after a
    /// part's last piece.
    pub fn next_start(&self, k: u64, end: u64) -> u64 {
        match self.part_of(k) {
            Some((j, part)) if k + 1 == part.base + part.pieces() && !self.side_by_side => self
                .parts
                .get(j + 1)
                .map_or(end, |next| Split::offset(j + 1, next.first)),
            _ => end,
        }
    }

    /// The first record's timestamp, if the split has one.
    pub(super) fn first_ts(&self) -> Option<Timestamp> {
        let part = self.parts.first()?;
        let window = part.window(0).ok()?;
        let at = usize::try_from(part.first.checked_sub(window.offset())?).ok()?;
        let mut bytes = window.bytes().get(at..)?;
        loop {
            match part.format.found_at(bytes)? {
                At::Frame(found) => return Some(found.ts),
                At::Skip(total) => bytes = bytes.get(total..)?,
            }
        }
    }

    /// The timestamp of the last record, as far as walking the last piece
    /// from its first record's guess finds it (or the piece before, if the
    /// last starts none); `None` if it finds none. Only a hint: a wrong
    /// guess gives a wrong time. The windows it mapped are let go: the
    /// pieces' walk starts from the first.
    pub(super) fn last_ts(&self) -> Option<Timestamp> {
        let mut frames = FrameBatch::default();
        let last = self.pieces().checked_sub(1)?;
        let ts = (last.saturating_sub(1)..=last).rev().find_map(|k| {
            self.walk(k, None, &mut frames, |_, _, _| {});
            frames.frames.last().map(|f| f.ts)
        });
        for part in &self.parts {
            if let Ok(mut windows) = part.windows.lock() {
                windows.recent.clear();
            }
        }
        ts
    }

    /// Notes that the records up to `offset` have been taken, for progress;
    /// in a chain, the file before its part is done with (its windows are
    /// unmapped once no batch shares them).
    pub fn taken(&self, offset: u64) {
        let (j, at) = Split::locate(offset);
        if let Some(part) = self.parts.get(j) {
            part.read.store(at, Ordering::Relaxed);
        }
        if self.side_by_side {
            return;
        }
        let before = j.checked_sub(1).and_then(|i| self.parts.get(i));
        if let Some(mut windows) = before.and_then(|p| p.windows.lock().ok()) {
            windows.recent.clear();
        }
    }

    /// Walks piece `k` from the record at `start`, or from where its first
    /// record seems to be, into `frames` (emptied first; it then shares the
    /// window), and hands each record to `each` as it goes (with its number
    /// in the piece and its offset), while its header is in the cache. Its
    /// records are those starting before the piece's end (the last may
    /// reach into the next piece).
    pub fn walk<F>(&self, k: u64, start: Option<u64>, frames: &mut FrameBatch, mut each: F) -> Piece
    where
        F: FnMut(usize, u64, &RawPacket<'_>),
    {
        let unread = |start: u64| Piece {
            start,
            end: start,
            complete: false,
        };
        let Some((j, part)) = self.part_of(k) else {
            frames.clear();
            return unread(start.unwrap_or(u64::MAX));
        };
        let local = match start.map(Split::locate) {
            Some((i, at)) if i == j => Some(at),
            Some(_) => {
                frames.clear();
                return unread(start.unwrap_or(u64::MAX));
            }
            None => None,
        };
        let piece = part.walk(k - part.base, local, frames, |i, at, raw| {
            each(i, Split::offset(j, at), raw);
        });
        let global = |at: u64| {
            if at == u64::MAX {
                at
            } else {
                Split::offset(j, at)
            }
        };
        Piece {
            start: global(piece.start),
            end: global(piece.end),
            complete: piece.complete,
        }
    }
}

impl Part {
    /// How many pieces there are.
    fn pieces(&self) -> u64 {
        (self.end - self.first).div_ceil(self.piece)
    }

    /// [`Split::walk`] in this part, `k`, `start` and the offsets its own.
    fn walk<F>(&self, k: u64, start: Option<u64>, frames: &mut FrameBatch, mut each: F) -> Piece
    where
        F: FnMut(usize, u64, &RawPacket<'_>),
    {
        let span = k.saturating_mul(self.piece);
        let nominal = self.first.saturating_add(span);
        let stop = nominal.saturating_add(self.piece).min(self.end);
        frames.clear();
        let unread = |start: u64| Piece {
            start,
            end: start,
            complete: false,
        };
        let Ok(window) = self.window(span / self.window_len()) else {
            return unread(start.unwrap_or(u64::MAX));
        };
        let base = window.offset();
        let bytes = window.bytes();
        let start = match start {
            Some(start) => start,
            None if k == 0 => self.first,
            None => match self.guess(bytes, nominal.saturating_sub(base)) {
                Some(at) => base + at as u64,
                None => return unread(u64::MAX),
            },
        };
        let offset = |at: u64| usize::try_from(at.saturating_sub(base)).unwrap_or(usize::MAX);
        let (mut at, limit) = (offset(start), offset(stop));
        if start < base || !frames.share(&window) {
            return unread(start);
        }
        while at < limit {
            let avail = bytes.get(at..).unwrap_or_default();
            let found = match self.format.found_at(avail) {
                Some(At::Frame(found)) => found,
                Some(At::Skip(total)) => {
                    at += total;
                    continue;
                }
                None => break,
            };
            if self
                .until
                .is_some_and(|(ts, same)| found.ts > ts || (found.ts == ts && !same))
            {
                break;
            }
            prefetch_ahead(avail, found.total);
            let data = avail.get(found.start..found.start + found.len);
            let raw = RawPacket {
                index: 0,
                ts: found.ts,
                link: found.link,
                orig_len: found.orig_len,
                data: data.unwrap_or_default(),
            };
            each(frames.frames.len(), base + at as u64, &raw);
            frames.frames.push(Frame {
                ts: found.ts,
                link: found.link,
                window: 0,
                orig_len: found.orig_len,
                start: at + found.start,
                end: at + found.start + found.len,
            });
            at += found.total;
        }
        Piece {
            start,
            end: base + at as u64,
            complete: at >= limit,
        }
    }

    /// Bytes of pieces per window.
    fn window_len(&self) -> u64 {
        self.piece.saturating_mul(PIECES_PER_WINDOW)
    }

    /// The first offset from `from` (within the first record's largest
    /// length) where [`CHAIN`] plausible records follow each other.
    fn guess(&self, bytes: &[u8], from: u64) -> Option<usize> {
        let from = usize::try_from(from).ok()?;
        let to = from.saturating_add(SLACK as usize).min(bytes.len());
        let found = (from..to).find(|&at| self.chain(bytes, at))?;
        // Four bytes into a real classic header, its fraction of a second
        // reads as the seconds and its lengths as the fraction and length:
        // at a high packet rate those misreadings chain up as well. A real
        // header four bytes earlier is the better guess (read four bytes
        // early, a real header's seconds are not a fraction of a second).
        let mut at = match found.checked_sub(4) {
            Some(earlier) if self.chain(bytes, earlier) => earlier,
            _ => found,
        };
        while at < from {
            at = at.saturating_add(self.format.plausible(bytes.get(at..)?)?.0);
        }
        Some(at)
    }

    /// Whether plausible records follow each other from `at`, [`CHAIN`] of
    /// them or up to exactly the end of `bytes`.
    fn chain(&self, bytes: &[u8], mut at: usize) -> bool {
        let mut last: Option<u32> = None;
        for _ in 0..CHAIN {
            if at == bytes.len() {
                return last.is_some();
            }
            let Some(avail) = bytes.get(at..) else {
                return false;
            };
            let Some((total, sec)) = self.format.plausible(avail) else {
                return false;
            };
            if let (Some(last), Some(sec)) = (last, sec) {
                if last.abs_diff(sec) > GAP {
                    return false;
                }
            }
            last = Some(sec.unwrap_or(0));
            at = at.saturating_add(total);
        }
        true
    }

    /// Window `w`: the piece bytes of [`PIECES_PER_WINDOW`] pieces and
    /// [`SLACK`] bytes more, mapped once for all the pieces in it.
    fn window(&self, w: u64) -> io::Result<Arc<Window>> {
        let mut windows = self
            .windows
            .lock()
            .map_err(|_| io::Error::other("a reading thread stopped"))?;
        if let Some((_, hit)) = windows.recent.iter().find(|(n, _)| *n == w) {
            return Ok(Arc::clone(hit));
        }
        let len = self.window_len();
        let offset = self.first.saturating_add(w.saturating_mul(len));
        let min = usize::try_from(len + SLACK).unwrap_or(usize::MAX);
        let window = windows.file.window(offset, min)?;
        if windows.recent.len() >= WINDOWS_KEPT {
            let oldest = windows
                .recent
                .iter()
                .enumerate()
                .min_by_key(|(_, (n, _))| *n);
            if let Some((i, _)) = oldest {
                windows.recent.swap_remove(i);
            }
        }
        windows.recent.push((w, Arc::clone(&window)));
        Ok(window)
    }
}
