//! Live capture of real loopback traffic: `handshakes live` capturing on
//! its own port while real clients talk to the parent's HTTP server, checked
//! exactly against what the clients did and against its `-w` file read back
//! offline. JSON Lines counts, stopping on SIGINT and SIGTERM, a connection
//! still open at the end, connections printed as they finish, `--count`.
//! (The table and CSV outputs are `outputs`'.)

use super::*;

// ---------------------------------------------------------------------------
// `handshakes live`

/// A running `handshakes live -i lo -f 'tcp port PORT' -w DIR/out.pcap ARGS…`.
pub(super) struct Live {
    pub(super) proc: Proc,
    lines: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    pcap: PathBuf,
    started: Instant,
    _dir: Scratch,
}

/// What `live` printed, after it exited.
pub(super) struct Finished {
    status: ExitStatus,
    pub(super) stdout: Vec<String>,
    stderr: String,
    pub(super) pcap: PathBuf,
    _dir: Scratch,
}

impl Live {
    /// Starts the capture and waits until it is capturing: the `-w` file is
    /// created only after the device is open and the filter is set, and the
    /// kernel buffers packets from then on.
    pub(super) fn start(port: u16, args: &[&str]) -> Live {
        Live::start_filtered(&format!("tcp port {port}"), args)
    }

    /// [`Live::start`] with the capture filter `filter`.
    pub(super) fn start_filtered(filter: &str, args: &[&str]) -> Live {
        let dir = Scratch::new();
        let pcap = dir.path("out.pcap");
        let mut cmd = support::bin();
        cmd.args(["live", "-i", "lo", "-f", filter, "-w"])
            .arg(&pcap)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut proc = Proc::spawn("handshakes live", &mut cmd);
        let lines = line_reader(proc.child.stdout.take().expect("stdout"));
        let mut err = proc.child.stderr.take().expect("stderr");
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut live = Live {
            proc,
            lines,
            stderr: Some(stderr),
            pcap,
            started,
            _dir: dir,
        };
        wait_until(READY_LIMIT, "handshakes live to start capturing", || {
            if let Some(status) = live.proc.exited() {
                let stderr = live.stderr.take().map(|h| h.join().unwrap_or_default());
                panic!("handshakes live exited before capturing: {status}, stderr: {stderr:?}");
            }
            live.pcap.exists()
        });
        // Margin for the step from creating the file to the first read.
        thread::sleep(Duration::from_millis(200));
        live
    }

    /// The next stdout line while it runs, waiting at most until `deadline`.
    fn next_line(&self, deadline: Instant) -> Option<String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next `n` stdout lines, which must come within `limit`.
    pub(super) fn lines_within(&self, n: usize, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        let lines: Vec<String> = (0..n).map_while(|_| self.next_line(deadline)).collect();
        assert_eq!(lines.len(), n, "only {lines:?} printed within {limit:?}");
        lines
    }

    /// Waits (bounded) for the exit and collects the output.
    pub(super) fn finish(mut self, limit: Duration) -> Finished {
        let status = self.proc.wait_for(limit);
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().expect("stderr reader"))
            .unwrap_or_default();
        // The pipe is closed: the reader thread drains it and hangs up.
        let mut stdout = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            stdout.push(line);
        }
        Finished {
            status,
            stdout,
            stderr,
            pcap: self.pcap.clone(),
            _dir: self._dir,
        }
    }
}

impl Finished {
    pub(super) fn assert_clean_exit(&self) {
        assert!(
            self.status.success(),
            "handshakes live: {}, stderr: {}",
            self.status,
            self.stderr
        );
        assert_eq!(
            self.stderr, "",
            "nothing on stderr when it is not a terminal"
        );
    }

    /// The JSON Lines output: connections in id order and the summary, which
    /// must be the one last line.
    pub(super) fn jsonl(&self) -> (Vec<Value>, Value) {
        let all: Vec<Value> = self
            .stdout
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
            .collect();
        let (last, conns) = all
            .split_last()
            .unwrap_or_else(|| panic!("no output; stderr: {}", self.stderr));
        let summary = last
            .get("summary")
            .unwrap_or_else(|| panic!("last line is not the summary: {last}"))
            .clone();
        let mut conns = conns.to_vec();
        for c in &conns {
            assert!(c.get("summary").is_none(), "a second summary line: {c}");
        }
        conns.sort_by_key(|c| c["id"].as_u64().expect("id"));
        (conns, summary)
    }
}

pub(super) fn u64_at(v: &Value, pointer: &str) -> u64 {
    support::at(v, pointer)
        .as_u64()
        .unwrap_or_else(|| panic!("{pointer} is not an integer in {v}"))
}

pub(super) fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    support::at(v, pointer)
        .as_str()
        .unwrap_or_else(|| panic!("{pointer} is not a string in {v}"))
}

/// Per connection in id order: (requests, close kind).
fn shape(conns: &[Value]) -> Vec<(u64, String)> {
    conns
        .iter()
        .map(|c| {
            (
                u64_at(c, "/http/requests"),
                str_at(c, "/close/kind").to_string(),
            )
        })
        .collect()
}

/// The ids are 1..=n, every connection runs between a client on 127.0.0.1
/// and the server, and carried exact HTTP/1 requests, each answered with 200.
fn assert_plain_http(conns: &[Value], server: &str) {
    for (i, c) in conns.iter().enumerate() {
        assert_eq!(u64_at(c, "/id"), i as u64 + 1, "ids 1..=n: {c}");
        assert_eq!(str_at(c, "/server"), server, "{c}");
        assert!(str_at(c, "/client").starts_with("127.0.0.1:"), "{c}");
        assert_eq!(str_at(c, "/client_by"), "syn", "{c}");
        assert_eq!(support::at(c, "/partial"), &Value::Bool(false), "{c}");
        assert_eq!(
            support::at(c, "/tcp/handshake/complete"),
            &Value::Bool(true),
            "{c}"
        );
        assert_eq!(support::at(c, "/tls"), &Value::Null, "{c}");
        let requests = u64_at(c, "/http/requests");
        if requests > 0 {
            assert_eq!(str_at(c, "/http/method"), "http1", "{c}");
        }
        assert_eq!(u64_at(c, "/http/responses"), requests, "{c}");
        let list = support::at(c, "/http/list").as_array().expect("list");
        assert_eq!(list.len() as u64, requests, "{c}");
        for r in list {
            assert_eq!(str_at(r, "/method"), "GET", "{c}");
            assert_eq!(str_at(r, "/target"), "/", "{c}");
            assert_eq!(u64_at(r, "/status"), 200, "{c}");
        }
    }
}

/// A connection its client closed: FIN first from the client, then from the server.
fn assert_closed_by_client(c: &Value) {
    assert_eq!(str_at(c, "/close/kind"), "fin", "{c}");
    assert_eq!(str_at(c, "/close/by"), "client", "{c}");
    assert_eq!(support::at(c, "/close/fin_both"), &Value::Bool(true), "{c}");
    assert_eq!(str_at(c, "/tcp/state"), "SF", "{c}");
}

/// The summary line agrees with the connection lines and the kernel counters
/// are there, with nothing dropped.
fn assert_summary(summary: &Value, conns: &[Value]) {
    let requests: u64 = conns.iter().map(|c| u64_at(c, "/http/requests")).sum();
    let handshakes = conns
        .iter()
        .filter(|c| c["tcp"]["handshake"]["complete"] == Value::Bool(true))
        .count() as u64;
    assert_eq!(str_at(summary, "/file"), "lo", "{summary}");
    assert_eq!(str_at(summary, "/format"), "live", "{summary}");
    // Every capture here runs with `-f 'tcp port PORT'`: the summary says so.
    let filter = str_at(summary, "/selection/filter");
    assert!(filter.starts_with("tcp port "), "{summary}");
    assert_eq!(
        u64_at(summary, "/connections"),
        conns.len() as u64,
        "{summary}"
    );
    assert_eq!(u64_at(summary, "/requests"), requests, "{summary}");
    assert_eq!(u64_at(summary, "/requests_exact"), requests, "{summary}");
    assert_eq!(u64_at(summary, "/requests_estimated"), 0, "{summary}");
    assert_eq!(u64_at(summary, "/tcp_handshakes"), handshakes, "{summary}");
    assert_eq!(u64_at(summary, "/packets/skipped"), 0, "{summary}");
    let total = u64_at(summary, "/packets/total");
    assert_eq!(u64_at(summary, "/packets/tcp"), total, "{summary}");
    let drops = support::at(summary, "/capture_drops");
    assert!(
        u64_at(drops, "/received") >= total,
        "the kernel received at least the packets read: {summary}"
    );
    assert_eq!(u64_at(drops, "/dropped"), 0, "{summary}");
    assert_eq!(u64_at(drops, "/if_dropped"), 0, "{summary}");
}

/// The `-w` file, read back offline, holds the same capture: same packets,
/// connections, handshakes, requests per connection and closes.
fn assert_write_file_matches(pcap: &Path, summary: &Value, conns: &[Value]) {
    let (offline, records) = analyze_path(pcap);
    assert_eq!(
        offline.packets.total,
        u64_at(summary, "/packets/total"),
        "packets in the -w file"
    );
    assert_eq!(offline.connections, u64_at(summary, "/connections"));
    assert_eq!(offline.requests, u64_at(summary, "/requests"));
    assert_eq!(offline.tcp_handshakes, u64_at(summary, "/tcp_handshakes"));
    assert!(!offline.truncated, "the -w file is complete: {offline:?}");
    let got: Vec<(u64, String)> = records
        .iter()
        .map(|r| (r.http.requests, r.close.kind.as_str().to_string()))
        .collect();
    assert_eq!(got, shape(conns), "the -w file read offline");
    let clients: Vec<&str> = conns.iter().map(|c| str_at(c, "/client")).collect();
    let offline_clients: Vec<&str> = records.iter().map(|r| r.client.as_str()).collect();
    assert_eq!(offline_clients, clients, "the -w file read offline");
}

// ---------------------------------------------------------------------------
// Tests

/// Three kinds of client behaviour in one 5 s capture, counted exactly:
/// three curls (3 connections × 1 request), one curl with three URLs
/// (1 connection × 3 requests), a python `requests.Session` with two GETs
/// (1 connection × 2 requests).
#[test]
fn live_jsonl_counts_connections_and_requests_exactly() {
    if !can_capture("live_jsonl_counts_connections_and_requests_exactly") {
        return;
    }
    let with_requests = python_has_requests();
    let server = Server::start();
    let live = Live::start(server.port, &["-T", "jsonl", "--duration", "5s"]);
    for _ in 0..3 {
        server.curl(1);
    }
    server.curl(3);
    let mut want = vec![1, 1, 1, 3];
    if with_requests {
        server.python_session(2);
        want.push(2);
    } else {
        eprintln!("NOTE: python3 cannot import requests; the requests.Session part is left out");
    }
    settle(server.port);
    let clients_done = live.started.elapsed();
    assert!(
        clients_done < Duration::from_millis(4500),
        "the clients took {clients_done:?}, too close to the 5 s capture window"
    );
    let done = live.finish(Duration::from_secs(15));
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();

    let got: Vec<u64> = conns.iter().map(|c| u64_at(c, "/http/requests")).collect();
    assert_eq!(got, want, "requests per connection, in id order");
    assert_plain_http(&conns, &server.addr());
    for c in &conns {
        assert_closed_by_client(c);
    }
    assert_summary(&summary, &conns);
    let n = want.len() as u64;
    assert_eq!(u64_at(&summary, "/connections"), n);
    assert_eq!(u64_at(&summary, "/requests"), want.iter().sum::<u64>());
    assert_eq!(u64_at(&summary, "/tcp_handshakes"), n);
    assert_eq!(
        support::at(&summary, "/close"),
        &serde_json::json!({ "fin": n })
    );
    assert_eq!(
        u64_at(&summary, "/status_codes/200"),
        want.iter().sum::<u64>()
    );
    assert_write_file_matches(&done.pcap, &summary, &conns);
}

/// A client that opens a connection per request while the ones before it
/// stay open and idle (python's `http.client`, three GETs), then a curl
/// after they closed: the live summary counts the two opened beside an
/// idle one, and curl's as opened after the client closed one it could
/// have kept (`redialed`), as the `-w` file read offline does.
#[test]
fn live_counts_connections_opened_while_another_sat_idle() {
    if !can_capture("live_counts_connections_opened_while_another_sat_idle") {
        return;
    }
    let server = Server::start();
    let live = Live::start(server.port, &["-T", "jsonl", "--duration", "4s"]);
    server.python_leaking(3);
    server.curl(1);
    settle(server.port);
    let done = live.finish(Duration::from_secs(15));
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();
    assert_eq!(conns.len(), 4);
    let o = support::at(&summary, "/opened_while_idle");
    assert_eq!(o["checked"], 4, "{o}");
    assert_eq!(o["connections"], 2, "{o}");
    let first: Vec<(u64, u64)> = o["first"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|p| (u64_at(p, "/connection"), u64_at(p, "/idle_connection")))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(first, [(2, 1), (3, 1)], "{o}");
    let verdict = str_at(&summary, "/verdict");
    let idle = "; 2 connections were opened while another to the same server sat idle";
    assert!(verdict.contains(idle), "{verdict}");
    // curl's, after python's three closed at its exit (the client's FIN,
    // nothing outstanding): one it could have reused, as the client
    // address goes.
    let r = support::at(&summary, "/redialed");
    assert_eq!(
        (&r["connections"], &r["checked"]),
        (&1.into(), &4.into()),
        "{r}"
    );
    let redialed = "; 1 connection was opened after the client closed another to the same server that it could have kept";
    assert!(verdict.ends_with(redialed), "{verdict}");
    let (offline, _) = analyze_path(&done.pcap);
    let theirs = offline
        .opened_while_idle
        .map(|o| (o.connections, o.checked));
    assert_eq!(theirs, Some((2, 4)), "the -w file read offline");
    let theirs = offline.redialed.as_ref().map(|r| r.connections);
    assert_eq!(theirs, Some(1), "the -w file read offline");
    assert_write_file_matches(&done.pcap, &summary, &conns);
}

/// Stops `live` with `sig` after a few requests; it must exit 0 within 5 s,
/// report everything, end with the summary and leave a complete `-w` file.
fn stops_cleanly_on(sig: &str) {
    let server = Server::start();
    let live = Live::start(server.port, &["-T", "jsonl", "--duration", "60s"]);
    for _ in 0..3 {
        server.curl(1);
    }
    server.curl(3);
    settle(server.port);
    live.proc.signal(sig);
    let signalled = Instant::now();
    let done = live.finish(SIGNAL_LIMIT);
    assert!(signalled.elapsed() < SIGNAL_LIMIT);
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();
    assert_eq!(
        shape(&conns),
        [(1, "fin"), (1, "fin"), (1, "fin"), (3, "fin")]
            .map(|(r, k)| (r, k.to_string()))
            .to_vec()
    );
    assert_plain_http(&conns, &server.addr());
    for c in &conns {
        assert_closed_by_client(c);
    }
    assert_summary(&summary, &conns);
    assert_eq!(u64_at(&summary, "/connections"), 4);
    assert_eq!(u64_at(&summary, "/requests"), 6);
    assert_eq!(u64_at(&summary, "/tcp_handshakes"), 4);
    assert_write_file_matches(&done.pcap, &summary, &conns);
}

#[test]
fn live_sigint_stops_cleanly_and_completes_the_write_file() {
    if can_capture("live_sigint_stops_cleanly_and_completes_the_write_file") {
        stops_cleanly_on("INT");
    }
}

#[test]
fn live_sigterm_stops_cleanly_and_completes_the_write_file() {
    if can_capture("live_sigterm_stops_cleanly_and_completes_the_write_file") {
        stops_cleanly_on("TERM");
    }
}

/// A connection still open at SIGINT is flushed with close.kind "open".
#[test]
fn live_sigint_reports_a_connection_still_open_as_open() {
    if !can_capture("live_sigint_reports_a_connection_still_open_as_open") {
        return;
    }
    let server = Server::start();
    let live = Live::start(server.port, &["-T", "jsonl", "--duration", "60s"]);
    server.curl(1);
    let _open = server.open_client();
    settle(server.port);
    live.proc.signal("INT");
    let done = live.finish(SIGNAL_LIMIT);
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();
    assert_eq!(
        shape(&conns),
        vec![(1, "fin".to_string()), (1, "open".to_string())]
    );
    assert_plain_http(&conns, &server.addr());
    assert_closed_by_client(&conns[0]);
    let open = &conns[1];
    assert_eq!(support::at(open, "/close/by"), &Value::Null, "{open}");
    assert_eq!(support::at(open, "/close/time"), &Value::Null, "{open}");
    assert_eq!(support::at(open, "/close/fin_both"), &Value::Bool(false));
    assert_eq!(str_at(open, "/tcp/state"), "S1", "{open}");
    assert_summary(&summary, &conns);
    assert_eq!(
        support::at(&summary, "/close"),
        &serde_json::json!({ "fin": 1, "open": 1 })
    );
    assert_eq!(u64_at(&summary, "/requests"), 2);
    assert_write_file_matches(&done.pcap, &summary, &conns);
}

/// A capture in `format` for 60 s with `--idle 2s`, a client holding a
/// connection open without a word (returned: it lives as long as the
/// `Proc`) and one curl.
pub(super) fn idle_and_closed(format: &str) -> (Server, Live, Proc) {
    let server = Server::start();
    let live = Live::start(
        server.port,
        &["-T", format, "--duration", "60s", "--idle", "2s"],
    );
    let open = server.open_client();
    server.curl(1);
    (server, live, open)
}

/// Connections are printed as they finish, while the capture goes on: one
/// idle past `--idle` and one closed (after its linger), before any signal.
#[test]
fn live_prints_each_connection_as_it_finishes() {
    if !can_capture("live_prints_each_connection_as_it_finishes") {
        return;
    }
    let (server, mut live, _open) = idle_and_closed("jsonl");
    let early = live.lines_within(2, Duration::from_secs(20));
    assert!(
        live.proc.exited().is_none(),
        "still capturing after printing {early:?}"
    );
    live.proc.signal("INT");
    let done = live.finish(SIGNAL_LIMIT);
    done.assert_clean_exit();
    let mut all = early.clone();
    all.extend(done.stdout.iter().cloned());
    let finished = Finished {
        stdout: all,
        ..done
    };
    let (conns, summary) = finished.jsonl();
    assert_eq!(
        finished.stdout.len(),
        3,
        "two connections and the summary: {:?}",
        finished.stdout
    );
    assert_eq!(
        shape(&conns),
        vec![(1, "idle".to_string()), (1, "fin".to_string())]
    );
    assert_plain_http(&conns, &server.addr());
    assert_closed_by_client(&conns[1]);
    assert_summary(&summary, &conns);
    assert_eq!(
        support::at(&summary, "/close"),
        &serde_json::json!({ "fin": 1, "idle": 1 })
    );
}

/// `--count 3` stops after exactly three packets (the TCP handshake), long
/// before `--duration`, and reports the connection as open.
#[test]
fn live_count_stops_after_n_packets() {
    if !can_capture("live_count_stops_after_n_packets") {
        return;
    }
    let server = Server::start();
    let live = Live::start(
        server.port,
        &["-T", "jsonl", "--count", "3", "--duration", "60s"],
    );
    server.curl(1);
    let done = live.finish(Duration::from_secs(10));
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();
    assert_eq!(u64_at(&summary, "/packets/total"), 3, "{summary}");
    assert_eq!(shape(&conns), vec![(0, "open".to_string())]);
    let c = &conns[0];
    assert_eq!(str_at(c, "/tcp/history"), "ShA", "{c}");
    assert_eq!(str_at(c, "/tcp/state"), "S1", "{c}");
    assert_plain_http(&conns, &server.addr());
    assert_summary(&summary, &conns);
    assert_eq!(u64_at(&summary, "/tcp_handshakes"), 1);
    assert_write_file_matches(&done.pcap, &summary, &conns);
}

/// `live --port`: the kernel passes two servers' traffic (`-f tcp and
/// host 127.0.0.1`), `--port` keeps one server's connections; the other's
/// are left out of the lines and the figures, and the summary says what
/// was kept (`selection`: the port and the capture filter).
#[test]
fn live_port_keeps_one_servers_connections() {
    if !can_capture("live_port_keeps_one_servers_connections") {
        return;
    }
    let (kept, other) = (Server::start(), Server::start());
    let filter = format!("tcp and (port {} or port {})", kept.port, other.port);
    let port = kept.port.to_string();
    let live = Live::start_filtered(&filter, &["-T", "jsonl", "--port", &port]);
    kept.curl(2);
    other.curl(1);
    kept.curl(1);
    other.curl(3);
    settle(kept.port);
    settle(other.port);
    live.proc.signal("INT");
    let done = live.finish(SIGNAL_LIMIT);
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();
    let got: Vec<u64> = conns.iter().map(|c| u64_at(c, "/http/requests")).collect();
    assert_eq!(got, [2, 1], "only the kept server's connections");
    assert_plain_http(&conns, &kept.addr());
    assert_eq!(u64_at(&summary, "/connections"), 2);
    assert_eq!(
        support::at(&summary, "/selection"),
        &serde_json::json!({
            "ports": [kept.port],
            "hosts": [],
            "overlays": [],
            "filter": filter,
        })
    );
    let left_out = u64_at(&summary, "/packets/filtered_out");
    assert!(left_out >= 4 * 2, "the other server's frames: {summary}");
}
