//! Live capture on an interface through libpcap (the `pcap` crate, behind
//! the `live` feature): packets with nanosecond timestamps, an optional BPF
//! filter, an optional copy written to a pcap file, and the kernel's drop
//! counters; and libpcap's BPF compiler for the frames of files
//! (`analyze -f`). The only module that names `pcap`.
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

/// A capture filter in tcpdump's language, compiled by libpcap for each
/// link type as its first frame comes (a pcapng file may hold several) and
/// run on every frame, as `tcpdump -r FILE EXPRESSION` does. libpcap runs
/// the program with the captured length for the frame's length (`greater`
/// and `less` see a frame cut by the snap length as cut).
pub struct PacketFilter {
    expression: String,
    /// The program for each (link type, byte order of the file that
    /// wrote a BSD loopback header: true when it is not this machine's);
    /// `None` where the expression does not compile for it (`ether host`
    /// on raw IP).
    programs: Vec<((LinkType, bool), Option<pcap::BpfProgram>)>,
}

impl std::fmt::Debug for PacketFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketFilter")
            .field("expression", &self.expression)
            .finish_non_exhaustive()
    }
}

/// Programs a filter compiles (link types, and byte orders of BSD
/// loopback headers); frames of any further link type (a hostile pcapng
/// may describe thousands of interfaces) match nothing.
const MAX_PROGRAMS: usize = 32;

/// `expression` compiled for frames of link type `link` read from a file
/// (whose byte order is not this machine's when `swapped`); `Err` is
/// libpcap's message.
///
/// Compiled for a file, not with `pcap_open_dead`: libpcap's code for a
/// file's BSD loopback frames tests every BSD's AF_INET6 (24, 28, 30) in
/// the file's byte order, where a dead handle's tests this machine's
/// (Linux's 10). So it opens the header of an empty capture file of that
/// link type and byte order, as tcpdump opens the file it reads.
fn compile(expression: &str, link: LinkType, swapped: bool) -> Result<pcap::BpfProgram, String> {
    let word = |v: u32| {
        if swapped {
            v.swap_bytes().to_ne_bytes()
        } else {
            v.to_ne_bytes()
        }
    };
    let half = |v: u16| {
        if swapped {
            v.swap_bytes().to_ne_bytes()
        } else {
            v.to_ne_bytes()
        }
    };
    let mut header = Vec::with_capacity(24);
    header.extend(word(0xa1b2_c3d4));
    header.extend(half(2));
    header.extend(half(4));
    header.extend([0; 8]);
    header.extend(word(SNAPLEN as u32));
    header.extend(word(link.0));
    let file = tempfile::NamedTempFile::new()
        .and_then(|mut f| std::io::Write::write_all(&mut f, &header).map(|()| f))
        .map_err(|e| format!("cannot write a temporary file to compile the filter in: {e}"))?;
    pcap::Capture::from_file(file.path())
        .and_then(|capture| capture.compile(expression, true))
        .map_err(|e| e.to_string())
}

/// Whether `raw`'s link header is a BSD loopback header written in the
/// other byte order than this machine's (its AF_ value, under 256, read
/// as this machine reads it, is not).
fn swapped(raw: &RawPacket<'_>) -> bool {
    raw.link == LinkType::NULL
        && raw
            .data
            .first_chunk::<4>()
            .is_some_and(|af| u32::from_ne_bytes(*af) > 0xffff)
}

/// A capture filter expression libpcap compiles (for Ethernet frames, at
/// least): what [`PacketFilter`] runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterExpression(String);

impl FilterExpression {
    /// `expression`, checked by compiling it for Ethernet frames; `Err` is
    /// libpcap's message.
    pub fn new(expression: &str) -> Result<FilterExpression, String> {
        compile(expression, LinkType::ETHERNET, false)?;
        Ok(FilterExpression(expression.to_string()))
    }

    /// The expression as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PacketFilter {
    /// Runs `expression`, compiled for each link type as it comes.
    pub fn new(expression: &FilterExpression) -> PacketFilter {
        PacketFilter {
            expression: expression.0.clone(),
            programs: Vec::new(),
        }
    }

    /// Whether `raw` matches; `None` for a frame of a link type the
    /// expression does not compile for.
    pub fn matches(&mut self, raw: &RawPacket<'_>) -> Option<bool> {
        let key = (raw.link, swapped(raw));
        let at = match self.programs.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None if self.programs.len() >= MAX_PROGRAMS => return None,
            None => {
                let program = compile(&self.expression, key.0, key.1).ok();
                self.programs.push((key, program));
                self.programs.len() - 1
            }
        };
        let (_, program) = self.programs.get(at)?;
        program.as_ref().map(|p| p.filter(raw.data))
    }
}
