#!/usr/bin/env bash
# Record the real captures that check `--keylog` beyond AES-256-GCM (which
# every other TLS capture negotiated): each AEAD suite of TLS 1.3 and of
# TLS 1.2, TLS 1.3 KeyUpdates in both directions, and 0-RTT data accepted
# and refused. Each capture gets a
# key log written by the client (SSLKEYLOGFILE for curl, -keylogfile for
# openssl s_client). See captures/README.md, section "Key log captures".
#
# Last, h2-curl-10.pcap (scripts/record-client-captures.sh) gets its key
# log injected as a pcapng Decryption Secrets Block.
#
# Usage:  sudo scripts/record-keylog-captures.sh
#
# Requirements (Debian): tcpdump, editcap (wireshark-common), nginx
# (nginx-light is enough), curl, openssl, iproute2 (ss). Everything runs on 127.0.0.1 on fixed high ports;
# nginx and tcpdump are stopped by PID on exit; the TLS key and certificate
# are throw-away, in a temporary directory deleted at the end.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTPS_PORT=18447     # nginx, HTTPS (TLS 1.2 + 1.3, every AEAD suite)

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump editcap nginx curl openssl ss
setup_work record-keylog-captures

log "setup in $WORK"
make_docroot
make_cert
write_nginx_conf 64 "$(cat <<EOF
$(tls_server "127.0.0.1:$HTTPS_PORT ssl" "TLSv1.2 TLSv1.3" "ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384")
EOF
)"
start_nginx "$HTTPS_PORT"

SURL="https://localhost:$HTTPS_PORT/index.html"
CURL=(timeout 30 curl -sS -k --http1.1 --resolve "localhost:$HTTPS_PORT:127.0.0.1"
      -w '%{stderr}  -> %{http_code} num_connects=%{num_connects}\n')

# ---------------------------------------------------------------------------
# tls-suites-curl-4: four curl processes, one per suite, two requests each
# on one connection: TLS 1.3 AES-128-GCM and ChaCha20-Poly1305, TLS 1.2
# ECDHE-RSA with AES-128-GCM and ChaCha20-Poly1305.
# ---------------------------------------------------------------------------
NAME=tls-suites-curl-4
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $HTTPS_PORT"
for suite in TLS_AES_128_GCM_SHA256 TLS_CHACHA20_POLY1305_SHA256; do
    SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" "${CURL[@]}" --tlsv1.3 --tls13-ciphers "$suite" \
        "$SURL" "$SURL" >/dev/null
done
for suite in ECDHE-RSA-AES128-GCM-SHA256 ECDHE-RSA-CHACHA20-POLY1305; do
    SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" "${CURL[@]}" --tlsv1.2 --tls-max 1.2 --ciphers "$suite" \
        "$SURL" "$SURL" >/dev/null
done
stop_capture

# ---------------------------------------------------------------------------
# tls13-openssl-keyupdate: one openssl s_client connection (TLS 1.3,
# AES-128-GCM) with three HTTP/1.1 requests. Between them the client sends
# `K` (a KeyUpdate that asks the server to update too) and then `k` (a
# KeyUpdate of its own keys only): the client's keys change twice, the
# server's once. Each input line is written on its own, after a pause, so
# that s_client reads a command line alone.
# ---------------------------------------------------------------------------
NAME=tls13-openssl-keyupdate
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
REQ='GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n'
LAST='GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $HTTPS_PORT"
{
    sleep 0.5; printf "$REQ"
    sleep 0.5; printf 'K\n'
    sleep 0.5; printf "$REQ"
    sleep 0.5; printf 'k\n'
    sleep 0.5; printf "$LAST"
    sleep 1
} | timeout 20 openssl s_client -connect "127.0.0.1:$HTTPS_PORT" -servername localhost \
    -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 -keylogfile "$OUT_DIR/$NAME.keylog" \
    >"$WORK/$NAME.client.log" 2>&1 || true
stop_capture
grep -c 'HTTP/1.1 200' "$WORK/$NAME.client.log" >&2
grep -E 'KEYUPDATE|Cipher is' "$WORK/$NAME.client.log" >&2 || true

# ---------------------------------------------------------------------------
# h2-curl-10-secrets.pcapng: a capture that carries its own key log.
# ---------------------------------------------------------------------------
log "h2-curl-10-secrets.pcapng"
rm -f "$OUT_DIR/h2-curl-10-secrets.pcapng"
editcap --inject-secrets "tls,$OUT_DIR/h2-curl-10.keylog" \
    "$OUT_DIR/h2-curl-10.pcap" "$OUT_DIR/h2-curl-10-secrets.pcapng"

# ---------------------------------------------------------------------------
# tls13-openssl-early-data: 0-RTT against nginx (`ssl_early_data on`), one
# capture, three openssl s_client connections: a full handshake that saves
# its session; the session resumed with the request as 0-RTT data
# (accepted); then, after nginx restarted (new ticket keys), the same again:
# the PSK and the 0-RTT data refused.
# ---------------------------------------------------------------------------
NAME=tls13-openssl-early-data
ED_PORT=18448
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
mkdir -p "$WORK/ed"
write_ed_conf() {
    cat >"$WORK/ed/nginx.conf" <<EOF2
worker_processes 1;
daemon off;
pid $WORK/ed/nginx.pid;
error_log $WORK/ed/error.log info;
events { worker_connections 64; }
http {
    access_log $WORK/ed/access.log;
    client_body_temp_path $WORK/ed/body;
    proxy_temp_path $WORK/ed/proxy;
    fastcgi_temp_path $WORK/ed/fastcgi;
    uwsgi_temp_path $WORK/ed/uwsgi;
    scgi_temp_path $WORK/ed/scgi;
$(tls_server "127.0.0.1:$ED_PORT ssl" "TLSv1.3" "ssl_early_data on")
}
EOF2
}
write_ed_conf
start_ed() {
    nginx -e "$WORK/ed/error.log" -p "$WORK/ed" -c "$WORK/ed/nginx.conf" &
    ED_PID=$!
    PIDS+=("$ED_PID")
    wait_listen "$ED_PORT"
}
printf 'GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >"$WORK/ed/req.txt"
S_CLIENT=(timeout 10 openssl s_client -connect "127.0.0.1:$ED_PORT" -servername localhost
          -tls1_3 -keylogfile "$OUT_DIR/$NAME.keylog" -ign_eof)
start_ed
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $ED_PORT"
"${S_CLIENT[@]}" -sess_out "$WORK/ed/sess.pem" <"$WORK/ed/req.txt" >"$WORK/ed/c1.log" 2>&1 || true
"${S_CLIENT[@]}" -sess_in "$WORK/ed/sess.pem" -early_data "$WORK/ed/req.txt" \
    </dev/null >"$WORK/ed/c2.log" 2>&1 || true
stop_server "$ED_PID"
start_ed
"${S_CLIENT[@]}" -sess_in "$WORK/ed/sess.pem" -early_data "$WORK/ed/req.txt" \
    </dev/null >"$WORK/ed/c3.log" 2>&1 || true
stop_capture
stop_server "$ED_PID"
grep -hE '^(New|Reused),|Early data' "$WORK/ed/c1.log" "$WORK/ed/c2.log" "$WORK/ed/c3.log" >&2
cat "$WORK/ed/access.log" >&2
