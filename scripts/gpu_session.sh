#!/usr/bin/env bash
# One device session: GPU tests, then the benchmarks; logs under $OUT.  Expects bin/dimoc built
# beforehand (carried: the device has no niftilib) and nibabel as a wheel in .whl/ (the device
# has no package index).
#   scripts/gpu_session.sh [tests,fit,track]        what to run (default: all three)
#   BASELINE=DIR scripts/gpu_session.sh ...         also run the benchmarks of another tree (its
#                                                   bin/dimoc built), alternating with this one,
#                                                   to compare two versions on the same GPU
#   FIT_ARGS=..., TRACK_ARGS=...                    extra arguments of bench_fit.py, bench_track.py
set -u
. "$(dirname "$0")/device_env.sh"
what=${1:-tests,fit,track}
trees=(.)
[ -n "${BASELINE:-}" ] && trees=("$BASELINE" . "$BASELINE" .)
case "$what" in *tests*)
    bash tests/run.sh --gpu 2>&1 | tee "$OUT/gpu-tests.log" ;;
esac
i=0
for t in "${trees[@]}"; do
    i=$((i + 1))
    case "$what" in *fit*)
        echo "== bench_fit, tree $t (run $i)"
        python3 "$t/bench/bench_fit.py" ${FIT_ARGS:-} 2>&1 | tee "$OUT/bench-fit-$i.log" ;;
    esac
    case "$what" in *track*)
        echo "== bench_track, tree $t (run $i)"
        python3 "$t/bench/bench_track.py" ${TRACK_ARGS:-} 2>&1 | tee "$OUT/bench-track-$i.log" ;;
    esac
done
