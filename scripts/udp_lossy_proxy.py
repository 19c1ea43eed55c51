#!/usr/bin/env python3
"""A lossy, reordering UDP relay for recording QUIC over a bad link on a
machine whose kernel has no netem: datagrams from a client to --listen go
on to --to, and the answers come back, each dropped with probability
--loss and otherwise held a random delay of up to --jitter ms (so later
datagrams can overtake earlier ones). Seeded (--seed), so a run drops and
delays the same datagrams given the same traffic. Loopback only; stops
after --max-seconds. Used by scripts/record-quic-captures.sh (part lossy),
which captures the relay's leg to the server.
"""

import argparse
import asyncio
import random
import signal
import sys


class Relay:
    def __init__(self, args, loop):
        self.args = args
        self.loop = loop
        self.rng = random.Random(args.seed)
        self.front = None  # the transport clients talk to
        self.backs = {}  # client address -> transport towards the server
        self.counts = {"relayed": 0, "dropped": 0}

    def later(self, send, data):
        """Sends `data` with `send` after a random delay, or drops it."""
        if self.rng.random() < self.args.loss:
            self.counts["dropped"] += 1
            return
        self.counts["relayed"] += 1
        delay = self.rng.uniform(0, self.args.jitter) / 1000
        self.loop.call_later(delay, send, data)

    async def back(self, client):
        relay = self

        class Back(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                relay.later(lambda d: relay.front.sendto(d, client), data)

        transport, _ = await self.loop.create_datagram_endpoint(
            Back, remote_addr=(self.args.to_host, self.args.to_port))
        return transport


async def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen", type=int, required=True, help="UDP port on 127.0.0.1")
    parser.add_argument("--to-host", default="127.0.0.1")
    parser.add_argument("--to-port", type=int, required=True)
    parser.add_argument("--loss", type=float, default=0.08)
    parser.add_argument("--jitter", type=float, default=4.0, help="ms")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=120)
    args = parser.parse_args()
    if args.to_host not in ("127.0.0.1", "::1"):
        sys.exit("udp_lossy_proxy.py: loopback only")
    loop = asyncio.get_running_loop()
    relay = Relay(args, loop)
    pending = {}

    class Front(asyncio.DatagramProtocol):
        def datagram_received(self, data, addr):
            if addr not in relay.backs:
                pending.setdefault(addr, []).append(data)
                if len(pending[addr]) == 1:
                    loop.create_task(open_back(addr))
                return
            back = relay.backs[addr]
            relay.later(back.sendto, data)

    async def open_back(addr):
        relay.backs[addr] = await relay.back(addr)
        for data in pending.pop(addr, []):
            relay.later(relay.backs[addr].sendto, data)

    relay.front, _ = await loop.create_datagram_endpoint(
        Front, local_addr=("127.0.0.1", args.listen))
    print(f"relaying 127.0.0.1:{args.listen} -> {args.to_host}:{args.to_port}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), args.max_seconds)
    except asyncio.TimeoutError:
        pass
    print(f"relayed {relay.counts['relayed']}, dropped {relay.counts['dropped']}",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
