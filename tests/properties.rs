//! Property tests (proptest, 64 cases each).
//!
//! * Reassembly (in [`reassembly`]): a random byte stream cut into random
//!   segments, delivered in any order with duplicates and overlapping
//!   re-sends of the same bytes, from random initial sequence numbers
//!   (wrapping past 2^32 too), comes out of `Reassembler` exactly as it went
//!   in; with a buffer cap smaller than the out-of-order data it never
//!   buffers more than the cap and every byte it does deliver is at its
//!   right offset.
//! * Segmentation invariance (in [`segmentation`]): four real-looking
//!   conversations (TLS 1.2 full handshake, TLS 1.3 with flights, HTTP/1.1
//!   keep-alive with chunked and Content-Length bodies, h2c with prior
//!   knowledge), re-cut into random segments with random retransmitted and
//!   overlapping copies and reordering within each message, give the same
//!   `tls` and `http` sections as the conversation sent one segment per
//!   message. All segments of one message share its timestamp, so times
//!   must be equal too.
//!
//! The fully general properties found three bugs, now fixed (minimal cases:
//! `reassembly_same_start_shorter_copy_first`,
//! `tls_is_recognised_when_the_first_segment_is_tiny`,
//! `http1_is_recognised_when_the_first_segment_is_tiny`); the "tolerant"
//! variants that steer around those inputs (see
//! [`reassembly::same_start_same_length`] and [`segmentation::tolerant`])
//! stay as a second line of defence.
//!
//! Here: the proptest configuration, the strategies both share, and the
//! segmentation machinery with its four conversations and a check of their
//! baselines. The properties themselves and their minimal cases are in the
//! submodules.

use std::io::Cursor;
use std::path::Path;

use handshakes::decode::{TcpFlags, TcpSegment};
use handshakes::flow::reassembly::{Reassembler, StreamSink};
use handshakes::flow::seq::Seq;
use handshakes::source::file::FileSource;
use handshakes::time::Timestamp;
use handshakes::{Config, ConnectionRecord, Summary};
use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestCaseError};
use serde_json::Value;

use crate::support::conv::Timed;
use crate::support::tls::*;
use crate::support::*;

mod reassembly;
mod segmentation;

/// 64 cases from a fixed seed, so `cargo test` is repeatable;
/// `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override both (e.g.
/// `PROPTEST_CASES=5000 PROPTEST_RNG_SEED=$RANDOM cargo test properties`).
fn config() -> ProptestConfig {
    let env = ProptestConfig::default();
    let set = |name: &str| std::env::var_os(name).is_some();
    ProptestConfig {
        cases: if set("PROPTEST_CASES") { env.cases } else { 64 },
        rng_seed: if set("PROPTEST_RNG_SEED") {
            env.rng_seed
        } else {
            RngSeed::Fixed(0x6861_6e64_7368_616b)
        },
        // Failures are reported in the test output; no regression files.
        failure_persistence: None,
        ..env
    }
}

/// ISNs anywhere, and often close enough to 2^32 that the stream wraps.
fn isn() -> impl Strategy<Value = u32> {
    prop_oneof![any::<u32>(), (u32::MAX - 5000)..=u32::MAX]
}

/// Cut points, biased towards tiny first pieces.
fn cut() -> impl Strategy<Value = u16> {
    prop_oneof![0u16..8, any::<u16>()]
}

// ---------------------------------------------------------------------------
// Segmentation invariance of TLS and HTTP results
// ---------------------------------------------------------------------------

const CLIENT: &str = "10.0.0.1:40000";

/// One logical message (or flight) of a conversation: who sends it, when
/// (µs after the SYN), and its bytes.
#[derive(Clone, Debug)]
struct Chunk {
    side: Side,
    at: i64,
    bytes: Vec<u8>,
}

fn chunk(side: Side, at: i64, bytes: Vec<u8>) -> Chunk {
    Chunk { side, at, bytes }
}

/// A conversation: its server and messages; closed by the client at
/// `close` µs.
#[derive(Clone, Debug)]
struct Conversation {
    server: &'static str,
    chunks: Vec<Chunk>,
    close: i64,
}

/// How one message is sent: cut points; swaps of the pieces; overlapping
/// copies `(start, len, position, late)` of its bytes, inserted among the
/// pieces at `position` at the same time, or (`late`) after all of them
/// 1 µs later. Numbers are taken modulo what they index.
#[derive(Clone, Debug)]
struct Plan {
    cuts: Vec<u16>,
    copies: Vec<(u16, u16, u8, bool)>,
    swaps: Vec<(u8, u8)>,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        prop::collection::vec(cut(), 0..6),
        prop::collection::vec(
            (any::<u16>(), any::<u16>(), any::<u8>(), any::<bool>()),
            0..3,
        ),
        prop::collection::vec((any::<u8>(), any::<u8>()), 0..4),
    )
        .prop_map(|(cuts, copies, swaps)| Plan {
            cuts,
            copies,
            swaps,
        })
}

/// Plans for `n` messages and the two ISNs.
fn plans(n: usize) -> impl Strategy<Value = (Vec<Plan>, u32, u32)> {
    (prop::collection::vec(plan(), n), isn(), isn())
}

/// The conversation as a TCP connection: handshake at 0, 100 and 150 µs,
/// each message sent as `plan` says (one segment per message without a
/// plan), the client's FIN at `close`.
fn play(conv: &Conversation, plans: Option<&[Plan]>, isns: (u32, u32)) -> Conv {
    let mut c = Conv::new(CLIENT, conv.server, isns.0, isns.1);
    c.handshake(T0, T0 + us(100), T0 + us(150));
    for (i, m) in conv.chunks.iter().enumerate() {
        let ts = T0 + us(m.at);
        let Some(plan) = plans.map(|p| &p[i]) else {
            c.send(m.side, ts, &m.bytes);
            continue;
        };
        let len = m.bytes.len();
        let mut points: Vec<usize> = plan
            .cuts
            .iter()
            .map(|&p| usize::from(p) % len)
            .filter(|&p| p > 0)
            .collect();
        points.sort_unstable();
        points.dedup();
        let first = c.segs.len();
        let times = vec![ts; points.len() + 1];
        c.send_split(m.side, &m.bytes, &points, &times);
        let template = c.segs[first].seg.clone();
        let mut window: Vec<Timed> = c.segs.split_off(first);
        for &(a, b) in &plan.swaps {
            let n = window.len();
            window.swap(usize::from(a) % n, usize::from(b) % n);
        }
        let mut late = Vec::new();
        for &(start, l, pos, is_late) in &plan.copies {
            let start = usize::from(start) % len;
            let l = 1 + usize::from(l) % (len - start);
            let mut seg = template.clone();
            seg.seq = template.seq.wrapping_add(start as u32);
            seg.payload = m.bytes[start..start + l].to_vec();
            if is_late {
                // A retransmission after the whole message, 1 µs later.
                late.push(Timed {
                    ts: ts + us(1),
                    seg,
                });
            } else {
                let pos = usize::from(pos) % (window.len() + 1);
                window.insert(pos, Timed { ts, seg });
            }
        }
        c.segs.extend(window);
        c.segs.extend(late);
    }
    let close = T0 + us(conv.close);
    c.close(Side::Client, close, close + us(10), close + us(20));
    c
}

/// The whole pipeline on an in-memory capture.
fn analyze_bytes(bytes: Vec<u8>) -> (Summary, Vec<ConnectionRecord>) {
    let mut source =
        FileSource::from_reader(Path::new("memory.pcap"), Box::new(Cursor::new(bytes)))
            .unwrap_or_else(|e| panic!("{e}"));
    let mut records = Vec::new();
    let summary = handshakes::analyze(&mut source, &Config::default(), &mut records)
        .unwrap_or_else(|e| panic!("{e}"));
    records.sort_by_key(|r| r.id);
    (summary, records)
}

/// A connection's `tls` and `http` sections and its anomalies.
type Facts = (Value, Value, Value);

/// The facts of the only connection of the capture holding `c`.
fn facts(c: &Conv) -> Facts {
    let (_, records) = analyze_bytes(pcap_of(Link::Ethernet, &[c]));
    assert_eq!(records.len(), 1, "{records:#?}");
    let r = &records[0];
    let json = |v: serde_json::Result<Value>| v.expect("serialisable");
    (
        json(serde_json::to_value(&r.tls)),
        json(serde_json::to_value(&r.http)),
        json(serde_json::to_value(&r.anomalies)),
    )
}

/// Asserts that the conversation segmented by `plans` gives the same facts
/// as the conversation one segment per message.
fn assert_invariant(
    conv: &Conversation,
    base: &Facts,
    plans: &[Plan],
    isns: (u32, u32),
) -> Result<(), TestCaseError> {
    let (tls, http, anomalies) = facts(&play(conv, Some(plans), isns));
    prop_assert_eq!(&tls, &base.0, "tls section differs");
    prop_assert_eq!(&http, &base.1, "http section differs");
    for kind in [
        "retransmission_conflict",
        "stream_gap",
        "malformed_tls",
        "stream_buffer_full",
    ] {
        prop_assert!(anomalies.get(kind).is_none(), "{kind} in {anomalies}");
    }
    Ok(())
}

/// The facts of the unsegmented conversation, computed once per test.
fn baseline(conv: &Conversation) -> Facts {
    let base = facts(&play(conv, None, (1_000, 5_000)));
    assert_eq!(base.2, serde_json::json!({}), "anomalies in the baseline");
    // The ISNs do not matter either.
    let wrapped = facts(&play(conv, None, (u32::MAX - 100, u32::MAX - 2)));
    assert_eq!(wrapped, base, "ISNs near 2^32 change the facts");
    base
}

fn app(len: usize) -> Vec<u8> {
    opaque(APPLICATION_DATA, len)
}

/// A TLS 1.2 full handshake (Chrome's ClientHello; a server flight whose
/// Certificate spans two records), then three requests and their responses.
fn tls12_conversation() -> Conversation {
    let hello = handshake(CLIENT_HELLO, &fixture("chrome-kyber-client-hello-1.bin"));
    let sh = message(
        SERVER_HELLO,
        &server_hello(
            &[0x22; 32],
            0xc02f,
            &[ext(0xff01, &[0]), alpn(&["http/1.1"])],
        ),
    );
    let cert = message(
        CERTIFICATE,
        &(0..1200u32).map(|i| i as u8).collect::<Vec<_>>(),
    );
    let rest = [
        message(SERVER_KEY_EXCHANGE, &[0xcd; 300]),
        message(SERVER_HELLO_DONE, &[]),
    ]
    .concat();
    let flight = [
        record(HANDSHAKE, &sh),
        record(HANDSHAKE, &cert[..600]),
        record(HANDSHAKE, &[&cert[600..], &rest[..]].concat()),
    ]
    .concat();
    let ccs_finished = [change_cipher_spec(), opaque(HANDSHAKE, 40)].concat();
    let key_exchange = handshake(CLIENT_KEY_EXCHANGE, &[0x41; 66]);
    let ticket = handshake(NEW_SESSION_TICKET, &[0x54; 170]);
    Conversation {
        server: "10.0.0.2:443",
        chunks: vec![
            chunk(Side::Client, 200, hello),
            chunk(Side::Server, 1000, flight),
            chunk(
                Side::Client,
                2000,
                [key_exchange, ccs_finished.clone()].concat(),
            ),
            chunk(Side::Server, 3000, [ticket, ccs_finished].concat()),
            chunk(Side::Client, 4000, app(300)),
            chunk(Side::Server, 5000, [app(1400), app(600)].concat()),
            chunk(Side::Client, 6000, app(280)),
            chunk(Side::Server, 7000, app(3000)),
            chunk(Side::Client, 8000, [app(250), app(120)].concat()),
            chunk(Side::Server, 9000, app(900)),
        ],
        close: 10_000,
    }
}

/// A TLS 1.3 keep-alive connection: Chrome's ClientHello, the real
/// ServerHello with the encrypted flight, the client's Finished with its
/// first request, tickets, and three requests answered.
fn tls13_conversation() -> Conversation {
    let hello = handshake(CLIENT_HELLO, &fixture("chrome-kyber-client-hello-1.bin"));
    let sh = handshake(SERVER_HELLO, &fixture("chrome-kyber-server-hello-1.bin"));
    let mut chunks = vec![
        chunk(Side::Client, 200, hello),
        chunk(
            Side::Server,
            1000,
            [sh, change_cipher_spec(), app(2500)].concat(),
        ),
        chunk(
            Side::Client,
            2000,
            [change_cipher_spec(), app(53), app(106)].concat(),
        ),
    ];
    chunks.extend(
        TLS13_KEEPALIVE_REST
            .iter()
            .map(|&(side, at, len)| chunk(side, at, app(len))),
    );
    Conversation {
        server: "10.0.0.2:443",
        chunks,
        close: 7000,
    }
}

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: example.com\r\nUser-Agent: props\r\n\r\n").into_bytes()
}

/// HTTP/1.1 keep-alive: Content-Length and chunked bodies, a POST with a
/// body, 201, pipelined requests answered by 304 and a chunked 200 with
/// trailers.
fn http1_conversation() -> Conversation {
    let body: String = (0..1000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let first = format!("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{body}");
    let chunked = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\n{}\r\n10;ext=1\r\n{}\r\n0\r\n\r\n",
        "A".repeat(26),
        "B".repeat(16)
    );
    let post = "POST /c HTTP/1.1\r\nHost: example.com\r\nContent-Length: 11\r\n\r\nhello world";
    let trailers = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\nX-Checksum: 1\r\n\r\n",
        300,
        "z".repeat(300)
    );
    Conversation {
        server: "10.0.0.2:80",
        chunks: vec![
            chunk(Side::Client, 200, get("/a")),
            chunk(Side::Server, 1000, first.into_bytes()),
            chunk(Side::Client, 2000, get("/b")),
            chunk(Side::Server, 3000, chunked.into_bytes()),
            chunk(Side::Client, 4000, post.as_bytes().to_vec()),
            chunk(
                Side::Server,
                5000,
                b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n".to_vec(),
            ),
            chunk(Side::Client, 6000, [get("/d"), get("/e")].concat()),
            chunk(
                Side::Server,
                7000,
                b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n".to_vec(),
            ),
            chunk(Side::Server, 7100, trailers.into_bytes()),
        ],
        close: 8000,
    }
}

/// An HTTP/2 frame: 24-bit length, type, flags, stream id, `len` payload
/// bytes (a pattern, so misplaced bytes would show).
fn h2_frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
    let length = (len as u32).to_be_bytes();
    let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    [
        &length[1..],
        &[kind, flags],
        &stream.to_be_bytes(),
        &payload,
    ]
    .concat()
}

/// h2c with prior knowledge: the preface and SETTINGS, three requests (one
/// with a body), responses with HEADERS and DATA, a reset stream, GOAWAY.
fn h2c_conversation() -> Conversation {
    const DATA: u8 = 0;
    const HEADERS: u8 = 1;
    const RST_STREAM: u8 = 3;
    const SETTINGS: u8 = 4;
    const GOAWAY: u8 = 7;
    const WINDOW_UPDATE: u8 = 8;
    const END_STREAM: u8 = 1;
    const END_HEADERS: u8 = 4;
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    Conversation {
        server: "10.0.0.2:80",
        chunks: vec![
            chunk(
                Side::Client,
                200,
                [
                    preface,
                    h2_frame(SETTINGS, 0, 0, 12),
                    h2_frame(WINDOW_UPDATE, 0, 0, 4),
                ]
                .concat(),
            ),
            chunk(Side::Server, 250, h2_frame(SETTINGS, 0, 0, 6)),
            chunk(
                Side::Client,
                300,
                [
                    h2_frame(SETTINGS, 1, 0, 0),
                    h2_frame(HEADERS, END_STREAM | END_HEADERS, 1, 30),
                ]
                .concat(),
            ),
            chunk(
                Side::Client,
                310,
                [
                    h2_frame(HEADERS, END_HEADERS, 3, 40),
                    h2_frame(DATA, END_STREAM, 3, 2000),
                ]
                .concat(),
            ),
            chunk(
                Side::Server,
                1100,
                [
                    h2_frame(SETTINGS, 1, 0, 0),
                    h2_frame(HEADERS, END_HEADERS, 1, 10),
                ]
                .concat(),
            ),
            chunk(Side::Server, 1200, h2_frame(DATA, END_STREAM, 1, 3000)),
            chunk(
                Side::Server,
                1300,
                h2_frame(HEADERS, END_STREAM | END_HEADERS, 3, 10),
            ),
            chunk(
                Side::Client,
                1400,
                h2_frame(HEADERS, END_STREAM | END_HEADERS, 5, 25),
            ),
            chunk(
                Side::Client,
                1410,
                h2_frame(HEADERS, END_STREAM | END_HEADERS, 7, 25),
            ),
            chunk(Side::Server, 1500, h2_frame(HEADERS, END_HEADERS, 5, 12)),
            chunk(
                Side::Server,
                1600,
                [
                    h2_frame(DATA, 0, 5, 1000),
                    h2_frame(DATA, END_STREAM, 5, 500),
                ]
                .concat(),
            ),
            chunk(Side::Client, 1700, h2_frame(RST_STREAM, 0, 7, 4)),
            chunk(Side::Server, 1800, h2_frame(GOAWAY, 0, 0, 8)),
        ],
        close: 2000,
    }
}

/// The baselines' own facts, so the invariance is not between two wrong answers.
#[test]
fn segmentation_baselines_are_right() {
    let (tls, http, _) = baseline(&tls12_conversation());
    assert_eq!(tls["version"], "TLS 1.2");
    assert_eq!(tls["cipher"], "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
    assert_eq!(tls["sni"], "lh3.google.com");
    assert_eq!(tls["outcome"], "complete");
    assert_eq!(tls["resumed"], false);
    assert_eq!(http["requests"], 3);
    assert_eq!(http["responses"], 3);

    let (tls, http, _) = baseline(&tls13_conversation());
    assert_eq!(tls["version"], "TLS 1.3");
    assert_eq!(tls["outcome"], "complete");
    assert_eq!(http["requests"], 3);
    assert_eq!(http["responses"], 3);

    let (tls, http, _) = baseline(&http1_conversation());
    assert_eq!(tls, Value::Null);
    assert_eq!(http["method"], "http1");
    assert_eq!(http["requests"], 5);
    assert_eq!(http["responses"], 5);
    assert_eq!(http["lost_sync"], false);
    let statuses: Vec<&Value> = http["list"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert_eq!(statuses, [200, 200, 201, 304, 200]);

    let (tls, http, _) = baseline(&h2c_conversation());
    assert_eq!(tls, Value::Null);
    assert_eq!(http["method"], "h2c");
    assert_eq!(http["requests"], 4);
    assert_eq!(http["responses"], 3);
    assert_eq!(http["resets"], 1);
    assert_eq!(http["goaway"], true);
    assert_eq!(http["lost_sync"], false);
}
