//! Cleartext HTTP/1.1 exchanges: request lines and headers, responses with
//! Content-Length or chunked bodies, and status reasons, for the web mix
//! (browsers, curl) and the short mix (Java clients against an API).
//!
//! Owns: [`web_exchange`], [`api_exchange`], [`http_request`], [`reason`].
//! Does not own: when an exchange happens or HTTP inside TLS (`plan.rs`),
//! or the body sizes (`mix.rs`).

use std::net::IpAddr;

use crate::flight::Flight;
use crate::rng::Rng;

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        304 => "Not Modified",
        404 => "Not Found",
        429 => "Too Many Requests",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// A cleartext HTTP/1.1 request, and the length of its body for a POST.
pub(crate) fn http_request(rng: &mut Rng, server: IpAddr, close: bool) -> (Vec<u8>, Option<usize>) {
    const AGENTS: [&str; 4] = [
        "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
        "curl/8.4.0",
        "Java-http-client/21.0.1",
        "python-requests/2.31.0",
    ];
    let host = match server {
        IpAddr::V4(_) => "www.example.com",
        IpAddr::V6(_) => "v6.example.com",
    };
    let n = rng.below(1_000_000);
    let path = match rng.below(5) {
        0 => "/".to_string(),
        1 => format!("/static/js/app.{n:06x}.js"),
        2 => format!("/api/v1/items/{n}?fields=id,name&page={}", n % 17),
        3 => format!("/images/{n}.jpg"),
        _ => format!("/articles/{}/comments", n % 5000),
    };
    let post = rng.chance(0.1).then(|| rng.range(20, 4000) as usize);
    let mut text = format!(
        "{} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {}\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n",
        if post.is_some() { "POST" } else { "GET" },
        rng.pick(&AGENTS),
    );
    if let Some(len) = post {
        text.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {len}\r\n"
        ));
    }
    if close {
        text.push_str("Connection: close\r\n");
    }
    text.push_str("\r\n");
    (text.into_bytes(), post)
}

/// Appends `body` bytes of filler to `resp`, in chunks when `chunked`.
/// Ends a response's header block and adds its body: none for a bodiless
/// status, chunked, or with a Content-Length.
fn end_response(
    rng: &mut Rng,
    resp: &mut Flight,
    mut head: String,
    bodiless: bool,
    chunked: bool,
    body: usize,
) {
    if bodiless {
        head.push_str("\r\n");
        resp.lit(head.into_bytes());
    } else if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        resp.lit(head.into_bytes());
        body_bytes(rng, resp, body, true);
    } else {
        head.push_str(&format!("Content-Length: {body}\r\n\r\n"));
        resp.lit(head.into_bytes());
        body_bytes(rng, resp, body, false);
    }
}

fn body_bytes(rng: &mut Rng, resp: &mut Flight, body: usize, chunked: bool) {
    if chunked {
        let mut left = body;
        while left > 0 {
            let n = left.min(rng.range(2000, 9000) as usize);
            left -= n;
            resp.lit(format!("{n:x}\r\n").into_bytes());
            resp.fill(rng, false, n);
            resp.lit(b"\r\n".to_vec());
        }
        resp.lit(b"0\r\n\r\n".to_vec());
    } else {
        resp.fill(rng, false, body);
    }
}

/// A web request to `server` and its response (`body` bytes for a 200),
/// appended to `req` and `resp`. True when the response is chunked.
pub(crate) fn web_exchange(
    rng: &mut Rng,
    server: IpAddr,
    close_header: bool,
    body: usize,
    req: &mut Flight,
    resp: &mut Flight,
) -> bool {
    let (text, post) = http_request(rng, server, close_header);
    req.lit(text);
    if let Some(n) = post {
        req.fill(rng, false, n);
    }
    let chunked = rng.chance(0.25);
    let status = match rng.below(100) {
        0..88 => 200,
        88..94 => 304,
        94..98 => 404,
        _ => 500,
    };
    let body = match status {
        304 => 0,
        404 | 500 => rng.range(100, 600) as usize,
        _ => body,
    };
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nServer: nginx/1.24.0\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\nContent-Type: text/html; charset=utf-8\r\n",
        reason(status)
    );
    if close_header {
        head.push_str("Connection: close\r\n");
    } else {
        head.push_str("Connection: keep-alive\r\n");
    }
    end_response(rng, resp, head, status == 304, chunked, body);
    chunked
}

/// An API call to `server:port` and its response (`body` bytes for a
/// 200 or 201; 429 when rate-limited), appended to `req` and `resp`. Most
/// clients are `HttpURLConnection` with keep-alive off, whose requests say
/// `Connection: close` when `close_header`. True when the response is
/// chunked.
pub(crate) fn api_exchange(
    rng: &mut Rng,
    server: IpAddr,
    port: u16,
    close_header: bool,
    body: usize,
    req: &mut Flight,
    resp: &mut Flight,
) -> bool {
    const AGENTS: [&str; 5] = [
        "Java/17.0.9",
        "Java/17.0.9",
        "Java/11.0.21",
        "Java/1.8.0_392",
        "Apache-HttpClient/4.5.14 (Java/17.0.9)",
    ];
    let host = match (server, port) {
        (IpAddr::V4(_), 80) => "api.internal.example.com",
        (IpAddr::V4(_), _) => "api.internal.example.com:8080",
        (IpAddr::V6(_), _) => "api6.internal.example.com",
    };
    let id = rng.below(10_000_000);
    let (method, path) = match rng.below(10) {
        0..5 => ("GET", format!("/v2/accounts/{id}/balance")),
        5..7 => ("GET", format!("/v2/quotes?symbol=X{}&limit=20", id % 997)),
        7..9 => ("POST", "/v2/orders".to_string()),
        _ => ("PUT", format!("/v2/orders/{id}/status")),
    };
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nUser-Agent: {}\r\nHost: {host}\r\nAccept: text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2\r\n",
        rng.pick(&AGENTS)
    );
    let post = (method != "GET").then(|| rng.range(40, 1500) as usize);
    if let Some(len) = post {
        text.push_str(&format!(
            "Content-type: application/json\r\nContent-Length: {len}\r\n"
        ));
    }
    if close_header {
        text.push_str("Connection: close\r\n");
    }
    text.push_str("\r\n");
    req.lit(text.into_bytes());
    if let Some(n) = post {
        req.fill(rng, false, n);
    }
    let status = match rng.below(100) {
        0..74 => 200,
        74..79 => 201,
        79..83 => 204,
        83..93 => 429,
        93..96 => 404,
        96..98 => 500,
        _ => 503,
    };
    let body = match status {
        204 => 0,
        429 => rng.range(40, 120) as usize,
        404 | 500 | 503 => rng.range(60, 300) as usize,
        _ => body,
    };
    let chunked = status != 204 && rng.chance(0.15);
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\nContent-Type: application/json\r\nX-RateLimit-Limit: 100\r\nX-RateLimit-Remaining: {}\r\n",
        reason(status),
        if status == 429 { 0 } else { rng.range(1, 99) }
    );
    if status == 429 {
        head.push_str(&format!("Retry-After: {}\r\n", rng.range(1, 30)));
    }
    if close_header {
        head.push_str("Connection: close\r\n");
    }
    end_response(rng, resp, head, status == 204, chunked, body);
    chunked
}
