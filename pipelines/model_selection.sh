#!/usr/bin/env bash
# Model selection by BIC (as thesis Table 5.4): fits several models to one dataset, writes a
# map of the model with the lowest BIC in each voxel, and prints how often each one wins.
#
# usage: model_selection.sh DATA MASK BVALS BVECS OUTDIR [MODELS] [dimoc fit options]
#
# MODELS is a comma list of shipped model names or .model files (default:
# ball_1_stick,ball_2_sticks,ball_3_sticks).  Each is fitted by Levenberg-Marquardt with --ic
# into OUTDIR/NAME/; OUTDIR/best_BIC.nii.gz holds 1, 2, ... for the first, second, ... model
# (0 where a fit is missing), and OUTDIR/best_BIC.txt the table that is also printed.  Use
# --method lm,mcmc among the fit options to select on the posterior means instead.
set -euo pipefail
if [ $# -lt 5 ]; then
    sed -n '5p' "$0" | sed 's/^# *//' >&2
    exit 2
fi
data=$1 mask=$2 bvals=$3 bvecs=$4 out=$5
shift 5
models=ball_1_stick,ball_2_sticks,ball_3_sticks
case "${1:-}" in -*|"") ;; *) models=$1; shift ;; esac
dimoc=${DIMOC:-dimoc}
mkdir -p "$out"

bics=()
names=()
IFS=, read -r -a list <<<"$models"
for model in "${list[@]}"; do
    name=$(basename "$model" .model)
    echo "model_selection.sh: fitting $name"
    $dimoc fit "$model" --data "$data" --mask "$mask" --bvals "$bvals" --bvecs "$bvecs" \
        --method lm --ic --quiet --out "$out/$name" "$@"
    bics+=("$out/$name/BIC.nii.gz")
    names+=("$name")
done

IFS=,
$dimoc select "${bics[@]}" --names "${names[*]}" --mask "$mask" --out "$out/best_BIC.nii.gz" \
    | tee "$out/best_BIC.txt"
