//! `handshakes`: rebuild, for every TCP connection in a capture, its TCP
//! handshake, how it closed, and (in later stages) its TLS handshake and HTTP
//! requests.
//!
//! The pipeline runs one way:
//! `source` → `decode` → `flow` (connection table, TCP state) → `analyze`
//! (the per-connection driver) → `record` (the output contract) → `report`.
//! This file holds the one entry point that tests, benches and the CLI call;
//! it has no protocol logic of its own.

// One module may use `unsafe`: `source::mapped`, to memory-map files.
#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod analyze;
pub mod decode;
pub mod error;
pub mod flow;
pub mod inflate;
pub mod least;
pub mod record;
pub mod report;
pub mod source;
#[cfg(test)]
mod testutil;
pub mod time;

pub use analyze::tls::keylog::KeyLog;
pub use analyze::{Analyzer, Config, Reading, RecordSink};
pub use error::{Error, LiveError, SourceError};
pub use record::{ConnectionRecord, Summary};
pub use source::PacketSource;

use analyze::PROGRESS_EVERY;

/// Runs a whole source through the pipeline. Each connection record goes to
/// `sink` when it is final (closed and lingered, idle, or at the end); the
/// summary comes back at the end.
pub fn analyze(
    source: &mut dyn PacketSource,
    config: &Config,
    sink: &mut dyn RecordSink,
) -> Result<Summary, Error> {
    analyze_with_progress(source, config, sink, &mut |_| {})
}

/// [`analyze`], telling `progress` how far it has come now and then.
pub fn analyze_with_progress(
    source: &mut dyn PacketSource,
    config: &Config,
    sink: &mut dyn RecordSink,
    progress: &mut dyn FnMut(&Reading),
) -> Result<Summary, Error> {
    let threads = config.worker_threads(source.piped());
    if threads > 1 {
        return analyze::parallel::run(source, config, threads, sink, progress);
    }
    let mut analyzer = Analyzer::new(config.clone());
    let mut packets = 0u64;
    loop {
        // The packet is read where `next_packet` left it: copied out of the
        // `Result`, it was reread in wider words than it was written in (a
        // failed store forward; 5 % of a large capture's samples sat on it).
        let next = source.next_packet();
        let packet = match next {
            Ok(Some(ref packet)) => packet,
            Ok(None) => break,
            Err(e) => return Err(e.into()),
        };
        analyzer.packet(packet, sink)?;
        packets += 1;
        if packets % PROGRESS_EVERY == 0 {
            progress(&analyzer.reading(source));
        }
    }
    Ok(analyzer.finish(source.info(), sink)?)
}
