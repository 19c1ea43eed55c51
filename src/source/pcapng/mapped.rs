//! pcapng blocks parsed where they lie in a memory-mapped regular file, a
//! window at a time (`source::mapped`), behind the same `pcap-parser`
//! reader interface the streaming reader has — so `Blocks` handles every
//! block, end, cut and error the same way whichever reads them, without
//! the `read()` copy, and `--threads`' batches can share the window the
//! packets lie in. A block that straddles a window's end starts the next
//! window.
//!
//! Does not interpret blocks (that is `pcapng`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pcap_parser::nom;
use pcap_parser::pcapng::{parse_block_be, parse_block_le, Block};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError};

use super::super::file::MAX_BLOCK;
use crate::source::mapped::{prefetch_ahead, MappedFile, Window};

/// Reads blocks from a mapped file.
pub struct MappedBlocks {
    file: MappedFile,
    window: Arc<Window>,
    /// `window.bytes()[at..]` is not consumed yet.
    at: usize,
    /// Bytes consumed from the start of the file.
    consumed: usize,
    /// The current section's byte order (its section header says).
    big_endian: bool,
    /// Bytes the last incomplete block still needed.
    needed: usize,
    /// Counts the bytes mapped so far, for progress.
    read: Option<Arc<AtomicU64>>,
    /// Where a mapping error is left for `Blocks` to report.
    error: Arc<Mutex<Option<std::io::Error>>>,
}

impl MappedBlocks {
    pub fn new(
        file: MappedFile,
        read: Option<Arc<AtomicU64>>,
        error: Arc<Mutex<Option<std::io::Error>>>,
    ) -> MappedBlocks {
        MappedBlocks {
            file,
            window: Window::empty(0),
            at: 0,
            consumed: 0,
            big_endian: false,
            needed: 0,
            read,
            error,
        }
    }

    /// The window the data lies in.
    pub fn window(&self) -> &Arc<Window> {
        &self.window
    }

    /// Whether the block `skip` bytes on lies whole in this window (by the
    /// length in its header): a batch sharing the window can take it.
    pub fn next_fits(&self, skip: usize) -> bool {
        let data = self.available().get(skip..).unwrap_or_default();
        let Some(&[_, _, _, _, a, b, c, d]) = data.first_chunk::<8>() else {
            return false;
        };
        let len = if self.big_endian {
            u32::from_be_bytes([a, b, c, d])
        } else {
            u32::from_le_bytes([a, b, c, d])
        };
        usize::try_from(len).is_ok_and(|len| len <= data.len())
    }

    /// The file, the offset of the first byte not consumed, and the
    /// section's byte order, for reading on elsewhere ([`crate::source::Split`]).
    pub fn split_from(&self) -> Option<(MappedFile, u64, bool)> {
        let offset = self.window.offset() + self.at as u64;
        Some((self.file.try_clone()?, offset, self.big_endian))
    }

    /// Reads on from `offset`: the blocks before it were read elsewhere.
    pub fn resume_at(&mut self, offset: u64) {
        self.window = Window::empty(offset);
        self.at = 0;
        self.consumed = usize::try_from(offset).unwrap_or(usize::MAX);
        self.needed = 0;
    }

    fn available(&self) -> &[u8] {
        self.window.bytes().get(self.at..).unwrap_or_default()
    }
}

/// pcap-parser's block parser for a section of this byte order.
pub fn block_parser(big_endian: bool) -> BlockParser {
    if big_endian {
        parse_block_be
    } else {
        parse_block_le
    }
}

/// What [`block_parser`] returns.
pub type BlockParser =
    for<'a> fn(&'a [u8]) -> nom::IResult<&'a [u8], Block<'a>, PcapError<&'a [u8]>>;

impl PcapReaderIterator for MappedBlocks {
    fn next(&mut self) -> Result<(usize, PcapBlockOwned<'_>), PcapError<&[u8]>> {
        let exhausted = self.reader_exhausted();
        let data = self.window.bytes().get(self.at..).unwrap_or_default();
        if data.is_empty() {
            return Err(if exhausted {
                PcapError::Eof
            } else {
                PcapError::Incomplete(0)
            });
        }
        match block_parser(self.big_endian)(data) {
            Ok((rest, block)) => {
                if let Block::SectionHeader(shb) = &block {
                    self.big_endian = shb.big_endian();
                }
                let len = data.len() - rest.len();
                prefetch_ahead(data, len);
                Ok((len, PcapBlockOwned::from(block)))
            }
            Err(nom::Err::Error(e)) | Err(nom::Err::Failure(e)) => Err(e),
            Err(nom::Err::Incomplete(_)) if exhausted => Err(PcapError::UnexpectedEof),
            Err(nom::Err::Incomplete(needed)) => {
                let n = match needed {
                    nom::Needed::Size(n) => n.get(),
                    nom::Needed::Unknown => 1,
                };
                // Like the streaming reader's buffer limit: a block larger
                // than the largest buffer it would grow to is refused
                // (`Blocks` says so), not mapped.
                if data.len().saturating_add(n) > MAX_BLOCK {
                    return Err(PcapError::BufferTooSmall);
                }
                self.needed = n;
                Err(PcapError::Incomplete(n))
            }
        }
    }

    fn consume(&mut self, offset: usize) {
        self.at = self.at.saturating_add(offset);
        self.consumed = self.consumed.saturating_add(offset);
    }

    fn consume_noshift(&mut self, offset: usize) {
        self.consume(offset);
    }

    fn consumed(&self) -> usize {
        self.consumed
    }

    /// Maps the next window, from the first byte not consumed, holding at
    /// least the block that did not fit.
    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        let from = self.window.offset() + self.at as u64;
        let min = self.available().len().saturating_add(self.needed.max(1));
        match self.file.window(from, min) {
            Ok(window) => {
                if let Some(read) = &self.read {
                    read.store(window.end(), Ordering::Relaxed);
                }
                self.window = window;
                self.at = 0;
                self.needed = 0;
                Ok(())
            }
            Err(e) => {
                if let Ok(mut slot) = self.error.lock() {
                    *slot = Some(e);
                }
                Err(PcapError::ReadError)
            }
        }
    }

    fn position(&self) -> usize {
        self.at
    }

    /// Windows grow by themselves to hold a block (`refill`).
    fn grow(&mut self, _new_size: usize) -> bool {
        true
    }

    fn data(&self) -> &[u8] {
        self.available()
    }

    fn reader_exhausted(&self) -> bool {
        self.window.end() >= self.file.size()
    }
}
