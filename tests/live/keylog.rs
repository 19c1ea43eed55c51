//! `handshakes live --keylog`: HTTPS between real curl processes and a real
//! `openssl s_server -WWW` on loopback, read exactly with the key log the
//! clients write (SSLKEYLOGFILE) while they are captured — the file does
//! not exist yet when the capture starts, and each session's secrets are
//! appended only as its handshake runs.

use super::traffic::{str_at, u64_at, Live};
use super::*;

/// `openssl s_server -WWW` on 127.0.0.1 with a throw-away certificate,
/// serving a one-file directory (HTTP/1.0, one request per connection).
struct TlsServer {
    port: u16,
    _proc: Proc,
    dir: Scratch,
}

impl TlsServer {
    fn start() -> TlsServer {
        let dir = Scratch::new();
        dir.file("index.html", b"<html><body>hello over TLS</body></html>\n");
        self_signed_certificate(&dir);
        let port = free_port();
        let proc = serve(
            "openssl s_server",
            port,
            Command::new("openssl")
                .args([
                    "s_server",
                    "-accept",
                    &format!("127.0.0.1:{port}"),
                    "-WWW",
                    "-quiet",
                ])
                .arg("-cert")
                .arg(dir.path("cert.pem"))
                .arg("-key")
                .arg(dir.path("key.pem"))
                .current_dir(dir.path("")),
        );
        TlsServer {
            port,
            _proc: proc,
            dir,
        }
    }

    /// One curl request over `tls` flags, its secrets appended to `keylog`.
    fn curl(&self, tls: &[&str], keylog: &Path) {
        let url = format!("https://127.0.0.1:{}/index.html", self.port);
        run_client(
            &format!("curl {tls:?}"),
            Command::new("curl")
                .args([
                    "-sk",
                    "--noproxy",
                    "*",
                    "--max-time",
                    "10",
                    "-o",
                    "/dev/null",
                ])
                .args(tls)
                .arg(url)
                .env("SSLKEYLOGFILE", keylog)
                .stdout(Stdio::null()),
        );
    }
}

#[test]
fn live_reads_https_with_the_key_log_its_clients_write_meanwhile() {
    if !can_capture("live_reads_https_with_the_key_log_its_clients_write_meanwhile") {
        return;
    }
    if Command::new("openssl").arg("version").output().is_err() {
        skip_or_fail("openssl", "not installed (apt-get install openssl)");
        return;
    }
    let server = TlsServer::start();
    let keylog = server.dir.path("keys.log");
    assert!(!keylog.exists());
    let keylog_arg = keylog.display().to_string();
    let live = Live::start(server.port, &["-T", "jsonl", "--keylog", &keylog_arg]);
    let versions: [&[&str]; 3] = [
        &["--tlsv1.3"],
        &["--tlsv1.2", "--tls-max", "1.2"],
        &["--tlsv1.3"],
    ];
    for tls in versions {
        server.curl(tls, &keylog);
    }
    settle(server.port);
    live.proc.signal("INT");
    let done = live.finish(SIGNAL_LIMIT);
    done.assert_clean_exit();
    let (conns, summary) = done.jsonl();
    assert_eq!(conns.len(), 3);
    for (c, version) in conns.iter().zip(["TLS 1.3", "TLS 1.2", "TLS 1.3"]) {
        assert_eq!(str_at(c, "/tls/version"), version);
        assert_eq!(str_at(c, "/tls/decryption/outcome"), "complete", "{c}");
        assert_eq!(u64_at(c, "/tls/decryption/records_failed"), 0);
        assert_eq!(str_at(c, "/http/method"), "tls-http1");
        assert_eq!(u64_at(c, "/http/requests"), 1);
        assert_eq!(str_at(c, "/http/list/0/target"), "/index.html");
        assert_eq!(u64_at(c, "/http/list/0/status"), 200);
        // TLS 1.3's certificate and the server's Finished ride sealed in
        // the ServerHello's segment, before curl has logged their keys:
        // held until it has, and read.
        assert_eq!(str_at(c, "/tls/certificate/subject"), "localhost", "{c}");
        let events = c["tls"]["events"].as_array().expect("events");
        let server_finished = events
            .iter()
            .any(|e| e["name"] == "finished" && e["side"] == "server");
        assert!(server_finished, "{c}");
    }
    assert_eq!(u64_at(&summary, "/requests_exact"), 3);
    assert_eq!(u64_at(&summary, "/tls_decryption/complete"), 3);
    // Three curl processes share no session: the second and third offer
    // none though the first's handshake had completed.
    for c in &conns {
        assert_eq!(c["tls"]["resumption_offered"], Value::Null, "{c}");
    }
    let n = support::at(&summary, "/not_resumed");
    let counts = ["full", "not_offered", "refused"].map(|k| n[k].as_u64());
    assert_eq!(counts, [3, 2, 0].map(Some), "{n}");
}
