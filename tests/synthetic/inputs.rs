//! Synthetic captures: every supported link type, pcapng interfaces and
//! sections, compressed input, standard input, `-r`, truncated captures and
//! `--merge`.

use super::*;

// ---------------------------------------------------------------- link types

#[test]
fn ethernet_with_one_vlan_tag() {
    check_link(Link::Vlan(100), CLIENT, SERVER);
    check_link(Link::Vlan(100), V6_CLIENT, V6_SERVER);
}

#[test]
fn ethernet_with_qinq_double_tags() {
    check_link(Link::QinQ(300, 100), CLIENT, SERVER);
    check_link(Link::QinQ(300, 100), V6_CLIENT, V6_SERVER);
}

#[test]
fn ethernet_padding_is_not_payload() {
    let packets: Vec<Packet> = basic()
        .packets(Link::Ethernet)
        .into_iter()
        .map(|mut p| {
            p.data.resize(p.data.len().max(60), 0);
            p.orig_len = p.data.len() as u32;
            p
        })
        .collect();
    assert_only_basic(&analyze(&Pcap::new(1).write(&packets)), CLIENT, SERVER);
}

#[test]
fn ipv6_over_ethernet() {
    check_link(Link::Ethernet, V6_CLIENT, V6_SERVER);
}

#[test]
fn ipv6_with_extension_headers() {
    for ext in [Ipv6Ext::HopByHop, Ipv6Ext::DestinationOptions] {
        let mut c = Conv::new(V6_CLIENT, V6_SERVER, ISNS.0, ISNS.1).with_ipv6_ext(ext);
        Script::starting(T0).play(&mut c);
        let v = analyze(&pcap_of(Link::Raw(101), &[&c]));
        assert_only_basic(&v, V6_CLIENT, V6_SERVER);
    }
}

#[test]
fn linux_sll() {
    check_link(Link::Sll, CLIENT, SERVER);
    check_link(Link::Sll, V6_CLIENT, V6_SERVER);
}

#[test]
fn linux_sll2() {
    check_link(Link::Sll2, CLIENT, SERVER);
    check_link(Link::Sll2, V6_CLIENT, V6_SERVER);
}

#[test]
fn bsd_null_loopback() {
    check_link(Link::Null, CLIENT, SERVER);
    check_link(Link::Null, V6_CLIENT, V6_SERVER);
}

#[test]
fn openbsd_loop() {
    check_link(Link::Loop, CLIENT, SERVER);
    check_link(Link::Loop, V6_CLIENT, V6_SERVER);
}

#[test]
fn raw_ip_linktypes_101_and_12() {
    check_link(Link::Raw(101), CLIENT, SERVER);
    check_link(Link::Raw(12), CLIENT, SERVER);
    check_link(Link::Raw(12), V6_CLIENT, V6_SERVER);
}

#[test]
fn raw_ipv4_and_ipv6_linktypes_228_and_229() {
    check_link(Link::Raw(228), CLIENT, SERVER);
    check_link(Link::Raw(229), V6_CLIENT, V6_SERVER);
}

// ---------------------------------------------------------------- pcapng

/// A handshake plus one request byte at exact times (ns).
fn handshake_conv(client: &str, syn: i64, synack: i64, ack: i64) -> Conv {
    let mut c = Conv::new(client, SERVER, ISNS.0, ISNS.1);
    c.handshake(syn, synack, ack).data(Side::Client, ack, 1);
    c
}

/// Three connections for three pcapng interfaces: microseconds (Script),
/// nanoseconds, and a third whose handshake steps are `unit` and 2 × `unit`
/// (a whole number of that interface's ticks).
fn three_resolutions(unit: i64) -> (Conv, Conv, Conv) {
    let a = Script::starting(T0).conv(CLIENT, SERVER, ISNS);
    let b_syn = T0 + ms(3) + 7;
    let b = handshake_conv(
        "10.0.0.1:40001",
        b_syn,
        b_syn + 123_457,
        b_syn + 123_457 + 77_777,
    );
    let c_syn = T0 + ms(125);
    let c = handshake_conv("10.0.0.1:40002", c_syn, c_syn + unit, c_syn + 3 * unit);
    (a, b, c)
}

fn on(if_id: u32, link: Link, c: &Conv) -> Vec<Packet> {
    c.packets(link).into_iter().map(|p| p.on(if_id)).collect()
}

fn assert_three_resolutions(v: &Value, unit: i64) {
    assert_eq!(connections(v), 3, "{v:#}");
    assert_basic(conn(v, 0), CLIENT, SERVER);
    assert_handshake(conn(v, 1), 123_457, 77_777, ms(3) + 7);
    assert_handshake(conn(v, 2), unit, 2 * unit, ms(125));
    let first = at(v, "/summary/first_packet").as_f64().expect("number");
    assert!(
        (first - T0 as f64 / 1e9).abs() < 1e-6,
        "first_packet {first}"
    );
    assert_str(v, "/summary/format", "pcapng");
    assert_eq!(at(v, "/summary/warnings"), &serde_json::json!([]));
}

/// One section: Ethernet in µs, raw IP in ns, SLL in `third` resolution.
fn one_section(third: TsResol, unit: i64) -> Value {
    let (a, b, c) = three_resolutions(unit);
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .interface(101, TsResol::Dec(9))
        .interface(113, third)
        .packets(&on(0, Link::Ethernet, &a))
        .packets(&on(1, Link::Raw(101), &b))
        .packets(&on(2, Link::Sll, &c))
        .bytes();
    analyze(&bytes)
}

#[test]
fn pcapng_interfaces_with_different_link_types_and_resolutions() {
    // 10^-4 s ticks as the third resolution.
    assert_three_resolutions(&one_section(TsResol::Dec(4), us(300)), us(300));
}

/// 2^-10 s ticks are not whole nanoseconds; two of them are.
const TWO_BINARY_TICKS: i64 = 1_953_125;

#[test]
fn pcapng_binary_if_tsresol() {
    let v = one_section(TsResol::Bin(10), TWO_BINARY_TICKS);
    assert_three_resolutions(&v, TWO_BINARY_TICKS);
}

#[test]
fn pcapng_sections_each_number_their_interfaces() {
    let unit = ms(4);
    let (a, b, c) = three_resolutions(unit);
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Dec(6))
        .packets(&on(0, Link::Ethernet, &a))
        .section()
        .interface(101, TsResol::Dec(9))
        .interface(276, TsResol::Dec(3))
        .packets(&on(0, Link::Raw(101), &b))
        .packets(&on(1, Link::Sll2, &c))
        .bytes();
    assert_three_resolutions(&analyze(&bytes), unit);
}

#[test]
fn pcapng_interface_with_an_unsupported_link_type_is_skipped() {
    let other = Packet::new(T0 + ms(1), vec![0xab; 40]).on(1);
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .interface(147, TsResol::Default)
        .packets(&basic().packets(Link::Ethernet))
        .packet(&other)
        .bytes();
    let out = analyze_with(&bytes, &["-T", "json"]);
    let v = json_of(&out);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
    assert_u64(&v, "/summary/packets/skipped", 1);
    assert_u64(&v, "/summary/anomalies/unsupported_link_type", 1);
    assert_eq!(
        at(&v, "/summary/warnings").as_array().map(Vec::len),
        Some(1)
    );
    assert!(stderr(&out).contains("147"), "{}", stderr(&out));
}

#[test]
fn pcapng_packet_on_an_undefined_interface() {
    let mut stray = Packet::new(T0 + ms(1), Link::Ethernet.frame(&basic().segs[0].seg));
    stray.if_id = 5;
    let bytes = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .packets(&basic().packets(Link::Ethernet))
        .packet(&stray)
        .bytes();
    let v = analyze(&bytes);
    assert_u64(&v, "/summary/anomalies/unknown_interface", 1);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
}

// ---------------------------------------------------------------- inputs

#[test]
fn gzip_input() {
    let v = analyze(&gzip(&pcap_of(Link::Ethernet, &[&basic()])));
    assert_only_basic(&v, CLIENT, SERVER);
    assert_str(&v, "/summary/compression", "gzip");
}

#[test]
fn zstd_input() {
    let raw = pcap_of(Link::Ethernet, &[&basic()]);
    let zst = ruzstd::encoding::compress_to_vec(
        raw.as_slice(),
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let v = analyze(&zst);
    assert_only_basic(&v, CLIENT, SERVER);
    assert_str(&v, "/summary/compression", "zstd");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).expect("gzip");
    gz.finish().expect("gzip")
}

#[test]
fn stdin_input() {
    let plain = pcap_of(Link::Ethernet, &[&basic()]);
    for input in [plain.clone(), gzip(&plain)] {
        let v = json_of(&run_stdin(["analyze", "-T", "json", "-"], &input));
        assert_only_basic(&v, CLIENT, SERVER);
        assert_str(&v, "/summary/file", "-");
    }
}

#[test]
fn read_option_takes_a_file() {
    let scratch = Scratch::new();
    let path = scratch.file("r.pcap", &pcap_of(Link::Ethernet, &[&basic()]));
    let out = run_analyze(&["-T", "json", "-r"], &[&path]);
    assert_only_basic(&json_of(&out), CLIENT, SERVER);
}

/// The standard connection and a second one 10 ms later.
fn two_in_a_row() -> Vec<Packet> {
    let second = Script::starting(T0 + ms(10)).conv("10.0.0.1:40001", SERVER, (5, 6));
    frames(Link::Ethernet, &interleave(&[&basic(), &second]))
}

#[test]
fn truncated_capture_reports_what_it_read() {
    let pcap = Pcap::new(1).write(&two_in_a_row());
    let pcapng = Pcapng::new()
        .section()
        .interface(1, TsResol::Default)
        .packets(&two_in_a_row())
        .bytes();
    for mut bytes in [pcap, pcapng] {
        bytes.truncate(bytes.len() - 10);
        let out = analyze_with(&bytes, &["-T", "json"]);
        let v = json_of(&out);
        assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(true));
        assert!(!at(&v, "/summary/warnings")
            .as_array()
            .expect("array")
            .is_empty());
        let err = stderr(&out);
        assert!(
            err.contains("warning") && err.contains("cut short"),
            "{err}"
        );
        assert_eq!(connections(&v), 2);
        assert_basic(conn(&v, 0), CLIENT, SERVER);
        assert_handshake(conn(&v, 1), us(100), us(50), ms(10));
        assert_u64(conn(&v, 1), "/tcp/packets/client", 4);
        assert_u64(&v, "/summary/packets/total", 15);
    }
}

#[test]
fn merge_interleaves_files_by_timestamp() {
    let a = basic();
    let b = Script::starting(T0 + ms(10)).conv("10.0.0.3:40000", SERVER, (1, 2));
    let c = Script::starting(T0 + ms(20)).conv("10.0.0.1:40001", SERVER, (3, 4));
    let scratch = Scratch::new();
    let first = scratch.file("a.pcap", &pcap_of(Link::Ethernet, &[&a, &c]));
    // The second file has another link type and resolution.
    let second = scratch.file(
        "b.pcap",
        &Pcap::new(101).nanos().write(&b.packets(Link::Raw(101))),
    );
    let out = run_analyze(&["-T", "json", "--merge"], &[&first, &second]);
    let v = json_of(&out);
    assert_eq!(connections(&v), 3);
    for (i, (client, start)) in [
        (CLIENT, 0),
        ("10.0.0.3:40000", ms(10)),
        ("10.0.0.1:40001", ms(20)),
    ]
    .into_iter()
    .enumerate()
    {
        assert_u64(conn(&v, i), "/id", i as u64 + 1);
        assert_str(conn(&v, i), "/client", client);
        assert_handshake(conn(&v, i), us(100), us(50), start);
    }
    assert_str(&v, "/summary/format", "merged");
    assert_u64(&v, "/summary/packets/total", 24);
    // Merged files share the map window; read() gives the same.
    let read = run_analyze(&["-T", "json", "--merge", "--no-mmap"], &[&first, &second]);
    assert_eq!(read, out);
}

/// Without the `live` feature there is no libpcap to compile `-f`: one line
/// says so, and what to use instead.
#[cfg(not(feature = "live"))]
#[test]
fn a_filter_without_libpcap_is_one_line_saying_what_to_build() {
    let scratch = Scratch::new();
    let file = scratch.file("empty.pcap", &pcap_of(Link::Ethernet, &[]));
    let file = file.to_str().expect("UTF-8 path");
    for args in [
        vec!["analyze", "-f", "tcp port 443", file],
        vec!["compare", "-f", "tcp port 443", file, file],
        vec!["timeline", "-f", "tcp port 443", file],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("handshakes: -f needs libpcap") && err.contains("--features live"),
            "{args:?}: {err}"
        );
    }
}
