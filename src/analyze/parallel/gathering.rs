//! The calling thread's gathering for `--threads`: each batch's events
//! taken from every shard (running those that have not got to it, a
//! slice at a time from shards that paused) and applied in single-table
//! order; at the end, the connections the shards still hold, finalised a
//! chunk at a time and merged in order of first packet.
//!
//! Does not read batches (that is `read` and `pieces`) nor analyse frames
//! (that is `shard`).

use std::collections::VecDeque;
use std::sync::Arc;

use super::{worker_lost, Reader};
use crate::analyze::shard::{Event, Order, ShardCounts};
use crate::analyze::RecordSink;
use crate::error::Error;

/// Shard `me`'s watermark in [`Reader::gather_one`].
fn mark(marks: &[Option<Order>], me: usize) -> Option<Order> {
    marks.get(me).copied().flatten()
}

impl Reader<'_> {
    /// Takes the oldest batch's events from every shard — running those
    /// that have not got to it yet — and applies them in order. Never waits
    /// for a shard a worker is running while there is other work to do:
    /// shards that are free run their newer batches meanwhile.
    ///
    /// A shard that paused in the batch ([`crate::analyze::SLICE`]) hands it over in
    /// slices. Events are applied as soon as every shard still in the batch
    /// has passed them (each shard's events come in order, so the last one
    /// it handed over is a watermark), and slices are taken only from the
    /// shards furthest behind: the rest wait with their shard, one slice
    /// each, instead of piling up here.
    pub(super) fn gather_one(&mut self, sink: &mut dyn RecordSink) -> Result<(), Error> {
        let oldest = self.shared.queue()?.first;
        let shards = self.shared.cells.len();
        // Per shard still in the batch: the last event taken from it (none
        // yet: `None`, which is lowest).
        let mut marks: Vec<Option<Order>> = vec![None; shards];
        let mut pending: Vec<usize> = (0..shards).collect();
        let mut events = Vec::new();
        while !pending.is_empty() {
            let low = pending.iter().map(|&me| mark(&marks, me)).min().flatten();
            // Whether a slice was taken this round, and one of a shard
            // that paused.
            let (mut took, mut paused) = (false, false);
            let mut k = 0;
            while let Some(&me) = pending.get(k) {
                let cell = if mark(&marks, me) == low {
                    self.shared.try_cell(me)
                } else {
                    None
                };
                let Some(mut cell) = cell else {
                    k += 1;
                    continue;
                };
                self.shared.catch_up(me, &mut cell, oldest)?;
                let Some(mut slice) = cell.done.pop_front() else {
                    return Err(worker_lost());
                };
                drop(cell);
                if let (Some(last), Some(at)) = (slice.events.last(), marks.get_mut(me)) {
                    *at = Some(last.order());
                }
                events.append(&mut slice.events);
                took = true;
                paused |= !slice.complete;
                if slice.complete {
                    pending.swap_remove(k);
                } else {
                    k += 1;
                }
            }
            if took {
                if paused {
                    // A shard paused: the workers may run it on.
                    self.shared.wake()?;
                }
                let upto = pending.iter().map(|&me| mark(&marks, me)).min();
                self.apply_upto(&mut events, upto, sink)?;
            } else if !self.help(&pending)? {
                // Nothing else to do: wait for a busy shard furthest behind.
                if let Some(&me) = pending.iter().find(|&&me| mark(&marks, me) == low) {
                    drop(self.shared.cell(me)?);
                }
            }
        }
        let batch = {
            let mut queue = self.shared.queue()?;
            queue.first += 1;
            queue.batches.pop_front()
        };
        if let Some(batch) = batch.and_then(|b| Arc::try_unwrap(b).ok()) {
            self.shared.recycle(batch)?;
        }
        self.apply_upto(&mut events, None, sink)
    }

    /// Applies, in order, the `events` taken from the shards that come
    /// before `upto` — the lowest watermark of the shards still in the
    /// batch: `None` when every shard has finished it, `Some(None)` when
    /// one has handed over nothing yet — and keeps the rest.
    fn apply_upto(
        &mut self,
        events: &mut Vec<Event>,
        upto: Option<Option<Order>>,
        sink: &mut dyn RecordSink,
    ) -> Result<(), Error> {
        events.sort_unstable_by_key(Event::order);
        let n = match upto {
            None => events.len(),
            Some(None) => 0,
            Some(Some(mark)) => events.partition_point(|e| e.order() <= mark),
        };
        self.gather.apply_all(events.drain(..n), sink)?;
        Ok(())
    }

    /// Runs newer batches through a shard that is free and not `busy`;
    /// whether there was one.
    fn help(&self, busy: &[usize]) -> Result<bool, Error> {
        for me in (0..self.shared.cells.len()).filter(|me| !busy.contains(me)) {
            let Some(mut cell) = self.shared.try_cell(me) else {
                continue;
            };
            if self.shared.catch_up(me, &mut cell, u64::MAX)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Has the shards finalise the connections they still hold (the
    /// workers a chunk ahead, this thread when they have not), merging them
    /// in order of first packet; returns the shards' counts added up.
    pub(super) fn end(&mut self, sink: &mut dyn RecordSink) -> Result<ShardCounts, Error> {
        self.shared.queue()?.ending = true;
        self.shared.wake()?;
        let shards = self.shared.cells.len();
        let mut lanes: Vec<VecDeque<Event>> = (0..shards).map(|_| VecDeque::new()).collect();
        let mut drained = vec![false; shards];
        let mut counts = ShardCounts::default();
        loop {
            for (me, (lane, drained)) in lanes.iter_mut().zip(&mut drained).enumerate() {
                while lane.is_empty() && !*drained {
                    let mut cell = self.shared.cell(me)?;
                    if cell.ending.is_empty() && !cell.finished {
                        cell.finish_chunk();
                    }
                    lane.extend(cell.ending.pop_front().unwrap_or_default());
                    if cell.finished && cell.ending.is_empty() {
                        counts.merge(&cell.shard.counts);
                        *drained = true;
                    }
                    drop(cell);
                    self.shared.wake()?;
                }
            }
            let next = lanes
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
