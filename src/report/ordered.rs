//! Output made in chunks on several threads and written in the order of
//! the chunks, for reports whose last step is heavy and serial otherwise
//! (`-T json` lays out every record for the document once the summary is
//! written; the table draws its rows once their widths are known). Each helper thread makes every `threads`-th chunk and keeps at
//! most two made ahead; the calling thread makes its share and writes all.
//!
//! Does not know what the chunks are.

use std::io::{self, Write};
use std::sync::mpsc;

/// Chunks a helper may have made and not yet had written.
const AHEAD: usize = 2;

/// Makes chunks `0..chunks` with `make` (into an empty buffer) on
/// `threads` threads, this one among them, and writes them to `out` in
/// order. The first error (making or writing) ends it.
pub fn in_order<F>(chunks: usize, threads: usize, make: F, out: &mut dyn Write) -> io::Result<()>
where
    F: Fn(usize, &mut Vec<u8>) -> io::Result<()> + Sync,
{
    let threads = threads.clamp(1, chunks.max(1));
    let mut own = Vec::new();
    if threads == 1 {
        for c in 0..chunks {
            own.clear();
            make(c, &mut own)?;
            out.write_all(&own)?;
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let make = &make;
        let helpers: Vec<_> = (1..threads)
            .map(|t| {
                let (made, take) = mpsc::sync_channel::<io::Result<Vec<u8>>>(AHEAD);
                // Written buffers go back to be filled again.
                let (give_back, spare) = mpsc::channel::<Vec<u8>>();
                scope.spawn(move || {
                    for c in (t..chunks).step_by(threads) {
                        let mut buf = spare.try_recv().unwrap_or_default();
                        buf.clear();
                        let chunk = make(c, &mut buf).map(|()| buf);
                        let failed = chunk.is_err();
                        // The calling thread stopped taking (it failed).
                        if made.send(chunk).is_err() || failed {
                            break;
                        }
                    }
                });
                (take, give_back)
            })
            .collect();
        for c in 0..chunks {
            match helpers.get((c % threads).wrapping_sub(1)) {
                None => {
                    own.clear();
                    make(c, &mut own)?;
                    out.write_all(&own)?;
                }
                Some((take, give_back)) => {
                    let chunk = take
                        .recv()
                        .map_err(|_| io::Error::other("an output thread stopped"))??;
                    out.write_all(&chunk)?;
                    // The helper may have finished: then the buffer goes.
                    let _ = give_back.send(chunk);
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(chunks: usize, threads: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        in_order(
            chunks,
            threads,
            |c, buf| {
                buf.extend_from_slice(format!("{c},").as_bytes());
                Ok(())
            },
            &mut out,
        )?;
        Ok(out)
    }

    #[test]
    fn chunks_come_out_in_order_on_any_number_of_threads() {
        let expected: String = (0..100).map(|c| format!("{c},")).collect();
        for threads in [0, 1, 2, 3, 8, 200] {
            let got = made(100, threads).unwrap_or_default();
            assert_eq!(String::from_utf8_lossy(&got), expected, "{threads} threads");
        }
        assert_eq!(made(0, 4).unwrap_or_default(), b"");
    }

    #[test]
    fn the_first_error_ends_it_on_any_thread() {
        for threads in [1, 2, 3] {
            for bad in [0, 1, 2, 57] {
                let mut out = Vec::new();
                let result = in_order(
                    100,
                    threads,
                    |c, buf| {
                        if c == bad {
                            return Err(io::Error::other(format!("chunk {c}")));
                        }
                        buf.push(b'.');
                        Ok(())
                    },
                    &mut out,
                );
                let error = result.err().map(|e| e.to_string());
                assert_eq!(error.as_deref(), Some(&*format!("chunk {bad}")));
                assert_eq!(out.len(), bad, "{threads} threads, chunk {bad} bad");
            }
        }
    }

    /// A writer that fails after `left` bytes.
    struct Full {
        left: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left < buf.len() {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "full"));
            }
            self.left -= buf.len();
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_stops_the_helpers() {
        for threads in [1, 2, 4] {
            let result = in_order(
                10_000,
                threads,
                |_, buf| {
                    buf.extend_from_slice(&[0; 100]);
                    Ok(())
                },
                &mut Full { left: 1_000 },
            );
            let kind = result.err().map(|e| e.kind());
            assert_eq!(kind, Some(io::ErrorKind::BrokenPipe), "{threads} threads");
        }
    }
}
