//! When a QUIC connection's record is made, and where it goes: silent
//! past the idle timeout its client asked for (`ended` = `idle`), or at the
//! end of the input (`open`); each as a `{"quic": …}` line of JSON Lines
//! and a CSV row at that moment, the same with any number of threads; and
//! in a live capture at the tick that finds it idle (or, with a key log,
//! closed and drained), before the stop.
//! Real captures (aioquic's client asks for 60 s, Chromium's for 30 s) set
//! one after the other with a gap between them.

use std::path::{Path, PathBuf};

use handshakes::analyze::Analyzer;
use handshakes::record::QuicRecord;
use handshakes::report::table::LiveRows;
use handshakes::source::file::FileSource;
use handshakes::time::Timestamp;
use handshakes::{Config, ConnectionRecord, KeyLog, PacketSource, RecordSink};
use serde_json::Value;

use crate::support::{run, Scratch};

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("captures")
        .join(name)
}

/// A little-endian classic pcap's first timestamp, microseconds.
fn first_micros(pcap: &[u8]) -> i64 {
    let word = |at: usize| u32::from_le_bytes(pcap[at..at + 4].try_into().expect("4 bytes"));
    assert_eq!(word(0), 0xa1b2_c3d4, "a little-endian microsecond pcap");
    i64::from(word(24)) * 1_000_000 + i64::from(word(28))
}

/// `pcap` (little-endian, microseconds) with every timestamp moved by
/// `by` microseconds.
fn shifted(pcap: &[u8], by: i64) -> Vec<u8> {
    let mut out = pcap.to_vec();
    let mut at = 24;
    while at + 16 <= out.len() {
        let field = |at: usize| u32::from_le_bytes(out[at..at + 4].try_into().expect("4 bytes"));
        let ts = i64::from(field(at)) * 1_000_000 + i64::from(field(at + 4)) + by;
        let caplen = field(at + 8) as usize;
        out[at..at + 4]
            .copy_from_slice(&u32::try_from(ts / 1_000_000).expect("secs").to_le_bytes());
        out[at + 4..at + 8]
            .copy_from_slice(&u32::try_from(ts % 1_000_000).expect("micros").to_le_bytes());
        at += 16 + caplen;
    }
    out
}

/// aioquic's capture, then Chromium's starting `gap_secs` after it.
fn one_after_the_other(scratch: &Scratch, gap_secs: i64) -> (PathBuf, PathBuf) {
    let first = capture("quic-aioquic-h3-5.pcap");
    let second = std::fs::read(capture("quic-chromium-h3-2.pcap")).expect("a capture of ours");
    let start = first_micros(&std::fs::read(&first).expect("a capture of ours"));
    let by = start + gap_secs * 1_000_000 - first_micros(&second);
    let later = scratch.file(&format!("later-{gap_secs}.pcap"), &shifted(&second, by));
    (first, later)
}

/// `analyze --merge -T FORMAT -j THREADS FILES…`'s standard output.
fn merged(format: &str, threads: &str, files: &[&Path]) -> Vec<u8> {
    let mut args = vec!["analyze", "-q", "--merge", "-T", format, "-j", threads];
    args.extend(files.iter().map(|f| f.to_str().expect("UTF-8 path")));
    let out = run(&args);
    assert!(out.status.success());
    out.stdout
}

fn jsonl(files: &[&Path], threads: &str) -> Vec<Value> {
    let text = String::from_utf8(merged("jsonl", threads, files)).expect("UTF-8");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_quic_connection_silent_past_its_idle_timeout_ends_there() {
    let scratch = Scratch::new();
    let (first, later) = one_after_the_other(&scratch, 100);
    let lines = jsonl(&[&first, &later], "1");
    assert_eq!(lines, jsonl(&[&first, &later], "2"), "-j 1 and -j 2");
    let [a, b, summary] = &lines[..] else {
        panic!("two QUIC lines and the summary: {lines:?}");
    };
    // aioquic's client, silent for 60 s, ends at Chromium's first datagram.
    assert_eq!(a["quic"]["id"], 1);
    assert_eq!(a["quic"]["ended"], "idle");
    assert_eq!(a["quic"]["handshake"]["idle_timeout"], 60.0);
    assert_eq!(b["quic"]["id"], 2);
    assert_eq!(b["quic"]["ended"], "open");
    assert_eq!(b["quic"]["handshake"]["idle_timeout"], 30.0);
    assert!(a["quic"]["end"]["at"].as_f64() < Some(1.0), "{a}");
    assert!(b["quic"]["start"]["at"].as_f64() > Some(99.0), "{b}");
    // The summary lists the same records.
    let list = &summary["summary"]["quic"]["list"];
    assert_eq!(list[0], a["quic"]);
    assert_eq!(list[1], b["quic"]);

    // 30 s apart, aioquic's is still open at the end: both end there, in
    // order of their first packets.
    let (first, later) = one_after_the_other(&scratch, 30);
    let lines = jsonl(&[&first, &later], "2");
    let ended: Vec<(&Value, &Value)> = lines
        .iter()
        .filter_map(|l| l.get("quic"))
        .map(|q| (&q["id"], &q["ended"]))
        .collect();
    assert_eq!(ended.len(), 2);
    assert!(ended.iter().all(|(_, e)| *e == "open"), "{ended:?}");
    assert!(ended[0].0.as_u64() < ended[1].0.as_u64());

    // CSV: a row as each ends, its `state` the way it ended.
    let (first, later) = one_after_the_other(&scratch, 100);
    let out = merged("csv", "1", &[&first, &later]);
    let mut reader = csv::Reader::from_reader(&out[..]);
    let rows: Vec<(String, String, String)> = reader
        .deserialize::<std::collections::HashMap<String, String>>()
        .map(|r| {
            let r = r.expect("a row");
            (
                r["id"].clone(),
                r["state"].clone(),
                r["quic_idle_timeout"].clone(),
            )
        })
        .collect();
    let want = [("1", "idle", "60"), ("2", "open", "30")]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(rows, want);
    // The table and the JSON document read the summary's list.
    let v: Value = serde_json::from_slice(&merged("json", "1", &[&first, &later])).expect("JSON");
    assert_eq!(v["summary"]["quic"]["list"][0]["ended"], "idle");
}

/// QUIC records as a live capture's sink gets them.
#[derive(Default)]
struct Ended(Vec<QuicRecord>);

impl RecordSink for Ended {
    fn record(&mut self, _: ConnectionRecord) -> std::io::Result<()> {
        Ok(())
    }

    fn quic(&mut self, rec: &QuicRecord) -> std::io::Result<()> {
        self.0.push(rec.clone());
        Ok(())
    }
}

/// Chromium's capture read as `live` reads an interface (with `keylog`,
/// if given), ticked `ticks` seconds after its last packet as `live` ticks
/// every second: the QUIC records the sink got at each tick, and at the
/// stop.
fn live_ticks(keylog: Option<&str>, ticks: &[i64]) -> (Vec<Vec<QuicRecord>>, Vec<QuicRecord>) {
    let path = capture("quic-chromium-h3-2.pcap");
    let mut source = FileSource::open(&path).expect("a capture of ours");
    let keylog = keylog.map(|k| {
        std::sync::Arc::new(KeyLog::open(&[capture(k)], false).expect("a key log of ours"))
    });
    let mut analyzer = Analyzer::new(Config {
        threads: 1,
        idle_timeout: Some(std::time::Duration::from_secs(60)),
        keylog,
        ..Config::default()
    });
    let mut sink = Ended::default();
    let mut last = Timestamp(0);
    while let Some(packet) = source.next_packet().expect("readable") {
        last = last.max(packet.ts);
        analyzer
            .packet(&packet, &mut sink)
            .expect("no output error");
    }
    let mut seen = Vec::new();
    for &s in ticks {
        let at = Timestamp(last.0 + s * 1_000_000_000);
        analyzer.tick(at, &mut sink).expect("tick");
        seen.push(std::mem::take(&mut sink.0));
    }
    let summary = analyzer.finish(source.info(), &mut sink).expect("finish");
    let quic = summary.quic.expect("QUIC figures");
    assert_eq!(quic.list.len(), 1);
    (seen, sink.0)
}

fn ended(records: &[QuicRecord]) -> Vec<(u64, String)> {
    records
        .iter()
        .map(|r| (r.id, r.ended.to_string()))
        .collect()
}

/// `live` ticks its analysis every second of wall-clock time: a QUIC
/// connection gone quiet for its client's idle timeout (Chromium asks for
/// 30 s, not live's 60 s default) is printed then, not at the stop; with
/// the key log, 3 s after the CONNECTION_CLOSE it reads.
#[test]
fn a_live_capture_prints_a_quic_connection_once_it_is_over() {
    let (seen, at_stop) = live_ticks(None, &[29, 31]);
    assert_eq!(ended(&seen[0]), [], "not yet idle");
    assert_eq!(ended(&seen[1]), [(1, "idle".to_string())]);
    assert_eq!(at_stop, [], "nothing more at the stop");

    let (seen, at_stop) = live_ticks(Some("quic-chromium-h3-2.keylog"), &[2, 4]);
    assert_eq!(ended(&seen[0]), [], "still draining");
    assert_eq!(ended(&seen[1]), [(1, "closed".to_string())]);
    let close = seen[1][0].close.as_ref().expect("its CONNECTION_CLOSE");
    assert_eq!(close.by.as_str(), "client");
    assert_eq!(at_stop, []);

    // Stopped before: still open.
    let (seen, at_stop) = live_ticks(None, &[1]);
    assert_eq!(ended(&seen[0]), []);
    assert_eq!(ended(&at_stop), [(1, "open".to_string())]);
}

/// `live`'s table prints a QUIC connection in its columns as it ends:
/// `q` and its number, `QUIC full` or `QUIC resumed` where TLS goes, its
/// handshake time, UDP payload bytes, how it ended.
#[test]
fn the_live_table_has_a_row_for_a_quic_connection() {
    let (seen, _) = live_ticks(Some("quic-chromium-h3-2.keylog"), &[4]);
    let rec = &seen[0][0];
    let mut out = Vec::new();
    LiveRows::new(&mut out).quic(rec).expect("written");
    let text = String::from_utf8(out).expect("UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    let [header, row] = &lines[..] else {
        panic!("a header and a row: {text}");
    };
    assert!(header.trim_start().starts_with("id  client"), "{text}");
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(words[0], "q1", "{text}");
    assert_eq!(words[1], rec.client, "{text}");
    assert_eq!(words[2], rec.server, "{text}");
    assert_eq!(&words[3..6], ["-", "QUIC", "full"], "{text}");
    assert!(row.ends_with("client transport 0x0, closed"), "{text}");
}
