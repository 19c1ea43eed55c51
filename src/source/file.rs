//! Reading pcap and pcapng files (and standard input), optionally gzip- or
//! zstd-compressed, as a stream with a bounded buffer. The only module that
//! names `pcap-parser`, `flate2` and `ruzstd`.
//!
//! Does not decode packet contents; it hands out frames with their link type
//! and timestamp.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError};

use super::{LinkType, PacketSource, RawPacket, SourceInfo};
use crate::error::SourceError;
use crate::time::Timestamp;

/// Initial size of the parse buffer.
const INITIAL_BUFFER: usize = 1 << 20;
/// The largest single block we are willing to buffer (a pcapng block can claim 4 GiB).
pub const MAX_BLOCK: usize = 64 << 20;

#[derive(Clone, Copy, Debug)]
struct Interface {
    link: LinkType,
    units_per_sec: u64,
    offset_secs: i64,
}

/// A capture file or stream read block by block.
pub struct FileSource {
    path: PathBuf,
    /// `path` as text, for messages (formatted once).
    label: String,
    reader: Box<dyn PcapReaderIterator + Send>,
    /// Bytes of the block handed out last, consumed on the next call.
    pending: usize,
    interfaces: Vec<Interface>,
    index: u64,
    buffer_size: usize,
    last_io_error: Arc<Mutex<Option<io::Error>>>,
    /// Input bytes read so far, and the file's size when it is a regular file.
    read: Arc<AtomicU64>,
    size: Option<u64>,
    info: SourceInfo,
    done: bool,
}

/// Counts the bytes read from the input (before decompression), for progress.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
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

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

impl FileSource {
    /// Opens `path` (`-` for standard input), detecting compression and the
    /// capture format from the first bytes.
    pub fn open(path: &Path) -> Result<FileSource, SourceError> {
        let mut size = None;
        let input: Box<dyn Read + Send> = if path.as_os_str() == "-" {
            Box::new(io::stdin())
        } else {
            let file = File::open(path).map_err(|source| SourceError::Open {
                path: path.to_path_buf(),
                source,
            })?;
            if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
                return Err(SourceError::Open {
                    path: path.to_path_buf(),
                    source: io::Error::other("is a directory"),
                });
            }
            size = file
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            Box::new(file)
        };
        let read = Arc::new(AtomicU64::new(0));
        let counted = Counting {
            inner: input,
            read: Arc::clone(&read),
        };
        let mut source = Self::from_reader(path, Box::new(counted))?;
        source.read = read;
        source.size = size;
        Ok(source)
    }

    /// Reads a capture from any byte stream; `path` names it in messages.
    pub fn from_reader(
        path: &Path,
        input: Box<dyn Read + Send>,
    ) -> Result<FileSource, SourceError> {
        let read_err = |source| SourceError::Read {
            path: path.to_path_buf(),
            source,
        };
        let mut buffered = BufReader::with_capacity(64 * 1024, input);
        let head = peek(&mut buffered, 4).map_err(read_err)?;
        if head.is_empty() {
            return Err(SourceError::Empty {
                path: path.to_path_buf(),
            });
        }
        let (compression, decoded): (Option<&str>, Box<dyn Read + Send>) =
            if head.starts_with(&GZIP_MAGIC) {
                let gz = flate2::read::MultiGzDecoder::new(buffered);
                (Some("gzip"), Box::new(gz))
            } else if head.starts_with(&ZSTD_MAGIC) {
                let zst = ruzstd::decoding::StreamingDecoder::new(buffered).map_err(|e| {
                    read_err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("zstd: {e}"),
                    ))
                })?;
                (Some("zstd"), Box::new(zst))
            } else {
                (None, Box::new(buffered))
            };
        let slot = Arc::new(Mutex::new(None));
        let counted = ErrorSlot {
            inner: decoded,
            slot: Arc::clone(&slot),
        };
        let reader = match pcap_parser::create_reader(INITIAL_BUFFER, counted) {
            Ok(r) => r,
            Err(PcapError::Eof) => {
                return Err(SourceError::Empty {
                    path: path.to_path_buf(),
                })
            }
            Err(PcapError::ReadError) => {
                let source = take_error(&slot).unwrap_or_else(|| io::Error::other("read failed"));
                return Err(read_err(source));
            }
            Err(PcapError::Incomplete(_)) | Err(PcapError::UnexpectedEof) => {
                return Err(SourceError::TruncatedHeader {
                    path: path.to_path_buf(),
                })
            }
            Err(_) => {
                return Err(SourceError::NotACapture {
                    path: path.to_path_buf(),
                    magic: describe_magic(&head, compression),
                })
            }
        };
        let info = SourceInfo {
            name: path.display().to_string(),
            compression: compression.map(str::to_string),
            ..SourceInfo::default()
        };
        Ok(FileSource {
            path: path.to_path_buf(),
            label: path.display().to_string(),
            reader,
            pending: 0,
            interfaces: Vec::new(),
            index: 0,
            buffer_size: INITIAL_BUFFER,
            last_io_error: slot,
            read: Arc::new(AtomicU64::new(0)),
            size: None,
            info,
            done: false,
        })
    }

    fn stop(&mut self, warning: String) {
        self.info.truncated = true;
        self.info.warnings.push(warning);
        self.done = true;
    }
}

/// What the parser's answer tells us to do, with no borrow of the reader left.
enum Step {
    Packet {
        ts: Timestamp,
        link: LinkType,
        orig_len: u32,
        start: usize,
        len: usize,
        consumed: usize,
    },
    Skip(usize),
    Refill,
    Grow,
    End,
    Stop(String),
    Fatal(SourceError),
    ReadFailed,
}

impl PacketSource for FileSource {
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, SourceError> {
        if self.pending > 0 {
            self.reader.consume(self.pending);
            self.pending = 0;
        }
        loop {
            if self.done {
                return Ok(None);
            }
            let step = self.parse_step();
            match step {
                Step::Packet {
                    ts,
                    link,
                    orig_len,
                    start,
                    len,
                    consumed,
                } => {
                    self.pending = consumed;
                    self.index += 1;
                    let data = self
                        .reader
                        .data()
                        .get(start..start.saturating_add(len))
                        .unwrap_or(&[]);
                    return Ok(Some(RawPacket {
                        index: self.index,
                        ts,
                        link,
                        orig_len,
                        data,
                    }));
                }
                Step::Skip(n) => self.reader.consume(n),
                Step::Refill => {
                    if self.reader.refill().is_err() {
                        return self.read_failed();
                    }
                }
                Step::Grow if self.reader.data().len() < self.buffer_size => {
                    // The block claims more than the buffer holds: read
                    // until the buffer is full (or the input ends) before
                    // growing, so a short file claiming a huge block is
                    // truncated, not a reason to allocate 64 MiB.
                    if self.reader.refill().is_err() {
                        return self.read_failed();
                    }
                }
                Step::Grow => {
                    let wanted = self.buffer_size.saturating_mul(2);
                    if wanted > MAX_BLOCK || !self.reader.grow(wanted) {
                        let at = self.reader.consumed();
                        self.stop(format!(
                            "{}: a block at byte {at} is larger than {} MiB; stopped reading there",
                            self.path.display(),
                            MAX_BLOCK >> 20
                        ));
                    } else {
                        self.buffer_size = wanted;
                    }
                }
                Step::End => {
                    self.done = true;
                    return Ok(None);
                }
                Step::Stop(warning) => self.stop(warning),
                Step::Fatal(e) => {
                    self.done = true;
                    return Err(e);
                }
                Step::ReadFailed => return self.read_failed(),
            }
        }
    }

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn progress(&self) -> (u64, Option<u64>) {
        (self.read.load(Ordering::Relaxed), self.size)
    }
}

impl FileSource {
    fn read_failed(&mut self) -> Result<Option<RawPacket<'_>>, SourceError> {
        self.done = true;
        let source =
            take_error(&self.last_io_error).unwrap_or_else(|| io::Error::other("read failed"));
        Err(SourceError::Read {
            path: self.path.clone(),
            source,
        })
    }

    /// Asks the parser for one block and decides what to do with it.
    fn parse_step(&mut self) -> Step {
        let base = self.reader.data().as_ptr() as usize;
        let consumed_so_far = self.reader.consumed();
        // Borrowed, not formatted: this runs for every packet.
        let path = &self.label;
        let result = self.reader.next();
        let offset_of = |data: &[u8]| (data.as_ptr() as usize).saturating_sub(base);
        match result {
            Ok((consumed, block)) => match block {
                PcapBlockOwned::LegacyHeader(header) => {
                    let link = LinkType(header.network.0 as u32);
                    self.info.format = "pcap".into();
                    if !link.is_supported() {
                        return Step::Fatal(SourceError::UnsupportedLinkType {
                            path: self.path.clone(),
                            linktype: link.0,
                            name: link.name(),
                        });
                    }
                    let units = if header.is_nanosecond_precision() {
                        1_000_000_000
                    } else {
                        1_000_000
                    };
                    self.interfaces.clear();
                    self.interfaces.push(Interface {
                        link,
                        units_per_sec: units,
                        offset_secs: 0,
                    });
                    Step::Skip(consumed)
                }
                PcapBlockOwned::Legacy(frame) => {
                    let Some(iface) = self.interfaces.first().copied() else {
                        return Step::Skip(consumed);
                    };
                    Step::Packet {
                        ts: Timestamp::from_parts(
                            i64::from(frame.ts_sec),
                            u64::from(frame.ts_usec),
                            iface.units_per_sec,
                        ),
                        link: iface.link,
                        orig_len: frame.origlen,
                        start: offset_of(frame.data),
                        len: frame.data.len(),
                        consumed,
                    }
                }
                PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                    self.info.format = "pcapng".into();
                    self.interfaces.clear();
                    Step::Skip(consumed)
                }
                PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                    let link = LinkType(idb.linktype.0 as u32);
                    let units = units_per_sec(idb.if_tsresol).unwrap_or_else(|| {
                        self.info.warnings.push(format!(
                            "{path}: interface {} has an invalid if_tsresol {}; assuming microseconds",
                            self.interfaces.len(),
                            idb.if_tsresol
                        ));
                        1_000_000
                    });
                    if !link.is_supported() {
                        self.info.warnings.push(format!(
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
                    let Some(iface) = self.interfaces.get(epb.if_id as usize).copied() else {
                        self.info.packets_unknown_interface += 1;
                        return Step::Skip(consumed);
                    };
                    let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                    let len = (epb.caplen as usize).min(epb.data.len());
                    Step::Packet {
                        ts: Timestamp::from_ticks(ticks, iface.units_per_sec, iface.offset_secs),
                        link: iface.link,
                        orig_len: epb.origlen,
                        start: offset_of(epb.data),
                        len,
                        consumed,
                    }
                }
                PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                    let Some(iface) = self.interfaces.first().copied() else {
                        self.info.packets_unknown_interface += 1;
                        return Step::Skip(consumed);
                    };
                    let len = (spb.origlen as usize).min(spb.data.len());
                    // Simple Packet Blocks carry no timestamp.
                    Step::Packet {
                        ts: Timestamp::default(),
                        link: iface.link,
                        orig_len: spb.origlen,
                        start: offset_of(spb.data),
                        len,
                        consumed,
                    }
                }
                PcapBlockOwned::NG(_) => Step::Skip(consumed),
            },
            Err(PcapError::Eof) => Step::End,
            Err(PcapError::Incomplete(_)) => {
                if self.reader.reader_exhausted() {
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

fn truncated_message(path: &str, at: usize) -> String {
    format!("{path}: the capture is cut short at byte {at} (the last record is incomplete); everything before it is reported")
}

fn take_error(slot: &Arc<Mutex<Option<io::Error>>>) -> Option<io::Error> {
    slot.lock().ok().and_then(|mut s| s.take())
}

/// Returns up to `n` bytes from the front of the stream without consuming them.
fn peek<R: Read>(reader: &mut BufReader<R>, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = reader.fill_buf()?.to_vec();
    // A pipe may deliver fewer bytes than asked for on the first read.
    while buf.len() < n {
        let before = buf.len();
        let more = reader.fill_buf()?;
        if more.len() <= before {
            break;
        }
        buf = more.to_vec();
    }
    buf.truncate(n);
    Ok(buf)
}

fn describe_magic(head: &[u8], compression: Option<&str>) -> String {
    let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
    match compression {
        Some(c) => format!("{} ({c}-compressed)", hex.join(" ")),
        None => hex.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_bytes(bytes: Vec<u8>) -> Result<FileSource, SourceError> {
        FileSource::from_reader(Path::new("test.pcap"), Box::new(io::Cursor::new(bytes)))
    }

    fn pcap_header(magic: u32, linktype: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&magic.to_le_bytes());
        v.extend_from_slice(&2u16.to_le_bytes());
        v.extend_from_slice(&4u16.to_le_bytes());
        v.extend_from_slice(&0i32.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&65535u32.to_le_bytes());
        v.extend_from_slice(&linktype.to_le_bytes());
        v
    }

    fn record(sec: u32, frac: u32, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&sec.to_le_bytes());
        v.extend_from_slice(&frac.to_le_bytes());
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn rejects_empty_and_garbage() {
        assert!(matches!(open_bytes(vec![]), Err(SourceError::Empty { .. })));
        assert!(matches!(
            open_bytes(b"hello world, not a capture at all".to_vec()),
            Err(SourceError::NotACapture { .. })
        ));
    }

    #[test]
    fn binary_and_decimal_tsresol() {
        assert_eq!(units_per_sec(6), Some(1_000_000));
        assert_eq!(units_per_sec(9), Some(1_000_000_000));
        assert_eq!(units_per_sec(0x80 | 10), Some(1024));
        assert_eq!(units_per_sec(100), None);
    }

    #[test]
    fn reads_nanosecond_pcap() {
        let mut bytes = pcap_header(0xa1b2_3c4d, 101);
        bytes.extend(record(10, 5, &[0x45, 0, 0, 20]));
        let mut src = open_bytes(bytes).expect("opens");
        let p = src.next_packet().expect("reads").expect("one packet");
        assert_eq!(p.ts, Timestamp(10_000_000_005));
        assert_eq!(p.link, LinkType::RAW);
        assert_eq!(p.data, &[0x45, 0, 0, 20]);
        assert!(src.next_packet().expect("reads").is_none());
        assert!(!src.info().truncated);
    }

    #[test]
    fn truncated_last_record_keeps_earlier_packets() {
        let mut bytes = pcap_header(0xa1b2_c3d4, 1);
        bytes.extend(record(1, 2, &[1, 2, 3]));
        let mut second = record(3, 4, &[5, 6, 7, 8, 9, 10]);
        second.truncate(second.len() - 3);
        bytes.extend(second);
        let mut src = open_bytes(bytes).expect("opens");
        assert!(src.next_packet().expect("reads").is_some());
        assert!(src.next_packet().expect("reads").is_none());
        assert!(src.info().truncated);
        assert!(src.info().warnings[0].contains("cut short"));
    }

    #[test]
    fn short_file_claiming_a_huge_record_is_truncated_without_growing() {
        // Found by fuzzing (fuzz/regressions/pipeline/): a record claiming
        // 48 MiB made the reader double its buffer up to 64 MiB before it
        // found out that the file ends a few bytes later.
        let mut bytes = pcap_header(0xa1b2_c3d4, 1);
        bytes.extend(record(1, 2, &[1, 2, 3]));
        let mut huge = record(3, 4, &[5, 6, 7]);
        huge[8..12].copy_from_slice(&(48u32 << 20).to_le_bytes());
        bytes.extend(huge);
        let mut src = open_bytes(bytes).expect("opens");
        assert!(src.next_packet().expect("reads").is_some());
        assert!(src.next_packet().expect("reads").is_none());
        assert_eq!(src.buffer_size, INITIAL_BUFFER);
        assert!(src.info().truncated);
        assert!(src.info().warnings[0].contains("cut short"));
    }

    #[test]
    fn unsupported_link_type_is_an_error() {
        let mut bytes = pcap_header(0xa1b2_c3d4, 147);
        bytes.extend(record(1, 2, &[1, 2, 3]));
        let mut src = open_bytes(bytes).expect("opens");
        let err = src
            .next_packet()
            .expect_err("link type 147 is not supported");
        assert!(err.to_string().contains("unsupported link type 147"));
    }
}
