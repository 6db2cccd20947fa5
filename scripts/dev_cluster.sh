#!/usr/bin/env bash
# Device session for issue 18 (parts): the GPU tests of --part and merge, then bench_part.py with
# this build and, when BASELINE_BIN names another build, with it too (the same GPU, in turn).
#   scripts/dev_cluster.sh [tests,bench]      logs under $OUT
set -u
. "$(dirname "$0")/device_env.sh"
what=${1:-tests,bench}
case "$what" in *tests*)
    bash tests/run.sh --gpu part 2>&1 | tee "$OUT/gpu-part-tests.log" ;;
esac
case "$what" in *bench*)
    python3 bench/bench_part.py ${PART_ARGS:-} 2>&1 | tee "$OUT/bench-part.log"
    if [ -n "${BASELINE_BIN:-}" ]; then
        DIMOC_BENCH_BIN=$BASELINE_BIN python3 bench/bench_part.py --work bench/tmp-part-base \
            ${PART_ARGS:-} 2>&1 | tee "$OUT/bench-part-baseline.log"
    fi ;;
esac
