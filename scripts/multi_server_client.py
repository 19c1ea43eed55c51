#!/usr/bin/env python3
"""python-requests client talking to several servers in one run, for
scripts/record-server-captures.sh (captures/multi-server-requests.pcap).

Runs each STEP in the order given; a STEP is MODE:N:URL with MODE

  session    one requests.Session() for N GETs of URL (its pool keeps one
             keep-alive connection per host), closed after the N GETs;
  nosession  N independent requests.get(URL) calls (each makes and closes a
             Session of its own: a new connection, and a new SSLContext, so
             no TLS session to resume).

--resolve NAME:ADDR (repeatable) makes NAME resolve to ADDR inside this
process only, by wrapping socket.getaddrinfo for exactly those names (no
DNS query, no /etc/hosts edit); every other name goes to the real
getaddrinfo. The URL's host name is still what the request uses: SNI
(urllib3 sends the URL's host as server_hostname) and the Host header.

--insecure: verify=False (the recording's throw-away certificate names
localhost, not a.test / b.test), with urllib3's InsecureRequestWarning
silenced. The TLS handshake is the same as with verification (the
certificate is sent and read either way). SSLKEYLOGFILE is honoured by
urllib3 2.x.

Prints one line per response to stderr: step, i, status, body length.
Usage: multi_server_client.py [--insecure] [--resolve NAME:ADDR]... STEP...
"""
import argparse
import socket
import sys

import requests
import urllib3


def install_resolve(mapping):
    """Wrap socket.getaddrinfo so that the names in `mapping` resolve to
    their address (lower-case exact match); all else is passed through."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if isinstance(name, str) and name.lower() in mapping:
            host = mapping[name.lower()]
        return real(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo


def parse_step(text):
    try:
        mode, n, url = text.split(":", 2)
        n = int(n)
    except ValueError:
        raise argparse.ArgumentTypeError("STEP is MODE:N:URL, not %r" % text)
    if mode not in ("session", "nosession") or n < 1:
        raise argparse.ArgumentTypeError("bad STEP %r" % text)
    return mode, n, url


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--insecure", action="store_true")
    ap.add_argument("--resolve", action="append", default=[], metavar="NAME:ADDR")
    ap.add_argument("steps", nargs="+", type=parse_step, metavar="STEP")
    a = ap.parse_args()
    mapping = {}
    for item in a.resolve:
        name, sep, addr = item.partition(":")
        if not sep or not name or not addr:
            ap.error("--resolve is NAME:ADDR, not %r" % item)
        mapping[name.lower()] = addr
    install_resolve(mapping)
    verify = True
    if a.insecure:
        verify = False
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    for k, (mode, n, url) in enumerate(a.steps, 1):
        if mode == "session":
            with requests.Session() as s:
                for i in range(1, n + 1):
                    r = s.get(url, timeout=10, verify=verify)
                    print("step %d %s %d %s -> %d %d" % (k, mode, i, url, r.status_code,
                                                          len(r.content)), file=sys.stderr)
        else:
            for i in range(1, n + 1):
                r = requests.get(url, timeout=10, verify=verify)
                print("step %d %s %d %s -> %d %d" % (k, mode, i, url, r.status_code,
                                                      len(r.content)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
