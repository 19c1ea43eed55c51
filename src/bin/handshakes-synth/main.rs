//! `handshakes-synth`: writes a large, protocol-valid synthetic capture for
//! benchmarks and profiling (`scripts/bench.sh`, `benches/pipeline.rs`).
//!
//! ```console
//! handshakes-synth --out big.pcap --size 1GiB [--seed N] [--concurrency N]
//! handshakes-synth --out short.pcap --connections 1000000 --mix short
//! ```
//!
//! The output is a classic pcap (microseconds, Ethernet, snap length 65535)
//! written as a stream in bounded memory: a discrete-event simulation of many
//! concurrent TCP connections from many client addresses (IPv4 and IPv6) to
//! a few servers on 443 and 80 (and 8080), interleaved packet by packet,
//! until the output nears `--size` or `--connections` were opened;
//! `--concurrency` connections are open at once. The default mix
//! (`--mix web`), from 2 200 client addresses:
//!
//! * TLS 1.3 and TLS 1.2 full handshakes (ClientHello with SNI, ALPN,
//!   supported_versions and key_share; a ~3 KB certificate chain split
//!   across segments, ServerKeyExchange, ServerHelloDone, ClientKeyExchange,
//!   ChangeCipherSpec and encrypted Finished in 1.2; encrypted flights in 1.3),
//!   and resumed ones (1.2 by session-id echo without a Certificate, 1.3 by
//!   pre_shared_key), resuming only sessions a client really had;
//! * 1 to 50 requests per connection as alternating application-data record
//!   flights (HTTP/1.1 or h2 inside), responses of 1 KB to 200 KB split into
//!   MSS-sized segments and 16 KB records; cleartext HTTP/1.1 on port 80 with
//!   Content-Length and chunked responses;
//! * ACKs every second segment, a little reordering and retransmission,
//!   FIN/FIN and RST closes, close_notify alerts, and port reuse (a closed
//!   tuple opened again with a new ISN).
//!
//! `--mix short` is many short connections instead: 64 clients without
//! pooling against a rate-limited API, one or two small requests per
//! connection, TLS (full and resumed) and cleartext HTTP/1.1 (see `mix.rs`).
//!
//! What it generated is printed on stderr, the last line as JSON, so a bench
//! can check that `handshakes analyze` finds the same connections, TLS
//! handshakes and requests. Every request is sent as one client flight, so
//! the analyzer's TLS request estimate is exact by construction.
//!
//! Layout: `cli.rs` parses the arguments; `mix.rs` holds what differs
//! between mixes (population, sizes, timing); `sim.rs` runs the event loop
//! over connections; `conn.rs` is a connection's state machine, `plan.rs`
//! what it says; `tls.rs`, `http.rs` and `flight.rs` build the bytes; `pcap.rs`
//! writes them; `rng.rs` makes every choice reproducible from the seed.
//!
//! This file owns `main` and the final report on stderr; it does not own any
//! of the generation itself.

mod cli;
mod conn;
mod flight;
mod http;
mod mix;
mod pcap;
mod plan;
mod rng;
mod sim;
mod tls;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Instant;

use cli::{parse_args, Args, USAGE};
use sim::Sim;

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("handshakes-synth: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let writer: Box<dyn Write> = if args.out == "-" {
        Box::new(BufWriter::with_capacity(1 << 20, io::stdout()))
    } else {
        match File::create(&args.out) {
            Ok(f) => Box::new(BufWriter::with_capacity(4 << 20, f)),
            Err(e) => {
                eprintln!("handshakes-synth: {}: {e}", args.out);
                return ExitCode::from(2);
            }
        }
    };
    let started = Instant::now();
    let mut sim = match Sim::new(
        args.seed,
        args.size,
        args.connections,
        args.mix,
        args.concurrency,
        writer,
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("handshakes-synth: {}: {e}", args.out);
            return ExitCode::from(1);
        }
    };
    if let Err(e) = sim.run() {
        eprintln!("handshakes-synth: {}: {e}", args.out);
        return ExitCode::from(1);
    }
    let elapsed = started.elapsed().as_secs_f64();
    report(&sim, &args, elapsed);
    ExitCode::SUCCESS
}

fn report(sim: &Sim, args: &Args, elapsed: f64) {
    let s = &sim.stats;
    let out = &sim.out;
    let requests_tls = s.requests_tls_http1 + s.requests_tls_h2;
    let requests = s.requests_cleartext + requests_tls;
    let span = out.clock as f64 / 1e9;
    if !args.quiet {
        eprintln!(
            "handshakes-synth: wrote {} ({} bytes, {} packets, {span:.1} s of capture) in {elapsed:.1} s ({:.0} MB/s), mix {}, seed {}",
            args.out,
            out.bytes,
            out.packets,
            out.bytes as f64 / 1e6 / elapsed.max(1e-9),
            args.mix.name(),
            args.seed
        );
        eprintln!(
            "connections  {} ({} IPv6, peak {} open, {} reusing a closed tuple; {:.0} per second of capture)",
            s.connections,
            s.ipv6,
            s.max_concurrent,
            s.port_reuses,
            s.connections as f64 / span.max(1e-9)
        );
        eprintln!(
            "TLS          {} connections: 1.3 full {}, 1.3 resumed {}, 1.2 full {}, 1.2 resumed {}; h2 {}",
            s.tls, s.tls13_full, s.tls13_resumed, s.tls12_full, s.tls12_resumed, s.h2
        );
        eprintln!(
            "requests     {requests}: cleartext HTTP/1.1 {} (exact; {} chunked responses), TLS {requests_tls} (HTTP/1.1 {}, h2 {})",
            s.requests_cleartext, s.chunked_responses, s.requests_tls_http1, s.requests_tls_h2
        );
        eprintln!(
            "closes       FIN by client {}, FIN by server {}, RST by client {}, RST by server {}; {} reordered pairs, {} retransmissions, {} close_notify replies",
            s.closes[0], s.closes[1], s.closes[2], s.closes[3], s.reordered, s.retransmitted, s.close_notify_replies
        );
    }
    eprintln!(
        "{{\"bytes\":{},\"packets\":{},\"connections\":{},\"tcp_handshakes\":{},\"tls_connections\":{},\"tls_handshakes_full\":{},\"tls_handshakes_resumed\":{},\"requests\":{},\"requests_exact\":{},\"requests_estimated\":{},\"h2_connections\":{},\"closes_fin\":{},\"closes_rst\":{},\"seconds\":{elapsed:.3},\"capture_seconds\":{span:.3},\"max_open\":{},\"port_reuses\":{}}}",
        out.bytes,
        out.packets,
        s.connections,
        s.connections,
        s.tls,
        s.tls13_full + s.tls12_full,
        s.tls13_resumed + s.tls12_resumed,
        requests,
        s.requests_cleartext,
        requests_tls,
        s.h2,
        s.closes[0] + s.closes[1],
        s.closes[2] + s.closes[3],
        s.max_concurrent,
        s.port_reuses,
    );
}
