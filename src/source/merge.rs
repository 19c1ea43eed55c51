//! Several sources read as one capture, packets interleaved by timestamp
//! (`--merge`). Each input is read a few dozen frames ahead into a batch
//! of its own — frames left where they lie in a memory-mapped file, so
//! packets are handed out without a copy — and memory stays bounded by the
//! number of inputs. Memory-mapped files whose times follow
//! each other (a capture rotated by `tcpdump -C` or `-G`) are handed to
//! `--threads` as one [`Split`], file after file, each read only while its
//! packets come before the next file's first; from a packet that does not,
//! the merge below takes over. A few files whose times overlap (captures of
//! several interfaces at once) are handed over side by side instead, for
//! `--threads` to interleave their pieces; where those stop, the merge
//! takes over from each file's next packet.
//!
//! Does not read files itself; it wraps other [`PacketSource`]s.

use super::{FrameBatch, PacketSource, RawPacket, SourceInfo, Split};
use crate::error::SourceError;
use crate::time::Timestamp;

/// Files merged side by side on several threads, at most: each keeps
/// pieces walked ahead and map windows of its own.
const SIDE_BY_SIDE: usize = 8;

/// Frames an input is read ahead, at most…
const AHEAD_FRAMES: usize = 64;
/// …and bytes, when they are copied (an input not memory-mapped).
const AHEAD_BYTES: usize = 64 << 10;

/// An input's frames read ahead and not yet taken.
#[derive(Default)]
struct Ahead {
    batch: FrameBatch,
    /// The next frame to take.
    next: usize,
    /// The input has nothing more to read…
    finished: bool,
    /// …because reading it failed after the frames ahead: the error comes
    /// when they have been taken, where reading one packet at a time meets
    /// it.
    failed: Option<SourceError>,
}

impl Ahead {
    /// The timestamp of the next frame, if one is read ahead.
    fn head(&self) -> Option<Timestamp> {
        self.batch.frames.get(self.next).map(|f| f.ts)
    }
}

/// K-way merge of sources by timestamp; ties go to the earlier input.
pub struct MergedSource<S> {
    inputs: Vec<S>,
    ahead: Vec<Ahead>,
    index: u64,
    info: SourceInfo,
    /// The inputs in the order a [`Split`] of them chains them, with
    /// where their records begin and end.
    chained: Vec<(usize, u64, u64)>,
    /// The inputs were split side by side, in the order given.
    side_by_side: bool,
}

impl<S: PacketSource> MergedSource<S> {
    pub fn new(inputs: Vec<S>) -> MergedSource<S> {
        let n = inputs.len();
        let name = inputs
            .iter()
            .map(|s| s.info().name.clone())
            .collect::<Vec<_>>()
            .join(" + ");
        MergedSource {
            inputs,
            ahead: (0..n).map(|_| Ahead::default()).collect(),
            index: 0,
            chained: Vec::new(),
            side_by_side: false,
            info: SourceInfo {
                name,
                format: "merged".into(),
                ..SourceInfo::default()
            },
        }
    }

    /// Reads ahead every input that has no frame ahead and more to read;
    /// an input's error comes once its frames read before it are taken.
    fn read_ahead(&mut self) -> Result<(), SourceError> {
        for (input, ahead) in self.inputs.iter_mut().zip(&mut self.ahead) {
            if ahead.head().is_some() {
                continue;
            }
            // Every frame taken: the batch lets go of its window.
            ahead.batch.clear();
            ahead.next = 0;
            if let Some(e) = ahead.failed.take() {
                ahead.finished = true;
                return Err(e);
            }
            if ahead.finished {
                continue;
            }
            match input.fill(&mut ahead.batch, AHEAD_BYTES, AHEAD_FRAMES) {
                Ok(more) => ahead.finished = !more,
                Err(e) if ahead.batch.frames.is_empty() => {
                    ahead.finished = true;
                    return Err(e);
                }
                Err(e) => ahead.failed = Some(e),
            }
        }
        Ok(())
    }

    /// The earliest next frame read ahead, but for input `but`'s: its
    /// timestamp and input (ties: the earlier input).
    fn first_head(&self, but: Option<usize>) -> Option<(Timestamp, usize)> {
        self.ahead
            .iter()
            .enumerate()
            .filter(|&(j, _)| Some(j) != but)
            .filter_map(|(j, a)| a.head().map(|ts| (ts, j)))
            .min()
    }

    /// The input whose next frame comes first (ties: the earlier input),
    /// with every input read ahead; `None` when all are done.
    fn earliest(&mut self) -> Result<Option<usize>, SourceError> {
        if let Err(e) = self.read_ahead() {
            // What the inputs found before it still counts.
            self.refresh_info();
            return Err(e);
        }
        let earliest = self.first_head(None);
        if earliest.is_none() {
            self.refresh_info();
        }
        Ok(earliest.map(|(_, i)| i))
    }

    /// `splits` side by side, in the order the files were given.
    fn side_by_side(&mut self, mut splits: Vec<(Timestamp, usize, Split)>) -> Option<Split> {
        splits.sort_by_key(|(_, i, _)| *i);
        let firsts: Vec<_> = splits.iter().map(|(_, i, s)| (*i, s.first())).collect();
        let split = Split::side_by_side(splits.into_iter().map(|s| s.2).collect());
        match split {
            Some(_) => self.side_by_side = true,
            None => self.unsplit(firsts),
        }
        split
    }

    /// The inputs split for a chain that will not be: each reads on from
    /// its first record, as if never split.
    fn unsplit(&mut self, split: impl IntoIterator<Item = (usize, u64)>) {
        for (i, first) in split {
            if let Some(input) = self.inputs.get_mut(i) {
                input.resume(first, 0);
            }
        }
    }

    fn refresh_info(&mut self) {
        let mut warnings = Vec::new();
        let mut truncated = false;
        let mut unknown = 0;
        for input in &self.inputs {
            let info = input.info();
            warnings.extend(info.warnings.iter().cloned());
            truncated |= info.truncated;
            unknown += info.packets_unknown_interface;
        }
        self.info.warnings = warnings;
        self.info.truncated = truncated;
        self.info.packets_unknown_interface = unknown;
    }
}

/// Whether `splits` (in time order of their first packets) are a few
/// files that overlap in time: a file's last packet (as far as a guess at
/// its last piece finds it) would not come before the next file's first,
/// so a chain of them would stop there.
fn overlap(splits: &[(Timestamp, usize, Split)]) -> bool {
    (2..=SIDE_BY_SIDE).contains(&splits.len())
        && splits.windows(2).any(|pair| match pair {
            [(_, i, split), (next, j, _)] => split
                .last_ts()
                .is_some_and(|last| last > *next || (last == *next && i > j)),
            _ => false,
        })
}

impl<S: PacketSource> PacketSource for MergedSource<S> {
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, SourceError> {
        let Some(i) = self.earliest()? else {
            return Ok(None);
        };
        let Some(ahead) = self.ahead.get_mut(i) else {
            return Ok(None);
        };
        let Some(&frame) = ahead.batch.frames.get(ahead.next) else {
            return Ok(None);
        };
        ahead.next += 1;
        self.index += 1;
        Ok(Some(ahead.batch.packet(&frame, self.index)))
    }

    /// Frames in the merge's order, into `batch`: those of memory-mapped
    /// files left in their windows, which the batch then holds, others
    /// copied (inputs read ahead in batches of their own, not a packet at
    /// a time).
    fn fill(
        &mut self,
        batch: &mut FrameBatch,
        bytes: usize,
        frames: usize,
    ) -> Result<bool, SourceError> {
        // Bytes in the batch, shared or copied.
        let mut taken = batch.data.len();
        while taken < bytes && batch.frames.len() < frames {
            let Some(i) = self.earliest()? else {
                return Ok(false);
            };
            // The input's frames up to the next input's head go in one run.
            let until = self.first_head(Some(i));
            let Some(ahead) = self.ahead.get_mut(i) else {
                return Ok(false);
            };
            while let Some(&frame) = ahead.batch.frames.get(ahead.next) {
                // A frame of input i comes before input j's head when it is
                // earlier, or as early and i < j.
                if until.is_some_and(|(ts, j)| (frame.ts, i) > (ts, j)) {
                    break;
                }
                if taken >= bytes || batch.frames.len() >= frames {
                    return Ok(true);
                }
                if !batch.push_from(&ahead.batch, &frame) {
                    return Ok(true);
                }
                taken += frame.end - frame.start;
                ahead.next += 1;
                self.index += 1;
            }
        }
        Ok(true)
    }

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    /// Every input's records, file after file in order of their first
    /// packets (ties: in the order given), each up to its first packet that
    /// the merge would not take before the next file's first — exactly the
    /// merge's order. `None` unless nothing has been read and every input
    /// is a memory-mapped file with a packet.
    fn split(&mut self, piece: usize) -> Option<Split> {
        if self.index > 0 || self.ahead.iter().any(|a| a.finished || a.head().is_some()) {
            return None;
        }
        let mut splits: Vec<(Timestamp, usize, Split)> = Vec::with_capacity(self.inputs.len());
        for i in 0..self.inputs.len() {
            let Some(split) = self.inputs.get_mut(i).and_then(|input| input.split(piece)) else {
                self.unsplit(splits.iter().map(|(_, i, s)| (*i, s.first())));
                return None;
            };
            let Some(ts) = split.first_ts() else {
                let this = std::iter::once((i, split.first()));
                self.unsplit(splits.iter().map(|(_, i, s)| (*i, s.first())).chain(this));
                return None;
            };
            splits.push((ts, i, split));
        }
        splits.sort_by_key(|(ts, i, _)| (*ts, *i));
        if overlap(&splits) {
            return self.side_by_side(splits);
        }
        // A record of file i comes before the next file j's first packet
        // when it is earlier, or as early and i was given first.
        let untils: Vec<_> = splits
            .iter()
            .skip(1)
            .map(|(ts, j, _)| (*ts, *j))
            .map(Some)
            .chain(std::iter::once(None))
            .collect();
        let order: Vec<_> = splits
            .iter()
            .map(|(_, i, s)| (*i, s.first(), s.end()))
            .collect();
        let chain = splits
            .into_iter()
            .zip(untils)
            .map(|((_, i, split), next)| (split, next.map(|(ts, j)| (ts, i < j))))
            .collect();
        let split = Split::chain(chain);
        match split {
            Some(_) => self.chained = order,
            None => self.unsplit(order.iter().map(|&(i, first, _)| (i, first))),
        }
        split
    }

    /// Reads on after a split side by side: each file from its own record.
    fn resume_parts(&mut self, offsets: &[u64], frames: u64) {
        if !self.side_by_side {
            if let [offset] = offsets {
                self.resume(*offset, frames);
            }
            return;
        }
        for &offset in offsets {
            let (i, at) = Split::locate(offset);
            if let Some(input) = self.inputs.get_mut(i) {
                input.resume(at, 0);
            }
        }
        self.index += frames;
    }

    /// Reads on after a chained [`Split`]: the files before the one it
    /// stopped in read on from their end (finding nothing more, as a file
    /// read whole does), that one from `offset`, the files after it from
    /// their start.
    fn resume(&mut self, offset: u64, frames: u64) {
        let (stopped, at) = Split::locate(offset);
        for (n, &(i, first, end)) in self.chained.iter().enumerate() {
            if let Some(input) = self.inputs.get_mut(i) {
                input.resume(
                    match n.cmp(&stopped) {
                        std::cmp::Ordering::Less => end,
                        std::cmp::Ordering::Equal => at,
                        std::cmp::Ordering::Greater => first,
                    },
                    0,
                );
            }
        }
        self.index += frames;
    }

    fn progress(&self) -> (u64, Option<u64>) {
        self.inputs
            .iter()
            .fold((0, Some(0)), |(read, total), input| {
                let (r, t) = input.progress();
                (read + r, total.zip(t).map(|(a, b)| a + b))
            })
    }
}
