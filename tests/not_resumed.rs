//! `summary.not_resumed` and `tls.resumption_offered`: full TLS handshakes
//! a client could have spared by resuming — on the real captures, against
//! tshark's reading of every ClientHello's offer (pre_shared_key, a
//! session ticket, a session id) and of when each handshake completed.
//! The sweep's exact timing is in `analyze::summary::resume`'s unit tests.

use std::collections::BTreeMap;
use std::path::Path;

use crate::h2_sizes::capture;

/// One TCP stream's TLS handshake as tshark reads it.
#[derive(Debug, Default)]
struct Hello {
    pool: String,
    hello: Option<f64>,
    /// The ClientHello offered a session to resume.
    offered: bool,
    tls13: bool,
    /// The server resumed: a TLS 1.3 ServerHello with pre_shared_key, a
    /// TLS 1.2 handshake without the server's Certificate.
    resumed: bool,
    server_certificate: bool,
    server_hello: bool,
    /// ChangeCipherSpec records seen (TLS 1.2: the second ends the
    /// handshake), and the handshake's end.
    ccs: usize,
    complete: Option<f64>,
    alert: bool,
    /// The server gave no session to resume: a TLS ≤ 1.2 ServerHello's
    /// empty session id and no NewSessionTicket (TLS 1.3's are sealed
    /// here, without keys: taken as given).
    gave_none: bool,
}

fn tshark_hellos(pcap: &Path) -> Vec<Hello> {
    let fields = [
        "tcp.stream",
        "frame.time_relative",
        "ip.src",
        "ip.dst",
        "tcp.srcport",
        "tcp.dstport",
        "tls.handshake.type",
        "tls.handshake.extension.type",
        "tls.handshake.extension.len",
        "tls.handshake.session_id_length",
        "tls.handshake.extensions.supported_version",
        "tls.record.content_type",
        "tls.record.opaque_type",
        "tls.handshake.extensions_server_name",
    ];
    let options = ["-E".to_owned(), "aggregator=;".to_owned()];
    let text = crate::tools::tshark_fields(pcap, &options, "tls", &fields)
        .unwrap_or_else(|| panic!("tshark fails on {}", pcap.display()));
    let mut streams: BTreeMap<u64, (Hello, String, String)> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |k: usize| f.get(k).copied().unwrap_or_default();
        let list =
            |k: usize| -> Vec<&str> { field(k).split(';').filter(|x| !x.is_empty()).collect() };
        let (Ok(stream), Ok(t)) = (field(0).parse::<u64>(), field(1).parse::<f64>()) else {
            continue;
        };
        let (h, client, sni) = streams.entry(stream).or_default();
        let types = list(6);
        if types.contains(&"1") && h.hello.is_none() {
            h.hello = Some(t);
            *client = field(4).to_owned();
            h.pool = format!("{} {}:{}", field(2), field(3), field(5));
            let (kinds, lens) = (list(7), list(8));
            let ext = |kind: &str| kinds.iter().position(|&k| k == kind);
            let ticket = ext("35").is_some_and(|i| lens.get(i).is_some_and(|&l| l != "0"));
            let offers_13 = list(10).iter().any(|&v| v == "0x0304" || v == "0x00000304");
            let session_id = field(9)
                .split(';')
                .next()
                .is_some_and(|l| l != "0" && !l.is_empty());
            h.offered = ext("41").is_some() || ticket || (session_id && !offers_13);
            *sni = field(13).to_owned();
        }
        let from_client = field(4) == client.as_str();
        if !from_client && types.contains(&"2") {
            h.server_hello = true;
            let versions = list(10);
            h.tls13 = versions.iter().any(|&v| v == "0x0304" || v == "0x00000304");
            h.resumed = h.tls13 && list(7).contains(&"41");
            // The ServerHello's session id is the packet's first.
            h.gave_none = !h.tls13 && field(9).split(';').next() == Some("0");
        }
        if !from_client && types.contains(&"4") {
            h.gave_none = false;
        }
        if !from_client && types.contains(&"11") {
            h.server_certificate = true;
        }
        let records = list(11);
        if records.contains(&"21") && h.complete.is_none() {
            h.alert = true;
        }
        if h.server_hello && h.complete.is_none() {
            if h.tls13 {
                if from_client && list(12).contains(&"23") {
                    h.complete = Some(t);
                }
            } else {
                h.ccs += records.iter().filter(|&&r| r == "20").count();
                if h.ccs >= 2 {
                    h.complete = Some(t);
                }
            }
        }
    }
    streams
        .into_values()
        .map(|(mut h, _, sni)| {
            if !h.tls13 {
                h.resumed = h.server_hello && !h.server_certificate;
            }
            h.pool = format!("{} {sni}", h.pool);
            h
        })
        .collect()
}

/// tshark's count: (full handshakes complete with their ClientHello,
/// those that offered none after a handshake with their pool completed,
/// those whose offer was refused).
fn expected(hellos: &[Hello]) -> (u64, u64, u64) {
    let (mut full, mut not_offered, mut refused) = (0, 0, 0);
    for (i, h) in hellos.iter().enumerate() {
        let (Some(hello), Some(_)) = (h.hello, h.complete) else {
            continue;
        };
        if h.resumed || h.alert {
            continue;
        }
        full += 1;
        if h.offered {
            refused += 1;
            continue;
        }
        let earlier = hellos.iter().enumerate().any(|(j, p)| {
            let gave = !p.alert && (p.resumed || !p.gave_none);
            j != i && p.pool == h.pool && p.complete.is_some_and(|c| c <= hello) && gave
        });
        not_offered += u64::from(earlier);
    }
    (full, not_offered, refused)
}

#[test]
fn real_clients_as_tshark_sees_them() {
    if !crate::tools::tshark_present() {
        return;
    }
    // (capture, full handshakes, not offered, refused), as recorded
    // (captures/README.md): python requests without a Session and
    // separate curl processes resume nothing; HttpURLConnection without
    // keep-alive resumes every connection after the first with one
    // thread, 37 of 100 with ten; openssl s_client -sess_in resumes, and
    // the server refuses its 0-RTT offer; after a TLS 1.2 server that
    // gave no session none counts, after a TLS 1.3 one whose tickets are
    // sealed here all do, and curl's offers of tickets nginx cannot honour
    // are refused.
    let cases: [(&str, u64, u64, u64); 17] = [
        ("tls-python-requests-nosession-5", 5, 4, 0),
        ("tls-python-requests-session-5", 1, 0, 0),
        ("tls12-curl-3-new-connections", 3, 2, 0),
        ("tls-suites-curl-4", 4, 3, 0),
        ("curl-h1-post-429-12", 2, 1, 0),
        ("idle-requests-tls", 5, 4, 0),
        ("java-urlconnection-keepalive-off-10", 1, 0, 0),
        ("java-urlconnection-keepalive-off-10x10", 63, 53, 0),
        ("java-urlconnection-post-429-10x10", 18, 8, 0),
        ("netty-h1-post-429-100x50", 50, 36, 0),
        ("java-async-h2-post-429-100x50", 50, 0, 0),
        ("tls13-openssl-resumption", 1, 0, 0),
        ("tls12-openssl-resumption", 1, 0, 0),
        ("tls13-openssl-early-data", 2, 0, 1),
        ("tls12-curl-noticket-4", 4, 0, 0),
        ("tls13-python-requests-noticket-5", 5, 4, 0),
        ("tls13-curl-noticket-4", 4, 0, 3),
    ];
    for (name, full, not_offered, refused) in cases {
        let pcap = capture(&format!("{name}.pcap"));
        let s = crate::over_time::summary_of(&pcap, None);
        let ours = s.not_resumed.clone().unwrap_or_else(|| panic!("{name}"));
        let got = (ours.full, ours.not_offered, ours.refused);
        assert_eq!(
            got,
            expected(&tshark_hellos(&pcap)),
            "{name}: ours against tshark"
        );
        assert_eq!(got, (full, not_offered, refused), "{name}");
        assert_eq!(ours.out_of_order, 0, "{name}");
        assert_eq!(ours.first.len() as u64, not_offered, "{name}");
        for f in &ours.first {
            assert!(f.earlier_connection < f.connection, "{name}: {f:?}");
        }
        // Interval by interval, and server by server, they add up.
        let by_interval: u64 = s
            .over_time
            .intervals
            .iter()
            .map(|i| i.tls_not_resumed)
            .sum();
        assert_eq!(by_interval, not_offered + refused, "{name}");
        let by_server = s.servers.iter().map(|x| (x.tls_not_offered, x.tls_refused));
        let by_server = by_server.fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
        assert_eq!(by_server, (not_offered, refused), "{name}");
        let verdict = &s.verdict;
        if not_offered > 0 {
            let clause = format!("; {not_offered} full TLS handshake");
            assert!(verdict.contains(&clause), "{name}: {verdict}");
        }
        assert_eq!(
            verdict.contains("offered for resumption"),
            refused > 0,
            "{name}: {verdict}"
        );
    }
}

/// Every connection's `resumption_offered` is what its ClientHello
/// offered, as tshark reads it: an offer resumed names how, one refused
/// leaves a full handshake.
#[test]
fn each_offer_is_tshark_s() {
    if !crate::tools::tshark_present() {
        return;
    }
    for name in [
        "tls13-openssl-early-data",
        "tls12-openssl-resumption",
        "java-urlconnection-keepalive-off-10x10",
        "tls-python-requests-nosession-5",
    ] {
        let pcap = capture(&format!("{name}.pcap"));
        let hellos = tshark_hellos(&pcap);
        let (_, records) = crate::tools::analyze_path(&pcap);
        let tls: Vec<_> = records.iter().filter_map(|r| r.tls.as_ref()).collect();
        assert_eq!(tls.len(), hellos.len(), "{name}");
        for (t, h) in tls.iter().zip(&hellos) {
            assert_eq!(t.resumption_offered.is_some(), h.offered, "{name}: {t:?}");
            if t.resumed {
                assert_eq!(t.resumption_offered, t.resumption, "{name}");
            }
        }
    }
}

/// `tls.session_issued`: whether the server gave a session to resume, as
/// tshark reads it with each capture's key log — a NewSessionTicket from
/// the server, or a TLS ≤ 1.2 ServerHello's session id — on every TLS
/// connection of every capture recorded with one where ours is known; and
/// on the servers that give none (captures/README.md, bk–bm), what
/// `summary.not_resumed` then counts.
#[test]
fn sessions_issued_are_tshark_s() {
    if !crate::tools::tshark_present() {
        return;
    }
    let mut known = 0;
    for (name, pcap) in crate::tools::all_captures() {
        let keylog = pcap.with_extension("keylog");
        if !name.starts_with("captures/") || !keylog.exists() {
            continue;
        }
        let options = [
            "-o".to_owned(),
            format!("tls.keylog_file:{}", keylog.display()),
            "-E".to_owned(),
            "aggregator=;".to_owned(),
        ];
        let fields = [
            "tcp.stream",
            "tcp.srcport",
            "tls.handshake.type",
            "tls.handshake.session_id_length",
            "tls.handshake.extensions.supported_version",
        ];
        let text = crate::tools::tshark_fields(&pcap, &options, "tls.handshake", &fields)
            .unwrap_or_else(|| panic!("tshark fails on {name}"));
        // Per stream: (server port, TLS ≤ 1.2 session id given, ticket).
        let mut streams: BTreeMap<u64, (String, Option<bool>, bool)> = BTreeMap::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let field = |k: usize| f.get(k).copied().unwrap_or_default();
            let Ok(stream) = field(0).parse::<u64>() else {
                continue;
            };
            let types: Vec<&str> = field(2).split(';').collect();
            let (server, id, ticket) = streams.entry(stream).or_default();
            if types.first() == Some(&"1") && server.is_empty() {
                continue;
            }
            if types.contains(&"2") && server.is_empty() {
                *server = field(1).to_owned();
                let tls13 = field(4).split(';').any(|v| v.ends_with("0304"));
                let sid = field(3).split(';').next().unwrap_or_default();
                *id = (!tls13).then(|| sid != "0");
            }
            if field(1) == server.as_str() && types.contains(&"4") {
                *ticket = true;
            }
        }
        let records = crate::keylog::analyze_file(&pcap, Some(&keylog), 1);
        let tls: Vec<_> = records.iter().filter_map(|r| r.tls.as_ref()).collect();
        let theirs: Vec<_> = streams.values().filter(|s| !s.0.is_empty()).collect();
        assert_eq!(tls.len(), theirs.len(), "{name}");
        for (t, (_, id, ticket)) in tls.iter().zip(theirs) {
            let Some(ours) = t.session_issued else {
                // Only TLS 1.3, with no ticket read.
                assert!(id.is_none() && !ticket, "{name}: {t:?}");
                continue;
            };
            assert_eq!(ours, *ticket || *id == Some(true), "{name}: {t:?}");
            known += 1;
        }
    }
    assert!(known > 100, "only {known} connections known");
    for (name, issued, not_offered) in [
        ("tls13-python-requests-noticket-5", Some(false), 0),
        ("tls13-curl-noticket-4", Some(true), 0),
        ("tls12-curl-noticket-4", Some(false), 0),
    ] {
        let pcap = capture(&format!("{name}.pcap"));
        let keylog = pcap.with_extension("keylog");
        let records = crate::keylog::analyze_file(&pcap, Some(&keylog), 1);
        for r in &records {
            let t = r.tls.as_ref().expect("TLS");
            assert_eq!(t.session_issued, issued, "{name}: {}", r.id);
        }
        let s = crate::over_time::summary_of(&pcap, Some(&keylog));
        let n = s.not_resumed.expect("full handshakes");
        assert_eq!(n.not_offered, not_offered, "{name}");
    }
}
