//! Classic (libpcap-format) captures: the 24-byte file header and the
//! 16-byte (or, for the "modified" format, 24-byte) record headers, parsed
//! here straight out of one large buffer filled with `read()`. Packets borrow
//! that buffer; a record that straddles its end has the unread tail moved to
//! the front before the next read. For `--threads`, `direct` reads records
//! straight into a [`super::FrameBatch`]'s buffer instead; `mapped` parses
//! them where they lie in a memory-mapped regular file ([`Records`] is
//! either).
//!
//! Does not open files, detect compression or pcapng, or word messages; that
//! is `file`, which turns the [`Event`]s here into packets and warnings.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::LinkType;
use crate::time::Timestamp;

/// The read buffer: large enough that `read()` calls and the tail moves
/// between them cost next to nothing per packet, small enough to stay in a
/// core's L2 cache between the kernel's copy into it and the decoder's look
/// at the headers. Measured on a 1 GiB capture: 256 KiB to 1 MiB read it
/// equally fast; 4 MiB took 10-15 % more CPU and 8 MiB 60 % more.
pub const BUFFER: usize = 1 << 20;
/// The largest record we are willing to buffer, header included; the buffer
/// doubles up to this size, and only once it is full of a record's bytes,
/// so a short input claiming a huge record never makes it grow.
pub const MAX_RECORD: usize = super::file::MAX_BLOCK;
/// Length of the file header.
pub const FILE_HEADER: usize = 24;

const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Alexey Kuznetsov's patched libpcap: 24-byte records, little-endian only.
const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

/// What the file header says about the records that follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub link: LinkType,
    big_endian: bool,
    nanos: bool,
    record_header: usize,
}

impl Header {
    /// The header at the start of `bytes`, `None` if the magic number is not a
    /// classic pcap one or fewer than [`FILE_HEADER`] bytes are given.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let header = bytes.get(..FILE_HEADER)?;
        let (big_endian, nanos, record_header) = match u32_at(header, 0, false) {
            MAGIC_MICROS => (false, false, 16),
            MAGIC_NANOS => (false, true, 16),
            MAGIC_MODIFIED => (false, false, 24),
            m if m.swap_bytes() == MAGIC_MICROS => (true, false, 16),
            m if m.swap_bytes() == MAGIC_NANOS => (true, true, 16),
            _ => return None,
        };
        Some(Header {
            link: LinkType(u32_at(header, 20, big_endian)),
            big_endian,
            nanos,
            record_header,
        })
    }

    /// Whether the first four bytes are a classic pcap magic number.
    pub fn is_magic(head: &[u8]) -> bool {
        let Some(magic) = head.get(..4) else {
            return false;
        };
        let le = u32_at(magic, 0, false);
        matches!(le, MAGIC_MICROS | MAGIC_NANOS | MAGIC_MODIFIED)
            || matches!(le.swap_bytes(), MAGIC_MICROS | MAGIC_NANOS)
    }

    /// The fields of a record header (the first 16 bytes in every format).
    fn fields(&self, hdr: &[u8; 16]) -> Fields {
        let [s0, s1, s2, s3, f0, f1, f2, f3, c0, c1, c2, c3, o0, o1, o2, o3] = *hdr;
        let big_endian = self.big_endian;
        let word = |bytes: [u8; 4]| {
            let v = u32::from_le_bytes(bytes);
            if big_endian {
                v.swap_bytes()
            } else {
                v
            }
        };
        Fields {
            sec: word([s0, s1, s2, s3]),
            frac: word([f0, f1, f2, f3]),
            caplen: word([c0, c1, c2, c3]),
            orig_len: word([o0, o1, o2, o3]),
        }
    }

    /// What the front of `avail` holds: a whole record (its data at
    /// `record.start` within `avail`), or not yet, or one too large to be.
    #[inline]
    fn parse_at(&self, avail: &[u8]) -> Parsed {
        let Some(hdr) = avail.first_chunk::<16>() else {
            return Parsed::Need(16 - avail.len());
        };
        let fields = self.fields(hdr);
        let len = fields.caplen as usize;
        let total = self.record_header.saturating_add(len);
        if total > MAX_RECORD {
            return Parsed::TooLarge;
        }
        if avail.len() < total {
            return Parsed::Need(total - avail.len());
        }
        Parsed::Whole {
            record: Record {
                ts: self.timestamp(fields.sec, fields.frac),
                orig_len: fields.orig_len,
                start: self.record_header,
                len,
            },
            total,
        }
    }

    /// The whole record at the front of `avail`, if it holds one.
    #[inline]
    pub(super) fn found_at(&self, avail: &[u8]) -> Option<super::split::Found> {
        match self.parse_at(avail) {
            Parsed::Whole { record, total } => Some(super::split::Found {
                ts: record.ts,
                link: self.link,
                orig_len: record.orig_len,
                start: record.start,
                len: record.len,
                total,
            }),
            Parsed::Need(_) | Parsed::TooLarge => None,
        }
    }

    /// Whether `avail` starts with a record header that a capture tool
    /// would write: a fraction of a second below one second, a captured
    /// length no larger than the packet's (which is not zero) nor than
    /// [`MAX_RECORD`]; its whole length and its seconds if so. Used only to
    /// guess where records start in the middle of a file (`split`), where a
    /// wrong guess costs time, never a wrong record.
    pub(super) fn plausible(&self, avail: &[u8]) -> Option<(usize, u32)> {
        let fields = self.fields(avail.first_chunk::<16>()?);
        let second = if self.nanos { 1_000_000_000 } else { 1_000_000 };
        let total = self.record_header.saturating_add(fields.caplen as usize);
        (fields.frac < second
            && fields.orig_len > 0
            && fields.caplen <= fields.orig_len
            && total <= MAX_RECORD)
            .then_some((total, fields.sec))
    }

    /// The timestamp of a record: exactly `Timestamp::from_parts(sec, frac,
    /// 10^6 or 10^9)`, without its 128-bit division. Two `u32`s cannot
    /// overflow an `i64` of nanoseconds (at most about 4.3e18), so nothing
    /// needs clamping.
    fn timestamp(&self, sec: u32, frac: u32) -> Timestamp {
        let nanos = if self.nanos {
            i64::from(frac)
        } else {
            i64::from(frac) * 1_000
        };
        Timestamp(i64::from(sec) * 1_000_000_000 + nanos)
    }
}

/// A record header's fields.
struct Fields {
    sec: u32,
    frac: u32,
    caplen: u32,
    orig_len: u32,
}

/// A record parsed in the buffer; `start..start + len` is its data.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub ts: Timestamp,
    pub orig_len: u32,
    pub start: usize,
    pub len: usize,
}

/// What [`Header::parse_at`] found.
enum Parsed {
    /// A whole record, `total` bytes with its header.
    Whole { record: Record, total: usize },
    /// Part of a record: at least this many more bytes are needed.
    Need(usize),
    /// A record longer than [`MAX_RECORD`], which is never read.
    TooLarge,
}

/// The answer to [`ClassicReader::next`].
#[derive(Debug)]
pub enum Event {
    Record(Record),
    /// The input ended between records.
    End,
    /// The input ended inside the record starting at this byte offset.
    CutShort(u64),
    /// The record starting at this byte offset is larger than [`MAX_RECORD`].
    TooLarge(u64),
    /// Reading failed.
    Failed(io::Error),
}

/// Reads records out of one buffer, refilled in place.
pub struct ClassicReader {
    input: Box<dyn Read + Send>,
    header: Header,
    /// The buffer; `buf[start..end]` holds bytes read but not yet handed out.
    buf: Vec<u8>,
    /// The size `buf` takes at its first refill: not before, so a reader
    /// that is replaced by a mapped one (or reads nothing) never zeroes it.
    capacity: usize,
    start: usize,
    end: usize,
    /// Offset in the input of `buf[0]`, for messages.
    base: u64,
    eof: bool,
    /// A failed read whose bytes before the failure are still to be handed
    /// out (reads into a batch can fail after some of them succeeded).
    failed: Option<io::Error>,
    /// Counts the bytes read, when `input` is the input itself.
    read: Option<Arc<AtomicU64>>,
    /// Records and their bytes (headers included) seen by
    /// [`ClassicReader::fill_batch`], to guess how much to read for a
    /// number of frames.
    records: u64,
    record_bytes: u64,
}

impl ClassicReader {
    /// Starts reading after `prefix`, the first bytes of the input, which
    /// must hold the whole file header (as checked by [`Header::parse`]).
    /// `capacity` is the buffer size (tests use tiny ones); it is raised to
    /// the prefix's length if that is longer. `read` counts what is read
    /// from `input` from now on.
    pub fn new(
        header: Header,
        mut prefix: Vec<u8>,
        input: Box<dyn Read + Send>,
        capacity: usize,
        read: Option<Arc<AtomicU64>>,
    ) -> ClassicReader {
        let end = prefix.len();
        prefix.resize(end.max(1), 0);
        ClassicReader {
            input,
            header,
            buf: prefix,
            capacity: capacity.max(end).max(1),
            start: FILE_HEADER.min(end),
            end,
            base: 0,
            eof: false,
            failed: None,
            read,
            records: 0,
            record_bytes: 0,
        }
    }

    pub fn header(&self) -> Header {
        self.header
    }

    /// The buffer size (once it has been refilled).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.buf.len().max(self.capacity)
    }

    /// The data of a record returned by the last call to [`ClassicReader::next`].
    pub fn data(&self, record: &Record) -> &[u8] {
        self.buf
            .get(record.start..record.start.saturating_add(record.len))
            .unwrap_or(&[])
    }

    /// The next record, reading and moving bytes as needed. The record's data
    /// stays in place until the next call.
    #[inline]
    pub fn next(&mut self) -> Event {
        loop {
            if let Some(record) = self.parse() {
                return Event::Record(record);
            }
            if let Some(event) = self.refill() {
                return event;
            }
        }
    }

    /// The record at the front of the buffer, if it is all there.
    #[inline]
    fn parse(&mut self) -> Option<Record> {
        let avail = self.buf.get(self.start..self.end)?;
        let Parsed::Whole { record, total } = self.header.parse_at(avail) else {
            return None;
        };
        let record = Record {
            start: self.start + record.start,
            ..record
        };
        self.start += total;
        Some(record)
    }

    /// Makes room and reads more after [`ClassicReader::parse`] found no
    /// whole record; says why reading stops, if it does.
    #[inline(never)]
    fn refill(&mut self) -> Option<Event> {
        if self.eof {
            return Some(if self.start >= self.end {
                Event::End
            } else {
                Event::CutShort(self.offset())
            });
        }
        if self.start > 0 {
            // Move the unread tail (part of one record) to the front.
            self.buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < self.capacity {
            self.buf.resize(self.capacity, 0);
        } else if self.end >= self.buf.len() {
            // Full of one record that is longer still: grow, but only now
            // that the input has shown it really holds that much.
            if self.buf.len() >= MAX_RECORD {
                return Some(Event::TooLarge(self.offset()));
            }
            let wanted = self.buf.len().saturating_mul(2).min(MAX_RECORD);
            self.buf.resize(wanted, 0);
        }
        self.fill().err().map(Event::Failed)
    }

    /// Notes `n` bytes read from the input.
    fn count(&self, n: usize) {
        if let Some(read) = &self.read {
            read.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Offset in the input of the first byte not handed out yet.
    fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// One `read()` into the free end of the buffer; sets `eof` when it
    /// returns nothing.
    fn fill(&mut self) -> io::Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let Some(space) = self.buf.get_mut(self.end..).filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        loop {
            match self.input.read(space) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    let n = n.min(space.len());
                    self.end += n;
                    self.count(n);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The `u32` at `at` in `bytes` (zero past the end, which callers rule out).
fn u32_at(bytes: &[u8], at: usize, big_endian: bool) -> u32 {
    let mut word = [0u8; 4];
    if let Some(b) = bytes.get(at..at + 4) {
        word.copy_from_slice(b);
    }
    if big_endian {
        u32::from_be_bytes(word)
    } else {
        u32::from_le_bytes(word)
    }
}

/// Whether a whole record of `total` bytes at `at` goes in a batch: if
/// it ends within the limit, or it would be the call's first frame.
#[inline]
fn fits(at: usize, total: usize, bytes: usize, added: u64) -> bool {
    at.saturating_add(total) <= bytes || added == 0
}

/// Notes a record as a frame of `batch` whose data is at `start` in the
/// batch's bytes.
#[inline]
fn push(batch: &mut super::FrameBatch, link: LinkType, start: usize, record: &Record) {
    batch.frames.push(super::Frame {
        ts: record.ts,
        link,
        window: 0,
        orig_len: record.orig_len,
        start,
        end: start + record.len,
    });
}

mod direct;
mod mapped;

pub use direct::Outcome;
pub use mapped::MappedReader;

/// Records read with `read()` or out of a mapped file: the same records
/// and events either way.
pub enum Records {
    Read(ClassicReader),
    Mapped(MappedReader),
}

impl Records {
    pub fn header(&self) -> Header {
        match self {
            Records::Read(r) => r.header(),
            Records::Mapped(r) => r.header(),
        }
    }

    #[inline]
    pub fn next(&mut self) -> Event {
        match self {
            Records::Read(r) => r.next(),
            Records::Mapped(r) => r.next(),
        }
    }

    /// The data of the record returned by the last call to [`Records::next`].
    pub fn data(&self, record: &Record) -> &[u8] {
        match self {
            Records::Read(r) => r.data(record),
            Records::Mapped(r) => r.data(record),
        }
    }

    pub fn fill_batch(
        &mut self,
        batch: &mut super::FrameBatch,
        bytes: usize,
        frames: usize,
        link: LinkType,
    ) -> (u64, Outcome) {
        match self {
            Records::Read(r) => r.fill_batch(batch, bytes, frames, link),
            Records::Mapped(r) => r.fill_batch(batch, bytes, frames, link),
        }
    }
}

#[cfg(test)]
mod tests;
