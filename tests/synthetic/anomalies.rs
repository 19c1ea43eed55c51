//! Synthetic captures: what is skipped and counted (non-TCP frames, IP
//! fragments, malformed headers, snap-length cuts, timestamps going back),
//! the idle timeout and the connection cap.

use super::*;

// ---------------------------------------------------------------- anomalies

/// The standard connection in Ethernet frames with `extra` frames appended.
fn basic_with(extra: Vec<Vec<u8>>) -> Value {
    let mut packets = basic().packets(Link::Ethernet);
    let mut ts = T0 + ms(3);
    for data in extra {
        packets.push(Packet::new(ts, data));
        ts += us(1);
    }
    analyze(&Pcap::new(1).write(&packets))
}

#[test]
fn non_tcp_frames_are_skipped() {
    let v = basic_with(vec![
        udp_frame(addr("10.0.0.1:5353"), addr("10.0.0.2:53"), b"query"),
        arp_frame(),
    ]);
    assert_eq!(connections(&v), 1);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
    assert_u64(&v, "/summary/packets/total", 10);
    assert_u64(&v, "/summary/packets/tcp", 8);
    assert_u64(&v, "/summary/packets/skipped", 2);
    assert_eq!(at(&v, "/summary/anomalies"), &serde_json::json!({}));
}

#[test]
fn ipv4_fragments_never_whole_are_counted() {
    let mut seg = Seg::new(addr("10.0.0.5:40000"), addr(SERVER), 1);
    seg.payload = vec![0; 64];
    let v = basic_with(vec![
        ipv4_fragment_frame(&seg, 0, true),
        ipv4_fragment_frame(&seg, 100, false),
    ]);
    // Offsets 0 and 800 with a hole between: never whole.
    assert_u64(&v, "/summary/anomalies/ipv4_fragment", 2);
    assert_u64(&v, "/summary/packets/fragments", 2);
    assert_u64(&v, "/summary/packets/skipped", 0);
    assert_eq!(connections(&v), 1);
}

#[test]
fn ipv6_fragments_never_whole_are_counted() {
    let mut seg = Seg::new(addr(V6_CLIENT), addr(V6_SERVER), 1);
    seg.payload = vec![0; 64];
    seg.ipv6_ext = Some(Ipv6Ext::Fragment);
    let v = basic_with(vec![Link::Ethernet.frame(&seg)]);
    // A first fragment whose others never come.
    assert_u64(&v, "/summary/anomalies/ipv6_fragment", 1);
    assert_u64(&v, "/summary/packets/fragments", 1);
    assert_u64(&v, "/summary/packets/skipped", 0);
    assert_eq!(connections(&v), 1);
}

#[test]
fn malformed_ip_and_tcp_headers_are_counted() {
    let frame = || Link::Ethernet.frame(&basic().segs[3].seg);
    let ip = Link::Ethernet.header_len();
    let mut bad_ihl = frame();
    bad_ihl[ip] = 0x44;
    let mut bad_offset = frame();
    bad_offset[ip + 20 + 12] = 0x40;
    let v = basic_with(vec![bad_ihl, bad_offset]);
    assert_u64(&v, "/summary/anomalies/malformed_ip", 1);
    assert_u64(&v, "/summary/anomalies/malformed_tcp", 1);
    assert_u64(&v, "/summary/packets/skipped", 2);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
}

#[test]
fn snaplen_cut_keeps_the_connection_and_wire_bytes() {
    let mut packets = basic().packets(Link::Ethernet);
    // The 900-byte response is captured with only 100 bytes of payload.
    let response = 4;
    let caplen = Link::Ethernet.header_len() + 20 + 20 + 100;
    let cut = packets[response].clone().cut(caplen);
    packets[response] = cut;
    let mut pcap = Pcap::new(1);
    pcap.snaplen = caplen as u32;
    let v = analyze(&pcap.write(&packets));
    assert_only_basic(&v, CLIENT, SERVER);
    assert_u64(&v, "/summary/anomalies/snaplen_cut", 1);
    assert_u64(conn(&v, 0), "/anomalies/snaplen_cut", 1);
}

#[test]
fn snaplen_cut_of_a_padded_frame_counts_only_the_tcp_payload() {
    let mut c = opened();
    c.data(Side::Client, T0 + us(200), 2);
    let mut packets = c.packets(Link::Ethernet);
    // 14 + 20 + 20 + 2 = 56 bytes, padded to the 60-byte Ethernet minimum,
    // captured with a headers-only snaplen of 54.
    let data = packets.pop().expect("data frame");
    let mut padded = data.data.clone();
    padded.resize(60, 0);
    packets.push(Packet::new(data.ts, padded).cut(54));
    let v = analyze(&Pcap::new(1).write(&packets));
    assert_u64(conn(&v, 0), "/tcp/bytes/client", 2);
}

#[test]
fn timestamps_going_backwards_are_counted() {
    let mut packets = basic().packets(Link::Ethernet);
    // The response (1 ms) is written before the request (200 µs).
    packets.swap(3, 4);
    let v = analyze(&Pcap::new(1).write(&packets));
    assert_u64(&v, "/summary/anomalies/timestamp_backwards", 1);
    assert_eq!(connections(&v), 1);
    let c = conn(&v, 0);
    assert_handshake(c, us(100), us(50), 0);
    assert_secs(c, "/duration", ms(2) + us(20));
    assert_u64(c, "/tcp/bytes/client", 120);
    assert_u64(c, "/tcp/bytes/server", 900);
    assert_str(c, "/tcp/state", "SF");
}

// ---------------------------------------------------------------- idle timeout

#[test]
fn idle_timeout_ends_a_quiet_connection() {
    let mut c = opened();
    c.data(Side::Client, T0 + us(200), 10)
        .data(Side::Server, T0 + secs(40), 10);
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &[&c]),
        &["-T", "json", "--idle", "30s"],
    );
    let v = json_of(&out);
    assert_eq!(connections(&v), 2, "{v:#}");
    assert_eq!(close_kinds(&v), ["idle", "open"]);
    assert_handshake(conn(&v, 0), us(100), us(50), 0);
    assert_eq!(at(conn(&v, 1), "/partial"), &Value::Bool(true));
    assert_secs(conn(&v, 1), "/start/at", secs(40));
}

#[test]
fn idle_timeout_applies_to_every_gap_longer_than_the_timeout() {
    let mut a = opened();
    a.data(Side::Client, T0 + secs(31), 10);
    let mut b = Conv::new("10.0.0.3:40000", SERVER, 1, 2);
    b.syn(T0 + secs(25));
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &[&a, &b]),
        &["-T", "json", "--idle", "30s"],
    );
    let v = json_of(&out);
    // a is quiet from 150 µs to 31 s, longer than 30 s: it ends idle and the
    // data at 31 s starts a new (partial) connection.
    assert_eq!(connections(&v), 3, "{v:#}");
    assert_str(conn(&v, 0), "/close/kind", "idle");
}

/// `n` half-open connections from one client on consecutive ports, a
/// millisecond apart.
fn half_open(n: u16) -> Vec<Conv> {
    (0..n)
        .map(|i| {
            let mut c = Conv::new(
                &format!("10.0.0.1:{}", 40_000 + i),
                SERVER,
                1000 + u32::from(i),
                9000,
            );
            c.syn(T0 + ms(i64::from(i)));
            c
        })
        .collect()
}

#[test]
fn connection_cap_evicts_the_least_recently_active() {
    // Five half-open connections on distinct ports; room for three.
    let convs = half_open(5);
    let refs: Vec<&Conv> = convs.iter().collect();
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &refs),
        &["-T", "json", "--max-connections", "3", "--threads", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(connections(&v), 5, "evicted connections are still reported");
    assert_u64(&v, "/summary/anomalies/evicted_connection", 2);
    assert_u64(&v, "/summary/close/evicted", 2);
    // The two oldest were evicted.
    assert_str(conn(&v, 0), "/close/kind", "evicted");
    assert_str(conn(&v, 1), "/close/kind", "evicted");
    assert_str(conn(&v, 4), "/close/kind", "open");

    // With two threads there are eight shards, each holding at most
    // ceil(3 / 8) = 1: still bounded, still every connection reported,
    // evictions counted. Which shards the tuples land in is the hash's
    // business, so forty connections: at most eight stay open.
    let convs = half_open(40);
    let refs: Vec<&Conv> = convs.iter().collect();
    let out = analyze_with(
        &pcap_of(Link::Ethernet, &refs),
        &["-T", "json", "--max-connections", "3", "--threads", "2"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        connections(&v),
        40,
        "evicted connections are still reported"
    );
    let evicted = v
        .pointer("/summary/anomalies/evicted_connection")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    assert!((32..40).contains(&evicted), "{evicted} evicted");
    assert_u64(&v, "/summary/close/evicted", evicted);
}
