//! A connection's conversation, planned one part at a time: the TLS
//! handshake flights (1.3 and 1.2, full and resumed), each request and its
//! response (cleartext HTTP/1.1, HTTP/1.1 or h2 inside TLS), and the close
//! with its close_notify alerts.
//!
//! Owns: `Sim::plan` and its helpers, which append [`Step`]s to a
//! connection's script, and the NewSessionTicket records.
//! Does not own: the message bytes (`tls.rs`, `http.rs`), the mix's sizes
//! and delays (`mix.rs`), or how the steps become packets (`conn.rs`).

use crate::conn::{App, CloseKind, Conn, Side, Step};
use crate::flight::Flight;
use crate::http::{api_exchange, web_exchange};
use crate::mix::Mix;
use crate::rng::Rng;
use crate::sim::Sim;
use crate::tls::{
    certificate, change_cipher_spec, client_hello, client_key_exchange, finished_12, handshake,
    record, server_hello, server_key_exchange, Buf, Hello, OVERHEAD_13,
};

impl Sim {
    /// Appends the next part of the conversation to `c.script`: the
    /// handshake with the first exchange, then one exchange at a time, then
    /// the close.
    pub(crate) fn plan(&mut self, c: &mut Conn) {
        if self.winding_down && c.handshake_done {
            c.requests_left = 0;
        }
        if c.requests_left == 0 {
            self.plan_close(c);
            return;
        }
        if !c.handshake_done {
            c.handshake_done = true;
            if c.tls.is_some() {
                self.plan_tls_handshake(c);
            }
        }
        self.plan_exchange(c);
    }

    fn plan_close(&mut self, c: &mut Conn) {
        let rng = &mut self.rng;
        let kind = c.close;
        self.stats.closes[kind as usize] += 1;
        let closer = match kind {
            CloseKind::FinClient | CloseKind::RstClient => Side::Client,
            CloseKind::FinServer | CloseKind::RstServer => Side::Server,
        };
        let delay = rng.log_uniform(20_000, 50_000_000);
        // close_notify from the side that closes, often answered by the other.
        let fin = matches!(kind, CloseKind::FinClient | CloseKind::FinServer);
        if c.tls.is_some() && fin && rng.chance(0.7) {
            let overhead = c.overhead();
            // TLS 1.3 hides the alert in an application-data record.
            let outer = if c.tls.as_ref().is_some_and(|t| t.v13) {
                23
            } else {
                21
            };
            let alert = |rng: &mut Rng| {
                let mut flight = Flight::default();
                let mut header = Buf::default();
                header.u8(outer);
                header.u16(0x0303);
                header.u16((2 + overhead) as u16);
                flight.lit(header.0);
                flight.fill(rng, true, 2 + overhead);
                flight
            };
            c.script.push_back(Step::Send {
                side: closer,
                flight: alert(rng),
                delay,
            });
            if rng.chance(0.5) {
                self.stats.close_notify_replies += 1;
                c.script.push_back(Step::Send {
                    side: closer.other(),
                    flight: alert(rng),
                    delay: c.rtt / 2 + 20_000,
                });
            }
            c.script.push_back(Step::Close {
                kind,
                delay: 10_000,
            });
        } else {
            c.script.push_back(Step::Close { kind, delay });
        }
    }

    fn plan_tls_handshake(&mut self, c: &mut Conn) {
        let rng = &mut self.rng;
        let server = &self.servers[c.server_idx];
        let Some(tls) = &c.tls else {
            return;
        };
        let half = c.rtt / 2;
        let think = |rng: &mut Rng| half + rng.log_uniform(20_000, 2_000_000);
        let hello = Hello {
            sni: server.sni,
            alpn: tls.alpn_offer,
            offer13: tls.v13 || rng.chance(0.5),
            session_id: &tls.session_id,
            psk: tls.v13 && tls.resumed,
            grease: rng.chance(0.5),
        };
        let mut ch = Flight::default();
        ch.lit(client_hello(rng, &hello));
        c.script.push_back(Step::Send {
            side: Side::Client,
            flight: ch,
            delay: rng.range(20_000, 200_000),
        });
        let alpn = match (c.app, tls.alpn_offer.is_empty()) {
            (_, true) => None,
            (App::TlsH2, _) => Some("h2"),
            _ => Some("http/1.1"),
        };
        let mut s = Flight::default();
        if tls.v13 {
            let sh = server_hello(rng, &tls.session_id, tls.cipher, true, tls.resumed, None);
            s.lit(record(22, 0x0303, &sh));
            s.lit(change_cipher_spec());
            // EncryptedExtensions (+ Certificate, CertificateVerify) + Finished.
            let finished = if tls.cipher == 0x1302 { 52 } else { 36 };
            if tls.resumed {
                s.app_data(rng, 40 + finished, OVERHEAD_13);
            } else {
                let cert = rng.range(2700, 3600) as usize;
                s.app_data(rng, 40 + cert, OVERHEAD_13);
                s.app_data(rng, 264 + finished, OVERHEAD_13);
            }
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: s,
                delay: think(rng),
            });
            // The client's CCS and Finished (53 or 69 bytes) lead the flight
            // that carries the first request.
            let mut f = Flight::default();
            f.lit(change_cipher_spec());
            f.app_data(rng, finished, OVERHEAD_13);
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: f,
                delay: half + rng.log_uniform(10_000, 500_000),
            });
        } else if tls.resumed {
            let sh = server_hello(rng, &tls.session_id, tls.cipher, false, false, alpn);
            s.lit(record(22, 0x0303, &sh));
            s.lit(change_cipher_spec());
            s.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: s,
                delay: think(rng),
            });
            let mut f = Flight::default();
            f.lit(change_cipher_spec());
            f.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: f,
                delay: half + rng.log_uniform(10_000, 500_000),
            });
        } else {
            let new_id = rng.bytes(32);
            let sh = server_hello(rng, &new_id, tls.cipher, false, false, alpn);
            let cert = certificate(rng, server.sni);
            let ske = server_key_exchange(rng);
            let shd = handshake(14, |_| {});
            if rng.chance(0.5) {
                // One record per message, the certificate sometimes split
                // over two records.
                s.lit(record(22, 0x0303, &sh));
                if rng.chance(0.3) {
                    let cut = cert.len() / 2;
                    s.lit(record(22, 0x0303, &cert[..cut]));
                    s.lit(record(22, 0x0303, &cert[cut..]));
                } else {
                    s.lit(record(22, 0x0303, &cert));
                }
                s.lit(record(22, 0x0303, &ske));
                s.lit(record(22, 0x0303, &shd));
            } else {
                let all = [sh, cert, ske, shd].concat();
                s.lit(record(22, 0x0303, &all));
            }
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: s,
                delay: think(rng),
            });
            let mut f = Flight::default();
            f.lit(record(22, 0x0303, &client_key_exchange(rng)));
            f.lit(change_cipher_spec());
            f.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: f,
                delay: half + rng.log_uniform(10_000, 500_000),
            });
            let mut g = Flight::default();
            g.lit(change_cipher_spec());
            g.lit(finished_12(rng));
            c.script.push_back(Step::Send {
                side: Side::Server,
                flight: g,
                delay: think(rng),
            });
        }
    }

    /// One request and its response.
    fn plan_exchange(&mut self, c: &mut Conn) {
        let rng = &mut self.rng;
        let first = c.requests_done == 0;
        let last = c.requests_left == 1;
        c.requests_left -= 1;
        c.requests_done += 1;
        let half = c.rtt / 2;
        let overhead = c.overhead();
        let mix = self.mix;
        let (request_delay, response_delay, body) = mix.exchange(rng, first, half);
        // A TLS 1.3 or resumed 1.2 handshake ends with a client flight that
        // carries the first request too.
        let merge = first
            && c.tls.as_ref().is_some_and(|t| t.v13 || t.resumed)
            && matches!(
                c.script.back(),
                Some(Step::Send {
                    side: Side::Client,
                    ..
                })
            );
        let mut req = Flight::default();
        let mut resp = Flight::default();
        match c.app {
            App::Http => {
                self.stats.requests_cleartext += 1;
                let server = &self.servers[c.server_idx];
                let chunked = match mix {
                    Mix::Web => {
                        let close_header =
                            last && c.close == CloseKind::FinServer && rng.chance(0.5);
                        web_exchange(rng, server.host.ip, close_header, body, &mut req, &mut resp)
                    }
                    Mix::Short => {
                        let close_header = last && rng.chance(0.8);
                        let (ip, port) = (server.host.ip, server.port);
                        api_exchange(rng, ip, port, close_header, body, &mut req, &mut resp)
                    }
                };
                self.stats.chunked_responses += u64::from(chunked);
            }
            App::TlsHttp1 => {
                self.stats.requests_tls_http1 += 1;
                // Request line and headers, a body for a POST; the
                // response's status line and headers.
                let (post, head, post_body, resp_head) = match mix {
                    Mix::Web => (0.1, (180, 700), (50, 2000), (200, 450)),
                    Mix::Short => (0.3, (150, 450), (40, 1500), (150, 350)),
                };
                let post = rng.chance(post);
                let plain = rng.range(head.0, head.1) as usize
                    + if post {
                        rng.range(post_body.0, post_body.1) as usize
                    } else {
                        0
                    };
                req.app_data(rng, plain, overhead);
                if first && c.tls.as_ref().is_some_and(|t| t.v13) {
                    new_session_tickets(rng, &mut resp);
                }
                let n = rng.range(resp_head.0, resp_head.1) as usize + body;

                resp.app_data(rng, n, overhead);
            }
            App::TlsH2 => {
                self.stats.requests_tls_h2 += 1;
                if first {
                    // Preface, SETTINGS and WINDOW_UPDATE in one small record.
                    req.app_data(rng, 24 + 27 + 13, overhead);
                }
                // HEADERS (HPACK), and DATA for a POST. The first request
                // sends its header fields in full; later ones mostly refer
                // to HPACK's table, so they are short and one size (a
                // byte more for a longer path), as real clients' are: 27
                // to 46 bytes by the client port (the draw is kept, so the
                // rest of the traffic stays as it was).
                let full = rng.range(30, 160) as usize;
                let n = if first {
                    full
                } else {
                    27 + usize::from(c.cport % 19) + (c.requests_done % 2) as usize
                };

                req.app_data(rng, n, overhead);
                if rng.chance(0.1) {
                    let n = rng.range(50, 2000) as usize;

                    req.app_data(rng, n, overhead);
                }
                if first && c.tls.as_ref().is_some_and(|t| t.v13) {
                    new_session_tickets(rng, &mut resp);
                }
                if first {
                    // The server's SETTINGS and the ACK of the client's.
                    resp.app_data(rng, 27 + 9, overhead);
                }
                // HEADERS, then DATA frames (a 9-byte header per 16 KB).
                let n = rng.range(40, 120) as usize;

                resp.app_data(rng, n, overhead);
                resp.app_data(rng, body + 9 * body.div_ceil(16384), overhead);
            }
        }
        if merge {
            if let Some(Step::Send { flight, .. }) = c.script.back_mut() {
                flight.pieces.extend(req.pieces);
            }
        } else {
            c.script.push_back(Step::Send {
                side: Side::Client,
                flight: req,
                delay: request_delay,
            });
        }
        c.script.push_back(Step::Send {
            side: Side::Server,
            flight: resp,
            delay: response_delay,
        });
    }
}

/// TLS 1.3 NewSessionTicket records sent after the client's Finished.
fn new_session_tickets(rng: &mut Rng, flight: &mut Flight) {
    for _ in 0..rng.range(1, 2) {
        let n = rng.range(190, 260) as usize;

        flight.app_data(rng, n, OVERHEAD_13);
    }
}
