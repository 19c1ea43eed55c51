#!/usr/bin/env python3
"""HTTP/2 client used by record-ratelimit-captures.sh: python httpx with
its `h2` stack (Debian: python3-httpx, python3-h2).

    httpx_h2_client.py URL N TASKS BODY_BYTES

ONE httpx.AsyncClient(http2=True) — one HTTP/2 connection per origin — is
shared by TASKS asyncio tasks; each POSTs a JSON body of BODY_BYTES bytes to
URL N times in sequence and reads each response. With TASKS > 1 the requests
are multiplexed on the connection. Responses 200 and 429 are expected; any
other status, or an error, fails the run. The certificate is not checked
(a throw-away one on 127.0.0.1). httpx writes the TLS key log to
$SSLKEYLOGFILE when it is set. Every request has a 10 s timeout.
"""
import asyncio
import sys

import httpx


def json_body(n):
    pad = max(n - len('{"pad":""}'), 0)
    return ('{"pad":"' + "x" * pad + '"}').encode()


async def worker(client, url, n, body, tid, failures):
    for i in range(n):
        r = await client.post(url, content=body, headers={"Content-Type": "application/json"})
        print(f"task {tid} req {i + 1} -> {r.status_code} {r.http_version}", file=sys.stderr)
        if r.status_code not in (200, 429):
            failures.append(r.status_code)


async def main():
    url, n, tasks, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    if not (1 <= n <= 1000 and 1 <= tasks <= 64 and 0 <= size <= 1_000_000):
        sys.exit("N must be 1..1000, TASKS 1..64, BODY_BYTES 0..1000000")
    body = json_body(size)
    failures = []
    async with httpx.AsyncClient(http2=True, verify=False, timeout=10.0) as client:
        await asyncio.gather(*(worker(client, url, n, body, t, failures) for t in range(tasks)))
    if failures:
        sys.exit(f"unexpected statuses: {failures}")


if __name__ == "__main__":
    asyncio.run(main())
