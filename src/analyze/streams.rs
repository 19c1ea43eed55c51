//! A connection's two reassembled byte streams and the analyzers they feed:
//! TLS (detected from the bytes, any port) and, on cleartext, HTTP/1.x or
//! HTTP/2. Also turns what the analyzers learned into the record's `tls` and
//! `http` sections.
//!
//! Does not track TCP state or decide connection boundaries (`flow`).

use super::h2::H2;
use super::http::{Exchange, Http1};
use super::tls::{Findings, TlsAnalyzer};
use crate::decode::TcpSegment;
use crate::flow::reassembly::{Reassembler, StreamSink};
use crate::flow::seq::Seq;
use crate::record::{Anomalies, AnomalyKind, HttpInfo, HttpMethod, HttpRequest, Instant, Side};
use crate::time::Timestamp;

/// The cleartext application protocol, once the first bytes decided it.
#[derive(Debug)]
enum App {
    Undecided,
    Http1(Http1),
    H2(H2),
    Other,
}

/// The stream analyzers of one connection.
#[derive(Debug)]
pub struct Analyzers {
    tls: TlsAnalyzer,
    app: App,
    keep: usize,
    last_server_data: Option<Timestamp>,
    /// The client's first bytes, held back until the first line is whole,
    /// and when the last of them arrived.
    probe: Vec<u8>,
    probe_ts: Timestamp,
}

/// Client bytes looked at to decide the cleartext protocol (the HTTP/2
/// preface is 24 bytes; an HTTP/1 request line ends earlier or later).
const APP_PROBE: usize = 24;

impl Analyzers {
    pub fn new(cap: usize, keep: usize) -> Analyzers {
        Analyzers {
            tls: TlsAnalyzer::new(cap, keep),
            app: App::Undecided,
            keep,
            last_server_data: None,
            probe: Vec::new(),
            probe_ts: Timestamp::default(),
        }
    }

    pub fn wants_data(&self) -> bool {
        let app = match &self.app {
            App::Undecided => true,
            App::Http1(h) => h.wants_data(),
            App::H2(h) => h.wants_data(),
            App::Other => false,
        };
        app || self.tls.wants_data()
    }

    fn data(&mut self, side: Side, ts: Timestamp, bytes: &[u8]) {
        if side == Side::Server {
            self.last_server_data = Some(ts);
        }
        self.tls.data(side, ts, bytes);
        if let App::Undecided = self.app {
            if side == Side::Client {
                // Decide on the first line, however it was segmented.
                self.probe.extend_from_slice(bytes);
                self.probe_ts = ts;
                if self.probe.len() < APP_PROBE && !self.probe.contains(&b'\n') {
                    return;
                }
                let probe = std::mem::take(&mut self.probe);
                self.app = self.decide(&probe);
                return self.feed(side, ts, &probe);
            }
            if !self.probe.is_empty() {
                // The server answered before the client's first line was whole.
                self.decide_now();
            } else if !self.tls.is_tls() && H2::starts_with_settings(bytes) {
                // Servers speak first only in HTTP/2 with prior knowledge
                // (SETTINGS before the client's preface arrives).
                self.app = App::H2(H2::prior_knowledge(self.keep));
            }
        }
        self.feed(side, ts, bytes);
    }

    /// Decides on the client bytes held so far (a gap, the server speaking,
    /// or the end came before the first line was whole) and feeds them.
    fn decide_now(&mut self) {
        if matches!(self.app, App::Undecided) && !self.probe.is_empty() {
            let probe = std::mem::take(&mut self.probe);
            self.app = self.decide(&probe);
            self.feed(Side::Client, self.probe_ts, &probe);
        }
    }

    /// What the client's first bytes say the cleartext protocol is.
    fn decide(&self, first: &[u8]) -> App {
        if self.tls.is_tls() {
            App::Other
        } else if H2::looks_like_preface(first) {
            App::H2(H2::prior_knowledge(self.keep))
        } else if Http1::looks_like_request(first) {
            App::Http1(Http1::new(self.keep))
        } else {
            App::Other
        }
    }

    /// Hands stream bytes to the cleartext protocol's parser.
    fn feed(&mut self, side: Side, ts: Timestamp, bytes: &[u8]) {
        match &mut self.app {
            App::Http1(h) => {
                let used = h.data(side, ts, bytes);
                if h.switched()
                    && h.upgrade
                        .as_deref()
                        .is_some_and(|u| u.eq_ignore_ascii_case("h2c"))
                {
                    let upgraded = h.exchanges.last().cloned();
                    let mut h2 = H2::after_upgrade(self.keep, upgraded);
                    h2.data(side, ts, bytes.get(used..).unwrap_or(&[]));
                    // Keep HTTP/1's count of the upgrade request; HTTP/2 adds the rest.
                    self.app = App::H2(carry_over(h, h2));
                }
            }
            App::H2(h) => h.data(side, ts, bytes),
            App::Undecided | App::Other => {}
        }
    }

    fn gap(&mut self, side: Side, len: u64) {
        self.tls.gap(side, len);
        self.decide_now();
        match &mut self.app {
            App::Http1(h) => h.gap(side, len),
            App::H2(h) => h.gap(side, len),
            App::Undecided | App::Other => {}
        }
    }

    /// The streams ended.
    pub fn end(&mut self) {
        self.decide_now();
        self.tls.end_of_streams();
        if let App::Http1(h) = &mut self.app {
            h.finish(self.last_server_data);
        }
    }

    pub fn malformed_tls(&self) -> u64 {
        self.tls.malformed()
    }

    pub fn tls_findings(&mut self, start: Timestamp) -> Option<Findings> {
        self.tls.take_findings(start)
    }

    /// The record's `http` section, its request list still the parsers'
    /// exchanges — moved out, not copied: the analyzers go with the
    /// connection's close or record.
    pub fn http_facts(&mut self) -> HttpFacts {
        let (method, requests, responses, listed, estimated, confidence) = match &self.app {
            App::Http1(h) if !(h.tunnel && self.tls.is_tls()) => (
                HttpMethod::Http1,
                h.requests,
                h.responses,
                h.exchanges.len(),
                false,
                Confidence::Exact,
            ),
            App::H2(h) => (
                HttpMethod::H2c,
                h.requests,
                h.responses,
                h.exchanges.len(),
                false,
                Confidence::Exact,
            ),
            // TLS after STARTTLS carries other protocols; after CONNECT or
            // from the first byte, HTTP.
            _ if self.tls.is_tls() && !(self.tls.late_start && matches!(self.app, App::Other)) => {
                let f = self.tls.flights();
                let confidence = if self.tls.alpn_h2() {
                    Confidence::Low
                } else {
                    Confidence::Estimate
                };
                let responses = f
                    .exchanges
                    .iter()
                    .filter(|e| e.response_first.is_some())
                    .count() as u64;
                (
                    HttpMethod::TlsFlights,
                    f.requests,
                    responses,
                    f.exchanges.len(),
                    true,
                    confidence,
                )
            }
            _ => return HttpFacts::none(),
        };
        let (lost_sync, connection_close, upgrade, resets, goaway) = match &self.app {
            App::Http1(h) => (h.lost_sync, h.connection_close, h.upgrade.clone(), 0, false),
            App::H2(h) => (
                h.lost_sync,
                false,
                h.upgraded.then(|| "h2c".to_string()),
                h.resets,
                h.goaway,
            ),
            _ => (false, false, None, 0, false),
        };
        // The list the counts above came from.
        let exchanges = match (method, &mut self.app) {
            (HttpMethod::Http1, App::Http1(h)) => std::mem::take(&mut h.exchanges),
            (HttpMethod::H2c, App::H2(h)) => std::mem::take(&mut h.exchanges),
            (HttpMethod::TlsFlights, _) => self.tls.take_exchanges(),
            _ => Vec::new(),
        };
        HttpFacts {
            method,
            estimated,
            confidence,
            lost_sync,
            connection_close,
            goaway,
            list_truncated: (listed as u64) < requests,
            requests,
            responses,
            resets,
            upgrade: upgrade.map(String::into_boxed_str),
            exchanges,
        }
    }
}

/// A connection's `http` section as its closed connection keeps it while
/// it lingers: its request list still the parsers' exchanges (80 bytes
/// each, with timestamps, against a record's `HttpRequest` at 152 with two
/// clocks per time), the rest of `HttpInfo` without its empty list and
/// with its confidence a byte (72 bytes against 96 and 24: with the TLS
/// findings' box, the findings a connection keeps fit 80 bytes, not 128).
/// The record's section is made with the record.
#[derive(Debug)]
pub struct HttpFacts {
    method: HttpMethod,
    estimated: bool,
    confidence: Confidence,
    lost_sync: bool,
    connection_close: bool,
    goaway: bool,
    list_truncated: bool,
    requests: u64,
    responses: u64,
    resets: u64,
    upgrade: Option<Box<str>>,
    exchanges: Vec<Exchange>,
}

impl HttpFacts {
    /// The section of a connection on which no HTTP was seen: one that
    /// carried no payload, or whose bytes were neither HTTP nor TLS.
    pub fn none() -> HttpFacts {
        HttpFacts {
            method: HttpMethod::None,
            estimated: false,
            confidence: Confidence::Exact,
            lost_sync: false,
            connection_close: false,
            goaway: false,
            list_truncated: false,
            requests: 0,
            responses: 0,
            resets: 0,
            upgrade: None,
            exchanges: Vec::new(),
        }
    }

    /// The record's `http` section, its times made with `at`.
    pub fn into_info(self, at: &dyn Fn(Timestamp) -> Instant) -> HttpInfo {
        HttpInfo {
            method: self.method,
            requests: self.requests,
            responses: self.responses,
            estimated: self.estimated,
            confidence: self.confidence.as_str(),
            lost_sync: self.lost_sync,
            connection_close: self.connection_close,
            upgrade: self.upgrade.map(String::from),
            resets: self.resets,
            goaway: self.goaway,
            list: self.exchanges.iter().map(|e| request(e, at)).collect(),
            list_truncated: self.list_truncated,
        }
    }
}

/// How far the request count is to be trusted: the record's `confidence`.
#[derive(Clone, Copy, Debug)]
enum Confidence {
    /// Read from the messages.
    Exact,
    /// Counted from TLS record flights.
    Estimate,
    /// Flights on HTTP/2, where they are not requests.
    Low,
}

impl Confidence {
    fn as_str(self) -> &'static str {
        match self {
            Confidence::Exact => "exact",
            Confidence::Estimate => "estimate",
            Confidence::Low => "low",
        }
    }
}

/// HTTP/2 after an h2c upgrade keeps the HTTP/1 request that asked for it
/// (its `101` was interim, so no response is carried over).
fn carry_over(h1: &Http1, mut h2: H2) -> H2 {
    h2.requests += h1.requests;
    h2
}

fn request(e: &Exchange, at: &dyn Fn(Timestamp) -> Instant) -> HttpRequest {
    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
    HttpRequest {
        method: text(&e.method),
        target: text(&e.target),
        start: at(e.start),
        status: e.status,
        response_first: e.response_first.map(at),
        response_last: e.response_last.map(at),
        ttfb: e.response_first.map(|t| t.secs_since(e.start)),
        duration: e.response_last.map(|t| t.secs_since(e.start)),
    }
}

/// Hands one direction's stream to the analyzers.
struct Dispatch<'a> {
    side: Side,
    analyzers: &'a mut Analyzers,
}

impl StreamSink for Dispatch<'_> {
    fn data(&mut self, ts: Timestamp, bytes: &[u8]) {
        self.analyzers.data(self.side, ts, bytes);
    }
    fn gap(&mut self, len: u64) {
        self.analyzers.gap(self.side, len);
    }
}

/// Both directions' reassembly and the analyzers fed by it.
#[derive(Debug)]
pub struct Streams {
    client: Reassembler,
    server: Reassembler,
    /// Boxed on its own, and handed over as it is when the streams end:
    /// one allocation over 1 KiB per connection instead of two (glibc
    /// consolidates its small free chunks on every such allocation).
    pub analyzers: Box<Analyzers>,
}

impl Streams {
    pub fn new(cap: usize, keep: usize) -> Streams {
        Streams {
            client: Reassembler::new(cap),
            server: Reassembler::new(cap),
            analyzers: Box::new(Analyzers::new(cap, keep)),
        }
    }

    /// No out-of-order bytes are held in either direction.
    pub fn settled(&self) -> bool {
        self.client.buffered() == 0 && self.server.buffered() == 0
    }

    /// Where each direction's stream starts: one past the SYN's (and the
    /// SYN-ACK's) sequence number, when the handshake was seen.
    pub fn start_at(&mut self, client_isn: Option<Seq>, server_isn: Option<Seq>) {
        if let Some(isn) = client_isn {
            self.client.start_at(isn.plus(1));
        }
        if let Some(isn) = server_isn {
            self.server.start_at(isn.plus(1));
        }
    }

    pub fn segment(&mut self, side: Side, ts: Timestamp, seg: &TcpSegment<'_>) {
        let Streams {
            client,
            server,
            analyzers,
        } = self;
        let (this, other) = match side {
            Side::Client => (client, server),
            Side::Server => (server, client),
        };
        let f = seg.flags;
        this.segment(seg, ts, &mut Dispatch { side, analyzers });
        if f.ack() && !f.rst() {
            other.acked(
                seg.ack,
                &mut Dispatch {
                    side: side.other(),
                    analyzers,
                },
            );
        }
    }

    /// Flushes both directions, ends the analyzers, and folds the counters
    /// into `anomalies`; what remains are the analyzers.
    pub fn finish(mut self, anomalies: &mut Anomalies) -> Box<Analyzers> {
        let Streams {
            client,
            server,
            analyzers,
        } = &mut self;
        client.finish(&mut Dispatch {
            side: Side::Client,
            analyzers,
        });
        server.finish(&mut Dispatch {
            side: Side::Server,
            analyzers,
        });
        analyzers.end();
        for r in [&*client, &*server] {
            anomalies.add(AnomalyKind::RetransmissionConflict, r.stats.conflicts);
            anomalies.add(AnomalyKind::StreamGap, r.stats.gaps);
            anomalies.add(AnomalyKind::StreamBufferFull, r.stats.overflows);
        }
        anomalies.add(AnomalyKind::MalformedTls, analyzers.malformed_tls());
        self.analyzers
    }
}
