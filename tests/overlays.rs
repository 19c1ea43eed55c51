//! Overlay networks: the VNI, GRE key or ERSPAN session a connection rode
//! in is part of its identity (the same real connections in two VXLAN
//! networks at once stay two), is what tshark reads on the kernel's own
//! VXLAN traffic, is counted in the summary within a bound, and filters
//! (`--overlay`); and `-d udp.port==N,vxlan`, tshark's decode-as, opens
//! VXLAN on another port (the kernel's 8472, recorded for real).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use handshakes::record::{Overlay, OverlayKind};
use handshakes::source::file::FileSource;
use handshakes::Config;

use crate::support::{Packet, Pcap};
use crate::tools::{analyze_path, as_json, skip_or_fail};
use crate::tunnels::{
    analyze_bytes, capture, ethernet, ipv4, our_pairs, rewritten, tshark_pairs, udp, vxlan_in,
    ETH_IPV4, IP_UDP, ORIGINALS,
};

/// Two mirror sessions (or two tenants' overlays) carrying the same
/// 4-tuples at the same time: every frame of a real capture in VXLAN 4242
/// and again, at the same instant, in VXLAN 7. Each connection is reported
/// twice, once per overlay, each copy as the original (on one thread and
/// on two); without the VNI in the connection's identity the copies
/// would merge into one connection of duplicated segments.
#[test]
fn the_same_connections_in_two_overlays_stay_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    for original in ORIGINALS {
        let (_, records) = as_json(analyze_path(&capture(original)));
        let records = records.as_array().expect("a list").clone();
        let packets = rewritten(&capture(original), |ts, f| {
            [4242, 7]
                .map(|vni| {
                    let outer = ethernet(ETH_IPV4, &ipv4(IP_UDP, &udp(4789, &vxlan_in(vni, f))));
                    Packet::new(ts, outer)
                })
                .to_vec()
        });
        let bytes = Pcap::new(1).write(&packets);
        for threads in [1, 2] {
            let (summary, found) = analyze_bytes(dir.path(), original, &bytes, threads);
            let found = found.as_array().expect("a list");
            assert_eq!(found.len(), 2 * records.len(), "{original}: two of each");
            assert_eq!(summary["anomalies"], json!({}), "{original}: no anomaly");
            let n = records.len();
            assert_eq!(
                summary["overlays"],
                json!({"vxlan 4242": n, "vxlan 7": n}),
                "{original}: both overlays counted"
            );
            for (k, vni) in [(0, 4242), (1, 7)] {
                let copies: Vec<Value> = found
                    .iter()
                    .skip(k)
                    .step_by(2)
                    .map(|r| {
                        let mut r = r.clone();
                        r["id"] = Value::Null;
                        r
                    })
                    .collect();
                let want: Vec<Value> = records
                    .iter()
                    .map(|r| {
                        let mut r = r.clone();
                        r["id"] = Value::Null;
                        r["overlay"] = json!({"kind": "vxlan", "id": vni});
                        r
                    })
                    .collect();
                assert_eq!(copies, want, "{original}, VNI {vni}, {threads} threads");
            }
        }
        // `--overlay vxlan:7`: only the copies in VNI 7.
        let config = Config {
            overlays: vec![Overlay {
                kind: OverlayKind::Vxlan,
                id: 7,
            }],
            ..Config::default()
        };
        let mut source = FileSource::open(&dir.path().join(original)).expect("opens");
        let mut only = Vec::new();
        let summary = handshakes::analyze(&mut source, &config, &mut only).expect("analyses");
        assert_eq!(only.len(), records.len(), "{original}: --overlay");
        assert!(only
            .iter()
            .all(|r| r.overlay == config.overlays.first().copied()));
        assert_eq!(
            summary.packets.filtered_out, summary.packets.tcp,
            "{original}: half filtered"
        );
    }
}

/// On the kernel's own VXLAN traffic, the overlay of every connection is
/// the VNI tshark reads on the frames that carry its 4-tuple.
#[test]
fn real_vxlan_connections_carry_the_vni_tshark_reads() {
    if Command::new("tshark").arg("--version").output().is_err() {
        skip_or_fail("tshark", "not installed: VNIs not compared with it");
        return;
    }
    for name in [
        "tunnel-vxlan-http.pcap",
        "tunnel-vxlan-tls13.pcap",
        "tunnel-vxlan-fragmented.pcap",
    ] {
        let path = capture(name);
        let out = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(&path)
            .args(["-Y", "tcp", "-T", "fields", "-e", "vxlan.vni"])
            .output()
            .expect("tshark runs");
        let theirs: BTreeSet<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        let (_, records) = as_json(analyze_path(&path));
        let ours: BTreeSet<u64> = records
            .as_array()
            .expect("a list")
            .iter()
            .map(|r| {
                assert_eq!(r["overlay"]["kind"], "vxlan", "{name}: {r}");
                r["overlay"]["id"].as_u64().expect("an id")
            })
            .collect();
        assert!(!theirs.is_empty(), "{name}: tshark reads VNIs");
        assert_eq!(ours, theirs, "{name}");
    }
}

/// `-d udp.port==8472,vxlan`, as with tshark: the kernel's own VXLAN
/// traffic moved to port 8472 (Linux's default VXLAN port, flannel's and
/// Cilium's) is opened only when asked, and then gives the records of the
/// original on port 4789.
#[test]
fn decode_as_opens_vxlan_on_another_port() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = |args: &[&str], path: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
            .args(["analyze", "-q", "-T", "json"])
            .args(args)
            .arg(path)
            .output()
            .expect("runs");
        assert!(out.status.success(), "{args:?}: {out:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        doc["connections"].clone()
    };
    for name in ["tunnel-vxlan-http.pcap", "tunnel-vxlan-fragmented.pcap"] {
        let original = capture(name);
        let mut moved = 0;
        let packets = rewritten(&original, |ts, f| {
            let mut f = f.to_vec();
            // Ethernet, IPv4 (a first fragment or whole), UDP to 4789.
            let ihl = usize::from(f.get(14).map_or(0, |b| b & 0x0f)) * 4;
            let is_udp = f.get(12..14) == Some(&[0x08, 0x00]) && f.get(23) == Some(&17);
            let first = f.get(20..22).is_some_and(|o| o[0] & 0x1f == 0 && o[1] == 0);
            let dst = 14 + ihl + 2;
            if is_udp && first && f.get(dst..dst + 2) == Some(&4789u16.to_be_bytes()) {
                f[dst..dst + 2].copy_from_slice(&8472u16.to_be_bytes());
                moved += 1;
            }
            vec![Packet::new(ts, f)]
        });
        assert!(moved > 0, "{name}: VXLAN frames moved");
        let path = dir.path().join(name);
        std::fs::write(&path, Pcap::new(1).write(&packets)).expect("writes");
        let want = run(&[], &original);
        assert!(!want.as_array().expect("a list").is_empty(), "{name}");
        assert_eq!(
            run(&[], &path),
            json!([]),
            "{name}: port 8472 is not VXLAN by default"
        );
        for args in [
            &["-d", "udp.port==8472,vxlan"][..],
            &["--decode-as", "udp.port==8472,VXLAN", "-j", "2"],
        ] {
            assert_eq!(run(args, &path), want, "{name} {args:?}");
        }
    }
    // Given as Geneve, VXLAN's own port is not VXLAN any more.
    let original = capture("tunnel-vxlan-http.pcap");
    assert_eq!(run(&["-d", "udp.port==4789,geneve"], &original), json!([]));
}

#[test]
fn a_bad_decode_as_is_one_clear_error() {
    for bad in [
        "udp.port==0,vxlan",
        "udp.port==70000,vxlan",
        "tcp.port==80,http",
        "udp.port==8472,gre",
        "udp.port==8472",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
            .args(["analyze", "-d", bad])
            .arg(capture("tunnel-vxlan-http.pcap"))
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("udp.port==PORT,vxlan"), "{bad}: {err}");
        assert!(out.stdout.is_empty(), "{bad}");
    }
    let mut args = vec!["analyze".to_string()];
    for port in 1..=8 {
        args.extend(["-d".into(), format!("udp.port=={port},geneve")]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(&args)
        .arg(capture("tunnel-vxlan-http.pcap"))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("at most 8 ports per tunnel kind"), "{err}");
}

/// The kernel's own VXLAN on port 8472 (`captures/tunnel-vxlan-8472.pcap`,
/// VNI 7): nothing by default, as tshark; with `-d udp.port==8472,vxlan` the
/// connection tshark shows with the same `-d`, its two requests, in VNI 7.
#[test]
fn real_vxlan_on_port_8472_with_decode_as() {
    let path = capture("tunnel-vxlan-8472.pcap");
    let (_, records) = as_json(analyze_path(&path));
    assert_eq!(records, json!([]), "not opened by default");
    let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(["analyze", "-q", "-T", "json", "-d", "udp.port==8472,vxlan"])
        .arg(&path)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let records = &doc["connections"];
    assert_eq!(records.as_array().map(Vec::len), Some(1));
    assert_eq!(records[0]["overlay"], json!({"kind": "vxlan", "id": 7}));
    assert_eq!(records[0]["http"]["requests"], 2);
    assert_eq!(records[0]["http"]["responses"], 2);
    if Command::new("tshark").arg("--version").output().is_err() {
        skip_or_fail("tshark", "not installed: port 8472 not compared with it");
        return;
    }
    let theirs = tshark_pairs(&path, &["-d", "udp.port==8472,vxlan"]).expect("tshark runs");
    assert_eq!(theirs, our_pairs(records));
}

/// The summary counts connections per overlay, and at most 1 024 overlays
/// by name (a crafted capture may carry millions of VNIs): the same real
/// connection in 1 100 VXLAN networks.
#[test]
fn the_summary_counts_overlays_within_a_bound() {
    let dir = tempfile::tempdir().expect("temp dir");
    let original = capture("http-curl-5-keepalive.pcap");
    let packets = rewritten(&original, |ts, f| {
        (0..1100u32)
            .map(|vni| {
                let outer = ethernet(ETH_IPV4, &ipv4(IP_UDP, &udp(4789, &vxlan_in(vni, f))));
                Packet::new(ts, outer)
            })
            .collect()
    });
    let bytes = Pcap::new(1).write(&packets);
    let (summary, records) = analyze_bytes(dir.path(), "many.pcap", &bytes, 1);
    assert_eq!(records.as_array().map(Vec::len), Some(1100));
    let overlays = summary["overlays"].as_object().expect("an object");
    assert_eq!(overlays.len(), 1025, "1 024 by name, and other");
    assert_eq!(overlays["vxlan 0"], 1);
    assert_eq!(overlays["vxlan 1023"], 1);
    assert_eq!(overlays["other"], 76);
    let total: u64 = overlays.values().filter_map(Value::as_u64).sum();
    assert_eq!(total, 1100);
}

/// A real HTTP/3 capture carried in VXLAN 7: its QUIC connection keeps
/// the VNI in JSON, and the table for people names it beside the server
/// (`127.0.0.1:4433 [vxlan 7]`), as it does for TCP connections.
#[test]
fn quic_connections_name_their_overlay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let original = "quic-aioquic-h3-5.pcap";
    let packets = rewritten(&capture(original), |ts, f| {
        let outer = ethernet(ETH_IPV4, &ipv4(IP_UDP, &udp(4789, &vxlan_in(7, f))));
        vec![Packet::new(ts, outer)]
    });
    let path = dir.path().join(original);
    std::fs::write(&path, Pcap::new(1).write(&packets)).expect("writes");
    let (summary, _) = as_json(analyze_path(&path));
    let list = summary["quic"]["list"].as_array().expect("QUIC listed");
    assert_eq!(list.len(), 1, "{summary}");
    assert_eq!(list[0]["overlay"], json!({"kind": "vxlan", "id": 7}));
    let server = list[0]["server"].as_str().expect("a server").to_owned();
    let (table, html) = crate::support::analyze_html(&path, &[]);
    for (format, text) in [("table", table), ("html", html)] {
        assert!(
            text.contains(&format!("{server} [vxlan 7]")),
            "{format}: the QUIC row names the overlay:\n{text}"
        );
    }
}
