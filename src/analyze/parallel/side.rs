//! `--threads` on files merged side by side (`--merge` of captures whose
//! times overlap, [`Split::side_by_side`]): the workers walk each file's
//! pieces as they walk one capture's, noting every frame's record and
//! shard, and the calling thread interleaves the pieces' frames by
//! timestamp — ties to the file given first, as the merge does — into
//! batches for the shards. It reads no record itself, so the files are
//! read at the pieces' speed. Where a file's pieces stop (its end inside
//! a record, a record it cannot simply read) every file reads on from the
//! frame after the last one taken from it, and the merge takes over.
//!
//! Does not walk records (`Split`) nor analyse frames (the shards).

use super::pieces::Walked;
use super::{Batch, Reader, BATCH_BYTES, BATCH_FRAMES};
use crate::analyze::RecordSink;
use crate::error::Error;
use crate::source::{PacketSource, Split};

/// A lane's place: its pieces and the one whose frames it hands out.
struct Cursor {
    /// The next piece to take, and the lane's end.
    next: u64,
    end: u64,
    /// Where the next piece starts (the record after the last walked).
    at: u64,
    /// The piece being taken, and its next frame.
    piece: Option<(Walked, usize)>,
}

impl Cursor {
    /// The timestamp of the lane's next frame, if its piece has one.
    fn head(&self) -> Option<crate::time::Timestamp> {
        let (walked, next) = self.piece.as_ref()?;
        walked.batch.frames.frames.get(*next).map(|f| f.ts)
    }

    /// Where the lane's file reads on: at its next frame's record, or after
    /// its pieces.
    fn position(&self) -> u64 {
        match &self.piece {
            Some((walked, next)) => walked.batch.records.get(*next).map_or(walked.end, |r| r.0),
            None => self.at,
        }
    }
}

impl Reader<'_> {
    /// Takes the pieces of `split`, files side by side, and sends their
    /// frames interleaved by timestamp to the shards as batches; then
    /// `source` reads on from where each file's frames stopped.
    pub(super) fn read_side_by_side(
        &mut self,
        split: &Split,
        source: &mut dyn PacketSource,
        sink: &mut dyn RecordSink,
        progress: &mut dyn FnMut(&crate::Reading),
    ) -> Result<(), Error> {
        let mut lanes: Vec<Cursor> = split
            .lanes()
            .into_iter()
            .map(|lane| Cursor {
                next: lane.first,
                end: lane.end,
                at: lane.start,
                piece: None,
            })
            .collect();
        let shards = self.shared.cells.len();
        let mut batch = self.spare_batch(shards)?;
        let (mut bytes, mut fragments, mut frames) = (0usize, false, 0u64);
        loop {
            if !self.refill(split, &mut lanes, sink)? {
                break;
            }
            let earliest = lanes
                .iter()
                .enumerate()
                .filter_map(|(l, c)| c.head().map(|ts| (ts, l)))
                .min();
            let Some((_, l)) = earliest else {
                break;
            };
            let Some(Cursor {
                piece: Some((walked, next)),
                ..
            }) = lanes.get_mut(l)
            else {
                break;
            };
            let Some(&frame) = walked.batch.frames.frames.get(*next) else {
                break;
            };
            if !batch.frames.push_from(&walked.batch.frames, &frame) {
                // As many files' windows as a batch holds: send it first.
                self.send_interleaved(&mut batch, fragments, source, sink, progress)?;
                (bytes, fragments) = (0, false);
                continue;
            }
            let i = u32::try_from(batch.frames.frames.len() - 1).unwrap_or(u32::MAX);
            let shard = walked.batch.records.get(*next).and_then(|r| r.1);
            match shard.and_then(|s| batch.by_shard.get_mut(s as usize)) {
                Some(mine) => mine.push(i),
                None => fragments = true,
            }
            *next += 1;
            frames += 1;
            bytes += frame.end - frame.start;
            if bytes >= BATCH_BYTES || batch.frames.frames.len() >= BATCH_FRAMES {
                self.send_interleaved(&mut batch, fragments, source, sink, progress)?;
                (bytes, fragments) = (0, false);
            }
        }
        self.send_interleaved(&mut batch, fragments, source, sink, progress)?;
        self.stop_pieces()?;
        let at: Vec<u64> = lanes.iter().map(Cursor::position).collect();
        for (lane, &offset) in lanes.iter_mut().zip(&at) {
            split.taken(offset);
            if let Some((walked, _)) = lane.piece.take() {
                self.shared.recycle(walked.batch)?;
            }
        }
        source.resume_parts(&at, frames);
        Ok(())
    }

    /// Gives every lane whose piece is done the next one with a frame, or
    /// none at its end; false where a piece stopped early (every file
    /// then reads on by itself).
    fn refill(
        &mut self,
        split: &Split,
        lanes: &mut [Cursor],
        sink: &mut dyn RecordSink,
    ) -> Result<bool, Error> {
        for lane in lanes.iter_mut() {
            while lane.head().is_none() {
                if let Some((walked, _)) = lane.piece.take() {
                    if !walked.complete {
                        // Its frames are all taken: the file reads on
                        // from where the piece stopped.
                        lane.piece = Some((walked, usize::MAX));
                        return Ok(false);
                    }
                    lane.at = split.next_start(lane.next - 1, walked.end);
                    split.taken(lane.at);
                    self.shared.recycle(walked.batch)?;
                }
                if lane.next >= lane.end {
                    break;
                }
                let walked = self.take(split, lane.next, lane.at, sink)?;
                lane.next += 1;
                lane.piece = Some((walked, 0));
            }
        }
        Ok(true)
    }

    /// A spare batch, emptied for `shards` shards.
    fn spare_batch(&self, shards: usize) -> Result<Batch, Error> {
        let mut batch = self.shared.queue()?.spare.pop().unwrap_or_default();
        batch.clear(shards);
        Ok(batch)
    }

    /// Numbers the frames interleaved into `batch`, notes the clock, lists
    /// them through the defragmenter if some may be IP fragments, and sends
    /// the batch to the shards, leaving an empty one in its place.
    fn send_interleaved(
        &mut self,
        batch: &mut Batch,
        fragments: bool,
        source: &dyn PacketSource,
        sink: &mut dyn RecordSink,
        progress: &mut dyn FnMut(&crate::Reading),
    ) -> Result<(), Error> {
        if batch.frames.frames.is_empty() {
            return Ok(());
        }
        let shards = self.shared.cells.len();
        let mut full = std::mem::replace(batch, self.spare_batch(shards)?);
        self.note(&mut full, source, progress);
        if fragments {
            self.sort(&mut full);
        }
        self.send(full, sink)
    }
}
