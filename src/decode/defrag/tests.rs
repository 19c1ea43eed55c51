//! Tests of `defrag`: reassembly on each link, the IPv6 header chain, and
//! every bound (overlaps, cuts, timeout, memory, any bytes).

use super::*;

fn raw(link: LinkType, ts: i64, data: &[u8]) -> RawPacket<'_> {
    RawPacket {
        index: 1,
        ts: Timestamp(ts),
        link,
        orig_len: data.len() as u32,
        data,
    }
}

/// A raw IPv4 fragment of datagram `id` (protocol 6).
fn v4(id: u16, offset: usize, more: bool, data: &[u8]) -> Vec<u8> {
    let mut h = vec![
        0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    h[2..4].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    let word = (offset / 8) as u16 | (u16::from(more) << 13);
    h[6..8].copy_from_slice(&word.to_be_bytes());
    h.extend_from_slice(data);
    h
}

/// A raw IPv6 fragment, after a hop-by-hop options header.
fn v6(id: u32, offset: usize, more: bool, data: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
    h[4..6].copy_from_slice(&((8 + 8 + data.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0xfd; 16]);
    h.extend_from_slice(&[0xfe; 16]);
    h.extend_from_slice(&[44, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop, PadN
    let word = offset as u16 | u16::from(more);
    h.extend_from_slice(&[6, 0]);
    h.extend_from_slice(&word.to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(data);
    h
}

fn whole(d: &mut Defragmenter, link: LinkType, frame: &[u8]) -> Option<Vec<u8>> {
    match d.push(&raw(link, 0, frame)) {
        Verdict::Whole(p) => Some(p.data.to_vec()),
        _ => None,
    }
}

#[test]
fn ipv4_out_of_order_becomes_one_unfragmented_packet() {
    let payload: Vec<u8> = (0..40).collect();
    let mut d = Defragmenter::default();
    assert!(whole(&mut d, LinkType::RAW, &v4(7, 16, true, &payload[16..32])).is_none());
    assert!(whole(&mut d, LinkType::RAW, &v4(7, 32, false, &payload[32..])).is_none());
    let out = whole(&mut d, LinkType::RAW, &v4(7, 0, true, &payload[..16])).expect("whole");
    assert_eq!(out, v4(7, 0, false, &payload));
    assert_eq!((d.held, d.pending.len(), d.bytes), (2, 0, 0));
    // A duplicate of a fragment already merged with its neighbour.
    whole(&mut d, LinkType::RAW, &v4(8, 0, true, &payload[..16]));
    whole(&mut d, LinkType::RAW, &v4(8, 16, true, &payload[16..32]));
    whole(&mut d, LinkType::RAW, &v4(8, 0, true, &payload[..16]));
    assert!(whole(&mut d, LinkType::RAW, &v4(8, 32, false, &payload[32..])).is_some());
    assert!(d.anomalies.0.is_empty());
    assert!(d.anomalies.0.is_empty());
}

#[test]
fn ipv6_fragment_header_is_taken_out() {
    let payload: Vec<u8> = (0..24).collect();
    let mut d = Defragmenter::default();
    assert!(whole(&mut d, LinkType::RAW, &v6(9, 0, true, &payload[..8])).is_none());
    let out = whole(&mut d, LinkType::RAW, &v6(9, 8, false, &payload[8..])).expect("whole");
    // Hop-by-hop now names TCP; the payload length covers it and the data.
    let mut want = v6(9, 0, false, &[]);
    want.truncate(48);
    want[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    want[40] = 6;
    want.extend_from_slice(&payload);
    assert_eq!(out, want);
    // An atomic fragment is a whole packet already.
    assert!(matches!(
        d.push(&raw(LinkType::RAW, 0, &v6(3, 0, false, b"x"))),
        Verdict::Pass
    ));
}

#[test]
fn link_headers_are_kept() {
    let payload = [5u8; 16];
    for (link, head) in [
        (LinkType::ETHERNET, {
            let mut h = vec![0u8; 12];
            h.extend_from_slice(&[0x81, 0x00, 0, 7, 0x08, 0x00]);
            h
        }),
        (LinkType::NULL, 2u32.to_le_bytes().to_vec()),
        (LinkType::LINUX_SLL, {
            let mut h = vec![0u8; 14];
            h.extend_from_slice(&[0x08, 0x00]);
            h
        }),
    ] {
        let mut d = Defragmenter::default();
        let frame = |offset, more, data: &[u8]| {
            let mut f = head.clone();
            f.extend_from_slice(&v4(1, offset, more, data));
            f
        };
        assert!(whole(&mut d, link, &frame(0, true, &payload[..8])).is_none());
        let out = whole(&mut d, link, &frame(8, false, &payload[8..])).expect("whole");
        assert_eq!(out, frame(0, false, &payload), "{link:?}");
    }
}

#[test]
fn overlaps_cuts_and_timeouts_drop_the_datagram() {
    let data = [1u8; 16];
    let mut d = Defragmenter::default();
    // Overlapping with another extent.
    d.push(&raw(LinkType::RAW, 0, &v4(1, 0, true, &data)));
    d.push(&raw(LinkType::RAW, 0, &v4(1, 8, false, &data)));
    assert_eq!(d.anomalies.0.get(&AnomalyKind::Ipv4Fragment), Some(&2));
    // Cut by the snap length.
    let frame = v4(2, 0, true, &data);
    d.push(&raw(LinkType::RAW, 0, &frame[..30]));
    assert_eq!(d.anomalies.0.get(&AnomalyKind::Ipv4Fragment), Some(&3));
    // Older than the timeout when the next fragment comes.
    d.push(&raw(LinkType::RAW, 0, &v4(3, 0, true, &data)));
    let late = TIMEOUT.0 + 1;
    assert!(matches!(
        d.push(&raw(LinkType::RAW, late, &v4(3, 16, false, &data))),
        Verdict::Held
    ));
    assert_eq!(d.anomalies.0.get(&AnomalyKind::Ipv4Fragment), Some(&4));
    // What is left at the end.
    d.finish();
    assert_eq!(d.anomalies.0.get(&AnomalyKind::Ipv4Fragment), Some(&5));
    assert_eq!((d.held, d.pending.len(), d.bytes), (5, 0, 0));
}

#[test]
fn memory_stays_bounded() {
    let mut d = Defragmenter::default();
    let big = vec![0u8; 8 * 1000];
    for id in 0..(MAX_PENDING as u32 + 500) {
        let frame = v6(id, 0, true, &big);
        d.push(&raw(LinkType::RAW, 0, &frame));
        assert!(d.pending.len() <= MAX_PENDING);
        assert!(d.bytes <= MAX_BYTES + 65_536);
    }
    let total: u64 = d.anomalies.0.values().sum();
    assert_eq!(total + d.pending.len() as u64, d.held);
    // Completed datagrams leave no keys behind for long.
    let mut d = Defragmenter::default();
    for id in 0..(3 * MAX_PENDING as u32) {
        d.push(&raw(LinkType::RAW, 0, &v6(id, 0, true, &[0; 8])));
        d.push(&raw(LinkType::RAW, 0, &v6(id, 8, false, &[0; 8])));
        assert!(d.order.len() <= 2 * MAX_PENDING);
    }
    // One datagram cannot grow past IP's 65 535 bytes.
    let mut d = Defragmenter::default();
    d.push(&raw(LinkType::RAW, 0, &v4(1, 65_528, true, &[0; 16])));
    assert_eq!(d.pending.len(), 0);
}

#[test]
fn any_bytes_without_panicking() {
    let mut d = Defragmenter::default();
    let mut rng = crate::testutil::Xorshift(0x9e37_79b9);
    for len in 0..120 {
        for _ in 0..200 {
            let mut bytes = rng.bytes(len);
            let version = if rng.next() & 1 == 0 { 0x45 } else { 0x60 };
            if let Some(b) = bytes.first_mut() {
                *b = version;
            }
            let _ = d.push(&raw(LinkType::RAW, 0, &bytes));
        }
    }
    d.finish();
    let total: u64 = d.anomalies.0.values().sum();
    assert!(total <= d.held);
}

#[test]
fn the_quick_check_never_misses_a_fragment() {
    // Whatever it rules out, the full reading would have passed too.
    let mut rng = crate::testutil::Xorshift(0x51_7cc1_b727_220a);
    let whole = v4(1, 0, false, &[0; 16]);
    let first = v4(1, 0, true, &[0; 16]);
    let six = v6(1, 0, true, &[0; 16]);
    for (link, head) in [
        (LinkType::ETHERNET, vec![0u8; 12]),
        (LinkType::ETHERNET, {
            let mut h = vec![0u8; 12];
            h.extend_from_slice(&[0x81, 0x00, 0, 7]);
            h
        }),
        (LinkType::RAW, vec![]),
    ] {
        for ip in [&whole, &first, &six] {
            let mut frame = head.clone();
            if link == LinkType::ETHERNET {
                frame.extend_from_slice(if ip[0] >> 4 == 6 {
                    &[0x86, 0xdd]
                } else {
                    &[0x08, 0x00]
                });
            }
            frame.extend_from_slice(ip);
            for _ in 0..2000 {
                let mut f = frame.clone();
                let at = (rng.next() as usize) % f.len();
                f[at] = rng.next() as u8;
                let cut = (rng.next() as usize) % (f.len() + 1);
                let p = raw(link, 0, &f[..cut]);
                if !may_be_fragment(&p) {
                    let mut d = Defragmenter::default();
                    assert!(
                        matches!(d.push(&p), Verdict::Pass),
                        "{link:?} {:?}",
                        &f[..cut]
                    );
                }
            }
        }
    }
}
