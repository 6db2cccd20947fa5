#!/usr/bin/env bash
# Device session for issues 15 and 16: the figures their targets name, in one call, on one GPU.
#   ball & 2 sticks LM+MCMC (bench_fit.py, float and double, 200,000 voxels; NVRTC variants in
#   NVRTC_VARIANTS, ';'-separated), the NODDI-Watson and NODDI-Bingham pipelines
#   (dev_pipeline_compare.sh without a base tree), dimoc commit against dmri-commit
#   (bench_commit.py, 1M streamlines; SKIP_PEER=1 leaves the peer out), then GPU tests in TESTS.
set -u
OUT=${OUT:-/tmp/dimoc-out}; mkdir -p "$OUT"
mkdir -p /tmp/peer && tar -C /tmp/peer -xJf .peer/site.tar.xz
[ -f .peer/dipydata.tar.gz ] && tar -C /tmp/peer -xzf .peer/dipydata.tar.gz
export PYTHONPATH=/tmp/peer PYTHON=python3 PYTHONUNBUFFERED=1
nvidia-smi -L
if [ -z "${SKIP_FIT:-}" ]; then
    python3 bench/bench_fit.py --no-cpu --precisions float,double \
        --nvrtc-variants="${NVRTC_VARIANTS:-}" > "$OUT/bench_fit.txt" 2>&1
    tail -25 "$OUT/bench_fit.txt"
fi
if [ -z "${SKIP_PIPELINES:-}" ]; then
    for p in noddi_watson noddi_bingham; do
        PIPELINE=$p SKIP_BASE=1 bash scripts/dev_pipeline_compare.sh > "$OUT/pipeline-$p.txt" 2>&1
        tail -14 "$OUT/pipeline-$p.txt"
    done
fi
if [ -z "${SKIP_COMMIT:-}" ]; then
    peer=""; [ -n "${SKIP_PEER:-}" ] && peer=--skip-commit
    python3 bench/bench_commit.py --devices gpu $peer --repeat ${COMMIT_REPEAT:-2} --work /tmp/bc \
        > "$OUT/bench_commit.txt" 2>&1
    tail -22 "$OUT/bench_commit.txt"
fi
for t in ${TESTS:-}; do
    bash tests/run.sh --gpu "$t" > "$OUT/test-$t.log" 2>&1
    echo "$t: $(tail -1 "$OUT/test-$t.log")"
    grep FAIL "$OUT/test-$t.log" | head -3
done
