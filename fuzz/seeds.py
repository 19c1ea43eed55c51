#!/usr/bin/env python3
"""Builds seed inputs for the stream fuzz targets (tls_stream, http) from the
real captures, with tshark: each TCP connection's two byte streams, in the
order tshark's "Follow TCP stream" gives them, in the step format of
fuzz/src/harness.rs (see docs/fuzzing.md).

    python3 fuzz/seeds.py            # writes fuzz/corpus/{tls_stream,http}/seed-*
"""
import glob
import hashlib
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_SEED = 8 * 1024  # stream bytes per seed: the handshake and a few requests
STREAMS_PER_FILE = 3


def streams(path):
    out = subprocess.run(
        ["tshark", "-r", path, "-T", "fields", "-e", "tcp.stream"],
        capture_output=True, text=True, check=True).stdout
    ids = sorted({int(x) for x in out.split() if x.isdigit()})
    return ids[:STREAMS_PER_FILE]


def follow(path, stream):
    """[(side, bytes)] with side 0 for the connection's first node."""
    out = subprocess.run(
        ["tshark", "-r", path, "-q", "-z", f"follow,tcp,raw,{stream}"],
        capture_output=True, text=True, check=True).stdout
    chunks, body = [], False
    for line in out.splitlines():
        if line.startswith("Node 1:"):
            body = True
            continue
        if not body or line.startswith("====="):
            continue
        side = 1 if line.startswith("\t") else 0
        hexdata = line.strip()
        if hexdata:
            chunks.append((side, bytes.fromhex(hexdata)))
    return chunks


def encode(header, chunks):
    out, total = bytearray(header), 0
    for side, data in chunks:
        if total >= MAX_SEED:
            break
        data = data[: MAX_SEED - total][:0xFFFF]
        total += len(data)
        out += bytes([side | (1 << 2)]) + struct.pack("<H", len(data)) + data
    return bytes(out)


def write(target, seed):
    d = os.path.join(ROOT, "fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    name = "seed-" + hashlib.sha1(seed).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(seed)


def main():
    caps = os.path.join(ROOT, "captures")
    tls = sorted(glob.glob(f"{caps}/tls*.pcap") + glob.glob(f"{caps}/java-*.pcap")
                 + glob.glob(f"{caps}/h2-*.pcap") + glob.glob(f"{caps}/httpx-*.pcap")
                 + glob.glob(f"{caps}/apache-*.pcap") + glob.glob(f"{caps}/okhttp-*.pcap"))
    http = sorted(glob.glob(f"{caps}/http-*.pcap*"))
    h2c = sorted(glob.glob(f"{caps}/h2c-*.pcap"))
    n = 0
    for path in tls:
        for s in streams(path):
            write("tls_stream", encode(b"\x03\x07", follow(path, s)))
            n += 1
    for path in http:
        for s in streams(path):
            write("http", encode(b"\x00\x07", follow(path, s)))
            n += 1
    for path in h2c:
        for s in streams(path):
            write("http", encode(b"\x01\x07", follow(path, s)))
            n += 1
    print(f"{n} seeds", file=sys.stderr)


if __name__ == "__main__":
    main()
