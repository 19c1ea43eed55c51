#!/usr/bin/env bash
# Record real TLS captures over a lossy link: nginx and curl in a network
# namespace of their own whose loopback drops 20 % of the TCP segments of
# the HTTPS port each way (nftables: `numgen random`, in the output hook,
# before tcpdump sees a packet — so a dropped segment is never captured
# and its retransmission is, as a capture on the receiving host shows
# loss). Writes tls-lossy-h2-20.pcap and tls-lossy-h1-20.pcap, their key
# logs and nginx's access logs. See captures/README.md, section "ar".
#
# Usage:  sudo scripts/record-lossy-captures.sh
#
# Requirements (Debian): tcpdump, nginx (nginx-light is enough), curl with
# HTTP/2, openssl, iproute2 (ip, ss), ethtool, nftables (nft) and a kernel with
# nf_tables and its numgen expression. Everything runs inside the
# namespace hs-lossy (deleted at the end) on 127.0.0.1; nginx and tcpdump
# are stopped by PID on exit; the TLS key and certificate are throw-away.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

HTTPS_PORT=18460     # nginx, HTTPS, h2 and HTTP/1.1
NS=hs-lossy
LOSS_PERCENT=${LOSS_PERCENT:-20}

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools ip tcpdump nginx curl openssl ss nft ethtool
setup_work record-lossy-captures

cleanup_extra() {
    ip netns del "$NS" 2>/dev/null
}

log "namespace $NS, its loopback dropping $LOSS_PERCENT % of port $HTTPS_PORT's segments"
cleanup_extra || true
ip netns add "$NS"
ip -n "$NS" link set lo up
# Ethernet-sized segments, each one a packet that can be lost (lo's MTU
# is 64 KiB, and segmentation offload would hand on up to that at once).
ip -n "$NS" link set lo mtu 1500
ip netns exec "$NS" ethtool -K lo tso off gso off gro off >/dev/null
# The drawn numbers as a set: `numgen … < N` compares the number's bytes
# in network order, which on a little-endian host drops 1 % whatever N.
# (LOSS_PERCENT=0: no rule, the same traffic without loss.)
DRAWN=$(seq -s, 0 $((LOSS_PERCENT - 1)))
[[ $LOSS_PERCENT -gt 0 ]] && ip netns exec "$NS" nft -f - <<EOF
table inet lossy {
    chain out {
        type filter hook output priority 0;
        tcp dport $HTTPS_PORT numgen random mod 100 { $DRAWN } counter drop
        tcp sport $HTTPS_PORT numgen random mod 100 { $DRAWN } counter drop
    }
}
EOF

make_docroot
make_cert
# A 16 KiB body: a response of a dozen segments, where loss shows.
head -c 16384 /dev/zero | tr '\0' 'x' >"$WORK/www/big.txt"
chmod 644 "$WORK/www/big.txt"
write_nginx_conf 64 "$(tls_server "127.0.0.1:$HTTPS_PORT ssl http2" "TLSv1.3")" "$(conn_access_log)"
start_nginx_in "$NS" "$HTTPS_PORT"
mark_access_log
CAPTURE_NETNS=$NS

# record NAME CURL_OPTION : one curl, 20 requests on one connection — ten
# of the test page, ten of the 16 KiB body, alternating.
record() {
    local name=$1 option=$2 urls=() i
    for i in $(seq 1 10); do
        urls+=(-o /dev/null "https://localhost:$HTTPS_PORT/index.html?$i"
               -o /dev/null "https://localhost:$HTTPS_PORT/big.txt?$i")
    done
    log "$name.pcap"
    rm -f "$OUT_DIR/$name.keylog"
    start_capture "$OUT_DIR/$name.pcap" "tcp port $HTTPS_PORT"
    ip netns exec "$NS" env SSLKEYLOGFILE="$OUT_DIR/$name.keylog" timeout 120 \
        curl -sS -k "$option" --resolve "localhost:$HTTPS_PORT:127.0.0.1" \
        -w '%{stderr}  -> %{http_code} num_connects=%{num_connects}\n' "${urls[@]}"
    stop_capture
    save_access_log "$name"
    wc -l <"$OUT_DIR/$name.nginx-access.log" >&2
}

record tls-lossy-h2-20 --http2
record tls-lossy-h1-20 --http1.1
ip netns exec "$NS" nft list ruleset >&2
