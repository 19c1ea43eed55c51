//! `--threads`: the output (connection numbers, the order records come
//! out, every field, the summary) must not depend on the number of threads.
//! Checked on every real capture and corpus file, and on generated traffic
//! large enough to cross many batches, with and without idle timeouts.

use std::io;
use std::path::Path;
use std::process::Command;

use handshakes::record::QuicRecord;
use handshakes::source::file::FileSource;
use handshakes::{analyze, Config, ConnectionRecord, RecordSink};

use crate::support::{pcap_of, us, Conv, Link, Side, T0};
use crate::tools::{all_captures, skip_or_fail};

/// Records (TCP and QUIC) as JSON, in the order a sink receives them.
#[derive(Default)]
struct Lines(Vec<String>);

impl RecordSink for Lines {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.0.push(json(&rec));
        Ok(())
    }

    fn quic(&mut self, rec: &QuicRecord) -> io::Result<()> {
        self.0.push(format!("quic {}", json(rec)));
        Ok(())
    }
}

/// Records in the order the sink received them, and the summary, as JSON.
fn run(path: &Path, config: &Config) -> (Vec<String>, String) {
    let mut source = FileSource::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut records = Lines::default();
    let summary = analyze(&mut source, config, &mut records).unwrap_or_else(|e| panic!("{e}"));
    (records.0, json(&summary))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| panic!("{e}"))
}

fn same_for_all_thread_counts(name: &str, path: &Path, base: &Config) -> usize {
    let one = run(
        path,
        &Config {
            threads: 1,
            ..base.clone()
        },
    );
    for threads in [2, 3, 8] {
        let many = run(
            path,
            &Config {
                threads,
                ..base.clone()
            },
        );
        assert_eq!(
            one.0.len(),
            many.0.len(),
            "{name}: {threads} threads give a different number of records"
        );
        for (k, (a, b)) in one.0.iter().zip(&many.0).enumerate() {
            assert_eq!(a, b, "{name}: record #{k} differs with {threads} threads");
        }
        assert_eq!(
            one.1, many.1,
            "{name}: summary differs with {threads} threads"
        );
    }
    one.0.len()
}

#[test]
fn every_capture_gives_the_same_output_on_any_number_of_threads() {
    let files = all_captures();
    let corpus = files
        .iter()
        .filter(|(n, _)| n.starts_with("corpus/"))
        .count();
    if corpus == 0 {
        skip_or_fail("the peer corpus (../shared/corpus)", "no capture found");
    }
    let mut records = 0;
    for (name, path) in &files {
        records += same_for_all_thread_counts(name, path, &Config::default());
        let idle = Config {
            idle_timeout: Some(std::time::Duration::from_millis(500)),
            ..Config::default()
        };
        same_for_all_thread_counts(name, path, &idle);
    }
    eprintln!(
        "threads: {} captures, {records} records, identical with 1, 2, 3 and 8 threads",
        files.len()
    );
    assert!(records > 400, "only {records} records compared");
}

/// Several threads walk a mapped classic capture in pieces, guessing where
/// each piece's first record starts; with pieces far smaller than the
/// default (many per connection, many wrong guesses, records straddling
/// pieces and windows) the output must still be that of one thread.
#[test]
fn captures_walked_in_tiny_pieces_give_the_same_output() {
    let mut records = 0;
    for (name, path) in all_captures() {
        for piece in [100, 1500] {
            let base = Config {
                split_piece: Some(piece),
                ..Config::default()
            };
            records += same_for_all_thread_counts(&name, &path, &base);
        }
    }
    assert!(records > 100, "only {records} records");
}

#[test]
fn generated_traffic_crossing_many_batches_is_identical() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("synth.pcap");
    let args = ["--size", "24MiB", "--seed", "5", "--concurrency", "200"];
    crate::support::synth(&path, &args);
    let n = same_for_all_thread_counts("synth", &path, &Config::default());
    assert!(n > 50, "only {n} connections generated");
    let idle = Config {
        idle_timeout: Some(std::time::Duration::from_millis(50)),
        ..Config::default()
    };
    same_for_all_thread_counts("synth, idle 50ms", &path, &idle);
    // Three memory-map windows, and batches that end with them.
    let read = jsonl(&path, &["-j", "1", "--no-mmap"]);
    for args in [&["-j", "1"][..], &["-j", "2"]] {
        assert!(
            read == jsonl(&path, args),
            "synth: JSON Lines differ with {args:?}"
        );
    }
}

/// 20 000 connections all still in the table when the input ends (none
/// closed), so that every shard finalises several chunks of them at the
/// end, the workers a chunk ahead while the calling thread merges: the
/// records must come out in the same order as from one table.
#[test]
fn many_connections_held_at_the_end_are_identical() {
    let convs: Vec<Conv> = (0..20_000u32)
        .map(|k| {
            let client = format!(
                "10.{}.{}.{}:{}",
                k % 7,
                (k / 7) % 250,
                k % 250,
                1024 + k % 60_000
            );
            let mut c = Conv::new(&client, "192.0.2.1:443", k, !k);
            // Interleaved starts, every 10 µs; some send a few bytes.
            let t = T0 + us(10 * i64::from(k));
            c.handshake(t, t + us(5), t + us(7));
            if k % 3 == 0 {
                c.data(Side::Client, t + us(9), 20);
            }
            c
        })
        .collect();
    let refs: Vec<&Conv> = convs.iter().collect();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("held.pcap");
    std::fs::write(&path, pcap_of(Link::Ethernet, &refs)).unwrap_or_else(|e| panic!("{e}"));
    let n = same_for_all_thread_counts("held", &path, &Config::default());
    assert_eq!(n, 20_000);
}

/// At the pause of [`write_pause`] the shards hand the records over a
/// slice at a time, each encoded on its shard's thread: the binary's JSON
/// Lines must be the same bytes on any number of threads — with 40, each
/// of the 160 shards pauses after three records and finalises eight at a
/// time at the end (its shares of the totals).
#[test]
fn a_pause_that_ends_thousands_of_lingers_at_once_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("pause.pcap");
    write_pause(&path);
    let one = jsonl(&path, &["-j", "1"]);
    assert_eq!(one.0, Some(0));
    assert_eq!(one.1.iter().filter(|&&b| b == b'\n').count(), 6_002);
    for threads in ["2", "3", "40"] {
        let many = jsonl(&path, &["-j", threads]);
        assert!(one == many, "pause: JSON Lines differ with -j {threads}");
    }
}

/// A shard pauses once it holds a slice of finished records, until they
/// have been taken (one thread: written; several: taken by the gatherer,
/// which applies events as far as every shard has got). Shards that pause
/// after every record or two — at the pause above, in the middle of
/// running out thousands of lingers at one packet; on every capture; with
/// idle scans — must give the records of one thread that never pauses, in
/// its order.
#[test]
fn shards_that_pause_after_every_record_give_the_same_output() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pause = dir.path().join("pause.pcap");
    write_pause(&pause);
    let idle = Some(std::time::Duration::from_millis(20));
    let mut records = 0;
    let mut inputs = all_captures();
    inputs.push(("pause".into(), pause.clone()));
    for (name, path) in &inputs {
        for idle_timeout in [None, idle] {
            if idle_timeout.is_some() && path != &pause {
                continue;
            }
            let whole = Config {
                threads: 1,
                slice: Some(usize::MAX),
                idle_timeout,
                ..Config::default()
            };
            let reference = run(path, &whole);
            for slice in [1, 2] {
                let base = Config {
                    slice: Some(slice),
                    ..whole.clone()
                };
                assert!(
                    run(path, &base) == reference,
                    "{name}: one thread pausing every {slice} records differs"
                );
                records += same_for_all_thread_counts(name, path, &base);
            }
        }
    }
    assert!(records > 12_000 + 400, "only {records} records");
}

/// 6 000 connections that close within 60 ms, then, after a pause of two
/// seconds, one more: at its first packet the close linger of all of them
/// runs out at once.
fn write_pause(path: &Path) {
    let mut convs: Vec<Conv> = (0..6_000u32)
        .map(|k| {
            let client = format!("10.9.{}.{}:{}", k / 250, k % 250, 20_000 + k);
            let mut c = Conv::new(&client, "192.0.2.9:80", k, !k);
            let t = T0 + us(10 * i64::from(k));
            c.handshake(t, t + us(1), t + us(2));
            c.data(Side::Client, t + us(3), 40);
            c.data(Side::Server, t + us(4), 120);
            c.close(Side::Client, t + us(5), t + us(6), t + us(7));
            c
        })
        .collect();
    let mut late = Conv::new("10.9.99.1:40000", "192.0.2.9:80", 1, 2);
    late.handshake(
        T0 + 2_000_000_000,
        T0 + 2_000_000_000 + us(1),
        T0 + 2_000_000_000 + us(2),
    );
    convs.push(late);
    let refs: Vec<&Conv> = convs.iter().collect();
    std::fs::write(path, pcap_of(Link::Ethernet, &refs)).unwrap_or_else(|e| panic!("{e}"));
}

/// JSON Lines from the binary, with `args` after `analyze`.
fn jsonl(path: &Path, args: &[&str]) -> (Option<i32>, Vec<u8>) {
    let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
        .args(["analyze", "-q", "-T", "jsonl"])
        .args(args)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("handshakes: {e}"));
    (out.status.code(), out.stdout)
}

/// JSON Lines through the binary: with threads the records are encoded on
/// the workers and the connection number is written by the one thread that
/// writes output; files are memory-mapped unless `--no-mmap`. The bytes
/// must be those of one thread reading with `read()`.
#[test]
fn json_lines_from_the_binary_are_the_same_bytes_on_any_number_of_threads() {
    let files = all_captures();
    for (name, path) in &files {
        let one = jsonl(path, &["-j", "1", "--no-mmap"]);
        for args in [
            &["-j", "1"][..],
            &["-j", "2"],
            &["-j", "3"],
            &["-j", "2", "--no-mmap"],
        ] {
            let many = jsonl(path, args);
            assert_eq!(one.0, many.0, "{name}: exit code with {args:?}");
            assert!(one.1 == many.1, "{name}: JSON Lines differ with {args:?}");
        }
    }
    eprintln!("threads: JSON Lines identical on {} captures", files.len());
}
