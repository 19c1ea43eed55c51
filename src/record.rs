//! The records every analysis produces and every report consumes: the one
//! contract between the two halves of the program. Field names here are the
//! JSON field names documented in docs/json.md; later stages add fields and
//! never rename them.
//!
//! Does not compute anything: no logic beyond naming and serialising.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;

/// A name that is nearly always one of a fixed set (a TLS version, a
/// cipher suite, an alert, a TCP state) and is then borrowed, not
/// allocated; one made at run time (an unknown number) is owned. It
/// serialises as the string it holds.
pub type Name = Cow<'static, str>;

/// Which end of a connection: the client opened it (sent the first SYN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// Something wrong with the input that was counted instead of crashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnomalyKind {
    /// The frame ended inside the link-layer header.
    TruncatedLink,
    /// The frame ended inside the IP header.
    TruncatedIp,
    /// The IP header is impossible (bad version, IHL < 5, bad lengths).
    MalformedIp,
    /// The frame ended inside the TCP header.
    TruncatedTcp,
    /// The TCP header is impossible (data offset < 5).
    MalformedTcp,
    /// TCP payload cut by the capture's snap length.
    SnaplenCut,
    /// An IPv4 fragment carrying TCP (not reassembled).
    Ipv4Fragment,
    /// An IPv6 fragment carrying TCP (not reassembled).
    Ipv6Fragment,
    /// A tunnel header (GRE, VXLAN, Geneve, ERSPAN) cut short or
    /// impossible, or tunnels nested deeper than four.
    MalformedTunnel,
    /// A frame of a link type we do not decode.
    UnsupportedLinkType,
    /// A pcapng packet naming an interface that was never described.
    UnknownInterface,
    /// A packet's timestamp is earlier than the latest one seen before it.
    TimestampBackwards,
    /// A TCP segment with SYN and RST, or SYN and FIN, together.
    InvalidTcpFlags,
    /// Retransmitted TCP payload that differed from the first copy.
    RetransmissionConflict,
    /// Stream bytes the capture never had (loss, snap length), seen by reassembly.
    StreamGap,
    /// The out-of-order buffer of a direction hit its cap.
    StreamBufferFull,
    /// A TLS record or handshake message that cannot be right (length beyond the maximum, …).
    MalformedTls,
    /// A connection finalised early to keep the table under `--max-connections`.
    EvictedConnection,
    /// A packet (not a SYN) for a connection already closed and reported,
    /// such as a FIN retransmitted long after the close.
    LatePacket,
}

impl AnomalyKind {
    /// The stable name used in JSON and the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::TruncatedLink => "truncated_link",
            AnomalyKind::TruncatedIp => "truncated_ip",
            AnomalyKind::MalformedIp => "malformed_ip",
            AnomalyKind::TruncatedTcp => "truncated_tcp",
            AnomalyKind::MalformedTcp => "malformed_tcp",
            AnomalyKind::SnaplenCut => "snaplen_cut",
            AnomalyKind::Ipv4Fragment => "ipv4_fragment",
            AnomalyKind::Ipv6Fragment => "ipv6_fragment",
            AnomalyKind::MalformedTunnel => "malformed_tunnel",
            AnomalyKind::UnsupportedLinkType => "unsupported_link_type",
            AnomalyKind::UnknownInterface => "unknown_interface",
            AnomalyKind::TimestampBackwards => "timestamp_backwards",
            AnomalyKind::InvalidTcpFlags => "invalid_tcp_flags",
            AnomalyKind::LatePacket => "late_packet",
            AnomalyKind::EvictedConnection => "evicted_connection",
            AnomalyKind::RetransmissionConflict => "retransmission_conflict",
            AnomalyKind::StreamGap => "stream_gap",
            AnomalyKind::StreamBufferFull => "stream_buffer_full",
            AnomalyKind::MalformedTls => "malformed_tls",
        }
    }
}

/// Counts per anomaly kind, serialised as `{"kind": count}` in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Anomalies(pub BTreeMap<AnomalyKind, u64>);

impl Anomalies {
    pub fn add(&mut self, kind: AnomalyKind, n: u64) {
        if n > 0 {
            *self.0.entry(kind).or_insert(0) += n;
        }
    }

    pub fn merge(&mut self, other: &Anomalies) {
        for (&k, &n) in &other.0 {
            self.add(k, n);
        }
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Anomalies {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k.as_str(), v)))
    }
}

/// A pair of per-direction counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PerSide {
    pub client: u64,
    pub server: u64,
}

impl PerSide {
    pub fn get_mut(&mut self, side: Side) -> &mut u64 {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    pub fn total(&self) -> u64 {
        self.client.saturating_add(self.server)
    }
}

/// An instant, both absolute and relative to the start of the capture.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Instant {
    /// Seconds since the Unix epoch.
    pub ts: f64,
    /// Seconds since the first packet of the capture.
    pub at: f64,
}

/// How the client end was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientBy {
    /// Sender of the first SYN without ACK.
    Syn,
    /// Receiver of the SYN-ACK (the SYN itself was not captured).
    SynAck,
    /// No handshake packet seen: the endpoint with the higher port, or the
    /// sender of the first packet when the ports are equal.
    Guess,
}

/// The TCP handshake, as far as the capture shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpHandshake {
    /// First SYN from the client.
    pub syn: Option<Instant>,
    /// SYNs sent again with the same initial sequence number.
    pub syn_retransmissions: u32,
    /// First SYN-ACK from the server.
    pub synack: Option<Instant>,
    pub synack_retransmissions: u32,
    /// The client's first ACK of the SYN-ACK (completes the handshake).
    pub ack: Option<Instant>,
    /// SYN → SYN-ACK, seconds.
    pub syn_to_synack: Option<f64>,
    /// SYN-ACK → ACK, seconds.
    pub synack_to_ack: Option<f64>,
    /// SYN → ACK, seconds: the connect time.
    pub connect: Option<f64>,
    /// SYN, SYN-ACK and ACK all seen.
    pub complete: bool,
}

/// How (and whether) the connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseKind {
    /// A FIN came first (graceful close started by `by`).
    Fin,
    /// An RST came first (abortive close by `by`).
    Rst,
    /// Still open when the capture ended.
    Open,
    /// No packet for longer than the idle timeout.
    Idle,
    /// Dropped from the table to respect `--max-connections`.
    Evicted,
}

impl CloseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseKind::Fin => "fin",
            CloseKind::Rst => "rst",
            CloseKind::Open => "open",
            CloseKind::Idle => "idle",
            CloseKind::Evicted => "evicted",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Close {
    pub kind: CloseKind,
    /// Who sent the first FIN or RST; absent when open.
    pub by: Option<Side>,
    /// When the first FIN or RST was seen; absent when open.
    pub time: Option<Instant>,
    /// FIN seen from both sides.
    pub fin_both: bool,
    /// Seconds from the last byte of the latest response to the first FIN
    /// or RST: how long the connection sat idle before it was closed.
    /// Absent when open, when no response ended before the close, or when
    /// one ended after it (an answer to a client's half-close).
    pub idle: Option<f64>,
    /// Requests that started after the first FIN or RST: a client that
    /// sent a request on a connection the server had closed.
    pub requests_after: u64,
}

/// Everything TCP says about one connection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TcpInfo {
    pub handshake: TcpHandshake,
    /// Packets per direction.
    pub packets: PerSide,
    /// TCP payload bytes per direction (as on the wire, even when the capture cut them).
    pub bytes: PerSide,
    /// Segments whose payload had been seen already, per direction.
    pub retransmissions: PerSide,
    /// Zeek-style connection state: S0, S1, SF, REJ, S2, S3, RSTO, RSTR,
    /// RSTOS0, RSTRH, SH, SHR or OTH.
    pub state: Name,
    /// Zeek-style history: one letter per event kind, upper case for the
    /// client (S syn, H syn-ack, A ack, D data, F fin, R rst, T retransmission,
    /// W zero window, Q SYN with FIN or RST); `^` first when the first
    /// packet came from the server (Zeek's "flipped").
    pub history: String,
}

/// The overlay network a connection was carried in: the innermost tunnel
/// around its packets that names one. Part of the connection's identity:
/// the same 4-tuple in two overlays (two tenants' networks, two mirror
/// sessions) is two connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Overlay {
    pub kind: OverlayKind,
    /// The VXLAN or Geneve VNI (24 bits), the GRE key, or the ERSPAN
    /// session ID (10 bits).
    pub id: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OverlayKind {
    Vxlan,
    Geneve,
    Gre,
    Erspan,
}

impl OverlayKind {
    pub const ALL: [OverlayKind; 4] = [
        OverlayKind::Vxlan,
        OverlayKind::Geneve,
        OverlayKind::Gre,
        OverlayKind::Erspan,
    ];

    /// The JSON name, as people type it too (`--overlay vxlan:4242`).
    pub fn name(self) -> &'static str {
        match self {
            OverlayKind::Vxlan => "vxlan",
            OverlayKind::Geneve => "geneve",
            OverlayKind::Gre => "gre",
            OverlayKind::Erspan => "erspan",
        }
    }
}

impl Overlay {
    /// `kind id`, e.g. `vxlan 4242`, for people.
    pub fn label(self) -> String {
        format!("{} {}", self.kind.name(), self.id)
    }
}

/// One TCP connection, from its first packet to its close.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConnectionRecord {
    /// 1-based, in order of each connection's first packet.
    pub id: u64,
    /// `address:port` of the endpoint that opened the connection.
    pub client: String,
    /// `address:port` of the other endpoint.
    pub server: String,
    /// How the client was decided.
    pub client_by: ClientBy,
    /// The overlay network (VXLAN, Geneve, GRE key, ERSPAN session) the
    /// connection rode in; `null` when its packets were not tunnelled, or
    /// in a tunnel that names no network (IP in IP, GRE without a key).
    pub overlay: Option<Overlay>,
    /// True when the start of the connection was not captured.
    pub partial: bool,
    /// First packet.
    pub start: Instant,
    /// Last packet.
    pub end: Instant,
    /// end − start, seconds.
    pub duration: f64,
    pub tcp: TcpInfo,
    /// The TLS handshake; `null` when the connection carried no TLS.
    pub tls: Option<TlsInfo>,
    /// The HTTP requests on the connection.
    pub http: HttpInfo,
    pub close: Close,
    /// Anomalies seen on this connection's packets.
    pub anomalies: Anomalies,
}

/// The server a client spoke to, as a number: the client's address (not
/// its port), the server's address and port, and the overlay — what a
/// Retry-After speaks for. The same for every record of a run
/// (`DefaultHasher::new` has fixed keys); never written out.
pub fn server_key(client: &str, server: &str, overlay: Option<Overlay>) -> u64 {
    use std::hash::{Hash, Hasher};
    let client = client.rsplit_once(':').map_or(client, |(a, _)| a);
    let mut h = std::hash::DefaultHasher::new();
    client.hash(&mut h);
    server.hash(&mut h);
    overlay.hash(&mut h);
    h.finish()
}

/// An endpoint with the overlay network it is in, if any: `10.0.0.2:443
/// [vxlan 4242]`.
pub fn endpoint_in(endpoint: &str, overlay: Option<Overlay>) -> String {
    match overlay {
        Some(o) => format!("{endpoint} [{}]", o.label()),
        None => endpoint.to_owned(),
    }
}

impl ConnectionRecord {
    /// [`server_key`] of its endpoints.
    pub fn server_key(&self) -> u64 {
        server_key(&self.client, &self.server, self.overlay)
    }

    /// The requests the connection carried: `http.requests` less those
    /// sent after its close (`close.requests_after`), never served, and
    /// those HTTP/2's server refused (`http.http2.refused`).
    pub fn requests_served(&self) -> u64 {
        let refused = self.http.http2.as_ref().map_or(0, |h| h.refused);
        let served = self.http.requests.saturating_sub(self.close.requests_after);
        served.saturating_sub(u64::from(refused))
    }

    /// The name the client asked for, and which it is: its SNI over TLS
    /// (`("SNI", …)`), in cleartext the host its first request named
    /// (`("Host", …)`, as sent); `None` where it named none.
    pub fn asked_name(&self) -> Option<(&'static str, &str)> {
        match &self.tls {
            Some(t) => t.sni.as_deref().map(|s| ("SNI", s)),
            None => self.http.host.as_deref().map(|h| ("Host", h)),
        }
    }
}

impl QuicRecord {
    /// [`server_key`] of its endpoints.
    pub fn server_key(&self) -> u64 {
        server_key(&self.client, &self.server, self.overlay)
    }
}

mod http;
mod missed;
mod quic;
mod summary;
mod tls;
pub use http::*;
pub use missed::*;
pub use quic::*;
pub use summary::*;
pub use tls::*;

#[cfg(test)]
mod tests {
    use super::*;

    /// The names people type and the table shows are the JSON names.
    #[test]
    fn overlay_kind_names_are_the_json_names() {
        for kind in OverlayKind::ALL {
            let json = serde_json::to_value(kind).expect("serialises");
            assert_eq!(json, kind.name());
        }
    }
}
