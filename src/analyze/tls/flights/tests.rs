//! The request estimate from record sizes and times: HTTP/1 flights, and
//! HTTP/2 read a record at a time, on conversations taken from the real
//! captures (each test names its own).
use super::*;

mod bodies;
mod h2_sealed;

fn t(n: i64) -> Timestamp {
    Timestamp(n)
}

#[test]
fn alternating_flights_are_requests() {
    // The TLS 1.3 curl conversation from captures/tls13-curl-keepalive.pcap.
    let mut f = Flights::new(10);
    let records = [
        (Side::Client, 106, 7419),
        (Side::Server, 282, 7731),
        (Side::Server, 282, 7959),
        (Side::Server, 1598, 8210),
        (Side::Client, 106, 8543),
        (Side::Server, 1598, 8680),
        (Side::Client, 106, 9023),
        (Side::Server, 1598, 9130),
        (Side::Client, 19, 9328),
    ];
    for (side, len, ts) in records {
        f.record(side, len, t(ts), true);
    }
    f.finish();
    assert_eq!(f.requests, 3);
    assert_eq!(
        f.exchanges.listed()[0].response_first,
        Some(t(8210)),
        "tickets are not the response"
    );
    assert_eq!(f.exchanges.listed()[0].response_last, Some(t(8210)));
    assert_eq!(f.exchanges.listed()[2].start, t(9023));
}

#[test]
fn closing_alerts_after_the_last_response_are_not_a_request() {
    // JSSE with keep-alive off: request, response, then two 35-byte records.
    let mut f = Flights::new(10);
    for (side, len, ts) in [
        (Side::Client, 183, 1),
        (Side::Server, 1593, 2),
        (Side::Client, 35, 3),
        (Side::Client, 35, 4),
        (Side::Server, 19, 5),
    ] {
        f.record(side, len, t(ts), true);
    }
    f.finish();
    assert_eq!((f.requests, f.exchanges.listed().len()), (1, 1));
}

#[test]
fn h2_preface_and_settings_ack_are_not_requests() {
    let mut f = Flights::new(10);
    f.h2 = true;
    for (side, len, ts) in [
        (Side::Client, 81, 1),
        (Side::Server, 150, 2),
        (Side::Client, 57, 3),
        (Side::Server, 60, 4),
        (Side::Client, 25, 5),
        (Side::Server, 1368, 6),
        (Side::Client, 49, 7),
        (Side::Server, 1486, 8),
    ] {
        f.record(side, len, t(ts), false);
    }
    f.finish();
    assert_eq!(f.requests, 2);
}

#[test]
fn tickets_before_the_first_request_and_multi_record_requests() {
    let mut f = Flights::new(10);
    f.record(Side::Server, 250, t(1), true);
    f.record(Side::Client, 500, t(2), true);
    f.record(Side::Client, 16000, t(3), true);
    f.record(Side::Server, 90, t(4), true);
    f.finish();
    assert_eq!(f.requests, 1);
    assert_eq!(f.exchanges.listed()[0].response_first, Some(t(4)));
}

use Side::{Client as C, Server as S};

/// A TLS 1.3 HTTP/2 conversation with the client's lengths known
/// (`pad` bytes of padding on each of its records): `(side,
/// plaintext)`, a millisecond apart.
fn h2(pad: usize, records: &[(Side, usize)]) -> Flights {
    conversation(true, pad, records)
}

/// The same in TLS 1.2 with AES-GCM (24 bytes a record).
fn h2_12(records: &[(Side, usize)]) -> Flights {
    conversation(false, 0, records)
}

fn conversation(tls13: bool, pad: usize, records: &[(Side, usize)]) -> Flights {
    let base = if tls13 { 17 } else { 24 };
    let mut f = Flights::new(100);
    f.h2 = true;
    f.set_overhead(base + pad, base);
    for (i, &(side, plain)) in records.iter().enumerate() {
        let pad = if side == C { pad } else { 0 };
        f.record(side, plain + base + pad, t(i as i64), tls13);
    }
    f.finish();
    f
}

fn starts(f: &Flights) -> Vec<i64> {
    f.exchanges.listed().iter().map(|e| e.start.0).collect()
}

fn firsts(f: &Flights) -> Vec<Option<Timestamp>> {
    f.exchanges
        .listed()
        .iter()
        .map(|e| e.response_first)
        .collect()
}

#[test]
fn h2_multiplexed_requests_are_the_records_of_one_size() {
    // Java's HttpClient, ten threads (captures/java-httpclient-h2-10x10,
    // 16 bytes of padding a record): tickets and the server's SETTINGS
    // before the first request, which shares a record with the preface;
    // SETTINGS ACK; four requests at once, then their responses; a
    // GOAWAY after the server's last record.
    let f = h2(
        16,
        &[
            (S, 248),
            (S, 248),
            (S, 40),
            (C, 128),
            (S, 127),
            (S, 1351),
            (C, 9),
            (C, 45),
            (C, 45),
            (C, 45),
            (C, 45),
            (S, 1468),
            (S, 1468),
            (S, 1468),
            (S, 1468),
            (C, 34),
        ],
    );
    assert_eq!(f.requests, 5);
    assert_eq!(starts(&f), [3, 7, 8, 9, 10]);
    // Answered in order once they are seen to be multiplexed.
    assert_eq!(firsts(&f), [4, 11, 12, 13, 14].map(|n| Some(t(n))));
    assert_eq!(f.exchanges.listed()[0].response_last, Some(t(5)));
}

#[test]
fn h2_bodies_are_not_requests() {
    // curl POSTing a small body three times (captures/h2-curl-post-5):
    // HEADERS then DATA, a ticket and the server's SETTINGS in between.
    let f = h2(
        0,
        &[
            (S, 248),
            (C, 64),
            (S, 248),
            (C, 71),
            (S, 49),
            (C, 9),
            (C, 50),
            (S, 229),
            (S, 13),
            (C, 21),
            (C, 50),
            (S, 229),
            (C, 21),
            (C, 50),
            (S, 229),
        ],
    );
    assert_eq!(f.requests, 3);
    assert_eq!(starts(&f), [3, 9, 12]);
    // Two uploads of 40 000 bytes, the server answering before each
    // body: the body's records, long and its last, are not requests.
    let f = h2(
        0,
        &[
            (C, 64),
            (S, 40),
            (C, 73),
            (C, 9),
            (S, 229),
            (C, 16384),
            (S, 13),
            (C, 16384),
            (C, 7241),
            (C, 23),
            (C, 16384),
            (C, 16384),
            (C, 7241),
            (S, 229),
        ],
    );
    assert_eq!(f.requests, 2);
    assert_eq!(starts(&f), [2, 9]);
}

#[test]
fn h2_a_record_taken_for_a_body_is_a_request_when_its_size_comes_again() {
    // Chromium (captures/h2-chromium-page-2x21, TLS 1.2): the page,
    // then two image requests in one flight — the second could be the
    // first's body until a request of its size follows.
    let f = h2_12(&[
        (C, 70),
        (C, 455),
        (S, 149),
        (S, 566),
        (C, 9),
        (C, 152),
        (C, 39),
        (S, 708),
        (S, 808),
        (C, 39),
        (S, 908),
    ]);
    assert_eq!(f.requests, 4);
    assert_eq!(starts(&f), [1, 5, 6, 9]);
}

#[test]
fn h2_two_records_of_one_size_in_a_flight_are_requests() {
    // Chromium sending the images' requests at once, with PRIORITY
    // frames (14) among them, before any response.
    let f = h2(
        0,
        &[
            (C, 70),
            (C, 455),
            (S, 126),
            (S, 584),
            (C, 152),
            (C, 39),
            (C, 41),
            (C, 14),
            (C, 14),
            (C, 39),
            (S, 725),
            (S, 825),
            (S, 925),
            (S, 1025),
        ],
    );
    assert_eq!(f.requests, 5);
    assert_eq!(starts(&f), [1, 4, 5, 6, 9]);
}

#[test]
fn h2_a_body_the_size_of_its_own_headers_is_a_body() {
    // A POST whose body happens to be as long as its HEADERS (within
    // two bytes), then two requests sent together the size of the
    // last one before them (curl --parallel's pairs).
    let f = h2(
        0,
        &[
            (C, 64),
            (C, 154),
            (C, 156),
            (S, 700),
            (C, 28),
            (S, 1468),
            (C, 28),
            (C, 29),
            (S, 1468),
            (S, 1468),
        ],
    );
    assert_eq!(f.requests, 4);
    assert_eq!(starts(&f), [1, 4, 6, 7]);
}

#[test]
fn h2_preface_alone_then_settings_in_a_record_of_their_own() {
    // Chrome in the peer corpus (TLS 1.2): preface, SETTINGS and
    // WINDOW_UPDATE each sealed alone, one request; the server PINGs.
    let f = h2_12(&[
        (C, 24),
        (C, 27),
        (C, 13),
        (C, 40),
        (S, 40),
        (C, 9),
        (S, 736),
        (S, 17),
        (C, 17),
    ]);
    assert_eq!(f.requests, 1);
    assert_eq!(starts(&f), [3]);
}

#[test]
fn h2_without_known_lengths_counts_flights() {
    // A CBC suite hides the lengths: flights, as before.
    let mut f = Flights::new(10);
    f.h2 = true;
    let records = [(C, 100), (C, 80), (C, 80), (S, 500), (C, 80), (S, 500)];
    for (i, (side, len)) in records.into_iter().enumerate() {
        f.record(side, len, t(i as i64), false);
    }
    f.finish();
    assert!(!f.per_record());
    assert_eq!(f.requests, 2);
}

#[test]
fn h2_multiplexed_requests_with_bodies_are_doubtful() {
    // Java's HttpClient POSTing 200 bytes from ten threads on one
    // connection: HEADERS (50) and DATA (209) interleaved. The first
    // request's body, answered, tells the bodies' size: they are not
    // requests.
    let mut records = vec![(C, 64), (S, 40), (C, 133), (C, 209), (S, 229)];
    for _ in 0..6 {
        records.extend([(C, 50), (C, 209), (C, 50), (C, 209), (S, 229), (S, 229)]);
    }
    let f = h2(16, &records);
    assert!(!f.doubtful());
    assert_eq!(f.requests, 13);
    // Without that first body, each counts, and the estimate says it may
    // be double.
    records.remove(3);
    let f = h2(16, &records);
    assert!(f.doubtful());
    // GETs multiplexed, one size: not doubtful.
    let mut records = vec![(C, 64), (S, 40), (C, 133), (S, 229)];
    for _ in 0..6 {
        records.extend([(C, 45), (C, 45), (C, 45), (S, 229), (S, 229), (S, 229)]);
    }
    let f = h2(16, &records);
    assert!(!f.doubtful());
    assert_eq!(f.requests, 19);
}

#[test]
fn h2_a_body_after_an_early_answer_is_not_a_request() {
    // Java's HttpClient POSTing 200 bytes to a rate-limited nginx
    // (captures/java-httpclient-h2-post-429-30): HEADERS (68) alone;
    // nginx's WINDOW_UPDATE (13) then the body (209) and a 200; or a 429
    // and RST_STREAM (13) at once, and the body after them.
    let f = h2(
        16,
        &[
            (S, 265),
            (S, 265),
            (S, 40),
            (C, 151),
            (C, 209),
            (S, 81),
            (C, 9),
            (C, 68),
            (S, 13),
            (C, 209),
            (S, 80),
            (C, 68),
            (S, 241),
            (S, 13),
            (C, 209),
            (C, 68),
            (S, 241),
            (S, 13),
            (C, 209),
            (C, 68),
            (S, 80),
        ],
    );
    assert_eq!(f.requests, 5);
    assert_eq!(starts(&f), [3, 7, 11, 15, 19]);
    assert_eq!(firsts(&f), [5, 10, 12, 16, 20].map(|n| Some(t(n))));
}

#[test]
fn h2_an_empty_data_frame_ends_a_body_not_sent() {
    // curl (captures/h2-curl-post-429-12): its first POST answered 429
    // before it sent the 20 000-byte body; it acknowledges the server's
    // SETTINGS and ends the stream with an empty DATA frame (9), then
    // sends the next request.
    let f = h2(
        0,
        &[
            (S, 265),
            (S, 265),
            (S, 40),
            (C, 64),
            (C, 77),
            (S, 241),
            (S, 13),
            (C, 9),
            (C, 9),
            (C, 27),
            (S, 241),
            (S, 13),
            (C, 16384),
            (C, 3625),
            (C, 27),
            (S, 241),
        ],
    );
    assert_eq!(f.requests, 3);
    assert_eq!(starts(&f), [4, 9, 14]);
}

#[test]
fn h2_a_request_answered_after_an_early_answer_was_a_request() {
    // A client that seals each request with its body in one record: its
    // first (with the preface) answered early and reset; the next record
    // is taken for that body until the server answers it.
    let f = h2(
        0,
        &[
            (S, 265),
            (S, 265),
            (S, 40),
            (C, 300),
            (S, 241),
            (S, 13),
            (C, 250),
            (S, 241),
            (S, 13),
            (C, 250),
            (S, 241),
            (S, 13),
            (C, 250),
            (S, 241),
        ],
    );
    assert_eq!(f.requests, 4);
    assert_eq!(starts(&f), [3, 6, 9, 12]);
    assert!(!f.doubtful());
}

#[test]
fn h2_more_bodies_than_requests_forgets_their_size() {
    // The same client sending its requests at once: the record taken for
    // the first one's body is not answered before the next. Once there
    // are more records of that size than requests, the size is forgotten
    // and the estimate says it is doubtful.
    let mut records = vec![(S, 265), (S, 265), (S, 40), (C, 300), (S, 241), (S, 13)];
    records.extend([(C, 250); 8]);
    records.extend([(S, 241); 8]);
    let f = h2(0, &records);
    assert!(f.doubtful());
    // The first, then the four from the fifth record of that size on
    // (bodies would then outnumber the requests counted by three): the
    // four before stay uncounted.
    assert_eq!(f.requests, 5);
}

#[test]
fn h2_a_ticket_between_a_request_and_its_body() {
    // OpenSSL's tickets, sent once the client's Finished is read, came
    // between Java's first HEADERS (with the preface) and its body: the
    // first is not an answer, and the body is not a request.
    let f = h2(
        16,
        &[
            (C, 151),
            (S, 265),
            (C, 209),
            (S, 265),
            (S, 62),
            (S, 110),
            (C, 9),
        ],
    );
    assert_eq!(f.requests, 1);
    assert_eq!(f.exchanges.listed()[0].response_first, Some(t(5)));
}

#[test]
fn h2_an_empty_data_frame_after_a_record_shows_it_was_a_body() {
    // Apache HttpAsyncClient 5 over HTTP/2 (captures/apache-async-h2-post-
    // 429-100x50, 16 bytes of padding a record): each POST's HEADERS (91,
    // then 15), a WINDOW_UPDATE from nginx for its body, and the body
    // (209) and an empty DATA frame ending the stream (9) in two records.
    // Multiplexed, the bodies would count too; the 9 after each says
    // otherwise. The client's first 9 is its SETTINGS ACK, even right
    // after a request.
    let f = h2(
        16,
        &[
            (S, 249),
            (S, 249),
            (S, 40),
            (C, 24),
            (C, 45),
            (S, 9),
            (C, 13),
            (C, 91),
            (C, 9),
            (S, 13),
            (C, 15),
            (S, 13),
            (C, 15),
            (C, 15),
            (C, 15),
            (C, 209),
            (C, 9),
            (C, 209),
            (C, 9),
            (S, 13),
            (S, 65),
            (C, 209),
            (C, 9),
            (S, 92),
            (C, 209),
            (C, 9),
            (C, 209),
            (C, 9),
            (C, 15),
            (S, 92),
        ],
    );
    assert_eq!(f.requests, 6);
    assert_eq!(starts(&f), [7, 10, 12, 13, 14, 28]);
    assert!(!f.doubtful());
}

#[test]
fn h2_a_record_a_headers_frame_longer_than_a_body_is_a_request() {
    // OkHttp 3's enqueue, 50 calls at once, the client slowed (16 bytes
    // of padding a record; read from JSSE's debug log): its first flight
    // seals four requests' HEADERS and three of their bodies in one
    // record (753, counted once), the fourth body (209), the SETTINGS
    // ACK, and a fifth request sealed with its body (230 = 21 + 209).
    // Answered, 230 is not learned as a body's size — it is a request —
    // so the later ones count. A client that seals HEADERS with bodies
    // seals frames of several streams together too: the estimate is
    // doubtful.
    let f = h2(
        16,
        &[
            (S, 249),
            (S, 249),
            (S, 40),
            (C, 24),
            (C, 15),
            (C, 13),
            (C, 753),
            (C, 209),
            (C, 9),
            (C, 230),
            (S, 124),
            (S, 178),
            (S, 13),
            (S, 80),
            (C, 230),
            (S, 80),
            (C, 230),
            (C, 230),
            (S, 80),
        ],
    );
    assert_eq!(f.requests, 5);
    assert_eq!(starts(&f), [6, 9, 14, 16, 17]);
    assert_eq!(f.exchanges.listed()[0].response_first, Some(t(10)));
    assert!(f.doubtful());
}
