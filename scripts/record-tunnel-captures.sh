#!/usr/bin/env bash
# Record real tunnelled traffic for the `handshakes` test-suite: two network
# namespaces joined by a veth pair (the underlay), two VXLAN tunnels between
# them made by the kernel (VNI 4242 on IANA's port 4789, VNI 7 on Linux's
# and flannel's port 8472), nginx in one namespace and curl in the other
# talking through the tunnel, and tcpdump on the underlay, where only the
# encapsulated packets are seen. See captures/README.md.
#
# Usage:  sudo scripts/record-tunnel-captures.sh
#
# Requirements (Debian): iproute2, tcpdump, nginx, curl, openssl, a kernel
# with VXLAN (CONFIG_VXLAN). The kernel this was recorded on has VXLAN but
# no GRE, Geneve or IP-in-IP devices; those tunnels are tested by wrapping
# real captures (tests/tunnels.rs).
#
# Everything stays inside the two namespaces created here (hs-tun-a,
# hs-tun-b), which are deleted on exit together with the veth pair; nginx
# and tcpdump are stopped by PID. Re-running overwrites the captures.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
OUT_DIR="${OUT_DIR:-$REPO_DIR/captures}"

NS_A=hs-tun-a          # curl
NS_B=hs-tun-b          # nginx
HTTP_PORT=18080
HTTPS_PORT=18443
VNI=4242
# The second tunnel (vx1): another VNI on the port Linux uses by default.
VNI2=7 PORT2=8472
# Underlay (veth) and overlay (vx0, vx1) addresses: documentation and ULA ranges.
UNDER_A=192.0.2.1 UNDER_B=192.0.2.2
OVER_A=198.51.100.1 OVER_B=198.51.100.2
OVER6_A=fd00:4242::1 OVER6_B=fd00:4242::2
OVER2_A=203.0.113.1 OVER2_B=203.0.113.2

# shellcheck source=scripts/record-lib.sh
source "$SCRIPT_DIR/record-lib.sh"
require_root
require_tools ip tcpdump nginx curl openssl ss
setup_work record-tunnel-captures

cleanup_extra() {
    ip netns del "$NS_A" 2>/dev/null
    ip netns del "$NS_B" 2>/dev/null
}

log "namespaces $NS_A and $NS_B, veth underlay, VXLAN $VNI"
cleanup_extra || true
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add hs-tun-va type veth peer name hs-tun-vb
ip link set hs-tun-va netns "$NS_A"
ip link set hs-tun-vb netns "$NS_B"
for side in A B; do
    ns_var="NS_$side"; ns=${!ns_var}
    dev=hs-tun-v${side,,}
    under_var="UNDER_$side"; over_var="OVER_$side"; over6_var="OVER6_$side"
    other=$([[ $side == A ]] && echo "$UNDER_B" || echo "$UNDER_A")
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "${!under_var}/24" dev "$dev"
    ip -n "$ns" link set "$dev" up
    ip -n "$ns" link add vx0 type vxlan id "$VNI" local "${!under_var}" remote "$other" \
        dstport 4789 dev "$dev"
    ip -n "$ns" addr add "${!over_var}/24" dev vx0
    ip -n "$ns" addr add "${!over6_var}/64" dev vx0 nodad
    ip -n "$ns" link set vx0 up
    over2_var="OVER2_$side"
    ip -n "$ns" link add vx1 type vxlan id "$VNI2" local "${!under_var}" remote "$other" \
        dstport "$PORT2" dev "$dev"
    ip -n "$ns" addr add "${!over2_var}/24" dev vx1
    ip -n "$ns" link set vx1 up
done
# Neighbours known up front, so the captures hold no ARP or ND exchanges.
for side in A B; do
    ns_var="NS_$side"; ns=${!ns_var}
    peer=$([[ $side == A ]] && echo B || echo A)
    peer_ns_var="NS_$peer"; peer_ns=${!peer_ns_var}
    mac=$(ip -n "$peer_ns" -br link show vx0 | awk '{print $3}')
    umac=$(ip -n "$peer_ns" -br link show "hs-tun-v${peer,,}" | awk '{print $3}')
    over_var="OVER_$peer"; over6_var="OVER6_$peer"; under_var="UNDER_$peer"
    ip -n "$ns" neigh replace "${!over_var}" lladdr "$mac" dev vx0 nud permanent
    ip -n "$ns" neigh replace "${!over6_var}" lladdr "$mac" dev vx0 nud permanent
    ip -n "$ns" neigh replace "${!under_var}" lladdr "$umac" dev "hs-tun-v${side,,}" nud permanent
    mac2=$(ip -n "$peer_ns" -br link show vx1 | awk '{print $3}')
    over2_var="OVER2_$peer"
    ip -n "$ns" neigh replace "${!over2_var}" lladdr "$mac2" dev vx1 nud permanent
done

log "nginx in $NS_B"
make_docroot
# A page of 20 KB: full-size segments.
for _ in $(seq 1 15); do cat "$WORK/www/index.html"; done >"$WORK/www/big.html"
chmod 644 "$WORK/www/big.html"
make_cert
write_nginx_conf 64 "$(cat <<EOF
    server {
        listen $OVER_B:$HTTP_PORT;
        listen [$OVER6_B]:$HTTP_PORT;
        listen $OVER2_B:$HTTP_PORT;
        root $WORK/www;
    }
$(tls_server "$OVER_B:$HTTPS_PORT ssl" "TLSv1.3")
EOF
)"
start_nginx_in "$NS_B" "$HTTPS_PORT"

IN_A=(ip netns exec "$NS_A" timeout 30)
CURL=(curl -sS --http1.1 -w '%{stderr}  -> %{http_code} num_connects=%{num_connects} %{url_effective}\n')
# fetch [curl options...] -- URL... : one curl, every body to /dev/null.
fetch() {
    local opts=() urls=()
    while [[ $1 != -- ]]; do opts+=("$1"); shift; done
    shift
    for u in "$@"; do urls+=(-o /dev/null "$u"); done
    "${IN_A[@]}" "${CURL[@]}" "${opts[@]}" "${urls[@]}"
}
CAPTURE_NETNS=$NS_A
CAPTURE_IF=hs-tun-va
# underlay_mtu N: the veth pair's MTU, both ends.
underlay_mtu() {
    ip -n "$NS_A" link set hs-tun-va mtu "$1"
    ip -n "$NS_B" link set hs-tun-vb mtu "$1"
}

log "tunnel-vxlan-http.pcap: 3 requests on one connection (IPv4 inside), 1 (IPv6 inside)"
start_capture "$OUT_DIR/tunnel-vxlan-http.pcap" "udp port 4789"
URL="http://$OVER_B:$HTTP_PORT/index.html"
fetch -- "$URL" "$URL" "$URL"
fetch -- "http://[$OVER6_B]:$HTTP_PORT/index.html"
stop_capture

log "tunnel-vxlan-tls13.pcap: 3 requests over one TLS 1.3 connection"
start_capture "$OUT_DIR/tunnel-vxlan-tls13.pcap" "udp port 4789"
SURL="https://localhost:$HTTPS_PORT/index.html"
fetch -k --resolve "localhost:$HTTPS_PORT:$OVER_B" -- "$SURL" "$SURL" "$SURL"
stop_capture

log "tunnel-vxlan-fragmented.pcap: the underlay's MTU below the tunnel's: the kernel fragments the VXLAN packets"
# vx0 keeps its MTU of 1450 (TCP's MSS follows it); the veth drops to 1000,
# so every full-size segment leaves as two IPv4 fragments of one UDP packet.
underlay_mtu 1000
start_capture "$OUT_DIR/tunnel-vxlan-fragmented.pcap" "udp port 4789 or (ip[6:2] & 0x1fff != 0)"
fetch -- "$URL" "http://$OVER_B:$HTTP_PORT/big.html"
stop_capture

log "tunnel-vxlan-8472.pcap: 2 requests on one connection in VXLAN $VNI2 on UDP port $PORT2"
underlay_mtu 1500
start_capture "$OUT_DIR/tunnel-vxlan-8472.pcap" "udp port $PORT2"
URL2="http://$OVER2_B:$HTTP_PORT/index.html"
fetch -- "$URL2" "$URL2"
stop_capture

log "done"
ls -l "$OUT_DIR"/tunnel-vxlan-*.pcap >&2
