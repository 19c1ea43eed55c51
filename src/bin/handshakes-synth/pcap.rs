//! Output: the classic pcap stream (microseconds, Ethernet, snap length
//! 65535), each segment framed by etherparse and timed on a 10 Gbit/s link.
//!
//! Owns: [`Out`] (header, records, capture clock, byte and packet counts),
//! TCP [`Flags`], and advancing a connection's sequence number per segment.
//! Does not own: which segments are sent, or when (`conn.rs`, `sim.rs`).

use std::io::{self, Write};
use std::net::IpAddr;

use etherparse::{PacketBuilder, TcpHeader, TcpOptionElement};

use crate::conn::{Conn, Side};

/// Capture time of the first packet: 2023-11-14T22:13:20Z.
const EPOCH_SECS: u64 = 1_700_000_000;
/// The link the capture was taken on, for spacing packets in time (10 Gbit/s).
const LINK_BITS_PER_NS: u64 = 10;

// ---------------------------------------------------------------------------
// Output: pcap records, timed on a 10 Gbit/s link.

pub(crate) struct Out {
    pub(crate) w: Box<dyn Write>,
    /// Capture clock, nanoseconds since `EPOCH_SECS`: never goes backwards.
    pub(crate) clock: u64,
    frame: Vec<u8>,
    pub(crate) payload: Vec<u8>,
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
}

/// TCP flags of one segment.
#[derive(Clone, Copy, Default)]
pub(crate) struct Flags {
    pub(crate) syn: bool,
    pub(crate) ack: bool,
    pub(crate) fin: bool,
    pub(crate) rst: bool,
    pub(crate) psh: bool,
}

impl Out {
    pub(crate) fn new(w: Box<dyn Write>) -> io::Result<Out> {
        let mut out = Out {
            w,
            clock: 0,
            frame: Vec::with_capacity(2048),
            payload: Vec::with_capacity(2048),
            packets: 0,
            bytes: 0,
        };
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.extend_from_slice(&65535u32.to_le_bytes());
        header.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        out.w.write_all(&header)?;
        out.bytes += header.len() as u64;
        Ok(out)
    }

    /// Writes one segment from `from` at time `t` (or later, if the link is
    /// busy) carrying `self.payload`.
    pub(crate) fn segment(
        &mut self,
        t: u64,
        c: &mut Conn,
        from: Side,
        flags: Flags,
    ) -> io::Result<()> {
        let (src, sport, dst, dport) = c.endpoints(from);
        let seq = c.seq[from as usize];
        let ack = c.seq[from.other() as usize];
        let mut tcp = TcpHeader::new(
            sport,
            dport,
            seq,
            if from == Side::Client { 502 } else { 501 },
        );
        tcp.syn = flags.syn;
        tcp.ack = flags.ack;
        tcp.fin = flags.fin;
        tcp.rst = flags.rst;
        tcp.psh = flags.psh;
        if flags.ack {
            tcp.acknowledgment_number = ack;
        }
        if flags.syn {
            tcp.window_size = 64240;
            let _ = tcp.set_options(&[
                TcpOptionElement::MaximumSegmentSize(c.mss as u16),
                TcpOptionElement::Noop,
                TcpOptionElement::WindowScale(7),
                TcpOptionElement::SelectiveAcknowledgementPermitted,
            ]);
        }
        let ttl = if from == Side::Client { 64 } else { 57 };
        let id = &mut c.ip_id[from as usize];
        *id = id.wrapping_add(1);
        let step = PacketBuilder::ethernet2(src.mac, dst.mac);
        let step = match (src.ip, dst.ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => step.ipv4(s.octets(), d.octets(), ttl),
            (IpAddr::V6(s), IpAddr::V6(d)) => step.ipv6(s.octets(), d.octets(), ttl),
            _ => return Err(io::Error::other("mixed address families")),
        };
        self.frame.clear();
        step.tcp_header(tcp)
            .write(&mut self.frame, &self.payload)
            .map_err(io::Error::other)?;
        let ts = t.max(self.clock);
        self.clock = ts + (self.frame.len() as u64 * 8).div_ceil(LINK_BITS_PER_NS);
        let secs = EPOCH_SECS + ts / 1_000_000_000;
        let usecs = (ts % 1_000_000_000) / 1000;
        let len = self.frame.len() as u32;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(secs as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&(usecs as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&len.to_le_bytes());
        self.w.write_all(&rec)?;
        self.w.write_all(&self.frame)?;
        self.packets += 1;
        self.bytes += 16 + u64::from(len);
        // SYN and FIN take one sequence number.
        let used = self.payload.len() as u32 + u32::from(flags.syn) + u32::from(flags.fin);
        c.seq[from as usize] = seq.wrapping_add(used);
        Ok(())
    }

    /// A segment without payload.
    pub(crate) fn control(
        &mut self,
        t: u64,
        c: &mut Conn,
        from: Side,
        flags: Flags,
    ) -> io::Result<()> {
        self.payload.clear();
        self.segment(t, c, from, flags)
    }
}

pub(crate) const ACK: Flags = Flags {
    syn: false,
    ack: true,
    fin: false,
    rst: false,
    psh: false,
};
