#!/usr/bin/env bash
# Record real clients retrying `429 Too Many Requests` for the `handshakes`
# test-suite: scripts/ratelimit_server.py answers every third request 429
# with `Retry-After: 1`; one client waits as asked before it retries, one
# does not. See captures/README.md, section "Retry-After".
#
# Usage:  sudo scripts/record-retry-captures.sh
#
# Requirements (Debian): tcpdump, curl, iproute2 (ss), python3 with
# `requests` (python3-requests), openssl, and a JDK 17 (java, javac,
# keytool) for the HttpURLConnection captures.
#
# Only 127.0.0.1 is talked to; the server and tcpdump are stopped by PID.
# Re-running overwrites the captures.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"
RL_PORT=18429

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump curl ss java javac keytool openssl
find_python requests urllib3
setup_work record-retry-captures

# record NAME [SERVER_ARG...] -- COMMAND... : COMMAND against a fresh
# server (its count of requests starts again at 1) started with the
# SERVER_ARGs, captured to captures/NAME.pcap.
record() {
    local name=$1 server_args=()
    shift
    while [[ $1 != -- ]]; do server_args+=("$1"); shift; done
    shift
    log "$name.pcap"
    start_ratelimit_server "$RL_PORT" "$WORK/$name.server.log" "${server_args[@]}"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $RL_PORT"
    "$@" >"$WORK/$name.client.log"
    stop_capture
    stop_server "$RL_PID"
    cat "$WORK/$name.server.log" >&2
}

URL="http://127.0.0.1:$RL_PORT/api"
# curl --retry treats a 429 as transient and waits as long as its
# Retry-After asks (1 s) before it retries, on the same connection.
record http-curl-retry-after -- \
    timeout 30 curl -sS --retry 3 "$URL/1" "$URL/2" "$URL/3" "$URL/4" "$URL/5" "$URL/6"
# python requests with urllib3's Retry(status_forcelist=[429],
# respect_retry_after_header=True): the same, on one Session.
record http-requests-retry-after -- \
    timeout 30 "$PY" "$SCRIPT_DIR/retry_client.py" --mode urllib3 "$URL" 6
# A naive retry loop on one Session: retries a 429 at once.
record http-requests-retry-now -- \
    timeout 30 "$PY" "$SCRIPT_DIR/retry_client.py" --mode immediate "$URL" 6

# A new connection per GET (a Session of its own each, as requests.get
# makes): the loop retrying at once opens its retries while the
# Retry-After runs; the one that sleeps the Retry-After does not.
record http-requests-newconn-retry-now -- \
    timeout 30 "$PY" "$SCRIPT_DIR/retry_client.py" --mode immediate --new-connections "$URL" 6
record http-requests-newconn-retry-after -- \
    timeout 30 "$PY" "$SCRIPT_DIR/retry_client.py" --mode honour --new-connections "$URL" 6

# Java 17's HttpURLConnection without keep-alive (-Dhttp.keepAlive=false):
# a new connection per request, each 429 retried at once, or after
# sleeping its Retry-After (scripts/java/UrlConnClient.java,
# -Dclient.retry429).
make_cert
make_java "$SCRIPT_DIR/java/UrlConnClient.java" "$SCRIPT_DIR/java/HttpClientPooled.java"
JAVA_CLIENT=("${JAVA[@]}" -Dhttp.keepAlive=false -Dclient.expect=429)
record java-urlconnection-noka-retry-now -- \
    "${JAVA_CLIENT[@]}" -Dclient.retry429=immediate UrlConnClient "$URL" 6
record java-urlconnection-noka-retry-after -- \
    "${JAVA_CLIENT[@]}" -Dclient.retry429=honour UrlConnClient "$URL" 6

# Retry-After as an HTTP-date two seconds past the response's Date (the
# same second): curl waits until then.
record http-curl-retry-after-date --retry-after-date 2 -- \
    timeout 30 curl -sS --retry 3 "$URL/1" "$URL/2" "$URL/3" "$URL/4"

log "done"
ls -l "$OUT_DIR"/http-curl-retry-after*.pcap "$OUT_DIR"/http-requests-retry-*.pcap \
    "$OUT_DIR"/http-requests-newconn-retry-*.pcap "$OUT_DIR"/java-urlconnection-noka-retry-*.pcap >&2
