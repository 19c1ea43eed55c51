//! HTTP/2 frame counting on a cleartext connection (prior-knowledge preface,
//! or after an `Upgrade: h2c`): client-initiated streams are requests, the
//! server's first HEADERS on a stream is its response, END_STREAM ends it;
//! RST_STREAM and GOAWAY are counted, and the server's stream limit and
//! the first GOAWAY read ([`limit`]); a client stream the server reset
//! with REFUSED_STREAM before answering, or past the last stream id of a
//! GOAWAY it sent, is refused (not processed; [`ends`]). Header blocks (HEADERS and
//! CONTINUATION payloads, at most [`MAX_BLOCK`] bytes each) are decoded
//! with HPACK — every one, in order, so each side's dynamic table stays in
//! step — for the request's `:method` and `:path` and the response's
//! `:status`, `retry-after` and `date`; other frame payloads are skipped,
//! never buffered. The only module that names `loona_hpack` (its Huffman
//! decoder also serves QPACK, [`huffman`]).
//!
//! Does not handle HTTP/1 or TLS.

use std::collections::BTreeMap;

/// The octets an HPACK/QPACK Huffman-coded string (RFC 7541 §5.2) of at
/// most [`MAX_HUFFMAN`] bytes stands for; `None` if it is longer or not a
/// valid code.
pub fn huffman(coded: &[u8]) -> Option<Vec<u8>> {
    if coded.len() > MAX_HUFFMAN {
        return None;
    }
    loona_hpack::huffman::HuffmanDecoder::new()
        .decode(coded)
        .ok()
}

/// The longest Huffman-coded string [`huffman`] decodes: a request target
/// as long as servers take (nginx's 8 KiB request line, by default), of
/// which [`MAX_TARGET`] characters are kept. Only the method, path,
/// status, Retry-After and date are kept, never a cookie's value.
pub const MAX_HUFFMAN: usize = 8 * 1024;

mod ends;
mod limit;

pub use self::limit::Limit;
use self::limit::{GOAWAY_READ, MAX_PAYLOAD};
use super::http::{host_of, limits, Exchange, Exchanges, MAX_TARGET, NO_RETRY_AFTER};
use crate::record::Side;
use crate::time::Timestamp;

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
#[cfg(test)]
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
/// RST_STREAM's error code for a stream the server did not process.
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// Largest header block decoded (HEADERS and its CONTINUATIONs); a larger
/// one ends header decoding on that side (its table would fall out of step).
pub const MAX_BLOCK: usize = 64 * 1024;
/// Largest HPACK dynamic table a side may ask for (the default is 4 096).
const MAX_TABLE: usize = 64 * 1024;
/// Largest frame payload HTTP/2 allows (2^24 − 1); anything above is not HTTP/2.
const MAX_FRAME: usize = (1 << 24) - 1;
/// Open streams tracked at once.
const MAX_OPEN: usize = 10_000;

#[derive(Debug, Default)]
struct Reader {
    /// Preface bytes still expected (client, prior knowledge).
    preface_left: usize,
    header: [u8; 9],
    have: usize,
    skip: usize,
    stopped: bool,
    /// Payload bytes still to take of the frame being read (HEADERS,
    /// CONTINUATION, SETTINGS, GOAWAY), its type and flags, what was taken
    /// of it, and the bytes to skip after (a GOAWAY's debug data).
    take: usize,
    after: usize,
    taking: (u8, u8),
    taking_stream: u32,
    frame: Vec<u8>,
    headers: Headers,
}

/// One side's header blocks and HPACK state.
#[derive(Default)]
struct Headers {
    decoder: Option<Box<loona_hpack::Decoder<'static>>>,
    /// The block being gathered (HEADERS, then CONTINUATIONs).
    block: Vec<u8>,
    /// A block is open: CONTINUATION frames may follow.
    open: bool,
    /// Whose fields the block holds.
    role: Role,
    /// The block's HEADERS frame ended its stream, at this time: the
    /// response it starts ended when it was sent.
    ends: Option<Timestamp>,
    /// Header decoding stopped on this side (a block too large or
    /// malformed, an HPACK error): the table is out of step.
    off: bool,
}

impl std::fmt::Debug for Headers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Headers")
            .field("block", &self.block.len())
            .field("open", &self.open)
            .field("role", &self.role)
            .field("off", &self.off)
            .finish()
    }
}

/// What a header block says something about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Role {
    /// Nothing kept (trailers, a stream not tracked).
    #[default]
    None,
    /// The request of exchange `i`.
    Request(usize),
    /// A response header block for exchange `i`.
    Response(usize),
}

/// The fields kept from a header block.
#[derive(Default)]
struct Fields {
    method: Option<String>,
    path: Option<String>,
    authority: Option<Box<str>>,
    status: Option<u16>,
    retry_after: Option<Vec<u8>>,
    date: Option<Vec<u8>>,
}

/// An open stream.
#[derive(Clone, Copy, Debug)]
struct Stream {
    /// Its request's number in `exchanges` (`usize::MAX`: none, as for
    /// an upgrade request HTTP/1 did not hold).
    index: usize,
    /// Its response's HEADERS came.
    answered: bool,
}

/// HTTP/2 on one connection.
#[derive(Debug, Default)]
pub struct H2 {
    client: Reader,
    server: Reader,
    /// Highest client stream id seen.
    last_client_stream: u32,
    /// The last stream id of the server's latest GOAWAY: client streams
    /// above it are not processed.
    server_goaway: Option<u32>,
    /// Open streams (at most [`MAX_OPEN`]).
    open: BTreeMap<u32, Stream>,
    pub exchanges: Exchanges,
    pub requests: u64,
    pub responses: u64,
    pub resets: u64,
    pub goaway: bool,
    /// The server's stream limit against the client's streams, and the
    /// first GOAWAY (boxed: the cleartext analyzer's variants stay near
    /// in size).
    pub limit: Box<Limit>,
    pub lost_sync: bool,
    /// Reached through `Upgrade: h2c` from HTTP/1.1.
    pub upgraded: bool,
    /// The host (`:authority`) of the first request that named one.
    pub host: Option<Box<str>>,
}

impl H2 {
    /// With prior knowledge: the client starts with the preface.
    pub fn prior_knowledge(keep: usize) -> H2 {
        let mut h = H2 {
            exchanges: Exchanges::new(keep),
            ..H2::default()
        };
        h.client.preface_left = PREFACE.len();
        h
    }

    /// After `Upgrade: h2c` answered by 101: stream 1 is the upgraded request
    /// (already counted by HTTP/1), whose response comes as HTTP/2.
    pub fn after_upgrade(keep: usize, request: Option<Exchange>) -> H2 {
        let mut h = H2::prior_knowledge(keep);
        h.last_client_stream = 1;
        h.upgraded = true;
        let index = match request {
            // The 101 was interim: the response proper comes on stream 1.
            Some(ex) => h.exchanges.push(Exchange {
                status: None,
                retry_after: NO_RETRY_AFTER,
                response_first: None,
                response_last: None,
                ..ex
            }),
            None => usize::MAX,
        };
        let answered = false;
        h.open.insert(1, Stream { index, answered });
        h
    }

    pub fn looks_like_preface(bytes: &[u8]) -> bool {
        !bytes.is_empty()
            && PREFACE.starts_with(bytes.get(..PREFACE.len().min(bytes.len())).unwrap_or(&[]))
    }

    /// Whether a server's first bytes are an HTTP/2 SETTINGS frame on stream 0.
    pub fn starts_with_settings(bytes: &[u8]) -> bool {
        matches!(bytes, [a, b, c, 4, flags, 0, 0, 0, 0, ..]
            if u32::from_be_bytes([0, *a, *b, *c]) <= 16_384 && *flags & !1 == 0)
    }

    pub fn wants_data(&self) -> bool {
        !(self.client.stopped && self.server.stopped)
    }

    pub fn gap(&mut self, side: Side, len: u64) {
        let r = self.reader(side);
        let rest = r.take + r.after;
        if r.have == 0 && r.preface_left == 0 && r.take > 0 && (rest as u64) >= len {
            // Inside a frame taken: the frames go on, the frame is lost —
            // a header block with the HPACK table's step.
            r.skip = rest - len as usize;
            r.take = 0;
            r.after = 0;
            r.frame = Vec::new();
            if matches!(r.taking.0, HEADERS | CONTINUATION) {
                r.headers.off = true;
            }
            return;
        }
        if r.have == 0 && r.preface_left == 0 && (r.skip as u64) > len {
            r.skip -= len as usize;
            return;
        }
        r.stopped = true;
        self.lost_sync = true;
    }

    fn reader(&mut self, side: Side) -> &mut Reader {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    pub fn data(&mut self, side: Side, ts: Timestamp, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let r = self.reader(side);
            if r.stopped {
                return;
            }
            if r.preface_left > 0 {
                let done = PREFACE.len() - r.preface_left;
                let n = r.preface_left.min(bytes.len());
                let expected = PREFACE.get(done..done + n).unwrap_or(&[]);
                if bytes.get(..n) != Some(expected) {
                    r.stopped = true;
                    self.lost_sync = true;
                    return;
                }
                r.preface_left -= n;
                bytes = bytes.get(n..).unwrap_or(&[]);
                continue;
            }
            if r.skip > 0 {
                let n = r.skip.min(bytes.len());
                r.skip -= n;
                bytes = bytes.get(n..).unwrap_or(&[]);
                continue;
            }
            if r.take > 0 {
                let n = r.take.min(bytes.len());
                r.frame.extend_from_slice(bytes.get(..n).unwrap_or(&[]));
                r.take -= n;
                bytes = bytes.get(n..).unwrap_or(&[]);
                if r.take == 0 {
                    let after = std::mem::take(&mut r.after);
                    self.taken(side, ts);
                    self.reader(side).skip = after;
                }
                continue;
            }
            let n = (9 - r.have).min(bytes.len());
            if let (Some(dst), Some(src)) = (r.header.get_mut(r.have..r.have + n), bytes.get(..n)) {
                dst.copy_from_slice(src);
            }
            r.have += n;
            bytes = bytes.get(n..).unwrap_or(&[]);
            if r.have < 9 {
                return;
            }
            r.have = 0;
            let h = r.header;
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            if len > MAX_FRAME {
                r.stopped = true;
                self.lost_sync = true;
                return;
            }
            let (kind, flags) = (h[3], h[4]);
            let take = match kind {
                HEADERS | CONTINUATION if !r.headers.off && len <= MAX_BLOCK => Some(len),
                HEADERS | CONTINUATION => {
                    r.headers.off = true;
                    None
                }
                SETTINGS if flags & ACK == 0 && stream == 0 && len <= MAX_PAYLOAD => Some(len),
                GOAWAY if stream == 0 && len >= GOAWAY_READ => Some(GOAWAY_READ),
                RST_STREAM if stream != 0 && len == 4 => Some(len),
                _ => None,
            };
            match take {
                Some(n) => {
                    r.take = n;
                    r.after = len - n;
                    r.taking = (kind, flags);
                    r.taking_stream = stream;
                    r.frame.clear();
                }
                None => r.skip = len,
            }
            if kind == RST_STREAM && take.is_none() {
                // Not 4 bytes: its error code unread.
                self.reset(side, stream, None, ts);
            }
            self.frame(side, kind, flags, stream, ts);
            if take == Some(0) {
                self.taken(side, ts);
            }
        }
    }

    /// The payload taken of a frame was read whole.
    fn taken(&mut self, side: Side, ts: Timestamp) {
        let r = self.reader(side);
        let kind = r.taking.0;
        if matches!(kind, HEADERS | CONTINUATION) {
            return self.header_frame(side, ts);
        }
        let stream = r.taking_stream;
        let payload = std::mem::take(&mut r.frame);
        match kind {
            SETTINGS => self.limit.settings(side, &payload, ts),
            RST_STREAM => {
                let error = payload.first_chunk::<4>().map(|e| u32::from_be_bytes(*e));
                self.reset(side, stream, error, ts);
            }
            _ => {
                let last = self.limit.goaway(side, &payload, ts);
                if let (Side::Server, Some(last)) = (side, last) {
                    self.server_goaway(last, ts);
                }
            }
        }
        // Its room serves the next frame taken.
        self.reader(side).frame = payload;
    }

    /// A whole HEADERS or CONTINUATION payload was read: adds its fragment
    /// to the block, and decodes the block when it is complete.
    fn header_frame(&mut self, side: Side, ts: Timestamp) {
        // Only the first request to name a host is read for it.
        let want_host = self.host.is_none();
        let r = self.reader(side);
        let (kind, flags) = r.taking;
        let payload = std::mem::take(&mut r.frame);
        let h = &mut r.headers;
        let fragment = match kind {
            HEADERS => {
                h.block.clear();
                h.open = true;
                fragment(flags, &payload)
            }
            _ if h.open => Some(payload.as_slice()),
            // A CONTINUATION with no block open.
            _ => None,
        };
        let Some(fragment) = fragment.filter(|f| h.block.len() + f.len() <= MAX_BLOCK) else {
            h.off = true;
            return;
        };
        h.block.extend_from_slice(fragment);
        if flags & END_HEADERS == 0 {
            return;
        }
        h.open = false;
        let block = std::mem::take(&mut h.block);
        let decoder = h.decoder.get_or_insert_with(|| {
            let mut d = loona_hpack::Decoder::new();
            d.set_max_allowed_table_size(MAX_TABLE);
            Box::new(d)
        });
        let mut fields = Fields::default();
        let decoded = decoder.decode_with_cb(&block, |name, value| {
            let text = || String::from_utf8_lossy(&value).into_owned();
            match &*name {
                b":method" => fields.method = Some(text()),
                b":path" => fields.path = Some(text().chars().take(MAX_TARGET).collect()),
                // `:authority`, or a `Host` where a client sent one instead.
                b":authority" | b"host" if want_host && fields.authority.is_none() => {
                    fields.authority = host_of(&value);
                }
                b":status" => {
                    fields.status = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|v| v.parse().ok())
                }
                b"retry-after" => fields.retry_after = Some(value.into_owned()),
                b"date" => fields.date = Some(value.into_owned()),
                _ => {}
            }
        });
        if decoded.is_err() {
            h.off = true;
            return;
        }
        let role = std::mem::take(&mut h.role);
        self.apply(role, fields, ts);
    }

    /// Puts a decoded block's fields, the last of which came at `ts`, into
    /// the exchange it belongs to.
    fn apply(&mut self, role: Role, fields: Fields, ts: Timestamp) {
        match role {
            Role::Request(i) => {
                if self.host.is_none() {
                    self.host = fields.authority;
                }
                if let Some(ex) = self.exchanges.listed_mut(i) {
                    ex.method = fields.method.unwrap_or_default().into_boxed_str();
                    ex.target = fields.path.unwrap_or_default().into_boxed_str();
                }
            }
            Role::Response(i) => {
                // Interim (1xx) responses come before the final one.
                let final_status = fields.status.filter(|s| !(100..200).contains(s));
                if let Some(status) = final_status {
                    let at = self.exchanges.get(i).and_then(|e| e.response_first);
                    let at = at.unwrap_or(ts);
                    let date = fields.date.as_deref();
                    let retry_after = fields.retry_after.as_deref();
                    let retry_after = retry_after.and_then(|v| limits::retry_after(v, date, at));
                    self.exchanges.set_response(i, status, retry_after);
                    if let Some(end) = self.server.headers.ends.take() {
                        self.exchanges.response_ended(i, end);
                    }
                }
            }
            Role::None => {}
        }
    }

    fn frame(&mut self, side: Side, kind: u8, flags: u8, stream: u32, ts: Timestamp) {
        if kind == HEADERS {
            // Until known otherwise, the block says nothing kept.
            let headers = &mut self.reader(side).headers;
            headers.role = Role::None;
            headers.ends = None;
        }
        match (side, kind) {
            (Side::Client, HEADERS) if stream % 2 == 1 && stream > self.last_client_stream => {
                self.last_client_stream = stream;
                self.requests += 1;
                let index = self.exchanges.push(Exchange::started(ts));
                self.client.headers.role = Role::Request(index);
                if self.server_goaway.is_some_and(|last| stream > last) {
                    // Sent after the server's GOAWAY: it is not processed.
                    return self.refuse(index);
                }
                if self.open.len() < MAX_OPEN {
                    let answered = false;
                    self.open.insert(stream, Stream { index, answered });
                    self.limit.streams(self.open.len(), ts);
                }
            }
            (Side::Server, HEADERS | DATA) => {
                let Some(open) = self.open.get_mut(&stream) else {
                    return;
                };
                let index = open.index;
                let first = kind == HEADERS && !open.answered;
                if kind == HEADERS {
                    self.server.headers.role = Role::Response(index);
                    if first {
                        open.answered = true;
                        self.responses += 1;
                    }
                }
                if let Some(ex) = self.exchanges.get_mut(index) {
                    if first {
                        ex.response_first = Some(ts);
                    }
                    ex.response_last = Some(ts);
                }
                if flags & END_STREAM != 0 {
                    self.open.remove(&stream);
                    self.limit.streams(self.open.len(), ts);
                    // A response's end: its status is known unless this
                    // HEADERS frame starts it, whose block is read next.
                    match self
                        .exchanges
                        .get(index)
                        .is_some_and(|e| e.status.is_some())
                    {
                        true => self.exchanges.response_ended(index, ts),
                        false => self.server.headers.ends = Some(ts),
                    }
                }
            }
            (_, GOAWAY) => self.goaway = true,
            _ => {}
        }
    }
}

/// The header block fragment of a HEADERS payload: without its padding
/// and priority fields; `None` if they do not fit.
fn fragment(flags: u8, payload: &[u8]) -> Option<&[u8]> {
    let (pad, rest) = if flags & PADDED != 0 {
        let (&pad, rest) = payload.split_first()?;
        (usize::from(pad), rest)
    } else {
        (0, payload)
    };
    let rest = if flags & PRIORITY != 0 {
        rest.get(5..)?
    } else {
        rest
    };
    rest.get(..rest.len().checked_sub(pad)?)
}

#[cfg(test)]
mod tests;
