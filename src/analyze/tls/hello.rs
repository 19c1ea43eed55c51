//! ClientHello and ServerHello facts, and the fingerprints computed from them:
//! JA4 (FoxIO, the BSD-3-Clause part only), JA3 and JA3S (Salesforce), plus
//! display names for protocol versions and cipher suites.
//!
//! Owns: turning one handshake message *body* (after the 4-byte handshake
//! header) into plain facts. Fixed fields are read by hand; extension contents
//! go through `tls-parser`. Bytes are hostile: any input gives `None` or facts,
//! never a panic, and nothing is allocated beyond the input's own size.
//!
//! Does not own: TCP or TLS-record reassembly, finding messages in a stream,
//! or deciding what a handshake means (resumed, retried, …); that is the
//! caller's (`super`). JA4S, JA4X and the other JA4+ methods are under the
//! FoxIO licence and are deliberately not implemented.

mod memo;

pub use memo::ClientPrints;

use tls_parser::{parse_tls_client_hello_extension, parse_tls_server_hello_extension};
use tls_parser::{TlsCipherEnc, TlsCipherEncMode, TlsCipherSuite, TlsExtension};

use super::crypto;
use crate::decode::varint;
use crate::record::Name;

/// The ServerHello random that marks a HelloRetryRequest (RFC 8446 §4.1.3).
/// (TLS 1.3 drafts before 22 sent a HelloRetryRequest as handshake type 6.)
pub const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

const EXT_SNI: u16 = 0;
const EXT_ALPN: u16 = 16;

/// Facts from a ClientHello, GREASE values kept as sent (fingerprints drop them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHelloFacts {
    pub legacy_version: u16,
    pub session_id: Vec<u8>, // empty when none
    pub ciphers: Vec<u16>,
    pub compression: Vec<u8>,
    pub extensions: Vec<u16>,   // extension type ids in the order sent
    pub sni: Option<String>,    // first host_name, lossy UTF-8
    pub alpn: Vec<String>,      // protocols offered, lossy UTF-8
    pub alpn_raw: Vec<Vec<u8>>, // the same, as sent (JA4 needs the bytes)
    pub supported_versions: Vec<u16>,
    pub signature_algorithms: Vec<u16>,
    pub groups: Vec<u16>, // supported_groups (JA3's "elliptic curves")
    pub ec_point_formats: Vec<u8>,
    pub session_ticket: bool, // non-empty session_ticket (resumption attempt, TLS <= 1.2)
    pub psk: bool,            // pre_shared_key present (TLS 1.3 resumption attempt)
    pub early_data: bool,     // early_data present (0-RTT offered)
    pub key_share_groups: Vec<u16>, // key_share (51, or 40 in drafts), e.g. 0x11ec
    /// QUIC's max_idle_timeout transport parameter, milliseconds (0: none).
    pub quic_idle_timeout_ms: Option<u64>,
}

/// Facts from a ServerHello, or from a TLS 1.3 HelloRetryRequest (same shape,
/// random [`HRR_RANDOM`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerHelloFacts {
    pub legacy_version: u16,
    pub random: Vec<u8>,
    pub session_id: Vec<u8>, // empty when none (always, in the draft <= 21 shape)
    pub cipher: u16,
    pub extensions: Vec<u16>,
    pub selected_version: Option<u16>, // supported_versions (TLS 1.3: 0x0304)
    pub alpn: Option<String>,          // selected protocol, lossy UTF-8
    pub psk: bool,                     // pre_shared_key present (TLS 1.3 resumed)
    pub key_share_group: Option<u16>,
}

/// A cursor over untrusted bytes; every read is checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2)?.first_chunk().map(|b| u16::from_be_bytes(*b))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = *self.take(1)?.first()?;
        self.take(n.into())
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n.into())
    }
    /// One extension: (type, the whole extension with its header, its data).
    fn extension(&mut self) -> Option<(u16, &'a [u8], &'a [u8])> {
        let start = self.0;
        let (ty, data) = (self.u16()?, self.vec16()?);
        Some((ty, start.get(..data.len() + 4)?, data))
    }
}

/// An empty list of extension types with room for all that `block` can
/// hold (each takes at least four bytes): one allocation, where growing
/// from nothing took four for a browser's 15–20.
fn types_for(block: &Reader<'_>) -> Vec<u16> {
    Vec::with_capacity(block.0.len() / 4)
}

/// The max_idle_timeout (id 1) of a QUIC transport parameters block:
/// (id, length, value) triples of variable-length integers (RFC 9000
/// §18); `None` when it is not there, or the block is cut short first.
fn quic_idle_timeout(mut block: &[u8]) -> Option<u64> {
    while !block.is_empty() {
        let (id, rest) = varint(block)?;
        let (len, rest) = varint(rest)?;
        let (value, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
        if id == 1 {
            return varint(value).map(|(ms, _)| ms);
        }
        block = rest;
    }
    None
}

/// Big-endian u16 list; an odd trailing byte is ignored.
fn u16s(b: &[u8]) -> Vec<u16> {
    let pairs = b.chunks_exact(2).filter_map(|c| c.first_chunk::<2>());
    pairs.map(|c| u16::from_be_bytes(*c)).collect()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl ClientHelloFacts {
    /// `body` is the handshake message body (after the 4-byte handshake
    /// header: type 1 + 24-bit length). `None` when a field is cut short or an
    /// extension overruns its block; unknown values are kept.
    pub fn parse(body: &[u8]) -> Option<ClientHelloFacts> {
        let mut r = Reader(body);
        let mut f = ClientHelloFacts {
            legacy_version: r.u16()?,
            ..ClientHelloFacts::default()
        };
        r.take(32)?; // random
        f.session_id = r.vec8()?.to_vec();
        f.ciphers = u16s(r.vec16()?);
        f.compression = r.vec8()?.to_vec();
        if r.0.is_empty() {
            return Some(f); // SSL 3.0 style: no extensions block at all
        }
        let mut exts = Reader(r.vec16()?);
        f.extensions = types_for(&exts);
        while !exts.0.is_empty() {
            let (ty, whole, data) = exts.extension()?; // overrun: None
            f.extensions.push(ty);
            f.add_extension(ty, whole, data);
        }
        Some(f)
    }

    fn add_extension(&mut self, ty: u16, whole: &[u8], data: &[u8]) {
        match ty {
            35 => self.session_ticket = !data.is_empty(), // session_ticket
            41 => self.psk = true,                        // pre_shared_key
            42 => self.early_data = true,                 // early_data
            // supported_versions: tls-parser takes a 2-byte list for a lone version.
            43 => self.supported_versions = Reader(data).vec8().map(u16s).unwrap_or_default(),
            // key_share (40 until TLS 1.3 draft 23), raw from tls-parser:
            // client_shares<0..2^16-1>.
            51 | 40 => {
                let mut r = Reader(Reader(data).vec16().unwrap_or_default());
                while let (Some(group), Some(_)) = (r.u16(), r.vec16()) {
                    self.key_share_groups.push(group);
                }
            }
            // quic_transport_parameters (RFC 9001 §8.2). The drafts' 0xffa5
            // is not read: before draft 27 it held 16-bit fields.
            57 => self.quic_idle_timeout_ms = quic_idle_timeout(data),
            _ => {}
        }
        // Only these are read below: tls-parser need not parse (and
        // allocate for) the others — key_share, psk modes, padding, …
        if !matches!(ty, 0 | 10 | 11 | 13 | 16) {
            return;
        }
        let Ok((_, ext)) = parse_tls_client_hello_extension(whole) else {
            return; // malformed contents: the type id is kept, the contents are not
        };
        match ext {
            TlsExtension::SNI(names) if self.sni.is_none() => {
                let host = names.iter().find(|(t, _)| t.0 == 0);
                self.sni = host.map(|(_, n)| lossy(n));
            }
            TlsExtension::ALPN(protocols) => {
                self.alpn = protocols.iter().map(|p| lossy(p)).collect();
                self.alpn_raw = protocols.iter().map(|p| p.to_vec()).collect();
            }
            TlsExtension::EllipticCurves(g) => self.groups = g.iter().map(|g| g.0).collect(),
            TlsExtension::EcPointFormats(formats) => self.ec_point_formats = formats.to_vec(),
            TlsExtension::SignatureAlgorithms(algs) => self.signature_algorithms = algs,
            _ => {}
        }
    }

    /// Highest non-GREASE supported_versions entry, else legacy_version.
    pub fn max_version(&self) -> u16 {
        let versions = non_grease(&self.supported_versions);
        versions.max().unwrap_or(self.legacy_version)
    }

    /// JA4 for TCP, e.g. `t13d1516h2_8daaf6152771_e5627efa2ab1`.
    pub fn ja4(&self) -> String {
        let [a, b, c] = self.ja4_parts();
        format!("{a}_{}_{}", hash12(&b), hash12(&c))
    }

    /// JA4_r: the raw form (the sorted lists before hashing).
    pub fn ja4_r(&self) -> String {
        self.ja4_parts().join("_")
    }

    fn ja4_parts(&self) -> [String; 3] {
        let mut ciphers: Vec<u16> = non_grease(&self.ciphers).collect();
        let mut exts: Vec<u16> = non_grease(&self.extensions).collect();
        let version = ja4_version(self.max_version());
        let sni = if exts.contains(&EXT_SNI) { 'd' } else { 'i' };
        let (nc, ne) = (ciphers.len().min(99), exts.len().min(99));
        let a = format!("t{version}{sni}{nc:02}{ne:02}{}", self.ja4_alpn());
        ciphers.sort_unstable();
        exts.retain(|&e| e != EXT_SNI && e != EXT_ALPN);
        exts.sort_unstable();
        let mut c = hex_list(&exts);
        let sigs: Vec<u16> = non_grease(&self.signature_algorithms).collect();
        if !sigs.is_empty() {
            c = format!("{c}_{}", hex_list(&sigs));
        }
        [a, hex_list(&ciphers), c]
    }

    /// First and last character of the first ALPN value; "00" when there is
    /// none or it is empty; when either end is not an ASCII letter or digit,
    /// the first and last hex digit of the value instead (JA4 spec).
    fn ja4_alpn(&self) -> String {
        let first = self.alpn_raw.first().map(Vec::as_slice).unwrap_or_default();
        let (Some(&a), Some(&z)) = (first.first(), first.last()) else {
            return "00".to_owned();
        };
        if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() {
            return format!("{}{}", char::from(a), char::from(z));
        }
        let digit = |n: u8| char::from_digit(n.into(), 16).unwrap_or('0');
        format!("{}{}", digit(a >> 4), digit(z & 0x0f))
    }

    /// "SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats",
    /// decimal, '-' separated, GREASE removed; the version is the legacy one.
    pub fn ja3_string(&self) -> String {
        let lists = [&self.ciphers, &self.extensions, &self.groups].map(|l| dec_list(l));
        let formats: Vec<u16> = self
            .ec_point_formats
            .iter()
            .map(|&f| u16::from(f))
            .collect();
        // Point formats are single bytes, which GREASE values never are.
        let (version, formats) = (self.legacy_version, dec_list(&formats));
        format!("{version},{},{formats}", lists.join(","))
    }

    /// MD5 (lower-case hex) of [`ClientHelloFacts::ja3_string`].
    pub fn ja3(&self) -> String {
        hex(&crypto::md5(self.ja3_string().as_bytes()))
    }
}

impl ServerHelloFacts {
    /// `body` is the handshake message body after the 4-byte header. Reads
    /// both the usual shape and the TLS 1.3 draft ≤ 21 one (version
    /// 0x7f00..=0x7f15: no session id, no compression method).
    pub fn parse(body: &[u8]) -> Option<ServerHelloFacts> {
        let mut r = Reader(body);
        let mut f = ServerHelloFacts {
            legacy_version: r.u16()?,
            random: r.take(32)?.to_vec(),
            ..ServerHelloFacts::default()
        };
        let early_draft = (0x7f00..=0x7f15).contains(&f.legacy_version);
        f.session_id = if early_draft {
            vec![]
        } else {
            r.vec8()?.to_vec()
        };
        f.cipher = r.u16()?;
        r.take(usize::from(!early_draft))?; // compression method
        if r.0.is_empty() {
            return Some(f);
        }
        let mut exts = Reader(r.vec16()?);
        f.extensions = types_for(&exts);
        while !exts.0.is_empty() {
            let (ty, whole, data) = exts.extension()?;
            f.extensions.push(ty);
            match ty {
                41 => f.psk = true, // pre_shared_key
                // key_share: a KeyShareEntry (in a HelloRetryRequest, just the group)
                51 | 40 => f.key_share_group = Reader(data).u16(),
                _ => {}
            }
            match parse_tls_server_hello_extension(whole) {
                Ok((_, TlsExtension::SupportedVersions(v))) => {
                    f.selected_version = v.first().map(|v| v.0);
                }
                Ok((_, TlsExtension::ALPN(p))) => f.alpn = p.first().map(|p| lossy(p)),
                _ => {}
            }
        }
        Some(f)
    }

    pub fn is_hello_retry_request(&self) -> bool {
        self.random == HRR_RANDOM
    }

    /// The negotiated version: supported_versions if present, else legacy.
    pub fn version(&self) -> u16 {
        self.selected_version.unwrap_or(self.legacy_version)
    }

    /// "SSLVersion,Cipher,SSLExtension" (decimal, '-' separated, GREASE removed).
    pub fn ja3s_string(&self) -> String {
        let exts = dec_list(&self.extensions);
        format!("{},{},{exts}", self.legacy_version, self.cipher)
    }

    /// MD5 (lower-case hex) of [`ServerHelloFacts::ja3s_string`].
    pub fn ja3s(&self) -> String {
        hex(&crypto::md5(self.ja3s_string().as_bytes()))
    }
}

/// What a TLS 1.3 EncryptedExtensions says (read with a key log).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct EncryptedExtensionsFacts {
    /// The protocol the server chose (ALPN).
    pub alpn: Option<String>,
    /// Whether it accepted 0-RTT data.
    pub early_data: bool,
    /// QUIC: the server's max_idle_timeout transport parameter (ext 57),
    /// milliseconds.
    pub quic_idle_timeout_ms: Option<u64>,
}

/// Reads an EncryptedExtensions body; `None` when an extension overruns
/// the block.
pub fn encrypted_extensions(body: &[u8]) -> Option<EncryptedExtensionsFacts> {
    let mut exts = Reader(Reader(body).vec16()?);
    let mut facts = EncryptedExtensionsFacts::default();
    while !exts.0.is_empty() {
        let (ty, whole, data) = exts.extension()?;
        match ty {
            42 => facts.early_data = true,
            16 => {
                if let Ok((_, TlsExtension::ALPN(p))) = parse_tls_server_hello_extension(whole) {
                    facts.alpn = p.first().map(|p| lossy(p));
                }
            }
            57 => facts.quic_idle_timeout_ms = quic_idle_timeout(data),
            _ => {}
        }
    }
    Some(facts)
}

/// The bytes a TLS 1.2 record of an AEAD suite adds to its plaintext: the
/// 8-byte explicit nonce and the tag of GCM and CCM (16 bytes; CCM_8's 8),
/// ChaCha20-Poly1305's tag alone; `None` for the other suites (a CBC
/// record's padding hides its plaintext's length).
pub fn aead_overhead_12(id: u16) -> Option<usize> {
    let suite = TlsCipherSuite::from_id(id)?;
    match (suite.enc, suite.enc_mode) {
        (TlsCipherEnc::Chacha20_Poly1305, _) => Some(16),
        (_, TlsCipherEncMode::Ccm) if suite.name.ends_with("CCM_8") => Some(16),
        (_, TlsCipherEncMode::Gcm | TlsCipherEncMode::Ccm) => Some(24),
        _ => None,
    }
}

/// TLS 1.3: what a suite seals around a record's content — its type and
/// the tag (16 bytes; TLS_AES_128_CCM_8_SHA256's 8).
pub fn record_overhead_13(id: u16) -> usize {
    1 + if id == 0x1305 { 8 } else { 16 }
}

/// TLS 1.3: the length of a Finished message (its header and the
/// suite's hash), by the suite.
pub fn finished_len_13(id: u16) -> Option<usize> {
    match id {
        0x1302 => Some(4 + 48),
        0x1301 | 0x1303 | 0x1304 | 0x1305 => Some(4 + 32),
        _ => None,
    }
}

/// GREASE (RFC 8701): 0x0a0a, 0x1a1a, … 0xfafa.
pub fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

fn non_grease(v: &[u16]) -> impl Iterator<Item = u16> + '_ {
    v.iter().copied().filter(|&x| !is_grease(x))
}

/// Version numbers with their display name and JA4 code.
const VERSIONS: [(u16, &str, &str); 9] = [
    (0x0304, "TLS 1.3", "13"),
    (0x0303, "TLS 1.2", "12"),
    (0x0302, "TLS 1.1", "11"),
    (0x0301, "TLS 1.0", "10"),
    (0x0300, "SSL 3.0", "s3"),
    (0x0002, "SSL 2.0", "s2"),
    (0xfeff, "DTLS 1.0", "d1"),
    (0xfefd, "DTLS 1.2", "d2"),
    (0xfefc, "DTLS 1.3", "d3"),
];

/// "TLS 1.3", "TLS 1.2", "TLS 1.1", "TLS 1.0", "SSL 3.0", "SSL 2.0", "DTLS 1.x",
/// drafts as "TLS 1.3 draft 23" (0x7f17), Facebook Fizz 0xfb1a as "TLS 1.3
/// (Fizz)" and its other drafts as "TLS 1.3 draft 23 (Fizz)", unknown as "0x1234".
pub fn version_name(v: u16) -> Name {
    match (VERSIONS.iter().find(|k| k.0 == v), v >> 8) {
        (Some(known), _) => Name::Borrowed(known.1),
        _ if v == 0xfb1a => Name::Borrowed("TLS 1.3 (Fizz)"),
        (None, 0x7f) => format!("TLS 1.3 draft {}", v & 0xff).into(),
        (None, 0xfb) => format!("TLS 1.3 draft {} (Fizz)", v & 0xff).into(),
        _ => format!("0x{v:04x}").into(),
    }
}

/// IANA cipher suite name via tls-parser, or "0x1234" when unknown.
pub fn cipher_name(id: u16) -> Name {
    TlsCipherSuite::from_id(id).map_or_else(|| format!("0x{id:04x}").into(), |c| c.name.into())
}

/// JA4's two-character version code, "00" when unknown (drafts included).
fn ja4_version(v: u16) -> &'static str {
    VERSIONS.iter().find(|k| k.0 == v).map_or("00", |k| k.2)
}

/// First 12 hex digits of SHA-256, or twelve zeros for an empty list.
fn hash12(s: &str) -> String {
    if s.is_empty() {
        return "0".repeat(12);
    }
    hex(crypto::sha256(s.as_bytes()).get(..6).unwrap_or_default())
}

// The lists below are built digit by digit: `write!` per value cost more
// than the hashing (measured: JA3 and JA4 were 6 % of the time on a large
// capture of short TLS connections).

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        push_hex_digit(&mut out, b >> 4);
        push_hex_digit(&mut out, b);
    }
    out
}

/// The hex digit of the low four bits of `nibble`.
fn push_hex_digit(out: &mut String, nibble: u8) {
    let digit = HEX.get(usize::from(nibble & 0x0f)).copied().unwrap_or(b'0');
    out.push(char::from(digit));
}

/// Lower-case 4-digit hex values joined by commas, in one allocation.
fn hex_list(v: &[u16]) -> String {
    let mut out = String::with_capacity(v.len() * 5);
    for (i, &x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for shift in [12, 8, 4, 0] {
            push_hex_digit(&mut out, (x >> shift) as u8);
        }
    }
    out
}

/// Decimal values, GREASE removed, joined by dashes, in one allocation.
fn dec_list(v: &[u16]) -> String {
    let mut out = String::with_capacity(v.len() * 6);
    let mut digits = itoa::Buffer::new();
    for (i, x) in non_grease(v).enumerate() {
        if i > 0 {
            out.push('-');
        }
        out.push_str(digits.format(x));
    }
    out
}

#[cfg(test)]
mod tests;
