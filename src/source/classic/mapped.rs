//! Classic records read out of a memory-mapped regular file, a window at a
//! time ([`crate::source::mapped`]): records are parsed where they lie in the
//! page cache, and `--threads`' batches share the window instead of holding
//! a copy. A record that straddles a window's end starts the next window.
//!
//! Gives exactly the records and [`Event`]s the `read()`-based
//! [`super::ClassicReader`] gives for the same bytes (`tests/mapped.rs`
//! beside this file checks it on every capture); does not word messages (that is `file`).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{fits, push, Event, Header, Outcome, Parsed, Record, FILE_HEADER, MAX_RECORD};
use crate::source::mapped::{prefetch_ahead, MappedFile, Window};
use crate::source::{FrameBatch, LinkType};

/// Reads records from a mapped file.
pub struct MappedReader {
    file: MappedFile,
    header: Header,
    window: Arc<Window>,
    /// `window.bytes()[at..]` is not handed out yet.
    at: usize,
    /// Counts the bytes mapped so far (up to the current window's end).
    read: Option<Arc<AtomicU64>>,
}

impl MappedReader {
    /// Reads the records after the file header (already parsed as `header`).
    pub fn new(file: MappedFile, header: Header, read: Option<Arc<AtomicU64>>) -> MappedReader {
        MappedReader {
            file,
            header,
            window: Window::empty(FILE_HEADER as u64),
            at: 0,
            read,
        }
    }

    pub fn header(&self) -> Header {
        self.header
    }

    /// The data of the record returned by the last call to [`MappedReader::next`].
    pub fn data(&self, record: &Record) -> &[u8] {
        self.window
            .bytes()
            .get(record.start..record.start.saturating_add(record.len))
            .unwrap_or(&[])
    }

    /// Reads on from the record at `offset` of the file (records before it
    /// were read elsewhere: [`super::Split`]).
    pub fn resume_at(&mut self, offset: u64) {
        self.window = Window::empty(offset);
        self.at = 0;
    }

    /// The file, for reading it in pieces ([`super::Split`]), and the
    /// offset of the first record not handed out yet.
    pub fn split_from(&self) -> Option<(MappedFile, u64)> {
        Some((self.file.try_clone()?, self.offset()))
    }

    /// Offset in the file of the first byte not handed out yet.
    fn offset(&self) -> u64 {
        self.window.offset() + self.at as u64
    }

    /// The next record, mapping the next window as needed.
    #[inline]
    pub fn next(&mut self) -> Event {
        loop {
            let avail = self.window.bytes().get(self.at..).unwrap_or_default();
            match self.header.parse_at(avail) {
                Parsed::Whole { record, total } => {
                    let record = Record {
                        start: self.at + record.start,
                        ..record
                    };
                    self.at += total;
                    prefetch_ahead(avail, total);
                    return Event::Record(record);
                }
                // As with `read()`: too large only if the file holds that
                // much; a short file claiming a huge record is cut short.
                Parsed::TooLarge if self.file.size() < self.offset() + MAX_RECORD as u64 => {
                    if let Some(read) = &self.read {
                        // What `read()` read before it found the end.
                        read.store(self.file.size(), Ordering::Relaxed);
                    }
                    return Event::CutShort(self.offset());
                }
                Parsed::TooLarge => return Event::TooLarge(self.offset()),
                Parsed::Need(missing) => match self.advance(missing) {
                    Ok(true) => {}
                    Ok(false) if self.at >= self.window.bytes().len() => return Event::End,
                    Ok(false) => return Event::CutShort(self.offset()),
                    Err(e) => return Event::Failed(e),
                },
            }
        }
    }

    /// Maps a window from the first byte not handed out, large enough for
    /// `missing` more bytes than are left in this one; false if the file
    /// holds no more bytes than that.
    #[inline(never)]
    fn advance(&mut self, missing: usize) -> io::Result<bool> {
        let from = self.offset();
        let left = self.window.bytes().len().saturating_sub(self.at);
        let min = left.saturating_add(missing).min(MAX_RECORD);
        let next = self.file.window(from, min)?;
        if next.bytes().len() <= left {
            return Ok(false);
        }
        if let Some(read) = &self.read {
            read.store(next.end(), Ordering::Relaxed);
        }
        self.window = next;
        self.at = 0;
        Ok(true)
    }

    /// Adds frames to `batch`, which then shares the window they lie in,
    /// until it holds `frames` frames or the next would take it past
    /// `bytes` bytes of the file, or the window ends after at least one
    /// frame. Same contract as [`super::ClassicReader::fill_batch`].
    pub fn fill_batch(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
        link: LinkType,
    ) -> (u64, Outcome) {
        let mut added = 0u64;
        let mut first = self.at;
        loop {
            if batch.frames.len() >= frames || self.at - first >= bytes {
                return (added, Outcome::Full);
            }
            let avail = self.window.bytes().get(self.at..).unwrap_or_default();
            match self.header.parse_at(avail) {
                Parsed::Whole { total, .. } if !fits(self.at - first, total, bytes, added) => {
                    return (added, Outcome::Full);
                }
                Parsed::Whole { record, total } => {
                    if added == 0 && !batch.share(&self.window) {
                        // The batch holds frames from elsewhere: copy.
                        return (added, Outcome::Ask);
                    }
                    push(batch, link, self.at + record.start, &record);
                    prefetch_ahead(avail, total);
                    self.at += total;
                    added += 1;
                }
                Parsed::TooLarge => return (added, Outcome::Ask),
                // The batch ends with the window; the next one maps on.
                Parsed::Need(_) if added > 0 => return (added, Outcome::Full),
                Parsed::Need(missing) => match self.advance(missing) {
                    Ok(true) => first = self.at,
                    Ok(false) => return (added, Outcome::Ask),
                    Err(e) => return (added, Outcome::Failed(e)),
                },
            }
        }
    }
}
