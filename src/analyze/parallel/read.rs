//! The calling thread's reading for `--threads`: batches filled from the
//! source (or taken from `pieces`), each frame numbered, its clock noted
//! and its shard listed — IP fragments through the defragmenter, in order
//! — and handed to the shards, gathering the oldest when too many are in
//! flight.
//!
//! Does not analyse frames or order events; that is the shards and
//! `gather_one`.

use std::sync::Arc;

use super::{shard_of, Batch, Reader, BATCH_BYTES, BATCH_FRAMES, DEPTH};
use crate::analyze::RecordSink;
use crate::analyze::PROGRESS_EVERY;
use crate::decode::defrag::Verdict;
use crate::decode::{shard_hash, whole_shard_hash};
use crate::error::Error;
use crate::source::PacketSource;

impl Reader<'_> {
    pub(super) fn read_all(
        &mut self,
        source: &mut dyn PacketSource,
        sink: &mut dyn RecordSink,
        progress: &mut dyn FnMut(&crate::Reading),
    ) -> Result<(), Error> {
        match &self.shared.split {
            Some(split) if split.is_side_by_side() => {
                self.read_side_by_side(split, source, sink, progress)?;
            }
            Some(split) => self.read_pieces(split, source, sink, progress)?,
            None => {}
        }
        let mut failed = None;
        loop {
            let mut batch = self.shared.queue()?.spare.pop().unwrap_or_default();
            // A read error ends the input after the frames read before it,
            // which are analysed first, as on one thread.
            let more = match self.fill(&mut batch, source, progress) {
                Ok(more) => more,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            };
            self.send(batch, sink)?;
            if !more {
                break;
            }
        }
        while !self.shared.queue()?.batches.is_empty() {
            self.gather_one(sink)?;
        }
        failed.map_or(Ok(()), Err)
    }

    /// Hands a batch to the shards, and gathers the oldest when too many
    /// are in flight.
    pub(super) fn send(&mut self, batch: Batch, sink: &mut dyn RecordSink) -> Result<(), Error> {
        if batch.frames.frames.is_empty() {
            return Ok(());
        }
        let in_flight = {
            let mut queue = self.shared.queue()?;
            queue.batches.push_back(Arc::new(batch));
            queue.generation += 1;
            queue.batches.len()
        };
        self.shared.more.notify_all();
        if in_flight > DEPTH {
            self.gather_one(sink)?;
        }
        Ok(())
    }

    /// Reads frames into `batch` until it is full, notes each one's clock
    /// and shard; false at the end of input.
    pub(super) fn fill(
        &mut self,
        batch: &mut Batch,
        source: &mut dyn PacketSource,
        progress: &mut dyn FnMut(&crate::Reading),
    ) -> Result<bool, Error> {
        batch.clear(self.shared.cells.len());
        let filled = source.fill(&mut batch.frames, BATCH_BYTES, BATCH_FRAMES);
        self.note(batch, source, progress);
        self.sort(batch);
        Ok(filled?)
    }

    /// Numbers a batch's frames and notes the capture-wide clock after each.
    pub(super) fn note(
        &mut self,
        batch: &mut Batch,
        source: &dyn PacketSource,
        progress: &mut dyn FnMut(&crate::Reading),
    ) {
        batch.base = self.gather.seen() + 1;
        let before = self.gather.seen();
        batch.nows.clear();
        for frame in &batch.frames.frames {
            let (_, now) = self.gather.saw_packet(&batch.frames.packet(frame, 0));
            batch.nows.push(now);
        }
        batch.origin = self.gather.summary.origin;
        if self.gather.seen() / PROGRESS_EVERY != before / PROGRESS_EVERY {
            progress(&self.gather.reading(source));
        }
    }

    /// Lists each shard's frames of a batch, IP fragments through the
    /// defragmenter, in order.
    pub(super) fn sort(&mut self, batch: &mut Batch) {
        let shards = self.shared.cells.len();
        let udp = &self.shared.udp;
        for frames in &mut batch.by_shard {
            frames.clear();
        }
        batch.whole.clear();
        for (i, frame) in batch.frames.frames.iter().enumerate() {
            let raw = batch.frames.packet(frame, 0);
            let Ok(i) = u32::try_from(i) else {
                continue;
            };
            let hash = match whole_shard_hash(&raw, udp) {
                Some(hash) => hash,
                None => match self.defrag.push(&raw) {
                    Verdict::Pass => shard_hash(&raw, udp),
                    // A fragment held: no shard analyses it.
                    Verdict::Held => continue,
                    Verdict::Whole(datagram) => {
                        batch.whole.push((i, datagram.data.to_vec()));
                        shard_hash(&datagram, udp)
                    }
                },
            };
            if let Some(mine) = batch.by_shard.get_mut(shard_of(hash, shards)) {
                mine.push(i);
            }
        }
    }
}
