//! The summary's `verdict`: the one sentence that answers "does this
//! client reuse connections?" from the counts the summary built — the
//! requests, the connections and handshakes they needed, those opened for
//! none, and the QUIC handshakes beside them.
//!
//! Does not count anything itself.

use crate::record::{BesideHttp2, Distribution};

/// What the verdict is made of.
pub(super) struct Counts {
    pub(super) requests: u64,
    pub(super) estimated: u64,
    pub(super) low_confidence: u64,
    /// Connections that carried requests, and their handshakes.
    pub(super) connections: u64,
    pub(super) tcp: u64,
    pub(super) tls: bool,
    pub(super) tls_full: u64,
    pub(super) tls_resumed: u64,
    /// Connections that carried none, and their full TLS handshakes (a
    /// client racing connections open, and then using one).
    pub(super) idle: u64,
    pub(super) idle_tls_full: u64,
    /// UDP datagrams with QUIC handshake packets, the connections they
    /// opened, and their full and resumed handshakes.
    pub(super) quic: u64,
    pub(super) quic_connections: u64,
    pub(super) quic_full: u64,
    pub(super) quic_resumed: u64,
    /// QUIC connections a key log opened, and the HTTP/3 requests on them.
    pub(super) quic_decrypted: u64,
    pub(super) quic_requests: u64,
    /// The servers that reused no connection, most connections first
    /// (`summary.servers`' order).
    pub(super) unreused: Vec<Unreused>,
    /// The server's keep-alive timeout, when it closed most of the
    /// connections that carried requests after one idle time: how many,
    /// and that time.
    pub(super) server_timeout: Option<(u64, f64)>,
    /// Requests sent on connections the server had closed (not in
    /// `requests`), and on how many connections.
    pub(super) after_close: u64,
    pub(super) after_close_connections: u64,
    /// Connections opened while another to the same server sat idle.
    pub(super) opened_while_idle: u64,
    /// Connections opened after the client closed another to the same
    /// server that it could have kept, and of them those that carried no
    /// request.
    pub(super) redialed: (u64, u64),
    /// Connections opened beside an HTTP/2 connection to the same
    /// server, and of them those that raced its handshake.
    pub(super) beside_http2: (u64, u64),
    /// Connections the client needed beside HTTP/2 (not counted there):
    /// opened while every HTTP/2 connection to the server was at its
    /// stream limit, the lowest limit, and those opened while every one
    /// was going away.
    pub(super) http2_needed: (u64, Option<u32>, u64),
    /// HTTP/2 requests the server refused unprocessed (not in `requests`).
    pub(super) refused: u64,
    /// Full TLS handshakes that offered no session to resume after one
    /// with the same server had completed, and those whose offered session
    /// the server refused.
    pub(super) not_resumed: (u64, u64),
}

/// A server whose every request (two or more) had a connection of its own.
pub(super) struct Unreused {
    /// Its name for people ([`crate::record::ServerSummary::name`]).
    pub(super) name: String,
    pub(super) requests: u64,
    pub(super) connections: u64,
}

impl Unreused {
    /// `s` if it reused no connection.
    pub(super) fn of(s: &crate::record::ServerSummary) -> Option<Unreused> {
        let busy = s.connections - s.connections_unused;
        (s.requests > 1 && busy >= s.requests).then(|| Unreused {
            name: s.name(),
            requests: s.requests,
            connections: busy,
        })
    }
}

/// The headline sentence: how many connections the requests needed, and
/// how many more were opened for none; and the QUIC handshakes, whose
/// requests are not counted.
pub(super) fn verdict(c: &Counts) -> String {
    let over_tcp = tcp_verdict(c)
        + &unreused_clause(c)
        + &while_idle_clause(c)
        + &redialed_clause(c)
        + &beside_http2_clause(c)
        + &http2_needed_clause(c)
        + &not_resumed_clause(c)
        + &timeout_clause(c)
        + &after_close_clause(c)
        + &refused_clause(c);
    if c.quic == 0 {
        return over_tcp;
    }
    let n = c.quic_connections;
    let handshakes = match (c.quic_full, c.quic_resumed) {
        (0, 0) => String::new(),
        (full, 0) => format!(", {full} full handshake{}", plural_s(full)),
        (0, resumed) => format!(", {resumed} resumed"),
        (full, resumed) => format!(
            ", {full} full handshake{} and {resumed} resumed",
            plural_s(full)
        ),
    };
    let over_tcp = if c.requests == 0 {
        "no HTTP requests seen over TCP".to_owned()
    } else {
        over_tcp
    };
    let requests = match (c.quic_decrypted, c.quic_requests) {
        (0, _) => " (HTTP/3 requests not counted)".to_owned(),
        (d, r) => format!(
            ", {r} HTTP/3 request{} ({:.1} per connection the key log opened)",
            plural_s(r),
            r as f64 / d as f64
        ),
    };
    format!(
        "{over_tcp}; QUIC: {n} connection{}{handshakes}{requests}",
        plural_s(n)
    )
}

/// Where the requests as a whole reused connections, the server that
/// reused none (and how many more did not): what the whole hides when a
/// client pools connections to one host and not to another.
fn unreused_clause(c: &Counts) -> String {
    let no_reuse = c.connections >= c.requests && c.requests > 1;
    let Some(first) = c.unreused.first().filter(|_| !no_reuse) else {
        return String::new();
    };
    let others = match c.unreused.len() - 1 {
        0 => String::new(),
        n => format!(" (and to {n} more server{})", plural_s(n as u64)),
    };
    format!(
        "; but no reuse to {}: {} requests on {} connections{others}",
        first.name, first.requests, first.connections
    )
}

/// Connections a pool could have saved: opened while another to the same
/// server had no request outstanding, from before their SYN to past their
/// first request.
fn while_idle_clause(c: &Counts) -> String {
    match c.opened_while_idle {
        0 => String::new(),
        n => format!(
            "; {} opened while another to the same server sat idle",
            connections_were(n)
        ),
    }
}

/// Connections a client that kept its connections would not have opened:
/// after it closed another to the same server that it could have kept.
fn redialed_clause(c: &Counts) -> String {
    let (n, none) = c.redialed;
    let carried = match none {
        0 => String::new(),
        m if m == n => " (none of them carried a request)".to_owned(),
        m => format!(" ({m} carried no request)"),
    };
    match n {
        0 => String::new(),
        n => format!(
            "; {} opened after the client closed another to the same server that it could have kept{carried}",
            connections_were(n)
        ),
    }
}

/// `1 connection was`, `4 connections were`.
fn connections_were(n: u64) -> String {
    match n {
        1 => "1 connection was".to_owned(),
        n => format!("{n} connections were"),
    }
}

/// Connections HTTP/2 did not need: opened while an HTTP/2 connection to
/// the same server was open, most of them (Java's HttpClient, OkHttp)
/// while it was still in its handshake.
fn beside_http2_clause(c: &Counts) -> String {
    let (n, raced) = c.beside_http2;
    let when = BesideHttp2::raced_words(n, raced).map_or(String::new(), |w| format!(" ({w})"));
    match n {
        0 => String::new(),
        n => format!(
            "; {} opened beside an HTTP/2 connection to the same server{when}",
            connections_were(n)
        ),
    }
}

/// Connections HTTP/2 could not have spared, which explain a low reuse:
/// `; 4 connections were needed at the server's limit of 2 concurrent
/// HTTP/2 streams, 1 after a GOAWAY`.
fn http2_needed_clause(c: &Counts) -> String {
    let (at_limit, limit, after_goaway) = c.http2_needed;
    let limit = limit.map_or("the server's limit of".to_owned(), |l| {
        format!("the server's limit of {l}")
    });
    let at = format!("at {limit} concurrent HTTP/2 streams");
    match (at_limit, after_goaway) {
        (0, 0) => String::new(),
        (n, 0) => format!("; {} needed {at}", connections_were(n)),
        (0, g) => format!(
            "; {} needed after a GOAWAY closed the HTTP/2 connection to new streams",
            connections_were(g)
        ),
        (n, g) => format!("; {} needed {at}, {g} after a GOAWAY", connections_were(n)),
    }
}

/// Full TLS handshakes a client could have spared: it offered no session
/// though it had completed a handshake with the server before (python's
/// `ssl` keeps none across connections unless given one), or the server
/// refused the one it offered.
fn not_resumed_clause(c: &Counts) -> String {
    let (not_offered, refused) = c.not_resumed;
    let mut text = match not_offered {
        0 => String::new(),
        1 => "; 1 full TLS handshake offered no session to resume, though one with the same server had completed before".to_owned(),
        n => format!("; {n} full TLS handshakes offered no session to resume, though one with the same server had completed before"),
    };
    match refused {
        0 => {}
        1 => text.push_str("; the server refused 1 session offered for resumption"),
        n => text.push_str(&format!(
            "; the server refused {n} sessions offered for resumption"
        )),
    }
    text
}

/// A server's keep-alive timeout: when it closed at least half the
/// connections that carried requests, each after the same idle time
/// (within a tenth, and 100 ms or more: not a `Connection: close`), a
/// client that pauses longer pays a handshake per pause.
pub(crate) fn server_timeout(by_server: &Distribution, busy: u64) -> Option<(u64, f64)> {
    let (Some(min), Some(median), Some(max)) = (by_server.min, by_server.median, by_server.max)
    else {
        return None;
    };
    let n = by_server.count;
    (n >= 2 && 2 * n >= busy && median >= 0.1 && max - min <= median / 10.0).then_some((n, median))
}

fn timeout_clause(c: &Counts) -> String {
    let Some((n, idle)) = c.server_timeout else {
        return String::new();
    };
    // At least 100 ms (`server_timeout`).
    let idle = if idle >= 1.0 {
        format!("{idle:.2}s")
    } else {
        format!("{:.0}ms", idle * 1e3)
    };
    format!("; the server closed {n} of them after {idle} idle (its keep-alive timeout)")
}

/// The requests a pool sent on connections the server had closed: each a
/// round trip lost, never answered (a client that retries sends it again
/// on a new connection, where it counts).
fn after_close_clause(c: &Counts) -> String {
    match (c.after_close, c.after_close_connections) {
        (0, _) => String::new(),
        (n, conns) => format!(
            "; {n} more {} sent on {} the server had closed, never answered",
            if n == 1 { "was" } else { "were" },
            if conns == 1 {
                "a connection".to_owned()
            } else {
                format!("{conns} connections")
            }
        ),
    }
}

/// The HTTP/2 requests the server refused unprocessed (REFUSED_STREAM,
/// or past its GOAWAY): sent, never served; a client that retries them
/// sends them again, where they count.
fn refused_clause(c: &Counts) -> String {
    match c.refused {
        0 => String::new(),
        n => format!(
            "; {n} more {} refused unprocessed by the server (HTTP/2)",
            if n == 1 {
                "request was"
            } else {
                "requests were"
            }
        ),
    }
}

/// "s" unless `n` is 1.
fn plural_s(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The verdict over TCP.
fn tcp_verdict(c: &Counts) -> String {
    let Counts {
        requests,
        estimated,
        connections,
        tcp,
        tls_full,
        tls_resumed,
        idle,
        idle_tls_full,
        ..
    } = *c;
    if requests == 0 {
        return "no HTTP requests seen".to_string();
    }
    let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let more = |n: u64| format!("{n} more connection{}", if n == 1 { "" } else { "s" });
    let unused = match (idle, idle_tls_full) {
        (0, _) => String::new(),
        (n, 0) => format!("; {} carried none", more(n)),
        (n, full) => format!(
            "; {}, {}, carried none",
            more(n),
            plural(full, "full TLS handshake")
        ),
    };
    let how = if c.low_confidence > 0 {
        " (estimated from TLS records; rough where HTTP/2 multiplexes)"
    } else if estimated == requests {
        " (estimated from TLS records)"
    } else if estimated > 0 {
        " (partly estimated from TLS records)"
    } else {
        ""
    };
    let head = format!(
        "{} used {}{how}",
        plural(requests, "request"),
        plural(connections, "connection")
    );
    let resumed = if tls_resumed > 0 {
        format!(
            ", {} resumed TLS {}",
            tls_resumed,
            if tls_resumed == 1 {
                "session"
            } else {
                "sessions"
            }
        )
    } else {
        String::new()
    };
    let per_conn = requests as f64 / connections.max(1) as f64;
    if connections >= requests && requests > 1 {
        let tls = if c.tls {
            format!(" and {:.2} full TLS", tls_full as f64 / requests as f64)
        } else {
            String::new()
        };
        format!(
            "{head}: no reuse — {:.2} TCP{tls} handshakes per request{resumed}{unused}",
            tcp as f64 / requests as f64
        )
    } else if per_conn < 1.5 && requests > 1 {
        format!("{head}: little reuse, {per_conn:.2} requests per connection{resumed}{unused}")
    } else if requests == 1 {
        format!("{head}{resumed}{unused}")
    } else if connections == 1 {
        format!("{head}: one connection reused for every request{resumed}{unused}")
    } else {
        format!("{head}: pooled, {per_conn:.1} requests per connection{resumed}{unused}")
    }
}
