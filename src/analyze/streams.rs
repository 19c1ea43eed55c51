//! A connection's two reassembled byte streams and the analyzers they feed:
//! TLS (detected from the bytes, any port) and, on cleartext, HTTP/1.x or
//! HTTP/2. Also turns what the analyzers learned into the record's `tls` and
//! `http` sections.
//!
//! Does not track TCP state or decide connection boundaries (`flow`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cleartext::{App, Cleartext};
use super::h2::Limit;
use super::http::{count_status, Exchange, Exchanges, Limits, PastMark, Unlisted};
use super::stats::Samples;
use super::tls::keylog::KeyLog;
use super::tls::{Findings, Plaintext, TlsAnalyzer};
use crate::decode::TcpSegment;
use crate::flow::reassembly::{Reassembler, StreamSink};
use crate::flow::seq::Seq;
use crate::record::{
    Anomalies, AnomalyKind, DecryptionOutcome, HttpInfo, HttpMethod, HttpRequest, Instant, Side,
};
use crate::time::Timestamp;

/// The stream analyzers of one connection.
#[derive(Debug)]
pub struct Analyzers {
    tls: TlsAnalyzer,
    /// The protocol on the TCP stream, when it is not TLS.
    clear: Cleartext,
    /// With a key log: the protocol inside the TLS records it opened.
    inner: Option<Box<Cleartext>>,
    keep: usize,
}

/// Where the plaintext of opened TLS records goes: the protocol inside
/// them, found on its first bytes.
fn to_inner(
    inner: &mut Option<Box<Cleartext>>,
    keep: usize,
) -> impl FnMut(Side, Timestamp, Plaintext<'_>) + '_ {
    move |side, ts, plain| {
        let inner = inner.get_or_insert_with(|| Box::new(Cleartext::new(keep)));
        match plain {
            Plaintext::Data(text) => inner.data(side, ts, text, false),
            Plaintext::Lost(len) => inner.gap(side, len, false),
        }
    }
}

impl Analyzers {
    /// `cap` bounds buffered handshake bytes per direction, `keep` the
    /// requests listed; with `keylog`, TLS records are opened with its
    /// secrets.
    pub fn new(cap: usize, keep: usize, keylog: Option<&Arc<KeyLog>>) -> Analyzers {
        let tls = TlsAnalyzer::new(cap, keep);
        Analyzers {
            tls: match keylog {
                Some(log) => tls.decrypting(Arc::clone(log)),
                None => tls,
            },
            clear: Cleartext::new(keep),
            inner: None,
            keep,
        }
    }

    pub fn wants_data(&self) -> bool {
        self.clear.wants_data() || self.tls.wants_data()
    }

    fn data(&mut self, side: Side, ts: Timestamp, bytes: &[u8]) {
        let Analyzers {
            tls,
            clear,
            inner,
            keep,
        } = self;
        tls.data_to(side, ts, bytes, &mut to_inner(inner, *keep));
        clear.data(side, ts, bytes, tls.is_tls());
    }

    fn gap(&mut self, side: Side, len: u64) {
        self.tls.gap(side, len);
        if let Some(inner) = self.inner.as_deref_mut() {
            // The records the gap held are lost, and with them their plaintext.
            inner.gap(side, len, false);
        }
        self.clear.gap(side, len, self.tls.is_tls());
    }

    /// The streams ended.
    pub fn end(&mut self) {
        let tls = self.tls.is_tls();
        self.clear.decide_now(tls);
        // Records held for a followed key log's secrets are read now.
        self.tls
            .end_of_streams_to(&mut to_inner(&mut self.inner, self.keep));
        self.clear.end(tls);
        if let Some(inner) = self.inner.as_deref_mut() {
            inner.end(false);
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
        let tls = self.tls.is_tls();
        match &self.clear.app {
            App::Http1(h) if !(h.tunnel && tls) => return messages(&mut self.clear.app, false),
            App::H2(_) => return messages(&mut self.clear.app, false),
            // TLS after STARTTLS carries other protocols; after CONNECT or
            // from the first byte, HTTP.
            _ if !tls || (self.tls.late_start && matches!(self.clear.app, App::Other)) => {
                return HttpFacts::none()
            }
            _ => {}
        }
        let opened = self.tls.decryption().map(|d| d.outcome);
        if let Some(DecryptionOutcome::Complete | DecryptionOutcome::Partial) = opened {
            match self.inner.as_deref_mut().map(|c| &mut c.app) {
                Some(app @ (App::Http1(_) | App::H2(_))) => return messages(app, true),
                // Every record opened, and they held something else, or
                // nothing. (When some did not, what did may have begun
                // mid-message: the flights still estimate.)
                _ if opened == Some(DecryptionOutcome::Complete) => return HttpFacts::none(),
                _ => {}
            }
        }
        let f = self.tls.flights();
        // HTTP/2 counted a record each is an estimate like HTTP/1's
        // flights, unless bodies may be among the records counted; flights
        // of HTTP/2 (lengths unknown, or h2 only offered) are not requests.
        let confidence = if self.tls.alpn_h2() && (!f.per_record() || f.doubtful()) {
            Confidence::Low
        } else {
            Confidence::Estimate
        };
        let responses = f.exchanges.answered();
        let requests = f.requests;
        HttpFacts {
            method: HttpMethod::TlsFlights,
            estimated: true,
            confidence,
            requests,
            responses,
            ..HttpFacts::none().with(self.tls.exchanges_mut(), requests)
        }
    }
}

/// The `http` section read from messages: HTTP/1 or HTTP/2 on cleartext,
/// or (`decrypted`) inside TLS records opened with a key log.
fn messages(app: &mut App, decrypted: bool) -> HttpFacts {
    let method = |cleartext, inside_tls| {
        if decrypted {
            inside_tls
        } else {
            cleartext
        }
    };
    match app {
        App::Http1(h) => HttpFacts {
            method: method(HttpMethod::Http1, HttpMethod::TlsHttp1),
            lost_sync: h.lost_sync,
            connection_close: h.connection_close,
            names: Names::boxed(h.upgrade.clone().map(String::into_boxed_str), h.host.take()),
            requests: h.requests,
            responses: h.responses,
            ..HttpFacts::none().with(&mut h.exchanges, h.requests)
        },
        App::H2(h) => HttpFacts {
            method: method(HttpMethod::H2c, HttpMethod::TlsH2),
            lost_sync: h.lost_sync,
            names: Names::boxed(h.upgraded.then(|| Box::from("h2c")), h.host.take()),
            resets: h.resets,
            goaway: h.goaway,
            requests: h.requests,
            responses: h.responses,
            ..HttpFacts::none().with(&mut h.exchanges, h.requests)
        }
        .with_limit(*std::mem::take(&mut h.limit)),
        App::Undecided | App::Other => HttpFacts::none(),
    }
}

/// A connection's `http` section as its closed connection keeps it while
/// it lingers: its request list still the parsers' exchanges (80 bytes
/// each, with timestamps, against a record's `HttpRequest` at 152 with two
/// clocks per time), the rest of `HttpInfo` without its empty list and
/// with its confidence a byte and its `Upgrade` and host boxed together
/// (64 bytes against 96 and 24: with the TLS findings' box, the findings
/// a connection keeps fit 80 bytes, not 128).
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
    /// The `Upgrade` asked for and the first request's host, boxed
    /// together (most connections have neither: 8 bytes, not 32).
    names: Option<Box<Names>>,
    /// The listed requests (a boxed slice: the section fits 64 bytes).
    exchanges: Box<[Exchange]>,
    /// What the requests past the list left, and what the responses said
    /// of rate limiting (boxed together: most connections have neither).
    rest: Option<Box<Rest>>,
}

/// An `Upgrade` asked for, and the host the first request named.
#[derive(Debug, Default)]
struct Names {
    upgrade: Option<Box<str>>,
    host: Option<Box<str>>,
}

impl Names {
    /// The two, boxed when either is there.
    fn boxed(upgrade: Option<Box<str>>, host: Option<Box<str>>) -> Option<Box<Names>> {
        (upgrade.is_some() || host.is_some()).then(|| Box::new(Names { upgrade, host }))
    }
}

/// What a connection's request list does not hold, and its HTTP/2
/// stream limit and GOAWAY.
#[derive(Debug, Default)]
struct Rest {
    unlisted: Option<Box<Unlisted>>,
    limits: Option<Box<Limits>>,
    h2: Limit,
}

/// What the summary needs of a connection that its record does not hold:
/// the durations of the requests past the list, and the waits after a 429
/// (the record has only their distribution).
#[derive(Debug, Default)]
pub struct Aside {
    pub durations: Option<Samples>,
    pub waits_after_429: Option<Samples>,
    /// The times of the requests past the list, and of the ends of their
    /// responses that spoke of rate limiting, as the record's offsets
    /// (seconds into the capture), and how many more were not kept.
    pub past_marks: Vec<(f64, Option<(bool, u32)>)>,
    pub unmarked: u64,
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
            names: None,
            exchanges: Box::default(),
            rest: None,
        }
    }

    /// With the requests of `exchanges`, moved out, of `requests` counted.
    fn with(self, exchanges: &mut Exchanges, requests: u64) -> HttpFacts {
        let (listed, unlisted, limits) = exchanges.take();
        let some = unlisted.is_some() || limits.is_some();
        HttpFacts {
            list_truncated: (listed.len() as u64) < requests,
            exchanges: listed.into_boxed_slice(),
            rest: some.then(|| {
                Box::new(Rest {
                    unlisted,
                    limits,
                    ..Rest::default()
                })
            }),
            ..self
        }
    }

    /// With HTTP/2's stream limit and GOAWAY, where a frame said something
    /// of them.
    fn with_limit(mut self, h2: Limit) -> HttpFacts {
        if h2.seen() {
            self.rest.get_or_insert_default().h2 = h2;
        }
        self
    }

    /// Around the connection's first FIN or RST at `close`: the latest
    /// last byte of a response, and the requests that started after the
    /// close (listed, and past the list those whose times were kept).
    pub fn around_close(&self, close: Timestamp) -> (Option<Timestamp>, u64) {
        let unlisted = self.rest.as_ref().and_then(|r| r.unlisted.as_deref());
        let listed = self.exchanges.iter().filter_map(|e| e.response_last).max();
        let last = listed.max(unlisted.and_then(|u| u.last_response));
        let after = self.exchanges.iter().filter(|e| e.start > close).count();
        let past = unlisted.map_or(0, |u| {
            let started = |m: &&PastMark| m.end.is_none() && m.at > close;
            u.marks.iter().filter(started).count()
        });
        (last, (after + past) as u64)
    }

    /// The record's `http` section, its times made with `at`, and what the
    /// summary needs that the section does not hold.
    /// `end`: the connection's last packet, where a span at HTTP/2's
    /// stream limit still open ends.
    pub fn into_info(self, at: &dyn Fn(Timestamp) -> Instant, end: Timestamp) -> (HttpInfo, Aside) {
        let Rest {
            mut unlisted,
            limits,
            h2,
        } = self.rest.map(|r| *r).unwrap_or_default();
        let names = self.names.map(|n| *n).unwrap_or_default();
        let durations = unlisted.as_mut().map(|u| std::mem::take(&mut u.durations));
        let (past_marks, unmarked) = unlisted.as_mut().map_or((Vec::new(), 0), |u| {
            let marks = u.marks.iter().map(|m| (at(m.at).at, m.end)).collect();
            u.marks = Vec::new();
            (marks, u.unmarked)
        });
        let (rate_limit, waits_after_429) = limits.map(|l| l.into_record()).unzip();
        let aside = Aside {
            durations,
            waits_after_429,
            past_marks,
            unmarked,
        };
        let info = HttpInfo {
            method: self.method,
            requests: self.requests,
            responses: self.responses,
            estimated: self.estimated,
            confidence: self.confidence.as_str(),
            lost_sync: self.lost_sync,
            connection_close: self.connection_close,
            upgrade: names.upgrade.map(String::from),
            host: names.host.map(String::from),
            resets: self.resets,
            goaway: self.goaway,
            status_codes: status_codes(&self.exchanges, unlisted),
            rate_limit,
            http2: h2.into_record(end, at).map(Box::new),
            list: self.exchanges.iter().map(|e| request(e, at)).collect(),
            list_truncated: self.list_truncated,
        };
        (info, aside)
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

/// Final statuses of every request: the listed ones' and the others'
/// (whose counts are moved, not copied).
fn status_codes(listed: &[Exchange], unlisted: Option<Box<Unlisted>>) -> BTreeMap<u16, u64> {
    let mut counts = unlisted.map(|u| u.statuses).unwrap_or_default();
    for status in listed.iter().filter_map(|e| e.status) {
        count_status(&mut counts, status, 1);
    }
    counts
}

/// A request's record, its times given by `at`.
pub(crate) fn request(e: &Exchange, at: &dyn Fn(Timestamp) -> Instant) -> HttpRequest {
    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
    HttpRequest {
        method: text(&e.method),
        target: text(&e.target),
        start: at(e.start),
        status: e.status,
        retry_after: e.retry_after(),
        response_first: e.response_first.map(at),
        response_last: e.response_last.map(at),
        ttfb: e.response_first.map(|t| t.secs_since(e.start)),
        duration: e.response_last.map(|t| t.secs_since(e.start)),
        refused: e.refused(),
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
    pub fn new(cap: usize, keep: usize, keylog: Option<&Arc<KeyLog>>) -> Streams {
        Streams {
            client: Reassembler::new(cap),
            server: Reassembler::new(cap),
            analyzers: Box::new(Analyzers::new(cap, keep, keylog)),
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
