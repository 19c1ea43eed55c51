#!/usr/bin/env bash
# Record the real HTTP/2-over-TLS captures that check the request estimate
# without keys where clients multiplex: java.net.http.HttpClient (Java 17,
# HTTP/2 as it negotiates by default) with one thread and with ten threads
# sharing its one connection, curl --parallel, curl POSTs with bodies, and
# headless Chromium
# loading a page of 20 images over TLS 1.2 and then TLS 1.3 (curl and
# Chromium with a key log, the truth tshark can read). nginx's access log
# is kept beside each capture.
# See captures/README.md, section "z".
#
# Usage:  sudo scripts/record-h2-captures.sh
#
# Requirements (Debian): tcpdump, nginx (nginx-light is enough, with
# http2), curl with HTTP/2 (nghttp2), openssl, iproute2 (ss), a JDK 17
# (javac, java, keytool), chromium. Everything runs on 127.0.0.1 on a fixed high
# port; nginx and tcpdump are stopped by PID on exit; the TLS key,
# certificate and truststore are throw-away, in a temporary directory
# deleted at the end.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

H2_PORT=18450        # nginx, HTTPS + http2 (ALPN h2)

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump nginx curl openssl ss java javac keytool chromium
setup_work record-h2-captures

log "setup in $WORK"
make_docroot
make_cert
# The page Chromium loads: 20 images of 600 to 2 500 bytes.
mkdir -p "$WORK/www/img"
{
    echo '<!DOCTYPE html><html><head><title>h2</title><link rel="icon" href="data:,"></head><body>'
    for i in $(seq 1 20); do
        head -c $((500 + i * 100)) /dev/zero | tr '\0' 'x' >"$WORK/www/img/$i.txt"
        echo "<img src=\"/img/$i.txt\">"
    done
    echo '</body></html>'
} >"$WORK/www/page.html"
chmod -R a+rX "$WORK/www"
make_java "$SCRIPT_DIR/java/HttpClientPooled.java"

write_nginx_conf 256 "$(cat <<EOF
$(tls_server "127.0.0.1:$H2_PORT ssl http2" "TLSv1.2 TLSv1.3")
EOF
)" "$(conn_access_log)"
start_nginx "$H2_PORT"
mark_access_log

H2URL="https://localhost:$H2_PORT/index.html"
JAVA+=(-Dclient.version=HTTP_2)

# java-httpclient-h2-10 / -10x10: one HttpClient, 1 thread × 10 GETs, and
# 10 threads × 10 GETs at once (HttpClient keeps one HTTP/2 connection per
# origin, so the requests are multiplexed on it).
for case in "java-httpclient-h2-10 10 1" "java-httpclient-h2-10x10 10 10"; do
    read -r name n threads <<<"$case"
    log "$name.pcap"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $H2_PORT"
    "${JAVA[@]}" HttpClientPooled "$H2URL" "$n" "$threads" 2>"$WORK/$name.client.log" \
        || { cat "$WORK/$name.client.log" >&2; exit 1; }
    stop_capture
    grep -c ' -> 200 HTTP_2' "$WORK/$name.client.log" >&2
    save_access_log "$name"
done

# h2-curl-parallel-20: one curl, 20 URLs, --parallel --parallel-max 10 (on
# one HTTP/2 connection, up to ten streams at once), with a key log.
NAME=h2-curl-parallel-20
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
URLS=()
for i in $(seq 1 20); do URLS+=("$H2URL?n=$i"); done
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $H2_PORT"
SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" timeout 30 curl -sS -k --http2 \
    --resolve "localhost:$H2_PORT:127.0.0.1" --parallel --parallel-max 10 \
    -w '%{stderr}  -> %{http_code} http_version=%{http_version} num_connects=%{num_connects}\n' \
    "${URLS[@]}" >/dev/null
stop_capture
save_access_log "$NAME"

# h2-curl-post-5: requests with bodies, whose DATA frames are records of
# their own: one curl with three POSTs of a 41-byte JSON body on one
# connection, then one with two POSTs of 40 000 bytes (nginx answers 405:
# a POST to a file). With a key log.
NAME=h2-curl-post-5
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
head -c 40000 /dev/zero >"$WORK/upload.bin"
POST=(timeout 30 curl -sS -k --http2 --resolve "localhost:$H2_PORT:127.0.0.1"
      -w '%{stderr}  -> %{http_code} http_version=%{http_version} num_connects=%{num_connects}\n')
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $H2_PORT"
SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" "${POST[@]}" -o /dev/null -o /dev/null -o /dev/null \
    -d '{"small":"json body of some forty bytes"}' "$H2URL" "$H2URL" "$H2URL"
SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" "${POST[@]}" -o /dev/null -o /dev/null \
    --data-binary "@$WORK/upload.bin" "$H2URL" "$H2URL"
stop_capture
save_access_log "$NAME"

# h2-chromium-page-2x21: headless Chromium loads the page (1 + 20 GETs)
# twice, each run with a fresh profile: over TLS 1.2 (ALPN visible), then
# TLS 1.3. `localhost` is mapped to 127.0.0.1, where nginx listens.
NAME=h2-chromium-page-2x21
log "$NAME.pcap"
rm -f "$OUT_DIR/$NAME.keylog"
start_capture "$OUT_DIR/$NAME.pcap" "tcp port $H2_PORT"
for max in tls1.2 tls1.3; do
    rm -rf "$WORK/chromium"
    SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" timeout 60 chromium --headless=new --no-sandbox \
        --disable-gpu --ignore-certificate-errors --user-data-dir="$WORK/chromium" \
        --no-first-run --disable-background-networking --disable-component-update \
        --host-resolver-rules="MAP localhost 127.0.0.1" --ssl-version-max="$max" \
        --virtual-time-budget=5000 --dump-dom "https://localhost:$H2_PORT/page.html" \
        >"$WORK/$NAME.$max.html" 2>"$WORK/$NAME.$max.err"
    grep -c '<img' "$WORK/$NAME.$max.html" >&2
    sleep 1
done
stop_capture
save_access_log "$NAME"
wc -l "$OUT_DIR"/java-httpclient-h2-*.nginx-access.log "$OUT_DIR"/h2-*.nginx-access.log >&2
