//! `--threads N`: one reader (the calling thread) reads packets into
//! batches and notes each one's shard, a symmetric hash of its 4-tuple;
//! every worker thread gets every batch (shared, not copied) and runs only
//! its own shard's packets through its [`Shard`]; the calling thread then
//! puts the shards' events back in single-table order with the [`Gather`],
//! so the output (connection numbers, record order, summary) is the same as
//! with one thread.
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
use crate::source::{FrameBatch, PacketSource, RawPacket};
use crate::time::Timestamp;

/// A batch holds at most this many bytes of frames…
const BATCH_BYTES: usize = 1 << 20;
/// …and this many frames.
const BATCH_FRAMES: usize = 4096;
/// Batches read ahead of the gatherer.
const DEPTH: usize = 4;

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
    let threads = threads.clamp(1, usize::from(u16::MAX));
    let cap = config.max_connections().div_ceil(threads);
    let encoder = sink.encoder();
    thread::scope(|scope| {
        let mut work = Vec::with_capacity(threads);
        let mut done = Vec::with_capacity(threads);
        for me in 0..threads {
            let (work_tx, work_rx) = sync_channel::<Work>(DEPTH + 1);
            // Bounded, so a worker cannot run far ahead (at the end, it
            // sends its remaining connections a chunk at a time).
            let (done_tx, done_rx) = sync_channel::<Done>(DEPTH + 2);
            let mut shard = Shard::new(config.clone(), cap);
            shard.encoder = encoder;
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
        };
        reader.read_all(source, threads, sink, progress)?;
        let counts = reader.end(sink)?;
        Ok(reader.gather.finish(&counts, source.info()))
    })
}

fn worker(me: usize, mut shard: Shard, work: Receiver<Work>, done: SyncSender<Done>) {
    while let Ok(msg) = work.recv() {
        match msg {
            Work::Batch(batch) => {
                let clock = Clock {
                    base: batch.base,
                    nows: &batch.nows,
                    origin: batch.origin.unwrap_or(Timestamp(0)),
                };
                let frames = &batch.frames.frames;
                for ((index, frame), _) in (batch.base..)
                    .zip(frames)
                    .zip(&batch.shards)
                    .filter(|(_, s)| usize::from(**s) == me)
                {
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
                drop(batch);
                if done
                    .send(Done::Batch(std::mem::take(&mut shard.events)))
                    .is_err()
                {
                    return;
                }
            }
            Work::End => loop {
                let more = shard.finish_some(FINISH_CHUNK);
                let events = std::mem::take(&mut shard.events);
                let counts = (!more).then(|| shard.counts.clone());
                if done.send(Done::End(events, counts)).is_err() || !more {
                    return;
                }
            },
        }
    }
}

struct Reader {
    gather: Gather,
    work: Vec<SyncSender<Work>>,
    done: Vec<Receiver<Done>>,
    in_flight: VecDeque<Arc<Batch>>,
    /// Batches whose workers are done with them, for reuse.
    spare: Vec<Batch>,
}

/// A worker thread stopped early (it panicked).
fn worker_lost() -> Error {
    Error::Output(std::io::Error::other("an analysis thread stopped"))
}

impl Reader {
    fn read_all(
        &mut self,
        source: &mut dyn PacketSource,
        threads: usize,
        sink: &mut dyn RecordSink,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<(), Error> {
        let mut failed = None;
        loop {
            let mut batch = self.spare.pop().unwrap_or_default();
            // A read error ends the input after the frames read before it,
            // which are analysed first, as on one thread.
            let filled = self.fill(&mut batch, source, threads, progress);
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
        threads: usize,
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
            batch
                .shards
                .push((shard_hash(&raw) % threads as u64) as u16);
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
        let mut events = Vec::new();
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
        let mut queues: Vec<VecDeque<Event>> = self.done.iter().map(|_| VecDeque::new()).collect();
        let mut finished = vec![false; self.done.len()];
        let mut counts = ShardCounts::default();
        loop {
            for ((rx, queue), done) in self.done.iter().zip(&mut queues).zip(&mut finished) {
                while queue.is_empty() && !*done {
                    match rx.recv() {
                        Ok(Done::End(events, last)) => {
                            queue.extend(events);
                            if let Some(c) = last {
                                counts.merge(&c);
                                *done = true;
                            }
                        }
                        _ => return Err(worker_lost()),
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
