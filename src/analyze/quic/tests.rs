//! The QUIC table: which packets open a connection (the count tshark's
//! `quic.connection.number` gives), and a handshake sealed here read back
//! into its record; bounds on IDs and connections.

use std::net::SocketAddr;

use super::initial::tests::{crypto_frame, sealed};
use super::retire::MIN_IDLE;
use super::*;
use crate::decode::LongHeader;

const CLIENT: &str = "10.0.0.1:50000";
const SERVER: &str = "10.0.0.2:443";

fn datagram<'a>(from_client: bool, header: LongHeader<'a>, payload: &'a [u8]) -> QuicDatagram<'a> {
    let (c, s): (SocketAddr, SocketAddr) = (CLIENT.parse().unwrap(), SERVER.parse().unwrap());
    let (src, dst) = if from_client { (c, s) } else { (s, c) };
    QuicDatagram {
        src,
        dst,
        overlay: None,
        long: true,
        header,
        payload,
    }
}

fn initial<'a>(dcid: &'a [u8], scid: &'a [u8]) -> LongHeader<'a> {
    LongHeader {
        opening: true,
        dcid,
        scid,
    }
}

/// Feeds a header with no packets behind it; true when it opens a connection.
fn opens(q: &mut QuicTable, header: LongHeader<'_>) -> bool {
    q.datagram(&datagram(true, header, &[]), Timestamp(0), Timestamp(0))
}

#[test]
fn a_connection_counts_once_through_its_handshake_and_a_retry() {
    let mut q = QuicTable::default();
    let (original, client, server, retry) = ([1; 8], [2; 8], [3; 8], [4; 8]);
    assert!(
        opens(&mut q, initial(&original, &client)),
        "the first Initial"
    );
    assert!(!opens(&mut q, initial(&original, &client)), "its second");
    // A Retry (not an Initial) from the server, then the client again.
    let retry_header = LongHeader {
        opening: false,
        dcid: &client,
        scid: &retry,
    };
    assert!(!opens(&mut q, retry_header));
    assert!(!opens(&mut q, initial(&retry, &client)), "after the Retry");
    assert!(
        !opens(&mut q, initial(&client, &server)),
        "the server's Initial"
    );
    assert!(
        !opens(&mut q, initial(&server, &client)),
        "the client's next"
    );
    // A client with an empty source ID: the server answers to none.
    assert!(opens(&mut q, initial(&[9; 8], &[])));
    assert!(
        !opens(&mut q, initial(&[], &[5; 8])),
        "the server's Initial"
    );
    assert!(opens(&mut q, initial(&[6; 20], &[])), "another connection");
    let summary = q.finish().unwrap();
    assert_eq!(summary.connections, 3);
    assert_eq!(summary.list.len(), 3);
}

#[test]
fn ids_and_connections_are_bounded() {
    let mut q = QuicTable::default();
    let mut evicted = 0;
    for i in 0..(MAX_IDS as u32 + 10) {
        let id = i.to_be_bytes().repeat(2);
        assert!(opens(&mut q, initial(&id, &[])));
        assert!(q.ids.len() <= MAX_IDS && q.open.len() <= MAX_OPEN);
        // The oldest pushed out, its record handed over at once.
        for rec in q.take_done() {
            assert_eq!(rec.ended, "evicted");
            assert_eq!(rec.id, evicted + 1);
            evicted += 1;
        }
    }
    let summary = q.finish().unwrap();
    assert_eq!(evicted, MAX_IDS as u64 + 10 - MAX_OPEN as u64);
    let open: Vec<QuicRecord> = q.take_done().collect();
    assert_eq!(open.len(), MAX_OPEN);
    assert!(open.iter().all(|r| r.ended == "open"));
    assert_eq!(summary.connections, MAX_IDS as u64 + 10);
    assert_eq!(summary.list.len() as u64, MAX_LISTED);
    assert_eq!(summary.not_listed, summary.connections - MAX_LISTED);
    assert_eq!(summary.versions.values().sum::<u64>(), summary.connections);
}

/// A connection whose client set no idle timeout ends after `--idle`
/// without datagrams (none without it); one that set one, after that
/// (at least `MIN_IDLE`), whatever `--idle` says. Looked for at most once
/// a second of capture time.
#[test]
fn silent_connections_end_after_their_idle_timeout() {
    let secs = |s: i64| Timestamp(s * 1_000_000_000);
    let mut q = QuicTable::new(None, 0, Some(std::time::Duration::from_secs(10)));
    assert!(q.datagram(
        &datagram(true, initial(&[1; 8], &[]), &[]),
        secs(0),
        secs(0)
    ));
    assert!(q.datagram(
        &datagram(true, initial(&[2; 8], &[]), &[]),
        secs(5),
        secs(0)
    ));
    q.expire(secs(9));
    assert_eq!(q.take_done().count(), 0);
    // The next look is a second later: not at 9.5 s, when it is not due
    // either, but at 10 s, when it is.
    q.expire(Timestamp(9_500_000_000));
    assert_eq!(q.next_scan, Some(secs(10)));
    q.expire(secs(10));
    assert_eq!(q.next_scan, Some(secs(11)));
    let ended: Vec<(u64, String)> = q.take_done().map(|r| (r.id, r.ended.to_string())).collect();
    assert_eq!(ended, [(1, "idle".to_string())]);
    // A client's own timeout, below the least followed: MIN_IDLE.
    q.open.get_mut(&2).unwrap().idle_ns = Some(MIN_IDLE);
    q.expire(secs(11));
    let ended: Vec<u64> = q.take_done().map(|r| r.id).collect();
    assert_eq!(ended, [2]);
    let summary = q.finish().unwrap();
    assert_eq!(
        summary.list.iter().map(|r| r.id).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(q.take_done().count(), 0);

    // Each side's own (RFC 9000 §10.1): the smaller of those set; 0 is
    // none set.
    let mut q = QuicTable::new(None, 0, None);
    for (n, (client, server)) in [(30_000, 10_000), (0, 20_000), (5_000, 0)]
        .iter()
        .enumerate()
    {
        let id = [n as u8 + 1; 8];
        assert!(q.datagram(&datagram(true, initial(&id, &[]), &[]), secs(0), secs(0)));
        let conn = q.open.get_mut(&(n as u64 + 1)).unwrap();
        conn.idle_timeout(0, *client);
        conn.idle_timeout(1, *server);
    }
    q.expire(secs(4));
    assert_eq!(q.take_done().count(), 0);
    for (at, id) in [(5, 3), (10, 1), (20, 2)] {
        q.expire(secs(at));
        let ended: Vec<u64> = q.take_done().map(|r| r.id).collect();
        assert_eq!(ended, [id], "at {at} s");
    }
    q.finish();

    let mut q = QuicTable::new(None, 0, None);
    assert!(q.datagram(
        &datagram(true, initial(&[1; 8], &[]), &[]),
        secs(0),
        secs(0)
    ));
    q.expire(secs(3600));
    assert_eq!(q.take_done().count(), 0, "no timeout: never idle");
    q.finish();
    let ended: Vec<String> = q.take_done().map(|r| r.ended.to_string()).collect();
    assert_eq!(ended, ["open"]);
}

/// A handshake message: its type, a 24-bit length, the body.
fn message(ty: u8, body: &[u8]) -> Vec<u8> {
    let n = body.len();
    [&[ty, (n >> 16) as u8, (n >> 8) as u8, n as u8][..], body].concat()
}

fn v16(d: &[u8]) -> Vec<u8> {
    [&(d.len() as u16).to_be_bytes()[..], d].concat()
}

/// A TLS 1.3 ClientHello to `example.test` offering h3, a PSK and 0-RTT.
fn client_hello() -> Vec<u8> {
    let ext = |t: u16, d: &[u8]| [&t.to_be_bytes()[..], &v16(d)].concat();
    let sni = v16(&[&[0][..], &v16(b"example.test")].concat());
    let exts = [
        ext(0, &sni),
        ext(16, &v16(b"\x02h3")),
        ext(43, &[2, 3, 4]),
        ext(42, &[]),
        ext(41, &[0; 8]),
    ]
    .concat();
    let body = [
        vec![3, 3],
        vec![7; 32],
        vec![0],
        v16(&[0x13, 1]),
        vec![1, 0],
        v16(&exts),
    ]
    .concat();
    message(1, &body)
}

/// A TLS 1.3 ServerHello choosing TLS_AES_128_GCM_SHA256 and, when
/// `resumed`, the PSK.
fn server_hello(resumed: bool) -> Vec<u8> {
    let ext = |t: u16, d: &[u8]| [&t.to_be_bytes()[..], &v16(d)].concat();
    let mut exts = ext(43, &[3, 4]);
    if resumed {
        exts.extend_from_slice(&ext(41, &[0, 0]));
    }
    let body = [
        vec![3, 3],
        vec![9; 32],
        vec![0],
        vec![0x13, 1, 0],
        v16(&exts),
    ]
    .concat();
    message(2, &body)
}

/// A Handshake packet of `len` bytes after its Length field (its payload
/// is not read).
fn handshake_packet(dcid: &[u8], scid: &[u8], len: u8) -> Vec<u8> {
    let mut p = vec![0xe1, 0, 0, 0, 1, dcid.len() as u8];
    p.extend_from_slice(dcid);
    p.push(scid.len() as u8);
    p.extend_from_slice(scid);
    p.extend_from_slice(&[0x40, len]);
    p.extend_from_slice(&vec![0; len.into()]);
    p
}

fn header(bytes: &[u8]) -> LongHeader<'_> {
    let p = long_packets(bytes).next().unwrap();
    LongHeader {
        opening: matches!(p.kind, PacketKind::Initial | PacketKind::ZeroRtt),
        dcid: p.dcid,
        scid: p.scid,
    }
}

#[test]
fn a_sealed_handshake_reads_back_into_its_record() {
    for resumed in [false, true] {
        let (original, client_id, server_id) = ([0xab; 8], [0xc1; 8], [0x5e; 8]);
        let ch = client_hello();
        // The ClientHello in two packets, its second half first.
        let half = ch.len() / 2;
        let second = sealed(
            1,
            &original,
            0,
            (&original, &client_id),
            1,
            &crypto_frame(half as u64, &ch[half..]),
        );
        let first = sealed(
            1,
            &original,
            0,
            (&original, &client_id),
            0,
            &crypto_frame(0, &ch[..half]),
        );
        let server_initial = sealed(
            1,
            &original,
            1,
            (&client_id, &server_id),
            0,
            &crypto_frame(0, &server_hello(resumed)),
        );
        // The server's Initial with its Handshake packet coalesced.
        let server_flight = [
            server_initial,
            handshake_packet(&client_id, &server_id, 200),
        ]
        .concat();
        // The client acknowledges it first (too small for a Finished), then
        // sends its Finished.
        let client_ack = handshake_packet(&server_id, &client_id, 25);
        let client_finished = handshake_packet(&server_id, &client_id, 60);
        let ms = |n: i64| Timestamp(1_700_000_000_000_000_000 + n * 1_000_000);
        let mut q = QuicTable::default();
        let packets = [
            (true, &second, 10),
            (true, &first, 11),
            (false, &server_flight, 30),
            (true, &client_ack, 31),
            (true, &client_finished, 32),
        ];
        for (i, (from_client, bytes, at)) in packets.into_iter().enumerate() {
            let d = datagram(from_client, header(bytes), bytes);
            assert_eq!(q.datagram(&d, ms(at), ms(0)), i == 0, "packet {i}");
        }
        let summary = q.finish().unwrap();
        let rec = &summary.list[0];
        assert_eq!((rec.client.as_str(), rec.server.as_str()), (CLIENT, SERVER));
        assert_eq!(rec.version, "1");
        let (tls, h) = (&rec.tls, &rec.handshake);
        assert_eq!(tls.sni.as_deref(), Some("example.test"));
        assert_eq!(tls.alpn_offered, ["h3"]);
        assert!(tls.psk_offered && tls.early_data_offered);
        assert_eq!(tls.cipher.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
        assert_eq!(tls.version.as_deref(), Some("TLS 1.3"));
        assert_eq!(tls.resumed, Some(resumed));
        assert!(tls.ja4.as_deref().unwrap().starts_with("q13d0105h3_"));
        // The ClientHello is whole at its second packet (the first sent).
        let at = |i: &Option<Instant>| i.as_ref().map(|i| (i.at * 1e3).round() as i64);
        assert_eq!(at(&tls.client_hello), Some(11));
        assert_eq!(at(&tls.server_hello), Some(30));
        assert_eq!(at(&h.client_initial), Some(10));
        assert_eq!(at(&h.server_initial), Some(30));
        assert_eq!(at(&h.client_handshake), Some(32));
        assert_eq!(h.duration.map(|d| (d * 1e3).round() as i64), Some(22));
        let want = QuicPackets {
            initial: 3,
            handshake: 3,
            ..QuicPackets::default()
        };
        assert_eq!(h.packets, want);
        assert_eq!(
            (summary.handshakes_full, summary.handshakes_resumed),
            (u64::from(!resumed), u64::from(resumed))
        );
        assert_eq!(summary.handshake.count, 1);
        assert_eq!(q.held, 0, "nothing held once the hellos are read");
    }
}
