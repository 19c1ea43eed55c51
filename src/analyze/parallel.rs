//! `--threads N`: frames are read into batches and each frame's shard is
//! noted, from a symmetric hash of its 4-tuple. A memory-mapped capture
//! (classic pcap or pcapng) is walked in pieces by any thread, hashing as
//! it walks (`pieces`); other inputs are read by the calling thread
//! (`read`). There are more
//! shards than threads (four per thread), each a [`Shard`] behind its own
//! lock that runs every batch in turn, taking only its own frames. Worker
//! threads walk pieces a few ahead and run whichever shard has a batch
//! waiting; the calling thread, between reads, gathers the oldest batch —
//! running itself any shard that has not got to it yet — and puts the
//! shards' events back in single-table order with the [`Gather`], so the
//! output (connection numbers, record order, summary) is the same as with
//! one thread. No share of the work is fixed in advance: a thread that is
//! free takes the next piece, so reading, analysing and gathering balance
//! themselves, whether the capture is heavy to read (large transfers) or
//! to analyse (many short connections). At the end of the input the
//! workers finalise the connections the shards still hold, a chunk at a
//! time, while the calling thread merges the chunks in order.
//!
//! Does not decide what a packet means (that is `shard`) nor write anything
//! but through the sink it is given.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;

mod gathering;
mod pieces;
mod read;
mod side;

use super::gather::Gather;
use super::shard::{Clock, Event, Shard};
use super::{Config, RecordSink, FINISH_CHUNK, SLICE};
use crate::decode::defrag::Defragmenter;
use crate::decode::UdpTunnels;
use crate::error::Error;
use crate::record::Summary;
use crate::source::{prefetch, Frame, FrameBatch, PacketSource, RawPacket, Split, PIECE};
use crate::time::Timestamp;

/// A batch holds at most this many bytes of frames…
const BATCH_BYTES: usize = 1 << 20;
/// …and this many frames.
const BATCH_FRAMES: usize = 4096;
/// Batches read and not yet gathered, at most.
const DEPTH: usize = 4;
/// Shards per thread: with several, a free thread finds work.
const SHARDS_PER_THREAD: usize = 4;
/// Chunks of finalised connections a shard holds ready at the end: one, so
/// the records held at once stay at one chunk per shard (and the one being
/// merged).
const END_AHEAD: usize = 1;
/// The fewest connections a shard finalises at a time at the end.
const MIN_CHUNK: usize = 8;
/// Records every shard together finalises in a batch before pausing
/// ([`SLICE`] each at most): a shard's slice is its share, so what waits
/// for the gatherer — up to [`DEPTH`] slices a shard — does not grow with
/// the number of threads (it did, at 64 records a shard: 50 000
/// connections a second, peak RSS 105 MiB with two threads, 145 with 16,
/// 186 with 32).
const WAITING: usize = 512;

/// A shard's slice among `shards` (the test knob, if set, instead).
fn slice_of(config: &Config, shards: usize) -> usize {
    config
        .slice
        .unwrap_or_else(|| (WAITING / shards).clamp(1, SLICE))
}

/// How many of its frames ahead a shard asks for a frame's bytes.
const PREFETCH: usize = 8;

/// Fetches into this core's cache the bytes of a frame the analysis reads
/// for sure: its first 128 bytes (headers) and its last 64 (the end of the
/// payload, for the retransmission check). The thread that walked them
/// touched them last, maybe on another core.
fn prefetch_frame(bytes: &[u8]) {
    prefetch(bytes.get(..128).unwrap_or(bytes));
    prefetch(
        bytes
            .get(bytes.len().saturating_sub(64)..)
            .unwrap_or_default(),
    );
}

/// The shard of a frame whose 4-tuple hashes to `hash`: the hash scaled
/// to `0..shards` by a multiply (its high bits; `shard_hash` mixes all
/// 64), not a remainder — a division per frame was a fifth of the walk.
fn shard_of(hash: u64, shards: usize) -> usize {
    ((u128::from(hash) * shards as u128) >> 64) as usize
}

#[derive(Default)]
struct Batch {
    /// Position of the first frame.
    base: u64,
    origin: Option<Timestamp>,
    frames: FrameBatch,
    /// The capture-wide clock after each frame.
    nows: Vec<Timestamp>,
    /// Each shard's frames (indices into `frames`), in order.
    by_shard: Vec<Vec<u32>>,
    /// Frames that completed an IP datagram (indices into `frames`, in
    /// order), and the datagram to analyse in their place.
    whole: Vec<(u32, Vec<u8>)>,
    /// A piece of files side by side: each frame's record (its offset in
    /// the split) and shard (`None`: it may be an IP fragment), for the
    /// calling thread to interleave them ([`Reader::read_side_by_side`]).
    records: Vec<(u64, Option<u32>)>,
}

impl Batch {
    fn last(&self) -> u64 {
        self.base + self.frames.frames.len() as u64 - 1
    }

    /// Frame `i` as the shards analyse it: the datagram it completed, if
    /// it was the last fragment of one.
    fn packet(&self, i: u32, frame: &Frame, index: u64) -> RawPacket<'_> {
        let raw = self.frames.packet(frame, index);
        if self.whole.is_empty() {
            return raw;
        }
        match self.whole.binary_search_by_key(&i, |w| w.0) {
            Ok(k) => {
                let data = self.whole.get(k).map_or(&[][..], |w| w.1.as_slice());
                RawPacket {
                    data,
                    orig_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
                    ..raw
                }
            }
            Err(_) => raw,
        }
    }

    fn clear(&mut self, shards: usize) {
        self.frames.clear();
        self.nows.clear();
        self.whole.clear();
        self.records.clear();
        self.by_shard.resize_with(shards, Vec::new);
        for frames in &mut self.by_shard {
            frames.clear();
        }
    }
}

/// A shard's events for one batch, or for the part of it it ran before
/// pausing ([`Shard::paused`]).
struct Slice {
    events: Vec<Event>,
    /// The shard ran the whole batch: no more events for it follow.
    complete: bool,
}

/// A shard and what it has done that the gatherer has not taken yet.
struct Cell {
    shard: Shard,
    /// Number (in reading order) of the next batch it runs…
    next: u64,
    /// …and how many of its frames of that batch it has run (it paused).
    cursor: usize,
    /// Its events for the batches it ran and the gatherer has not taken,
    /// oldest first; the last may be part of a batch, and then the shard
    /// runs nothing more until the gatherer has taken it.
    done: VecDeque<Slice>,
    /// Connections it finalises at a time at the end: a share of
    /// [`FINISH_CHUNK`], so that all shards together hold about what one
    /// thread holds, whatever their number (a chunk of 1 024 each held
    /// 16 384 records at once on two threads: 40 MiB over the run's
    /// steady memory on short connections).
    chunk: usize,
    /// At the end: chunks of finalised connections, oldest first…
    ending: VecDeque<Vec<Event>>,
    /// …and whether the last chunk is among them.
    finished: bool,
}

impl Cell {
    /// Finalises the next chunk of the connections the shard holds at the
    /// end of the input.
    fn finish_chunk(&mut self) {
        let more = self.shard.finish_some(self.chunk);
        self.ending.push_back(self.shard.take_events());
        self.finished = !more;
    }
}

/// The batches between the reader and the gatherer.
#[derive(Default)]
struct Queue {
    /// Read and not yet gathered, oldest first.
    batches: VecDeque<Arc<Batch>>,
    /// Number of the oldest of `batches`.
    first: u64,
    /// Changes whenever there may be new work: a batch read, a chunk taken
    /// at the end.
    generation: u64,
    /// The input is read and gathered: the shards finalise what they hold.
    ending: bool,
    /// No more work.
    closed: bool,
    /// The pieces of a split input being walked ([`pieces`]).
    pieces: pieces::Pieces,
    /// Gathered batches, emptied, for reuse (their vectors keep their room).
    spare: Vec<Batch>,
}

struct Shared {
    cells: Vec<Mutex<Cell>>,
    queue: Mutex<Queue>,
    /// Signalled when `generation` changes and when the queue closes.
    more: Condvar,
    /// A mapped capture, read in pieces by any thread.
    split: Option<Split>,
    /// The UDP ports tunnels are opened on (the shard hash is the inner
    /// 4-tuple's).
    udp: UdpTunnels,
}

/// Closes the queue if a worker thread unwinds, so that the calling thread
/// does not wait for a piece it was walking.
struct Lost<'s>(&'s Shared);

impl Drop for Lost<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            if let Ok(mut queue) = self.0.queue.lock() {
                queue.closed = true;
            }
            self.0.more.notify_all();
        }
    }
}

/// A worker thread stopped early (it panicked).
fn worker_lost() -> Error {
    Error::Output(std::io::Error::other("an analysis thread stopped"))
}

impl Shared {
    fn queue(&self) -> Result<MutexGuard<'_, Queue>, Error> {
        self.queue.lock().map_err(|_| worker_lost())
    }

    /// Shard `me`, unless another thread is running it (or one that ran
    /// it panicked: [`Shared::cell`] then reports that).
    fn try_cell(&self, me: usize) -> Option<MutexGuard<'_, Cell>> {
        self.cells.get(me)?.try_lock().ok()
    }

    fn cell(&self, me: usize) -> Result<MutexGuard<'_, Cell>, Error> {
        let cell = self.cells.get(me).ok_or_else(worker_lost)?;
        cell.lock().map_err(|_| worker_lost())
    }

    /// Tells the workers there may be new work.
    fn wake(&self) -> Result<(), Error> {
        self.queue()?.generation += 1;
        self.more.notify_all();
        Ok(())
    }

    /// Puts a batch done with back in the pool the walkers and readers
    /// take from, emptied outside the lock (a batch of a mapped file may
    /// hold the last reference to its window), unless the pool holds
    /// enough.
    fn recycle(&self, mut batch: Batch) -> Result<(), Error> {
        batch.clear(self.cells.len());
        let mut queue = self.queue()?;
        if queue.spare.len() <= 2 * DEPTH {
            queue.spare.push(batch);
        }
        Ok(())
    }

    /// Batch number `seq`, if read and not yet gathered.
    fn batch(&self, seq: u64) -> Result<Option<Arc<Batch>>, Error> {
        let queue = self.queue()?;
        let k = seq.checked_sub(queue.first);
        Ok(k.and_then(|k| queue.batches.get(usize::try_from(k).ok()?).cloned()))
    }

    /// Runs `cell` through every batch read so far up to number `upto`
    /// (inclusive), unless it paused and the gatherer has not taken that
    /// slice yet; whether it ran any.
    fn catch_up(&self, me: usize, cell: &mut Cell, upto: u64) -> Result<bool, Error> {
        let mut ran = false;
        while cell.next <= upto && cell.done.back().is_none_or(|s| s.complete) {
            let Some(batch) = self.batch(cell.next)? else {
                break;
            };
            let complete = run_batch(me, &mut cell.shard, &mut cell.cursor, &batch);
            let events = cell.shard.take_events();
            cell.done.push_back(Slice { events, complete });
            if complete {
                cell.next += 1;
            }
            ran = true;
        }
        Ok(ran)
    }
}

/// Runs shard `me`'s frames of `batch` through `shard` from the `cursor`th
/// on, then its timers up to the batch's last frame; false if it paused
/// first ([`Shard::paused`]), `cursor` then saying where to go on.
fn run_batch(me: usize, shard: &mut Shard, cursor: &mut usize, batch: &Batch) -> bool {
    let clock = Clock {
        base: batch.base,
        nows: &batch.nows,
        origin: batch.origin.unwrap_or(Timestamp(0)),
    };
    let frames = &batch.frames.frames;
    let mine = batch
        .by_shard
        .get(me)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let frame_at = |k: usize| mine.get(k).and_then(|&i| frames.get(i as usize));
    for (k, &i) in mine.iter().enumerate().skip(*cursor) {
        if let Some(ahead) = frame_at(k + PREFETCH) {
            prefetch_frame(batch.frames.bytes(ahead));
        }
        let Some(frame) = frames.get(i as usize) else {
            continue;
        };
        let index = batch.base + u64::from(i);
        let raw = batch.packet(i, frame, index);
        if !shard.packet(index, &raw, &clock) {
            *cursor = k;
            return false;
        }
    }
    *cursor = mine.len();
    if !shard.advance(batch.last(), &clock) {
        return false;
    }
    *cursor = 0;
    true
}

/// A worker thread: runs any shard that has work waiting (its own block of
/// shards first, skipping shards another thread is running) — batches
/// while the input is read, then chunks of finalised connections — and
/// sleeps when none has.
fn worker(shared: &Shared, start: usize) {
    let _lost = Lost(shared);
    let n = shared.cells.len();
    loop {
        let Ok(mut queue) = shared.queue.lock() else {
            return;
        };
        if queue.closed {
            return;
        }
        let (generation, ending) = (queue.generation, queue.ending);
        let split = shared.split.as_ref();
        let piece = split.and_then(|split| Some((split, queue.pieces.claim(split)?)));
        let batch = piece.map(|_| queue.spare.pop().unwrap_or_default());
        drop(queue);
        if let (Some((split, claim)), Some(batch)) = (piece, batch) {
            if shared.walked(split, claim, batch).is_err() {
                return;
            }
            continue;
        }
        let mut ran = false;
        for k in 0..n {
            let me = (start + k) % n;
            let Some(mut cell) = shared.try_cell(me) else {
                continue;
            };
            if ending {
                if !cell.finished && cell.ending.len() < END_AHEAD {
                    cell.finish_chunk();
                    ran = true;
                }
            } else {
                match shared.catch_up(me, &mut cell, u64::MAX) {
                    Ok(r) => ran |= r,
                    Err(_) => return,
                }
            }
        }
        if !ran {
            // Nothing to do until the calling thread makes some.
            let Ok(queue) = shared.queue.lock() else {
                return;
            };
            let waited = shared
                .more
                .wait_while(queue, |q| q.generation == generation && !q.closed);
            if waited.is_err() {
                return;
            }
        }
    }
}

/// Runs `source` through `threads` threads (at least 2). Same contract as
/// [`crate::analyze_with_progress`].
pub fn run(
    source: &mut dyn PacketSource,
    config: &Config,
    threads: usize,
    sink: &mut dyn RecordSink,
    progress: &mut dyn FnMut(&crate::Reading),
) -> Result<Summary, Error> {
    let threads = threads.clamp(2, usize::from(u16::MAX) / SHARDS_PER_THREAD);
    let shards = threads * SHARDS_PER_THREAD;
    let cap = config.max_connections().div_ceil(shards);
    let encoder = sink.encoder();
    let split = source.split(config.split_piece.unwrap_or(PIECE));
    let queue = Queue {
        pieces: pieces::Pieces::new(split.as_ref()),
        ..Queue::default()
    };
    let shared = Shared {
        cells: (0..shards)
            .map(|_| {
                let mut shard = Shard::new(config.clone(), cap);
                shard.encoder = encoder;
                shard.hold_at_most(slice_of(config, shards));
                Mutex::new(Cell {
                    shard,
                    next: 0,
                    cursor: 0,
                    done: VecDeque::new(),
                    chunk: (FINISH_CHUNK / shards).max(MIN_CHUNK),
                    ending: VecDeque::new(),
                    finished: false,
                })
            })
            .collect(),
        queue: Mutex::new(queue),
        more: Condvar::new(),
        split,
        udp: config.udp_tunnels,
    };
    thread::scope(|scope| {
        for w in 1..threads {
            let shared = &shared;
            // Each worker starts its round at its own block of shards.
            scope.spawn(move || worker(shared, w * SHARDS_PER_THREAD));
        }
        let mut reader = Reader {
            shared: &shared,
            gather: Gather::new(config.selection(), config.interval),
            defrag: Defragmenter::default(),
        };
        let result = reader
            .read_all(source, sink, progress)
            .and_then(|()| reader.end(sink));
        // Whatever happened, the workers stop.
        if let Ok(mut queue) = shared.queue.lock() {
            queue.closed = true;
        }
        shared.more.notify_all();
        let mut counts = result?;
        counts.add_defrag(&mut reader.defrag);
        Ok(reader.gather.finish(&counts, source.info()))
    })
}

struct Reader<'s> {
    shared: &'s Shared,
    gather: Gather,
    /// IP fragments held until their datagram is whole (here, before the
    /// shards: a datagram's fragments do not all carry its ports).
    defrag: Defragmenter,
}
