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

use md5::{Digest, Md5};
use sha2::Sha256;
use tls_parser::{parse_tls_client_hello_extension, parse_tls_server_hello_extension};
use tls_parser::{TlsCipherSuite, TlsExtension};

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
            _ => {}
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
        hex(&Md5::digest(self.ja3_string().as_bytes()))
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
        hex(&Md5::digest(self.ja3s_string().as_bytes()))
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
pub fn version_name(v: u16) -> String {
    match (VERSIONS.iter().find(|k| k.0 == v), v >> 8) {
        (Some(known), _) => known.1.to_owned(),
        _ if v == 0xfb1a => "TLS 1.3 (Fizz)".to_owned(),
        (None, 0x7f) => format!("TLS 1.3 draft {}", v & 0xff),
        (None, 0xfb) => format!("TLS 1.3 draft {} (Fizz)", v & 0xff),
        _ => format!("0x{v:04x}"),
    }
}

/// IANA cipher suite name via tls-parser, or "0x1234" when unknown.
pub fn cipher_name(id: u16) -> String {
    TlsCipherSuite::from_id(id).map_or_else(|| format!("0x{id:04x}"), |c| c.name.to_owned())
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
    hex(Sha256::digest(s.as_bytes()).get(..6).unwrap_or_default())
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
mod tests {
    use super::*;
    use crate::decode::{decode, Decoded};
    use crate::source::{file::FileSource, PacketSource};
    use serde_json::Value;
    use std::collections::{BTreeMap, HashMap};
    use std::path::{Path, PathBuf};

    fn fixture(name: &str) -> Vec<u8> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hello");
        std::fs::read(dir.join(name)).unwrap()
    }

    fn v16(d: &[u8]) -> Vec<u8> {
        [&(d.len() as u16).to_be_bytes()[..], d].concat()
    }

    /// Parses a synthetic ClientHello: TLS 1.2, no session id, null compression.
    fn hello(ciphers: &[u16], exts: &[(u16, &[u8])]) -> ClientHelloFacts {
        let cs: Vec<u8> = ciphers.iter().flat_map(|c| c.to_be_bytes()).collect();
        let ext = |(t, d): &(u16, &[u8])| [&t.to_be_bytes()[..], &v16(d)].concat();
        let es: Vec<u8> = exts.iter().flat_map(ext).collect();
        let body = [vec![3; 34], vec![0], v16(&cs), vec![1, 0], v16(&es)].concat();
        ClientHelloFacts::parse(&body).unwrap()
    }

    #[test]
    fn synthetic_hellos_grease_alpn_names() {
        assert!((0..16u16).all(|i| is_grease(i * 0x1010 + 0x0a0a)));
        assert!(![0x0a1a, 0x1a0a, 0xfafb, 0].into_iter().any(is_grease));
        let (groups, versions) = ([0, 4, 0x2a, 0x2a, 0, 0x1d], [6, 0x3a, 0x3a, 3, 4, 3, 3]);
        let exts = [(0x1a1a, &[][..]), (10, &groups), (43, &versions)];
        let f = hello(&[0x0a0a, 0x1301, 0x2f], &exts);
        let kept = format!("{:x?}", (&f.ciphers, &f.extensions, &f.groups));
        assert_eq!(kept, "([a0a, 1301, 2f], [1a1a, a, 2b], [2a2a, 1d])");
        assert_eq!(f.ja3_string(), "771,4865-47,10-43,29,");
        assert_eq!(f.ja4_r(), "t13i020200_002f,1301_000a,002b");
        let bare = hello(&[0x0a0a], &[]).ja4();
        assert_eq!(bare, "t12i000000_000000000000_000000000000");
        let f = hello(&[], &[(35, &[1]), (41, &[0, 0]), (42, &[])]);
        assert!(f.session_ticket && f.psk && f.early_data);

        // first ALPN value in hex = expected JA4 characters (a second value follows)
        let cases = "=00 6832=h2 687474702f312e31=h1 61=aa ab=ab abcd=ad 30ab=3b 30abcd31=01";
        for (hex, want) in cases.split(' ').filter_map(|c| c.split_once('=')) {
            let bytes = (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..][..2], 16));
            let first: Vec<u8> = bytes.map(Result::unwrap).collect();
            let list = v16(&[&[first.len() as u8][..], &first, &[1, b'x']].concat());
            assert_eq!(&hello(&[1], &[(16, &list)]).ja4()[8..10], want, "{hex}");
        }

        let names = [0x0304, 0x0300, 0x0002, 0x7f17, 0xfb1a, 0xfb17, 0x1234].map(version_name);
        let want = "TLS 1.3|SSL 3.0|SSL 2.0|TLS 1.3 draft 23|TLS 1.3 (Fizz)|TLS 1.3 draft 23";
        assert_eq!(names.join("|"), want.to_owned() + " (Fizz)|0x1234");
        let ciphers = [0x1301, 0x0a0a].map(cipher_name).join("|");
        assert_eq!(ciphers, "TLS_AES_128_GCM_SHA256|0x0a0a");
    }

    #[test]
    fn real_hellos_hrr_and_truncation() {
        let kyber = fixture("chrome-kyber-client-hello-1.bin");
        let ch = ClientHelloFacts::parse(&kyber).unwrap();
        let got = format!("{:?} {:?} {:x?}", ch.sni, ch.alpn, ch.key_share_groups);
        let want = r#"Some("lh3.google.com") ["h2", "http/1.1"] [caca, 6399, 1d]"#;
        assert_eq!(got, want);
        let got = (&ch.supported_versions, ch.ciphers[0], ch.extensions[0]);
        assert_eq!(format!("{got:x?}"), "([8a8a, 304, 303], eaea, 6a6a)");
        let sh = ServerHelloFacts::parse(&fixture("chrome-kyber-server-hello-1.bin")).unwrap();
        let got = (sh.cipher, sh.key_share_group, sh.version(), &sh.extensions);
        assert_eq!(format!("{got:x?}"), "(1301, Some(6399), 304, [33, 2b])");
        assert!(sh.session_id == ch.session_id && !sh.is_hello_retry_request() && !sh.psk);

        let chs = ["hrr-client-hello-1.bin", "hrr-client-hello-2.bin"].map(fixture);
        let [ch1, ch2] = chs.clone().map(|b| ClientHelloFacts::parse(&b).unwrap());
        let shs = ["hrr-server-hello-1.bin", "hrr-server-hello-2.bin"].map(fixture);
        let [hrr, sh] = shs.map(|b| ServerHelloFacts::parse(&b).unwrap());
        assert!(hrr.is_hello_retry_request() && !sh.is_hello_retry_request());
        let (got, ja3s) = ((hrr.key_share_group, sh.key_share_group), hrr.ja3s_string());
        assert_eq!(
            (got, hrr.version(), ja3s.as_str()),
            ((Some(23), Some(23)), 772, "771,4866,43-51")
        );
        let got = (ch1.key_share_groups, ch2.key_share_groups);
        assert_eq!(got, (vec![21], vec![23]));

        // Every proper prefix gives None, except the one ending right after the
        // compression methods (a hello without extensions); no byte flip panics.
        for body in chs.into_iter().chain([kyber]) {
            let mut r = Reader(&body);
            let _ = (r.take(34), r.vec8(), r.vec16(), r.vec8());
            let bare = body.len() - r.0.len();
            for n in 0..body.len() {
                assert_eq!(ClientHelloFacts::parse(&body[..n]).is_some(), n == bare);
                let mut flipped = body.clone();
                flipped[n] ^= 0xff;
                let _ = ClientHelloFacts::parse(&flipped);
                let _ = ServerHelloFacts::parse(&flipped);
                let _ = ServerHelloFacts::parse(&body[..n]);
            }
        }
    }

    /// ClientHellos and ServerHellos of one TCP connection.
    type Conn = (Vec<ClientHelloFacts>, Vec<ServerHelloFacts>);

    /// The hellos of each TCP connection in a capture (read with the crate's
    /// own source and decoder), keyed by "client-ip:port server-ip:port".
    /// Segments are joined in sequence order; out-of-order ones are dropped.
    fn hellos(path: &Path) -> HashMap<String, Conn> {
        let (mut dirs, mut out) = (HashMap::new(), HashMap::<String, Conn>::new());
        let mut src = FileSource::open(path).unwrap();
        while let Ok(Some(p)) = src.next_packet() {
            if let Decoded::Tcp(seg, _) = decode(&p) {
                let (syn, len) = (u32::from(seg.flags.syn()), seg.payload.len() as u32);
                let dir = dirs.entry((seg.src, seg.dst)).or_insert((seg.seq, vec![]));
                if syn == 1 || dir.0 == seg.seq {
                    dir.0 = seg.seq.wrapping_add(syn + len);
                    dir.1.extend_from_slice(seg.payload);
                }
            }
        }
        for ((src, dst), (_, stream)) in dirs {
            let (mut s, mut hs) = (&stream[..], Vec::new());
            while let Some(&[ty @ 20..=23, 3, _, l1, l2]) = s.get(..5) {
                let end = 5 + usize::from(u16::from_be_bytes([l1, l2]));
                let Some(fragment) = s.get(5..end) else { break };
                hs.extend(fragment.iter().filter(|_| ty == 22));
                s = &s[end..];
            }
            let mut h = &hs[..];
            while let Some(&[ty, l1, l2, l3]) = h.get(..4) {
                let end = 4 + (usize::from(l1) << 16 | usize::from(l2) << 8 | usize::from(l3));
                let Some(body) = h.get(4..end) else { break };
                let [c, s] = [src, dst].map(|a| format!("{}:{}", a.ip(), a.port()));
                let [c, s] = if ty == 1 { [c, s] } else { [s, c] };
                let conn = out.entry(format!("{c} {s}")).or_default();
                match ty {
                    1 => conn.0.extend(ClientHelloFacts::parse(body)),
                    2 => conn.1.extend(ServerHelloFacts::parse(body)),
                    _ => {}
                }
                h = &h[end..];
            }
        }
        out
    }

    /// Our value for a peer's field ("JA4_r.2": JA4_r of the second ClientHello).
    fn ours(conn: &Conn, field: &str) -> Option<String> {
        let (name, n) = field.split_once('.').unwrap_or((field, "1"));
        let (ch, sh) = (conn.0.get(n.parse::<usize>().ok()? - 1), conn.1.first());
        Some(match name.to_ascii_lowercase().as_str() {
            "ja4" => ch?.ja4(),
            "ja4_r" => ch?.ja4_r(),
            "ja3" => ch?.ja3(),
            "ja3string" => ch?.ja3_string(),
            "ja3s" => sh?.ja3s(),
            "srcsessionid" => ch?.session_id.iter().map(|b| format!("{b:02x}")).collect(),
            "dstsessionid" => sh?.session_id.iter().map(|b| format!("{b:02x}")).collect(),
            // JA4S is FoxIO-licensed: only the ServerHello facts in JA4S_r are compared.
            "ja4s_r" => {
                let (v, c, e) = (sh?.version(), sh?.cipher, hex_list(&sh?.extensions));
                format!("t{}_{c:04x}_{e}", ja4_version(v))
            }
            _ => return None,
        })
    }

    /// Every JA3/JA4 (and JA3S, session id, JA4S_r fact) a peer expects for a
    /// TCP connection of the corpus must be ours, except two known deviations
    /// where we follow the JA4 spec: FoxIO's tools print "99" for the
    /// non-ASCII ALPN 0xbaad (spec: "bd"); nDPI 3b1286ab prints the first two
    /// characters of the ALPN value ("ht" for "http/1.1"; spec: "h1").
    #[test]
    fn reference_fingerprints_from_peers() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
        let dir = std::env::var_os("HANDSHAKES_CORPUS").map_or(root, PathBuf::from);
        if !dir.join("expected.json").is_file() {
            let required =
                std::env::var("HANDSHAKES_REQUIRE_ALL").is_ok_and(|v| !["", "0"].contains(&&*v));
            assert!(!required, "peer corpus missing: {}", dir.display());
            return eprintln!("!!! SKIPPED: no peer corpus: JA3/JA4 unchecked");
        }
        let json = |p: PathBuf| -> Value {
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
        };
        let mut captures: HashMap<PathBuf, HashMap<String, Conn>> = HashMap::new();
        let (mut counts, mut failures) = (BTreeMap::<String, usize>::new(), vec![]);
        // key: "client server", or " " for any connection of the capture
        let mut check = |source: &str, pcap: &PathBuf, key: &str, field: &str, value: &str| {
            let conns = captures.entry(pcap.clone());
            let conns = conns.or_insert_with(|| hellos(pcap));
            let (c, s) = key.split_once(' ').unwrap();
            let any = conns.values().filter(|_| key == " ");
            let flipped = conns.get(&format!("{s} {c}")); // nDPI may list the server first
            let pool = conns.get(key).into_iter().chain(flipped).chain(any);
            let found: Vec<String> = pool.filter_map(|c| ours(c, field)).collect();
            let mut want = value.to_owned(); // JA4S_r: only the ServerHello facts in it
            if let Some((a, rest)) = value.split_once('_').filter(|_| field == "JA4S_r") {
                want = format!("{}_{rest}", &a[..3]);
            }
            let alpn = (value.get(8..10), found.first().and_then(|o| o.get(8..10)));
            if let (Some("99"), Some(m @ "bd")) | (Some("ht"), Some(m @ "h1")) = alpn {
                want = format!("{}{m}{}", &value[..8], &value[10..]);
            }
            *counts.entry(source.to_owned()).or_default() += 1;
            if !found.contains(&want) {
                failures.push(format!("{pcap:?} {key} {field}: {found:?} != {want}"));
            }
        };
        // expected.json: FoxIO snapshots, Arkime sessions, nDPI flows, Suricata checks.
        for e in json(dir.join("expected.json")).as_array().unwrap() {
            let (pcap, peer) = (dir.join(e["file"].as_str().unwrap()), &e["facts"]["peer"]);
            let source = peer["kind"].as_str().unwrap_or_default();
            let source = source.split(' ').next().unwrap();
            let lists = ["streams", "sessions", "flows", "checks"].map(|k| peer[k].as_array());
            for it in lists.into_iter().flatten().flatten() {
                let at = |k: [&str; 3]| k.iter().find_map(|k| it[k].as_str()).unwrap_or_default();
                let (c, s) = (at(["client", "src", "a"]), at(["server", "dst", "b"]));
                let key = format!("{c} {s}").replace(['[', ']'], "");
                let (tls, m) = (&it["tls"], &it["match"]);
                let ids = ["srcSessionId", "dstSessionId"].map(|f| (f, &tls[f][0]));
                let tls = ["ja4", "ja3", "ja3s"].map(|f| (f, &tls[f][0]));
                let checks = [("ja4", &m["tls.ja4"]), ("ja3string", &m["tls.ja3.string"])];
                let direct = [("ja4", &it["ja4"]), ("ja3s", &it["ja3s"])];
                let all = direct.into_iter().chain(tls).chain(ids).chain(checks);
                for (field, v) in all.filter_map(|(f, v)| Some((f, v.as_str()?))) {
                    if !v.starts_with('q') {
                        check(source, &pcap, &key, field, v); // "q…" is QUIC, not TCP
                    }
                }
            }
        }
        // FoxIO's Python testdata: raw forms, second ClientHellos, JA4S_r.
        for file in ["tls-sni", "tls-handshake", "tls-non-ascii-alpn"] {
            let pcap = dir.join(format!("ja4/pcap/{file}.pcapng"));
            let data = json(dir.join(format!("ja4/python/test/testdata/{file}.pcapng.json")));
            for s in data.as_array().unwrap() {
                let (c, cp, sv, sp) = (&s["src"], &s["srcport"], &s["dst"], &s["dstport"]);
                let key = format!("{c}:{cp} {sv}:{sp}").replace('"', "");
                for (field, v) in s.as_object().unwrap() {
                    // JA4S, JA4X, JA4L, …: not ours.
                    if matches!(field.split('.').next(), Some("JA4" | "JA4_r" | "JA4S_r")) {
                        check("FoxIO-Python", &pcap, &key, field, v.as_str().unwrap());
                    }
                }
            }
        }
        eprintln!("reference values compared per source: {counts:?}");
        assert!(failures.is_empty(), "{failures:#?}");
        let counts: Vec<usize> = counts.into_values().collect();
        assert_eq!(
            counts,
            [121, 317, 35, 18, 2],
            "FoxIO, Python, Arkime, nDPI, Suricata"
        );
    }
}
