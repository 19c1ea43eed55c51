#!/usr/bin/env python3
"""python-requests client used by record-captures.sh.

  requests_client.py session   URL [N]   # one requests.Session(), N GETs (default 5)
  requests_client.py nosession URL [N]   # N independent requests.get() calls
"""
import sys

import requests


def main():
    mode, url = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    if mode == "session":
        with requests.Session() as s:
            for i in range(n):
                r = s.get(url, timeout=10)
                print(i + 1, r.status_code, len(r.content), file=sys.stderr)
    elif mode == "nosession":
        for i in range(n):
            r = requests.get(url, timeout=10)
            print(i + 1, r.status_code, len(r.content), file=sys.stderr)
    else:
        sys.exit("unknown mode %r" % mode)


if __name__ == "__main__":
    main()
