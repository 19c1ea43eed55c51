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
#   h2-curl-refused.pcap       as h2-curl-stream-limit, but a recording in
#                              which curl sent HEADERS on its first
#                              connection before it had read nginx's
#                              SETTINGS, and nginx refused at least one of
#                              them (RST_STREAM REFUSED_STREAM, error 7);
#                              curl ran the refused transfers on new
#                              connections
#   h2-curl-goaway-ignored.pcap
#                              as h2-curl-goaway, but a recording in which
#                              curl sent HEADERS on a connection after
#                              nginx's GOAWAY on it, on a stream above the
#                              GOAWAY's last stream id (nginx ignores
#                              them); curl reset those and ran the
#                              transfers on other connections
# Whether curl has read nginx's SETTINGS (resp. GOAWAY) before it sends
# HEADERS for more transfers on a connection is a race. So each part is
# recorded again until it shows what it is for: `limit` and `goaway` (at
# most 10 times) until curl sent exactly one HEADERS frame per URL and no
# stream was reset (`clean` below); `refused` (at most 15 times) until
# nginx sent a RST_STREAM REFUSED_STREAM (`refused`); `ignored` (at most
# 15 times) until curl sent HEADERS after nginx's GOAWAY above its last
# stream id (`ignored`). A part that never does is an error (the script
# stops, leaving that part's last recording).
# Each capture comes with FILE.keylog (curl's SSLKEYLOGFILE) and
# FILE.nginx-access.log (nginx's lines for that run in record-lib's
# `conn` format: client port, nginx's connection serial, the request's
# number on it). What curl reported per transfer (`-w`: status,
# http_version, num_connects, local port) goes to the script's output.
# Each capture is stopped only once no connection to the port is left
# open (at most 10 s after curl exits), so it holds every close. See
# captures/README.md, section "HTTP/2 stream limits and GOAWAY".
#
# Usage:  sudo scripts/record-limit-captures.sh [limit] [goaway] [refused] [ignored]
#         (or sudo PARTS="limit goaway" scripts/record-limit-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: limit and
# goaway; refused and ignored only when named): limit
# (h2-curl-stream-limit, "bg"), goaway (h2-curl-goaway, "bh"), refused
# (h2-curl-refused, "bi"), ignored (h2-curl-goaway-ignored, "bj"). The
# parts are recorded in that order, whatever the order named.
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
# captures/h2-curl-stream-limit.*, captures/h2-curl-goaway.*,
# captures/h2-curl-refused.* and captures/h2-curl-goaway-ignored.* (each
# .pcap, .keylog, .nginx-access.log) of the parts recorded (re-running
# overwrites them, with new ports, times and keys); touches no other
# capture, and nothing in src/, tests/, docs/.
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
TRIES=10             # recordings of limit, goaway at most, until one is clean
UNCLEAN_TRIES=15     # of refused, ignored, until one is what it is named for

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "limit goaway refused ignored" "${@:-${PARTS:-limit goaway}}"
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

# frames NAME : one line per HTTP/2 frame in NAME.pcap as tshark decrypts
# it, in the capture's order: TCP stream, `c` (from curl) or `s` (from
# nginx), frame type, stream id, and for a GOAWAY its last stream id, for
# a RST_STREAM its error code (else `-`).
frames() {
    local name=$1
    tshark -r "$OUT_DIR/$name.pcap" -o "tls.keylog_file:$OUT_DIR/$name.keylog" \
        -Y http2 -T fields -e tcp.stream -e tcp.dstport -e http2.type -e http2.streamid \
        -e http2.goaway.last_stream_id -e http2.rst_stream.error 2>/dev/null \
        | awk -F'\t' -v port="$H2_PORT" '{
              side = ($2 == port) ? "c" : "s"
              n = split($3, t, ","); split($4, id, ","); split($5, last, ","); split($6, err, ",")
              g = 0; r = 0
              for (i = 1; i <= n; i++) {
                  x = "-"
                  if (t[i] == 7) x = last[++g]
                  if (t[i] == 3) x = err[++r]
                  print $1, side, t[i], id[i], x
              } }'
}

# The outcomes a recording of a part is made again until (at most
# TRIES, resp. UNCLEAN_TRIES, times), each printing what it counted:
# clean NAME N : NAME.pcap holds exactly N HEADERS frames from curl and
# no RST_STREAM: each transfer sent once, none refused (the race in curl
# that decides it is described at the parts below).
clean() {
    local name=$1 want=$2 counts
    counts=$(frames "$name" | awk '$3 == 1 && $2 == "c" { h++ } $3 == 3 { r++ }
                                   END { printf "%d %d", h, r }')
    log "$name: $want URLs, ${counts% *} HEADERS from curl, ${counts#* } RST_STREAM"
    [[ $counts == "$want 0" ]]
}
# refused NAME N : nginx sent at least one RST_STREAM with error 7
# (REFUSED_STREAM): curl had sent HEADERS for more streams than nginx's
# SETTINGS allow before it read them.
refused() {
    local name=$1 want=$2 counts
    counts=$(frames "$name" | awk '$3 == 1 && $2 == "c" { h++ } $3 == 3 && $2 == "s" && $5 == 7 { r++ }
                                   END { printf "%d %d", h, r }')
    log "$name: $want URLs, ${counts% *} HEADERS from curl, ${counts#* } RST_STREAM REFUSED_STREAM from nginx"
    [[ ${counts#* } -gt 0 ]]
}
# ignored NAME N : curl sent at least one HEADERS frame on a stream above
# the last stream id of a GOAWAY nginx had sent on that connection before
# it (which nginx ignores).
ignored() {
    local name=$1 want=$2 counts
    counts=$(frames "$name" | awk '$3 == 7 && $2 == "s" && (!($1 in last) || $5 < last[$1]) { last[$1] = $5 }
                                   $3 == 1 && $2 == "c" { h++; if (($1 in last) && $4 > last[$1]) i++ }
                                   END { printf "%d %d", h, i }')
    log "$name: $want URLs, ${counts% *} HEADERS from curl, ${counts#* } after nginx's GOAWAY above its last stream id"
    [[ ${counts#* } -gt 0 ]]
}

# record NAME N OUTCOME TRIES CURLARG... : record NAME.pcap of the one
# curl (CURL, CURLARGs, N URLs among them) with its key log, until
# `OUTCOME NAME N` (clean, refused or ignored; at most TRIES times, an
# error if never).
record() {
    local name=$1 n=$2 outcome=$3 tries=$4 try
    shift 4
    for try in $(seq 1 "$tries"); do
        log "$name.pcap, try $try of $tries (until $outcome)"
        rm -f "$OUT_DIR/$name.keylog"
        wait_closed "$H2_PORT"
        start_capture "$OUT_DIR/$name.pcap" "$FILTER"
        SSLKEYLOGFILE="$OUT_DIR/$name.keylog" timeout 60 "${CURL[@]}" "$@" >/dev/null
        finish "$name" "$n"
        if "$outcome" "$name" "$n"; then return 0; fi
    done
    echo "error: $name: no $outcome recording in $tries tries" >&2
    return 1
}

# record_limit NAME OUTCOME TRIES : one curl, 10 slow transfers at once;
# nginx allows 2 streams per connection. Unclean: curl sent HEADERS for
# more than 2 transfers (in trials 5, or all 10) on its first connection
# before it had read nginx's SETTINGS; nginx refused all but 2
# (RST_STREAM REFUSED_STREAM) and curl sent them again on new
# connections.
record_limit() {
    local i urls=()
    serve "http2_max_concurrent_streams $MAX_STREAMS"
    for i in $(seq 1 "$LIMIT_URLS"); do urls+=("$BASE/slow/slow.txt?n=$i"); done
    record "$1" "$LIMIT_URLS" "$2" "$3" --parallel --parallel-max "$LIMIT_URLS" "${urls[@]}"
}

# record_goaway NAME OUTCOME TRIES : one curl, 12 slow transfers, at most
# 3 at once; nginx ends each connection (GOAWAY) after its 4th request.
# Unclean: curl sent HEADERS for further transfers on a connection before
# it had read nginx's GOAWAY (nginx ignores them; curl resets them and
# sends them again on a new connection).
record_goaway() {
    local i urls=()
    serve "keepalive_requests $MAX_REQUESTS"
    for i in $(seq 1 "$GOAWAY_URLS"); do urls+=("$BASE/slow/slow.txt?n=$i"); done
    record "$1" "$GOAWAY_URLS" "$2" "$3" --parallel --parallel-max 3 "${urls[@]}"
}

# 1. bg: the stream limit, until clean.
if part limit; then record_limit h2-curl-stream-limit clean "$TRIES"; fi
# 2. bh: GOAWAY, until clean.
if part goaway; then record_goaway h2-curl-goaway clean "$TRIES"; fi
# 3. bi: the stream limit, with curl's HEADERS refused by nginx.
if part refused; then record_limit h2-curl-refused refused "$UNCLEAN_TRIES"; fi
# 4. bj: GOAWAY, with curl's HEADERS after it ignored by nginx.
if part ignored; then record_goaway h2-curl-goaway-ignored ignored "$UNCLEAN_TRIES"; fi

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/h2-curl-stream-limit.* "$OUT_DIR"/h2-curl-goaway.* "$OUT_DIR"/h2-curl-refused.* \
    "$OUT_DIR"/h2-curl-goaway-ignored.* >&2 || true
if [[ -n "$NGINX_PID" ]]; then stop_server "$NGINX_PID"; fi
