#!/usr/bin/env bash
# Runs fuzz targets one after the other, each for SECONDS (default 600), with
# the settings docs/fuzzing.md describes: one worker, niced, 2 GiB RSS limit,
# 10 s per input. libFuzzer's log goes to artifacts/TARGET.log.
#
#     fuzz/run.sh 600 pipeline reassembly tls_stream http split merge
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pipeline reassembly tls_stream tls_sealed http split merge quic quic_keyed certificate)
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" artifacts
    echo "== $t for ${secs}s"
    nice -n 10 cargo +nightly fuzz run "$t" "corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
        -jobs=1 -workers=1 || echo "!! $t stopped (crash or leak?): see artifacts/$t/"
    mv -f fuzz-0.log "artifacts/$t.log" 2>/dev/null || true
    tail -n 3 "artifacts/$t.log" 2>/dev/null || true
done
