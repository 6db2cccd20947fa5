#!/usr/bin/env bash
# Ball & one racket with dimoc, the cascade of thesis section 5.5.3.
#
# usage: dimoc pipeline ball_1_racket --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--mcmc] [fit options]
# options:
#   --mcmc                MCMC after the last stage's LM (--method lm,mcmc): posterior means and _sd maps
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. the orientation from a tensor fit: dimoc dti's V1 as th, ph and its V2, perpendicular
#      to V1, as the fanning direction psi (dimoc angles; separate commands, as the model
#      language has no tensor start for psi: `init from` knows b0, md, theta(K), phi(K));
#   2. a grid search over fiso, d, kappa1 >= kappa2 (kappa2's values just below kappa1's and
#      kappa1's least 1.2, as in noddi_bingham.sh), the orientation held, S0 the mean b=0 signal;
#   3. Levenberg-Marquardt with th and ph held;
#   4. Levenberg-Marquardt on all the parameters (then MCMC with --mcmc).
# dimoc's outputs stay in OUTDIR/dimoc/STAGE/; OUTDIR gets the final fiso, d, kappa1, kappa2,
# ODItot, DA, dyads1 (the mean orientation), fanning (the fanning direction) and S0 as hard
# links (copies where links are impossible), BIC and AIC when --ic is among the fit options,
# and quick-look PNGs.
set -euo pipefail
own_flag() { mcmc_flag "$1"; } # this pipeline's own flag, --mcmc (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages ball_1_racket

# 1. The orientation and the fanning direction.
$dimoc dti "${common[@]}" --out "$stages/dti" >/dev/null
$dimoc angles "$stages/dti/V1$ext" --fanning "$stages/dti/V2$ext" --out "$stages/angles" "${fmtopts[@]}"
# 2-4. The grid, the fit with the orientation held, everything.
cascade grid --method grid --init-from "$stages/angles" --fixed th,ph,psi --out-type float64 \
    --grid fiso=0,0.1,0.2,0.3,0.5,0.7 --grid d=0.8e-3,1.2e-3,1.7e-3,2.4e-3 \
    --grid kappa1=1.2,2,4,8,16,32,63 --grid kappa2=0.5,0.9,1.8,3.6,7,14,28,56 \
    --then oriented --method lm --fixed th,ph --out-type float64 \
    --then final "${last[@]}"

finish() { # the links and pictures, after every stage (lib/flags.bash)
    final=$stages/final
    link_maps "$final" "$out" fiso d kappa1 kappa2 ODItot DA dyads1 fanning S0 BIC AIC
    for m in fiso d ODItot DA; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    picture --rgb-from "$out/dyads1$ext" -o "$out/dyads1.png"
    picture --rgb-from "$out/fanning$ext" --weight "$out/DA$ext" \
        -o "$out/fanning.png"
    wait_background
    echo "ball_1_racket.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
