//! HTTP/2 frame counting on a cleartext connection (prior-knowledge preface,
//! or after an `Upgrade: h2c`): client-initiated streams are requests, the
//! server's first HEADERS on a stream is its response, END_STREAM ends it;
//! RST_STREAM and GOAWAY are counted. Frame payloads are skipped, never
//! buffered; header blocks are not decoded.
//!
//! Does not handle HTTP/1 or TLS.

use std::collections::BTreeMap;

use super::http::Exchange;
use crate::record::Side;
use crate::time::Timestamp;

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
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
}

/// HTTP/2 on one connection.
#[derive(Debug, Default)]
pub struct H2 {
    client: Reader,
    server: Reader,
    /// Highest client stream id seen.
    last_client_stream: u32,
    /// Open streams: id → index in `exchanges` (or usize::MAX when not kept).
    open: BTreeMap<u32, usize>,
    pub exchanges: Vec<Exchange>,
    keep: usize,
    pub requests: u64,
    pub responses: u64,
    pub resets: u64,
    pub goaway: bool,
    pub lost_sync: bool,
    /// Reached through `Upgrade: h2c` from HTTP/1.1.
    pub upgraded: bool,
}

impl H2 {
    /// With prior knowledge: the client starts with the preface.
    pub fn prior_knowledge(keep: usize) -> H2 {
        let mut h = H2 {
            keep,
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
            Some(ex) => {
                // The 101 was interim: the response proper comes on stream 1.
                h.exchanges.push(Exchange {
                    status: None,
                    response_first: None,
                    response_last: None,
                    ..ex
                });
                0
            }
            None => usize::MAX,
        };
        h.open.insert(1, index);
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
            r.skip = len;
            self.frame(side, h[3], h[4], stream, ts);
        }
    }

    fn frame(&mut self, side: Side, kind: u8, flags: u8, stream: u32, ts: Timestamp) {
        match (side, kind) {
            (Side::Client, HEADERS) if stream % 2 == 1 && stream > self.last_client_stream => {
                self.last_client_stream = stream;
                self.requests += 1;
                let index = if self.exchanges.len() < self.keep {
                    self.exchanges.push(Exchange::started(ts));
                    self.exchanges.len() - 1
                } else {
                    usize::MAX
                };
                if self.open.len() < MAX_OPEN {
                    self.open.insert(stream, index);
                }
            }
            (Side::Server, HEADERS | DATA) => {
                let Some(&index) = self.open.get(&stream) else {
                    return;
                };
                let ex = self.exchanges.get_mut(index);
                if kind == HEADERS {
                    if let Some(ex) = ex {
                        if ex.response_first.is_none() {
                            ex.response_first = Some(ts);
                            self.responses += 1;
                        }
                        ex.response_last = Some(ts);
                    } else if index == usize::MAX {
                        self.responses += 1;
                        self.open.insert(stream, usize::MAX - 1);
                    }
                } else if let Some(ex) = ex {
                    ex.response_last = Some(ts);
                }
                if flags & END_STREAM != 0 {
                    self.open.remove(&stream);
                }
            }
            (_, RST_STREAM) => {
                self.resets += 1;
                self.open.remove(&stream);
            }
            (_, GOAWAY) => self.goaway = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
        let mut f = (len as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend(std::iter::repeat_n(0u8, len));
        f
    }

    #[test]
    fn counts_streams_responses_and_resets() {
        let mut h = H2::prior_knowledge(10);
        let mut client = PREFACE.to_vec();
        client.extend(frame(4, 0, 0, 6)); // SETTINGS
        for s in [1u32, 3, 5] {
            client.extend(frame(HEADERS, END_STREAM | 0x4, s, 20));
        }
        client.extend(frame(HEADERS, 0x4, 3, 5)); // trailers on an old stream: not new
        for (i, b) in client.iter().enumerate() {
            h.data(Side::Client, Timestamp(i as i64), &[*b]);
        }
        let mut server = frame(4, 0, 0, 0);
        server.extend(frame(HEADERS, 0x4, 1, 10));
        server.extend(frame(DATA, END_STREAM, 1, 100));
        server.extend(frame(HEADERS, END_STREAM | 0x4, 5, 10));
        server.extend(frame(RST_STREAM, 0, 3, 4));
        server.extend(frame(GOAWAY, 0, 0, 8));
        h.data(Side::Server, Timestamp(1000), &server);
        assert_eq!(
            (h.requests, h.responses, h.resets, h.goaway),
            (3, 2, 1, true)
        );
        assert!(h.exchanges[0].response_last.is_some());
        assert!(!h.lost_sync);
    }

    #[test]
    fn server_settings_first() {
        assert!(H2::starts_with_settings(&frame(4, 0, 0, 18)));
        assert!(!H2::starts_with_settings(b"220 smtp.example.com ESMTP"));
        assert!(!H2::starts_with_settings(b"HTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn wrong_preface_stops() {
        let mut h = H2::prior_knowledge(1);
        h.data(Side::Client, Timestamp(0), b"PRI * HTTP/1.1");
        assert!(h.lost_sync);
        assert!(H2::looks_like_preface(b"PRI * HT"));
        assert!(!H2::looks_like_preface(b"GET / HTTP/1.1"));
    }

    #[test]
    fn upgrade_response_on_stream_one() {
        let mut h = H2::after_upgrade(4, None);
        let mut server = frame(4, 0, 0, 0);
        server.extend(frame(HEADERS, END_STREAM | 0x4, 1, 10));
        h.data(Side::Server, Timestamp(5), &server);
        assert_eq!((h.requests, h.responses), (0, 1));
    }
}
