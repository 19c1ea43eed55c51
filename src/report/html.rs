//! The HTML report (`--html`): one self-contained file (inline CSS and
//! inline SVG, no scripts, no external resources) with, per capture, the
//! verdict and summary figures, a waterfall of connections like a browser's
//! network panel (hover tooltips are SVG `<title>` elements), histograms of
//! connect and TLS handshake times, and the per-connection table; with two
//! captures, a comparison (from `compare`) first.
//!
//! Does not compute statistics beyond binning for the histograms: the
//! figures come from `Summary`, the phases from `timeline::segments`. Every
//! string from a capture is escaped here (`esc`), as hostile input.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::compare::{self, Labeled};
use super::table::{
    phases_text, quic_cells, server_cells, server_name, QUIC_HEADS, SERVERS_SHOWN, SERVER_HEADS,
};
use super::timeline::{close_text, requests_text, tls_kind, Phase};
use super::{counts_text, human_bytes, human_duration, retry_after_text, server_text};
use crate::record::{ConnectionRecord, Distribution, QuicSummary, Summary, TlsInfo};

mod bars;
mod charts;
mod over_time;
use bars::histogram;
use charts::waterfall;
pub(crate) use over_time::{figure, open_charts, CHARTS};

/// Waterfall rows and table rows drawn at most, per capture.
pub use super::drawn::MAX_ROWS;

const FONT: &str = "system-ui,-apple-system,\"Segoe UI\",Roboto,\"DejaVu Sans\",Arial,sans-serif";

const CSS: &str = r#"
*{box-sizing:border-box}body{margin:0;background:#f3f4f6;color:#1f2328;font:14px/1.45 FONT}
main{max-width:1280px;margin:0 auto;padding:20px 24px 40px}h1{font-size:22px;margin:0 0 2px}
h1 small{font-weight:400;color:#656d76;font-size:14px;margin-left:10px}
h2{font-size:18px;margin:0 0 8px;overflow-wrap:anywhere}
h3{font-size:13px;margin:22px 0 8px;color:#424a53;text-transform:uppercase;letter-spacing:.05em}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:18px 20px;margin:18px 0;box-shadow:0 1px 2px rgba(0,0,0,.04)}
.tag{display:inline-block;background:#0969da;color:#fff;border-radius:4px;padding:0 7px;margin:0 8px 0 4px;font-size:14px}
.verdict{font-size:15px;background:#f6f8fa;border-left:4px solid #0969da;padding:8px 12px;margin:6px 0 14px;border-radius:0 4px 4px 0;overflow-wrap:anywhere}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:10px}
.card{border:1px solid #d8dee4;border-radius:6px;padding:8px 12px}
.card .v{font-size:22px;font-weight:600;font-variant-numeric:tabular-nums}
.card .k{color:#424a53;font-size:11.5px;text-transform:uppercase;letter-spacing:.03em}
.card .s{color:#656d76;font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:16px;font-size:12px;color:#424a53;margin:0 0 6px}
.legend i{display:inline-block;width:14px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.note{color:#9a6700;font-size:13px}svg{display:block;width:100%;height:auto}
svg text{font:11px FONT;fill:#424a53;font-variant-numeric:tabular-nums}svg .muted{fill:#8c959f}
.conn:hover .bg{fill:#ddf4ff}
.hists{display:grid;grid-template-columns:1fr 1fr;gap:24px;margin-top:18px}figure{margin:0}
figcaption{font-size:13px;color:#424a53;margin-bottom:4px}
.box{overflow:auto;border:1px solid #d8dee4;border-radius:6px}.scroll{max-height:640px}
table{border-collapse:collapse;width:100%;font-size:12.5px}
th,td{padding:4px 10px;border-bottom:1px solid #eaeef2;white-space:nowrap;text-align:left}
th{position:sticky;top:0;background:#f6f8fa;font-weight:600;color:#424a53}
td.n{text-align:right;font-variant-numeric:tabular-nums}tr:hover td{background:#f6f8fa}
.cmp{max-width:900px;margin-top:8px}details{margin-top:12px}.compare .v{font-size:19px}
summary{cursor:pointer;color:#0969da;font-size:13px}
.good,.card .good{color:#1a7f37;font-weight:600}.bad,.card .bad{color:#cf222e;font-weight:600}
footer{color:#8c959f;font-size:12px;text-align:center}
"#;

/// Escapes text for HTML text and attribute values; control characters
/// (not allowed in XML) become U+FFFD.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn color(p: Phase) -> &'static str {
    match p {
        Phase::Tcp => "#f0883e",
        Phase::Tls => "#a371f7",
        Phase::Hello => "#d8b9ff",
        Phase::Wait => "#2da44e",
        Phase::Transfer => "#218bff",
        Phase::Idle => "#afb8c1",
        Phase::Close => "#cf222e",
    }
}

/// An SVG rectangle with a tooltip (`title` is escaped here).
fn rect(h: &mut String, [x, y, w, ht]: [f64; 4], fill: &str, extra: &str, title: &str) {
    let _ = writeln!(
        h,
        "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{ht:.2}\" fill=\"{fill}\"{extra}>\
         <title>{}</title></rect>",
        esc(title)
    );
}

/// SVG text (escaped here).
fn text(h: &mut String, x: f64, y: f64, anchor: &str, class: &str, s: &str) {
    let _ = write!(
        h,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" class=\"{class}\">{}</text>",
        esc(s)
    );
}

/// Writes the whole document.
pub fn write(docs: &[Labeled], out: &mut dyn Write) -> io::Result<()> {
    let mut h = String::new();
    let title: Vec<&str> = docs.iter().map(|d| d.label.as_str()).collect();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>handshakes: {}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n\
         <h1>handshakes<small>TCP and TLS handshakes per request, per connection</small></h1>\n",
        esc(&title.join(" vs ")),
        CSS.replace("FONT", FONT)
    );
    match docs {
        [a, b] => compare::write_html(&mut h, a, b),
        [_, _, _, ..] => compare::many::write_html(&mut h, docs),
        _ => {}
    }
    for (i, doc) in docs.iter().enumerate() {
        let tag = if docs.len() > 1 {
            compare::many::letter(i).to_string()
        } else {
            String::new()
        };
        document(&mut h, doc, &tag);
    }
    let _ = write!(
        h,
        "<footer>handshakes {} · self-contained: no scripts, no external resources · \
         hover a bar for details</footer>\n</main>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
    out.write_all(h.as_bytes())
}

/// One summary card; `class` colours the small line (`good`, `bad` or ``).
pub(crate) fn card(h: &mut String, key: &str, value: &str, sub: &str, class: &str) {
    let (k, v, sub) = (esc(key), esc(value), esc(sub));
    let _ = writeln!(
        h,
        "<div class=\"card\"><div class=\"k\">{k}</div><div class=\"v\">{v}</div>\
         <div class=\"s {class}\">{sub}</div></div>"
    );
}

fn opt_dur(v: Option<f64>) -> String {
    v.map_or("-".to_string(), human_duration)
}

fn opt_ratio(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.2}"))
}

/// "p90 … · max …" of a distribution.
fn tail(d: &Distribution) -> String {
    match (d.p90, d.max) {
        (Some(p90), Some(max)) => {
            format!("p90 {} · max {}", human_duration(p90), human_duration(max))
        }
        _ => "none measured".to_string(),
    }
}

fn cards(h: &mut String, s: &Summary) {
    let (l, peak, hs) = (
        &s.request_latency,
        &s.peak_concurrent_connections,
        &s.handshake_time,
    );
    let (per_req, tls) = (&s.handshakes_per_request, s.tls_connections > 0);
    let rate = s
        .requests_per_second
        .map_or("-".into(), |r| format!("{r:.1}"));
    let (full, resumed, failed) = (
        s.tls_handshakes_full,
        s.tls_handshakes_resumed,
        s.tls_handshakes_failed,
    );
    let max_rpc = s.requests_per_connection.max.unwrap_or(0);
    let quic_times = s
        .quic
        .as_ref()
        .map(|q| q.handshake.clone())
        .unwrap_or_default();
    // With a key log: HTTP/3 requests, and their statuses or latency.
    let http3 = match s.quic.as_ref().filter(|q| q.decrypted > 0) {
        Some(q) => {
            let sub = match q.status_codes.is_empty() {
                true => format!("latency median {}", opt_dur(q.request_latency.median)),
                false => counts_text(&q.status_codes),
            };
            (true, q.requests.to_string(), sub)
        }
        None => (false, String::new(), String::new()),
    };
    let quic_per_request = s.quic.as_ref().and_then(|q| q.handshakes_per_request);
    // Rate limiting, where statuses were read (HTTP/3's with a key log).
    let rl = s.rate_limit.as_ref();
    let quic_rl = s.quic.as_ref().and_then(|q| q.rate_limit.as_ref());
    let retry_after = rl.map_or(String::new(), |r| {
        let n = r.connections_limited;
        let on = format!("on {n} connection{}", super::plural(n));
        match r.retry_after.is_empty() {
            true => format!("{on}, no Retry-After"),
            false => format!("{on} · Retry-After {}", retry_after_text(r)),
        }
    });
    let too_soon = rl.map_or(String::new(), |r| {
        format!(
            "same connection · {} requests while a Retry-After ran",
            r.requests_in_window
        )
    });
    let across = rl.and_then(|r| r.across_connections.as_ref());
    let across_sub = across.map_or(String::new(), |a| {
        format!(
            "{} on another connection · {} connections opened during one",
            a.requests_in_window_elsewhere, a.connections_opened_in_window
        )
    });
    // A capture of QUIC alone leaves out the cards only TCP fills.
    let tcp = s.connections > 0 || s.quic_connections == 0;
    let ic = &s.idle_closes;
    let closed = super::table::idle_closes_text(ic);
    let closes_count = (ic.by_client.count + ic.by_server.count).to_string();
    let owi = s.opened_while_idle.as_ref();
    let missed = owi.and_then(super::table::while_idle_text);
    let rd = s.redialed.as_ref();
    let redialed = rd.and_then(super::table::redialed_text);
    let bh2 = s.beside_http2.as_ref();
    let beside = bh2.and_then(super::table::beside_http2_text);
    let nr = s.not_resumed.as_ref();
    let not_resumed = nr.and_then(super::table::not_resumed_text);
    // Over those that carried any too, where some carried none.
    let rpc_sub = match super::per_connection_used(s) {
        Some(used) => format!("max {max_rpc} · {used:.2} per one that carried any"),
        None => format!("max {max_rpc}"),
    };
    // With the connections that carried none, where some did.
    let all = super::per_request_all(s).filter(|_| s.connections_unused > 0);
    let tcp_sub = match all {
        Some((all, _)) => format!(
            "1.00: no reuse · {all:.2} with the {} that carried none",
            s.connections_unused
        ),
        None => "1.00: no reuse".into(),
    };
    #[rustfmt::skip]
    let cards: Vec<(bool, &str, String, String)> = vec![
        (true, "requests", s.requests.to_string(), requests_sub(s)),
        (true, "connections", s.connections.to_string(), format!("{} TCP handshakes", s.tcp_handshakes)),
        (tcp, "TCP handshakes / request", opt_ratio(per_req.tcp), tcp_sub),
        (tls, "full TLS handshakes / request", opt_ratio(per_req.tls_full),
            format!("{full} full · {resumed} resumed · {failed} failed")),
        (tcp, "requests / connection", opt_ratio(s.requests_per_connection.mean), rpc_sub),
        (tcp, "setup time (SYN → 1st request)", human_duration(hs.total),
            format!("median {} per connection", opt_dur(hs.median))),
        (hs.phases.is_some(), "where setup went", hs.phases.as_ref().map_or(String::new(), |p| human_duration(p.total())), hs.phases.as_ref().map_or(String::new(), |p| phases_text(p, hs.connections))),
        (tcp, "connect (median)", opt_dur(s.connect.median), tail(&s.connect)),
        (tls, "TLS handshake (median)", opt_dur(s.tls_handshake.median), tail(&s.tls_handshake)),
        (tcp, "request latency (median)", opt_dur(l.median), tail(l)),
        (!s.status_codes.is_empty(), "responses with a status", s.status_codes.values().sum::<u64>().to_string(),
            counts_text(&s.status_codes)),
        (rl.is_some(), "responses 429", rl.map_or(String::new(), |r| r.responses_429.to_string()), retry_after),
        (rl.is_some(), "wait after a 429 (median)", opt_dur(rl.and_then(|r| r.wait_after_429.median)), too_soon),
        (across.is_some(), "requests while a Retry-After ran, any connection",
            across.map_or(String::new(), |a| a.requests_in_window.to_string()), across_sub),
        (s.packets.quic > 0, "QUIC connections", s.quic_connections.to_string(), quic_sub(s)),
        (quic_times.count > 0, "QUIC handshake (median)", opt_dur(quic_times.median), tail(&quic_times)),
        (http3.0, "HTTP/3 requests", http3.1, http3.2),
        (quic_rl.is_some(), "HTTP/3 responses 429", quic_rl.map_or(String::new(), |r| r.responses_429.to_string()),
            quic_rl.map_or(String::new(), |r| format!("{} requests while a Retry-After ran", r.requests_in_window))),
        (quic_per_request.is_some(), "QUIC handshakes / HTTP/3 request", opt_ratio(quic_per_request),
            "1.00: no reuse".into()),
        (closed.is_some(), "closed after the last response", closes_count, closed.unwrap_or_default()),
        (missed.is_some(), "opened while another sat idle", owi.map_or(String::new(), |o| o.connections.to_string()), missed.unwrap_or_default()),
        (redialed.is_some(), "opened after the client closed one", rd.map_or(String::new(), |r| r.connections.to_string()), redialed.unwrap_or_default()),
        (beside.is_some(), "opened beside an HTTP/2 connection", bh2.map_or(String::new(), |b| b.connections.to_string()), beside.unwrap_or_default()),
        (not_resumed.is_some(), "full TLS handshakes not resumed", nr.map_or(String::new(), |n| (n.not_offered + n.refused).to_string()), not_resumed.unwrap_or_default()),
        (tcp, "peak concurrency", peak.connections.to_string(), "connections".into()),
        (tcp, "requests / second", rate, format!("over {}", human_duration(s.span))),
    ];
    h.push_str("<div class=\"cards\">\n");
    for (_, k, v, sub) in cards.iter().filter(|c| c.0) {
        card(h, k, v, sub, "");
    }
    h.push_str("</div>\n");
}

/// The requests card's second line: how many were read exactly, and
/// those the server refused unprocessed (HTTP/2), which it leaves out.
fn requests_sub(s: &Summary) -> String {
    let refused = super::table::refused_text(s).map_or(String::new(), |r| format!(" · {r}"));
    format!("{} exact{refused}", s.requests_exact)
}

/// The QUIC card's second line: its handshakes by kind, and whether a key
/// log opened its HTTP/3.
fn quic_sub(s: &Summary) -> String {
    match &s.quic {
        Some(q) if q.decrypted > 0 => format!(
            "{} full · {} resumed · {} opened by the key log",
            q.handshakes_full, q.handshakes_resumed, q.decrypted
        ),
        Some(q) => format!(
            "{} full · {} resumed · HTTP/3 requests not counted",
            q.handshakes_full, q.handshakes_resumed
        ),
        None => "HTTP/3 requests not counted".into(),
    }
}

fn document(h: &mut String, doc: &Labeled, tag: &str) {
    let s = doc.summary;
    let id = match tag {
        "" => "doc".to_string(),
        t => format!("doc-{}", t.to_lowercase()),
    };
    let _ = write!(h, "<section class=\"doc\" id=\"{id}\">\n<h2>");
    if !tag.is_empty() {
        let _ = write!(h, "<span class=\"tag\">{tag}</span>");
    }
    let _ = writeln!(
        h,
        "{}</h2>\n<p class=\"verdict\">{}</p>",
        esc(&doc.label),
        esc(&s.verdict)
    );
    if let Some(sel) = &s.selection {
        let _ = writeln!(h, "<p class=\"note\">only: {}</p>", esc(&sel.describe()));
    }
    cards(h, s);
    for w in &s.warnings {
        let _ = writeln!(h, "<p class=\"note\">warning: {}</p>", esc(w));
    }
    if s.servers.len() > 1 {
        servers_table(h, s);
    }
    over_time::over_time(h, &s.over_time);
    h.push_str("<h3>Connections over time</h3>\n<div class=\"legend\">");
    use Phase::{Close, Hello, Idle, Tcp, Tls, Transfer, Wait};
    let quic = s.quic.as_ref().is_some_and(|q| !q.list.is_empty());
    for p in [Tcp, Hello, Tls, Wait, Transfer, Idle, Close] {
        let name = match p {
            Tls if quic => "TLS or QUIC handshake",
            _ => p.name(),
        };
        let (c, name) = (color(p), esc(name));
        let _ = write!(h, "<span><i style=\"background:{c}\"></i>{name}</span>");
    }
    if !s.passed_over().is_empty() {
        let _ = write!(
            h,
            "<span><i style=\"background:{}\"></i>opened while another sat idle</span>",
            charts::PASSED_OVER
        );
    }
    if !s.beside_http2().is_empty() {
        let _ = write!(
            h,
            "<span><i style=\"background:{}\"></i>opened beside an HTTP/2 connection</span>",
            charts::BESIDE_HTTP2
        );
    }
    let drawn = &doc.drawn;
    let h2 = || drawn.first.iter().filter_map(|r| r.http.http2.as_deref());
    if h2().any(|l| !l.at_limit_spans.is_empty()) {
        let _ = write!(
            h,
            "<span><i style=\"background:{}\"></i>HTTP/2 streams at the server's limit</span>",
            charts::AT_LIMIT
        );
    }
    if h2().any(|l| l.goaway.is_some()) {
        let _ = write!(
            h,
            "<span><i style=\"background:{}\"></i>HTTP/2 GOAWAY</span>",
            charts::GOAWAY
        );
    }
    h.push_str("</div>\n");
    let (quic, quic_total) = s
        .quic
        .as_ref()
        .map_or((&[][..], 0), |q| (&q.list[..], q.connections));
    waterfall(h, &drawn.first, drawn.total, quic, quic_total, s);
    h.push_str("<div class=\"hists\">\n");
    histogram(
        h,
        "Connect time (SYN → ACK)",
        &drawn.connects,
        color(Phase::Tcp),
    );
    histogram(
        h,
        "TLS handshake time (ClientHello → complete)",
        &drawn.tls,
        color(Phase::Tls),
    );
    h.push_str("</div>\n<h3>Connections</h3>\n");
    table(h, &drawn.first, drawn.total);
    if let Some(q) = s.quic.as_ref().filter(|q| !q.list.is_empty()) {
        quic_table(h, q);
    }
    h.push_str("</section>\n");
}

/// The servers with most connections (the text report's rows), when the
/// connections went to more than one.
fn servers_table(h: &mut String, s: &Summary) {
    h.push_str("<h3>Servers</h3>\n<div class=\"box scroll\"><table>\n<thead><tr>");
    for head in SERVER_HEADS.iter().chain(&["server (SNI or host)"]) {
        let _ = write!(h, "<th>{}</th>", esc(head));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for server in s.servers.iter().take(SERVERS_SHOWN) {
        h.push_str("<tr>");
        for c in server_cells(server) {
            let _ = write!(h, "<td class=\"n\">{}</td>", esc(&c));
        }
        let _ = writeln!(h, "<td>{}</td></tr>", esc(&server_name(server)));
    }
    h.push_str("</tbody></table></div>\n");
    let more = match s.servers.len().saturating_sub(SERVERS_SHOWN) {
        0 => String::new(),
        n => format!(
            "… {n} more servers; the JSON report lists every one (<code>summary.servers</code>). "
        ),
    };
    let _ = writeln!(
        h,
        "<p class=\"note\">{more}Setup: the mean time from SYN to the first request byte. Closed: the mean idle time before the server closed a connection. Missed: connections opened while another to the server sat idle.</p>"
    );
}

/// The QUIC connections the summary lists (the first `MAX_ROWS`), with the
/// cells of the text report's QUIC table.
fn quic_table(h: &mut String, q: &QuicSummary) {
    h.push_str("<h3>QUIC connections (handshakes read from their Initial packets)</h3>\n");
    h.push_str("<div class=\"box scroll\"><table>\n<thead><tr>");
    for head in QUIC_HEADS {
        let _ = write!(h, "<th>{}</th>", esc(head));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for rec in q.list.iter().take(MAX_ROWS) {
        h.push_str("<tr>");
        for (i, c) in quic_cells(rec).iter().enumerate() {
            // The id, the two times and the requests are numbers.
            let class = if matches!(i, 0 | 7 | 8 | 9) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(h, "<td{class}>{}</td>", esc(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
    let more = q
        .connections
        .saturating_sub(q.list.len().min(MAX_ROWS) as u64);
    if more > 0 {
        let _ = writeln!(
            h,
            "<p class=\"note\">… {more} more QUIC connections, counted in the figures above.</p>"
        );
    }
}

/// The table of `records` (the first `MAX_ROWS` of `total`).
fn table(h: &mut String, records: &[ConnectionRecord], total: u64) {
    h.push_str(
        "<div class=\"box scroll\"><table>\n<thead><tr><th>id</th><th>client</th><th>server</th>\
         <th>start</th><th>connect</th><th>TLS</th><th>TLS hs</th><th>SNI</th><th>ALPN</th>\
         <th>reqs</th><th>up</th><th>down</th><th>close</th></tr></thead>\n<tbody>\n",
    );
    for rec in records.iter().take(MAX_ROWS) {
        let tls = rec.tls.as_ref();
        let alpn = tls.and_then(TlsInfo::alpn_shown);
        let connect = match rec.tcp.handshake.connect {
            Some(c) => human_duration(c),
            None if rec.partial => "no SYN".into(),
            None => "-".into(),
        };
        let sni = tls
            .and_then(|t| t.sni.clone())
            .unwrap_or_else(|| "-".into());
        let cells = [
            (true, rec.id.to_string()),
            (false, rec.client.clone()),
            (false, server_text(rec)),
            (true, format!("{:.6}", rec.start.at)),
            (true, connect),
            (false, tls_kind(rec)),
            (true, opt_dur(tls.and_then(|t| t.handshake))),
            (false, sni),
            (false, alpn.unwrap_or_else(|| "-".into())),
            (true, requests_text(rec)),
            (true, human_bytes(rec.tcp.bytes.client)),
            (true, human_bytes(rec.tcp.bytes.server)),
            (false, close_text(rec)),
        ];
        h.push_str("<tr>");
        for (num, c) in cells {
            let class = if num { " class=\"n\"" } else { "" };
            let _ = write!(h, "<td{class}>{}</td>", esc(&c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
    if total > records.len() as u64 {
        let _ = writeln!(
            h,
            "<p class=\"note\">Showing the first {MAX_ROWS} of {total} connections; the JSON report has every one.</p>"
        );
    }
}
