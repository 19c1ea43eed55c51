#!/usr/bin/env python3
"""HTTP/1.1 pipelining client used by record-client-captures.sh.

  pipeline_client.py HOST PORT PATH [N]

Opens ONE TCP connection to HOST:PORT, writes N (default 3) `GET PATH
HTTP/1.1` requests with a single send() call (so on loopback they normally
travel in one TCP segment), then reads the N responses back to back. Every
response must be framed by Content-Length (no chunked support: this is for a
static file on nginx). Then the client closes the connection (client FIN
first). Socket timeout 10 s; bounded by N <= 20.
"""
import socket
import sys


def read_response(sock, buf):
    """Read one Content-Length framed response; return (status, body, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed before response head")
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        if name.strip().lower() == "transfer-encoding":
            raise RuntimeError("chunked responses not supported")
    if length is None:
        raise RuntimeError("response without Content-Length")
    while len(buf) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed inside body")
        buf += chunk
    return status, buf[:length], buf[length:]


def main():
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    if not 1 <= n <= 20:
        sys.exit("N must be 1..20")
    req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: pipeline-client/1.0\r\n"
           "Accept: */*\r\n\r\n" % (path, host, port)).encode("ascii")
    with socket.create_connection((host, port), timeout=10) as sock:
        sent = sock.send(req * n)          # ONE send() call for all requests
        if sent != len(req) * n:
            sys.exit("short send: %d of %d bytes" % (sent, len(req) * n))
        buf = b""
        for i in range(n):
            status, body, buf = read_response(sock, buf)
            print("response %d: %d (%d bytes)" % (i + 1, status, len(body)), file=sys.stderr)
            if status != 200:
                sys.exit(1)
        if buf:
            sys.exit("unexpected %d trailing bytes" % len(buf))


if __name__ == "__main__":
    main()
