//! The streamed `-T json` document against serde_json's own pretty
//! printing of the whole document, on every capture.

use serde::Serialize;

use super::*;
use crate::testutil::{every_capture, records_of};

/// The document as serde_json prints it whole (the writer `-T json` had
/// before it was streamed).
#[derive(Serialize)]
struct Document<'a> {
    summary: &'a Summary,
    connections: &'a [ConnectionRecord],
}

fn expected(summary: &Summary, records: &[ConnectionRecord]) -> Vec<u8> {
    let mut sorted = records.to_vec();
    sorted.sort_by_key(|r| r.id);
    let doc = Document {
        summary,
        connections: &sorted,
    };
    let mut text = serde_json::to_vec_pretty(&doc).expect("encodes");
    text.push(b'\n');
    text
}

/// The document from `records` fed in the order given, each second one as
/// text encoded with a provisional connection number (as the shards hand
/// them over), with `memory` bytes of spool in memory, laid out at the end
/// on `threads` threads.
fn streamed(
    summary: &Summary,
    records: &[ConnectionRecord],
    memory: usize,
    threads: usize,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut sink = DocumentSink::with_memory(&mut out, memory).on_threads(threads);
    for (k, rec) in records.iter().enumerate() {
        if k % 2 == 1 {
            let mut provisional = rec.clone();
            provisional.id = 987_654_321;
            let encode = sink.encoder().expect("an encoder");
            let text = encode(&provisional).expect("encodes with its number");
            sink.record_encoded(rec.id, &text).expect("kept");
        } else {
            sink.record(rec.clone()).expect("kept");
        }
    }
    sink.finish(summary).expect("written");
    out
}

#[test]
fn the_document_is_serde_jsons_on_every_capture() {
    let mut checked = 0;
    let mut spilled = 0;
    let mut chunks = 0;
    for path in every_capture() {
        let Some((summary, records)) = records_of(&path) else {
            continue;
        };
        let want = expected(&summary, &records);
        // Finish order, and reversed (ids far out of order).
        let mut reversed = records.clone();
        reversed.reverse();
        for (order, memory, threads) in [
            (&records, SPOOL_MEMORY, 1),
            (&reversed, 0, 3),
            (&records, 700, 2),
            (&records, SPOOL_MEMORY, 8),
        ] {
            let got = streamed(&summary, order, memory, threads);
            assert!(
                got == want,
                "{} (spool memory {memory}, {threads} threads): differs from serde_json's document\n{}",
                path.display(),
                String::from_utf8_lossy(&got)
            );
        }
        checked += 1;
        spilled += usize::from(records.len() > 1);
        chunks = chunks.max(records.len().div_ceil(super::CHUNK));
    }
    assert!(
        chunks > 3,
        "at most {chunks} chunks of records: the threads share none"
    );
    assert!(checked >= 100, "only {checked} captures read");
    assert!(
        spilled >= 30,
        "only {spilled} captures with several records"
    );
}

#[test]
fn a_record_without_its_number_is_refused() {
    let mut out = Vec::new();
    let mut sink = DocumentSink::new(&mut out);
    assert!(sink.record_encoded(1, b"{\"client\":1}").is_err());
    assert!(sink.record_encoded(1, b"{\n      \"id\": 1,\n").is_err());
    assert!(sink.record_encoded(1, b"{\"id\":1,\"client\":1}").is_ok());
}

#[test]
fn reindenting_gives_serde_jsons_pretty_layout() {
    use serde_json::{json, Value};
    let values: Vec<Value> = vec![
        json!({}),
        json!([]),
        json!({"a": {}, "b": [], "c": [1, [2, {}], {"d": null}], "e": true}),
        json!({"quote \" and \\ , : { } [ ]": "a \"string\" with , : { } [ ] \\"}),
        json!([1.5, -2, 3e-7, "x", false, [[[]]]]),
        json!({"unicode": "é ✓ \u{1}", "n": 12345678901234567u64}),
    ];
    for value in values {
        let compact = serde_json::to_vec(&value).unwrap();
        for depth in [0, 1, 2, 5] {
            let mut want = Vec::new();
            let mut ser = serde_json::Serializer::with_formatter(&mut want, Pretty::nested(depth));
            serde::Serialize::serialize(&value, &mut ser).unwrap();
            let mut got = Vec::new();
            reindent(&compact, depth, &mut got);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{value} at depth {depth}"
            );
        }
    }
}
