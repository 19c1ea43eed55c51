//! `handshakes live` on HTTP/2: real curl processes speaking h2c (prior
//! knowledge) to a small python HTTP/2 responder on loopback, each curl on
//! a connection of its own while the first one's is open and busy — the
//! live summary counts them in `beside_http2`, as the `-w` file read
//! offline does.

use super::traffic::{str_at, u64_at, Live};
use super::*;

/// A python HTTP/2 responder (cleartext, prior knowledge) on 127.0.0.1:
/// it answers each request's HEADERS with a `:status 200` HEADERS frame
/// (HPACK's indexed field 8) ending the stream — on the first connection
/// it accepts after as many milliseconds as its second argument says, on
/// the others at once — and acknowledges SETTINGS and PING. The frames
/// are written by hand: python has no HTTP/2 server of its own, and one
/// header needs no HPACK encoder.
const H2C_SERVER: &str = r#"
import socket, struct, sys, threading, time

def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload

def serve(conn, wait):
    lock = threading.Lock()
    def send(data):
        with lock:
            conn.sendall(data)
    def answer(stream):
        time.sleep(wait)
        send(frame(1, 0x4 | 0x1, stream, b"\x88"))
    try:
        buf = b""
        while len(buf) < 24:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
        buf = buf[24:]
        send(frame(4, 0, 0))
        while True:
            while len(buf) >= 9:
                length = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + length:
                    break
                kind, flags = buf[3], buf[4]
                stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                payload, buf = buf[9:9 + length], buf[9 + length:]
                if kind == 4 and not flags & 0x1:
                    send(frame(4, 0x1, 0))
                elif kind == 6 and not flags & 0x1:
                    send(frame(6, 0x1, 0, payload))
                elif kind == 1 and flags & 0x1:
                    threading.Thread(target=answer, args=(stream,), daemon=True).start()
                elif kind == 7:
                    return
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
    finally:
        time.sleep(0.05)
        conn.close()

listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(16)
first = int(sys.argv[2]) / 1000
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn, first), daemon=True).start()
    first = 0
"#;

/// `curl --http2-prior-knowledge` GETting `/` from the responder on
/// `port`, in the background.
fn curl_h2c(port: u16) -> Proc {
    Proc::spawn(
        "curl --http2-prior-knowledge",
        Command::new("curl")
            .args(["-sS", "--noproxy", "*", "--max-time", "10"])
            .args(["--http2-prior-knowledge", "-o", "/dev/null"])
            .arg(format!("http://127.0.0.1:{port}/"))
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    )
}

/// One curl waits 1.5 s for its answer on an HTTP/2 connection; two more,
/// 300 and 600 ms later, each open a connection of their own beside it
/// (up, busy: not raced); a fourth after every one closed opens beside
/// none.
#[test]
fn live_counts_connections_opened_beside_an_http2_connection() {
    if !can_capture("live_counts_connections_opened_beside_an_http2_connection") {
        return;
    }
    let port = free_port();
    let _server = serve(
        "python HTTP/2 responder",
        port,
        Command::new("python3").args(["-c", H2C_SERVER, &port.to_string(), "1500"]),
    );
    let live = Live::start(port, &["-T", "jsonl", "--duration", "4s"]);
    let mut slow = curl_h2c(port);
    thread::sleep(Duration::from_millis(300));
    let mut beside = curl_h2c(port);
    thread::sleep(Duration::from_millis(300));
    let mut again = curl_h2c(port);
    for (what, proc) in [("second", &mut beside), ("third", &mut again)] {
        assert!(
            proc.wait_for(CLIENT_LIMIT).success(),
            "the {what} curl failed"
        );
    }
    assert!(
        slow.wait_for(CLIENT_LIMIT).success(),
        "the slow curl failed"
    );
    settle(port);
    let mut last = curl_h2c(port);
    assert!(
        last.wait_for(CLIENT_LIMIT).success(),
        "the last curl failed"
    );
    settle(port);
    let done = live.finish(Duration::from_secs(15));
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();
    assert_eq!(conns.len(), 4);
    for c in &conns {
        assert_eq!(str_at(c, "/http/method"), "h2c", "{c}");
        assert_eq!(u64_at(c, "/http/requests"), 1, "{c}");
    }
    let b = support::at(&summary, "/beside_http2");
    let counts = ["checked", "connections", "raced", "carried_none"].map(|k| b[k].as_u64());
    assert_eq!(counts, [4, 2, 0, 0].map(Some), "{b}");
    let first: Vec<(u64, u64)> = b["first"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|p| (u64_at(p, "/connection"), u64_at(p, "/http2_connection")))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(first, [(2, 1), (3, 1)], "{b}");
    assert!(
        str_at(&summary, "/verdict")
            .contains("; 2 connections were opened beside an HTTP/2 connection to the same server"),
        "{summary}"
    );
    let (offline, _) = analyze_path(&done.pcap);
    let theirs = offline.beside_http2.map(|b| (b.connections, b.checked));
    assert_eq!(theirs, Some((2, 4)), "the -w file read offline");
}
