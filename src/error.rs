//! Errors that stop a run: a file that cannot be opened or is not a capture,
//! a key log that cannot be used, a live capture that cannot start.
//!
//! Does not cover bad packets: those are data (`record::Anomaly`), counted and
//! reported, never errors.

use std::path::PathBuf;

/// A failure of a packet source; always names the input it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: cannot open: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: read error: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: the file is empty; expected a pcap or pcapng capture")]
    Empty { path: PathBuf },
    #[error("{path}: not a pcap or pcapng capture (first bytes {magic}); convert it with `editcap -F pcapng` or check the file name")]
    NotACapture { path: PathBuf, magic: String },
    #[error("{path}: the file ends inside its capture header; it is cut short or not a capture")]
    TruncatedHeader { path: PathBuf },
    #[error("{path}: unsupported link type {linktype} ({name}); supported: Ethernet (VLAN, MPLS), Linux cooked (SLL, SLL2), raw IP, IPv4, IPv6, BSD/OpenBSD loopback, PPP, NFLOG")]
    UnsupportedLinkType {
        path: PathBuf,
        linktype: u32,
        name: String,
    },
}

/// Why a live capture could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("capturing on {interface} needs privileges: run as root, or grant them once with `sudo setcap cap_net_raw,cap_net_admin=eip $(which handshakes)`")]
    Permission { interface: String },
    #[error("no interface named {interface}; available: {available} (list them with `handshakes interfaces`)")]
    UnknownInterface {
        interface: String,
        available: String,
    },
    #[error("bad capture filter `{filter}`: {message}")]
    BadFilter { filter: String, message: String },
    #[error("{interface}: {message}")]
    Capture { interface: String, message: String },
    #[error("{path}: cannot write the capture: {message}")]
    Write { path: PathBuf, message: String },
    #[error("this build has no live capture: rebuild with `cargo build --release --features live` (needs libpcap: `apt-get install libpcap-dev`, or `brew install libpcap` on macOS)")]
    NotBuilt,
}

/// A `--keylog` file that cannot be used; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum KeyLogError {
    #[error("{path}: cannot open the key log: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot read the key log: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no TLS secrets found; --keylog wants the NSS key log format that SSLKEYLOGFILE writes (lines such as `CLIENT_RANDOM <64 hex digits> <96 hex digits>` or `CLIENT_TRAFFIC_SECRET_0 …`)")]
    NoSecrets { path: PathBuf },
}

impl SourceError {
    /// Exit code for this error: 2, the code for unreadable input.
    pub fn exit_code(&self) -> u8 {
        2
    }
}

/// Why an analysis run stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Writing a report failed (a closed pipe, a full disk).
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
}
