#!/usr/bin/env bash
# Scaling test of `handshakes analyze` on many short connections: writes
# `handshakes-synth --mix short` captures (clients without pooling against a
# rate-limited API, 1–2 small requests per connection) with each given number
# of connections at the same concurrency, plus one more at the largest number
# with ten times the concurrency, into a temporary directory (each capture is
# deleted once measured; KEEP=1 keeps them). For every capture it checks first
# that `handshakes` finds what the generator made, as scripts/bench.sh does,
# then times `analyze -q -T jsonl` and `analyze -q` (table) RUNS times each
# (MODES names other outputs too) and prints markdown tables: the captures (size, packets, capture time,
# connections per second of capture, generator speed) and the analysis (wall
# and CPU time, MB/s, µs per connection, peak RSS), so that linearity in time
# and flatness in memory can be read off. docs/performance.md records the
# figures.
#
# Usage: scripts/scale.sh [CONNECTIONS...]   (default 100000 300000 1000000)
# Environment: CONCURRENCY (200), WIDE (2000: concurrency of the extra run at
# the largest count; 0 skips it), RUNS (1), MODES ("jsonl table"; also
# "json", "csv", "all" (the table with --limit 0) and "timeline": every
# output, to read off that none holds memory per connection), SEED (1),
# THREADS (unset: the
# analyzer's default; else passed as --threads), HANDSHAKES and SYNTH (the
# binaries; default target/release/, under CARGO_TARGET_DIR if set), BUILD
# (1: cargo build them first), KEEP (0), TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
    COUNTS=("$@")
else
    COUNTS=(100000 300000 1000000)
fi
CONCURRENCY=${CONCURRENCY:-200}
WIDE=${WIDE:-2000}
RUNS=${RUNS:-1}
read -r -a MODE_LIST <<< "${MODES:-jsonl table}"
SEED=${SEED:-1}
TARGET=${CARGO_TARGET_DIR:-target}
HANDSHAKES=${HANDSHAKES:-$TARGET/release/handshakes}
SYNTH=${SYNTH:-$TARGET/release/handshakes-synth}
THREAD_ARGS=()
if [ -n "${THREADS:-}" ]; then
    THREAD_ARGS=(--threads "$THREADS")
fi

if [ "${BUILD:-1}" = 1 ]; then
    echo "== building (release)" >&2
    cargo build --release --quiet --bin handshakes --bin handshakes-synth
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/handshakes-scale.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
    echo "== keeping $DIR" >&2
else
    trap 'rm -rf "$DIR"' EXIT
fi

# Runs: every count at CONCURRENCY, then the largest at WIDE.
CONFIGS=()
largest=0
for n in "${COUNTS[@]}"; do
    CONFIGS+=("$n $CONCURRENCY")
    if [ "$n" -gt "$largest" ]; then
        largest=$n
    fi
done
if [ "$WIDE" != 0 ]; then
    CONFIGS+=("$largest $WIDE")
fi

: > "$DIR/captures.tsv"
: > "$DIR/runs.tsv"
bad=0
for config in "${CONFIGS[@]}"; do
    read -r n c <<< "$config"
    FILE=$DIR/short-$n-c$c.pcap
    echo "== generating $n connections at concurrency $c (seed $SEED) into $FILE" >&2
    "$SYNTH" --out "$FILE" --mix short --connections "$n" --concurrency "$c" \
        --seed "$SEED" 2> "$DIR/synth.txt"
    sed '$d' "$DIR/synth.txt" >&2
    tail -1 "$DIR/synth.txt" > "$DIR/expected.json"

    echo "== checking that handshakes finds what was generated" >&2
    "$HANDSHAKES" analyze "${THREAD_ARGS[@]}" -T jsonl "$FILE" | tail -1 > "$DIR/summary.json"
    if ! python3 scripts/check-synth-counts.py "$DIR/expected.json" "$DIR/summary.json" >&2; then
        bad=$((bad + 1))
        match=no
    else
        match=yes
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$c" "$(stat -c %s "$FILE")" "$match" \
        "$(cat "$DIR/expected.json")" >> "$DIR/captures.tsv"

    echo "== timing, $RUNS runs each" >&2
    # Written back to disk first: the kernel writing back gigabytes of a
    # fresh capture while the runs time themselves slowed those that write
    # a temporary file (-T json, the table with --limit 0, timeline) two-
    # to threefold.
    sync "$FILE"
    cat "$FILE" > /dev/null # page cache warm
    for run in $(seq 1 "$RUNS"); do
        for mode in "${MODE_LIST[@]}"; do
            case "$mode" in
                jsonl | json | csv) command=(analyze -q "${THREAD_ARGS[@]}" -T "$mode") ;;
                table) command=(analyze -q "${THREAD_ARGS[@]}") ;;
                all) command=(analyze -q "${THREAD_ARGS[@]}" --limit 0) ;;
                timeline) command=(timeline) ;;
                *)
                    echo "scale.sh: unknown mode $mode in MODES (jsonl table json csv all timeline)" >&2
                    exit 2
                    ;;
            esac
            start=$(date +%s%N)
            /usr/bin/time -f "%M %U %S" -o "$DIR/rss.txt" \
                "$HANDSHAKES" "${command[@]}" "$FILE" > /dev/null
            end=$(date +%s%N)
            read -r kib user sys < <(tail -1 "$DIR/rss.txt")
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$c" "$mode" "$(((end - start) / 1000))" \
                "$kib" "$(echo "$user + $sys" | bc -l)" >> "$DIR/runs.tsv"
            printf '   run %s  %-6s %8.2f s  %7.1f MiB\n' "$run" "$mode" \
                "$(echo "($end - $start) / 1000000000" | bc -l)" "$(echo "$kib / 1024" | bc -l)" >&2
        done
    done
    if [ "${KEEP:-0}" != 1 ]; then
        rm -f "$FILE"
    fi
done

python3 - "$DIR/captures.tsv" "$DIR/runs.tsv" "$RUNS" "${THREADS:-default}" "${MODE_LIST[@]}" <<'EOF'
import json, statistics, sys
captures_path, runs_path, runs, threads = sys.argv[1:5]
modes = sys.argv[5:]
caps, order = {}, []
for line in open(captures_path):
    n, c, size, match, expected = line.rstrip("\n").split("\t", 4)
    key = (int(n), int(c))
    caps[key] = dict(json.loads(expected), size=int(size), match=match)
    order.append(key)
runs_by = {}
for line in open(runs_path):
    n, c, mode, us, kib, secs = line.rstrip("\n").split("\t")
    r = runs_by.setdefault((int(n), int(c), mode), {"wall": [], "cpu": [], "kib": []})
    r["wall"].append(int(us) / 1e6)
    r["cpu"].append(float(secs))
    r["kib"].append(int(kib))

print("Captures (`handshakes-synth --mix short`):")
print()
print("| connections | concurrency | file size | packets | capture time | connections/s of capture "
      "| peak open | tuples reused | generator | generator MB/s | counts |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for key in order:
    e = caps[key]
    span = e.get("capture_seconds", float("nan"))
    print(f"| {key[0]:,} | {key[1]:,} | {e['size'] / 1e6:,.0f} MB | {e['packets']:,} | {span:,.1f} s "
          f"| {key[0] / span:,.0f} | {e.get('max_open', '?')} | {e.get('port_reuses', '?'):,} "
          f"| {e['seconds']:.1f} s | {e['size'] / 1e6 / e['seconds']:,.0f} "
          f"| {'exact' if e['match'] == 'yes' else 'MISMATCH'} |")
print()
print(f"Analysis (`handshakes analyze -q` with `-T jsonl`, `-T json`, `-T csv`, nothing (table) or "
      f"`--limit 0` (all), or `handshakes timeline`; threads: {threads}; median of {runs} "
      "run(s), page cache warm; MB/s by wall time, µs per connection by CPU time):")
print()
print("| connections | concurrency | output | wall | CPU user+sys | MB/s | µs/connection (CPU) | peak RSS |")
print("|---:|---:|---|---:|---:|---:|---:|---:|")
for key in order:
    e = caps[key]
    for mode in modes:
        r = runs_by.get((key[0], key[1], mode))
        if not r:
            continue
        wall = statistics.median(r["wall"])
        cpu = statistics.median(r["cpu"])
        print(f"| {key[0]:,} | {key[1]:,} | {mode} | {wall:.2f} s | {cpu:.2f} s "
              f"| {e['size'] / 1e6 / wall:,.0f} | {cpu / key[0] * 1e6:.1f} "
              f"| {max(r['kib']) / 1024:,.1f} MiB |")
EOF

if [ "$bad" -gt 0 ]; then
    echo "== $bad capture(s) did not match what was generated" >&2
    exit 1
fi
