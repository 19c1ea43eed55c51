//! The TLS handshake a QUIC connection's Initial and Handshake packets
//! carry, read into its record: the Initial packets opened with the keys
//! their IDs give and their CRYPTO frames gathered into the two hellos;
//! with a key log, the Handshake packets' messages (`handshake`) and, at
//! the ServerHello, what opens the rest (`app`).
//!
//! Owns nothing of its own: these are the connection table's steps for
//! those packets. Does not find connections or retire them (`mod`).

use super::app::{App, Closed};
use super::handshake::{self, Handshake};
use super::{initial, side_of, Conn, QuicTable, CRYPTO_BUDGET};
use crate::analyze::tls::hello::{self, ClientHelloFacts, ServerHelloFacts};
use crate::analyze::tls::steps::StepName;
use crate::decode::{long_packet, LongPacket};
use crate::record::Side;
use crate::time::Timestamp;

impl QuicTable {
    /// Opens an Initial packet of `conn` from `side` and reads its frames.
    pub(super) fn initial(
        &mut self,
        conn: &mut Conn,
        packet: &LongPacket<'_>,
        side: usize,
        ts: Timestamp,
    ) {
        if conn.hellos_over() {
            return;
        }
        if conn.keys.is_none() {
            conn.keys = initial::keys(packet.version, &conn.key_id).map(Box::new);
        }
        let Some(keys) = &conn.keys else {
            conn.handshake.packets.undecryptable += 1;
            return;
        };
        let (Some(keys), Some(largest)) = (keys.get(side), conn.largest.get_mut(side)) else {
            return;
        };
        let Some((pn, plain)) = initial::open(keys, packet, *largest, &mut self.scratch) else {
            conn.handshake.packets.undecryptable += 1;
            return;
        };
        *largest = Some(largest.map_or(pn, |l| l.max(pn)));
        let mut hello = None;
        for frame in initial::frames(plain) {
            match frame {
                initial::Frame::Crypto { offset, data } => {
                    let Some(stream) = conn.streams.get_mut(side) else {
                        break;
                    };
                    let before = stream.held();
                    let budget = CRYPTO_BUDGET.saturating_sub(self.held);
                    if let Some(m) = stream.add(offset, data, budget) {
                        hello = Some(m);
                    }
                    self.held = (self.held + stream.held()).saturating_sub(before);
                }
                initial::Frame::Close { error } => {
                    conn.handshake.close_error.get_or_insert(error);
                }
            }
        }
        if let Some(message) = hello {
            self.hello(conn, side, &message, ts);
        }
    }

    /// Opens a Handshake packet of `conn` from `side` with the key log's
    /// secrets and notes the messages it completed; whether it opened.
    pub(super) fn handshake_packet(
        &mut self,
        conn: &mut Conn,
        packet: &LongPacket<'_>,
        side: usize,
        ts: Timestamp,
    ) -> bool {
        let Some(sealed) = conn.sealed.as_mut() else {
            return false;
        };
        let opened = sealed.opened;
        let before = sealed.held();
        let budget = CRYPTO_BUDGET.saturating_sub(self.held);
        let messages = sealed.packet(side, packet, budget, &mut self.scratch);
        self.held = (self.held + sealed.held()).saturating_sub(before);
        if let (Some(error), None) = (sealed.close.take(), &conn.close) {
            conn.close = Some(Closed {
                side,
                at: ts,
                application: false,
                error,
                reason: String::new(),
            });
        }
        if let (Some(ms), None) = (sealed.idle_timeout_ms, conn.idle_ms[1]) {
            conn.idle_timeout(1, ms);
        }
        for m in messages {
            conn.steps
                .push(StepName::handshake(m.kind), side_of(side), ts, None);
            if side == 0 && m.kind == handshake::FINISHED && conn.complete.is_none() {
                conn.handshake.client_handshake = Some(self.instant(ts));
                conn.complete = Some(ts);
            }
        }
        conn.sealed.as_ref().is_some_and(|s| s.opened > opened)
    }

    /// Reads the first handshake message of `side`'s stream.
    fn hello(&mut self, conn: &mut Conn, side: usize, message: &[u8], ts: Timestamp) {
        let (Some(&ty), Some(body)) = (message.first(), message.get(4..)) else {
            return;
        };
        let tls = &mut conn.tls;
        match (side, ty) {
            (0, 1) => {
                let Some(ch) = ClientHelloFacts::parse(body) else {
                    return;
                };
                conn.random = body.get(2..34).and_then(|r| r.try_into().ok());
                conn.steps
                    .push(StepName::ClientHello, Side::Client, ts, None);
                tls.client_hello = Some(self.instant(ts));
                conn.hellos[0] = Some(ts);
                tls.sni = ch.sni.clone();
                tls.alpn_offered = ch.alpn.clone();
                tls.psk_offered = ch.psk;
                tls.early_data_offered = ch.early_data;
                let ja4 = ch.ja4();
                tls.ja4 = Some(format!("q{}", ja4.get(1..).unwrap_or_default()));
                if let Some(ms) = ch.quic_idle_timeout_ms {
                    conn.idle_timeout(0, ms);
                }
            }
            (1, 2) => {
                let Some(sh) = ServerHelloFacts::parse(body) else {
                    return;
                };
                conn.steps
                    .push(StepName::ServerHello, Side::Server, ts, None);
                tls.server_hello = Some(self.instant(ts));
                conn.hellos[1] = Some(ts);
                tls.version = Some(hello::version_name(sh.version()));
                tls.cipher = Some(hello::cipher_name(sh.cipher));
                tls.resumed = Some(sh.psk);
                if let Some(keylog) = &self.keylog {
                    conn.cipher = Some(sh.cipher);
                    let secrets = conn.random.and_then(|r| keylog.get(&r));
                    let sealed = secrets
                        .as_ref()
                        .and_then(|s| Handshake::new(conn.version, sh.cipher, s));
                    conn.sealed = sealed.map(Box::new);
                    let keep = self.keep;
                    let mut app = Box::new(App::new(conn.version, sh.cipher, secrets, keep));
                    for (bytes, at) in std::mem::take(&mut conn.early) {
                        if let Some((packet, _)) = long_packet(&bytes) {
                            app.zero_rtt(&packet, at, &mut self.scratch);
                        }
                    }
                    conn.app = Some(app);
                }
            }
            _ => {}
        }
    }
}
