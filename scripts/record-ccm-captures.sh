#!/usr/bin/env bash
# Record the real capture that checks `--keylog` on the AES-CCM suites of
# TLS 1.2 (RFC 6655, 7251) and TLS 1.3 (RFC 8446), with 16- and 8-byte
# tags: tls-ccm-7.pcap and its key log. nginx (OpenSSL 3, an RSA and an
# ECDSA certificate, finite-field DH parameters for DHE) serves seven
# connections from curl, each with two requests, each connection pinned to
# one suite with --ciphers or --tls13-ciphers. The key log is curl's
# (SSLKEYLOGFILE). See captures/README.md, section "ap".
#
# Usage:  sudo scripts/record-ccm-captures.sh
#
# Requirements (Debian): tcpdump, nginx (nginx-light is enough; with
# http2), curl with HTTP/2, openssl, iproute2 (ss). Everything runs on
# 127.0.0.1 on a fixed high port; nginx and tcpdump are stopped by PID on
# exit; the TLS keys and certificates are throw-away, in a temporary
# directory deleted at the end.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTPS_PORT=18451     # nginx, HTTPS (TLS 1.2 and 1.3, CCM suites allowed), h2

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump nginx curl openssl ss
setup_work record-ccm-captures

log "setup in $WORK"
make_docroot
make_cert
# A second certificate, ECDSA P-256, for the ECDHE-ECDSA suites; and
# RFC 7919's ffdhe2048 group for DHE (nginx offers no DHE without it).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj '/CN=localhost' -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' \
    -keyout "$WORK/ec-key.pem" -out "$WORK/ec-cert.pem" 2>/dev/null
openssl genpkey -genparam -algorithm DH -pkeyopt group:ffdhe2048 -out "$WORK/dh.pem" 2>/dev/null
write_nginx_conf 64 "$(cat <<EOF
$(tls_server "127.0.0.1:$HTTPS_PORT ssl http2" "TLSv1.2 TLSv1.3" \
    "ssl_certificate $WORK/ec-cert.pem" "ssl_certificate_key $WORK/ec-key.pem" \
    "ssl_dhparam $WORK/dh.pem" "ssl_ciphers ALL" \
    "ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256:TLS_AES_128_CCM_8_SHA256")
EOF
)"
start_nginx "$HTTPS_PORT"

NAME=tls-ccm-7
KEYLOG="$OUT_DIR/$NAME.keylog"
URL="https://localhost:$HTTPS_PORT/index.html"
CURL=(timeout 30 curl -sS -k --resolve "localhost:$HTTPS_PORT:127.0.0.1"
      -w '%{stderr}  -> %{http_code} http=%{http_version} num_connects=%{num_connects}\n')

log "$NAME.pcap"
rm -f "$KEYLOG"
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $HTTPS_PORT"
# TLS 1.3: HTTP version, suite (IANA names).
for case in "1.1 TLS_AES_128_CCM_SHA256" "1.1 TLS_AES_128_CCM_8_SHA256" "2 TLS_AES_128_CCM_SHA256"; do
    read -r http suite <<<"$case"
    log "curl TLS 1.3 $suite HTTP/$http"
    SSLKEYLOGFILE="$KEYLOG" "${CURL[@]}" "--http$http" --tlsv1.3 \
        --tls13-ciphers "$suite" "$URL" "$URL" >/dev/null
done
# TLS 1.2: suite (OpenSSL names) — ECDHE-ECDSA, DHE-RSA and RSA key
# exchange; 128- and 256-bit keys; 16- and 8-byte tags.
for suite in ECDHE-ECDSA-AES128-CCM ECDHE-ECDSA-AES256-CCM8 DHE-RSA-AES256-CCM AES128-CCM8; do
    log "curl TLS 1.2 $suite HTTP/1.1"
    SSLKEYLOGFILE="$KEYLOG" "${CURL[@]}" --http1.1 --tlsv1.2 --tls-max 1.2 \
        --ciphers "$suite" "$URL" "$URL" >/dev/null
done
stop_capture
cat "$WORK/nginx/access.log" >&2
