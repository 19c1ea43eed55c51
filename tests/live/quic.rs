//! `handshakes live` on HTTP/3: a real aioquic client and server
//! (scripts/quic_client.py, scripts/quic_server.py) on loopback, the key
//! log written by the client a line at a time while it is captured (the
//! file does not exist when the capture starts). The QUIC connection is
//! printed as its `{"quic": …}` line about 3 s after the client's
//! CONNECTION_CLOSE — while the capture still runs, not at the stop — with
//! the requests the client made, read with the key log.
//!
//! aioquic comes from PyPI, not Debian: the python that imports it is
//! `HANDSHAKES_AIOQUIC_PYTHON` (CI makes a virtual environment for it), or
//! the recording script's /tmp/quicenv; without one the test says it
//! skipped (a failure under `HANDSHAKES_REQUIRE_ALL`).

use std::net::UdpSocket;

use super::traffic::{str_at, u64_at, Live};
use super::*;

/// The recording script's virtual environment (scripts/record-quic-captures.sh).
const QUIC_VENV_PYTHON: &str = "/tmp/quicenv/bin/python";

/// A python that imports aioquic, if there is one.
fn aioquic_python() -> Option<String> {
    let python = std::env::var("HANDSHAKES_AIOQUIC_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| QUIC_VENV_PYTHON.to_string());
    let imports = Command::new(&python)
        .args(["-c", "import aioquic"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    imports.then_some(python)
}

/// A UDP port nobody uses right now.
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("bind an ephemeral UDP port")
        .port()
}

/// Whether a UDP socket is bound to 127.0.0.1:`port` (from /proc/net/udp,
/// so the check sends no packet).
fn bound_udp(port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/udp")
        .map(|t| {
            t.lines()
                .skip(1)
                .any(|l| l.split_whitespace().nth(1) == Some(&local))
        })
        .unwrap_or(false)
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

#[test]
fn live_prints_an_http3_connection_once_it_has_closed() {
    if !can_capture("live_prints_an_http3_connection_once_it_has_closed") {
        return;
    }
    let Some(python) = aioquic_python() else {
        skip_or_fail(
            "aioquic",
            "no python imports it: set HANDSHAKES_AIOQUIC_PYTHON, or `python3 -m venv /tmp/quicenv && /tmp/quicenv/bin/pip install aioquic`",
        );
        return;
    };
    let dir = Scratch::new();
    self_signed_certificate(&dir);
    let port = free_udp_port();
    let _server = Proc::spawn(
        "quic_server.py",
        Command::new(&python)
            .arg(script("quic_server.py"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--max-seconds", "60", "--cert"])
            .arg(dir.path("cert.pem"))
            .arg("--key")
            .arg(dir.path("key.pem"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_until(READY_LIMIT, "quic_server.py to listen", || bound_udp(port));
    let keylog = dir.path("keys.log");
    let keylog_arg = keylog.display().to_string();
    let filter = format!("udp port {port}");
    let live = Live::start_filtered(&filter, &["-T", "jsonl", "--keylog", &keylog_arg]);
    run_client(
        "quic_client.py",
        Command::new(&python)
            .arg(script("quic_client.py"))
            .args(["127.0.0.1", &port.to_string(), "--requests", "3"])
            .args(["--timeout", "10", "--cafile"])
            .arg(dir.path("cert.pem"))
            .arg("--keylog")
            .arg(&keylog)
            .stdout(Stdio::null()),
    );
    // Drained 3 s after the close, found at the next tick (every second).
    let line = live.lines_within(1, Duration::from_secs(10));
    let line: Value = serde_json::from_str(&line[0]).expect("a JSON line");
    let q = &line["quic"];
    assert_eq!(str_at(q, "/ended"), "closed", "{line}");
    assert_eq!(str_at(q, "/close/by"), "client", "{line}");
    assert_eq!(str_at(q, "/tls/sni"), "localhost", "{line}");
    // The server's flight and first 1-RTT packets come before the client
    // has derived and logged their keys: held until it has, and read.
    assert_eq!(str_at(q, "/http/decryption"), "complete", "{line}");
    assert_eq!(str_at(q, "/tls/alpn"), "h3", "{line}");
    assert!(q["tls"]["certificate"].is_object(), "{line}");
    assert_eq!(
        q["http"]["status_codes"],
        serde_json::json!({"200": 3}),
        "{line}"
    );
    assert_eq!(u64_at(q, "/http/requests"), 3, "{line}");
    assert_eq!(u64_at(q, "/http/responses"), 3, "{line}");
    assert_eq!(q["handshake"]["idle_timeout"], 60.0, "{line}");
    assert_eq!(q["handshake"]["server_idle_timeout"], 60.0, "{line}");

    live.proc.signal("INT");
    let done = live.finish(SIGNAL_LIMIT);
    done.assert_clean_exit();
    let [summary] = &done.stdout[..] else {
        panic!("only the summary after the stop: {:?}", done.stdout);
    };
    let summary: Value = serde_json::from_str(summary).expect("the summary line");
    let s = &summary["summary"];
    assert_eq!(u64_at(s, "/quic_connections"), 1, "{summary}");
    assert_eq!(
        s["quic"]["list"][0], *q,
        "the summary lists the same record"
    );
    assert_eq!(str_at(s, "/selection/filter"), filter);
}
