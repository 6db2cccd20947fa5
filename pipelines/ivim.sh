#!/usr/bin/env bash
# IVIM (models/ivim.model): S = S0 (f exp(-b D*) + (1 - f) exp(-b D)).
#
# usage: dimoc pipeline ivim --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [fit options]
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. a grid search over f, D and D* (S0 from the mean b=0 signal): 9 x 12 x 9 points that
#      span the bounds' plausible part, so that LM starts in the right basin of the
#      bi-exponential (the two exponentials can trade places in a local fit otherwise);
#   2. Levenberg-Marquardt on all four parameters.
# DIPY's 'trr' starts from segmented linear fits (D from b > 400, then f and D*); a grid does
# the same job without choosing split b-values, which depend on the scheme.  The intermediate
# maps are float64 so that values at a bound stay inside it.  OUTDIR gets S0, f, D, Dstar
# (hard links to OUTDIR/dimoc/final) and a PNG of f and of D.
set -euo pipefail
own_flag() { :; } # no flags of its own (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages ivim
cascade grid --method grid --out-type float64 \
    --grid f=0.01,0.03,0.06,0.1,0.15,0.2,0.25,0.3,0.38 \
    --grid D=0.2e-3:0.2e-3:2.4e-3 \
    --grid Dstar=6e-3,9e-3,13e-3,18e-3,25e-3,35e-3,50e-3,80e-3,150e-3 \
    --then final --method lm

finish() { # the links and pictures, after the last stage (lib/flags.bash)
    link_maps "$stages/final" "$out" S0 f D Dstar BIC AIC
    for m in f D; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    wait_background
    echo "ivim.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
