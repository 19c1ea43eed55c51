//! What the lengths of HTTP/2 frames say of a record's plaintext: whether
//! it can be SETTINGS (with the WINDOW_UPDATE and ACK sent with them), and
//! the request body sizes `h2` learns. Knows nothing of records or
//! flights (`h2` reads those).

use super::{BODY_SIZES, RST_STREAM, SAME};

/// Learns a request body of `plain` bytes: the slot of its size, if new.
pub(super) fn learn_body(bodies: &mut [usize; BODY_SIZES], plain: usize) -> Option<usize> {
    if bodies.iter().any(|b| b.abs_diff(plain) <= SAME) {
        return None;
    }
    let slot = bodies.iter().position(|&b| b == 0)?;
    if let Some(b) = bodies.get_mut(slot) {
        *b = plain;
    }
    Some(slot)
}

/// Settings in a SETTINGS frame at most (RFC 9113 defines six; clients
/// and servers send two to six).
const MAX_SETTINGS: usize = 8;

/// Whether `plain` bytes can be a SETTINGS frame (9 + 6 per setting).
fn settings_frame(len: usize) -> bool {
    len >= 9 && (len - 9) % 6 == 0 && len <= 9 + 6 * MAX_SETTINGS
}

/// Whether `plain` bytes can be a client's SETTINGS frame, with or without
/// a WINDOW_UPDATE (13) after it.
pub(super) fn settings(plain: usize) -> bool {
    settings_frame(plain) || plain.checked_sub(13).is_some_and(settings_frame)
}

/// Whether `plain` bytes can be a server's first frames: SETTINGS, with or
/// without a WINDOW_UPDATE, with or without the acknowledgment of the
/// client's (9) — and then the WINDOW_UPDATE of the stream of a request
/// that came with the client's preface (nginx's 62 bytes).
pub(super) fn server_settings(plain: usize) -> bool {
    let acked = |p: usize| p.checked_sub(9).is_some_and(settings);
    settings(plain) || acked(plain) || plain.checked_sub(RST_STREAM).is_some_and(acked)
}
