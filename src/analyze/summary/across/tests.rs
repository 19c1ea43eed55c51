//! The sweep across connections on marks made by hand: time order
//! whatever order connections finish in, windows, bounds.

use super::super::marks::nanos;
use super::*;

/// A connection's marks; the first, its opening.
fn marks(server: u64, conn: u64, list: &[(f64, Kind)]) -> Marks {
    assert_eq!(list[0].1, Kind::Opened);
    Marks {
        server,
        pool: server,
        site: 0,
        conn,
        opened: nanos(list[0].0),
        marks: list[1..]
            .iter()
            .map(|&(at, kind)| Mark {
                at: nanos(at),
                kind,
            })
            .collect(),
        not_listed: 0,
        h2: None,
        tls: (None, None),
        pool_ends: (None, None),
    }
}

fn ended(too_many: bool, retry_after: Option<u32>) -> Kind {
    Kind::Ended {
        too_many,
        retry_after: retry_after.unwrap_or(NO_RETRY_AFTER),
    }
}

/// A new connection per request (HttpURLConnection): the 429 and its
/// window on one, the retry on the next, which opened in the window.
#[test]
fn a_retry_on_a_new_connection_is_seen() {
    let mut a = Across::default();
    // Connection 1 gets a 429 (Retry-After 1 s) and closes; 2 opens
    // 0.1 s later and retries; 3 opens after the window.
    let c1 = [
        (0.0, Kind::Opened),
        (0.1, Kind::Request),
        (0.2, ended(true, Some(1))),
    ];
    a.add(&mut marks(7, 1, &c1), i64::MAX);
    a.add(
        &mut marks(7, 2, &[(0.3, Kind::Opened), (0.31, Kind::Request)]),
        i64::MAX,
    );
    a.add(
        &mut marks(7, 3, &[(1.5, Kind::Opened), (1.51, Kind::Request)]),
        i64::MAX,
    );
    let r = a.finish().across.expect("told");
    assert_eq!(r.requests_in_window, 1);
    assert_eq!(r.requests_in_window_elsewhere, 1);
    assert_eq!(r.connections_opened_in_window, 1);
    assert_eq!(r.wait_after_429.count, 1);
    assert!((r.wait_after_429.min.unwrap_or(0.0) - 0.11).abs() < 1e-9);
    assert_eq!(r.retried_elsewhere, 1);
    assert_eq!(r.out_of_order, 0);
}

/// Records finish out of time order: a long connection finishing last
/// sent in the window another connection was given; its marks wait
/// for the horizon and are swept in time order.
#[test]
fn marks_are_swept_in_time_order_whatever_order_connections_finish() {
    let mut a = Across::default();
    // Connection 1 (open from 0.0 until the end) is still open when 2
    // finishes: 2's marks wait.
    a.add(
        &mut marks(
            7,
            2,
            &[
                (1.0, Kind::Opened),
                (1.1, Kind::Request),
                (1.2, ended(true, Some(2))),
            ],
        ),
        0,
    );
    assert_eq!(a.pending.len(), 3);
    a.add(
        &mut marks(
            7,
            1,
            &[
                (0.0, Kind::Opened),
                (0.5, Kind::Request),
                (2.0, Kind::Request),
                (4.0, Kind::Request),
            ],
        ),
        i64::MAX,
    );
    assert!(a.pending.is_empty());
    let r = a.finish().across.expect("told");
    assert_eq!(
        (r.requests_in_window, r.requests_in_window_elsewhere),
        (1, 1)
    );
    assert_eq!(r.wait_after_429.count, 1);
    assert!((r.wait_after_429.min.unwrap_or(0.0) - 0.8).abs() < 1e-9);
    assert_eq!(r.out_of_order, 0);
}

#[test]
fn other_servers_and_the_same_connection_are_told_apart() {
    let mut a = Across::default();
    a.add(
        &mut marks(
            7,
            1,
            &[
                (0.0, Kind::Opened),
                (0.1, ended(true, Some(5))),
                (0.2, Kind::Request),
            ],
        ),
        0,
    );
    a.add(
        &mut marks(8, 2, &[(0.3, Kind::Opened), (0.4, Kind::Request)]),
        i64::MAX,
    );
    let r = a.finish().across.expect("told");
    assert_eq!(r.requests_in_window, 1, "server 8 was not told");
    assert_eq!(r.requests_in_window_elsewhere, 0);
    assert_eq!(r.connections_opened_in_window, 0);
    assert_eq!(r.retried_elsewhere, 0);
}

#[test]
fn nothing_told_is_none_and_a_mark_behind_the_sweep_is_counted() {
    let mut a = Across::default();
    a.add(
        &mut marks(7, 1, &[(0.0, Kind::Opened), (0.1, Kind::Request)]),
        i64::MAX,
    );
    assert!(Across::default().finish().across.is_none());
    a.add(
        &mut marks(7, 2, &[(0.05, Kind::Opened), (0.2, ended(true, None))]),
        i64::MAX,
    );
    let r = a.finish().across.expect("told");
    assert_eq!(r.out_of_order, 1);
}

/// Past [`MAX_SERVERS`] the servers whose windows ran out make room;
/// while none has, a new one is counted, not followed.
#[test]
fn servers_are_bounded() {
    let mut a = Across::default();
    let n = MAX_SERVERS as u64;
    for k in 0..n {
        let at = k as f64 * 1e-6;
        a.add(
            &mut marks(k, k, &[(at, Kind::Opened), (at, ended(false, Some(1)))]),
            i64::MAX,
        );
    }
    assert_eq!(a.servers.len(), MAX_SERVERS);
    // Still inside every window: no room.
    a.add(
        &mut marks(n, n, &[(0.5, Kind::Opened), (0.5, ended(false, Some(1)))]),
        i64::MAX,
    );
    assert_eq!((a.servers.len(), a.out_of_order), (MAX_SERVERS, 1));
    // Two seconds on, every window has run out: room again, after
    // 1,024 refused.
    for k in 0..1024u64 {
        let at = 2.0 + k as f64 * 1e-6;
        a.add(
            &mut marks(
                n + 1 + k,
                n + 1 + k,
                &[(at, Kind::Opened), (at, ended(true, None))],
            ),
            i64::MAX,
        );
    }
    assert_eq!(a.out_of_order, 1024);
    assert!(a.servers.len() <= 2, "{}", a.servers.len());
}

/// At one instant a response's end comes before a connection's first
/// packet and a request, whatever order they arrive in (as on one
/// connection: the window runs from the end, inclusive).
#[test]
fn at_one_instant_the_end_comes_first() {
    let mut a = Across::default();
    a.add(
        &mut marks(7, 2, &[(1.0, Kind::Opened), (1.0, Kind::Request)]),
        0,
    );
    a.add(
        &mut marks(7, 1, &[(0.0, Kind::Opened), (1.0, ended(true, Some(1)))]),
        i64::MAX,
    );
    let r = a.finish().across.expect("told");
    assert_eq!(
        (r.requests_in_window, r.connections_opened_in_window),
        (1, 1)
    );
    assert_eq!(
        (r.wait_after_429.count, r.wait_after_429.min),
        (1, Some(0.0))
    );
}

/// Over its bound the heap is swept without waiting: memory stays flat.
#[test]
fn the_heap_is_bounded() {
    let mut a = Across::default();
    let n = MAX_PENDING + 10;
    for k in 0..n as u64 {
        a.add(&mut marks(7, k, &[(k as f64, Kind::Opened)]), 0);
    }
    assert_eq!(a.pending.len(), MAX_PENDING);
    assert_eq!(
        a.pending.capacity(),
        MAX_PENDING,
        "never grown past its bound"
    );
    assert_eq!(a.out_of_order, 0, "they came in time order");
    assert_eq!(std::mem::size_of::<Pending>(), 32);
}
