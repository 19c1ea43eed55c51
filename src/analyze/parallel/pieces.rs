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
use crate::source::{Lane, PacketSource, Split};

/// Pieces walked (or being walked) ahead of those taken next, at most, in
/// all lanes together: with two files side by side, four (two each)
/// measured as fast as eight and held 2 MiB less.
const AHEAD: u64 = 4;

/// Which pieces are walked, being walked, and taken.
#[derive(Default)]
pub(super) struct Pieces {
    /// Where pieces are taken one after another: one lane for a capture or
    /// a chain of files, one per file side by side.
    lanes: Vec<LaneState>,
    /// The calling thread takes no more pieces.
    stopped: bool,
    /// Pieces walked and not taken yet.
    walked: BTreeMap<u64, Walked>,
}

/// A lane's pieces: which are claimed and taken.
struct LaneState {
    lane: Lane,
    /// The next piece no thread has started to walk.
    claimed: u64,
    /// The next piece the calling thread takes.
    taken: u64,
    /// The last piece taken as walked by a worker, and where it ended.
    taken_end: Option<(u64, u64)>,
}

/// A piece walked, its frames listed per shard.
pub(super) struct Walked {
    start: u64,
    pub(super) end: u64,
    pub(super) complete: bool,
    pub(super) batch: Batch,
    /// Some frames may be IP fragments (they are in no shard's list): the
    /// calling thread lists the batch again, through the defragmenter.
    fragments: bool,
}

impl Pieces {
    /// The pieces of `split`, none walked yet.
    pub(super) fn new(split: Option<&Split>) -> Pieces {
        let lane = |lane: Lane| LaneState {
            lane,
            claimed: lane.first,
            taken: lane.first,
            taken_end: None,
        };
        Pieces {
            lanes: split.map_or_else(Vec::new, |s| s.lanes().into_iter().map(lane).collect()),
            ..Pieces::default()
        }
    }

    /// The lane piece `k` is in.
    fn lane_of(&self, k: u64) -> Option<usize> {
        let after = self.lanes.partition_point(|l| l.lane.first <= k);
        after
            .checked_sub(1)
            .filter(|&l| self.lanes.get(l).is_some_and(|s| k < s.lane.end))
    }

    /// The next piece for a worker to walk, in the lane with the fewest
    /// walked ahead, unless all are, or more than [`AHEAD`] would be; and
    /// where it starts, if the piece before it has been walked to its end
    /// (its first record need not be guessed then).
    pub(super) fn claim(&mut self, split: &Split) -> Option<(u64, Option<u64>)> {
        let ahead = |l: &LaneState| l.claimed - l.taken;
        if self.stopped || self.lanes.iter().map(ahead).sum::<u64>() >= AHEAD {
            return None;
        }
        let open = |l: &&mut LaneState| l.claimed < l.lane.end;
        let lane = self
            .lanes
            .iter_mut()
            .filter(open)
            .min_by_key(|l| ahead(l))?;
        let k = lane.claimed;
        lane.claimed += 1;
        if k == lane.lane.first {
            return Some((k, None));
        }
        let before = k - 1;
        let start = match self.walked.get(&before) {
            Some(walked) => walked.complete.then_some(walked.end),
            None => lane.taken_end.filter(|t| t.0 == before).map(|t| t.1),
        };
        Some((k, start.map(|end| split.next_start(before, end))))
    }

    /// Takes piece `k`, to start at `at`: walked, or to be walked by the
    /// calling thread (no worker has claimed it: now it has), or being
    /// walked; `None` if there is no such piece.
    fn take(&mut self, k: u64, at: u64) -> Option<Take> {
        let l = self.lane_of(k)?;
        let lane = self.lanes.get_mut(l)?;
        if let Some(walked) = self.walked.remove(&k) {
            lane.taken = k + 1;
            if walked.complete && walked.start == at {
                lane.taken_end = Some((k, walked.end));
            }
            return Some(Take::Walked(Box::new(walked)));
        }
        if lane.claimed <= k {
            lane.claimed = k + 1;
            lane.taken = k + 1;
            return Some(Take::Here);
        }
        Some(Take::Walking)
    }
}

/// What taking a piece finds ([`Pieces::take`]).
enum Take {
    Walked(Box<Walked>),
    Here,
    Walking,
}

impl Shared {
    /// Walks piece `k` (from `start` if known) into `batch` (a spare one,
    /// emptied) and lists its frames per shard — or, for files side by
    /// side, notes each frame's record and shard ([`Batch::records`]).
    fn walk(&self, split: &Split, k: u64, start: Option<u64>, mut batch: Batch) -> Walked {
        let shards = self.cells.len();
        batch.clear(shards);
        let mut fragments = false;
        let (by_shard, records) = (&mut batch.by_shard, &mut batch.records);
        let side_by_side = split.is_side_by_side();
        let piece = split.walk(k, start, &mut batch.frames, |i, at, raw| {
            let shard = whole_shard_hash(raw, &self.udp).map(|h| shard_of(h, shards));
            if side_by_side {
                records.push((at, shard.and_then(|s| u32::try_from(s).ok())));
                return;
            }
            let Ok(i) = u32::try_from(i) else {
                return;
            };
            let Some(shard) = shard else {
                fragments = true;
                return;
            };
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
    /// as batches; then `source` reads on from where they stopped. Files
    /// side by side: [`Reader::read_side_by_side`].
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
            let walked = self.take(split, k, at, sink)?;
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
        self.stop_pieces()?;
        source.resume(at, frames);
        Ok(())
    }

    /// The calling thread takes no more pieces: the workers walk none.
    pub(super) fn stop_pieces(&self) -> Result<(), Error> {
        let mut queue = self.shared.queue()?;
        queue.pieces.stopped = true;
        queue.pieces.walked.clear();
        Ok(())
    }

    /// Piece `k` from its record at `at`: walked by a worker (and walked
    /// again here if its first record was guessed wrong), or walked here
    /// if no worker has started it; while a worker walks it, gathers or
    /// waits.
    pub(super) fn take(
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
            match queue.pieces.take(k, at) {
                None => return Err(super::worker_lost()),
                Some(Take::Walked(walked)) if walked.start == at => return Ok(*walked),
                Some(Take::Walked(walked)) => {
                    // A wrong guess: the piece starts where the last one
                    // ended.
                    drop(queue);
                    return Ok(self.shared.walk(split, k, Some(at), walked.batch));
                }
                Some(Take::Here) => {
                    let batch = queue.spare.pop().unwrap_or_default();
                    drop(queue);
                    return Ok(self.shared.walk(split, k, Some(at), batch));
                }
                Some(Take::Walking) => {}
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
