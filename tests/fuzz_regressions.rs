//! Replays of the inputs the fuzzers found (fuzz/regressions/TARGET/*),
//! through the same harness code the `cargo fuzz` targets run
//! (fuzz/src/harness.rs), so a crash fixed once stays fixed. Also checks
//! that the harness still reaches the code it is meant to fuzz: a seed of
//! each target must get past the parsers' first bytes. See docs/fuzzing.md.

#[path = "../fuzz/src/harness.rs"]
mod harness;
#[path = "../fuzz/src/quic.rs"]
mod quic;
#[path = "../fuzz/src/sealed.rs"]
mod sealed;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use handshakes::record::{DecryptionOutcome, TlsOutcome};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Every file under fuzz/regressions/`target`/.
fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = root().join("fuzz/regressions").join(target);
    let mut files: Vec<PathBuf> = match fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Runs each regression input of `target` through `run`; each must finish
/// without a panic and quickly (the fuzzers' timeout was 10 s; hangs they
/// found must now take well under one).
fn replay(target: &str, run: fn(&[u8])) {
    for path in inputs(target) {
        let data = fs::read(&path).expect("read regression input");
        let started = Instant::now();
        run(&data);
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "{}: took {took:?}",
            path.display()
        );
    }
}

#[test]
fn pipeline_regressions() {
    replay("pipeline", harness::pipeline);
}

#[test]
fn reassembly_regressions() {
    replay("reassembly", harness::reassembly);
}

#[test]
fn tls_stream_regressions() {
    replay("tls_stream", |data| {
        harness::tls_stream(data);
    });
}

#[test]
fn http_regressions() {
    replay("http", |data| {
        harness::http(data);
    });
}

#[test]
fn split_regressions() {
    replay("split", |data| {
        harness::split(data);
    });
}

/// The split harness reads real captures (a piece-size byte, then the
/// file) in pieces, classic pcap and pcapng, small pieces and large.
#[test]
fn split_harness_reads_real_captures() {
    for (name, size) in [
        ("captures/tls13-curl-keepalive.pcap", 0),
        ("captures/tls13-curl-keepalive.pcap", 40),
        ("captures/http-curl-5-keepalive.pcapng", 3),
    ] {
        let mut input = vec![size];
        input.extend(fs::read(root().join(name)).expect("capture"));
        assert!(harness::split(&input) > 10, "{name}: no frames");
    }
}

#[test]
fn quic_regressions() {
    replay("quic", |data| {
        quic::quic(data);
    });
}

/// The quic harness seals what it is given so that the analyzer opens it:
/// a client's Initial carrying a ClientHello reads back to its SNI.
#[test]
fn quic_harness_reaches_the_hellos() {
    let (crypto, _) = quic::hellos(0x1301);
    // A client datagram (version 1) of one sealed Initial to the first
    // ID from the third, under the first ID's keys, packet number 0.
    let mut input = vec![0x00, 0x00, 0x02];
    input.extend_from_slice(&(crypto.len() as u16).to_le_bytes());
    input.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    input.extend_from_slice(&crypto);
    let pcap = quic::quic(&input);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("quic.pcap");
    fs::write(&path, pcap).expect("write");
    let (summary, _) = crate::tools::analyze_path(&path);
    let quic = summary.quic.expect("a QUIC connection");
    assert_eq!(quic.list[0].tls.sni.as_deref(), Some("fuzz.test"));
}

#[test]
fn quic_keyed_regressions() {
    replay("quic_keyed", |data| {
        quic::quic_keyed(data);
    });
}

/// The keyed harness seals 1-RTT packets the key log opens: a client
/// STREAM frame on stream 0 and one on stream 4 (after a key update) are
/// two requests, in each of the four suites (AES-128-GCM, AES-256-GCM,
/// ChaCha20-Poly1305 with ChaCha20's header protection, AES-128-CCM).
#[test]
fn quic_keyed_harness_reaches_the_requests() {
    for suite in [0, 1, 2, 3] {
        let mut input = vec![suite];
        // Client, generation 0, packet number 1, a STREAM frame (stream 0).
        let frame = [0x0b, 0x00, 0x01, b'a'];
        input.extend_from_slice(&[0x00, 1, 0, frame.len() as u8, 0]);
        input.extend_from_slice(&frame);
        // Client, generation 1 (a key update), packet number 2, stream 4.
        let frame = [0x0b, 0x04, 0x01, b'b'];
        input.extend_from_slice(&[0x02, 2, 0, frame.len() as u8, 0]);
        input.extend_from_slice(&frame);
        let requests = quic::quic_keyed(&input).map(|q| q.requests);
        assert_eq!(requests, Some(2), "suite {suite}");
    }
    // Handshake packets: the server's EncryptedExtensions (ALPN h3) and
    // the client's Finished, sealed with the handshake secrets.
    let ee = [8, 0, 0, 11, 0, 9, 0, 0x10, 0, 5, 0, 3, 2, b'h', b'3'];
    let mut fin = vec![20, 0, 0, 32];
    fin.extend_from_slice(&[7; 32]);
    let mut input = vec![0];
    for (head, message) in [(0x41, &ee[..]), (0x40, &fin[..])] {
        let frame = [&[0x06, 0x00, message.len() as u8][..], message].concat();
        input.extend_from_slice(&[head, 1, 0, frame.len() as u8, 0]);
        input.extend_from_slice(&frame);
    }
    let quic = quic::quic_keyed(&input).expect("QUIC figures");
    let rec = &quic.list[0];
    assert_eq!(rec.tls.alpn.as_deref(), Some("h3"));
    let names: Vec<&str> = rec.tls.events.iter().map(|e| e.name).collect();
    assert_eq!(
        names,
        [
            "client_hello",
            "server_hello",
            "encrypted_extensions",
            "finished"
        ]
    );
    assert!(rec.handshake.client_handshake.is_some());
    // The seed with a QPACK encoder stream: its response's status comes
    // from the dynamic table.
    let seed = fs::read(root().join("fuzz/corpus/quic_keyed/qpack-dynamic")).expect("seed");
    let quic = quic::quic_keyed(&seed).expect("QUIC figures");
    assert_eq!(quic.status_codes.get("429"), Some(&1));
}

#[test]
fn merge_regressions() {
    replay("merge", |data| {
        harness::merge(data);
    });
}

/// The merge harness reads its seeds (halves of real captures in order,
/// reversed and overlapping, and two captures) through chained pieces.
#[test]
fn merge_harness_reads_its_seeds() {
    let seeds = corpus("merge");
    assert!(seeds.len() >= 10, "{} merge seeds", seeds.len());
    for seed in &seeds {
        assert!(harness::merge(seed) > 10, "a merge seed gives no frames");
    }
}

/// The step format the stream seeds use (fuzz/seeds.py) still decodes into
/// the conversation it was made from.
#[test]
fn step_format_round_trips() {
    let mut input = vec![0x04, 3, 0, b'a', b'b', b'c', 0x05, 1, 0, b'x', 0x03, 9];
    input.extend([0x82, 0x10, 0, 0, 0]);
    let mut got = Vec::new();
    harness::steps(&mut harness::Bytes::new(&input), |step| match step {
        harness::Step::Data(side, _, bytes) => got.push(format!("{side:?} {bytes:?}")),
        harness::Step::Gap(side, len) => got.push(format!("{side:?} gap {len}")),
    });
    assert_eq!(
        got,
        [
            "Client [97, 98, 99]",
            "Server [120]",
            "Server gap 9",
            "Client gap 16"
        ]
    );
}

/// Every file of fuzz/corpus/`target`/ (the minimised corpus).
fn corpus(target: &str) -> Vec<Vec<u8>> {
    corpus_where(target, |_| true)
}

/// The committed seeds of `target` (`seed-*`): what a running fuzzer
/// adds is not a seed.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    corpus_where(target, |name| name.starts_with("seed-"))
}

fn corpus_where(target: &str, keep: impl Fn(&str) -> bool) -> Vec<Vec<u8>> {
    let dir = root().join("fuzz/corpus").join(target);
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    // (Tolerates files vanishing under a running fuzzer.)
    entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            keep(path.file_name()?.to_str()?).then(|| fs::read(&path).ok())?
        })
        .collect()
}

/// The stream corpora (seeded from the real captures by fuzz/seeds.py)
/// still drive the analyzers past their first bytes: a harness or format
/// change that made every input fail early would fuzz nothing.
#[test]
fn stream_corpora_reach_the_analyzers() {
    let complete = corpus("tls_stream")
        .iter()
        .filter_map(|data| harness::tls_stream(data))
        .filter(|info| info.outcome == TlsOutcome::Complete && info.version.is_some())
        .count();
    assert!(
        complete > 0,
        "no tls_stream input completes a TLS handshake"
    );
    let http = corpus("http");
    let counts: Vec<(bool, u64, u64)> = http.iter().map(|data| harness::http(data)).collect();
    for h2 in [false, true] {
        assert!(
            counts
                .iter()
                .any(|&(is_h2, req, resp)| is_h2 == h2 && req > 0 && resp > 0),
            "no http input with requests and responses over {}",
            if h2 { "HTTP/2" } else { "HTTP/1" }
        );
    }
}

#[test]
fn tls_sealed_regressions() {
    replay("tls_sealed", |data| {
        sealed::tls_sealed(data);
    });
}

/// The sealed-record seeds (TLS 1.3's five suites with a KeyUpdate, and
/// the first three with accepted 0-RTT data; TLS 1.2's AEAD suites, GCM,
/// CCM and ChaCha20-Poly1305; six AES-CBC suites of
/// TLS 1.0, 1.1 and 1.2, with either MAC order) open completely and hand
/// on their requests and responses: the harness seals as the analyzer
/// opens.
#[test]
fn tls_sealed_seeds_open() {
    let mut opened = 0;
    for seed in seeds("tls_sealed") {
        let (decryption, plain) = sealed::tls_sealed(&seed);
        let d = decryption.expect("a decryption account");
        if d.outcome == DecryptionOutcome::Complete && d.records_opened >= 6 && plain >= 120 {
            opened += 1;
        }
    }
    assert!(opened >= 19, "only {opened} sealed seeds open completely");
}

#[test]
fn certificate_regressions() {
    replay("certificate", |data| {
        harness::certificate(data);
    });
}

/// The certificate seeds (fuzz/seeds.py) read as the chains they hold:
/// TLS 1.2's and 1.3's localhost certificate, the latter compressed with
/// zlib and zstd, and Cloudflare's two certificates compressed with brotli
/// (from the peer corpus).
#[test]
fn certificate_seeds_read() {
    let mut got: Vec<(u8, u64, u64)> = seeds("certificate")
        .into_iter()
        .map(|seed| {
            let (chain, bytes) = harness::certificate(&seed).expect("a chain");
            (seed[0], chain, bytes)
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (0, 1, 828),
            (1, 1, 828),
            (2, 1, 828),
            (2, 1, 828),
            (2, 2, 2328)
        ]
    );
}
