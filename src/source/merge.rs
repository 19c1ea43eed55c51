//! Several sources read as one capture, packets interleaved by timestamp
//! (`--merge`). Keeps one packet of look-ahead per input, so memory stays
//! bounded by the number of inputs. Memory-mapped files whose times follow
//! each other (a capture rotated by `tcpdump -C` or `-G`) are handed to
//! `--threads` as one [`Split`], file after file, each read only while its
//! packets come before the next file's first; from a packet that does not,
//! the merge below takes over.
//!
//! Does not read files itself; it wraps other [`PacketSource`]s.

use super::{LinkType, PacketSource, RawPacket, SourceInfo, Split};
use crate::error::SourceError;
use crate::time::Timestamp;

/// An owned copy of a packet waiting for its turn.
#[derive(Default)]
struct Pending {
    ts: Timestamp,
    link: Option<LinkType>,
    orig_len: u32,
    data: Vec<u8>,
}

/// K-way merge of sources by timestamp; ties go to the earlier input.
pub struct MergedSource<S> {
    inputs: Vec<S>,
    heads: Vec<Option<Pending>>,
    finished: Vec<bool>,
    current: Pending,
    /// A buffer the last packet returned no longer needs, for the next head.
    spare: Vec<u8>,
    index: u64,
    info: SourceInfo,
    /// The inputs in the order a [`Split`] of them chains them, with
    /// where their records begin and end.
    chained: Vec<(usize, u64, u64)>,
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
            heads: (0..n).map(|_| None).collect(),
            finished: vec![false; n],
            current: Pending::default(),
            spare: Vec::new(),
            index: 0,
            chained: Vec::new(),
            info: SourceInfo {
                name,
                format: "merged".into(),
                ..SourceInfo::default()
            },
        }
    }

    fn fill_heads(&mut self) -> Result<(), SourceError> {
        for (i, input) in self.inputs.iter_mut().enumerate() {
            let (Some(head), Some(finished)) = (self.heads.get_mut(i), self.finished.get_mut(i))
            else {
                continue;
            };
            if head.is_some() || *finished {
                continue;
            }
            match input.next_packet()? {
                Some(p) => {
                    let mut data = std::mem::take(&mut self.spare);
                    data.clear();
                    data.extend_from_slice(p.data);
                    *head = Some(Pending {
                        ts: p.ts,
                        link: Some(p.link),
                        orig_len: p.orig_len,
                        data,
                    });
                }
                None => *finished = true,
            }
        }
        Ok(())
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

impl<S: PacketSource> PacketSource for MergedSource<S> {
    fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, SourceError> {
        self.fill_heads()?;
        let earliest = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|p| (p.ts, i)))
            .min();
        let Some((_, i)) = earliest else {
            self.refresh_info();
            return Ok(None);
        };
        let Some(next) = self.heads.get_mut(i).and_then(Option::take) else {
            return Ok(None);
        };
        self.spare = std::mem::replace(&mut self.current, next).data;
        self.index += 1;
        Ok(Some(RawPacket {
            index: self.index,
            ts: self.current.ts,
            link: self.current.link.unwrap_or(LinkType::ETHERNET),
            orig_len: self.current.orig_len,
            data: &self.current.data,
        }))
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
        if self.index > 0 || self.heads.iter().any(Option::is_some) || self.finished.contains(&true)
        {
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
