//! Tunnels the kernel here cannot make (it has VXLAN only; that one is
//! recorded for real: captures/tunnel-vxlan-*.pcap): real captures from
//! captures/ wrapped, frame by frame, in GRE (with checksum, key and
//! sequence fields; carrying IP, Ethernet or MPLS; over IPv4 and IPv6),
//! ERSPAN types I, II and III, Geneve (with options; carrying Ethernet or
//! IP), VXLAN over IPv6, IP in IP, and tunnels nested three deep. Every
//! wrapped capture must give exactly the records and summary of the
//! original (but for the byte count, which includes the outer headers), and
//! tshark must see the same TCP connections in it. Nesting deeper than four
//! and cut tunnel headers are anomalies, not connections.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use handshakes::source::file::FileSource;
use handshakes::PacketSource;

use crate::support::{Packet, Pcap};
use crate::tools::{analyze_path, analyze_path_on, as_json, skip_or_fail};

pub(crate) const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const IP_IPIP: u8 = 4;
pub(crate) const IP_UDP: u8 = 17;
const IP_IPV6: u8 = 41;
const IP_GRE: u8 = 47;

/// Real captures of plain Ethernet frames: HTTP/1.1 over IPv4 and IPv6, TLS 1.3.
pub(crate) const ORIGINALS: &[&str] = &[
    "http-curl-5-keepalive.pcap",
    "http-curl-ipv6.pcap",
    "tls13-curl-keepalive-5.pcap",
];

pub(crate) fn ethernet(ether_type: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    f.extend_from_slice(&ether_type.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub(crate) fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    let total = u16::try_from(20 + payload.len()).expect("fits");
    let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0];
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2]);
    let sum = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(payload.len()).expect("fits");
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    for last in [1u8, 2] {
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        h.extend_from_slice(&[0; 11]);
        h.push(last);
    }
    h.extend_from_slice(payload);
    h
}

pub(crate) fn udp(dst: u16, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(8 + payload.len()).expect("fits");
    let mut u = 49_152u16.to_be_bytes().to_vec();
    u.extend_from_slice(&dst.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// A GRE header (version 0) with the checksum, key and sequence fields the
/// flags ask for.
fn gre(checksum: bool, key: bool, sequence: bool, proto: u16, payload: &[u8]) -> Vec<u8> {
    let flags = (u8::from(checksum) << 7) | (u8::from(key) << 5) | (u8::from(sequence) << 4);
    let mut g = vec![flags, 0];
    g.extend_from_slice(&proto.to_be_bytes());
    if checksum {
        g.extend_from_slice(&[0xab, 0xcd, 0, 0]);
    }
    if key {
        g.extend_from_slice(&[0, 0, 0x10, 0x01]);
    }
    if sequence {
        g.extend_from_slice(&[0, 0, 0, 7]);
    }
    g.extend_from_slice(payload);
    g
}

/// VXLAN with VNI 4242.
fn vxlan(frame: &[u8]) -> Vec<u8> {
    vxlan_in(4242, frame)
}

pub(crate) fn vxlan_in(vni: u32, frame: &[u8]) -> Vec<u8> {
    let [_, a, b, c] = vni.to_be_bytes();
    let mut v = vec![0x08, 0, 0, 0, a, b, c, 0];
    v.extend_from_slice(frame);
    v
}

fn geneve(proto: u16, payload: &[u8]) -> Vec<u8> {
    // Two words of options (one TLV: class, type, length 1 word, value).
    let mut g = vec![0x02, 0];
    g.extend_from_slice(&proto.to_be_bytes());
    g.extend_from_slice(&[0, 0x2a, 0x2a, 0]);
    g.extend_from_slice(&[0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe, 0xef]);
    g.extend_from_slice(payload);
    g
}

/// The IP packet in a plain Ethernet frame, and its EtherType.
fn ip_of(frame: &[u8]) -> (u16, &[u8]) {
    (u16::from_be_bytes([frame[12], frame[13]]), &frame[14..])
}

fn ip_proto(ether_type: u16) -> u8 {
    if ether_type == ETH_IPV6 {
        IP_IPV6
    } else {
        IP_IPIP
    }
}

/// Each wrapping (tshark 4.0 opens them all by default): its name and the
/// function that wraps one Ethernet frame.
type Wrap = fn(&[u8]) -> Vec<u8>;
const WRAPS: &[(&str, Wrap)] = &[
    ("vxlan over ipv6", |f| {
        ethernet(ETH_IPV6, &ipv6(IP_UDP, &udp(4789, &vxlan(f))))
    }),
    ("geneve, ethernet inside, options", |f| {
        ethernet(ETH_IPV4, &ipv4(IP_UDP, &udp(6081, &geneve(0x6558, f))))
    }),
    ("geneve, ip inside", |f| {
        let (et, ip) = ip_of(f);
        ethernet(ETH_IPV4, &ipv4(IP_UDP, &udp(6081, &geneve(et, ip))))
    }),
    ("gre, ip inside, checksum key sequence", |f| {
        let (et, ip) = ip_of(f);
        ethernet(ETH_IPV4, &ipv4(IP_GRE, &gre(true, true, true, et, ip)))
    }),
    ("gre over ipv6, ip inside", |f| {
        let (et, ip) = ip_of(f);
        ethernet(ETH_IPV6, &ipv6(IP_GRE, &gre(false, true, false, et, ip)))
    }),
    ("gretap (transparent ethernet bridging)", |f| {
        ethernet(ETH_IPV4, &ipv4(IP_GRE, &gre(false, true, false, 0x6558, f)))
    }),
    ("gre, mpls inside", |f| {
        let (_, ip) = ip_of(f);
        let mut mpls = vec![0, 0x01, 0x41, 64]; // label 20, bottom of stack
        mpls.extend_from_slice(ip);
        ethernet(
            ETH_IPV4,
            &ipv4(IP_GRE, &gre(false, false, false, 0x8847, &mpls)),
        )
    }),
    ("erspan type i", |f| {
        ethernet(
            ETH_IPV4,
            &ipv4(IP_GRE, &gre(false, false, false, 0x88be, f)),
        )
    }),
    ("erspan type ii", |f| {
        let mut e = vec![0x10, 0x64, 0x00, 0x7b, 0, 0, 0, 0x05];
        e.extend_from_slice(f);
        ethernet(
            ETH_IPV4,
            &ipv4(IP_GRE, &gre(false, false, true, 0x88be, &e)),
        )
    }),
    ("erspan type iii, platform subheader", |f| {
        let mut e = vec![0x20, 0x64, 0x00, 0x7b, 0, 0, 0x30, 0x39, 0, 0, 0, 0x01];
        e.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 0, 0]);
        e.extend_from_slice(f);
        ethernet(
            ETH_IPV4,
            &ipv4(IP_GRE, &gre(false, false, true, 0x22eb, &e)),
        )
    }),
    ("ip in ipv4", |f| {
        let (et, ip) = ip_of(f);
        ethernet(ETH_IPV4, &ipv4(ip_proto(et), ip))
    }),
    ("ip in ipv6", |f| {
        let (et, ip) = ip_of(f);
        ethernet(ETH_IPV6, &ipv6(ip_proto(et), ip))
    }),
    ("vxlan in gre in ip in ip (three deep)", |f| {
        let vx = ethernet(ETH_IPV4, &ipv4(IP_UDP, &udp(4789, &vxlan(f))));
        let (_, outer) = ip_of(&vx);
        let gre_ip = ipv4(IP_GRE, &gre(false, false, false, ETH_IPV4, outer));
        ethernet(ETH_IPV4, &ipv4(IP_IPIP, &gre_ip))
    }),
];

pub(crate) fn capture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

/// A capture rewritten: each of its (whole) frames replaced by the
/// packets `rewrite` makes of it, given its time and bytes.
pub(crate) fn rewritten(
    original: &Path,
    mut rewrite: impl FnMut(i64, &[u8]) -> Vec<Packet>,
) -> Vec<Packet> {
    let mut source = FileSource::open(original).expect("opens");
    let mut packets = Vec::new();
    while let Some(raw) = source.next_packet().expect("reads") {
        assert_eq!(raw.data.len() as u32, raw.orig_len, "whole frames");
        packets.extend(rewrite(raw.ts.0, raw.data));
    }
    packets
}

/// Every frame of a capture, wrapped.
fn wrapped(original: &Path, wrap: Wrap) -> Vec<u8> {
    Pcap::new(1).write(&rewritten(original, |ts, f| vec![Packet::new(ts, wrap(f))]))
}

/// Summary and records, as JSON, of `bytes` written to `dir`/`name` and
/// analysed on `threads` threads (0: one per core).
pub(crate) fn analyze_bytes(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    threads: usize,
) -> (Value, Value) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("writes");
    as_json(analyze_path_on(&path, threads))
}

/// What may differ between a capture and its wrapped copy: its name and
/// the byte count (outer headers included).
pub(crate) fn comparable(mut summary: Value) -> Value {
    if let Some(s) = summary.as_object_mut() {
        s.remove("file");
        if let Some(p) = s.get_mut("packets").and_then(Value::as_object_mut) {
            p.remove("bytes");
        }
    }
    summary
}

/// tshark's TCP conversations in `path` (read with `options` too), as
/// unordered endpoint pairs.
pub(crate) fn tshark_pairs(path: &Path, options: &[&str]) -> Option<BTreeSet<(String, String)>> {
    let out = Command::new("tshark")
        .args(["-n", "-q", "-z", "conv,tcp"])
        .args(options)
        .arg("-r")
        .arg(path)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .filter(|l| l.contains("<->"))
            .filter_map(|l| {
                let mut parts = l.split_whitespace();
                let a = parts.next()?.to_string();
                parts.next()?;
                let b = parts.next()?.to_string();
                Some(if a <= b { (a, b) } else { (b, a) })
            })
            .collect(),
    )
}

pub(crate) fn our_pairs(records: &Value) -> BTreeSet<(String, String)> {
    let plain = |v: &Value| v.as_str().unwrap_or_default().replace(['[', ']'], "");
    records
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let (a, b) = (plain(&r["client"]), plain(&r["server"]));
            if a <= b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect()
}

#[test]
fn wrapped_captures_give_the_originals_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    let have_tshark = Command::new("tshark").arg("--version").output().is_ok();
    if !have_tshark {
        skip_or_fail(
            "tshark",
            "not installed: wrapped captures not compared with it",
        );
    }
    assert_eq!(WRAPS.len(), OVERLAYS.len(), "an overlay for every wrapping");
    let mut compared = 0;
    for original in ORIGINALS {
        let (summary, records) = as_json(analyze_path(&capture(original)));
        assert!(
            !records.as_array().expect("a list").is_empty(),
            "{original}: has connections"
        );
        for (i, (name, wrap)) in WRAPS.iter().enumerate() {
            let file = format!("{i}-{original}");
            let bytes = wrapped(&capture(original), *wrap);
            let (s, r) = analyze_bytes(dir.path(), &file, &bytes, 0);
            let want = in_overlay(&records, OVERLAYS[i]);
            assert_eq!(r, want, "{original} in {name}: records");
            let mut want = comparable(summary.clone());
            if let Some((kind, id)) = OVERLAYS[i] {
                let n = records.as_array().map_or(0, Vec::len);
                want["overlays"] = json!({ format!("{kind} {id}"): n });
            }
            // Each server is in the overlay too.
            want["servers"] = in_overlay(&want["servers"], OVERLAYS[i]);
            assert_eq!(comparable(s.clone()), want, "{original} in {name}: summary");
            if have_tshark {
                let theirs = tshark_pairs(&dir.path().join(&file), &[]).expect("tshark runs");
                assert_eq!(
                    theirs,
                    our_pairs(&r),
                    "{original} in {name}: tshark's connections"
                );
            }
            compared += 1;
        }
    }
    eprintln!("tunnels: {compared} wrapped captures equal to their originals");
}

/// The overlay each of [`WRAPS`] names (`kind`, `id`), in its order: the
/// VNIs, GRE keys and ERSPAN sessions its headers carry.
const OVERLAYS: [Option<(&str, u32)>; 13] = [
    Some(("vxlan", 4242)),
    Some(("geneve", 0x2a2a)),
    Some(("geneve", 0x2a2a)),
    Some(("gre", 0x1001)),
    Some(("gre", 0x1001)),
    Some(("gre", 0x1001)),
    None,
    None,
    Some(("erspan", 123)),
    Some(("erspan", 123)),
    None,
    None,
    // The innermost tunnel that names one: VXLAN in a keyless GRE.
    Some(("vxlan", 4242)),
];

/// `records` as they are in `overlay`.
fn in_overlay(records: &Value, overlay: Option<(&str, u32)>) -> Value {
    let mut records = records.clone();
    for r in records.as_array_mut().expect("a list") {
        r["overlay"] = overlay.map_or(Value::Null, |(kind, id)| json!({"kind": kind, "id": id}));
    }
    records
}

/// `depth` VXLAN tunnels around each frame.
fn nested_vxlan(frame: &[u8], depth: usize) -> Vec<u8> {
    let mut f = frame.to_vec();
    for _ in 0..depth {
        f = ethernet(ETH_IPV4, &ipv4(IP_UDP, &udp(4789, &vxlan(&f))));
    }
    f
}

#[test]
fn four_tunnels_deep_are_opened_five_are_an_anomaly() {
    let original = capture("http-curl-5-keepalive.pcap");
    let (_, records) = analyze_path(&original);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("deep.pcap");
    for depth in [4, 5] {
        let packets = rewritten(&original, |ts, f| {
            vec![Packet::new(ts, nested_vxlan(f, depth))]
        });
        std::fs::write(&path, Pcap::new(1).write(&packets)).expect("writes");
        let (summary, found) = analyze_path(&path);
        let anomalies = summary
            .anomalies
            .0
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect::<Vec<_>>();
        if depth == 4 {
            assert_eq!(found.len(), records.len(), "four deep: every connection");
            assert!(anomalies.is_empty(), "four deep: {anomalies:?}");
        } else {
            assert!(found.is_empty(), "five deep: no connection");
            assert_eq!(
                anomalies,
                vec![("malformed_tunnel", packets.len() as u64)],
                "five deep: every frame an anomaly"
            );
        }
    }
}

#[test]
fn a_tunnel_header_cut_short_is_an_anomaly() {
    let original = capture("http-curl-5-keepalive.pcap");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cut.pcap");
    // Ethernet 14 + IPv4 20 + UDP 8 + 4 of the 8 VXLAN bytes; and a GRE
    // header announcing a key and sequence number it does not hold.
    let cuts: [(&str, Wrap, usize); 2] = [
        ("vxlan", |f| nested_vxlan(f, 1), 14 + 20 + 8 + 4),
        (
            "gre",
            |f| {
                let (et, ip) = ip_of(f);
                ethernet(ETH_IPV4, &ipv4(IP_GRE, &gre(false, true, true, et, ip)))
            },
            14 + 20 + 6,
        ),
    ];
    for (name, wrap, keep) in cuts {
        let packets = rewritten(&original, |ts, f| vec![Packet::new(ts, wrap(f)).cut(keep)]);
        std::fs::write(&path, Pcap::new(1).write(&packets)).expect("writes");
        let (summary, found) = analyze_path(&path);
        assert!(found.is_empty(), "{name}: no connection");
        assert_eq!(
            summary
                .anomalies
                .0
                .get(&handshakes::record::AnomalyKind::MalformedTunnel),
            Some(&(packets.len() as u64)),
            "{name}: every frame a malformed_tunnel"
        );
    }
}
