//! The performance floor of `docs/performance.md`: a minimal walker over a
//! classic pcap file, memory-mapped, that decodes each frame's Ethernet,
//! IPv4/IPv6 and TCP headers and hashes its 4-tuple — what any analyzer must
//! at least do, with nothing else. `scripts/bench.sh` times it next to
//! `handshakes analyze`.
//!
//! Not part of the tool: it trusts the file (no pcapng, no VLAN, no checks
//! beyond bounds), and maps it with `unsafe` (the library forbids unsafe code).
//!
//! Usage: cargo run --release --example floor -- FILE.pcap

use std::hash::{BuildHasher, Hasher};

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: floor FILE.pcap");
        std::process::exit(2);
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("floor: {}: {e}", path.to_string_lossy());
            std::process::exit(2);
        }
    };
    // SAFETY: the file is only read; if another process truncates it while
    // it is mapped, reading past the new end raises SIGBUS, which ends this
    // measuring tool, nothing else.
    let map = match unsafe { memmap2::Mmap::map(&file) } {
        Ok(m) => m,
        Err(e) => {
            eprintln!("floor: {}: {e}", path.to_string_lossy());
            std::process::exit(2);
        }
    };
    let data: &[u8] = &map;
    let le = match data.get(..4) {
        Some([0xd4, 0xc3, 0xb2, 0xa1]) | Some([0x4d, 0x3c, 0xb2, 0xa1]) => true,
        Some([0xa1, 0xb2, 0xc3, 0xd4]) | Some([0xa1, 0xb2, 0x3c, 0x4d]) => false,
        _ => {
            eprintln!("floor: {}: not a classic pcap file", path.to_string_lossy());
            std::process::exit(2);
        }
    };
    let u32_at = |b: &[u8], at: usize| -> usize {
        let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        (if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }) as usize
    };
    let state = foldhash::fast::FixedState::with_seed(1);
    let (mut packets, mut tcp, mut acc) = (0u64, 0u64, 0u64);
    let mut at = 24;
    while at + 16 <= data.len() {
        let caplen = u32_at(data, at + 8);
        let start = at + 16;
        let Some(frame) = data.get(start..start + caplen) else {
            break;
        };
        at = start + caplen;
        packets += 1;
        if let Some(h) = tuple_hash(frame, &state) {
            tcp += 1;
            acc ^= h;
        }
    }
    println!("{packets} packets, {tcp} TCP, hash xor {acc:016x}");
}

/// A symmetric hash of an Ethernet frame's TCP 4-tuple.
fn tuple_hash(frame: &[u8], state: &foldhash::fast::FixedState) -> Option<u64> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let ip = frame.get(14..)?;
    let (a, b, tcp): (&[u8], &[u8], &[u8]) = match ethertype {
        0x0800 if *ip.get(9)? == 6 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            (ip.get(12..16)?, ip.get(16..20)?, ip.get(ihl..)?)
        }
        0x86dd if *ip.get(6)? == 6 => (ip.get(8..24)?, ip.get(24..40)?, ip.get(40..)?),
        _ => return None,
    };
    let (pa, pb) = (tcp.get(0..2)?, tcp.get(2..4)?);
    let (lo, hi) = if (a, pa) <= (b, pb) {
        ((a, pa), (b, pb))
    } else {
        ((b, pb), (a, pa))
    };
    let mut h = state.build_hasher();
    h.write(lo.0);
    h.write(lo.1);
    h.write(hi.0);
    h.write(hi.1);
    Some(h.finish())
}
