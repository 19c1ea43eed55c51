//! pcapng blocks parsed where they lie in a memory-mapped regular file, a
//! window at a time (`source::mapped`), behind the same `pcap-parser`
//! reader interface the streaming reader has — so `Blocks` handles every
//! block, end, cut and error the same way whichever reads them, without
//! the `read()` copy, and `--threads`' batches can share the window the
//! packets lie in. A block that straddles a window's end starts the next
//! window. Also the one place that reads an Enhanced Packet Block by hand:
//! a whole, well-formed one (nearly every block) gives exactly the block
//! pcap-parser's parser would but for its options, passed over unread,
//! without the parser's cost (`plain_epb`, held to the parser by a
//! differential test); anything else goes to the parser.
//!
//! Does not interpret blocks (that is `pcapng`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pcap_parser::nom;
use pcap_parser::pcapng::{parse_block_be, parse_block_le, Block, EnhancedPacketBlock};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::EPB_MAGIC;
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
    /// Windows mapped so far.
    #[cfg(test)]
    maps: usize,
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
            #[cfg(test)]
            maps: 0,
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
        let Some(len) = u32_at(data, 4, self.big_endian) else {
            return false;
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

    /// Windows mapped so far.
    #[cfg(test)]
    pub(super) fn maps(&self) -> usize {
        self.maps
    }
}

/// pcap-parser's block parser for a section of this byte order.
fn block_parser(big_endian: bool) -> BlockParser {
    if big_endian {
        parse_block_be
    } else {
        parse_block_le
    }
}

/// What [`block_parser`] returns.
type BlockParser = for<'a> fn(&'a [u8]) -> nom::IResult<&'a [u8], Block<'a>, PcapError<&'a [u8]>>;

/// The block at the front of `data` in a section of this byte order, as
/// pcap-parser reads it (for the pieces' walk, `Section::found_at`). A
/// whole, well-formed Enhanced Packet Block — nearly every block a capture
/// tool writes — is read here, field for field what the parser gives but
/// for its options (`plain_epb`); every other block, and one that does not
/// look exactly like that, goes through the parser.
pub fn parse_block(
    big_endian: bool,
    data: &[u8],
) -> nom::IResult<&[u8], Block<'_>, PcapError<&[u8]>> {
    match plain_epb(data, big_endian) {
        Some((epb, rest)) => Ok((rest, Block::EnhancedPacket(epb))),
        None => block_parser(big_endian)(data),
    }
}

/// The Enhanced Packet Block at the front of `data` if it is whole and
/// well formed, and the bytes after it: the same block pcap-parser's
/// parser returns for it, but for its options, which are passed over
/// unread (nothing in this crate reads a packet block's options; the
/// parser reads them leniently — one that does not parse ends the list,
/// not the block — so they never decide whether the block is taken).
/// `None` for anything else, which the parser then reads (or rejects)
/// itself.
pub fn plain_epb(data: &[u8], big_endian: bool) -> Option<(EnhancedPacketBlock<'_>, &[u8])> {
    let word = |at: usize| u32_at(data, at, big_endian);
    let caplen = word(20)?;
    // The parser refuses a captured length this close to 2^32 (padding it
    // would overflow), and asks for more data when the padded packet does
    // not fit the block.
    if word(0)? != EPB_MAGIC || caplen >= u32::MAX - 4 {
        return None;
    }
    let padded = caplen.checked_next_multiple_of(4)?;
    // The block holds the packet and its padding (and options after them,
    // if it is longer).
    let total = word(4)?;
    if total < padded.checked_add(32)? {
        return None;
    }
    let (block, rest) = data.split_at_checked(usize::try_from(total).ok()?)?;
    let block_len2 = u32_at(block, block.len() - 4, big_endian)?;
    if block_len2 != total {
        return None;
    }
    let packet = block.get(28..28 + usize::try_from(padded).ok()?)?;
    Some((
        EnhancedPacketBlock {
            block_type: u32::from_le_bytes(*data.first_chunk::<4>()?),
            block_len1: total,
            if_id: word(8)?,
            ts_high: word(12)?,
            ts_low: word(16)?,
            caplen,
            origlen: word(24)?,
            data: packet,
            options: Vec::new(),
            block_len2,
        },
        rest,
    ))
}

/// The 32-bit word at `at` in `bytes`, in a section of this byte order.
pub fn u32_at(bytes: &[u8], at: usize, big_endian: bool) -> Option<u32> {
    let word = *bytes.get(at..)?.first_chunk::<4>()?;
    Some(if big_endian {
        u32::from_be_bytes(word)
    } else {
        u32::from_le_bytes(word)
    })
}

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
        // Plain packet blocks are read before the reader is asked
        // (`Blocks::parse_step`): what comes here is for the parser.
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
    /// least the block that did not fit — and half again what is left of
    /// the window: `Blocks` refills until the buffer it would grow holds a
    /// block that claims more than that (1 MiB, then 2, …), and one byte
    /// more a map made a block of junk claiming gigabytes cost a map per
    /// byte (a 10 MB capture followed by 8 MB of blocks out of step: 26 s,
    /// 170 000 maps).
    fn refill(&mut self) -> Result<(), PcapError<&[u8]>> {
        let from = self.window.offset() + self.at as u64;
        let left = self.available().len();
        let min = left.saturating_add(self.needed.max(left / 2).max(1));
        #[cfg(test)]
        {
            self.maps += 1;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{every_capture, Xorshift};

    /// What a parse gave, comparable: the bytes left (where and how many)
    /// and the block's fields (an Enhanced Packet Block's all of them but
    /// its options, which the fast path passes over unread), or the error.
    fn outcome(result: nom::IResult<&[u8], Block<'_>, PcapError<&[u8]>>) -> String {
        match result {
            Ok((rest, Block::EnhancedPacket(b))) => format!(
                "rest {:p}+{} epb {} {} {} {} {} {} {} data {:p}+{} {}",
                rest.as_ptr(),
                rest.len(),
                b.block_type,
                b.block_len1,
                b.if_id,
                b.ts_high,
                b.ts_low,
                b.caplen,
                b.origlen,
                b.data.as_ptr(),
                b.data.len(),
                b.block_len2
            ),
            Ok((rest, block)) => format!("rest {:p}+{} {block:?}", rest.as_ptr(), rest.len()),
            Err(e) => format!("{e:?}"),
        }
    }

    /// `parse_block` gives exactly what pcap-parser's parser gives for
    /// `data`; whether it read the block itself.
    fn agrees(data: &[u8], big_endian: bool, what: &str) -> bool {
        let ours = outcome(parse_block(big_endian, data));
        let theirs = outcome(block_parser(big_endian)(data));
        assert_eq!(ours, theirs, "{what}");
        plain_epb(data, big_endian).is_some()
    }

    /// Every block of every pcapng capture (whole, cut short, and with its
    /// header and trailer bytes changed one at a time, in both byte
    /// orders), and random blocks: the fast path gives what the parser
    /// gives, and takes the plain packet blocks.
    #[test]
    fn plain_packet_blocks_read_as_the_parser_reads_them() {
        let files = every_capture();
        let (mut blocks, mut fast) = (0, 0);
        for path in files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "pcapng"))
        {
            let bytes = std::fs::read(path).expect("read");
            let name = path.display();
            let (mut at, mut big_endian) = (0, false);
            while let Ok((rest, block)) = block_parser(big_endian)(&bytes[at..]) {
                if let Block::SectionHeader(shb) = &block {
                    big_endian = shb.big_endian();
                }
                let len = bytes.len() - at - rest.len();
                let whole = &bytes[at..at + len];
                blocks += 1;
                fast += usize::from(agrees(&bytes[at..], big_endian, &format!("{name} @{at}")));
                for cut in [1, 4, 27, 28, len / 2, len - 1] {
                    agrees(
                        &whole[..cut.min(len)],
                        big_endian,
                        &format!("{name} @{at} cut {cut}"),
                    );
                }
                if matches!(block, Block::EnhancedPacket(_)) && blocks % 7 == 0 {
                    let mut changed = whole.to_vec();
                    for i in (0..32.min(len)).chain(len.saturating_sub(4)..len) {
                        let was = changed[i];
                        for v in [0, 0xff, was.wrapping_add(1), was.wrapping_sub(4)] {
                            changed[i] = v;
                            for be in [false, true] {
                                agrees(&changed, be, &format!("{name} @{at} byte {i} = {v}"));
                            }
                        }
                        changed[i] = was;
                    }
                }
                at += len;
            }
        }
        // The captures' blocks are mostly packet blocks.
        assert!(
            fast * 2 > blocks,
            "{fast} of {blocks} capture blocks read directly"
        );
        let (mut blocks, mut fast, mut optioned) = (0, 0, 0);
        // Made-up blocks: a plain packet block's lengths, some right, some
        // not, in both byte orders.
        let mut rng = Xorshift(0x5eed_b10c);
        for _ in 0..20_000 {
            let be = rng.next() % 2 == 0;
            let put = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
            // Now and then a captured length near 2^32, whose padding
            // overflows (the parser refuses those).
            let caplen = match rng.next() % 50 {
                0 => u32::MAX - (rng.next() % 8) as u32,
                _ => (rng.next() % 80) as u32,
            };
            let padded = caplen.wrapping_add(3) & !3;
            // A third of them with options: a few words of whatever bytes
            // (now and then not a whole number of words).
            let options = match rng.next() % 3 {
                0 => (rng.next() % 6) as u32 * 4 + (rng.next() % 2) as u32 * 2,
                _ => 0,
            };
            let mut len = padded.wrapping_add(32).wrapping_add(options);
            if rng.next() % 4 == 0 {
                len = len.wrapping_add((rng.next() % 9) as u32).wrapping_sub(4);
            }
            let mut block = Vec::new();
            block.extend(put(6));
            block.extend(put(len));
            block.extend(rng.bytes(12));
            block.extend(put(caplen));
            block.extend(put((rng.next() % 100) as u32));
            let extra = (rng.next() % 3) as usize * 4;
            block.extend(rng.bytes((padded as usize).min(96) + options as usize + extra));
            let trailer = if rng.next() % 5 == 0 { len ^ 4 } else { len };
            block.extend(put(trailer));
            let after = (rng.next() % 8) as usize;
            block.extend(rng.bytes(after));
            blocks += 1;
            let direct = agrees(&block, be, &format!("made-up {block:02x?}"));
            fast += usize::from(direct);
            // Longer than the packet and its padding: options (here,
            // whatever bytes), passed over.
            optioned += usize::from(direct && options > 0);
        }
        assert!(
            fast > 3_000,
            "{fast} of {blocks} made-up blocks read directly"
        );
        assert!(
            optioned > 500,
            "{optioned} made-up blocks with options read directly"
        );
    }
}
