//! HTTP/1.1 over TLS without keys: POSTs to a rate-limited API that answers
//! 429 before it reads a body (nginx's `limit_req`), so that the client
//! sends the body after the answer, in a flight of its own — which must not
//! count as a request. Real captures of Java's HttpURLConnection (keep-alive,
//! one thread and ten), Java's HttpClient forced to HTTP/1.1 (ten threads)
//! and curl (with a key log), each checked connection by connection against
//! nginx's access log (scripts/record-ratelimit-captures.sh;
//! captures/README.md, section ab). HTTP/2's are in h2_sizes.rs.

use std::collections::BTreeMap;

use handshakes::record::HttpMethod;

use crate::h2_sizes::{client_port, nginx_requests, nginx_statuses, records};

const CAPTURES: [(&str, Option<&str>); 4] = [
    ("java-urlconnection-post-429-30", None),
    ("java-urlconnection-post-429-10x10", None),
    ("java-httpclient-h1-post-429-10x10", None),
    ("curl-h1-post-429-12", Some("curl-h1-post-429-12.keylog")),
];

#[test]
fn http1_posts_answered_early_count_as_the_server_logged_them() {
    for (name, keylog) in CAPTURES {
        let logged = nginx_requests(&format!("{name}.nginx-access.log"));
        let estimated = records(&format!("{name}.pcap"), None);
        assert_eq!(estimated.len(), logged.len(), "{name}: connections");
        for r in &estimated {
            let h = &r.http;
            assert_eq!(h.method, HttpMethod::TlsFlights, "{name} #{}", r.id);
            assert_eq!(h.confidence, "estimate", "{name} #{}", r.id);
            assert_eq!(
                Some(&h.requests),
                logged.get(&client_port(r)),
                "{name} #{}: nginx logged {logged:?}",
                r.id
            );
        }
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
