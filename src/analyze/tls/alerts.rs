//! An alert as the analyzer saw it, kept as its two bytes until a record
//! is made, and the names of TLS alert levels and descriptions (RFC 8446
//! §6, RFC 5246 §7.2), unknown numbers kept as numbers.
//!
//! Does not decide anything about the handshake.

use crate::record::Name;

/// An alert: its level and description bytes, or `None` when only the
/// encrypted record was visible. Three bytes: a closed connection keeps
/// it while it lingers, and the names are made with its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alert(pub Option<[u8; 2]>);

impl Alert {
    /// The record's level and description: names, numbers when unknown,
    /// `encrypted` twice when the alert was.
    pub fn names(self) -> (Name, Name) {
        match self.0 {
            Some([level, code]) => (alert_level(level), alert_description(code)),
            None => (Name::Borrowed("encrypted"), Name::Borrowed("encrypted")),
        }
    }

    /// The detail of its event: level and description.
    pub fn detail(self) -> String {
        let (level, description) = self.names();
        format!("{level} {description}")
    }
}

fn alert_level(level: u8) -> Name {
    match level {
        1 => Name::Borrowed("warning"),
        2 => Name::Borrowed("fatal"),
        n => n.to_string().into(),
    }
}

fn alert_description(code: u8) -> Name {
    let name = match code {
        0 => "close_notify",
        10 => "unexpected_message",
        20 => "bad_record_mac",
        21 => "decryption_failed",
        22 => "record_overflow",
        30 => "decompression_failure",
        40 => "handshake_failure",
        41 => "no_certificate",
        42 => "bad_certificate",
        43 => "unsupported_certificate",
        44 => "certificate_revoked",
        45 => "certificate_expired",
        46 => "certificate_unknown",
        47 => "illegal_parameter",
        48 => "unknown_ca",
        49 => "access_denied",
        50 => "decode_error",
        51 => "decrypt_error",
        60 => "export_restriction",
        70 => "protocol_version",
        71 => "insufficient_security",
        80 => "internal_error",
        86 => "inappropriate_fallback",
        90 => "user_canceled",
        100 => "no_renegotiation",
        109 => "missing_extension",
        110 => "unsupported_extension",
        111 => "certificate_unobtainable",
        112 => "unrecognized_name",
        113 => "bad_certificate_status_response",
        114 => "bad_certificate_hash_value",
        115 => "unknown_psk_identity",
        116 => "certificate_required",
        120 => "no_application_protocol",
        n => return n.to_string().into(),
    };
    Name::Borrowed(name)
}
