//! The shard's own tests: its queues, the table's handles, the text it
//! encodes for the gatherer, and the size of a connection.

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

/// Finalised records are encoded on the shard until the text held
/// for the gatherer reaches [`ENCODED_HELD`]; the rest go unencoded
/// (the writing thread encodes them), and taking the events starts over.
#[test]
fn records_are_encoded_up_to_the_bytes_held() {
    fn big(_: &crate::record::ConnectionRecord) -> Option<Vec<u8>> {
        Some(vec![b'x'; 100 << 10])
    }
    let mut shard = Shard::new(Config::default(), 100);
    shard.encoder = Some(big);
    let order = |k| Order {
        at: k,
        phase: Phase::End,
        k1: 0,
        k2: k,
    };
    let encoded = |events: &[Event]| -> Vec<bool> {
        events
            .iter()
            .map(|e| {
                matches!(
                    e,
                    Event::Finished {
                        done: Done::Encoded(_),
                        ..
                    }
                )
            })
            .collect()
    };
    for port in 1..=5u16 {
        shard.finalize(syn(port).1, CloseKind::Open, order(u64::from(port)));
    }
    // 0, 100 and 200 KiB held before each of the first three.
    assert_eq!(
        encoded(&shard.take_events()),
        [true, true, true, false, false]
    );
    shard.finalize(syn(6).1, CloseKind::Open, order(6));
    assert_eq!(encoded(&shard.take_events()), [true]);
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
/// 352 since the tuple is the only copy of the endpoints.
#[test]
fn half_open_connections_are_small() {
    let size = std::mem::size_of::<Connection>();
    assert!(size <= 352, "Connection is {size} bytes");
}
