#!/usr/bin/env python3
"""Writes hostile captures (classic pcap, raw IPv4) to stdout, streamed, for
measuring handshakes' memory and time on inputs that try to exhaust it:

  syn-flood N        N SYNs from N distinct source ports/addresses (no answers)
  garbage BYTES      one connection streaming BYTES of random-looking payload
  tls-16mb           a TLS handshake record header claiming 16 MB, then data
  ooo-holes N        one connection, N small segments delivered with holes
                     (every other segment missing) in reverse order
  frag-flood N       N first IPv4 fragments (1 400 bytes each) of distinct
                     datagrams whose other fragments never come
  pause N            N short HTTP connections (handshake, one request and
                     response, FIN both ways) opened over one second, then,
                     after a 3 s pause, one SYN: at that packet the close
                     linger of all N runs out at once (records waiting to be
                     written, docs/performance.md, *Memory*)
  requests N         one cleartext HTTP/1.1 connection carrying N requests,
                     pipelined 50 to a segment, each answered 429 (past the
                     requests a record lists, their statuses and latencies
                     are held in bounded memory)
  quic-flood N       N QUIC Initial datagrams (1 200 bytes) from N client
                     ports, each to a destination ID never seen before: N
                     connections, each costing its Initial keys and a packet
                     that does not open (the bytes are not sealed)

Usage: scripts/hostile.py KIND ARG | handshakes analyze -
"""
import struct
import sys

out = sys.stdout.buffer
MSS = 1400


def header():
    out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 101))


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def packet(ts_ns, src, dst, sport, dport, seq, ack, flags, payload=b""):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    frame = ip + tcp + payload
    out.write(struct.pack("<IIII", ts_ns // 10**9, ts_ns % 10**9, len(frame), len(frame)))
    out.write(frame)


C = bytes([10, 0, 0, 1])
S = bytes([10, 0, 0, 2])
SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01
T0 = 1_700_000_000 * 10**9


def handshake(t):
    packet(t, C, S, 40000, 443, 1000, 0, SYN)
    packet(t + 1000, S, C, 443, 40000, 5000, 1001, SYN | ACK)
    packet(t + 2000, C, S, 40000, 443, 1001, 5001, ACK)


def syn_flood(n):
    for i in range(n):
        src = bytes([10, 1 + (i >> 16) % 250, (i >> 8) & 0xFF, i & 0xFF])
        packet(T0 + i * 1000, src, S, 1024 + i % 60000, 443, i * 7919, 0, SYN)


def garbage(total):
    handshake(T0)
    block = bytes((i * 131 + 7) % 256 for i in range(MSS))
    seq, t, sent = 1001, T0 + 10_000, 0
    while sent < total:
        packet(t, C, S, 40000, 443, seq, 5001, ACK | PSH, block)
        seq += MSS
        sent += MSS
        t += 1000


def tls_16mb():
    handshake(T0)
    # Handshake record header claiming 16 MB (0xFFFFFF is not a valid record
    # length; 0xFFFF is the most a header can say, the message header claims 16 MB).
    rec = bytes([22, 3, 3, 0xFF, 0xFF, 1, 0xFF, 0xFF, 0xFF])
    seq, t = 1001, T0 + 10_000
    packet(t, C, S, 40000, 443, seq, 5001, ACK | PSH, rec)
    seq += len(rec)
    block = b"\x00" * MSS
    for _ in range(20000):
        t += 1000
        packet(t, C, S, 40000, 443, seq, 5001, ACK | PSH, block)
        seq += MSS


def ooo_holes(n):
    handshake(T0)
    block = b"x" * 100
    t = T0 + 10_000
    for i in reversed(range(0, 2 * n, 2)):
        packet(t, C, S, 40000, 443, 1001 + i * 100, 5001, ACK | PSH, block)
        t += 1000


def frag_flood(n):
    """n first fragments of distinct datagrams that never complete."""
    payload = b"f" * MSS
    for i in range(n):
        src = bytes([10, 2 + (i >> 32) % 250, (i >> 24) & 0xFF, (i >> 16) & 0xFF])
        total = 20 + len(payload)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, i & 0xFFFF, 0x2000, 64, 6, 0, src, S)
        frame = ip + payload
        t = T0 + i * 1000
        out.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)))
        out.write(frame)


def pause(n):
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    response = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    for i in range(max(n, 1)):
        client = bytes([10, 1 + i // 60000, (i // 250) % 240, 1 + i % 250])
        port = 1024 + i % 60000
        t = T0 + i * 10**9 // max(n, 1)
        c, s = 1000, 5000
        c2, s2 = c + 1 + len(request), s + 1 + len(response)
        packet(t, client, S, port, 80, c, 0, SYN)
        packet(t + 10_000, S, client, 80, port, s, c + 1, SYN | ACK)
        packet(t + 20_000, client, S, port, 80, c + 1, s + 1, ACK)
        packet(t + 30_000, client, S, port, 80, c + 1, s + 1, PSH | ACK, request)
        packet(t + 40_000, S, client, 80, port, s + 1, c2, PSH | ACK, response)
        packet(t + 50_000, client, S, port, 80, c2, s2, FIN | ACK)
        packet(t + 60_000, S, client, 80, port, s2, c2 + 1, FIN | ACK)
        packet(t + 70_000, client, S, port, 80, c2 + 1, s2 + 1, ACK)
    packet(T0 + 4 * 10**9, bytes([10, 250, 9, 9]), S, 40000, 80, 1, 0, SYN)


def requests(n):
    """One HTTP/1.1 connection: n requests, 50 to a segment, each batch
    answered 429 in one segment 100 µs later."""
    request = b"POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    response = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n"
    packet(T0, C, S, 40000, 80, 1000, 0, SYN)
    packet(T0 + 1000, S, C, 80, 40000, 5000, 1001, SYN | ACK)
    packet(T0 + 2000, C, S, 40000, 80, 1001, 5001, ACK)
    c, s, t = 1001, 5001, T0 + 10_000
    for done in range(0, n, 50):
        batch = min(50, n - done)
        up, down = request * batch, response * batch
        packet(t, C, S, 40000, 80, c, s, ACK | PSH, up)
        c += len(up)
        packet(t + 100_000, S, C, 80, 40000, s, c, ACK | PSH, down)
        s += len(down)
        t += 200_000
    packet(t, C, S, 40000, 80, c, s, FIN | ACK)
    packet(t + 1000, S, C, 80, 40000, s, c + 1, FIN | ACK)
    packet(t + 2000, C, S, 40000, 80, c + 1, s + 1, ACK)


def udp(ts_ns, src, dst, sport, dport, payload):
    total = 28 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    frame = ip + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    out.write(struct.pack("<IIII", ts_ns // 10**9, ts_ns % 10**9, len(frame), len(frame)))
    out.write(frame)


def quic_flood(n):
    """n client Initials, version 1, each to a new 8-byte destination ID,
    a 1 166-byte protected payload of pseudo-random bytes."""
    body = bytes((i * 131 + 7) & 0xFF for i in range(1166))
    for i in range(n):
        dcid = struct.pack("!Q", 0x51C0_0000_0000_0000 + i)
        head = bytes([0xC3]) + struct.pack("!I", 1) + bytes([8]) + dcid + bytes([0, 0])
        head += struct.pack("!H", 0x4000 | len(body))
        udp(T0 + i * 10_000, C, S, 1024 + i % 60000, 443, head + body)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    kind = sys.argv[1]
    arg = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    header()
    kinds = {
        "syn-flood": syn_flood,
        "garbage": garbage,
        "ooo-holes": ooo_holes,
        "frag-flood": frag_flood,
        "pause": pause,
        "requests": requests,
        "quic-flood": quic_flood,
    }
    kinds.get(kind, lambda _: tls_16mb())(arg)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        pass
