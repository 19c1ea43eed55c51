#!/usr/bin/env bash
# Record the real capture that checks `--keylog` on the CBC suites of
# TLS 1.0, 1.1 and 1.2: tls-cbc-7.pcap and its key log. nginx (OpenSSL 3,
# every protocol and suite allowed with @SECLEVEL=0) serves seven
# connections of two requests each: five from curl, which offers
# encrypt-then-MAC (RFC 7366) as OpenSSL does by default, and two from
# `openssl s_client -no_etm`, whose records are MAC-then-encrypt. The key
# log is written by the clients (SSLKEYLOGFILE for curl, -keylogfile for
# s_client). See captures/README.md, section "y".
#
# Usage:  sudo scripts/record-cbc-captures.sh
#
# Requirements (Debian): tcpdump, nginx (nginx-light is enough), curl,
# openssl, iproute2 (ss). Everything runs on 127.0.0.1 on a fixed high
# port; nginx and tcpdump are stopped by PID on exit; the TLS key and
# certificate are throw-away, in a temporary directory deleted at the end.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTPS_PORT=18449     # nginx, HTTPS (TLS 1.0–1.2, every suite)

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump nginx curl openssl ss
setup_work record-cbc-captures

log "setup in $WORK"
make_docroot
make_cert
write_nginx_conf 64 "$(cat <<EOF
$(tls_server "127.0.0.1:$HTTPS_PORT ssl" "TLSv1 TLSv1.1 TLSv1.2" "ssl_ciphers ALL:@SECLEVEL=0")
EOF
)"
start_nginx "$HTTPS_PORT"

NAME=tls-cbc-7
KEYLOG="$OUT_DIR/$NAME.keylog"
SURL="https://localhost:$HTTPS_PORT/index.html"
CURL=(timeout 30 curl -sS -k --http1.1 --resolve "localhost:$HTTPS_PORT:127.0.0.1"
      -w '%{stderr}  -> %{http_code} num_connects=%{num_connects} %{ssl_verify_result}\n')
REQ='GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n'
LAST='GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'

log "$NAME.pcap"
rm -f "$KEYLOG"
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $HTTPS_PORT"
# curl: version, suite (OpenSSL names); encrypt-then-MAC.
for case in "1.2 ECDHE-RSA-AES128-SHA" "1.2 ECDHE-RSA-AES256-SHA384" "1.2 AES128-SHA256" \
            "1.1 ECDHE-RSA-AES256-SHA" "1.0 ECDHE-RSA-AES128-SHA"; do
    read -r version suite <<<"$case"
    log "curl TLS $version $suite"
    SSLKEYLOGFILE="$KEYLOG" "${CURL[@]}" "--tlsv$version" --tls-max "$version" \
        --ciphers "$suite:@SECLEVEL=0" "$SURL" "$SURL" >/dev/null
done
# openssl s_client -no_etm: MAC-then-encrypt, TLS 1.2 and TLS 1.0 (whose
# IVs chain from record to record).
for case in "-tls1_2 ECDHE-RSA-AES256-SHA" "-tls1 ECDHE-RSA-AES128-SHA"; do
    read -r version suite <<<"$case"
    log "s_client $version $suite -no_etm"
    {
        sleep 0.5; printf "$REQ"
        sleep 0.5; printf "$LAST"
        sleep 1
    } | timeout 20 openssl s_client -connect "127.0.0.1:$HTTPS_PORT" -servername localhost \
        "$version" -cipher "$suite:@SECLEVEL=0" -no_etm -keylogfile "$KEYLOG" \
        >"$WORK/s_client.log" 2>&1 || true
    grep -c 'HTTP/1.1 200' "$WORK/s_client.log" >&2
    grep -E 'Cipher is|Protocol  *:' "$WORK/s_client.log" >&2 || true
done
stop_capture
cat "$WORK/nginx/access.log" >&2
