#!/usr/bin/env python3
"""Compares what handshakes-synth says it generated (its last stderr line,
JSON) with the summary line of `handshakes analyze -T jsonl`; prints one row
per count on stdout and exits 1 on any mismatch. Used by scripts/bench.sh
and scripts/scale.sh.

Usage: check-synth-counts.py EXPECTED.json SUMMARY.json
"""
import json
import sys

want = json.load(open(sys.argv[1]))
got = json.load(open(sys.argv[2]))["summary"]
rows = [(k, want[k], got[k]) for k in (
    "connections", "tcp_handshakes", "tls_connections", "tls_handshakes_full",
    "tls_handshakes_resumed", "requests_exact", "requests_estimated")]
rows.append(("close fin", want["closes_fin"], got["close"].get("fin", 0)))
rows.append(("close rst", want["closes_rst"], got["close"].get("rst", 0)))
bad = 0
for name, w, g in rows:
    ok = w == g
    bad += not ok
    print(f"  {name:24} generated {w:>9}  found {g:>9}  {'ok' if ok else 'MISMATCH'}")
if got.get("anomalies"):
    print(f"  anomalies: {got['anomalies']}")
print("  all match" if bad == 0 else f"  {bad} MISMATCHES")
sys.exit(1 if bad else 0)
