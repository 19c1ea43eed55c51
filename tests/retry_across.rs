//! Rate limiting across connections (`summary.rate_limit.across_connections`,
//! and HTTP/3's in `summary.quic.rate_limit`) read from real captures: python requests and Java 17's
//! HttpURLConnection without keep-alive, a new connection per request,
//! retrying a 429 at once or after its Retry-After
//! (scripts/record-retry-captures.sh), where the per-connection figures see
//! nothing; the Java clients' pooled connections; and every figure against
//! what tshark's message and connection times give.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::captures::tshark_streams;
use crate::h2_sizes::capture;
use crate::retry_after::{tshark_http1, Message};
use crate::tools::tshark_present;

/// `analyze -T json` of `name`.pcap, with `args` before it.
fn analyze(name: &str, args: &[&str]) -> Value {
    let mut cmd = crate::support::bin();
    cmd.args(["analyze", "-q", "-T", "json"]).args(args);
    crate::support::json_of(&cmd.arg(capture(&format!("{name}.pcap"))).output().unwrap())
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("a count: {v}"))
}

/// A GET per connection to scripts/ratelimit_server.py, which answers
/// every third request 429 with `Retry-After: 1`: one loop retries at
/// once, on a new connection, one sleeps the second first (python's and
/// Java's alike). No connection
/// carries a request after its 429, so only the figures across
/// connections tell the two apart.
#[test]
fn a_retry_on_a_new_connection_is_seen_only_across_connections() {
    for (name, waits) in [
        ("http-requests-newconn-retry-now", false),
        ("http-requests-newconn-retry-after", true),
        ("java-urlconnection-noka-retry-now", false),
        ("java-urlconnection-noka-retry-after", true),
    ] {
        let v = analyze(name, &[]);
        let conns = v["connections"].as_array().unwrap();
        assert_eq!(conns.len(), 8, "{name}: 6 GETs and 2 retries");
        assert!(conns.iter().all(|c| c["http"]["requests"] == 1), "{name}");
        let r = &v["summary"]["rate_limit"];
        assert_eq!(r["responses_429"], 2, "{name}");
        assert_eq!(r["connections_limited"], 2, "{name}");
        assert_eq!(
            r["requests_in_window"], 0,
            "{name}: blind on each connection"
        );
        assert_eq!(r["wait_after_429"]["count"], 0, "{name}");
        let a = &r["across_connections"];
        let w = &a["wait_after_429"];
        assert_eq!(w["count"], 2, "{name}");
        assert_eq!(a["retried_elsewhere"], 2, "{name}");
        assert_eq!(a["requests_not_seen"], 0, "{name}");
        assert_eq!(a["out_of_order"], 0, "{name}");
        let (min, max) = (w["min"].as_f64().unwrap(), w["max"].as_f64().unwrap());
        if waits {
            assert_eq!(a["requests_in_window"], 0, "{name}");
            assert_eq!(a["connections_opened_in_window"], 0, "{name}");
            assert!((1.0..1.05).contains(&min) && max < 1.05, "{name}: {w}");
        } else {
            // The retry and the next two GETs after each 429, each on a
            // connection of its own opened within the second: 3 + 2.
            assert_eq!(a["requests_in_window"], 5, "{name}");
            assert_eq!(a["requests_in_window_elsewhere"], 5, "{name}");
            assert_eq!(a["connections_opened_in_window"], 5, "{name}");
            assert!(max < 0.05, "{name}: {w}");
        }
        let mut cmd = crate::support::bin();
        cmd.args(["analyze", "-q"])
            .arg(capture(&format!("{name}.pcap")));
        let table = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
        let line = table
            .lines()
            .find(|l| l.contains("across connections to a server:"))
            .unwrap_or_else(|| panic!("{name}: the table's line across connections"));
        let in_window = if waits { "0 requests" } else { "5 requests" };
        assert!(
            line.contains(&format!("{in_window} sent while a Retry-After ran")),
            "{line}"
        );
    }
}

/// Java's clients with ten threads (HttpURLConnection) and fifty
/// outstanding requests (HttpClient's sendAsync) against nginx's limiter:
/// every request counted on its own connection is counted across them, and
/// most of what they sent in a window went on another connection.
#[test]
fn pooled_clients_send_in_windows_on_other_connections() {
    for name in [
        "java-urlconnection-clear-post-429-10x10",
        "java-async-clear-h1-post-429-100x50",
    ] {
        let v = analyze(name, &[]);
        let r = &v["summary"]["rate_limit"];
        let a = &r["across_connections"];
        assert_eq!(a["requests_not_seen"], 0, "{name}");
        assert!(
            count(&a["requests_in_window"]) >= count(&r["requests_in_window"]),
            "{name}"
        );
        let elsewhere = count(&a["requests_in_window_elsewhere"]);
        assert!(
            2 * elsewhere > count(&a["requests_in_window"]),
            "{name}: {a}"
        );
        // Requests past the list are counted from their own times.
        let short = analyze(name, &["--max-requests-listed", "1"]);
        assert_eq!(
            short["summary"]["rate_limit"]["across_connections"], *a,
            "{name}"
        );
    }
}

/// One connection carrying more requests than the list (httpx over
/// HTTP/2, 250 POSTs, opened with the key log; curl over HTTP/1.1, 200):
/// its requests past the list count across connections as the listed
/// ones do, so the figures are those of the connection itself, whatever
/// the list's length.
#[test]
fn requests_past_the_list_count() {
    for name in ["httpx-h2-post-429-250", "curl-h1-post-429-200"] {
        let keylog = capture(&format!("{name}.keylog"));
        let keylog = keylog.to_str().unwrap();
        let mut seen = Vec::new();
        for listed in ["1", "100", "1000"] {
            let v = analyze(name, &["--keylog", keylog, "--max-requests-listed", listed]);
            let r = v["summary"]["rate_limit"].clone();
            let a = &r["across_connections"];
            assert_eq!(a["requests_not_seen"], 0, "{name} {listed}");
            assert_eq!(
                a["requests_in_window"], r["requests_in_window"],
                "{name} {listed}"
            );
            assert!(count(&a["requests_in_window"]) > 0, "{name} {listed}");
            let (w, same) = (&a["wait_after_429"], &r["wait_after_429"]);
            assert_eq!(
                (&w["count"], &w["min"], &w["max"]),
                (&same["count"], &same["min"], &same["max"])
            );
            seen.push(a.clone());
        }
        assert!(seen.windows(2).all(|p| p[0] == p[1]), "{name}: {seen:?}");
    }
}

/// The time of each connection's SYN, by tshark's `tcp.stream` (the
/// first frame of each connection in these captures).
fn tshark_opened(name: &str) -> Vec<f64> {
    let streams = tshark_streams(&capture(&format!("{name}.pcap"))).expect("tshark runs");
    streams.values().map(|s| s.1.expect("a SYN")).collect()
}

/// `across_connections` as a test works it out: requests in a window, of
/// them elsewhere, connections opened in one, the waits after a 429 and
/// how many of them went on another connection.
#[derive(Debug, Default)]
struct Figures {
    in_window: u64,
    elsewhere: u64,
    opened: u64,
    waits: Vec<f64>,
    other: u64,
}

impl Figures {
    /// The summary's `across_connections` is these, its waits' least and
    /// greatest within `tolerance` seconds.
    fn check(&self, a: &Value, tolerance: f64, ctx: &str) {
        assert_eq!(count(&a["requests_in_window"]), self.in_window, "{ctx}");
        assert_eq!(
            count(&a["requests_in_window_elsewhere"]),
            self.elsewhere,
            "{ctx}"
        );
        assert_eq!(
            count(&a["connections_opened_in_window"]),
            self.opened,
            "{ctx}"
        );
        assert_eq!(count(&a["retried_elsewhere"]), self.other, "{ctx}");
        let w = &a["wait_after_429"];
        assert_eq!(count(&w["count"]), self.waits.len() as u64, "{ctx}");
        let lo = self.waits.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.waits.iter().copied().fold(0.0, f64::max);
        let near = |v: &Value, b: f64| v.as_f64().is_some_and(|v| (v - b).abs() < tolerance);
        let empty = self.waits.is_empty();
        assert!(
            empty || near(&w["min"], lo) && near(&w["max"], hi),
            "{ctx}: {w} vs {lo} {hi}"
        );
    }
}

/// What docs/json.md's `across_connections` says, worked out from tshark's
/// times alone for captures of one client and one server.
fn expected(messages: &[Message], opened: &[f64]) -> Figures {
    // (time, rank, stream, message): at one instant a response's end,
    // then a connection's first frame, then a request.
    let mut marks: Vec<(f64, u8, usize, Option<&Message>)> = Vec::new();
    for m in messages {
        marks.push((m.time, if m.status == 0 { 2 } else { 0 }, m.stream, Some(m)));
    }
    for (stream, &t) in opened.iter().enumerate() {
        marks.push((t, 1, stream, None));
    }
    marks.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut f = Figures::default();
    let mut windows: Vec<(f64, f64, usize)> = Vec::new();
    let mut unfollowed: Option<(f64, usize)> = None;
    for (time, rank, stream, m) in marks {
        let inside = windows
            .iter()
            .any(|&(from, to, _)| from <= time && time < to);
        match (rank, m) {
            (1, _) => f.opened += u64::from(inside),
            (2, _) => {
                if inside {
                    f.in_window += 1;
                    let latest = windows.last().map(|w| w.2);
                    f.elsewhere += u64::from(latest != Some(stream));
                }
                if let Some((t, s)) = unfollowed.take() {
                    f.waits.push(time - t);
                    f.other += u64::from(s != stream);
                }
            }
            (_, Some(m)) => {
                if m.status == 429 {
                    unfollowed = Some((time, stream));
                }
                if let Some(secs) = m.retry_after {
                    windows.push((time, time + f64::from(secs), stream));
                }
            }
            _ => {}
        }
    }
    f
}

/// Cleartext GETs, where tshark puts a request at its one segment and a
/// response at its last (see retry_after.rs): every figure across
/// connections is what tshark's times give.
#[test]
fn the_figures_across_connections_are_what_tsharks_times_give() {
    if !tshark_present() {
        return;
    }
    for name in [
        "http-requests-newconn-retry-now",
        "http-requests-newconn-retry-after",
        "java-urlconnection-noka-retry-now",
        "java-urlconnection-noka-retry-after",
        "http-429-ratelimit",
        "http-requests-retry-now",
        "http-curl-retry-after",
    ] {
        let v = analyze(name, &[]);
        let conns = v["connections"].as_array().unwrap();
        assert!(
            conns.iter().all(|c| c["server"] == conns[0]["server"]),
            "{name}: one server"
        );
        let f = expected(&tshark_http1(name, None), &tshark_opened(name));
        // tshark's times are microseconds printed as decimals.
        f.check(
            &v["summary"]["rate_limit"]["across_connections"],
            2e-6,
            name,
        );
    }
}

/// `timeline --conn` marks a connection's SYN and requests sent inside
/// the Retry-After another connection to the server got: with a new
/// connection per request, the retry and the next GET after each 429 —
/// what `across_connections` counts, connection by connection.
#[test]
fn the_timeline_names_the_connection_whose_retry_after_ran() {
    for (name, expected) in [
        (
            "http-requests-newconn-retry-now",
            // The retry and /api/4 after connection 3's 429, /api/5 (whose
            // 429 came next) still inside it, then connection 6's.
            [(4, 3), (5, 3), (6, 3), (7, 6), (8, 6)].as_slice(),
        ),
        ("http-requests-newconn-retry-after", [].as_slice()),
    ] {
        let file = capture(&format!("{name}.pcap"));
        let mut inside = Vec::new();
        for id in 1..=8u64 {
            let out = crate::support::run([
                "timeline".as_ref(),
                file.as_os_str(),
                "--conn".as_ref(),
                id.to_string().as_ref(),
            ]);
            assert!(out.status.success(), "{name} {id}");
            let text = crate::support::stdout(&out);
            let marked = |what: &str| {
                text.lines()
                    .filter(|l| l.contains(what))
                    .find_map(|l| l.split("the Retry-After connection ").nth(1))
                    .and_then(|rest| rest.split(" got)").next())
                    .map(str::to_owned)
            };
            let (syn, request) = (marked("TCP SYN"), marked("request 1 sent"));
            assert_eq!(syn, request, "{name} {id}:\n{text}");
            if let Some(by) = request {
                inside.push((id, by.parse::<u64>().unwrap()));
            }
        }
        assert_eq!(inside, expected, "{name}");
        let v = analyze(name, &[]);
        let a = &v["summary"]["rate_limit"]["across_connections"];
        assert_eq!(
            count(&a["requests_in_window_elsewhere"]),
            inside.len() as u64,
            "{name}"
        );
    }
}

/// One mark for the batch answer: (nanoseconds, rank, connection, what).
type BatchMark = (i64, u8, u64, Option<(bool, Option<u32>)>);

/// `across_connections` worked out in one batch from the records of a
/// JSON Lines run, by docs/json.md's definitions: every mark of every
/// connection to a server sorted at once, no horizon, no heap — (in a
/// window, of them elsewhere, opened in one, waits, retried elsewhere).
fn batch(records: &[Value], read: fn(&Value) -> bool) -> Figures {
    let ns = |v: &Value| (v.as_f64().expect("a time") * 1e9).round() as i64;
    let mut by_server: BTreeMap<(String, String, String), Vec<BatchMark>> = BTreeMap::new();
    for r in records {
        let client = r["client"].as_str().unwrap();
        let client = client
            .rsplit_once(':')
            .map_or(client, |(a, _)| a)
            .to_owned();
        let key = (
            client,
            r["server"].as_str().unwrap().to_owned(),
            r["overlay"].to_string(),
        );
        let marks = by_server.entry(key).or_default();
        let id = count(&r["id"]);
        marks.push((ns(&r["start"]["at"]), 1, id, None));
        let http = &r["http"];
        if !read(http) {
            continue;
        }
        for q in http["list"].as_array().unwrap() {
            marks.push((ns(&q["start"]["at"]), 2, id, None));
            let too_many = q["status"] == 429;
            let retry_after = q["retry_after"].as_u64().map(|s| s as u32);
            if too_many || retry_after.is_some() {
                if let Some(end) = q["response_last"].get("at") {
                    marks.push((ns(end), 0, id, Some((too_many, retry_after))));
                }
            }
        }
    }
    let mut f = Figures::default();
    for marks in by_server.values_mut() {
        marks.sort_by_key(|m| (m.0, m.1, m.2));
        // Windows as given, not joined: inside any is inside their union.
        let mut windows: Vec<(i64, i64, u64)> = Vec::new();
        let mut unfollowed: Option<(i64, u64)> = None;
        for &(at, rank, conn, ended) in marks.iter() {
            let inside = windows
                .iter()
                .any(|&(from, until, _)| from <= at && at < until);
            match (rank, ended) {
                (0, Some((too_many, retry_after))) => {
                    if too_many {
                        unfollowed = Some((at, conn));
                    }
                    if let Some(secs) = retry_after {
                        windows.push((at, at + i64::from(secs) * 1_000_000_000, conn));
                    }
                }
                (1, _) => f.opened += u64::from(inside),
                _ => {
                    if inside {
                        f.in_window += 1;
                        f.elsewhere += u64::from(windows.last().map(|w| w.2) != Some(conn));
                    }
                    if let Some((t, c)) = unfollowed.take() {
                        f.waits.push((at - t) as f64 / 1e9);
                        f.other += u64::from(c != conn);
                    }
                }
            }
        }
    }
    f
}

/// HTTP read from messages on a TCP connection (`http.method`).
fn tcp_read(http: &Value) -> bool {
    ["http1", "h2c", "tls-http1", "tls-h2"].contains(&http["method"].as_str().unwrap_or(""))
}

/// HTTP/3 on a QUIC connection the key log opened.
fn quic_read(http: &Value) -> bool {
    ["complete", "partial"].contains(&http["decryption"].as_str().unwrap_or(""))
}

/// aioquic's client, four QUIC connections one after another, each ending
/// on a POST the server answers 429 with `Retry-After: 1`, the next opened
/// about 0.1 s later: nothing on any one connection follows a 429, and
/// across them every request of the last three came inside one — as the
/// server's log has it, and as the batch over the records gives.
#[test]
fn http3_connections_opened_inside_a_retry_after() {
    let name = "quic-aioquic-h3-post-429-4conn";
    let keylog = capture(&format!("{name}.keylog"));
    let v = analyze(name, &["--keylog", keylog.to_str().unwrap()]);
    let quic = &v["summary"]["quic"];
    let r = &quic["rate_limit"];
    assert_eq!(
        (count(&r["responses_429"]), count(&r["connections_limited"])),
        (4, 4)
    );
    assert_eq!(r["requests_in_window"], 0);
    // The server's log: time, client, stream, method, path, status.
    let log = std::fs::read_to_string(capture(&format!("{name}.server.log"))).unwrap();
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    let time = |l: &[&str]| l[0].parse::<f64>().unwrap();
    let limited: Vec<(f64, &str)> = lines
        .iter()
        .filter(|l| l[5] == "429")
        .map(|l| (time(l), l[1]))
        .collect();
    let inside = |l: &[&str]| {
        let t = time(l);
        limited
            .iter()
            .any(|&(at, client)| client != l[1] && at <= t && t < at + 1.0)
    };
    let in_window = lines.iter().filter(|l| inside(l)).count() as u64;
    let firsts: Vec<&Vec<&str>> = lines.iter().filter(|l| l[2] == "stream=0").collect();
    let opened = firsts.iter().filter(|l| inside(l)).count() as u64;
    assert_eq!((in_window, opened), (9, 3), "the log");
    let a = &r["across_connections"];
    assert_eq!(count(&a["requests_in_window"]), in_window);
    assert_eq!(count(&a["requests_in_window_elsewhere"]), in_window);
    assert_eq!(count(&a["connections_opened_in_window"]), opened);
    assert_eq!(count(&a["retried_elsewhere"]), 3);
    let records = quic["list"].as_array().unwrap();
    batch(records, quic_read).check(a, 1e-9, name);
}

/// A synthetic rate-limited API at scale (10 000 short connections, 2 000
/// open at once, 429s with Retry-After from 1 to 30 s, many clients and
/// servers): the streaming sweep, on one thread and on two, gives what
/// the batch over every record gives.
#[test]
fn the_streaming_sweep_is_the_batch_answer_at_scale() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("api.pcap");
    let args = "--mix short --connections 10000 --concurrency 2000 --seed 5 --quiet";
    crate::support::synth(&file, &args.split(' ').collect::<Vec<_>>());
    let mut summaries = Vec::new();
    for threads in ["1", "2"] {
        let out = crate::support::run([
            "analyze".as_ref(),
            "-q".as_ref(),
            "-T".as_ref(),
            "jsonl".as_ref(),
            "--max-requests-listed".as_ref(),
            "1000".as_ref(),
            "--threads".as_ref(),
            threads.as_ref(),
            file.as_os_str(),
        ]);
        assert!(out.status.success());
        let lines: Vec<Value> = crate::support::stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        let (summary, records) = lines.split_last().unwrap();
        let a = summary["summary"]["rate_limit"]["across_connections"].clone();
        assert_eq!(a["out_of_order"], 0);
        assert_eq!(a["requests_not_seen"], 0);
        let f = batch(records, tcp_read);
        assert!(
            f.in_window > 1_000 && f.opened > 1_000 && f.waits.len() > 100,
            "{a}"
        );
        f.check(&a, 1e-9, &format!("-j {threads}"));
        summaries.push(a);
    }
    assert_eq!(summaries[0], summaries[1], "one thread and two");
}
