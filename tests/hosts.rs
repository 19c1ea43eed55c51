//! `http.host` and the servers it names in cleartext: on real captures of
//! clients talking to two virtual hosts at one address
//! (scripts/record-host-captures.sh; captures/README.md, bn to bp), the
//! servers are nginx's — the host each connection's requests named, as
//! its access log says — and a client that pools by host name (curl) is
//! not taken as passing over an idle connection to the other host. That
//! `http.host` is tshark's `http.host` (or `http2.headers.authority`) on
//! every capture is tests/tshark.rs's.

use std::collections::BTreeMap;

use crate::h2_sizes::capture;
use crate::tools::analyze_path;

/// nginx's log of a run: per `conn=`, the hosts its requests named.
fn nginx_hosts(log: &str) -> BTreeMap<u64, Vec<String>> {
    let text = std::fs::read_to_string(capture(log)).expect("the log");
    let mut conns: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let field = |name: &str| {
            let value = line.split(' ').find_map(|w| w.strip_prefix(name));
            value
                .unwrap_or_else(|| panic!("{name} in {line}"))
                .to_owned()
        };
        let conn = field("conn=").parse().expect("conn=");
        conns.entry(conn).or_default().push(field("host="));
    }
    conns
}

/// Each capture: its servers' names and requests, as the summary has them
/// and as nginx's log has them (a connection's first request's host).
#[test]
fn virtual_hosts_are_servers_as_nginx_served_them() {
    for (name, hosts, servers) in [
        (
            "http-curl-two-hosts-4",
            2,
            vec![("a.test", 2), ("b.test", 2)],
        ),
        ("http-java-two-hosts-6", 1, vec![("a.test", 6)]),
        ("http-curl-one-host-header-4", 1, vec![("a.test", 4)]),
    ] {
        let (summary, records) = analyze_path(&capture(&format!("{name}.pcap")));
        let log = nginx_hosts(&format!("{name}.nginx-access.log"));
        assert_eq!(records.len(), log.len(), "{name}: connections");
        let firsts: Vec<&str> = log.values().map(|h| h[0].as_str()).collect();
        let ours: Vec<String> = records
            .iter()
            .map(|r| {
                let host = r.http.host.as_deref().expect("a host");
                host.split(':').next().unwrap_or(host).to_owned()
            })
            .collect();
        assert_eq!(ours, firsts, "{name}: first hosts");
        let got: Vec<(&str, u64)> = summary
            .servers
            .iter()
            .map(|s| (s.host.as_deref().expect("named"), s.requests))
            .collect();
        assert_eq!(got, servers, "{name}");
        assert_eq!(summary.servers.len(), hosts, "{name}");
        assert!(summary.servers.iter().all(|s| s.sni.is_none()));
        // Never a connection opened while another to the same server sat
        // idle: curl opened b.test's while a.test's sat idle, another host.
        let idle = summary
            .opened_while_idle
            .as_ref()
            .map_or(0, |o| o.connections);
        assert_eq!(idle, 0, "{name}");
    }
}

/// The curl capture's two servers in the table, by name; the host as sent
/// (with its port) in the JSON and CSV, from the same record, and in the
/// connection table's SNI/Host column.
#[test]
fn the_servers_block_names_the_hosts() {
    let (summary, records) = analyze_path(&capture("http-curl-two-hosts-4.pcap"));
    let mut out = Vec::new();
    let opts = handshakes::report::Opts {
        limit: 0,
        fit_terminal: false,
        width: None,
    };
    handshakes::report::table::write(&summary, &records, &mut out, &opts).expect("written");
    let text = String::from_utf8(out).expect("utf-8");
    let column = |line: &str| {
        let cells: Vec<&str> = line.trim_matches('│').split('┆').map(str::trim).collect();
        cells.get(7).map(|c| c.to_string())
    };
    let rows = text.lines().filter(|l| l.starts_with('│'));
    let names: Vec<String> = rows.filter_map(column).collect();
    assert_eq!(
        names,
        ["SNI/Host", "a.test:18496", "b.test:18496"],
        "{text}"
    );
    for host in ["a.test", "b.test"] {
        assert!(
            text.contains(&format!("127.0.0.1:18496 ({host})")),
            "{text}"
        );
    }
    assert!(!text.contains("\nmissed reuse"), "{text}");
    let hosts: Vec<_> = records.iter().map(|r| r.http.host.as_deref()).collect();
    assert_eq!(hosts, [Some("a.test:18496"), Some("b.test:18496")]);
}

/// `compare` matches cleartext servers by host and port: curl's two hosts
/// against the one connection that named `a.test` first.
#[test]
fn compare_matches_servers_by_host() {
    let two = capture("http-curl-two-hosts-4.pcap");
    let one = capture("http-curl-one-host-header-4.pcap");
    let out = crate::support::bin()
        .args(["compare", "-q"])
        .args([&two, &one])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let text = crate::support::stdout(&out);
    let row = |name: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with('│') && l.contains(name));
        let line = line.unwrap_or_else(|| panic!("no {name}: {text}"));
        let cells = line.trim_matches('│').split('┆').skip(1);
        cells.map(|c| c.trim().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(
        row("127.0.0.1:18496 (a.test)"),
        ["1 / 2 · 0.50", "1 / 4 · 0.25"]
    );
    assert_eq!(row("127.0.0.1:18496 (b.test)"), ["1 / 2 · 0.50", "-"]);
}

/// `timeline --conn`: the name the client asked for under the title (the
/// Host in cleartext, the SNI over TLS), and the requests counted in
/// words that agree with their number.
#[test]
fn timeline_of_a_connection_names_its_host() {
    let run = |file: &str, more: &[&str]| {
        let out = crate::support::bin()
            .args(["timeline", "-q", "--width", "200"])
            .arg(capture(file))
            .args(more)
            .output()
            .expect("runs");
        assert!(out.status.success(), "{}", crate::support::stderr(&out));
        let text = crate::support::stdout(&out);
        let at = text.find("\nconnection ").expect("the connection's title");
        let lines: Vec<String> = text[at + 1..].lines().take(2).map(str::to_owned).collect();
        lines
    };
    let two = run("http-curl-two-hosts-4.pcap", &["--conn", "2"]);
    assert!(two[0].contains("(2 requests, cleartext, "), "{two:?}");
    assert_eq!(two[1], "  Host b.test:18496");
    let keylog = capture("multi-server-requests.keylog");
    let keylog = keylog.to_str().expect("utf-8");
    let one = run(
        "multi-server-requests.pcap",
        &["--conn", "2", "--keylog", keylog],
    );
    assert!(one[0].contains("(1 request, TLS 1.3 full, "), "{one:?}");
    assert_eq!(one[1], "  SNI b.test");
}
