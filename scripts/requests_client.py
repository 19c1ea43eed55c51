#!/usr/bin/env python3
"""python-requests client used by record-captures.sh and record-idle-captures.sh.

  requests_client.py session   URL [N] [--pause S]  # one requests.Session(), N GETs (default 5)
  requests_client.py nosession URL [N] [--pause S]  # N independent requests.get() calls

With --pause S it sleeps S seconds (a float, at most 60) between one GET
and the next (not before the first); without it, not at all.
"""
import sys
import time

import requests


def main():
    args = sys.argv[1:]
    pause = 0.0
    if "--pause" in args:
        at = args.index("--pause")
        pause = float(args[at + 1])
        del args[at:at + 2]
        if not 0 <= pause <= 60:
            sys.exit("--pause must be 0..60 (seconds)")
    mode, url = args[0], args[1]
    n = int(args[2]) if len(args) > 2 else 5
    if mode == "session":
        with requests.Session() as s:
            for i in range(n):
                if i and pause:
                    time.sleep(pause)
                r = s.get(url, timeout=10)
                print(i + 1, r.status_code, len(r.content), file=sys.stderr)
    elif mode == "nosession":
        for i in range(n):
            if i and pause:
                time.sleep(pause)
            r = requests.get(url, timeout=10)
            print(i + 1, r.status_code, len(r.content), file=sys.stderr)
    else:
        sys.exit("unknown mode %r" % mode)


if __name__ == "__main__":
    main()
