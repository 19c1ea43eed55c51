//! What the sizes of HTTP/2's records say without the keys, once the
//! client's plaintext lengths are known: which client records are the
//! connection preface or control frames (not requests); which carry a
//! request body (a long record, and the shorter one that ends it; one of
//! some length after another in a flight); and which of the rest are
//! requests. The first record of a client flight is one. A later one is
//! one when its size (within two bytes) is that of another later record of
//! its flight, or — when it is short, as a request whose fields HPACK
//! finds in its table is — that of the last request before its flight
//! (HPACK makes a client's repeated requests one size; the HEADERS of a
//! request and its body are two records, seldom of one size); then
//! requests are multiplexed, and every later record that can hold a
//! HEADERS frame is one. Otherwise it is taken for the body of its
//! flight's request, unless a request of the flight, or a short one of the
//! next, has its size. Also which server records can answer a request:
//! not control frames; before the first answer, not TLS 1.3 tickets (the
//! sizes seen before the first request, and the server's first record
//! after the handshake when it is a ticket's size: OpenSSL sends them once
//! it reads the client's Finished, which may be after the first request)
//! nor the server's SETTINGS (once).
//!
//! Bodies' sizes. A client sends one API the same body, so a body's size,
//! once known, marks the connection's later bodies wherever they come —
//! also at a flight's start (after the answer to another request; the next
//! record then begins a request) and among multiplexed requests, where a
//! record of the last request's size is then the next request. A size is
//! learned from a record taken for the body of a flight the server
//! answered (longer than an indexed request, and not the request's size;
//! one that is an indexed HEADERS frame longer than another such record
//! of its flight is a request sealed with its body — OkHttp writes the
//! two together — and counts then, the connection multiplexed), and from
//! a body sent after an early answer: a server that responds
//! while the client's half of the stream is still open (a rate limiter's
//! 429, a 405 or 413 before the body is read) follows the response with
//! RST_STREAM (NO_ERROR, 13 bytes: RFC 9113 §8.1), and a client that had
//! not sent the body yet (Java's HttpClient, which waits for the server's
//! WINDOW_UPDATE; httpx) sends it all the same. So when a flight of one
//! request is answered and the server's next record is 13 bytes, the
//! client's next record, unless it is the request's size, is that body —
//! until the server answers it before the client sends anything else
//! (then it was a request, sealed with its body: the size is forgotten).
//! A record of at most 9 bytes after the first (which is taken for the
//! SETTINGS ACK) is an empty DATA frame that ends the stream instead
//! (curl's, answered before it began the body): no body is awaited. Sent
//! right after a record of the client's own flight that was counted as a
//! request and is longer than an indexed request, it ends that record's
//! stream: the record was the body (Apache HttpClient 5 sends a body's
//! DATA and then an empty one ending the stream, two records; among
//! multiplexed requests each would count), so it is not a request, and
//! its size is a body's. Should
//! the records taken for bodies by their size outnumber the requests by
//! more than two, the sizes were requests' and are forgotten, and the
//! estimate is doubtful.
//!
//! A client that writes each request as one message (Netty: HEADERS and
//! DATA sealed in one record) shows it in its first record, the preface,
//! SETTINGS and the first request together, when that holds a later
//! record with a SETTINGS and a HEADERS frame to spare: a record of that
//! size is another request, not the first one's body, nor is one of the
//! last request's size in a flight. Such a client closes streams in runs
//! of RST_STREAM frames, dozens in a record: a record of a multiple of 13
//! bytes (or 9 more, a SETTINGS ACK with them), one for at least half of
//! the requests whose streams no run closed yet and at most one more,
//! longer than an indexed request and of no size a request or a body had,
//! is control frames.
//!
//! Does not count requests or keep their times (`flights` does).

use crate::time::Timestamp;

mod frames;
mod server;

use frames::{learn_body, server_settings, settings};

/// The HTTP/2 client connection preface.
const PREFACE: usize = 24;
/// A first client record (plaintext) longer than this carries a request
/// besides the preface, SETTINGS (9 + 6 per setting) and a WINDOW_UPDATE
/// (13): those alone stay under it with up to nine settings.
const MAX_PREFACE: usize = 100;
/// Control frames, alone or two in a record: SETTINGS ACK (9),
/// WINDOW_UPDATE and RST_STREAM (13), PRIORITY (14, which Chromium sends
/// as it reorders the images of a page), PING (17), and the pairs clients
/// send together (two SETTINGS ACKs, an ACK and a WINDOW_UPDATE, the
/// stream's and the connection's WINDOW_UPDATE). A record of another size
/// can hold a HEADERS frame (a GET whose fields are all in the HPACK table
/// is 9 + 4–10 bytes; curl's repeated request is 15).
const CONTROL: [usize; 7] = [9, 13, 14, 17, 18, 22, 26];
/// A client record of a control frame's size that begins a flight, when
/// the server has sent less than this since the last request — HTTP/2's
/// initial window (RFC 9113 §6.9.2), so it cannot have been waiting for
/// more — and that the server answers, was a request: a HEADERS frame of
/// that size (curl's request for a path HPACK does not index is 26 bytes,
/// as two WINDOW_UPDATEs are). A WINDOW_UPDATE the client sends then is
/// answered by nothing.
const WINDOW: usize = 65_535;
/// A record this long after another in a client flight is a request's
/// body (DATA)…
const BODY: usize = 2048;
/// …and one this long is wherever it comes (HEADERS frames are rarely
/// more than a few kilobytes; DATA frames of uploads fill records), and
/// the next shorter record is the body's last.
const LONG_BODY: usize = 8192;
/// Two records this close in size are taken for one size (HPACK codes a
/// path's or a value's length in a byte or two).
const SAME: usize = 2;
/// Client records this small after the server's last record are GOAWAY
/// or RST_STREAM, not requests.
const MAX_CLOSING: usize = 64;
/// A request whose fields HPACK finds in its table is at most this long
/// (curl's 15 to 29 bytes, Chromium's 39, Java's 45): only so short a
/// record is a request by the size of one in another flight — longer
/// ones, first requests and bodies, vary too much for their sizes to
/// meet by more than chance.
const MAX_INDEXED: usize = 64;
/// Records taken for bodies remembered (of this flight and the last).
const KEEP: usize = 16;
/// Size classes of the records counted once multiplexed.
const CLASSES: usize = 8;
/// Server records after the handshake taken for TLS 1.3 tickets by their
/// place and size.
const MAX_TICKETS: u8 = 2;
/// RST_STREAM (and a stream's WINDOW_UPDATE): 9 + 4 bytes.
const RST_STREAM: usize = 13;
/// Body sizes learned at most.
const BODY_SIZES: usize = 4;
/// Records taken for bodies by their size beyond one a request (a body
/// may come before the HEADERS after it, or be split in two records).
const MORE_BODIES: u64 = 2;

/// What a client record is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum H2Record {
    /// The preface, SETTINGS or another control frame: nothing.
    Control,
    /// More of the flight's request (a body, or what may be one).
    Continues,
    /// A request; and so were the records at `earlier` that had been
    /// taken for bodies. `multiplexed`: the first request sent with
    /// another.
    Request {
        earlier: Vec<Timestamp>,
        multiplexed: bool,
    },
    /// An empty DATA frame ending the stream of the client's last record,
    /// which was counted as a request: that record was a body, not one.
    Retract,
}

/// The client's last record, counted as a request, and what counting it
/// changed: its size, the last request's size before it, and whether it
/// began a flight.
#[derive(Debug, Clone, Copy)]
struct Counted {
    size: usize,
    last_before: Option<usize>,
    new_flight: bool,
}

#[derive(Debug, Default)]
pub(super) struct H2 {
    multiplexed: bool,
    /// The client's flights so far.
    flight: u32,
    /// The last request's size, and the last before this flight's.
    last_size: Option<usize>,
    before_flight: Option<usize>,
    /// Records taken for bodies that may yet turn out to be requests:
    /// size, time and flight.
    maybe: Vec<(usize, Timestamp, u32)>,
    /// A long body is being sent: the next shorter record is its last…
    body: bool,
    /// …after which the next record begins a request, as at a new flight.
    after_body: bool,
    /// A server record answered a request.
    answered: bool,
    /// The client's first record was the preface alone; its SETTINGS may
    /// follow in a record of their own.
    lone_preface: bool,
    /// Requests counted from small records since the server's last record.
    small_since_server: u64,
    /// Multiplexed: the records counted by size (within two bytes) and
    /// how many of each.
    classes: Vec<(usize, u32)>,
    /// Multiplexed: the next request a server record answers.
    pub(super) next_answer: usize,
    /// TLS 1.3: lengths of the server's records before the first request
    /// (tickets, SETTINGS), which are not answers when they come again
    /// before the first.
    before_first: [usize; 4],
    /// The current flight is one record, a request.
    flight_single: bool,
    /// The last client record was taken for the body of a request
    /// answered early (at this time; the slot of its size, if that was
    /// learned then): a request after all if the server answers it.
    provisional: Option<(Timestamp, Option<usize>)>,
    /// The server's last record answered a flight of one record, and the
    /// client has not spoken since…
    answered_single: bool,
    /// …and then sent RST_STREAM: the client's next record is the rest of
    /// that request's body.
    body_pending: bool,
    /// Sizes of request bodies learned so (0: none).
    bodies: [usize; BODY_SIZES],
    /// The server has sent a record after the handshake.
    server_spoke: bool,
    /// The client has sent a record of at most 9 bytes.
    settings_acked: bool,
    /// The client's last record, when it was counted as a request and is
    /// longer than an indexed one (it may be a body: `Retract`).
    counted: Option<Counted>,
    /// A server record could be its SETTINGS, and the last one could.
    settings_seen: bool,
    settings_now: bool,
    /// The last server record was taken for a ticket (its first after the
    /// handshake, of a ticket's size, or one more as long), how many
    /// were, and the last one's length.
    ticket_now: bool,
    tickets: u8,
    ticket_len: usize,
    /// The first sizes of records counted as requests after the first
    /// (0: none).
    request_sizes: [usize; BODY_SIZES],
    /// Records taken for bodies that an answer showed were requests sealed
    /// with their bodies, at their times (`take_late`).
    late: Vec<Timestamp>,
    /// The flight of the client's first record and its length, when it
    /// carried a request besides the preface.
    preface_request: Option<(u32, usize)>,
    /// Streams closed by runs of RST_STREAM frames.
    streams_closed: u64,
    /// The server's plaintext since the last request counted.
    server_since_request: usize,
    /// The client's last record was of a control frame's size and began a
    /// flight the server could not be waiting on (at this time): a request
    /// if the server answers it (see [`WINDOW`]).
    control_request: Option<Timestamp>,
    /// Requests counted, and records taken for bodies by a size learned…
    requests: u64,
    bodies_taken: u64,
    /// …and whether the sizes learned were forgotten, as there were more
    /// such bodies than requests.
    forgot: bool,
}

impl H2 {
    pub(super) fn multiplexed(&self) -> bool {
        self.multiplexed
    }

    /// A client record of `plain` bytes at `ts`: the client's `first`
    /// after the handshake; `new_flight` when the server spoke last.
    pub(super) fn client(
        &mut self,
        plain: usize,
        ts: Timestamp,
        first: bool,
        new_flight: bool,
    ) -> H2Record {
        let control = if first {
            self.lone_preface = plain == PREFACE;
            plain <= MAX_PREFACE
        } else if std::mem::take(&mut self.lone_preface) && settings(plain) {
            true
        } else {
            plain <= 9 || CONTROL.contains(&plain)
        };
        if plain <= 9 {
            return if self.small(new_flight) {
                H2Record::Retract
            } else {
                H2Record::Control
            };
        }
        self.counted = None;
        self.answered_single = false;
        let control_request = self.control_request.take();
        if control || self.control_run(plain) {
            let idle = self.server_since_request < WINDOW && self.requests > 0;
            if !first && new_flight && control_request.is_none() && idle {
                self.control_request = Some(ts);
            }
            return H2Record::Control;
        }
        self.flight_single = false;
        self.provisional = None;
        if plain >= LONG_BODY {
            self.body = true;
            self.body_pending = false;
            return H2Record::Continues;
        }
        if std::mem::take(&mut self.body) {
            self.after_body = true;
            return H2Record::Continues;
        }
        let same = |s: usize| s.abs_diff(plain) <= SAME;
        // The body of a request answered early (not a repeat of it, as a
        // client that seals a request and its body in one record sends).
        if std::mem::take(&mut self.body_pending) && new_flight && !self.last_size.is_some_and(same)
        {
            let learned = learn_body(&mut self.bodies, plain);
            self.provisional = Some((ts, learned));
            self.after_body = true;
            return H2Record::Continues;
        }
        // A body of a size learned, wherever it comes; after one that
        // began a flight (sent after an answer to another request), the
        // next record begins a request.
        if self.bodies.iter().any(|&b| b != 0 && same(b)) {
            self.bodies_taken += 1;
            if self.bodies_taken <= self.requests + MORE_BODIES {
                self.after_body |= new_flight;
                return H2Record::Continues;
            }
            // More bodies than requests: a size learned was a request's
            // (a client that seals HEADERS and body in one record, its
            // requests sent at once): forget them.
            self.bodies = [0; BODY_SIZES];
            self.forgot = true;
        }
        let new_flight = std::mem::take(&mut self.after_body) || new_flight;
        if new_flight {
            self.before_flight = self.last_size;
            self.flight = self.flight.wrapping_add(1);
            let last = self.flight.wrapping_sub(1);
            self.maybe.retain(|&(_, _, f)| f == last);
        } else if plain >= BODY {
            return H2Record::Continues;
        }
        let flight = self.flight;
        if first {
            self.preface_request = Some((flight, plain));
        }
        let indexed = plain <= MAX_INDEXED;
        // (Once bodies are known, a record of the last request's size is
        // the next request, sent with it.)
        let bodies_known = self.bodies.iter().any(|&b| b != 0);
        // (So, too, when the client seals requests with their bodies, as
        // the preface's record showed.)
        let sealing = !indexed && self.holds_with_preface(plain);
        let known = (indexed && self.before_flight.is_some_and(same))
            || ((bodies_known || sealing) && self.last_size.is_some_and(same))
            || self.maybe.iter().any(|&(s, _, f)| f == flight && same(s));
        if !(new_flight || known || self.multiplexed) {
            if self.maybe.len() < KEEP {
                self.maybe.push((plain, ts, flight));
            }
            return H2Record::Continues;
        }
        let multiplexed = !new_flight && !self.multiplexed;
        self.multiplexed |= multiplexed;
        if self.multiplexed {
            let class = self.classes.iter_mut().find(|(s, _)| same(*s));
            if let Some((_, n)) = class {
                *n += 1;
            } else if self.classes.len() < CLASSES {
                self.classes.push((plain, 1));
            }
        }
        // Records of this size taken for bodies were requests too (in
        // the last flight, only short ones).
        let mut earlier = Vec::new();
        self.maybe.retain(|&(size, at, f)| {
            let request = same(size) && (f == flight || indexed);
            if request {
                earlier.push(at);
            }
            !request
        });
        // (Not the first request's: its fields are not yet indexed.)
        if self.requests > 0 && !self.request_sizes.iter().any(|&s| same(s)) {
            if let Some(slot) = self.request_sizes.iter_mut().find(|s| **s == 0) {
                *slot = plain;
            }
        }
        let last_before = self.last_size.replace(plain);
        if !indexed {
            self.counted = Some(Counted {
                size: plain,
                last_before,
                new_flight,
            });
        }
        self.flight_single = new_flight;
        if plain <= MAX_CLOSING {
            self.small_since_server += 1;
        } else {
            self.small_since_server = 0;
        }
        self.requests += 1 + earlier.len() as u64;
        self.server_since_request = 0;
        H2Record::Request {
            earlier,
            multiplexed,
        }
    }

    /// Whether the client's first record carried the preface and a
    /// request and holds `plain` bytes besides the preface, a SETTINGS
    /// frame and a HEADERS frame: that request was sealed with its body
    /// (as Netty writes a request, one message), and a record of `plain`
    /// bytes is then another such request rather than a body.
    fn holds_with_preface(&self, plain: usize) -> bool {
        self.preface_request
            .is_some_and(|(_, p)| p >= PREFACE + 9 + plain + 9)
    }

    /// Whether a client record of `plain` bytes is a run of RST_STREAM
    /// or WINDOW_UPDATE frames (13 bytes each; with a SETTINGS ACK, 9),
    /// one for each of at least half the requests whose streams no run
    /// has closed yet, and at most one more, as Netty sends for the
    /// streams it closes (of a hundred: 50 and 49, or 50, 44 and 6):
    /// longer than an indexed request, and of a size no request and no
    /// body had.
    fn control_run(&mut self, plain: usize) -> bool {
        let same = |s: usize| s.abs_diff(plain) <= SAME;
        let frames = (plain / RST_STREAM) as u64;
        let open = self.requests.saturating_sub(self.streams_closed);
        let known = self.last_size.is_some_and(same)
            || self.request_sizes.iter().any(|&s| same(s))
            || self.bodies.iter().any(|&s| same(s))
            || self.classes.iter().any(|&(s, _)| same(s));
        let run = plain > MAX_INDEXED
            && matches!(plain % RST_STREAM, 0 | 9)
            && frames <= open + 1
            && frames * 2 >= open;
        if run && !known {
            self.streams_closed += frames;
            return true;
        }
        false
    }

    /// Records taken for bodies that the last answer showed were
    /// requests (each sealed with its body, sent with the flight's
    /// first), at their times: the connection is multiplexed now.
    pub(super) fn take_late(&mut self) -> Vec<Timestamp> {
        std::mem::take(&mut self.late)
    }

    /// A client record of at most 9 bytes: the first is taken for the
    /// SETTINGS ACK (a client acknowledges the server's SETTINGS once, as
    /// they come); a later one for an empty DATA frame that ends a body
    /// (curl's, early, when it had sent none of it): no body is awaited.
    /// Whether it is such a DATA frame.
    fn small_record(&mut self) -> bool {
        let data = std::mem::replace(&mut self.settings_acked, true);
        if data {
            self.answered_single = false;
            self.body_pending = false;
        }
        data
    }

    /// A client record too small to be read (`client` is not called): a
    /// record of at most 9 bytes of plaintext, `new_flight` when the
    /// server spoke last. Whether the client's last record, counted as a
    /// request, was a body (as in `client`).
    pub(super) fn small(&mut self, new_flight: bool) -> bool {
        let counted = self.counted.take().filter(|_| !new_flight);
        let data = self.small_record();
        if let Some(c) = counted.filter(|_| data) {
            self.retract(c);
            return true;
        }
        false
    }

    /// The record `counted` as a request was a body: uncounted, and its
    /// size learned; after it the next record begins a request, as after
    /// a body of a size known.
    fn retract(&mut self, counted: Counted) {
        self.requests = self.requests.saturating_sub(1);
        self.last_size = counted.last_before;
        self.small_since_server = 0;
        let same = |s: usize| s.abs_diff(counted.size) <= SAME;
        if let Some((_, n)) = self.classes.iter_mut().find(|(s, _)| same(*s)) {
            *n = n.saturating_sub(1);
        }
        learn_body(&mut self.bodies, counted.size);
        self.after_body |= counted.new_flight;
    }

    /// After a server record that answers: the client's last record, taken
    /// for the body of a request answered early, when it is answered
    /// itself (it was a request: a client that seals a request's HEADERS
    /// and its body in one record, the first request's longer with the
    /// preface), at its time.
    /// Or the client's last record, of a control frame's size, that the
    /// server could not have been waiting on (see [`WINDOW`]).
    pub(super) fn answered_body(&mut self) -> Option<Timestamp> {
        if let Some(at) = self.control_request.take() {
            self.requests += 1;
            self.server_since_request = 0;
            return Some(at);
        }
        let (at, learned) = self.provisional.take()?;
        if let Some(slot) = learned.and_then(|i| self.bodies.get_mut(i)) {
            *slot = 0;
        }
        Some(at)
    }

    /// Whether the count may be up to twice the truth: multiplexed, and
    /// the records counted fall in two sizes that each recur (four times
    /// at least, a quarter of them) — so look the HEADERS and the DATA of
    /// requests with bodies sent at once before a body's size is known
    /// (Java's HttpClient POSTing from ten threads counted 181 for 91 so),
    /// and so, too, two kinds of request; or sizes learned for bodies were
    /// forgotten; or a request's size and a body's differ by an indexed
    /// HEADERS frame: the client seals a request's HEADERS with its body,
    /// and then frames of several streams in one record (OkHttp: 88–100
    /// counted for 100 with fifty calls at once).
    pub(super) fn doubtful(&self) -> bool {
        let total: u32 = self.classes.iter().map(|(_, n)| n).sum();
        let recurring = self
            .classes
            .iter()
            .filter(|(_, n)| *n >= 4 && *n * 4 >= total);
        let long = |s: &&usize| **s > MAX_INDEXED;
        let sealing = self.request_sizes.iter().filter(long).any(|&s| {
            let headers = |b: &usize| (10..=MAX_INDEXED).contains(&s.abs_diff(*b));
            self.bodies.iter().filter(long).any(headers)
        });
        (self.multiplexed && recurring.count() >= 2) || self.forgot || sealing
    }

    /// Requests counted after the server's last record that were small
    /// enough to be GOAWAY or RST_STREAM.
    pub(super) fn closing_requests(&self) -> u64 {
        self.small_since_server
    }
}
