#!/usr/bin/env bash
# Device session for issue 16: where the wall time of `dimoc pipeline noddi_watson` goes, each
# command of the cascade (pipelines/noddi_watson.sh) run alone and timed, on the data that
# scripts/dev_pipeline_compare.sh made (/tmp/bp-new/gpu), fitter cache warm; LANES="1 2 4" adds
# the grid and the last LM with those lanes per voxel.
set -u
D=$PWD/bin/dimoc
d=/tmp/bp-new/gpu
s=/tmp/breakdown
rm -rf $s && mkdir -p $s
common=(--data $d/dwi.nii.gz --mask $d/mask.nii.gz --bvals $d/bvals --bvecs $d/bvecs)
step() { # label command...
    local label=$1 t0 t1
    shift
    t0=$(date +%s.%N)
    "$@" >$s/log 2>&1 || tail -3 $s/log
    t1=$(date +%s.%N)
    awk -v l="$label" -v a="$t0" -v b="$t1" 'BEGIN { printf "%-10s %6.2f s\n", l, b - a }'
}
step dti $D dti "${common[@]}" --out $s/dti
step angles $D angles $s/dti/V1.nii.gz --fanning $s/dti/V2.nii.gz --out $s/angles
step grid $D fit noddi_watson "${common[@]}" --device gpu --out $s/grid --quiet --method grid --init-from \
    $s/angles --fixed th,ph --out-type float64 --grid fiso=0,0.1,0.2,0.35,0.6,1 \
    --grid fintra=0.1:0.1:0.9 --grid kappa=0.5,1,2,4,8,16,32
step fractions $D fit noddi_watson "${common[@]}" --device gpu --out $s/fractions --quiet --method lm \
    --init-from $s/grid --fixed S0,kappa,th,ph --out-type float64
step final $D fit noddi_watson "${common[@]}" --device gpu --out $s/final --quiet --method lm \
    --init-from $s/fractions
for m in fiso fintra OD; do step "view $m" $D view $s/final/$m.nii.gz -o $s/$m.png; done
for st in grid fractions final; do
    python3 -c "import json,sys; t=json.load(open('$s/$st/provenance.json'))['timings_seconds']; print('$st', ' '.join(f'{k} {v:.2f}' for k, v in t.items()))"
done
# The lanes per voxel (dm_fit_gpu_auto_lanes picks 2 for M = 105), for the grid and the last LM.
if [ -n "${LANES:-}" ]; then
    for L in $LANES; do
        for st in grid final; do
            if [ $st = grid ]; then
                args=(--method grid --init-from $s/angles --fixed th,ph --grid fiso=0,0.1,0.2,0.35,0.6,1
                    --grid fintra=0.1:0.1:0.9 --grid kappa=0.5,1,2,4,8,16,32)
            else
                args=(--method lm --init-from $s/fractions)
            fi
            rm -rf $s/lanes
            $D fit noddi_watson "${common[@]}" --device gpu --lanes $L --out $s/lanes --quiet \
                "${args[@]}" >$s/log 2>&1 || tail -2 $s/log
            python3 -c "import json; t=json.load(open('$s/lanes/provenance.json'))['timings_seconds']; print('lanes $L $st compile', round(t['compile'], 2), 'fit', round(t['fit'], 3))"
        done
    done
fi
