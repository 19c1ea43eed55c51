//! What captures/README.md records about each real capture in captures/:
//! its connections, who closes them, its requests and how they are read,
//! its TLS handshakes; `recorded_facts_hold` checks them.

use handshakes::record::{CloseKind, HttpMethod, Side};

/// What captures/README.md records about a capture.
pub(super) struct Fact {
    pub(super) file: &'static str,
    pub(super) connections: u64,
    /// Who sends the first FIN or RST, where that is deterministic.
    pub(super) close: Option<(CloseKind, Side)>,
    /// HTTP requests in the whole capture, and the tolerance when estimated.
    pub(super) requests: u64,
    pub(super) tolerance: u64,
    pub(super) method: HttpMethod,
    /// Full and resumed TLS handshakes; `None` where the run decides.
    pub(super) tls: Option<(u64, u64)>,
    /// No retransmissions or anomalies (loopback under light load).
    pub(super) clean: bool,
}

const fn fact(file: &'static str, connections: u64, requests: u64, method: HttpMethod) -> Fact {
    Fact {
        file,
        connections,
        close: None,
        requests,
        tolerance: 0,
        method,
        tls: Some((0, 0)),
        clean: true,
    }
}

const FIN_CLIENT: Option<(CloseKind, Side)> = Some((CloseKind::Fin, Side::Client));
const FIN_SERVER: Option<(CloseKind, Side)> = Some((CloseKind::Fin, Side::Server));
const H1: HttpMethod = HttpMethod::Http1;
const TLS: HttpMethod = HttpMethod::TlsFlights;

pub(super) const FACTS: &[Fact] = &[
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-new-connections.pcap", 5, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-new-connections-ns.pcap", 5, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-keepalive.pcap", 1, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-5-keepalive.pcapng", 1, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-python-requests-session.pcap", 1, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-python-requests-nosession.pcap", 5, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-ipv6.pcap", 3, 4, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-429-ratelimit.pcap", 5, 10, H1)
    },
    Fact {
        close: Some((CloseKind::Rst, Side::Server)),
        ..fact("http-curl-rst.pcap", 2, 2, H1)
    },
    // Clients retrying 429s (captures/README.md, "Clients retrying 429s").
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-retry-after.pcap", 1, 8, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-requests-retry-after.pcap", 1, 8, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-requests-retry-now.pcap", 1, 8, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-curl-retry-after-date.pcap", 1, 5, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-requests-newconn-retry-now.pcap", 8, 8, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-requests-newconn-retry-after.pcap", 8, 8, H1)
    },
    // Each side's FIN races the other's (`Connection: close`).
    fact("java-urlconnection-noka-retry-now.pcap", 8, 8, H1),
    // Each side's FIN races the other's (`Connection: close`).
    fact("java-urlconnection-noka-retry-after.pcap", 8, 8, H1),
    Fact {
        close: FIN_CLIENT,
        ..fact("http-pipelined-3.pcap", 1, 3, H1)
    },
    Fact {
        close: FIN_CLIENT,
        ..fact("http-chunked-3.pcap", 1, 3, H1)
    },
    fact("h2c-nghttp-prior-knowledge-5.pcap", 1, 5, HttpMethod::H2c),
    Fact {
        tls: Some((3, 0)),
        ..fact("tls12-curl-3-new-connections.pcap", 3, 3, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("tls13-curl-keepalive.pcap", 1, 3, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("tls13-curl-keepalive-5.pcap", 1, 5, TLS)
    },
    // scripts/record-keylog-captures.sh: other suites, and KeyUpdates.
    Fact {
        tls: Some((4, 0)),
        ..fact("tls-suites-curl-4.pcap", 4, 8, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        close: Some((CloseKind::Rst, Side::Server)),
        ..fact("tls13-openssl-keyupdate.pcap", 1, 3, TLS)
    },
    // scripts/record-cbc-captures.sh: AES-CBC in TLS 1.0, 1.1 and 1.2 (who
    // closes first is racy). Without its key log the record flights
    // estimate every request, TLS 1.0's split records included.
    Fact {
        tls: Some((7, 0)),
        ..fact("tls-cbc-7.pcap", 7, 14, TLS)
    },
    // scripts/record-ccm-captures.sh: AES-CCM in TLS 1.2 and 1.3, one
    // connection over h2; the server closes first in TLS 1.2, the client in
    // TLS 1.3. Without the key log every request is estimated from the
    // record flights, CCM_8's shorter tag included.
    Fact {
        tls: Some((7, 0)),
        ..fact("tls-ccm-7.pcap", 7, 14, TLS)
    },
    // scripts/record-lossy-captures.sh: curl over a link that drops a
    // fifth of the segments each way (retransmissions, dropped ACKs), 20
    // requests over h2 and over HTTP/1.1, estimated without the key log.
    Fact {
        tls: Some((1, 0)),
        clean: false,
        ..fact("tls-lossy-h2-20.pcap", 1, 20, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        clean: false,
        ..fact("tls-lossy-h1-20.pcap", 1, 20, TLS)
    },
    // Inside VXLAN (scripts/record-tunnel-captures.sh): the connections are
    // the inner ones; the outer UDP and the kernel's ICMPv6 inside the
    // tunnel are skipped.
    Fact {
        close: FIN_CLIENT,
        ..fact("tunnel-vxlan-http.pcap", 2, 4, H1)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("tunnel-vxlan-tls13.pcap", 1, 3, TLS)
    },
    // Routers fragment every full-size segment (no DF, a 576-byte link).
    Fact {
        close: FIN_CLIENT,
        ..fact("ip-fragmented-http.pcap", 1, 2, H1)
    },
    // The underlay's MTU below the tunnel's: one VXLAN packet arrives in
    // two IPv4 fragments (reassembled), and the request after it is
    // retransmitted (the classic overlay MTU stall).
    Fact {
        close: FIN_CLIENT,
        clean: false,
        ..fact("tunnel-vxlan-fragmented.pcap", 1, 2, H1)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((1, 1)),
        ..fact("tls13-openssl-resumption.pcap", 2, 2, TLS)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((1, 1)),
        ..fact("tls12-openssl-resumption.pcap", 2, 2, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("tls-python-requests-session-5.pcap", 1, 5, TLS)
    },
    Fact {
        tls: Some((5, 0)),
        ..fact("tls-python-requests-nosession-5.pcap", 5, 5, TLS)
    },
    Fact {
        tls: Some((1, 9)),
        clean: false,
        ..fact("java-urlconnection-keepalive-off-10.pcap", 10, 10, TLS)
    },
    Fact {
        tls: None,
        clean: false,
        ..fact("java-urlconnection-keepalive-off-10x10.pcap", 100, 100, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("java-urlconnection-keepalive-on-10.pcap", 1, 10, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("java-httpclient-pooled-10.pcap", 1, 10, TLS)
    },
    Fact {
        tls: Some((10, 0)),
        clean: false,
        ..fact("java-httpclient-pooled-10x10.pcap", 10, 100, TLS)
    },
    // HTTP/2 over TLS: counted a record each from the records' sizes
    // (tests/h2_sizes.rs checks every connection against nginx's log).
    Fact {
        tls: Some((1, 0)),
        ..fact("h2-curl-10.pcap", 1, 10, TLS)
    },
    // scripts/record-h2-captures.sh: Java's HttpClient with HTTP/2 (ten
    // threads open ten connections at once and then share one: 91 + 9 × 1
    // in nginx's log), curl with ten streams at once, and Chromium over
    // TLS 1.2 and 1.3 (each run also opens a spare connection that carries
    // nothing).
    Fact {
        tls: Some((1, 0)),
        ..fact("java-httpclient-h2-10.pcap", 1, 10, TLS)
    },
    Fact {
        tls: Some((10, 0)),
        // Ten connections opened at once on loopback: a retransmission.
        clean: false,
        ..fact("java-httpclient-h2-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        tls: Some((1, 0)),
        ..fact("h2-curl-parallel-20.pcap", 1, 20, TLS)
    },
    // Bodies in DATA records of their own: three small ones, two of 40 000
    // bytes.
    Fact {
        tls: Some((2, 0)),
        ..fact("h2-curl-post-5.pcap", 2, 5, TLS)
    },
    Fact {
        tls: Some((4, 0)),
        // Chromium's loopback traffic has a retransmission.
        clean: false,
        ..fact("h2-chromium-page-2x21.pcap", 4, 42, TLS)
    },
    // scripts/record-ratelimit-captures.sh: POSTs over HTTP/2 to a
    // rate-limited API (nginx answers 429 before it reads a body); Java's
    // HttpClient with one thread and ten, python httpx with one task (ten
    // tasks: a low estimate, tests/h2_sizes.rs), curl.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("java-httpclient-h2-post-429-30.pcap", 1, 30, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((10, 0)),
        ..fact("java-httpclient-h2-post-429-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("httpx-h2-post-429-20.pcap", 1, 20, TLS)
    },
    Fact {
        close: Some((CloseKind::Rst, Side::Client)),
        tls: Some((2, 0)),
        ..fact("h2-curl-post-429-12.pcap", 2, 12, TLS)
    },
    // The same API over HTTP/1.1 (tests/ratelimit.rs checks every
    // connection against nginx's log): HttpURLConnection with one thread
    // and ten (nine of its connections carry one request; the JDK resumed
    // one TLS session), HttpClient with ten, curl.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        ..fact("java-urlconnection-post-429-30.pcap", 1, 30, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((18, 1)),
        // Nineteen connections at once on loopback: retransmissions.
        clean: false,
        ..fact("java-urlconnection-post-429-10x10.pcap", 19, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((10, 0)),
        ..fact("java-httpclient-h1-post-429-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        tls: Some((2, 0)),
        ..fact("curl-h1-post-429-12.pcap", 2, 12, TLS)
    },
    // The pooled libraries on the same API: OkHttp 3 (ten connections
    // raced open, one carries all 100 requests over HTTP/2) and Apache
    // HttpClient 5 (HTTP/1.1; it retries a 429 once, so nginx saw 175
    // requests for 100 calls). Loopback under ten threads: retransmissions.
    Fact {
        close: FIN_CLIENT,
        tls: Some((10, 0)),
        clean: false,
        ..fact("okhttp-post-429-10x10.pcap", 10, 100, TLS)
    },
    Fact {
        tls: Some((10, 0)),
        clean: false,
        ..fact("apache-httpclient5-post-429-10x10.pcap", 10, 175, TLS)
    },
    // The non-blocking clients under load, 50 of 100 POSTs outstanding:
    // HttpClient's sendAsync opens a connection a request until its first
    // HTTP/2 connection is up (50, one carries 51) and a connection an
    // outstanding request over HTTP/1.1 (50 × 2); Apache HttpAsyncClient 5
    // retries each 429 once (181 and 133 requests for 100 calls).
    Fact {
        close: FIN_CLIENT,
        tls: Some((50, 0)),
        clean: false,
        ..fact("java-async-h2-post-429-100x50.pcap", 50, 100, TLS)
    },
    // The same with its first request answered before the others start:
    // one connection for all.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        clean: false,
        ..fact("java-async-warm-h2-post-429-100x50.pcap", 1, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((50, 0)),
        clean: false,
        ..fact("java-async-h1-post-429-100x50.pcap", 50, 100, TLS)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((50, 0)),
        ..fact("apache-async-h1-post-429-100x50.pcap", 50, 181, TLS)
    },
    Fact {
        close: FIN_SERVER,
        tls: Some((1, 0)),
        ..fact("apache-async-h2-post-429-100x50.pcap", 1, 133, TLS)
    },
    // OkHttp 3's enqueue: five calls to a host at once (its dispatcher),
    // five connections; over HTTP/1.1 each carries 13-23, over HTTP/2 one
    // carries all 100 (estimated 98, low: its records seal frames of
    // several streams).
    Fact {
        close: FIN_CLIENT,
        tls: Some((5, 0)),
        ..fact("okhttp-async-h1-post-429-100x50.pcap", 5, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((5, 0)),
        tolerance: 2,
        clean: false,
        ..fact("okhttp-async-h2-post-429-100x50.pcap", 5, 100, TLS)
    },
    // Netty 4.1 (TLS 1.2): over HTTP/2 one connection for all 100, over
    // HTTP/1.1 a pool of 50 connections, two requests each.
    Fact {
        close: FIN_CLIENT,
        tls: Some((1, 0)),
        clean: false,
        ..fact("netty-h2-post-429-100x50.pcap", 1, 100, TLS)
    },
    Fact {
        close: FIN_CLIENT,
        tls: Some((50, 0)),
        ..fact("netty-h1-post-429-100x50.pcap", 50, 100, TLS)
    },
];
