//! How client streams end on one HTTP/2 connection other than by the
//! server's END_STREAM: a RST_STREAM from either side, and the server's
//! GOAWAY, whose last stream id says the streams above it were not
//! processed. A stream the server reset with REFUSED_STREAM before
//! answering, or one past its GOAWAY, is refused (RFC 9113 §8.7): the
//! request is marked so and counted, and the client may safely retry it.
//!
//! Does not read frames off the wire (`super::H2::data`) nor decode the
//! GOAWAY payload ([`super::limit`]).

use super::{Stream, H2};
use crate::record::Side;
use crate::time::Timestamp;

/// RST_STREAM's and GOAWAY's REFUSED_STREAM error code.
const REFUSED_STREAM: u32 = 0x7;

impl H2 {
    /// A RST_STREAM from `side` on `stream` with `error` (`None`: unread)
    /// at `ts`: the stream ends; the server's REFUSED_STREAM before a
    /// response says it did not process the request.
    pub(super) fn reset(&mut self, side: Side, stream: u32, error: Option<u32>, ts: Timestamp) {
        self.resets += 1;
        let Some(open) = self.open.remove(&stream) else {
            return;
        };
        self.limit.streams(self.open.len(), ts);
        if side == Side::Server && error == Some(REFUSED_STREAM) && !open.answered {
            self.refuse(open.index);
        }
    }

    /// The server's GOAWAY at `ts` says streams above `last` were not
    /// processed: those open without a response end, refused. Only the
    /// ids between it and an earlier GOAWAY's are looked at (those above
    /// were already): every id once, whatever the GOAWAYs.
    pub(super) fn server_goaway(&mut self, last: u32, ts: Timestamp) {
        let before = self.server_goaway.unwrap_or(u32::MAX);
        if last >= before {
            return;
        }
        self.server_goaway = Some(last);
        let above: Vec<(u32, Stream)> = self
            .open
            .range(last.saturating_add(1)..=before)
            .filter(|(_, s)| !s.answered)
            .map(|(&id, &s)| (id, s))
            .collect();
        for (id, s) in above {
            self.open.remove(&id);
            self.refuse(s.index);
        }
        self.limit.streams(self.open.len(), ts);
    }

    /// Request `index` was refused unprocessed.
    pub(super) fn refuse(&mut self, index: usize) {
        self.limit.refused = self.limit.refused.saturating_add(1);
        if let Some(ex) = self.exchanges.get_mut(index) {
            ex.refuse();
        }
    }
}
