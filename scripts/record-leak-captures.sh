#!/usr/bin/env bash
# Record small, real loopback captures of Java HTTP clients that leak their
# connections — never give them back to their pool — for the `handshakes`
# test-suite (summary.opened_while_idle, the table's `missed reuse` line:
# each new connection is opened while the leaked ones sit open and idle).
# One nginx serves cleartext HTTP/1.1 on 127.0.0.1:18480 with
# `keepalive_timeout 5s` (longer than a run, so every leaked connection is
# still open when the later requests are sent), and each client makes 6
# sequential GETs of the 1342-byte test page, 200 ms apart, one thread:
#   leak-urlconnection.pcap          Java 17 HttpURLConnection, keep-alive on
#                                    (the JDK default), that reads only the
#                                    status: the response stream is neither
#                                    read nor closed, no disconnect()
#                                    (UrlConnClient -Dclient.leak=true)
#   leak-urlconnection-control.pcap  the same without -Dclient.leak: every
#                                    body read and closed (one connection)
#   leak-okhttp.pcap                 OkHttp 3 (one OkHttpClient) that never
#                                    closes the Response nor its body
#                                    (PooledLibClient okhttp -Dclient.leak=true)
#   leak-apache5.pcap                Apache HttpClient 5 classic that never
#                                    closes the CloseableHttpResponse: its
#                                    pool's default 5 connections per route
#                                    stay leased, so the 6th request waits
#                                    for one 2 s (its connection-request
#                                    timeout) and fails without being sent
#                                    (PooledLibClient apache -Dclient.leak=true)
# Each capture comes with FILE.nginx-access.log (nginx's lines for that run
# in record-lib's `conn` format: client port, nginx's connection serial and
# the request's number on it). The JVMs run with -Xlog:gc, so that the
# script's output tells whether a garbage collection ran (one could close
# leaked sockets). Each capture is stopped only once no connection to the
# port is left open (at most 10 s after the client exits), so it holds
# every close. See captures/README.md, section "Clients leaking
# connections".
#
# Usage:  sudo scripts/record-leak-captures.sh [jdk] [okhttp] [apache]
#         (or sudo PARTS="jdk okhttp apache" scripts/record-leak-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: all three): jdk
# (leak-urlconnection and leak-urlconnection-control, "ba", "bb"), okhttp
# (leak-okhttp, "bc"), apache (leak-apache5, "bd").
#
# Requirements (Debian): tcpdump, tshark, nginx (nginx-light is enough),
# openssl and a JDK 17 (java, javac, keytool: make_java builds its
# truststore from make_cert's certificate, unused here), iproute2 (ss),
# OkHttp 3 and Apache HttpClient 5 (libokhttp-java, libhttpclient5-java;
# only for the okhttp and apache parts).
#
# Only 127.0.0.1 is talked to, on port 18480. nginx and tcpdump are stopped
# by PID on exit; everything else lives in a temp dir deleted at the end.
# Writes only captures/leak-* of the parts recorded (re-running overwrites
# them, with new ports and times); touches no other capture, and nothing in
# src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTP_PORT=18480      # nginx, plain HTTP/1.1, keepalive_timeout 5s
GETS=6               # GETs per client run
PAUSE_MS=200         # between one request and the next

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "jdk okhttp apache" "$@"
require_root
require_tools tcpdump tshark nginx openssl ss java javac keytool timeout
setup_work record-leak-captures

# ---------------------------------------------------------------------------
# Setup: the test page, nginx with a 5 s keep-alive timeout and the `conn`
# access log, the Java clients (OkHttp and HttpClient 5 from Debian's jars).
# ---------------------------------------------------------------------------
log "setup in $WORK"
make_docroot
make_cert            # only for make_java's truststore: nothing here uses TLS
SOURCES=("$SCRIPT_DIR/java/HttpClientPooled.java" "$SCRIPT_DIR/java/UrlConnClient.java")
if part okhttp || part apache; then
    JAVA_LIBS=$(printf '/usr/share/java/%s.jar:' okhttp okio httpclient5 httpcore5 httpcore5-h2 slf4j-api)
    JAVA_LIBS=${JAVA_LIBS%:}
    for jar in ${JAVA_LIBS//:/ }; do
        [[ -r "$jar" ]] || { echo "error: $jar missing: apt-get install libokhttp-java libhttpclient5-java" >&2; exit 1; }
    done
    SOURCES+=("$SCRIPT_DIR/java/PooledLibClient.java")
fi
make_java "${SOURCES[@]}"
# make_java's JAVA starts with `timeout 120`: bound each run to 60 s instead;
# -Xlog:gc prints every garbage collection (none expected in so short a run).
[[ ${JAVA[0]} == timeout ]] || { echo "error: unexpected JAVA command ${JAVA[*]}" >&2; exit 1; }
JAVA_RUN=(timeout 60 "${JAVA[@]:2}" -Xlog:gc -Dclient.pause=$PAUSE_MS)

NGINX_KEEPALIVE_TIMEOUT=5s write_nginx_conf 64 "    server {
        listen 127.0.0.1:$HTTP_PORT;
        root $WORK/www;
    }" "$(conn_access_log)"
grep -q 'keepalive_timeout 5s;' "$WORK/nginx/nginx.conf"
start_nginx "$HTTP_PORT"
mark_access_log

URL="http://127.0.0.1:$HTTP_PORT/index.html"
FILTER="tcp port $HTTP_PORT"

# record NAME LOGGED COMMAND... : COMMAND captured (tcpdump filter FILTER)
# to captures/NAME.pcap, nginx's lines for it to
# captures/NAME.nginx-access.log; nginx must log LOGGED requests. The
# capture is stopped once every connection is closed. Prints the TCP
# conversations and nginx's lines.
record() {
    local name=$1 logged=$2
    shift 2
    log "$name.pcap"
    wait_closed "$HTTP_PORT"
    start_capture "$OUT_DIR/$name.pcap" "$FILTER"
    "$@" 2>&1 | tee "$WORK/$name.client.log" >&2
    log "$name: still open when the client exited"
    open_conns "$HTTP_PORT" >&2 || true
    wait_closed "$HTTP_PORT"
    stop_capture
    save_access_log "$name"
    cat "$OUT_DIR/$name.nginx-access.log" >&2
    expect_lines "$name" "$logged"
    tshark -r "$OUT_DIR/$name.pcap" -q -z conv,tcp >&2
}

if part jdk; then
# 1. HttpURLConnection, keep-alive on (JDK default), that reads only the
#    status of each response: no connection goes back to the keep-alive
#    cache, each GET opens a new one.
record leak-urlconnection "$GETS" \
    "${JAVA_RUN[@]}" -Dclient.leak=true UrlConnClient "$URL" "$GETS"

# 2. the control: the same client reading and closing every body (one
#    connection, reused from the cache).
record leak-urlconnection-control "$GETS" \
    "${JAVA_RUN[@]}" UrlConnClient "$URL" "$GETS"
fi

if part okhttp; then
# 3. OkHttp 3 (cleartext: HTTP/1.1), never closing a Response: each call's
#    connection stays allocated to it, each next call opens a new one.
record leak-okhttp "$GETS" \
    "${JAVA_RUN[@]}" -Dclient.leak=true PooledLibClient okhttp "$URL" "$GETS"
fi

if part apache; then
# 4. Apache HttpClient 5 classic, never closing a CloseableHttpResponse:
#    5 connections leased (the default per route), the 6th request fails
#    after waiting 2 s for one — so nginx logs only 5. PooledLibClient
#    counts the failure as an error and still exits 0.
record leak-apache5 5 \
    "${JAVA_RUN[@]}" -Dclient.leak=true PooledLibClient apache "$URL" "$GETS"
grep -q 'ConnectionRequestTimeoutException' "$WORK/leak-apache5.client.log" || {
    echo "error: leak-apache5: the 6th request did not time out waiting for a connection" >&2
    exit 1
}
fi

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/leak-* >&2
stop_server "$NGINX_PID"
