//! pcapng captures, read block by block with `pcap-parser` (the only module,
//! with its `mapped` part, that names it), with the interfaces they
//! describe and their timestamp resolutions.
//!
//! A regular file is read through memory maps (`mapped`), anything else
//! with `read()`; both behind `pcap-parser`'s reader interface.
//!
//! Does not open files, detect compression or read classic pcap (that is
//! `file` and `classic`); it hands `file` packets and warnings.

use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use pcap_parser::nom;
use pcap_parser::pcapng::{Block, EnhancedPacketBlock, SecretsType};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError};

use super::file::{too_large_message, truncated_message, MAX_BLOCK};
use super::mapped::{prefetch_ahead, MappedFile, Window};
use super::{LinkType, SourceInfo};
use crate::error::SourceError;
use crate::time::Timestamp;

mod mapped;

/// The TLS key logs in the Decryption Secrets Blocks at the head of a
/// pcapng file (`head`: its first bytes), before its first packet, where
/// `editcap --inject-secrets` puts them: NSS key log text, one string a
/// block; and whether the head was enough (it reached a packet, or bytes
/// that are not a block), or more of the file may hold more.
pub fn secrets_at_head(head: &[u8]) -> (Vec<String>, bool) {
    let mut secrets = Vec::new();
    let mut big_endian = false;
    let mut rest = head;
    loop {
        let block = match mapped::parse_block(big_endian, rest) {
            // (A block that took no bytes would never end the loop.)
            Ok((after, block)) if after.len() < rest.len() => {
                rest = after;
                block
            }
            Ok(_) => return (secrets, true),
            Err(nom::Err::Incomplete(_)) | Err(nom::Err::Error(PcapError::Incomplete(_))) => {
                return (secrets, false)
            }
            Err(_) => return (secrets, true),
        };
        match block {
            Block::SectionHeader(shb) => big_endian = shb.big_endian(),
            Block::DecryptionSecrets(dsb) if dsb.secrets_type == SecretsType::TlsKeyLog => {
                // The data is padded to 32 bits; its length says where it ends.
                let len = usize::try_from(dsb.secrets_len).unwrap_or(usize::MAX);
                let text = dsb.data.get(..len).unwrap_or(dsb.data);
                secrets.push(String::from_utf8_lossy(text).into_owned());
            }
            block if block.is_data_block() => return (secrets, true),
            _ => {}
        }
    }
}

/// Initial size of the parse buffer.
pub const INITIAL_BUFFER: usize = 1 << 20;

#[derive(Clone, Copy, Debug)]
struct Interface {
    link: LinkType,
    units_per_sec: u64,
    offset_secs: i64,
}

/// What the packet blocks of a section need to be read: its byte order and
/// interfaces (for [`super::Split`], which reads packet blocks only).
pub struct Section {
    big_endian: bool,
    interfaces: Vec<Interface>,
}

impl Section {
    /// The block at the front of `avail` as [`Blocks::next`] would take
    /// it: an Enhanced Packet Block of a known interface gives its packet,
    /// a block the reader passes over (name resolution, statistics,
    /// secrets, custom, unknown) is skipped; `None` for what changes the
    /// section or needs the reader (a section header, an interface, a
    /// simple packet, a packet of an undescribed interface, a block that
    /// does not parse or is cut).
    pub(super) fn found_at(&self, avail: &[u8]) -> Option<super::split::At> {
        let (rest, block) = mapped::parse_block(self.big_endian, avail).ok()?;
        let total = avail.len() - rest.len();
        let epb = match block {
            Block::EnhancedPacket(epb) => epb,
            Block::SectionHeader(_) | Block::InterfaceDescription(_) | Block::SimplePacket(_) => {
                return None
            }
            _ => return Some(super::split::At::Skip(total)),
        };
        let packet = epb_packet(&self.interfaces, &epb, avail.as_ptr() as usize)?;
        Some(super::split::At::Frame(super::split::Found {
            ts: packet.ts,
            link: packet.link,
            orig_len: packet.orig_len,
            start: packet.start,
            len: packet.len,
            total,
        }))
    }

    /// Whether `avail` starts like a block: a total length (a multiple of
    /// four, at least 12 bytes, at most [`MAX_BLOCK`]) repeated at its end;
    /// that length if so.
    pub(super) fn plausible(&self, avail: &[u8]) -> Option<usize> {
        let word = |at: usize| mapped::u32_at(avail, at, self.big_endian);
        let len = word(4)?;
        let total = usize::try_from(len).ok()?;
        (total >= 12 && total % 4 == 0 && total <= MAX_BLOCK && word(total - 4)? == len)
            .then_some(total)
    }
}

/// An Enhanced Packet Block's packet, its data's start an offset from
/// `base`; `None` if its interface is not described.
fn epb_packet(interfaces: &[Interface], epb: &EnhancedPacketBlock, base: usize) -> Option<Packet> {
    let iface = interfaces.get(epb.if_id as usize).copied()?;
    let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
    Some(Packet {
        ts: Timestamp::from_ticks(ticks, iface.units_per_sec, iface.offset_secs),
        link: iface.link,
        orig_len: epb.origlen,
        start: (epb.data.as_ptr() as usize).saturating_sub(base),
        len: (epb.caplen as usize).min(epb.data.len()),
    })
}

/// Where the blocks come from.
enum Reader {
    Stream(Box<dyn PcapReaderIterator + Send>),
    Mapped(mapped::MappedBlocks),
}

impl Reader {
    fn get(&mut self) -> &mut dyn PcapReaderIterator {
        match self {
            Reader::Stream(r) => r.as_mut(),
            Reader::Mapped(r) => r,
        }
    }

    fn data(&self) -> &[u8] {
        match self {
            Reader::Stream(r) => r.data(),
            Reader::Mapped(r) => r.data(),
        }
    }
}

/// The reader and what it learned about the section's interfaces.
pub struct Blocks {
    reader: Reader,
    /// Bytes of the block handed out last, consumed on the next call.
    pending: usize,
    interfaces: Vec<Interface>,
    /// The current section's byte order (its section header says).
    big_endian: bool,
    buffer_size: usize,
    last_io_error: Arc<Mutex<Option<io::Error>>>,
}

/// Why [`Blocks::open`] failed.
pub enum OpenFailure {
    Empty,
    Read(io::Error),
    TruncatedHeader,
    NotACapture,
}

/// A packet in the reader's buffer; `start..start + len` is its data.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    pub ts: Timestamp,
    pub link: LinkType,
    pub orig_len: u32,
    start: usize,
    len: usize,
}

/// The answer to [`Blocks::next`].
pub enum Event {
    Packet(Packet),
    End,
    /// Reading stops here, with this warning; earlier packets stand.
    Stop(String),
    Failed(SourceError),
}

/// Remembers the last I/O error, which `pcap-parser` reduces to `ReadError`.
struct ErrorSlot<R> {
    inner: R,
    slot: Arc<Mutex<Option<io::Error>>>,
}

impl<R: Read> Read for ErrorSlot<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            if let Ok(mut slot) = self.slot.lock() {
                *slot = Some(io::Error::new(e.kind(), e.to_string()));
            }
        })
    }
}

/// What the parser's answer tells us to do, with no borrow of the reader left.
enum Step {
    Packet(Packet, usize),
    Skip(usize),
    Refill,
    Grow,
    End,
    Stop(String),
    ReadFailed,
}

impl Blocks {
    /// Hands `input` to `pcap-parser`, whose first read must return the whole
    /// first block (section header).
    pub fn open(input: Box<dyn Read + Send>) -> Result<Blocks, OpenFailure> {
        let slot = Arc::new(Mutex::new(None));
        let counted = ErrorSlot {
            inner: input,
            slot: Arc::clone(&slot),
        };
        let reader = match pcap_parser::create_reader(INITIAL_BUFFER, counted) {
            Ok(r) => r,
            Err(PcapError::Eof) => return Err(OpenFailure::Empty),
            Err(PcapError::ReadError) => {
                let source = take_error(&slot).unwrap_or_else(|| io::Error::other("read failed"));
                return Err(OpenFailure::Read(source));
            }
            Err(PcapError::Incomplete(_)) | Err(PcapError::UnexpectedEof) => {
                return Err(OpenFailure::TruncatedHeader)
            }
            Err(_) => return Err(OpenFailure::NotACapture),
        };
        Ok(Blocks::with(Reader::Stream(reader), slot))
    }

    /// Reads the blocks of a regular file through memory maps, from its
    /// first byte (the section header `open` checked is read again);
    /// `read` counts the bytes mapped so far.
    pub fn mapped(file: MappedFile, read: Option<Arc<AtomicU64>>) -> Blocks {
        let slot = Arc::new(Mutex::new(None));
        let reader = mapped::MappedBlocks::new(file, read, Arc::clone(&slot));
        Blocks::with(Reader::Mapped(reader), slot)
    }

    /// Blocks from `reader`, which leaves its I/O errors in `last_io_error`.
    fn with(reader: Reader, last_io_error: Arc<Mutex<Option<io::Error>>>) -> Blocks {
        Blocks {
            reader,
            pending: 0,
            interfaces: Vec::new(),
            big_endian: false,
            buffer_size: INITIAL_BUFFER,
            last_io_error,
        }
    }

    /// The data of the packet returned by the last call to [`Blocks::next`].
    pub fn data(&self, packet: &Packet) -> &[u8] {
        self.reader
            .data()
            .get(packet.start..packet.start.saturating_add(packet.len))
            .unwrap_or(&[])
    }

    /// When the file is mapped: the window the packet returned by the last
    /// call to [`Blocks::next`] lies in.
    pub fn window(&self) -> Option<&Arc<Window>> {
        match &self.reader {
            Reader::Mapped(r) => Some(r.window()),
            Reader::Stream(_) => None,
        }
    }

    /// When the file is mapped: whether the next block lies whole in the
    /// current window (false when it may not, or the file is not mapped).
    pub fn next_fits(&self) -> bool {
        match &self.reader {
            Reader::Mapped(r) => r.next_fits(self.pending),
            Reader::Stream(_) => false,
        }
    }

    /// When the file is mapped: reads the blocks before the next packet
    /// block (section header, interfaces), leaving that one unread, and
    /// returns the file, where that block starts and what its section says
    /// — for [`super::Split`] to read the packet blocks from there. `None`
    /// when something else comes first (the end, a cut or corrupt block);
    /// the blocks read stay read.
    pub fn split_point(
        &mut self,
        info: &mut SourceInfo,
        label: &str,
    ) -> Option<(MappedFile, u64, Section)> {
        if self.pending > 0 {
            self.reader.get().consume(self.pending);
            self.pending = 0;
        }
        loop {
            match self.parse_step(info, label) {
                Step::Packet(..) => break,
                Step::Skip(n) => self.reader.get().consume(n),
                Step::Refill => self.reader.get().refill().ok()?,
                _ => return None,
            }
        }
        let Reader::Mapped(mapped) = &self.reader else {
            return None;
        };
        let (file, offset, big_endian) = mapped.split_from()?;
        let section = Section {
            big_endian,
            interfaces: self.interfaces.clone(),
        };
        Some((file, offset, section))
    }

    /// Reads on from the block at `offset` (the blocks before it were read
    /// elsewhere: [`super::Split`]), in the same section.
    pub fn resume_at(&mut self, offset: u64) {
        self.pending = 0;
        if let Reader::Mapped(mapped) = &mut self.reader {
            mapped.resume_at(offset);
        }
    }

    /// The next packet; `path` and `label` (its text) name the input in
    /// messages, and `info` collects the format and warnings.
    pub fn next(&mut self, info: &mut SourceInfo, path: &Path, label: &str) -> Event {
        if self.pending > 0 {
            self.reader.get().consume(self.pending);
            self.pending = 0;
        }
        loop {
            match self.parse_step(info, label) {
                Step::Packet(packet, consumed) => {
                    self.pending = consumed;
                    return Event::Packet(packet);
                }
                Step::Skip(n) => self.reader.get().consume(n),
                Step::Refill => {
                    if self.reader.get().refill().is_err() {
                        return self.read_failed(path);
                    }
                }
                Step::Grow if self.reader.get().data().len() < self.buffer_size => {
                    // The block claims more than the buffer holds: read
                    // until the buffer is full (or the input ends) before
                    // growing, so a short file claiming a huge block is
                    // truncated, not a reason to allocate 64 MiB.
                    if self.reader.get().refill().is_err() {
                        return self.read_failed(path);
                    }
                }
                Step::Grow => {
                    let wanted = self.buffer_size.saturating_mul(2);
                    if wanted > MAX_BLOCK || !self.reader.get().grow(wanted) {
                        let at = self.reader.get().consumed() as u64;
                        return Event::Stop(too_large_message(label, at));
                    }
                    self.buffer_size = wanted;
                }
                Step::End => return Event::End,
                Step::Stop(warning) => return Event::Stop(warning),
                Step::ReadFailed => return self.read_failed(path),
            }
        }
    }

    fn read_failed(&mut self, path: &Path) -> Event {
        let source =
            take_error(&self.last_io_error).unwrap_or_else(|| io::Error::other("read failed"));
        Event::Failed(SourceError::Read {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Asks the parser for one block and decides what to do with it. A
    /// packet block that lies whole in the buffer — nearly every block — is
    /// read here directly (`mapped::plain_epb`: the same fields the parser
    /// gives, its options passed over), not through the reader's block
    /// enum: with the parser, reading was a quarter of one thread's time on
    /// a pcapng capture.
    fn parse_step(&mut self, info: &mut SourceInfo, path: &str) -> Step {
        let data = self.reader.get().data();
        if let Some((epb, rest)) = mapped::plain_epb(data, self.big_endian) {
            let consumed = data.len() - rest.len();
            prefetch_ahead(data, consumed);
            return match epb_packet(&self.interfaces, &epb, data.as_ptr() as usize) {
                Some(packet) => Step::Packet(packet, consumed),
                None => {
                    info.packets_unknown_interface += 1;
                    Step::Skip(consumed)
                }
            };
        }
        let base = self.reader.get().data().as_ptr() as usize;
        let consumed_so_far = self.reader.get().consumed() as u64;
        let result = self.reader.get().next();
        let offset_of = |data: &[u8]| (data.as_ptr() as usize).saturating_sub(base);
        match result {
            Ok((consumed, block)) => match block {
                // `file` hands classic captures to `classic`; one reaching
                // here means the two disagree about the magic numbers.
                PcapBlockOwned::LegacyHeader(_) | PcapBlockOwned::Legacy(_) => Step::Stop(format!(
                    "{path}: unexpected classic pcap data at byte {consumed_so_far}; stopped reading there"
                )),
                PcapBlockOwned::NG(Block::SectionHeader(shb)) => {
                    self.big_endian = shb.big_endian();
                    info.format = "pcapng".into();
                    self.interfaces.clear();
                    Step::Skip(consumed)
                }
                PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                    let link = LinkType(idb.linktype.0 as u32);
                    let units = units_per_sec(idb.if_tsresol).unwrap_or_else(|| {
                        info.warnings.push(format!(
                            "{path}: interface {} has an invalid if_tsresol {}; assuming microseconds",
                            self.interfaces.len(),
                            idb.if_tsresol
                        ));
                        1_000_000
                    });
                    if !link.is_supported() {
                        info.warnings.push(format!(
                            "{path}: interface {} has unsupported link type {} ({}); its packets are skipped",
                            self.interfaces.len(),
                            link.0,
                            link.name()
                        ));
                    }
                    self.interfaces.push(Interface {
                        link,
                        units_per_sec: units,
                        offset_secs: idb.ts_offset(),
                    });
                    Step::Skip(consumed)
                }
                PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                    let Some(packet) = epb_packet(&self.interfaces, &epb, base) else {
                        info.packets_unknown_interface += 1;
                        return Step::Skip(consumed);
                    };
                    Step::Packet(packet, consumed)
                }
                PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                    let Some(iface) = self.interfaces.first().copied() else {
                        info.packets_unknown_interface += 1;
                        return Step::Skip(consumed);
                    };
                    let len = (spb.origlen as usize).min(spb.data.len());
                    // Simple Packet Blocks carry no timestamp.
                    let packet = Packet {
                        ts: Timestamp::default(),
                        link: iface.link,
                        orig_len: spb.origlen,
                        start: offset_of(spb.data),
                        len,
                    };
                    Step::Packet(packet, consumed)
                }
                PcapBlockOwned::NG(_) => Step::Skip(consumed),
            },
            Err(PcapError::Eof) => Step::End,
            Err(PcapError::Incomplete(_)) => {
                if self.reader.get().reader_exhausted() {
                    Step::Stop(truncated_message(path, consumed_so_far))
                } else {
                    Step::Refill
                }
            }
            Err(PcapError::UnexpectedEof) => Step::Stop(truncated_message(path, consumed_so_far)),
            Err(PcapError::BufferTooSmall) => Step::Grow,
            Err(PcapError::ReadError) => Step::ReadFailed,
            Err(PcapError::HeaderNotRecognized) => Step::Stop(format!(
                "{path}: unrecognised header at byte {consumed_so_far}; stopped reading there"
            )),
            Err(PcapError::NomError(_, kind)) => Step::Stop(format!(
                "{path}: corrupt block at byte {consumed_so_far} ({kind:?}); stopped reading there, everything before it is reported"
            )),
            Err(PcapError::OwnedNomError(_, kind)) => Step::Stop(format!(
                "{path}: corrupt block at byte {consumed_so_far} ({kind:?}); stopped reading there, everything before it is reported"
            )),
        }
    }
}

/// Ticks per second for a pcapng `if_tsresol` byte: 10^-n, or 2^-n when the
/// top bit is set. (pcap-parser's own helper rejects every binary value.)
fn units_per_sec(tsresol: u8) -> Option<u64> {
    let exp = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 != 0 {
        2u64.checked_pow(exp)
    } else {
        10u64.checked_pow(exp)
    }
}

fn take_error(slot: &Arc<Mutex<Option<io::Error>>>) -> Option<io::Error> {
    slot.lock().ok().and_then(|mut s| s.take())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key log `editcap --inject-secrets` put at the head of a real
    /// capture is found; a head cut short, or before it, gives what came.
    #[test]
    fn secrets_at_the_head_are_read_until_the_first_packet() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
        let file = std::fs::read(root.join("h2-curl-10-secrets.pcapng")).unwrap();
        let keylog = std::fs::read_to_string(root.join("h2-curl-10.keylog")).unwrap();
        let (found, whole) = secrets_at_head(&file);
        assert!(whole);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].trim_end(), keylog.trim_end());
        // Cut short: more is needed.
        assert_eq!(secrets_at_head(&file[..40]), (vec![], false));
        assert_eq!(secrets_at_head(&[]), (vec![], false));
        // A capture without such a block has none.
        let plain = std::fs::read(root.join("http-curl-5-keepalive.pcapng")).unwrap();
        assert_eq!(secrets_at_head(&plain), (vec![], true));
    }

    /// A capture followed by a block that claims 1.9 GB, then 256 KiB of
    /// anything: read through windows of 4 KiB, the mapped blocks refill
    /// until the buffer `Blocks` would grow holds the block, and must do so
    /// in a few maps, not one a byte (a quarter of a million here before),
    /// and stop where the stream reader stops.
    #[test]
    fn a_block_claiming_gigabytes_after_a_capture_costs_a_few_maps() {
        let path = crate::testutil::every_capture()
            .into_iter()
            .find(|p| p.extension().is_some_and(|e| e == "pcapng"))
            .expect("a pcapng capture");
        let mut bytes = std::fs::read(&path).expect("read");
        let end = bytes.len();
        for word in [0x0045_0005u32, 1_952_064_006] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.resize(bytes.len() + (256 << 10), 0x11);
        let mut file = tempfile::tempfile().expect("temp file");
        std::io::Write::write_all(&mut file, &bytes).expect("write");
        let mapped = MappedFile::with_window(file, 4096).expect("map");
        let mut blocks = Blocks::mapped(mapped, None);
        let mut info = SourceInfo::default();
        let (mut packets, mut steps) = (0, 0);
        let stop = loop {
            steps += 1;
            assert!(steps < 100_000, "no end");
            match blocks.next(&mut info, &path, "junk") {
                Event::Packet(_) => packets += 1,
                Event::End => break None,
                Event::Stop(warning) => break Some(warning),
                Event::Failed(e) => panic!("{e}"),
            }
        };
        assert!(packets > 10, "{packets} packets");
        assert!(
            stop.as_ref().is_some_and(|w| w.contains(&end.to_string())),
            "{stop:?}"
        );
        let Reader::Mapped(reader) = &blocks.reader else {
            panic!("not mapped");
        };
        assert!(reader.maps() < 200, "{} maps", reader.maps());
    }

    #[test]
    fn binary_and_decimal_tsresol() {
        assert_eq!(units_per_sec(6), Some(1_000_000));
        assert_eq!(units_per_sec(9), Some(1_000_000_000));
        assert_eq!(units_per_sec(0x80 | 10), Some(1024));
        assert_eq!(units_per_sec(100), None);
    }
}
