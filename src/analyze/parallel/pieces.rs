//! `--threads` on a memory-mapped capture: its pieces ([`Split`]) are
//! walked by any thread — the workers a few pieces ahead, the calling
//! thread when the next one is not being walked yet — and whoever walks a
//! piece also lists its frames per shard, so neither the walk nor
//! `shard_hash` is left to one thread. A worker starts a piece where the
//! piece before it ended when that one has been walked (usually by itself,
//! just before), and guesses its first record only when not. The calling
//! thread takes the pieces in order, keeps each only if it starts where the
//! one before ended (walking it again from there if not), numbers the
//! frames and notes the clock, and hands them to the shards as batches.
//!
//! Does not read anything but whole records inside pieces: the end of the
//! file, a cut or over-large record is read (and reported) by the source,
//! which reads on from where the pieces stopped.

use std::collections::BTreeMap;

use super::{shard_of, Batch, Reader, Shared};
use crate::analyze::RecordSink;
use crate::decode::whole_shard_hash;
use crate::error::Error;
use crate::source::{PacketSource, Split};

/// Pieces walked (or being walked) ahead of the one taken next, at most.
const AHEAD: u64 = 4;

/// Which pieces are walked, being walked, and taken.
#[derive(Default)]
pub(super) struct Pieces {
    /// The next piece no thread has started to walk.
    claimed: u64,
    /// The next piece the calling thread takes.
    taken: u64,
    /// The calling thread takes no more pieces.
    stopped: bool,
    /// Pieces walked and not taken yet.
    walked: BTreeMap<u64, Walked>,
    /// The last piece taken as walked by a worker, and where it ended.
    taken_end: Option<(u64, u64)>,
}

/// A piece walked, its frames listed per shard.
pub(super) struct Walked {
    start: u64,
    end: u64,
    complete: bool,
    pub(super) batch: Batch,
    /// Some frames may be IP fragments (they are in no shard's list): the
    /// calling thread lists the batch again, through the defragmenter.
    fragments: bool,
}

impl Pieces {
    /// The next piece for a worker to walk, unless all are, or it would be
    /// more than [`AHEAD`] pieces ahead; and where it starts, if the piece
    /// before it has been walked to its end (its first record need not be
    /// guessed then).
    pub(super) fn claim(&mut self, split: &Split) -> Option<(u64, Option<u64>)> {
        if self.stopped || self.claimed >= split.pieces() || self.claimed >= self.taken + AHEAD {
            return None;
        }
        let k = self.claimed;
        self.claimed += 1;
        let Some(before) = k.checked_sub(1) else {
            return Some((k, None));
        };
        let start = match self.walked.get(&before) {
            Some(walked) => walked.complete.then_some(walked.end),
            None => self.taken_end.filter(|t| t.0 == before).map(|t| t.1),
        };
        Some((k, start.map(|end| split.next_start(before, end))))
    }
}

impl Shared {
    /// Walks piece `k` (from `start` if known) into `batch` (a spare one,
    /// emptied) and lists its frames per shard.
    fn walk(&self, split: &Split, k: u64, start: Option<u64>, mut batch: Batch) -> Walked {
        let shards = self.cells.len();
        batch.clear(shards);
        let mut fragments = false;
        let by_shard = &mut batch.by_shard;
        let piece = split.walk(k, start, &mut batch.frames, |i, raw| {
            let Ok(i) = u32::try_from(i) else {
                return;
            };
            let Some(hash) = whole_shard_hash(raw, &self.udp) else {
                fragments = true;
                return;
            };
            let shard = shard_of(hash, shards);
            if let Some(mine) = by_shard.get_mut(shard) {
                mine.push(i);
            }
        });
        Walked {
            start: piece.start,
            end: piece.end,
            complete: piece.complete,
            batch,
            fragments,
        }
    }

    /// A worker walks piece `k` (from `start` if known) into `batch` and
    /// leaves it for the calling thread.
    pub(super) fn walked(
        &self,
        split: &Split,
        (k, start): (u64, Option<u64>),
        batch: Batch,
    ) -> Result<(), Error> {
        let walked = self.walk(split, k, start, batch);
        let mut queue = self.queue()?;
        if !queue.pieces.stopped {
            queue.pieces.walked.insert(k, walked);
        }
        queue.generation += 1;
        drop(queue);
        self.more.notify_all();
        Ok(())
    }
}

impl Reader<'_> {
    /// Takes the pieces of `split` in order and sends them to the shards
    /// as batches; then `source` reads on from where they stopped.
    pub(super) fn read_pieces(
        &mut self,
        split: &Split,
        source: &mut dyn PacketSource,
        sink: &mut dyn RecordSink,
        progress: &mut dyn FnMut(&crate::Reading),
    ) -> Result<(), Error> {
        let mut at = split.first();
        let mut frames = 0u64;
        for k in 0..split.pieces() {
            let mut walked = self.take(split, k, at, sink)?;
            if walked.start != at {
                // A wrong guess: the piece starts where the last one ended.
                walked = self.shared.walk(split, k, Some(at), walked.batch);
            }
            split.taken(walked.end);
            at = if walked.complete {
                split.next_start(k, walked.end)
            } else {
                walked.end
            };
            frames += walked.batch.frames.frames.len() as u64;
            let mut batch = walked.batch;
            self.note(&mut batch, source, progress);
            if walked.fragments {
                self.sort(&mut batch);
            }
            self.send(batch, sink)?;
            if !walked.complete {
                break;
            }
        }
        let mut queue = self.shared.queue()?;
        queue.pieces.stopped = true;
        queue.pieces.walked.clear();
        drop(queue);
        source.resume(at, frames);
        Ok(())
    }

    /// Piece `k`, walked by a worker, or here (from `at`) if no worker has
    /// started it; while a worker walks it, gathers or waits.
    fn take(
        &mut self,
        split: &Split,
        k: u64,
        at: u64,
        sink: &mut dyn RecordSink,
    ) -> Result<Walked, Error> {
        loop {
            let mut queue = self.shared.queue()?;
            if queue.closed {
                // A worker stopped while walking.
                return Err(super::worker_lost());
            }
            if let Some(walked) = queue.pieces.walked.remove(&k) {
                queue.pieces.taken = k + 1;
                if walked.complete && walked.start == at {
                    queue.pieces.taken_end = Some((k, walked.end));
                }
                return Ok(walked);
            }
            if queue.pieces.claimed <= k {
                queue.pieces.claimed = k + 1;
                queue.pieces.taken = k + 1;
                let batch = queue.spare.pop().unwrap_or_default();
                drop(queue);
                return Ok(self.shared.walk(split, k, Some(at), batch));
            }
            if !queue.batches.is_empty() {
                drop(queue);
                self.gather_one(sink)?;
                continue;
            }
            let generation = queue.generation;
            let waited = self
                .shared
                .more
                .wait_while(queue, |q| q.generation == generation && !q.closed);
            if waited.is_err() {
                return Err(super::worker_lost());
            }
        }
    }
}
