//! The summary's figures per server (`summary.servers`): each finished
//! connection's [`Tally`] added to its server's counters, a server being
//! the server address and port, the SNI and the overlay. Sums of durations
//! are kept in whole nanoseconds ([`NanoSum`]), so they do not depend on
//! the order connections finish in.
//!
//! Bounded: at most [`MAX_SERVERS`] servers are followed (those seen
//! first); connections to others are counted together. Does not see
//! records or packets: only what the tally carries.

use std::collections::{BTreeMap, HashMap};

use smallvec::SmallVec;

use super::{add_phases, phases_of, Tally, TlsHandshakes};
use crate::analyze::stats::NanoSum;
use crate::record::{
    CloseKind, ConnectionRecord, MeanMax, Overlay, PerRequest, ServerSummary, ServersNotListed,
    Side,
};

/// Servers followed one by one.
pub const MAX_SERVERS: usize = 4096;

/// Status classes, as `status_classes` names them: codes 100–599 by their
/// hundreds, the rest `other`.
const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];

/// Close kinds, in the order of `Counters::closes`.
const CLOSES: [CloseKind; 5] = [
    CloseKind::Fin,
    CloseKind::Rst,
    CloseKind::Open,
    CloseKind::Idle,
    CloseKind::Evicted,
];

/// Which server a connection went to: its server endpoint and SNI as text,
/// inline for the usual lengths (a connection's tally crosses threads, and
/// must not allocate for this); in cleartext, in place of an SNI, the host
/// its first request named ([`pool_host`]): a client pools by host name,
/// and virtual hosts share an address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServerId {
    server: SmallVec<[u8; 24]>,
    sni: Option<SmallVec<[u8; 32]>>,
    host: Option<SmallVec<[u8; 32]>>,
    overlay: Option<Overlay>,
}

/// The name a cleartext request's `host` gives its server, as a client
/// pools by it: without its port (to be lower-cased); `None` when it is
/// the server's own address (`http://127.0.0.1:8080/` names no host).
pub fn pool_host<'h>(host: &'h str, server: &str) -> Option<&'h str> {
    let name = match host.rsplit_once(':') {
        // `[::1]:8080`, `a.test:8080`; not a bare IPv6 address.
        Some((name, port))
            if port.bytes().all(|b| b.is_ascii_digit())
                && (name.starts_with('[') || !name.contains(':')) =>
        {
            name
        }
        _ => host,
    };
    let address = server.rsplit_once(':').map_or(server, |(a, _)| a);
    let own = bare(name).eq_ignore_ascii_case(bare(address));
    (!name.is_empty() && !own).then_some(name)
}

/// An address without the brackets of an IPv6 literal.
fn bare(address: &str) -> &str {
    address.trim_start_matches('[').trim_end_matches(']')
}

impl ServerId {
    /// The server as a hash: how the sweep across connections names it
    /// (`opened_while_idle`, `beside_http2` and `not_resumed` per server).
    pub fn key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }

    pub fn of(rec: &ConnectionRecord) -> ServerId {
        ServerId {
            server: SmallVec::from_slice(rec.server.as_bytes()),
            sni: rec
                .tls
                .as_ref()
                .and_then(|t| t.sni.as_deref())
                .map(|s| SmallVec::from_slice(s.as_bytes())),
            host: rec
                .http
                .host
                .as_deref()
                .filter(|_| rec.tls.is_none())
                .and_then(|h| pool_host(h, &rec.server))
                .map(|h| h.bytes().map(|b| b.to_ascii_lowercase()).collect()),
            overlay: rec.overlay,
        }
    }
}

/// One server's counters.
#[derive(Debug, Default)]
struct Counters {
    /// When it was first seen: the order of servers with equal counts.
    seen: usize,
    connections: u64,
    tcp_handshakes: u64,
    tls: TlsHandshakes,
    requests: u64,
    requests_estimated: u64,
    max_requests: u64,
    busy: u64,
    busy_tcp: u64,
    busy_tls_full: u64,
    to_first_request: NanoSum,
    setup_phases: [NanoSum; 4],
    tls_handshake: NanoSum,
    /// Final responses by class ([`CLASSES`]).
    classes: [u64; 6],
    responses_429: u64,
    /// Connections by how they closed ([`CLOSES`]).
    closes: [u64; 5],
    /// `close.idle` where the server closed first; requests after closes.
    closed_by_server: NanoSum,
    requests_after_close: u64,
}

/// Every server's counters.
#[derive(Debug, Default)]
pub struct Servers {
    servers: HashMap<ServerId, Counters>,
    not_listed: ServersNotListed,
}

impl Servers {
    /// Adds one finished connection to its server's counters.
    pub fn add(&mut self, t: &Tally) {
        let seen = self.servers.len();
        let c = match self.servers.get_mut(&t.server) {
            Some(c) => c,
            None if seen < MAX_SERVERS => {
                self.servers.entry(t.server.clone()).or_insert(Counters {
                    seen,
                    ..Counters::default()
                })
            }
            None => {
                self.not_listed.connections += 1;
                self.not_listed.requests += t.requests;
                return;
            }
        };
        c.connections += 1;
        c.tcp_handshakes += u64::from(t.complete);
        c.tls.add(t);
        c.tls_handshake
            .add(t.tls.as_ref().and_then(|tls| tls.handshake));
        c.requests += t.requests;
        if t.estimated {
            c.requests_estimated += t.requests;
        }
        c.max_requests = c.max_requests.max(t.requests);
        if t.requests > 0 {
            c.busy += 1;
            c.busy_tcp += u64::from(t.syn);
            c.busy_tls_full += u64::from(t.tls_full());
            c.to_first_request.add(t.to_first_request);
            add_phases(&mut c.setup_phases, t.setup_phases);
        }
        for &(code, n) in &t.status_codes {
            let class = usize::from(code / 100).clamp(1, CLASSES.len()) - 1;
            if let Some(count) = c.classes.get_mut(class) {
                *count += n;
            }
            if code == 429 {
                c.responses_429 += n;
            }
        }
        let close = CLOSES.iter().position(|&k| k == t.close);
        if let Some(count) = close.and_then(|k| c.closes.get_mut(k)) {
            *count += 1;
        }
        if let Some((Side::Server, idle)) = t.idle_close {
            c.closed_by_server.add(Some(idle));
        }
        c.requests_after_close += t.requests_after_close;
    }

    /// The servers, most connections first (then most requests, then the
    /// first seen), and what was left out.
    /// The servers, most connections first; `opened_while_idle` and
    /// `beside_http2`, those counts by [`ServerId::key`].
    pub fn finish(
        self,
        opened_while_idle: &HashMap<u64, u64>,
        beside_http2: &HashMap<u64, u64>,
        not_resumed: &HashMap<u64, (u64, u64)>,
    ) -> (Vec<ServerSummary>, Option<ServersNotListed>) {
        let mut servers: Vec<(ServerId, Counters)> = self.servers.into_iter().collect();
        servers.sort_unstable_by(|(_, a), (_, b)| {
            (b.connections, b.requests, a.seen).cmp(&(a.connections, a.requests, b.seen))
        });
        let list = servers
            .into_iter()
            .map(|(id, c)| {
                let of = |counts: &HashMap<u64, u64>| counts.get(&id.key()).copied().unwrap_or(0);
                let tls = not_resumed.get(&id.key()).copied().unwrap_or_default();
                let missed = (of(opened_while_idle), of(beside_http2), tls);
                summary(id, &c, missed)
            })
            .collect();
        let not_listed = (self.not_listed.connections > 0).then_some(self.not_listed);
        (list, not_listed)
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A server's figures; `missed`, its connections opened while another sat
/// idle and beside an HTTP/2 connection, and its full TLS handshakes not
/// resumed (not offered, refused).
fn summary(id: ServerId, c: &Counters, missed: (u64, u64, (u64, u64))) -> ServerSummary {
    let (opened_while_idle, beside_http2, (tls_not_offered, tls_refused)) = missed;
    let per = |n: u64| (c.requests > 0).then(|| n as f64 / c.requests as f64);
    let named = |names: &[&str], counts: &[u64]| -> BTreeMap<String, u64> {
        let pairs = names.iter().zip(counts).filter(|(_, &n)| n > 0);
        pairs.map(|(k, &n)| ((*k).to_owned(), n)).collect()
    };
    let status_classes = named(&CLASSES, &c.classes);
    let close = named(&CLOSES.map(CloseKind::as_str), &c.closes);
    ServerSummary {
        server: text(&id.server),
        sni: id.sni.as_deref().map(text),
        host: id.host.as_deref().map(text),
        overlay: id.overlay,
        connections: c.connections,
        connections_unused: c.connections - c.busy,
        tcp_handshakes: c.tcp_handshakes,
        tls_handshakes_full: c.tls.full,
        tls_handshakes_resumed: c.tls.resumed,
        tls_handshakes_failed: c.tls.failed,
        requests: c.requests,
        requests_estimated: c.requests_estimated,
        requests_per_connection: MeanMax {
            mean: Some(c.requests as f64 / c.connections as f64),
            max: Some(c.max_requests),
        },
        handshakes_per_request: PerRequest {
            tcp: per(c.busy_tcp),
            tls_full: per(c.busy_tls_full),
        },
        handshake_time: c.to_first_request.totals(),
        setup_phases: phases_of(&c.setup_phases),
        tls_handshake: c.tls_handshake.totals(),
        status_classes,
        responses_429: c.responses_429,
        close,
        closed_by_server: c.closed_by_server.totals(),
        requests_after_close: c.requests_after_close,
        opened_while_idle,
        beside_http2,
        tls_not_offered,
        tls_refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Anomalies;

    /// A finished connection to `server` carrying `requests`, one of them
    /// answered 429, its setup `setup` seconds.
    fn tally(server: &str, requests: u64, setup: f64) -> Tally {
        Tally {
            complete: true,
            syn: true,
            connect: None,
            overlay: None,
            close: CloseKind::Fin,
            syn_retransmissions: 0,
            anomalies: Anomalies::default(),
            tls: None,
            estimated: false,
            low_confidence: false,
            requests,
            to_first_request: (requests > 0).then_some(setup),
            setup_phases: None,
            durations: Vec::new(),
            unlisted_durations: None,
            status_codes: vec![(200, requests.saturating_sub(1)), (429, 1)],
            limits: None,
            marks: Default::default(),
            handshake_events: 0,
            server: ServerId {
                server: SmallVec::from_slice(server.as_bytes()),
                sni: None,
                host: None,
                overlay: None,
            },
            moments: Default::default(),
            idle_close: None,
            requests_after_close: 0,
            requests_refused: 0,
        }
    }

    #[test]
    fn most_connections_first_then_requests_then_the_first_seen() {
        let mut s = Servers::default();
        for (server, requests) in [("c:1", 1), ("a:1", 2), ("b:1", 1), ("b:1", 1), ("d:1", 1)] {
            s.add(&tally(server, requests, 0.001));
        }
        let (list, not_listed) = s.finish(&HashMap::new(), &HashMap::new(), &HashMap::new());
        let names: Vec<&str> = list.iter().map(|s| s.server.as_str()).collect();
        assert_eq!(names, ["b:1", "a:1", "c:1", "d:1"]);
        assert_eq!(not_listed, None);
        let b = &list[0];
        assert_eq!((b.connections, b.requests), (2, 2));
        assert_eq!(b.handshakes_per_request.tcp, Some(1.0));
        assert_eq!(b.responses_429, 2);
        assert_eq!(b.status_classes.get("4xx"), Some(&2));
        assert_eq!(
            b.status_classes.get("2xx"),
            None,
            "classes with no response left out"
        );
        assert_eq!(b.close.get("fin"), Some(&2));
    }

    #[test]
    fn durations_add_up_in_whole_nanoseconds_in_any_order() {
        let times = [0.1, 1e-9, 0.3, 2.5e-7, 7.0];
        let run = |order: &[usize]| {
            let mut s = Servers::default();
            for &i in order {
                s.add(&tally("a:1", 1, times[i]));
            }
            s.finish(&HashMap::new(), &HashMap::new(), &HashMap::new())
                .0
                .remove(0)
                .handshake_time
        };
        let forward = run(&[0, 1, 2, 3, 4]);
        assert_eq!(forward, run(&[4, 3, 2, 1, 0]));
        assert_eq!(forward.connections, 5);
        assert_eq!(forward.total, 7_400_000_251.0 / 1e9);
        assert_eq!(forward.max, Some(7.0));
    }

    #[test]
    fn servers_past_the_cap_are_counted_together() {
        let mut s = Servers::default();
        for i in 0..MAX_SERVERS + 3 {
            s.add(&tally(&format!("10.0.0.1:{i}"), 2, 0.0));
        }
        // A server followed goes on being counted as itself.
        s.add(&tally("10.0.0.1:0", 1, 0.0));
        let (list, not_listed) = s.finish(&HashMap::new(), &HashMap::new(), &HashMap::new());
        assert_eq!(list.len(), MAX_SERVERS);
        assert_eq!(list[0].server, "10.0.0.1:0");
        assert_eq!(list[0].connections, 2);
        assert_eq!(
            not_listed,
            Some(ServersNotListed {
                connections: 3,
                requests: 6
            })
        );
    }

    /// A cleartext request's host names its server without its port or
    /// case; the server's own address names none.
    #[test]
    fn hosts_name_servers_as_clients_pool_them() {
        let server = "127.0.0.1:8080";
        assert_eq!(pool_host("a.test:8080", server), Some("a.test"));
        assert_eq!(pool_host("a.test", server), Some("a.test"));
        assert_eq!(pool_host("127.0.0.1:8080", server), None);
        assert_eq!(pool_host("127.0.0.1", server), None);
        assert_eq!(pool_host("[::1]:8080", "[::1]:8080"), None);
        assert_eq!(pool_host("[::1]", "[::1]:8080"), None);
        assert_eq!(pool_host("::1", "[::1]:8080"), None);
        assert_eq!(pool_host("[::2]:8080", "[::1]:8080"), Some("[::2]"));
        assert_eq!(pool_host("A.Test:x", server), Some("A.Test:x"));
    }
}
