//! Go's `net/http` idle pool (scripts/record-go-captures.sh;
//! captures/README.md, bq and br): ten goroutines on one client whose
//! Transport keeps 2 idle connections per host (the default) or 10. Each
//! connection's requests are nginx's (with the key log); the connections
//! Go dialed and never used are counted apart, and the headline, the
//! HTML card and `compare` give the handshakes per request counting them
//! too — what the client paid in all.

use std::collections::BTreeMap;

use handshakes::record::{CloseKind, Side};

use crate::h2_sizes::{capture, client_port, nginx_requests, records};
use crate::support::{bin, stderr, stdout};

const CAPTURES: [&str; 2] = ["go-default-pool-10x10", "go-pool-idle10-10x10"];

/// Every connection's requests as nginx logged them, read from the
/// records with the key log; those nginx never saw carried none; and the
/// client closed every one.
#[test]
fn each_connection_carries_what_nginx_logged() {
    for name in CAPTURES {
        let recs = records(&format!("{name}.pcap"), Some(&format!("{name}.keylog")));
        let log = nginx_requests(&format!("{name}.nginx-access.log"));
        let used: BTreeMap<u16, u64> = recs
            .iter()
            .filter(|r| r.http.requests > 0)
            .map(|r| (client_port(r), r.http.requests))
            .collect();
        assert_eq!(used, log, "{name}");
        assert!(recs.iter().all(|r| !r.http.estimated), "{name}");
        for r in &recs {
            let closed = (r.close.kind, r.close.by);
            let by_client = matches!(
                closed,
                (CloseKind::Fin | CloseKind::Rst, Some(Side::Client))
            );
            assert!(by_client, "{name} #{}: {closed:?}", r.id);
        }
    }
}

/// The default pool dials more connections than it uses, and more than
/// the control: the table's headline and `compare` count them.
#[test]
fn handshakes_per_request_count_the_connections_dialed_for_nothing() {
    let mut all = Vec::new();
    for name in CAPTURES {
        let log = nginx_requests(&format!("{name}.nginx-access.log"));
        let out = bin()
            .args(["analyze", "-q", "-T", "json", "--keylog"])
            .arg(capture(&format!("{name}.keylog")))
            .arg(capture(&format!("{name}.pcap")))
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        let s = &doc["summary"];
        let conns = s["connections"].as_u64().expect("connections");
        let unused = s["connections_unused"].as_u64().expect("unused");
        assert_eq!(conns - unused, log.len() as u64, "{name}");
        assert_eq!(s["requests"].as_u64(), Some(100), "{name}");
        assert_eq!(s["tcp_handshakes"].as_u64(), Some(conns), "{name}");
        let per = s["handshakes_per_request"]["tcp"].as_f64().expect("tcp");
        assert!(
            (per - log.len() as f64 / 100.0).abs() < 1e-9,
            "{name}: {per}"
        );
        let every = conns as f64 / 100.0;
        let table = bin()
            .args(["analyze", "-q", "--keylog"])
            .arg(capture(&format!("{name}.keylog")))
            .arg(capture(&format!("{name}.pcap")))
            .output()
            .expect("runs");
        let text = stdout(&table);
        let line = format!(
            "· with the {unused} connections that carried none: TCP {every:.2}, TLS full {every:.2}\n"
        );
        assert!(text.contains(&line), "{name}: {line}\n{text}");
        let used = log.len() as f64;
        let requests = format!(
            "— {:.2} per connection, {:.2} per one that carried any (max {})",
            100.0 / conns as f64,
            100.0 / used,
            log.values().max().expect("requests")
        );
        assert!(text.contains(&requests), "{name}: {requests}\n{text}");
        // The HTML report's cards say the same.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let html = dir.path().join("report.html");
        let out = bin()
            .args(["analyze", "-q", "--html"])
            .arg(&html)
            .arg(capture(&format!("{name}.pcap")))
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", stderr(&out));
        let page = std::fs::read_to_string(&html).expect("the report");
        for card in [
            format!("1.00: no reuse · {every:.2} with the {unused} that carried none"),
            format!("· {:.2} per one that carried any", 100.0 / used),
        ] {
            assert!(page.contains(&card), "{name}: {card}");
        }
        all.push((conns, unused, every));
    }
    // Go's default pool dialed more, and more for nothing, than the
    // control (their counts vary from run to run; these two runs, 54 and
    // 28 connections, 30 and 11 unused).
    let (a, b) = (all[0], all[1]);
    assert!(a.0 > b.0 && a.1 > b.1, "{all:?}");

    let out = bin()
        .args(["compare", "-q", "-T", "json"])
        .args(CAPTURES.map(|n| capture(&format!("{n}.pcap"))))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let m = &doc["metrics"]["tcp_handshakes_per_request_all"];
    assert_eq!((m["a"].as_f64(), m["b"].as_f64()), (Some(a.2), Some(b.2)));
    let verdict = doc["verdict"].as_str().expect("verdict");
    let clause = format!(
        "; counting the connections that carried no request, {:.0}% fewer TCP handshakes per request ({:.2} vs {:.2});",
        (1.0 - b.2 / a.2) * 100.0,
        b.2,
        a.2
    );
    assert!(verdict.contains(&clause), "{clause}\n{verdict}");
}
