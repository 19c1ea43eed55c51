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
# Usage:  sudo scripts/record-idle-captures.sh
#
# Requirements (Debian): tcpdump, tshark, nginx (nginx-light is enough),
# openssl and a JDK 17 (java, javac, keytool: make_java builds a
# truststore, unused here), iproute2 (ss), python3 with `requests`.
#
# Only 127.0.0.1 is talked to, on port 18470. nginx and tcpdump are stopped
# by PID on exit; everything else lives in a temp dir deleted at the end.
# Writes only captures/idle-* (re-running overwrites them, with new ports
# and times); touches no other capture, and nothing in src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTP_PORT=18470      # nginx, plain HTTP/1.1, keepalive_timeout 1s
GETS=5               # GETs per client run

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
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
make_cert            # make_java's truststore wants a certificate
make_java "$SCRIPT_DIR/java/UrlConnClient.java" "$SCRIPT_DIR/java/HttpClientPooled.java"
# make_java's JAVA starts with `timeout 120`: bound each run to 60 s instead.
[[ ${JAVA[0]} == timeout ]] || { echo "error: unexpected JAVA command ${JAVA[*]}" >&2; exit 1; }
JAVA_RUN=(timeout 60 "${JAVA[@]:2}")

NGINX_KEEPALIVE_TIMEOUT=1s write_nginx_conf 64 "$(cat <<EOF
    server {
        listen 127.0.0.1:$HTTP_PORT;
        root $WORK/www;
    }
EOF
)" "$(conn_access_log)"
grep -q 'keepalive_timeout 1s;' "$WORK/nginx/nginx.conf"
start_nginx "$HTTP_PORT"
mark_access_log

URL="http://127.0.0.1:$HTTP_PORT/index.html"
FILTER="tcp port $HTTP_PORT"

# record NAME COMMAND... : COMMAND captured to captures/NAME.pcap, nginx's
# lines for it to captures/NAME.nginx-access.log; nginx must log $GETS
# requests. Prints the TCP conversations and nginx's connections.
record() {
    local name=$1 got
    shift
    log "$name.pcap"
    start_capture "$OUT_DIR/$name.pcap" "$FILTER"
    "$@" 2>&1 | tee "$WORK/$name.client.log" >&2
    stop_capture
    save_access_log "$name"
    cat "$OUT_DIR/$name.nginx-access.log" >&2
    got=$(wc -l <"$OUT_DIR/$name.nginx-access.log")
    if [[ $got -ne $GETS ]]; then
        echo "error: $name: nginx logged $got requests, expected $GETS" >&2
        return 1
    fi
    tshark -r "$OUT_DIR/$name.pcap" -q -z conv,tcp >&2
    # let nginx's idle timer of the last connection (if still open) expire
    # before the next run, so that runs do not overlap in its log
    sleep 1.5
}

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

# ---------------------------------------------------------------------------
log "done"
ls -l "$OUT_DIR"/idle-* >&2
stop_server "$NGINX_PID"
