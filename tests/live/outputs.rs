//! Live capture's outputs for people and spreadsheets, on real loopback
//! traffic (two curls): `-T table` (a header, a row per connection as it
//! finishes, the summary) and `-T csv` (the rows `analyze` gives for the
//! `-w` file, each printed as its connection finishes).

use super::traffic::{idle_and_closed, Finished, Live};
use super::*;

/// A 4 s capture in `format` of two curls, one request each; it exited
/// cleanly.
fn two_curls_in_4s(format: &str) -> (Server, Finished) {
    let server = Server::start();
    let live = Live::start(server.port, &["-T", format, "--duration", "4s"]);
    server.curl(1);
    server.curl(1);
    settle(server.port);
    let done = live.finish(Duration::from_secs(15));
    done.assert_clean_exit();
    (server, done)
}

/// `-T table`: a header line, one row per connection as it finishes, a
/// blank line, then the summary block with the verdict and kernel counters.
#[test]
fn live_table_prints_header_rows_and_summary() {
    if !can_capture("live_table_prints_header_rows_and_summary") {
        return;
    }
    let (server, done) = two_curls_in_4s("table");
    let lines = &done.stdout;
    let text = lines.join("\n");
    assert!(lines.len() > 5, "{text}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["id", "client", "server", "connect", "TLS", "TLS", "hs", "reqs", "up", "down", "close"],
        "{text}"
    );
    for (i, row) in lines[1..3].iter().enumerate() {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], (i + 1).to_string(), "{text}");
        assert!(cells[1].starts_with("127.0.0.1:"), "{text}");
        assert_eq!(cells[2], server.addr(), "{text}");
        assert_eq!(cells[6], "1", "requests: {text}");
        assert!(row.ends_with("FIN by client"), "{text}");
    }
    assert_eq!(lines[3], "", "a blank line after the rows: {text}");
    assert!(
        lines[4].starts_with("verdict") && lines[4].contains("2 requests used 2 connections"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("capture") && l.contains("lo (live)")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("connections")
            && l.contains("2  (TCP handshakes complete: 2, without a captured SYN: 0)")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("kernel") && l.contains(" 0 dropped,")),
        "{text}"
    );
    let (offline, _) = analyze_path(&done.pcap);
    assert_eq!((offline.connections, offline.requests), (2, 2));
}

/// `-T csv`: the header of `analyze -T csv`, then one row per connection as
/// it finishes — the same rows, but for the `file` column (the interface),
/// as `analyze -T csv` gives on the `-w` file.
#[test]
fn live_csv_prints_the_rows_analyze_gives_for_the_write_file() {
    if !can_capture("live_csv_prints_the_rows_analyze_gives_for_the_write_file") {
        return;
    }
    let (server, done) = two_curls_in_4s("csv");
    let rows = |text: &str| -> (Vec<String>, Vec<Vec<String>>) {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header = reader
            .headers()
            .expect("a header")
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows: Vec<Vec<String>> = reader
            .records()
            .map(|r| r.expect("a CSV row").iter().map(str::to_string).collect())
            .collect();
        rows.sort_by_key(|r| r.get(1).and_then(|id| id.parse::<u64>().ok()));
        (header, rows)
    };
    let (header, live_rows) = rows(&done.stdout.join("\n"));
    assert_eq!(header, handshakes::report::csv::COLUMNS);
    assert_eq!(live_rows.len(), 2, "{:?}", done.stdout);
    let col = |name: &str| header.iter().position(|c| c == name).expect(name);
    for row in &live_rows {
        assert_eq!(row[col("file")], "lo");
        assert_eq!(row[col("server")], server.addr());
        assert_eq!(row[col("http_method")], "http1");
        assert_eq!(row[col("http_requests")], "1");
        assert_eq!(row[col("close_kind")], "fin");
        assert_eq!(row[col("tls_version")], "", "plain HTTP");
    }
    let offline = support::run_analyze(&["-T", "csv", "-j", "1"], &[&done.pcap]);
    assert!(offline.status.success());
    let (_, offline_rows) = rows(&support::stdout(&offline));
    let without_file = |rows: &[Vec<String>]| -> Vec<Vec<String>> {
        rows.iter().map(|r| r[1..].to_vec()).collect()
    };
    assert_eq!(without_file(&live_rows), without_file(&offline_rows));
}

/// `-T csv` rows come out as connections finish, not when the capture
/// stops: the header and the rows of an idle and a closed connection are
/// printed while it still runs, and nothing after them.
#[test]
fn live_csv_prints_each_row_as_its_connection_finishes() {
    if !can_capture("live_csv_prints_each_row_as_its_connection_finishes") {
        return;
    }
    let (_server, mut live, _open) = idle_and_closed("csv");
    // The header and two rows.
    let early = live.lines_within(3, Duration::from_secs(20));
    assert!(live.proc.exited().is_none(), "still capturing: {early:?}");
    live.proc.signal("INT");
    let done = live.finish(SIGNAL_LIMIT);
    done.assert_clean_exit();
    assert_eq!(done.stdout, Vec::<String>::new(), "nothing after the rows");
    let text = early.join("\n");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let close = reader
        .headers()
        .expect("a header")
        .iter()
        .position(|c| c == "close_kind")
        .expect("close_kind");
    let mut kinds: Vec<String> = reader
        .records()
        .map(|r| r.expect("a row")[close].to_string())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["fin", "idle"]);
}
