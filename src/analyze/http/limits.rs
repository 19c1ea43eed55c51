//! Rate limiting as one connection's responses told it: the `429 Too Many
//! Requests` responses, the `Retry-After` each response carried (RFC 9110
//! §10.2.3: delay-seconds or an HTTP-date), the requests the client
//! started while a Retry-After given on the connection had not yet
//! elapsed, and how long it waited after a 429 before its next request on
//! the connection — both counted from the end of the response, when the
//! client had all of it. Kept as requests and responses come, in capture order,
//! in constant memory per connection. The only module that names
//! `httpdate`.
//!
//! Does not parse HTTP messages (the HTTP/1, HTTP/2 and HTTP/3 readers hand
//! it a field's value), and does not look past one connection.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::analyze::stats::Samples;
use crate::record::RateLimit;
use crate::time::Timestamp;

/// The status of a rate-limited request (RFC 6585 §4).
pub const TOO_MANY_REQUESTS: u16 = 429;
/// Distinct Retry-After values counted per connection (the rest are
/// counted in `in_window` and the waits, not by value).
const MAX_VALUES: usize = 64;
/// Waits after a 429 kept exactly per connection before they are folded
/// into a histogram.
const EXACT_WAITS: usize = 1024;
/// The longest Retry-After kept, in seconds (136 years): a larger one,
/// or a date further off, is taken as this.
pub const MAX_RETRY_AFTER: u32 = u32::MAX - 1;

/// The seconds a `Retry-After` field value asks the client to wait:
/// delay-seconds as given, an HTTP-date counted from the response's own
/// `Date` field (`date`) or, without one, from the time the response was
/// captured (`at`), rounded up to a whole second and 0 when already past.
/// `None` when the value is neither (RFC 9110 says to ignore it then).
pub fn retry_after(value: &[u8], date: Option<&[u8]>, at: Timestamp) -> Option<u32> {
    let value = value.trim_ascii();
    if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
        // Leading zeros aside, more than ten digits is past u32.
        let digits = value.iter().skip_while(|&&b| b == b'0').count();
        let secs = match digits {
            0 => 0,
            1..=10 => std::str::from_utf8(value).ok()?.parse::<u64>().ok()?,
            _ => u64::MAX,
        };
        return Some(secs.min(u64::from(MAX_RETRY_AFTER)) as u32);
    }
    let when = http_date(value)?;
    let reference = date.and_then(http_date).unwrap_or_else(|| system_time(at));
    let wait = when.duration_since(reference).unwrap_or(Duration::ZERO);
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Some(secs.min(u64::from(MAX_RETRY_AFTER)) as u32)
}

/// An HTTP-date (IMF-fixdate, or the obsolete RFC 850 and asctime forms).
fn http_date(value: &[u8]) -> Option<SystemTime> {
    let text = std::str::from_utf8(value.trim_ascii()).ok()?;
    httpdate::parse_http_date(text).ok()
}

/// A capture time as a system time (times before 1970 as 1970).
fn system_time(at: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(at.0).unwrap_or(0))
}

/// What one connection's responses said of rate limiting, and how its
/// client answered.
#[derive(Debug)]
pub struct Limits {
    /// Final responses with status 429.
    pub responses_429: u64,
    /// Responses carrying a Retry-After, by its seconds (at most
    /// [`MAX_VALUES`] distinct values).
    pub retry_after: BTreeMap<u32, u64>,
    /// Requests started while a Retry-After given on the connection ran.
    pub in_window: u64,
    /// For each request that was the first after one or more 429s: the
    /// seconds since the latest of them ended.
    pub waits: Samples,
    /// The latest final response was a 429 and no request followed it.
    pub ended_on_429: bool,
    /// The Retry-After windows given so far, joined where they overlap:
    /// the latest runs from `from` until `until`.
    from: Timestamp,
    until: Option<Timestamp>,
    /// The end of the latest 429 no request has followed yet.
    unfollowed: Option<Timestamp>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            responses_429: 0,
            retry_after: BTreeMap::new(),
            in_window: 0,
            waits: Samples::with_exact_cap(EXACT_WAITS),
            ended_on_429: false,
            from: Timestamp::default(),
            until: None,
            unfollowed: None,
        }
    }
}

impl Limits {
    /// A final response's head with `status` and the seconds of its
    /// Retry-After, on a connection whose `slot` is made by the first
    /// response that speaks of rate limiting (most never have one).
    pub fn note(slot: &mut Option<Box<Limits>>, status: u16, retry_after: Option<u32>) {
        let tells = status == TOO_MANY_REQUESTS || retry_after.is_some();
        if tells || slot.is_some() {
            let limits = slot.get_or_insert_with(Box::default);
            limits.response(status, retry_after);
        }
    }

    /// A final response's head with `status`, and the seconds of its
    /// Retry-After, was read.
    pub fn response(&mut self, status: u16, retry_after: Option<u32>) {
        self.ended_on_429 = status == TOO_MANY_REQUESTS;
        self.responses_429 += u64::from(status == TOO_MANY_REQUESTS);
        let Some(secs) = retry_after else {
            return;
        };
        if let Some(n) = self.retry_after.get_mut(&secs) {
            *n += 1;
        } else if self.retry_after.len() < MAX_VALUES {
            self.retry_after.insert(secs, 1);
        }
    }

    /// That response's last byte came at `at`: the client has all of it,
    /// and the wait it asked for (RFC 9110 §10.2.3: "after the response
    /// is received") and the one after a 429 run from here.
    pub fn response_end(&mut self, status: u16, retry_after: Option<u32>, at: Timestamp) {
        if status == TOO_MANY_REQUESTS {
            self.unfollowed = Some(self.unfollowed.map_or(at, |u| u.max(at)));
        }
        let Some(secs) = retry_after else {
            return;
        };
        let end = Timestamp(at.0.saturating_add(i64::from(secs) * 1_000_000_000));
        match self.until {
            Some(until) if at < until => self.until = Some(until.max(end)),
            _ => {
                self.from = at;
                self.until = Some(end);
            }
        }
    }

    /// The record's `rate_limit` section, and the waits (all of them, for
    /// the summary: the section has their distribution).
    pub fn into_record(mut self) -> (RateLimit, Samples) {
        let record = RateLimit {
            responses_429: self.responses_429,
            retry_after: std::mem::take(&mut self.retry_after),
            requests_in_window: self.in_window,
            wait_after_429: self.waits.distribution(),
            ended_on_429: self.ended_on_429,
        };
        (record, self.waits)
    }

    /// A request started at `start` (requests come in the order they
    /// started; one found to have started before the latest response is
    /// neither in a window nor a wait).
    pub fn request(&mut self, start: Timestamp) {
        self.ended_on_429 = false;
        if self
            .until
            .is_some_and(|until| self.from <= start && start < until)
        {
            self.in_window += 1;
        }
        if let Some(after) = self.unfollowed.filter(|&t| t <= start) {
            self.waits.push(start.secs_since(after));
            self.unfollowed = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn at(secs: f64) -> Timestamp {
        Timestamp((secs * 1e9).round() as i64)
    }

    #[test]
    fn delay_seconds_and_dates_are_read_and_the_rest_is_not() {
        let now = Timestamp(1_445_412_480 * S); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(retry_after(b"120", None, now), Some(120));
        assert_eq!(retry_after(b" 0 ", None, now), Some(0));
        assert_eq!(retry_after(b"0000000000007", None, now), Some(7));
        assert_eq!(
            retry_after(b"99999999999999999999", None, now),
            Some(MAX_RETRY_AFTER)
        );
        let date = b"Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(
            retry_after(b"Wed, 21 Oct 2015 07:29:30 GMT", None, now),
            Some(90)
        );
        assert_eq!(
            retry_after(b"Wed, 21 Oct 2015 07:29:30 GMT", Some(date), Timestamp(0)),
            Some(90),
            "counted from the response's Date, not the capture's clock"
        );
        assert_eq!(
            retry_after(b"Wed, 21 Oct 2015 07:27:00 GMT", Some(date), now),
            Some(0),
            "a date already past asks for no wait"
        );
        let half = Timestamp(now.0 + S / 2);
        assert_eq!(
            retry_after(b"Wed, 21 Oct 2015 07:28:01 GMT", None, half),
            Some(1),
            "rounded up"
        );
        for bad in [
            &b""[..],
            b"-1",
            b"1.5",
            b"soon",
            b"Wed, 32 Oct 2015 07:28:00 GMT",
            b"\xff",
        ] {
            assert_eq!(retry_after(bad, None, now), None, "{bad:?}");
        }
    }

    /// A whole response: its head, then its end at `secs`.
    fn answer(l: &mut Limits, status: u16, retry_after: Option<u32>, secs: f64) {
        l.response(status, retry_after);
        l.response_end(status, retry_after, at(secs));
    }

    #[test]
    fn requests_inside_a_retry_after_and_waits_after_429() {
        let mut l = Limits::default();
        answer(&mut l, TOO_MANY_REQUESTS, Some(1), 10.0);
        assert!(l.ended_on_429);
        l.request(at(10.2)); // too soon: in the window, waited 0.2 s
        answer(&mut l, 200, None, 10.3);
        l.request(at(10.5)); // still in the window, follows no 429
        answer(&mut l, TOO_MANY_REQUESTS, Some(2), 10.9); // extends it to 12.9
        l.request(at(11.5)); // in the window
        answer(&mut l, TOO_MANY_REQUESTS, None, 11.6);
        l.request(at(13.0)); // past the window, waited 1.4 s after the latest 429
        l.request(at(13.1));
        assert_eq!(l.responses_429, 3);
        assert_eq!(l.in_window, 3);
        assert_eq!(l.retry_after, BTreeMap::from([(1, 1), (2, 1)]));
        let d = l.waits.distribution();
        assert_eq!(d.count, 3);
        assert!((d.min.unwrap_or(0.0) - 0.2).abs() < 1e-9, "{d:?}");
        assert!((d.max.unwrap_or(0.0) - 1.4).abs() < 1e-9, "{d:?}");
        assert!(!l.ended_on_429);
        answer(&mut l, TOO_MANY_REQUESTS, Some(5), 14.0);
        assert!(l.ended_on_429);
    }

    /// The wait and the window run from the response's end: a request
    /// sent while the 429's body still came is neither a wait nor in the
    /// window.
    #[test]
    fn the_wait_runs_from_the_end_of_the_response() {
        let mut l = Limits::default();
        l.response(TOO_MANY_REQUESTS, Some(1));
        l.request(at(1.0)); // the head read, the body still coming
        assert_eq!((l.in_window, l.waits.len()), (0, 0));
        l.response_end(TOO_MANY_REQUESTS, Some(1), at(1.5));
        l.request(at(1.6));
        assert_eq!((l.in_window, l.waits.len()), (1, 1));
        let d = l.waits.distribution();
        assert!((d.min.unwrap_or(0.0) - 0.1).abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn a_request_found_before_the_window_is_not_in_it() {
        let mut l = Limits::default();
        answer(&mut l, TOO_MANY_REQUESTS, Some(60), 5.0);
        l.request(at(4.0));
        assert_eq!(l.in_window, 0);
        assert_eq!(l.waits.len(), 0, "started before the 429 came");
        l.request(at(5.0));
        assert_eq!(l.in_window, 1);
        assert_eq!(l.waits.len(), 1);
    }

    #[test]
    fn retry_after_values_are_bounded() {
        let mut l = Limits::default();
        for s in 0..(MAX_VALUES as u32 + 10) {
            answer(&mut l, 503, Some(s), 1.0);
        }
        assert_eq!(l.retry_after.len(), MAX_VALUES);
        assert_eq!(l.responses_429, 0);
    }
}
