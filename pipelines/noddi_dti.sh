#!/usr/bin/env bash
# NODDI-DTI (models/noddi_dti.model, Edwards et al. 2017): NDI and ODI from single-shell data.
#
# usage: dimoc pipeline noddi_dti --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [fit options]
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. the orientation from a tensor fit: dimoc dti's V1 as th, ph (dimoc angles);
#   2. a grid search over fintra and kappa, the orientation held, S0 the mean b=0 signal;
#   3. Levenberg-Marquardt on all the parameters.
# Use it on one shell of b ~ 1000 s/mm^2 (with b=0): the model is the tensor limit of NODDI.
# OUTDIR gets NDI, ODI, fintra, kappa, dyads1, S0 (hard links to OUTDIR/dimoc/final) and PNGs
# of NDI and ODI.
set -euo pipefail
own_flag() { :; } # no flags of its own (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages noddi_dti
echo "noddi_dti.sh: tensor"
$dimoc dti "${common[@]}" --out "$stages/dti" >/dev/null
$dimoc angles "$stages/dti/V1$ext" --out "$stages/angles" "${fmtopts[@]}"
cascade grid --method grid --init-from "$stages/angles" --fixed th,ph --out-type float64 \
    --grid fintra=0.05:0.1:0.95 --grid kappa=0.25,0.5,1,2,4,8,16,32,60 \
    --then final --method lm

finish() { # the links and pictures, after the last stage (lib/flags.bash)
    link_maps "$stages/final" "$out" NDI ODI fintra kappa dyads1 S0 BIC AIC
    for m in NDI ODI; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    wait_background
    echo "noddi_dti.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
