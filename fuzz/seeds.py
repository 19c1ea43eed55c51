#!/usr/bin/env python3
"""Builds seed inputs for the stream fuzz targets (tls_stream, http) from the
real captures, with tshark: each TCP connection's two byte streams, in the
order tshark's "Follow TCP stream" gives them, in the step format of
fuzz/src/harness.rs (see docs/fuzzing.md).

    python3 fuzz/seeds.py            # writes fuzz/corpus/{tls_stream,http}/seed-*

and for the certificate target, Certificate bodies tshark reads from the
captures (TLS 1.2's in the clear, TLS 1.3's with the key log), the same
compressed with zlib and (with the zstd tool) zstd, and the brotli one
Cloudflare sent in the peer corpus (fuzz/corpus/certificate/seed-*).
"""
import glob
import hashlib
import os
import struct
import subprocess
import sys
import zlib

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


def u24(n):
    return struct.pack(">I", n)[1:]


def certificates(path, keylog=None, tls13=False):
    """The DER certificates of the first Certificate message tshark reads."""
    args = ["tshark", "-r", path, "-Y", "tls.handshake.type == 11", "-T", "fields",
            "-E", "occurrence=a", "-E", "aggregator=|", "-e", "tls.handshake.certificate"]
    if keylog:
        args[1:1] = ["-o", f"tls.keylog_file:{keylog}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    first = out.splitlines()[0]
    ders = [bytes.fromhex(c.replace(":", "")) for c in first.split("|")]
    entries = b"".join(u24(len(d)) + d + (b"\0\0" if tls13 else b"") for d in ders)
    return (b"\0" if tls13 else b"") + u24(len(entries)) + entries


def compressed(algorithm, plain, packed):
    return struct.pack(">H", algorithm) + u24(len(plain)) + u24(len(packed)) + packed


def certificate_seeds(caps):
    twelve = certificates(f"{caps}/tls12-curl-3-new-connections.pcap")
    thirteen = certificates(f"{caps}/tls13-curl-keepalive-5.pcap",
                            f"{caps}/tls13-curl-keepalive-5.keylog", tls13=True)
    seeds = [b"\0" + twelve, b"\1" + thirteen,
             b"\2" + compressed(1, thirteen, zlib.compress(thirteen, 9))]
    zstd = subprocess.run(["zstd", "-q", "-c", "-19"], input=thirteen,
                          capture_output=True, check=False)
    if zstd.returncode == 0:
        seeds.append(b"\2" + compressed(3, thirteen, zstd.stdout))
    cloudflare = os.path.join(ROOT, "..", "shared", "corpus", "ja4", "pcap",
                              "chrome-cloudflare-quic-with-secrets.pcapng")
    out = subprocess.run(
        ["tshark", "-r", cloudflare, "-Y", "tcp && tls.handshake.type == 25", "-T", "fields",
         "-e", "tls.compress_certificate.algorithm",
         "-e", "tls.compress_certificate.uncompressed_length",
         "-e", "tls.compress_certificate.compressed_certificate_message"],
        capture_output=True, text=True, check=False).stdout.split()
    if len(out) == 3:
        packed = bytes.fromhex(out[2].replace(":", ""))
        seeds.append(b"\2" + struct.pack(">H", int(out[0])) + u24(int(out[1]))
                     + u24(len(packed)) + packed)
    for seed in seeds:
        write("certificate", seed)
    return len(seeds)


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
    n += certificate_seeds(caps)
    print(f"{n} seeds", file=sys.stderr)


if __name__ == "__main__":
    main()
