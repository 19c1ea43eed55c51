#!/usr/bin/env python3
"""Tiny HTTP/3 (QUIC) client on aioquic, used by record-quic-captures.sh.

Owns only what it is given on the command line: the key log (--keylog) it
appends to and the session-ticket file (--ticket) it reads and writes.
Touches no other file.

Opens --connections QUIC connections one after the other to HOST:PORT
(SNI --server-name, ALPN h3) and sends --requests HTTP/3 GETs on each, in
sequence (each answered before the next is sent): /, /2, /3, ... The
session ticket the server sends on a connection is kept (and written to
--ticket, pickled) and offered by the next connection, which then resumes
(PSK). A ticket already in --ticket is offered by the first one too.
With --zero-rtt, a connection that offers a ticket sends its first request
at once, in 0-RTT (early data) packets, before the handshake completes;
without it, the ticket is offered without the early_data extension (a
plain PSK resumption, no 0-RTT packets). With --cipher, the ClientHello
offers that one TLS 1.3 cipher suite only (aioquic's name, e.g.
CHACHA20_POLY1305_SHA256), so the server must choose it. With
--cookie-bytes N, each request carries a `cookie` header of N bytes (hex,
too long for QPACK's dynamic table), so its HEADERS frame spans several
packets; with --query-bytes N, each path ends with `?q=` and N bytes (hex),
so the :path field itself spans them.
Prints one line a response to stdout; exits 1 if any request failed.

Usage: quic_client.py HOST PORT --cafile CERT [--server-name localhost]
                      [--requests 3] [--connections 1] [--ticket FILE]
                      [--zero-rtt] [--keylog FILE] [--timeout 10]
                      [--post-every N] [--cipher SUITE] [--cookie-bytes N]
                      [--query-bytes N]
"""
import argparse
import asyncio
import dataclasses
import hashlib
import os
import pickle
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived, H3Event
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, QuicEvent
from aioquic.tls import CipherSuite


def padding(name: bytes, size: int) -> list:
    """A header field `name` whose value is `size` bytes that neither
    Huffman coding nor repetition shrinks much (hex of SHA-256 chained), or
    none for size 0."""
    if size <= 0:
        return []
    value, block = b"", b"handshakes"
    while len(value) < size:
        block = hashlib.sha256(block).hexdigest().encode()
        value += block
    return [(name, value[:size])]


class H3Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.http = H3Connection(self._quic)
        self.handshake = None  # the HandshakeCompleted event
        self._waiters = {}  # stream id -> (future, [events])

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            self.handshake = event
        for h3_event in self.http.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if isinstance(event, (HeadersReceived, DataReceived)):
            waiter = self._waiters.get(event.stream_id)
            if waiter is None:
                return
            waiter[1].append(event)
            if event.stream_ended:
                del self._waiters[event.stream_id]
                if not waiter[0].done():
                    waiter[0].set_result(waiter[1])

    async def get(self, authority: str, path: str, body: bytes = None, extra=()):
        """A GET, or with `body` a POST of it; `extra` header fields after."""
        stream_id = self._quic.get_next_available_stream_id()
        self.http.send_headers(
            stream_id,
            [
                (b":method", b"GET" if body is None else b"POST"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", path.encode()),
                (b"user-agent", b"quic_client.py (aioquic)"),
            ]
            + list(extra),
            end_stream=body is None,
        )
        if body is not None:
            self.http.send_data(stream_id, body, end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        self._waiters[stream_id] = (fut, [])
        self.transmit()
        events = await fut
        status, body = None, b""
        for e in events:
            if isinstance(e, HeadersReceived):
                status = dict(e.headers).get(b":status", b"?").decode()
            elif isinstance(e, DataReceived):
                body += e.data
        return stream_id, status, body


async def one_connection(args, index: int, ticket, keylog) -> tuple:
    new_tickets = []
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        server_name=args.server_name,
        secrets_log_file=keylog,
    )
    config.load_verify_locations(args.cafile)
    if args.cipher:
        config.cipher_suites = [CipherSuite[args.cipher]]
    zero_rtt = args.zero_rtt and ticket is not None
    if ticket is not None:
        if not zero_rtt:
            # Without --zero-rtt, resume without offering early data: a ticket
            # that allows it would make the ClientHello carry the early_data
            # extension and aioquic send its HTTP/3 control streams in 0-RTT.
            ticket = dataclasses.replace(ticket, max_early_data_size=None)
        config.session_ticket = ticket
    authority = f"{args.server_name}:{args.port}"
    failures = 0
    async with connect(
        args.host,
        args.port,
        configuration=config,
        create_protocol=H3Client,
        session_ticket_handler=new_tickets.append,
        wait_connected=not zero_rtt,
    ) as client:
        for n in range(1, args.requests + 1):
            path = "/" if n == 1 else f"/{n}"
            post = args.post_every and n % args.post_every == 0
            if post:
                path = "/api"
            sent = b'{"n": %d}' % n if post else None
            for _, value in padding(b"q", args.query_bytes):
                path += "?q=" + value.decode()
            extra = padding(b"cookie", args.cookie_bytes)
            stream_id, status, body = await client.get(authority, path, sent, extra)
            hs = client.handshake
            print(
                f"conn={index} stream={stream_id} {'POST' if post else 'GET'} {path} -> {status} {len(body)} bytes"
                f" resumed={int(bool(hs and hs.session_resumed))}"
                f" early_data_accepted={int(bool(hs and hs.early_data_accepted))}"
                f" zero_rtt_offered={int(zero_rtt and n == 1)}",
                flush=True,
            )
            if status != ("429" if post else "200"):
                failures += 1
        # give the server's NewSessionTicket a moment if it has not come yet
        for _ in range(20):
            if new_tickets:
                break
            await asyncio.sleep(0.05)
        client.close()
        await client.wait_closed()
    return (new_tickets[-1] if new_tickets else None), failures


async def main(args) -> int:
    # A line at a time, as browsers and curl write SSLKEYLOGFILE: a live
    # capture following the log finds each secret as it is derived.
    keylog = open(args.keylog, "a", buffering=1) if args.keylog else None
    ticket = None
    if args.ticket and os.path.exists(args.ticket):
        with open(args.ticket, "rb") as f:
            ticket = pickle.load(f)
    failures = 0
    for index in range(1, args.connections + 1):
        new_ticket, failed = await asyncio.wait_for(
            one_connection(args, index, ticket, keylog), args.timeout
        )
        failures += failed
        if new_ticket is not None:
            ticket = new_ticket
            if args.ticket:
                with open(args.ticket, "wb") as f:
                    pickle.dump(ticket, f)
        else:
            print(f"conn={index}: no session ticket received", file=sys.stderr)
        if index < args.connections:
            await asyncio.sleep(args.pause)
    return 1 if failures else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--cafile", required=True)
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--requests", type=int, default=3)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--ticket")
    p.add_argument("--zero-rtt", action="store_true")
    p.add_argument("--post-every", type=int, default=0,
                   help="make every Nth request a POST to /api (answered 429)")
    p.add_argument("--keylog")
    p.add_argument("--cipher", choices=[c.name for c in CipherSuite],
                   help="offer only this TLS 1.3 cipher suite")
    p.add_argument("--cookie-bytes", type=int, default=0,
                   help="send a cookie header this long (too long for QPACK's table, "
                        "so each request's HEADERS spans several packets)")
    p.add_argument("--query-bytes", type=int, default=0,
                   help="end every path with ?q= and this many bytes (a :path too long "
                        "for one packet)")
    p.add_argument("--pause", type=float, default=0.5, help="seconds between connections")
    p.add_argument("--timeout", type=float, default=10, help="seconds per connection")
    sys.exit(asyncio.run(main(p.parse_args())))
