#!/usr/bin/env bash
# Record small, real loopback captures of one curl running many HTTP/2
# transfers against a server that limits what one connection may carry,
# for the `handshakes` test-suite: a connection opened because the
# HTTP/2 connections already open are at the server's stream limit, or
# because the server sent GOAWAY on them, was not one that multiplexing
# could have saved.
#   h2-curl-stream-limit.pcap  nginx with `http2_max_concurrent_streams
#                              2` (its SETTINGS carry
#                              SETTINGS_MAX_CONCURRENT_STREAMS = 2) and
#                              `limit_rate 10k` on /slow/ (each 20 000-byte
#                              response there takes ~1 s); ONE curl,
#                              --http2 --parallel --parallel-max 10, 10
#                              URLs to /slow/: with 2 streams open on its
#                              first connection, curl opens further
#                              connections for the transfers that do not
#                              fit (curl 7.88.1: one per transfer)
#   h2-curl-goaway.pcap        nginx with `keepalive_requests 4` (since
#                              nginx 1.19.7 also the number of HTTP/2
#                              requests on a connection, with the last of
#                              which nginx sends GOAWAY) and the same
#                              /slow/; ONE curl, --http2 --parallel
#                              --parallel-max 3, 12 URLs to /slow/ (each
#                              ~1 s, so the transfers overlap): after a
#                              GOAWAY curl opens new connections for the
#                              transfers still to go
# Whether curl has read nginx's SETTINGS (resp. GOAWAY) before it sends
# HEADERS for more transfers on a connection is a race. A recording in
# which it had not (curl sent a HEADERS frame that nginx refused or
# ignored, then reset it and sent the transfer again elsewhere) is made
# again, at most 10 times, until curl sent exactly one HEADERS frame per
# URL and no stream was reset (`clean` below).
# Each capture comes with FILE.keylog (curl's SSLKEYLOGFILE) and
# FILE.nginx-access.log (nginx's lines for that run in record-lib's
# `conn` format: client port, nginx's connection serial, the request's
# number on it). What curl reported per transfer (`-w`: status,
# http_version, num_connects, local port) goes to the script's output.
# Each capture is stopped only once no connection to the port is left
# open (at most 10 s after curl exits), so it holds every close. See
# captures/README.md, section "HTTP/2 stream limits and GOAWAY".
#
# Usage:  sudo scripts/record-limit-captures.sh [limit] [goaway]
#         (or sudo PARTS="limit goaway" scripts/record-limit-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: both): limit
# (h2-curl-stream-limit, "bg"), goaway (h2-curl-goaway, "bh").
#
# Requirements (Debian): tcpdump, tshark, nginx 1.19.7 or later
# (nginx-light is enough, with http2), curl with HTTP/2 (nghttp2) and
# --parallel (7.66 or later), openssl, iproute2 (ss), coreutils (timeout).
#
# Only 127.0.0.1 is talked to, on port 18491 (nginx, HTTPS + http2, TLS
# 1.2 and 1.3, as `localhost`: every curl gets `--resolve
# localhost:18491:127.0.0.1`, so all connections share one SNI). nginx is
# restarted for each part (each has its own settings); nginx and tcpdump
# are stopped by PID on exit; the TLS key and certificate are throw-away,
# in a temporary directory deleted at the end. Writes only
# captures/h2-curl-stream-limit.* and captures/h2-curl-goaway.* of the
# parts recorded (re-running overwrites them, with new ports, times and
# keys); touches no other capture, and nothing in src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

H2_PORT=18491        # nginx, HTTPS + http2 (ALPN h2)
SLOW_BYTES=20000     # /slow/slow.txt, every response here
RATE=10k             # nginx's limit_rate on /slow/: 20 000 bytes take ~1 s
MAX_STREAMS=2        # http2_max_concurrent_streams in h2-curl-stream-limit
LIMIT_URLS=10        # URLs for the one curl of h2-curl-stream-limit
MAX_REQUESTS=4       # keepalive_requests in h2-curl-goaway
GOAWAY_URLS=12       # URLs for the one curl of h2-curl-goaway
TRIES=10             # recordings of a part at most, until one is clean

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "limit goaway" "$@"
require_root
require_tools tcpdump tshark nginx curl openssl ss timeout
setup_work record-limit-captures
curl --version | grep -q 'HTTP2' || { echo "error: curl has no HTTP/2" >&2; exit 1; }
curl --help all | grep -q -- '--parallel-max' \
    || { echo "error: curl has no --parallel-max (7.66 or later)" >&2; exit 1; }
NGINX_VERSION=$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
[[ $(printf '%s\n' 1.19.7 "$NGINX_VERSION" | sort -V | head -n 1) == 1.19.7 ]] \
    || { echo "error: nginx $NGINX_VERSION: keepalive_requests limits HTTP/2 requests only since 1.19.7" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Setup: the test page and /slow/slow.txt (20 000 × `x`), which nginx
# sends at `limit_rate 10k`: the first 10 240 bytes (one second's worth)
# at once, then, after waiting as long as those take at that rate (1 s),
# the rest; so each response takes ~1 s.
# ---------------------------------------------------------------------------
log "setup in $WORK"
make_docroot
make_cert
make_slow_file "slow.txt" "$SLOW_BYTES"

NGINX_PID=""
# serve DIRECTIVE... : (re)start nginx on H2_PORT (http2, the `conn` access
# log, `limit_rate` on /slow/) with each further DIRECTIVE in its server
# block (tls_server's form), and mark the access log.
serve() {
    if [[ -n "$NGINX_PID" ]]; then stop_server "$NGINX_PID"; NGINX_PID=""; fi
    write_nginx_conf 64 "$(tls_server "127.0.0.1:$H2_PORT ssl http2" "TLSv1.2 TLSv1.3" \
        "$@" "location /slow/ { limit_rate $RATE; }")" "$(conn_access_log)"
    local directive
    for directive in "$@"; do grep -qF "$directive;" "$WORK/nginx/nginx.conf"; done
    start_nginx "$H2_PORT"
    mark_access_log
}

BASE="https://localhost:$H2_PORT"
FILTER="tcp port $H2_PORT"
h2_curl "$H2_PORT"

# finish NAME LOGGED : wait until every connection is closed, stop the
# capture, save nginx's lines (LOGGED requests expected) and print them,
# the TCP conversations and the HTTP/2 frames that matter here as tshark
# decrypts them: HEADERS (1), RST_STREAM (3), SETTINGS (4, not the ACKs)
# and GOAWAY (7), and DATA (0) that ends a stream.
finish() {
    local name=$1 logged=$2
    end_part "$name" "$logged" "$H2_PORT"
    tshark -r "$OUT_DIR/$name.pcap" -o "tls.keylog_file:$OUT_DIR/$name.keylog" \
        -Y 'http2.type == 1 || http2.type == 3 || (http2.type == 4 && http2.flags.ack.settings == 0) || http2.type == 7 || (http2.type == 0 && http2.flags.end_stream == 1)' \
        -T fields -e frame.number -e frame.time_relative -e tcp.stream -e tcp.srcport \
        -e http2.type -e http2.streamid -e http2.settings.max_concurrent_streams \
        -e http2.goaway.last_stream_id -e http2.goaway.error -e http2.rst_stream.error >&2
}

# clean NAME N : whether NAME.pcap holds exactly N HEADERS frames from
# curl and no RST_STREAM: each transfer sent once, none refused. Whether it
# does is a race in curl (see the parts below), so each part is recorded
# again until it does, at most TRIES times.
clean() {
    local name=$1 want=$2 counts
    counts=$(tshark -r "$OUT_DIR/$name.pcap" -o "tls.keylog_file:$OUT_DIR/$name.keylog" \
        -Y http2 -T fields -e tcp.dstport -e http2.type 2>/dev/null \
        | awk -F'\t' -v port="$H2_PORT" '{ n = split($2, t, ","); for (i = 1; i <= n; i++) {
              if (t[i] == 1 && $1 == port) h++; if (t[i] == 3) r++ } }
          END { printf "%d %d", h, r }')
    log "$name: $want URLs, ${counts% *} HEADERS from curl, ${counts#* } RST_STREAM"
    [[ $counts == "$want 0" ]]
}

# record NAME N CURLARG... : record NAME.pcap of the one curl (CURL,
# CURLARGs, N URLs among them) with its key log, until `clean NAME N`
# (at most TRIES times; an error if never).
record() {
    local name=$1 n=$2 try
    shift 2
    for try in $(seq 1 "$TRIES"); do
        log "$name.pcap, try $try of $TRIES"
        rm -f "$OUT_DIR/$name.keylog"
        wait_closed "$H2_PORT"
        start_capture "$OUT_DIR/$name.pcap" "$FILTER"
        SSLKEYLOGFILE="$OUT_DIR/$name.keylog" timeout 60 "${CURL[@]}" "$@" >/dev/null
        finish "$name" "$n"
        if clean "$name" "$n"; then return 0; fi
    done
    echo "error: $name: no clean recording in $TRIES tries" >&2
    return 1
}

if part limit; then
# 1. one curl, 10 slow transfers at once; nginx allows 2 streams per
#    connection. Unclean: curl sent HEADERS for more than 2 transfers (in
#    trials 5, or all 10) on its first connection before it had read
#    nginx's SETTINGS; nginx refused all but 2 (RST_STREAM
#    REFUSED_STREAM) and curl sent them again on new connections.
serve "http2_max_concurrent_streams $MAX_STREAMS"
URLS=()
for i in $(seq 1 "$LIMIT_URLS"); do URLS+=("$BASE/slow/slow.txt?n=$i"); done
record h2-curl-stream-limit "$LIMIT_URLS" --parallel --parallel-max "$LIMIT_URLS" "${URLS[@]}"
fi

if part goaway; then
# 2. one curl, 12 slow transfers, at most 3 at once; nginx ends each
#    connection (GOAWAY) after its 4th request. Unclean: curl sent HEADERS
#    for further transfers on a connection before it had read nginx's
#    GOAWAY (nginx ignores them; curl resets them and sends them again on
#    a new connection).
serve "keepalive_requests $MAX_REQUESTS"
URLS=()
for i in $(seq 1 "$GOAWAY_URLS"); do URLS+=("$BASE/slow/slow.txt?n=$i"); done
record h2-curl-goaway "$GOAWAY_URLS" --parallel --parallel-max 3 "${URLS[@]}"
fi

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/h2-curl-stream-limit.* "$OUT_DIR"/h2-curl-goaway.* >&2 || true
if [[ -n "$NGINX_PID" ]]; then stop_server "$NGINX_PID"; fi
