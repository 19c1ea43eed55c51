//! The TLS section of a connection record (`connections[].tls`): the
//! handshake's steps, alerts, the server's certificate, early data and
//! decryption with a key log. Part of the record contract, kept apart so
//! each file stays short.
//!
//! Does not compute anything beyond naming the protocol a record shows.

use std::sync::Arc;

use serde::Serialize;

use super::{Instant, Name, Side};

/// One step of a TLS handshake, as seen on the wire.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TlsEvent {
    /// A handshake message's name (`client_hello`, `server_hello`,
    /// `certificate`, `finished`, …), `change_cipher_spec`, `alert`,
    /// `encrypted_record` (the first per side) or an SSLv2 hello; the list
    /// is in docs/json.md (and `analyze::tls::steps::StepName`).
    pub name: &'static str,
    pub side: Side,
    /// Capture time of the packet that completed the message.
    pub time: Instant,
    /// Seconds since the connection's first SYN (or first packet).
    pub since_start: f64,
    /// An alert's level and description; `None` for other steps.
    pub detail: Option<String>,
}

/// A TLS alert.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TlsAlert {
    pub side: Side,
    /// `warning`, `fatal`, or `encrypted` when only the record was visible.
    pub level: Name,
    /// RFC 8446 name (`handshake_failure`, `protocol_version`, …) or the number.
    pub description: Name,
    pub time: Instant,
}

/// A server's certificate chain, as its Certificate message carried it
/// (in the clear before TLS 1.3; with a key log in TLS 1.3 and QUIC).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CertificateInfo {
    /// Certificates in the chain, and their DER bytes together.
    pub chain: u64,
    pub bytes: u64,
    /// Of the first certificate (the server's own): the subject's and the
    /// issuer's common name (or whole name without one), its
    /// subjectAltName DNS names (at most 8), the end of its validity (RFC
    /// 3339, UTC), its public key (`RSA 2048`, `EC 256`, `Ed25519`), and
    /// whether it names itself as issuer; null (empty) when it does not
    /// parse as X.509.
    pub subject: Option<String>,
    pub issuer: Option<String>,
    pub dns_names: Vec<String>,
    pub not_after: Option<String>,
    pub key: Option<String>,
    pub self_signed: bool,
    /// How the server compressed the message (RFC 8879): `brotli`,
    /// `zlib` or `zstd`; null when it was sent as it is.
    pub compression: Option<&'static str>,
}

/// 0-RTT early data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EarlyData {
    /// The ClientHello carried the early_data extension.
    pub offered: bool,
    /// Whether the server accepted it: only visible with keys, so `null` for TLS 1.3.
    pub accepted: Option<bool>,
}

/// How a TLS handshake ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsOutcome {
    /// The handshake completed (see docs/tls.md for the rule).
    Complete,
    /// An alert ended it before completion.
    Failed,
    /// The capture (or the connection) ended before completion.
    Incomplete,
    /// Only encrypted records were seen: the handshake happened before the capture.
    Midstream,
    /// It looked like TLS at first, then the bytes stopped making sense.
    NotTls,
}

/// How far a key log (`--keylog`) opened a connection's records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecryptionOutcome {
    /// Every sealed record opened.
    Complete,
    /// Some did not (a gap, wrong or missing secrets, 0-RTT data,
    /// renegotiation): what was read from the plaintext is a lower bound.
    Partial,
    /// The key log has no secrets for this ClientHello's random.
    NoSecrets,
    /// The cipher suite is not one this tool opens (neither AEAD nor
    /// AES-CBC: RC4, 3DES, …), or the version is SSL 3.0.
    Unsupported,
}

impl DecryptionOutcome {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecryptionOutcome::Complete => "complete",
            DecryptionOutcome::Partial => "partial",
            DecryptionOutcome::NoSecrets => "no_secrets",
            DecryptionOutcome::Unsupported => "unsupported",
        }
    }
}

/// What a key log opened of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Decryption {
    pub outcome: DecryptionOutcome,
    /// Sealed records opened, both directions.
    pub records_opened: u64,
    /// Sealed records that would not open, both directions.
    pub records_failed: u64,
}

/// The TLS handshake of one connection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TlsInfo {
    /// Negotiated version (`TLS 1.3` via supported_versions); null without a ServerHello.
    pub version: Option<Name>,
    /// The highest version the client offered.
    pub offered_version: Option<Name>,
    /// Negotiated cipher suite (IANA name).
    pub cipher: Option<Name>,
    /// Server name from the ClientHello.
    pub sni: Option<String>,
    /// ALPN protocol selected by the server (visible in TLS ≤ 1.2 only).
    pub alpn: Option<String>,
    /// ALPN protocols offered by the client.
    pub alpn_offered: Vec<String>,
    /// TLS 1.3 without keys: the protocol the length of the server's
    /// EncryptedExtensions told it chose (docs/tls.md); null when `alpn` is
    /// known, when the length told nothing, or that no protocol was chosen.
    pub alpn_by_size: Option<String>,
    /// An abbreviated (resumed) handshake.
    pub resumed: bool,
    /// How it was resumed: `session_id`, `ticket` or `psk`.
    pub resumption: Option<Name>,
    /// The session the ClientHello offered to resume, the same names
    /// (`session_id` only from a client that does not offer TLS 1.3,
    /// whose legacy session id is random); null when it offered none.
    pub resumption_offered: Option<Name>,
    /// The server gave the client a session to resume later: a
    /// NewSessionTicket (in TLS 1.3 read with a key log), or in TLS ≤ 1.2
    /// a ServerHello's session id; false where none came (TLS 1.3: with
    /// every record opened); null where it is not known (TLS 1.3 without
    /// keys, no ServerHello).
    pub session_issued: Option<bool>,
    /// The server answered with a HelloRetryRequest.
    pub hello_retry: bool,
    pub early_data: EarlyData,
    /// The server asked for a client certificate (null when the request is encrypted, TLS 1.3).
    pub client_certificate_requested: Option<bool>,
    /// The server's certificate chain; null when its Certificate message
    /// was not read (sealed in TLS 1.3 without a key log, a resumed
    /// session, longer than 64 KiB).
    pub certificate: Option<CertificateInfo>,
    pub outcome: TlsOutcome,
    /// The first alert seen, if any.
    pub alert: Option<TlsAlert>,
    pub client_hello: Option<Instant>,
    pub server_hello: Option<Instant>,
    /// When the handshake completed.
    pub complete: Option<Instant>,
    /// ClientHello → ServerHello, seconds.
    pub hello_to_hello: Option<f64>,
    /// ClientHello → handshake complete, seconds.
    pub handshake: Option<f64>,
    /// SYN → the client's first application-data record, seconds.
    pub syn_to_app_data: Option<f64>,
    /// JA4 (client), JA3 and JA3S fingerprints, shared (`Arc`) with the
    /// analysis's memo of recent hellos: a capture's thousands of
    /// connections from one client hold one copy, and a record costs no
    /// allocation for them.
    pub ja4: Option<Arc<str>>,
    pub ja3: Option<Arc<str>>,
    pub ja3s: Option<Arc<str>>,
    /// Every handshake step with its time (at most 64).
    pub events: Vec<TlsEvent>,
    /// Stream bytes missing from the capture in this connection.
    pub gap_bytes: u64,
    /// With `--keylog`: how far its secrets opened the records; null
    /// without a key log, or before a ServerHello.
    pub decryption: Option<Decryption>,
}

impl TlsInfo {
    /// The ALPN protocol selected, or told by size (marked `(by size)`).
    pub fn alpn_chosen(&self) -> Option<String> {
        match (&self.alpn, &self.alpn_by_size) {
            (Some(a), _) => Some(a.clone()),
            (None, Some(a)) => Some(format!("{a} (by size)")),
            (None, None) => None,
        }
    }

    /// As the reports show it: chosen, or else the offered in parentheses.
    pub fn alpn_shown(&self) -> Option<String> {
        let offered = &self.alpn_offered;
        let listed = || (!offered.is_empty()).then(|| format!("({})", offered.join(",")));
        self.alpn_chosen().or_else(listed)
    }
}
