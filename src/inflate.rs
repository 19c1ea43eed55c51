//! Decompression, behind one door: the gzip and zstd streams a capture file
//! may be stored in, and the zlib, brotli and zstd blocks of a TLS
//! compressed certificate (RFC 8879). The only module that names `flate2`,
//! `ruzstd` and `brotli-decompressor` outside tests.
//!
//! Does not tell which compression an input uses (`source::file::open`
//! reads the magic bytes, `analyze::tls::certificate` the algorithm
//! number) nor parse what comes out.

use std::io::{self, BufRead, Read};

/// A gzip stream's contents (every member, as `gzip -d` gives them).
pub fn gzip<R: BufRead + Send + 'static>(raw: R) -> Box<dyn Read + Send> {
    Box::new(flate2::bufread::MultiGzDecoder::new(raw))
}

/// A zstd stream's contents; an error when its first frame's header is bad.
pub fn zstd<R: Read + Send + 'static>(raw: R) -> io::Result<Box<dyn Read + Send>> {
    match ruzstd::decoding::StreamingDecoder::new(raw) {
        Ok(d) => Ok(Box::new(d)),
        Err(e) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("zstd: {e}"),
        )),
    }
}

/// The largest window a zstd block may ask for.
const MAX_ZSTD_WINDOW: u64 = 8 << 20;

/// The compression algorithms of RFC 8879 §3 (the IANA registry's numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    Zlib,
    Brotli,
    Zstd,
}

impl Block {
    /// The algorithm numbered `n`, if it is one of the three.
    pub fn from_number(n: u16) -> Option<Block> {
        match n {
            1 => Some(Block::Zlib),
            2 => Some(Block::Brotli),
            3 => Some(Block::Zstd),
            _ => None,
        }
    }

    /// Its name, as the JSON gives it.
    pub fn name(self) -> &'static str {
        match self {
            Block::Zlib => "zlib",
            Block::Brotli => "brotli",
            Block::Zstd => "zstd",
        }
    }

    /// `data` decompressed, when it gives exactly `len` bytes: RFC 8879
    /// has a message whose length differs from the one announced dropped.
    /// No more than `len` and one byte are ever produced, and a zstd
    /// frame asking for a window over 8 MiB (what RFC 8878 §3.1.1.1.2 asks
    /// every decoder to take, and `zstd -19` asks for when it does not
    /// know the size) is refused before anything is allocated for it; what
    /// a window reserves beyond the bytes written is never touched.
    pub fn decompress(self, data: &[u8], len: usize) -> Option<Vec<u8>> {
        let reader: Box<dyn Read + '_> = match self {
            Block::Zlib => Box::new(flate2::read::ZlibDecoder::new(data)),
            Block::Brotli => Box::new(brotli_decompressor::Decompressor::new(data, 4096)),
            Block::Zstd => {
                let d = ruzstd::decoding::StreamingDecoder::new_with_max_window_size(
                    data,
                    MAX_ZSTD_WINDOW,
                );
                Box::new(d.ok()?)
            }
        };
        let mut out = Vec::with_capacity(len.min(64 * 1024));
        reader.take(len as u64 + 1).read_to_end(&mut out).ok()?;
        (out.len() == len).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn zlib_blocks_of_the_announced_length_come_out_and_others_do_not() {
        let plain: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        let packed = zlib(&plain);
        assert_eq!(
            Block::Zlib.decompress(&packed, plain.len()),
            Some(plain.clone())
        );
        assert_eq!(
            Block::Zlib.decompress(&packed, plain.len() - 1),
            None,
            "longer"
        );
        assert_eq!(
            Block::Zlib.decompress(&packed, plain.len() + 1),
            None,
            "shorter"
        );
        assert_eq!(
            Block::Zlib.decompress(&packed[..10], plain.len()),
            None,
            "cut"
        );
        assert_eq!(Block::Zlib.decompress(&[0xff; 40], 10), None, "not zlib");
    }

    #[test]
    fn brotli_and_zstd_blocks_come_out() {
        // "hello hello hello\n" by python's `brotli.compress` and `zstd -c`.
        let brotli = [
            0x8b, 0x08, 0x80, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
            0x20, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x0a, 0x03,
        ];
        let text = b"hello hello hello\n".to_vec();
        assert_eq!(
            Block::Brotli.decompress(&brotli, text.len()),
            Some(text.clone())
        );
        assert_eq!(
            Block::Brotli.decompress(&brotli[..8], text.len()),
            None,
            "cut"
        );
        let zstd = [
            0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x12, 0x6d, 0x00, 0x00, 0x38, 0x68, 0x65, 0x6c, 0x6c,
            0x6f, 0x20, 0x0a, 0x01, 0x00, 0x31, 0x4a, 0x11, 0xa3, 0xaa, 0x74, 0xce,
        ];
        assert_eq!(
            Block::Zstd.decompress(&zstd, text.len()),
            Some(text.clone())
        );
        assert_eq!(Block::Zstd.decompress(&zstd[..12], text.len()), None, "cut");
        assert_eq!(Block::Zstd.decompress(&zstd, 5), None, "longer");
    }

    #[test]
    fn zstd_frames_asking_for_a_huge_window_are_refused() {
        // A frame header: magic, descriptor 0 (no single segment), window
        // descriptor 0x88 (exponent 17: 128 MiB, which ruzstd's default
        // limit would take), then a raw last block.
        let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88];
        frame.extend_from_slice(&[0x29, 0x00, 0x00]); // raw, last, 5 bytes
        frame.extend_from_slice(b"hello");
        assert_eq!(Block::Zstd.decompress(&frame, 5), None);
        frame[5] = 0x00; // 1 KiB
        assert_eq!(Block::Zstd.decompress(&frame, 5), Some(b"hello".to_vec()));
    }

    #[test]
    fn algorithms_are_numbered_as_iana_has_them() {
        let names: Vec<_> = (0..5)
            .map(|n| Block::from_number(n).map(Block::name))
            .collect();
        assert_eq!(
            names,
            [None, Some("zlib"), Some("brotli"), Some("zstd"), None]
        );
    }
}
