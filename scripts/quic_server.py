#!/usr/bin/env python3
"""Tiny HTTP/3 (QUIC) server on aioquic, used by record-quic-captures.sh.

Owns only what it is given on the command line: the UDP port it listens on,
the request log (--log) and the key log (--keylog) it appends to. Touches
no other file.

Answers every request on its own, with no files behind it:
  GET /            200, a 60-byte text body
  GET /page.html   200, a small HTML page with one image (/1), for Chromium
  GET /N           200, a text body naming N (any other path: the same)
  POST ...         429 (body read in full first), "Retry-After: 1"
Each request is logged, one line, to --log: the time (epoch seconds), the
client's address and port, the stream, method, path, status, whether the
handshake had completed when the request was answered (`pending`: the
request came in 0-RTT packets) and whether the connection resumed a
session / accepted early data.

Session tickets are kept in memory (one use each), so a client may resume
(PSK) and send 0-RTT early data on its second connection.

Usage: quic_server.py --cert CERT --key KEY [--host 127.0.0.1 ...]
                      [--port 18453] [--log FILE] [--keylog FILE]
                      [--max-seconds 120] [--header-bytes N]
With --header-bytes N every response carries an x-padding header of N
bytes (hex, too long for QPACK's dynamic table), so its HEADERS frame
spans several packets.
The server exits on its own after --max-seconds (safety bound).
"""
import argparse
import asyncio
import time

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived, H3Event
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, ProtocolNegotiated, QuicEvent

from quic_client import padding  # beside this file

LOG = None  # the request log, a text file opened for append
HEADER_BYTES = 0  # --header-bytes

PAGE = (
    b'<!DOCTYPE html><html><head><title>h3</title>'
    b'<link rel="icon" href="data:,"></head><body>'
    b'<h1>h3 test page</h1><img src="/1"></body></html>\n'
)


class TicketStore:
    """Session tickets by ticket id; each may be used once."""

    def __init__(self):
        self.tickets = {}

    def add(self, ticket):
        self.tickets[ticket.ticket] = ticket

    def pop(self, label):
        return self.tickets.pop(label, None)


class H3Server(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._http = None
        self._requests = {}  # stream id -> (method, path)
        self._done = False
        self._resumed = False
        self._early = False

    def _peer(self):
        try:
            host, port = self._quic._network_paths[0].addr[:2]
            return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        except Exception:  # pragma: no cover - only for the log line
            return "?"

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self._http = H3Connection(self._quic)
        elif isinstance(event, HandshakeCompleted):
            self._done = True
            self._resumed = event.session_resumed
            self._early = event.early_data_accepted
        if self._http is not None:
            for h3_event in self._http.handle_event(event):
                self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if isinstance(event, HeadersReceived):
            headers = dict(event.headers)
            method = headers.get(b":method", b"").decode()
            path = headers.get(b":path", b"").decode()
            self._requests[event.stream_id] = (method, path)
            if event.stream_ended:
                self._answer(event.stream_id)
        elif isinstance(event, DataReceived) and event.stream_ended:
            if event.stream_id in self._requests:
                self._answer(event.stream_id)

    def _answer(self, stream_id: int) -> None:
        method, path = self._requests.pop(stream_id)
        extra = []
        if method == "POST":
            status, body, ctype = 429, b"too many requests\n", b"text/plain"
            extra = [(b"retry-after", b"1")]
        elif path == "/page.html":
            status, body, ctype = 200, PAGE, b"text/html"
        elif path == "/":
            status, ctype = 200, b"text/plain"
            body = b"handshakes h3 test: the quick brown fox jumps over it.\n"
        else:
            status, ctype = 200, b"text/plain"
            body = f"handshakes h3 test: you asked for {path}\n".encode()
        self._http.send_headers(
            stream_id,
            [
                (b":status", str(status).encode()),
                (b"server", b"quic_server.py (aioquic)"),
                (b"content-type", ctype),
                (b"content-length", str(len(body)).encode()),
            ]
            + extra
            + padding(b"x-padding", HEADER_BYTES),
        )
        self._http.send_data(stream_id, body, end_stream=True)
        self.transmit()
        if LOG is not None:
            LOG.write(
                f"{time.time():.6f} {self._peer()} stream={stream_id} {method} {path} "
                f"{status} handshake={'done' if self._done else 'pending'}"
                f" resumed={int(self._resumed)} early_data={int(self._early)}\n"
            )
            LOG.flush()


async def main(args) -> None:
    global LOG, HEADER_BYTES
    HEADER_BYTES = args.header_bytes
    if args.log:
        LOG = open(args.log, "a")
    config = QuicConfiguration(
        is_client=False,
        alpn_protocols=H3_ALPN,
        max_datagram_frame_size=None,
        secrets_log_file=open(args.keylog, "a") if args.keylog else None,
    )
    config.load_cert_chain(args.cert, args.key)
    store = TicketStore()
    servers = []
    for host in args.host:
        servers.append(
            await serve(
                host,
                args.port,
                configuration=config,
                create_protocol=H3Server,
                session_ticket_fetcher=store.pop,
                session_ticket_handler=store.add,
            )
        )
        print(f"listening on udp {host} port {args.port}", flush=True)
    try:
        await asyncio.sleep(args.max_seconds)
    finally:
        for s in servers:
            s.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", action="append", help="address to listen on (repeatable)")
    p.add_argument("--port", type=int, default=18453)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log")
    p.add_argument("--keylog")
    p.add_argument("--header-bytes", type=int, default=0,
                   help="add an x-padding header this long to every response")
    p.add_argument("--max-seconds", type=float, default=120)
    a = p.parse_args()
    a.host = a.host or ["127.0.0.1"]
    try:
        asyncio.run(main(a))
    except KeyboardInterrupt:
        pass
