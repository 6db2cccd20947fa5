#!/usr/bin/env bash
# Device session for issue 16: a cascade (bench/bench_pipeline.py, GPU only) with this tree and,
# when .dbg/base holds an earlier build (bin/dimoc with its templates, models, pipelines and
# bench), with that build on the same data in the same call; then each tree's final maps
# against the simulation's truth (median |error|) and against each other.
#   PIPELINE=noddi_watson VOXELS=200000 [SKIP_BASE=1] scripts/dev_pipeline_compare.sh
set -u
. "$(dirname "$0")/device_env.sh"
P=${PIPELINE:-noddi_watson}
N=${VOXELS:-200000}
trees=new
[ -d .dbg/base ] && [ -z "${SKIP_BASE:-}" ] && trees="base new"
for tree in $trees; do
    b=.
    [ "$tree" = base ] && b=.dbg/base
    echo "== $tree"
    python3 "$b/bench/bench_pipeline.py" --pipeline "$P" --voxels "$N" --cpu-voxels 0 \
        --work "/tmp/bp-$tree" 2>&1 | tail -9
done
python3 - "$trees" <<'PY'
import os
import sys
import nibabel as nib
import numpy as np
trees = sys.argv[1].split()
maps = {}
for t in trees:
    for k in ("fintra", "fiso", "kappa"):
        if not os.path.exists(f"/tmp/bp-{t}/gpu/out/{k}.nii.gz"):
            continue  # NODDI-Bingham: kappa1, kappa2
        truth = nib.load(f"/tmp/bp-{t}/gpu/{k}.nii.gz").get_fdata().ravel()
        est = nib.load(f"/tmp/bp-{t}/gpu/out/{k}.nii.gz").get_fdata().ravel()
        maps[t, k] = est
        err = np.abs(est - truth)
        rel = " (relative)" if k == "kappa" else ""
        if k == "kappa":
            err = err / truth
        print(f"{t:5} {k:7} median |error|{rel} {np.median(err):.5f}  mean {np.mean(err):.5f}")
if len(trees) == 2:
    for k in ("fintra", "fiso", "kappa"):
        if ("base", k) not in maps:
            continue
        d = np.abs(maps["base", k] - maps["new", k])
        print(f"base vs new {k:7} max |diff| {d.max():.3g}  99th pct {np.percentile(d, 99):.3g}")
PY
