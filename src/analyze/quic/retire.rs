//! How QUIC connections end in the table: silent after a CONNECTION_CLOSE
//! (read with a key log) or past their idle timeout (the client's
//! max_idle_timeout, or `--idle` when it sent none), pushed out by a
//! newer one when too many are open, or still open at the end;
//! each then folds into the summary's figures and leaves a record for the
//! sink.
//!
//! Does not read packets: `mod.rs` and its helpers do.

use super::*;

/// The least idle timeout followed, whatever the client asks: a peer
/// waits at least three probe timeouts (RFC 9000 §10.1), which on a slow
/// path are seconds.
pub(super) const MIN_IDLE: i64 = 3_000_000_000;
/// Capture time between two looks for idle connections.
const SCAN_EVERY: i64 = 1_000_000_000;

/// Why a connection's record was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    Closed,
    Idle,
    Evicted,
    Open,
}

impl Ended {
    fn name(self) -> &'static str {
        match self {
            Ended::Closed => "closed",
            Ended::Idle => "idle",
            Ended::Evicted => "evicted",
            Ended::Open => "open",
        }
    }
}

impl QuicTable {
    /// Ends, at capture time `now`, the connections silent for their idle
    /// timeout (looked for at most once a second of capture time).
    pub fn expire(&mut self, now: Timestamp) {
        if self.open.is_empty() || self.next_scan.is_some_and(|t| now < t) {
            return;
        }
        self.next_scan = Some(Timestamp(now.0.saturating_add(SCAN_EVERY)));
        let fallback = self.idle_ns;
        let due: Vec<u64> = self
            .open
            .values()
            .filter(|c| {
                // A closed connection drains for three probe timeouts
                // (RFC 9000 §10.2): it is over once that long silent.
                let idle = match c.close {
                    Some(_) => Some(MIN_IDLE),
                    None => c.idle_ns.or(fallback),
                };
                idle.is_some_and(|idle| now.nanos_since(c.last) >= idle)
            })
            .map(|c| c.id)
            .collect();
        for id in due {
            if let Some(conn) = self.open.remove(&id) {
                let ended = match conn.close {
                    Some(_) => Ended::Closed,
                    None => Ended::Idle,
                };
                self.retire(conn, ended);
            }
        }
    }

    /// The records of the connections ended since the last call, in the
    /// order they ended.
    pub fn take_done(&mut self) -> std::vec::Drain<'_, QuicRecord> {
        self.done.drain(..)
    }

    /// Folds a connection into the summary's figures, listing it when it
    /// is among the first, and hands its record over ([`QuicTable::take_done`]).
    pub(super) fn retire(&mut self, mut conn: Box<Conn>, ended: Ended) {
        self.release(&mut conn);
        for s in &conn.streams {
            self.held = self.held.saturating_sub(s.held());
        }
        let sealed = conn.sealed.as_deref();
        self.held = self.held.saturating_sub(sealed.map_or(0, Handshake::held));
        if self.by_endpoints.get(&(conn.client, conn.server)) == Some(&conn.id) {
            self.by_endpoints.remove(&(conn.client, conn.server));
        }
        let Conn {
            id,
            client,
            server,
            overlay,
            version,
            start,
            complete,
            last,
            datagrams,
            bytes,
            mut handshake,
            mut tls,
            app,
            mut sealed,
            steps,
            close,
            hellos,
            ..
        } = *conn;
        tls.hello_to_hello = match hellos {
            [Some(c), Some(s)] => Some(s.secs_since(c)),
            _ => None,
        };
        let close = close.map(|c| QuicClose {
            by: side_of(c.side),
            time: self.instant(c.at),
            kind: if c.application {
                "application"
            } else {
                "transport"
            }
            .into(),
            error_code: c.error,
            reason: Some(c.reason).filter(|r| !r.is_empty()),
        });
        tls.events = steps.into_events(start, &|t| self.instant(t));
        // Packets read late (held for their keys) add their messages after
        // later ones; the events stay in capture order.
        tls.events
            .sort_by(|a, b| a.since_start.total_cmp(&b.since_start));
        if let Some(sealed) = sealed.as_mut() {
            tls.alpn = sealed.alpn.take();
            tls.early_data_accepted = sealed.early_data_accepted;
            tls.certificate = sealed.certificate.take();
        }
        let http = app.map(|mut app| {
            if let Some(sealed) = &sealed {
                app.counted(sealed.opened, sealed.failed);
            }
            let opened = matches!(
                app.http.decryption,
                DecryptionOutcome::Complete | DecryptionOutcome::Partial
            );
            self.summary.decrypted += u64::from(opened);
            self.summary.requests += app.http.requests;
            self.carried += u64::from(app.http.requests > 0);
            for (code, n) in &app.http.status_codes {
                *self
                    .summary
                    .status_codes
                    .entry(code.to_string())
                    .or_default() += n;
            }
            self.summary.responses += app.http.responses;
            self.latency.merge(&app.latency);
            let (rate_limit, waits) = app.limits.take().map(|l| l.into_record()).unzip();
            if let Some(r) = &rate_limit {
                // Closed: a CONNECTION_CLOSE, by its sender.
                let closed = close.as_ref().map(|c| Some(c.by));
                self.rate_limit.add(&LimitTally::new(r, waits, closed));
            }
            let at = |t: Timestamp| self.instant(t);
            let list = app.list.iter().map(|e| request(e, &at)).collect();
            QuicHttp {
                list,
                rate_limit,
                ..app.http
            }
        });
        handshake.duration = complete.map(|t| t.secs_since(start));
        let (first, end) = (self.instant(start), self.instant(last));
        let s = &mut self.summary;
        s.datagrams += datagrams.client + datagrams.server;
        match tls.resumed {
            Some(true) => s.handshakes_resumed += 1,
            Some(false) => s.handshakes_full += 1,
            None => {}
        }
        s.early_data += u64::from(handshake.packets.zero_rtt > 0);
        s.retries += u64::from(handshake.retry);
        let version = quic_version_name(version);
        *s.versions.entry(version.clone()).or_default() += 1;
        if let Some(first) = tls.alpn_offered.first() {
            *s.alpn_offered.entry(first.clone()).or_default() += 1;
        }
        if let Some(d) = handshake.duration {
            self.durations.push(d);
        }
        let record = QuicRecord {
            id,
            client: client.to_string(),
            server: server.to_string(),
            overlay,
            version: version.into(),
            start: first,
            end,
            duration: last.secs_since(start),
            datagrams,
            bytes,
            handshake,
            tls,
            http,
            close,
            ended: ended.name().into(),
        };
        // Its marks wait for the oldest connection still open (the first
        // by number) before they are swept.
        let origin = self.origin.unwrap_or(start);
        let horizon = self.open.first_key_value();
        let horizon = horizon.map_or(i64::MAX, |(_, c)| c.start.0.saturating_sub(origin.0));
        self.across.add(&mut Marks::of_quic(&record), horizon);
        let s = &mut self.summary;
        if id > MAX_LISTED {
            s.not_listed += 1;
        } else {
            s.list.push(record.clone());
        }
        self.done.push(record);
    }
}
