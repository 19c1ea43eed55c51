//! Opening capture files: empty files and garbage refused with the right
//! words, and pcapng read through short reads.

use super::*;
use crate::time::Timestamp;

fn open_bytes(bytes: Vec<u8>) -> Result<FileSource, SourceError> {
    FileSource::from_reader(Path::new("test.pcap"), Box::new(io::Cursor::new(bytes)))
}

#[test]
fn rejects_empty_and_garbage() {
    assert!(matches!(open_bytes(vec![]), Err(SourceError::Empty { .. })));
    assert!(matches!(
        open_bytes(b"hello world, not a capture at all".to_vec()),
        Err(SourceError::NotACapture { .. })
    ));
}

fn pcapng_block(kind: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len()) as u32;
    let mut v = Vec::new();
    v.extend_from_slice(&kind.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(body);
    v.extend_from_slice(&len.to_le_bytes());
    v
}

fn small_pcapng() -> Vec<u8> {
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes());
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&65535u32.to_le_bytes());
    let mut bytes = pcapng_block(0x0a0d_0d0a, &shb);
    bytes.extend(pcapng_block(1, &idb));
    for i in 0..3u32 {
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&(1_000_000 + i).to_le_bytes());
        epb.extend_from_slice(&4u32.to_le_bytes());
        epb.extend_from_slice(&60u32.to_le_bytes());
        epb.extend_from_slice(&[i as u8; 4]);
        bytes.extend(pcapng_block(6, &epb));
    }
    bytes
}

/// Gives out at most three bytes per read.
struct Dribble(io::Cursor<Vec<u8>>);

impl Read for Dribble {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(3);
        self.0.read(&mut buf[..n])
    }
}

#[test]
fn pcapng_through_short_reads() {
    let inputs: [Box<dyn Read + Send>; 2] = [
        Box::new(io::Cursor::new(small_pcapng())),
        Box::new(Dribble(io::Cursor::new(small_pcapng()))),
    ];
    for input in inputs {
        let mut src = FileSource::from_reader(Path::new("t.pcapng"), input).expect("opens");
        let mut seen = Vec::new();
        while let Some(p) = src.next_packet().expect("reads") {
            seen.push((p.index, p.ts, p.orig_len, p.data.to_vec()));
        }
        assert_eq!(
            seen,
            (0..3u8)
                .map(|i| (
                    u64::from(i) + 1,
                    Timestamp(1_000_000_000 + i64::from(i) * 1_000),
                    60,
                    vec![i; 4]
                ))
                .collect::<Vec<_>>()
        );
        assert_eq!(src.info().format, "pcapng");
        assert!(!src.info().truncated);
    }
}

#[test]
fn garbage_after_a_short_first_read_is_not_a_capture() {
    let input = Box::new(Dribble(io::Cursor::new(b"GIF89a, not a capture".to_vec())));
    let err = FileSource::from_reader(Path::new("x"), input).err();
    assert!(
        matches!(&err, Some(SourceError::NotACapture { magic, .. }) if magic == "47 49 46 38"),
        "{err:?}"
    );
}
