//! Segmentation invariance properties: the four conversations of the parent,
//! re-segmented at random, give the same facts, strictly and in the
//! tolerant variants; with the minimal cases of the bugs they found (a tiny
//! first segment hiding TLS or HTTP/1).

use super::*;

/// Avoids the two bugs the strict properties find: the first message's first
/// segment is at least 8 bytes (see `tls_is_recognised_when_the_first_segment_is_tiny`,
/// `http1_is_recognised_when_the_first_segment_is_tiny`), and overlapping
/// copies come after the message's own segments, 1 µs later (see
/// `reassembly_same_start_shorter_copy_first`).
fn tolerant(conv: &Conversation, mut plans: Vec<Plan>) -> Vec<Plan> {
    let first_len = conv.chunks[0].bytes.len();
    plans[0]
        .cuts
        .retain(|&p| usize::from(p) % first_len == 0 || usize::from(p) % first_len >= 8);
    for plan in &mut plans {
        for copy in &mut plan.copies {
            copy.3 = true;
        }
    }
    plans
}

macro_rules! invariance {
    ($strict:ident, $tolerant:ident, $conv:ident, $fixed:literal) => {
        proptest! {
            #![proptest_config(config())]

            #[test]
            fn $strict((plans, a, b) in plans($conv().chunks.len())) {
                let conv = $conv();
                let base = baseline_cached(stringify!($conv), &conv);
                assert_invariant(&conv, &base, &plans, (a, b))?;
            }

            #[test]
            fn $tolerant((plans, a, b) in plans($conv().chunks.len())) {
                let conv = $conv();
                let base = baseline_cached(stringify!($conv), &conv);
                let plans = tolerant(&conv, plans);
                assert_invariant(&conv, &base, &plans, (a, b))?;
            }
        }
    };
}

/// Baselines computed once per conversation.
fn baseline_cached(name: &'static str, conv: &Conversation) -> Facts {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Facts>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(v) = cache.lock().expect("cache").get(name) {
        return v.clone();
    }
    let v = baseline(conv);
    cache.lock().expect("cache").insert(name, v.clone());
    v
}

invariance!(
    tls12_facts_survive_any_resegmentation,
    tls12_facts_survive_resegmentation,
    tls12_conversation,
    "found and fixed: a 1- or 2-byte first segment hides TLS; same-offset copies lose bytes"
);
invariance!(
    tls13_facts_survive_any_resegmentation,
    tls13_facts_survive_resegmentation,
    tls13_conversation,
    "found and fixed: a 1- or 2-byte first segment hides TLS; same-offset copies lose bytes"
);
invariance!(
    http1_facts_survive_any_resegmentation,
    http1_facts_survive_resegmentation,
    http1_conversation,
    "found and fixed: a first segment shorter than `GET ` hides HTTP/1; same-offset copies lose bytes"
);
invariance!(
    h2c_facts_survive_any_resegmentation,
    h2c_facts_survive_resegmentation,
    h2c_conversation,
    "found and fixed: same-offset copies lose bytes (reassembly_same_start_shorter_copy_first)"
);

/// One segment per message, except the first message, cut at `cut`.
fn first_cut_at(conv: &Conversation, cut: u16) -> Vec<Plan> {
    let mut plans: Vec<Plan> = conv
        .chunks
        .iter()
        .map(|_| Plan {
            cuts: Vec::new(),
            copies: Vec::new(),
            swaps: Vec::new(),
        })
        .collect();
    plans[0].cuts = vec![cut];
    plans
}

/// Asserts that cutting the first message at each of `cuts` changes nothing.
fn assert_first_cuts_harmless(conv: &Conversation, cuts: std::ops::Range<u16>) {
    let base = facts(&play(conv, None, (1_000, 5_000)));
    let failed: Vec<u16> = cuts
        .filter(|&cut| {
            let got = facts(&play(conv, Some(&first_cut_at(conv, cut)), (1_000, 5_000)));
            (&got.0, &got.1) != (&base.0, &base.1)
        })
        .collect();
    assert!(
        failed.is_empty(),
        "first segment of these lengths changes the facts: {failed:?}"
    );
}

/// Minimal case: the ClientHello's first segment is 1 or 2 bytes. TLS is
/// detected from the first delivered chunk only (`looks_like_tls` needs 3
/// bytes, the late-start watch needs a chunk starting with a whole record
/// header), so the connection reports `tls: null` and `http.method: none`.
#[test]
fn tls_is_recognised_when_the_first_segment_is_tiny() {
    assert_first_cuts_harmless(&tls12_conversation(), 1..8);
    assert_first_cuts_harmless(&tls13_conversation(), 1..8);
}

/// Minimal case: the request's first segment is `G`, `GE` or `GET` (no
/// method parsed yet by `Http1::looks_like_request`), or `P`..`POST` of a
/// POST — and a lone `P` is even taken for the HTTP/2 preface, giving h2c
/// with `lost_sync`. The connection reports no HTTP at all.
#[test]
fn http1_is_recognised_when_the_first_segment_is_tiny() {
    assert_first_cuts_harmless(&http1_conversation(), 1..12);
    let post = Conversation {
        server: "10.0.0.2:80",
        chunks: vec![
            chunk(
                Side::Client,
                200,
                b"POST /c HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\nhi".to_vec(),
            ),
            chunk(
                Side::Server,
                1000,
                b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n".to_vec(),
            ),
        ],
        close: 2000,
    };
    assert_first_cuts_harmless(&post, 1..12);
}

/// h2c with prior knowledge recognises any prefix of the preface.
#[test]
fn h2c_is_recognised_whatever_the_first_segment() {
    assert_first_cuts_harmless(&h2c_conversation(), 1..30);
}
