//! What the sizes of sealed TLS 1.3 records tell without the keys: which
//! ALPN protocol the server chose, from the length of its
//! EncryptedExtensions.
//!
//! A server sends in EncryptedExtensions only extensions the client
//! offered, and most stacks (OpenSSL, and so nginx, Apache, HAProxy) seal
//! it in a record of its own, the first after the ServerHello. Its length
//! is then 4 (the message header) + 2 (the extensions' length) + each
//! extension's: ALPN 4 + 2 + 1 + the protocol's length; an empty
//! server_name, early_data 4 each; max_fragment_length 5;
//! record_size_limit 6. When exactly one of the protocols the client
//! offered (or none) gives the length seen, for some choice of those
//! extensions the client made possible, that protocol is what the server
//! chose. Anything else — a record holding more than the EncryptedExtensions,
//! padding, extensions of other sizes, two protocols that fit — says
//! nothing.
//!
//! Does not see records (`appdata` hands it the length).

use super::hello::ClientHelloFacts;

const EXT_SERVER_NAME: u16 = 0;
const EXT_MAX_FRAGMENT_LENGTH: u16 = 1;
const EXT_RECORD_SIZE_LIMIT: u16 = 28;
const EXT_EARLY_DATA: u16 = 42;

/// At most this many protocols offered are tried (a ClientHello may list
/// many; real ones list two or three).
const MAX_PROTOCOLS: usize = 16;

/// The protocol the server chose, told by the length (`len`, header
/// included) of an EncryptedExtensions message answering `hello`:
/// `Some(Some(index))` into the protocols offered, `Some(None)` when the
/// length says no ALPN, and `None` when it says nothing for sure.
pub fn alpn_from_encrypted_extensions(
    hello: &ClientHelloFacts,
    len: usize,
) -> Option<Option<usize>> {
    // The extensions the server may add besides ALPN, by what was offered.
    let optional: Vec<usize> = [
        (EXT_SERVER_NAME, 4),
        (EXT_EARLY_DATA, 4),
        (EXT_MAX_FRAGMENT_LENGTH, 5),
        (EXT_RECORD_SIZE_LIMIT, 6),
    ]
    .iter()
    .filter(|(ext, _)| hello.extensions.contains(ext))
    .map(|&(_, size)| size)
    .collect();
    let fits = |alpn: usize| {
        let Some(rest) = len.checked_sub(4 + 2 + alpn) else {
            return false;
        };
        // Some subset of the optional extensions makes up the rest.
        (0u32..1 << optional.len()).any(|subset| {
            let sum: usize = optional
                .iter()
                .enumerate()
                .filter(|(i, _)| subset & (1 << i) != 0)
                .map(|(_, size)| size)
                .sum();
            sum == rest
        })
    };
    let mut found: Option<Option<usize>> = None;
    let candidates = hello
        .alpn
        .iter()
        .take(MAX_PROTOCOLS)
        .enumerate()
        .map(|(i, p)| (Some(i), 4 + 2 + 1 + p.len()))
        .chain(std::iter::once((None, 0)));
    for (index, size) in candidates {
        if fits(size) {
            let same = |f: Option<usize>| {
                let name = |i: Option<usize>| i.and_then(|i| hello.alpn.get(i));
                name(f) == name(index)
            };
            if found.is_some_and(|f| !same(f)) {
                return None;
            }
            found.get_or_insert(index);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(alpn: &[&str], extensions: &[u16]) -> ClientHelloFacts {
        ClientHelloFacts {
            alpn: alpn.iter().map(|p| p.to_string()).collect(),
            extensions: extensions.to_vec(),
            ..ClientHelloFacts::default()
        }
    }

    #[test]
    fn the_length_names_the_protocol_when_only_one_fits() {
        // curl and Java offer h2 and http/1.1 with SNI: nginx's
        // EncryptedExtensions are 19 bytes for h2, 25 for http/1.1 (the
        // real captures in captures/), 10 without ALPN.
        let curl = hello(&["h2", "http/1.1"], &[0, 16, 43, 51]);
        assert_eq!(alpn_from_encrypted_extensions(&curl, 19), Some(Some(0)));
        assert_eq!(alpn_from_encrypted_extensions(&curl, 25), Some(Some(1)));
        assert_eq!(alpn_from_encrypted_extensions(&curl, 10), Some(None));
        // Without the server_name echo: 15 and 21.
        assert_eq!(alpn_from_encrypted_extensions(&curl, 15), Some(Some(0)));
        assert_eq!(alpn_from_encrypted_extensions(&curl, 21), Some(Some(1)));
        // The EncryptedExtensions sealed with the certificate: nothing.
        assert_eq!(alpn_from_encrypted_extensions(&curl, 900), None);
        assert_eq!(alpn_from_encrypted_extensions(&curl, 3), None);
        // No ALPN offered, no SNI: only 6 fits.
        let bare = hello(&[], &[43, 51]);
        assert_eq!(alpn_from_encrypted_extensions(&bare, 6), Some(None));
        assert_eq!(alpn_from_encrypted_extensions(&bare, 10), None);
    }

    #[test]
    fn two_protocols_that_fit_say_nothing() {
        // record_size_limit (6) offered: h2 with it is as long as
        // http/1.1 without it.
        let firefox = hello(&["h2", "http/1.1"], &[0, 16, 28, 43]);
        assert_eq!(alpn_from_encrypted_extensions(&firefox, 21), None);
        assert_eq!(alpn_from_encrypted_extensions(&firefox, 25), None);
        // Still unique: h2 and the server_name echo alone.
        assert_eq!(alpn_from_encrypted_extensions(&firefox, 19), Some(Some(0)));
        // Two protocols of one length.
        let same = hello(&["h2", "h3"], &[16]);
        assert_eq!(alpn_from_encrypted_extensions(&same, 15), None);
    }
}
