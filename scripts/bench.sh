#!/usr/bin/env bash
# Benchmarks `handshakes analyze` against tshark, tcpdump and cat on a large
# synthetic capture written by `handshakes-synth` into a temporary directory
# (deleted afterwards; KEEP=1 keeps it). Checks first that `handshakes`
# finds what the generator made (connections, TLS handshakes, requests), then
# times every tool RUNS times, alternating (each round after an untimed
# warm-up run), and prints a markdown table of
# medians: wall time (and the fastest run: on a shared host the noise only
# ever slows a run down), CPU time (user+sys, steadier on a busy machine),
# MB/s and packets/s (by wall time), peak RSS, and times relative to ours.
# docs/performance.md records the figures.
#
# The page cache decides a large part of every tool's time: a file just
# written sits in small folios, which a memory map takes in 4 KiB page by
# 4 KiB page, while a file read back from disk sits (on recent kernels) in
# 2 MiB folios, mapped in one step each. Both happen to users (a capture
# just taken; one copied in, or read days later), so every tool is timed
# on the capture as the generator left it, and then ours and the floor
# again after the capture is dropped from the cache and read back once.
# Each table says how much of the file was in huge folios. Read back, it
# also times the capture cut into as many parts as cores (editcap), each
# analysed by its own process at once: the ceiling of a split that shares
# nothing. The temporary directory holds the capture three times (pcap,
# pcapng, parts).
#
# Usage: scripts/bench.sh [SIZE]        (default 1GiB; e.g. 50MiB for a quick run)
# Environment: RUNS (3), SEED (1), KEEP (0), REREAD (1: also time the
# capture read back from disk; 0: only as written), TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${1:-1GiB}
RUNS=${RUNS:-3}
SEED=${SEED:-1}

echo "== building (release)" >&2
cargo build --release --quiet --bin handshakes --bin handshakes-synth --example floor
BIN=$PWD/target/release/handshakes
SYNTH=$PWD/target/release/handshakes-synth
FLOOR=$PWD/target/release/examples/floor
CORES=$(nproc)

DIR=$(mktemp -d "${TMPDIR:-/tmp}/handshakes-bench.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
    echo "== keeping $DIR" >&2
else
    trap 'rm -rf "$DIR"' EXIT
fi
FILE=$DIR/synth.pcap

echo "== generating $SIZE (seed $SEED) into $FILE" >&2
"$SYNTH" --out "$FILE" --size "$SIZE" --seed "$SEED" 2> "$DIR/synth.txt"
sed '$d' "$DIR/synth.txt" >&2
tail -1 "$DIR/synth.txt" > "$DIR/expected.json"

echo "== checking that handshakes finds what was generated" >&2
"$BIN" analyze -T jsonl "$FILE" | tail -1 > "$DIR/summary.json"
python3 scripts/check-synth-counts.py "$DIR/expected.json" "$DIR/summary.json" >&2 || true

# CMD run CORES times at once, each on the whole file: what CORES cores give
# that work when nothing is shared between the copies.
at_once() {
    local cmd="" i
    for i in $(seq "$CORES"); do cmd+="$1 & "; done
    echo "${cmd}wait"
}

# The capture cut into CORES parts of as many packets (editcap), for the
# ceiling of a split that shares nothing: each part analysed by its own
# process, all at once, timed on the capture read back (REREAD=1). (CORES
# copies of the whole file at once can find each other's bytes in the
# shared cache.)
PARTS=()
PACKETS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packets"])' "$DIR/expected.json")
if command -v editcap > /dev/null 2>&1 && [ "$CORES" -gt 1 ] && [ "${REREAD:-1}" = 1 ]; then
    editcap -c $(((PACKETS + CORES - 1) / CORES)) "$FILE" "$DIR/part.pcap"
    PARTS=("$DIR"/part_*.pcap)
fi
# The parts' analyses, all at once.
parts_at_once() {
    local cmd="" part
    for part in "${PARTS[@]}"; do cmd+="$BIN analyze -q -j 1 \"$part\" > /dev/null & "; done
    echo "${cmd}wait"
}

# name|command (FILE is substituted, PCAPNG by the same capture as pcapng);
# tools that are not installed are skipped.
TOOLS=(
    "handshakes analyze -j 1 (table)|$BIN analyze -q -j 1 FILE > /dev/null"
    "handshakes analyze -j 1 -T jsonl|$BIN analyze -q -j 1 -T jsonl FILE > /dev/null"
    "handshakes analyze -j $CORES (table)|$BIN analyze -q -j $CORES FILE > /dev/null"
    "handshakes analyze -j $CORES -T jsonl|$BIN analyze -q -j $CORES -T jsonl FILE > /dev/null"
    "handshakes analyze -j 1, the capture as pcapng|$BIN analyze -q -j 1 PCAPNG > /dev/null"
    "handshakes analyze -j $CORES, the capture as pcapng|$BIN analyze -q -j $CORES PCAPNG > /dev/null"
    "floor: mmap walker, headers + 4-tuple hash|$FLOOR FILE > /dev/null"
    "floor, $CORES at once (each the whole file)|$(at_once "$FLOOR FILE > /dev/null")"
    "handshakes analyze -j 1 (table), $CORES at once (each the whole file)|$(at_once "$BIN analyze -q -j 1 FILE > /dev/null")"
    "handshakes analyze -j 1 (table), $CORES at once (the capture cut into parts)|$(parts_at_once) # PARTS"
    "tshark -z conv,tcp|tshark -q -z conv,tcp -r FILE > /dev/null"
    "tshark SNI of ClientHellos|tshark -r FILE -Y tls.handshake.type==1 -T fields -e tls.handshake.extensions_server_name > /dev/null"
    "tcptrace -n|tcptrace -n FILE > /dev/null"
    "tcpdump -w /dev/null|tcpdump -r FILE -w /dev/null"
    "cat > /dev/null|cat FILE > /dev/null"
)
# The same capture as pcapng (what dumpcap and Wireshark write), when
# editcap is there to convert it.
NGFILE=$DIR/synth.pcapng
if command -v editcap > /dev/null 2>&1; then
    editcap -F pcapng "$FILE" "$NGFILE"
fi
ACTIVE=()
for t in "${TOOLS[@]}"; do
    name=${t%%|*}
    cmd=${t#*|}
    exe=$(basename "${cmd%% *}")
    if [[ $cmd == *PCAPNG* && ! -f $NGFILE ]]; then
        echo "   skipped: $name (editcap is not installed)" >&2
        echo "skip|$name|editcap" >> "$DIR/skipped.txt"
    elif [[ $cmd == *"# PARTS" && ${#PARTS[@]} -lt 2 ]]; then
        echo "   skipped: $name (needs editcap, two cores or more, and REREAD=1)" >&2
    elif command -v "${cmd%% *}" > /dev/null 2>&1; then
        ACTIVE+=("$t")
    else
        echo "   skipped: $name ($exe is not installed)" >&2
        echo "skip|$name|$exe" >> "$DIR/skipped.txt"
    fi
done

# Times each of TOOLS RUNS times, alternating, into $1 (tab-separated).
time_tools() {
    local out=$1 run t name cmd start end kib user sys
    : > "$out"
    for run in $(seq 1 "$RUNS"); do
        # Untimed warm-up: the round's first run came out 20-30 % slower than
        # the same command later in the round (right after tshark and its
        # 1.7 GB), whichever tool it was.
        cat "$FILE" > /dev/null
        "$BIN" analyze -q -j 1 "$FILE" > /dev/null
        for t in "${TOOLS_NOW[@]}"; do
            name=${t%%|*}
            cmd=${t#*|}
            cmd=${cmd//FILE/\"$FILE\"}
            cmd=${cmd//PCAPNG/\"$NGFILE\"}
            start=$(date +%s%N)
            /usr/bin/time -f "%M %U %S" -o "$DIR/rss.txt" bash -c "$cmd" 2> /dev/null
            end=$(date +%s%N)
            read -r kib user sys < <(tail -1 "$DIR/rss.txt")
            printf '%s\t%s\t%s\t%s\n' "$name" "$(((end - start) / 1000))" "$kib" "$(echo "$user + $sys" | bc -l)" >> "$out"
            printf '   run %s  %-30s %8.2f s\n' "$run" "$name" "$(echo "($end - $start) / 1000000000" | bc -l)" >&2
        done
    done
}

# The share of file $1 the page cache holds in huge folios (what a map
# of it gets as huge pages), in percent.
huge_share() {
    python3 - "$1" <<'PY'
import mmap, os, re, sys
path = sys.argv[1]
with open(path, "rb") as f:
    size = os.fstat(f.fileno()).st_size
    m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
    for at in range(0, size, 4096):
        m[at]
    pmd = 0
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", open("/proc/self/smaps").read()):
        if block.split("\n")[0].endswith(path):
            pmd += sum(int(l.split()[1]) for l in block.split("\n") if l.startswith("FilePmdMapped:"))
    m.close()
print(f"{100 * pmd * 1024 / max(size, 1):.0f}")
PY
}

# Drops file $1 from the page cache (written back first) and reads it back.
reread() {
    python3 - "$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
PY
    cat "$1" > /dev/null
}

summarize() {
    CORES=$CORES python3 - "$1" "$DIR/expected.json" "$(stat -c %s "$FILE")" "$RUNS" "$SIZE" "$DIR/skipped.txt" "$2" <<'EOF'
import json, os, statistics, sys
runs_path, expected_path, size, runs, label, skipped_path, cache = sys.argv[1:8]
size = int(size)
packets = json.load(open(expected_path))["packets"]
times, cpu, rss, order = {}, {}, {}, []
for line in open(runs_path):
    name, us, kib, secs = line.rstrip("\n").split("\t")
    if name not in times:
        order.append(name)
    times.setdefault(name, []).append(int(us) / 1e6)
    cpu.setdefault(name, []).append(float(secs))
    rss.setdefault(name, []).append(int(kib))
ours = statistics.median(times[order[0]]) if order else None
ours_cpu = statistics.median(cpu[order[0]]) if order else None
print(f"Capture: {label} synthetic pcap, {size / 1e6:.0f} MB, {packets:,} packets, {cache}; "
      f"median of {runs} runs, alternating; ratio = tool time / the first row's time; "
      f"share of floor = floor's wall time / the tool's.")
print()
def med(matches):
    """The median wall time of the first tool whose name `matches`."""
    return next((statistics.median(times[n]) for n in order if matches(n)), None)
floor = med(lambda n: n.startswith("floor"))
print("| tool | wall (median) | wall (fastest) | CPU user+sys | MB/s | packets/s | peak RSS | wall vs ours | CPU vs ours | share of floor |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in order:
    t = statistics.median(times[name])
    c = statistics.median(cpu[name])
    r = max(rss[name]) / 1024
    ratio = t / ours if ours else float("nan")
    cratio = c / ours_cpu if ours_cpu else float("nan")
    print(f"| {name} | {t:.2f} s | {min(times[name]):.2f} s | {c:.2f} s | {size / 1e6 / t:,.0f} | {packets / t:,.0f} "
          f"| {r:,.1f} MiB | {ratio:.2f}× | {cratio:.2f}× | {100 * floor / t if floor else float('nan'):.0f} % |")
# What the cores give here: N copies at once do N times the work of one; on
# ideal hardware in one copy's time (N×). Their ratio is the ceiling of any
# N-thread split of that work, before the split's own costs.
cores = int(os.environ.get("CORES", "1"))
def ours(n, one, jsonl):
    """Whether tool `n` is our analysis of the pcap capture, on one thread
    (`one`) or all cores, in JSON Lines (`jsonl`) or as a table."""
    return (n.startswith("handshakes analyze -j") and "at once" not in n
            and "pcapng" not in n and ("-j 1 " in n) == one and ("jsonl" in n) == jsonl)
ours_at = lambda one, jsonl: med(lambda n: ours(n, one, jsonl))
one_t, one_l = ours_at(True, False), ours_at(True, True)
many_t, many_l = ours_at(False, False), ours_at(False, True)
floors = med(lambda n: n.startswith("floor,"))
ones = med(lambda n: n.startswith("handshakes analyze -j 1 (table),") and "whole file" in n)
parts = med(lambda n: n.startswith("handshakes analyze -j 1 (table),") and "cut into parts" in n)
if cores > 1 and floor and floors:
    print()
    print(f"What {cores} cores give on this machine: {cores} floors at once take "
          f"{floors / floor:.2f}× one floor's time (a ceiling of {cores * floor / floors:.2f}× "
          f"for memory-bound work)", end="")
    if one_t and ones:
        print(f"; {cores} one-thread analyses at once take {ones / one_t:.2f}× one's time "
              f"(a ceiling of {cores * one_t / ones:.2f}× for our analysis split over {cores} threads)",
              end="")
    if one_t and parts:
        print(f"; the capture cut into {cores} parts, each analysed by its own process at once: "
              f"{one_t / parts:.2f}× one thread's speed (the ceiling of a split that shares nothing)",
              end="")
    print(".", end="")
    if one_t and many_t and one_l and many_l:
        fastest = lambda one, jsonl: next(min(times[n]) for n in order if ours(n, one, jsonl))
        print(f" `handshakes` with all cores against one thread: {one_t / many_t:.2f}× (table), "
              f"{one_l / many_l:.2f}× (jsonl); fastest runs "
              f"{fastest(True, False) / fastest(False, False):.2f}× and "
              f"{fastest(True, True) / fastest(False, True):.2f}×.")
    else:
        print()
if os.path.exists(skipped_path):
    for line in open(skipped_path):
        _, name, exe = line.rstrip("\n").split("|")
        print(f"| {name} | skipped: `{exe}` not installed | | | | | | | | |")
EOF
}

echo "== timing ${#ACTIVE[@]} tools, $RUNS runs each, alternating, on the capture as written" >&2
cat "$FILE" > /dev/null # page cache warm for everyone
# The parts only when read back, as the capture is then: as editcap left
# them they sit in small folios, unlike the capture as the generator wrote
# it, and would be timed on a different footing.
TOOLS_NOW=()
for t in "${ACTIVE[@]}"; do
    [[ $t == *"# PARTS" ]] || TOOLS_NOW+=("$t")
done
time_tools "$DIR/runs.tsv"
summarize "$DIR/runs.tsv" "as written ($(huge_share "$FILE") % in huge folios)"

if [ "${REREAD:-1}" = 1 ]; then
    reread "$FILE"
    [ -f "$NGFILE" ] && reread "$NGFILE"
    for part in "${PARTS[@]}"; do reread "$part"; done
    TOOLS_NOW=()
    for t in "${ACTIVE[@]}"; do
        case $t in handshakes* | floor*) TOOLS_NOW+=("$t") ;; esac
    done
    echo "== timing ${#TOOLS_NOW[@]} tools again on the capture read back from disk" >&2
    time_tools "$DIR/reread.tsv"
    echo
    : > "$DIR/skipped.txt"
    summarize "$DIR/reread.tsv" "read back from disk ($(huge_share "$FILE") % in huge folios)"
fi
