//! Capture file writers: classic pcap (either byte order, microsecond or
//! nanosecond magic, any link type, explicit caplen/origlen) and pcapng
//! (several sections, several interfaces with their own link type and
//! `if_tsresol`, Enhanced Packet Blocks). Timestamps are nanoseconds since
//! the epoch; a writer panics if a timestamp cannot be stored exactly.

/// One captured frame.
#[derive(Clone, Debug)]
pub struct Packet {
    /// Nanoseconds since the Unix epoch.
    pub ts: i64,
    /// The captured bytes (caplen = `data.len()`).
    pub data: Vec<u8>,
    /// The length on the wire.
    pub orig_len: u32,
    /// pcapng interface id (ignored by classic pcap).
    pub if_id: u32,
}

impl Packet {
    pub fn new(ts: i64, data: Vec<u8>) -> Packet {
        let orig_len = u32::try_from(data.len()).expect("frame fits u32");
        Packet {
            ts,
            data,
            orig_len,
            if_id: 0,
        }
    }

    /// Cuts the captured bytes to `caplen`, keeping the wire length (snaplen).
    pub fn cut(mut self, caplen: usize) -> Packet {
        self.data.truncate(caplen);
        self
    }

    /// Puts the packet on pcapng interface `if_id`.
    pub fn on(mut self, if_id: u32) -> Packet {
        self.if_id = if_id;
        self
    }
}

/// Splits nanoseconds since the epoch into seconds and a fraction in
/// `units_per_sec` units, panicking when it is not exact.
fn split(ts: i64, units_per_sec: i128) -> (u32, u32) {
    let ticks = ticks(ts, units_per_sec);
    let secs = u32::try_from(ticks / units_per_sec).expect("seconds fit u32");
    let frac = u32::try_from(ticks % units_per_sec).expect("fraction fits u32");
    (secs, frac)
}

/// `ts` (ns) as a count of `units_per_sec` ticks; panics when inexact.
fn ticks(ts: i64, units_per_sec: i128) -> i128 {
    let scaled = i128::from(ts) * units_per_sec;
    assert_eq!(
        scaled % 1_000_000_000,
        0,
        "timestamp {ts} ns is not a whole number of 1/{units_per_sec} s ticks"
    );
    scaled / 1_000_000_000
}

/// A classic pcap file.
#[derive(Clone, Copy, Debug)]
pub struct Pcap {
    pub big_endian: bool,
    pub nanos: bool,
    pub linktype: u32,
    pub snaplen: u32,
}

impl Pcap {
    /// Little-endian, microsecond resolution, snaplen 262144.
    pub fn new(linktype: u32) -> Pcap {
        Pcap {
            big_endian: false,
            nanos: false,
            linktype,
            snaplen: 262_144,
        }
    }

    pub fn big_endian(self) -> Pcap {
        Pcap {
            big_endian: true,
            ..self
        }
    }

    pub fn nanos(self) -> Pcap {
        Pcap {
            nanos: true,
            ..self
        }
    }

    fn u32(&self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    fn u16(&self, out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    pub fn header(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.u32(&mut out, if self.nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
        self.u16(&mut out, 2);
        self.u16(&mut out, 4);
        self.u32(&mut out, 0); // thiszone
        self.u32(&mut out, 0); // sigfigs
        self.u32(&mut out, self.snaplen);
        self.u32(&mut out, self.linktype);
        out
    }

    pub fn record(&self, p: &Packet) -> Vec<u8> {
        let units = if self.nanos { 1_000_000_000 } else { 1_000_000 };
        let (secs, frac) = split(p.ts, units);
        let mut out = Vec::new();
        self.u32(&mut out, secs);
        self.u32(&mut out, frac);
        self.u32(&mut out, p.data.len() as u32);
        self.u32(&mut out, p.orig_len);
        out.extend_from_slice(&p.data);
        out
    }

    pub fn write(&self, packets: &[Packet]) -> Vec<u8> {
        let mut out = self.header();
        for p in packets {
            out.extend(self.record(p));
        }
        out
    }
}

/// A pcapng interface's timestamp resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsResol {
    /// No `if_tsresol` option: microseconds.
    Default,
    /// 10^-n seconds.
    Dec(u8),
    /// 2^-n seconds.
    Bin(u8),
}

impl TsResol {
    fn units_per_sec(self) -> i128 {
        match self {
            TsResol::Default => 1_000_000,
            TsResol::Dec(n) => 10i128.pow(u32::from(n)),
            TsResol::Bin(n) => 1i128 << n,
        }
    }
}

/// A little-endian pcapng file built block by block.
#[derive(Clone, Debug, Default)]
pub struct Pcapng {
    out: Vec<u8>,
    /// Resolutions of the current section's interfaces.
    interfaces: Vec<TsResol>,
}

fn block(out: &mut Vec<u8>, block_type: u32, body: &[u8]) {
    let mut body = body.to_vec();
    while body.len() % 4 != 0 {
        body.push(0);
    }
    let len = u32::try_from(body.len() + 12).expect("block fits u32");
    out.extend_from_slice(&block_type.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&len.to_le_bytes());
}

impl Pcapng {
    pub fn new() -> Pcapng {
        Pcapng::default()
    }

    /// Starts a section (interfaces are numbered from 0 again).
    pub fn section(&mut self) -> &mut Pcapng {
        let mut body = 0x1a2b_3c4du32.to_le_bytes().to_vec();
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&(-1i64).to_le_bytes()); // section length unknown
        block(&mut self.out, 0x0a0d_0d0a, &body);
        self.interfaces.clear();
        self
    }

    /// Describes the next interface of the section.
    pub fn interface(&mut self, linktype: u16, resol: TsResol) -> &mut Pcapng {
        let mut body = linktype.to_le_bytes().to_vec();
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&262_144u32.to_le_bytes());
        let code = match resol {
            TsResol::Default => None,
            TsResol::Dec(n) => Some(n),
            TsResol::Bin(n) => Some(0x80 | n),
        };
        if let Some(value) = code {
            body.extend_from_slice(&9u16.to_le_bytes()); // if_tsresol
            body.extend_from_slice(&1u16.to_le_bytes());
            body.extend_from_slice(&[value, 0, 0, 0]);
            body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        block(&mut self.out, 1, &body);
        self.interfaces.push(resol);
        self
    }

    /// An Enhanced Packet Block on `p.if_id`; an undescribed interface gets
    /// microsecond timestamps.
    pub fn packet(&mut self, p: &Packet) -> &mut Pcapng {
        let resol = self
            .interfaces
            .get(p.if_id as usize)
            .copied()
            .unwrap_or(TsResol::Default);
        let t = u64::try_from(ticks(p.ts, resol.units_per_sec())).expect("ticks fit u64");
        let mut body = p.if_id.to_le_bytes().to_vec();
        body.extend_from_slice(&((t >> 32) as u32).to_le_bytes());
        body.extend_from_slice(&(t as u32).to_le_bytes());
        body.extend_from_slice(&(p.data.len() as u32).to_le_bytes());
        body.extend_from_slice(&p.orig_len.to_le_bytes());
        body.extend_from_slice(&p.data);
        block(&mut self.out, 6, &body);
        self
    }

    pub fn packets(&mut self, packets: &[Packet]) -> &mut Pcapng {
        for p in packets {
            self.packet(p);
        }
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.out.clone()
    }
}
