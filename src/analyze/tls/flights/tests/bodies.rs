//! HTTP/1 flights with bodies sent after early answers, records after full
//! ones, and random conversations through both readings.
use super::*;

/// An HTTP/1 conversation over TLS 1.3 (`(side, record length)`, a
/// millisecond apart).
fn http1(records: &[(Side, usize)]) -> Flights {
    http1_with(None, records)
}

/// The same with what each client record adds to its plaintext known
/// (and what every record adds at least).
fn http1_with(overhead: Option<(usize, usize)>, records: &[(Side, usize)]) -> Flights {
    let mut f = Flights::new(100);
    if let Some((client, base)) = overhead {
        f.set_overhead(client, base);
    }
    for (i, &(side, len)) in records.iter().enumerate() {
        f.record(side, len, t(i as i64), true);
    }
    f.finish();
    f
}

#[test]
fn http1_a_body_sent_after_an_early_answer_is_not_a_request() {
    // Java's HttpURLConnection POSTing 200 bytes to a rate-limited nginx
    // (captures/java-urlconnection-post-429-30): OpenSSL's tickets, then
    // head (235) and body (233) in two records; a 429 (349) before the
    // body is read, and the body
    // after it, then the next head in the same flight; at the end a body
    // after the last answer.
    let f = http1(&[
        (S, 282),
        (S, 282),
        (C, 235),
        (C, 233),
        (S, 180),
        (C, 235),
        (S, 349),
        (C, 233),
        (C, 235),
        (C, 233),
        (S, 180),
        (C, 235),
        (S, 349),
        (C, 233),
    ]);
    assert_eq!(f.requests, 4);
    assert_eq!(starts(&f), [2, 5, 8, 11]);
}

#[test]
fn http1_a_flight_begun_by_a_body_is_retracted_when_a_head_follows() {
    // Java's HttpClient over HTTP/1.1 (captures/java-httpclient-h1-post-
    // 429-10x10): the first POST in one record, the next two answered 429
    // before their bodies, which begin the next flights: the first such
    // body is counted until the head after it shows what it was.
    let f = http1(&[
        (S, 282),
        (S, 282),
        (C, 369),
        (S, 349),
        (C, 169),
        (S, 349),
        (C, 233),
        (C, 169),
        (S, 349),
        (C, 233),
        (C, 169),
        (C, 233),
        (S, 195),
    ]);
    assert_eq!(f.requests, 4);
    assert_eq!(starts(&f), [2, 4, 7, 10]);
}

#[test]
fn http1_a_body_that_completes_the_first_request_sealed_is_a_body() {
    // Java's HttpClient's sendAsync over HTTP/1.1, 50 requests at once
    // (captures/java-async-h1-post-429-100x50; 33 bytes a record): a
    // connection of two POSTs, the first sealed with its body in one
    // record (369), the second's head (169) answered 429 before its body
    // (233), which makes up the first's size with that head and is the
    // connection's last record, never answered. Without the overhead
    // known, one byte longer, or answered, it is a request.
    let records = [
        (S, 282),
        (S, 282),
        (C, 369),
        (S, 349),
        (C, 169),
        (S, 349),
        (C, 233),
    ];
    let known = |records: &[(Side, usize)]| http1_with(Some((33, 17)), records);
    let f = known(&records);
    assert_eq!(f.requests, 2);
    assert_eq!(starts(&f), [2, 4]);
    // (JSSE's closing alerts after it change nothing.)
    assert_eq!(
        known(&[&records[..], &[(C, 35), (C, 35)]].concat()).requests,
        2
    );
    assert_eq!(http1(&records).requests, 3);
    let mut longer = records;
    longer[6].1 += 1;
    assert_eq!(known(&longer).requests, 3);
    assert_eq!(known(&[&records[..], &[(S, 349)]].concat()).requests, 3);
}

#[test]
fn the_record_after_a_full_one_continues_its_message() {
    // curl POSTing 20 000 bytes over HTTP/1.1 and TLS 1.3
    // (captures/curl-h1-post-429-12): OpenSSL's two tickets come between
    // the first record (head and body, full) and the body's last; then an
    // upload answered 429 before its last record.
    let f = http1(&[
        (C, 16401),
        (S, 299),
        (C, 3812),
        (S, 299),
        (S, 239),
        (C, 16401),
        (C, 3812),
        (S, 366),
        (C, 16401),
        (S, 366),
        (C, 3812),
    ]);
    assert_eq!(f.requests, 3);
    assert_eq!(starts(&f), [0, 5, 8]);
    assert_eq!(f.exchanges.listed()[0].response_first, Some(t(4)));
}

#[test]
fn any_record_sequence_counts_at_most_one_request_a_client_record() {
    // Random conversations (sizes drawn around the rules' thresholds),
    // HTTP/2 read a record each and HTTP/1 flights: never more requests
    // than client records, exchanges in order of time.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    const SIZES: [usize; 12] = [9, 13, 24, 31, 50, 64, 68, 151, 209, 265, 2048, 16401];
    let mut counted = [0u64; 2];
    for round in 0..4000 {
        let h2 = round % 2 == 0;
        let mut f = Flights::new(16);
        f.h2 = h2;
        f.set_overhead(17, 17);
        let mut client = 0u64;
        for i in 0..(next() % 60) {
            let side = if next() % 2 == 0 { C } else { S };
            let base = SIZES[(next() % SIZES.len() as u64) as usize];
            let len = base + (next() % 3) as usize + 17;
            client += u64::from(side == C);
            f.record(side, len, t(i as i64), true);
        }
        f.finish();
        assert!(
            f.requests <= client,
            "round {round}: {} > {client}",
            f.requests
        );
        let starts = starts(&f);
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "round {round}");
        counted[usize::from(h2)] += f.requests;
    }
    // Both readings counted requests at all.
    assert!(counted.iter().all(|&n| n > 10_000), "{counted:?}");
}
