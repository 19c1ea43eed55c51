#!/usr/bin/env bash
# Record small, real loopback captures of a server closing idle keep-alive
# connections under its clients, for the `handshakes` test-suite. One nginx
# serves cleartext HTTP/1.1 on 127.0.0.1:18470 with `keepalive_timeout 1s`
# (an idle connection is closed by nginx, FIN first, 1 s after its last
# response), and each client makes 5 sequential GETs of the 1342-byte test
# page on one keep-alive connection pool, pausing between them:
#   idle-urlconnection-keepalive.pcap     Java 17 HttpURLConnection, keep-alive
#                                         on (the JDK default; its cache keeps
#                                         an idle connection 5 s), 2 s pauses
#   idle-httpclient.pcap                  Java 17 java.net.http.HttpClient
#                                         (HTTP/1.1), 2 s pauses
#   idle-requests-session.pcap            python requests, one Session, 2 s
#                                         pauses
#   idle-urlconnection-keepalive-05.pcap  HttpURLConnection as above with
#                                         0.5 s pauses (below nginx's 1 s:
#                                         the control, one connection)
# Each capture comes with FILE.nginx-access.log (nginx's lines for that run
# in record-lib's `conn` format: client port, nginx's connection serial and
# the request's number on it). See captures/README.md, section "Servers
# closing idle connections".
#
# The same scenario over TLS: a second `server` of the same nginx (same
# `keepalive_timeout 1s`; the only one when only `tls` is recorded) serves
# HTTPS, TLS 1.3 and HTTP/1.1 only (no http2), on 127.0.0.1:18471 with
# make_cert's throw-away certificate, to 5 GETs with 2 s pauses by
#   idle-urlconnection-tls.pcap           Java 17 HttpsURLConnection (trusts
#                                         the certificate through make_java's
#                                         truststore; Java writes no key log)
#   idle-requests-tls.pcap (+ .keylog)    python requests, one Session,
#                                         verifying against the certificate;
#                                         its TLS secrets (SSLKEYLOGFILE) in
#                                         idle-requests-tls.keylog
# each with its .nginx-access.log as well.
#
# Usage:  sudo scripts/record-idle-captures.sh [clear] [tls]
#         (or sudo PARTS="clear tls" scripts/record-idle-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: both): clear (the
# four cleartext files, "au"-"ax"), tls (the two TLS files, "ay", "az").
#
# Requirements (Debian): tcpdump, tshark, nginx (nginx-light is enough),
# openssl and a JDK 17 (java, javac, keytool: make_java builds the
# truststore the TLS part uses), iproute2 (ss), python3 with `requests`.
#
# Only 127.0.0.1 is talked to, on ports 18470 and 18471. nginx and tcpdump
# are stopped by PID on exit; everything else lives in a temp dir deleted at
# the end. Writes only captures/idle-* of the parts recorded (re-running
# overwrites them, with new ports and times); touches no other capture, and
# nothing in src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTP_PORT=18470      # nginx, plain HTTP/1.1, keepalive_timeout 1s
TLS_PORT=18471       # nginx, HTTPS (TLS 1.3, HTTP/1.1 only), keepalive_timeout 1s
GETS=5               # GETs per client run

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "clear tls" "$@"
require_root
require_tools tcpdump tshark nginx openssl ss java javac keytool timeout
find_python requests urllib3
setup_work record-idle-captures

# ---------------------------------------------------------------------------
# Setup: the test page, nginx with a 1 s keep-alive timeout and the `conn`
# access log, the Java clients.
# ---------------------------------------------------------------------------
log "setup in $WORK"
make_docroot
make_cert            # the TLS server's certificate, trusted by make_java's truststore
make_java "$SCRIPT_DIR/java/UrlConnClient.java" "$SCRIPT_DIR/java/HttpClientPooled.java"
# make_java's JAVA starts with `timeout 120`: bound each run to 60 s instead.
[[ ${JAVA[0]} == timeout ]] || { echo "error: unexpected JAVA command ${JAVA[*]}" >&2; exit 1; }
JAVA_RUN=(timeout 60 "${JAVA[@]:2}")

SERVERS=""
PORTS=()
if part clear; then
    SERVERS+="$(cat <<EOF
    server {
        listen 127.0.0.1:$HTTP_PORT;
        root $WORK/www;
    }
EOF
)"
    PORTS+=("$HTTP_PORT")
fi
if part tls; then
    # TLS 1.3 only, no http2: ALPN, if offered, settles on http/1.1.
    SERVERS+="${SERVERS:+$'\n'}$(tls_server "127.0.0.1:$TLS_PORT ssl" "TLSv1.3")"
    PORTS+=("$TLS_PORT")
fi
NGINX_KEEPALIVE_TIMEOUT=1s write_nginx_conf 64 "$SERVERS" "$(conn_access_log)"
grep -q 'keepalive_timeout 1s;' "$WORK/nginx/nginx.conf"
start_nginx "${PORTS[@]}"
mark_access_log

URL="http://127.0.0.1:$HTTP_PORT/index.html"
FILTER="tcp port $HTTP_PORT"

# record NAME COMMAND... : COMMAND captured (tcpdump filter FILTER) to
# captures/NAME.pcap, nginx's lines for it to
# captures/NAME.nginx-access.log; nginx must log $GETS requests. Prints the
# TCP conversations and nginx's connections.
record() {
    local name=$1
    shift
    log "$name.pcap"
    start_capture "$OUT_DIR/$name.pcap" "$FILTER"
    "$@" 2>&1 | tee "$WORK/$name.client.log" >&2
    stop_capture
    save_access_log "$name"
    cat "$OUT_DIR/$name.nginx-access.log" >&2
    expect_lines "$name" "$GETS"
    tshark -r "$OUT_DIR/$name.pcap" -q -z conv,tcp >&2
    # let nginx's idle timer of the last connection (if still open) expire
    # before the next run, so that runs do not overlap in its log
    sleep 1.5
}

if part clear; then
# 1. HttpURLConnection, keep-alive on (JDK default), 2 s between GETs:
#    nginx closes each idle connection after 1 s, the JDK cache keeps it 5 s.
record idle-urlconnection-keepalive \
    "${JAVA_RUN[@]}" -Dclient.pause=2000 UrlConnClient "$URL" "$GETS"

# 2. java.net.http.HttpClient (HTTP/1.1, HttpClientPooled's default), 2 s
#    between GETs.
record idle-httpclient \
    "${JAVA_RUN[@]}" -Dclient.pause=2000 HttpClientPooled "$URL" "$GETS"

# 3. python requests, one Session, 2 s between GETs.
record idle-requests-session \
    timeout 60 "$PY" "$SCRIPT_DIR/requests_client.py" session "$URL" "$GETS" --pause 2

# 4. the control: HttpURLConnection with 0.5 s between GETs (below nginx's
#    1 s), so the connection is never idle long enough to be closed.
record idle-urlconnection-keepalive-05 \
    "${JAVA_RUN[@]}" -Dclient.pause=500 UrlConnClient "$URL" "$GETS"
fi

# ---------------------------------------------------------------------------
# The same over TLS (nginx's second server, TLS 1.3, HTTP/1.1 only).
# ---------------------------------------------------------------------------
if part tls; then
SURL="https://127.0.0.1:$TLS_PORT/index.html"
FILTER="tcp port $TLS_PORT"

# 5. HttpsURLConnection, keep-alive on, 2 s between GETs (as 1, over TLS);
#    trust from make_java's truststore. No key log: the JDK writes none.
record idle-urlconnection-tls \
    "${JAVA_RUN[@]}" -Dclient.pause=2000 UrlConnClient "$SURL" "$GETS"

# 6. python requests, one Session, 2 s between GETs (as 3, over TLS),
#    verifying nginx's certificate against cert.pem; python's ssl module
#    writes the TLS secrets to SSLKEYLOGFILE (it appends: start afresh).
rm -f "$OUT_DIR/idle-requests-tls.keylog"
record idle-requests-tls \
    env REQUESTS_CA_BUNDLE="$WORK/cert.pem" SSLKEYLOGFILE="$OUT_DIR/idle-requests-tls.keylog" \
    timeout 60 "$PY" "$SCRIPT_DIR/requests_client.py" session "$SURL" "$GETS" --pause 2
fi

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/idle-* >&2
stop_server "$NGINX_PID"
