#!/usr/bin/env bash
# Record small, real loopback captures of Go's net/http idle pool, for the
# `handshakes` test-suite: an http.Transport keeps at most
# MaxIdleConnsPerHost idle connections per host, 2 by default
# (http.DefaultMaxIdleConnsPerHost), so ONE client shared by 10 goroutines
# sending at once to one host closes connections that come back when two
# already sit idle (right after their response, or, for a dial started by
# a request that then got another connection, right after their TLS
# handshake) and dials new ones for later requests — every one a full TLS
# handshake (the cloned Transport has no ClientSessionCache). One nginx
# serves the 1342-byte test page over HTTPS, HTTP/1.1 only (no http2 on
# the listener, so ALPN can only pick http/1.1), on 127.0.0.1:18497,
# keep-alive on (keepalive_timeout 75s, keepalive_requests 1000). The
# client is scripts/go/pool_client.go (standard library only), built into
# the temp dir: a clone of http.DefaultTransport with only TLSClientConfig
# set (InsecureSkipVerify, KeyLogWriter, ServerName `localhost` for the
# SNI) and HTTP/2 off (ForceAttemptHTTP2 false, TLSNextProto empty), no
# Client.Timeout; its 10 goroutines start together at a barrier, each
# sends 10 sequential GETs of https://127.0.0.1:18497/index.html, reads
# every body to its end and closes it; after the last response the client
# waits SETTLE (1 s: dials still going on end as in a long-lived program),
# then calls CloseIdleConnections, so the idle connections' closes are on
# the wire too, and exits.
#   go-default-pool-10x10.pcap  MaxIdleConnsPerHost left at Go's default, 2
#                               (`-idle 0`)
#   go-pool-idle10-10x10.pcap   the control: MaxIdleConnsPerHost 10
#                               (`-idle 10`)
# How many connections each run opens depends on how the goroutines
# interleave, and varies from run to run (see captures/README.md).
# Each comes with FILE.keylog (Go's tls.Config.KeyLogWriter, NSS format)
# and FILE.nginx-access.log (nginx's lines for the run in record-lib's
# `conn` format: conn= and conn_req= give the requests per connection).
# Each capture is stopped only once no connection to the port is left
# open. See captures/README.md, section "Go's idle pool".
#
# Usage:  sudo scripts/record-go-captures.sh [default] [idle10]
#         (or sudo PARTS="default" scripts/record-go-captures.sh)
#
# The arguments (or PARTS) pick what to record (default: both): default
# (go-default-pool-10x10, "bq"), idle10 (go-pool-idle10-10x10, "br").
#
# Requirements (Debian): tcpdump, tshark, nginx (nginx-light is enough),
# openssl, golang-go (Go ≥ 1.19; no module is downloaded: GOPROXY=off),
# iproute2 (ss), coreutils (timeout).
#
# Only 127.0.0.1 is talked to, on port 18497 (nginx, HTTPS, HTTP/1.1).
# nginx and tcpdump are stopped by PID on exit, the client is bounded by
# `timeout`; the TLS key and certificate, the docroot, the Go build (with
# its GOPATH and GOCACHE) and the client binary live in a temporary
# directory deleted at the end. Writes only captures/go-default-pool-10x10.*
# and captures/go-pool-idle10-10x10.* (each .pcap, .keylog,
# .nginx-access.log) of the parts recorded (re-running overwrites them,
# with new ports, times and keys); touches no other capture, and nothing
# in src/, tests/, docs/.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

PORT=18497           # nginx, HTTPS, HTTP/1.1 only
THREADS=10           # goroutines sharing the one client
REQUESTS=10          # sequential GETs per goroutine
SETTLE=1             # seconds the client waits after its last response
                     # (dials still going on end), before it closes its idle
                     # connections and exits

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
choose_parts "default idle10" "$@"
require_root
require_tools tcpdump tshark nginx openssl go ss timeout
setup_work record-go-captures

log "setup in $WORK"
make_docroot
make_cert

# The client, built with a throw-away go.mod in the temp dir (standard
# library only, so nothing to download: GOPROXY=off).
mkdir -p "$WORK/gobuild"
cp "$SCRIPT_DIR/go/pool_client.go" "$WORK/gobuild/"
printf 'module poolclient\n\ngo 1.19\n' >"$WORK/gobuild/go.mod"
go version >&2
(cd "$WORK/gobuild" && GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache" \
    GOFLAGS=-mod=mod GOPROXY=off timeout 300 go build -o "$WORK/pool_client" .)

write_nginx_conf 256 "$(tls_server "127.0.0.1:$PORT ssl" "TLSv1.2 TLSv1.3" \
    "keepalive_requests 1000")" "$(conn_access_log)"
grep -q 'keepalive_timeout 75s;' "$WORK/nginx/nginx.conf"
if grep -q 'http2' "$WORK/nginx/nginx.conf"; then
    echo "error: nginx.conf enables http2" >&2
    exit 1
fi
start_nginx "$PORT"
mark_access_log

URL="https://127.0.0.1:$PORT/index.html"

# facts NAME : what NAME.pcap (read with NAME.keylog) and
# NAME.nginx-access.log hold: the SYNs (new connections), the requests per
# connection (nginx), the statuses, and per TCP connection (tshark): its
# requests, whether its TLS handshake ended (the client's Finished), who
# sent the first TLS close_notify (Go's tls.Conn.Close sends one before its
# FIN; nginx may then FIN first), who sent the first FIN (or RST), when,
# and how long after the connection's last response (or, with none, its
# handshake); `at-exit` if more than half the client's SETTLE after the
# capture's last response (CloseIdleConnections, then the exit).
facts() {
    local name=$1 pcap="$OUT_DIR/$1.pcap" nlog="$OUT_DIR/$1.nginx-access.log"
    log "$name: facts"
    echo "frames: $(tshark -r "$pcap" | wc -l), bytes: $(wc -c <"$pcap")" >&2
    echo "SYNs: $(tshark -r "$pcap" -Y 'tcp.flags.syn==1 && tcp.flags.ack==0' | wc -l)" >&2
    echo "requests per connection (nginx, conn=N: requests, in order of first request):" >&2
    awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^conn=/) c = $i
           if (!(c in n)) order[++k] = c
           n[c]++ }
         END { for (j = 1; j <= k; j++) printf "  %s: %d\n", order[j], n[order[j]] }' "$nlog" >&2
    echo "statuses (nginx):" >&2
    awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^HTTP\/1\.1"$/) print $(i + 1) }' "$nlog" \
        | sort | uniq -c >&2
    echo "per connection (tshark with the key log): stream client_port requests" \
         "handshake_done close_notify_by first_FIN/RST time after_last_response_or_handshake [at-exit]:" >&2
    tshark -r "$pcap" -o "tls.keylog_file:$OUT_DIR/$name.keylog" -T fields \
        -E separator=/t -E occurrence=a -E aggregator=, -e tcp.stream -e frame.time_relative \
        -e tcp.srcport -e tcp.dstport -e tcp.flags.fin -e tcp.flags.reset \
        -e http.request.method -e http.response.code -e tls.handshake.type \
        -e tls.alert_message.desc \
        | awk -F '\t' -v port="$PORT" -v settle="$SETTLE" '
        function is(v) { return v == "1" || v == "True" }
        {
            s = $1; t = $2 + 0; from_client = ($3 != port); who = from_client ? "client" : "server"
            if (!(s in cport)) { cport[s] = from_client ? $3 : $4; streams[++ns] = s; req[s] = 0 }
            if ($7 != "") req[s]++
            if ($8 != "") { lastresp[s] = t; if (t > tlast) tlast = t }
            if (from_client && $9 ~ /(^|,)20(,|$)/) { hs[s] = 1; hstime[s] = t }
            if (!(s in notify) && $10 ~ /(^|,)0(,|$)/) notify[s] = who
            if (!(s in endby) && (is($5) || is($6))) {
                endby[s] = who (is($6) ? "-RST" : "-FIN")
                endt[s] = t
            }
        }
        END {
            for (i = 1; i <= ns; i++) {
                s = streams[i]
                ref = (s in lastresp) ? lastresp[s] : ((s in hs) ? hstime[s] : "")
                printf "  %s %s req=%d hs=%s notify=%s %s %.6f %s%s\n", s, cport[s], req[s],
                    ((s in hs) ? "yes" : "no"), ((s in notify) ? notify[s] : "-"),
                    endby[s], endt[s],
                    (ref == "" ? "-" : sprintf("+%.6f", endt[s] - ref)),
                    (endt[s] > tlast + settle / 2 ? " at-exit" : "")
            }
        }' >&2
}

# record NAME IDLE : the client with `-idle IDLE` captured to NAME.pcap,
# its key log to NAME.keylog, nginx's lines to NAME.nginx-access.log.
record() {
    local name=$1 idle=$2
    log "$name.pcap (-idle $idle)"
    rm -f "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $PORT" -s 0
    timeout 120 "$WORK/pool_client" -url "$URL" -servername localhost \
        -threads "$THREADS" -requests "$REQUESTS" -idle "$idle" -settle "${SETTLE}s" \
        -keylog "$OUT_DIR/$name.keylog" >&2
    end_part "$name" "$((THREADS * REQUESTS))" "$PORT"
    facts "$name"
}

if part default; then
    record go-default-pool-10x10 0
fi
if part idle10; then
    record go-pool-idle10-10x10 10
fi
log "done"
stop_server "$NGINX_PID"
