//! Which cleartext application protocol a connection's two byte streams
//! carry — HTTP/1.x, HTTP/2 (prior knowledge or an h2c Upgrade) or
//! something else — decided on the client's first bytes, and the parser
//! that then reads them. The same decider reads a TCP connection's bytes
//! and the plaintext of TLS records opened with a key log.
//!
//! Does not know about TLS or TCP: it is told whether the stream turned out
//! to be TLS, and is handed bytes and gaps.

use super::h2::H2;
use super::http::Http1;
use crate::record::Side;
use crate::time::Timestamp;

/// The protocol, once the first bytes decided it.
#[derive(Debug)]
pub(super) enum App {
    Undecided,
    Http1(Http1),
    H2(H2),
    Other,
}

/// Client bytes looked at to decide the protocol (the HTTP/2 preface is
/// 24 bytes; an HTTP/1 request line ends earlier or later).
const APP_PROBE: usize = 24;

/// One connection's protocol decider and parser.
#[derive(Debug)]
pub(super) struct Cleartext {
    pub(super) app: App,
    keep: usize,
    last_server_data: Option<Timestamp>,
    /// The client's first bytes, held back until the first line is whole,
    /// and when the last of them arrived.
    probe: Vec<u8>,
    probe_ts: Timestamp,
}

impl Cleartext {
    /// `keep` bounds the list of requests.
    pub(super) fn new(keep: usize) -> Cleartext {
        Cleartext {
            app: App::Undecided,
            keep,
            last_server_data: None,
            probe: Vec::new(),
            probe_ts: Timestamp::default(),
        }
    }

    pub(super) fn wants_data(&self) -> bool {
        match &self.app {
            App::Undecided => true,
            App::Http1(h) => h.wants_data(),
            App::H2(h) => h.wants_data(),
            App::Other => false,
        }
    }

    /// Bytes from `side`; `tls` says the stream turned out to be TLS (then
    /// it carries no cleartext protocol).
    pub(super) fn data(&mut self, side: Side, ts: Timestamp, bytes: &[u8], tls: bool) {
        if side == Side::Server {
            self.last_server_data = Some(ts);
        }
        if let App::Undecided = self.app {
            if side == Side::Client {
                // Decide on the first line, however it was segmented.
                self.probe.extend_from_slice(bytes);
                self.probe_ts = ts;
                if self.probe.len() < APP_PROBE && !self.probe.contains(&b'\n') {
                    return;
                }
                let probe = std::mem::take(&mut self.probe);
                self.app = self.decide(&probe, tls);
                return self.feed(side, ts, &probe);
            }
            if !self.probe.is_empty() {
                // The server answered before the client's first line was whole.
                self.decide_now(tls);
            } else if !tls && H2::starts_with_settings(bytes) {
                // Servers speak first only in HTTP/2 with prior knowledge
                // (SETTINGS before the client's preface arrives).
                self.app = App::H2(H2::prior_knowledge(self.keep));
            }
        }
        self.feed(side, ts, bytes);
    }

    /// Decides on the client bytes held so far (a gap, the server speaking,
    /// or the end came before the first line was whole) and feeds them.
    pub(super) fn decide_now(&mut self, tls: bool) {
        if matches!(self.app, App::Undecided) && !self.probe.is_empty() {
            let probe = std::mem::take(&mut self.probe);
            self.app = self.decide(&probe, tls);
            self.feed(Side::Client, self.probe_ts, &probe);
        }
    }

    /// What the client's first bytes say the protocol is.
    fn decide(&self, first: &[u8], tls: bool) -> App {
        if tls {
            App::Other
        } else if H2::looks_like_preface(first) {
            App::H2(H2::prior_knowledge(self.keep))
        } else if Http1::looks_like_request(first) {
            App::Http1(Http1::new(self.keep))
        } else {
            App::Other
        }
    }

    /// Hands bytes to the protocol's parser.
    fn feed(&mut self, side: Side, ts: Timestamp, bytes: &[u8]) {
        match &mut self.app {
            App::Http1(h) => {
                let used = h.data(side, ts, bytes);
                if h.switched()
                    && h.upgrade
                        .as_deref()
                        .is_some_and(|u| u.eq_ignore_ascii_case("h2c"))
                {
                    let upgraded = h.exchanges.last_mut().map(|e| e.clone());
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

    /// `len` bytes of `side`'s stream went missing.
    pub(super) fn gap(&mut self, side: Side, len: u64, tls: bool) {
        self.decide_now(tls);
        match &mut self.app {
            App::Http1(h) => h.gap(side, len),
            App::H2(h) => h.gap(side, len),
            App::Undecided | App::Other => {}
        }
    }

    /// The streams ended.
    pub(super) fn end(&mut self, tls: bool) {
        self.decide_now(tls);
        if let App::Http1(h) = &mut self.app {
            h.finish(self.last_server_data);
        }
    }
}

/// HTTP/2 after an h2c upgrade keeps the HTTP/1 request that asked for it
/// (its `101` was interim, so no response is carried over).
fn carry_over(h1: &Http1, mut h2: H2) -> H2 {
    h2.requests += h1.requests;
    h2.host = h1.host.clone();
    h2
}
