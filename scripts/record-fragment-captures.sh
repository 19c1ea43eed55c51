#!/usr/bin/env bash
# Record real IP-fragmented TCP for the `handshakes` test-suite: four
# network namespaces in a line — client, router, router, server — where the
# link between the two routers has an MTU of 576 and both hosts send
# without Don't Fragment (net.ipv4.ip_no_pmtu_disc=1, as old stacks and
# some middleboxes do), so the routers fragment every full-size segment,
# both ways. tcpdump listens on the narrow link. See captures/README.md.
#
# Usage:  sudo scripts/record-fragment-captures.sh
#
# Requirements (Debian): iproute2, tcpdump, nginx, curl.
#
# Everything stays inside the namespaces created here (hs-frag-*), which are
# deleted on exit together with their veth pairs; nginx and tcpdump are
# stopped by PID. Re-running overwrites the capture.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

NSS=(hs-frag-c hs-frag-r1 hs-frag-r2 hs-frag-s)
HTTP_PORT=18080
NARROW_MTU=576

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools ip tcpdump nginx curl ss
setup_work record-fragment-captures

cleanup_extra() {
    local ns
    for ns in "${NSS[@]}"; do ip netns del "$ns" 2>/dev/null; done
}

# link NS_A DEV_A ADDR_A NS_B DEV_B ADDR_B MTU : a veth pair between two
# namespaces, addressed (/30) and up.
link() {
    ip link add "$2" type veth peer name "$5"
    ip link set "$2" netns "$1"
    ip link set "$5" netns "$4"
    ip -n "$1" addr add "$3/30" dev "$2"
    ip -n "$4" addr add "$6/30" dev "$5"
    ip -n "$1" link set "$2" mtu "$7" up
    ip -n "$4" link set "$5" mtu "$7" up
}

log "namespaces ${NSS[*]}: client - router - ($NARROW_MTU) - router - server"
cleanup_extra || true
for ns in "${NSS[@]}"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done
link hs-frag-c hsf-c 192.0.2.1 hs-frag-r1 hsf-r1a 192.0.2.2 1500
link hs-frag-r1 hsf-r1b 192.0.2.9 hs-frag-r2 hsf-r2a 192.0.2.10 "$NARROW_MTU"
link hs-frag-r2 hsf-r2b 192.0.2.5 hs-frag-s hsf-s 192.0.2.6 1500
ip -n hs-frag-c route add default via 192.0.2.2
ip -n hs-frag-s route add default via 192.0.2.5
ip -n hs-frag-r1 route add 192.0.2.4/30 via 192.0.2.10
ip -n hs-frag-r2 route add 192.0.2.0/30 via 192.0.2.9
for ns in hs-frag-r1 hs-frag-r2; do
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
done
for ns in hs-frag-c hs-frag-s; do
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_no_pmtu_disc=1
done

log "nginx in hs-frag-s"
make_docroot
# A page of 20 KB: full-size segments.
for _ in $(seq 1 15); do cat "$WORK/www/index.html"; done >"$WORK/www/big.html"
chmod 644 "$WORK/www/big.html"
write_nginx_conf 64 "$(cat <<EOF
    server {
        listen 192.0.2.6:$HTTP_PORT;
        root $WORK/www;
    }
EOF
)"
ip netns exec hs-frag-s nginx -e "$WORK/nginx/error.log" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
PIDS+=("$!")
for _ in $(seq 1 100); do
    ip netns exec hs-frag-s ss -Hltn "sport = :$HTTP_PORT" | grep -q . && break
    sleep 0.1
done
# One exchange first, so that the neighbours are known before the capture.
ip netns exec hs-frag-c timeout 30 curl -sS -o /dev/null "http://192.0.2.6:$HTTP_PORT/index.html"

CAPTURE_NETNS=hs-frag-r2
CAPTURE_IF=hsf-r2a
URL="http://192.0.2.6:$HTTP_PORT"
log "ip-fragmented-http.pcap: a 20 KB page, then the test page, on one connection"
start_capture "$OUT_DIR/ip-fragmented-http.pcap" "ip"
ip netns exec hs-frag-c timeout 30 curl -sS --http1.1 \
    -w '%{stderr}  -> %{http_code} num_connects=%{num_connects} %{url_effective}\n' \
    -o /dev/null "$URL/big.html" -o /dev/null "$URL/index.html"
stop_capture

log "done"
ls -l "$OUT_DIR"/ip-fragmented-http.pcap >&2
