#!/usr/bin/env python3
"""TCP server used by record-captures.sh to produce connections ending in RST.

For each accepted connection it reads the HTTP request head (up to the blank
line, at most 64 KiB / 5 s), then closes the socket with SO_LINGER {on, 0},
which makes the kernel send a RST instead of a FIN. No HTTP response is sent.

Usage: rst_server.py [--host 127.0.0.1] [--port 18499] [--max-seconds 120]
"""
import argparse
import socket
import struct
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18499)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    a = ap.parse_args()
    deadline = time.monotonic() + a.max_seconds
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.host, a.port))
    ls.listen(8)
    ls.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        c.settimeout(5)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf and len(buf) < 65536:
                chunk = c.recv(4096)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            pass
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    ls.close()


if __name__ == "__main__":
    main()
