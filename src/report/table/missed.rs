//! The summary's lines on what a client did that it did not need to:
//! `missed reuse` (connections opened while another to the same server
//! sat idle), `redialed` (opened after the client closed one it could have
//! kept), `beside HTTP/2` (opened while an HTTP/2 connection to it was
//! open) and `not resumed` (full TLS handshakes that could have resumed),
//! shared with the HTML report's cards.
//!
//! Does not compute anything; it formats `OpenedWhileIdle`, `Redialed`,
//! `BesideHttp2` and `NotResumed`.

use crate::record::{BesideHttp2, Distribution, NotResumed, OpenedWhileIdle, Redialed};
use crate::report::{human_duration, plural};

/// Connections named on the `missed reuse` and `beside HTTP/2` lines.
const NAMED: usize = 8;

/// Connections a pool could have saved: `5 of 15 connections opened
/// while another to the same server sat idle, for a median 31.02ms at
/// their SYN (max 32.52ms) · their setup 7.10ms in total · connections
/// 11 beside 2, 12 beside 2, …` (by id, the idle one's after `beside`),
/// saying when the idle ones carried no request after (` · the idle ones
/// never used again`, ` · 3 beside one never used again`); `None` when
/// none was.
pub(crate) fn while_idle_text(o: &OpenedWhileIdle) -> Option<String> {
    let idle = spread(&o.idle, o.connections, |m, one| {
        format!("for {m} at {} SYN", if one { "its" } else { "their" })
    })?;
    let never = match o.idle_never_used_again {
        0 => String::new(),
        n if n == o.connections => " · the idle ones never used again".to_owned(),
        n => format!(" · {n} beside one never used again"),
    };
    Some(format!(
        "{} of {} connection{} opened while another to the same server sat idle, {idle}{never} · their setup {} in total · {}{}",
        o.connections,
        o.checked,
        plural(o.checked),
        human_duration(o.setup_total),
        listed(o.first.iter().map(|p| (p.connection, p.idle_connection)), o.connections, "beside"),
        short(o.out_of_order)
    ))
}

/// Connections HTTP/2 did not need: `4 of 5 connections that offered
/// HTTP/2 opened while an HTTP/2 connection to the same server was open,
/// all while it was still in its handshake · 3 carried no request · their
/// handshakes 623.09ms in total · connections 2 beside 1, 3 beside 1, …`
/// (by id, the HTTP/2 one's after `beside`), then those not counted,
/// the client needing them (` · not counted, needed: 4 at the server's
/// limit of 2 streams, 1 after a GOAWAY`), and those beside one whose
/// frames were sealed ([`sealed_text`]); `None` when none was
/// either.
pub(crate) fn beside_http2_text(b: &BesideHttp2) -> Option<String> {
    let n = b.connections;
    let needed = needed_text(b);
    if n == 0 {
        return needed.map(|needed| {
            format!(
                "none of {} connection{} that offered HTTP/2 opened while an HTTP/2 connection to the same server could take its requests{needed}",
                b.checked,
                plural(b.checked)
            )
        });
    }
    let raced = BesideHttp2::raced_words(n, b.raced).map_or(String::new(), |w| format!(", {w}"));
    let none = match b.carried_none {
        0 => String::new(),
        c if c == n && n == 1 => " · it carried no request".to_owned(),
        c if c == n => " · none carried a request".to_owned(),
        c => format!(" · {c} carried no request"),
    };
    let handshakes = match b.handshake.count {
        0 => String::new(),
        1 => format!(" · its handshake {}", human_duration(b.handshake_total)),
        _ => format!(
            " · their handshakes {} in total",
            human_duration(b.handshake_total)
        ),
    };
    Some(format!(
        "{n} of {} connection{} that offered HTTP/2 opened while an HTTP/2 connection to the same server was open{raced}{none}{handshakes} · {}{}{}{}",
        b.checked,
        plural(b.checked),
        listed(b.first.iter().map(|p| (p.connection, p.http2_connection)), n, "beside"),
        needed.unwrap_or_default(),
        sealed_text(
            n,
            b.sealed,
            ("HTTP/2 frames sealed", "beside one whose HTTP/2 frames are sealed"),
            "a stream limit or a GOAWAY may have made some needed"
        ),
        short(b.out_of_order)
    ))
}

/// What was counted without keys, of `n`, the `sealed` a key log could
/// take back: ` · {all}: {tail}` when all were, ` · 3 {some}: {tail}`
/// when some; empty when none was. Beside HTTP/2, the server's stream
/// limit and GOAWAY are in the frames; after a TLS 1.3 handshake, whether
/// the server issued a ticket.
fn sealed_text(n: u64, sealed: u64, (all, some): (&str, &str), tail: &str) -> String {
    match sealed {
        0 => String::new(),
        s if s == n => format!(" · {all}: {tail} (--keylog tells)"),
        s => format!(" · {s} {some}: {tail} (--keylog tells)"),
    }
}

/// The connections opened beside HTTP/2 ones the client could not use:
/// ` · not counted, needed: 4 at the server's limit of 2 streams, 1 after
/// a GOAWAY`; `None` when none was.
fn needed_text(b: &BesideHttp2) -> Option<String> {
    let limit = match b.stream_limit {
        Some(1) => "at the server's limit of 1 stream".to_owned(),
        Some(l) => format!("at the server's limit of {l} streams"),
        None => "at the server's stream limit".to_owned(),
    };
    let parts: Vec<String> = [
        (b.at_limit > 0).then(|| format!("{} {limit}", b.at_limit)),
        (b.after_goaway > 0).then(|| format!("{} after a GOAWAY", b.after_goaway)),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| format!(" · not counted, needed: {}", parts.join(", ")))
}

/// Full TLS handshakes a client could have spared: `4 of 5 full TLS
/// handshakes offered no session to resume, though one with the same
/// server had completed before · their handshakes 8.82ms in total ·
/// connections 2 after 1, 3 after 1, … · 1 offered a session the server
/// refused (4.10ms)`, saying when the earlier handshake's tickets were
/// sealed (TLS 1.3 without keys): ` · TLS 1.3 tickets sealed: the server
/// may have issued none (--keylog tells)`; `None` when none did either.
pub(crate) fn not_resumed_text(n: &NotResumed) -> Option<String> {
    let handshakes = |count: u64, total: f64| match count {
        1 => format!("its handshake {}", human_duration(total)),
        _ => format!("their handshakes {} in total", human_duration(total)),
    };
    let refused = match n.refused {
        1 => format!(
            "offered a session the server refused ({})",
            human_duration(n.refused_handshake_total)
        ),
        _ => format!(
            "offered a session the server refused ({} in all)",
            human_duration(n.refused_handshake_total)
        ),
    };
    let of = format!("of {} full TLS handshake{}", n.full, plural(n.full));
    let first = n.first.iter().map(|f| (f.connection, f.earlier_connection));
    match (n.not_offered, n.refused) {
        (0, 0) => None,
        (0, r) => Some(format!("{r} {of} {refused}")),
        (k, r) => Some(format!(
            "{k} {of} offered no session to resume, though one with the same server had completed before · {} · {}{}{}{}",
            handshakes(k, n.not_offered_handshake_total),
            listed(first, k, "after"),
            sealed_text(
                k,
                n.not_offered_after_sealed,
                ("TLS 1.3 tickets sealed", "after a TLS 1.3 handshake whose tickets are sealed"),
                "the server may have issued none"
            ),
            if r > 0 { format!(" · {r} {refused}") } else { String::new() },
            short(n.out_of_order)
        )),
    }
}

/// Connections a client that kept its connections would not have
/// opened: `11 of 54 connections opened after the client closed another
/// to the same server that it could have kept, a median 323µs after
/// that close (max 1.57ms) · 11 carried no request · connections 30
/// after 5, …` (by id, the closed one's after `after`); `None` when none
/// was.
pub(crate) fn redialed_text(r: &Redialed) -> Option<String> {
    let after = spread(&r.after_close, r.connections, |m, _| {
        format!("{m} after that close")
    })?;
    let none = match r.carried_none {
        0 => String::new(),
        n => format!(" · {n} carried no request"),
    };
    let pairs = r.first.iter().map(|p| (p.connection, p.closed_connection));
    Some(format!(
        "{} of {} connection{} opened after the client closed another to the same server that it could have kept, {after}{none} · {}{}",
        r.connections,
        r.checked,
        plural(r.checked),
        listed(pairs, r.connections, "after"),
        short(r.out_of_order)
    ))
}

/// A time over `n` connections in words: `say` given the one, or `a
/// median …` followed by ` (max …)` (and whether it is the one); `None`
/// without it.
fn spread(d: &Distribution, n: u64, say: impl Fn(&str, bool) -> String) -> Option<String> {
    let (med, max) = (human_duration(d.median?), human_duration(d.max?));
    Some(match n {
        1 => say(&med, true),
        _ => format!("{} (max {max})", say(&format!("a median {med}"), false)),
    })
}

/// The first [`NAMED`] of `pairs` (a connection, and the one it was
/// opened beside, or came after: `word`), of `total`: `connections 11
/// beside 2, 12 beside 2, …`.
fn listed(pairs: impl Iterator<Item = (u64, u64)>, total: u64, word: &str) -> String {
    let first: Vec<String> = pairs
        .take(NAMED)
        .map(|(conn, other)| format!("{conn} {word} {other}"))
        .collect();
    let more = if total > first.len() as u64 {
        ", …"
    } else {
        ""
    };
    format!(
        "connection{} {}{more}",
        plural(first.len() as u64),
        first.join(", ")
    )
}

/// Where marks came out of time order: ` (12 marks out of time order:
/// may be short)`.
fn short(out_of_order: u64) -> String {
    if out_of_order > 0 {
        format!(" ({out_of_order} marks out of time order: may be short)")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The connections the client needed end the line, and make one of
    /// their own when none was counted.
    #[test]
    fn the_needed_ones_end_the_beside_http2_line() {
        let mut b = BesideHttp2 {
            checked: 3,
            at_limit: 1,
            stream_limit: Some(1),
            after_goaway: 1,
            ..BesideHttp2::default()
        };
        assert_eq!(
            beside_http2_text(&b).as_deref(),
            Some("none of 3 connections that offered HTTP/2 opened while an HTTP/2 connection to the same server could take its requests · not counted, needed: 1 at the server's limit of 1 stream, 1 after a GOAWAY")
        );
        b.connections = 1;
        b.stream_limit = None;
        b.after_goaway = 0;
        b.first = vec![crate::record::BesideOne {
            connection: 3,
            http2_connection: 1,
            ..Default::default()
        }];
        let line = beside_http2_text(&b).expect("one counted");
        assert!(
            line.ends_with(
                "· connection 3 beside 1 · not counted, needed: 1 at the server's stream limit"
            ),
            "{line}"
        );
        b.at_limit = 0;
        assert!(!beside_http2_text(&b)
            .expect("one counted")
            .contains("needed"));
        b.connections = 0;
        assert_eq!(beside_http2_text(&b), None);
    }

    /// Those a key log could take back end the line: all, or some.
    #[test]
    fn what_is_sealed_is_said() {
        let b = BesideHttp2 {
            checked: 4,
            connections: 3,
            sealed: 2,
            ..BesideHttp2::default()
        };
        let line = beside_http2_text(&b).expect("counted");
        assert!(
            line.ends_with(" · 2 beside one whose HTTP/2 frames are sealed: a stream limit or a GOAWAY may have made some needed (--keylog tells)"),
            "{line}"
        );
        let n = NotResumed {
            full: 3,
            not_offered: 2,
            not_offered_after_sealed: 2,
            ..NotResumed::default()
        };
        let line = not_resumed_text(&n).expect("counted");
        assert!(
            line.ends_with(
                " · TLS 1.3 tickets sealed: the server may have issued none (--keylog tells)"
            ),
            "{line}"
        );
    }
}
