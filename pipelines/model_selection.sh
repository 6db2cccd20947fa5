#!/usr/bin/env bash
# Model selection by BIC (as thesis Table 5.4): fits several models to one dataset, writes a
# map of the model with the lowest BIC in each voxel, and prints how often each one wins.
#
# usage: dimoc pipeline model_selection --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--models LIST] [--method LIST] [fit options]
# options:
#   --models LIST         comma list of shipped model names or .model files [default: ball_1_stick,ball_2_sticks,ball_3_sticks]
#   --method LIST         the fitting methods of every model (lm,mcmc: select on the posterior means) [default: lm]
# fit options: every 'dimoc fit' option but --method --ic
#
# Each model is fitted with --ic into OUTDIR/NAME/; OUTDIR/best_BIC.nii.gz holds 1, 2, ... for
# the first, second, ... model (0 where a fit is missing), and OUTDIR/best_BIC.txt the table
# that is also printed.
set -euo pipefail
data= mask= bvals= bvecs= out=
models=ball_1_stick,ball_2_sticks,ball_3_sticks
method=lm
fitopts=()
while [ $# -gt 0 ]; do
    case $1 in
    --data) data=$2; shift 2 ;;
    --mask) mask=$2; shift 2 ;;
    --bvals) bvals=$2; shift 2 ;;
    --bvecs) bvecs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --method) method=$2; shift 2 ;;
    *) fitopts+=("$1"); shift ;; # a fit option or its value: every dimoc fit gets them
    esac
done
if [ -z "$data" ] || [ -z "$mask" ] || [ -z "$bvals" ] || [ -z "$bvecs" ] || [ -z "$out" ]; then
    sed -n 's/^# usage: //p' "$0" >&2
    exit 2
fi
dimoc=${DIMOC:-dimoc}
mkdir -p "$out"

bics=()
names=()
IFS=, read -r -a list <<<"$models"
for model in "${list[@]}"; do
    name=$(basename "$model" .model)
    echo "model_selection.sh: fitting $name"
    $dimoc fit "$model" --data "$data" --mask "$mask" --bvals "$bvals" --bvecs "$bvecs" \
        --method "$method" --ic --out "$out/$name" "${fitopts[@]}"
    bics+=("$out/$name/BIC.nii.gz")
    names+=("$name")
done

IFS=,
$dimoc select "${bics[@]}" --names "${names[*]}" --mask "$mask" --out "$out/best_BIC.nii.gz" \
    | tee "$out/best_BIC.txt"
