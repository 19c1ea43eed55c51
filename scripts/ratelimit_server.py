#!/usr/bin/env python3
"""Tiny HTTP/1.1 keep-alive server used by record-captures.sh (and, behind
nginx, by record-ratelimit-captures.sh).

A POST's body (Content-Length bytes) is read in full before the answer, as
an application that rate-limits per request does. Every 3rd request
(counted globally across all connections, starting at 1) is answered with
"429 Too Many Requests" + "Retry-After: 1"; all other requests get "200 OK".
Every response carries Content-Length, so connections stay open
(keep-alive) until the client closes them.

With --retry-after-date SECS the Retry-After is an HTTP-date SECS seconds
after the response's own Date (RFC 9110 §10.2.3), not delay-seconds.

Usage: ratelimit_server.py [--host 127.0.0.1] [--port 18429] [--max-seconds 120]
                           [--retry-after-date SECS]
The server exits on its own after --max-seconds (safety bound).
"""
import argparse
import email.utils
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_lock = threading.Lock()
_count = 0
_date_after = None  # --retry-after-date


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ratelimit-server/1.0"

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length, 1 << 20))
        self.do_GET()

    def do_GET(self):
        global _count
        with _lock:
            _count += 1
            n = _count
        if n % 3 == 0:
            body = b"rate limited, retry later\n"
            if _date_after is None:
                self.send_response(429, "Too Many Requests")
                self.send_header("Retry-After", "1")
            else:
                # Date and Retry-After from the same second.
                now = int(time.time())
                self.log_request(429)
                self.send_response_only(429, "Too Many Requests")
                self.send_header("Server", self.version_string())
                self.send_header("Date", email.utils.formatdate(now, usegmt=True))
                later = email.utils.formatdate(now + _date_after, usegmt=True)
                self.send_header("Retry-After", later)
        else:
            body = ("ok request %d\n" % n).encode()
            self.send_response(200, "OK")
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):  # keep stderr quiet-ish but useful
        super().log_message(fmt, *args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18429)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--retry-after-date", type=int, default=None)
    a = ap.parse_args()
    global _date_after
    _date_after = a.retry_after_date
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    t = threading.Timer(a.max_seconds, srv.shutdown)
    t.daemon = True
    t.start()
    srv.serve_forever(poll_interval=0.2)
    srv.server_close()


if __name__ == "__main__":
    main()
