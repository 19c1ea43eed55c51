#!/usr/bin/env bash
# Record small, real packet captures on the loopback interface for the
# `handshakes` test-suite. See captures/README.md for what each file contains.
#
# Usage:  sudo scripts/record-captures.sh
#
# Requirements (Debian): tcpdump, tshark (for editcap), nginx (nginx-light is
# enough), curl, openssl, python3 with the `requests` package, iproute2 (ss).
#
# Everything runs on 127.0.0.1 / ::1 on fixed high ports. All servers and
# tcpdump processes started here are stopped by PID on exit. TLS key/cert are
# throw-away and live in a temp dir that is deleted at the end. Re-running the
# script overwrites the capture files (timestamps and ephemeral ports change).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTP_PORT=18080      # nginx, plain HTTP, 127.0.0.1 and [::1]
HTTPS_PORT=18443     # nginx, HTTPS (TLS 1.2 + 1.3)
S13_PORT=18444       # openssl s_server -tls1_3
S12_PORT=18445       # openssl s_server -tls1_2
RL_PORT=18429        # scripts/ratelimit_server.py
RST_PORT=18499       # scripts/rst_server.py

# Shared helpers: root and tool checks, work dir and clean-up, tcpdump.
# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump editcap tshark nginx curl openssl ss
find_python
setup_work record-captures

CURL=(timeout 30 curl -sS --http1.1 -w '%{stderr}  -> %{http_code} num_connects=%{num_connects} %{url_effective}\n')

# ---------------------------------------------------------------------------
# Setup: document root, throw-away TLS cert, nginx config
# ---------------------------------------------------------------------------
log "setup in $WORK"
make_docroot
make_cert

write_nginx_conf 64 "$(cat <<EOF
    server {
        listen 127.0.0.1:$HTTP_PORT;
        listen [::1]:$HTTP_PORT;
        root $WORK/www;
    }
$(tls_server "127.0.0.1:$HTTPS_PORT ssl" "TLSv1.2 TLSv1.3")
EOF
)"
start_nginx "$HTTP_PORT" "$HTTPS_PORT"

URL="http://127.0.0.1:$HTTP_PORT/index.html"
URL6="http://[::1]:$HTTP_PORT/index.html"
SURL="https://localhost:$HTTPS_PORT/index.html"
RESOLVE=(--resolve "localhost:$HTTPS_PORT:127.0.0.1")

# ---------------------------------------------------------------------------
# a. 5 curl processes -> 5 TCP connections (plus a nanosecond-precision copy)
# ---------------------------------------------------------------------------
log "a. http-curl-5-new-connections.pcap"
start_capture "$OUT_DIR/http-curl-5-new-connections.pcap" "tcp port $HTTP_PORT"
for _ in 1 2 3 4 5; do "${CURL[@]}" -o /dev/null "$URL"; done
stop_capture

log "a'. http-curl-5-new-connections-ns.pcap (nanosecond timestamps)"
start_capture "$OUT_DIR/http-curl-5-new-connections-ns.pcap" "tcp port $HTTP_PORT" \
    --time-stamp-precision=nano
for _ in 1 2 3 4 5; do "${CURL[@]}" -o /dev/null "$URL"; done
stop_capture

# ---------------------------------------------------------------------------
# b. one curl process, 5 URLs -> 1 connection, 5 requests (+ pcapng copy)
# ---------------------------------------------------------------------------
log "b. http-curl-5-keepalive.pcap"
start_capture "$OUT_DIR/http-curl-5-keepalive.pcap" "tcp port $HTTP_PORT"
"${CURL[@]}" "$URL" "$URL" "$URL" "$URL" "$URL" >/dev/null
stop_capture
rm -f "$OUT_DIR/http-curl-5-keepalive.pcapng"
editcap -F pcapng "$OUT_DIR/http-curl-5-keepalive.pcap" "$OUT_DIR/http-curl-5-keepalive.pcapng"

# ---------------------------------------------------------------------------
# c. python requests: Session (1 conn) vs requests.get (5 conns)
# ---------------------------------------------------------------------------
log "c. http-python-requests-session.pcap"
start_capture "$OUT_DIR/http-python-requests-session.pcap" "tcp port $HTTP_PORT"
timeout 60 "$PY" "$SCRIPT_DIR/requests_client.py" session "$URL" 5
stop_capture

log "c. http-python-requests-nosession.pcap"
start_capture "$OUT_DIR/http-python-requests-nosession.pcap" "tcp port $HTTP_PORT"
timeout 60 "$PY" "$SCRIPT_DIR/requests_client.py" nosession "$URL" 5
stop_capture

# ---------------------------------------------------------------------------
# d. curl over HTTPS against nginx: TLS 1.2 x3 new connections, TLS 1.3 keep-alive
#    (session keys are logged to *.keylog so the payload can be decrypted
#    with tshark -o tls.keylog_file:FILE; they are throw-away sessions)
# ---------------------------------------------------------------------------
log "d. tls12-curl-3-new-connections.pcap"
rm -f "$OUT_DIR/tls12-curl-3-new-connections.keylog"
start_capture "$OUT_DIR/tls12-curl-3-new-connections.pcap" "tcp port $HTTPS_PORT"
for _ in 1 2 3; do
    SSLKEYLOGFILE="$OUT_DIR/tls12-curl-3-new-connections.keylog" \
        "${CURL[@]}" -k "${RESOLVE[@]}" --tlsv1.2 --tls-max 1.2 -o /dev/null "$SURL"
done
stop_capture

log "d. tls13-curl-keepalive.pcap"
rm -f "$OUT_DIR/tls13-curl-keepalive.keylog"
start_capture "$OUT_DIR/tls13-curl-keepalive.pcap" "tcp port $HTTPS_PORT"
SSLKEYLOGFILE="$OUT_DIR/tls13-curl-keepalive.keylog" \
    "${CURL[@]}" -k "${RESOLVE[@]}" --tlsv1.3 "$SURL" "$SURL" "$SURL" >/dev/null
stop_capture

# ---------------------------------------------------------------------------
# e. openssl s_client session resumption against openssl s_server (-WWW)
# ---------------------------------------------------------------------------
# resumption_capture NAME PORT PROTO_FLAG
resumption_capture() {
    local name=$1 port=$2 proto=$3
    log "e. $name.pcap"
    (cd "$WORK/www" && exec openssl s_server -accept "127.0.0.1:$port" \
        -cert "$WORK/cert.pem" -key "$WORK/key.pem" "$proto" -WWW \
        </dev/null >"$WORK/$name.server.log" 2>&1) &
    local spid=$!
    PIDS+=("$spid")
    wait_listen "$port"
    rm -f "$WORK/$name.sess" "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $port"
    printf 'GET /index.html HTTP/1.0\r\n\r\n' | timeout 20 openssl s_client \
        -connect "127.0.0.1:$port" -servername localhost "$proto" -ign_eof \
        -sess_out "$WORK/$name.sess" -keylogfile "$OUT_DIR/$name.keylog" >"$WORK/$name.c1.log" 2>&1
    printf 'GET /index.html HTTP/1.0\r\n\r\n' | timeout 20 openssl s_client \
        -connect "127.0.0.1:$port" -servername localhost "$proto" -ign_eof \
        -sess_in "$WORK/$name.sess" -keylogfile "$OUT_DIR/$name.keylog" >"$WORK/$name.c2.log" 2>&1
    stop_capture
    grep -E '^(New|Reused),' "$WORK/$name.c1.log" "$WORK/$name.c2.log" >&2
    if ! grep -q '^Reused,' "$WORK/$name.c2.log"; then
        echo "error: second connection of $name was not resumed" >&2
        return 1
    fi
    stop_server "$spid"
}
resumption_capture tls13-openssl-resumption "$S13_PORT" -tls1_3
resumption_capture tls12-openssl-resumption "$S12_PORT" -tls1_2

# ---------------------------------------------------------------------------
# f. IPv6: 2 curl processes + 1 curl with 2 URLs to [::1]
# ---------------------------------------------------------------------------
log "f. http-curl-ipv6.pcap"
start_capture "$OUT_DIR/http-curl-ipv6.pcap" "tcp port $HTTP_PORT"
"${CURL[@]}" -g -o /dev/null "$URL6"
"${CURL[@]}" -g -o /dev/null "$URL6"
"${CURL[@]}" -g "$URL6" "$URL6" >/dev/null
stop_capture

# ---------------------------------------------------------------------------
# g. 429 rate limiting: every 3rd request -> 429 + Retry-After
#    10 requests: 4 on one connection, 3 single-request connections, 3 on one
# ---------------------------------------------------------------------------
log "g. http-429-ratelimit.pcap"
start_ratelimit_server "$RL_PORT" "$WORK/ratelimit.log"
RLURL="http://127.0.0.1:$RL_PORT/api"
start_capture "$OUT_DIR/http-429-ratelimit.pcap" "tcp port $RL_PORT"
"${CURL[@]}" "$RLURL" "$RLURL" "$RLURL" "$RLURL" >/dev/null
for _ in 1 2 3; do "${CURL[@]}" -o /dev/null "$RLURL"; done
"${CURL[@]}" "$RLURL" "$RLURL" "$RLURL" >/dev/null
stop_capture
stop_server "$RL_PID"

# ---------------------------------------------------------------------------
# h. connections ending in RST: server reads the request and closes with
#    SO_LINGER {1,0}; curl gets "Connection reset by peer" (exit 56).
# ---------------------------------------------------------------------------
log "h. http-curl-rst.pcap"
timeout 120 "$PY" "$SCRIPT_DIR/rst_server.py" --host 127.0.0.1 --port "$RST_PORT" \
    --max-seconds 100 &
RST_PID=$!
PIDS+=("$RST_PID")
wait_listen "$RST_PORT"
start_capture "$OUT_DIR/http-curl-rst.pcap" "tcp port $RST_PORT"
for _ in 1 2; do
    "${CURL[@]}" -o /dev/null "http://127.0.0.1:$RST_PORT/reset-me" || echo "  (curl exit $? as expected)" >&2
done
stop_capture
stop_server "$RST_PID"

# ---------------------------------------------------------------------------
log "done; files in $OUT_DIR:"
ls -l "$OUT_DIR" >&2
stop_server "$NGINX_PID"
