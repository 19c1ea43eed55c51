#!/usr/bin/env python3
"""HTTP client that retries 429s, for scripts/record-retry-captures.sh.

GETs URL/1 .. URL/N on one `requests.Session` (one keep-alive connection),
retrying a request answered 429 at most --retries times:

  --mode urllib3    urllib3's Retry (status_forcelist=[429],
                    respect_retry_after_header=True): waits as long as the
                    response's Retry-After asks, then retries.
  --mode immediate  retries at once, ignoring Retry-After (what a naive
                    retry loop does).

Prints one line per response: path, status, seconds since start.
Usage: retry_client.py --mode MODE URL N
"""
import argparse
import sys
import time

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["urllib3", "immediate"], required=True)
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("url")
    ap.add_argument("n", type=int)
    a = ap.parse_args()
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
            r = s.get(url, timeout=10)
            print("%s %d %.3f" % (url, r.status_code, time.monotonic() - t0), flush=True)
            if r.status_code != 429 or a.mode == "urllib3":
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
