//! TCP stream reassembly for one direction: segments in, in-order bytes out,
//! each chunk with the timestamp of the packet that carried it, and gaps
//! where bytes are known to exist but were never captured.
//!
//! Policy: the first copy of a byte wins; a retransmission whose bytes differ
//! from what was delivered is counted as a conflict (checked against what
//! `flow/recent.rs` remembers of the last delivered segments: their first
//! and last bytes, see there for what that misses; and, for data still
//! waiting out of order, against all of it). Out-of-order data waits
//! in a buffer bounded by `cap`; when the buffer is full, or the peer
//! acknowledges data we never saw (capture loss), the hole is reported as a
//! gap and delivery resumes after it. Sequence numbers wrap correctly.
//!
//! Does not interpret the bytes: stream analyzers (`analyze::tls`, …)
//! receive them through [`StreamSink`].

use std::collections::BTreeMap;

use crate::decode::TcpSegment;
use crate::flow::recent::Recent;
use crate::flow::seq::Seq;
use crate::time::Timestamp;

/// Receives one direction's stream.
pub trait StreamSink {
    /// In-order bytes, with the capture time of the packet that carried them.
    fn data(&mut self, ts: Timestamp, bytes: &[u8]);
    /// `len` bytes of the stream were not captured.
    fn gap(&mut self, len: u64);
}

#[derive(Debug)]
struct Pending {
    data: Vec<u8>,
    /// Length on the wire (more than `data` when the snap length cut it).
    wire: u64,
    ts: Timestamp,
}

/// `fin_at` before any FIN (no stream reaches that offset).
const NO_FIN: u64 = u64::MAX;

/// Counters a reassembler keeps about its direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    /// Retransmitted bytes that differed from the first copy (segments).
    pub conflicts: u64,
    /// Holes reported to the sink, and their total size.
    pub gaps: u64,
    pub gap_bytes: u64,
    /// Times the out-of-order buffer hit its cap.
    pub overflows: u64,
}

/// Reassembles one direction of one TCP connection.
#[derive(Debug)]
pub struct Reassembler {
    /// Sequence number of stream offset 0 (the byte after the SYN).
    base: Option<Seq>,
    /// Stream bytes delivered (or skipped as gaps) so far.
    delivered: u64,
    pending: BTreeMap<u64, Pending>,
    pending_bytes: usize,
    cap: usize,
    /// What is remembered of the last delivered bytes, to check
    /// retransmissions against.
    recent: Recent,
    /// Stream offset of the FIN, once seen.
    /// ([`NO_FIN`] until then: a bare `u64` keeps the struct 8 bytes smaller).
    fin_at: u64,
    pub stats: ReassemblyStats,
}

impl Reassembler {
    /// A reassembler buffering at most `cap` bytes of out-of-order data.
    pub fn new(cap: usize) -> Reassembler {
        Reassembler {
            base: None,
            delivered: 0,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            cap,
            recent: Recent::default(),
            fin_at: NO_FIN,
            stats: ReassemblyStats::default(),
        }
    }

    /// The stream's first byte has sequence number `seq` (known from the
    /// handshake before any payload arrived). Ignored once the stream began.
    pub fn start_at(&mut self, seq: Seq) {
        if self.base.is_none() {
            self.base = Some(seq);
        }
    }

    /// Bytes delivered (or skipped as gaps) so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes waiting out of order.
    pub fn buffered(&self) -> usize {
        self.pending_bytes
    }

    /// Stream offset of sequence number `seq`, if it is within 1 GiB of
    /// where the stream is (anything further is not this stream).
    fn offset(&self, seq: Seq) -> Option<u64> {
        self.base?;
        let diff = i64::from(seq.diff(self.seq_at(self.delivered)));
        if diff.abs() > 1 << 30 {
            return None;
        }
        u64::try_from(self.delivered as i64 + diff).ok()
    }

    /// Feeds one segment captured at `ts`. Its payload may be shorter than
    /// its length on the wire (`payload_len`) when the snap length cut it.
    pub fn segment(&mut self, seg: &TcpSegment<'_>, ts: Timestamp, sink: &mut dyn StreamSink) {
        let (seq, syn, fin, payload, wire_len) = (
            seg.seq,
            seg.flags.syn(),
            seg.flags.fin(),
            seg.payload,
            seg.payload_len,
        );
        let data_seq = Seq(seq).plus(u32::from(syn));
        if syn && self.delivered == 0 && self.pending.is_empty() && self.base != Some(data_seq) {
            // A SYN (or SYN-ACK) with a new ISN before any data: the stream starts there.
            self.base = None;
        }
        if self.base.is_none() {
            if syn || wire_len > 0 || fin {
                // Without a SYN the stream begins with the first segment seen.
                self.base = Some(data_seq);
            } else {
                return;
            }
        }
        let Some(start) = self.offset(data_seq) else {
            return;
        };
        let wire = u64::from(wire_len.max(payload.len() as u32));
        if fin && self.fin_at == NO_FIN {
            self.fin_at = start + wire;
        }
        if wire == 0 {
            return;
        }
        let end = start + wire;
        if end <= self.delivered {
            self.check_conflict(start, payload);
            return;
        }
        if start > self.delivered {
            self.buffer(start, payload, wire, ts, sink);
            return;
        }
        // Overlaps or starts at the delivery point: deliver the new part.
        let skip = self.delivered - start;
        self.check_conflict(start, payload);
        let fresh = payload.get(skip as usize..).unwrap_or(&[]);
        self.deliver(fresh, wire - skip, ts, sink);
        self.drain(sink);
    }

    /// The peer acknowledged up to `ack`: bytes below it that we never saw
    /// were lost by the capture, not the network.
    pub fn acked(&mut self, ack: u32, sink: &mut dyn StreamSink) {
        let Some(acked) = self.offset(Seq(ack)) else {
            return;
        };
        // The FIN takes one sequence number but carries no byte.
        let limit = match (self.fin_at != NO_FIN).then_some(self.fin_at) {
            Some(f) => acked.min(f),
            None if acked == self.delivered + 1 => return,
            None => acked,
        };
        if limit <= self.delivered {
            return;
        }
        let hole_end = match self.pending.keys().next() {
            Some(&first) => first.min(limit),
            None => limit,
        };
        if hole_end > self.delivered {
            self.skip_to(hole_end, sink);
            self.drain(sink);
        }
    }

    /// End of the connection: deliver whatever waits, with gaps between.
    pub fn finish(&mut self, sink: &mut dyn StreamSink) {
        while let Some(&first) = self.pending.keys().next() {
            if first > self.delivered {
                self.skip_to(first, sink);
            }
            self.drain(sink);
        }
    }

    fn deliver(&mut self, bytes: &[u8], wire: u64, ts: Timestamp, sink: &mut dyn StreamSink) {
        let present = bytes
            .get(..wire.min(bytes.len() as u64) as usize)
            .unwrap_or(&[]);
        if !present.is_empty() {
            sink.data(ts, present);
            self.recent.delivered(present);
        }
        self.delivered += present.len() as u64;
        let cut = wire - present.len() as u64;
        if cut > 0 {
            self.report_gap(cut, sink);
        }
    }

    /// The sequence number of stream offset `offset` (sequence space wraps
    /// every 2^32 bytes, so the truncation is the arithmetic).
    fn seq_at(&self, offset: u64) -> Seq {
        self.base.unwrap_or(Seq(0)).plus(offset as u32)
    }

    fn report_gap(&mut self, len: u64, sink: &mut dyn StreamSink) {
        self.stats.gaps += 1;
        self.stats.gap_bytes += len;
        self.delivered += len;
        self.recent.forget();
        sink.gap(len);
    }

    /// Reports a gap up to stream offset `to`.
    fn skip_to(&mut self, to: u64, sink: &mut dyn StreamSink) {
        if to > self.delivered {
            let len = to - self.delivered;
            self.report_gap(len, sink);
        }
    }

    /// Delivers waiting segments that have become contiguous.
    fn drain(&mut self, sink: &mut dyn StreamSink) {
        while let Some(entry) = self.pending.first_entry() {
            let start = *entry.key();
            if start > self.delivered {
                break;
            }
            let seg = entry.remove();
            self.pending_bytes -= seg.data.len();
            let end = start + seg.wire;
            if end <= self.delivered {
                continue;
            }
            let skip = self.delivered - start;
            let fresh = seg.data.get(skip as usize..).unwrap_or(&[]);
            self.deliver(fresh, seg.wire - skip, seg.ts, sink);
        }
    }

    /// Segments waiting at most: the byte cap alone does not bound them, as
    /// a segment cut by the snap length buffers no byte (a headers-only
    /// capture of one direction after a hole would otherwise keep every
    /// later segment until the end, about 100 bytes of memory each).
    fn max_segments(&self) -> usize {
        (self.cap / 64).max(1024)
    }

    fn buffer(
        &mut self,
        start: u64,
        payload: &[u8],
        wire: u64,
        ts: Timestamp,
        sink: &mut dyn StreamSink,
    ) {
        if let Some(existing) = self.pending.get_mut(&start) {
            // First copy wins where they overlap; a longer copy adds its tail.
            let n = existing.data.len().min(payload.len());
            if existing.data.get(..n) != payload.get(..n) {
                self.stats.conflicts += 1;
            }
            let tail = payload.get(n..).unwrap_or(&[]);
            if tail.is_empty() || self.pending_bytes + tail.len() > self.cap {
                return;
            }
            existing.data.extend_from_slice(tail);
            existing.wire = existing.wire.max(wire);
            self.pending_bytes += tail.len();
            return;
        }
        while (self.pending_bytes + payload.len() > self.cap
            || self.pending.len() >= self.max_segments())
            && !self.pending.is_empty()
        {
            // Full: give up on the oldest hole and deliver what follows it.
            self.stats.overflows += 1;
            if let Some(&first) = self.pending.keys().next() {
                self.skip_to(first, sink);
            }
            self.drain(sink);
        }
        if start <= self.delivered {
            // Draining caught up with this segment.
            let skip = self.delivered - start;
            if skip < wire {
                let fresh = payload.get(skip as usize..).unwrap_or(&[]);
                self.deliver(fresh, wire - skip, ts, sink);
                self.drain(sink);
            }
            return;
        }
        if payload.len() > self.cap {
            // Larger than the whole buffer: the hole before it is lost.
            self.skip_to(start, sink);
            self.deliver(payload, wire, ts, sink);
            self.drain(sink);
            return;
        }
        self.pending_bytes += payload.len();
        self.pending.insert(
            start,
            Pending {
                data: payload.to_vec(),
                wire,
                ts,
            },
        );
    }

    /// Compares a retransmitted segment with what is remembered of the
    /// delivered bytes.
    fn check_conflict(&mut self, start: u64, payload: &[u8]) {
        if self.recent.differs(self.delivered, start, payload) {
            self.stats.conflicts += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::TcpFlags;

    #[derive(Default)]
    struct Collect {
        bytes: Vec<u8>,
        gaps: Vec<u64>,
        times: Vec<Timestamp>,
    }

    impl StreamSink for Collect {
        fn data(&mut self, ts: Timestamp, bytes: &[u8]) {
            self.bytes.extend_from_slice(bytes);
            self.times.push(ts);
        }
        fn gap(&mut self, len: u64) {
            self.gaps.push(len);
            self.bytes.extend(std::iter::repeat_n(b'?', len as usize));
        }
    }

    const ISN: u32 = u32::MAX - 3; // wraps inside the stream

    fn seg(seq: u32, flags: u8, payload: &[u8], wire: u32) -> TcpSegment<'_> {
        TcpSegment {
            src: "10.0.0.1:1".parse().expect("addr"),
            dst: "10.0.0.2:2".parse().expect("addr"),
            seq,
            ack: 0,
            flags: TcpFlags(flags),
            window: 100,
            payload,
            payload_len: wire,
            overlay: None,
        }
    }

    fn send(
        r: &mut Reassembler,
        c: &mut Collect,
        seq: u32,
        flags: u8,
        data: &[u8],
        wire: u32,
        ts: i64,
    ) {
        r.segment(&seg(seq, flags, data, wire), Timestamp(ts), c);
    }

    fn feed(r: &mut Reassembler, c: &mut Collect, rel: u32, data: &[u8]) {
        let seq = ISN.wrapping_add(1).wrapping_add(rel);
        send(
            r,
            c,
            seq,
            TcpFlags::ACK,
            data,
            data.len() as u32,
            i64::from(rel),
        );
    }

    fn start() -> (Reassembler, Collect) {
        let mut r = Reassembler::new(1024);
        let mut c = Collect::default();
        send(&mut r, &mut c, ISN, TcpFlags::SYN, &[], 0, 0);
        (r, c)
    }

    #[test]
    fn in_order_across_wraparound() {
        let (mut r, mut c) = start();
        feed(&mut r, &mut c, 0, b"hello ");
        feed(&mut r, &mut c, 6, b"world");
        assert_eq!(c.bytes, b"hello world");
        assert_eq!(r.delivered(), 11);
    }

    #[test]
    fn out_of_order_waits_and_keeps_its_timestamp() {
        let (mut r, mut c) = start();
        feed(&mut r, &mut c, 6, b"world");
        assert!(c.bytes.is_empty());
        feed(&mut r, &mut c, 0, b"hello ");
        assert_eq!(c.bytes, b"hello world");
        assert_eq!(c.times, vec![Timestamp(0), Timestamp(6)]);
    }

    #[test]
    fn every_permutation_and_duplicate_gives_the_same_stream() {
        let pieces: [(u32, &[u8]); 4] = [(0, b"GET "), (4, b"/ HT"), (8, b"TP/1"), (12, b".1\r\n")];
        let orders = [
            [0, 1, 2, 3],
            [3, 2, 1, 0],
            [1, 3, 0, 2],
            [2, 0, 3, 1],
            [3, 0, 2, 1],
        ];
        for order in orders {
            let (mut r, mut c) = start();
            for &i in order.iter().chain(order.iter().rev()) {
                let (rel, data) = pieces[i];
                feed(&mut r, &mut c, rel, data);
            }
            assert_eq!(c.bytes, b"GET / HTTP/1.1\r\n", "order {order:?}");
            assert_eq!(r.stats.conflicts, 0);
            assert_eq!(r.buffered(), 0);
        }
    }

    #[test]
    fn overlapping_retransmission_first_copy_wins_and_conflict_counted() {
        let (mut r, mut c) = start();
        feed(&mut r, &mut c, 0, b"abcdef");
        feed(&mut r, &mut c, 3, b"XYZghi");
        assert_eq!(c.bytes, b"abcdefghi");
        assert_eq!(r.stats.conflicts, 1);
        feed(&mut r, &mut c, 0, b"abc");
        assert_eq!(
            r.stats.conflicts, 1,
            "an identical retransmission is no conflict"
        );
    }

    #[test]
    fn longer_copy_at_the_same_offset_adds_its_tail() {
        // Found by the property tests: [1..2) buffered, then [1..4), then [0..1).
        let (mut r, mut c) = start();
        feed(&mut r, &mut c, 1, b"b");
        feed(&mut r, &mut c, 1, b"bcd");
        feed(&mut r, &mut c, 0, b"a");
        assert_eq!(c.bytes, b"abcd");
        assert!(c.gaps.is_empty());
    }

    #[test]
    fn peer_ack_beyond_hole_reports_capture_loss() {
        let (mut r, mut c) = start();
        feed(&mut r, &mut c, 0, b"abc");
        feed(&mut r, &mut c, 10, b"klm");
        r.acked(ISN.wrapping_add(1).wrapping_add(13), &mut c);
        assert_eq!(c.gaps, vec![7]);
        assert_eq!(c.bytes, b"abc???????klm");
    }

    #[test]
    fn snaplen_cut_segment_is_data_then_gap() {
        let (mut r, mut c) = start();
        let seq = ISN.wrapping_add(1);
        send(&mut r, &mut c, seq, TcpFlags::ACK, b"abcd", 10, 1);
        feed(&mut r, &mut c, 10, b"Z");
        assert_eq!(c.bytes, b"abcd??????Z");
        assert_eq!(r.stats.gap_bytes, 6);
    }

    #[test]
    fn buffer_cap_turns_the_oldest_hole_into_a_gap() {
        let mut r = Reassembler::new(8);
        let mut c = Collect::default();
        send(&mut r, &mut c, ISN, TcpFlags::SYN, &[], 0, 0);
        feed(&mut r, &mut c, 4, b"efgh");
        feed(&mut r, &mut c, 12, b"mnop");
        assert!(c.bytes.is_empty());
        feed(&mut r, &mut c, 20, b"uvwx"); // would exceed 8 buffered bytes
        assert_eq!(r.stats.overflows, 1);
        assert!(r.buffered() <= 8);
        r.finish(&mut c);
        assert_eq!(c.bytes, b"????efgh????mnop????uvwx");
    }

    #[test]
    fn mid_stream_start_and_fin_ack_is_not_a_gap() {
        let mut r = Reassembler::new(64);
        let mut c = Collect::default();
        send(&mut r, &mut c, 1000, TcpFlags::ACK, b"late", 4, 0);
        send(
            &mut r,
            &mut c,
            1004,
            TcpFlags::ACK | TcpFlags::FIN,
            &[],
            0,
            1,
        );
        r.acked(1005, &mut c);
        assert_eq!(c.bytes, b"late");
        assert!(c.gaps.is_empty());
    }

    #[test]
    fn absurd_sequence_numbers_are_ignored() {
        let (mut r, mut c) = start();
        feed(&mut r, &mut c, 0, b"ok");
        let far = ISN.wrapping_add(1 << 31);
        send(&mut r, &mut c, far, TcpFlags::ACK, b"far away", 8, 2);
        r.finish(&mut c);
        assert_eq!(c.bytes, b"ok");
    }

    #[test]
    fn snaplen_cut_segments_after_a_hole_do_not_pile_up() {
        // Found measuring memory with the reassembly fuzz harness: segments
        // whose payload the snap length cut entirely buffer no byte, so the
        // byte cap never stopped them.
        let (mut r, mut c) = start();
        let seq = ISN.wrapping_add(1);
        for i in 1..=5000u32 {
            send(
                &mut r,
                &mut c,
                seq.wrapping_add(10 * i),
                TcpFlags::ACK,
                &[],
                10,
                1,
            );
            assert!(
                r.pending.len() <= 1024,
                "{} segments waiting",
                r.pending.len()
            );
        }
        assert!(r.stats.overflows > 0);
        r.finish(&mut c);
        assert_eq!(r.delivered(), 10 * 5001);
        assert_eq!(r.stats.gap_bytes, 10 * 5001);
    }

    #[test]
    fn reassembler_stays_small() {
        // Per direction of every connection with payload: keep it small.
        let size = std::mem::size_of::<Reassembler>();
        println!(
            "Reassembler {size} B, Recent {} B, TcpConn {} B",
            std::mem::size_of::<Recent>(),
            std::mem::size_of::<crate::flow::tcp::TcpConn>()
        );
        assert!(size <= 184, "Reassembler is {size} bytes");
    }
}
