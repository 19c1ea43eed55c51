//! `handshakes-synth`: writes a large, protocol-valid synthetic capture for
//! benchmarks and profiling (`scripts/bench.sh`, `benches/pipeline.rs`).
//!
//! ```console
//! handshakes-synth --out big.pcap --size 1GiB [--seed N] [--concurrency N]
//! ```
//!
//! The output is a classic pcap (microseconds, Ethernet, snap length 65535)
//! written as a stream in bounded memory: a discrete-event simulation of many
//! concurrent TCP connections from a few thousand client addresses (IPv4 and
//! IPv6) to a few servers on 443 and 80, interleaved packet by packet. The mix:
//!
//! * TLS 1.3 and TLS 1.2 full handshakes (ClientHello with SNI, ALPN,
//!   supported_versions and key_share; a ~3 KB certificate chain split
//!   across segments, ServerKeyExchange, ServerHelloDone, ClientKeyExchange,
//!   ChangeCipherSpec and encrypted Finished in 1.2; encrypted flights in 1.3),
//!   and resumed ones (1.2 by session-id echo without a Certificate, 1.3 by
//!   pre_shared_key), resuming only sessions a client really had;
//! * 1 to 50 requests per connection as alternating application-data record
//!   flights (HTTP/1.1 or h2 inside), responses of 1 KB to 200 KB split into
//!   MSS-sized segments and 16 KB records; cleartext HTTP/1.1 on port 80 with
//!   Content-Length and chunked responses;
//! * ACKs every second segment, a little reordering and retransmission,
//!   FIN/FIN and RST closes, close_notify alerts, and port reuse (a closed
//!   tuple opened again with a new ISN).
//!
//! What it generated is printed on stderr, the last line as JSON, so a bench
//! can check that `handshakes analyze` finds the same connections, TLS
//! handshakes and requests. Every request flight is built so that the TLS
//! flight estimate counts it exactly (see `analyze::tls::flights`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;
use std::time::Instant;

use etherparse::{PacketBuilder, TcpHeader, TcpOptionElement};

const USAGE: &str =
    "usage: handshakes-synth --out FILE|- [--size 1GiB] [--seed N] [--concurrency N] [--quiet]";

/// Capture time of the first packet: 2023-11-14T22:13:20Z.
const EPOCH_SECS: u64 = 1_700_000_000;
/// The link the capture was taken on, for spacing packets in time (10 Gbit/s).
const LINK_BITS_PER_NS: u64 = 10;
/// Size of the filler buffers that payload bytes are copied from.
const FILL_LEN: usize = 1 << 20;
/// Largest TLS plaintext per record.
const MAX_PLAIN: usize = 16384;
/// TLS 1.3 record expansion: content type byte and a 16-byte AEAD tag.
const OVERHEAD_13: usize = 17;
/// TLS 1.2 AES-GCM record expansion: 8-byte explicit nonce and 16-byte tag.
const OVERHEAD_12: usize = 24;

// ---------------------------------------------------------------------------
// A tiny deterministic PRNG (xorshift64*).

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 once, so that small seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (`n` below 2^32).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() >> 32) * n) >> 32
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Log-uniform in `lo..hi`: as many values per decade.
    fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (lo, hi) = (lo.max(1) as f64, hi.max(2) as f64);
        (lo * (hi / lo).powf(self.unit())) as u64
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            let n = chunk.len();
            chunk.copy_from_slice(&v[..n]);
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.fill(&mut v);
        v
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------
// Byte building.

/// A growing message with length-prefixed sub-blocks.
#[derive(Default)]
struct Buf(Vec<u8>);

impl Buf {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    /// A block preceded by its length in `width` bytes.
    fn block(&mut self, width: usize, f: impl FnOnce(&mut Buf)) {
        let at = self.0.len();
        self.0.resize(at + width, 0);
        f(self);
        let len = (self.0.len() - at - width) as u32;
        let be = len.to_be_bytes();
        self.0[at..at + width].copy_from_slice(&be[4 - width..]);
    }
    fn len8(&mut self, f: impl FnOnce(&mut Buf)) {
        self.block(1, f);
    }
    fn len16(&mut self, f: impl FnOnce(&mut Buf)) {
        self.block(2, f);
    }
    fn len24(&mut self, f: impl FnOnce(&mut Buf)) {
        self.block(3, f);
    }
    /// A TLS extension: type and length-prefixed data.
    fn ext(&mut self, ty: u16, f: impl FnOnce(&mut Buf)) {
        self.u16(ty);
        self.len16(f);
    }
}

/// A TLS record around `body`.
fn record(content_type: u8, version: u16, body: &[u8]) -> Vec<u8> {
    let mut b = Buf::default();
    b.u8(content_type);
    b.u16(version);
    b.len16(|b| b.bytes(body));
    b.0
}

/// A handshake message: type, 24-bit length, body.
fn handshake(kind: u8, f: impl FnOnce(&mut Buf)) -> Vec<u8> {
    let mut b = Buf::default();
    b.u8(kind);
    b.len24(f);
    b.0
}

const CIPHERS_13: [u16; 3] = [0x1301, 0x1302, 0x1303];
const CIPHERS_12: [u16; 12] = [
    0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035,
];
const SIGNATURE_ALGORITHMS: [u16; 8] = [
    0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
];
const GREASE: [u16; 4] = [0x0a0a, 0x3a3a, 0x7a7a, 0xdada];

/// What a ClientHello offers.
struct Hello<'a> {
    sni: &'a str,
    alpn: &'a [&'a str],
    offer13: bool,
    session_id: &'a [u8],
    /// TLS 1.3 resumption: a pre_shared_key extension (last, as required).
    psk: bool,
    grease: bool,
}

fn client_hello(rng: &mut Rng, h: &Hello<'_>) -> Vec<u8> {
    let msg = handshake(1, |b| {
        b.u16(0x0303);
        b.bytes(&rng.bytes(32));
        b.len8(|b| b.bytes(h.session_id));
        let grease = *rng.pick(&GREASE);
        b.len16(|b| {
            if h.grease {
                b.u16(grease);
            }
            if h.offer13 {
                CIPHERS_13.iter().for_each(|&c| b.u16(c));
            }
            CIPHERS_12.iter().for_each(|&c| b.u16(c));
        });
        b.len8(|b| b.u8(0));
        b.len16(|b| {
            if h.grease {
                b.ext(grease, |_| {});
            }
            b.ext(0, |b| {
                b.len16(|b| {
                    b.u8(0);
                    b.len16(|b| b.bytes(h.sni.as_bytes()));
                })
            });
            b.ext(23, |_| {});
            b.ext(0xff01, |b| b.u8(0));
            b.ext(10, |b| {
                b.len16(|b| [0x001d, 0x0017, 0x0018].iter().for_each(|&g| b.u16(g)))
            });
            b.ext(11, |b| b.len8(|b| b.u8(0)));
            b.ext(35, |_| {});
            if !h.alpn.is_empty() {
                b.ext(16, |b| {
                    b.len16(|b| {
                        for p in h.alpn {
                            b.len8(|b| b.bytes(p.as_bytes()));
                        }
                    })
                });
            }
            b.ext(5, |b| {
                b.u8(1);
                b.u16(0);
                b.u16(0);
            });
            b.ext(13, |b| {
                b.len16(|b| SIGNATURE_ALGORITHMS.iter().for_each(|&s| b.u16(s)))
            });
            b.ext(18, |_| {});
            if h.offer13 {
                let key = rng.bytes(32);
                b.ext(51, |b| {
                    b.len16(|b| {
                        b.u16(0x001d);
                        b.len16(|b| b.bytes(&key));
                    })
                });
                b.ext(45, |b| b.len8(|b| b.u8(1)));
                b.ext(43, |b| {
                    b.len8(|b| {
                        b.u16(0x0304);
                        b.u16(0x0303);
                    })
                });
            }
            if h.psk {
                let n = rng.range(120, 240) as usize;
                let identity = rng.bytes(n);
                let age = rng.u32();
                let binder = rng.bytes(32);
                b.ext(41, |b| {
                    b.len16(|b| {
                        b.len16(|b| b.bytes(&identity));
                        b.u32(age);
                    });
                    b.len16(|b| b.len8(|b| b.bytes(&binder)));
                });
            }
        });
    });
    record(22, 0x0301, &msg)
}

/// ServerHello: TLS 1.3 with supported_versions and key_share (and
/// pre_shared_key when resumed); TLS 1.2 with the selected ALPN.
fn server_hello(
    rng: &mut Rng,
    session_id: &[u8],
    cipher: u16,
    v13: bool,
    psk: bool,
    alpn: Option<&str>,
) -> Vec<u8> {
    handshake(2, |b| {
        b.u16(0x0303);
        b.bytes(&rng.bytes(32));
        b.len8(|b| b.bytes(session_id));
        b.u16(cipher);
        b.u8(0);
        b.len16(|b| {
            if v13 {
                b.ext(43, |b| b.u16(0x0304));
                let key = rng.bytes(32);
                b.ext(51, |b| {
                    b.u16(0x001d);
                    b.len16(|b| b.bytes(&key));
                });
                if psk {
                    b.ext(41, |b| b.u16(0));
                }
            } else {
                b.ext(0xff01, |b| b.u8(0));
                b.ext(23, |_| {});
                b.ext(11, |b| b.len8(|b| b.u8(0)));
                if let Some(p) = alpn {
                    b.ext(16, |b| b.len16(|b| b.len8(|b| b.bytes(p.as_bytes()))));
                }
            }
        })
    })
}

/// A DER element: tag, definite length, contents.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let n = content.len();
    let mut v = Vec::with_capacity(n + 4);
    v.push(tag);
    match n {
        0..=127 => v.push(n as u8),
        128..=255 => v.extend_from_slice(&[0x81, n as u8]),
        _ => v.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]),
    }
    v.extend_from_slice(content);
    v
}

fn der_seq(parts: &[Vec<u8>]) -> Vec<u8> {
    der(0x30, &parts.concat())
}

/// An X.501 name: C, O and CN.
fn der_name(cn: &str, org: &str) -> Vec<u8> {
    let rdn = |oid: &[u8], tag: u8, value: &str| {
        der(
            0x31,
            &der_seq(&[der(0x06, oid), der(tag, value.as_bytes())]),
        )
    };
    der_seq(&[
        rdn(&[0x55, 4, 6], 0x13, "US"),
        rdn(&[0x55, 4, 10], 0x0c, org),
        rdn(&[0x55, 4, 3], 0x0c, cn),
    ])
}

/// A structurally valid X.509 v3 certificate signed with
/// sha256WithRSAEncryption (random bits). A CA certificate carries an RSA
/// 4096 key; a server certificate an ECDSA P-256 key and a subjectAltName
/// listing `subject` and as many other names as bring it to about `size`
/// bytes (as CDN certificates do).
fn x509(rng: &mut Rng, subject: &str, issuer: &str, ca: bool, size: usize) -> Vec<u8> {
    const SHA256_RSA: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 11];
    const RSA: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 1];
    const EC_PUBLIC_KEY: [u8; 7] = [0x2a, 0x86, 0x48, 0xce, 0x3d, 2, 1];
    const PRIME256V1: [u8; 8] = [0x2a, 0x86, 0x48, 0xce, 0x3d, 3, 1, 7];
    let alg = der_seq(&[der(0x06, &SHA256_RSA), der(0x05, &[])]);
    let mut serial = rng.bytes(16);
    serial[0] &= 0x7f;
    let spki = if ca {
        let mut modulus = vec![0];
        modulus.extend_from_slice(&rng.bytes(512));
        modulus[1] |= 0x80;
        let key = der_seq(&[der(0x02, &modulus), der(0x02, &[1, 0, 1])]);
        let mut bits = vec![0];
        bits.extend_from_slice(&key);
        der_seq(&[
            der_seq(&[der(0x06, &RSA), der(0x05, &[])]),
            der(0x03, &bits),
        ])
    } else {
        let mut point = vec![0, 4];
        point.extend_from_slice(&rng.bytes(64));
        der_seq(&[
            der_seq(&[der(0x06, &EC_PUBLIC_KEY), der(0x06, &PRIME256V1)]),
            der(0x03, &point),
        ])
    };
    let validity = der_seq(&[der(0x17, b"231101000000Z"), der(0x17, b"240201000000Z")]);
    let basic = if ca {
        der_seq(&[der(0x01, &[0xff]), der(0x02, &[0])])
    } else {
        der_seq(&[])
    };
    let mut exts = vec![der_seq(&[
        der(0x06, &[0x55, 0x1d, 0x13]),
        der(0x01, &[0xff]),
        der(0x04, &basic),
    ])];
    let key_id = rng.bytes(20);
    exts.push(der_seq(&[
        der(0x06, &[0x55, 0x1d, 0x0e]),
        der(0x04, &der(0x04, &key_id)),
    ]));
    if !ca {
        let mut names = vec![der(0x82, subject.as_bytes())];
        let mut len = 460 + subject.len();
        while len < size {
            let name = format!("s{}.{subject}", rng.below(100_000));
            len += name.len() + 2;
            names.push(der(0x82, name.as_bytes()));
        }
        let san = der_seq(&names);
        exts.push(der_seq(&[der(0x06, &[0x55, 0x1d, 0x11]), der(0x04, &san)]));
    }
    let tbs = der_seq(&[
        der(0xa0, &der(0x02, &[2])),
        der(0x02, &serial),
        alg.clone(),
        der_name(issuer, "Synthetic Trust Services"),
        validity,
        der_name(subject, "Synthetic Example Inc"),
        spki,
        der(0xa3, &der_seq(&exts)),
    ]);
    let mut signature = vec![0];
    signature.extend_from_slice(&rng.bytes(if ca { 512 } else { 256 }));
    der_seq(&[tbs, alg, der(0x03, &signature)])
}

/// A certificate chain of about 3 KB: the server's certificate and an
/// intermediate CA's.
fn certificate(rng: &mut Rng, sni: &str) -> Vec<u8> {
    let leaf_size = rng.range(1000, 2000) as usize;
    let leaf = x509(rng, sni, "Synthetic Issuing CA 1", false, leaf_size);
    let ca = x509(rng, "Synthetic Issuing CA 1", "Synthetic Root CA", true, 0);
    handshake(11, |b| {
        b.len24(|b| {
            for cert in [&leaf, &ca] {
                b.len24(|b| b.bytes(cert));
            }
        })
    })
}

fn server_key_exchange(rng: &mut Rng) -> Vec<u8> {
    let (key, sig) = (rng.bytes(32), rng.bytes(256));
    handshake(12, |b| {
        b.u8(3);
        b.u16(0x001d);
        b.len8(|b| b.bytes(&key));
        b.u16(0x0804);
        b.len16(|b| b.bytes(&sig));
    })
}

fn client_key_exchange(rng: &mut Rng) -> Vec<u8> {
    let key = rng.bytes(32);
    handshake(16, |b| b.len8(|b| b.bytes(&key)))
}

fn change_cipher_spec() -> Vec<u8> {
    record(20, 0x0303, &[1])
}

/// An encrypted TLS 1.2 Finished (AES-GCM: nonce, 16 bytes, tag).
fn finished_12(rng: &mut Rng) -> Vec<u8> {
    record(22, 0x0303, &rng.bytes(40))
}

// ---------------------------------------------------------------------------
// Flights: what one side sends before the other speaks, produced lazily.

enum Piece {
    Lit(Vec<u8>),
    /// `left` bytes copied from a filler buffer, from `pos` on.
    Fill {
        random: bool,
        pos: usize,
        left: usize,
    },
}

#[derive(Default)]
struct Flight {
    pieces: VecDeque<Piece>,
    /// Bytes of the front `Lit` already taken.
    lit_pos: usize,
}

impl Flight {
    fn lit(&mut self, bytes: Vec<u8>) {
        self.pieces.push_back(Piece::Lit(bytes));
    }

    fn fill(&mut self, rng: &mut Rng, random: bool, n: usize) {
        if n > 0 {
            self.pieces.push_back(Piece::Fill {
                random,
                pos: rng.below(FILL_LEN as u64) as usize,
                left: n,
            });
        }
    }

    /// Application-data records carrying `plain` bytes of plaintext.
    fn app_data(&mut self, rng: &mut Rng, plain: usize, overhead: usize) {
        let mut left = plain.max(1);
        while left > 0 {
            let n = left.min(MAX_PLAIN);
            left -= n;
            let mut header = Buf::default();
            header.u8(23);
            header.u16(0x0303);
            header.u16((n + overhead) as u16);
            self.lit(header.0);
            self.fill(rng, true, n + overhead);
        }
    }

    fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Moves up to `max` bytes into `out`.
    fn take(&mut self, max: usize, out: &mut Vec<u8>, fills: &Fills) {
        out.clear();
        while out.len() < max {
            let need = max - out.len();
            match self.pieces.front_mut() {
                None => break,
                Some(Piece::Lit(bytes)) => {
                    let rest = &bytes[self.lit_pos..];
                    let n = rest.len().min(need);
                    out.extend_from_slice(&rest[..n]);
                    self.lit_pos += n;
                    if self.lit_pos == bytes.len() {
                        self.lit_pos = 0;
                        self.pieces.pop_front();
                    }
                }
                Some(Piece::Fill { random, pos, left }) => {
                    let n = (*left).min(need);
                    let src = if *random { &fills.random } else { &fills.text };
                    let from = *pos;
                    out.extend_from_slice(&src[from..from + n]);
                    *pos = (from + n) % FILL_LEN;
                    *left -= n;
                    if *left == 0 {
                        self.pieces.pop_front();
                    }
                }
            }
        }
    }
}

/// Payload sources: random bytes (ciphertext) and text (HTTP bodies), with
/// a tail so any `pos < FILL_LEN` can be followed by a whole segment.
struct Fills {
    random: Vec<u8>,
    text: Vec<u8>,
}

impl Fills {
    fn new(rng: &mut Rng) -> Fills {
        let len = FILL_LEN + 64 * 1024;
        let random = rng.bytes(len);
        const WORDS: [&str; 16] = [
            "<div class=\"item\">",
            "</div>\n",
            "lorem ",
            "ipsum ",
            "{\"id\":",
            "\"name\":\"",
            "\"},",
            "connection ",
            "handshake ",
            "request ",
            "<span>",
            "</span>",
            "0123456789",
            "function(a,b){return a+b}",
            ";\n",
            "    ",
        ];
        let mut text = Vec::with_capacity(len + 64);
        while text.len() < len {
            text.extend_from_slice(rng.pick(&WORDS).as_bytes());
        }
        text.truncate(len);
        Fills { random, text }
    }
}

// ---------------------------------------------------------------------------
// Hosts and connections.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Host {
    ip: IpAddr,
    mac: [u8; 6],
}

impl Host {
    fn new(ip: IpAddr, tag: u8, index: usize) -> Host {
        let i = (index as u32).to_be_bytes();
        Host {
            ip,
            mac: [0x02, tag, i[0], i[1], i[2], i[3]],
        }
    }
}

struct Server {
    host: Host,
    port: u16,
    sni: &'static str,
    /// Negotiates TLS 1.3 with clients that offer it.
    tls13: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CloseKind {
    FinClient,
    FinServer,
    RstClient,
    RstServer,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum App {
    /// Cleartext HTTP/1.1.
    Http,
    /// HTTP/1.1 inside TLS.
    TlsHttp1,
    /// HTTP/2 inside TLS (ALPN h2).
    TlsH2,
}

/// One step of a connection's conversation.
enum Step {
    Send {
        side: Side,
        flight: Flight,
        /// Delay after the previous step ended.
        delay: u64,
    },
    Close {
        kind: CloseKind,
        delay: u64,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Syn,
    SynAck,
    Ack,
    Run,
    /// Closing: how many close packets were written so far.
    Closing(CloseKind, u8),
}

type Tuple = (IpAddr, u16, IpAddr, u16);

struct Conn {
    client: Host,
    cport: u16,
    server: Host,
    sport: u16,
    client_idx: usize,
    server_idx: usize,
    /// Next sequence number to send, per side.
    seq: [u32; 2],
    ip_id: [u16; 2],
    rtt: u64,
    /// Segments sent per round trip.
    burst: usize,
    mss: usize,
    app: App,
    tls: Option<Tls>,
    requests_left: u32,
    requests_done: u32,
    handshake_done: bool,
    close: CloseKind,
    script: VecDeque<Step>,
    current: Option<(Side, Flight)>,
    state: State,
}

struct Tls {
    v13: bool,
    resumed: bool,
    session_id: Vec<u8>,
    cipher: u16,
    alpn_offer: &'static [&'static str],
}

impl Conn {
    fn tuple(&self) -> Tuple {
        (self.client.ip, self.cport, self.server.ip, self.sport)
    }

    fn endpoints(&self, from: Side) -> (Host, u16, Host, u16) {
        match from {
            Side::Client => (self.client, self.cport, self.server, self.sport),
            Side::Server => (self.server, self.sport, self.client, self.cport),
        }
    }

    fn overhead(&self) -> usize {
        match &self.tls {
            Some(t) if t.v13 => OVERHEAD_13,
            _ => OVERHEAD_12,
        }
    }
}

// ---------------------------------------------------------------------------
// Output: pcap records, timed on a 10 Gbit/s link.

struct Out {
    w: Box<dyn Write>,
    /// Capture clock, nanoseconds since `EPOCH_SECS`: never goes backwards.
    clock: u64,
    frame: Vec<u8>,
    payload: Vec<u8>,
    packets: u64,
    bytes: u64,
}

/// TCP flags of one segment.
#[derive(Clone, Copy, Default)]
struct Flags {
    syn: bool,
    ack: bool,
    fin: bool,
    rst: bool,
    psh: bool,
}

impl Out {
    fn new(w: Box<dyn Write>) -> io::Result<Out> {
        let mut out = Out {
            w,
            clock: 0,
            frame: Vec::with_capacity(2048),
            payload: Vec::with_capacity(2048),
            packets: 0,
            bytes: 0,
        };
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.extend_from_slice(&65535u32.to_le_bytes());
        header.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        out.w.write_all(&header)?;
        out.bytes += header.len() as u64;
        Ok(out)
    }

    /// Writes one segment from `from` at time `t` (or later, if the link is
    /// busy) carrying `self.payload`.
    fn segment(&mut self, t: u64, c: &mut Conn, from: Side, flags: Flags) -> io::Result<()> {
        let (src, sport, dst, dport) = c.endpoints(from);
        let seq = c.seq[from as usize];
        let ack = c.seq[from.other() as usize];
        let mut tcp = TcpHeader::new(
            sport,
            dport,
            seq,
            if from == Side::Client { 502 } else { 501 },
        );
        tcp.syn = flags.syn;
        tcp.ack = flags.ack;
        tcp.fin = flags.fin;
        tcp.rst = flags.rst;
        tcp.psh = flags.psh;
        if flags.ack {
            tcp.acknowledgment_number = ack;
        }
        if flags.syn {
            tcp.window_size = 64240;
            let _ = tcp.set_options(&[
                TcpOptionElement::MaximumSegmentSize(c.mss as u16),
                TcpOptionElement::Noop,
                TcpOptionElement::WindowScale(7),
                TcpOptionElement::SelectiveAcknowledgementPermitted,
            ]);
        }
        let ttl = if from == Side::Client { 64 } else { 57 };
        let id = &mut c.ip_id[from as usize];
        *id = id.wrapping_add(1);
        let step = PacketBuilder::ethernet2(src.mac, dst.mac);
        let step = match (src.ip, dst.ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => step.ipv4(s.octets(), d.octets(), ttl),
            (IpAddr::V6(s), IpAddr::V6(d)) => step.ipv6(s.octets(), d.octets(), ttl),
            _ => return Err(io::Error::other("mixed address families")),
        };
        self.frame.clear();
        step.tcp_header(tcp)
            .write(&mut self.frame, &self.payload)
            .map_err(io::Error::other)?;
        let ts = t.max(self.clock);
        self.clock = ts + (self.frame.len() as u64 * 8).div_ceil(LINK_BITS_PER_NS);
        let secs = EPOCH_SECS + ts / 1_000_000_000;
        let usecs = (ts % 1_000_000_000) / 1000;
        let len = self.frame.len() as u32;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(secs as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&(usecs as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&len.to_le_bytes());
        self.w.write_all(&rec)?;
        self.w.write_all(&self.frame)?;
        self.packets += 1;
        self.bytes += 16 + u64::from(len);
        // SYN and FIN take one sequence number.
        let used = self.payload.len() as u32 + u32::from(flags.syn) + u32::from(flags.fin);
        c.seq[from as usize] = seq.wrapping_add(used);
        Ok(())
    }

    /// A segment without payload.
    fn control(&mut self, t: u64, c: &mut Conn, from: Side, flags: Flags) -> io::Result<()> {
        self.payload.clear();
        self.segment(t, c, from, flags)
    }
}

const ACK: Flags = Flags {
    syn: false,
    ack: true,
    fin: false,
    rst: false,
    psh: false,
};

// ---------------------------------------------------------------------------
// The simulation.

#[derive(Default)]
struct Stats {
    connections: u64,
    ipv6: u64,
    cleartext: u64,
    tls: u64,
    tls13_full: u64,
    tls13_resumed: u64,
    tls12_full: u64,
    tls12_resumed: u64,
    h2: u64,
    requests_cleartext: u64,
    requests_tls_http1: u64,
    requests_tls_h2: u64,
    chunked_responses: u64,
    closes: [u64; 4],
    port_reuses: u64,
    reordered: u64,
    retransmitted: u64,
    max_concurrent: u64,
    close_notify_replies: u64,
}

struct Sim {
    rng: Rng,
    fills: Fills,
    out: Out,
    target: u64,
    concurrency: usize,
    clients: Vec<Host>,
    /// Index of the first IPv6 client.
    clients_v6: usize,
    servers: Vec<Server>,
    /// Per client: the next ephemeral port.
    ports: Vec<u16>,
    /// Sessions a client can resume: (client, server) → TLS 1.3, session id.
    sessions: HashMap<(usize, usize), (bool, Vec<u8>)>,
    active: HashSet<Tuple>,
    /// Tuples closed lately, for deliberate port reuse.
    recently_closed: VecDeque<(Tuple, usize, usize)>,
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    order: u64,
    live: usize,
    winding_down: bool,
    stats: Stats,
}

const SNI_V4: [&str; 6] = [
    "www.example.com",
    "api.example.com",
    "cdn.example.net",
    "static.example.org",
    "login.example.com",
    "img.example.net",
];

impl Sim {
    fn new(seed: u64, target: u64, concurrency: usize, w: Box<dyn Write>) -> io::Result<Sim> {
        let mut rng = Rng::new(seed);
        let fills = Fills::new(&mut rng);
        let mut clients = Vec::new();
        for i in 0..2000usize {
            let ip = Ipv4Addr::new(
                10,
                1 + (i / 250) as u8,
                (i % 250) as u8 + 1,
                10 + (i % 7) as u8,
            );
            clients.push(Host::new(IpAddr::V4(ip), 0x10, i));
        }
        let clients_v6 = clients.len();
        for i in 0..200usize {
            let ip = Ipv6Addr::new(
                0x2001,
                0xdb8,
                0x100,
                (i / 200) as u16,
                0,
                0,
                0x1000,
                i as u16 + 1,
            );
            clients.push(Host::new(IpAddr::V6(ip), 0x16, i));
        }
        let mut servers = Vec::new();
        for (i, sni) in SNI_V4.iter().enumerate() {
            let ip = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10 + i as u8));
            servers.push(Server {
                host: Host::new(ip, 0x20, i),
                port: 443,
                sni,
                tls13: i != 3 && i != 5,
            });
        }
        for (i, sni) in ["www.example.com", "api.example.com"].iter().enumerate() {
            let ip = IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0x443,
                0,
                0,
                0,
                0,
                i as u16 + 1,
            ));
            servers.push(Server {
                host: Host::new(ip, 0x26, i),
                port: 443,
                sni,
                tls13: true,
            });
        }
        for i in 0..2u8 {
            let ip = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 80 + i));
            servers.push(Server {
                host: Host::new(ip, 0x28, usize::from(i)),
                port: 80,
                sni: "",
                tls13: false,
            });
        }
        let ip = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x80, 0, 0, 0, 0, 1));
        servers.push(Server {
            host: Host::new(ip, 0x29, 0),
            port: 80,
            sni: "",
            tls13: false,
        });
        let ports = (0..clients.len())
            .map(|_| rng.range(32768, 60999) as u16)
            .collect();
        Ok(Sim {
            rng,
            fills,
            out: Out::new(w)?,
            target,
            concurrency,
            clients,
            clients_v6,
            servers,
            ports,
            sessions: HashMap::new(),
            active: HashSet::new(),
            recently_closed: VecDeque::new(),
            slots: Vec::new(),
            free: Vec::new(),
            heap: BinaryHeap::new(),
            order: 0,
            live: 0,
            winding_down: false,
            stats: Stats::default(),
        })
    }

    fn schedule(&mut self, t: u64, slot: usize) {
        self.order += 1;
        self.heap.push(Reverse((t, self.order, slot)));
    }

    fn run(&mut self) -> io::Result<()> {
        for _ in 0..self.concurrency {
            let t = self.rng.below(200_000_000);
            self.spawn(t);
        }
        while let Some(Reverse((t, _, slot))) = self.heap.pop() {
            let Some(mut conn) = self.slots[slot].take() else {
                continue;
            };
            match self.wake(t, &mut conn)? {
                Some(next) => {
                    self.slots[slot] = Some(conn);
                    self.schedule(next, slot);
                }
                None => {
                    self.finished(conn);
                    self.free.push(slot);
                }
            }
        }
        self.out.w.flush()
    }

    /// Bytes that the open connections will probably still write.
    fn wind_down_margin(&self) -> u64 {
        self.live as u64 * 24 * 1024
    }

    fn finished(&mut self, conn: Conn) {
        self.live -= 1;
        let tuple = conn.tuple();
        self.active.remove(&tuple);
        self.recently_closed
            .push_back((tuple, conn.client_idx, conn.server_idx));
        if self.recently_closed.len() > 256 {
            self.recently_closed.pop_front();
        }
        if !self.winding_down && self.out.bytes + self.wind_down_margin() >= self.target {
            self.winding_down = true;
        }
        if !self.winding_down {
            let gap = self.rng.log_uniform(10_000, 20_000_000);
            let t = self.out.clock + gap;
            self.spawn(t);
        }
    }

    /// Opens a new connection at time `t`.
    fn spawn(&mut self, t: u64) {
        let rng = &mut self.rng;
        // Port reuse: a tuple that closed lately, opened again with a new ISN.
        let reuse = if rng.chance(0.03) && !self.recently_closed.is_empty() {
            let i = rng.below(self.recently_closed.len() as u64) as usize;
            let (tuple, ci, si) = self.recently_closed[i];
            (!self.active.contains(&tuple)).then_some((tuple.1, ci, si))
        } else {
            None
        };
        let (client_idx, server_idx, cport) = match reuse {
            Some((port, ci, si)) => {
                self.stats.port_reuses += 1;
                (ci, si, port)
            }
            None => {
                // A few busy clients, a long tail of quiet ones.
                let v6 = rng.chance(0.1);
                let ci = if v6 {
                    let n = self.clients.len() - self.clients_v6;
                    self.clients_v6 + (n as f64 * rng.unit().powf(3.0)) as usize
                } else {
                    (self.clients_v6 as f64 * rng.unit().powf(3.0)) as usize
                };
                let clear = rng.chance(0.15);
                let candidates: Vec<usize> = self
                    .servers
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.host.ip.is_ipv6() == v6 && (s.port == 80) == clear)
                    .map(|(i, _)| i)
                    .collect();
                let si = *rng.pick(&candidates);
                let server = &self.servers[si];
                let mut port;
                loop {
                    port = self.ports[ci];
                    self.ports[ci] = if port >= 60999 { 32768 } else { port + 1 };
                    let tuple = (self.clients[ci].ip, port, server.host.ip, server.port);
                    if !self.active.contains(&tuple) {
                        break;
                    }
                }
                (ci, si, port)
            }
        };
        let client = self.clients[client_idx];
        let server = &self.servers[server_idx];
        let rng = &mut self.rng;
        let v6 = client.ip.is_ipv6();
        let requests = match rng.below(100) {
            0..45 => 1,
            45..75 => rng.range(2, 10),
            _ => rng.range(11, 50),
        } as u32;
        let close = match rng.below(100) {
            0..45 => CloseKind::FinClient,
            45..80 => CloseKind::FinServer,
            80..92 => CloseKind::RstClient,
            _ => CloseKind::RstServer,
        };
        let (app, tls) = if server.port == 80 {
            (App::Http, None)
        } else {
            let offer13 = rng.chance(0.9);
            let v13_possible = offer13 && server.tls13;
            let session = self.sessions.get(&(client_idx, server_idx));
            let resume = session.filter(|(v13, _)| *v13 == v13_possible && rng.chance(0.7));
            let (resumed, session_id) = match resume {
                Some((_, id)) => (true, id.clone()),
                None => (false, rng.bytes(32)),
            };
            let alpn_offer: &'static [&'static str] = match rng.below(10) {
                0..6 => &["h2", "http/1.1"],
                6..9 => &["http/1.1"],
                _ => &[],
            };
            let h2 = alpn_offer.first() == Some(&"h2") && rng.chance(0.85);
            let cipher = if v13_possible {
                *rng.pick(&CIPHERS_13)
            } else {
                *rng.pick(&[0xc02f, 0xc030, 0xc02b])
            };
            let tls = Tls {
                v13: v13_possible,
                resumed,
                session_id,
                cipher,
                alpn_offer,
            };
            (if h2 { App::TlsH2 } else { App::TlsHttp1 }, Some(tls))
        };
        let conn = Conn {
            client,
            cport,
            server: server.host,
            sport: server.port,
            client_idx,
            server_idx,
            seq: [rng.u32(), rng.u32()],
            ip_id: [rng.u32() as u16, rng.u32() as u16],
            rtt: rng.log_uniform(300_000, 120_000_000),
            burst: rng.range(6, 40) as usize,
            mss: if v6 { 1440 } else { 1460 },
            app,
            tls,
            requests_left: requests,
            requests_done: 0,
            handshake_done: false,
            close,
            script: VecDeque::new(),
            current: None,
            state: State::Syn,
        };
        let s = &mut self.stats;
        s.connections += 1;
        s.ipv6 += u64::from(v6);
        match &conn.tls {
            None => s.cleartext += 1,
            Some(t) => {
                s.tls += 1;
                match (t.v13, t.resumed) {
                    (true, false) => s.tls13_full += 1,
                    (true, true) => s.tls13_resumed += 1,
                    (false, false) => s.tls12_full += 1,
                    (false, true) => s.tls12_resumed += 1,
                }
                s.h2 += u64::from(conn.app == App::TlsH2);
                if !t.resumed {
                    self.sessions
                        .insert((client_idx, server_idx), (t.v13, t.session_id.clone()));
                }
            }
        }
        self.active.insert(conn.tuple());
        self.live += 1;
        self.stats.max_concurrent = self.stats.max_concurrent.max(self.live as u64);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(conn);
                slot
            }
            None => {
                self.slots.push(Some(conn));
                self.slots.len() - 1
            }
        };
        self.schedule(t, slot);
    }

    /// Runs one step of `c` at time `t`; the time of its next step, or
    /// `None` when it is over.
    fn wake(&mut self, t: u64, c: &mut Conn) -> io::Result<Option<u64>> {
        let half = c.rtt / 2;
        match c.state {
            State::Syn => {
                let syn = Flags {
                    syn: true,
                    ..Flags::default()
                };
                self.out.control(t, c, Side::Client, syn)?;
                c.state = State::SynAck;
                Ok(Some(self.out.clock + half))
            }
            State::SynAck => {
                let synack = Flags {
                    syn: true,
                    ack: true,
                    ..Flags::default()
                };
                self.out.control(t, c, Side::Server, synack)?;
                c.state = State::Ack;
                Ok(Some(self.out.clock + half))
            }
            State::Ack => {
                self.out.control(t, c, Side::Client, ACK)?;
                c.state = State::Run;
                self.next_step(c)
            }
            State::Run => {
                let done = self.burst(t, c)?;
                if done {
                    self.next_step(c)
                } else {
                    Ok(Some(self.out.clock + c.rtt))
                }
            }
            State::Closing(kind, stage) => self.close(t, c, kind, stage),
        }
    }

    /// Sends one round trip's worth of the current flight, the receiver
    /// acknowledging every second segment. True when the flight is over.
    fn burst(&mut self, t: u64, c: &mut Conn) -> io::Result<bool> {
        let Some((side, mut flight)) = c.current.take() else {
            return Ok(true);
        };
        let mut sent = 0;
        while sent < c.burst && !flight.is_empty() {
            // Two segments, then the receiver's ACK.
            let mut pair: Vec<(u32, Vec<u8>, bool)> = Vec::with_capacity(2);
            for _ in 0..2 {
                if flight.is_empty() {
                    break;
                }
                flight.take(c.mss, &mut self.out.payload, &self.fills);
                let last = flight.is_empty();
                pair.push((c.seq[side as usize], self.out.payload.clone(), last));
                c.seq[side as usize] =
                    c.seq[side as usize].wrapping_add(self.out.payload.len() as u32);
                sent += 1;
            }
            let end = c.seq[side as usize];
            let reorder = pair.len() == 2 && self.rng.chance(0.004);
            if reorder {
                pair.swap(0, 1);
                self.stats.reordered += 1;
            }
            let retransmit = self.rng.chance(0.002);
            for (i, (seq, payload, last)) in pair.iter().enumerate() {
                self.write_data(t, c, side, *seq, payload, *last)?;
                if retransmit && i == 0 {
                    self.write_data(t, c, side, *seq, payload, *last)?;
                    self.stats.retransmitted += 1;
                }
            }
            c.seq[side as usize] = end;
            self.out.control(t, c, side.other(), ACK)?;
        }
        if flight.is_empty() {
            Ok(true)
        } else {
            c.current = Some((side, flight));
            Ok(false)
        }
    }

    fn write_data(
        &mut self,
        t: u64,
        c: &mut Conn,
        side: Side,
        seq: u32,
        payload: &[u8],
        last: bool,
    ) -> io::Result<()> {
        let saved = c.seq[side as usize];
        c.seq[side as usize] = seq;
        self.out.payload.clear();
        self.out.payload.extend_from_slice(payload);
        let flags = Flags { psh: last, ..ACK };
        self.out.segment(t, c, side, flags)?;
        c.seq[side as usize] = saved;
        Ok(())
    }

    /// Starts the next step of the conversation; its time.
    fn next_step(&mut self, c: &mut Conn) -> io::Result<Option<u64>> {
        if c.script.is_empty() {
            self.plan(c);
        }
        match c.script.pop_front() {
            Some(Step::Send {
                side,
                flight,
                delay,
            }) => {
                c.current = Some((side, flight));
                Ok(Some(self.out.clock + delay))
            }
            Some(Step::Close { kind, delay }) => {
                c.state = State::Closing(kind, 0);
                Ok(Some(self.out.clock + delay))
            }
            None => Ok(None),
        }
    }

    /// Writes the close, one side per wake-up.
    fn close(
        &mut self,
        t: u64,
        c: &mut Conn,
        kind: CloseKind,
        stage: u8,
    ) -> io::Result<Option<u64>> {
        let half = c.rtt / 2;
        let fin = Flags { fin: true, ..ACK };
        let rst = Flags { rst: true, ..ACK };
        let (first, second) = match kind {
            CloseKind::FinClient | CloseKind::RstClient => (Side::Client, Side::Server),
            CloseKind::FinServer | CloseKind::RstServer => (Side::Server, Side::Client),
        };
        match (kind, stage) {
            (CloseKind::RstClient | CloseKind::RstServer, _) => {
                self.out.control(t, c, first, rst)?;
                Ok(None)
            }
            (_, 0) => {
                self.out.control(t, c, first, fin)?;
                c.state = State::Closing(kind, 1);
                Ok(Some(self.out.clock + half))
            }
            (_, 1) => {
                self.out.control(t, c, second, fin)?;
                c.state = State::Closing(kind, 2);
                Ok(Some(self.out.clock + half))
            }
            _ => {
                self.out.control(t, c, first, ACK)?;
                Ok(None)
            }
        }
    }

    /// Appends the next part of the conversation to `c.script`: the
    /// handshake with the first exchange, then one exchange at a time, then
    /// the close.
    fn plan(&mut self, c: &mut Conn) {
        if self.winding_down && c.handshake_done {
            c.requests_left = 0;
        }
        if c.requests_left == 0 {
            self.plan_close(c);
            return;
        }
        if !c.handshake_done {
            c.handshake_done = true;
            if c.tls.is_some() {
                self.plan_tls_handshake(c);
            }
        }
        self.plan_exchange(c);
    }

    fn plan_close(&mut self, c: &mut Conn) {
        let rng = &mut self.rng;
        let kind = c.close;
        self.stats.closes[kind as usize] += 1;
        let closer = match kind {
            CloseKind::FinClient | CloseKind::RstClient => Side::Client,
            CloseKind::FinServer | CloseKind::RstServer => Side::Server,
        };
        let delay = rng.log_uniform(20_000, 50_000_000);
        // close_notify from the side that closes, often answered by the other.
        let fin = matches!(kind, CloseKind::FinClient | CloseKind::FinServer);
        if c.tls.is_some() && fin && rng.chance(0.7) {
            let overhead = c.overhead();
            // TLS 1.3 hides the alert in an application-data record.
            let outer = if c.tls.as_ref().is_some_and(|t| t.v13) {
                23
            } else {
                21
            };
            let alert = |rng: &mut Rng| {
                let mut flight = Flight::default();
                let mut header = Buf::default();
                header.u8(outer);
                header.u16(0x0303);
                header.u16((2 + overhead) as u16);
                flight.lit(header.0);
                flight.fill(rng, true, 2 + overhead);
                flight
            };
            c.script.push_back(Step::Send {
                side: closer,
                flight: alert(rng),
                delay,
            });
            if rng.chance(0.5) {
                self.stats.close_notify_replies += 1;
                c.script.push_back(Step::Send {
                    side: closer.other(),
                    flight: alert(rng),
                    delay: c.rtt / 2 + 20_000,
                });
            }
            c.script.push_back(Step::Close {
                kind,
                delay: 10_000,
            });
        } else {
            c.script.push_back(Step::Close { kind, delay });
        }
    }

    fn plan_tls_handshake(&mut self, c: &mut Conn) {
        let rng = &mut self.rng;
        let server = &self.servers[c.server_idx];
        let Some(tls) = &c.tls else {
            return;
        };
        let half = c.rtt / 2;
        let think = |rng: &mut Rng| half + rng.log_uniform(20_000, 2_000_000);
        let hello = Hello {
            sni: server.sni,
            alpn: tls.alpn_offer,
            offer13: tls.v13 || rng.chance(0.5),
            session_id: &tls.session_id,
            psk: tls.v13 && tls.resumed,
            grease: rng.chance(0.5),
        };
        let mut ch = Flight::default();
        ch.lit(client_hello(rng, &hello));
        c.script.push_back(Step::Send {
            side: Side::Client,
            flight: ch,
            delay: rng.range(20_000, 200_000),
        });
        let alpn = match (c.app, tls.alpn_offer.is_empty()) {
            (_, true) => None,
            (App::TlsH2, _) => Some("h2"),
            _ => Some("http/1.1"),
        };
        let mut s = Flight::default();
        if tls.v13 {
            let sh = server_hello(rng, &tls.session_id, tls.cipher, true, tls.resumed, None);
            s.lit(record(22, 0x0303, &sh));
            s.lit(change_cipher_spec());
            // EncryptedExtensions (+ Certificate, CertificateVerify) + Finished.
            let finished = if tls.cipher == 0x1302 { 52 } else { 36 };
            if tls.resumed {
                s.app_data(rng, 40 + finished, OVERHEAD_13);
            } else {
                let cert = rng.range(2700, 3600) as usize;
                s.app_data(rng, 40 + cert, OVERHEAD_13);
                s.app_data(rng, 264 + finished, OVERHEAD_13);
            }
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: s,
                delay: think(rng),
            });
            // The client's CCS and Finished (53 or 69 bytes) lead the flight
            // that carries the first request.
            let mut f = Flight::default();
            f.lit(change_cipher_spec());
            f.app_data(rng, finished, OVERHEAD_13);
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: f,
                delay: half + rng.log_uniform(10_000, 500_000),
            });
        } else if tls.resumed {
            let sh = server_hello(rng, &tls.session_id, tls.cipher, false, false, alpn);
            s.lit(record(22, 0x0303, &sh));
            s.lit(change_cipher_spec());
            s.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: s,
                delay: think(rng),
            });
            let mut f = Flight::default();
            f.lit(change_cipher_spec());
            f.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: f,
                delay: half + rng.log_uniform(10_000, 500_000),
            });
        } else {
            let new_id = rng.bytes(32);
            let sh = server_hello(rng, &new_id, tls.cipher, false, false, alpn);
            let cert = certificate(rng, server.sni);
            let ske = server_key_exchange(rng);
            let shd = handshake(14, |_| {});
            if rng.chance(0.5) {
                // One record per message, the certificate sometimes split
                // over two records.
                s.lit(record(22, 0x0303, &sh));
                if rng.chance(0.3) {
                    let cut = cert.len() / 2;
                    s.lit(record(22, 0x0303, &cert[..cut]));
                    s.lit(record(22, 0x0303, &cert[cut..]));
                } else {
                    s.lit(record(22, 0x0303, &cert));
                }
                s.lit(record(22, 0x0303, &ske));
                s.lit(record(22, 0x0303, &shd));
            } else {
                let all = [sh, cert, ske, shd].concat();
                s.lit(record(22, 0x0303, &all));
            }
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: s,
                delay: think(rng),
            });
            let mut f = Flight::default();
            f.lit(record(22, 0x0303, &client_key_exchange(rng)));
            f.lit(change_cipher_spec());
            f.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: f,
                delay: half + rng.log_uniform(10_000, 500_000),
            });
            let mut g = Flight::default();
            g.lit(change_cipher_spec());
            g.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: g,
                delay: think(rng),
            });
        }
    }

    /// One request and its response.
    fn plan_exchange(&mut self, c: &mut Conn) {
        let rng = &mut self.rng;
        let first = c.requests_done == 0;
        let last = c.requests_left == 1;
        c.requests_left -= 1;
        c.requests_done += 1;
        let half = c.rtt / 2;
        let overhead = c.overhead();
        let request_delay = if first {
            rng.log_uniform(20_000, 300_000)
        } else {
            rng.log_uniform(50_000, 400_000_000)
        };
        let response_delay = half + rng.log_uniform(100_000, 40_000_000);
        // The body: mostly small, some medium, a few large.
        let body = match rng.below(100) {
            0..60 => rng.log_uniform(1024, 16 * 1024),
            60..90 => rng.log_uniform(16 * 1024, 64 * 1024),
            _ => rng.log_uniform(64 * 1024, 200 * 1024),
        } as usize;
        // A TLS 1.3 or resumed 1.2 handshake ends with a client flight that
        // carries the first request too.
        let merge = first
            && c.tls.as_ref().is_some_and(|t| t.v13 || t.resumed)
            && matches!(
                c.script.back(),
                Some(Step::Send {
                    side: Side::Client,
                    ..
                })
            );
        let mut req = Flight::default();
        let mut resp = Flight::default();
        match c.app {
            App::Http => {
                self.stats.requests_cleartext += 1;
                let server = &self.servers[c.server_idx];
                let close_header = last && c.close == CloseKind::FinServer && rng.chance(0.5);
                let (text, post) = http_request(rng, server.host.ip, close_header);
                req.lit(text);
                if let Some(n) = post {
                    req.fill(rng, false, n);
                }
                let chunked = rng.chance(0.25);
                self.stats.chunked_responses += u64::from(chunked);
                let status = match rng.below(100) {
                    0..88 => 200,
                    88..94 => 304,
                    94..98 => 404,
                    _ => 500,
                };
                let body = match status {
                    304 => 0,
                    404 | 500 => rng.range(100, 600) as usize,
                    _ => body,
                };
                let mut head = format!(
                    "HTTP/1.1 {status} {}\r\nServer: nginx/1.24.0\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\nContent-Type: text/html; charset=utf-8\r\n",
                    reason(status)
                );
                if close_header {
                    head.push_str("Connection: close\r\n");
                } else {
                    head.push_str("Connection: keep-alive\r\n");
                }
                if status == 304 {
                    head.push_str("\r\n");
                    resp.lit(head.into_bytes());
                } else if chunked {
                    head.push_str("Transfer-Encoding: chunked\r\n\r\n");
                    resp.lit(head.into_bytes());
                    let mut left = body;
                    while left > 0 {
                        let n = left.min(rng.range(2000, 9000) as usize);
                        left -= n;
                        resp.lit(format!("{n:x}\r\n").into_bytes());
                        resp.fill(rng, false, n);
                        resp.lit(b"\r\n".to_vec());
                    }
                    resp.lit(b"0\r\n\r\n".to_vec());
                } else {
                    head.push_str(&format!("Content-Length: {body}\r\n\r\n"));
                    resp.lit(head.into_bytes());
                    resp.fill(rng, false, body);
                }
            }
            App::TlsHttp1 => {
                self.stats.requests_tls_http1 += 1;
                let post = rng.chance(0.1);
                let plain = rng.range(180, 700) as usize
                    + if post {
                        rng.range(50, 2000) as usize
                    } else {
                        0
                    };
                req.app_data(rng, plain, overhead);
                if first && c.tls.as_ref().is_some_and(|t| t.v13) {
                    new_session_tickets(rng, &mut resp);
                }
                let n = rng.range(200, 450) as usize + body;

                resp.app_data(rng, n, overhead);
            }
            App::TlsH2 => {
                self.stats.requests_tls_h2 += 1;
                if first {
                    // Preface, SETTINGS and WINDOW_UPDATE in one small record.
                    req.app_data(rng, 24 + 27 + 13, overhead);
                }
                // HEADERS (HPACK), and DATA for a POST.
                let n = rng.range(30, 160) as usize;

                req.app_data(rng, n, overhead);
                if rng.chance(0.1) {
                    let n = rng.range(50, 2000) as usize;

                    req.app_data(rng, n, overhead);
                }
                if first && c.tls.as_ref().is_some_and(|t| t.v13) {
                    new_session_tickets(rng, &mut resp);
                }
                if first {
                    // The server's SETTINGS and the ACK of the client's.
                    resp.app_data(rng, 27 + 9, overhead);
                }
                // HEADERS, then DATA frames (a 9-byte header per 16 KB).
                let n = rng.range(40, 120) as usize;

                resp.app_data(rng, n, overhead);
                resp.app_data(rng, body + 9 * body.div_ceil(16384), overhead);
            }
        }
        if merge {
            if let Some(Step::Send { flight, .. }) = c.script.back_mut() {
                flight.pieces.extend(req.pieces);
            }
        } else {
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: req,
                delay: request_delay,
            });
        }
        c.script.push_back(Step::Send {
            side: Side::Server,
            flight: resp,
            delay: response_delay,
        });
    }
}

/// TLS 1.3 NewSessionTicket records sent after the client's Finished.
fn new_session_tickets(rng: &mut Rng, flight: &mut Flight) {
    for _ in 0..rng.range(1, 2) {
        let n = rng.range(190, 260) as usize;

        flight.app_data(rng, n, OVERHEAD_13);
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        304 => "Not Modified",
        404 => "Not Found",
        _ => "Internal Server Error",
    }
}

/// A cleartext HTTP/1.1 request, and the length of its body for a POST.
fn http_request(rng: &mut Rng, server: IpAddr, close: bool) -> (Vec<u8>, Option<usize>) {
    const AGENTS: [&str; 4] = [
        "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
        "curl/8.4.0",
        "Java-http-client/21.0.1",
        "python-requests/2.31.0",
    ];
    let host = match server {
        IpAddr::V4(_) => "www.example.com",
        IpAddr::V6(_) => "v6.example.com",
    };
    let n = rng.below(1_000_000);
    let path = match rng.below(5) {
        0 => "/".to_string(),
        1 => format!("/static/js/app.{n:06x}.js"),
        2 => format!("/api/v1/items/{n}?fields=id,name&page={}", n % 17),
        3 => format!("/images/{n}.jpg"),
        _ => format!("/articles/{}/comments", n % 5000),
    };
    let post = rng.chance(0.1).then(|| rng.range(20, 4000) as usize);
    let mut text = format!(
        "{} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {}\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n",
        if post.is_some() { "POST" } else { "GET" },
        rng.pick(&AGENTS),
    );
    if let Some(len) = post {
        text.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {len}\r\n"
        ));
    }
    if close {
        text.push_str("Connection: close\r\n");
    }
    text.push_str("\r\n");
    (text.into_bytes(), post)
}

// ---------------------------------------------------------------------------
// Command line.

/// `1GiB`, `50MB`, `20MiB`, `1000000`, `512k`.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return None,
    };
    Some((num * mult as f64) as u64)
}

struct Args {
    out: String,
    size: u64,
    seed: u64,
    concurrency: usize,
    quiet: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: String::new(),
        size: 1 << 30,
        seed: 1,
        concurrency: 300,
        quiet: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name.as_str() {
            "--out" | "-o" => args.out = value()?,
            "--size" | "-s" => {
                let v = value()?;
                args.size = parse_size(&v).ok_or_else(|| format!("bad size {v:?}"))?;
            }
            "--seed" => {
                let v = value()?;
                args.seed = v.parse().map_err(|_| format!("bad seed {v:?}"))?;
            }
            "--concurrency" => {
                let v = value()?;
                args.concurrency = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("bad concurrency {v:?}"))?;
            }
            "--quiet" | "-q" => args.quiet = true,
            "--help" | "-h" => return Err(String::new()),
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    if args.out.is_empty() {
        return Err("--out is required".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("handshakes-synth: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let writer: Box<dyn Write> = if args.out == "-" {
        Box::new(BufWriter::with_capacity(1 << 20, io::stdout()))
    } else {
        match File::create(&args.out) {
            Ok(f) => Box::new(BufWriter::with_capacity(4 << 20, f)),
            Err(e) => {
                eprintln!("handshakes-synth: {}: {e}", args.out);
                return ExitCode::from(2);
            }
        }
    };
    let started = Instant::now();
    let mut sim = match Sim::new(args.seed, args.size, args.concurrency, writer) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("handshakes-synth: {}: {e}", args.out);
            return ExitCode::from(1);
        }
    };
    if let Err(e) = sim.run() {
        eprintln!("handshakes-synth: {}: {e}", args.out);
        return ExitCode::from(1);
    }
    let elapsed = started.elapsed().as_secs_f64();
    report(&sim, &args, elapsed);
    ExitCode::SUCCESS
}

fn report(sim: &Sim, args: &Args, elapsed: f64) {
    let s = &sim.stats;
    let out = &sim.out;
    let requests_tls = s.requests_tls_http1 + s.requests_tls_h2;
    let requests = s.requests_cleartext + requests_tls;
    let span = out.clock as f64 / 1e9;
    if !args.quiet {
        eprintln!(
            "handshakes-synth: wrote {} ({} bytes, {} packets, {span:.1} s of capture) in {elapsed:.1} s ({:.0} MB/s), seed {}",
            args.out,
            out.bytes,
            out.packets,
            out.bytes as f64 / 1e6 / elapsed.max(1e-9),
            args.seed
        );
        eprintln!(
            "connections  {} ({} IPv6, peak {} open, {} reusing a closed tuple)",
            s.connections, s.ipv6, s.max_concurrent, s.port_reuses
        );
        eprintln!(
            "TLS          {} connections: 1.3 full {}, 1.3 resumed {}, 1.2 full {}, 1.2 resumed {}; h2 {}",
            s.tls, s.tls13_full, s.tls13_resumed, s.tls12_full, s.tls12_resumed, s.h2
        );
        eprintln!(
            "requests     {requests}: cleartext HTTP/1.1 {} (exact; {} chunked responses), TLS {requests_tls} (HTTP/1.1 {}, h2 {})",
            s.requests_cleartext, s.chunked_responses, s.requests_tls_http1, s.requests_tls_h2
        );
        eprintln!(
            "closes       FIN by client {}, FIN by server {}, RST by client {}, RST by server {}; {} reordered pairs, {} retransmissions, {} close_notify replies",
            s.closes[0], s.closes[1], s.closes[2], s.closes[3], s.reordered, s.retransmitted, s.close_notify_replies
        );
    }
    eprintln!(
        "{{\"bytes\":{},\"packets\":{},\"connections\":{},\"tcp_handshakes\":{},\"tls_connections\":{},\"tls_handshakes_full\":{},\"tls_handshakes_resumed\":{},\"requests\":{},\"requests_exact\":{},\"requests_estimated\":{},\"h2_connections\":{},\"closes_fin\":{},\"closes_rst\":{},\"seconds\":{elapsed:.3}}}",
        out.bytes,
        out.packets,
        s.connections,
        s.connections,
        s.tls,
        s.tls13_full + s.tls12_full,
        s.tls13_resumed + s.tls12_resumed,
        requests,
        s.requests_cleartext,
        requests_tls,
        s.h2,
        s.closes[0] + s.closes[1],
        s.closes[2] + s.closes[3],
    );
}
