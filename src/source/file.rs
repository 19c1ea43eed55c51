//! A capture file (or standard input) as a packet source: how a regular
//! file is read (memory-mapped, or with `read()`), the records or blocks
//! handed out one by one or in batches, in pieces for `--threads`, with the
//! warnings that end a stream early. Telling the formats and compressions
//! apart is `open`'s; classic records are parsed by `classic`, pcapng
//! blocks by `pcapng`. Classic records fill `--threads`' batches without a
//! copy (`classic::direct`).
//!
//! Does not decode packet contents; it hands out frames with their link type
//! and timestamp.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::classic::{self, MappedReader, Records};
use super::mapped::{self, MappedFile};
use super::pcapng::{self, Blocks};
use super::split::Format;
use super::{copy_packets, FrameBatch, LinkType, PacketSource, RawPacket, SourceInfo, Split};
use crate::error::SourceError;

mod open;

/// The largest single block or record we are willing to buffer (a pcapng
/// block can claim 4 GiB, a classic record almost as much).
pub const MAX_BLOCK: usize = 64 << 20;

/// How [`FileSource::open_with`] reads a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Through memory maps where it can (an uncompressed capture, classic or pcapng),
    /// in windows of this many bytes (`None`: the measured best).
    Map(Option<usize>),
    /// Always with `read()`.
    Read,
}

impl Access {
    /// Through memory maps, for one of `files` files read side by side
    /// (`--merge`): each gets a share of the usual window (at least 1 MiB),
    /// so the mapped memory stays about that of one file.
    pub fn map_shared(files: usize) -> Access {
        let window = (mapped::WINDOW / files.max(1)).max(1 << 20);
        Access::Map(Some(window))
    }
}

/// A capture file or stream read record by record.
pub struct FileSource {
    path: PathBuf,
    /// `path` as text, for messages (formatted once).
    label: String,
    kind: Kind,
    index: u64,
    /// Input bytes read so far, and the file's size when it is a regular file.
    read: Arc<AtomicU64>,
    size: Option<u64>,
    info: SourceInfo,
    done: bool,
    /// Standard input, fed through a pipe by another process.
    piped: bool,
}

/// The two capture formats, each with its own reader.
enum Kind {
    /// Classic pcap; `checked` once the header's link type has been.
    Classic {
        reader: Records,
        checked: bool,
    },
    Pcapng(Blocks),
}

impl FileSource {
    /// Opens `path` (`-` for standard input), detecting compression and the
    /// capture format from the first bytes. An uncompressed capture (classic
    /// or pcapng) in a regular file is read through memory maps.
    pub fn open(path: &Path) -> Result<FileSource, SourceError> {
        Self::open_with(path, Access::Map(None))
    }

    /// [`FileSource::open`], reading the file through memory maps when it
    /// can (`Access::Map`, tests choose tiny windows) or always with
    /// `read()` (`--no-mmap`).
    pub fn open_with(path: &Path, access: Access) -> Result<FileSource, SourceError> {
        let mut size = None;
        let mut mapped = None;
        let mut piped = false;
        let input: Box<dyn Read + Send> = if path.as_os_str() == "-" {
            piped = super::pipe::grow_stdin();
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
            if let Access::Map(window) = access {
                let window = window.unwrap_or(mapped::WINDOW);
                mapped = file
                    .try_clone()
                    .ok()
                    .and_then(|f| MappedFile::with_window(f, window));
            }
            Box::new(file)
        };
        let read = Arc::new(AtomicU64::new(0));
        let mut source = Self::start(path, input, classic::BUFFER, Some(Arc::clone(&read)))?;
        if let (Some(file), None) = (mapped, &source.info.compression) {
            match &mut source.kind {
                Kind::Classic { reader, .. } => {
                    let header = reader.header();
                    let mapped = MappedReader::new(file, header, Some(Arc::clone(&read)));
                    *reader = Records::Mapped(mapped);
                }
                Kind::Pcapng(blocks) => *blocks = Blocks::mapped(file, Some(Arc::clone(&read))),
            }
        }
        source.read = read;
        source.size = size;
        source.piped = piped;
        Ok(source)
    }

    /// Reads a capture from any byte stream; `path` names it in messages.
    pub fn from_reader(
        path: &Path,
        input: Box<dyn Read + Send>,
    ) -> Result<FileSource, SourceError> {
        Self::start(path, input, classic::BUFFER, None)
    }

    /// The TLS key logs of the Decryption Secrets Blocks at the head of
    /// an uncompressed pcapng file, read again from its start (64 KiB,
    /// and more only while the blocks before the first packet need it, up
    /// to [`MAX_BLOCK`]); none for classic pcap, a compressed file or
    /// standard input, whose head has been read already.
    pub fn secrets_at_head(&self) -> Vec<String> {
        let regular = self.size.is_some() && self.info.compression.is_none();
        if !regular || !matches!(self.kind, Kind::Pcapng(_)) {
            return Vec::new();
        }
        let Ok(mut file) = File::open(&self.path) else {
            return Vec::new();
        };
        let mut head = Vec::new();
        let mut want = 64 << 10;
        loop {
            let got = (&mut file)
                .take((want - head.len()) as u64)
                .read_to_end(&mut head);
            let (secrets, whole) = pcapng::secrets_at_head(&head);
            let ended = !matches!(got, Ok(n) if n > 0);
            if whole || ended || want >= MAX_BLOCK {
                return secrets;
            }
            want = (want * 4).min(MAX_BLOCK);
        }
    }

    /// The classic reader's buffer size (`None` for pcapng).
    #[cfg(test)]
    pub(super) fn classic_buffer(&self) -> Option<usize> {
        match &self.kind {
            Kind::Classic {
                reader: Records::Read(reader),
                ..
            } => Some(reader.capacity()),
            _ => None,
        }
    }

    /// Whether a pcapng file is read through memory maps.
    #[cfg(test)]
    pub(super) fn pcapng_mapped(&self) -> bool {
        matches!(&self.kind, Kind::Pcapng(blocks) if blocks.window().is_some())
    }

    #[cfg(test)]
    pub(super) fn with_buffer(
        path: &Path,
        input: Box<dyn Read + Send>,
        buffer: usize,
    ) -> Result<FileSource, SourceError> {
        Self::start(path, input, buffer, None)
    }
}

/// The first time a classic capture is read from: notes the format and
/// rejects a link type `decode` does not know (ending the stream).
fn check_link(
    checked: &mut bool,
    link: LinkType,
    info: &mut SourceInfo,
    done: &mut bool,
    path: &Path,
) -> Result<(), SourceError> {
    if *checked {
        return Ok(());
    }
    *checked = true;
    info.format = "pcap".into();
    if link.is_supported() {
        return Ok(());
    }
    *done = true;
    Err(SourceError::UnsupportedLinkType {
        path: path.to_path_buf(),
        linktype: link.0,
        name: link.name(),
    })
}

/// Ends the stream with a warning; earlier packets stand.
fn stop(info: &mut SourceInfo, done: &mut bool, warning: String) {
    info.truncated = true;
    info.warnings.push(warning);
    *done = true;
}

impl PacketSource for FileSource {
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, SourceError> {
        if self.done {
            return Ok(None);
        }
        match &mut self.kind {
            Kind::Classic { reader, checked } => {
                let link = reader.header().link;
                check_link(checked, link, &mut self.info, &mut self.done, &self.path)?;
                match reader.next() {
                    classic::Event::Record(record) => {
                        self.index += 1;
                        Ok(Some(RawPacket {
                            index: self.index,
                            ts: record.ts,
                            link,
                            orig_len: record.orig_len,
                            data: reader.data(&record),
                        }))
                    }
                    classic::Event::End => {
                        self.done = true;
                        Ok(None)
                    }
                    classic::Event::CutShort(at) => {
                        let warning = truncated_message(&self.label, at);
                        stop(&mut self.info, &mut self.done, warning);
                        Ok(None)
                    }
                    classic::Event::TooLarge(at) => {
                        let warning = too_large_message(&self.label, at);
                        stop(&mut self.info, &mut self.done, warning);
                        Ok(None)
                    }
                    classic::Event::Failed(source) => {
                        self.done = true;
                        Err(SourceError::Read {
                            path: self.path.clone(),
                            source,
                        })
                    }
                }
            }
            Kind::Pcapng(blocks) => match blocks.next(&mut self.info, &self.path, &self.label) {
                pcapng::Event::Packet(packet) => {
                    self.index += 1;
                    Ok(Some(RawPacket {
                        index: self.index,
                        ts: packet.ts,
                        link: packet.link,
                        orig_len: packet.orig_len,
                        data: blocks.data(&packet),
                    }))
                }
                pcapng::Event::End => {
                    self.done = true;
                    Ok(None)
                }
                pcapng::Event::Stop(warning) => {
                    stop(&mut self.info, &mut self.done, warning);
                    Ok(None)
                }
                pcapng::Event::Failed(e) => {
                    self.done = true;
                    Err(e)
                }
            },
        }
    }

    fn piped(&self) -> bool {
        self.piped
    }

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    /// Classic records are read straight into the batch (`classic::direct`)
    /// or, from a mapped file, left in the window the batch then shares
    /// (`classic::mapped`); the end, a cut or over-large record are then
    /// found by `next_packet`, exactly as without batches. pcapng packets
    /// from a mapped file are left in their window too
    /// (`fill_mapped_pcapng`), others are copied.
    fn fill(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
    ) -> Result<bool, SourceError> {
        let full = batch.data.len() >= bytes || batch.frames.len() >= frames;
        if let Kind::Classic { reader, checked } = &mut self.kind {
            if self.done || full {
                return copy_packets(self, batch, bytes, frames);
            }
            let link = reader.header().link;
            check_link(checked, link, &mut self.info, &mut self.done, &self.path)?;
            let (added, outcome) = reader.fill_batch(batch, bytes, frames, link);
            self.index += added;
            match outcome {
                classic::Outcome::Full => return Ok(true),
                classic::Outcome::Ask => {}
                classic::Outcome::Failed(source) => {
                    self.done = true;
                    return Err(SourceError::Read {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
        if matches!(&self.kind, Kind::Pcapng(blocks) if blocks.window().is_some()) {
            return self.fill_mapped_pcapng(batch, bytes, frames);
        }
        copy_packets(self, batch, bytes, frames)
    }

    fn progress(&self) -> (u64, Option<u64>) {
        (self.read.load(Ordering::Relaxed), self.size)
    }

    fn split(&mut self, piece: usize) -> Option<Split> {
        if self.done {
            return None;
        }
        let (file, first, format) = match &mut self.kind {
            Kind::Classic {
                reader: Records::Mapped(reader),
                checked,
            } => {
                let header = reader.header();
                if !header.link.is_supported() {
                    // The reader reports it.
                    return None;
                }
                let (info, done) = (&mut self.info, &mut self.done);
                check_link(checked, header.link, info, done, &self.path).ok()?;
                let (file, first) = reader.split_from()?;
                (file, first, Format::Classic(header))
            }
            Kind::Pcapng(blocks) if blocks.window().is_some() => {
                let (file, first, section) = blocks.split_point(&mut self.info, &self.label)?;
                (file, first, Format::Pcapng(section))
            }
            _ => return None,
        };
        let read = Arc::clone(&self.read);
        Some(Split::new(file, format, first, piece, read))
    }

    fn resume(&mut self, offset: u64, frames: u64) {
        match &mut self.kind {
            Kind::Classic {
                reader: Records::Mapped(reader),
                ..
            } => reader.resume_at(offset),
            Kind::Pcapng(blocks) => blocks.resume_at(offset),
            Kind::Classic { .. } => {}
        }
        self.index += frames;
    }
}

impl FileSource {
    /// [`PacketSource::fill`] for a mapped pcapng file: the batch shares
    /// the window its packets lie in, and ends before a block that reaches
    /// past it; a packet that still comes from another window (after a
    /// section's or interface's block straddled the end) is copied, with
    /// the batch's frames, as without a map.
    fn fill_mapped_pcapng(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
    ) -> Result<bool, SourceError> {
        let mut taken = batch.data.len();
        let mut added = 0;
        while taken < bytes && batch.frames.len() < frames {
            // The batch ends with the window, once it holds a frame of
            // this call (as the classic reader's).
            let fits = matches!(&self.kind, Kind::Pcapng(blocks) if blocks.next_fits());
            if added > 0 && !fits {
                return Ok(true);
            }
            let Some(raw) = self.next_packet()? else {
                return Ok(false);
            };
            let (ts, link, orig_len) = (raw.ts, raw.link, raw.orig_len);
            let (at, len) = (raw.data.as_ptr() as usize, raw.data.len());
            let Kind::Pcapng(blocks) = &self.kind else {
                return Ok(true);
            };
            let Some(window) = blocks.window().cloned() else {
                return Ok(true);
            };
            let start = at.wrapping_sub(window.bytes().as_ptr() as usize);
            let data = window
                .bytes()
                .get(start..start.wrapping_add(len))
                .unwrap_or_default();
            let frame = super::Frame {
                ts,
                link,
                window: 0,
                orig_len,
                start,
                end: start + data.len(),
            };
            taken += data.len();
            added += 1;
            if batch.share(&window) {
                batch.frames.push(frame);
            } else {
                batch.push(&RawPacket {
                    index: self.index,
                    ts,
                    link,
                    orig_len,
                    data,
                });
            }
        }
        Ok(true)
    }
}

pub(super) fn truncated_message(path: &str, at: u64) -> String {
    format!("{path}: the capture is cut short at byte {at} (the last record is incomplete); everything before it is reported")
}

pub(super) fn too_large_message(path: &str, at: u64) -> String {
    format!(
        "{path}: a block at byte {at} is larger than {} MiB; stopped reading there",
        MAX_BLOCK >> 20
    )
}

#[cfg(test)]
mod tests;
