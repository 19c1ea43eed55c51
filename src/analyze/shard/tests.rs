//! The shard's own tests: its queues, the table's handles, pausing when
//! it holds its slice of records, and the size of a connection.

use super::*;
use crate::decode::TcpFlags;

fn syn(port: u16) -> (u64, Box<Connection>) {
    let seg = TcpSegment {
        src: format!("10.0.0.1:{port}").parse().expect("addr"),
        dst: "10.0.0.2:443".parse().expect("addr"),
        seq: 1,
        ack: 0,
        flags: TcpFlags(TcpFlags::SYN),
        window: 100,
        payload: &[],
        payload_len: 0,
        overlay: None,
    };
    let key = FlowKey::ordered(seg.src, seg.dst);
    let conn = Box::new(Connection::new(u64::from(port), Timestamp(0), &seg, key));
    (Table::default().hash(conn.key()), conn)
}

#[test]
fn queue_entries_of_gone_connections_go_once_the_queue_doubles_the_table() {
    let mut table = Table::default();
    let mut queue = VecDeque::new();
    for port in 1..=2000u16 {
        let (_, conn) = syn(port);
        let hash = table.hash(conn.key());
        queue.push_back(Table::handle(hash, u64::from(port)));
        if port % 100 == 0 {
            table.insert(hash, conn);
        }
    }
    // A reused tuple: the same key, another connection.
    let (_, mut conn) = syn(700);
    let hash = table.hash(conn.key());
    assert!(table.remove(hash, conn.key()).is_some());
    conn.id = 99_999;
    table.insert(hash, conn);
    // 2 000 entries for 20 connections: over 2 × 20 + 1 024, so those
    // of connections gone (or replaced) go.
    forget_gone(&mut queue, &table, |h| *h);
    let kept: Vec<u64> = queue.iter().map(|h| h.id).collect();
    let want: Vec<u64> = (1..=20).map(|k| k * 100).filter(|&k| k != 700).collect();
    assert_eq!(kept, want);
    // Under the threshold nothing is looked at.
    let (_, conn) = syn(3);
    queue.push_back(Table::handle(table.hash(conn.key()), 3));
    forget_gone(&mut queue, &table, |h| *h);
    assert_eq!(queue.len(), 20);
}

/// A shard that may hold two records pauses after two lingers run out at
/// one packet, and each time its events are taken goes on with the rest —
/// at the same position, in the same order — and only then with the
/// packet.
#[test]
fn a_shard_pauses_after_its_slice_and_goes_on_where_it_stopped() {
    let mut shard = Shard::new(Config::default(), 100);
    shard.hold_at_most(2);
    for port in 1..=5u16 {
        let (_, conn) = syn(port);
        let hash = shard.table.hash(conn.key());
        shard.table.insert(hash, conn);
        let handle = Table::handle(hash, u64::from(port));
        shard
            .finishing
            .push_back((Timestamp(10 + i64::from(port)), handle, u64::from(port)));
    }
    let nows = [Timestamp(1), Timestamp(100)];
    let clock = Clock {
        base: 6,
        nows: &nows,
        origin: Timestamp(0),
    };
    // Nothing is due at position 6.
    assert!(shard.advance(6, &clock));
    let mut fired = Vec::new();
    let mut pauses = 0;
    while !shard.advance(7, &clock) {
        pauses += 1;
        assert!(shard.paused());
        let events = shard.take_events();
        assert_eq!(events.len(), 2);
        fired.extend(events.iter().map(Event::order));
    }
    fired.extend(shard.take_events().iter().map(Event::order));
    assert_eq!(pauses, 2);
    let want: Vec<Order> = (1..=5u64)
        .map(|k| Order {
            at: 7,
            phase: Phase::Lingered,
            k1: 10 + k as i64,
            k2: k,
        })
        .collect();
    assert_eq!(fired, want);
    assert_eq!(shard.table.len(), 0);
}

#[test]
fn a_handle_finds_its_connection_and_no_other() {
    let mut table = Table::default();
    let (_, conn) = syn(1);
    let key = *conn.key();
    let hash = table.hash(&key);
    table.insert(hash, conn);
    let handle = Table::handle(hash, 1);
    assert!(table.get(handle).is_some());
    assert!(table.get(Table::handle(hash, 2)).is_none());
    assert!(table.get_mut(hash, &key).is_some());
    assert_eq!(table.handles(|_| true), vec![handle]);
    assert!(table.take(handle).is_some());
    assert!(table.get(handle).is_none());
    assert_eq!(table.len(), 0);
}

/// A SYN flood fills the table with half-open connections: each must stay
/// small (streams and analyzers are boxed and made only with payload).
/// 448 with its 48-byte tuple, which the table's slot no longer holds;
/// 352 since the tuple is the only copy of the endpoints; 320 (an
/// allocation size class less) since the stages of its payload are one
/// enum, its anomalies are boxed and the SYN's retransmission count sits
/// in its stamp's padding.
#[test]
fn half_open_connections_are_small() {
    let size = std::mem::size_of::<Connection>();
    assert!(size <= 320, "Connection is {size} bytes");
}
