#!/usr/bin/env bash
# Stick, zeppelin and ball with dimoc (models/stick_zeppelin_ball.model), tortuous zeppelin.
#
# usage: dimoc pipeline stick_zeppelin_ball --data DWI --mask MASK --bvals BVALS --bvecs BVECS --out DIR [--mcmc] [fit options]
# options:
#   --mcmc                MCMC after the last stage's LM (--method lm,mcmc): posterior means and _sd maps
# fit options: every 'dimoc fit' option but --method --grid --fixed --init --init-from --out-type
#
#   1. the orientation: th, ph of the principal axis of a tensor fit of the voxel's signal
#      (the model's `init from theta(1)` and `phi(1)`: dimoc dti's linear fit, made in the
#      first stage's process, where the data are read once, instead of a separate command);
#   2. a grid search over f_ic, f_iso and d_par, the orientation held, S0 the mean b=0 signal;
#   3. Levenberg-Marquardt on all the parameters (then MCMC with --mcmc).
# dimoc's outputs stay in OUTDIR/dimoc/STAGE/; OUTDIR gets the final f_ic, f_iso, f_ec, d_par,
# d_perp (the zeppelin's, by tortuosity), dyads1 and S0 as hard links, BIC and AIC when --ic
# is among the fit options, and quick-look PNGs.
set -euo pipefail
own_flag() { mcmc_flag "$1"; } # this pipeline's own flag, --mcmc (lib/flags.bash)
. "$(dirname "${BASH_SOURCE[0]}")/lib/flags.bash"
pipeline_flags "$@"
pipeline_stages stick_zeppelin_ball

# 1-3. The tensor's orientation, the grid, everything: one `dimoc fit` (lib/flags.bash).
cascade grid --method grid --fixed th,ph --out-type float64 \
    --grid f_ic=0.1:0.1:0.9 --grid f_iso=0,0.1,0.2,0.4,0.7 \
    --grid d_par=1.1e-3,1.5e-3,1.9e-3,2.4e-3 \
    --then final "${last[@]}"

finish() { # the links and pictures, after every stage (lib/flags.bash)
    final=$stages/final
    link_maps "$final" "$out" f_ic f_iso f_ec d_par d_perp dyads1 S0 BIC AIC
    for m in f_ic f_iso d_par; do
        picture "$out/$m$ext" -o "$out/$m.png"
    done
    picture --rgb-from "$out/dyads1$ext" --weight "$out/f_ic$ext" \
        -o "$out/dyads1.png"
    wait_background
    echo "stick_zeppelin_ball.sh: maps and PNGs in $out, every stage in $stages"
}
pipeline_finish finish
