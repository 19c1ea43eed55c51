//! The fast path against the lax path: every frame of every capture in
//! `captures/` and the peer corpus, every single-byte change and every cut
//! of a few real frames, and random combinations of header changes must
//! decode the same both ways; and `shard_hash` must not care about
//! direction.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::RngSeed;

use super::defrag::{may_be_fragment, Defragmenter, Verdict};
use super::fast::{self, Fast};
use super::*;
use crate::source::file::FileSource;
use crate::source::LinkType;
use crate::source::PacketSource;
use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Took {
    FastTcp,
    FastOtherIp,
    FastQuic,
    Fallback,
}

pub(super) fn packet(link: LinkType, orig_len: u32, data: &[u8]) -> RawPacket<'_> {
    RawPacket {
        index: 1,
        ts: Timestamp(0),
        link,
        orig_len,
        data,
    }
}

/// Decodes `p` both ways and checks `shard_hash`, with the standard tunnel
/// ports and with others (`-d udp.port==8472,vxlan -d
/// udp.port==4789,geneve`); `Err` says how they differ.
fn agree(p: &RawPacket<'_>) -> Result<Took, String> {
    let mut other = UdpTunnels::STANDARD;
    other.add(8472, UdpTunnel::Vxlan);
    other.add(4789, UdpTunnel::Geneve);
    agree_with(p, &other)?;
    agree_with(p, &UdpTunnels::STANDARD)
}

fn agree_with(p: &RawPacket<'_>, udp: &UdpTunnels) -> Result<Took, String> {
    let took = match fast::parse(p, udp) {
        Fast::Tcp(_) => Took::FastTcp,
        Fast::OtherIp => Took::FastOtherIp,
        Fast::Quic(_) => Took::FastQuic,
        Fast::Fallback => Took::Fallback,
    };
    let got = decode_with(p, udp);
    let want = decode_lax(p, udp);
    if got != want {
        return Err(format!("{took:?}: decode {got:?}\n    lax    {want:?}"));
    }
    if let (Decoded::Tcp(g, _), Decoded::Tcp(w, _)) = (&got, &want) {
        if g.payload.as_ptr() != w.payload.as_ptr() {
            return Err(format!(
                "{took:?}: payload borrowed from elsewhere: {got:?}"
            ));
        }
    }
    let hash = shard_hash(p, udp);
    let expected = match want {
        Decoded::Tcp(seg, _) => {
            let h = fast::hash_endpoints(seg.src, seg.dst);
            if h != fast::hash_endpoints(seg.dst, seg.src) {
                return Err(format!("hash_endpoints not symmetric for {seg:?}"));
            }
            h
        }
        _ => 0,
    };
    if hash != expected {
        return Err(format!(
            "{took:?}: shard_hash {hash:#x}, expected {expected:#x} for {want:?}"
        ));
    }
    // Without a second look for fragments: the same hash, and `None` only
    // where a fragment may be; what the fast path takes is never one that
    // the defragmenter would be asked about.
    let fragment =
        || may_be_fragment(p) && !matches!(Defragmenter::default().push(p), Verdict::Pass);
    match whole_shard_hash(p, udp) {
        Some(whole) if whole != hash => {
            return Err(format!(
                "{took:?}: whole_shard_hash {whole:#x}, shard_hash {hash:#x}"
            ))
        }
        Some(_) if took != Took::Fallback && fragment() => {
            return Err(format!("{took:?}: the fast path took a fragment"))
        }
        None if !may_be_fragment(p) => {
            return Err(format!("{took:?}: whole_shard_hash None for no fragment"))
        }
        _ => {}
    }
    Ok(took)
}

fn required() -> bool {
    std::env::var("HANDSHAKES_REQUIRE_ALL").is_ok_and(|v| !["", "0"].contains(&&*v))
}

fn is_capture(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    [".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz", ".pcap.zst"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

fn collect(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if recursive {
                collect(&path, true, out);
            }
        } else if is_capture(&path) {
            out.push(path);
        }
    }
}

/// `captures/*.pcap{,ng}` and every capture under the peer corpus.
fn capture_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect(&root.join("captures"), false, &mut files);
    let corpus = std::env::var_os("HANDSHAKES_CORPUS")
        .map_or_else(|| root.join("../shared/corpus"), PathBuf::from);
    if corpus.is_dir() {
        collect(&corpus, true, &mut files);
    } else {
        assert!(
            !required(),
            "peer corpus required (HANDSHAKES_REQUIRE_ALL) but not found at {}",
            corpus.display()
        );
        eprintln!();
        eprintln!(
            "!!! SKIPPED: corpus not found at {}: decode differential covers captures/ only",
            corpus.display()
        );
        eprintln!("!!! (set HANDSHAKES_REQUIRE_ALL=1 to make this a failure)");
        eprintln!();
    }
    files.sort();
    files
}

#[test]
fn fast_path_agrees_with_lax_path_on_every_captured_frame() {
    let mut took: BTreeMap<Took, u64> = BTreeMap::new();
    // What the fallen-back frames were, by link type and result.
    let mut fallbacks: BTreeMap<String, u64> = BTreeMap::new();
    // (lower endpoint, higher endpoint) → (hash, directions seen)
    let mut tuples: HashMap<(SocketAddr, SocketAddr), (u64, [bool; 2])> = HashMap::new();
    let mut failures = Vec::new();
    let (mut files, mut unreadable) = (0, 0);
    for path in capture_files() {
        let mut source = match FileSource::open(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("decode differential: cannot open {}: {e}", path.display());
                unreadable += 1;
                continue;
            }
        };
        files += 1;
        loop {
            let p = match source.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("decode differential: {}: {e}", path.display());
                    break;
                }
            };
            let path_taken = match agree(&p) {
                Ok(t) => t,
                Err(e) => {
                    failures.push(format!("{} frame {}: {e}", path.display(), p.index));
                    continue;
                }
            };
            *took.entry(path_taken).or_default() += 1;
            let decoded = decode(&p);
            if path_taken == Took::Fallback {
                let what = match decoded {
                    Decoded::Tcp(_, anomaly) => format!("Tcp({anomaly:?})"),
                    other => format!("{other:?}"),
                };
                *fallbacks
                    .entry(format!("{} → {what}", p.link.name()))
                    .or_default() += 1;
            }
            if let Decoded::Tcp(seg, _) = decoded {
                // The order of a FlowKey.
                let (key, dir) = if seg.src <= seg.dst {
                    ((seg.src, seg.dst), 0)
                } else {
                    ((seg.dst, seg.src), 1)
                };
                let hash = shard_hash(&p, &UdpTunnels::STANDARD);
                let entry = tuples.entry(key).or_insert((hash, [false; 2]));
                entry.1[dir] = true;
                if entry.0 != hash {
                    failures.push(format!(
                        "{} frame {}: shard_hash {hash:#x}, other frames of {key:?} {:#x}",
                        path.display(),
                        p.index,
                        entry.0
                    ));
                }
            }
        }
    }
    let frames: u64 = took.values().sum();
    let both_ways = tuples.values().filter(|(_, d)| d[0] && d[1]).count();
    eprintln!(
        "decode differential: {files} files ({unreadable} unreadable), {frames} frames: {took:?}"
    );
    eprintln!("  fell back: {fallbacks:#?}");
    eprintln!(
        "  {} TCP 4-tuples, {both_ways} seen in both directions, same shard_hash each",
        tuples.len()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements, the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert!(files >= 20, "too few captures read: {files}");
    assert!(took.get(&Took::FastTcp).copied().unwrap_or(0) > 1000);
    assert!(both_ways >= 50, "too few two-way connections: {both_ways}");
}

/// A real frame to change, with where its layers start.
struct Seed {
    link: LinkType,
    data: Vec<u8>,
    ip: usize,
    tcp: usize,
    v6: bool,
}

impl Seed {
    fn new(link: LinkType, data: Vec<u8>) -> Seed {
        let ip = match link {
            LinkType::ETHERNET if data.get(12..14) == Some(&[0x81, 0x00]) => 18,
            LinkType::ETHERNET => 14,
            LinkType::LINUX_SLL => 16,
            LinkType::LINUX_SLL2 => 20,
            LinkType::NULL | LinkType::LOOP => 4,
            _ => 0,
        };
        let v6 = data[ip] >> 4 == 6;
        let tcp = ip
            + if v6 {
                40
            } else {
                usize::from(data[ip] & 0xf) * 4
            };
        Seed {
            link,
            data,
            ip,
            tcp,
            v6,
        }
    }
}

/// A few frames of each kind from `captures/`, IPv4 and IPv6 (a SYN with
/// options, a request, a pure ACK, a FIN), and the same inside VXLAN (whose
/// frames the fast path opens too), each also as raw IP, with one VLAN
/// tag, and with an Ethernet trailer after the IP packet.
fn seeds() -> &'static [Seed] {
    static SEEDS: OnceLock<Vec<Seed>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut seeds = Vec::new();
        for name in [
            "http-curl-5-keepalive.pcap",
            "http-curl-ipv6.pcap",
            "tunnel-vxlan-http.pcap",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("captures")
                .join(name);
            let mut source = FileSource::open(&path).expect("capture opens");
            let mut kinds = HashSet::new();
            while let Some(p) = source.next_packet().expect("capture reads") {
                let Decoded::Tcp(seg, None) = decode_lax(&p, &UdpTunnels::STANDARD) else {
                    continue;
                };
                let kind = (
                    seg.flags.syn(),
                    seg.flags.fin(),
                    seg.payload.is_empty(),
                    seg.flags.ack(),
                );
                if kinds.insert(kind) {
                    assert_eq!(p.link, LinkType::ETHERNET);
                    seeds.push(Seed::new(p.link, p.data.to_vec()));
                }
            }
        }
        let ethernet: Vec<Vec<u8>> = seeds.iter().map(|s| s.data.clone()).collect();
        for frame in ethernet {
            seeds.push(Seed::new(LinkType::RAW, frame[14..].to_vec()));
            let mut tagged = frame[..12].to_vec();
            tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x64]);
            tagged.extend_from_slice(&frame[12..]);
            seeds.push(Seed::new(LinkType::ETHERNET, tagged));
            let mut trailer = frame.clone();
            trailer.extend_from_slice(&[0xee; 6]);
            seeds.push(Seed::new(LinkType::ETHERNET, trailer));
            // Linux cooked captures (`tcpdump -i any`): SLL from an
            // Ethernet and from a loopback interface, and SLL2.
            let (ether_type, ip) = (&frame[12..14], &frame[14..]);
            for hardware in [1u16, 772] {
                let mut sll = vec![0, 4];
                sll.extend_from_slice(&hardware.to_be_bytes());
                sll.extend_from_slice(&[0, 6]);
                sll.extend_from_slice(&frame[6..12]);
                sll.extend_from_slice(&[0, 0]);
                sll.extend_from_slice(ether_type);
                sll.extend_from_slice(ip);
                seeds.push(Seed::new(LinkType::LINUX_SLL, sll));
            }
            let mut sll2 = ether_type.to_vec();
            sll2.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 1, 4, 6]);
            sll2.extend_from_slice(&frame[6..12]);
            sll2.extend_from_slice(&[0, 0]);
            sll2.extend_from_slice(ip);
            seeds.push(Seed::new(LinkType::LINUX_SLL2, sll2));
            // BSD loopback (macOS `lo0`: AF_INET6 is 30 there) in the host's
            // byte order, and OpenBSD's in network order.
            let v6 = ether_type == [0x86, 0xdd];
            let family: u32 = if v6 { 30 } else { 2 };
            for (link, header) in [
                (LinkType::NULL, family.to_le_bytes()),
                (LinkType::LOOP, (if v6 { 24u32 } else { 2 }).to_be_bytes()),
            ] {
                seeds.push(Seed::new(link, [&header[..], ip].concat()));
            }
        }
        assert!(seeds.len() >= 16, "{} seeds", seeds.len());
        seeds
    })
}

/// Every value of every header byte, and every cut, of every seed.
#[test]
fn fast_path_agrees_on_every_single_byte_change_and_cut() {
    let mut took: BTreeMap<Took, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    for (i, seed) in seeds().iter().enumerate() {
        let len = seed.data.len();
        let mut frame = seed.data.clone();
        let headers_end = (seed.tcp + 60).min(len);
        // Ethernet's addresses say nothing; every byte of a cooked header
        // (hardware type, protocol) may.
        let link_from = if seed.link == LinkType::ETHERNET {
            12
        } else {
            0
        };
        let offsets = (link_from..seed.ip).chain(seed.ip..headers_end);
        for at in offsets {
            let original = frame[at];
            for value in 0..=u8::MAX {
                frame[at] = value;
                match agree(&packet(seed.link, len as u32, &frame)) {
                    Ok(t) => *took.entry(t).or_default() += 1,
                    Err(e) => failures.push(format!("seed {i}, byte {at} = {value:#04x}: {e}")),
                }
            }
            frame[at] = original;
        }
        for cut in 0..=len {
            for orig_len in [cut, len, len + 1000] {
                match agree(&packet(seed.link, orig_len as u32, &frame[..cut])) {
                    Ok(t) => *took.entry(t).or_default() += 1,
                    Err(e) => failures.push(format!("seed {i}, cut at {cut}/{orig_len}: {e}")),
                }
            }
        }
    }
    eprintln!("single-byte changes and cuts: {took:?}");
    assert!(
        failures.is_empty(),
        "{} disagreements, the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// A length field's new value: absolute, or relative to the old one.
#[derive(Clone, Debug)]
enum Len {
    Is(u16),
    Plus(i16),
}

#[derive(Clone, Debug)]
enum Change {
    /// Any byte from the start of the IP header on (or the EtherType).
    Byte(Index, u8),
    Version(u8),
    /// IPv4 header length in words (IPv6: traffic class bits).
    Ihl(u8),
    /// IPv4 total length or IPv6 payload length.
    IpLen(Len),
    /// IPv4 protocol or IPv6 next header.
    Protocol(u8),
    /// IPv4 flags and fragment offset (IPv6: flow label bits).
    Fragment(u16),
    DataOffset(u8),
    /// The EtherType in front of the IP header (nothing on raw IP).
    EtherType(u16),
}

fn change() -> impl Strategy<Value = Change> {
    let len = prop_oneof![
        Just(Len::Is(0)),
        (0u16..80).prop_map(Len::Is),
        (-48i16..48).prop_map(Len::Plus),
        any::<u16>().prop_map(Len::Is),
    ];
    let protocol = prop_oneof![
        Just(6u8),
        Just(17),
        Just(51),
        Just(0),
        Just(43),
        Just(44),
        Just(60),
        Just(58),
        Just(59),
        any::<u8>(),
    ];
    let fragment = prop_oneof![
        Just(0u16),
        Just(0x4000),
        Just(0x2000),
        Just(0x8000),
        Just(0x0001),
        Just(0x1fff),
        any::<u16>(),
    ];
    let ether_type = prop_oneof![
        Just(0x0800u16),
        Just(0x86dd),
        Just(0x8100),
        Just(0x88a8),
        Just(0x9100),
        Just(0x8847),
        Just(0x0806),
        any::<u16>(),
    ];
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Change::Byte(i, v)),
        prop_oneof![Just(4u8), Just(6), 0u8..16].prop_map(Change::Version),
        (0u8..16).prop_map(Change::Ihl),
        len.prop_map(Change::IpLen),
        protocol.prop_map(Change::Protocol),
        fragment.prop_map(Change::Fragment),
        (0u8..16).prop_map(Change::DataOffset),
        ether_type.prop_map(Change::EtherType),
    ]
}

/// How `orig_len` relates to the (possibly cut) frame.
#[derive(Clone, Debug)]
enum OrigLen {
    Captured,
    Uncut,
    Plus(u32),
    Any(u32),
}

fn set(frame: &mut [u8], at: usize, value: u8) {
    if let Some(b) = frame.get_mut(at) {
        *b = value;
    }
}

fn set16(frame: &mut [u8], at: usize, value: u16) {
    let [hi, lo] = value.to_be_bytes();
    set(frame, at, hi);
    set(frame, at + 1, lo);
}

fn get16(frame: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([frame[at], frame[at + 1]])
}

fn apply(seed: &Seed, frame: &mut [u8], change: &Change) {
    let ip = seed.ip;
    match change {
        Change::Byte(i, v) => {
            let from = ip.saturating_sub(2);
            let span = (seed.tcp + 60).min(frame.len()) - from;
            set(frame, from + i.index(span), *v);
        }
        Change::Version(v) => frame[ip] = (frame[ip] & 0x0f) | (v << 4),
        Change::Ihl(n) => frame[ip] = (frame[ip] & 0xf0) | n,
        Change::IpLen(len) => {
            let at = if seed.v6 { ip + 4 } else { ip + 2 };
            let new = match len {
                Len::Is(n) => *n,
                Len::Plus(d) => get16(frame, at).wrapping_add_signed(*d),
            };
            set16(frame, at, new);
        }
        Change::Protocol(p) => frame[ip + if seed.v6 { 6 } else { 9 }] = *p,
        Change::Fragment(f) => set16(frame, ip + 6, *f),
        Change::DataOffset(n) => frame[seed.tcp + 12] = (frame[seed.tcp + 12] & 0x0f) | (n << 4),
        Change::EtherType(t) => {
            if ip >= 2 {
                set16(frame, ip - 2, *t);
            }
        }
    }
}

fn config() -> ProptestConfig {
    let env = ProptestConfig::default();
    let set = |name: &str| std::env::var_os(name).is_some();
    ProptestConfig {
        cases: if set("PROPTEST_CASES") {
            env.cases
        } else {
            4096
        },
        rng_seed: if set("PROPTEST_RNG_SEED") {
            env.rng_seed
        } else {
            RngSeed::Fixed(0x6465_636f_6465_6661)
        },
        failure_persistence: None,
        ..env
    }
}

proptest! {
    #![proptest_config(config())]

    /// Up to four header changes, a cut and any wire length together.
    #[test]
    fn fast_path_agrees_on_changed_real_frames(
        seed in any::<Index>(),
        changes in prop::collection::vec(change(), 0..5),
        cut in prop::option::of(any::<Index>()),
        orig_len in prop_oneof![
            Just(OrigLen::Captured),
            Just(OrigLen::Uncut),
            (0u32..70_000).prop_map(OrigLen::Plus),
            any::<u32>().prop_map(OrigLen::Any),
        ],
    ) {
        let seed = seed.get(seeds());
        let mut frame = seed.data.clone();
        for c in &changes {
            apply(seed, &mut frame, c);
        }
        let uncut = frame.len() as u32;
        if let Some(cut) = cut {
            frame.truncate(cut.index(frame.len() + 1));
        }
        let orig_len = match orig_len {
            OrigLen::Captured => frame.len() as u32,
            OrigLen::Uncut => uncut,
            OrigLen::Plus(n) => frame.len() as u32 + n,
            OrigLen::Any(n) => n,
        };
        let p = packet(seed.link, orig_len, &frame);
        if let Err(e) = agree(&p) {
            return Err(TestCaseError::fail(format!("{e}\n  frame {frame:02x?}")));
        }
    }
}
