//! HTTP/2 read by sizes where a client writes each request as one
//! message (HEADERS and DATA sealed in one record, the first with the
//! connection preface) and closes streams in runs of RST_STREAM frames:
//! Netty 4.1 (captures/netty-h2-post-429-100x50, TLS 1.2 with AES-GCM).
use super::*;

/// The start of the capture, plaintext lengths: the server's SETTINGS and
/// WINDOW_UPDATE (40); the preface, SETTINGS, WINDOW_UPDATE and the first
/// POST with its 200-byte body (305); the server's SETTINGS ACK and
/// WINDOW_UPDATE (22); the second POST (224), sent before the first is
/// answered; then answers (80: a 429), RST_STREAMs and WINDOW_UPDATEs
/// (13), and a POST after each answer.
const START: [(Side, usize); 16] = [
    (S, 40),
    (C, 305),
    (S, 22),
    (C, 224),
    (S, 13),
    (S, 80),
    (C, 224),
    (S, 71),
    (S, 22),
    (C, 224),
    (S, 109),
    (S, 13),
    (S, 80),
    (C, 224),
    (S, 13),
    (S, 80),
];

#[test]
fn h2_a_record_the_preface_record_holds_with_room_is_a_request() {
    // The second POST (224) is no body of the first: the preface's
    // record holds 224 bytes and a SETTINGS and a HEADERS frame besides,
    // so the first request was sealed with its body, and so is this one.
    // (Taken for the body, its size marked the next POSTs as bodies: 97
    // counted for 100.)
    let f = h2_12(&START);
    assert_eq!(f.requests, 5);
    assert_eq!(starts(&f), [1, 3, 6, 9, 13]);
    assert!(!f.doubtful());
}

#[test]
fn h2_a_preface_record_without_room_keeps_its_body() {
    // Java's HttpClient's shape: the preface's record holds the first
    // HEADERS only (130), and its body (209) follows in the flight: a
    // body, its size learned.
    let mut records = START.to_vec();
    records[1] = (C, 130);
    records[3] = (C, 209);
    let f = h2_12(&records);
    assert_eq!(starts(&f), [1, 6, 9, 13]);
}

#[test]
fn h2_a_run_of_rst_stream_frames_is_not_a_request() {
    // After the five POSTs, Netty closes their streams: five RST_STREAM
    // frames in one record (65); the next POST counts.
    let mut records = START.to_vec();
    records.extend([(C, 65), (C, 224), (S, 80)]);
    let f = h2_12(&records);
    assert_eq!(starts(&f), [1, 3, 6, 9, 13, 17]);
    // Five frames after two requests are not such a run: a request.
    let mut records = START[..7].to_vec();
    records.extend([(S, 80), (C, 65), (S, 80)]);
    let f = h2_12(&records);
    assert_eq!(starts(&f), [1, 3, 6, 8]);
    // Nor is a record of a request's size (a client whose requests are
    // 13 × 18 bytes long).
    let mut records = START.to_vec();
    for (i, r) in records.iter_mut().enumerate() {
        if i > 1 && r.1 == 224 {
            r.1 = 234;
        }
    }
    records.extend([(C, 234), (S, 80)]);
    let f = h2_12(&records);
    assert_eq!(starts(&f), [1, 3, 6, 9, 13, 16]);
}
