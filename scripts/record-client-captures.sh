#!/usr/bin/env bash
# Record more small, real loopback captures for the `handshakes` test-suite:
# Java 17 clients (HttpURLConnection, java.net.http.HttpClient) over TLS,
# HTTP/2 over TLS (ALPN h2), h2c with prior knowledge, HTTP/1.1 pipelining,
# chunked responses, python-requests over TLS, curl TLS 1.3 keep-alive x5.
# Companion of scripts/record-captures.sh (same conventions); see
# captures/README.md, section "Client captures", for what each file contains.
#
# Usage:  sudo scripts/record-client-captures.sh
#
# Requirements (Debian): tcpdump, tshark, nginx built with http_v2 (Debian's
# nginx-light 1.22 is), curl with HTTP2 (nghttp2), openssl, iproute2 (ss),
# nghttp (Debian package nghttp2-client), a JDK 17 (javac, java, keytool),
# python3 with `requests`.
#
# Everything runs on 127.0.0.1 on fixed high ports. Every server and tcpdump
# started here is stopped by PID on exit. The TLS key/cert and the Java
# truststore are throw-away and live in a temp dir deleted at the end.
# Re-running overwrites the capture files listed in the README.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTP_PORT=18080      # nginx, plain HTTP/1.1 (pipelining)
HTTPS_PORT=18443     # nginx, HTTPS TLS 1.2+1.3, HTTP/1.1 only (ALPN http/1.1)
H2_PORT=18446        # nginx, HTTPS + http2 (ALPN h2)
H2C_PORT=18081       # nginx, cleartext HTTP/2 (prior knowledge only)
CHUNK_PORT=18082     # nginx, plain HTTP/1.1 with `ssi on` -> chunked responses

# Shared helpers: root and tool checks, work dir and clean-up, tcpdump.
# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump tshark nginx curl nghttp openssl ss java javac keytool
if ! nginx -V 2>&1 | grep -q -- '--with-http_v2_module'; then
    echo "error: nginx lacks http_v2_module (apt-get install nginx-full)" >&2
    exit 1
fi
if ! curl --version | grep -q 'HTTP2'; then
    echo "error: curl lacks HTTP2 support" >&2
    exit 1
fi
find_python
setup_work record-client-captures

# nginx access log: one line per request with the connection serial number,
# the per-connection request counter and the TLS resumption flag. It is the
# server-side ground truth for the Java captures (no keylog there).
# save_access_log NAME : copy the access-log lines written since the last call
# to $OUT_DIR/NAME.nginx-access.log
ACCESS_LINES=0

CURL=(timeout 30 curl -sS -w '%{stderr}  -> %{http_code} http_version=%{http_version} num_connects=%{num_connects} %{url_effective}\n')

# ---------------------------------------------------------------------------
# Setup: docroot (same 1342-byte index.html as record-captures.sh), TLS cert,
# Java truststore, Java classes, nginx
# ---------------------------------------------------------------------------
log "setup in $WORK"
make_docroot
make_cert

make_java "$SCRIPT_DIR/java/UrlConnClient.java" "$SCRIPT_DIR/java/HttpClientPooled.java"

write_nginx_conf 256 "$(cat <<EOF
    server {
        listen 127.0.0.1:$HTTP_PORT;
        root $WORK/www;
    }
$(tls_server "127.0.0.1:$HTTPS_PORT ssl" "TLSv1.2 TLSv1.3")
$(tls_server "127.0.0.1:$H2_PORT ssl http2" "TLSv1.2 TLSv1.3")
    server {
        listen 127.0.0.1:$H2C_PORT http2;
        root $WORK/www;
    }
    server {
        listen 127.0.0.1:$CHUNK_PORT;
        ssi on;
        root $WORK/www;
    }
EOF
)" "$(conn_access_log)"
start_nginx "$HTTP_PORT" "$HTTPS_PORT" "$H2_PORT" "$H2C_PORT" "$CHUNK_PORT"
mark_access_log

URL="http://127.0.0.1:$HTTP_PORT/index.html"
SURL="https://localhost:$HTTPS_PORT/index.html"
H2URL="https://localhost:$H2_PORT/index.html"
H2CURL="http://127.0.0.1:$H2C_PORT/index.html"
CHURL="http://127.0.0.1:$CHUNK_PORT/index.html"


# ---------------------------------------------------------------------------
# 1. Java 17 over TLS (nginx :18443, HTTP/1.1)
# ---------------------------------------------------------------------------
java_capture() {
    local name=$1; shift
    log "1. $name.pcap"
    mark_access_log
    start_capture "$OUT_DIR/$name.pcap" "tcp port $HTTPS_PORT"
    "${JAVA[@]}" "$@" 2>"$WORK/$name.client.log" || { cat "$WORK/$name.client.log" >&2; return 1; }
    stop_capture
    tail -n 3 "$WORK/$name.client.log" >&2
    save_access_log "$name"
}
java_capture java-urlconnection-keepalive-off-10 -Dhttp.keepAlive=false UrlConnClient "$SURL" 10
java_capture java-urlconnection-keepalive-on-10 UrlConnClient "$SURL" 10
java_capture java-httpclient-pooled-10 HttpClientPooled "$SURL" 10
java_capture java-httpclient-pooled-10x10 HttpClientPooled "$SURL" 10 10
java_capture java-urlconnection-keepalive-off-10x10 -Dhttp.keepAlive=false UrlConnClient "$SURL" 10 10

# ---------------------------------------------------------------------------
# 2. HTTP/2 over TLS: one curl, 10 URLs (nginx :18446, ALPN h2)
# ---------------------------------------------------------------------------
log "2. h2-curl-10.pcap"
rm -f "$OUT_DIR/h2-curl-10.keylog"
start_capture "$OUT_DIR/h2-curl-10.pcap" "tcp port $H2_PORT"
SSLKEYLOGFILE="$OUT_DIR/h2-curl-10.keylog" \
    "${CURL[@]}" --http2 -k --resolve "localhost:$H2_PORT:127.0.0.1" \
    "$H2URL" "$H2URL" "$H2URL" "$H2URL" "$H2URL" "$H2URL" "$H2URL" "$H2URL" "$H2URL" "$H2URL" >/dev/null
stop_capture

# ---------------------------------------------------------------------------
# 3. h2c with prior knowledge (nginx :18081), 5 requests on one connection.
#    Not curl: Debian 12's curl 7.88.1 fails every reused prior-knowledge
#    transfer with "(16) Error in the HTTP2 framing layer" (curl issue #10634,
#    fixed in 8.0.0), so `curl --http2-prior-knowledge URL x5` gives 1 request
#    and 4 errors. nghttp (nghttp2-client, prior knowledge for http:// URIs)
#    with -m 5 sends the 5 GETs on one connection, multiplexed (streams 1..9
#    open concurrently). --no-dep: no PRIORITY dependency hints.
# ---------------------------------------------------------------------------
log "3. h2c-nghttp-prior-knowledge-5.pcap"
start_capture "$OUT_DIR/h2c-nghttp-prior-knowledge-5.pcap" "tcp port $H2C_PORT"
timeout 30 nghttp -n -s --no-dep -t 10 -m 5 "$H2CURL" >&2
stop_capture

# ---------------------------------------------------------------------------
# 4. HTTP/1.1 pipelining (3 requests in one send()) and chunked responses
# ---------------------------------------------------------------------------
log "4. http-pipelined-3.pcap"
start_capture "$OUT_DIR/http-pipelined-3.pcap" "tcp port $HTTP_PORT"
timeout 30 "$PY" "$SCRIPT_DIR/pipeline_client.py" 127.0.0.1 "$HTTP_PORT" /index.html 3
stop_capture

log "4. http-chunked-3.pcap"
start_capture "$OUT_DIR/http-chunked-3.pcap" "tcp port $CHUNK_PORT"
"${CURL[@]}" --http1.1 "$CHURL" "$CHURL" "$CHURL" >/dev/null
stop_capture

# ---------------------------------------------------------------------------
# 5. python-requests over TLS (nginx :18443); trust via REQUESTS_CA_BUNDLE,
#    keys via SSLKEYLOGFILE (honoured by urllib3 2.x)
# ---------------------------------------------------------------------------
for mode in session nosession; do
    name="tls-python-requests-$mode-5"
    log "5. $name.pcap"
    rm -f "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $HTTPS_PORT"
    REQUESTS_CA_BUNDLE="$WORK/cert.pem" SSLKEYLOGFILE="$OUT_DIR/$name.keylog" \
        timeout 60 "$PY" "$SCRIPT_DIR/requests_client.py" "$mode" "$SURL" 5
    stop_capture
done

# ---------------------------------------------------------------------------
# 6. curl TLS 1.3, one process, 5 URLs (keep-alive)
# ---------------------------------------------------------------------------
log "6. tls13-curl-keepalive-5.pcap"
rm -f "$OUT_DIR/tls13-curl-keepalive-5.keylog"
start_capture "$OUT_DIR/tls13-curl-keepalive-5.pcap" "tcp port $HTTPS_PORT"
SSLKEYLOGFILE="$OUT_DIR/tls13-curl-keepalive-5.keylog" \
    "${CURL[@]}" --http1.1 -k --resolve "localhost:$HTTPS_PORT:127.0.0.1" --tlsv1.3 \
    "$SURL" "$SURL" "$SURL" "$SURL" "$SURL" >/dev/null
stop_capture

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/java-* "$OUT_DIR"/h2* "$OUT_DIR"/http-pipelined-3.pcap \
      "$OUT_DIR"/http-chunked-3.pcap "$OUT_DIR"/tls-python-requests-* \
      "$OUT_DIR"/tls13-curl-keepalive-5.* >&2
stop_server "$NGINX_PID"
