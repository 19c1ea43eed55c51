//! CSV report: one row per connection with flat, stable column names (the
//! JSON names joined by `_`). The only module that names the `csv` crate.
//!
//! Does not compute anything; it flattens `ConnectionRecord`s.

use std::io::{self, Write};

use crate::record::ConnectionRecord;

/// Column names, in order.
pub const COLUMNS: &[&str] = &[
    "file",
    "id",
    "client",
    "server",
    "client_by",
    "partial",
    "start_ts",
    "start_at",
    "end_ts",
    "duration",
    "syn_ts",
    "synack_ts",
    "ack_ts",
    "syn_to_synack",
    "synack_to_ack",
    "connect",
    "syn_retransmissions",
    "handshake_complete",
    "packets_client",
    "packets_server",
    "bytes_client",
    "bytes_server",
    "retransmissions_client",
    "retransmissions_server",
    "state",
    "history",
    "close_kind",
    "close_by",
    "close_ts",
    "anomalies",
    "overlay_kind",
    "overlay_id",
];

/// Writes CSV rows; the header goes out with the first batch only, so several
/// files make one table told apart by the `file` column.
pub struct CsvReport {
    header_written: bool,
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl CsvReport {
    pub fn new() -> CsvReport {
        CsvReport {
            header_written: false,
        }
    }

    pub fn write(
        &mut self,
        file: &str,
        records: &[ConnectionRecord],
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        if !self.header_written {
            w.write_record(COLUMNS)?;
            self.header_written = true;
        }
        for r in records {
            let hs = &r.tcp.handshake;
            let anomalies: Vec<String> = r
                .anomalies
                .0
                .iter()
                .map(|(k, n)| format!("{}={n}", k.as_str()))
                .collect();
            w.write_record([
                file.to_string(),
                r.id.to_string(),
                r.client.clone(),
                r.server.clone(),
                serde_plain(&r.client_by),
                r.partial.to_string(),
                r.start.ts.to_string(),
                r.start.at.to_string(),
                r.end.ts.to_string(),
                r.duration.to_string(),
                opt(hs.syn.map(|i| i.ts)),
                opt(hs.synack.map(|i| i.ts)),
                opt(hs.ack.map(|i| i.ts)),
                opt(hs.syn_to_synack),
                opt(hs.synack_to_ack),
                opt(hs.connect),
                hs.syn_retransmissions.to_string(),
                hs.complete.to_string(),
                r.tcp.packets.client.to_string(),
                r.tcp.packets.server.to_string(),
                r.tcp.bytes.client.to_string(),
                r.tcp.bytes.server.to_string(),
                r.tcp.retransmissions.client.to_string(),
                r.tcp.retransmissions.server.to_string(),
                r.tcp.state.to_string(),
                r.tcp.history.clone(),
                r.close.kind.as_str().to_string(),
                r.close
                    .by
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
                opt(r.close.time.map(|i| i.ts)),
                anomalies.join(";"),
                r.overlay
                    .map_or(String::new(), |o| o.kind.name().to_string()),
                r.overlay.map_or(String::new(), |o| o.id.to_string()),
            ])?;
        }
        w.flush()
    }
}

impl Default for CsvReport {
    fn default() -> Self {
        Self::new()
    }
}

/// The JSON spelling of a unit enum variant, without quotes.
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
