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
//! next, has its size. Also which server records can answer a request
//! (not control frames, nor TLS 1.3 tickets of the sizes seen before the
//! first request).
//!
//! Does not count requests or keep their times (`flights` does).

use crate::time::Timestamp;

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
        if control {
            return H2Record::Control;
        }
        if plain >= LONG_BODY {
            self.body = true;
            return H2Record::Continues;
        }
        if std::mem::take(&mut self.body) {
            self.after_body = true;
            return H2Record::Continues;
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
        let same = |s: usize| s.abs_diff(plain) <= SAME;
        let indexed = plain <= MAX_INDEXED;
        let known = (indexed && self.before_flight.is_some_and(same))
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
        self.last_size = Some(plain);
        if plain <= MAX_CLOSING {
            self.small_since_server += 1;
        } else {
            self.small_since_server = 0;
        }
        H2Record::Request {
            earlier,
            multiplexed,
        }
    }

    /// The server sent a record of `len` bytes (`early`: in TLS 1.3,
    /// before the first request).
    pub(super) fn server_spoke(&mut self, early: bool, len: usize) {
        self.small_since_server = 0;
        if early && !self.before_first.contains(&len) {
            if let Some(slot) = self.before_first.iter_mut().find(|l| **l == 0) {
                *slot = len;
            }
        }
    }

    /// Whether a server record of `plain` bytes (`len` on the wire) can
    /// answer a request: not control frames; before the first answer, not
    /// a record of a size seen before the first request (TLS 1.3 tickets)
    /// nor the server's SETTINGS (with a WINDOW_UPDATE and the client's
    /// SETTINGS acknowledged).
    pub(super) fn answers(&mut self, plain: usize, len: usize) -> bool {
        let early = !self.answered && (self.before_first.contains(&len) || server_settings(plain));
        let answers = !(plain <= 9 || CONTROL.contains(&plain) || early);
        self.answered |= answers;
        answers
    }

    /// Whether the count may be up to twice the truth: multiplexed, and
    /// the records counted fall in two sizes that each recur (four times
    /// at least, a quarter of them) — so look the HEADERS and the DATA of
    /// requests with bodies sent at once (Java's HttpClient POSTing from
    /// ten threads: 181 counted for 91), and so, too, two kinds of request.
    pub(super) fn doubtful(&self) -> bool {
        let total: u32 = self.classes.iter().map(|(_, n)| n).sum();
        let recurring = self
            .classes
            .iter()
            .filter(|(_, n)| *n >= 4 && *n * 4 >= total);
        self.multiplexed && recurring.count() >= 2
    }

    /// Requests counted after the server's last record that were small
    /// enough to be GOAWAY or RST_STREAM.
    pub(super) fn closing_requests(&self) -> u64 {
        self.small_since_server
    }
}

/// Settings in a SETTINGS frame at most (RFC 9113 defines six; clients
/// and servers send two to six).
const MAX_SETTINGS: usize = 8;

/// Whether `plain` bytes can be a SETTINGS frame (9 + 6 per setting).
fn settings_frame(len: usize) -> bool {
    len >= 9 && (len - 9) % 6 == 0 && len <= 9 + 6 * MAX_SETTINGS
}

/// Whether `plain` bytes can be a client's SETTINGS frame, with or without
/// a WINDOW_UPDATE (13) after it.
fn settings(plain: usize) -> bool {
    settings_frame(plain) || plain.checked_sub(13).is_some_and(settings_frame)
}

/// Whether `plain` bytes can be a server's first frames: SETTINGS, with or
/// without a WINDOW_UPDATE, with or without the acknowledgment of the
/// client's (9).
fn server_settings(plain: usize) -> bool {
    settings(plain) || plain.checked_sub(9).is_some_and(settings)
}
