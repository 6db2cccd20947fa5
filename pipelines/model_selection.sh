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
models=ball_1_stick,ball_2_sticks,ball_3_sticks
method=lm
own_flag() { # this pipeline's own flags (lib/flags.bash)
    case $1 in
    --models) models=$2; taken=2 ;;
    --method) method=$2; taken=2 ;;
    esac
}
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
mkdir -p "$out"

bics=()
names=()
IFS=, read -r -a list <<<"$models"
for model in "${list[@]}"; do
    name=$(basename "$model" .model)
    echo "model_selection.sh: fitting $name"
    $dimoc fit "$model" --data "$data" --mask "$mask" "${gradopts[@]}" "${fmtopts[@]}" \
        --method "$method" --ic --out "$out/$name" "${fitopts[@]}"
    bics+=("$out/$name/BIC$ext")
    names+=("$name")
done

finish() { # the map of the winners and its table, after every fit (lib/flags.bash)
    IFS=,
    $dimoc select "${bics[@]}" --names "${names[*]}" --mask "$mask" --out "$out/best_BIC$ext" \
        | tee "$out/best_BIC.txt"
}
pipeline_finish finish
