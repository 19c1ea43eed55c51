//! Reading a regular file through memory maps, a window at a time: the only
//! module that names `memmap2` and the only `unsafe` code in the library.
//! Mapping spares the kernel's copy of every byte into a read buffer (a
//! third of the single-thread time on a large capture); mapping a window
//! at a time (not the whole file) keeps the resident memory it adds to one
//! or two windows, whatever the file's size. Windows are mapped from a
//! huge-page boundary of the file, so that the page cache's 2 MiB folios
//! come in whole.
//!
//! Does not parse anything: it hands out byte ranges of the file.

use std::fs::File;
use std::io;
use std::sync::Arc;

/// Bytes mapped at once. Measured on a 1 GiB capture: 4 to 32 MiB read
/// equally fast; smaller windows cost more `mmap` calls, larger ones more
/// resident memory. 4 MiB rather than 8 since 1 December: the same time on
/// the 1 GiB capture as pcap and pcapng and on 20 000 short connections
/// (seven alternating runs each), 4 MiB less resident (a million short
/// connections at 50 000/s: 96 → 92 MiB peak).
pub const WINDOW: usize = 4 << 20;

/// The size of a huge page (x86-64, and arm64 with 4 KiB pages): windows
/// are mapped from a multiple of it.
const HUGE: u64 = 2 << 20;

/// A file read through windows.
pub struct MappedFile {
    file: File,
    /// The file's size when last looked at.
    size: u64,
    /// Bytes per window (tests use tiny ones).
    window: usize,
}

/// `len` bytes of the file from `offset`, mapped read-only (or nothing, at
/// the end of the file). Dropping the last `Arc` of a window unmaps it.
pub struct Window {
    map: Option<memmap2::Mmap>,
    /// Mapped bytes before `offset` (the map starts on a [`HUGE`] boundary).
    skip: usize,
    offset: u64,
}

impl Window {
    /// An empty window at `offset`.
    pub fn empty(offset: u64) -> Arc<Window> {
        Arc::new(Window {
            map: None,
            skip: 0,
            offset,
        })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        let map = self.map.as_deref().unwrap_or_default();
        map.get(self.skip..).unwrap_or_default()
    }

    /// The file offset of the first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file offset just past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.bytes().len() as u64
    }
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Window({}..{})", self.offset, self.end())
    }
}

impl MappedFile {
    /// Reads `file` through windows of `window` bytes if it is a regular
    /// file that can be mapped; `None` for anything else (a pipe, a device,
    /// a file system without maps), which must be read.
    pub fn with_window(file: File, window: usize) -> Option<MappedFile> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        let mut mapped = MappedFile {
            size: meta.len(),
            file,
            window: window.max(1),
        };
        // Some file systems cannot map files: those are read instead.
        mapped.window(0, 1).ok()?;
        Some(mapped)
    }

    /// Another reader of the same file, with its own windows (`None` if
    /// the file cannot be opened twice).
    pub fn try_clone(&self) -> Option<MappedFile> {
        Some(MappedFile {
            file: self.file.try_clone().ok()?,
            size: self.size,
            window: self.window,
        })
    }

    /// The file's size when last looked at (each [`MappedFile::window`]
    /// reaching past it looks again).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Maps at least `min` bytes (more, up to a window, when there are)
    /// from `offset`, or as many as the file holds. The file's size is
    /// looked at again when the request reaches past what it was, so a
    /// file still being written is read as far as it has been written.
    pub fn window(&mut self, offset: u64, min: usize) -> io::Result<Arc<Window>> {
        let want = min.max(self.window) as u64;
        if offset.saturating_add(want) > self.size {
            self.size = self.file.metadata()?.len();
        }
        let len = self.size.saturating_sub(offset).min(want);
        let Ok(len) = usize::try_from(len) else {
            return Err(io::Error::other("window larger than the address space"));
        };
        if len == 0 {
            return Ok(Window::empty(offset));
        }
        // The map starts on a huge-page boundary of the file and, for a
        // window of that size or more, ends on one (or at the file's end):
        // where the page cache holds the file in huge folios (as a cold
        // read leaves it on recent kernels) each 2 MiB then comes in with
        // one fault and one page-table entry instead of 512.
        let skip = offset % HUGE;
        let mut end = offset + len as u64;
        if self.window as u64 >= HUGE {
            // Rounded up only as far as the window reaches: bytes asked for
            // beyond it (`--threads`' windows end with room for the record
            // that straddles them) stay as asked, so that touching their
            // first bytes maps a few pages, not the whole 2 MiB folio
            // past the window — resident in two windows at once.
            let rounded = offset
                .saturating_add(self.window as u64)
                .next_multiple_of(HUGE);
            end = end.max(rounded).min(self.size);
        }
        let (Ok(map_len), Ok(skip)) = (usize::try_from(end - offset + skip), usize::try_from(skip))
        else {
            return Err(io::Error::other("window larger than the address space"));
        };
        let mut options = memmap2::MmapOptions::new();
        // Not populated up front: pages come in as they are read (the
        // kernel maps 64 KiB, or a huge page, around each fault), which
        // measured as fast, hot or cold, and keeps the resident part of a
        // window small.
        options.offset(offset - skip as u64).len(map_len);
        // SAFETY: `Mmap` is sound as long as nobody changes the mapped part
        // of the file while it is mapped. We only read it, and every read of
        // these bytes in this crate is bounds-checked safe code, so a
        // concurrent writer changes what we see (as with `read()`), not
        // which memory we touch. What remains is the hazard every mapping
        // tool accepts (ripgrep's default): another process truncating the
        // file below a mapped window makes reading it raise SIGBUS. The
        // window never reaches past the size the file had just before it was
        // mapped, and `--no-mmap` reads with `read()` instead.
        #[allow(unsafe_code)]
        let map = unsafe { options.map(&self.file)? };
        Ok(Arc::new(Window {
            map: Some(map),
            skip,
            offset,
        }))
    }
}

/// Asks the CPU to fetch `bytes` into its caches. The page cache behind a
/// mapping is cold, and the parser touches a few scattered bytes of each
/// record (its headers, the ends of its payload): too few, too far apart,
/// for the hardware to see a stream it would fetch by itself.
#[inline]
pub fn prefetch(bytes: &[u8]) {
    // One hint per 64-byte line, in a loop of a few instructions per line
    // (`chunks(64)` took five times as many: it was 5 % of a thread's
    // instructions on large frames).
    #[cfg(target_arch = "x86_64")]
    for at in (0..bytes.len()).step_by(64) {
        // SAFETY: a prefetch is a hint that never faults, whatever the
        // address; this one is in bounds of a live slice anyway. SSE is
        // part of every x86-64 CPU.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().add(at).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// How far ahead of the record or block being parsed its successors are
/// fetched into the cache. Measured on a 1 GiB capture, one thread:
/// without, 0.41 s; 4 KiB to 256 KiB ahead, 0.32–0.33 s (and mapped pcapng
/// was slower than `read()` without it).
const AHEAD: usize = 16 << 10;

/// Fetches into the cache the `len` bytes [`AHEAD`] bytes into `bytes`:
/// what a reader parsing `bytes` front to back reaches soon.
#[inline]
pub fn prefetch_ahead(bytes: &[u8], len: usize) {
    let end = AHEAD.saturating_add(len).min(bytes.len());
    if let Some(ahead) = bytes.get(AHEAD..end) {
        prefetch(ahead);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().expect("temp file");
        f.write_all(bytes).expect("write");
        f
    }

    #[test]
    fn windows_cover_the_file_and_stop_at_its_end() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut m = MappedFile::with_window(file_of(&bytes), 4096).expect("regular file");
        let w = m.window(100, 1).expect("map");
        assert_eq!(w.bytes(), &bytes[100..4196]);
        assert_eq!((w.offset(), w.end()), (100, 4196));
        let w = m.window(9_000, 1).expect("map");
        assert_eq!(w.bytes(), &bytes[9_000..]);
        let w = m.window(2, 9_000).expect("map");
        assert_eq!(w.bytes(), &bytes[2..9_002]);
        let w = m.window(10_000, 1).expect("map");
        assert!(w.bytes().is_empty());
        let w = m.window(u64::MAX - 3, 1).expect("map");
        assert!(w.bytes().is_empty());
    }

    #[test]
    fn large_windows_end_on_a_huge_page_boundary_or_the_files_end() {
        let huge = HUGE as usize;
        let bytes: Vec<u8> = (0..=250u8).cycle().take(2 * huge + 12_345).collect();
        let mut m = MappedFile::with_window(file_of(&bytes), huge).expect("regular file");
        // Mapped from the huge page boundary below, handed out from the
        // offset asked for, up to the next boundary.
        let w = m.window(100_001, 1).expect("map");
        assert_eq!(w.bytes(), &bytes[100_001..huge + huge]);
        assert_eq!((w.offset(), w.end()), (100_001, 2 * HUGE));
        let w = m.window(HUGE + 7, huge).expect("map");
        assert_eq!(w.bytes(), &bytes[huge + 7..]);
        let w = m.window(HUGE, 1).expect("map");
        assert_eq!(w.bytes(), &bytes[huge..2 * huge]);
        let w = m.window(2 * HUGE + 5, 1).expect("map");
        assert_eq!(w.bytes(), &bytes[2 * huge + 5..]);
        // Asked for more than a window reaches, rounded up: exactly that,
        // not up to the next boundary (here the file's end), whose folio
        // it would map whole.
        let w = m.window(5, 2 * huge).expect("map");
        assert_eq!((w.offset(), w.end()), (5, 2 * HUGE + 5));
    }

    #[test]
    fn a_growing_file_is_read_as_far_as_it_is_written() {
        let mut f = file_of(b"abc");
        let mut m = MappedFile::with_window(f.try_clone().expect("clone"), 64).expect("file");
        assert_eq!(m.window(0, 1).expect("map").bytes(), b"abc");
        f.write_all(b"def").expect("write");
        assert_eq!(m.window(3, 1).expect("map").bytes(), b"def");
    }

    #[test]
    fn only_regular_files_are_mapped() {
        let dir = File::open(".").expect("dir");
        assert!(MappedFile::with_window(dir, WINDOW).is_none());
    }
}
