//! The counts a shard keeps for the summary (frames by kind, QUIC, what
//! the filters left out, anomalies on no connection), and how they add up
//! across shards and with the reader's defragmenter.
//!
//! Does not count connections or requests: the gatherer's summary does.

use std::collections::BTreeMap;

use crate::decode::defrag::Defragmenter;
use crate::record::{Anomalies, QuicSummary};

/// Counts a shard keeps for the summary; they add up across shards.
#[derive(Clone, Debug, Default)]
pub struct ShardCounts {
    pub tcp: u64,
    pub skipped: u64,
    /// Of `skipped`: UDP datagrams carrying a QUIC handshake packet…
    pub quic: u64,
    /// …and the QUIC connections they opened…
    pub quic_connections: u64,
    /// …and what they came to (the first shard's, once the input ended).
    pub quic_result: Option<Box<QuicSummary>>,
    pub filtered_out: u64,
    /// Of `filtered_out`: frames `-f` could not judge (its expression does
    /// not compile for their link type), by link type.
    pub unfilterable: BTreeMap<u32, u64>,
    /// IP fragments held for reassembly (kept by the reader, not a shard).
    pub fragments: u64,
    /// Anomalies not attached to any connection.
    pub anomalies: Anomalies,
}

impl ShardCounts {
    pub fn merge(&mut self, other: &ShardCounts) {
        self.tcp += other.tcp;
        self.skipped += other.skipped;
        self.quic += other.quic;
        self.quic_connections += other.quic_connections;
        if let Some(r) = &other.quic_result {
            self.quic_result.get_or_insert_with(|| r.clone());
        }
        self.filtered_out += other.filtered_out;
        for (link, n) in &other.unfilterable {
            *self.unfilterable.entry(*link).or_default() += n;
        }
        self.fragments += other.fragments;
        self.anomalies.merge(&other.anomalies);
    }

    /// Adds what the defragmenter did, once the input has ended.
    pub fn add_defrag(&mut self, defrag: &mut Defragmenter) {
        defrag.finish();
        self.fragments += defrag.held;
        self.anomalies.merge(&defrag.anomalies);
    }
}
