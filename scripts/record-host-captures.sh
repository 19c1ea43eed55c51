#!/usr/bin/env bash
# Record small, real loopback captures of clients talking to two virtual
# hosts of one cleartext HTTP/1.1 server, for the `handshakes` test-suite:
# without TLS there is no SNI, so only the requests' Host header tells
# a.test from b.test on the same address and port, and a client that pools
# its connections by host name opens a second connection beside an idle one
# to "the same server" without missing any reuse. One nginx listens on
# 127.0.0.1:18496 with two `server` blocks, `server_name a.test` (the
# first, so the default) and `server_name b.test`, each serving its own
# small index.html; keep-alive on (keepalive_timeout 75s).
#   http-curl-two-hosts-4.pcap       ONE curl, `--resolve a.test:18496:127.0.0.1
#                                    --resolve b.test:18496:127.0.0.1`, 4 URLs
#                                    in the order a.test, b.test, a.test,
#                                    b.test (http://HOST:18496/index.html):
#                                    curl's connection cache is keyed by the
#                                    URL's host name
#   http-java-two-hosts-6.pcap       Java 17 java.net.http.HttpClient
#                                    (scripts/java/MultiHostClient.java, ONE
#                                    client, HTTP/1.1 forced), 6 sequential
#                                    GETs alternating a.test, b.test, the
#                                    names resolved to 127.0.0.1 by
#                                    -Djdk.net.hosts.file (a hosts file in the
#                                    temp dir): the JDK pools by resolved
#                                    address and port, not by name, so all
#                                    six go on one connection
#   http-curl-one-host-header-4.pcap the control: ONE curl, 4 URLs all
#                                    http://127.0.0.1:18496/index.html, joined
#                                    by --next, with `-H 'Host: a.test'`,
#                                    `b.test`, `a.test`, `b.test`: curl keys
#                                    its cache by 127.0.0.1, so different Host
#                                    headers go on one connection
# Each comes with FILE.nginx-access.log (nginx's lines for the run in
# record-lib's `conn` format plus `host=$host server=$server_name`: which
# Host each request named and which virtual host answered it). Each capture
# is stopped only once no connection to the port is left open (the clients
# close theirs when they exit). See captures/README.md, section "Virtual
# hosts in cleartext".
#
# Usage:  sudo scripts/record-host-captures.sh [curl] [java] [header]
#         (or sudo PARTS="curl java" scripts/record-host-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: all three): curl
# (http-curl-two-hosts-4, "bn"), java (http-java-two-hosts-6, "bo"), header
# (http-curl-one-host-header-4, "bp").
#
# Requirements (Debian): tcpdump, tshark, nginx (nginx-light is enough),
# curl, a JDK 17 (java, javac), iproute2 (ss), coreutils (timeout).
#
# Only 127.0.0.1 is talked to, on port 18496 (nginx, plain HTTP/1.1; the
# names a.test and b.test are resolved by the clients themselves, never by
# DNS). nginx and tcpdump are stopped by PID on exit; the docroots, the
# hosts file and the compiled Java client live in a temporary directory
# deleted at the end. Writes only captures/http-curl-two-hosts-4.*,
# captures/http-java-two-hosts-6.* and captures/http-curl-one-host-header-4.*
# (each .pcap, .nginx-access.log) of the parts recorded (re-running
# overwrites them, with new ports and times); touches no other capture, and
# nothing in src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

PORT=18496           # nginx, plain HTTP/1.1, two virtual hosts
JAVA_GETS=6          # GETs of http-java-two-hosts-6 (a, b, a, b, …)

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "curl java header" "$@"
require_root
require_tools tcpdump tshark nginx curl java javac ss timeout
setup_work record-host-captures

log "setup in $WORK"

# host_docroot HOST : $WORK/www-HOST/index.html, a small page naming HOST.
host_docroot() {
    local host=$1 dir="$WORK/www-$1"
    mkdir -p "$dir"
    {
        echo '<!DOCTYPE html>'
        echo "<html><head><title>$host</title></head><body>"
        echo "<h1>virtual host $host</h1>"
        for i in 1 2 3 4 5; do
            echo "<p>$host line $i: the quick brown fox jumps over the lazy dog.</p>"
        done
        echo '</body></html>'
    } >"$dir/index.html"
    chmod 755 "$dir"; chmod 644 "$dir/index.html"
    wc -c "$dir/index.html" >&2
}
host_docroot a.test
host_docroot b.test

# host_access_log : HTTP_LINES for write_nginx_conf: record-lib's `conn`
# format (conn_access_log) with, at its end, the Host the request named
# ($host: without its port, lower case) and the virtual host that answered
# ($server_name), as format `connhost`.
host_access_log() {
    cat <<EOF
    log_format connhost '\$remote_addr:\$remote_port conn=\$connection '
                        'conn_req=\$connection_requests "\$request" \$status '
                        'proto=\$server_protocol tls=\$ssl_protocol '
                        'reused=\$ssl_session_reused ua="\$http_user_agent" '
                        'host=\$host server=\$server_name';
    access_log $WORK/nginx/access.log connhost;
EOF
}

SERVERS="$(cat <<EOF
    server {
        listen 127.0.0.1:$PORT;
        server_name a.test;
        root $WORK/www-a.test;
    }
    server {
        listen 127.0.0.1:$PORT;
        server_name b.test;
        root $WORK/www-b.test;
    }
EOF
)"
write_nginx_conf 64 "$SERVERS" "$(host_access_log)"
grep -q 'keepalive_timeout 75s;' "$WORK/nginx/nginx.conf"
start_nginx "$PORT"
mark_access_log

A="http://a.test:$PORT/index.html"
B="http://b.test:$PORT/index.html"
IP_URL="http://127.0.0.1:$PORT/index.html"
FILTER="tcp port $PORT"
CURL_W='%{stderr}  %{url_effective} -> %{http_code} num_connects=%{num_connects} local_port=%{local_port} size=%{size_download}\n'

# facts NAME : per HTTP request in NAME.pcap, its TCP stream, Host and URI.
facts() {
    log "$1: requests (tcp.stream, http.host, http.request.uri)"
    tshark -r "$OUT_DIR/$1.pcap" -Y http.request -T fields -e tcp.stream \
        -e http.host -e http.request.uri >&2
}

# record NAME LOGGED COMMAND... : COMMAND captured to NAME.pcap, nginx's
# lines for it (LOGGED expected) to NAME.nginx-access.log; prints the TCP
# conversations and the requests per stream.
record() {
    local name=$1 logged=$2
    shift 2
    log "$name.pcap"
    start_capture "$OUT_DIR/$name.pcap" "$FILTER"
    "$@"
    end_part "$name" "$logged" "$PORT"
    facts "$name"
}

if part curl; then
    record http-curl-two-hosts-4 4 \
        timeout 60 curl -sS -w "$CURL_W" \
        --resolve "a.test:$PORT:127.0.0.1" --resolve "b.test:$PORT:127.0.0.1" \
        "$A" "$B" "$A" "$B" -o /dev/null -o /dev/null -o /dev/null -o /dev/null
fi
if part java; then
    mkdir -p "$WORK/classes"
    javac -d "$WORK/classes" "$SCRIPT_DIR/java/MultiHostClient.java"
    echo "127.0.0.1 a.test b.test" >"$WORK/hosts"
    urls=()
    for i in $(seq 1 "$JAVA_GETS"); do
        if (( i % 2 )); then urls+=("$A"); else urls+=("$B"); fi
    done
    record http-java-two-hosts-6 "$JAVA_GETS" \
        timeout 60 java -cp "$WORK/classes" -Djava.net.preferIPv4Stack=true \
        -Djdk.net.hosts.file="$WORK/hosts" MultiHostClient "${urls[@]}"
fi
if part header; then
    record http-curl-one-host-header-4 4 \
        timeout 60 curl -sS -w "$CURL_W" -o /dev/null -H 'Host: a.test' "$IP_URL" \
        --next -sS -w "$CURL_W" -o /dev/null -H 'Host: b.test' "$IP_URL" \
        --next -sS -w "$CURL_W" -o /dev/null -H 'Host: a.test' "$IP_URL" \
        --next -sS -w "$CURL_W" -o /dev/null -H 'Host: b.test' "$IP_URL"
fi
log "done"
stop_server "$NGINX_PID"
