//! The sweep's reading of connections beside HTTP/2 ones, on marks made
//! by hand: raced and up, needed at the stream limit and after a GOAWAY,
//! room on connections in their handshake, bounds.

use super::*;

const MS: i64 = 1_000_000;
/// Offered and spoke HTTP/2; carried a request.
const H2: H2How = H2How::new(true, true, true);
/// No stream limit.
const U: u16 = u16::MAX;

/// The count after connections 1 to `last` had their first request's
/// check (none counted there), and those counted: each (connection,
/// the HTTP/2 one beside it, raced).
fn finished(mut m: Multiplex, last: u64) -> (BesideHttp2, Vec<(u64, u64, bool)>) {
    for conn in 1..=last {
        m.first_request(conn, false);
    }
    let r = m.finish().0.expect("checked");
    let beside = r.first.iter();
    let beside = beside.map(|f| (f.connection, f.http2_connection, f.raced));
    let beside = beside.collect();
    (r, beside)
}

/// 1 opens at 0 and is up at 10 ms; 2 opens at 5 ms (raced), 3 at 20
/// ms (beside one up), 4 to another server; 1 closes at 30 ms, and 5
/// opens at 40 ms beside 2 and 3, up since 15 and 25 ms.
#[test]
fn raced_and_up_beside_an_open_http2_connection() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (10_000, U), H2);
    m.opened((7, None), 2, 5 * MS, (10_000, U), H2);
    m.opened((7, None), 3, 20 * MS, (5_000, U), H2);
    m.opened((8, None), 4, 20 * MS, (5_000, U), H2);
    m.closed(1);
    m.opened((7, None), 5, 40 * MS, (5_000, U), H2);
    for conn in 1..=5 {
        m.first_request(conn, false);
    }
    let r = m.finish().0.expect("checked");
    assert_eq!((r.checked, r.connections, r.raced), (5, 3, 1));
    let beside: Vec<_> = r
        .first
        .iter()
        .map(|f| (f.connection, f.http2_connection, f.raced))
        .collect();
    assert_eq!(beside, [(2, 1, true), (3, 1, false), (5, 2, false)]);
    assert!((r.handshake_total - 0.020).abs() < 1e-12);
}

/// Counted as opened while another sat idle, not again here; one that
/// carries no request counts at its opening.
#[test]
fn not_counted_twice_and_unused_ones_count_at_once() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (1_000, U), H2);
    m.opened((7, None), 2, 5 * MS, (1_000, U), H2);
    m.first_request(2, true);
    m.opened(
        (7, None),
        3,
        6 * MS,
        (UNTIL_THE_END, U),
        H2How::new(true, false, false),
    );
    let r = m.finish().0.expect("checked");
    assert_eq!((r.connections, r.carried_none), (1, 1));
    assert_eq!(r.first[0].handshake, None);
    assert_eq!(r.handshake.count, 0);
}

/// Only one that speaks HTTP/2 is looked beside; only one that offered
/// it is looked at; one whose first request's check never came counts.
#[test]
fn offered_and_spoken_apart() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (1_000, U), H2How::new(true, false, true));
    m.opened((7, None), 2, MS, (1_000, U), H2How::new(false, true, true));
    m.opened(
        (7, None),
        3,
        2 * MS,
        (1_000, U),
        H2How::new(true, false, true),
    );
    let r = m.finish().0.expect("checked");
    assert_eq!((r.checked, r.connections), (2, 1));
    assert_eq!(r.first[0].http2_connection, 2);
    assert_eq!(r.first[0].connection, 3);
}

/// Through the sweep: a connection that finished first waits for the
/// HTTP/2 connection opened before it, still open, to finish too; and
/// one opened after that connection's close is not beside it.
#[test]
fn the_sweep_orders_connections_that_finish_out_of_order() {
    use super::super::across::{Across, Marks};
    use super::super::marks::{H2How, Kind};
    let h2 = |conn: u64, at: i64, speaks: bool, closed: Option<i64>| Marks {
        server: 7,
        pool: 7,
        conn,
        opened: at,
        h2: Some((
            Kind::H2 {
                ready: 10_000,
                streams: U,
                how: H2How::new(true, speaks, false),
            },
            closed,
        )),
        ..Marks::default()
    };
    let mut a = Across::default();
    a.add(&mut h2(2, 5 * MS, false, None), 0);
    a.add(&mut h2(3, 2_000 * MS, false, None), 0);
    a.add(&mut h2(1, 0, true, Some(1_000 * MS)), i64::MAX);
    let r = a.finish().beside_http2.expect("checked");
    assert_eq!((r.checked, r.connections, r.raced), (3, 1, 1));
    assert_eq!(r.first[0].http2_connection, 1);
    assert_eq!(r.out_of_order, 0);
}

/// 1 is up at 1 ms and at its limit of 2 from 10 to 20 ms: 2, opened
/// at 15 ms, was needed (not counted), 3 at 25 ms was not; 4 opens at
/// 30 ms while 1 goes away (GOAWAY at 28 ms) and 2 and 3 are at
/// their limit; 5 at 40 ms, when only 1, going away, is open, was
/// needed; 6, at 60 ms once 1 closed, has nothing beside it.
#[test]
fn needed_at_the_stream_limit_and_after_goaway() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (1_000, U), H2);
    m.full(1, 10 * MS, 10_000, 2);
    m.opened((7, None), 2, 15 * MS, (1_000, U), H2);
    m.opened((7, None), 3, 25 * MS, (1_000, U), H2);
    m.goaway(1);
    m.full(2, 26 * MS, 100_000, 3);
    m.full(3, 27 * MS, 100_000, 2);
    m.opened(
        (7, None),
        4,
        30 * MS,
        (1_000, U),
        H2How::new(true, false, false),
    );
    m.closed(2);
    m.closed(3);
    m.opened(
        (7, None),
        5,
        40 * MS,
        (1_000, U),
        H2How::new(true, false, false),
    );
    m.goaway(1);
    m.closed(1);
    assert!(m.servers.is_empty() && m.open.is_empty());
    m.opened(
        (7, None),
        6,
        60 * MS,
        (1_000, U),
        H2How::new(true, false, false),
    );
    for conn in 1..=6 {
        m.first_request(conn, false);
    }
    let r = m.finish().0.expect("checked");
    assert_eq!((r.checked, r.connections), (6, 1));
    assert_eq!(
        (r.at_limit, r.stream_limit, r.after_goaway),
        (2, Some(2), 1)
    );
    assert_eq!((r.first[0].connection, r.first[0].http2_connection), (3, 1));
}

/// One at its limit does not hide one up beside it that is not, nor
/// one still in its handshake (raced).
#[test]
fn at_the_limit_only_when_every_one_is() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (1_000, U), H2);
    m.opened((7, None), 2, MS / 2, (1_000, U), H2);
    m.full(1, 5 * MS, 100_000, 1);
    m.opened((7, None), 3, 10 * MS, (1_000, U), H2);
    m.full(2, 11 * MS, 100_000, 1);
    m.full(3, 12 * MS, 100_000, 1);
    m.opened((7, None), 4, 20 * MS, (50_000, U), H2);
    m.opened((7, None), 5, 21 * MS, (1_000, U), H2);
    let (r, beside) = finished(m, 5);
    assert_eq!(beside, [(2, 1, true), (3, 2, false), (5, 4, true)]);
    assert_eq!(r.at_limit, 1);
}

/// curl with 10 transfers to a server allowing 2 streams: 1 is up and
/// full; 2–9 open 0.1 ms apart, each in its handshake for 5 ms. 2 is
/// needed; 3 could have waited for 2 (room for one more request); 4
/// is needed (2 has no room left, 3 was not needed), and so on: 5
/// connections carry the 10, so 4 of the 8 were needed.
#[test]
fn room_on_connections_in_their_handshake() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (1_000, 2), H2);
    m.full(1, 2 * MS, 1_000_000, 2);
    for conn in 2..=9 {
        let at = 10 * MS + conn as i64 * MS / 10;
        m.opened((7, None), conn, at, (5_000, 2), H2);
    }
    let (r, beside) = finished(m, 9);
    assert_eq!((r.at_limit, r.stream_limit, r.raced), (4, Some(2), 4));
    let raced = [(3, 2, true), (5, 4, true), (7, 6, true), (9, 8, true)];
    assert_eq!(beside, raced);
}

/// Without a limit a connection in its handshake takes any number, the
/// one itself found beside another too: 3, opened after 1 (up) closed
/// while 2 (found beside 1) is in its handshake, is raced beside 2.
#[test]
fn without_a_limit_any_one_in_its_handshake_has_room() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (1_000, U), H2);
    m.opened((7, None), 2, 2 * MS, (50_000, U), H2);
    m.closed(1);
    m.opened((7, None), 3, 3 * MS, (1_000, U), H2);
    let (r, beside) = finished(m, 3);
    assert_eq!(beside, [(2, 1, false), (3, 2, true)]);
    assert_eq!(r.at_limit, 0);
}

/// Closed connections are forgotten; those open at once are bounded.
#[test]
fn bounded_and_forgotten() {
    let mut m = Multiplex::default();
    for conn in 0..1_000 {
        m.opened(
            (7, None),
            conn,
            conn as i64 * MS,
            (1, U),
            H2How::new(false, true, false),
        );
        m.closed(conn);
    }
    assert!(m.servers.is_empty() && m.open.is_empty());
    for conn in 0..MAX_OPEN as u64 + 3 {
        m.opened((7, None), conn, 0, (1, U), H2How::new(false, true, false));
    }
    assert_eq!(m.open.len(), MAX_OPEN);
    assert_eq!(m.out_of_order, 3);
    assert_eq!(m.finish().0, None);
}

/// One counted beside an HTTP/2 connection whose frames were sealed says
/// so, raced or up; one beside one whose frames were read does not.
#[test]
fn beside_a_sealed_one_is_marked() {
    let mut m = Multiplex::default();
    m.opened((7, None), 1, 0, (1_000, U), H2.sealed());
    m.opened((7, None), 2, MS / 2, (1_000, U), H2);
    m.opened((7, None), 3, 2 * MS, (1_000, U), H2);
    m.opened((8, None), 4, 0, (1_000, U), H2);
    m.opened((8, None), 5, 2 * MS, (1_000, U), H2);
    let (r, _) = finished(m, 5);
    let sealed: Vec<_> = r.first.iter().map(|f| (f.connection, f.sealed)).collect();
    assert_eq!(sealed, [(2, true), (3, true), (5, false)]);
    assert_eq!((r.connections, r.sealed), (3, 2));
}
