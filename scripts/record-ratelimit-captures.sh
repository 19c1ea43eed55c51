#!/usr/bin/env bash
# Record the real captures of clients POSTing over TLS to a rate-limited
# API: nginx (TLS; HTTP/2 or HTTP/1.1 by ALPN) with `limit_req` answers 429
# *before* it reads a request's body, and passes the rest to
# scripts/ratelimit_server.py, which reads each body in full and then
# answers 200, or 429 for every third request. So a connection carries both
# early answers (the body still arrives afterwards, in records of its own)
# and answers that come after the body — what the request estimate without
# keys must tell apart. Over HTTP/2: java.net.http.HttpClient (Java 17)
# with one thread and with ten, python httpx (its h2 stack) with one task
# and with ten, and curl. Over HTTP/1.1: Java's HttpURLConnection (keep-alive,
# the JDK default) with one thread and with ten, HttpClient with ten, and
# curl. And the pooled libraries: OkHttp 3 (HTTP/2) and Apache HttpClient 5
# (HTTP/1.1), ten threads each. And the non-blocking clients under load:
# HttpClient's sendAsync, Apache HttpAsyncClient 5 and OkHttp's enqueue, 50 requests
# outstanding at once, over both protocols; and Netty 4.1, the event loop
# under Reactor Netty (Spring's WebClient), over both. httpx and curl with a key log
# (the truth tshark can read). And one connection carrying far more
# requests than a record lists (100 by default): httpx over HTTP/2 and curl
# over HTTP/1.1, with key logs. And HttpURLConnection against sendAsync on
# plain HTTP/1.1, where every status is read without keys. nginx's
# per-connection access log is kept beside each capture. See
# captures/README.md, sections "aa" to "ag".
#
# Usage:  sudo [PARTS="h2 h1 lib async netty many clear"] scripts/record-ratelimit-captures.sh
#
# PARTS picks the sections to record (default: all): h2 ("aa"), h1
# ("ab"), lib ("ac"), async ("ad"), netty ("ae"), many ("af"), clear ("ag").
#
# Requirements (Debian): tcpdump, nginx (nginx-light is enough, with http2
# and limit_req), curl with HTTP/2, openssl, iproute2 (ss), python3, a JDK
# 17 (javac, java, keytool), python3 with httpx and h2 (python3-httpx,
# python3-h2), OkHttp 3, Apache HttpClient 5 and Netty 4.1 (libokhttp-java,
# libhttpclient5-java, libnetty-java). Everything runs on 127.0.0.1 on fixed high
# ports; nginx, the backend and tcpdump are stopped by PID on exit; the TLS
# key, certificate and truststore are throw-away, in a temporary directory
# deleted at the end.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

H2_PORT=18451        # nginx, HTTPS + http2, rate-limited
CLEAR_PORT=18452     # nginx, plain HTTP/1.1, the same locations
RL_PORT=18429        # scripts/ratelimit_server.py, behind nginx

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump nginx curl openssl ss java javac keytool
find_python httpx h2
setup_work record-ratelimit-captures

log "setup in $WORK"
make_docroot
make_cert
JAVA_LIBS=$(printf '/usr/share/java/%s.jar:' okhttp okio httpclient5 httpcore5 httpcore5-h2 slf4j-api \
    netty-buffer netty-codec netty-codec-http netty-codec-http2 netty-common netty-handler \
    netty-resolver netty-transport)
JAVA_LIBS=${JAVA_LIBS%:}
for jar in ${JAVA_LIBS//:/ }; do
    [[ -r "$jar" ]] || { echo "error: $jar missing: apt-get install libokhttp-java libhttpclient5-java libnetty-java" >&2; exit 1; }
done
make_java "$SCRIPT_DIR/java/HttpClientPooled.java" "$SCRIPT_DIR/java/UrlConnClient.java" \
    "$SCRIPT_DIR/java/PooledLibClient.java" "$SCRIPT_DIR/java/AsyncClient.java" \
    "$SCRIPT_DIR/java/NettyClient.java"
PARTS=${PARTS:-h2 h1 lib async netty many clear}
# (part NAME, from record-lib: whether section NAME is to be recorded.)

# /api: 300 requests a second, a burst of three beyond it served at once;
# the rest answered 429 in nginx's preaccess phase, before the body is
# read. /api-strict: one a second, so that all but the first are.
# /api-app: no limit in nginx, only the backend's 429 to every third.
LIMITED="limit_req_status 429; proxy_pass http://127.0.0.1:$RL_PORT;"
LOCATIONS=("location /api { limit_req zone=api burst=3 nodelay; $LIMITED }"
    "location /api-strict { limit_req zone=strict; $LIMITED }"
    "location /api-app { $LIMITED }")
CLEAR_SERVER="    server {
        listen 127.0.0.1:$CLEAR_PORT;
$(printf '        %s\n' "${LOCATIONS[@]}")
    }"
write_nginx_conf 256 "$(tls_server "127.0.0.1:$H2_PORT ssl http2" "TLSv1.2 TLSv1.3" \
    "${LOCATIONS[@]}")
$CLEAR_SERVER" \
    "$(conn_access_log)
    limit_req_zone \$binary_remote_addr zone=api:1m rate=300r/s;
    limit_req_zone \$binary_remote_addr zone=strict:1m rate=1r/s;"
timeout 300 "$PY" "$SCRIPT_DIR/ratelimit_server.py" --host 127.0.0.1 --port "$RL_PORT" \
    --max-seconds 280 2>"$WORK/ratelimit.log" &
PIDS+=("$!")
wait_listen "$RL_PORT"
start_nginx "$H2_PORT" "$CLEAR_PORT"
mark_access_log

API="https://localhost:$H2_PORT/api"
JAVA+=(-Dclient.expect=429)

# java_posts NAME N THREADS CLASS VERSION [URL]: one Java client (CLASS,
# which may carry JVM options before it and its first argument after it)
# over HTTP VERSION, POSTing a 200-byte JSON body to URL (default /api),
# THREADS threads × N requests (AsyncClient: N requests, THREADS of them
# outstanding at once).
java_posts() {
    local name=$1 n=$2 threads=$3 class=$4 version=$5 url=${6:-$API} port
    port=${url#*://*:}
    port=${port%%/*}
    log "$name.pcap"
    sleep 1.2   # the limiter's burst refills
    start_capture "$OUT_DIR/$name.pcap" "tcp port $port"
    # shellcheck disable=SC2086 # CLASS may carry its first argument
    "${JAVA[@]}" -Dclient.version="$version" -Dclient.body=200 $class "$url" "$n" "$threads" \
        2>"$WORK/$name.client.log" || { cat "$WORK/$name.client.log" >&2; exit 1; }
    stop_capture
    grep -c ' -> 429' "$WORK/$name.client.log" >&2 || true
    save_access_log "$name"
}

# httpx_posts NAME N TASKS: one httpx.AsyncClient over HTTP/2, TASKS
# tasks × N POSTs of a 200-byte JSON body to /api; with a key log.
httpx_posts() {
    local name=$1 n=$2 tasks=$3
    log "$name.pcap"
    sleep 1.2
    rm -f "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $H2_PORT"
    SSLKEYLOGFILE="$OUT_DIR/$name.keylog" timeout 60 "$PY" "$SCRIPT_DIR/httpx_h2_client.py" \
        "$API" "$n" "$tasks" 200 2>"$WORK/$name.client.log" \
        || { cat "$WORK/$name.client.log" >&2; exit 1; }
    stop_capture
    grep -c ' -> 429 HTTP/2' "$WORK/$name.client.log" >&2 || true
    save_access_log "$name"
}

# curl_posts NAME HTTP-FLAG: one curl with eight POSTs of a 41-byte JSON
# body on one connection, then one with four POSTs of 20 000 bytes to
# /api-strict (the first passes, the rest are answered 429 before their
# bodies are read); with a key log.
curl_posts() {
    local name=$1 version=$2 post urls=()
    post=(timeout 30 curl -sS -k "$version" --resolve "localhost:$H2_PORT:127.0.0.1"
          -w '%{stderr}  -> %{http_code} http_version=%{http_version} num_connects=%{num_connects}\n')
    for _ in $(seq 1 8); do urls+=(-o /dev/null "$API"); done
    log "$name.pcap"
    sleep 1.2
    rm -f "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $H2_PORT"
    SSLKEYLOGFILE="$OUT_DIR/$name.keylog" "${post[@]}" \
        -d '{"small":"json body of some forty bytes"}' "${urls[@]}"
    SSLKEYLOGFILE="$OUT_DIR/$name.keylog" "${post[@]}" \
        --data-binary "@$WORK/upload.bin" -o /dev/null "$API-strict" -o /dev/null "$API-strict" \
        -o /dev/null "$API-strict" -o /dev/null "$API-strict"
    stop_capture
    save_access_log "$name"
}
head -c 20000 /dev/zero | tr '\0' 'x' >"$WORK/upload.bin"

# Over HTTP/2 (section "aa"). java-httpclient-h2-post-429-30 / -10x10: one
# HttpClient, 1 thread × 30 requests, then 10 threads × 10 at once.
if part h2; then
java_posts java-httpclient-h2-post-429-30 30 1 HttpClientPooled HTTP_2
java_posts java-httpclient-h2-post-429-10x10 10 10 HttpClientPooled HTTP_2

# httpx-h2-post-429-20 / -10x10: one httpx.AsyncClient POSTing a 200-byte
# JSON body, 1 task × 20 requests, then 10 tasks × 10 multiplexed on its
# one connection; with a key log. (httpx 0.23's h2 stack failed once in
# fourteen runs with ten tasks, LocalProtocolError: run the script again.)
httpx_posts httpx-h2-post-429-20 20 1
httpx_posts httpx-h2-post-429-10x10 10 10

# h2-curl-post-429-12: curl_posts over HTTP/2.
curl_posts h2-curl-post-429-12 --http2
fi

# Over HTTP/1.1 (section "ab"): java-urlconnection-post-429-30 / -10x10:
# HttpURLConnection (fixed-length streaming: the head and the body are two
# records), 1 thread × 30, then 10 × 10; java-httpclient-h1-post-429-10x10:
# HttpClient forced to HTTP/1.1, 10 × 10 (its pool: a connection per
# thread at most); curl-h1-post-429-12: curl_posts over HTTP/1.1.
if part h1; then
java_posts java-urlconnection-post-429-30 30 1 UrlConnClient HTTP_1_1
java_posts java-urlconnection-post-429-10x10 10 10 UrlConnClient HTTP_1_1
java_posts java-httpclient-h1-post-429-10x10 10 10 HttpClientPooled HTTP_1_1
curl_posts curl-h1-post-429-12 --http1.1
fi

# The pooled libraries the brief names (section "ac"): OkHttp 3 (HTTP/2 by
# ALPN) and Apache HttpClient 5 (HTTP/1.1, a pool of ten), 10 threads × 10.
if part lib; then
java_posts okhttp-post-429-10x10 10 10 "PooledLibClient okhttp" HTTP_2
java_posts apache-httpclient5-post-429-10x10 10 10 "PooledLibClient apache" HTTP_1_1
fi

# The non-blocking clients under load (section "ad"): one thread keeping
# 50 of 100 POSTs outstanding at once. java.net.http.HttpClient's sendAsync
# over HTTP/2 (also with its first request answered before the others
# start: the connection warmed) and over HTTP/1.1 (a connection per
# outstanding request), and
# Apache HttpAsyncClient 5 over HTTP/1.1 (a pool of 50) and over HTTP/2
# (its H2 client) — the latter to /api-app: HttpCore 5.2.1's HTTP/2 client
# fails every outstanding request when nginx resets a stream (NO_ERROR)
# after an early 429, so there only the backend answers 429 — and OkHttp
# 3's enqueue over HTTP/2 and HTTP/1.1 (its dispatcher runs five calls to
# a host at once).
if part async; then
java_posts java-async-h2-post-429-100x50 100 50 "AsyncClient jdk" HTTP_2
java_posts java-async-warm-h2-post-429-100x50 100 50 "-Dclient.warmup=true AsyncClient jdk" HTTP_2
java_posts java-async-h1-post-429-100x50 100 50 "AsyncClient jdk" HTTP_1_1
java_posts apache-async-h1-post-429-100x50 100 50 "AsyncClient apache" HTTP_1_1
java_posts apache-async-h2-post-429-100x50 100 50 "AsyncClient apache" HTTP_2 "$API-app"
java_posts okhttp-async-h2-post-429-100x50 100 50 "AsyncClient okhttp" HTTP_2
java_posts okhttp-async-h1-post-429-100x50 100 50 "AsyncClient okhttp" HTTP_1_1
fi
# Netty 4.1, the event loop under Reactor Netty and Spring's WebClient
# (section "ae"): one event-loop thread, 50 of 100 POSTs outstanding at
# once, each written as one message (head and body together), over HTTP/2
# (every request a stream of one connection) and over HTTP/1.1 (a pool of
# at most 50 connections).
if part netty; then
java_posts netty-h2-post-429-100x50 100 50 NettyClient HTTP_2
java_posts netty-h1-post-429-100x50 100 50 NettyClient HTTP_1_1
fi
# One connection, many requests (section "af"): more than a record lists
# (--max-requests-listed, 100), so that the status codes and latencies of
# the requests past the list are checked against nginx's log.
# httpx-h2-post-429-250: httpx, 1 task × 250 POSTs over HTTP/2;
# java-async-warm-h2-post-429-300x50: HttpClient's sendAsync, 300 POSTs
# with 50 outstanding on one HTTP/2 connection, its first answered before
# the others start (no key log: the JDK writes none);
# curl-h1-post-429-200: one curl, 200 POSTs of a 41-byte JSON body on one
# HTTP/1.1 keep-alive connection. httpx and curl with a key log.
if part many; then
httpx_posts httpx-h2-post-429-250 250 1
java_posts java-async-warm-h2-post-429-300x50 300 50 "-Dclient.warmup=true AsyncClient jdk" HTTP_2
name=curl-h1-post-429-200
log "$name.pcap"
sleep 1.2
rm -f "$OUT_DIR/$name.keylog"
urls=()
for _ in $(seq 1 200); do urls+=(-o /dev/null "$API"); done
start_capture "$OUT_DIR/$name.pcap" "tcp port $H2_PORT"
SSLKEYLOGFILE="$OUT_DIR/$name.keylog" timeout 60 curl -sS -k --http1.1 \
    --resolve "localhost:$H2_PORT:127.0.0.1" -w '%{stderr}  -> %{http_code}\n' \
    -d '{"small":"json body of some forty bytes"}' "${urls[@]}" 2>"$WORK/$name.client.log" \
    || { cat "$WORK/$name.client.log" >&2; exit 1; }
stop_capture
grep -c ' -> 429' "$WORK/$name.client.log" >&2 || true
save_access_log "$name"
fi
# Blocking against non-blocking on plain HTTP/1.1 (section "ag"), where
# every status is read without keys: HttpURLConnection, 10 threads × 10,
# and HttpClient's sendAsync, 100 POSTs with 50 outstanding, to /api.
if part clear; then
CLEAR_API="http://localhost:$CLEAR_PORT/api"
java_posts java-urlconnection-clear-post-429-10x10 10 10 UrlConnClient HTTP_1_1 "$CLEAR_API"
java_posts java-async-clear-h1-post-429-100x50 100 50 "AsyncClient jdk" HTTP_1_1 "$CLEAR_API"
fi
wc -l "$OUT_DIR"/*-post-429-*.nginx-access.log >&2
