//! The CSV report, through the binary, against JSON Lines: every cell of
//! every row agrees with the JSON field it flattens, for every connection
//! (TCP and QUIC, in the order JSON Lines gives them) of every capture in captures/
//! and the peer corpus; the rows stream as connections finish (the same
//! order as JSON Lines); and docs/json.md lists the columns, in order.
//!
//! Does not check what the JSON says (the other tests do); only that CSV
//! says the same.

use std::collections::BTreeSet;
use std::ffi::OsStr;

use handshakes::report::csv::COLUMNS;
use serde_json::Value;

use crate::support::{run, stdout};
use crate::tools::all_captures;

/// Where a column's value sits in a TCP connection's JSON object; `None`
/// for a column that is QUIC's alone (its cell is empty).
fn pointer(column: &str) -> Option<&'static str> {
    Some(match column {
        "id" => "/id",
        "client" => "/client",
        "server" => "/server",
        "client_by" => "/client_by",
        "partial" => "/partial",
        "start_ts" => "/start/ts",
        "start_at" => "/start/at",
        "end_ts" => "/end/ts",
        "duration" => "/duration",
        "syn_ts" => "/tcp/handshake/syn/ts",
        "synack_ts" => "/tcp/handshake/synack/ts",
        "ack_ts" => "/tcp/handshake/ack/ts",
        "syn_to_synack" => "/tcp/handshake/syn_to_synack",
        "synack_to_ack" => "/tcp/handshake/synack_to_ack",
        "connect" => "/tcp/handshake/connect",
        "syn_retransmissions" => "/tcp/handshake/syn_retransmissions",
        "handshake_complete" => "/tcp/handshake/complete",
        "packets_client" => "/tcp/packets/client",
        "packets_server" => "/tcp/packets/server",
        "bytes_client" => "/tcp/bytes/client",
        "bytes_server" => "/tcp/bytes/server",
        "retransmissions_client" => "/tcp/retransmissions/client",
        "retransmissions_server" => "/tcp/retransmissions/server",
        "state" => "/tcp/state",
        "history" => "/tcp/history",
        "close_kind" => "/close/kind",
        "close_by" => "/close/by",
        "close_ts" => "/close/time/ts",
        "anomalies" => "/anomalies",
        "overlay_kind" => "/overlay/kind",
        "overlay_id" => "/overlay/id",
        "tls_version" => "/tls/version",
        "tls_offered_version" => "/tls/offered_version",
        "tls_cipher" => "/tls/cipher",
        "tls_sni" => "/tls/sni",
        "tls_alpn" => "/tls/alpn",
        "tls_alpn_offered" => "/tls/alpn_offered",
        "tls_resumed" => "/tls/resumed",
        "tls_resumption" => "/tls/resumption",
        "tls_resumption_offered" => "/tls/resumption_offered",
        "tls_session_issued" => "/tls/session_issued",
        "http_host" => "/http/host",
        "tls_hello_retry" => "/tls/hello_retry",
        "tls_early_data_offered" => "/tls/early_data/offered",
        "tls_client_certificate_requested" => "/tls/client_certificate_requested",
        "tls_outcome" => "/tls/outcome",
        "tls_alert_side" => "/tls/alert/side",
        "tls_alert_level" => "/tls/alert/level",
        "tls_alert_description" => "/tls/alert/description",
        "tls_client_hello_ts" => "/tls/client_hello/ts",
        "tls_hello_to_hello" => "/tls/hello_to_hello",
        "tls_handshake" => "/tls/handshake",
        "tls_syn_to_app_data" => "/tls/syn_to_app_data",
        "tls_ja4" => "/tls/ja4",
        "tls_ja3" => "/tls/ja3",
        "tls_ja3s" => "/tls/ja3s",
        "tls_gap_bytes" => "/tls/gap_bytes",
        "http_method" => "/http/method",
        "http_requests" => "/http/requests",
        "http_responses" => "/http/responses",
        "http_estimated" => "/http/estimated",
        "http_confidence" => "/http/confidence",
        "http_lost_sync" => "/http/lost_sync",
        "http_connection_close" => "/http/connection_close",
        "http_upgrade" => "/http/upgrade",
        "http_resets" => "/http/resets",
        "http_goaway" => "/http/goaway",
        "http2_max_concurrent_streams" => "/http/http2/max_concurrent_streams",
        "http2_peak_streams" => "/http/http2/peak_streams",
        "http2_at_limit" => "/http/http2/at_limit",
        "http2_at_limit_seconds" => "/http/http2/at_limit_seconds",
        "http2_goaway_from" => "/http/http2/goaway/from",
        "http2_goaway_error" => "/http/http2/goaway/error",
        "http2_refused" => "/http/http2/refused",
        "tls_decryption" => "/tls/decryption/outcome",
        "tls_records_opened" => "/tls/decryption/records_opened",
        "tls_records_failed" => "/tls/decryption/records_failed",
        "tls_alpn_by_size" => "/tls/alpn_by_size",
        "http_status_codes" => "/http/status_codes",
        "tls_cert_chain" => "/tls/certificate/chain",
        "tls_cert_bytes" => "/tls/certificate/bytes",
        "tls_cert_subject" => "/tls/certificate/subject",
        "tls_cert_issuer" => "/tls/certificate/issuer",
        "tls_cert_not_after" => "/tls/certificate/not_after",
        "tls_early_data_accepted" => "/tls/early_data/accepted",
        "http_rate_limit_responses_429" => "/http/rate_limit/responses_429",
        "http_rate_limit_retry_after" => "/http/rate_limit/retry_after",
        "http_rate_limit_requests_in_window" => "/http/rate_limit/requests_in_window",
        "http_rate_limit_wait_after_429_median" => "/http/rate_limit/wait_after_429/median",
        "http_rate_limit_ended_on_429" => "/http/rate_limit/ended_on_429",
        "close_idle" => "/close/idle",
        "close_requests_after" => "/close/requests_after",
        "quic_version"
        | "quic_retry"
        | "quic_idle_timeout"
        | "quic_server_idle_timeout"
        | "close_error"
        | "close_reason" => return None,
        other => panic!("column {other} has no JSON field in this test: add it"),
    })
}

/// Where a column's value sits in a QUIC connection's JSON object
/// (`summary.quic.list[]`); `None` for a column QUIC has no field for
/// (its cell is empty).
fn quic_pointer(column: &str) -> Option<&'static str> {
    Some(match column {
        "id"
        | "client"
        | "server"
        | "start_ts"
        | "start_at"
        | "end_ts"
        | "duration"
        | "close_kind"
        | "close_by"
        | "close_ts"
        | "overlay_kind"
        | "overlay_id"
        | "tls_version"
        | "tls_cipher"
        | "tls_sni"
        | "tls_alpn"
        | "tls_alpn_offered"
        | "tls_resumed"
        | "tls_client_hello_ts"
        | "tls_hello_to_hello"
        | "tls_ja4"
        | "http_requests"
        | "http_responses"
        | "http_status_codes"
        | "tls_cert_chain"
        | "tls_cert_bytes"
        | "tls_cert_subject"
        | "tls_cert_issuer"
        | "tls_cert_not_after" => pointer(column)?,
        "tls_early_data_accepted" => "/tls/early_data_accepted",
        "packets_client" => "/datagrams/client",
        "packets_server" => "/datagrams/server",
        "bytes_client" => "/bytes/client",
        "bytes_server" => "/bytes/server",
        "close_error" => "/close/error_code",
        "close_reason" => "/close/reason",
        "tls_early_data_offered" => "/tls/early_data_offered",
        "tls_handshake" => "/handshake/duration",
        "tls_decryption" => "/http/decryption",
        "tls_records_opened" => "/http/packets_opened",
        "tls_records_failed" => "/http/packets_failed",
        "quic_version" => "/version",
        "quic_retry" => "/handshake/retry",
        "quic_idle_timeout" => "/handshake/idle_timeout",
        "quic_server_idle_timeout" => "/handshake/server_idle_timeout",
        "state" => "/ended",
        _ if column.starts_with("http_rate_limit_") => pointer(column)?,
        _ => return None,
    })
}

/// Whether CSV cell `cell` says what JSON value `json` says: null or
/// missing is an empty cell, numbers are equal as numbers, lists are
/// joined by `;`, the anomalies and status codes are `key=count` pairs.
fn agrees(column: &str, cell: &str, json: Option<&Value>) -> bool {
    match json {
        None | Some(Value::Null) => cell.is_empty(),
        Some(Value::String(s)) => cell == s,
        Some(Value::Bool(b)) => cell == b.to_string(),
        // Read as the JSON was (serde_json's float parsing is not always
        // the nearest float, so `str::parse` could differ on equal text).
        Some(Value::Number(n)) => {
            serde_json::from_str::<Value>(cell)
                .ok()
                .and_then(|v| v.as_f64())
                == n.as_f64()
        }
        Some(Value::Array(items)) => {
            let texts: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            texts.len() == items.len() && cell == texts.join(";")
        }
        Some(Value::Object(pairs))
            if matches!(
                column,
                "anomalies" | "http_status_codes" | "http_rate_limit_retry_after"
            ) =>
        {
            let want: BTreeSet<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let got: BTreeSet<String> = cell
                .split(';')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            got == want
        }
        Some(Value::Object(_)) => false,
    }
}

fn analyze(format: &str, path: &std::path::Path) -> String {
    let args = [
        OsStr::new("analyze"),
        OsStr::new("-q"),
        OsStr::new("-j"),
        OsStr::new("1"),
        OsStr::new("-T"),
        OsStr::new(format),
        path.as_os_str(),
    ];
    let out = run(args);
    assert!(out.status.success(), "{format} on {}", path.display());
    stdout(&out)
}

/// Checks every cell of `row` against `rec`, a connection's JSON object,
/// with `pointer` saying where each column's value sits, and `transport`.
fn check_row(
    name: &str,
    file: &str,
    row: &csv::StringRecord,
    rec: &Value,
    transport: &str,
    pointer: fn(&str) -> Option<&'static str>,
) {
    assert_eq!(row.len(), COLUMNS.len(), "{name}: row width");
    for (column, cell) in COLUMNS.iter().zip(row.iter()) {
        match *column {
            "file" => assert_eq!(cell, file, "{name}: file"),
            "transport" => assert_eq!(cell, transport, "{name}: transport"),
            _ => {
                let json = pointer(column).and_then(|p| rec.pointer(p));
                assert!(
                    agrees(column, cell, json),
                    "{name}, {transport} connection {}: {column} is {cell:?} in CSV, {json:?} in JSON",
                    rec["id"]
                );
            }
        }
    }
}

#[test]
fn every_csv_cell_says_what_json_lines_say() {
    let mut rows_checked = 0;
    let mut tls_rows = 0;
    let mut quic_rows = 0;
    let mut quic_requests = 0;
    for (name, path) in all_captures() {
        let jsonl = analyze("jsonl", &path);
        let (summaries, records): (Vec<Value>, Vec<Value>) = jsonl
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .partition(|v: &Value| v.get("summary").is_some());
        // A QUIC line holds the record the summary lists.
        let listed: Vec<Value> = summaries
            .iter()
            .filter_map(|s| s.pointer("/summary/quic/list")?.as_array().cloned())
            .flatten()
            .collect();
        let lines: Vec<&Value> = records.iter().filter_map(|r| r.get("quic")).collect();
        assert_eq!(
            lines,
            listed.iter().collect::<Vec<_>>(),
            "{name}: QUIC lines"
        );
        let csv = analyze("csv", &path);
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let header: Vec<String> = reader
            .headers()
            .expect("a header")
            .iter()
            .map(str::to_string)
            .collect();
        assert_eq!(header, COLUMNS, "{name}: header");
        let rows: Vec<csv::StringRecord> =
            reader.records().map(|r| r.expect("a CSV row")).collect();
        assert_eq!(
            rows.len(),
            records.len(),
            "{name}: one row per connection, TCP and QUIC"
        );
        let file = path.to_string_lossy();
        // In the same order as JSON Lines: as connections end.
        for (row, rec) in rows.iter().zip(&records) {
            if let Some(rec) = rec.get("quic") {
                check_row(&name, &file, row, rec, "quic", quic_pointer);
                quic_rows += 1;
                quic_requests += rec
                    .pointer("/http/requests")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            } else {
                check_row(&name, &file, row, rec, "tcp", pointer);
                rows_checked += 1;
                tls_rows += usize::from(!rec["tls"].is_null());
            }
        }
    }
    // The captures hold TLS and cleartext connections alike, and QUIC ones
    // (without and with a key log).
    assert!(
        rows_checked > 400 && tls_rows > 100,
        "{rows_checked} rows, {tls_rows} TLS"
    );
    assert!(
        quic_rows > 20 && quic_requests > 0,
        "{quic_rows} QUIC rows, {quic_requests} requests"
    );
}

#[test]
fn docs_list_the_csv_columns_in_order() {
    let doc = include_str!("../docs/json.md");
    let section = doc
        .split("## CSV columns")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a CSV columns section in docs/json.md");
    let listed = section
        .split('`')
        .nth(1)
        .expect("the column list in backquotes");
    let listed: Vec<&str> = listed.split(',').map(str::trim).collect();
    assert_eq!(listed, COLUMNS);
}
