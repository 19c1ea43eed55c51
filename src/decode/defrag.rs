//! IP fragment reassembly (IPv4, RFC 791; IPv6, RFC 8200 4.5): the one
//! piece of decoding that keeps state between packets. A fragment is held
//! until its datagram is whole; then the datagram comes out as one frame
//! (the first fragment's link header and IP header, made unfragmented, then
//! the whole payload), at the position and time of the fragment that
//! completed it, and is decoded like any frame — so a TCP segment, or a
//! tunnel, split over fragments is found whole.
//!
//! Hostile input is bounded: at most [`MAX_PENDING`] datagrams and
//! [`MAX_BYTES`] bytes are held (the oldest dropped first), a datagram
//! holds at most [`MAX_FRAGMENTS`] fragments and is dropped [`TIMEOUT`]
//! after its first fragment (Linux's `ipfrag_time`); a fragment that
//! overlaps what the datagram holds only in part (RFC 5722; the attack on
//! reassembly) drops it, one whose bytes it already holds (a duplicate) is
//! ignored. Every fragment of a datagram
//! that is dropped, or still incomplete at the end, is counted as an
//! `ipv4_fragment` / `ipv6_fragment` anomaly. Frames are found on Ethernet
//! (one VLAN tag), raw IP, BSD loopback and Linux cooked links; fragments
//! on other links (PPP, NFLOG, under MPLS) and inside tunnels are counted,
//! not reassembled.
//!
//! Does not decode anything above IP, nor decide what the datagram is.

use std::collections::{HashMap, VecDeque};

use super::fast;
use crate::record::{Anomalies, AnomalyKind};
use crate::source::{LinkType, RawPacket};
use crate::time::Timestamp;

/// Datagrams held at once, at most.
pub const MAX_PENDING: usize = 4096;
/// Bytes held at once, at most (payloads and headers).
pub const MAX_BYTES: usize = 16 << 20;
/// Fragments of one datagram, at most.
pub const MAX_FRAGMENTS: usize = 128;
/// A datagram not whole this long after its first fragment is dropped.
pub const TIMEOUT: Timestamp = Timestamp(30_000_000_000);

const IPV6_FRAGMENT: u8 = 44;
/// IPv6 extension headers that may come before a Fragment header.
const IPV6_BEFORE_FRAGMENT: [u8; 3] = [0, 43, 60];

/// What became of a frame.
pub enum Verdict<'a> {
    /// Not a fragment: decode the frame as it is.
    Pass,
    /// A fragment, held (or dropped): nothing to decode now.
    Held,
    /// The fragment that completed a datagram: decode this frame instead.
    Whole(RawPacket<'a>),
}

/// A datagram's identity (RFC 791: source, destination, protocol and
/// identification; RFC 8200: source, destination and identification).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    src: [u8; 16],
    dst: [u8; 16],
    id: u32,
    /// The IPv4 protocol; 0xffff for IPv6.
    proto: u16,
}

/// A fragment, read from its frame.
struct Fragment<'a> {
    key: Key,
    v6: bool,
    /// Byte offset of its data in the datagram's payload, and whether more
    /// fragments follow.
    offset: usize,
    more: bool,
    /// The frame up to the fragmentable part: link header, IP header and
    /// (IPv6) the extension headers before the Fragment header…
    head: &'a [u8],
    /// …where the IP header starts in it…
    ip_start: usize,
    /// …where, in `head`, the byte naming the next header sits (IPv6), and
    /// the protocol of the payload that byte must name once whole.
    next_at: usize,
    next: u8,
    /// Its part of the payload; `None` when the capture cut it short.
    data: Option<&'a [u8]>,
}

#[derive(Default)]
struct Datagram {
    first_seen: Timestamp,
    v6: bool,
    /// From the fragment at offset 0, once seen.
    head: Vec<u8>,
    ip_start: usize,
    next_at: usize,
    next: u8,
    payload: Vec<u8>,
    /// Filled extents of `payload`, in order, not overlapping.
    have: Vec<(usize, usize)>,
    /// The payload's length, once the last fragment is seen.
    total: Option<usize>,
    /// Fragments held.
    frames: u64,
}

impl Datagram {
    fn bytes(&self) -> usize {
        self.head.len() + self.payload.len()
    }

    fn whole(&self) -> bool {
        matches!((self.total, self.have.as_slice()), (Some(t), [(0, end)]) if *end == t)
    }
}

/// The fragments held, and what became of those that are gone.
#[derive(Default)]
pub struct Defragmenter {
    pending: HashMap<Key, Datagram>,
    /// Keys in order of first fragment, for the timeout and the limits; a
    /// key whose datagram is gone (or newer) is skipped.
    order: VecDeque<(Timestamp, Key)>,
    bytes: usize,
    /// The last datagram made whole.
    out: Vec<u8>,
    /// Fragment frames held (each counted once, whatever became of it).
    pub held: u64,
    /// Fragments of datagrams dropped or left incomplete.
    pub anomalies: Anomalies,
}

/// Whether `raw` may be a fragment, read from a few bytes: false for the
/// common unfragmented IPv4 and IPv6 frames on Ethernet (with at most one
/// VLAN tag) and raw IP links, true for everything else, which
/// [`Defragmenter::push`] then reads properly. Costs a few instructions per
/// frame, where reading every frame fully cost 4 % of one thread's
/// instructions.
#[inline]
pub fn may_be_fragment(raw: &RawPacket<'_>) -> bool {
    let d = raw.data;
    // The EtherType (or nothing, on raw links), then the IP header's first
    // 8 bytes: version, IPv4 flags and offset, IPv6 next header.
    let head = match raw.link {
        // One 802.1Q tag (SPAN ports): the EtherType and IP header 4 bytes on.
        LinkType::ETHERNET if d.get(12..14) == Some(&[0x81, 0x00]) => {
            d.get(16..).and_then(|h| h.first_chunk::<10>()).copied()
        }
        LinkType::ETHERNET => d.get(12..).and_then(|h| h.first_chunk::<10>()).copied(),
        LinkType::RAW | LinkType::RAW_12 | LinkType::RAW_14 | LinkType::IPV4 | LinkType::IPV6 => d
            .first_chunk::<8>()
            .map(|h| [0x08, 0x00, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]),
        _ => None,
    };
    match head {
        Some([0x08, 0x00, v, _, _, _, _, _, flags, offset]) if v >> 4 == 4 => {
            // More fragments, or an offset.
            flags & 0x3f != 0 || offset != 0
        }
        Some([0x08 | 0x86, 0x00 | 0xdd, v, _, _, _, _, _, next, _]) if v >> 4 == 6 => {
            // A Fragment header, or a header that may precede one.
            next == IPV6_FRAGMENT || IPV6_BEFORE_FRAGMENT.contains(&next)
        }
        _ => true,
    }
}

impl Defragmenter {
    /// Takes a frame: passes it on, holds it, or returns the datagram it
    /// completed. Callers skip it for frames [`may_be_fragment`] rules out.
    pub fn push<'s>(&'s mut self, raw: &RawPacket<'_>) -> Verdict<'s> {
        let Some(fragment) = fragment(raw) else {
            return Verdict::Pass;
        };
        self.held += 1;
        self.expire(raw.ts);
        let key = fragment.key;
        if !self.pending.contains_key(&key) {
            self.make_room();
            if self.order.len() >= 2 * MAX_PENDING {
                // Forget the keys of datagrams completed meanwhile.
                let pending = &self.pending;
                self.order.retain(|&(seen, k)| current(pending, seen, &k));
            }
            self.order.push_back((raw.ts, key));
            self.pending.insert(
                key,
                Datagram {
                    first_seen: raw.ts,
                    v6: fragment.v6,
                    ..Datagram::default()
                },
            );
        }
        let Some(datagram) = self.pending.get_mut(&key) else {
            return Verdict::Held;
        };
        let before = datagram.bytes();
        let added = add(datagram, &fragment);
        self.bytes = self.bytes - before + datagram.bytes();
        if !added {
            self.drop_datagram(&key);
            return Verdict::Held;
        }
        if !datagram.whole() {
            if self.bytes > MAX_BYTES {
                self.make_room();
            }
            return Verdict::Held;
        }
        let Some(datagram) = self.pending.remove(&key) else {
            return Verdict::Held;
        };
        self.bytes -= datagram.bytes();
        if !assemble(&datagram, &mut self.out) {
            self.count_dropped(&datagram);
            return Verdict::Held;
        }
        // This frame stands for the datagram: it is not held.
        self.held -= 1;
        Verdict::Whole(RawPacket {
            index: raw.index,
            ts: raw.ts,
            link: raw.link,
            orig_len: u32::try_from(self.out.len()).unwrap_or(u32::MAX),
            data: &self.out,
        })
    }

    /// The input has ended: what is still held will not be completed.
    pub fn finish(&mut self) {
        for (_, datagram) in std::mem::take(&mut self.pending) {
            self.count_dropped(&datagram);
        }
        self.order.clear();
        self.bytes = 0;
    }

    /// Drops the datagrams whose first fragment is older than [`TIMEOUT`].
    fn expire(&mut self, now: Timestamp) {
        while let Some(&(seen, _)) = self.order.front() {
            if now.0.saturating_sub(seen.0) <= TIMEOUT.0 {
                break;
            }
            self.drop_oldest();
        }
    }

    /// Drops the oldest datagrams until another fits the limits.
    fn make_room(&mut self) {
        while (self.pending.len() >= MAX_PENDING || self.bytes > MAX_BYTES) && self.drop_oldest() {}
    }

    /// Takes the oldest key off `order`, dropping its datagram if it is
    /// still held; false if there was none.
    fn drop_oldest(&mut self) -> bool {
        let Some((seen, key)) = self.order.pop_front() else {
            return false;
        };
        if current(&self.pending, seen, &key) {
            self.drop_datagram(&key);
        }
        true
    }

    fn drop_datagram(&mut self, key: &Key) {
        if let Some(datagram) = self.pending.remove(key) {
            self.bytes -= datagram.bytes();
            self.count_dropped(&datagram);
        }
    }

    fn count_dropped(&mut self, datagram: &Datagram) {
        let kind = if datagram.v6 {
            AnomalyKind::Ipv6Fragment
        } else {
            AnomalyKind::Ipv4Fragment
        };
        self.anomalies.add(kind, datagram.frames);
    }
}

/// Whether `key`, first seen at `seen`, still names a datagram held (and
/// not a newer one with the same key).
fn current(pending: &HashMap<Key, Datagram>, seen: Timestamp, key: &Key) -> bool {
    pending.get(key).is_some_and(|d| d.first_seen == seen)
}

/// Adds `fragment` to `datagram`; false if the datagram cannot be made
/// whole any more (the fragment overlaps another differently, is cut, is
/// one too many, or reaches past 65 535 bytes).
fn add(datagram: &mut Datagram, fragment: &Fragment<'_>) -> bool {
    datagram.frames += 1;
    let Some(data) = fragment.data else {
        return false;
    };
    let (start, end) = (fragment.offset, fragment.offset + data.len());
    if datagram.have.iter().any(|&(s, e)| s <= start && end <= e) {
        // Bytes it already has: a duplicate in the capture (or a
        // retransmitted fragment), ignored.
        return true;
    }
    let overlaps = datagram.have.iter().any(|&(s, e)| start < e && s < end);
    let total_known_and_exceeded = datagram.total.is_some_and(|t| end > t);
    if overlaps
        || total_known_and_exceeded
        || end > 65_535
        || datagram.have.len() >= MAX_FRAGMENTS
        || (!fragment.more && (datagram.total.is_some() || datagram.have.iter().any(|h| h.1 > end)))
        || (data.is_empty() && fragment.more)
    {
        return false;
    }
    if !fragment.more {
        datagram.total = Some(end);
    }
    if start == 0 {
        datagram.head = fragment.head.to_vec();
        datagram.ip_start = fragment.ip_start;
        datagram.next_at = fragment.next_at;
        datagram.next = fragment.next;
    }
    if datagram.payload.len() < end {
        datagram.payload.resize(end, 0);
    }
    if let Some(dst) = datagram.payload.get_mut(start..end) {
        dst.copy_from_slice(data);
    }
    let at = datagram.have.partition_point(|&(s, _)| s < start);
    datagram.have.insert(at, (start, end));
    // Merge touching extents, so that a whole datagram is one extent.
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(datagram.have.len());
    for &(s, e) in &datagram.have {
        match merged.last_mut() {
            Some(last) if last.1 == s => last.1 = e,
            _ => merged.push((s, e)),
        }
    }
    datagram.have = merged;
    true
}

/// Writes the whole datagram's frame into `out`: the first fragment's head,
/// its IP header made that of an unfragmented packet, then the payload;
/// false if it would be longer than IP allows.
fn assemble(datagram: &Datagram, out: &mut Vec<u8>) -> bool {
    let Some(total) = datagram.total else {
        return false;
    };
    let ip = datagram.ip_start;
    let headers = datagram.head.len().saturating_sub(ip);
    out.clear();
    out.extend_from_slice(&datagram.head);
    if datagram.v6 {
        // The payload length counts the extension headers kept.
        let Ok(len) = u16::try_from(headers.saturating_sub(40) + total) else {
            return false;
        };
        if let Some(field) = out.get_mut(ip + 4..ip + 6) {
            field.copy_from_slice(&len.to_be_bytes());
        }
        if let Some(byte) = out.get_mut(datagram.next_at) {
            *byte = datagram.next;
        }
    } else {
        let Ok(len) = u16::try_from(headers + total) else {
            return false;
        };
        if let Some(field) = out.get_mut(ip + 2..ip + 4) {
            field.copy_from_slice(&len.to_be_bytes());
        }
        // No more fragments, offset 0 (the checksum is left as it was).
        if let Some(field) = out.get_mut(ip + 6..ip + 8) {
            field.copy_from_slice(&[0, 0]);
        }
    }
    out.extend_from_slice(datagram.payload.get(..total).unwrap_or_default());
    true
}

/// The IP packet in a frame, and where it starts, on the links whose
/// fragments are reassembled.
fn ip_packet<'a>(raw: &RawPacket<'a>) -> Option<(usize, &'a [u8])> {
    let data = raw.data;
    let start = match raw.link {
        LinkType::ETHERNET => {
            let ip = fast::ethernet(data)?;
            data.len() - ip.len()
        }
        LinkType::RAW | LinkType::RAW_12 | LinkType::RAW_14 | LinkType::IPV4 | LinkType::IPV6 => 0,
        LinkType::NULL | LinkType::LOOP => 4,
        // SLL: the protocol (an EtherType) in bytes 14-15; SLL2: in 0-1.
        LinkType::LINUX_SLL if matches!(data.get(14..16), Some([0x08, 0x00] | [0x86, 0xdd])) => 16,
        LinkType::LINUX_SLL2 if matches!(data.get(..2), Some([0x08, 0x00] | [0x86, 0xdd])) => 20,
        _ => return None,
    };
    Some((start, data.get(start..)?))
}

/// The fragment in `raw`, if it is one.
fn fragment<'a>(raw: &RawPacket<'a>) -> Option<Fragment<'a>> {
    let (ip_start, ip) = ip_packet(raw)?;
    match ip.first()? >> 4 {
        4 => ipv4(raw.data, ip_start, ip),
        6 => ipv6(raw.data, ip_start, ip),
        _ => None,
    }
}

fn ipv4<'a>(frame: &'a [u8], ip_start: usize, ip: &'a [u8]) -> Option<Fragment<'a>> {
    let h = ip.first_chunk::<20>()?;
    let flags = u16::from_be_bytes([h[6], h[7]]);
    let (more, offset) = (flags & 0x2000 != 0, usize::from(flags & 0x1fff) * 8);
    if !more && offset == 0 {
        return None;
    }
    let header_len = usize::from(h[0] & 0x0f) * 4;
    let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if header_len < 20 || total_len < header_len {
        // Impossible: left to the decoder, which says so.
        return None;
    }
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src[..4].copy_from_slice(&h[12..16]);
    dst[..4].copy_from_slice(&h[16..20]);
    Some(Fragment {
        key: Key {
            src,
            dst,
            id: u32::from(u16::from_be_bytes([h[4], h[5]])),
            proto: u16::from(h[9]),
        },
        v6: false,
        offset,
        more,
        head: frame.get(..ip_start + header_len)?,
        ip_start,
        next_at: 0,
        next: 0,
        data: ip.get(header_len..total_len),
    })
}

fn ipv6<'a>(frame: &'a [u8], ip_start: usize, ip: &'a [u8]) -> Option<Fragment<'a>> {
    let h = ip.first_chunk::<40>()?;
    let end = 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
    // Follow the extension headers that may precede a Fragment header.
    let (mut next, mut next_at, mut at) = (h[6], 6, 40);
    for _ in 0..8 {
        if next == IPV6_FRAGMENT {
            let f = ip.get(at..)?.first_chunk::<8>()?;
            let word = u16::from_be_bytes([f[2], f[3]]);
            let (offset, more) = (usize::from(word >> 3) * 8, word & 0x1 != 0);
            if offset == 0 && !more {
                // An atomic fragment (RFC 6946): a whole packet.
                return None;
            }
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&h[8..24]);
            dst.copy_from_slice(&h[24..40]);
            return Some(Fragment {
                key: Key {
                    src,
                    dst,
                    id: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
                    proto: 0xffff,
                },
                v6: true,
                offset,
                more,
                head: frame.get(..ip_start + at)?,
                ip_start,
                next_at: ip_start + next_at,
                next: f[0],
                data: ip.get(at + 8..end),
            });
        }
        if !IPV6_BEFORE_FRAGMENT.contains(&next) {
            return None;
        }
        let ext = ip.get(at..)?.first_chunk::<2>()?;
        next = ext[0];
        next_at = at;
        at += (usize::from(ext[1]) + 1) * 8;
    }
    None
}

#[cfg(test)]
mod tests;
