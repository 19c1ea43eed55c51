//! HTTP/1.x message framing on a cleartext connection's two reassembled
//! streams: requests and responses counted exactly (pipelining included),
//! each request's method, target, start, status and response first/last byte
//! times. Bodies are skipped by Content-Length, chunked encoding or close,
//! never buffered. The only module that names `httparse`.
//!
//! Does not handle HTTP/2 (see `h2`) or TLS; it stops at `Upgrade`.

mod body;
mod exchanges;
pub mod limits;

use std::collections::VecDeque;

use crate::record::Side;
use crate::time::Timestamp;
use body::{Body, Chunk, Framing};
pub use exchanges::{count_status, Exchange, Exchanges, PastMark, Unlisted, NO_RETRY_AFTER};
pub use limits::Limits;

/// Largest header block buffered for one message.
const MAX_HEADER: usize = 64 * 1024;
/// Headers parsed per message on the stack…
const MAX_HEADERS: usize = 96;
/// …and at most, for the rare message with more (large cookie jars,
/// tracing baggage): room for one per line of its header block.
const MOST_HEADERS: usize = 4096;
/// Characters of a request target kept.
pub const MAX_TARGET: usize = 200;
/// Characters of a request's host (`Host`, HTTP/2's `:authority`) kept: a
/// DNS name is at most 253, with a port 259.
pub const MAX_HOST: usize = 259;

/// The host a request named (`Host`, `:authority`), as text of at most
/// [`MAX_HOST`] characters, white space around it trimmed (the reports
/// sanitise what they print); `None` when empty.
pub fn host_of(value: &[u8]) -> Option<Box<str>> {
    let text = String::from_utf8_lossy(value);
    let host: String = text.trim().chars().take(MAX_HOST).collect();
    (!host.is_empty()).then(|| host.into_boxed_str())
}

#[derive(Debug, Default)]
struct Direction {
    /// Header bytes (or a chunk-size / trailer line) not yet complete.
    buf: Vec<u8>,
    body: Option<Body>,
    /// When the current message's first byte arrived.
    started: Option<Timestamp>,
    /// Stopped: upgraded, or lost track after a gap or a parse error.
    stopped: bool,
}

/// HTTP/1.x on one connection.
#[derive(Debug, Default)]
pub struct Http1 {
    client: Direction,
    server: Direction,
    /// Requests in order; the oldest without a response gets the next one.
    pub exchanges: Exchanges,
    /// Requests and final responses counted (beyond the kept list too).
    pub requests: u64,
    pub responses: u64,
    /// Index of the oldest request still waiting for its response.
    waiting: usize,
    pub connection_close: bool,
    pub upgrade: Option<String>,
    /// Gaps or unparseable bytes made the counts a lower bound.
    pub lost_sync: bool,
    /// HEAD requests waiting for their response, by request index.
    heads: VecDeque<u64>,
    /// CONNECT requests waiting for their response, by request index.
    connects: VecDeque<u64>,
    /// A CONNECT was answered 2xx: the connection became a tunnel.
    pub tunnel: bool,
    switched: bool,
    /// An HTTP/0.9 exchange: the response has no status line.
    http09: bool,
    /// The `Host` of the first request that named one.
    pub host: Option<Box<str>>,
}

impl Http1 {
    /// A parser keeping at most `keep` requests in its list (counts go on).
    pub fn new(keep: usize) -> Http1 {
        Http1 {
            exchanges: Exchanges::new(keep),
            ..Http1::default()
        }
    }

    /// Whether the first bytes of a client stream look like an HTTP/1.x request.
    pub fn looks_like_request(bytes: &[u8]) -> bool {
        let mut headers = [httparse::EMPTY_HEADER; 4];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(bytes) {
            Ok(_) => req.method.is_some_and(|m| !m.is_empty()),
            // Too many headers for our small probe still means HTTP.
            Err(httparse::Error::TooManyHeaders) => true,
            Err(_) => is_http09(bytes),
        }
    }

    pub fn wants_data(&self) -> bool {
        !(self.client.stopped && self.server.stopped)
    }

    /// Bytes of the stream went missing: counts from here on are uncertain.
    pub fn gap(&mut self, side: Side, len: u64) {
        let dir = self.dir(side);
        match dir.body {
            Some(Body::Length(n)) if n > len => {
                dir.body = Some(Body::Length(n - len));
                return;
            }
            Some(Body::Chunked(Chunk::Data(n))) if n > len => {
                dir.body = Some(Body::Chunked(Chunk::Data(n - len)));
                return;
            }
            Some(Body::UntilClose) => return,
            _ => {}
        }
        dir.stopped = true;
        self.lost_sync = true;
    }

    fn dir(&mut self, side: Side) -> &mut Direction {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    /// In-order stream bytes from `side`. Returns how many were consumed:
    /// fewer than given only when the protocol switched (`101`), and the
    /// rest belongs to the new protocol.
    pub fn data(&mut self, side: Side, ts: Timestamp, bytes: &[u8]) -> usize {
        let total = bytes.len();
        let mut bytes = bytes;
        while !bytes.is_empty() && !self.dir(side).stopped {
            let dir = self.dir(side);
            dir.started.get_or_insert(ts);
            if let Some(body) = dir.body {
                let used = self.body(side, body, ts, bytes);
                bytes = bytes.get(used..).unwrap_or(&[]);
                continue;
            }
            // Header block: look for its end in what is buffered plus this chunk.
            let dir = self.dir(side);
            let before = dir.buf.len();
            let take = bytes.len().min(MAX_HEADER.saturating_sub(before).max(1));
            let chunk = bytes.get(..take).unwrap_or(bytes);
            dir.buf.extend_from_slice(chunk);
            let parsed = if worth_parsing(before, dir.buf.len(), chunk) {
                match side {
                    Side::Client => self.request(ts),
                    Side::Server => self.response(ts),
                }
            } else {
                None
            };
            match parsed {
                Some(header_len) => {
                    // Bytes of this chunk past the header block belong to the body.
                    let used = header_len.saturating_sub(before);
                    bytes = bytes.get(used..).unwrap_or(&[]);
                    let dir = self.dir(side);
                    dir.buf.clear();
                }
                None => {
                    bytes = bytes.get(take..).unwrap_or(&[]);
                    let dir = self.dir(side);
                    if dir.buf.len() >= MAX_HEADER {
                        dir.stopped = true;
                        self.lost_sync = true;
                    }
                }
            }
        }
        total - bytes.len()
    }

    /// The server switched protocols (`101`).
    pub fn switched(&self) -> bool {
        self.switched
    }

    /// Tries to parse a request header block; returns its length when complete.
    fn request(&mut self, ts: Timestamp) -> Option<usize> {
        parse_with_room!(Request, &self.client.buf, req, parsed);
        let len = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return None,
            Err(_) if self.requests == 0 && is_http09(&self.client.buf) => return self.http09(ts),
            Err(_) => {
                self.client.stopped = true;
                self.lost_sync = true;
                return None;
            }
        };
        let method = req.method.unwrap_or_default().to_string();
        let target: String = req
            .path
            .unwrap_or_default()
            .chars()
            .take(MAX_TARGET)
            .collect();
        let framing = Framing::of(req.headers);
        // A request to a forward proxy (`GET http://a.test/ …`) names its
        // origin, not the server the client pools by: no host.
        if self.host.is_none() && !target.contains("://") {
            let host = req
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("host"));
            self.host = host.and_then(|h| host_of(h.value));
        }
        if framing.close {
            self.connection_close = true;
        }
        let start = self.client.started.take().unwrap_or(ts);
        if method == "HEAD" {
            self.heads.push_back(self.requests);
        }
        if method == "CONNECT" {
            self.connects.push_back(self.requests);
        }
        self.requests += 1;
        self.exchanges.push(Exchange {
            method: method.into_boxed_str(),
            target: target.into_boxed_str(),
            ..Exchange::started(start)
        });
        if let Some(proto) = framing.upgrade.clone() {
            self.upgrade = Some(proto);
        }
        // A request without Content-Length or chunked encoding has no body.
        self.client.body = framing
            .body(false)
            .filter(|b| *b != Body::Length(0) && *b != Body::UntilClose);
        Some(len)
    }

    /// An HTTP/0.9 request, `GET /path` and a line end with no version: the
    /// response is the raw body until the close, with no status line.
    fn http09(&mut self, ts: Timestamp) -> Option<usize> {
        let line_end = self.client.buf.iter().position(|&b| b == b'\n')?;
        let line = String::from_utf8_lossy(self.client.buf.get(..line_end)?)
            .trim_end()
            .to_string();
        let target = match line.split_once(' ') {
            Some(("GET", target)) if !target.contains(' ') => target,
            _ => {
                self.client.stopped = true;
                self.lost_sync = true;
                return None;
            }
        };
        let start = self.client.started.take().unwrap_or(ts);
        self.requests += 1;
        self.exchanges.push(Exchange {
            method: "GET".into(),
            target: target
                .chars()
                .take(MAX_TARGET)
                .collect::<String>()
                .into_boxed_str(),
            ..Exchange::started(start)
        });
        // One request per connection; the server's bytes are the response.
        self.client.stopped = true;
        self.server.body = Some(Body::UntilClose);
        self.http09 = true;
        Some(line_end + 1)
    }

    /// Tries to parse a response header block; returns its length when complete.
    fn response(&mut self, ts: Timestamp) -> Option<usize> {
        parse_with_room!(Response, &self.server.buf, resp, parsed);
        let len = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return None,
            Err(_) => {
                self.server.stopped = true;
                self.lost_sync = true;
                return None;
            }
        };
        let status = resp.code.unwrap_or(0);
        let framing = Framing::of(resp.headers);
        let first = self.server.started.take().unwrap_or(ts);
        let field = |name: &str| {
            let mut found = resp
                .headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name));
            found.next().map(|h| h.value)
        };
        let retry_after =
            field("retry-after").and_then(|v| limits::retry_after(v, field("date"), first));
        if status == 101 {
            // Switching protocols: what follows is not HTTP/1.
            self.server.stopped = true;
            self.client.stopped = true;
            self.switched = true;
            self.note_response(status, retry_after, first, ts);
            return Some(len);
        }
        if (100..200).contains(&status) {
            // Interim response (100 Continue): the final one is still to come.
            return Some(len);
        }
        if framing.close {
            self.connection_close = true;
        }
        let index = self.responses;
        let head = self.heads.front() == Some(&index);
        if head {
            self.heads.pop_front();
        }
        if self.connects.front() == Some(&index) {
            self.connects.pop_front();
            if (200..300).contains(&status) {
                // A tunnel: what follows is not HTTP/1 (usually TLS).
                self.tunnel = true;
                self.server.stopped = true;
                self.client.stopped = true;
                self.note_response(status, retry_after, first, ts);
                self.finish_response(ts);
                return Some(len);
            }
        }
        self.note_response(status, retry_after, first, ts);
        let no_body = head || status == 204 || status == 304;
        self.server.body = if no_body { None } else { framing.body(true) };
        if self.server.body.is_none() || self.server.body == Some(Body::Length(0)) {
            self.server.body = None;
            self.finish_response(ts);
        }
        Some(len)
    }

    fn note_response(
        &mut self,
        status: u16,
        retry_after: Option<u32>,
        first: Timestamp,
        ts: Timestamp,
    ) {
        self.responses += 1;
        self.exchanges
            .set_response(self.waiting, status, retry_after);
        if let Some(ex) = self.exchanges.get_mut(self.waiting) {
            ex.response_first = Some(first);
            ex.response_last = Some(ts);
        }
    }

    /// The current response's last byte arrived at `ts`.
    fn finish_response(&mut self, ts: Timestamp) {
        if let Some(ex) = self.exchanges.get_mut(self.waiting) {
            ex.response_last = Some(ts);
        }
        self.exchanges.response_ended(self.waiting, ts);
        self.waiting += 1;
    }

    /// The connection ended: a body read until close is complete now.
    pub fn finish(&mut self, last_server_ts: Option<Timestamp>) {
        // A header block cut off without its line end may not have been
        // parsed (see `worth_parsing`): bytes that cannot be HTTP still lose sync.
        let ts = last_server_ts.unwrap_or_default();
        if !self.client.stopped && self.client.body.is_none() && !self.client.buf.is_empty() {
            self.request(ts);
        }
        if !self.server.stopped && self.server.body.is_none() && !self.server.buf.is_empty() {
            self.response(ts);
        }
        if self.server.body == Some(Body::UntilClose) {
            self.server.body = None;
            if let Some(ts) = last_server_ts {
                self.finish_response(ts);
            }
        }
        // Nothing more will be parsed: give back the buffers' memory.
        self.client.buf = Vec::new();
        self.server.buf = Vec::new();
        self.exchanges.shrink_to_fit();
    }
}

/// Whether a header block that grew from `before` to `after` buffered bytes
/// with `chunk` is worth parsing again. It can only be complete once a line
/// end arrived; otherwise parse only its first bytes and each time it doubles
/// (to notice garbage early), so that a block arriving a byte per segment
/// costs linear time, not a full parse per byte.
fn worth_parsing(before: usize, after: usize, chunk: &[u8]) -> bool {
    chunk.contains(&b'\n') || after.checked_ilog2() != before.checked_ilog2()
}

/// An HTTP/0.9 request line: `GET /path` and a line end, no version.
fn is_http09(bytes: &[u8]) -> bool {
    let line = match bytes.iter().position(|&b| b == b'\n') {
        Some(end) => bytes.get(..end).unwrap_or(bytes),
        None => return false,
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.starts_with(b"GET /") && !line.iter().skip(4).any(|&b| b == b' ' || b < 0x21)
}

/// Parses `$buf` into `$msg`, a new httparse `$Msg` (`Request` or
/// `Response`), and its result into `$parsed`, with room for every header:
/// [`MAX_HEADERS`] on the stack, and as many as the block has lines when it
/// has more (httparse's `TooManyHeaders`). A macro, not a function: the
/// message borrows the headers it is parsed into.
macro_rules! parse_with_room {
    ($Msg:ident, $buf:expr, $msg:ident, $parsed:ident) => {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut more;
        let mut $msg = httparse::$Msg::new(&mut headers);
        let mut $parsed = $msg.parse($buf);
        if $parsed == Err(httparse::Error::TooManyHeaders) {
            more = vec![httparse::EMPTY_HEADER; header_room($buf)];
            $msg = httparse::$Msg::new(&mut more);
            $parsed = $msg.parse($buf);
        }
    };
}
use parse_with_room;

/// Room for every header of the block at the front of `buf` (one per
/// line, up to [`MOST_HEADERS`]; a block with more stays an error).
fn header_room(buf: &[u8]) -> usize {
    let block = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(buf, |end| buf.get(..end).unwrap_or(buf));
    let lines = block.iter().filter(|&&b| b == b'\n').count() + 1;
    lines.clamp(MAX_HEADERS, MOST_HEADERS)
}

#[cfg(test)]
mod tests;
