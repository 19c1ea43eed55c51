//! The server's certificate chain (`tls.certificate`) against tshark on
//! every capture here and in the peer corpus whose TLS over TCP shows one
//! in the clear (TLS 1.2 and older), or with the secrets a pcapng carries:
//! how many certificates, their bytes, and the first one's DNS names,
//! compressed (RFC 8879) or not; and with a key log, TLS 1.3's.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::keylog::analyze_file;
use crate::tools::{all_captures, analyze_path, tshark_present};

/// tshark's first Certificate message per `tcp.stream`: (certificates,
/// their bytes together, the DNS names of the chain in order).
fn tshark_certificates(path: &Path) -> BTreeMap<u64, (u64, u64, Vec<String>)> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args([
            "-Y",
            "tcp && (tls.handshake.type == 11 || tls.handshake.type == 25)",
            "-T",
            "fields",
        ])
        .args(["-E", "occurrence=a", "-E", "aggregator=|"])
        .args(["-e", "tcp.stream", "-e", "tls.handshake.certificate_length"])
        .args(["-e", "x509ce.dNSName"])
        .output()
        .expect("tshark runs");
    let mut found = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (Some(Ok(stream)), Some(lengths)) = (f.first().map(|s| s.parse()), f.get(1)) else {
            continue;
        };
        let lengths: Vec<u64> = lengths.split('|').filter_map(|l| l.parse().ok()).collect();
        if lengths.is_empty() {
            continue;
        }
        let names = f.get(2).map_or(Vec::new(), |n| {
            n.split('|')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        });
        found
            .entry(stream)
            .or_insert((lengths.len() as u64, lengths.iter().sum(), names));
    }
    found
}

#[test]
fn every_certificate_in_the_clear_reads_as_tshark_reads_it() {
    if !tshark_present() {
        return; // tshark_present said so, loudly (or failed under CI)
    }
    let (mut files, mut checked) = (0, 0);
    for (name, path) in all_captures() {
        let theirs = tshark_certificates(&path);
        if theirs.is_empty() {
            continue;
        }
        let (_, records) = analyze_path(&path);
        // tshark numbers TCP streams from 0 in order of their first
        // packets, as our ids do from 1.
        for (stream, (chain, bytes, names)) in &theirs {
            let rec = records.iter().find(|r| r.id == stream + 1);
            let cert = rec.and_then(|r| r.tls.as_ref()?.certificate.as_ref());
            let cert = cert.unwrap_or_else(|| panic!("{name}: stream {stream} has no certificate"));
            assert_eq!(
                (cert.chain, cert.bytes),
                (*chain, *bytes),
                "{name}: stream {stream}"
            );
            // The first certificate's names come first in the chain's.
            assert!(
                names.starts_with(&cert.dns_names),
                "{name}: stream {stream}: {:?} {names:?}",
                cert.dns_names
            );
            checked += 1;
        }
        // None that tshark does not see.
        let ours = records
            .iter()
            .filter(|r| r.tls.as_ref().is_some_and(|t| t.certificate.is_some()))
            .count();
        assert_eq!(ours, theirs.len(), "{name}");
        files += 1;
    }
    // 103 connections in 31 files on 5 December 2026, one of them
    // compressed with brotli in TLS 1.3 (ja4's Chrome and Cloudflare,
    // whose pcapng carries its secrets) (docs/accuracy.md).
    assert!(
        files >= 20 && checked >= 90,
        "{files} files, {checked} certificates"
    );
}

/// TLS 1.3 seals the Certificate message: read only with the key log.
#[test]
fn tls13_certificates_need_the_key_log() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
    let pcap = dir.join("tls13-curl-keepalive-5.pcap");
    let sealed = analyze_file(&pcap, None, 1);
    let tls = sealed[0].tls.as_ref().expect("TLS");
    assert_eq!(tls.version.as_deref(), Some("TLS 1.3"));
    assert!(tls.certificate.is_none());
    let opened = analyze_file(&pcap, Some(&dir.join("tls13-curl-keepalive-5.keylog")), 1);
    let cert = opened[0].tls.as_ref().and_then(|t| t.certificate.clone());
    let cert = cert.expect("read with the key log");
    // The throw-away certificate scripts/record-client-captures.sh made:
    // RSA 2048, self-signed, CN and SAN localhost.
    assert_eq!((cert.chain, cert.bytes), (1, 828));
    assert_eq!(cert.subject.as_deref(), Some("localhost"));
    assert_eq!(cert.issuer, cert.subject);
    assert!(cert.self_signed);
    assert_eq!(cert.dns_names, ["localhost"]);
    assert_eq!(cert.key.as_deref(), Some("RSA 2048"));
    assert!(cert.not_after.is_some_and(|t| t.ends_with('Z')));
}
