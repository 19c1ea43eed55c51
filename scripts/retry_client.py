#!/usr/bin/env python3
"""HTTP client that retries 429s, for scripts/record-retry-captures.sh.

GETs URL/1 .. URL/N on one `requests.Session` (one keep-alive connection),
retrying a request answered 429 at most --retries times:

  --mode urllib3    urllib3's Retry (status_forcelist=[429],
                    respect_retry_after_header=True): waits as long as the
                    response's Retry-After asks, then retries.
  --mode immediate  retries at once, ignoring Retry-After (what a naive
                    retry loop does).
  --mode honour     a loop that sleeps the response's Retry-After (in
                    seconds) before it retries.

With --new-connections every GET, retries included, is sent on a Session
of its own, closed after it: a new TCP connection per request, as
`requests.get` or Java's HttpURLConnection without keep-alive do (not with
--mode urllib3, whose retries stay on the Session's connection).

Prints one line per response: path, status, seconds since start.
Usage: retry_client.py --mode MODE [--new-connections] URL N
"""
import argparse
import sys
import time

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["urllib3", "immediate", "honour"], required=True)
    ap.add_argument("--new-connections", action="store_true")
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("url")
    ap.add_argument("n", type=int)
    a = ap.parse_args()
    if a.new_connections and a.mode == "urllib3":
        ap.error("--new-connections does not go with --mode urllib3")
    s = requests.Session()
    if a.mode == "urllib3":
        retry = Retry(total=a.retries, status_forcelist=[429],
                      respect_retry_after_header=True, backoff_factor=0,
                      raise_on_status=False)
        s.mount("http://", HTTPAdapter(max_retries=retry))
    t0 = time.monotonic()
    for i in range(1, a.n + 1):
        url = "%s/%d" % (a.url, i)
        for attempt in range(a.retries + 1):
            if a.new_connections:
                with requests.Session() as one:
                    r = one.get(url, timeout=10)
            else:
                r = s.get(url, timeout=10)
            print("%s %d %.3f" % (url, r.status_code, time.monotonic() - t0), flush=True)
            if r.status_code != 429 or a.mode == "urllib3":
                break
            if a.mode == "honour":
                time.sleep(min(float(r.headers.get("Retry-After", "0")), 5.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
