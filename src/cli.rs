//! Command-line arguments (clap derive) and their validation into a
//! [`Config`] and report options.
//!
//! Does not open files or touch packets and records.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use handshakes::decode::{UdpTunnel, UdpTunnels};
use handshakes::record::{Overlay, OverlayKind};
use handshakes::report::timeline::ConnId;
use handshakes::report::Format;
use handshakes::source::file::Access;
#[cfg(feature = "live")]
use handshakes::source::live::FilterExpression;
use handshakes::Config;

#[derive(Debug, Parser)]
#[command(
    name = "handshakes",
    version,
    about = "Count TCP and TLS handshakes per connection in packet captures",
    long_about = "Reads pcap or pcapng captures (or captures live) and rebuilds every TCP connection: \
                  its TCP handshake and timing, its TLS handshake (version, cipher, SNI, ALPN, full or \
                  resumed), the HTTP requests that rode on it and how it closed, so you can see how \
                  many handshakes an HTTP client pays per request."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Analyze saved captures (pcap, pcapng; gzip or zstd compressed; `-` for stdin)
    Analyze(AnalyzeArgs),
    /// Capture live on an interface and print each connection as it closes (needs the `live` feature)
    Live(LiveArgs),
    /// List the interfaces live capture can use, with their addresses
    Interfaces,
    /// Compare captures side by side (e.g. a client without and with a connection pool; or several clients)
    Compare(CompareArgs),
    /// Draw connections as a waterfall on a shared time axis in the terminal
    Timeline(TimelineArgs),
}

/// Output formats of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// The verdict and the tables, for people
    Table,
    /// One JSON document: each capture's summary, the metrics, the ratios and the verdicts
    Json,
    /// The verdict and the tables in GitHub-flavoured Markdown, to paste into an issue or a pull request
    Markdown,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The captures: the first (A) is the baseline, the others (B, C, …, Z at most) are compared with it; with two, ratios are B/A
    #[arg(value_name = "CAPTURE", num_args = 2.., required = true)]
    pub files: Vec<PathBuf>,

    /// Names for the captures by their letters, e.g. --label A=HttpURLConnection --label B=HttpClient
    #[arg(long = "label", value_name = "LETTER=NAME", value_parser = parse_label)]
    pub labels: Vec<(char, String)>,

    /// Output format
    #[arg(short = 'T', long, value_enum, default_value_t = CompareFormat::Table)]
    pub format: CompareFormat,

    /// Also write a self-contained HTML report of the captures
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    #[command(flatten)]
    pub select: SelectArgs,

    #[command(flatten)]
    pub progress: ProgressArgs,

    #[command(flatten)]
    pub decode: DecodeArgs,

    #[command(flatten)]
    pub tls: TlsArgs,

    /// Read files with read() instead of memory maps (same output)
    #[arg(long)]
    pub no_mmap: bool,
}

/// The progress display's switch, for every command that reads captures.
#[derive(Debug, Args)]
pub struct ProgressArgs {
    /// No progress display on stderr (shown on a terminal while a file of 100 MB or more, or standard input after a second, is read)
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

fn parse_label(s: &str) -> Result<(char, String), String> {
    let mut letter = s.chars().take_while(|&c| c != '=');
    match (letter.next(), letter.next(), s.split_once('=')) {
        (Some(c), None, Some((_, name))) if c.is_ascii_alphabetic() && !name.is_empty() => {
            Ok((c.to_ascii_uppercase(), name.to_string()))
        }
        _ => Err("expected LETTER=NAME: A names the first capture, B the second, …".into()),
    }
}

impl CompareArgs {
    /// The label of the `i`th capture (lettered A, B, …), defaulting to
    /// its file name.
    pub fn label(&self, i: usize) -> String {
        let letter = handshakes::report::compare::many::letter(i);
        if let Some((_, name)) = self.labels.iter().rev().find(|(s, _)| *s == letter) {
            return name.clone();
        }
        let Some(path) = self.files.get(i) else {
            return letter.to_string();
        };
        path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// What is wrong with the captures or labels given, in one line.
    pub fn problem(&self) -> Option<String> {
        let max = handshakes::report::compare::many::MAX_CAPTURES;
        if self.files.len() > max {
            return Some(format!(
                "compare: {} captures given; at most {max} (A to Z)",
                self.files.len()
            ));
        }
        let last = handshakes::report::compare::many::letter(self.files.len().saturating_sub(1));
        let stray = self.labels.iter().find(|(s, _)| *s > last)?;
        Some(format!(
            "--label {}={}: there is no capture {} (the {} given are A to {last})",
            stray.0,
            stray.1,
            stray.0,
            self.files.len()
        ))
    }
}

#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// The capture to draw
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Only this connection, with its event list: a TCP connection's id,
    /// or q and a QUIC connection's (q1)
    #[arg(long, value_name = "ID", conflicts_with = "top")]
    pub conn: Option<ConnId>,

    /// Only the N longest connections
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// Columns to fit (default: the terminal's width, or 100)
    #[arg(long, value_name = "N")]
    pub width: Option<usize>,

    #[command(flatten)]
    pub select: SelectArgs,

    #[command(flatten)]
    pub progress: ProgressArgs,

    #[command(flatten)]
    pub decode: DecodeArgs,

    #[command(flatten)]
    pub tls: TlsArgs,

    /// Read files with read() instead of memory maps (same output)
    #[arg(long)]
    pub no_mmap: bool,
}

/// Output formats of `live`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LiveFormat {
    /// One line per connection as it closes, then the summary
    Table,
    /// One JSON object per connection as it closes, then `{"summary": …}`
    Jsonl,
    /// One CSV row per connection as it closes (the columns of `analyze -T csv`), after a header
    Csv,
}

#[derive(Debug, Args)]
pub struct LiveArgs {
    /// Interface to capture on (see `handshakes interfaces`)
    #[arg(short = 'i', long, value_name = "IFACE")]
    pub interface: String,

    /// Capture filter in BPF syntax, as for tcpdump (e.g. 'tcp port 8443'); the kernel runs it, and `-w` saves what it passed
    #[arg(short = 'f', long, value_name = "BPF")]
    pub filter: Option<String>,

    #[command(flatten)]
    pub connections: ConnectionArgs,

    /// Stop after this long, e.g. 30s or 5m (default: until Ctrl-C)
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,

    /// Stop after this many packets
    #[arg(short = 'c', long, value_name = "N")]
    pub count: Option<u64>,

    /// Also write the captured packets to this pcap file
    #[arg(short = 'w', long, value_name = "FILE")]
    pub write: Option<PathBuf>,

    /// Output format
    #[arg(short = 'T', long, value_enum, default_value_t = LiveFormat::Table)]
    pub format: LiveFormat,

    /// Report a connection after this long without packets
    #[arg(long, value_parser = parse_duration, default_value = "60s", value_name = "DURATION")]
    pub idle: Duration,

    /// Cut the closing summary's `over time` into intervals this long, e.g. 1s or 100ms (default: about 60 intervals)
    #[arg(long, value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Option<Duration>,

    /// Per-direction cap on buffered stream bytes, e.g. 256KiB or 1MiB
    #[arg(long, value_parser = parse_size, default_value = "256KiB", value_name = "SIZE")]
    pub stream_buffer: usize,

    #[command(flatten)]
    pub decode: DecodeArgs,

    #[command(flatten)]
    pub tls: TlsArgs,
}

impl LiveArgs {
    /// The analysis settings; `Err` is one line for the user.
    #[cfg_attr(not(feature = "live"), allow(dead_code))]
    pub fn config(&self) -> Result<Config, String> {
        Ok(self.connections.apply(Config {
            ports: Vec::new(),
            hosts: Vec::new(),
            overlays: Vec::new(),
            idle_timeout: Some(self.idle),
            stream_buffer: self.stream_buffer,
            interval: self.interval,
            max_requests_listed: None,
            max_connections: 0,
            threads: 1,
            udp_tunnels: self.decode.udp_tunnels()?,
            split_piece: None,
            slice: None,
            keylog: None,
            // The capture filter is libpcap's, on the interface.
            #[cfg(feature = "live")]
            filter: None,
        }))
    }
}

/// `-d`, tshark's "decode as", for the UDP ports that carry tunnels.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Decode a UDP port as a tunnel, tshark style: udp.port==8472,vxlan (the Linux kernel's and flannel's VXLAN port) or udp.port==N,geneve; repeat for several (4789 is VXLAN and 6081 Geneve unless given otherwise)
    #[arg(
        short = 'd',
        long = "decode-as",
        value_name = "udp.port==N,vxlan|geneve",
        value_parser = parse_decode_as
    )]
    pub decode_as: Vec<(u16, UdpTunnel)>,
}

impl DecodeArgs {
    /// The UDP ports to open tunnels on; `Err` is one line for the user.
    pub fn udp_tunnels(&self) -> Result<UdpTunnels, String> {
        let mut ports = UdpTunnels::STANDARD;
        for &(port, kind) in &self.decode_as {
            if !ports.add(port, kind) {
                return Err(format!(
                    "-d udp.port=={port}: at most {} ports per tunnel kind",
                    UdpTunnels::PORTS_EACH
                ));
            }
        }
        Ok(ports)
    }
}

/// `--keylog`, tshark's `tls.keylog_file`.
#[derive(Debug, Args)]
pub struct TlsArgs {
    /// Open TLS records with the secrets in this key log (the NSS format SSLKEYLOGFILE writes), so requests over HTTPS are read, not estimated; repeat for several
    #[arg(long, value_name = "FILE")]
    pub keylog: Vec<PathBuf>,
}

fn parse_overlay(s: &str) -> Result<Overlay, String> {
    const EXPECTED: &str =
        "expected KIND:ID with KIND vxlan, geneve, gre or erspan, e.g. vxlan:4242";
    let (kind, id) = s.split_once(':').ok_or(EXPECTED)?;
    let kind = kind.trim().to_ascii_lowercase();
    let kind = *OverlayKind::ALL
        .iter()
        .find(|k| k.name() == kind)
        .ok_or(EXPECTED)?;
    let id = id.trim().parse::<u32>().map_err(|_| EXPECTED)?;
    Ok(Overlay { kind, id })
}

fn parse_decode_as(s: &str) -> Result<(u16, UdpTunnel), String> {
    const EXPECTED: &str =
        "expected udp.port==PORT,vxlan or udp.port==PORT,geneve (tshark's -d), e.g. udp.port==8472,vxlan";
    let (selector, protocol) = s.split_once(',').ok_or(EXPECTED)?;
    let port = selector
        .trim()
        .strip_prefix("udp.port==")
        .and_then(|p| p.trim().parse::<u16>().ok())
        .filter(|&p| p != 0)
        .ok_or(EXPECTED)?;
    let kind = match protocol.trim().to_ascii_lowercase().as_str() {
        "vxlan" => UdpTunnel::Vxlan,
        "geneve" => UdpTunnel::Geneve,
        _ => {
            return Err(format!(
                "{EXPECTED} (vxlan and geneve are the tunnels this opens)"
            ))
        }
    };
    Ok((port, kind))
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Capture files to read; `-` reads standard input (`tcpdump -w - | handshakes analyze -`)
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Capture file to read, tcpdump style (may be repeated)
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub read: Vec<PathBuf>,

    /// Output format
    #[arg(short = 'T', long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Treat all files as one capture, packets merged by timestamp
    #[arg(long)]
    pub merge: bool,

    #[command(flatten)]
    pub select: SelectArgs,

    /// Table rows to show (0 shows all); JSON and CSV always have every connection
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub limit: usize,

    /// End a connection after this long without packets, e.g. 90s or 5m (default: never)
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub idle: Option<Duration>,

    /// Count what began in each interval this long, e.g. 1s or 100ms, and list them in the table (default: about 60 intervals, drawn as a line)
    #[arg(long, value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Option<Duration>,

    /// Per-direction cap on buffered stream bytes (out-of-order data, TLS handshake), e.g. 256KiB or 1MiB
    #[arg(long, value_parser = parse_size, default_value = "256KiB", value_name = "SIZE")]
    pub stream_buffer: usize,

    /// Requests listed per connection in JSON (counts, status codes and latency always include all)
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_requests_listed: usize,

    /// Also write a self-contained HTML report (waterfall, histograms, table)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    #[command(flatten)]
    pub progress: ProgressArgs,

    /// Connections tracked at once; beyond, the least recently active is reported as evicted
    #[arg(long, default_value_t = 500_000, value_name = "N")]
    pub max_connections: usize,

    /// Analysis threads (0: one per core, one fewer when standard input is a pipe); the output is the same for any number
    #[arg(short = 'j', long, default_value_t = 0, value_name = "N")]
    pub threads: usize,

    /// Read files with read() instead of memory maps (same output; for files another program may truncate while they are read)
    #[arg(long)]
    pub no_mmap: bool,

    #[command(flatten)]
    pub decode: DecodeArgs,

    #[command(flatten)]
    pub tls: TlsArgs,
}

impl AnalyzeArgs {
    /// How to read a capture file that is one of `files` read side by side.
    pub fn access(&self, files: usize) -> Access {
        access(self.no_mmap, files)
    }
}

/// How to read a capture file that is one of `files` read side by side:
/// memory-mapped unless `--no-mmap`.
pub fn access(no_mmap: bool, files: usize) -> Access {
    if no_mmap {
        Access::Read
    } else {
        Access::map_shared(files)
    }
}

/// The most analysis threads `--threads` accepts.
const MAX_THREADS: usize = 256;

fn parse_size(s: &str) -> Result<usize, String> {
    let size: bytesize::ByteSize = s
        .parse()
        .map_err(|e| format!("{e} (examples: 64KiB, 1MiB)"))?;
    match usize::try_from(size.as_u64()) {
        Ok(n) if n >= 1024 => Ok(n),
        _ => Err("must be at least 1KiB".into()),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 500ms, 30s, 5m)"))
}

/// A series' interval: a duration of a microsecond or more.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_micros(1) {
        return Err("must be at least 1us (examples: 100ms, 1s, 1m)".into());
    }
    Ok(d)
}

impl AnalyzeArgs {
    /// All inputs, positional and `-r`, in the order given.
    pub fn inputs(&self) -> Vec<PathBuf> {
        self.read.iter().chain(self.files.iter()).cloned().collect()
    }

    /// Checks the combination of arguments; `Err` is one line for the user.
    pub fn validate(&self) -> Result<(), String> {
        let inputs = self.inputs();
        if inputs.is_empty() {
            return Err(
                "no capture given: try `handshakes analyze FILE` (or `-` to read standard input)"
                    .into(),
            );
        }
        if inputs.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
            return Err("standard input (`-`) can be read only once".into());
        }
        if self.idle.is_some_and(|d| d.is_zero()) {
            return Err("--idle must be longer than zero".into());
        }
        self.decode.udp_tunnels()?;
        self.select.validate()?;
        if self.threads > MAX_THREADS {
            return Err(format!(
                "--threads {}: at most {MAX_THREADS} (0 means one per core)",
                self.threads
            ));
        }
        Ok(())
    }

    pub fn config(&self) -> Config {
        let config = Config {
            idle_timeout: self.idle,
            stream_buffer: self.stream_buffer,
            interval: self.interval,
            max_requests_listed: Some(self.max_requests_listed),
            max_connections: self.max_connections,
            threads: self.threads,
            udp_tunnels: self.decode.udp_tunnels().unwrap_or_default(),
            ..Config::default()
        };
        self.select.apply(config)
    }
}

/// `--port`, `--host`, `--overlay`: the connections kept, by their
/// endpoints and the overlay network they rode in (every subcommand that
/// reads traffic).
#[derive(Debug, Args)]
pub struct ConnectionArgs {
    /// Only connections with this port on either side (repeat for several)
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,

    /// Only connections with this address on either side (repeat for several)
    #[arg(long = "host", value_name = "ADDR")]
    pub hosts: Vec<IpAddr>,

    /// Only connections in this overlay network, e.g. vxlan:4242, geneve:7, gre:1, erspan:5 (repeat for several)
    #[arg(long = "overlay", value_name = "KIND:ID", value_parser = parse_overlay)]
    pub overlays: Vec<Overlay>,
}

impl ConnectionArgs {
    /// `config` keeping only the connections these flags select.
    pub fn apply(&self, config: Config) -> Config {
        Config {
            ports: self.ports.clone(),
            hosts: self.hosts.clone(),
            overlays: self.overlays.clone(),
            ..config
        }
    }
}

/// Which connections to keep, for every command that reads captures:
/// the figures are about them only.
#[derive(Debug, Args)]
pub struct SelectArgs {
    #[command(flatten)]
    pub connections: ConnectionArgs,

    /// Only the frames this capture filter matches, in BPF syntax as for `tcpdump -r FILE EXPRESSION` (e.g. 'tcp port 443 and net 10.1.0.0/16'); needs the `live` feature (libpcap compiles it)
    #[arg(short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
}

impl SelectArgs {
    /// Checks `-f`; `Err` is one line for the user.
    pub fn validate(&self) -> Result<(), String> {
        self.filter_expression().map(drop)
    }

    /// `config` keeping only what these flags select (checked first with
    /// [`SelectArgs::validate`]).
    pub fn apply(&self, config: Config) -> Config {
        Config {
            #[cfg(feature = "live")]
            filter: self.filter_expression().ok().flatten(),
            ..self.connections.apply(config)
        }
    }

    /// `-f`'s expression, compiled; `Err` is one line for the user.
    #[cfg(feature = "live")]
    fn filter_expression(&self) -> Result<Option<FilterExpression>, String> {
        self.filter
            .as_deref()
            .map(|e| FilterExpression::new(e).map_err(|why| format!("-f '{e}': {why}")))
            .transpose()
    }

    /// Without libpcap, `-f` cannot be compiled; `Err` says so.
    #[cfg(not(feature = "live"))]
    fn filter_expression(&self) -> Result<(), String> {
        match &self.filter {
            Some(_) => Err("-f needs libpcap to compile the filter, and this build has none: build with `--features live` (and libpcap-dev), or keep connections with --port, --host and --overlay".into()),
            None => Ok(()),
        }
    }
}
