#!/usr/bin/env bash
# Record two small, real loopback captures of ONE client talking to SEVERAL
# servers, for checking a per-server breakdown (server = address:port plus
# TLS SNI) against reality. One nginx serves:
#   * HTTPS on 127.0.0.1:18443 (TLS 1.2 + 1.3, HTTP/1.1) for two virtual
#     hosts, `a.test` and `b.test` (two server blocks chosen by SNI, both
#     with the same throw-away certificate);
#   * plain HTTP on 127.0.0.1:18080 and [::1]:18080.
# and the client is:
#   multi-server-curl.pcap      one curl, 10 URLs: a.test x3, b.test x3,
#                               127.0.0.1:18080 x2, [::1]:18080 x2
#                               (a keep-alive connection per host: 4 conns)
#   multi-server-requests.pcap  scripts/multi_server_client.py (python
#                               requests): a Session with 5 GETs to a.test,
#                               5 requests.get() to b.test, a Session with
#                               4 GETs to 127.0.0.1:18080 (7 conns)
# Each capture comes with FILE.nginx-access.log (nginx's log lines for that
# run: client port, connection serial, request number on it, TLS version,
# resumed or not, and the server address:port, SNI and Host) and
# FILE.keylog (the clients' TLS secrets, SSLKEYLOGFILE).
# See captures/README.md, section "Several servers".
#
# Usage:  sudo scripts/record-server-captures.sh
#
# Requirements (Debian): tcpdump, tshark, nginx (nginx-light is enough),
# curl, openssl, iproute2 (ss), python3 with `requests` (urllib3 2.x).
#
# a.test / b.test never go through DNS or /etc/hosts: curl gets
# `--resolve NAME:18443:127.0.0.1`, the python client `--resolve
# NAME:127.0.0.1` (it wraps socket.getaddrinfo for those two names, in its
# own process only). The certificate (make_cert) names localhost, so both
# clients skip verification (curl -k, requests verify=False).
#
# Only 127.0.0.1 and ::1 are talked to, on fixed high ports. nginx and
# tcpdump are stopped by PID on exit; the TLS key/cert are throw-away and
# live in a temp dir deleted at the end. Re-running overwrites the
# captures/multi-server-* files (ports, times and keys change).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTP_PORT=18080      # nginx, plain HTTP/1.1, 127.0.0.1 and [::1]
HTTPS_PORT=18443     # nginx, HTTPS (TLS 1.2 + 1.3), server names a.test, b.test

# Shared helpers: root and tool checks, work dir and clean-up, tcpdump.
# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump tshark nginx curl openssl ss
find_python requests urllib3
setup_work record-server-captures

CURL=(timeout 30 curl -sS --http1.1 -w '%{stderr}  -> %{http_code} num_connects=%{num_connects} %{url_effective}\n')
FILTER="tcp port $HTTPS_PORT or tcp port $HTTP_PORT"

# ---------------------------------------------------------------------------
# Setup: document root, throw-away TLS cert, nginx with three listeners and
# two TLS server names.
# The access log is record-lib's `conn` format (conn_access_log) with three
# fields appended, so each line also says which server it was for:
#   server=$server_addr:$server_port  sni=$ssl_server_name  host=$host
# (the fields before them, and so every parser of the `conn` logs, are
# unchanged).
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
$(tls_server "127.0.0.1:$HTTPS_PORT ssl" "TLSv1.2 TLSv1.3" "server_name a.test")
$(tls_server "127.0.0.1:$HTTPS_PORT ssl" "TLSv1.2 TLSv1.3" "server_name b.test")
EOF
)" "$(cat <<EOF
    log_format conn_server '\$remote_addr:\$remote_port conn=\$connection '
                           'conn_req=\$connection_requests "\$request" \$status '
                           'proto=\$server_protocol tls=\$ssl_protocol '
                           'reused=\$ssl_session_reused ua="\$http_user_agent" '
                           'server=\$server_addr:\$server_port '
                           'sni=\$ssl_server_name host=\$host';
    access_log $WORK/nginx/access.log conn_server;
EOF
)"
start_nginx "$HTTP_PORT" "$HTTPS_PORT"
mark_access_log

AURL="https://a.test:$HTTPS_PORT/index.html"
BURL="https://b.test:$HTTPS_PORT/index.html"
URL="http://127.0.0.1:$HTTP_PORT/index.html"
URL6="http://[::1]:$HTTP_PORT/index.html"

# per_server NAME : nginx's lines for NAME, counted per server address:port
# and SNI: requests, distinct connections, resumed TLS sessions.
per_server() {
    awk '{
        srv = ""; sni = ""; conn = ""; reused = ""
        for (i = 1; i <= NF; i++) {
            if ($i ~ /^server=/) srv = substr($i, 8)
            else if ($i ~ /^sni=/) sni = substr($i, 5)
            else if ($i ~ /^conn=/) conn = substr($i, 6)
            else if ($i ~ /^reused=/) reused = substr($i, 8)
        }
        key = srv " sni=" sni
        req[key]++
        if (!((key, conn) in seen)) { seen[key, conn] = 1; conns[key]++; if (reused == "r") res[key]++ }
    } END {
        for (k in req) printf "  %-32s connections=%d requests=%d resumed=%d\n", k, conns[k], req[k], res[k] + 0
    }' "$OUT_DIR/$1.nginx-access.log" | sort >&2
}

# ---------------------------------------------------------------------------
# 1. one curl process, 10 URLs over 4 hosts -> a keep-alive connection per
#    host (curl reuses a connection only for the same host name and port)
# ---------------------------------------------------------------------------
name=multi-server-curl
log "1. $name.pcap"
rm -f "$OUT_DIR/$name.keylog"
start_capture "$OUT_DIR/$name.pcap" "$FILTER"
SSLKEYLOGFILE="$OUT_DIR/$name.keylog" \
    "${CURL[@]}" -k -g \
    --resolve "a.test:$HTTPS_PORT:127.0.0.1" --resolve "b.test:$HTTPS_PORT:127.0.0.1" \
    "$AURL" "$AURL" "$AURL" "$BURL" "$BURL" "$BURL" "$URL" "$URL" "$URL6" "$URL6" \
    >/dev/null 2>"$WORK/$name.client.log"
stop_capture
cat "$WORK/$name.client.log" >&2
save_access_log "$name"
per_server "$name"
expect_lines "$name" 10
connects=$(grep -c 'num_connects=1 ' "$WORK/$name.client.log" || true)
if [[ $connects -ne 4 ]]; then
    echo "error: $name: curl made $connects connections, expected 4" >&2
    exit 1
fi

# ---------------------------------------------------------------------------
# 2. python requests: Session x5 to a.test (1 conn), requests.get x5 to
#    b.test (5 conns), Session x4 to 127.0.0.1:18080 (1 conn)
# ---------------------------------------------------------------------------
name=multi-server-requests
log "2. $name.pcap"
rm -f "$OUT_DIR/$name.keylog"
start_capture "$OUT_DIR/$name.pcap" "$FILTER"
SSLKEYLOGFILE="$OUT_DIR/$name.keylog" \
    timeout 60 "$PY" "$SCRIPT_DIR/multi_server_client.py" --insecure \
    --resolve a.test:127.0.0.1 --resolve b.test:127.0.0.1 \
    "session:5:$AURL" "nosession:5:$BURL" "session:4:$URL"
stop_capture
save_access_log "$name"
per_server "$name"
expect_lines "$name" 14

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/multi-server-* >&2
stop_server "$NGINX_PID"
