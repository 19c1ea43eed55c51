//! Counts QUIC connections by their first packet, from the long headers
//! `decode` reads: an Initial or 0-RTT packet (a 0-RTT one may be captured
//! first) whose destination connection ID is at least 8 bytes (RFC 9000
//! §7.2: a client's first one is) and was not seen before as a connection
//! ID of either side. The server's Initial is addressed to the client's
//! source ID, the client's next ones to the server's, and after a Retry to
//! the ID the Retry gave: all seen already.
//!
//! Does not decrypt or follow QUIC connections, which are not analyzed.

use std::collections::HashSet;

use crate::decode::LongHeader;

/// Connection IDs remembered; when full, forgotten all at once (a client's
/// later Initial of a connection that old would count it again).
const MAX_IDS: usize = 65_536;

/// The connection IDs seen in long headers.
#[derive(Debug, Default)]
pub struct QuicConnections {
    seen: HashSet<Box<[u8]>>,
}

impl QuicConnections {
    /// Notes a datagram's long header; true when it opens a connection.
    pub fn opens(&mut self, header: &LongHeader<'_>) -> bool {
        let new = header.opening && header.dcid.len() >= 8 && !self.seen.contains(header.dcid);
        for id in [header.dcid, header.scid] {
            if !id.is_empty() && !self.seen.contains(id) {
                if self.seen.len() >= MAX_IDS {
                    self.seen.clear();
                }
                self.seen.insert(id.into());
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initial<'a>(dcid: &'a [u8], scid: &'a [u8]) -> LongHeader<'a> {
        LongHeader {
            opening: true,
            dcid,
            scid,
        }
    }

    #[test]
    fn a_connection_counts_once_through_its_handshake_and_a_retry() {
        let mut q = QuicConnections::default();
        let (original, client, server, retry) = ([1; 8], [2; 8], [3; 8], [4; 8]);
        assert!(
            q.opens(&initial(&original, &client)),
            "the client's first Initial"
        );
        assert!(
            !q.opens(&initial(&original, &client)),
            "its second, same IDs"
        );
        // A Retry (not an Initial) from the server, then the client again.
        let retry_header = LongHeader {
            opening: false,
            dcid: &client,
            scid: &retry,
        };
        assert!(!q.opens(&retry_header));
        assert!(!q.opens(&initial(&retry, &client)), "after the Retry");
        assert!(!q.opens(&initial(&client, &server)), "the server's Initial");
        assert!(!q.opens(&initial(&server, &client)), "the client's next");
        // A client with an empty source ID: the server answers to none.
        assert!(q.opens(&initial(&[9; 8], &[])));
        assert!(!q.opens(&initial(&[], &[5; 8])), "the server's Initial");
        assert!(q.opens(&initial(&[6; 20], &[])), "another connection");
    }

    #[test]
    fn memory_is_bounded() {
        let mut q = QuicConnections::default();
        for i in 0..(MAX_IDS as u32 + 10) {
            let id = i.to_be_bytes().repeat(2);
            assert!(q.opens(&initial(&id, &[])));
        }
        assert!(q.seen.len() <= MAX_IDS);
    }
}
