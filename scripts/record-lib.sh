# Shared by scripts/record-captures.sh and scripts/record-client-captures.sh
# (sourced, not run): checks for root, tools and a python3 with `requests`;
# the work directory and the clean-up that stops, by PID, every server and
# tcpdump started; tcpdump on lo; the test page and the throw-away TLS
# certificate. Knows nothing of which captures are recorded.
#
# The sourcing script sets OUT_DIR and calls, in order: require_root,
# require_tools TOOL..., find_python, setup_work NAME; then uses PIDS,
# start_capture / stop_capture, stop_server, wait_listen, log,
# start_ratelimit_server, make_docroot,
# make_cert, make_java, write_nginx_conf, tls_server, start_nginx, start_nginx_in,
# conn_access_log, mark_access_log, save_access_log and expect_lines.

require_root() {
    if [[ $(id -u) -ne 0 ]]; then
        echo "error: must run as root (tcpdump needs to capture on lo)" >&2
        exit 1
    fi
}

# require_tools TOOL... : every TOOL is on PATH.
require_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || { echo "error: '$tool' not found" >&2; exit 1; }
    done
}

# find_python [MODULE...] : sets PY to a python3 that has the modules
# (default: `requests`; sudo's secure_path may hide pyenv and the like).
find_python() {
    local cand modules=("${@:-requests}")
    local imports
    imports="import $(IFS=,; echo "${modules[*]}")"
    PY=""
    for cand in "${PYTHON:-}" python3 /root/.pyenv/shims/python3 /usr/local/bin/python3 /usr/bin/python3; do
        [[ -n "$cand" ]] || continue
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "$imports" >/dev/null 2>&1; then
            PY="$cand"; return 0
        fi
    done
    echo "error: no python3 with the module(s) ${modules[*]}; install them (pip install" \
         "${modules[*]}, or apt-get install python3-<module>) or set PYTHON=/path/to/python3" >&2
    exit 1
}

PIDS=()           # background server PIDs
TCPDUMP_PID=""

# setup_work NAME : creates OUT_DIR and the work directory WORK (deleted on
# exit, after every server and tcpdump started is stopped).
setup_work() {
    mkdir -p "$OUT_DIR"
    WORK="$(mktemp -d "/tmp/$1.XXXXXX")"
    chmod 755 "$WORK"   # nginx workers run as 'nobody' and must read the docroot
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}

cleanup() {
    local rc=$?
    set +e
    if [[ -n "$TCPDUMP_PID" ]]; then
        kill -INT "$TCPDUMP_PID" 2>/dev/null; wait "$TCPDUMP_PID" 2>/dev/null
    fi
    local p
    for p in "${PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "${PIDS[@]}"; do
        # bounded wait (max ~5 s) then SIGKILL
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if declare -F cleanup_extra >/dev/null; then cleanup_extra; fi
    rm -rf "$WORK"
    exit "$rc"
}

# stop_server PID : stop one server we started, wait for it, forget its PID.
stop_server() {
    local pid=$1 p keep=()
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in "${PIDS[@]}"; do [[ "$p" == "$pid" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

log() { printf '\n=== %s\n' "$*" >&2; }

# start_ratelimit_server PORT LOG [ARG...] : scripts/ratelimit_server.py
# on 127.0.0.1:PORT (its count of requests starting at 1, ARGs passed on),
# its stderr to LOG; sets RL_PID (also in PIDS) and waits until it listens.
start_ratelimit_server() {
    local port=$1 log=$2
    shift 2
    timeout 120 "$PY" "$SCRIPT_DIR/ratelimit_server.py" --host 127.0.0.1 --port "$port" \
        --max-seconds 100 "$@" 2>"$log" &
    RL_PID=$!
    PIDS+=("$RL_PID")
    wait_listen "$port"
}

# wait_listen PORT [udp] : wait (max 10 s) until something listens on TCP
# PORT (with `udp`: is bound to UDP PORT). Uses `ss` so that no packets are
# generated.
wait_listen() {
    local port=$1 flags=-Hltn what="listening on port"
    if [[ ${2:-} == udp ]]; then flags=-Hlun what="bound to UDP port"; fi
    for _ in $(seq 1 100); do
        if ss "$flags" "sport = :$port" | grep -q .; then return 0; fi
        sleep 0.1
    done
    echo "error: nothing $what $port after 10 s" >&2
    return 1
}

# start_capture FILE FILTER [extra tcpdump args...]: tcpdump on lo, or on
# CAPTURE_IF inside network namespace CAPTURE_NETNS when those are set.
start_capture() {
    local file=$1 filter=$2; shift 2
    rm -f "$file"
    # --immediate-mode: deliver packets to tcpdump at once (with TPACKET_V3
    #   buffering, packets still in the kernel ring are lost when tcpdump is
    #   stopped by SIGINT); -U: packet-buffered output file;
    # -Z root: do not drop to user 'tcpdump' (it could not write into a
    #   root-owned directory otherwise);
    # -B 65536: a 64 MiB capture buffer (with the default 2 MiB tcpdump
    #   dropped packets during the 10-thread Java bursts); stop_capture fails
    #   if any packet was dropped.
    local in_ns=()
    [[ -n "${CAPTURE_NETNS:-}" ]] && in_ns=(ip netns exec "$CAPTURE_NETNS")
    "${in_ns[@]}" tcpdump -i "${CAPTURE_IF:-lo}" --immediate-mode -U -Z root -B 65536 "$@" \
        -w "$file" "$filter" 2>"$WORK/tcpdump.err" &
    TCPDUMP_PID=$!
    for _ in $(seq 1 100); do   # max 10 s
        if grep -q 'listening on' "$WORK/tcpdump.err" 2>/dev/null; then
            sleep 0.2
            return 0
        fi
        kill -0 "$TCPDUMP_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$WORK/tcpdump.err" >&2
    echo "error: tcpdump did not start" >&2
    return 1
}

stop_capture() {
    sleep 1     # let the last FIN/ACK/RST packets hit the wire
    kill -INT "$TCPDUMP_PID"
    wait "$TCPDUMP_PID" || true
    TCPDUMP_PID=""
    tail -n 2 "$WORK/tcpdump.err" >&2 || true
    if ! grep -q '^0 packets dropped by kernel' "$WORK/tcpdump.err"; then
        echo "error: tcpdump dropped packets" >&2
        return 1
    fi
}

# make_docroot : $WORK/www/index.html, the 1342-byte test page.
make_docroot() {
    mkdir -p "$WORK/www"
    {
        echo '<!DOCTYPE html>'
        echo '<html><head><title>handshakes test page</title></head><body>'
        echo '<h1>handshakes test page</h1>'
        for i in $(seq -w 1 20); do
            echo "<p>line $i: the quick brown fox jumps over the lazy dog.</p>"
        done
        echo '</body></html>'
    } >"$WORK/www/index.html"
    chmod 755 "$WORK/www"; chmod 644 "$WORK/www/index.html"
    wc -c "$WORK/www/index.html" >&2
}

# make_cert : a throw-away self-signed certificate for localhost, 127.0.0.1
# and ::1, in $WORK/cert.pem with its key in $WORK/key.pem.
make_cert() {
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=localhost' \
        -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1' \
        -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
}

# write_nginx_conf CONNECTIONS SERVERS [HTTP_LINES] : $WORK/nginx/nginx.conf
# for an nginx in the foreground that keeps its pid, logs and temporary
# files in $WORK/nginx, with CONNECTIONS worker connections, the
# `server { ... }` blocks SERVERS, and HTTP_LINES at the top of `http`
# (default: the access log in the default format). Idle keep-alive
# connections are closed after NGINX_KEEPALIVE_TIMEOUT if that is set (an
# nginx time, e.g. `1s`), else after 75s.
write_nginx_conf() {
    local connections=$1 servers=$2
    local http_lines=${3:-"    access_log $WORK/nginx/access.log;"}
    local keepalive=${NGINX_KEEPALIVE_TIMEOUT:-75s}
    mkdir -p "$WORK/nginx"
    cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log info;
events { worker_connections $connections; }
http {
$http_lines
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    default_type text/html;
    keepalive_timeout $keepalive;
$servers
}
EOF
}

# tls_server LISTEN PROTOCOLS [DIRECTIVE...] : an nginx `server` block for
# write_nginx_conf that serves the test page over TLS with make_cert's
# certificate on LISTEN (e.g. `127.0.0.1:PORT ssl http2`), ssl_protocols
# PROTOCOLS, and each further DIRECTIVE (without its semicolon; a block such
# as `location /x { … }` as it is).
tls_server() {
    local listen=$1 protocols=$2 directive
    shift 2
    echo "    server {"
    echo "        listen $listen;"
    echo "        ssl_certificate $WORK/cert.pem;"
    echo "        ssl_certificate_key $WORK/key.pem;"
    echo "        ssl_protocols $protocols;"
    for directive in "$@"; do
        case $directive in
            *\}) echo "        $directive" ;;   # a block (location { … })
            *) echo "        $directive;" ;;
        esac
    done
    echo "        root $WORK/www;"
    echo "    }"
}

# start_nginx PORT... : checks $WORK/nginx/nginx.conf (write_nginx_conf),
# starts nginx in the foreground with it (NGINX_PID, stopped on exit) and
# waits until every PORT listens.
start_nginx() {
    nginx -e "$WORK/nginx/error.log" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -t
    nginx -e "$WORK/nginx/error.log" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
    NGINX_PID=$!
    PIDS+=("$NGINX_PID")
    local port
    for port in "$@"; do wait_listen "$port"; done
}

# start_nginx_in NS PORT : starts nginx with $WORK/nginx/nginx.conf inside
# network namespace NS (NGINX_PID, stopped on exit) and waits (max 10 s)
# until it listens on TCP PORT there.
start_nginx_in() {
    local ns=$1 port=$2
    ip netns exec "$ns" nginx -e "$WORK/nginx/error.log" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
    NGINX_PID=$!
    PIDS+=("$NGINX_PID")
    for _ in $(seq 1 100); do
        ip netns exec "$ns" ss -Hltn "sport = :$port" | grep -q . && return 0
        sleep 0.1
    done
    echo "error: nothing listening on port $port in $ns after 10 s" >&2
    return 1
}

# conn_access_log : the lines for write_nginx_conf's HTTP_LINES that log
# each request with the client's address and port, nginx's connection
# number and its request count on it, the status, protocol and TLS version
# (the `conn` format the captures' .nginx-access.log files are in).
conn_access_log() {
    cat <<EOF
    log_format conn '\$remote_addr:\$remote_port conn=\$connection '
                    'conn_req=\$connection_requests "\$request" \$status '
                    'proto=\$server_protocol tls=\$ssl_protocol '
                    'reused=\$ssl_session_reused ua="\$http_user_agent"';
    access_log $WORK/nginx/access.log conn;
EOF
}

# mark_access_log : remember how long nginx's access log is now (it is
# created if it does not exist yet);
# save_access_log NAME : write what it gained since then to
# $OUT_DIR/NAME.nginx-access.log, and mark again.
mark_access_log() {
    touch "$WORK/nginx/access.log"
    ACCESS_LINES=$(wc -l <"$WORK/nginx/access.log")
}
save_access_log() {
    local name=$1
    tail -n +"$((ACCESS_LINES + 1))" "$WORK/nginx/access.log" >"$OUT_DIR/$name.nginx-access.log"
    mark_access_log
}

# expect_lines NAME N : nginx logged N requests for NAME (in
# $OUT_DIR/NAME.nginx-access.log), or an error.
expect_lines() {
    local got
    got=$(wc -l <"$OUT_DIR/$1.nginx-access.log")
    if [[ $got -ne $2 ]]; then
        echo "error: $1: nginx logged $got requests, expected $2" >&2
        return 1
    fi
}

# choose_parts "KNOWN..." ARG... : PARTS, the parts a script records —
# those its arguments name, else those of $PARTS, else all of KNOWN —
# each one of KNOWN, else an error (exit 2);
# part NAME : whether part NAME is to be recorded.
choose_parts() {
    local known=$1 p
    shift
    PARTS=${*:-${PARTS:-$known}}
    for p in $PARTS; do
        if [[ " $known " != *" $p "* ]]; then
            echo "error: unknown part '$p' (known: $known)" >&2
            exit 2
        fi
    done
}
part() { [[ " $PARTS " == *" $1 "* ]]; }

# make_slow_file NAME BYTES : $WORK/www/slow/NAME, BYTES × `x`, for a
# `location /slow/ { limit_rate …; }` to send slowly.
make_slow_file() {
    mkdir -p "$WORK/www/slow"
    head -c "$2" /dev/zero | tr '\0' 'x' >"$WORK/www/slow/$1"
    chmod 755 "$WORK/www/slow"; chmod 644 "$WORK/www/slow/$1"
}

# h2_curl PORT : CURL, curl over HTTP/2 to `localhost` at 127.0.0.1:PORT
# (so that all its connections share one SNI), whose -w prints, per
# transfer, what it got and on how many new connections; BASE, its URLs'
# start, and FILTER, the capture's.
h2_curl() {
    BASE="https://localhost:$1"
    FILTER="tcp port $1"
    CURL=(curl -sS --no-progress-meter -k --http2 --resolve "localhost:$1:127.0.0.1"
          -w '%{stderr}  %{url_effective} -> %{http_code} http_version=%{http_version} num_connects=%{num_connects} local_port=%{local_port} size=%{size_download}\n')
}

# end_part NAME LOGGED PORT : wait until no connection to PORT is left
# open, stop the capture, save nginx's lines for NAME (LOGGED requests
# expected) and print them and tshark's TCP conversations.
end_part() {
    local name=$1 logged=$2 port=$3
    wait_closed "$port"
    stop_capture
    save_access_log "$name"
    cat "$OUT_DIR/$name.nginx-access.log" >&2
    expect_lines "$name" "$logged"
    tshark -r "$OUT_DIR/$name.pcap" -q -z conv,tcp >&2
}

# make_java SOURCE... : a truststore in $WORK that trusts make_cert's
# certificate, the Java SOURCEs (scripts/java) compiled into
# $WORK/classes (against the jars in JAVA_LIBS, a class path, if set), and
# JAVA, the command that runs them trusting it, on IPv4 only (so that
# `localhost` can only mean 127.0.0.1, where nginx listens).
make_java() {
    local classpath="$WORK/classes${JAVA_LIBS:+:$JAVA_LIBS}"
    keytool -importcert -noprompt -alias localhost -file "$WORK/cert.pem" \
        -keystore "$WORK/truststore.p12" -storetype PKCS12 -storepass changeit >/dev/null 2>&1
    mkdir -p "$WORK/classes"
    javac -cp "$classpath" -d "$WORK/classes" "$@"
    JAVA=(timeout 120 java -cp "$classpath"
          -Djavax.net.ssl.trustStore="$WORK/truststore.p12"
          -Djavax.net.ssl.trustStorePassword=changeit
          -Djavax.net.ssl.trustStoreType=PKCS12
          -Djava.net.preferIPv4Stack=true)
}

# open_conns PORT : the TCP sockets of connections to PORT not yet closed
# (neither listening nor in TIME-WAIT), one line each, as `ss` lists them.
open_conns() {
    local port=$1
    ss -Htn state syn-sent state syn-recv state established state fin-wait-1 \
        state fin-wait-2 state close-wait state last-ack state closing \
        "( sport = :$port or dport = :$port )"
}

# wait_closed PORT : wait (max 10 s) until open_conns PORT lists nothing,
# so that a capture stopped after it holds every close.
wait_closed() {
    local port=$1
    for _ in $(seq 1 100); do
        [[ -z "$(open_conns "$port")" ]] && return 0
        sleep 0.1
    done
    echo "error: connections to port $port still open after 10 s:" >&2
    open_conns "$port" >&2
    return 1
}
