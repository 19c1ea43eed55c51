//! The TLS record layer of one direction: splits a reassembled byte stream
//! into records (TLS and the SSLv2-compatible ClientHello), buffering only the
//! bodies the analyzer asks for, skipping encrypted ones by their length, and
//! finding its way back to a record boundary after a gap.
//!
//! Does not interpret handshake messages; `analyze::tls` does.

use crate::time::Timestamp;

/// Largest record length accepted: 2^14 plaintext plus 2048 of expansion.
pub const MAX_RECORD: usize = (1 << 14) + 2048;

pub const CHANGE_CIPHER_SPEC: u8 = 20;
pub const ALERT: u8 = 21;
pub const HANDSHAKE: u8 = 22;
pub const APPLICATION_DATA: u8 = 23;
pub const HEARTBEAT: u8 = 24;

/// What the reader found.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A whole record; `body` is present when it was asked for.
    Record {
        content_type: u8,
        version: u16,
        len: usize,
        body: Option<&'a [u8]>,
        /// Capture time of the packet that carried the record's last byte.
        ts: Timestamp,
    },
    /// An SSLv2-format record (the compatible ClientHello, or an SSLv2 server's reply).
    SslV2 { body: &'a [u8], ts: Timestamp },
    /// Bytes where a record header should be that cannot be one.
    NotARecord,
}

fn plausible_header(h: &[u8; 5]) -> bool {
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    (CHANGE_CIPHER_SPEC..=HEARTBEAT).contains(&h[0]) && h[1] == 3 && h[2] <= 4 && len <= MAX_RECORD
}

/// Reads records from one direction's stream.
#[derive(Debug, Default)]
pub struct RecordReader {
    header: [u8; 5],
    have: usize,
    /// The record being read: (content type, version, length, SSLv2 framing).
    current: Option<(u8, u16, usize, bool)>,
    want_body: bool,
    body: Vec<u8>,
    remaining: usize,
    /// A record header has been read (an SSLv2 record can only come first).
    started: bool,
    /// After a gap: looking for the next plausible record header.
    resync: bool,
    /// The latest capture time among the current record's bytes (bytes
    /// drained from the out-of-order buffer can be older than the packet
    /// that completed the record).
    record_ts: Timestamp,
    /// Gave up on this direction.
    pub dead: bool,
    /// Times a gap forced a resynchronisation.
    pub resyncs: u64,
}

impl RecordReader {
    /// Gives back the body buffer's memory unless a kept body is being read.
    pub fn shrink(&mut self) {
        if !(self.current.is_some() && self.want_body) {
            self.body = Vec::new();
        }
    }

    /// Bytes went missing: keep skipping if they fell inside a record whose
    /// body we were skipping anyway, otherwise look for the next header.
    pub fn gap(&mut self, len: u64) {
        if self.dead {
            return;
        }
        if self.current.is_some() && !self.want_body && (self.remaining as u64) > len {
            self.remaining -= len as usize;
            return;
        }
        self.current = None;
        self.have = 0;
        self.body.clear();
        self.resync = true;
        self.started = true;
        self.resyncs += 1;
    }

    /// Consumes bytes from `input` until one item is complete (returned) or
    /// the input is used up (`None`). `want` says, for a content type,
    /// whether to keep the record's body.
    pub fn next<'s>(
        &'s mut self,
        input: &mut &[u8],
        ts: Timestamp,
        want: &dyn Fn(u8) -> bool,
    ) -> Option<Item<'s>> {
        loop {
            if self.dead {
                return None;
            }
            if self.resync {
                if input.is_empty() {
                    return None;
                }
                self.scan(input);
                continue;
            }
            let Some((content_type, version, len, sslv2)) = self.current else {
                if self.have < 5 && input.is_empty() {
                    return None;
                }
                if self.read_header(input, want) {
                    return Some(Item::NotARecord);
                }
                continue;
            };
            self.record_ts = self.record_ts.max(ts);
            if self.remaining > 0 {
                if input.is_empty() {
                    return None;
                }
                let take = self.remaining.min(input.len());
                let (chunk, rest) = input.split_at(take);
                if self.want_body {
                    // Grown with the bytes that came, never to the length a
                    // header claims: a stream of headers alone must not
                    // reserve 18 KiB a direction per connection.
                    self.body.extend_from_slice(chunk);
                }
                *input = rest;
                self.remaining -= take;
                if self.remaining > 0 {
                    return None;
                }
            }
            self.current = None;
            let ts = std::mem::take(&mut self.record_ts).max(ts);
            let body = self.want_body.then_some(self.body.as_slice());
            return Some(if sslv2 {
                Item::SslV2 {
                    body: body.unwrap_or(&[]),
                    ts,
                }
            } else {
                Item::Record {
                    content_type,
                    version,
                    len,
                    body,
                    ts,
                }
            });
        }
    }

    /// Reads (the rest of) a record header. Returns true when the bytes
    /// cannot be a record header (the direction is then dead).
    fn read_header(&mut self, input: &mut &[u8], want: &dyn Fn(u8) -> bool) -> bool {
        let take = (5 - self.have).min(input.len());
        let (chunk, rest) = input.split_at(take);
        if let Some(dst) = self.header.get_mut(self.have..self.have + take) {
            dst.copy_from_slice(chunk);
        }
        self.have += take;
        *input = rest;
        // An SSLv2 record header is 2 bytes with the top bit set.
        if !self.started && self.have >= 2 && self.header[0] & 0x80 != 0 {
            self.started = true;
            let len = usize::from(u16::from_be_bytes([self.header[0] & 0x7f, self.header[1]]));
            self.start_record(0, 0x0002, len, true, true);
            // Header bytes read past the 2-byte SSLv2 header belong to the body.
            let extra: Vec<u8> = self
                .header
                .get(2..self.have)
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            let extra = extra.get(..len.min(extra.len())).unwrap_or(&[]);
            self.body.extend_from_slice(extra);
            self.remaining -= extra.len();
            self.have = 0;
            return false;
        }
        if self.have < 5 {
            return false;
        }
        self.have = 0;
        self.started = true;
        let h = self.header;
        if !plausible_header(&h) {
            self.dead = true;
            return true;
        }
        let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
        self.start_record(
            h[0],
            u16::from_be_bytes([h[1], h[2]]),
            len,
            want(h[0]),
            false,
        );
        false
    }

    fn start_record(
        &mut self,
        content_type: u8,
        version: u16,
        len: usize,
        want: bool,
        sslv2: bool,
    ) {
        self.current = Some((content_type, version, len, sslv2));
        self.want_body = want;
        self.body.clear();
        self.remaining = len;
    }

    /// Slides over the input looking for a plausible record header; when one
    /// is found it is left in `header` for `read_header` to take.
    fn scan(&mut self, input: &mut &[u8]) {
        while let Some((&b, rest)) = input.split_first() {
            *input = rest;
            if self.have == 5 {
                self.header.copy_within(1.., 0);
                self.have = 4;
            }
            if let Some(slot) = self.header.get_mut(self.have) {
                *slot = b;
            }
            self.have += 1;
            if self.have == 5 && plausible_header(&self.header) {
                self.resync = false;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(reader: &mut RecordReader, mut input: &[u8]) -> Vec<(u8, usize, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        while let Some(item) = reader.next(&mut input, Timestamp(1), &|t| t != APPLICATION_DATA) {
            match item {
                Item::Record {
                    content_type,
                    len,
                    body,
                    ..
                } => out.push((content_type, len, body.map(<[u8]>::to_vec))),
                Item::SslV2 { body, .. } => out.push((0, body.len(), Some(body.to_vec()))),
                Item::NotARecord => out.push((255, 0, None)),
            }
        }
        out
    }

    #[test]
    fn a_body_takes_room_for_the_bytes_that_came_not_for_its_claimed_length() {
        // A handshake record header claiming the largest body, then one
        // byte of it: thousands of connections doing this must not hold
        // 18 KiB each.
        let len = u16::try_from(MAX_RECORD).unwrap_or(u16::MAX).to_be_bytes();
        let mut reader = RecordReader::default();
        assert_eq!(all(&mut reader, &[22, 3, 3, len[0], len[1], 1]), vec![]);
        assert!(
            reader.body.capacity() < 1024,
            "{} bytes held for one byte of body",
            reader.body.capacity()
        );
    }

    #[test]
    fn records_across_chunk_boundaries_and_skipped_bodies() {
        let stream = [
            &[22, 3, 1, 0, 3, 1, 2, 3][..],
            &[23, 3, 3, 0, 4, 9, 9, 9, 9],
            &[21, 3, 3, 0, 2, 2, 40],
            &[20, 3, 3, 0, 0],
        ]
        .concat();
        for split in 0..stream.len() {
            let mut r = RecordReader::default();
            let (a, b) = stream.split_at(split);
            let mut got = all(&mut r, a);
            got.extend(all(&mut r, b));
            assert_eq!(
                got,
                vec![
                    (22, 3, Some(vec![1, 2, 3])),
                    (23, 4, None),
                    (21, 2, Some(vec![2, 40])),
                    (20, 0, Some(vec![])),
                ],
                "split at {split}"
            );
        }
    }

    #[test]
    fn not_tls_is_reported_once() {
        let mut r = RecordReader::default();
        assert_eq!(all(&mut r, b"GET / HTTP/1.1\r\n"), vec![(255, 0, None)]);
        assert!(r.dead);
        assert!(all(&mut r, &[22, 3, 1, 0, 0]).is_empty());
    }

    #[test]
    fn impossible_length_is_not_a_record() {
        let mut r = RecordReader::default();
        assert_eq!(all(&mut r, &[22, 3, 3, 0xff, 0xff]), vec![(255, 0, None)]);
    }

    #[test]
    fn sslv2_client_hello_first() {
        let mut hello = vec![0x80, 6, 1, 0, 2, 0, 0, 0];
        hello.extend_from_slice(&[22, 3, 1, 0, 1, 7]);
        let mut r = RecordReader::default();
        assert_eq!(
            all(&mut r, &hello),
            vec![(0, 6, Some(vec![1, 0, 2, 0, 0, 0])), (22, 1, Some(vec![7]))]
        );
    }

    #[test]
    fn gap_inside_a_skipped_record_costs_nothing() {
        let mut r = RecordReader::default();
        assert!(all(&mut r, &[23, 3, 3, 0, 10, 1, 2]).is_empty());
        r.gap(5);
        assert_eq!(
            all(&mut r, &[8, 9, 10, 22, 3, 3, 0, 1, 5]),
            vec![(23, 10, None), (22, 1, Some(vec![5]))]
        );
        assert_eq!(r.resyncs, 0);
    }

    #[test]
    fn gap_in_a_header_resynchronises_on_the_next_plausible_header() {
        let mut r = RecordReader::default();
        assert_eq!(all(&mut r, &[22, 3, 3, 0, 4, 1]), vec![]);
        r.gap(100);
        let got = all(
            &mut r,
            &[0xde, 0xad, 23, 3, 3, 0, 2, 0, 0, 21, 3, 3, 0, 2, 1, 0],
        );
        assert_eq!(got, vec![(23, 2, None), (21, 2, Some(vec![1, 0]))]);
        assert_eq!(r.resyncs, 1);
    }
}
