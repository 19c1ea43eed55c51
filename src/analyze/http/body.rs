//! HTTP/1.x message bodies: the framing the headers announce
//! (Content-Length, chunked, until close) and skipping body bytes without
//! buffering them; only a chunk-size or trailer line is held.
//!
//! Does not parse request or response heads (`mod.rs`).

use super::{Http1, MAX_HEADER};
use crate::record::Side;
use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Chunk {
    /// Reading a chunk-size line.
    Size,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// The CRLF after chunk data, this many bytes left.
    DataEnd(u8),
    /// Trailer lines after the last chunk.
    Trailers,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Body {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

impl Http1 {
    /// Consumes body bytes; returns how many were used.
    pub(super) fn body(&mut self, side: Side, body: Body, ts: Timestamp, bytes: &[u8]) -> usize {
        let (used, next) = match body {
            Body::Length(n) => {
                let used = (n.min(bytes.len() as u64)) as usize;
                let left = n - used as u64;
                (used, (left > 0).then_some(Body::Length(left)))
            }
            Body::UntilClose => (bytes.len(), Some(Body::UntilClose)),
            Body::Chunked(state) => {
                let (used, next) = self.chunked(side, state, bytes);
                (used, next.map(Body::Chunked))
            }
        };
        if side == Side::Server {
            if self.http09 && self.responses == 0 {
                self.responses = 1;
                if let Some(ex) = self.exchanges.get_mut(self.waiting) {
                    ex.response_first = Some(ts);
                }
            }
            if let Some(ex) = self.exchanges.get_mut(self.waiting) {
                ex.response_last = Some(ts);
            }
        }
        let dir = self.dir(side);
        dir.body = next;
        if next.is_none() {
            dir.started = None;
            if side == Side::Server {
                self.finish_response(ts);
            }
        }
        used
    }

    fn chunked(&mut self, side: Side, state: Chunk, bytes: &[u8]) -> (usize, Option<Chunk>) {
        match state {
            Chunk::Data(n) => {
                let used = n.min(bytes.len() as u64) as usize;
                let left = n - used as u64;
                (
                    used,
                    Some(if left > 0 {
                        Chunk::Data(left)
                    } else {
                        Chunk::DataEnd(2)
                    }),
                )
            }
            Chunk::DataEnd(n) => {
                let used = usize::from(n).min(bytes.len());
                let left = n - used as u8;
                (
                    used,
                    Some(if left > 0 {
                        Chunk::DataEnd(left)
                    } else {
                        Chunk::Size
                    }),
                )
            }
            Chunk::Size | Chunk::Trailers => {
                // A line: buffer up to its LF.
                let (line_part, complete) = match bytes.iter().position(|&b| b == b'\n') {
                    Some(i) => (bytes.get(..=i).unwrap_or(bytes), true),
                    None => (bytes, false),
                };
                let dir = self.dir(side);
                dir.buf.extend_from_slice(line_part);
                if dir.buf.len() > MAX_HEADER {
                    dir.stopped = true;
                    self.lost_sync = true;
                    return (bytes.len(), None);
                }
                if !complete {
                    return (line_part.len(), Some(state));
                }
                let line = std::mem::take(&mut dir.buf);
                let next = if state == Chunk::Trailers {
                    // An empty line ends the trailers, and the message.
                    if line == b"\r\n" || line == b"\n" {
                        None
                    } else {
                        Some(Chunk::Trailers)
                    }
                } else {
                    match httparse::parse_chunk_size(&line) {
                        Ok(httparse::Status::Complete((_, 0))) => Some(Chunk::Trailers),
                        Ok(httparse::Status::Complete((_, n))) => Some(Chunk::Data(n)),
                        _ => {
                            dir.stopped = true;
                            self.lost_sync = true;
                            None
                        }
                    }
                };
                (line_part.len(), next)
            }
        }
    }
}

/// What the headers say about the body and the connection.
pub(super) struct Framing {
    pub(super) length: Option<u64>,
    pub(super) chunked: bool,
    pub(super) close: bool,
    pub(super) upgrade: Option<String>,
}

impl Framing {
    pub(super) fn of(headers: &[httparse::Header<'_>]) -> Framing {
        let mut f = Framing {
            length: None,
            chunked: false,
            close: false,
            upgrade: None,
        };
        for h in headers {
            let value = String::from_utf8_lossy(h.value);
            let value = value.trim();
            if h.name.eq_ignore_ascii_case("content-length") {
                f.length = value.parse().ok();
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                f.chunked = value
                    .to_ascii_lowercase()
                    .split(',')
                    .any(|t| t.trim() == "chunked");
            } else if h.name.eq_ignore_ascii_case("connection") {
                f.close |= value
                    .to_ascii_lowercase()
                    .split(',')
                    .any(|t| t.trim() == "close");
            } else if h.name.eq_ignore_ascii_case("upgrade") {
                f.upgrade = Some(value.chars().take(40).collect());
            }
        }
        f
    }

    /// The body framing; responses without length or chunking run to the close.
    pub(super) fn body(&self, response: bool) -> Option<Body> {
        if self.chunked {
            Some(Body::Chunked(Chunk::Size))
        } else if let Some(n) = self.length {
            Some(Body::Length(n))
        } else if response {
            Some(Body::UntilClose)
        } else {
            None
        }
    }
}
