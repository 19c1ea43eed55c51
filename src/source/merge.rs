//! Several sources read as one capture, packets interleaved by timestamp
//! (`--merge`). Keeps one packet of look-ahead per input, so memory stays
//! bounded by the number of inputs.
//!
//! Does not read files itself; it wraps other [`PacketSource`]s.

use super::{LinkType, PacketSource, RawPacket, SourceInfo};
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

    fn progress(&self) -> (u64, Option<u64>) {
        self.inputs
            .iter()
            .fold((0, Some(0)), |(read, total), input| {
                let (r, t) = input.progress();
                (read + r, total.zip(t).map(|(a, b)| a + b))
            })
    }
}
