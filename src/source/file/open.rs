//! Opening a capture: telling gzip and zstd from a plain capture, and
//! classic pcap from pcapng, by the first bytes of the input, and starting
//! the right reader on it (decompressing through `crate::inflate`).
//!
//! Does not read records or blocks past the headers it needs (that is the
//! readers') nor decide how a regular file is read (`file`).

use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{FileSource, Kind};
use crate::error::SourceError;
use crate::inflate;
use crate::source::classic::{self, ClassicReader, Header, Records};
use crate::source::pcapng::{self, Blocks, OpenFailure};
use crate::source::SourceInfo;

/// Bytes asked for per read while looking at the first bytes of the input
/// (and the buffer in front of a decompressor).
const PEEK: usize = 64 * 1024;

/// Counts the bytes read from the input (before decompression), for progress.
/// Plain classic input is counted by its reader instead: `Counting` would
/// hide the file's own uninitialised-memory reads behind a plain `read`.
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

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

impl FileSource {
    /// Detects the format and starts reading; `read`, if given, counts the
    /// input's bytes: the first ones here, the rest below a decompressor or
    /// by the reader of a plain input.
    pub(super) fn start(
        path: &Path,
        mut input: Box<dyn Read + Send>,
        buffer: usize,
        read: Option<Arc<AtomicU64>>,
    ) -> Result<FileSource, SourceError> {
        let read_err = |source| SourceError::Read {
            path: path.to_path_buf(),
            source,
        };
        let chunk = PEEK.min(buffer).max(1);
        let mut head = Vec::new();
        read_at_least(&mut input, &mut head, 4, chunk).map_err(read_err)?;
        if head.is_empty() {
            return Err(SourceError::Empty {
                path: path.to_path_buf(),
            });
        }
        let shown: Vec<u8> = head.iter().take(4).copied().collect();
        // The first bytes of the capture itself, and the rest of it.
        // `counter` counts what is read from `rest` when that is the input.
        let (compression, mut prefix, mut rest, counter): (_, _, Box<dyn Read + Send>, _) =
            if head.starts_with(&GZIP_MAGIC) {
                count(&read, head.len());
                let raw = io::Cursor::new(head).chain(counting(input, read));
                let raw = BufReader::with_capacity(PEEK, raw);
                (Some("gzip"), Vec::new(), inflate::gzip(raw), None)
            } else if head.starts_with(&ZSTD_MAGIC) {
                count(&read, head.len());
                let raw = io::Cursor::new(head).chain(counting(input, read));
                let raw = BufReader::with_capacity(PEEK, raw);
                let zst = inflate::zstd(raw).map_err(read_err)?;
                (Some("zstd"), Vec::new(), zst, None)
            } else {
                (None, head, input, read)
            };
        read_at_least(&mut rest, &mut prefix, 4, chunk).map_err(read_err)?;
        let kind = if Header::is_magic(&prefix) {
            read_at_least(&mut rest, &mut prefix, classic::FILE_HEADER, chunk).map_err(read_err)?;
            let Some(header) = Header::parse(&prefix) else {
                return Err(SourceError::TruncatedHeader {
                    path: path.to_path_buf(),
                });
            };
            count(&counter, prefix.len());
            Kind::Classic {
                reader: Records::Read(ClassicReader::new(header, prefix, rest, buffer, counter)),
                checked: false,
            }
        } else {
            // pcap-parser looks for the whole section header in its first
            // read, which returns just `prefix`: make that hold it.
            if prefix.starts_with(&PCAPNG_MAGIC) {
                read_at_least(&mut rest, &mut prefix, 12, chunk).map_err(read_err)?;
                if let Some(len) = section_header_len(&prefix) {
                    let len = len.min(pcapng::INITIAL_BUFFER);
                    read_at_least(&mut rest, &mut prefix, len, chunk).map_err(read_err)?;
                }
            }
            count(&counter, prefix.len());
            let input = Box::new(io::Cursor::new(prefix).chain(counting(rest, counter)));
            match Blocks::open(input) {
                Ok(blocks) => Kind::Pcapng(blocks),
                Err(OpenFailure::Empty) => {
                    return Err(SourceError::Empty {
                        path: path.to_path_buf(),
                    })
                }
                Err(OpenFailure::Read(source)) => return Err(read_err(source)),
                Err(OpenFailure::TruncatedHeader) => {
                    return Err(SourceError::TruncatedHeader {
                        path: path.to_path_buf(),
                    })
                }
                Err(OpenFailure::NotACapture) => {
                    return Err(SourceError::NotACapture {
                        path: path.to_path_buf(),
                        magic: describe_magic(&shown, compression),
                    })
                }
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
            kind,
            index: 0,
            read: Arc::new(AtomicU64::new(0)),
            size: None,
            info,
            done: false,
            piped: false,
        })
    }
}

/// Adds `n` to the count of bytes read, if there is one.
fn count(read: &Option<Arc<AtomicU64>>, n: usize) {
    if let Some(read) = read {
        read.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// `input`, counted if there is a count.
fn counting(input: Box<dyn Read + Send>, read: Option<Arc<AtomicU64>>) -> Box<dyn Read + Send> {
    match read {
        Some(read) => Box::new(Counting { inner: input, read }),
        None => input,
    }
}

/// Reads into `buf` until it holds at least `n` bytes or the input ends,
/// asking for `chunk` bytes at a time (a pipe may deliver fewer).
fn read_at_least(
    input: &mut dyn Read,
    buf: &mut Vec<u8>,
    n: usize,
    chunk: usize,
) -> io::Result<()> {
    while buf.len() < n {
        let filled = buf.len();
        buf.resize(filled + chunk, 0);
        let got = loop {
            match input.read(buf.get_mut(filled..).unwrap_or_default()) {
                Ok(got) => break got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    buf.truncate(filled);
                    return Err(e);
                }
            }
        };
        buf.truncate(filled + got);
        if got == 0 {
            break;
        }
    }
    Ok(())
}

/// The length a pcapng section header block claims, read with the byte
/// order its byte-order magic gives.
fn section_header_len(head: &[u8]) -> Option<usize> {
    let len: [u8; 4] = head.get(4..8)?.try_into().ok()?;
    let bom: [u8; 4] = head.get(8..12)?.try_into().ok()?;
    let len = match u32::from_le_bytes(bom) {
        0x1a2b_3c4d => u32::from_le_bytes(len),
        0x4d3c_2b1a => u32::from_be_bytes(len),
        _ => return None,
    };
    usize::try_from(len).ok()
}

fn describe_magic(head: &[u8], compression: Option<&str>) -> String {
    let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
    match compression {
        Some(c) => format!("{} ({c}-compressed)", hex.join(" ")),
        None => hex.join(" "),
    }
}
