//! Text that must wait for the end of the input before it can be written —
//! `-T json`'s records (the summary comes first in the document), the
//! table's rows (their column widths depend on every row) — kept in memory
//! up to a limit, then in an unnamed temporary file (the only module that
//! names `tempfile`; the file is gone when the program ends, however it
//! ends). A piece of text is found again by the [`Spooled`] that `append`
//! returned.
//!
//! Does not know what the text is or in which order it is read back.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The most written to the file at once. One `write` of the whole 8 MiB
/// held in memory spent two to three times as long in the kernel as the
/// same bytes written 1 MiB at a time (16 KiB to 1 MiB measured alike):
/// `-T json` of 100 000 short connections, one thread, ext4 `/tmp`, system
/// time 0.72–1.41 → 0.41–0.42 s.
const WRITE_PIECE: usize = 1 << 20;

/// Who spools, for the one line an error gives the user.
pub struct Purpose {
    /// The output, as the user asked for it: `-T json`.
    pub output: &'static str,
    /// What waits and until when.
    pub holds: &'static str,
    /// What to use instead when no file can be had.
    pub instead: &'static str,
}

/// Text in order of arrival: the bytes before `flushed` in the temporary
/// file, the rest in memory.
pub struct Spool {
    memory: Vec<u8>,
    limit: usize,
    file: Option<File>,
    /// Reads of the file one at a time (each seeks the shared file, and
    /// several threads may read).
    reading: Mutex<()>,
    flushed: u64,
    purpose: &'static Purpose,
}

/// Where one piece of text is in a [`Spool`].
#[derive(Clone, Copy, Debug)]
pub struct Spooled {
    at: u64,
    len: u64,
}

impl Spool {
    /// A spool keeping up to `memory` bytes in memory.
    pub fn new(memory: usize, purpose: &'static Purpose) -> Spool {
        Spool {
            memory: Vec::new(),
            limit: memory,
            file: None,
            reading: Mutex::new(()),
            flushed: 0,
            purpose,
        }
    }

    /// `e` with what was being done, and where, in front.
    fn error(&self, doing: &str, e: io::Error) -> io::Error {
        let p = self.purpose;
        io::Error::new(
            e.kind(),
            format!(
                "{}: {doing} a temporary file in {} (it holds {}; set TMPDIR to a directory with room, or {}): {e}",
                p.output,
                spool_dirs(std::env::var_os("TMPDIR").as_deref())
                    .last()
                    .map_or(std::env::temp_dir(), Clone::clone)
                    .display(),
                p.holds,
                p.instead
            ),
        )
    }

    /// Adds one piece of text, given in parts; returns where it went.
    pub fn append(&mut self, parts: &[&[u8]]) -> io::Result<Spooled> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if !self.memory.is_empty() && self.memory.len().saturating_add(len) > self.limit {
            self.spill()?;
        }
        let at = self.flushed + self.memory.len() as u64;
        for part in parts {
            self.memory.extend_from_slice(part);
        }
        Ok(Spooled {
            at,
            len: len as u64,
        })
    }

    /// Moves what is in memory to the end of the file.
    fn spill(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            let mut made = Err(io::Error::other("no directory to make it in"));
            for dir in spool_dirs(std::env::var_os("TMPDIR").as_deref()) {
                made = tempfile::tempfile_in(dir);
                if made.is_ok() {
                    break;
                }
            }
            let file = made.map_err(|e| self.error("cannot make", e))?;
            self.file = Some(file);
        }
        if let Some(file) = &mut self.file {
            let written = self
                .memory
                .chunks(WRITE_PIECE)
                .try_for_each(|piece| file.write_all(piece));
            if let Err(e) = written {
                return Err(self.error("cannot write to", e));
            }
        }
        self.flushed += self.memory.len() as u64;
        self.memory.clear();
        Ok(())
    }

    /// The text at `at`: borrowed from memory, or read into `buf` from the
    /// file.
    pub fn get<'a>(&'a self, at: &Spooled, buf: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        let missing = || {
            io::Error::other(format!(
                "{}: a piece of text is missing from its spool",
                self.purpose.output
            ))
        };
        let len = usize::try_from(at.len).map_err(|_| missing())?;
        if let Some(start) = at.at.checked_sub(self.flushed) {
            let start = usize::try_from(start).map_err(|_| missing())?;
            let text = self.memory.get(start..).and_then(|m| m.get(..len));
            return text.ok_or_else(missing);
        }
        // Read back nearly, not quite, in the order they went in (a
        // connection's text goes in when it finishes): each piece is read
        // on its own, at its place.
        let mut file = self.file.as_ref().ok_or_else(missing)?;
        buf.clear();
        buf.resize(len, 0);
        let _one = self.reading.lock().map_err(|_| missing())?;
        file.seek(SeekFrom::Start(at.at))
            .and_then(|_| file.read_exact(buf))
            .map_err(|e| self.error("cannot read", e))?;
        Ok(buf)
    }
}

/// The directories a spool's file may go in, the first that takes it,
/// given `TMPDIR`: that directory if set; otherwise `/var/tmp`, the place
/// file-hierarchy(7) gives larger temporary files — `/tmp` is a tmpfs in
/// memory on many systems (Debian 13, Fedora, Arch), where a million
/// connections' 2.5 GB of `-T json` text would be held in RAM — then the
/// platform's temporary directory (no `/var/tmp`, or a read-only one).
fn spool_dirs(tmpdir: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let var = Path::new("/var/tmp");
    match tmpdir {
        Some(dir) if !dir.is_empty() => vec![PathBuf::from(dir)],
        _ if cfg!(unix) && var.is_dir() => vec![var.to_path_buf(), std::env::temp_dir()],
        _ => vec![std::env::temp_dir()],
    }
}

/// Appends `text` to `out` as a spooled piece's field: a 4-byte
/// little-endian length, then its bytes; `None` (nothing written) if it is
/// 4 GiB or more.
pub fn put_text(out: &mut Vec<u8>, text: &str) -> Option<()> {
    let len = u32::try_from(text.len()).ok()?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    Some(())
}

/// Takes a field [`put_text`] wrote from the front of `bytes`; `None` if
/// they do not begin with one.
pub fn take_text<'a>(bytes: &mut &'a [u8]) -> Option<&'a str> {
    let (len, rest) = bytes.split_first_chunk::<4>()?;
    let (text, rest) = rest.split_at_checked(u32::from_le_bytes(*len) as usize)?;
    *bytes = rest;
    std::str::from_utf8(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: Purpose = Purpose {
        output: "test",
        holds: "nothing",
        instead: "do without",
    };

    #[test]
    fn gives_back_what_went_in_from_memory_and_from_the_file() {
        for memory in [0, 5, 1 << 20] {
            let mut spool = Spool::new(memory, &TEST);
            let texts: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; usize::from(i % 7)]).collect();
            let at: Vec<Spooled> = texts
                .iter()
                .map(|t| {
                    spool
                        .append(&[&t[..t.len() / 2], &t[t.len() / 2..]])
                        .unwrap()
                })
                .collect();
            let mut buf = Vec::new();
            for (i, t) in texts.iter().enumerate().rev() {
                assert_eq!(
                    spool.get(&at[i], &mut buf).unwrap(),
                    &t[..],
                    "memory {memory}, {i}"
                );
            }
            assert_eq!(spool.file.is_some(), memory < 1 << 20);
        }
    }

    #[test]
    fn the_file_goes_in_tmpdir_or_else_var_tmp() {
        let dir = std::ffi::OsStr::new("/some/where");
        assert_eq!(spool_dirs(Some(dir)), [PathBuf::from("/some/where")]);
        let default = spool_dirs(None);
        assert_eq!(default, spool_dirs(Some(std::ffi::OsStr::new(""))));
        if Path::new("/var/tmp").is_dir() {
            assert_eq!(default, [PathBuf::from("/var/tmp"), std::env::temp_dir()]);
        } else {
            assert_eq!(default, [std::env::temp_dir()]);
        }
    }

    #[test]
    fn texts_come_back_and_broken_ones_are_none() {
        let mut bytes = Vec::new();
        for text in ["", "é ✓", "127.0.0.1:443"] {
            put_text(&mut bytes, text).unwrap();
        }
        let mut rest = &bytes[..];
        assert_eq!(take_text(&mut rest), Some(""));
        assert_eq!(take_text(&mut rest), Some("é ✓"));
        assert_eq!(take_text(&mut rest), Some("127.0.0.1:443"));
        assert_eq!(take_text(&mut rest), None);
        for cut in 0..bytes.len() {
            let mut part = &bytes[..cut];
            while take_text(&mut part).is_some() {}
        }
        assert_eq!(take_text(&mut &[9, 0, 0, 0, b'x'][..]), None);
        assert_eq!(take_text(&mut &[1, 0, 0, 0, 0xff][..]), None);
    }
}
