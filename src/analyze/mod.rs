//! The analysis driver: what to analyze ([`Config`]), where records go
//! ([`RecordSink`]), and the one-thread [`Analyzer`] that feeds packets to a
//! connection table (`shard`) and puts what it reports in order (`gather`);
//! `parallel` does the same on several threads. The protocol analyzers
//! (`streams`, `tls`, `http`, `h2`) and the summary live below.
//!
//! Does not read files or write output: sources feed it, sinks receive its
//! records.

mod cleartext;
mod connection;
pub mod gather;
pub mod h2;
pub mod http;
pub mod parallel;
pub mod quic;
pub mod shard;
pub mod stats;
pub mod streams;
pub mod summary;
pub mod tls;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::decode::defrag::{may_be_fragment, Defragmenter, Verdict};
use crate::decode::{TcpSegment, UdpTunnels};
use crate::record::{ConnectionRecord, Instant, Overlay, QuicRecord, Selection, Summary};
use crate::source::{RawPacket, SourceInfo};
use crate::time::Timestamp;
use gather::Gather;
use shard::{Clock, Event, Shard};
use tls::keylog::KeyLog;

/// How long a connection with both FINs sent stays in the table to collect
/// the last one's ACK before it is finalised, unless its close is over
/// sooner ([`FINISHED_LINGER`]). Zeek uses the same delay.
pub const CLOSE_LINGER: Duration = Duration::from_secs(5);

/// How long a connection whose close is over (each side's FIN
/// acknowledged, or an RST) stays in the table: only the peers' last ACKs
/// and window updates and packets already in flight can still come — an
/// ACK may be delayed up to 0.5 s (RFC 1122), plus a round trip; in the
/// corpus they came 0.2, 15 and 30 ms after the close was over — while a
/// retransmission would take longer and finds the tombstone. A second
/// instead of five keeps a busy capture's closed connections from piling
/// up.
pub const FINISHED_LINGER: Duration = Duration::from_secs(1);

/// How long a finalised closed connection's tuple is remembered, so stray
/// packets after the linger (retransmitted FINs, late ACKs) are counted as
/// `late_packet` instead of opening a phantom connection. Twice Linux's
/// TIME_WAIT.
pub const TOMBSTONE: Duration = Duration::from_secs(120);

/// What to analyze and how.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Keep only connections with one of these ports on either side (empty: all).
    pub ports: Vec<u16>,
    /// Keep only connections with one of these addresses on either side (empty: all).
    pub hosts: Vec<IpAddr>,
    /// Keep only connections in one of these overlay networks (empty: all).
    pub overlays: Vec<Overlay>,
    /// Finalise a connection after this long without packets (capture time).
    pub idle_timeout: Option<Duration>,
    /// Per-direction cap on buffered stream bytes (out-of-order data, TLS
    /// handshake messages); 0 means the default, [`DEFAULT_STREAM_BUFFER`].
    pub stream_buffer: usize,
    /// Requests listed per connection; `None` means the default, [`DEFAULT_REQUESTS_LISTED`].
    pub max_requests_listed: Option<usize>,
    /// The width of `summary.over_time`'s intervals (`--interval`);
    /// `None`: chosen to fit about 60.
    pub interval: Option<Duration>,
    /// Connections tracked at once; 0 means the default, [`DEFAULT_MAX_CONNECTIONS`].
    /// Beyond it the least recently active connection is finalised (`evicted`).
    pub max_connections: usize,
    /// Worker threads for file analysis; 0 means one per core. The output
    /// is the same for any number.
    pub threads: usize,
    /// The UDP ports whose datagrams are opened as VXLAN or Geneve tunnels.
    pub udp_tunnels: UdpTunnels,
    /// Bytes per piece when several threads walk a memory-mapped capture
    /// at once; `None` means the default, [`crate::source::PIECE`].
    /// Tests use tiny pieces.
    pub split_piece: Option<usize>,
    /// Records a shard holds for the gatherer at once,
    /// about; `None` means the default, [`SLICE`]. Tests use one or two.
    pub slice: Option<usize>,
    /// TLS secrets (`--keylog`): the records they open are read as HTTP.
    pub keylog: Option<Arc<KeyLog>>,
    /// `-f`: only the frames this capture filter matches (libpcap's BPF
    /// compiler, with the `live` feature).
    #[cfg(feature = "live")]
    pub filter: Option<crate::source::live::FilterExpression>,
}

impl Config {
    /// This configuration with the key logs a capture carries (pcapng
    /// Decryption Secrets Blocks: `FileSource::secrets_at_head`) added to
    /// `--keylog`'s, as tshark uses them without being asked.
    pub fn with_secrets(&self, texts: Vec<String>) -> Config {
        let mut config = self.clone();
        if !texts.is_empty() {
            let keylog = KeyLog::with_texts(self.keylog.as_deref(), &texts);
            config.keylog = Some(Arc::new(keylog));
        }
        config
    }

    /// What `ports`, `hosts`, `overlays` and `filter` keep, for the
    /// summary; `None` when they keep everything.
    pub fn selection(&self) -> Option<Selection> {
        let selection = Selection {
            ports: self.ports.clone(),
            hosts: self.hosts.iter().map(IpAddr::to_string).collect(),
            overlays: self
                .overlays
                .iter()
                .map(|o| format!("{}:{}", o.kind.name(), o.id))
                .collect(),
            #[cfg(feature = "live")]
            filter: self.filter.as_ref().map(|f| f.as_str().to_owned()),
            #[cfg(not(feature = "live"))]
            filter: None,
        };
        (selection != Selection::default()).then_some(selection)
    }
}

/// Default cap on connections tracked at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 500_000;

/// Default number of requests listed per connection.
pub const DEFAULT_REQUESTS_LISTED: usize = 100;

/// Default per-direction cap on buffered stream bytes.
pub const DEFAULT_STREAM_BUFFER: usize = 256 * 1024;

/// The cores this process may use.
fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One thread per core, leaving one to the process writing a `piped`
/// input; at least one.
fn threads_beside(cores: usize, piped: bool) -> usize {
    cores.saturating_sub(usize::from(piped)).max(1)
}

impl Config {
    /// Worker threads to use: `threads`, or one per core — one fewer when
    /// the input is `piped` in by another process, which needs a core
    /// itself (on two cores, `cat capture | handshakes analyze -` took
    /// 0.63–0.82 s with two threads and 0.50–0.60 s with one).
    pub fn worker_threads(&self, piped: bool) -> usize {
        match self.threads {
            0 => threads_beside(available_cores(), piped),
            n => n,
        }
    }

    fn max_connections(&self) -> usize {
        if self.max_connections == 0 {
            DEFAULT_MAX_CONNECTIONS
        } else {
            self.max_connections
        }
    }

    fn requests_listed(&self) -> usize {
        self.max_requests_listed.unwrap_or(DEFAULT_REQUESTS_LISTED)
    }

    fn stream_cap(&self) -> usize {
        if self.stream_buffer == 0 {
            DEFAULT_STREAM_BUFFER
        } else {
            self.stream_buffer
        }
    }

    #[inline]
    fn keeps(&self, seg: &TcpSegment<'_>) -> bool {
        self.keeps_between(seg.src, seg.dst, seg.overlay)
    }

    /// Whether `--port`, `--host` and `--overlay` keep traffic between
    /// `src` and `dst` in `overlay`.
    #[inline]
    fn keeps_between(&self, src: SocketAddr, dst: SocketAddr, overlay: Option<Overlay>) -> bool {
        if self.ports.is_empty() && self.hosts.is_empty() && self.overlays.is_empty() {
            return true;
        }
        let port_ok = self.ports.is_empty()
            || self.ports.contains(&src.port())
            || self.ports.contains(&dst.port());
        let host_ok = self.hosts.is_empty()
            || self.hosts.contains(&src.ip())
            || self.hosts.contains(&dst.ip());
        let overlay_ok =
            self.overlays.is_empty() || overlay.is_some_and(|o| self.overlays.contains(&o));
        port_ok && host_ok && overlay_ok
    }
}

/// Time `t` as a record gives it: seconds since the epoch, and since
/// `capture_start` (the capture's first packet).
fn instant(t: Timestamp, capture_start: Timestamp) -> Instant {
    Instant {
        ts: t.as_secs_f64(),
        at: t.secs_since(capture_start),
    }
}

/// Turns a record into its output text (`None` if it cannot: the record is
/// then handed over whole); with `--threads` it runs on the worker
/// threads, so the one thread writing output only writes.
pub type Encoder = fn(&ConnectionRecord) -> Option<Vec<u8>>;

/// Receives each connection record as soon as it is final.
pub trait RecordSink {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()>;

    /// A QUIC connection's record, as it ends (silent past its idle
    /// timeout, or at the end of the input); most sinks read QUIC from the
    /// summary instead.
    fn quic(&mut self, rec: &QuicRecord) -> io::Result<()> {
        let _ = rec;
        Ok(())
    }

    /// How this sink would encode a record, if it wants records to come
    /// already encoded and needs nothing else of them: with `--threads`
    /// such records reach it only as text ([`RecordSink::record_encoded`]).
    fn encoder(&self) -> Option<Encoder> {
        None
    }

    /// A record as the [`RecordSink::encoder`] wrote it; its connection
    /// number is `id`, not the one in `encoded` (that was not final yet).
    /// Only a sink with an encoder gets these.
    fn record_encoded(&mut self, id: u64, encoded: &[u8]) -> io::Result<()> {
        let _ = (id, encoded);
        Err(io::Error::other(
            "an encoded record reached a sink that encodes none",
        ))
    }
}

impl RecordSink for Vec<ConnectionRecord> {
    fn record(&mut self, rec: ConnectionRecord) -> io::Result<()> {
        self.push(rec);
        Ok(())
    }
}

/// Packets between two calls of the progress callback: often enough for a
/// slow pipe (`tcpdump -U -w - | handshakes analyze -`) to show it moving,
/// and a few hundred calls a second on a fast file (the display draws at
/// most 20 times a second).
pub const PROGRESS_EVERY: u64 = 1024;

/// Connections finalised at a time at the end of the input.
pub const FINISH_CHUNK: usize = 1024;

/// Records a shard finalises before it pauses until they have been taken
/// ([`shard::Shard::hold_at_most`]). At a steady rate a shard finalises a
/// few at a packet (one thread) or a few dozen a batch (several) and never
/// pauses; when a pause in the capture, or its end, runs out the linger of
/// thousands of connections at one packet, their records reach the
/// gatherer and the output a slice at a time instead of all at once
/// (100 000 connections closed within a second, then a pause: one thread
/// 149 MiB, two 178 MiB, before slices). With more than eight shards
/// (two threads) a shard's slice is its share of a total instead, so that
/// what waits does not grow with the threads (`parallel::WAITING`).
pub const SLICE: usize = 64;

/// Running totals, for a status line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub open: u64,
    pub finished: u64,
    pub requests: u64,
    pub tcp_handshakes: u64,
}

/// How far the reading of an input has come, for a progress display.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Bytes of the input read so far (of the file as stored: compressed
    /// bytes for a compressed file).
    pub read: u64,
    /// The input's size, when it is a regular file.
    pub size: Option<u64>,
    /// What the connections so far add up to ([`Analyzer::progress`]).
    pub so_far: Progress,
}

/// The whole analysis on one thread, a packet at a time: one shard holding
/// every connection, and the gatherer. Live capture and `--threads 1` use
/// it; `parallel` runs several shards on threads with the same result.
pub struct Analyzer {
    shard: Shard,
    gather: Gather,
    defrag: Defragmenter,
    /// The shard's events between taking and applying them (kept for its
    /// room).
    events: Vec<Event>,
}

impl Analyzer {
    pub fn new(config: Config) -> Analyzer {
        let cap = config.max_connections();
        let slice = config.slice.unwrap_or(SLICE);
        let gather = Gather::new(config.selection(), config.interval);
        let mut shard = Shard::new(config, cap);
        shard.hold_at_most(slice);
        Analyzer {
            shard,
            gather,
            defrag: Defragmenter::default(),
            events: Vec::new(),
        }
    }

    /// Feeds one captured frame; finished connections go to `sink`.
    pub fn packet(&mut self, raw: &RawPacket<'_>, sink: &mut dyn RecordSink) -> io::Result<()> {
        let (index, now) = self.gather.saw_packet(raw);
        let clock = Clock {
            base: index,
            nows: &[now],
            origin: self.gather.origin(raw.ts),
        };
        let verdict = may_be_fragment(raw).then(|| self.defrag.push(raw));
        // The shard pauses when it holds a slice of records (thousands of
        // lingers running out at this packet): they are written, and it
        // goes on with the packet.
        loop {
            let fed = match &verdict {
                None | Some(Verdict::Pass) => self.shard.packet(index, raw, &clock),
                // A fragment held: only time passes.
                Some(Verdict::Held) => self.shard.advance(index, &clock),
                Some(Verdict::Whole(datagram)) => self.shard.packet(index, datagram, &clock),
            };
            flush(&mut self.shard, &mut self.events, &mut self.gather, sink)?;
            if fed {
                return Ok(());
            }
        }
    }

    /// Lets time pass without packets (live capture): finalises connections
    /// whose linger or idle time is over by `now`.
    pub fn tick(&mut self, now: Timestamp, sink: &mut dyn RecordSink) -> io::Result<()> {
        let (index, now) = self.gather.tick(now);
        let clock = Clock {
            base: index,
            nows: &[now],
            origin: self.gather.origin(now),
        };
        loop {
            let done = self.shard.advance(index, &clock);
            self.flush(sink)?;
            if done {
                break;
            }
        }
        self.shard.quic_tick(index, now);
        self.flush(sink)
    }

    fn flush(&mut self, sink: &mut dyn RecordSink) -> io::Result<()> {
        flush(&mut self.shard, &mut self.events, &mut self.gather, sink)
    }

    /// Connections followed now (open, or waiting out the linger after
    /// their close), finished so far, and the requests and TCP handshakes
    /// of those finished (the same with several threads).
    pub fn progress(&self) -> Progress {
        self.gather.progress()
    }

    /// How far `source` has been read, and [`Analyzer::progress`].
    pub fn reading(&self, source: &dyn crate::PacketSource) -> Reading {
        self.gather.reading(source)
    }

    /// Finalises every connection still open (in order of their first
    /// packets) and returns the summary.
    pub fn finish(mut self, info: &SourceInfo, sink: &mut dyn RecordSink) -> io::Result<Summary> {
        while self.shard.finish_some(FINISH_CHUNK) {
            self.flush(sink)?;
        }
        self.flush(sink)?;
        let mut counts = self.shard.counts.clone();
        counts.add_defrag(&mut self.defrag);
        Ok(self.gather.finish(&counts, info))
    }
}

/// Applies the events `shard` made since they were last taken, through
/// `events` (kept for its room).
fn flush(
    shard: &mut Shard,
    events: &mut Vec<Event>,
    gather: &mut Gather,
    sink: &mut dyn RecordSink,
) -> io::Result<()> {
    shard.move_events(events);
    if events.is_empty() {
        return Ok(());
    }
    gather.apply_all(events.drain(..), sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piped_input_leaves_a_core_to_its_writer() {
        assert_eq!(threads_beside(2, false), 2);
        assert_eq!(threads_beside(2, true), 1);
        assert_eq!(threads_beside(8, true), 7);
        assert_eq!(threads_beside(1, true), 1);
        // Only the default is adjusted; a number given is a number taken.
        let config = Config {
            threads: 3,
            ..Config::default()
        };
        assert_eq!(config.worker_threads(true), 3);
        let default = Config::default();
        assert_eq!(
            default.worker_threads(true),
            available_cores().saturating_sub(1).max(1)
        );
    }
}
