#!/usr/bin/env bash
# Record real HTTP/3-over-QUIC captures on loopback, for the QUIC handshake
# analysis (the Initial packets read without keys: SNI, ALPN, cipher,
# resumption, handshake times): an HTTP/3 server on aioquic
# (scripts/quic_server.py) and two clients, aioquic (scripts/quic_client.py:
# a full handshake; a PSK resumption; a resumption with a request in 0-RTT;
# one over ::1; headers too long for one packet; one over a lossy, reordering
# link) and headless Chromium. Every capture has a key log (the
# truth tshark can read) and the server's request log beside it.
# See captures/README.md, sections "ah" to "ao" and "aq".
#
# Owns: in OUT_DIR (default captures/) only the files named quic-*.pcap,
# quic-*.keylog and quic-*.server.log below (overwritten); the python venv
# QUIC_VENV (default /tmp/quicenv, created with `pip install aioquic` if it
# is missing). Touches nothing else in the repository; the TLS key and
# certificate, the session ticket and Chromium's profile are throw-away, in
# a temporary directory deleted at the end.
#
# Usage:  sudo [PARTS="h3-5 resumed 0rtt ipv6 chromium post post4 chacha big lossy"] scripts/record-quic-captures.sh
#
# PARTS picks the captures to record (default: all): h3-5 ("ah"), resumed
# ("ai"), 0rtt ("aj"), ipv6 ("ak"), chromium ("al"), post ("am"), post4
# ("am", its second file), chacha ("an"), big ("ao"), lossy ("aq": through
# scripts/udp_lossy_proxy.py, which drops, delays and reorders datagrams).
#
# Requirements (Debian): tcpdump, openssl, iproute2 (ss), python3 with
# venv and pip (and PyPI reachable, the first time), chromium (for the
# chromium part), tshark (optional: prints each capture's handshake facts).
# Everything runs on 127.0.0.1 (and ::1) on UDP port 18453; the server and
# tcpdump are stopped by PID on exit, every client is bounded by `timeout`.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"
QUIC_VENV="${QUIC_VENV:-/tmp/quicenv}"
QUIC_PORT=18453      # quic_server.py, UDP, HTTP/3 (ALPN h3)

PARTS=${PARTS:-h3-5 resumed 0rtt ipv6 chromium post post4 chacha big lossy}
# Arguments the next start_quic_server gives the server.
SERVER_ARGS=()
# (part NAME, from record-lib: whether capture NAME is to be recorded.)

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools tcpdump openssl ss python3
part chromium && require_tools chromium
setup_work record-quic-captures

if [[ ! -x "$QUIC_VENV/bin/python" ]] || ! "$QUIC_VENV/bin/python" -c 'import aioquic' 2>/dev/null; then
    log "creating $QUIC_VENV (pip install aioquic)"
    python3 -m venv "$QUIC_VENV"
    timeout 300 "$QUIC_VENV/bin/pip" install -q aioquic
fi
QPY="$QUIC_VENV/bin/python"
"$QPY" -c 'import sys, aioquic; print("python", sys.version.split()[0], "aioquic", aioquic.__version__)' >&2

log "setup in $WORK"
make_cert

# start_quic_server NAME HOST... : a fresh quic_server.py (so an empty
# ticket store) on every HOST, logging requests to OUT_DIR/NAME.server.log
# (QUIC_PID, stopped on exit or by stop_server).
start_quic_server() {
    local name=$1 host hosts=()
    shift
    for host in "$@"; do hosts+=(--host "$host"); done
    rm -f "$OUT_DIR/$name.server.log"
    "$QPY" "$SCRIPT_DIR/quic_server.py" "${hosts[@]}" --port "$QUIC_PORT" \
        --cert "$WORK/cert.pem" --key "$WORK/key.pem" --max-seconds 120 \
        --log "$OUT_DIR/$name.server.log" --keylog "$WORK/$name.server.keylog" \
        "${SERVER_ARGS[@]}" \
        >"$WORK/$name.server.out" 2>&1 &
    QUIC_PID=$!
    PIDS+=("$QUIC_PID")
    wait_listen "$QUIC_PORT" udp
}

# client NAME HOST ARGS... : quic_client.py to HOST:QUIC_PORT, key log in
# OUT_DIR/NAME.keylog (bounded to 60 s).
client() {
    local name=$1 host=$2
    shift 2
    timeout 60 "$QPY" "$SCRIPT_DIR/quic_client.py" "$host" "$QUIC_PORT" \
        --cafile "$WORK/cert.pem" --server-name localhost \
        --keylog "$OUT_DIR/$name.keylog" "$@"
}

# facts NAME : what tshark reads of the capture's handshakes (without the
# key log: the Initial packets are decrypted with keys derived from the
# client's Destination Connection ID), the QUIC connections and 0-RTT
# packets, and the server's request count.
facts() {
    local f="$OUT_DIR/$1.pcap"
    ls -l "$f" "$OUT_DIR/$1.keylog" "$OUT_DIR/$1.server.log" >&2
    command -v tshark >/dev/null 2>&1 || { echo "(tshark not installed: no facts)" >&2; return 0; }
    echo "frame time_epoch src:port dst:port quic.conn version hs_type sni alpn cipher ext_types" >&2
    tshark -r "$f" -Y 'tls.handshake.type==1 || tls.handshake.type==2' -T fields \
        -e frame.number -e frame.time_epoch -e ip.src -e ipv6.src -e udp.srcport \
        -e ip.dst -e ipv6.dst -e udp.dstport -e quic.connection.number -e quic.version \
        -e tls.handshake.type -e tls.handshake.extensions_server_name \
        -e tls.handshake.extensions_alpn_str -e tls.handshake.ciphersuite \
        -e tls.handshake.extension.type >&2 2>/dev/null
    echo "with the key log: Finished (20) and HANDSHAKE_DONE (frame type 30) frames" >&2
    tshark -r "$f" -o "tls.keylog_file:$OUT_DIR/$1.keylog" \
        -Y 'tls.handshake.type==20 || quic.frame_type==30' -T fields \
        -e frame.number -e frame.time_epoch -e udp.srcport -e quic.connection.number \
        -e tls.handshake.type -e quic.frame_type >&2 2>/dev/null
    printf 'QUIC connections: %s\n' \
        "$(tshark -r "$f" -T fields -e quic.connection.number 2>/dev/null | tr ',' '\n' | grep . | sort -u | wc -l)" >&2
    printf '0-RTT packets (quic.long.packet_type==1): %s\n' \
        "$(tshark -r "$f" -Y 'quic.long.packet_type==1' 2>/dev/null | wc -l)" >&2
    printf 'frames: %s; requests in the server log: %s\n' \
        "$(tshark -r "$f" 2>/dev/null | wc -l)" "$(wc -l <"$OUT_DIR/$1.server.log")" >&2
}

# aioquic_capture NAME HOST CLIENT_ARGS... : a fresh server on HOST,
# tcpdump, the aioquic client with CLIENT_ARGS (its key log NAME.keylog, a
# session ticket in $WORK/ticket.pkl if asked for), then the facts.
aioquic_capture() {
    local name=$1 host=$2
    shift 2
    log "$name.pcap"
    rm -f "$OUT_DIR/$name.keylog" "$WORK/ticket.pkl"
    start_quic_server "$name" "$host"
    start_capture "$OUT_DIR/$name.pcap" "udp port $QUIC_PORT"
    client "$name" "$host" "$@"
    stop_capture
    stop_server "$QUIC_PID"
    facts "$name"
}

# quic-aioquic-h3-5: one connection, a full handshake, 5 GETs.
if part h3-5; then
    aioquic_capture quic-aioquic-h3-5 127.0.0.1 --requests 5 --connections 1
fi

# quic-aioquic-h3-post-429: one connection, 12 requests, every third a
# POST to /api, which the server answers 429: 8 × 200, 4 × 429.
if part post; then
    aioquic_capture quic-aioquic-h3-post-429 127.0.0.1 \
        --requests 12 --connections 1 --post-every 3
fi

# quic-aioquic-h3-post-429-4conn: four connections one after another, no
# pause between, 3 requests each, the third a POST answered 429: each
# next connection opens inside the Retry-After the last one got (the
# figures across connections).
if part post4; then
    aioquic_capture quic-aioquic-h3-post-429-4conn 127.0.0.1 \
        --requests 3 --connections 4 --post-every 3 --pause 0
fi

# quic-aioquic-h3-chacha20: one connection whose client offers only
# TLS_CHACHA20_POLY1305_SHA256, so its packets are sealed with
# ChaCha20-Poly1305 and their headers protected with ChaCha20; 4 requests,
# the fourth a POST answered 429.
if part chacha; then
    aioquic_capture quic-aioquic-h3-chacha20 127.0.0.1 \
        --requests 4 --connections 1 --post-every 4 --cipher CHACHA20_POLY1305_SHA256
fi

# quic-aioquic-h3-big-headers: one connection, 4 requests (the fourth a
# POST answered 429), each with a path ending in a 3000-byte query and a
# 3000-byte cookie header, each answer with a 5000-byte x-padding header,
# longer than QPACK's table holds: every HEADERS frame is sent as
# literals, over several packets, the :path field across two.
if part big; then
    SERVER_ARGS=(--header-bytes 5000)
    aioquic_capture quic-aioquic-h3-big-headers 127.0.0.1 \
        --requests 4 --connections 1 --post-every 4 --query-bytes 3000 --cookie-bytes 3000
    SERVER_ARGS=()
fi

# quic-aioquic-h3-resumed: one client program, two connections one after
# the other, 3 GETs each: the first a full handshake, the second resuming
# (PSK) with the first one's session ticket, without early data.
if part lossy; then
    # A lossy, reordering link: the client talks to a relay
    # (scripts/udp_lossy_proxy.py, seeded) that drops 8 % of datagrams
    # each way and delays the others up to 4 ms, so later ones overtake
    # earlier ones; the capture is of the relay's leg to the server, so it
    # holds stream pieces out of order and retransmitted — the QPACK
    # encoder stream's, the long heads', the handshake's.
    NAME=quic-aioquic-h3-lossy
    RELAY_PORT=$((QUIC_PORT + 1))
    log "$NAME.pcap"
    rm -f "$OUT_DIR/$NAME.keylog"
    SERVER_ARGS=(--header-bytes 2000)
    start_quic_server "$NAME" 127.0.0.1
    SERVER_ARGS=()
    "$QPY" "$SCRIPT_DIR/udp_lossy_proxy.py" --listen "$RELAY_PORT" --to-port "$QUIC_PORT" \
        --loss 0.08 --jitter 4 --seed "${LOSSY_SEED:-8}" --max-seconds 120 >"$WORK/relay.out" 2>&1 &
    RELAY_PID=$!
    PIDS+=("$RELAY_PID")
    wait_listen "$RELAY_PORT" udp
    start_capture "$OUT_DIR/$NAME.pcap" "udp port $QUIC_PORT"
    timeout 90 "$QPY" "$SCRIPT_DIR/quic_client.py" 127.0.0.1 "$RELAY_PORT" \
        --cafile "$WORK/cert.pem" --server-name localhost --keylog "$OUT_DIR/$NAME.keylog" \
        --requests 30 --connections 1 --post-every 5 --query-bytes 1500 --cookie-bytes 1200
    stop_capture
    stop_server "$RELAY_PID"
    cat "$WORK/relay.out" >&2
    stop_server "$QUIC_PID"
    facts "$NAME"
fi

if part resumed; then
    aioquic_capture quic-aioquic-h3-resumed 127.0.0.1 \
        --requests 3 --connections 2 --ticket "$WORK/ticket.pkl"
fi

# quic-aioquic-h3-0rtt: the same, but the second connection sends its
# first GET at once, in 0-RTT packets (early data), before the handshake
# completes; its other two after.
if part 0rtt; then
    aioquic_capture quic-aioquic-h3-0rtt 127.0.0.1 \
        --requests 3 --connections 2 --ticket "$WORK/ticket.pkl" --zero-rtt
fi

# quic-aioquic-h3-ipv6-2: one connection over ::1, a full handshake, 2 GETs.
if part ipv6; then
    aioquic_capture quic-aioquic-h3-ipv6-2 ::1 --requests 2 --connections 1
fi

# quic-chromium-h3-2: headless Chromium, a fresh profile, QUIC forced on
# localhost:18453 (mapped to 127.0.0.1), the self-signed certificate let
# through by its SPKI hash; loads /page.html and its one image /1 (the
# icon is a data: URL). SSLKEYLOGFILE is Chromium's key log.
if part chromium; then
    NAME=quic-chromium-h3-2
    log "$NAME.pcap"
    rm -f "$OUT_DIR/$NAME.keylog"
    chromium --version >&2 2>/dev/null || true
    SPKI=$(openssl x509 -in "$WORK/cert.pem" -pubkey -noout | openssl pkey -pubin -outform der \
        | openssl dgst -sha256 -binary | base64)
    start_quic_server "$NAME" 127.0.0.1
    start_capture "$OUT_DIR/$NAME.pcap" "udp port $QUIC_PORT"
    SSLKEYLOGFILE="$OUT_DIR/$NAME.keylog" timeout 30 chromium --headless=new --no-sandbox \
        --disable-gpu --user-data-dir="$WORK/chromium" --no-first-run \
        --disable-background-networking --disable-component-update \
        --enable-quic --origin-to-force-quic-on="localhost:$QUIC_PORT" \
        --host-resolver-rules="MAP localhost 127.0.0.1" \
        --ignore-certificate-errors-spki-list="$SPKI" \
        --virtual-time-budget=5000 --dump-dom "https://localhost:$QUIC_PORT/page.html" \
        >"$WORK/$NAME.html" 2>"$WORK/$NAME.err" || { tail -n 20 "$WORK/$NAME.err" >&2; exit 1; }
    grep -c '<img' "$WORK/$NAME.html" >&2
    chmod 644 "$OUT_DIR/$NAME.keylog"   # Chromium creates it 0600
    stop_capture
    stop_server "$QUIC_PID"
    facts "$NAME"
fi
