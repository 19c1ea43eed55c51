//! Cleartext HTTP/1.1 text: request lines and headers, and status reasons.
//!
//! Owns: [`http_request`] and [`reason`].
//! Does not own: responses' headers and bodies or HTTP inside TLS, which
//! `plan.rs` builds as it plans each exchange.

use std::net::IpAddr;

use crate::rng::Rng;

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        304 => "Not Modified",
        404 => "Not Found",
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
