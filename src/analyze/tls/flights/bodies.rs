//! HTTP/1 over TLS without keys: request bodies told by their records'
//! sizes, so that a body sent after its request was answered is not taken
//! for a request. A server that answers before it reads the body (a rate
//! limiter's 429, a 401, 405 or 413) leaves the client to send it anyway
//! on a keep-alive connection: Java's HttpURLConnection and HttpClient
//! write a POST's head and body as two records, and the body then begins a
//! client flight of its own after the answer. A client sends one API the
//! same request, so a flight whose first two records are a head and a body
//! teaches the pair of sizes; after a flight of that head alone, a flight
//! that begins with that body is the body, and a record after it in the
//! flight begins the next request. Before the pair is known, the same order
//! shows it: a flight begun by some record and then by a record the size
//! of the lone head before it (the same call again) — the first was that
//! head's body, counted as a request until then. And a client that seals
//! a connection's first request, head and body, in one record (Java's
//! HttpClient) shows the body's size by it: after a later flight of a
//! lone head, shorter, a last flight of the connection that the server
//! never answers, of one record (and closing alerts) that makes up the
//! first request's size with that head (the plaintexts' lengths add up
//! exactly, where the client's record overhead is known), is that head's
//! body — on a connection of two requests, the second answered early,
//! there is nothing else to learn from.
//!
//! Not learned: full-size records (16 KiB of plaintext: a large upload's).
//! Should more flights begin with a body than there are requests and two,
//! the pairs are forgotten.
//!
//! Does not count requests (`flights` does); HTTP/2 is `h2`'s.

/// Pairs of sizes learned at most.
const PAIRS: usize = 4;
/// A record this long (on the wire) is a full one: not learned.
const FULL: u16 = 1 << 14;
/// Flights begun by a body beyond the requests.
const MORE_BODIES: u64 = 2;

/// What a client record is, besides what flights make of it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BodyRecord {
    /// The body of the last request, sent after its answer.
    Body,
    /// The next request, after such a body in the same flight.
    Request,
    /// The next request, and the record that began the flight, counted
    /// as one, was the body of the request before.
    Retract,
    /// As flights say: a request if it begins a flight, else more of it.
    Flight,
}

#[derive(Debug, Default)]
pub(super) struct Bodies {
    /// (head, body) record sizes on the wire (0: none; a record's length
    /// is 16 bits). The same request is sealed in records of the same
    /// sizes.
    pairs: [(u16, u16); PAIRS],
    /// The current request's first record, and how many records it has
    /// had in its flight.
    first: u16,
    records: u16,
    /// The request before was a lone record of this size (0: it was not).
    lone: u16,
    /// The first request was a lone record of this size (0: it was not).
    sealed: u16,
    /// The current flight's first record makes up the first request's
    /// size with the lone head before it, and nothing longer than closing
    /// alerts followed it.
    completes: bool,
    /// The current flight began with a body.
    after_body: bool,
    /// Flights begun by a body.
    taken: u32,
}

impl Bodies {
    /// A client record of `len` bytes; `new_flight` when the server spoke
    /// last; `requests` counted so far; what each of the client's records
    /// adds to its plaintext, when known.
    pub(super) fn client(
        &mut self,
        len: usize,
        new_flight: bool,
        requests: u64,
        overhead: Option<usize>,
    ) -> BodyRecord {
        let len = u16::try_from(len).unwrap_or(u16::MAX);
        if new_flight {
            self.after_body = false;
            let lone = if self.records == 1 { self.first } else { 0 };
            if requests == 1 {
                self.sealed = lone;
            }
            // The rest of the first request's size after this head.
            let rest = |ov: usize| {
                let sum = usize::from(len) + usize::from(lone);
                requests > 1 && lone < self.sealed && sum == usize::from(self.sealed) + ov
            };
            self.completes = lone != 0 && overhead.is_some_and(rest);
            let body = lone != 0 && self.pairs.contains(&(lone, len));
            if body && requests > 0 {
                self.taken = self.taken.saturating_add(1);
                if u64::from(self.taken) <= requests + MORE_BODIES {
                    self.completes = false;
                    self.after_body = true;
                    self.records = 0;
                    return BodyRecord::Body;
                }
                self.pairs = [(0, 0); PAIRS];
            }
            self.lone = lone;
            self.begin(len);
            return BodyRecord::Flight;
        }
        self.completes &= usize::from(len) <= super::MAX_CLOSING_FLIGHT;
        if std::mem::take(&mut self.after_body) {
            self.lone = 0;
            self.begin(len);
            return BodyRecord::Request;
        }
        self.records = self.records.saturating_add(1);
        if self.records != 2 {
            return BodyRecord::Flight;
        }
        if self.lone == len && self.first != len && requests > 1 {
            // The lone head's size again: the same call, after the body
            // of the one before.
            self.learn(len, self.first);
            self.lone = 0;
            self.begin(len);
            return BodyRecord::Retract;
        }
        self.learn(self.first, len);
        BodyRecord::Flight
    }

    /// Whether the current flight, if the server never answers it, is the
    /// body of the lone head before it: it makes up the size of the first
    /// request, sealed with its body, with that head.
    pub(super) fn completes_sealed(&self) -> bool {
        self.completes
    }

    /// A record of `len` bytes begins a request.
    fn begin(&mut self, len: u16) {
        self.first = len;
        self.records = 1;
    }

    /// The pair (`head`, `body`), if new and there is room.
    fn learn(&mut self, head: u16, body: u16) {
        if head == body || body >= FULL || self.pairs.contains(&(head, body)) {
            return;
        }
        if let Some(slot) = self.pairs.iter_mut().find(|p| p.0 == 0) {
            *slot = (head, body);
        }
    }
}
