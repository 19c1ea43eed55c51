//! Throughput of the pipeline's stages, in bytes per second:
//!
//! * `decode`: `decode::decode` over every frame of a real capture in memory;
//! * `reassembly`: one direction of a long stream in MSS-sized segments, in
//!   order and with every group of four segments reordered;
//! * `tls`: `TlsAnalyzer` fed a real TLS 1.3 and a real TLS 1.2 connection
//!   (from `captures/`) alone, and followed by 200 application-data record
//!   flights; each run ends with the record's `tls` section (fingerprints);
//! * `http1`: `Http1` over a long keep-alive conversation (Content-Length and
//!   chunked responses);
//! * `keylog`: opening 16 KiB records with each AEAD cipher `--keylog`
//!   uses, and with AES-CBC and its HMAC (decrypting and checking the MAC:
//!   the ceiling of decryption on bulk transfers), and the whole analysis
//!   of the real key log captures (`tls-suites-curl-4`,
//!   `tls13-openssl-keyupdate`, `tls-cbc-7`: small connections, so mostly
//!   key derivation) with and without their key logs;
//! * `end_to_end`: `handshakes::analyze` over a ~20 MB capture from
//!   `handshakes-synth`, held in memory (`FileSource::from_reader` on a
//!   `Cursor`), so the figure excludes disk reads; on one and two threads.
//!
//! Run with `cargo bench --bench pipeline`; docs/performance.md records the
//! figures. Kept short: 10 samples, a few seconds per benchmark.

use std::hint::black_box;
use std::io::{self, Cursor};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use handshakes::analyze::http::Http1;
use handshakes::analyze::tls::crypto::{Aead, Block, Cipher, Hash, Mac, BLOCK};
use handshakes::analyze::tls::TlsAnalyzer;
use handshakes::decode::{decode, Decoded, TcpFlags, TcpSegment};
use handshakes::flow::reassembly::{Reassembler, StreamSink};
use handshakes::flow::seq::Seq;
use handshakes::record::{Instant, Side};
use handshakes::source::file::FileSource;
use handshakes::source::{LinkType, PacketSource, RawPacket};
use handshakes::time::Timestamp;
use handshakes::{Config, ConnectionRecord, KeyLog, RecordSink};

const MSS: usize = 1460;

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

/// Every frame of a capture, copied out of the reader.
struct Frame {
    ts: Timestamp,
    link: LinkType,
    orig_len: u32,
    data: Vec<u8>,
}

impl Frame {
    fn raw(&self, index: u64) -> RawPacket<'_> {
        RawPacket {
            index,
            ts: self.ts,
            link: self.link,
            orig_len: self.orig_len,
            data: &self.data,
        }
    }
}

fn load(path: &Path) -> Vec<Frame> {
    let mut source = FileSource::open(path).expect("capture opens");
    let mut frames = Vec::new();
    while let Some(p) = source.next_packet().expect("capture reads") {
        frames.push(Frame {
            ts: p.ts,
            link: p.link,
            orig_len: p.orig_len,
            data: p.data.to_vec(),
        });
    }
    frames
}

fn bench_decode(c: &mut Criterion) {
    let frames = load(&capture("java-urlconnection-keepalive-off-10x10.pcap"));
    let bytes: usize = frames.iter().map(|f| f.data.len()).sum();
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function(format!("real capture, {} frames", frames.len()), |b| {
        b.iter(|| {
            let mut tcp = 0usize;
            for (i, f) in frames.iter().enumerate() {
                if let Decoded::Tcp(seg, _) = decode(&f.raw(i as u64)) {
                    tcp += seg.payload.len();
                }
            }
            black_box(tcp)
        })
    });
    group.finish();
}

/// Counts what a reassembler delivers.
#[derive(Default)]
struct Count {
    bytes: u64,
    gaps: u64,
}

impl StreamSink for Count {
    fn data(&mut self, _ts: Timestamp, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
    }
    fn gap(&mut self, len: u64) {
        self.gaps += len;
    }
}

fn segment(seq: u32, payload: &[u8]) -> TcpSegment<'_> {
    let src: SocketAddr = "10.0.0.1:40000".parse().expect("address");
    let dst: SocketAddr = "10.0.0.2:443".parse().expect("address");
    TcpSegment {
        src,
        dst,
        seq,
        ack: 1,
        flags: TcpFlags(TcpFlags::ACK),
        window: 502,
        payload,
        payload_len: payload.len() as u32,
        overlay: None,
    }
}

fn bench_reassembly(c: &mut Criterion) {
    const LEN: usize = 8 << 20;
    let stream: Vec<u8> = (0..LEN).map(|i| (i * 31 % 251) as u8).collect();
    let isn = 0xfff0_0000u32; // wraps within the stream
                              // (sequence number, offset, length) of each segment.
    let in_order: Vec<(u32, usize, usize)> = (0..LEN)
        .step_by(MSS)
        .map(|off| {
            let len = MSS.min(LEN - off);
            (isn.wrapping_add(1 + off as u32), off, len)
        })
        .collect();
    let mut reordered = in_order.clone();
    for group in reordered.chunks_mut(4) {
        group.reverse();
    }
    let mut group = c.benchmark_group("reassembly");
    group.throughput(Throughput::Bytes(LEN as u64));
    for (name, segments) in [
        ("in order", &in_order),
        ("groups of 4 reversed", &reordered),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut r = Reassembler::new(256 * 1024);
                r.start_at(Seq(isn).plus(1));
                let mut sink = Count::default();
                for &(seq, off, len) in segments.iter() {
                    let seg = segment(seq, &stream[off..off + len]);
                    r.segment(&seg, Timestamp(off as i64), &mut sink);
                }
                assert_eq!(sink.bytes, LEN as u64);
                black_box(sink.gaps)
            })
        });
    }
    group.finish();
}

/// Collects one direction's delivered stream chunks, in delivery order.
struct Collect<'a> {
    side: Side,
    out: &'a mut Vec<(Side, Timestamp, Vec<u8>)>,
}

impl StreamSink for Collect<'_> {
    fn data(&mut self, ts: Timestamp, bytes: &[u8]) {
        self.out.push((self.side, ts, bytes.to_vec()));
    }
    fn gap(&mut self, _len: u64) {}
}

/// The stream chunks of a capture's first TCP connection, both directions
/// in the order they were delivered, without the closing alerts.
fn first_connection_chunks(path: &Path) -> Vec<(Side, Timestamp, Vec<u8>)> {
    let frames = load(path);
    let mut client: Option<(SocketAddr, SocketAddr)> = None;
    let mut reassemblers = [Reassembler::new(1 << 20), Reassembler::new(1 << 20)];
    let mut chunks = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let Decoded::Tcp(seg, _) = decode(&f.raw(i as u64)) else {
            continue;
        };
        let (c, s) = *client.get_or_insert((seg.src, seg.dst));
        let side = if (seg.src, seg.dst) == (c, s) {
            Side::Client
        } else if (seg.src, seg.dst) == (s, c) {
            Side::Server
        } else {
            continue;
        };
        let r = &mut reassemblers[side as usize];
        r.segment(
            &seg,
            f.ts,
            &mut Collect {
                side,
                out: &mut chunks,
            },
        );
    }
    // Closing alerts (content type 21) would end the TLS conversation.
    chunks.retain(|(_, _, b)| b.first() != Some(&21));
    chunks
}

/// `n` request/response exchanges of application-data records after the
/// handshake: a 300-byte request record, a 64 KB response in 16 KB records,
/// delivered in MSS-sized chunks.
fn app_data_chunks(n: usize, after: Timestamp) -> Vec<(Side, Timestamp, Vec<u8>)> {
    let record = |len: usize| {
        let mut r = vec![23, 3, 3, (len >> 8) as u8, len as u8];
        r.extend((0..len).map(|i| (i * 7) as u8));
        r
    };
    let mut chunks = Vec::new();
    let mut t = after.0;
    for _ in 0..n {
        t += 1_000_000;
        chunks.push((Side::Client, Timestamp(t), record(300)));
        let response: Vec<u8> = (0..4).flat_map(|_| record(16401)).collect();
        for part in response.chunks(MSS) {
            t += 10_000;
            chunks.push((Side::Server, Timestamp(t), part.to_vec()));
        }
    }
    chunks
}

fn bench_tls(c: &mut Criterion) {
    let mut group = c.benchmark_group("tls");
    for (name, file) in [
        (
            "TLS 1.3 handshake + 200 exchanges",
            "tls13-curl-keepalive.pcap",
        ),
        (
            "TLS 1.2 handshake + 200 exchanges",
            "tls12-curl-3-new-connections.pcap",
        ),
    ] {
        let real = first_connection_chunks(&capture(file));
        let last = real.last().map_or(Timestamp(0), |c| c.1);
        let mut long = real.clone();
        long.extend(app_data_chunks(200, last));
        let version = &name[..7];
        let cases = [
            (format!("{version} real connection only"), &real),
            (name.to_string(), &long),
        ];
        for (label, chunks) in cases {
            let bytes: usize = chunks.iter().map(|c| c.2.len()).sum();
            group.throughput(Throughput::Bytes(bytes as u64));
            group.bench_function(label, |b| {
                b.iter(|| {
                    let mut tls = TlsAnalyzer::new(256 * 1024, 100);
                    for (side, ts, bytes) in chunks.iter() {
                        tls.data(*side, *ts, bytes);
                    }
                    tls.end_of_streams();
                    assert!(tls.is_tls());
                    // The record as a report needs it: fingerprints and all.
                    let at = |t: Timestamp| Instant {
                        ts: t.as_secs_f64(),
                        at: t.as_secs_f64(),
                    };
                    let info = tls.take_findings(Timestamp(0)).map(|f| f.into_info(&at));
                    black_box((tls.flights().requests, info))
                })
            });
        }
    }
    group.finish();
}

fn bench_http1(c: &mut Criterion) {
    const EXCHANGES: usize = 500;
    let mut chunks: Vec<(Side, Vec<u8>)> = Vec::new();
    for i in 0..EXCHANGES {
        let request = format!(
            "GET /api/v1/items/{i}?fields=id,name HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n\r\n"
        );
        chunks.push((Side::Client, request.into_bytes()));
        let body_len = 1000 + (i * 7919) % 30000;
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\nContent-Type: text/html\r\n{}\r\n",
            if i % 4 == 3 {
                "Transfer-Encoding: chunked\r\n".to_string()
            } else {
                format!("Content-Length: {body_len}\r\n")
            }
        )
        .into_bytes();
        let body: Vec<u8> = (0..body_len).map(|j| b'a' + (j % 26) as u8).collect();
        if i % 4 == 3 {
            for part in body.chunks(4096) {
                response.extend(format!("{:x}\r\n", part.len()).into_bytes());
                response.extend_from_slice(part);
                response.extend_from_slice(b"\r\n");
            }
            response.extend_from_slice(b"0\r\n\r\n");
        } else {
            response.extend_from_slice(&body);
        }
        for part in response.chunks(MSS) {
            chunks.push((Side::Server, part.to_vec()));
        }
    }
    let bytes: usize = chunks.iter().map(|c| c.1.len()).sum();
    let mut group = c.benchmark_group("http1");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function(format!("keep-alive, {EXCHANGES} exchanges"), |b| {
        b.iter(|| {
            let mut http = Http1::new(100);
            for (i, (side, bytes)) in chunks.iter().enumerate() {
                http.data(*side, Timestamp(i as i64 * 1000), bytes);
            }
            assert_eq!(http.requests, EXCHANGES as u64);
            black_box(http.responses)
        })
    });
    group.finish();
}

/// Drops records, counting them.
struct Discard(u64);

impl RecordSink for Discard {
    fn record(&mut self, _rec: ConnectionRecord) -> io::Result<()> {
        self.0 += 1;
        Ok(())
    }
}

/// `handshakes::analyze` over a capture held in memory: its connections,
/// exact requests and records.
fn analyze_in_memory(pcap: &'static [u8], config: &Config) -> (u64, u64, u64) {
    let mut source =
        FileSource::from_reader(Path::new("capture.pcap"), Box::new(Cursor::new(pcap)))
            .expect("capture opens");
    let mut sink = Discard(0);
    let summary = handshakes::analyze(&mut source, config, &mut sink).expect("analysis runs");
    (summary.connections, summary.requests_exact, sink.0)
}

fn bench_keylog(c: &mut Criterion) {
    let mut group = c.benchmark_group("keylog");
    const RECORD: usize = 16 * 1024;
    group.throughput(Throughput::Bytes(RECORD as u64));
    for (name, cipher) in [
        ("AES-128-GCM", Cipher::Aes128Gcm),
        ("AES-256-GCM", Cipher::Aes256Gcm),
        ("ChaCha20-Poly1305", Cipher::ChaCha20Poly1305),
    ] {
        let aead = Aead::new(cipher, &vec![7; cipher.key_len()]).expect("a key");
        let mut sealed: Vec<u8> = (0..RECORD).map(|i| i as u8).collect();
        assert!(aead.seal(&[1; 12], b"header", &mut sealed));
        group.bench_function(format!("open a 16 KiB record, {name}"), |b| {
            let mut copy = sealed.clone();
            b.iter(|| {
                copy.copy_from_slice(&sealed);
                black_box(aead.open(&[1; 12], b"header", &mut copy))
            })
        });
    }
    for (name, key_len, hash) in [
        ("AES-128-CBC, HMAC-SHA-1", 16, Hash::Sha1),
        ("AES-256-CBC, HMAC-SHA-384", 32, Hash::Sha384),
    ] {
        let block = Block::new(&vec![7; key_len]).expect("a key");
        let mac = Mac::new(hash, &[9; 20]).expect("a MAC key");
        let mut sealed: Vec<u8> = (0..RECORD).map(|i| i as u8).collect();
        let tag = mac.tag(&[b"header", &sealed]);
        assert!(block.encrypt(&[1; BLOCK], &mut sealed).is_some());
        group.bench_function(format!("open a 16 KiB record, {name}"), |b| {
            let mut copy = sealed.clone();
            b.iter(|| {
                copy.copy_from_slice(&sealed);
                black_box(block.decrypt(&[1; BLOCK], &mut copy));
                black_box(mac.verify(&[b"header", &copy], &tag))
            })
        });
    }
    for name in ["tls-suites-curl-4", "tls13-openssl-keyupdate", "tls-cbc-7"] {
        let pcap: &'static [u8] = Box::leak(
            std::fs::read(capture(&format!("{name}.pcap")))
                .expect("capture reads")
                .into_boxed_slice(),
        );
        let path = capture(&format!("{name}.keylog"));
        let keylog = std::sync::Arc::new(KeyLog::open(&[path], false).expect("key log reads"));
        group.throughput(Throughput::Bytes(pcap.len() as u64));
        for (with, keys) in [("without", None), ("with", Some(keylog))] {
            let config = Config {
                threads: 1,
                keylog: keys,
                ..Config::default()
            };
            group.bench_function(format!("analyze {name} {with} its key log"), |b| {
                b.iter(|| black_box(analyze_in_memory(pcap, &config)))
            });
        }
    }
    group.finish();
}

fn bench_end_to_end(c: &mut Criterion) {
    let out = Command::new(env!("CARGO_BIN_EXE_handshakes-synth"))
        .args(["--out", "-", "--size", "20MB", "--seed", "7", "--quiet"])
        .output()
        .expect("handshakes-synth runs");
    assert!(out.status.success(), "handshakes-synth failed");
    // Leaked once so every iteration reads it in place (no copy per run).
    let pcap: &'static [u8] = Box::leak(out.stdout.into_boxed_slice());
    let mut group = c.benchmark_group("end_to_end");
    group.throughput(Throughput::Bytes(pcap.len() as u64));
    for threads in [1, 2] {
        let config = Config {
            threads,
            ..Config::default()
        };
        group.bench_function(
            format!(
                "analyze synth {} MB, {threads} thread(s)",
                pcap.len() / 1_000_000
            ),
            |b| b.iter(|| black_box(analyze_in_memory(pcap, &config))),
        );
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_decode, bench_reassembly, bench_tls, bench_http1, bench_keylog, bench_end_to_end
}
criterion_main!(benches);
