//! Live capture (`handshakes live`, `handshakes interfaces`; cargo feature
//! `live`). Here: what the tests share (child processes, privileges and
//! ports, a real HTTP server (`python3 -m http.server`) and real clients
//! (curl, python `requests`, a raw python socket)), and the tests that
//! capture no traffic: failed starts (unknown interface, bad filter, no
//! privileges) and `handshakes interfaces`. The tests capturing real
//! loopback traffic between that server and those clients, checked exactly
//! against what the clients did and against `live`'s own `-w` file read back
//! offline, are in the submodule [`traffic`], its table and CSV outputs in
//! [`outputs`]; HTTPS read with the key log its client writes meanwhile, in
//! [`keylog`]. `analyze -f`, whose filter libpcap compiles, in [`filter`].
//!
//! Capturing needs root; without it these tests print `!!! SKIPPED` (or fail
//! with `HANDSHAKES_REQUIRE_ALL=1`). Every test uses its own port, so they
//! run in parallel: the BPF filter keeps their loopback traffic apart. Every
//! child process is killed when its guard drops, also on a panic, and every
//! wait is bounded.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{self, Scratch};
use crate::tools::{analyze_path, skip_or_fail};

mod filter;
mod h2;
mod keylog;
mod outputs;
mod quic;
mod traffic;

/// How long a client may take; far more than any of them needs.
const CLIENT_LIMIT: Duration = Duration::from_secs(20);
/// How long the capture may take to start (open the device, set the filter).
const READY_LIMIT: Duration = Duration::from_secs(20);
/// How long `live` may take to stop after SIGINT/SIGTERM.
const SIGNAL_LIMIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------
// Processes

/// A child process, killed (and reaped) when dropped unless it has exited.
struct Proc {
    child: Child,
    what: String,
}

impl Proc {
    fn spawn(what: &str, cmd: &mut Command) -> Proc {
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        Proc {
            child,
            what: what.to_string(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .try_wait()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", self.what))
    }

    /// Waits at most `limit` for the exit; kills the process and panics on timeout.
    fn wait_for(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("{} did not exit within {limit:?}; killed it", self.what);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a signal with `kill -SIG PID`.
    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} {} failed", self.pid());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Runs a short-lived command to completion (bounded) and asserts success.
fn run_client(what: &str, cmd: &mut Command) {
    let mut proc = Proc::spawn(what, cmd.stdin(Stdio::null()));
    let status = proc.wait_for(CLIENT_LIMIT);
    assert!(status.success(), "{what} failed: {status}");
}

/// A throw-away self-signed certificate for localhost (and 127.0.0.1,
/// which some clients check against the subject alternative names) in
/// `dir`: `cert.pem` and `key.pem`.
fn self_signed_certificate(dir: &Scratch) {
    run_client(
        "openssl req",
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=localhost"])
            .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
            .arg("-keyout")
            .arg(dir.path("key.pem"))
            .arg("-out")
            .arg(dir.path("cert.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
}

/// Polls `ok` every 20 ms for at most `limit`; panics naming `what` on timeout.
fn wait_until(limit: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------
// Environment

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// True when the test can capture; otherwise reports the skip (or fails under
/// `HANDSHAKES_REQUIRE_ALL`).
fn can_capture(test: &str) -> bool {
    if is_root() {
        return true;
    }
    skip_or_fail(
        "root for live capture",
        &format!("{test}: capturing on lo needs root (`id -u` is not 0)"),
    );
    false
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// Whether something listens on 127.0.0.1:`port` (from /proc/net/tcp, so
/// the check itself sends no packet the capture could see).
fn listening(port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .map(|table| {
            table.lines().skip(1).any(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                f.len() > 3 && f[1] == local && f[3] == "0A"
            })
        })
        .unwrap_or(false)
}

/// Waits until every close on `port` has finished (no socket left half
/// closed: only LISTEN, ESTABLISHED and TIME_WAIT), then a little longer so
/// the capture has read the last packets before it is stopped.
fn settle(port: u16) {
    const HALF_CLOSED: [&str; 5] = ["04", "05", "08", "09", "0B"];
    let hex = format!(":{port:04X}");
    wait_until(CLIENT_LIMIT, "the connections to finish closing", || {
        std::fs::read_to_string("/proc/net/tcp")
            .map(|table| {
                !table.lines().skip(1).any(|line| {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    f.len() > 3
                        && (f[1].ends_with(&hex) || f[2].ends_with(&hex))
                        && HALF_CLOSED.contains(&f[3])
                })
            })
            .unwrap_or(true)
    });
    thread::sleep(Duration::from_millis(300));
}

fn python_has_requests() -> bool {
    let mut proc = Proc::spawn(
        "python3 -c 'import requests'",
        Command::new("python3")
            .args(["-c", "import requests"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    proc.wait_for(CLIENT_LIMIT).success()
}

// ---------------------------------------------------------------------------
// The HTTP server and the clients

/// Starts server `what` (its standard streams closed) and waits until it
/// listens on `port`.
fn serve(what: &str, port: u16, cmd: &mut Command) -> Proc {
    let cmd = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut proc = Proc::spawn(what, cmd);
    wait_until(READY_LIMIT, &format!("{what} to listen"), || {
        if let Some(status) = proc.exited() {
            panic!("{what} on port {port} exited: {status}");
        }
        listening(port)
    });
    proc
}

/// `python3 -m http.server` on 127.0.0.1, HTTP/1.1 (keep-alive), serving a
/// one-file directory.
struct Server {
    port: u16,
    _proc: Proc,
    _dir: Scratch,
}

impl Server {
    fn start() -> Server {
        let dir = Scratch::new();
        dir.file("index.html", b"<html><body>hello</body></html>\n");
        let port = free_port();
        let proc = serve(
            "python3 -m http.server",
            port,
            Command::new("python3")
                .args(["-m", "http.server", "--bind", "127.0.0.1"])
                .args(["--protocol", "HTTP/1.1", "--directory"])
                .arg(dir.path(""))
                .arg(port.to_string()),
        );
        Server {
            port,
            _proc: proc,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `curl -s -o /dev/null URL…`: one connection, one request per URL.
    fn curl(&self, requests: usize) {
        let mut cmd = Command::new("curl");
        cmd.args(["-s", "--noproxy", "*", "--max-time", "10"]);
        for _ in 0..requests {
            cmd.args(["-o", "/dev/null", &self.url()]);
        }
        cmd.stdout(Stdio::null());
        run_client(&format!("curl ({requests} requests)"), &mut cmd);
    }

    /// A python `requests.Session` making `requests` GETs: one connection.
    fn python_session(&self, requests: usize) {
        const SCRIPT: &str = r#"
import sys, requests
s = requests.Session()
s.trust_env = False
for _ in range(int(sys.argv[2])):
    r = s.get(sys.argv[1], timeout=10)
    r.raise_for_status()
    r.content
s.close()
"#;
        run_client(
            "python requests.Session",
            Command::new("python3")
                .args(["-c", SCRIPT, &self.url(), &requests.to_string()])
                .stdout(Stdio::null()),
        );
    }

    /// Python's `http.client` making `requests` GETs, each on a new
    /// connection while the ones before stay open and idle (read to their
    /// end, never closed) — a client that does not give its connections
    /// back — all closed at the end.
    fn python_leaking(&self, requests: usize) {
        const SCRIPT: &str = r#"
import http.client, sys
kept = []
for _ in range(int(sys.argv[2])):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
    c.request("GET", "/")
    r = c.getresponse()
    r.read()
    kept.append(c)
for c in kept:
    c.close()
"#;
        run_client(
            "python http.client, a connection per request kept open",
            Command::new("python3")
                .args(["-c", SCRIPT, &self.port.to_string(), &requests.to_string()])
                .stdout(Stdio::null()),
        );
    }

    /// A raw socket client that sends one request, reads the whole response
    /// and then keeps the connection open (without a packet) until killed.
    fn open_client(&self) -> Proc {
        const SCRIPT: &str = r#"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("closed before the response headers")
    buf += chunk
head, _, body = buf.partition(b"\r\n\r\n")
length = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")
          if l.lower().startswith(b"content-length:")][0]
while len(body) < length:
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("closed before the response body")
    body += chunk
print("ready", flush=True)
time.sleep(120)
"#;
        let mut proc = Proc::spawn(
            "python socket client",
            Command::new("python3")
                .args(["-c", SCRIPT, &self.port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        );
        let stdout = proc.child.stdout.take().expect("client stdout");
        let lines = line_reader(stdout);
        match lines.recv_timeout(CLIENT_LIMIT) {
            Ok(line) if line == "ready" => proc,
            Ok(line) => panic!("python socket client said {line:?}"),
            Err(e) => panic!("python socket client not ready within {CLIENT_LIMIT:?}: {e}"),
        }
    }
}

/// Sends each line of `out` on the returned channel, from a thread.
fn line_reader(out: ChildStdout) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

// ---------------------------------------------------------------------------
// Tests that capture no traffic

/// An unknown interface: exit 2, one line naming it and listing the real ones.
/// Needs no privileges.
#[test]
fn live_unknown_interface_exits_2_and_lists_interfaces() {
    let scratch = Scratch::new();
    let pcap = scratch.path("out.pcap");
    let mut cmd = support::bin();
    cmd.args(["live", "-i", "hs-nope0", "--duration", "1s", "-w"])
        .arg(&pcap);
    let out = output_within(cmd, Duration::from_secs(20));
    let err = support::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(support::stdout(&out), "");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("hs-nope0"), "{err}");
    let available = err
        .split("available: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of interfaces: {err}"));
    let names: Vec<&str> = available
        .split(" (")
        .next()
        .unwrap_or_default()
        .split(", ")
        .map(str::trim)
        .collect();
    assert!(names.contains(&"lo"), "lo among {names:?}: {err}");
    assert!(!pcap.exists(), "no -w file for a failed start");
}

/// A bad BPF filter: exit 2, one line with the expression and libpcap's message.
#[test]
fn live_bad_filter_exits_2_with_the_expression() {
    if !can_capture("live_bad_filter_exits_2_with_the_expression") {
        return;
    }
    let scratch = Scratch::new();
    let pcap = scratch.path("out.pcap");
    let mut cmd = support::bin();
    cmd.args([
        "live",
        "-i",
        "lo",
        "-f",
        "tcp port",
        "--duration",
        "1s",
        "-w",
    ])
    .arg(&pcap);
    let out = output_within(cmd, Duration::from_secs(20));
    let err = support::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(support::stdout(&out), "");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("`tcp port`"), "{err}");
    assert!(err.contains("filter"), "{err}");
    assert!(!pcap.exists(), "no -w file for a failed start");
}

/// Without privileges (root dropped to nobody with setpriv): exit 2, one line
/// explaining root or setcap.
#[test]
fn live_without_privileges_explains_root_or_setcap() {
    if !can_capture("live_without_privileges_explains_root_or_setcap") {
        return;
    }
    let setpriv = |args: &[&str]| {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_handshakes"))
        .args(args);
        cmd
    };
    // nobody must be able to run the binary at all for the test to mean anything.
    let probe = Command::new("setpriv")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| output_within(setpriv(&["interfaces"]), Duration::from_secs(20)));
    match probe {
        Some(o) if o.status.success() => {}
        Some(o) => {
            skip_or_fail(
                "running the binary as nobody",
                &format!("setpriv … handshakes interfaces: {}", support::stderr(&o)),
            );
            return;
        }
        None => {
            skip_or_fail("setpriv (util-linux)", "not installed");
            return;
        }
    }
    let out = output_within(
        setpriv(&["live", "-i", "lo", "-f", "tcp port 1", "--duration", "1s"]),
        Duration::from_secs(20),
    );
    let err = support::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(support::stdout(&out), "");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("lo"), "{err}");
    assert!(err.contains("root"), "{err}");
    assert!(err.contains("setcap"), "{err}");
}

/// `handshakes interfaces` lists lo with 127.0.0.1.
#[test]
fn interfaces_lists_lo_with_its_address() {
    let out = output_within(support::bin().arg("interfaces"), Duration::from_secs(20));
    let text = support::stdout(&out);
    assert!(out.status.success(), "stderr: {}", support::stderr(&out));
    let lo = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("lo"))
        .unwrap_or_else(|| panic!("no lo line: {text}"));
    let cells: Vec<&str> = lo.split_whitespace().collect();
    assert!(cells.contains(&"127.0.0.1"), "{lo}");
    assert!(
        cells.iter().any(|c| c.split(',').any(|f| f == "loopback")),
        "{lo}"
    );
}

/// Runs `cmd` to completion within `limit` (killed on timeout), capturing output.
fn output_within(
    mut cmd: impl std::borrow::BorrowMut<Command>,
    limit: Duration,
) -> std::process::Output {
    let cmd = cmd.borrow_mut();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut proc = Proc::spawn("handshakes", cmd);
    let mut out = proc.child.stdout.take().expect("stdout");
    let mut err = proc.child.stderr.take().expect("stderr");
    let out_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = proc.wait_for(limit);
    std::process::Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}
