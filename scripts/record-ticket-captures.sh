#!/usr/bin/env bash
# Record small, real loopback captures of clients against a TLS server
# that gives no session to resume, for the `handshakes` test-suite: a
# full handshake after one with such a server is not one the client could
# have spared by resuming (`tls.session_issued`, `summary.not_resumed`).
#   tls13-python-requests-noticket-5.pcap
#                              `openssl s_server -tls1_3 -num_tickets 0
#                              -www` (it sends no NewSessionTicket);
#                              python requests, 5 independent
#                              requests.get() calls (5 connections, each
#                              a full handshake that could not resume)
#   tls13-curl-noticket-4.pcap nginx, TLS 1.3 only, `ssl_session_tickets
#                              off` and `ssl_session_cache off`: nginx
#                              1.22's OpenSSL still sends two
#                              NewSessionTickets a connection, stateful
#                              ones, which with no cache it cannot look
#                              up; ONE curl, 4 URLs, each with
#                              `Connection: close` (nginx closes each
#                              connection after its response: 4
#                              connections): curl offers the ticket on
#                              the next, nginx refuses it
#   tls12-curl-noticket-4.pcap nginx, TLS 1.2 only, the same two
#                              directives (its ServerHello's session id
#                              is empty and it sends no NewSessionTicket);
#                              the same curl, which then offers nothing
# Each comes with FILE.keylog (the client's SSLKEYLOGFILE); those against
# nginx with FILE.nginx-access.log (nginx's lines for the run in
# record-lib's `conn` format, whose `reused=` says whether nginx resumed a
# session: `.` for none). Each capture is stopped only once no connection to the port is
# left open (at most 10 s after the client exits). See captures/README.md,
# section "Servers that give no session".
#
# Usage:  sudo scripts/record-ticket-captures.sh [py13] [curl13] [curl12]
#         (or sudo PARTS="py13" scripts/record-ticket-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: all three):
# py13 (tls13-python-requests-noticket-5, "bk"), curl13
# (tls13-curl-noticket-4, "bl"), curl12 (tls12-curl-noticket-4, "bm").
#
# Requirements (Debian): tcpdump, tshark, nginx, curl, openssl, iproute2
# (ss), coreutils (timeout), python3 with `requests`.
#
# Only 127.0.0.1 is talked to, on port 18495 (openssl s_server, then
# nginx, HTTPS, as `localhost`). nginx is restarted for each TLS version;
# s_server, nginx and tcpdump are stopped by PID on exit; the TLS key and certificate are throw-away,
# in a temporary directory deleted at the end. Writes only
# captures/tls13-python-requests-noticket-5.*,
# captures/tls13-curl-noticket-4.* and captures/tls12-curl-noticket-4.*
# (each .pcap, .keylog, .nginx-access.log) of the parts recorded
# (re-running overwrites them, with new ports, times and keys); touches no
# other capture, and nothing in src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

PORT=18495           # nginx, HTTPS (HTTP/1.1)
PY_GETS=5            # requests.get() calls of tls13-python-requests-noticket-5
CURL_URLS=4          # URLs for the one curl of the *-curl-noticket-4 parts

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "py13 curl13 curl12" "$@"
require_root
require_tools tcpdump tshark nginx curl openssl ss timeout
find_python requests
setup_work record-ticket-captures

log "setup in $WORK"
make_docroot
make_cert

NGINX_PID=""
# serve PROTOCOLS : (re)start nginx on PORT with ssl_protocols PROTOCOLS,
# no session tickets and no session cache, and the `conn` access log.
serve() {
    if [[ -n "$NGINX_PID" ]]; then stop_server "$NGINX_PID"; NGINX_PID=""; fi
    write_nginx_conf 64 "$(tls_server "127.0.0.1:$PORT ssl" "$1" \
        "ssl_session_tickets off" "ssl_session_cache off")" "$(conn_access_log)"
    start_nginx "$PORT"
    mark_access_log
}

# facts NAME : what tshark reads of NAME.pcap with its key log: per TLS
# handshake message from the server, its TCP stream, type and, for a
# ServerHello, its session id's length (a NewSessionTicket is type 4).
facts() {
    local name=$1
    log "$name: server handshake messages (stream, type, session id length)"
    tshark -r "$OUT_DIR/$name.pcap" -o "tls.keylog_file:$OUT_DIR/$name.keylog" \
        -Y "tls.handshake.type && tcp.srcport == $PORT" -T fields -e tcp.stream \
        -e tls.handshake.type -e tls.handshake.session_id_length >&2
}

# curl_close NAME : one curl, CURL_URLS URLs each with `Connection:
# close`, its keys to NAME.keylog, captured into NAME.pcap.
curl_close() {
    local name=$1 urls=()
    for i in $(seq 1 "$CURL_URLS"); do urls+=(-o /dev/null "https://localhost:$PORT/?n=$i"); done
    rm -f "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $PORT"
    SSLKEYLOGFILE="$OUT_DIR/$name.keylog" timeout 60 curl -sS -k \
        --resolve "localhost:$PORT:127.0.0.1" -H 'Connection: close' \
        -w '%{stderr}  %{url_effective} -> %{http_code} num_connects=%{num_connects} local_port=%{local_port}\n' \
        "${urls[@]}"
    end_part "$name" "$CURL_URLS" "$PORT"
    facts "$name"
}

if part py13; then
    name=tls13-python-requests-noticket-5
    log "$name.pcap"
    openssl s_server -quiet -accept "127.0.0.1:$PORT" -cert "$WORK/cert.pem" \
        -key "$WORK/key.pem" -tls1_3 -num_tickets 0 -www </dev/null >"$WORK/s_server.log" 2>&1 &
    S_SERVER_PID=$!
    PIDS+=("$S_SERVER_PID")
    wait_listen "$PORT"
    rm -f "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $PORT"
    REQUESTS_CA_BUNDLE="$WORK/cert.pem" SSLKEYLOGFILE="$OUT_DIR/$name.keylog" \
        timeout 60 "$PY" "$SCRIPT_DIR/requests_client.py" nosession \
        "https://localhost:$PORT/" "$PY_GETS"
    wait_closed "$PORT"
    stop_capture
    stop_server "$S_SERVER_PID"
    tshark -r "$OUT_DIR/$name.pcap" -q -z conv,tcp >&2
    facts "$name"
fi
if part curl13; then
    serve TLSv1.3
    log "tls13-curl-noticket-4.pcap"
    curl_close tls13-curl-noticket-4
fi
if part curl12; then
    serve TLSv1.2
    log "tls12-curl-noticket-4.pcap"
    curl_close tls12-curl-noticket-4
fi
log "done"
stop_server "$NGINX_PID"
