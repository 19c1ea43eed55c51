//! Helpers for the library's own unit tests (compiled only for them): a
//! fixed pseudo-random generator for the "any bytes never panic" tests, the
//! capture files a directory holds, and the records of one.

/// xorshift64 from a fixed seed: the same bytes in every run.
pub struct Xorshift(pub u64);

impl Xorshift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `len` bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Capture files under `dir`, at any depth.
pub fn captures_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<std::path::PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            captures_under(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("pcap" | "pcapng" | "gz")
        ) {
            out.push(path);
        }
    }
}

/// The capture files in `captures/` and in the peer corpus beside the
/// project (whose absence `fill_agrees_with_next_packet_on_every_capture`
/// reports).
pub fn every_capture() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    captures_under(&root.join("captures"), &mut files);
    captures_under(&root.join("../shared/corpus"), &mut files);
    files
}

/// The summary and records of the capture at `path` (relative to the
/// project, or absolute), on one thread; `None` if it cannot be read.
pub fn records_of(
    path: &std::path::Path,
) -> Option<(crate::record::Summary, Vec<crate::record::ConnectionRecord>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let mut source = crate::source::file::FileSource::open(&path).ok()?;
    let config = crate::analyze::Config {
        threads: 1,
        ..crate::analyze::Config::default()
    };
    let mut records = Vec::new();
    let summary = crate::analyze(&mut source, &config, &mut records).ok()?;
    Some((summary, records))
}
