#!/usr/bin/env bash
# One device session: GPU tests, then the fitting benchmark; logs under $OUT.  Expects bin/dimoc
# built beforehand (carried) and nibabel as a wheel in .whl/ (the device has no package index).
set -u
OUT=${OUT:-/tmp/dimoc-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
export PYTHON=python3
nvidia-smi -L
what=${1:-tests,bench}
case "$what" in *tests*)
    bash tests/run.sh --gpu 2>&1 | tee "$OUT/gpu-tests.log" ;;
esac
case "$what" in *bench*)
    python3 bench/bench_fit.py ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" ;;
esac
