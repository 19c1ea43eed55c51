//! The frames of a QUIC 0-RTT or 1-RTT packet's plaintext (RFC 9000 §19,
//! RFC 9221 for DATAGRAM) that the analysis reads — STREAM (HTTP/3),
//! CRYPTO (tickets after the handshake) and CONNECTION_CLOSE — found past
//! every other kind by its length.
//!
//! Owns nothing but the walk: what the frames mean is `app`'s. The walk
//! stops at a frame type it does not know, or one that runs past the end.

use super::initial;
use crate::decode::varint;

/// A STREAM frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamFrame<'a> {
    pub id: u64,
    pub offset: u64,
    pub fin: bool,
    pub data: &'a [u8],
}

/// A frame of a 0-RTT or 1-RTT packet that this tool reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppFrame<'a> {
    Stream(StreamFrame<'a>),
    /// CRYPTO: handshake messages after the handshake (NewSessionTicket).
    Crypto {
        offset: u64,
        data: &'a [u8],
    },
    /// CONNECTION_CLOSE: of the application (0x1d) or the transport
    /// (0x1c), its error code and reason phrase.
    Close {
        application: bool,
        error: u64,
        reason: &'a [u8],
    },
}

/// Every STREAM frame of a 0-RTT or 1-RTT plaintext, past the other
/// frames; it stops at a frame it does not know or that does not fit.
pub fn stream_frames(plain: &[u8]) -> impl Iterator<Item = StreamFrame<'_>> {
    app_frames(plain).filter_map(|f| match f {
        AppFrame::Stream(s) => Some(s),
        AppFrame::Crypto { .. } | AppFrame::Close { .. } => None,
    })
}

/// Every STREAM and CRYPTO frame of a 0-RTT or 1-RTT plaintext, past the
/// other frames; it stops at a frame it does not know or that does not fit.
pub fn app_frames(plain: &[u8]) -> impl Iterator<Item = AppFrame<'_>> {
    let mut rest = plain;
    std::iter::from_fn(move || loop {
        let (ty, after) = varint(rest)?;
        rest = after;
        if ty == 0x06 {
            let (offset, after) = varint(rest)?;
            let (len, after) = varint(after)?;
            let data;
            (data, rest) = after.split_at_checked(usize::try_from(len).ok()?)?;
            return Some(AppFrame::Crypto { offset, data });
        }
        if ty == 0x1c || ty == 0x1d {
            let (error, mut after) = varint(rest)?;
            if ty == 0x1c {
                (_, after) = varint(after)?; // the frame type that failed
            }
            let (len, after) = varint(after)?;
            let reason;
            (reason, rest) = after.split_at_checked(usize::try_from(len).ok()?)?;
            let application = ty == 0x1d;
            return Some(AppFrame::Close {
                application,
                error,
                reason,
            });
        }
        if (0x08..=0x0f).contains(&ty) {
            let (id, mut after) = varint(rest)?;
            let mut offset = 0;
            if ty & 0x04 != 0 {
                (offset, after) = varint(after)?;
            }
            let data;
            (data, rest) = if ty & 0x02 != 0 {
                let (len, after) = varint(after)?;
                after.split_at_checked(usize::try_from(len).ok()?)?
            } else {
                (after, &[][..])
            };
            let fin = ty & 0x01 != 0;
            return Some(AppFrame::Stream(StreamFrame {
                id,
                offset,
                fin,
                data,
            }));
        }
        rest = skip_frame(ty, rest)?;
    })
}

/// The bytes after the body of a frame of type `ty` that is not STREAM
/// (RFC 9000 §19, RFC 9221 for DATAGRAM); `None` for an unknown type.
fn skip_frame(ty: u64, b: &[u8]) -> Option<&[u8]> {
    fn skip(mut b: &[u8], n: usize) -> Option<&[u8]> {
        for _ in 0..n {
            b = varint(b)?.1;
        }
        Some(b)
    }
    fn bytes(b: &[u8]) -> Option<&[u8]> {
        let (len, b) = varint(b)?;
        b.get(usize::try_from(len).ok()?..)
    }
    match ty {
        0x00 | 0x01 | 0x1e => Some(b),
        0x02 | 0x03 => initial::skip_ack(b, ty == 0x03),
        0x04 => skip(b, 3),
        0x05 | 0x11 | 0x15 => skip(b, 2),
        0x06 => bytes(skip(b, 1)?),
        0x07 => bytes(b),
        0x10 | 0x12 | 0x13 | 0x14 | 0x16 | 0x17 | 0x19 => skip(b, 1),
        0x18 => {
            let b = skip(b, 2)?;
            let (&len, b) = b.split_first()?;
            b.get(usize::from(len) + 16..)
        }
        0x1a | 0x1b => b.get(8..),
        0x1c => bytes(skip(b, 2)?),
        0x1d => bytes(skip(b, 1)?),
        0x30 => Some(&[]),
        0x31 => bytes(b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_frames_are_found_past_the_others() {
        let plain = [
            0x02, 0x05, 0x00, 0x00, 0x01, // ACK
            0x18, 0x01, 0x00, 0x02, 0xaa, 0xbb, // NEW_CONNECTION_ID, then its token
        ];
        let mut plain = plain.to_vec();
        plain.extend_from_slice(&[0; 16]);
        plain.extend_from_slice(&[0x0b, 0x04, 0x03, b'a', b'b', b'c']); // STREAM 4, LEN, FIN
        plain.extend_from_slice(&[0x1e, 0x0c, 0x08, 0x05, b'x']); // HANDSHAKE_DONE, STREAM 8 at 5
        let got: Vec<(u64, u64, bool)> = stream_frames(&plain)
            .map(|f| (f.id, f.offset, f.fin))
            .collect();
        assert_eq!(got, [(4, 0, true), (8, 5, false)]);
        // An unknown frame type, or a length past the end: the walk stops.
        assert_eq!(stream_frames(&[0x40, 0x80, 0x0a, 0x00]).count(), 0);
        assert_eq!(stream_frames(&[0x0a, 0x00, 0x10, 0x01]).count(), 0);
    }

    #[test]
    fn crypto_and_close_frames_are_read_too() {
        let mut plain = vec![0x06, 0x00, 0x02, 0x04, 0x00]; // CRYPTO at 0: 2 bytes
        plain.extend_from_slice(&[0x1c, 0x0a, 0x06, 0x02, b'n', b'o']); // transport close
        plain.extend_from_slice(&[0x1d, 0x41, 0x00, 0x00]); // application close 0x100
        let got: Vec<AppFrame<'_>> = app_frames(&plain).collect();
        assert_eq!(
            got,
            [
                AppFrame::Crypto {
                    offset: 0,
                    data: &[0x04, 0x00]
                },
                AppFrame::Close {
                    application: false,
                    error: 0x0a,
                    reason: b"no"
                },
                AppFrame::Close {
                    application: true,
                    error: 0x100,
                    reason: b""
                },
            ]
        );
        // A reason longer than what is left: the walk stops.
        assert_eq!(app_frames(&[0x1d, 0x00, 0x05, b'x']).count(), 0);
    }
}
