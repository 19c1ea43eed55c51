//! IP fragments reassembled: real captures from captures/ (HTTP over IPv4
//! and IPv6, TLS 1.3) with every TCP segment that carries more than 64
//! bytes of payload split into three IP fragments, sent last-first-middle
//! or first-last-middle, give exactly the records of the original on one
//! thread and on two; fragments that never make a whole datagram (one
//! lost, or overlapping another) are anomalies, and what they carried is
//! missing from the connection.

use serde_json::Value;

use crate::support::{Packet, Pcap};
use crate::tunnels::{analyze_bytes, capture, comparable, rewritten};

/// The captures split: HTTP/1.1 over IPv4 and IPv6, TLS 1.3 over IPv4.
const ORIGINALS: &[&str] = &[
    "http-curl-5-keepalive.pcap",
    "http-curl-ipv6.pcap",
    "tls13-curl-keepalive-5.pcap",
];

/// Splits the IP packet in Ethernet frame `frame` (IPv4, or IPv6 without
/// extension headers) into `parts` fragments of datagram `id`, in order.
fn split(frame: &[u8], parts: usize, id: u16) -> Vec<Vec<u8>> {
    let (link, ip) = frame.split_at(14);
    let v6 = ip[0] >> 4 == 6;
    let (header, payload) = if v6 {
        let len = 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
        (&ip[..40], &ip[40..len])
    } else {
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        (&ip[..ihl], &ip[ihl..len])
    };
    let chunk = payload.len().div_ceil(parts).div_ceil(8) * 8;
    payload
        .chunks(chunk)
        .enumerate()
        .map(|(k, data)| {
            let offset = k * chunk;
            let more = offset + data.len() < payload.len();
            let mut f = link.to_vec();
            let mut h = header.to_vec();
            if v6 {
                let next = h[6];
                h[6] = 44;
                h[4..6].copy_from_slice(&u16::try_from(8 + data.len()).unwrap().to_be_bytes());
                f.extend_from_slice(&h);
                let word = u16::try_from(offset).unwrap() | u16::from(more);
                f.extend_from_slice(&[next, 0]);
                f.extend_from_slice(&word.to_be_bytes());
                f.extend_from_slice(&u32::from(id).to_be_bytes());
            } else {
                let len = u16::try_from(h.len() + data.len()).unwrap();
                h[2..4].copy_from_slice(&len.to_be_bytes());
                h[4..6].copy_from_slice(&id.to_be_bytes());
                let word = u16::try_from(offset / 8).unwrap() | (u16::from(more) << 13);
                h[6..8].copy_from_slice(&word.to_be_bytes());
                f.extend_from_slice(&h);
            }
            f.extend_from_slice(data);
            f
        })
        .collect()
}

/// Puts a datagram's fragments (given in order) in the order they are sent.
type Arrange = fn(Vec<Vec<u8>>) -> Vec<Vec<u8>>;

/// TCP payload bytes in an Ethernet frame (IPv4 or IPv6, no extension headers).
fn tcp_payload(frame: &[u8]) -> usize {
    let ip = &frame[14..];
    let (proto, ip_header, ip_len) = if ip[0] >> 4 == 6 {
        (
            ip[6],
            40,
            40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])),
        )
    } else {
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        (ip[9], ihl, usize::from(u16::from_be_bytes([ip[2], ip[3]])))
    };
    if proto != 6 {
        return 0;
    }
    let tcp_header = usize::from(ip[ip_header + 12] >> 4) * 4;
    ip_len.saturating_sub(ip_header + tcp_header)
}

/// The capture with each large segment's fragments arranged by `arrange`
/// (given the fragments in order; returns the frames to write, all at the
/// original segment's time); also how many fragments it wrote in all.
fn fragmented(name: &str, arrange: Arrange) -> (Vec<u8>, u64) {
    let mut fragments = 0;
    let mut id = 0u16;
    let packets = rewritten(&capture(name), |ts, frame| {
        if tcp_payload(frame) <= 64 {
            return vec![Packet::new(ts, frame.to_vec())];
        }
        id += 1;
        let frames = arrange(split(frame, 3, id));
        fragments += frames.len() as u64;
        frames.into_iter().map(|f| Packet::new(ts, f)).collect()
    });
    (Pcap::new(1).write(&packets), fragments)
}

fn without_packets(summary: &Value) -> Value {
    let mut s = comparable(summary.clone());
    if let Some(o) = s.as_object_mut() {
        o.remove("packets");
    }
    s
}

#[test]
fn fragmented_segments_give_the_originals_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    let arrangements: [(&str, Arrange); 3] = [
        ("last, first, middle", |mut f| {
            f.rotate_right(1);
            f.swap(1, 2);
            f
        }),
        ("first, last, middle", |mut f| {
            f.swap(1, 2);
            f
        }),
        ("in order, the first twice", |mut f| {
            f.insert(1, f[0].clone());
            f
        }),
    ];
    for original in ORIGINALS {
        let plain = std::fs::read(capture(original)).expect("reads");
        let (summary, records) = analyze_bytes(dir.path(), "plain.pcap", &plain, 1);
        for (how, arrange) in arrangements {
            let (bytes, written) = fragmented(original, arrange);
            for threads in [1, 2] {
                let (s, r) = analyze_bytes(dir.path(), "split.pcap", &bytes, threads);
                let what = format!("{original}, {how}, {threads} thread(s)");
                assert_eq!(r, records, "{what}: records");
                assert_eq!(
                    without_packets(&s),
                    without_packets(&summary),
                    "{what}: summary"
                );
                assert_eq!(
                    s["packets"]["tcp"], summary["packets"]["tcp"],
                    "{what}: TCP packets"
                );
                let datagrams = written / if how.contains("twice") { 4 } else { 3 };
                assert_eq!(
                    s["packets"]["fragments"].as_u64(),
                    Some(written - datagrams),
                    "{what}: fragments held"
                );
                assert!(datagrams > 0, "{what}: something was split");
            }
        }
    }
}

#[test]
fn fragments_that_never_make_a_datagram_are_anomalies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let original = "http-curl-5-keepalive.pcap";
    let plain = std::fs::read(capture(original)).expect("reads");
    let (_, records) = analyze_bytes(dir.path(), "plain.pcap", &plain, 1);
    let cases: [(&str, Arrange); 2] = [
        ("the middle one lost", |mut f| {
            f.remove(1);
            f
        }),
        ("the middle one overlapping the first", |mut f| {
            // Moved 8 bytes down: it now overlaps the first fragment.
            let at = 14 + 6;
            let word = u16::from_be_bytes([f[1][at], f[1][at + 1]]) - 1;
            f[1][at..at + 2].copy_from_slice(&word.to_be_bytes());
            f
        }),
    ];
    for (how, arrange) in cases {
        let (bytes, written) = fragmented(original, arrange);
        for threads in [1, 2] {
            let (s, r) = analyze_bytes(dir.path(), "split.pcap", &bytes, threads);
            let what = format!("{how}, {threads} thread(s)");
            assert_eq!(
                s["anomalies"]["ipv4_fragment"].as_u64(),
                Some(written),
                "{what}: every fragment an anomaly"
            );
            assert_eq!(s["packets"]["fragments"].as_u64(), Some(written), "{what}");
            let r = r.as_array().expect("records");
            assert_eq!(
                r.len(),
                records.as_array().expect("records").len(),
                "{what}"
            );
            // Every request and response was split: none is left.
            assert!(
                r.iter()
                    .all(|c| c["http"]["requests"] == 0 && c["tcp"]["bytes"]["client"] == 0),
                "{what}: the split segments are lost"
            );
        }
    }
}
