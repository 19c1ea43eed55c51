//! Live capture on an interface through libpcap (the `pcap` crate, behind
//! the `live` feature): packets with nanosecond timestamps, an optional BPF
//! filter, an optional copy written to a pcap file, and the kernel's drop
//! counters. The only module that names `pcap`.
//!
//! Does not decode packets or decide when to stop; the caller drives it.

use std::path::Path;

use super::{LinkType, RawPacket, SourceInfo};
use crate::error::LiveError;
use crate::time::Timestamp;

/// libpcap's read timeout. On Linux (TPACKET_V3) it does not expire while
/// no packet arrives, so the capture is also put in non-blocking mode and an
/// empty read returns at once (the caller sleeps briefly).
const READ_TIMEOUT_MS: i32 = 100;
const SNAPLEN: i32 = 262_144;

/// Packets the kernel and the interface saw and dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    pub received: u64,
    pub dropped: u64,
    pub if_dropped: u64,
}

/// A running capture.
pub struct LiveSource {
    interface: String,
    capture: pcap::Capture<pcap::Active>,
    save: Option<pcap::Savefile>,
    link: LinkType,
    index: u64,
    info: SourceInfo,
}

fn classify(interface: &str, e: pcap::Error) -> LiveError {
    let message = e.to_string();
    let lower = message.to_ascii_lowercase();
    if lower.contains("permission") || lower.contains("not permitted") {
        LiveError::Permission {
            interface: interface.to_string(),
        }
    } else if lower.contains("no such device") || lower.contains("doesn't exist") {
        LiveError::UnknownInterface {
            interface: interface.to_string(),
            available: interfaces()
                .map(|list| {
                    list.iter()
                        .map(|i| i.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|_| "unknown".into()),
        }
    } else {
        LiveError::Capture {
            interface: interface.to_string(),
            message,
        }
    }
}

impl LiveSource {
    /// Opens `interface`, applies `filter`, and starts writing to `write` if given.
    pub fn open(
        interface: &str,
        filter: Option<&str>,
        write: Option<&Path>,
    ) -> Result<LiveSource, LiveError> {
        let known = interfaces()?;
        if !known.iter().any(|i| i.name == interface) {
            return Err(LiveError::UnknownInterface {
                interface: interface.to_string(),
                available: known
                    .iter()
                    .map(|i| i.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut capture = pcap::Capture::from_device(interface)
            .and_then(|c| {
                c.promisc(false)
                    .snaplen(SNAPLEN)
                    .timeout(READ_TIMEOUT_MS)
                    .immediate_mode(true)
                    .precision(pcap::Precision::Nano)
                    .buffer_size(64 << 20)
                    .open()
            })
            .and_then(|c| c.setnonblock())
            .map_err(|e| classify(interface, e))?;
        if let Some(expr) = filter {
            capture
                .filter(expr, true)
                .map_err(|e| LiveError::BadFilter {
                    filter: expr.to_string(),
                    message: e.to_string(),
                })?;
        }
        let save = match write {
            Some(path) => Some(capture.savefile(path).map_err(|e| LiveError::Write {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?),
            None => None,
        };
        let link = LinkType(capture.get_datalink().0 as u32);
        Ok(LiveSource {
            interface: interface.to_string(),
            capture,
            save,
            link,
            index: 0,
            info: SourceInfo {
                name: interface.to_string(),
                format: "live".into(),
                ..SourceInfo::default()
            },
        })
    }

    pub fn info(&self) -> &SourceInfo {
        &self.info
    }

    /// The next packet, or `Ok(None)` at once when none is waiting.
    pub fn poll(&mut self) -> Result<Option<RawPacket<'_>>, LiveError> {
        let LiveSource {
            capture,
            save,
            link,
            index,
            interface,
            ..
        } = self;
        match capture.next_packet() {
            Ok(packet) => {
                if let Some(save) = save.as_mut() {
                    save.write(&packet);
                }
                *index += 1;
                let h = packet.header;
                Ok(Some(RawPacket {
                    index: *index,
                    // Nanosecond precision was asked for: tv_usec holds nanoseconds.
                    ts: Timestamp::from_parts(
                        h.ts.tv_sec,
                        h.ts.tv_usec.max(0) as u64,
                        1_000_000_000,
                    ),
                    link: *link,
                    orig_len: h.len,
                    data: packet.data,
                }))
            }
            Err(pcap::Error::TimeoutExpired) => Ok(None),
            Err(e) => Err(classify(interface, e)),
        }
    }

    /// What the kernel says it received and dropped so far.
    pub fn drops(&mut self) -> Option<Drops> {
        self.capture.stats().ok().map(|s| Drops {
            received: u64::from(s.received),
            dropped: u64::from(s.dropped),
            if_dropped: u64::from(s.if_dropped),
        })
    }

    /// Flushes the `--write` file.
    pub fn flush(&mut self) -> Result<(), LiveError> {
        match self.save.as_mut() {
            Some(save) => save.flush().map_err(|e| LiveError::Capture {
                interface: self.interface.clone(),
                message: e.to_string(),
            }),
            None => Ok(()),
        }
    }
}

/// A capture device and its addresses.
#[derive(Clone, Debug)]
pub struct Interface {
    pub name: String,
    pub description: Option<String>,
    pub addresses: Vec<String>,
    pub up: bool,
    pub loopback: bool,
}

/// Every device libpcap can capture on.
pub fn interfaces() -> Result<Vec<Interface>, LiveError> {
    let devices = pcap::Device::list().map_err(|e| LiveError::Capture {
        interface: "(listing interfaces)".into(),
        message: e.to_string(),
    })?;
    Ok(devices
        .into_iter()
        .map(|d| Interface {
            up: d.flags.is_up(),
            loopback: d.flags.is_loopback(),
            name: d.name,
            description: d.desc,
            addresses: d.addresses.iter().map(|a| a.addr.to_string()).collect(),
        })
        .collect())
}
