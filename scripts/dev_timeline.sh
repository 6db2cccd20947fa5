#!/usr/bin/env bash
# Device session (issues 15, 16): where the wall time of a NODDI-Watson pipeline and of a
# dimoc commit run goes outside their stages.  TL (default .dbg/tl) holds a build whose
# DIMOC_MARKS=1 prints monotonic marks (MARK seconds label) on stderr; the pipeline's bash
# steps are traced with $EPOCHREALTIME.  ENVS: space-separated environment settings to try,
# one run set each ("-" for none, "+" joins two, e.g. "- A=1 A=1+B=1").  GPU tests named in TESTS first.
set -u
OUT=${OUT:-/tmp/dimoc-out}; mkdir -p "$OUT"
mkdir -p /tmp/peer && tar -C /tmp/peer -xJf .peer/site.tar.xz
export PYTHONPATH=/tmp/peer PYTHON=python3 PYTHONUNBUFFERED=1
nvidia-smi -L
TL=${TL:-.dbg/tl}
for t in ${TESTS:-}; do
    bash tests/run.sh --gpu "$t" > "$OUT/test-$t.log" 2>&1
    grep -E "passed|FAIL" "$OUT/test-$t.log" | tail -4
done
envs=${ENVS:--}
ev() { local x=${1/#-/X_=1}; echo "${x//+/ }"; } # "A=1+B=1" -> "A=1 B=1"
if [ -z "${SKIP_NODDI:-}" ]; then
    python3 - <<'PY'
import sys; sys.path.insert(0, "bench")
import bench_pipeline as b
b.dataset("/tmp/nw", "noddi_watson", 200000, 1)
PY
    printf 'PS4='"'"'+ $EPOCHREALTIME '"'"'\nset -x\n' > /tmp/ps4.sh
    D=/tmp/nw
    for e in $envs; do
        for rep in 0 1 2; do
            log="$OUT/noddi-${e//=/_}-$rep.log"
            rm -rf /tmp/nwout
            python3 -c "import time; print('START', time.monotonic())" > "$log"
            env $(ev "$e") DIMOC_MARKS=1 BASH_ENV=/tmp/ps4.sh "$TL/bin/dimoc" pipeline noddi_watson \
                --data $D/dwi.nii.gz --mask $D/mask.nii.gz --bvals $D/bvals --bvecs $D/bvecs \
                --out /tmp/nwout --device gpu >> "$log" 2>&1
            python3 -c "import time; print('END', time.monotonic())" >> "$log"
            python3 -c "import time; print('EPOCH-MONO', time.time() - time.monotonic())" >> "$log"
            for f in /tmp/nwout/dimoc/*/provenance.json; do python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('timings_seconds'))" "$f"; done >> "$log"
            # untraced wall time
            rm -rf /tmp/nwout
            python3 -c "
import subprocess, time, sys
t = time.monotonic()
subprocess.run(sys.argv[1:], check=True, capture_output=True)
print('WALL-UNTRACED', time.monotonic() - t)" env $(ev "$e") "$TL/bin/dimoc" pipeline noddi_watson \
                --data $D/dwi.nii.gz --mask $D/mask.nii.gz --bvals $D/bvals --bvecs $D/bvecs \
                --out /tmp/nwout --device gpu >> "$log" 2>&1
        done
        echo "noddi $e: $(grep -h WALL-UNTRACED "$OUT"/noddi-${e//=/_}-*.log | awk '{printf "%s ", $2}')"
    done
fi
if [ -z "${SKIP_COMMIT:-}" ]; then
    for e in $envs; do
        env $(ev "$e") DIMOC_MARKS=1 python3 "$TL/bench/bench_commit.py" --devices gpu --skip-commit \
            --repeat ${COMMIT_REPEAT:-2} --work /tmp/bc > "$OUT/commit-${e//=/_}.txt" 2>&1
        echo "commit $e: $(grep -h 'whole seconds' "$OUT/commit-${e//=/_}.txt")"
        grep "^| dimoc" "$OUT/commit-${e//=/_}.txt" | head -1
        cp /tmp/bc/runs/dimoc_gpu.log "$OUT/commit-${e//=/_}.log" 2>/dev/null
    done
fi
