//! Packet sources: turn a capture file (or, with the `live` feature, an
//! interface) into a stream of [`RawPacket`]s with exact timestamps and link
//! types. Regular files are memory-mapped a window at a time (`mapped`);
//! batches of frames for `--threads` share the window or own a buffer.
//!
//! Does not decode any header above the capture format; that is `decode`.

mod classic;
pub mod file;
#[cfg(feature = "live")]
pub mod live;
mod mapped;
pub mod merge;
mod pcapng;
mod pipe;
mod split;

use std::sync::Arc;

use crate::error::SourceError;
use crate::time::Timestamp;
pub use mapped::prefetch;
use mapped::Window;
pub use split::{Lane, Piece, Split, PIECE};

/// A link-layer header type as numbered by tcpdump.org's LINKTYPE_ registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkType(pub u32);

impl LinkType {
    pub const NULL: LinkType = LinkType(0);
    pub const ETHERNET: LinkType = LinkType(1);
    /// PPP, with or without the HDLC address and control bytes.
    pub const PPP: LinkType = LinkType(9);
    /// DLT_RAW on most BSDs and Linux when written as a DLT value.
    pub const RAW_12: LinkType = LinkType(12);
    /// DLT_RAW on OpenBSD when written as a DLT value.
    pub const RAW_14: LinkType = LinkType(14);
    pub const RAW: LinkType = LinkType(101);
    pub const LOOP: LinkType = LinkType(108);
    pub const LINUX_SLL: LinkType = LinkType(113);
    pub const IPV4: LinkType = LinkType(228);
    pub const IPV6: LinkType = LinkType(229);
    pub const NFLOG: LinkType = LinkType(239);
    pub const LINUX_SLL2: LinkType = LinkType(276);

    /// A short name for messages, or `LINKTYPE_<n>` for unknown numbers.
    pub fn name(self) -> String {
        let known = match self {
            LinkType::NULL => "NULL (BSD loopback)",
            LinkType::ETHERNET => "ETHERNET",
            LinkType::PPP => "PPP",
            LinkType::NFLOG => "NFLOG (Linux netfilter log)",
            LinkType::RAW_12 | LinkType::RAW_14 | LinkType::RAW => "RAW (IP)",
            LinkType::LOOP => "LOOP (OpenBSD loopback)",
            LinkType::LINUX_SLL => "LINUX_SLL",
            LinkType::IPV4 => "IPV4",
            LinkType::IPV6 => "IPV6",
            LinkType::LINUX_SLL2 => "LINUX_SLL2",
            _ => return format!("LINKTYPE_{}", self.0),
        };
        known.to_string()
    }

    /// Whether `decode` understands this link type.
    pub fn is_supported(self) -> bool {
        matches!(
            self,
            LinkType::NULL
                | LinkType::ETHERNET
                | LinkType::PPP
                | LinkType::NFLOG
                | LinkType::RAW_12
                | LinkType::RAW_14
                | LinkType::RAW
                | LinkType::LOOP
                | LinkType::LINUX_SLL
                | LinkType::IPV4
                | LinkType::IPV6
                | LinkType::LINUX_SLL2
        )
    }
}

/// One captured frame, borrowed from the source's buffer until the next call.
#[derive(Clone, Copy, Debug)]
pub struct RawPacket<'a> {
    /// 1-based position in the capture, like tshark's `frame.number`.
    pub index: u64,
    pub ts: Timestamp,
    pub link: LinkType,
    /// Length of the frame on the wire (may exceed `data.len()` when cut by snaplen).
    pub orig_len: u32,
    pub data: &'a [u8],
}

/// One frame of a [`FrameBatch`]: where its bytes are in the batch's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub ts: Timestamp,
    pub link: LinkType,
    /// 0: the batch's own bytes (its buffer, or the window it shares);
    /// `k`: the `k`th of the other windows it holds (files merged).
    pub window: u8,
    pub orig_len: u32,
    pub start: usize,
    pub end: usize,
}

/// Whole frames in one owned buffer, or in one shared window of a mapped
/// file, so a batch of them can be handed to other threads (`--threads`);
/// frames of files merged with `--merge` may lie in other windows too.
#[derive(Clone, Debug, Default)]
pub struct FrameBatch {
    pub data: Vec<u8>,
    pub frames: Vec<Frame>,
    /// When set, the frames of window 0 lie in this window, not in `data`.
    mapped: Option<Arc<Window>>,
    /// The windows of frames from other files, 1 to 255 ([`Frame::window`]).
    others: Vec<Arc<Window>>,
}

impl FrameBatch {
    pub fn clear(&mut self) {
        self.data.clear();
        self.frames.clear();
        self.mapped = None;
        self.others.clear();
    }

    /// Adds `frame` of `from` (another batch, of another input) without
    /// copying its bytes if `from` shares a window: this batch then holds
    /// that window too. False if it holds as many windows as it can (the
    /// batch is full).
    pub fn push_from(&mut self, from: &FrameBatch, frame: &Frame) -> bool {
        let window = match (&from.mapped, frame.window) {
            (Some(window), 0) => Some(window),
            (None, 0) => None,
            (_, k) => from.others.get(usize::from(k) - 1),
        };
        let Some(window) = window else {
            self.push(&from.packet(frame, 0));
            return true;
        };
        let k = match self.others.iter().position(|w| Arc::ptr_eq(w, window)) {
            Some(k) => k,
            None if self.others.len() < usize::from(u8::MAX) => {
                self.others.push(Arc::clone(window));
                self.others.len() - 1
            }
            None => return false,
        };
        self.frames.push(Frame {
            window: u8::try_from(k + 1).unwrap_or(u8::MAX),
            ..*frame
        });
        true
    }

    /// Makes the batch's frames lie in `window`: true if it holds no
    /// frames yet or already shares that window.
    fn share(&mut self, window: &Arc<Window>) -> bool {
        match &self.mapped {
            Some(w) => Arc::ptr_eq(w, window),
            None if self.frames.is_empty() && self.others.is_empty() => {
                self.mapped = Some(Arc::clone(window));
                true
            }
            None => false,
        }
    }

    /// Whether the frames lie in a mapped window rather than in `data`.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Copies one packet in.
    pub fn push(&mut self, raw: &RawPacket<'_>) {
        if let Some(window) = self.mapped.take() {
            // Frames in the batch's window and frames in `data` do not
            // mix: copy.
            for frame in self.frames.iter_mut().filter(|f| f.window == 0) {
                let start = self.data.len();
                let bytes = window.bytes().get(frame.start..frame.end);
                self.data.extend_from_slice(bytes.unwrap_or_default());
                (frame.start, frame.end) = (start, self.data.len());
            }
        }
        let start = self.data.len();
        self.data.extend_from_slice(raw.data);
        self.frames.push(Frame {
            ts: raw.ts,
            link: raw.link,
            window: 0,
            orig_len: raw.orig_len,
            start,
            end: self.data.len(),
        });
    }

    /// `frame` as the packet at position `index` of the input.
    pub fn packet(&self, frame: &Frame, index: u64) -> RawPacket<'_> {
        RawPacket {
            index,
            ts: frame.ts,
            link: frame.link,
            orig_len: frame.orig_len,
            data: self.bytes(frame),
        }
    }

    /// The frame's bytes (empty if `frame` does not belong to this batch).
    pub fn bytes(&self, frame: &Frame) -> &[u8] {
        let data = match (&self.mapped, frame.window) {
            (Some(window), 0) => window.bytes(),
            (None, 0) => &self.data,
            (_, k) => self
                .others
                .get(usize::from(k) - 1)
                .map_or(&[][..], |w| w.bytes()),
        };
        data.get(frame.start..frame.end).unwrap_or_default()
    }
}

/// What a source learned about its input, for the summary.
#[derive(Clone, Debug, Default)]
pub struct SourceInfo {
    /// The file name as given (`-` for standard input), or the interface.
    pub name: String,
    /// `pcap`, `pcapng`, or `live`.
    pub format: String,
    /// `gzip` or `zstd` when the input was compressed.
    pub compression: Option<String>,
    /// Problems that did not stop reading, one line each.
    pub warnings: Vec<String>,
    /// The input ended inside a record, or a corrupt block stopped reading.
    pub truncated: bool,
    /// Packets that referred to an interface the file never described.
    pub packets_unknown_interface: u64,
}

/// A stream of packets. A lending iterator: each packet borrows the source.
pub trait PacketSource {
    /// The next packet, `Ok(None)` at the end. Problems that leave earlier
    /// packets valid (a truncated last record) end the stream and are noted in
    /// [`PacketSource::info`]; only unreadable input is an error.
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, SourceError>;

    /// What the source has learned so far.
    fn info(&self) -> &SourceInfo;

    /// Appends frames to `batch` until it holds about `bytes` bytes or
    /// `frames` frames; `Ok(false)` when the input has ended. The frames are
    /// exactly those [`PacketSource::next_packet`] would have returned, in
    /// order; on an error, the frames read before it are in `batch`. This
    /// copies each packet; a source that can read frames straight into the
    /// batch's buffer overrides it (classic pcap: `batch.data` then also
    /// holds the record headers, which no frame covers).
    fn fill(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
    ) -> Result<bool, SourceError> {
        copy_packets(self, batch, bytes, frames)
    }

    /// Bytes of input read so far and the input's size when known (a
    /// regular file), for a progress display.
    fn progress(&self) -> (u64, Option<u64>) {
        (0, None)
    }

    /// The rest of the input in pieces of about `piece` bytes that several
    /// threads can walk at once, if it is a memory-mapped capture (classic
    /// pcap, or a pcapng section's packet blocks; `None` for anything
    /// else). The source itself reads on only after
    /// [`PacketSource::resume`].
    fn split(&mut self, piece: usize) -> Option<Split> {
        let _ = piece;
        None
    }

    /// Reads on from the record at byte `offset`, after `frames` records
    /// were taken from a [`PacketSource::split`].
    fn resume(&mut self, offset: u64, frames: u64) {
        let _ = (offset, frames);
    }

    /// Reads on after `frames` records were taken from a split of files
    /// side by side: each file from its record at `offsets` (one per
    /// file, as the split numbers them).
    fn resume_parts(&mut self, offsets: &[u64], frames: u64) {
        if let [offset] = offsets {
            self.resume(*offset, frames);
        }
    }

    /// Whether another process writes the input into a pipe as it is read
    /// (and so needs a core of its own).
    fn piped(&self) -> bool {
        false
    }
}

/// [`PacketSource::fill`]'s default way: copies packets from `next_packet`.
pub fn copy_packets<S: PacketSource + ?Sized>(
    source: &mut S,
    batch: &mut FrameBatch,
    bytes: usize,
    frames: usize,
) -> Result<bool, SourceError> {
    while batch.data.len() < bytes && batch.frames.len() < frames {
        let Some(raw) = source.next_packet()? else {
            return Ok(false);
        };
        batch.push(&raw);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::mapped::MappedFile;
    use super::*;
    use std::io::Write;

    /// A mapped window holding `bytes`.
    fn window_of(bytes: &[u8]) -> Arc<Window> {
        let mut f = tempfile::tempfile().expect("temp file");
        f.write_all(bytes).expect("write");
        let mut m = MappedFile::with_window(f, 1 << 20).expect("regular file");
        m.window(0, bytes.len()).expect("map")
    }

    fn frame(start: usize, end: usize) -> Frame {
        Frame {
            ts: Timestamp(start as i64),
            link: LinkType::ETHERNET,
            window: 0,
            orig_len: (end - start) as u32,
            start,
            end,
        }
    }

    /// Frames of batches of several inputs — two mapped, one copied — put
    /// into one batch keep their bytes: the mapped ones by holding their
    /// windows, the others copied; a copied frame does not disturb them.
    #[test]
    fn frames_from_other_batches_keep_their_bytes() {
        let mut a = FrameBatch::default();
        assert!(a.share(&window_of(b"aaaa-AAAA")));
        a.frames.extend([frame(0, 4), frame(5, 9)]);
        let mut b = FrameBatch::default();
        assert!(b.share(&window_of(b"bbbbbb")));
        b.frames.push(frame(1, 5));
        let mut c = FrameBatch::default();
        c.push(&RawPacket {
            index: 1,
            ts: Timestamp(9),
            link: LinkType::ETHERNET,
            orig_len: 3,
            data: b"ccc",
        });
        let mut out = FrameBatch::default();
        for (from, k) in [(&a, 0), (&b, 0), (&c, 0), (&a, 1)] {
            let f = from.frames[k];
            assert!(out.push_from(from, &f));
        }
        let got: Vec<&[u8]> = out.frames.iter().map(|f| out.bytes(f)).collect();
        assert_eq!(got, [&b"aaaa"[..], b"bbbb", b"ccc", b"AAAA"]);
        assert_eq!(out.others.len(), 2);
        assert!(!out.is_mapped());
        // A batch of merged frames can go on to another batch.
        let mut again = FrameBatch::default();
        for f in &out.frames {
            assert!(again.push_from(&out, f));
        }
        let got: Vec<&[u8]> = again.frames.iter().map(|f| again.bytes(f)).collect();
        assert_eq!(got, [&b"aaaa"[..], b"bbbb", b"ccc", b"AAAA"]);
    }

    /// A batch holds at most 255 other windows: the next frame of yet
    /// another is refused (the batch is full), not mislaid.
    #[test]
    fn a_batch_holds_at_most_255_other_windows() {
        let mut out = FrameBatch::default();
        let inputs: Vec<FrameBatch> = (0..256)
            .map(|k| {
                let mut b = FrameBatch::default();
                assert!(b.share(&window_of(format!("{k:04}").as_bytes())));
                b.frames.push(frame(0, 4));
                b
            })
            .collect();
        for (k, from) in inputs.iter().enumerate() {
            assert_eq!(out.push_from(from, &from.frames[0]), k < 255, "{k}");
        }
        assert_eq!(out.frames.len(), 255);
        let last = out.frames[254];
        assert_eq!(out.bytes(&last), b"0254");
    }
}
