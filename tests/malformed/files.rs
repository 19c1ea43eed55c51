//! Malformed input at the capture file level: record and snap lengths,
//! timestamps going back, pcapng interfaces and block lengths, files cut
//! short, inputs that are not captures at all, and a bad `--threads`.

use super::*;

// ----------------------------------------------------- capture file level

#[test]
fn caplen_larger_than_origlen_uses_the_captured_bytes() {
    let frame = Link::Ethernet.frame(&stray_seg());
    let mut p = at_bad(frame);
    p.orig_len = 40; // less than the 67 bytes captured
    let v = check(&around(vec![p]), json!({}));
    let stray = by_client(&v, "10.0.0.9:5555").expect("the stray segment's connection");
    assert_u64(stray, "/tcp/bytes/client", b"stray payload".len() as u64);
    assert_u64(stray, "/tcp/packets/client", 1);
}

#[test]
fn caplen_larger_than_the_header_snaplen_is_read_whole() {
    // The file header claims a 64-byte snap length, yet every record holds
    // more (the TLS ClientHello frame alone is over 100 bytes).
    let pcap = Pcap {
        snaplen: 64,
        ..Pcap::new(1)
    };
    let frame = Link::Ethernet.frame(&stray_seg());
    let v = check(&around_in(pcap, vec![at_bad(frame)]), json!({}));
    assert_eq!(connections(&v), 3);
}

#[test]
fn timestamps_going_backwards_are_counted() {
    // A UDP datagram stamped 1 ms after the first packet, written after the
    // first connection's last packet (2.02 ms).
    let udp = udp_frame(addr("10.0.0.9:53"), addr("10.0.0.1:53"), b"dns?");
    let v = check(
        &around(vec![Packet::new(T0 + ms(1), udp)]),
        json!({"timestamp_backwards": 1}),
    );
    assert_u64(&v, "/summary/packets/skipped", 1);
    // A TCP segment going back in time is used all the same.
    let tcp = Packet::new(T0 + ms(1), Link::Ethernet.frame(&stray_seg()));
    let v = check(&around(vec![tcp]), json!({"timestamp_backwards": 1}));
    assert!(by_client(&v, "10.0.0.9:5555").is_some(), "{v:#}");
}

/// A pcapng of the good connections on interface 0 (Ethernet) with
/// `blocks` between them.
fn pcapng_around(blocks: &[u8]) -> Vec<u8> {
    let mut out = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .packets(&before_packets())
        .bytes();
    out.extend_from_slice(blocks);
    // Enhanced Packet Blocks without a new section: still interface 0.
    out.extend(Pcapng::new().packets(&after_packets()).bytes());
    out
}

/// One Enhanced Packet Block (as Pcapng writes it) holding a stray frame.
fn stray_epb(if_id: u32) -> Vec<u8> {
    let p = at_bad(Link::Ethernet.frame(&stray_seg())).on(if_id);
    Pcapng::new().packet(&p).bytes()
}

#[test]
fn pcapng_packet_on_an_undefined_interface_is_counted() {
    let v = check(
        &pcapng_around(&stray_epb(7)),
        json!({"unknown_interface": 1}),
    );
    assert_eq!(connections(&v), 2);
    assert_str(&v, "/summary/format", "pcapng");
}

#[test]
fn pcapng_block_lengths_that_disagree_stop_reading_with_a_warning() {
    let good = stray_epb(0);
    let n = good.len();
    // The trailing total length differs from the leading one.
    let mut trailer = good.clone();
    trailer[n - 4..].copy_from_slice(&(n as u32 + 4).to_le_bytes());
    // The leading total length claims 8 more bytes than the block has.
    let mut leader = good.clone();
    leader[4..8].copy_from_slice(&(n as u32 + 8).to_le_bytes());
    for (what, block) in [("trailer", trailer), ("leader", leader)] {
        let out = run_on(&pcapng_around(&block));
        let v = json_of(&out);
        assert_eq!(
            at(&v, "/summary/truncated"),
            &Value::Bool(true),
            "{what}: {v:#}"
        );
        let warnings = at(&v, "/summary/warnings").as_array().expect("warnings");
        assert!(!warnings.is_empty(), "{what}");
        let err = stderr(&out);
        for w in warnings {
            assert!(err.contains(w.as_str().expect("warning")), "{what}: {err}");
        }
        // Everything before the corrupt block is reported.
        assert_good(&v, false);
    }
}

#[test]
fn classic_pcap_cut_inside_the_last_record_reports_what_it_read() {
    let whole = around(Vec::new());
    let cut = &whole[..whole.len() - 30];
    let out = run_on(cut);
    let v = json_of(&out);
    assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(true));
    assert!(stderr(&out).contains("cut short"), "{}", stderr(&out));
    let (want_before, _) = reference();
    let got = by_client(&v, BEFORE).expect("before");
    assert_eq!(without_id(got), want_before);
}

#[test]
fn not_a_capture_exits_2() {
    for bytes in [
        b"GIF89a, certainly not a capture file at all".to_vec(),
        vec![
            0xd4, 0xc3, 0xb2, 0xa2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        vec![0; 64],
    ] {
        let out = run_on(&bytes);
        assert_eq!(out.status.code(), Some(2), "{bytes:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("not a pcap"), "{}", stderr(&out));
    }
}

#[test]
fn capture_cut_inside_its_file_header_exits_2() {
    let pcap = around(Vec::new());
    let pcapng = pcapng_around(&[]);
    for (what, bytes) in [
        ("pcap", &pcap[..10]),
        ("pcap", &pcap[..23]),
        ("pcapng", &pcapng[..12]),
    ] {
        let out = run_on(bytes);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
}

#[test]
fn too_many_threads_is_one_line_and_exit_2() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(["analyze", "--threads", "1000", "-"])
        .output()
        .expect("handshakes runs");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--threads 1000: at most 256"), "{err}");
}
