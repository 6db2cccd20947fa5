#!/usr/bin/env bash
# Diffusion kurtosis imaging (models/dki.model), started from the tensor.
#
# usage: dimoc pipeline dki --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--sigma S] [fit options]
# options:
#   --sigma VALUE|MAP     the noise sd in the data's units (a number, or a map such as MRtrix
#                         dwidenoise's -noise): DKI then fits the Rician noise floor
#                         sqrt(S^2 + sigma^2), which keeps the high shell's bias out of the
#                         kurtosis [default: no noise floor]
# fit options: every 'dimoc fit' option but --method --init --init-from
#
#   1. the diffusion tensor, non-linear (models/dti.model: the same Cholesky parameters l11..l33
#      as dki.model, and S0);
#   2. Levenberg-Marquardt on DKI from the tensor, the kurtosis elements from 0.
# OUTDIR gets MD, FA, AD, RD, MK, AK, RK, MKT, V1, S0 (hard links to OUTDIR/dimoc/dki) and PNGs
# of FA and MK.  The tensor of step 1 is biased low by the kurtosis of the high shell (the
# reason to fit DKI), but its axes and scale are a start in the right basin.
set -euo pipefail
sigma=()
own_flag() { # this pipeline's own flags (lib/flags.bash)
    case $1 in
    --sigma) [ $# -ge 2 ] || { echo "dki.sh: --sigma needs a value or a map" >&2; exit 2; }
             sigma=(--voxel "sigma=$2"); taken=2 ;;
    esac
}
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages dki
echo "dki.sh: tensor"
$dimoc fit dti "${common[@]}" --out "$stages/dti" --method lm --out-type float64 "${fitopts[@]}"
echo "dki.sh: kurtosis"
$dimoc fit dki "${common[@]}" --out "$stages/dki" --method lm --init-from "$stages/dti" \
    ${sigma[@]+"${sigma[@]}"} "${fitopts[@]}"

finish() { # the links and pictures, after the last stage (lib/flags.bash)
    link_maps "$stages/dki" "$out" MD FA AD RD MK AK RK MKT V1 S0 BIC AIC
    for m in FA MK; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    wait_background
    echo "dki.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
