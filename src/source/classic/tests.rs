//! Tests of classic pcap reading through `FileSource`: records straddling
//! buffer refills, both byte orders and timestamp resolutions, short reads,
//! cut files and size limits.
//!
//! Does not test pcapng or compression detection beyond one gzip case; those
//! are `file`'s tests. `fill` is tested against `next_packet` in `fill`.

use std::path::Path;

use super::*;
use crate::error::SourceError;
use crate::source::file::FileSource;
use crate::source::PacketSource;

mod fill;
mod mapped;
mod split;

/// A packet as a test expects it.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    index: u64,
    ts: Timestamp,
    orig_len: u32,
    data: Vec<u8>,
}

/// Writes classic captures in either byte order.
struct Writer {
    bytes: Vec<u8>,
    big_endian: bool,
    modified: bool,
}

impl Writer {
    fn new(magic: u32, big_endian: bool, linktype: u32) -> Writer {
        let mut w = Writer {
            bytes: Vec::new(),
            big_endian,
            modified: magic == MAGIC_MODIFIED,
        };
        w.u32(magic);
        w.u16(2);
        w.u16(4);
        w.u32(0);
        w.u32(0);
        w.u32(65535);
        w.u32(linktype);
        w
    }

    fn u16(&mut self, v: u16) {
        let b = if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.bytes.extend_from_slice(&b);
    }

    fn u32(&mut self, v: u32) {
        let b = if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.bytes.extend_from_slice(&b);
    }

    fn record(&mut self, sec: u32, frac: u32, orig_len: u32, data: &[u8]) {
        self.u32(sec);
        self.u32(frac);
        self.u32(data.len() as u32);
        self.u32(orig_len);
        if self.modified {
            // ifindex, protocol, pkt_type, padding
            self.bytes.extend_from_slice(&[7, 0, 0, 0, 8, 0, 4, 0]);
        }
        self.bytes.extend_from_slice(data);
    }
}

/// Hands out 1 to 7 bytes per call, and now and then an `Interrupted`
/// error, like a slow pipe.
struct Trickle {
    bytes: Vec<u8>,
    at: usize,
    calls: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls % 11 == 0 {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let want = 1 + self.calls % 7;
        let rest = &self.bytes[self.at..];
        let n = want.min(buf.len()).min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

fn trickle(bytes: Vec<u8>) -> Box<dyn Read + Send> {
    Box::new(Trickle {
        bytes,
        at: 0,
        calls: 0,
    })
}

fn cursor(bytes: Vec<u8>) -> Box<dyn Read + Send> {
    Box::new(io::Cursor::new(bytes))
}

fn open(input: Box<dyn Read + Send>, buffer: usize) -> FileSource {
    FileSource::with_buffer(Path::new("t.pcap"), input, buffer).expect("opens")
}

/// Every packet until the end, and the source for its info.
fn read_all(mut src: FileSource) -> (Vec<Seen>, FileSource) {
    let mut seen = Vec::new();
    while let Some(p) = src.next_packet().expect("reads") {
        seen.push(Seen {
            index: p.index,
            ts: p.ts,
            orig_len: p.orig_len,
            data: p.data.to_vec(),
        });
    }
    (seen, src)
}

/// Every classic format: magic number and byte order.
const FORMATS: &[(u32, bool)] = &[
    (MAGIC_MICROS, false),
    (MAGIC_MICROS, true),
    (MAGIC_NANOS, false),
    (MAGIC_NANOS, true),
    (MAGIC_MODIFIED, false),
];

/// A capture of records of many lengths (zero included) and what
/// reading it must give.
fn varied(magic: u32, big_endian: bool) -> (Vec<u8>, Vec<Seen>) {
    let mut w = Writer::new(magic, big_endian, 1);
    let mut expected = Vec::new();
    let per_sec = if magic == MAGIC_NANOS { 1 } else { 1_000 };
    for i in 0..60u32 {
        let len = (i * 37 % 101) as usize;
        let data: Vec<u8> = (0..len).map(|b| (b as u32 * 3 + i) as u8).collect();
        let (sec, frac) = (1_700_000_000 + i, i * 12_345);
        w.record(sec, frac, 1500 + i, &data);
        expected.push(Seen {
            index: u64::from(i) + 1,
            ts: Timestamp(i64::from(sec) * 1_000_000_000 + i64::from(frac) * per_sec),
            orig_len: 1500 + i,
            data,
        });
    }
    (w.bytes, expected)
}

#[test]
fn records_straddling_refills_come_out_whole() {
    let (bytes, expected) = varied(MAGIC_MICROS, false);
    for buffer in [1, 16, 24, 25, 31, 40, 64, 100, 117, 128, 1000, BUFFER] {
        let (seen, src) = read_all(open(cursor(bytes.clone()), buffer));
        assert_eq!(seen, expected, "buffer {buffer}");
        assert!(!src.info().truncated);
        assert!(src.info().warnings.is_empty());
        assert_eq!(src.info().format, "pcap");
    }
}

#[test]
fn a_record_longer_than_the_buffer_grows_it_by_doubling() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 300, &[9; 300]);
    w.record(3, 4, 5, &[1; 5]);
    let src = open(cursor(w.bytes), 64);
    let (seen, src) = read_all(src);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].data, vec![9; 300]);
    assert_eq!(seen[1].data, vec![1; 5]);
    assert!(!src.info().truncated);
}

#[test]
fn both_byte_orders_and_nanosecond_magic() {
    for &(magic, big_endian) in FORMATS {
        let (bytes, expected) = varied(magic, big_endian);
        for buffer in [40, BUFFER] {
            let (seen, src) = read_all(open(cursor(bytes.clone()), buffer));
            assert_eq!(seen, expected, "magic {magic:x} big-endian {big_endian}");
            assert!(!src.info().truncated);
        }
    }
    let mut w = Writer::new(MAGIC_NANOS, true, 101);
    w.record(10, 5, 4, &[0x45, 0, 0, 20]);
    let mut src = open(cursor(w.bytes), BUFFER);
    let p = src.next_packet().expect("reads").expect("a packet");
    assert_eq!(p.ts, Timestamp(10_000_000_005));
    assert_eq!(p.link, LinkType::RAW);
}

#[test]
fn short_reads_like_a_pipe() {
    let (bytes, expected) = varied(MAGIC_MICROS, true);
    for buffer in [1, 24, 50, 4096, BUFFER] {
        let (seen, src) = read_all(open(trickle(bytes.clone()), buffer));
        assert_eq!(seen, expected, "buffer {buffer}");
        assert!(!src.info().truncated);
    }
}

#[test]
fn truncated_final_header_or_body() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    let whole = w.bytes.len();
    w.record(3, 4, 6, &[5, 6, 7, 8, 9, 10]);
    let message = format!(
        "t.pcap: the capture is cut short at byte {whole} (the last record is incomplete); everything before it is reported"
    );
    // Cut inside the second record's header, then inside its data.
    for cut in [whole + 1, whole + 10, whole + 15, whole + 16, whole + 19] {
        for buffer in [24, 30, BUFFER] {
            let mut bytes = w.bytes.clone();
            bytes.truncate(cut);
            for input in [cursor(bytes.clone()), trickle(bytes)] {
                let (seen, src) = read_all(open(input, buffer));
                assert_eq!(seen.len(), 1, "cut at {cut}");
                assert_eq!(seen[0].data, vec![1, 2, 3]);
                assert!(src.info().truncated);
                assert_eq!(src.info().warnings, vec![message.clone()]);
            }
        }
    }
    // Cut exactly between records: a clean end.
    let mut bytes = w.bytes.clone();
    bytes.truncate(whole);
    let (seen, src) = read_all(open(cursor(bytes), 30));
    assert_eq!(seen.len(), 1);
    assert!(!src.info().truncated);
}

#[test]
fn zero_length_records() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 0, 60, &[]);
    w.record(2, 0, 3, &[1, 2, 3]);
    w.record(3, 0, 0, &[]);
    let (seen, src) = read_all(open(cursor(w.bytes), 20));
    let lens: Vec<(u64, u32, usize)> = seen
        .iter()
        .map(|s| (s.index, s.orig_len, s.data.len()))
        .collect();
    assert_eq!(lens, vec![(1, 60, 0), (2, 3, 3), (3, 0, 0)]);
    assert!(!src.info().truncated);
}

#[test]
fn header_only_capture_has_no_packets() {
    let w = Writer::new(MAGIC_MICROS, true, 1);
    let (seen, src) = read_all(open(trickle(w.bytes), BUFFER));
    assert!(seen.is_empty());
    assert!(!src.info().truncated);
    assert_eq!(src.info().format, "pcap");
}

#[test]
fn a_cut_file_header_is_an_error() {
    let mut w = Writer::new(MAGIC_NANOS, false, 1);
    w.bytes.truncate(23);
    for input in [cursor(w.bytes.clone()), trickle(w.bytes)] {
        let err = FileSource::with_buffer(Path::new("t.pcap"), input, 64).err();
        assert!(matches!(err, Some(SourceError::TruncatedHeader { .. })));
    }
}

#[test]
fn a_record_over_the_limit_stops_reading() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    let at = w.bytes.len();
    // Claims one byte more than the limit, and the input really holds it.
    w.record(3, 4, 0, &vec![0; MAX_RECORD + 1 - 16]);
    let (seen, src) = read_all(open(cursor(w.bytes), BUFFER));
    assert_eq!(seen.len(), 1);
    assert!(src.info().truncated);
    assert_eq!(
        src.info().warnings,
        vec![format!(
            "t.pcap: a block at byte {at} is larger than 64 MiB; stopped reading there"
        )]
    );
}

#[test]
fn a_record_at_the_limit_is_read() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(3, 4, 0, &vec![7; MAX_RECORD - 16]);
    let mut src = open(cursor(w.bytes), BUFFER);
    let p = src.next_packet().expect("reads").expect("one packet");
    assert_eq!(p.data.len(), MAX_RECORD - 16);
    assert!(src.next_packet().expect("reads").is_none());
    assert!(!src.info().truncated);
}

#[test]
fn read_errors_end_the_stream() {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::other("disk on fire"));
            }
            let mut w = Writer::new(MAGIC_MICROS, false, 1);
            w.record(1, 2, 3, &[1, 2, 3]);
            let n = w.bytes.len().min(buf.len());
            buf[..n].copy_from_slice(&w.bytes[..n]);
            self.0 -= 1;
            Ok(n)
        }
    }
    let mut src = open(Box::new(Failing(1)), 100);
    assert!(src.next_packet().expect("reads").is_some());
    let err = src.next_packet().expect_err("the read fails");
    assert!(err.to_string().contains("disk on fire"), "{err}");
    assert!(src.next_packet().expect("ended").is_none());
}

#[test]
fn timestamps_match_from_parts() {
    for nanos in [false, true] {
        let header = Header {
            link: LinkType::ETHERNET,
            big_endian: false,
            nanos,
            record_header: 16,
        };
        let units = if nanos { 1_000_000_000 } else { 1_000_000 };
        for sec in [0, 1, 1_700_000_000, u32::MAX] {
            for frac in [0, 1, 999_999, 999_999_999, u32::MAX] {
                assert_eq!(
                    header.timestamp(sec, frac),
                    Timestamp::from_parts(i64::from(sec), u64::from(frac), units)
                );
            }
        }
    }
}

#[test]
fn gzip_classic_capture_through_small_buffers() {
    use std::io::Write;
    let (bytes, expected) = varied(MAGIC_NANOS, true);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).expect("compresses");
    let gz = gz.finish().expect("compresses");
    for buffer in [33, BUFFER] {
        let (seen, src) = read_all(open(trickle(gz.clone()), buffer));
        assert_eq!(seen, expected);
        assert_eq!(src.info().compression.as_deref(), Some("gzip"));
    }
}

#[test]
fn reads_nanosecond_pcap() {
    let mut w = Writer::new(MAGIC_NANOS, false, 101);
    w.record(10, 5, 4, &[0x45, 0, 0, 20]);
    let mut src = open(cursor(w.bytes), BUFFER);
    let p = src.next_packet().expect("reads").expect("one packet");
    assert_eq!(p.ts, Timestamp(10_000_000_005));
    assert_eq!(p.link, LinkType::RAW);
    assert_eq!(p.data, &[0x45, 0, 0, 20]);
    assert!(src.next_packet().expect("reads").is_none());
    assert!(!src.info().truncated);
}

#[test]
fn truncated_last_record_keeps_earlier_packets() {
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    w.record(3, 4, 6, &[5, 6, 7, 8, 9, 10]);
    w.bytes.truncate(w.bytes.len() - 3);
    let mut src = open(cursor(w.bytes), BUFFER);
    assert!(src.next_packet().expect("reads").is_some());
    assert!(src.next_packet().expect("reads").is_none());
    assert!(src.info().truncated);
    assert!(src.info().warnings[0].contains("cut short"));
}

#[test]
fn short_file_claiming_a_huge_record_is_truncated_without_growing() {
    // Found by fuzzing (fuzz/regressions/pipeline/): a record claiming
    // 48 MiB made the reader double its buffer up to 64 MiB before it
    // found out that the file ends a few bytes later.
    let mut w = Writer::new(MAGIC_MICROS, false, 1);
    w.record(1, 2, 3, &[1, 2, 3]);
    w.record(3, 4, 3, &[5, 6, 7]);
    let at = w.bytes.len() - 19;
    w.bytes[at + 8..at + 12].copy_from_slice(&(48u32 << 20).to_le_bytes());
    let mut src = open(cursor(w.bytes), BUFFER);
    assert!(src.next_packet().expect("reads").is_some());
    assert!(src.next_packet().expect("reads").is_none());
    assert_eq!(src.classic_buffer(), Some(BUFFER));
    assert!(src.info().truncated);
    assert!(src.info().warnings[0].contains("cut short"));
}

#[test]
fn unsupported_link_type_is_an_error() {
    let mut w = Writer::new(MAGIC_MICROS, false, 147);
    w.record(1, 2, 3, &[1, 2, 3]);
    let mut src = open(cursor(w.bytes), BUFFER);
    let err = src
        .next_packet()
        .expect_err("link type 147 is not supported");
    assert!(err.to_string().contains("unsupported link type 147"));
    assert!(src.next_packet().expect("ended").is_none());
}
