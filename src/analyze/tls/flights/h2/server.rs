//! The server's side of HTTP/2 read by record sizes (see `h2`'s comment):
//! which of its records are its SETTINGS or a TLS 1.3 ticket, and which
//! can answer a request — and what an answer tells of the flight it
//! answers (bodies, requests sealed with them).
//!
//! Does not read the client's records (`h2`) or count requests (`flights`).

use super::*;

impl H2 {
    /// The server sent a record of `len` bytes, `plain` of them its own
    /// (`early`: in TLS 1.3, before the first request). Also whether it
    /// is the server's SETTINGS, or a ticket by its place: the server's
    /// first record after the handshake, of a ticket's size — OpenSSL
    /// sends its tickets once it reads the client's Finished, which may be
    /// after the client's first request, between its HEADERS and its body.
    pub(in crate::analyze::tls::flights) fn server_spoke(
        &mut self,
        early: bool,
        tls13: bool,
        len: usize,
        plain: usize,
    ) {
        self.small_since_server = 0;
        self.server_since_request = self.server_since_request.saturating_add(plain);
        // The server sends its SETTINGS once.
        self.settings_now = !self.settings_seen && server_settings(plain);
        self.settings_seen |= self.settings_now;
        // (That first record, and one more as long after it — OpenSSL
        // sends two — but no more: a server that sends no tickets may
        // answer in records of that size.)
        let first = !std::mem::replace(&mut self.server_spoke, true);
        let again = self.ticket_now && self.ticket_len == len && self.tickets < MAX_TICKETS;
        self.ticket_now = (tls13 && first && super::super::TICKET_SIZES.contains(&len)) || again;
        self.ticket_len = len;
        self.tickets = if self.ticket_now { self.tickets + 1 } else { 0 };
        if early && !self.before_first.contains(&len) {
            if let Some(slot) = self.before_first.iter_mut().find(|l| **l == 0) {
                *slot = len;
            }
        }
    }

    /// Whether a server record of `plain` bytes (`len` on the wire) can
    /// answer a request: not control frames; before the first answer, not
    /// a record of a size seen before the first request, nor one
    /// `server_spoke` took for a ticket or the server's SETTINGS. It also
    /// tells (see the module's comment) what the flight it answers sent
    /// besides its request, and whether that request was answered before
    /// its body came.
    pub(in crate::analyze::tls::flights) fn answers(&mut self, plain: usize, len: usize) -> bool {
        let early = !self.answered
            && (self.before_first.contains(&len) || self.settings_now || self.ticket_now);
        let answers = !(plain <= 9 || CONTROL.contains(&plain) || early);
        self.answered |= answers;
        if answers {
            self.answered_single = self.flight_single && !self.multiplexed;
            // What the flight sent besides its request, answered, was
            // its body (when too long for a request HPACK indexed).
            let (flight, request) = (self.flight, self.last_size.unwrap_or(0));
            let body = |s: usize| s > MAX_INDEXED && s.abs_diff(request) > SAME;
            // Not one an indexed HEADERS frame longer than another body
            // of the flight: that is a request sealed with its body
            // (OkHttp writes the two together), sent with the flight's
            // first. (Not than a body of another flight: bodies of
            // several sizes differ so.)
            let maybe = &self.maybe;
            // Nor, in the flight of a request that rode with the preface,
            // a record that the preface's record holds with room for a
            // SETTINGS frame and a HEADERS frame to spare: that request
            // was sealed with its body (Netty writes a request as one
            // message), and so was this one, sent before it was answered.
            let preface = self.preface_request.is_some_and(|(f, _)| f == flight);
            let sealed = |s: usize| {
                let over = |b: usize| s.checked_sub(b).is_some_and(|d| d > 9 && d <= MAX_INDEXED);
                (preface && self.holds_with_preface(s))
                    || maybe
                        .iter()
                        .any(|&(b, _, g)| g == flight && body(b) && over(b))
            };
            let mut requests = [false; KEEP];
            for (r, &(size, _, f)) in requests.iter_mut().zip(maybe) {
                *r = f == flight && body(size) && sealed(size);
            }
            let mut requests = requests.iter();
            self.maybe.retain(|&(_, at, _)| {
                let request = requests.next().is_some_and(|&r| r);
                if request {
                    self.late.push(at);
                    self.requests += 1;
                    self.multiplexed = true;
                }
                !request
            });
            for &(size, _, f) in &self.maybe {
                if f == flight && body(size) {
                    learn_body(&mut self.bodies, size);
                }
            }
        } else if std::mem::take(&mut self.answered_single) && plain == RST_STREAM {
            self.body_pending = true;
        }
        answers
    }
}
