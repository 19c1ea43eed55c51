//! Synthetic captures: filters, the table, JSON Lines and CSV outputs, exit
//! codes and a closed output pipe.

use super::*;

// ---------------------------------------------------------------- filters and output formats

/// Connections to port 80 and 443 from two hosts, plus a UDP datagram.
fn two_servers() -> Vec<u8> {
    let a = basic();
    let b = Script::starting(T0 + ms(10)).conv("10.0.0.3:40000", "10.0.0.2:443", (1, 2));
    let mut packets = frames(Link::Ethernet, &interleave(&[&a, &b]));
    packets.push(Packet::new(
        T0 + ms(30),
        udp_frame(addr("10.0.0.3:5353"), addr("10.0.0.2:443"), b"dns"),
    ));
    Pcap::new(1).write(&packets)
}

#[test]
fn port_filter() {
    let v = json_of(&analyze_with(
        &two_servers(),
        &["-T", "json", "--port", "443"],
    ));
    assert_eq!(connections(&v), 1);
    assert_str(conn(&v, 0), "/server", "10.0.0.2:443");
    assert_handshake(conn(&v, 0), us(100), us(50), ms(10));
    assert_u64(&v, "/summary/packets/filtered_out", 8);
    assert_u64(&v, "/summary/packets/tcp", 8);
    assert_u64(&v, "/summary/packets/skipped", 1);
    assert_u64(&v, "/summary/connections", 1);
}

#[test]
fn host_filter() {
    let v = json_of(&analyze_with(
        &two_servers(),
        &["-T", "json", "--host", "10.0.0.1"],
    ));
    assert_eq!(connections(&v), 1);
    assert_basic(conn(&v, 0), CLIENT, SERVER);
    assert_u64(&v, "/summary/packets/filtered_out", 8);
    let both = &["-T", "json", "--port", "80", "--port", "443"];
    assert_eq!(
        connections(&json_of(&analyze_with(&two_servers(), both))),
        2
    );
}

/// The summary names what `--port`, `--host` and `--overlay` kept (null
/// when everything was), the table says it under the capture, and a
/// selection that keeps nothing is warned of.
#[test]
fn the_summary_names_the_selection() {
    let capture = two_servers();
    let v = json_of(&analyze_with(&capture, &["-T", "json"]));
    assert_eq!(at(&v, "/summary/selection"), &Value::Null);
    let args = [
        "-T",
        "json",
        "--port",
        "443",
        "--port",
        "8443",
        "--host",
        "10.0.0.3",
        "--overlay",
        "vxlan:4242",
    ];
    let v = json_of(&analyze_with(&capture, &args));
    assert_eq!(
        at(&v, "/summary/selection"),
        &serde_json::json!({
            "ports": [443, 8443],
            "hosts": ["10.0.0.3"],
            "overlays": ["vxlan:4242"],
            "filter": null,
        })
    );
    let out = analyze_with(&capture, &["--port", "443", "--host", "10.0.0.3"]);
    let table = stdout(&out);
    assert!(
        table.contains("\nonly          port 443; host 10.0.0.3\n"),
        "{table}"
    );
    assert!(
        !stderr(&out).contains("kept no connection"),
        "{}",
        stderr(&out)
    );
    // A port no connection has: the figures are empty, and a warning says why.
    let out = analyze_with(&capture, &["--port", "8080"]);
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("warning: only port 8080 kept no connection (16 frames left out)"),
        "{err}"
    );
}

/// `compare` and `timeline` keep connections as `analyze` does: the same
/// flags, the same figures, and the selection named in their output.
#[test]
fn compare_and_timeline_select_connections_as_analyze_does() {
    let scratch = Scratch::new();
    let file = scratch.file("two.pcap", &two_servers());
    let file = file.to_str().expect("UTF-8 path");
    let analyzed = json_of(&run(["analyze", "-T", "json", "--port", "443", file]));
    let compared = json_of(&run(["compare", "-T", "json", "--port", "443", file, file]));
    for side in ["/a/summary", "/b/summary"] {
        assert_eq!(at(&compared, side), at(&analyzed, "/summary"), "{side}");
    }
    assert_eq!(at(&compared, "/metrics/connections/a").as_f64(), Some(1.0));
    let whole = json_of(&run(["compare", "-T", "json", file, file]));
    assert_eq!(at(&whole, "/metrics/connections/a").as_f64(), Some(2.0));
    assert_eq!(at(&whole, "/a/summary/selection"), &Value::Null);
    let table = stdout(&run(["compare", "--host", "10.0.0.1", file, file]));
    assert!(table.contains("\nonly          host 10.0.0.1\n"), "{table}");
    let three = stdout(&run(["compare", "--host", "10.0.0.1", file, file, file]));
    assert!(three.contains("\nonly          host 10.0.0.1\n"), "{three}");

    let drawn = stdout(&run([
        "timeline", "--width", "100", "--host", "10.0.0.1", file,
    ]));
    let header = drawn.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("1/1 connections") && header.ends_with("only host 10.0.0.1"),
        "{drawn}"
    );
    let drawn = stdout(&run(["timeline", "--width", "100", file]));
    assert!(drawn.starts_with("2/2 connections"), "{drawn}");
}

/// `n` standard connections from consecutive client ports, 1 ms apart.
fn many(n: u16) -> Vec<u8> {
    let convs: Vec<Conv> = (0..n)
        .map(|i| {
            Script::starting(T0 + ms(i64::from(i))).conv(
                &format!("10.0.0.1:{}", 20_000 + i),
                SERVER,
                ISNS,
            )
        })
        .collect();
    let refs: Vec<&Conv> = convs.iter().collect();
    pcap_of(Link::Ethernet, &refs)
}

#[test]
fn table_limit_footer() {
    let out = analyze_with(&many(5), &["--limit", "2"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("3 more connections not shown"), "{text}");
    assert!(text.contains("150µs"), "connect column: {text}");
    assert!(text.contains("10.0.0.1:20001") && !text.contains("10.0.0.1:20002"));
    let all = stdout(&analyze_with(&many(5), &["--limit", "0"]));
    assert!(
        all.contains("10.0.0.1:20004") && !all.contains("not shown"),
        "{all}"
    );
}

#[test]
fn jsonl_has_one_line_per_connection_then_the_summary() {
    let out = analyze_with(&many(3), &["-T", "jsonl"]);
    assert!(out.status.success());
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 4);
    let mut ids: Vec<u64> = lines[..3]
        .iter()
        .map(|l| at(l, "/id").as_u64().expect("id"))
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3]);
    for l in &lines[..3] {
        let start = at(l, "/start/at").as_f64().expect("number");
        assert_handshake(l, us(100), us(50), (start * 1e3).round() as i64 * ms(1));
    }
    assert_u64(&lines[3], "/summary/connections", 3);
    assert_eq!(lines[3].as_object().map(|o| o.len()), Some(1));
}

/// `-T json` holds each record's text, not the record, and past 8 MiB of
/// text it goes to a temporary file in `TMPDIR`: 12 000 connections (more
/// than 8 MiB of compact text; 6 000 were enough while the spool held the
/// printed text) come out in id order, the same objects as JSON Lines;
/// with a `TMPDIR` that cannot hold the file, one line says so and what to
/// do, and the exit code is not 0.
#[test]
fn json_spools_its_records_and_says_where_it_cannot() {
    let scratch = Scratch::new();
    let capture = scratch.file("many.pcap", &many(12_000));
    let spool = scratch.path("spool");
    std::fs::create_dir(&spool).expect("spool dir");
    let json = |tmpdir: &std::path::Path| {
        bin()
            .env("TMPDIR", tmpdir)
            .args(["analyze", "-q", "-T", "json"])
            .arg(&capture)
            .output()
            .expect("run handshakes")
    };
    let doc = json_of(&json(&spool));
    let lines = stdout(&run_analyze(&["-q", "-T", "jsonl"], &[&capture]));
    let mut want: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .filter(|l: &Value| l.get("summary").is_none())
        .collect();
    want.sort_by_key(|l| at(l, "/id").as_u64());
    assert_eq!(want.len(), 12_000);
    let got = at(&doc, "/connections").as_array().expect("an array");
    assert!(
        got == &want,
        "-T json's connections differ from JSON Lines'"
    );
    assert_u64(&doc, "/summary/connections", 12_000);

    let out = json(&scratch.path("missing"));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("temporary file") && err.contains("missing") && err.contains("TMPDIR"),
        "{err}"
    );
}

#[test]
fn csv_has_one_header_and_one_row_per_connection_of_every_file() {
    let scratch = Scratch::new();
    let first = scratch.file("c.pcap", &many(2));
    let second = scratch.file("d.pcap", &pcap_of(Link::Ethernet, &[&basic()]));
    let out = run_analyze(&["-T", "csv"], &[&first, &second]);
    assert!(out.status.success());
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4, "{text}");
    let col = |name: &str| rows[0].iter().position(|c| *c == name).expect(name);
    assert_eq!(rows[0][0], "file");
    let expected = [
        (&first, 1, "10.0.0.1:20000"),
        (&first, 2, "10.0.0.1:20001"),
        (&second, 1, CLIENT),
    ];
    for (row, (file, id, client)) in rows[1..].iter().zip(expected) {
        assert_eq!(row.len(), rows[0].len());
        assert_eq!(row[col("file")], file.to_str().expect("utf-8 path"));
        assert_eq!(row[col("id")], id.to_string());
        assert_eq!(row[col("client")], client);
        assert_eq!(row[col("state")], "SF");
        let connect: f64 = row[col("connect")].parse().expect("connect is a number");
        assert!((connect - 150e-6).abs() < 1e-9, "{connect}");
    }
}

// ---------------------------------------------------------------- exit codes

fn assert_exit_2(out: &std::process::Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "stderr: {}", stderr(out));
    assert!(stderr(out).contains(needle), "stderr: {}", stderr(out));
}

#[test]
fn missing_file_exits_2_naming_it() {
    let scratch = Scratch::new();
    let path = scratch.path("does-not-exist.pcap");
    let out = run_analyze(&[], &[&path]);
    assert_exit_2(&out, "does-not-exist.pcap");
    // A good file before it is still reported.
    let good = scratch.file("good.pcap", &pcap_of(Link::Ethernet, &[&basic()]));
    let out = run_analyze(&["-T", "csv"], &[&good, &path]);
    assert_exit_2(&out, "does-not-exist.pcap");
    assert_eq!(stdout(&out).lines().count(), 2);
}

#[test]
fn text_file_exits_2() {
    let out = analyze_with(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", &[]);
    assert_exit_2(&out, "not a pcap");
    assert_exit_2(&analyze_with(b"", &[]), "empty");
    // A pcap header cut short is not a capture either.
    assert_eq!(
        analyze_with(&Pcap::new(1).header()[..10], &[])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn header_only_capture_has_no_connections() {
    let v = analyze(&Pcap::new(1).header());
    assert_eq!(connections(&v), 0);
    assert_u64(&v, "/summary/packets/total", 0);
    assert_eq!(at(&v, "/summary/first_packet"), &Value::Null);
    assert_eq!(at(&v, "/summary/truncated"), &Value::Bool(false));
}

#[test]
fn unsupported_classic_link_type_exits_2() {
    let bytes = Pcap::new(147).write(&[Packet::new(T0, vec![1, 2, 3, 4])]);
    assert_exit_2(&analyze_with(&bytes, &[]), "unsupported link type 147");
}

#[test]
fn no_file_argument_exits_2() {
    assert_exit_2(&run(["analyze"]), "no capture given");
}

#[test]
fn closed_stdout_pipe_exits_quietly() {
    let scratch = Scratch::new();
    let path = scratch.file("big.pcap", &many(2000));
    // The first line of each format: the headline, a record, the CSV
    // header, the document's opening.
    for (args, first) in [
        (&["--limit", "0"][..], "verdict"),
        (&["-T", "jsonl"][..], "{"),
        (&["-T", "csv"][..], "file,"),
        (&["-T", "json"][..], "{"),
    ] {
        let mut child = bin()
            .arg("analyze")
            .args(args)
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        reader.read_line(&mut line).expect("read one line");
        assert!(line.starts_with(first), "{args:?}: {line}");
        drop(reader);
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}: nothing on stderr");
    }
}
