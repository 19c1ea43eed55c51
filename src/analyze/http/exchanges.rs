//! The requests of one connection as an analyzer finds them: the first
//! `keep` listed in the record (`--max-requests-listed`), and past those a
//! window of the most recent ones, retired into a status count and a
//! latency aggregate as newer ones arrive, so that the summary's status
//! codes and request latency cover every request, not only the listed
//! ones, and the times of the requests past the list (for the summary's
//! figures across connections); and, once a response speaks of rate
//! limiting, its [`Limits`].
//! Shared by HTTP/1, HTTP/2 and the TLS flights, which address requests by
//! their number on the connection.
//!
//! Does not parse anything, nor decide what a request is.

use std::collections::{BTreeMap, VecDeque};

use super::limits::Limits;
use crate::analyze::stats::Samples;
use crate::time::Timestamp;

/// Requests past the list held at once, waiting for their responses (an
/// HTTP/2 connection's streams open at once are usually 100 to 250; a
/// request pushed out of the window before its response ended is counted
/// with what was seen of it).
const WINDOW: usize = 1024;
/// Durations of requests past the list kept exactly per connection
/// before they are folded into a histogram (32 KiB).
const EXACT_PAST: usize = 4096;
/// Times of requests past the list (and of the ends of their responses
/// that spoke of rate limiting) kept per connection for the summary's
/// figures across connections (16 bytes each: 64 KiB).
const MAX_PAST_MARKS: usize = 4096;
/// Distinct status codes counted per connection (a three-digit code has
/// 900 values, an HTTP/2 `:status` any number).
pub const MAX_STATUS_CODES: usize = 64;

/// One request and what is known of its response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// Boxed to their length (80 bytes an exchange instead of 96: the
    /// request list waits out the connection's close linger with it).
    pub method: Box<str>,
    pub target: Box<str>,
    pub start: Timestamp,
    pub status: Option<u16>,
    /// The response's Retry-After in seconds, [`NO_RETRY_AFTER`] when it
    /// had none (not an `Option`: the exchange stays 80 bytes).
    pub retry_after: u32,
    pub response_first: Option<Timestamp>,
    pub response_last: Option<Timestamp>,
}

/// An [`Exchange`] whose response carried no Retry-After.
pub const NO_RETRY_AFTER: u32 = u32::MAX;
/// An [`Exchange`] the server refused unprocessed (HTTP/2's
/// REFUSED_STREAM, or a stream past its GOAWAY): no response, so no
/// Retry-After — the field says so, and the exchange stays 80 bytes.
const REFUSED: u32 = u32::MAX - 1;

impl Exchange {
    /// A request that started at `start`, method and target unknown (encrypted, or HTTP/2).
    pub fn started(start: Timestamp) -> Exchange {
        Exchange {
            method: Box::default(),
            target: Box::default(),
            start,
            status: None,
            retry_after: NO_RETRY_AFTER,
            response_first: None,
            response_last: None,
        }
    }

    /// Notes the final response's status and Retry-After unless one was
    /// noted already; whether this one was.
    pub fn answer(&mut self, status: u16, retry_after: Option<u32>) -> bool {
        if self.status.is_some() {
            return false;
        }
        self.status = Some(status);
        self.retry_after = retry_after.unwrap_or(NO_RETRY_AFTER);
        true
    }

    /// The response's Retry-After in seconds.
    pub fn retry_after(&self) -> Option<u32> {
        (self.retry_after < REFUSED).then_some(self.retry_after)
    }

    /// The server refused the request unprocessed (it had no response):
    /// the client may send it again, elsewhere.
    pub fn refuse(&mut self) {
        if self.status.is_none() {
            self.retry_after = REFUSED;
        }
    }

    /// Whether [`Exchange::refuse`] was told, and no response came after.
    pub fn refused(&self) -> bool {
        self.retry_after == REFUSED && self.status.is_none()
    }

    /// Request start → last response byte, in seconds.
    pub fn duration(&self) -> Option<f64> {
        self.response_last.map(|t| t.secs_since(self.start))
    }
}

/// What is kept of the requests past the list once they leave the window.
#[derive(Debug, Default)]
pub struct Unlisted {
    /// Final statuses, at most [`MAX_STATUS_CODES`] distinct ones.
    pub statuses: BTreeMap<u16, u64>,
    /// Durations of those with a response.
    pub durations: Samples,
    /// Those with a response.
    pub answered: u64,
    /// When they started, and when those of their responses that were a
    /// 429 or carried a Retry-After ended: the first [`MAX_PAST_MARKS`].
    pub marks: Vec<PastMark>,
    /// Requests and such responses past those.
    pub unmarked: u64,
    /// The latest last byte of their responses.
    pub last_response: Option<Timestamp>,
}

/// A request past the list started (`end` none), or its response, a 429
/// (`end`'s flag) or one with a Retry-After of so many seconds
/// ([`NO_RETRY_AFTER`]: none), ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PastMark {
    pub at: Timestamp,
    pub end: Option<(bool, u32)>,
}

impl Unlisted {
    /// Keeps `m` unless [`MAX_PAST_MARKS`] are kept already.
    fn mark(&mut self, m: PastMark) {
        if self.marks.len() < MAX_PAST_MARKS {
            self.marks.push(m);
        } else {
            self.unmarked += 1;
        }
    }

    fn retire(&mut self, e: &Exchange) {
        self.answered += u64::from(e.response_first.is_some());
        self.last_response = self.last_response.max(e.response_last);
        if let Some(status) = e.status {
            count_status(&mut self.statuses, status, 1);
        }
        if let Some(d) = e.duration() {
            self.durations.push(d);
        }
    }
}

/// Adds `n` to `status`'s count unless [`MAX_STATUS_CODES`] others are
/// counted already.
pub fn count_status(counts: &mut BTreeMap<u16, u64>, status: u16, n: u64) {
    if let Some(c) = counts.get_mut(&status) {
        *c += n;
    } else if counts.len() < MAX_STATUS_CODES {
        counts.insert(status, n);
    }
}

/// Past the list: boxed, as most connections never get there.
#[derive(Debug)]
struct Past {
    /// Requests past the list still held, oldest first.
    window: VecDeque<Exchange>,
    /// Requests past the list retired before `window[0]`.
    retired: usize,
    unlisted: Unlisted,
}

impl Past {
    /// Retires the oldest request held when the window is over full.
    fn trim(&mut self) {
        if self.window.len() > WINDOW {
            if let Some(old) = self.window.pop_front() {
                self.unlisted.retire(&old);
                self.retired += 1;
            }
        }
    }
}

/// The requests of a connection, numbered from 0 in the order found.
#[derive(Debug, Default)]
pub struct Exchanges {
    keep: usize,
    listed: Vec<Exchange>,
    past: Option<Box<Past>>,
    /// Made by the first response that speaks of rate limiting.
    limits: Option<Box<Limits>>,
}

impl Exchanges {
    /// Lists the first `keep` requests.
    pub fn new(keep: usize) -> Exchanges {
        Exchanges {
            keep,
            listed: Vec::new(),
            past: None,
            limits: None,
        }
    }

    /// Requests found so far (held or retired).
    pub fn len(&self) -> usize {
        self.listed.len() + self.past.as_ref().map_or(0, |p| p.retired + p.window.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The listed requests.
    pub fn listed(&self) -> &[Exchange] {
        &self.listed
    }

    /// Request `i`, unless it was retired.
    pub fn get(&self, i: usize) -> Option<&Exchange> {
        match i.checked_sub(self.listed.len()) {
            None => self.listed.get(i),
            Some(j) => {
                let p = self.past.as_ref()?;
                p.window.get(j.checked_sub(p.retired)?)
            }
        }
    }

    /// Request `i`, unless it was retired.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Exchange> {
        match i.checked_sub(self.listed.len()) {
            None => self.listed.get_mut(i),
            Some(j) => {
                let p = self.past.as_mut()?;
                p.window.get_mut(j.checked_sub(p.retired)?)
            }
        }
    }

    /// Requests with a response (the first byte of one).
    pub fn answered(&self) -> u64 {
        let held = |e: &&Exchange| e.response_first.is_some();
        let listed = self.listed.iter().filter(held).count() as u64;
        listed
            + self.past.as_ref().map_or(0, |p| {
                p.unlisted.answered + p.window.iter().filter(held).count() as u64
            })
    }

    /// The first request from `from` on that has no response yet (its
    /// number, or `len()`); retired ones are passed over.
    pub fn first_unanswered(&self, from: usize) -> usize {
        let mut i = from;
        while i < self.listed.len() {
            if self
                .listed
                .get(i)
                .is_some_and(|e| e.response_first.is_none())
            {
                return i;
            }
            i += 1;
        }
        let Some(p) = self.past.as_ref() else {
            return i;
        };
        let base = self.listed.len() + p.retired;
        let skip = i.saturating_sub(base);
        let held = p.window.iter().skip(skip);
        base + skip + held.take_while(|e| e.response_first.is_some()).count()
    }

    /// Request `i` if it is listed.
    pub fn listed_mut(&mut self, i: usize) -> Option<&mut Exchange> {
        self.listed.get_mut(i)
    }

    /// Request `i`'s final response (the first one given), with its
    /// status and the seconds of its Retry-After: on the request while it
    /// is held, else counted with the retired ones.
    pub fn set_response(&mut self, i: usize, status: u16, retry_after: Option<u32>) {
        if i >= self.len() {
            return;
        }
        match self.get_mut(i) {
            Some(e) => {
                if !e.answer(status, retry_after) {
                    return;
                }
            }
            None => {
                if let Some(p) = self.past.as_mut() {
                    count_status(&mut p.unlisted.statuses, status, 1);
                }
            }
        }
        Limits::note(&mut self.limits, status, retry_after);
    }

    /// Request `i`'s response ended at `at` (its last byte): a 429's wait
    /// and a Retry-After's window run from here.
    pub fn response_ended(&mut self, i: usize, at: Timestamp) {
        let Some(e) = self.get(i) else {
            return;
        };
        let (status, retry_after) = (e.status, e.retry_after());
        if let Some((limits, status)) = self.limits.as_mut().zip(status) {
            limits.response_end(status, retry_after, at);
        }
        let too_many = status == Some(super::limits::TOO_MANY_REQUESTS);
        if i >= self.listed.len() && (too_many || retry_after.is_some()) {
            if let Some(p) = self.past.as_mut() {
                let end = Some((too_many, retry_after.unwrap_or(NO_RETRY_AFTER)));
                p.unlisted.mark(PastMark { at, end });
            }
        }
    }

    pub fn first_mut(&mut self) -> Option<&mut Exchange> {
        self.get_mut(0)
    }

    /// The latest request, unless it was retired.
    pub fn last_mut(&mut self) -> Option<&mut Exchange> {
        let last = self.len().checked_sub(1)?;
        self.get_mut(last)
    }

    /// Adds the next request; returns its number. Past the list its
    /// method and target are dropped: only the listed ones show them.
    pub fn push(&mut self, e: Exchange) -> usize {
        let n = self.len();
        if let Some(limits) = self.limits.as_mut() {
            limits.request(e.start);
        }
        if self.listed.len() < self.keep {
            self.listed.push(e);
            return n;
        }
        let p = self.past.get_or_insert_with(|| {
            Box::new(Past {
                window: VecDeque::new(),
                retired: 0,
                unlisted: Unlisted {
                    durations: Samples::with_exact_cap(EXACT_PAST),
                    ..Unlisted::default()
                },
            })
        });
        p.unlisted.mark(PastMark {
            at: e.start,
            end: None,
        });
        p.window.push_back(Exchange {
            method: Box::default(),
            target: Box::default(),
            ..e
        });
        p.trim();
        n
    }

    /// Adds a request found after a later one (HTTP/2 read by sizes), in
    /// order of start among those held (before every one held past the
    /// list, it goes first among them when some were retired).
    pub fn insert_by_start(&mut self, e: Exchange) {
        let listed_after = self.listed.last().is_some_and(|l| l.start > e.start);
        let Some(p) = self.past.as_mut() else {
            if listed_after {
                let at = self.listed.partition_point(|h| h.start <= e.start);
                self.listed.insert(at, e);
                if self.listed.len() > self.keep {
                    if let Some(out) = self.listed.pop() {
                        self.push(out);
                    }
                }
            } else {
                self.push(e);
            }
            return;
        };
        let later = p
            .window
            .iter()
            .rev()
            .take_while(|h| h.start > e.start)
            .count();
        if later < p.window.len() || p.retired > 0 || !listed_after {
            p.window.insert(p.window.len() - later, e);
        } else {
            // Goes into the list: the list's last moves past it.
            let at = self.listed.partition_point(|h| h.start <= e.start);
            self.listed.insert(at, e);
            if let Some(out) = self.listed.pop() {
                p.window.push_front(out);
            }
        }
        p.trim();
    }

    /// Takes back the latest request (it was not one).
    pub fn pop(&mut self) {
        match self.past.as_mut() {
            Some(p) if !p.window.is_empty() => {
                p.window.pop_back();
            }
            Some(p) if p.retired > 0 => {
                // Already retired: its traces stay, its number goes.
                p.retired -= 1;
            }
            _ => {
                self.listed.pop();
            }
        }
    }

    /// The listed requests, what the others left, and what the responses
    /// said of rate limiting.
    pub fn take(&mut self) -> (Vec<Exchange>, Option<Box<Unlisted>>, Option<Box<Limits>>) {
        let listed = std::mem::take(&mut self.listed);
        let unlisted = self.past.take().map(|p| {
            let Past {
                window,
                mut unlisted,
                ..
            } = *p;
            for e in &window {
                unlisted.retire(e);
            }
            Box::new(unlisted)
        });
        (listed, unlisted, self.limits.take())
    }

    pub fn shrink_to_fit(&mut self) {
        self.listed.shrink_to_fit();
        if let Some(p) = self.past.as_mut() {
            p.window.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(start: i64, end: i64, status: u16) -> Exchange {
        Exchange {
            status: Some(status),
            response_first: Some(Timestamp(end)),
            response_last: Some(Timestamp(end)),
            ..Exchange::started(Timestamp(start))
        }
    }

    /// Past the list each request's start is kept, and the end of each
    /// response that spoke of rate limiting, up to a bound.
    #[test]
    fn past_the_list_times_are_kept_up_to_a_bound() {
        let mut x = Exchanges::new(1);
        let n = 1 + MAX_PAST_MARKS as i64 + 5;
        for i in 0..n {
            x.push(Exchange::started(Timestamp(i * 10)));
            if i == 1 {
                x.set_response(1, 429, Some(2));
                x.response_ended(1, Timestamp(15));
            }
        }
        x.set_response(0, 429, None);
        x.response_ended(0, Timestamp(5)); // listed: the record has it
        let u = x.take().1.expect("some past the list");
        assert_eq!(u.marks.len(), MAX_PAST_MARKS);
        assert_eq!(
            u.marks[0],
            PastMark {
                at: Timestamp(10),
                end: None
            }
        );
        let ended = PastMark {
            at: Timestamp(15),
            end: Some((true, 2)),
        };
        assert_eq!(u.marks[1], ended);
        assert_eq!(
            u.unmarked, 6,
            "one request in the bound's room went to the 429's end"
        );
    }

    #[test]
    fn past_the_list_requests_are_retired_into_counts() {
        let mut x = Exchanges::new(2);
        for i in 0..(2 + WINDOW as i64 + 3) {
            let n = x.push(answered(
                i * 10,
                i * 10 + 4,
                if i % 2 == 0 { 200 } else { 429 },
            ));
            assert_eq!(n, i as usize);
        }
        assert_eq!(x.len(), 2 + WINDOW + 3);
        assert_eq!(x.listed().len(), 2);
        assert!(x.get(2).is_none(), "the oldest past the list retired");
        assert_eq!(x.get(5).map(|e| e.start), Some(Timestamp(50)));
        assert_eq!(
            x.get(2 + WINDOW + 2).map(|e| e.start),
            Some(Timestamp((2 + WINDOW as i64 + 2) * 10))
        );
        let (listed, unlisted, _) = x.take();
        assert_eq!(listed.len(), 2);
        let u = unlisted.expect("some past the list");
        let total: u64 = u.statuses.values().sum();
        assert_eq!(total, WINDOW as u64 + 3);
        assert_eq!(u.durations.len(), WINDOW as u64 + 3);
        let sum = u.durations.sum();
        assert!((sum - (WINDOW as f64 + 3.0) * 4e-9).abs() < 1e-15, "{sum}");
    }

    #[test]
    fn insert_by_start_keeps_the_list_in_order_and_pop_takes_the_latest() {
        let mut x = Exchanges::new(2);
        x.push(answered(10, 11, 200));
        x.push(answered(30, 31, 200));
        x.insert_by_start(Exchange::started(Timestamp(20)));
        let starts: Vec<i64> = x.listed().iter().map(|e| e.start.0).collect();
        assert_eq!(starts, [10, 20]);
        assert_eq!(x.get(2).map(|e| e.start), Some(Timestamp(30)));
        x.insert_by_start(Exchange::started(Timestamp(25)));
        assert_eq!(x.get(2).map(|e| e.start), Some(Timestamp(25)));
        assert_eq!(x.get(3).map(|e| e.start), Some(Timestamp(30)));
        x.pop();
        assert_eq!(x.len(), 3);
        let (_, unlisted, _) = x.take();
        assert_eq!(
            unlisted.map(|u| u.durations.len()),
            Some(0),
            "25 unanswered"
        );
    }

    #[test]
    fn status_codes_are_bounded() {
        let mut counts = BTreeMap::new();
        for s in 0..(MAX_STATUS_CODES as u16 + 10) {
            count_status(&mut counts, s, 1);
        }
        count_status(&mut counts, 0, 2);
        assert_eq!(counts.len(), MAX_STATUS_CODES);
        assert_eq!(counts.get(&0), Some(&3));
    }
}
