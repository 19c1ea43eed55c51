//! A live capture's QUIC connections whose client writes its key log as
//! it goes (browsers, curl, aioquic: a line as each secret is derived):
//! the secrets looked up again at the connection's later packets, and the
//! Handshake and 1-RTT packets that came before their keys were written
//! held (a few, for a short while) and read once they come, in the order
//! they came. On loopback the server's whole flight and its first 1-RTT
//! packets are on the wire before the client has logged its keys; without
//! holding them the EncryptedExtensions (ALPN), the certificate and the
//! QPACK encoder stream's first instructions would be lost.
//!
//! Owns the held packets and their bounds. Does not open packets itself
//! (`handshake`, `app`) or decide which connection a packet is of (`mod`).

use super::{Conn, Handshake, QuicTable};
use crate::analyze::tls::keylog::KeyLog;
use crate::decode::long_packet;
use crate::time::Timestamp;

/// How often a connection still without its secrets looks in a followed
/// key log again, once it has looked at [`LOOK_AT_ONCE`] packets in a row:
/// a lookup reads the log's size (and what was appended). A handshake on
/// loopback is over in milliseconds, its client's lines written between
/// two of its packets.
const LOOK_AGAIN: i64 = 100_000_000;
const LOOK_AT_ONCE: u32 = 32;
/// Packets held per connection, and how long (capture time, from the
/// first held): a client that logs its keys does so within milliseconds
/// of the packets they open; one that never does is read as without a key
/// log once this is over.
const MAX_HELD: usize = 64;
const HOLD_FOR: i64 = 2_000_000_000;
/// Bytes held over all connections.
const HELD_BUDGET: usize = 4 << 20;

/// A packet kept until its keys are logged.
#[derive(Debug)]
pub(super) struct Held {
    side: usize,
    /// A long-header Handshake packet, else a short-header one (to the
    /// end of its datagram).
    handshake: bool,
    at: Timestamp,
    bytes: Box<[u8]>,
}

impl QuicTable {
    /// Keeps `bytes`, a packet of `conn` from `side` that no key opens yet,
    /// if its keys may still be logged and the bounds allow; whether kept.
    pub(super) fn hold(
        &mut self,
        conn: &mut Conn,
        side: usize,
        handshake: bool,
        bytes: &[u8],
        ts: Timestamp,
    ) -> bool {
        let follows = self.keylog.as_ref().is_some_and(|k| k.follows());
        let fresh = conn
            .held
            .first()
            .is_none_or(|h| ts.0.saturating_sub(h.at.0) < HOLD_FOR);
        let room = conn.held.len() < MAX_HELD && self.waiting + bytes.len() <= HELD_BUDGET;
        if !(follows && conn.cipher.is_some() && fresh && room) {
            return false;
        }
        self.waiting += bytes.len();
        conn.held.push(Held {
            side,
            handshake,
            at: ts,
            bytes: bytes.into(),
        });
        true
    }

    /// Before `conn`'s packet at `ts` is read: the secrets its client has
    /// logged since, and the packets held for them read now. Held packets
    /// whose keys did not come in time are read as without them.
    pub(super) fn follow(&mut self, conn: &mut Conn, ts: Timestamp) {
        let added = follow_secrets(self.keylog.as_deref(), conn, ts, false);
        let stale = conn
            .held
            .first()
            .is_some_and(|h| ts.0.saturating_sub(h.at.0) >= HOLD_FOR);
        if added || stale {
            self.replay(conn, !stale);
        }
    }

    /// As `conn` ends: a last look for its secrets, and every packet still
    /// held read with what there is.
    pub(super) fn release(&mut self, conn: &mut Conn) {
        if conn.held.is_empty() {
            return;
        }
        follow_secrets(self.keylog.as_deref(), conn, conn.last, true);
        self.replay(conn, false);
    }

    /// Reads `conn`'s held packets again, in the order they came; those
    /// still without keys are held again if `hold`.
    fn replay(&mut self, conn: &mut Conn, hold: bool) {
        let held = std::mem::take(&mut conn.held);
        for h in &held {
            self.waiting = self.waiting.saturating_sub(h.bytes.len());
        }
        for h in held {
            if !h.handshake {
                self.one_rtt(conn, h.side, &h.bytes, h.at, hold);
            } else if let Some((packet, _)) = long_packet(&h.bytes) {
                self.handshake_in(conn, &packet, h.side, h.at, hold);
            }
        }
    }
}

/// With a followed key log (a live capture), the secrets a client had not
/// yet written when its ServerHello came (it writes each as it derives
/// it): looked up again by each later packet of the connection until both
/// sides' keys are there — the first [`LOOK_AT_ONCE`], then at most every
/// [`LOOK_AGAIN`] of capture time (or now, if `now`). Whether it found
/// keys for a side or packet space that had none.
fn follow_secrets(keylog: Option<&KeyLog>, conn: &mut Conn, ts: Timestamp, now: bool) -> bool {
    let (Some(keylog), Some(cipher)) = (keylog.filter(|k| k.follows()), conn.cipher) else {
        return false;
    };
    let before = known(conn);
    let waiting = !now && conn.next_lookup.is_some_and(|t| ts < t);
    if conn.app.is_none() || before.iter().all(|&k| k) || waiting {
        return false;
    }
    conn.lookups += 1;
    if conn.lookups >= LOOK_AT_ONCE {
        conn.next_lookup = Some(Timestamp(ts.0.saturating_add(LOOK_AGAIN)));
    }
    let Some(secrets) = conn.random.and_then(|r| keylog.get(&r)) else {
        return false;
    };
    let Some(app) = conn.app.as_mut() else {
        return false;
    };
    app.add_secrets(&secrets);
    if !(before[2] && before[3]) {
        // Keys the first lookup did not have; what was opened is kept.
        match conn.sealed.as_mut() {
            Some(sealed) => sealed.add_secrets(conn.version, cipher, &secrets),
            None => conn.sealed = Handshake::new(conn.version, cipher, &secrets).map(Box::new),
        }
    }
    known(conn) != before
}

/// Which of `conn`'s keys are known: 1-RTT and Handshake, by side.
fn known(conn: &Conn) -> [bool; 4] {
    let app = |side| conn.app.as_ref().is_some_and(|a| a.opens(side));
    let sealed = |side| conn.sealed.as_ref().is_some_and(|s| s.opens(side));
    [app(0), app(1), sealed(0), sealed(1)]
}
