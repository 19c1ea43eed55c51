#!/usr/bin/env python3
# Writes a classic pcap of N short HTTP connections (handshake, one request
# and response, FIN both ways, all acknowledged) opened evenly over one
# second, then, after a 3 s pause, one more SYN: at that packet the close
# linger of every one of them runs out at once. The worst case for records
# waiting to be written (docs/performance.md, *Memory*, records in slices):
#
#   scripts/pause-capture.py 100000 /tmp/pause.pcap
#   /usr/bin/time -f '%M KiB' target/release/handshakes analyze -q -T jsonl /tmp/pause.pcap >/dev/null
#
# Uses only the standard library; the packets carry valid IPv4 checksums.
import struct
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: pause-capture.py CONNECTIONS OUT.pcap")
    n = int(sys.argv[1])
    if not 1 <= n <= 1_000_000:
        sys.exit("pause-capture.py: CONNECTIONS must be 1 to 1000000")
    with open(sys.argv[2], "wb") as out:
        write(out, n)


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def write(out, n):
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))

    def packet(t, src, dst, sport, dport, seq, ack, flags, payload=b""):
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
        tcp += payload
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        frame = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + ip + tcp
        sec, usec = divmod(t, 1_000_000)
        out.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)

    syn, ack, fin, psh = 2, 16, 1, 8
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    response = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    t0 = 1_700_000_000 * 1_000_000
    server = bytes([10, 0, 0, 1])
    for k in range(n):
        client = bytes([10, 1 + k // 60000, (k // 250) % 240, 1 + k % 250])
        port = 1024 + k % 60000
        t = t0 + k * 1_000_000 // n
        c, s = 1000, 5000
        packet(t, client, server, port, 80, c, 0, syn)
        packet(t + 10, server, client, 80, port, s, c + 1, syn | ack)
        packet(t + 20, client, server, port, 80, c + 1, s + 1, ack)
        packet(t + 30, client, server, port, 80, c + 1, s + 1, psh | ack, request)
        packet(t + 40, server, client, 80, port, s + 1, c + 1 + len(request), psh | ack, response)
        c2, s2 = c + 1 + len(request), s + 1 + len(response)
        packet(t + 50, client, server, port, 80, c2, s2, fin | ack)
        packet(t + 60, server, client, 80, port, s2, c2 + 1, fin | ack)
        packet(t + 70, client, server, port, 80, c2 + 1, s2 + 1, ack)
    packet(t0 + 4_000_000, bytes([10, 250, 9, 9]), server, 40000, 80, 1, 0, syn)


if __name__ == "__main__":
    main()
