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

/// `summary.redialed` on real captures, against the records read
/// independently: each connection counted came at most 5 s after the
/// client closed another to the same server that it could have kept —
/// its FIN or RST first, every request answered, handshakes complete, no
/// `Connection: close` seen — each such close taken by one connection at
/// most, and none counted that counts as opened while another sat idle.
/// Go's default pool: 11 (all dialed for nothing); the control none; curl
/// run once per request 4 of 5; python's `requests.get` leaves its
/// connections idle (counted there, not here); HttpURLConnection with
/// keep-alive off over TLS, 5 of 100 (the server closed 93 first).
#[test]
fn connections_opened_after_a_close_the_client_could_have_spared() {
    for (name, expected) in [
        ("go-default-pool-10x10", 11),
        ("go-pool-idle10-10x10", 0),
        ("http-curl-5-new-connections", 4),
        ("http-python-requests-nosession", 0),
        ("java-urlconnection-keepalive-off-10x10", 5),
        ("okhttp-post-429-10x10", 0),
    ] {
        let (summary, recs) = crate::tools::analyze_path(&capture(&format!("{name}.pcap")));
        let spared = |r: &handshakes::record::ConnectionRecord| {
            let answered = r.http.list.iter().all(|q| q.response_last.is_some());
            matches!(r.close.kind, CloseKind::Fin | CloseKind::Rst)
                && r.close.by == Some(Side::Client)
                && r.close.requests_after == 0
                && !r.http.connection_close
                && answered
                && r.tls.as_ref().is_none_or(|t| t.handshake.is_some())
        };
        let by_id = |id: u64| recs.iter().find(|r| r.id == id).expect("listed");
        let idle: Vec<u64> = summary.passed_over().iter().map(|p| p.connection).collect();
        let got = summary.redialed.as_ref().expect("looked at");
        assert_eq!(got.connections, expected, "{name}");
        assert_eq!(got.first.len() as u64, got.connections, "{name}");
        let mut taken = std::collections::BTreeSet::new();
        for f in &got.first {
            let (r, closed) = (by_id(f.connection), by_id(f.closed_connection));
            assert!(!idle.contains(&r.id), "{name}: {f:?}");
            assert!(spared(closed), "{name}: {f:?}");
            assert!(taken.insert(closed.id), "{name}: {f:?} taken twice");
            let syn = r.tcp.handshake.syn.expect("a SYN").at;
            let close = closed.close.time.expect("closed").at;
            assert_eq!(r.server, closed.server, "{name}");
            assert!(close <= syn && syn - close <= 5.0, "{name}: {f:?}");
            assert!(
                (f.after_close - (syn - close)).abs() < 1e-6,
                "{name}: {f:?}"
            );
            assert_eq!(f.carried_none, r.http.requests == 0, "{name}: {f:?}");
        }
        let none = got.first.iter().filter(|f| f.carried_none).count() as u64;
        assert_eq!(got.carried_none, none, "{name}");
        // Where none counted, no close of that kind came before a SYN
        // in the window.
        if expected == 0 {
            let closes: Vec<f64> = recs
                .iter()
                .filter(|r| spared(r))
                .filter_map(|r| Some(r.close.time?.at))
                .collect();
            let any = recs.iter().filter(|r| !idle.contains(&r.id)).any(|r| {
                let syn = r.tcp.handshake.syn.map_or(f64::MIN, |s| s.at);
                closes.iter().any(|&c| c <= syn && syn - c <= 5.0)
            });
            assert!(!any, "{name}");
        }
    }
}
