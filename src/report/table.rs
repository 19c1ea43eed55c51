//! The report for people: a summary block, then one table row per connection
//! (comfy-table), sorted by start.
//!
//! Does not compute statistics; it formats `Summary` and `ConnectionRecord`.

use std::io::{self, Write};

use comfy_table::{presets, Cell, CellAlignment, ContentArrangement, Table};

use super::{human_bytes, human_duration, Opts};
use crate::record::{CloseKind, ConnectionRecord, Distribution, Summary};

/// Writes the summary block and the connection table.
pub fn write(
    summary: &Summary,
    records: &[ConnectionRecord],
    out: &mut dyn Write,
    opts: &Opts,
) -> io::Result<()> {
    write_summary(summary, out)?;
    if records.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    write_connections(records, out, opts)
}

fn dist_line(d: &Distribution) -> String {
    match (d.median, d.p90, d.max) {
        (Some(median), Some(p90), Some(max)) => format!(
            "median {}  p90 {}  max {}  (n={})",
            human_duration(median),
            human_duration(p90),
            human_duration(max),
            d.count
        ),
        _ => "-".to_string(),
    }
}

/// The summary block: what was read and the connection-level totals.
pub fn write_summary(s: &Summary, out: &mut dyn Write) -> io::Result<()> {
    let format = match &s.compression {
        Some(c) => format!("{}, {c}", s.format),
        None => s.format.clone(),
    };
    writeln!(out, "capture       {} ({format})", s.file)?;
    writeln!(
        out,
        "span          {} ({} packets, {})",
        human_duration(s.span),
        s.packets.total,
        human_bytes(s.packets.bytes)
    )?;
    let mut packets = format!(
        "{} TCP, {} skipped (not TCP or undecodable)",
        s.packets.tcp, s.packets.skipped
    );
    if s.packets.filtered_out > 0 {
        packets.push_str(&format!(", {} filtered out", s.packets.filtered_out));
    }
    writeln!(out, "packets       {packets}")?;
    writeln!(
        out,
        "connections   {}  (TCP handshakes complete: {}, without a captured SYN: {})",
        s.connections, s.tcp_handshakes, s.connections_without_handshake
    )?;
    writeln!(out, "connect       {}", dist_line(&s.connect))?;
    if s.syn_retransmissions > 0 {
        writeln!(out, "SYN resent    {}", s.syn_retransmissions)?;
    }
    if !s.close.is_empty() {
        let closes: Vec<String> = s.close.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(out, "closes        {}", closes.join(", "))?;
    }
    if !s.anomalies.is_empty() {
        let list: Vec<String> = s
            .anomalies
            .0
            .iter()
            .map(|(k, n)| format!("{} {n}", k.as_str()))
            .collect();
        writeln!(out, "anomalies     {}", list.join(", "))?;
    }
    if s.truncated {
        writeln!(
            out,
            "warning       the capture ends early; see the warning on stderr"
        )?;
    }
    Ok(())
}

fn close_text(rec: &ConnectionRecord) -> String {
    let c = &rec.close;
    match (c.kind, c.by) {
        (CloseKind::Fin | CloseKind::Rst, Some(by)) => {
            format!("{} by {}", c.kind.as_str().to_uppercase(), by.as_str())
        }
        (kind, _) => kind.as_str().to_string(),
    }
}

/// The per-connection table, at most `opts.limit` rows (0: all).
pub fn write_connections(
    records: &[ConnectionRecord],
    out: &mut dyn Write,
    opts: &Opts,
) -> io::Result<()> {
    let mut table = Table::new();
    table.load_style(presets::UTF8_FULL_CONDENSED);
    table.set_content_arrangement(if opts.fit_terminal {
        ContentArrangement::Dynamic
    } else {
        ContentArrangement::Disabled
    });
    table.set_header(vec![
        "id", "client", "server", "start", "connect", "up", "down", "pkts", "state", "close",
    ]);
    let shown = if opts.limit == 0 {
        records.len()
    } else {
        opts.limit.min(records.len())
    };
    for rec in records.iter().take(shown) {
        let connect = match rec.tcp.handshake.connect {
            Some(c) => human_duration(c),
            None if rec.partial => "no SYN".to_string(),
            None => "-".to_string(),
        };
        table.add_row(vec![
            Cell::new(rec.id).set_alignment(CellAlignment::Right),
            Cell::new(&rec.client),
            Cell::new(&rec.server),
            Cell::new(format!("{:.6}", rec.start.at)).set_alignment(CellAlignment::Right),
            Cell::new(connect).set_alignment(CellAlignment::Right),
            Cell::new(human_bytes(rec.tcp.bytes.client)).set_alignment(CellAlignment::Right),
            Cell::new(human_bytes(rec.tcp.bytes.server)).set_alignment(CellAlignment::Right),
            Cell::new(rec.tcp.packets.total()).set_alignment(CellAlignment::Right),
            Cell::new(&rec.tcp.state),
            Cell::new(close_text(rec)),
        ]);
    }
    writeln!(out, "{table}")?;
    if shown < records.len() {
        writeln!(
            out,
            "… {} more connections not shown (--limit 0 shows all; --format json has every one)",
            records.len() - shown
        )?;
    }
    Ok(())
}
