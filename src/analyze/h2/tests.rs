//! Unit tests of `h2`: frame counting, header blocks (HPACK, padding,
//! priority, CONTINUATION, the dynamic table across blocks) and hostile blocks.

use super::*;

fn frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
    let mut f = (len as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend(std::iter::repeat_n(0u8, len));
    f
}

#[test]
fn counts_streams_responses_and_resets() {
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    client.extend(frame(4, 0, 0, 6)); // SETTINGS
    for s in [1u32, 3, 5] {
        client.extend(frame(HEADERS, END_STREAM | 0x4, s, 20));
    }
    client.extend(frame(HEADERS, 0x4, 3, 5)); // trailers on an old stream: not new
    for (i, b) in client.iter().enumerate() {
        h.data(Side::Client, Timestamp(i as i64), &[*b]);
    }
    let mut server = frame(4, 0, 0, 0);
    server.extend(frame(HEADERS, 0x4, 1, 10));
    server.extend(frame(DATA, END_STREAM, 1, 100));
    server.extend(frame(HEADERS, END_STREAM | 0x4, 5, 10));
    server.extend(frame(RST_STREAM, 0, 3, 4));
    server.extend(frame(GOAWAY, 0, 0, 8));
    h.data(Side::Server, Timestamp(1000), &server);
    assert_eq!(
        (h.requests, h.responses, h.resets, h.goaway),
        (3, 2, 1, true)
    );
    assert!(h.exchanges.listed()[0].response_last.is_some());
    assert!(!h.lost_sync);
}

#[test]
fn server_settings_first() {
    assert!(H2::starts_with_settings(&frame(4, 0, 0, 18)));
    assert!(!H2::starts_with_settings(b"220 smtp.example.com ESMTP"));
    assert!(!H2::starts_with_settings(b"HTTP/1.1 200 OK\r\n"));
}

#[test]
fn wrong_preface_stops() {
    let mut h = H2::prior_knowledge(1);
    h.data(Side::Client, Timestamp(0), b"PRI * HTTP/1.1");
    assert!(h.lost_sync);
    assert!(H2::looks_like_preface(b"PRI * HT"));
    assert!(!H2::looks_like_preface(b"GET / HTTP/1.1"));
}

/// A frame carrying `payload`.
fn frame_of(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn block(encoder: &mut loona_hpack::Encoder<'_>, fields: &[(&str, &str)]) -> Vec<u8> {
    encoder.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
}

fn listed(h: &H2) -> Vec<(String, String, Option<u16>)> {
    let ex = h.exchanges.listed().iter();
    ex.map(|e| (e.method.to_string(), e.target.to_string(), e.status))
        .collect()
}

#[test]
fn header_blocks_give_method_path_and_status() {
    let (mut enc_c, mut enc_s) = (loona_hpack::Encoder::new(), loona_hpack::Encoder::new());
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    client.extend(frame(4, 0, 0, 0));
    // Stream 1: one HEADERS. The encoder indexes what it sends, so the
    // second request leans on the table the first one filled.
    let req = |path| {
        [
            (":method", "GET"),
            (":path", path),
            (":authority", "a.example"),
        ]
    };
    let b = block(&mut enc_c, &req("/first"));
    client.extend(frame_of(HEADERS, END_STREAM | END_HEADERS, 1, &b));
    // Stream 3: padded, with priority, split over two CONTINUATIONs.
    let b = block(&mut enc_c, &req("/second"));
    let (a, rest) = b.split_at(b.len() / 3);
    let (m, z) = rest.split_at(rest.len() / 2);
    let mut padded = vec![4u8];
    padded.extend_from_slice(&[0x80, 0, 0, 1, 16]);
    padded.extend_from_slice(a);
    padded.extend_from_slice(&[0; 4]);
    client.extend(frame_of(
        HEADERS,
        END_STREAM | PADDED | PRIORITY,
        3,
        &padded,
    ));
    client.extend(frame_of(CONTINUATION, 0, 3, m));
    client.extend(frame_of(CONTINUATION, END_HEADERS, 3, z));
    let b = block(&mut enc_c, &[(":method", "POST"), (":path", "/third")]);
    client.extend(frame_of(HEADERS, END_HEADERS, 5, &b));
    // Byte by byte: frames and blocks cross every boundary.
    for (i, byte) in client.iter().enumerate() {
        h.data(Side::Client, Timestamp(i as i64), &[*byte]);
    }
    let mut server = frame(4, 0, 0, 0);
    let b = block(&mut enc_s, &[(":status", "100")]);
    server.extend(frame_of(HEADERS, END_HEADERS, 1, &b));
    let b = block(&mut enc_s, &[(":status", "200"), ("server", "x")]);
    server.extend(frame_of(HEADERS, END_HEADERS, 1, &b));
    server.extend(frame_of(DATA, END_STREAM, 1, b"hello"));
    let b = block(&mut enc_s, &[(":status", "429"), ("retry-after", "1")]);
    server.extend(frame_of(HEADERS, END_HEADERS | END_STREAM, 3, &b));
    // Trailers on stream 5 after its response: decoded (the table must
    // stay in step), but they change nothing.
    let b = block(&mut enc_s, &[(":status", "201")]);
    server.extend(frame_of(HEADERS, END_HEADERS, 5, &b));
    let b = block(&mut enc_s, &[("grpc-status", "0")]);
    server.extend(frame_of(HEADERS, END_HEADERS | END_STREAM, 5, &b));
    h.data(Side::Server, Timestamp(10_000), &server);
    // The first request's `:authority`, from the table for later ones.
    assert_eq!(h.host.as_deref(), Some("a.example"));
    assert_eq!(
        listed(&h),
        [
            ("GET".into(), "/first".into(), Some(200)),
            ("GET".into(), "/second".into(), Some(429)),
            ("POST".into(), "/third".into(), Some(201)),
        ]
    );
    assert_eq!((h.requests, h.responses), (3, 3));
    assert!(!h.client.headers.off && !h.server.headers.off);
    // The 429's `retry-after`, its window and wait from the HEADERS that
    // ended its stream (read after the frame that ended it).
    let retry: Vec<Option<u32>> = h
        .exchanges
        .listed()
        .iter()
        .map(|e| e.retry_after())
        .collect();
    assert_eq!(retry, [None, Some(1), None]);
    let (_, _, limits) = h.exchanges.take();
    let l = limits.expect("a 429 was read");
    assert_eq!((l.responses_429, l.in_window), (1, 0));
    assert_eq!(l.retry_after.get(&1), Some(&1));
    assert!(!l.ended_on_429, "a 201 came after it");
}

/// A response's end is the frame with END_STREAM, not its HEADERS: the
/// 429's wait runs from its DATA, and a request sent while its second ran
/// is in the window.
#[test]
fn a_retry_after_runs_from_the_end_of_the_response() {
    let mut h = H2::prior_knowledge(10);
    let (mut enc_c, mut enc_s) = (loona_hpack::Encoder::new(), loona_hpack::Encoder::new());
    let mut client = PREFACE.to_vec();
    let b = block(&mut enc_c, &[(":method", "GET"), (":path", "/a")]);
    client.extend(frame_of(HEADERS, END_HEADERS | END_STREAM, 1, &b));
    h.data(Side::Client, Timestamp(0), &client);
    let b = block(&mut enc_s, &[(":status", "429"), ("retry-after", "2")]);
    let head = frame_of(HEADERS, END_HEADERS, 1, &b);
    h.data(
        Side::Server,
        Timestamp(1_000_000_000),
        &[frame(4, 0, 0, 0), head].concat(),
    );
    h.data(
        Side::Server,
        Timestamp(1_500_000_000),
        &frame_of(DATA, END_STREAM, 1, b"slow"),
    );
    let b = block(&mut enc_c, &[(":method", "GET"), (":path", "/a")]);
    h.data(
        Side::Client,
        Timestamp(3_000_000_000),
        &frame_of(HEADERS, END_HEADERS | END_STREAM, 3, &b),
    );
    let (_, _, limits) = h.exchanges.take();
    let mut l = limits.expect("a 429 was read");
    assert_eq!(l.in_window, 1, "3.0 s is inside 1.5 s + 2 s");
    let d = l.waits.distribution();
    assert_eq!((d.count, d.min), (1, Some(1.5)));
}

#[test]
fn the_dynamic_table_carries_from_block_to_block() {
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    // `:method: GET` (static 2), then `:path: /kept` added to the
    // dynamic table (literal with incremental indexing, name static 4).
    let mut first = vec![0x82, 0x44, 5];
    first.extend_from_slice(b"/kept");
    client.extend(frame_of(HEADERS, END_HEADERS, 1, &first));
    // `:method: GET`, then dynamic entry 62: the `:path` above.
    client.extend(frame_of(HEADERS, END_HEADERS, 3, &[0x82, 0xbe]));
    h.data(Side::Client, Timestamp(0), &client);
    let targets: Vec<&str> = h.exchanges.listed().iter().map(|e| &*e.target).collect();
    assert_eq!(targets, ["/kept", "/kept"]);
    assert!(!h.client.headers.off);
}

#[test]
fn a_block_too_large_or_broken_stops_decoding_not_counting() {
    let mut enc = loona_hpack::Encoder::new();
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    let b = block(&mut enc, &[(":method", "GET"), (":path", "/a")]);
    client.extend(frame_of(HEADERS, END_HEADERS, 1, &b));
    // Larger than MAX_BLOCK over two frames: decoding stops on this side.
    client.extend(frame_of(HEADERS, 0, 3, &vec![0x40; MAX_BLOCK - 10]));
    client.extend(frame_of(CONTINUATION, END_HEADERS, 3, &[0x40; 20]));
    let b = block(&mut enc, &[(":method", "GET"), (":path", "/c")]);
    client.extend(frame_of(HEADERS, END_HEADERS, 5, &b));
    h.data(Side::Client, Timestamp(0), &client);
    assert_eq!(h.requests, 3);
    assert!(h.client.headers.off && !h.lost_sync);
    let methods: Vec<String> = h
        .exchanges
        .listed()
        .iter()
        .map(|e| e.method.to_string())
        .collect();
    assert_eq!(methods, ["GET", "", ""]);

    // Not HPACK at all: an index far past both tables.
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    client.extend(frame_of(HEADERS, END_HEADERS, 1, &[0xff, 0xff, 0x7f]));
    client.extend(frame_of(HEADERS, END_HEADERS, 3, &[0x82]));
    h.data(Side::Client, Timestamp(0), &client);
    assert_eq!(h.requests, 2);
    assert!(h.client.headers.off);
    // Padding longer than the payload; a CONTINUATION with no block open.
    assert_eq!(fragment(PADDED, &[9, 1, 2]), None);
    assert_eq!(fragment(PRIORITY, &[1, 2, 3]), None);
    assert_eq!(
        fragment(PADDED | PRIORITY, &[1, 0, 0, 0, 0, 0, 7, 0]),
        Some(&[7u8][..])
    );
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    client.extend(frame_of(CONTINUATION, END_HEADERS, 1, &[0x82]));
    h.data(Side::Client, Timestamp(0), &client);
    assert!(h.client.headers.off);
}

#[test]
fn any_bytes_as_header_blocks_never_panic() {
    // A fixed xorshift: the same blocks in every run.
    let mut rng = crate::testutil::Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut next = move || rng.next();
    for round in 0..20_000 {
        let mut h = H2::prior_knowledge(4);
        let mut client = PREFACE.to_vec();
        for stream in [1u32, 3, 5] {
            let len = (next() % 64) as usize;
            let payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let flags = (next() as u8) & (END_HEADERS | PADDED | PRIORITY | END_STREAM);
            let kind = if next() % 4 == 0 {
                CONTINUATION
            } else {
                HEADERS
            };
            client.extend(frame_of(kind, flags, stream, &payload));
        }
        h.data(Side::Client, Timestamp(round), &client);
        assert!(h.requests <= 3);
    }
}

#[test]
fn upgrade_response_on_stream_one() {
    let mut h = H2::after_upgrade(4, None);
    let mut server = frame(4, 0, 0, 0);
    server.extend(frame(HEADERS, END_STREAM | 0x4, 1, 10));
    h.data(Side::Server, Timestamp(5), &server);
    assert_eq!((h.requests, h.responses), (0, 1));
}

#[test]
fn a_gap_inside_a_header_block_stops_decoding_not_counting() {
    let mut enc = loona_hpack::Encoder::new();
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    let b = block(&mut enc, &[(":method", "GET"), (":path", "/before")]);
    let first = frame_of(HEADERS, END_HEADERS, 1, &b);
    client.extend(&first[..9 + 2]);
    h.data(Side::Client, Timestamp(0), &client);
    // The rest of the first block is lost; the next frame comes whole.
    h.gap(Side::Client, (first.len() - 9 - 2) as u64);
    let b = block(&mut enc, &[(":method", "GET"), (":path", "/after")]);
    h.data(
        Side::Client,
        Timestamp(1),
        &frame_of(HEADERS, END_HEADERS, 3, &b),
    );
    assert_eq!(h.requests, 2);
    assert!(!h.lost_sync && h.client.headers.off);
    // A gap that also takes the next frame header loses the framing.
    h.gap(Side::Client, 100);
    assert!(h.lost_sync);
}

/// The server allows 2 streams; the client opens 3 (the third over the
/// limit) and the server ends them one by one; its GOAWAY's debug data is
/// skipped, and a SETTINGS ACK and the client's SETTINGS bound nothing.
/// Fed a byte at a time and whole alike.
#[test]
fn stream_limit_and_goaway_from_the_frames() {
    let ms = |n: i64| Timestamp(n * 1_000_000);
    let settings = frame_of(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0, 0, 3, 0, 0, 0, 2]);
    let mut goaway = vec![0, 0, 0, 5, 0, 0, 0, 0];
    goaway.extend_from_slice(b"max requests");
    for bytewise in [false, true] {
        let mut h = H2::prior_knowledge(10);
        let feed = |h: &mut H2, side, ts, bytes: &[u8]| match bytewise {
            true => bytes.iter().for_each(|b| h.data(side, ts, &[*b])),
            false => h.data(side, ts, bytes),
        };
        let mut client = PREFACE.to_vec();
        client.extend(frame_of(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 1]));
        feed(&mut h, Side::Client, ms(0), &client);
        feed(&mut h, Side::Server, ms(1), &settings);
        feed(&mut h, Side::Server, ms(1), &frame(SETTINGS, ACK, 0, 0));
        for (s, at) in [(1u32, 2), (3, 3), (5, 4)] {
            feed(
                &mut h,
                Side::Client,
                ms(at),
                &frame(HEADERS, END_STREAM | 0x4, s, 0),
            );
        }
        for (s, at) in [(1u32, 6), (3, 7), (5, 9)] {
            feed(&mut h, Side::Server, ms(at), &frame(DATA, END_STREAM, s, 3));
        }
        feed(
            &mut h,
            Side::Server,
            ms(10),
            &frame_of(GOAWAY, 0, 0, &goaway),
        );
        feed(&mut h, Side::Server, ms(11), &frame(PING, 0, 0, 8));
        assert!(h.goaway && !h.lost_sync);
        let at = |t: Timestamp| crate::record::Instant {
            ts: t.as_secs_f64(),
            at: t.as_secs_f64(),
        };
        let r = (*std::mem::take(&mut h.limit)).into_record(ms(20), &at);
        let r = r.expect("frames read");
        assert_eq!(r.max_concurrent_streams, Some(2));
        assert_eq!((r.peak_streams, r.at_limit), (3, 1));
        // At the limit from the second stream (3 ms) to the second end (7 ms).
        assert!((r.at_limit_seconds - 0.004).abs() < 1e-9);
        let g = r.goaway.expect("goaway");
        assert_eq!(
            (g.from, g.last_stream, g.error),
            (Side::Server, 5, "NO_ERROR")
        );
    }
}

/// A gap inside a GOAWAY's debug data, or inside a SETTINGS payload,
/// loses that frame, not the frames after it.
#[test]
fn a_gap_inside_settings_or_goaway_keeps_step() {
    let mut h = H2::prior_knowledge(10);
    h.data(Side::Client, Timestamp(0), PREFACE);
    let mut goaway = frame_of(GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 2]);
    goaway.extend_from_slice(&[0; 20]);
    goaway[2] += 20;
    h.data(Side::Server, Timestamp(1), &goaway[..20]);
    h.gap(Side::Server, 5);
    h.data(Side::Server, Timestamp(2), &goaway[25..]);
    let settings = frame_of(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 7, 0, 3, 0, 0, 0, 8]);
    h.data(Side::Server, Timestamp(3), &settings[..12]);
    h.gap(Side::Server, 6);
    h.data(Side::Server, Timestamp(4), &settings[18..]);
    h.data(Side::Server, Timestamp(5), &frame(RST_STREAM, 0, 1, 4));
    assert!(!h.lost_sync);
    assert_eq!(h.resets, 1);
    let at = |_| crate::record::Instant { ts: 0.0, at: 0.0 };
    let r = (*std::mem::take(&mut h.limit)).into_record(Timestamp(9), &at);
    let r = r.expect("frames read");
    assert_eq!(r.goaway.map(|g| g.error), Some("INTERNAL_ERROR"));
    assert_eq!(r.max_concurrent_streams, None);
}

/// The server refuses streams 5 and 7 (REFUSED_STREAM) before answering
/// them, and resets 3 after its response began (not refused); the
/// client's own REFUSED_STREAM on 9 is not the server's refusal.
#[test]
fn streams_the_server_refused() {
    let rst = |stream: u32, error: u32| frame_of(RST_STREAM, 0, stream, &error.to_be_bytes());
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    for s in [1u32, 3, 5, 7, 9] {
        client.extend(frame(HEADERS, END_STREAM | END_HEADERS, s, 0));
    }
    h.data(Side::Client, Timestamp(0), &client);
    let mut server = frame(HEADERS, END_HEADERS, 3, 0);
    server.extend(rst(5, 7));
    server.extend(rst(7, 7));
    server.extend(rst(3, 7));
    server.extend(frame(DATA, END_STREAM, 1, 0));
    for b in &server {
        h.data(Side::Server, Timestamp(5), &[*b]);
    }
    h.data(Side::Client, Timestamp(6), &rst(9, 7));
    let refused: Vec<bool> = h.exchanges.listed().iter().map(|e| e.refused()).collect();
    assert_eq!(refused, [false, false, true, true, false]);
    assert_eq!((h.requests, h.resets, h.limit.refused), (5, 4, 2));
    assert!(!h.lost_sync);
}

/// The server's GOAWAY (last stream 3) refuses stream 5, open without a
/// response, and 7, sent after it; a later GOAWAY with a higher id
/// refuses nothing more, one with a lower id looks only below the first.
#[test]
fn streams_past_the_servers_goaway() {
    let goaway = |last: u32| frame_of(GOAWAY, 0, 0, &[last.to_be_bytes(), [0; 4]].concat());
    let mut h = H2::prior_knowledge(10);
    let mut client = PREFACE.to_vec();
    for s in [1u32, 3, 5] {
        client.extend(frame(HEADERS, END_HEADERS, s, 0));
    }
    h.data(Side::Client, Timestamp(0), &client);
    h.data(
        Side::Server,
        Timestamp(1),
        &frame(HEADERS, END_HEADERS, 1, 0),
    );
    h.data(Side::Server, Timestamp(2), &goaway(3));
    h.data(
        Side::Client,
        Timestamp(3),
        &frame(HEADERS, END_HEADERS, 7, 0),
    );
    h.data(Side::Server, Timestamp(4), &goaway(100));
    assert_eq!(h.limit.refused, 2);
    h.data(Side::Server, Timestamp(5), &goaway(1));
    // 3, open without a response, is now past the server's last stream.
    assert_eq!(h.limit.refused, 3);
    h.data(Side::Server, Timestamp(6), &frame(DATA, END_STREAM, 1, 0));
    let refused: Vec<bool> = h.exchanges.listed().iter().map(|e| e.refused()).collect();
    assert_eq!(refused, [false, true, true, true]);
    assert!(h.open.is_empty());
}
