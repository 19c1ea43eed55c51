//! `--threads N`: the calling thread reads packets into batches and notes
//! each one's shard, from a symmetric hash of its 4-tuple; it hands every
//! batch (shared, not copied) to N − 1 worker threads and runs shard 0
//! itself, each shard taking only its own packets through its [`Shard`];
//! then it puts the shards' events back in single-table order with the
//! [`Gather`], so the output (connection numbers, record order, summary) is
//! the same as with one thread. Shard 0 gets a smaller share of the
//! connections, as its thread also reads and gathers.
//!
//! Does not decide what a packet means (that is `shard`) nor write anything
//! but through the sink it is given.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread;

use super::gather::Gather;
use super::shard::{Clock, Event, Shard, ShardCounts};
use super::{Config, RecordSink, FINISH_CHUNK};
use crate::decode::shard_hash;
use crate::error::Error;
use crate::record::Summary;
use crate::source::{prefetch, FrameBatch, PacketSource, RawPacket};
use crate::time::Timestamp;

/// A batch holds at most this many bytes of frames…
const BATCH_BYTES: usize = 1 << 20;
/// …and this many frames.
const BATCH_FRAMES: usize = 4096;
/// Batches read ahead of the gatherer.
const DEPTH: usize = 4;

/// How many of its frames ahead a worker asks for a frame's bytes.
const PREFETCH: usize = 8;

/// Fetches into this core's cache the bytes of a frame the analysis reads
/// for sure: its first 128 bytes (headers) and its last 64 (the end of the
/// payload, for the retransmission check). The reader thread touched them
/// last, on another core.
fn prefetch_frame(bytes: &[u8]) {
    prefetch(bytes.get(..128).unwrap_or(bytes));
    prefetch(
        bytes
            .get(bytes.len().saturating_sub(64)..)
            .unwrap_or_default(),
    );
}

/// Packets between two calls of the progress callback.
const PROGRESS_EVERY: u64 = 16_384;

#[derive(Default)]
struct Batch {
    /// Position of the first frame.
    base: u64,
    origin: Option<Timestamp>,
    frames: FrameBatch,
    /// The capture-wide clock after each frame.
    nows: Vec<Timestamp>,
    /// Each frame's shard.
    shards: Vec<u16>,
}

impl Batch {
    fn last(&self) -> u64 {
        self.base + self.frames.frames.len() as u64 - 1
    }
}

enum Work {
    Batch(Arc<Batch>),
    End,
}

enum Done {
    Batch(Vec<Event>),
    /// Connections finalised at the end; the counts come with the last chunk.
    End(Vec<Event>, Option<ShardCounts>),
}

/// Runs `source` through `threads` shards (at least 2). Same contract as
/// [`crate::analyze_with_progress`].
pub fn run(
    source: &mut dyn PacketSource,
    config: &Config,
    threads: usize,
    sink: &mut dyn RecordSink,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<Summary, Error> {
    let threads = threads.clamp(2, usize::from(u16::MAX));
    let cap = config.max_connections().div_ceil(threads);
    let encoder = sink.encoder();
    let new_shard = || {
        let mut shard = Shard::new(config.clone(), cap);
        shard.encoder = encoder;
        shard
    };
    thread::scope(|scope| {
        let mut work = Vec::with_capacity(threads);
        let mut done = Vec::with_capacity(threads);
        for me in 1..threads {
            let (work_tx, work_rx) = sync_channel::<Work>(DEPTH + 1);
            // Bounded, so a worker cannot run far ahead (at the end, it
            // sends its remaining connections a chunk at a time).
            let (done_tx, done_rx) = sync_channel::<Done>(DEPTH + 2);
            let shard = new_shard();
            scope.spawn(move || worker(me, shard, work_rx, done_tx));
            work.push(work_tx);
            done.push(done_rx);
        }
        let mut reader = Reader {
            gather: Gather::new(),
            work,
            done,
            in_flight: VecDeque::new(),
            spare: Vec::new(),
            own: new_shard(),
            own_events: VecDeque::new(),
            mine: Vec::with_capacity(BATCH_FRAMES),
            shares: Shares::new(threads),
        };
        reader.read_all(source, sink, progress)?;
        let counts = reader.end(sink)?;
        Ok(reader.gather.finish(&counts, source.info()))
    })
}

/// How connections are shared among the shards: by slots of their hash,
/// [`OWN_SLOTS`] for shard 0 (the calling thread's), [`SLOTS`] for each
/// other.
#[derive(Clone, Copy)]
struct Shares {
    total: u64,
}

/// Slots of a worker thread's shard…
const SLOTS: u64 = 8;
/// …and of the calling thread's, which also reads and gathers. Measured on
/// 2 cores: the threads end together with about this share.
const OWN_SLOTS: u64 = 5;

impl Shares {
    fn new(threads: usize) -> Shares {
        let others = threads.saturating_sub(1) as u64;
        Shares {
            total: OWN_SLOTS + SLOTS * others,
        }
    }

    /// The shard of a frame with this 4-tuple hash.
    fn of(self, hash: u64) -> u16 {
        let slot = hash % self.total;
        match slot.checked_sub(OWN_SLOTS) {
            None => 0,
            Some(rest) => (1 + rest / SLOTS) as u16,
        }
    }
}

/// Runs shard `me`'s frames of `batch` through `shard`; `mine` is scratch
/// space for their positions.
fn run_batch(me: usize, shard: &mut Shard, batch: &Batch, mine: &mut Vec<usize>) -> Vec<Event> {
    let clock = Clock {
        base: batch.base,
        nows: &batch.nows,
        origin: batch.origin.unwrap_or(Timestamp(0)),
    };
    let frames = &batch.frames.frames;
    mine.clear();
    let shards = batch.shards.iter().enumerate();
    mine.extend(
        shards
            .filter(|(_, s)| usize::from(**s) == me)
            .map(|(i, _)| i),
    );
    for (k, &i) in mine.iter().enumerate() {
        if let Some(ahead) = mine.get(k + PREFETCH).and_then(|&j| frames.get(j)) {
            prefetch_frame(batch.frames.bytes(ahead));
        }
        let Some(frame) = frames.get(i) else {
            continue;
        };
        let index = batch.base + i as u64;
        let raw = RawPacket {
            index,
            ts: frame.ts,
            link: frame.link,
            orig_len: frame.orig_len,
            data: batch.frames.bytes(frame),
        };
        shard.packet(index, &raw, &clock);
    }
    shard.advance(batch.last(), &clock);
    std::mem::take(&mut shard.events)
}

fn worker(me: usize, mut shard: Shard, work: Receiver<Work>, done: SyncSender<Done>) {
    let mut mine = Vec::with_capacity(BATCH_FRAMES);
    while let Ok(msg) = work.recv() {
        match msg {
            Work::Batch(batch) => {
                let events = run_batch(me, &mut shard, &batch, &mut mine);
                drop(batch);
                if done.send(Done::Batch(events)).is_err() {
                    return;
                }
            }
            Work::End => loop {
                let (events, counts) = finish_chunk(&mut shard);
                let last = counts.is_some();
                if done.send(Done::End(events, counts)).is_err() || last {
                    return;
                }
            },
        }
    }
}

/// The next chunk of connections a shard still holds at the end, with its
/// counts when it was the last.
fn finish_chunk(shard: &mut Shard) -> (Vec<Event>, Option<ShardCounts>) {
    let more = shard.finish_some(FINISH_CHUNK);
    let events = std::mem::take(&mut shard.events);
    (events, (!more).then(|| shard.counts.clone()))
}

struct Reader {
    gather: Gather,
    /// The worker threads of shards 1, 2, …
    work: Vec<SyncSender<Work>>,
    done: Vec<Receiver<Done>>,
    in_flight: VecDeque<Arc<Batch>>,
    /// Batches whose workers are done with them, for reuse.
    spare: Vec<Batch>,
    /// Shard 0, run on this thread, and its events for the batches in flight.
    own: Shard,
    own_events: VecDeque<Vec<Event>>,
    mine: Vec<usize>,
    shares: Shares,
}

/// A worker thread stopped early (it panicked).
fn worker_lost() -> Error {
    Error::Output(std::io::Error::other("an analysis thread stopped"))
}

impl Reader {
    fn read_all(
        &mut self,
        source: &mut dyn PacketSource,
        sink: &mut dyn RecordSink,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<(), Error> {
        let mut failed = None;
        loop {
            let mut batch = self.spare.pop().unwrap_or_default();
            // A read error ends the input after the frames read before it,
            // which are analysed first, as on one thread.
            let filled = self.fill(&mut batch, source, progress);
            let more = match filled {
                Ok(more) => more,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            };
            if !batch.frames.frames.is_empty() {
                let batch = Arc::new(batch);
                for tx in &self.work {
                    tx.send(Work::Batch(Arc::clone(&batch)))
                        .map_err(|_| worker_lost())?;
                }
                let events = run_batch(0, &mut self.own, &batch, &mut self.mine);
                self.own_events.push_back(events);
                self.in_flight.push_back(batch);
                if self.in_flight.len() > DEPTH {
                    self.gather_one(sink)?;
                }
            }
            if !more {
                break;
            }
        }
        while !self.in_flight.is_empty() {
            self.gather_one(sink)?;
        }
        failed.map_or(Ok(()), Err)
    }

    /// Reads frames into `batch` until it is full, notes each one's clock
    /// and shard; false at the end of input.
    fn fill(
        &mut self,
        batch: &mut Batch,
        source: &mut dyn PacketSource,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<bool, Error> {
        batch.frames.clear();
        batch.nows.clear();
        batch.shards.clear();
        batch.base = self.gather.seen() + 1;
        let filled = source.fill(&mut batch.frames, BATCH_BYTES, BATCH_FRAMES);
        let before = self.gather.seen();
        for frame in &batch.frames.frames {
            let raw = RawPacket {
                index: 0,
                ts: frame.ts,
                link: frame.link,
                orig_len: frame.orig_len,
                data: batch.frames.bytes(frame),
            };
            let (_, now) = self.gather.saw_packet(&raw);
            batch.nows.push(now);
            batch.shards.push(self.shares.of(shard_hash(&raw)));
        }
        batch.origin = self.gather.summary.origin;
        if self.gather.seen() / PROGRESS_EVERY != before / PROGRESS_EVERY {
            let (read, total) = source.progress();
            progress(read, total);
        }
        Ok(filled?)
    }

    /// Takes the oldest batch's events from every worker and applies them in order.
    fn gather_one(&mut self, sink: &mut dyn RecordSink) -> Result<(), Error> {
        let mut events = self.own_events.pop_front().unwrap_or_default();
        for rx in &self.done {
            match rx.recv() {
                Ok(Done::Batch(mut e)) => events.append(&mut e),
                _ => return Err(worker_lost()),
            }
        }
        if let Some(batch) = self.in_flight.pop_front() {
            if let Ok(batch) = Arc::try_unwrap(batch) {
                self.spare.push(batch);
            }
        }
        events.sort_unstable_by_key(Event::order);
        self.gather.apply_all(events, sink)?;
        Ok(())
    }

    /// Finishes every shard, merging the connections they still hold in
    /// order of first packet; returns the shards' counts added up.
    fn end(&mut self, sink: &mut dyn RecordSink) -> Result<ShardCounts, Error> {
        for tx in &self.work {
            tx.send(Work::End).map_err(|_| worker_lost())?;
        }
        // Queue 0 is this thread's shard, the others the workers'.
        let lanes = self.done.len() + 1;
        let mut queues: Vec<VecDeque<Event>> = (0..lanes).map(|_| VecDeque::new()).collect();
        let mut finished = vec![false; lanes];
        let mut counts = ShardCounts::default();
        loop {
            for (lane, (queue, done)) in queues.iter_mut().zip(&mut finished).enumerate() {
                while queue.is_empty() && !*done {
                    let (events, last) = match lane.checked_sub(1) {
                        None => finish_chunk(&mut self.own),
                        Some(w) => match self.done.get(w).map(Receiver::recv) {
                            Some(Ok(Done::End(events, last))) => (events, last),
                            _ => return Err(worker_lost()),
                        },
                    };
                    queue.extend(events);
                    if let Some(c) = last {
                        counts.merge(&c);
                        *done = true;
                    }
                }
            }
            let next = queues
                .iter_mut()
                .filter_map(|q| q.front().map(Event::order).map(|o| (o, q)))
                .min_by_key(|(o, _)| *o)
                .and_then(|(_, q)| q.pop_front());
            let Some(event) = next else {
                return Ok(counts);
            };
            self.gather.apply(event, sink)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shard_gets_its_share_of_hashes() {
        for threads in [2usize, 3, 8, 256] {
            let shares = Shares::new(threads);
            let mut seen = vec![0u64; threads];
            for hash in 0..shares.total * 1000 {
                let shard = usize::from(shares.of(hash));
                assert!(shard < threads, "{threads} threads: shard {shard}");
                seen[shard] += 1;
            }
            let per_slot = seen.iter().sum::<u64>() / shares.total;
            assert_eq!(seen[0], OWN_SLOTS * per_slot, "{threads} threads");
            assert!(seen[1..].iter().all(|&n| n == SLOTS * per_slot), "{seen:?}");
        }
    }
}
