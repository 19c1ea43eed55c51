#!/usr/bin/env bash
# Record small, real loopback captures of HTTP/2 clients that open more
# connections to a server beside an HTTP/2 connection to it, for the
# `handshakes` test-suite (summary.beside_http2, the table's `beside
# HTTP/2` line). An HTTP/2 connection can carry every request to its
# server at once, so each extra one is a handshake that multiplexing would
# have saved. The captures already in captures/ (Java HttpClient, OkHttp,
# Chromium) show only the *raced* kind, extras opened while the first
# connection was still in its TLS handshake; these add both kinds from curl:
#   h2-curl-parallel-immediate.pcap  ONE curl, --http2 --parallel
#                                    --parallel-immediate --parallel-max 5,
#                                    10 URLs: --parallel-immediate makes
#                                    curl open a connection per transfer at
#                                    once instead of waiting to learn
#                                    whether the first can multiplex, so
#                                    extra connections race the first's
#                                    handshake (raced)
#   h2-curl-beside-up.pcap           one curl downloading 600 000 bytes
#                                    over HTTP/2 that nginx sends at 200
#                                    KB/s (`limit_rate 200k` on /slow/: its
#                                    connection up and busy ~3 s) and, from
#                                    other curl processes on the same host,
#                                    3 small GETs to the same server 1.0,
#                                    1.6 and 2.2 s after it starts: each
#                                    opens a new connection while the
#                                    first's is up and open (beside it, NOT
#                                    raced); then, once the download's
#                                    connection is closed, one more small
#                                    GET (the control: nothing open beside
#                                    it, not counted)
# Each capture comes with FILE.keylog (SSLKEYLOGFILE of every curl in it)
# and FILE.nginx-access.log (nginx's lines for that run in record-lib's
# `conn` format: client port, nginx's connection serial, the request's
# number on it). What each curl reported (`-w`: status, http_version,
# num_connects) goes to the script's output. Each capture is stopped only
# once no connection to the port is left open (at most 10 s after the
# last curl exits), so it holds every close. See captures/README.md,
# section "Extra connections beside HTTP/2".
#
# Usage:  sudo scripts/record-beside-captures.sh [immediate] [up]
#         (or sudo PARTS="immediate up" scripts/record-beside-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: both): immediate
# (h2-curl-parallel-immediate, "be"), up (h2-curl-beside-up, "bf").
#
# Requirements (Debian): tcpdump, tshark, nginx (nginx-light is enough,
# with http2), curl with HTTP/2 (nghttp2) and --parallel-immediate (7.68
# or later), openssl, iproute2 (ss), coreutils (timeout).
#
# Only 127.0.0.1 is talked to, on port 18490 (nginx, HTTPS + http2, TLS
# 1.2 and 1.3, as `localhost`: every curl gets `--resolve
# localhost:18490:127.0.0.1`, so all connections share one SNI). nginx and
# tcpdump are stopped by PID on exit; the TLS key and certificate are
# throw-away, in a temporary directory deleted at the end. Writes only
# captures/h2-curl-parallel-immediate.* and captures/h2-curl-beside-up.*
# of the parts recorded (re-running overwrites them, with new ports, times
# and keys); touches no other capture, and nothing in src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

H2_PORT=18490        # nginx, HTTPS + http2 (ALPN h2)
IMMEDIATE_URLS=10    # URLs for the one --parallel-immediate curl
BIG_BYTES=600000     # the slow download in h2-curl-beside-up
RATE=200k            # nginx's limit_rate for it: ~3 s
LATER_AT="1.0 1.6 2.2"   # seconds after the slow curl starts: the small GETs

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "immediate up" "$@"
require_root
require_tools tcpdump tshark nginx curl openssl ss timeout
setup_work record-beside-captures
curl --version | grep -q 'HTTP2' || { echo "error: curl has no HTTP/2" >&2; exit 1; }
curl --help all | grep -q -- '--parallel-immediate' \
    || { echo "error: curl has no --parallel-immediate (7.68 or later)" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Setup: the test page, a 600 000-byte file in /slow/, nginx with http2,
# `limit_rate` on /slow/ and the `conn` access log. The server, not curl,
# paces the download: in a trial, curl 7.88.1's --limit-rate 100k let
# 600 000 bytes through within 40 ms over TLS (HTTP/1.1 and HTTP/2 alike;
# it seems to throttle only after a burst of several hundred KB).
# ---------------------------------------------------------------------------
log "setup in $WORK"
make_docroot
make_cert
make_slow_file "big.txt" "$BIG_BYTES"

write_nginx_conf 64 "$(tls_server "127.0.0.1:$H2_PORT ssl http2" "TLSv1.2 TLSv1.3" \
    "location /slow/ { limit_rate $RATE; }")" "$(conn_access_log)"
grep -q "limit_rate $RATE;" "$WORK/nginx/nginx.conf"
start_nginx "$H2_PORT"
mark_access_log

h2_curl "$H2_PORT"

# finish NAME LOGGED : wait until every connection is closed, stop the
# capture, save nginx's lines (LOGGED requests expected) and print them,
# the TCP conversations and the HTTP/2 HEADERS frames tshark decrypts.
finish() {
    local name=$1 logged=$2
    end_part "$name" "$logged" "$H2_PORT"
    tshark -r "$OUT_DIR/$name.pcap" -o "tls.keylog_file:$OUT_DIR/$name.keylog" \
        -Y 'http2.type == 1' -T fields -e frame.number -e frame.time_relative \
        -e tcp.stream -e tcp.srcport -e http2.streamid -e http2.header.value >&2
}

if part immediate; then
# 1. one curl, 10 URLs, up to 5 transfers at once, each allowed to open its
#    own connection at once (--parallel-immediate).
NAME=h2-curl-parallel-immediate
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
URLS=()
for i in $(seq 1 "$IMMEDIATE_URLS"); do URLS+=("$BASE/index.html?n=$i"); done
wait_closed "$H2_PORT"
start_capture "$OUT_DIR/$NAME.pcap" "$FILTER"
SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" timeout 30 "${CURL[@]}" \
    --parallel --parallel-immediate --parallel-max 5 "${URLS[@]}" >/dev/null
finish "$NAME" "$IMMEDIATE_URLS"
fi

if part up; then
# 2. a slow HTTP/2 download, and small GETs from other curl processes while
#    its connection is up; then one more after it is closed.
NAME=h2-curl-beside-up
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
wait_closed "$H2_PORT"
start_capture "$OUT_DIR/$NAME.pcap" "$FILTER"
SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" timeout 30 "${CURL[@]}" -o /dev/null "$BASE/slow/big.txt" &
SLOW_PID=$!
START=$(date +%s.%N)
for at in $LATER_AT; do
    # sleep until START + at
    sleep "$(awk -v s="$START" -v a="$at" -v n="$(date +%s.%N)" 'BEGIN { d = s + a - n; print (d > 0 ? d : 0) }')"
    kill -0 "$SLOW_PID" 2>/dev/null \
        || { echo "error: the slow download ended before the GET at +$at s" >&2; exit 1; }
    SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" timeout 10 "${CURL[@]}" -o /dev/null "$BASE/index.html?at=$at"
done
wait "$SLOW_PID"
log "$NAME: the download is done; the control GET once its connection is closed"
wait_closed "$H2_PORT"
SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" timeout 10 "${CURL[@]}" -o /dev/null "$BASE/index.html?after=1"
finish "$NAME" 5
fi

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/h2-curl-parallel-immediate.* "$OUT_DIR"/h2-curl-beside-up.* >&2 || true
stop_server "$NGINX_PID"
