#!/usr/bin/env bash
# Free-water DTI (models/fwdti.model), started from the tensor.
#
# usage: dimoc pipeline fwdti --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [fit options]
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. the diffusion tensor, non-linear (models/dti.model: the same parameters l11..l33, S0);
#   2. a grid over the free-water fraction f (0 to 0.9) with the tensor and S0 from step 1;
#   3. Levenberg-Marquardt on all the parameters.
# The tensor of step 1 is inflated by the free water, so the grid alone under-estimates f; it
# only picks the basin (as DIPY's WLS grid over f does before its NLS).  OUTDIR gets f, FA, MD,
# the tissue tensor's elements Dxx..Dzz, S0 (hard links to OUTDIR/dimoc/final) and PNGs of f
# and FA.
set -euo pipefail
own_flag() { :; } # no flags of its own (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages fwdti
echo "fwdti.sh: tensor"
$dimoc fit dti "${common[@]}" --out "$stages/dti" --method lm --out-type float64 "${fitopts[@]}"
cascade grid --method grid --init-from "$stages/dti" --grid f=0:0.05:0.9 --out-type float64 \
    --then final --method lm

finish() { # the links and pictures, after the last stage (lib/flags.bash)
    link_maps "$stages/final" "$out" f FA MD Dxx Dxy Dxz Dyy Dyz Dzz S0 BIC AIC
    for m in f FA; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    wait_background
    echo "fwdti.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
