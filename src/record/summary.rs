//! The summary of a whole capture (what `Summary` and its parts hold), for
//! every report's closing figures: part of the record contract, kept apart
//! from the per-connection records so each file stays short.
//!
//! Does not compute anything: the aggregates are built in `analyze::summary`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    Anomalies, BesideHttp2, Instant, NotResumed, OpenedWhileIdle, Overlay, QuicSummary, Redialed,
};

/// Summary statistics of a set of durations, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub min: Option<f64>,
    pub median: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub max: Option<f64>,
    pub avg: Option<f64>,
}

/// Mean and maximum.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MeanMax {
    pub mean: Option<f64>,
    pub max: Option<u64>,
}

/// Handshakes per request.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PerRequest {
    /// TCP handshakes (SYNs of connections that carried requests) per request.
    pub tcp: Option<f64>,
    /// Full (not resumed) TLS handshakes per request.
    pub tls_full: Option<f64>,
}

/// Time spent before the first request byte.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HandshakeTime {
    /// Sum over connections of SYN → first request byte, seconds.
    pub total: f64,
    /// Median per connection.
    pub median: Option<f64>,
    /// Connections that contributed.
    pub connections: u64,
    /// Where that time went, over the connections whose every step was
    /// seen; null when none's was.
    pub phases: Option<SetupPhases>,
}

/// The setup time of connections that carried a request, cut at each step
/// (sums over them, seconds): the TCP handshake, the client's wait before
/// its ClientHello, the TLS handshake, and the wait from the handshake's
/// end to the first request byte. Telling the network's share from the
/// client's: a client that loads its trust store or builds a TLS context
/// per connection waits before its ClientHello.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SetupPhases {
    /// Connections whose SYN, handshake ACK and first request were seen,
    /// and for TLS its ClientHello and completion, in that order.
    pub connections: u64,
    /// SYN → the ACK that completed the TCP handshake.
    pub connect: f64,
    /// That ACK → the ClientHello (0 without TLS).
    pub before_client_hello: f64,
    /// ClientHello → the handshake complete (0 without TLS).
    pub tls_handshake: f64,
    /// The handshake complete (TLS's, else TCP's) → the first request byte.
    pub to_request: f64,
}

/// The most connections open at once.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Peak {
    pub connections: u64,
    /// When the peak was first reached.
    pub at: Option<Instant>,
}

/// Packet counts for the whole input.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PacketCounts {
    /// Every frame read from the input.
    pub total: u64,
    /// Frames carrying a decodable TCP segment.
    pub tcp: u64,
    /// Frames that are not TCP (other IP protocols, ARP, …) or could not be decoded.
    pub skipped: u64,
    /// Of `skipped`: UDP datagrams carrying a QUIC handshake packet (a
    /// long header of version 1, 2 or a deployed draft). QUIC, and so
    /// HTTP/3, is not analyzed.
    pub quic: u64,
    /// TCP frames left out by `--port`/`--host`.
    pub filtered_out: u64,
    /// IP fragments held for reassembly: a reassembled datagram is counted
    /// once (as `tcp`, `skipped`, …) at the fragment that completed it, its
    /// other fragments here (and so are fragments never reassembled, which
    /// are also anomalies).
    pub fragments: u64,
    /// Bytes of all frames as on the wire.
    pub bytes: u64,
}

/// What the whole capture says.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// The input as named on the command line (`-` for stdin).
    pub file: String,
    /// `pcap`, `pcapng`, `merged` or `live`.
    pub format: String,
    pub compression: Option<String>,
    /// First and last packet, and the span between them (seconds).
    pub first_packet: Option<f64>,
    pub last_packet: Option<f64>,
    pub span: f64,
    pub packets: PacketCounts,
    /// TCP connections seen (after filters).
    pub connections: u64,
    /// QUIC connections opened (a first Initial packet seen): so many more
    /// handshakes than `connections` shows…
    pub quic_connections: u64,
    /// …and what their Initial packets tell; null when there was none.
    pub quic: Option<QuicSummary>,
    /// Connections whose SYN, SYN-ACK and ACK were all seen.
    pub tcp_handshakes: u64,
    /// Connections whose SYN was not captured.
    pub connections_without_handshake: u64,
    /// Connections that carried no request (a client racing several open
    /// and using one; or traffic that is not HTTP), and how many full TLS
    /// handshakes they completed: what `handshakes_per_request` leaves out.
    pub connections_unused: u64,
    pub tls_handshakes_full_unused: u64,
    /// Connections by overlay network (`vxlan 4242`, `gre 7`, …; at most
    /// 1 024 of them, the rest counted as `other`); empty when no
    /// connection was in one.
    pub overlays: BTreeMap<String, u64>,
    /// Distribution of connect times (SYN → ACK) over complete handshakes.
    pub connect: Distribution,
    /// Connections by how they closed.
    pub close: BTreeMap<String, u64>,
    /// Connections closed once idle after their last response, by who
    /// closed them; and requests sent after a close.
    pub idle_closes: IdleCloses,
    /// SYNs sent again, over all connections.
    pub syn_retransmissions: u64,
    /// TLS: connections that carried TLS, handshakes completed full or
    /// resumed, handshakes that failed, by version, ALPN offered/selected, and
    /// the distribution of handshake times (ClientHello → complete).
    pub tls_connections: u64,
    pub tls_handshakes_full: u64,
    pub tls_handshakes_resumed: u64,
    pub tls_handshakes_failed: u64,
    pub tls_versions: BTreeMap<String, u64>,
    pub alpn: BTreeMap<String, u64>,
    /// With `--keylog`: TLS connections by `tls.decryption.outcome`
    /// (empty without a key log).
    pub tls_decryption: BTreeMap<String, u64>,
    pub tls_handshake: Distribution,
    /// HTTP requests: all, counted exactly, and estimated from TLS records.
    pub requests: u64,
    pub requests_exact: u64,
    pub requests_estimated: u64,
    /// HTTP/2 requests the server refused unprocessed (`http.http2.refused`
    /// summed): sent, not served, so not in `requests`.
    pub requests_refused: u64,
    pub requests_per_connection: MeanMax,
    pub handshakes_per_request: PerRequest,
    pub handshake_time: HandshakeTime,
    /// Handshake events over all connections: the TCP handshake packets
    /// seen (SYN, SYN-ACK and their retransmissions, the ACK) plus the TLS
    /// handshake messages up to completion.
    pub handshake_events: u64,
    /// Request start → last response byte, over listed requests with a response.
    pub request_latency: Distribution,
    pub peak_concurrent_connections: Peak,
    /// Responses by status code, where visible.
    pub status_codes: BTreeMap<String, u64>,
    /// What the responses said of rate limiting, and how clients
    /// answered; null unless a response was a 429 or carried a
    /// `Retry-After` (read from cleartext HTTP, or with the key log).
    pub rate_limit: Option<RateLimitSummary>,
    /// Connections opened while another to the same server sat idle;
    /// null when no connection's SYN and first request were seen.
    pub opened_while_idle: Option<OpenedWhileIdle>,
    /// Connections opened after the client closed another to the same
    /// server that it could have kept; null as `opened_while_idle`.
    pub redialed: Option<Redialed>,
    /// Connections opened while an HTTP/2 connection to the same server
    /// was open or opening; null when no connection that offered HTTP/2
    /// was seen from its SYN.
    pub beside_http2: Option<BesideHttp2>,
    /// Full TLS handshakes that offered no session to resume after one
    /// with the same server, or whose offered session was refused; null
    /// when no full handshake was seen.
    pub not_resumed: Option<NotResumed>,
    /// Requests per second of capture span.
    pub requests_per_second: Option<f64>,
    /// The same figures for each server (address and port, SNI, overlay),
    /// most connections first; at most 4,096 servers, those seen first.
    pub servers: Vec<ServerSummary>,
    /// Connections to servers past those 4,096; null when none.
    pub servers_not_listed: Option<ServersNotListed>,
    /// The capture cut into equal intervals from its first packet, and
    /// what began in each: connections, handshakes, requests, 429s.
    pub over_time: OverTime,
    /// One sentence answering "does this client reuse connections?".
    pub verdict: String,
    /// Every anomaly counted in the input, by kind.
    pub anomalies: Anomalies,
    /// The capture ended early or had a corrupt block.
    pub truncated: bool,
    /// Lines worth a human's attention (truncation, unsupported interfaces, …).
    pub warnings: Vec<String>,
    /// Live capture only: what the kernel and the interface received and dropped.
    pub capture_drops: Option<CaptureDrops>,
    /// What `--port`, `--host`, `--overlay` and `-f` kept: the figures are
    /// about these connections only. `None` when everything was kept.
    pub selection: Option<Selection>,
}

/// Rate limiting over a capture's connections, each one's
/// `http.rate_limit` added up: TCP's in `summary.rate_limit`, QUIC's in
/// `summary.quic.rate_limit`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RateLimitSummary {
    /// Final responses with status 429…
    pub responses_429: u64,
    /// …on so many connections.
    pub connections_limited: u64,
    /// Responses carrying a `Retry-After`, by its seconds: `{"1": 8}`.
    pub retry_after: BTreeMap<String, u64>,
    /// Requests started on a connection while a `Retry-After` given on
    /// it had not yet elapsed.
    pub requests_in_window: u64,
    /// 429 → the next request on the same connection, seconds.
    pub wait_after_429: Distribution,
    /// Connections whose last response was a 429 and that then closed,
    /// by who sent the first FIN or RST: `{"server": 3}`.
    pub closed_after_429: BTreeMap<String, u64>,
    /// The same questions asked across the connections to each server.
    pub across_connections: Option<AcrossConnections>,
}

/// Rate limiting across connections: a `Retry-After` asks the client to
/// wait before its next request to the server, on any connection. Each
/// server is a client address with a server address and port (and
/// overlay); only the listed requests of HTTP read from messages count.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AcrossConnections {
    /// Requests to a server started while a `Retry-After` it gave, on any
    /// connection, had not yet elapsed…
    pub requests_in_window: u64,
    /// …of them, on another connection than the one given the window.
    pub requests_in_window_elsewhere: u64,
    /// Connections to a server opened (first packet) while one ran.
    pub connections_opened_in_window: u64,
    /// 429 → the next request to the same server on any connection, seconds…
    pub wait_after_429: Distribution,
    /// …of them, sent on another connection than the 429's.
    pub retried_elsewhere: u64,
    /// Requests not in these figures: past the first 4,096 a connection
    /// carried beyond its list (`--max-requests-listed`).
    pub requests_not_seen: u64,
    /// Marks taken out of time order (timestamps going backwards, or more
    /// than 65,536 waiting at once), and 429s of servers past the 65,536
    /// followed at once: the figures are then approximate.
    pub out_of_order: u64,
}

impl SetupPhases {
    /// The steps together: these connections' setup time.
    pub fn total(&self) -> f64 {
        self.connect + self.before_client_hello + self.tls_handshake + self.to_request
    }
}

/// One server's share of a capture: the connections to one server address
/// and port that named one SNI (or none), in one overlay network. A client
/// pools connections by host name, so two names served at one address are
/// two servers here.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerSummary {
    /// `address:port`, as in a connection's `server`.
    pub server: String,
    /// The SNI its connections' ClientHellos named; null for cleartext, or
    /// TLS without one.
    pub sni: Option<String>,
    /// In cleartext, the host its connections' first requests named
    /// (`Host`, `:authority`), lower-cased, without a port; null for TLS,
    /// or where it is the server's address or none was named.
    pub host: Option<String>,
    pub overlay: Option<Overlay>,
    /// The summary's figures of the same names, over these connections.
    pub connections: u64,
    pub connections_unused: u64,
    pub tcp_handshakes: u64,
    pub tls_handshakes_full: u64,
    pub tls_handshakes_resumed: u64,
    pub tls_handshakes_failed: u64,
    pub requests: u64,
    pub requests_estimated: u64,
    pub requests_per_connection: MeanMax,
    pub handshakes_per_request: PerRequest,
    /// SYN → first request byte, per connection that carried a request…
    pub handshake_time: Totals,
    /// …cut at each step, as the summary's `handshake_time.phases`.
    pub setup_phases: Option<SetupPhases>,
    /// ClientHello → handshake complete, per TLS connection.
    pub tls_handshake: Totals,
    /// Final responses by class: `{"2xx": 9, "4xx": 1}`.
    pub status_classes: BTreeMap<String, u64>,
    pub responses_429: u64,
    /// Connections by how they closed, as the summary's `close`.
    pub close: BTreeMap<String, u64>,
    /// `close.idle` of the connections the server closed first (its
    /// keep-alive timeout shows here), and the requests sent after their
    /// connection's close.
    pub closed_by_server: Totals,
    pub requests_after_close: u64,
    /// Its connections opened while another to it sat idle (as
    /// `summary.opened_while_idle` counts them, over every client)…
    pub opened_while_idle: u64,
    /// …and beside an HTTP/2 connection to it (`summary.beside_http2`).
    pub beside_http2: u64,
    /// Its full TLS handshakes that offered no session after one had
    /// completed, and those whose offer it refused (`summary.not_resumed`).
    pub tls_not_offered: u64,
    pub tls_refused: u64,
}

impl ServerSummary {
    /// The server for people: `10.0.0.2:443 (api.example.com)` (its SNI,
    /// or in cleartext its host), with the overlay network when there is
    /// one. The name is the capture's text: a terminal needs it sanitised.
    pub fn name(&self) -> String {
        let endpoint = super::endpoint_in(&self.server, self.overlay);
        match self.server_name() {
            Some(name) => format!("{endpoint} ({name})"),
            None => endpoint,
        }
    }

    /// The name the client gave the server: its SNI, or in cleartext the
    /// host its requests named.
    pub fn server_name(&self) -> Option<&str> {
        self.sni.as_deref().or(self.host.as_deref())
    }
}

/// How connections were closed once idle (`summary.idle_closes`): each
/// connection's `close.idle` by who sent the first FIN or RST — a server's
/// keep-alive timeout, or a client's pool letting a connection go — and
/// the requests that started after their connection's close (a client
/// that sent a request on a connection the server had closed).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IdleCloses {
    pub by_client: Distribution,
    pub by_server: Distribution,
    pub requests_after_close: u64,
    /// The connections those were sent on.
    pub connections_with_requests_after_close: u64,
}

/// The capture's TCP connections in time (`summary.over_time`): intervals
/// of one width from the first packet (at `start` seconds into the
/// capture) to the last, each counting what began in it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OverTime {
    /// Seconds each interval lasts.
    pub interval: f64,
    /// How the width was chosen: `auto` (to fit about 60 intervals),
    /// `asked` (`--interval`), or `widened` (`--interval`'s, made a
    /// multiple as large as needed to keep at most 10,000 intervals).
    pub interval_chosen: &'static str,
    /// Requests counted on connections whose start times were not kept
    /// (past the first 4,096 past the list of a connection): in no interval.
    pub requests_untimed: u64,
    pub intervals: Vec<Interval>,
}

/// What began in one interval of `summary.over_time`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Interval {
    /// Seconds into the capture.
    pub start: f64,
    /// Connections whose first packet came in it…
    pub connections: u64,
    /// …whose SYN did, of complete TCP handshakes…
    pub tcp_handshakes: u64,
    /// …whose ClientHello did, by how the TLS handshake ended.
    pub tls_full: u64,
    pub tls_resumed: u64,
    pub tls_failed: u64,
    /// Requests that started in it.
    pub requests: u64,
    /// Responses 429 that ended in it.
    pub responses_429: u64,
    /// Connections whose first FIN or RST came in it.
    pub closed: u64,
    /// Connections whose SYN came in it while another to their server sat
    /// idle (`summary.opened_while_idle`)…
    pub opened_while_idle: u64,
    /// …and beside an HTTP/2 connection to it (`summary.beside_http2`).
    pub beside_http2: u64,
    /// Full TLS handshakes whose ClientHello came in it and that could have
    /// resumed (`summary.not_resumed`: not offered and refused).
    pub tls_not_resumed: u64,
    /// QUIC connections whose client's first Initial came in it, of them
    /// those whose handshake was full and resumed…
    pub quic_connections: u64,
    pub quic_full: u64,
    pub quic_resumed: u64,
    /// …and the HTTP/3 requests listed on those a key log opened that
    /// started in it, and their 429s that ended in it.
    pub http3_requests: u64,
    pub http3_responses_429: u64,
    /// Connections open at its end: opened so far and not closed (one
    /// that ended without FIN or RST counts as open to the end).
    pub open: u64,
    /// Mean SYN → first request byte of the connections whose SYN came in it.
    pub setup_mean: Option<f64>,
}

/// A sum of durations, with its mean and maximum (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Connections that contributed one.
    pub connections: u64,
    pub total: f64,
    pub mean: Option<f64>,
    pub max: Option<f64>,
}

/// What is left out of `summary.servers` when it is full.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServersNotListed {
    pub connections: u64,
    pub requests: u64,
}

/// The connections a run was told to keep, as given on the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Selection {
    /// `--port`: a connection with one of these on either side.
    pub ports: Vec<u16>,
    /// `--host`: a connection with one of these addresses on either side.
    pub hosts: Vec<String>,
    /// `--overlay`, as typed: `vxlan:4242`.
    pub overlays: Vec<String>,
    /// `-f`: the frames this capture filter matched.
    pub filter: Option<String>,
}

impl Selection {
    /// The selection in one line for people, in the flags' own words:
    /// `port 443 or 8443; host 10.0.0.1; -f 'tcp'`.
    pub fn describe(&self) -> String {
        let either = |words: Vec<String>| words.join(" or ");
        let mut parts = Vec::new();
        if !self.ports.is_empty() {
            parts.push(format!(
                "port {}",
                either(self.ports.iter().map(u16::to_string).collect())
            ));
        }
        if !self.hosts.is_empty() {
            parts.push(format!("host {}", either(self.hosts.clone())));
        }
        if !self.overlays.is_empty() {
            parts.push(format!("overlay {}", either(self.overlays.clone())));
        }
        if let Some(f) = &self.filter {
            parts.push(format!("-f '{f}'"));
        }
        parts.join("; ")
    }
}

/// Packet counters from libpcap at the end of a live capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CaptureDrops {
    pub received: u64,
    pub dropped: u64,
    pub if_dropped: u64,
}
