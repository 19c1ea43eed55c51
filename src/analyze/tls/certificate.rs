//! What a server's Certificate message says: how many certificates its
//! chain holds and their bytes, and of the first one (the server's own)
//! the subject, issuer, DNS names, end of validity and public key; a
//! compressed one (RFC 8879) is opened first. The only module that names
//! `x509-parser`.
//!
//! Does not gather the message (`messages` for TLS over TCP,
//! `quic::handshake` for QUIC) nor check the chain: a capture is no place
//! to decide trust, and a certificate that does not parse leaves its facts
//! null while the chain is still counted.

use std::cell::RefCell;
use std::collections::VecDeque;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

use crate::inflate;
use crate::record::CertificateInfo;

/// DNS names kept of the first certificate's subjectAltName.
const MAX_DNS_NAMES: usize = 8;
/// Characters kept of a name.
const MAX_NAME: usize = 200;
/// First certificates remembered per thread with their facts: a capture's
/// thousands of handshakes with one server parse its certificate once
/// (parsing took about 4 µs a handshake, a tenth of the time on a capture
/// of short connections).
const MEMO: usize = 8;
/// The longest certificate remembered.
const MEMO_BYTES: usize = 8 * 1024;

thread_local! {
    /// The latest first certificates parsed here, and their facts (the
    /// chain's left out), newest last.
    static SEEN: RefCell<VecDeque<(Box<[u8]>, CertificateInfo)>> =
        const { RefCell::new(VecDeque::new()) };
}

/// The facts of a Certificate message's `body` (after its 4-byte header):
/// TLS 1.3's (`tls13`: a request context, and extensions after each
/// certificate) or TLS 1.2's layout; `None` when the body does not hold a
/// certificate list, or an empty one (a client without a certificate).
pub fn certificate_message(body: &[u8], tls13: bool) -> Option<CertificateInfo> {
    let mut rest = body;
    if tls13 {
        let (&context, after) = rest.split_first()?;
        rest = after.get(usize::from(context)..)?;
    }
    let (list, _) = u24_prefixed(rest)?;
    let mut certificates = list;
    let (mut chain, mut bytes, mut first) = (0u64, 0u64, None);
    while !certificates.is_empty() {
        let (der, after) = u24_prefixed(certificates)?;
        certificates = after;
        if tls13 {
            let (len, after) = certificates.split_first_chunk::<2>()?;
            certificates = after.get(usize::from(u16::from_be_bytes(*len))..)?;
        }
        chain += 1;
        bytes += der.len() as u64;
        first.get_or_insert(der);
    }
    let mut info = CertificateInfo {
        chain,
        bytes,
        ..CertificateInfo::default()
    };
    if let Some(der) = first {
        let facts = remembered(der);
        info = CertificateInfo {
            chain,
            bytes,
            ..facts
        };
    }
    (chain > 0).then_some(info)
}

/// The longest Certificate message a compressed one may announce: the
/// bound an uncompressed one is read within over TCP.
pub const MAX_UNCOMPRESSED: usize = 64 * 1024;

/// The facts of a server's handshake message of type `kind` (its `body`):
/// a Certificate (11, in TLS 1.3's layout when `tls13`) or a
/// CompressedCertificate (25); `None` for another type, or as the two
/// readers below say.
pub fn of_message(kind: u8, body: &[u8], tls13: bool) -> Option<CertificateInfo> {
    match kind {
        11 => certificate_message(body, tls13),
        25 => compressed_certificate_message(body),
        _ => None,
    }
}

/// The facts of a CompressedCertificate message's `body` (RFC 8879 §4:
/// the algorithm, the length of the Certificate message it holds, and
/// that message compressed), with `compression` named; `None` when the
/// algorithm is unknown, the message announced is longer than
/// [`MAX_UNCOMPRESSED`], or it does not decompress to its announced length
/// (or, as [`certificate_message`], holds no chain). Only TLS 1.3 has it.
pub fn compressed_certificate_message(body: &[u8]) -> Option<CertificateInfo> {
    let (algorithm, rest) = body.split_first_chunk::<2>()?;
    let block = inflate::Block::from_number(u16::from_be_bytes(*algorithm))?;
    let (len, rest) = u24(rest)?;
    if len > MAX_UNCOMPRESSED {
        return None;
    }
    let (compressed, _) = u24_prefixed(rest)?;
    let plain = block.decompress(compressed, len)?;
    let mut info = certificate_message(&plain, true)?;
    info.compression = Some(block.name());
    Some(info)
}

/// The facts of the first certificate `der`, parsed or remembered.
fn remembered(der: &[u8]) -> CertificateInfo {
    let known = SEEN.with_borrow(|seen| {
        let hit = seen.iter().find(|(d, _)| **d == *der);
        hit.map(|(_, facts)| facts.clone())
    });
    if let Some(facts) = known {
        return facts;
    }
    let mut facts = CertificateInfo::default();
    if let Ok((_, cert)) = X509Certificate::from_der(der) {
        leaf(&cert, &mut facts);
    }
    if der.len() <= MEMO_BYTES {
        SEEN.with_borrow_mut(|seen| {
            if seen.len() >= MEMO {
                seen.pop_front();
            }
            seen.push_back((der.into(), facts.clone()));
        });
    }
    facts
}

/// A 3-byte length, and what follows it.
fn u24(b: &[u8]) -> Option<(usize, &[u8])> {
    let (&[x, y, z], rest) = b.split_first_chunk::<3>()?;
    Some((
        usize::from(x) << 16 | usize::from(y) << 8 | usize::from(z),
        rest,
    ))
}

/// A 3-byte length and the bytes it counts, and what follows.
fn u24_prefixed(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = u24(b)?;
    rest.split_at_checked(len)
}

/// The first certificate's facts.
fn leaf(cert: &X509Certificate<'_>, info: &mut CertificateInfo) {
    let name = |n: &x509_parser::x509::X509Name<'_>| {
        let cn = n.iter_common_name().next().and_then(|a| a.as_str().ok());
        let text = cn.map_or_else(|| n.to_string(), str::to_owned);
        Some(clip(&text)).filter(|t| !t.is_empty())
    };
    info.subject = name(cert.subject());
    info.issuer = name(cert.issuer());
    info.self_signed = cert.subject() == cert.issuer();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        info.dns_names = san
            .value
            .general_names
            .iter()
            .filter_map(|g| match g {
                GeneralName::DNSName(d) => Some(clip(d)),
                _ => None,
            })
            .take(MAX_DNS_NAMES)
            .collect();
    }
    let not_after = cert.validity().not_after.timestamp();
    info.not_after = u64::try_from(not_after)
        .ok()
        .filter(|&s| s < 253_402_300_800) // before the year 10000
        .map(|s| {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
            humantime::format_rfc3339_seconds(t).to_string()
        });
    let key = cert.public_key();
    info.key = Some(match key.parsed() {
        Ok(PublicKey::RSA(k)) => format!("RSA {}", k.key_size()),
        Ok(PublicKey::EC(k)) => format!("EC {}", k.key_size()),
        _ => match key.algorithm.algorithm.to_id_string().as_str() {
            "1.3.101.112" => "Ed25519".to_owned(),
            "1.3.101.113" => "Ed448".to_owned(),
            oid => clip(oid),
        },
    });
}

/// `s`, printable, at most [`MAX_NAME`] characters.
fn clip(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u24(n: usize) -> [u8; 3] {
        [(n >> 16) as u8, (n >> 8) as u8, n as u8]
    }

    /// A Certificate body of `certs` in TLS 1.2's or 1.3's layout.
    fn body(certs: &[&[u8]], tls13: bool) -> Vec<u8> {
        let mut list = Vec::new();
        for c in certs {
            list.extend_from_slice(&u24(c.len()));
            list.extend_from_slice(c);
            if tls13 {
                list.extend_from_slice(&[0, 0]);
            }
        }
        let mut b = if tls13 { vec![0] } else { vec![] };
        b.extend_from_slice(&u24(list.len()));
        b.extend_from_slice(&list);
        b
    }

    #[test]
    fn chains_are_counted_in_either_layout_even_when_they_do_not_parse() {
        for tls13 in [false, true] {
            let info = certificate_message(&body(&[&[1; 10], &[2; 20]], tls13), tls13);
            let info = info.expect("a chain");
            assert_eq!((info.chain, info.bytes), (2, 30));
            assert_eq!((info.subject, info.key), (None, None), "not X.509");
        }
    }

    /// A CompressedCertificate body: `algorithm`, the announced length,
    /// and `plain` compressed with zlib.
    fn compressed(algorithm: u16, announced: usize, plain: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(plain).unwrap();
        let packed = z.finish().unwrap();
        let mut b = algorithm.to_be_bytes().to_vec();
        b.extend_from_slice(&u24(announced));
        b.extend_from_slice(&u24(packed.len()));
        b.extend_from_slice(&packed);
        b
    }

    #[test]
    fn compressed_certificates_are_opened_when_they_are_what_they_announce() {
        let plain = body(&[&[1; 300], &[2; 200]], true);
        let info = compressed_certificate_message(&compressed(1, plain.len(), &plain));
        let info = info.expect("a chain");
        assert_eq!((info.chain, info.bytes), (2, 500));
        assert_eq!(info.compression, Some("zlib"));
        // Not zlib by its number, a length other than announced, an
        // announced length over the bound, a cut body.
        for bad in [
            compressed(2, plain.len(), &plain),
            compressed(9, plain.len(), &plain),
            compressed(1, plain.len() + 1, &plain),
            compressed(1, MAX_UNCOMPRESSED + 1, &vec![0; MAX_UNCOMPRESSED + 1]),
            compressed(1, plain.len(), &plain)[..20].to_vec(),
        ] {
            assert_eq!(compressed_certificate_message(&bad), None);
        }
        // What comes out is read as TLS 1.3's Certificate: 1.2's layout
        // is not.
        let old = body(&[&[1; 300]], false);
        assert_eq!(
            compressed_certificate_message(&compressed(1, old.len(), &old)),
            None
        );
    }

    #[test]
    fn empty_cut_or_overrunning_bodies_give_nothing() {
        assert_eq!(certificate_message(&body(&[], false), false), None);
        assert_eq!(certificate_message(&[], true), None);
        let mut b = body(&[&[1; 10]], false);
        b.truncate(b.len() - 1);
        assert_eq!(certificate_message(&b, false), None, "cut");
        // A 1.3 body read as 1.2: its context byte throws the lengths off.
        assert_eq!(certificate_message(&body(&[&[1; 10]], true), false), None);
    }
}
