//! Classic records read straight into a [`FrameBatch`] (`--threads`): the
//! input is `read()` into the batch's own buffer and each frame is noted
//! where it lies, so no packet is copied after the read. The reads go
//! through `Read::read_to_end`, which (from a file or standard input) fills
//! the buffer's spare capacity without zeroing it first. Only bytes the
//! reader's buffer already holds are copied in (records read for
//! [`ClassicReader::next`], or the part of a record left over from the last
//! batch), and the part of a record a batch ends on goes back there.
//!
//! Does not say what an end, a cut record or an over-large one means: it
//! leaves the reader's buffer holding the rest and [`ClassicReader::next`]
//! words it as an [`super::Event`], exactly as without batches.

use std::io::{self, Read};

use super::{fits, push, ClassicReader, Parsed, BUFFER};
use crate::source::{FrameBatch, LinkType};

/// The most bytes asked for at once (`read_to_end` splits them into reads
/// of 8 KiB, 16 KiB, …): the size [`BUFFER`] was measured to read fastest
/// with.
const READ_MAX: usize = BUFFER;

/// How [`ClassicReader::fill_batch`] stopped.
#[derive(Debug)]
pub enum Outcome {
    /// The batch reached a limit; the input goes on.
    Full,
    /// The input ended, or the next record is larger than
    /// [`super::MAX_RECORD`]: what is left is in the reader's buffer, and
    /// [`ClassicReader::next`] says what it is.
    Ask,
    /// Reading failed; the frames before the failure are in the batch.
    Failed(io::Error),
}

/// Where the batch stands while records are taken out of it.
struct Scan {
    /// `batch.data[at..filled]` are input bytes not yet taken as frames.
    at: usize,
    filled: usize,
    /// Frames added by this call.
    added: u64,
}

/// Why [`ClassicReader::take`] stopped.
enum Took {
    /// The batch reached a limit.
    Limit,
    /// The record at `at` needs this many more bytes.
    Need(usize),
    TooLarge,
}

impl ClassicReader {
    /// Appends frames to `batch` until it holds `frames` frames or the next
    /// would take it past `bytes` bytes (record headers included), or the
    /// input ends: the same frames [`ClassicReader::next`] would have given,
    /// in order. A record longer than `bytes` is taken when it is the first
    /// one. Returns how many it added and why it stopped.
    pub fn fill_batch(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
        link: LinkType,
    ) -> (u64, Outcome) {
        let mut added = 0;
        // Whole records already in the buffer are copied.
        let partial = loop {
            if batch.data.len() >= bytes || batch.frames.len() >= frames {
                return (added, Outcome::Full);
            }
            let avail = self.buf.get(self.start..self.end).unwrap_or_default();
            match self.header.parse_at(avail) {
                Parsed::Whole { total, .. } if !fits(batch.data.len(), total, bytes, added) => {
                    return (added, Outcome::Full);
                }
                Parsed::Whole { record, total } => {
                    let at = batch.data.len();
                    reserve(&mut batch.data, at + total, bytes);
                    batch
                        .data
                        .extend_from_slice(avail.get(..total).unwrap_or_default());
                    push(batch, link, at + record.start, &record);
                    self.start += total;
                    self.note(total);
                    added += 1;
                }
                Parsed::TooLarge => return (added, Outcome::Ask),
                Parsed::Need(_) if self.eof => return (added, Outcome::Ask),
                Parsed::Need(_) => break avail,
            }
        };
        // The start of a record moves to the batch; the rest is read there.
        let from = self.offset();
        let at = batch.data.len();
        reserve(&mut batch.data, at + partial.len(), bytes);
        batch.data.extend_from_slice(partial);
        self.base = from + partial.len() as u64;
        self.start = 0;
        self.end = 0;
        let mut scan = Scan {
            at,
            filled: batch.data.len(),
            added,
        };
        let outcome = self.read_into(batch, bytes, frames, link, &mut scan);
        // The part of a record the batch ends on stays with the reader.
        let tail = batch.data.get(scan.at..scan.filled).unwrap_or_default();
        self.keep(from + (scan.at - at) as u64, tail);
        batch.data.truncate(scan.at);
        (scan.added, outcome)
    }

    /// Reads into the batch and takes the whole records read, until a
    /// limit is reached with at least one frame added, or reading stops.
    fn read_into(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
        link: LinkType,
        scan: &mut Scan,
    ) -> Outcome {
        loop {
            let missing = match self.take(batch, bytes, frames, link, scan) {
                Took::Limit => return Outcome::Full,
                Took::TooLarge => return Outcome::Ask,
                Took::Need(missing) => missing,
            };
            if let Some(e) = self.failed.take() {
                return Outcome::Failed(e);
            }
            if self.eof {
                return Outcome::Ask;
            }
            // Read up to the byte limit, and past it only for a first frame.
            let room = bytes.saturating_sub(scan.filled);
            if room == 0 && scan.added > 0 {
                return Outcome::Full;
            }
            let left = frames.saturating_sub(batch.frames.len());
            let mut want = room.min(self.guess(left)).min(READ_MAX);
            if scan.added == 0 {
                // Grow towards a long record only as fast as the input
                // shows it really holds it: a short input claiming a huge
                // record must not make the batch huge.
                let have = scan.filled - scan.at;
                want = want.max(missing.min(READ_MAX.max(have)));
            }
            let want = want.max(1);
            reserve(&mut batch.data, scan.filled.saturating_add(want), bytes);
            // Reads until `want` bytes are in or the input ends; keeps what
            // came before a failure, whose records are taken first.
            let result = Read::take(&mut self.input, want as u64).read_to_end(&mut batch.data);
            let got = batch.data.len().saturating_sub(scan.filled);
            self.count(got);
            scan.filled = batch.data.len();
            match result {
                Ok(_) if got < want => self.eof = true,
                Ok(_) => {}
                Err(e) => self.failed = Some(e),
            }
        }
    }

    /// Takes the whole records at `scan.at` as frames while the batch is
    /// under its limits.
    #[inline]
    fn take(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
        link: LinkType,
        scan: &mut Scan,
    ) -> Took {
        while scan.at < bytes && batch.frames.len() < frames {
            let avail = batch.data.get(scan.at..scan.filled).unwrap_or_default();
            match self.header.parse_at(avail) {
                Parsed::Whole { total, .. } if !fits(scan.at, total, bytes, scan.added) => {
                    return Took::Limit;
                }
                Parsed::Whole { record, total } => {
                    push(batch, link, scan.at + record.start, &record);
                    scan.at += total;
                    scan.added += 1;
                    self.note(total);
                }
                Parsed::Need(missing) => return Took::Need(missing),
                Parsed::TooLarge => return Took::TooLarge,
            }
        }
        Took::Limit
    }

    /// Notes a record of `total` bytes taken.
    fn note(&mut self, total: usize) {
        self.records += 1;
        self.record_bytes += total as u64;
    }

    /// About how many bytes `frames` more records take, going by those
    /// seen so far (no limit before the first).
    fn guess(&self, frames: usize) -> usize {
        match self.record_bytes.checked_div(self.records) {
            Some(average) => frames.saturating_mul(usize::try_from(average).unwrap_or(usize::MAX)),
            None => usize::MAX,
        }
    }

    /// Makes `tail`, which starts at input offset `at`, the buffer's only
    /// content (the buffer is empty when this is called).
    fn keep(&mut self, at: u64, tail: &[u8]) {
        if self.buf.len() < tail.len() {
            self.buf.resize(tail.len(), 0);
        }
        if let Some(front) = self.buf.get_mut(..tail.len()) {
            front.copy_from_slice(tail);
        }
        self.start = 0;
        self.end = tail.len();
        self.base = at;
    }
}

/// Makes room in `data` for `upto` bytes, in steps that double up to
/// `limit` (the batch's byte limit), or exactly as needed past it.
fn reserve(data: &mut Vec<u8>, upto: usize, limit: usize) {
    if data.capacity() < upto {
        let target = upto.max(limit.min(data.capacity().saturating_mul(2)));
        data.reserve_exact(target.saturating_sub(data.len()));
    }
}
