//! HTTP/1.1 over TLS without keys: POSTs to a rate-limited API that answers
//! 429 before it reads a body (nginx's `limit_req`), so that the client
//! sends the body after the answer, in a flight of its own — which must not
//! count as a request. Real captures of Java's HttpURLConnection (keep-alive,
//! one thread and ten), Java's HttpClient forced to HTTP/1.1 (ten threads)
//! and curl (with a key log), each checked connection by connection against
//! nginx's access log (scripts/record-ratelimit-captures.sh;
//! captures/README.md, section ab); and the pooled libraries, Apache
//! HttpClient 5 (HTTP/1.1) and OkHttp 3 (HTTP/2; section ac). The other
//! HTTP/2 captures are in h2_sizes.rs. And the non-blocking clients,
//! Java's sendAsync, Apache HttpAsyncClient 5 and OkHttp's enqueue
//! (section ad), and Netty (section ae).

use std::collections::BTreeMap;

use handshakes::record::HttpMethod;

use crate::h2_sizes::{client_port, nginx_requests, nginx_statuses, records};

const CAPTURES: [(&str, Option<&str>); 10] = [
    ("java-urlconnection-post-429-30", None),
    ("java-urlconnection-post-429-10x10", None),
    ("java-httpclient-h1-post-429-10x10", None),
    ("curl-h1-post-429-12", Some("curl-h1-post-429-12.keylog")),
    // Apache HttpClient 5 retries a 429 once: nginx logged 175 requests
    // for its 100 calls, and so many are counted.
    ("apache-httpclient5-post-429-10x10", None),
    // OkHttp 3 over HTTP/2 (its records hold a request's HEADERS and
    // body together), nine of its ten connections idle.
    ("okhttp-post-429-10x10", None),
    // The non-blocking clients over HTTP/1.1, 50 POSTs outstanding
    // (section ad): Java's sendAsync, 50 connections of two (the first
    // sealed with its body, the second often answered before it), and
    // Apache HttpAsyncClient 5 (a pool of 50; it retries a 429 once).
    ("java-async-h1-post-429-100x50", None),
    ("apache-async-h1-post-429-100x50", None),
    // OkHttp 3's enqueue over HTTP/1.1: its dispatcher runs five calls
    // to a host at once, so five connections carry the 100.
    ("okhttp-async-h1-post-429-100x50", None),
    // Netty 4.1 over HTTP/1.1 (section ae): a pool of 50 connections,
    // each request one record (head and body written as one message).
    ("netty-h1-post-429-100x50", None),
];

#[test]
fn http1_posts_answered_early_count_as_the_server_logged_them() {
    for (name, keylog) in CAPTURES {
        let logged = nginx_requests(&format!("{name}.nginx-access.log"));
        let estimated = records(&format!("{name}.pcap"), None);
        let mut seen = 0;
        for r in &estimated {
            let h = &r.http;
            assert_eq!(h.method, HttpMethod::TlsFlights, "{name} #{}", r.id);
            assert_eq!(h.confidence, "estimate", "{name} #{}", r.id);
            let port = client_port(r);
            // (A connection nginx did not log carried no request.)
            assert_eq!(
                h.requests,
                logged.get(&port).copied().unwrap_or(0),
                "{name} #{}: nginx logged {logged:?}",
                r.id
            );
            seen += usize::from(logged.contains_key(&port));
        }
        assert_eq!(seen, logged.len(), "{name}: connections nginx logged");
        let Some(keylog) = keylog else { continue };
        // With the key log: the same requests, at the same times, and the
        // statuses nginx logged.
        let exact = records(&format!("{name}.pcap"), Some(keylog));
        let statuses = nginx_statuses(&format!("{name}.nginx-access.log"));
        for (guess, read) in estimated.iter().zip(&exact) {
            assert_eq!(read.http.method, HttpMethod::TlsHttp1, "{name}");
            let starts = |r: &handshakes::ConnectionRecord| -> Vec<f64> {
                r.http.list.iter().map(|e| e.start.at).collect()
            };
            assert_eq!(starts(guess), starts(read), "{name} #{}", read.id);
            let mut got: BTreeMap<u16, u64> = BTreeMap::new();
            for request in &read.http.list {
                *got.entry(request.status.expect("a status")).or_default() += 1;
            }
            assert_eq!(Some(&got), statuses.get(&client_port(read)), "{name}");
        }
    }
}

#[test]
fn connections_opened_and_never_used_are_counted_apart() {
    // OkHttp raced ten TLS connections open and sent every request on one;
    // with fifty calls enqueued, five and one. The summary counts the
    // others, and their full handshakes, which handshakes_per_request
    // leaves out; HttpClient's sendAsync used each of its fifty.
    for (name, unused) in [
        ("okhttp-post-429-10x10.pcap", 9),
        ("okhttp-async-h2-post-429-100x50.pcap", 4),
        ("java-async-h2-post-429-100x50.pcap", 0),
    ] {
        let (summary, _) = crate::tools::analyze_path(&crate::h2_sizes::capture(name));
        assert_eq!(summary.connections_unused, unused, "{name}");
        assert_eq!(summary.tls_handshakes_full_unused, unused, "{name}");
        if unused > 0 {
            let ending =
                format!("; {unused} more connections, {unused} full TLS handshakes, carried none");
            assert!(summary
                .verdict
                .ends_with("(all while it was still in its handshake)"));
            // Followed by why: they were raced open beside the HTTP/2
            // connection that carried the requests (tests/beside_http2.rs).
            assert!(
                summary.verdict.contains(&format!("{ending}; ")),
                "{name}: {}",
                summary.verdict
            );
        }
    }
}
